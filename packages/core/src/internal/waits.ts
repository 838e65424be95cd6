/**
 * A middleware's wait at the run's boundaries: the request a hook interrupts
 * with is encoded with its `wait.request` schema before it is stored; a
 * decision is checked against `wait.decision` (and the wait's `check`)
 * before a resumed run starts, and given to the hook decoded.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { CheckpointError, describeParseError, InvalidHookResult, InvalidResume } from "../AgentError.js"
import type * as Middleware from "../Middleware.js"
import * as Secrets from "../Secrets.js"
import * as PersonAnswer from "./personAnswer.js"

/** The longest description of a refused value: a huge value is not quoted whole (nor scrubbed whole after). */
const maxReason = 2_000

const bounded = (text: string) => text.length <= maxReason ? text : `${text.slice(0, maxReason)}… (cut)`

/** What `schema` refused; a value too deep to describe (or whose reading throws) is named by the schema alone. */
const formatParseError = (schema: Schema.Schema<any, any>, error: ParseResult.ParseError) => {
  try {
    return bounded(describeParseError(error))
  } catch (thrown) {
    return bounded(`Expected ${String(schema.ast)}; the value given could not be described: ${describe(thrown)}`)
  }
}

const describe = (thrown: unknown) => {
  try {
    return thrown instanceof Error ? thrown.message : String(thrown)
  } catch {
    return "(unreadable)"
  }
}

/**
 * `value` encoded or decoded with `schema`, a refusal described by `refused` (credentials it quotes scrubbed:
 * not every caller is a run, whose failures are): a value whose reading throws (a getter, a proxy's trap,
 * nesting too deep for the parser) is refused too, instead of failing as a defect.
 */
const parsed = <E>(
  schema: Schema.Schema<any, any>,
  direction: "encode" | "decode",
  value: unknown,
  refused: (reason: string) => E
): Effect.Effect<unknown, E> =>
  guarded(schema, () => (direction === "encode" ? Schema.encodeUnknown : Schema.decodeUnknown)(schema)(value), refused)

/** The parse `parse` of `schema`, refused as {@link parsed} describes. */
const guarded = <A, E>(
  schema: Schema.Schema<any, any>,
  parse: () => Effect.Effect<A, ParseResult.ParseError>,
  refused: (reason: string) => E
): Effect.Effect<A, E> =>
  Effect.suspend(parse).pipe(
    Effect.mapError((error) => refused(Secrets.scrubText(formatParseError(schema, error)))),
    Effect.catchAllDefect((thrown) =>
      Effect.fail(refused(Secrets.scrubText(bounded(`reading it threw: ${describe(thrown)}`))))
    )
  )

/**
 * The request a hook of `m` interrupted with, encoded for storage (as JSON keeps it); a middleware with no wait
 * cannot interrupt.
 */
export const encodeRequest = (
  m: Middleware.Any,
  hook: string,
  request: unknown
): Effect.Effect<unknown, InvalidHookResult> =>
  m.wait === undefined
    ? Effect.fail(
      new InvalidHookResult({
        middleware: m.name,
        hook,
        reason: "interrupted, but the middleware declares no wait (Middleware.make({ wait: { request, decision } }))"
      })
    )
    : parsed(m.wait.request, "encode", request, (reason) =>
      new InvalidHookResult({
        middleware: m.name,
        hook,
        reason: `interrupted with a request its wait's request schema refuses: ${reason}`
      })).pipe(
        // stored as every store keeps it, JSON (the in-memory store too): one JSON cannot write fails here
        Effect.flatMap((encoded) =>
          asJson(encoded, (reason) =>
            new InvalidHookResult({
              middleware: m.name,
              hook,
              reason: `interrupted with a request that does not encode as JSON: ${reason}`
            }))
        )
      )

/** `encoded` as JSON keeps it (what a store or a durable journal gives back), or why JSON cannot write it. */
const asJson = <E>(encoded: unknown, refused: (reason: string) => E): Effect.Effect<unknown, E> =>
  Effect.try({
    try: () => encoded === undefined ? undefined : JSON.parse(JSON.stringify(encoded)) as unknown,
    catch: (thrown) => refused(describe(thrown))
  })

/**
 * Checks the decision `value` a caller gives for the wait of `m` that the
 * thread stops at (`stored`: its request as stored): it must encode with the
 * wait's decision schema, and pass the wait's check. Gives the decision
 * encoded (what a durable journal stores) and decoded (what the hook gets).
 * `asPosted`: the encoded decision is taken as JSON keeps it, and that copy
 * is decoded and checked, as a durable run will (`validateResume`).
 */
export const checkDecision = (
  m: Middleware.Any,
  threadId: string,
  stored: unknown,
  value: unknown,
  asPosted = false
): Effect.Effect<Checked, unknown, any> =>
  Effect.gen(function*() {
    const wait = yield* waitOf(m, threadId)
    const refused = (reason: string) => new InvalidResume({ threadId, middleware: m.name, reason })
    const given = yield* parsed(wait.decision, "encode", value, refused)
    const encoded = asPosted
      ? yield* asJson(given, (reason) => refused(`the decision does not encode as JSON: ${reason}`))
      : given
    return { encoded, ...yield* checked(m, wait, threadId, stored, encoded) }
  })

/** A decision checked: encoded (what a durable journal stores), decoded (what the hook gets), and its request. */
export interface Checked {
  readonly encoded: unknown
  readonly decision: unknown
  /** The request the decision answers, decoded (when the wait has a check or names a person's texts). */
  readonly request?: unknown
}

type Transform<E, R> = (messages: ReadonlyArray<Prompt.Message>) => Effect.Effect<ReadonlyArray<Prompt.Message>, E, R>

/**
 * The checked decision (decoded) with the texts a person typed in it (its
 * wait's `personTexts`) passed through `transform` (the agent's
 * `transformInput` hooks); `None` when the wait names no text in it.
 */
const throughInput = <E, R>(
  m: Middleware.Any,
  checked: Checked,
  transform: Transform<E, R>
): Effect.Effect<Option.Option<unknown>, unknown, R> =>
  Effect.gen(function*() {
    const personTexts = m.wait?.personTexts
    if (personTexts === undefined) return Option.none()
    const typed: Array<string> = []
    personTexts(checked.decision, (text) => (typed.push(text), text), checked.request)
    if (typed.length === 0) return Option.none()
    const texts = yield* PersonAnswer.throughInput(typed, m.name, "wait.personTexts", transform)
    return Option.some(personTexts(checked.decision, () => texts.shift()!, checked.request))
  })

/**
 * A decision checked as posted (`checkDecision` with `asPosted`), with the
 * texts a person typed in it (its wait's `personTexts`) passed through
 * `transform` (the agent's `transformInput` hooks) and encoded again: what a
 * durable journal stores. The encoded decision as it was when the wait names
 * no text in it.
 */
export const withPersonTexts = <E, R>(
  m: Middleware.Any,
  threadId: string,
  checked: Checked,
  transform: Transform<E, R>
): Effect.Effect<unknown, unknown, R> =>
  Effect.map(postedWithPersonTexts(m, threadId, checked, transform), (d) => d.encoded)

/**
 * {@link withPersonTexts} with the decision the hook takes: the texts a
 * person typed passed through `transform` once, given both encoded (what a
 * journal stores) and decoded (what the hook gets).
 */
export const postedWithPersonTexts = <E, R>(
  m: Middleware.Any,
  threadId: string,
  checked: Checked,
  transform: Transform<E, R>
): Effect.Effect<{ readonly encoded: unknown; readonly decision: unknown }, unknown, R> =>
  Effect.gen(function*() {
    const redacted = yield* throughInput(m, checked, transform)
    if (Option.isNone(redacted)) return { encoded: checked.encoded, decision: checked.decision }
    const refused = (reason: string) =>
      new InvalidResume({
        threadId,
        middleware: m.name,
        reason: `the decision with a person's texts checked ${reason}`
      })
    const given = yield* parsed(
      m.wait!.decision,
      "encode",
      redacted.value,
      (reason) => refused(`does not encode: ${reason}`)
    )
    const encoded = yield* asJson(given, (reason) => refused(`does not encode as JSON: ${reason}`))
    return { encoded, decision: redacted.value }
  })

/**
 * The decision a resumed hook takes in process: the checked decision
 * (decoded) with the texts a person typed in it passed through `transform`,
 * as `validateResume` gives a durable run's (the hook writes them, or hands
 * them to the agents it forwards the decision to, redacted).
 */
export const resumedDecision = <E, R>(
  m: Middleware.Any,
  checked: Checked,
  transform: Transform<E, R>
): Effect.Effect<unknown, unknown, R> =>
  Effect.map(throughInput(m, checked, transform), Option.getOrElse(() => checked.decision))

/**
 * The decision a durable journal delivers (`encoded`, as it was posted),
 * decoded with the wait's decision schema and checked like one given to
 * `resume`.
 */
export const decodeDecision = (
  m: Middleware.Any,
  threadId: string,
  stored: unknown,
  encoded: unknown
): Effect.Effect<unknown, unknown, any> =>
  Effect.flatMap(
    waitOf(m, threadId),
    (wait) => Effect.map(checked(m, wait, threadId, stored, encoded), (c) => c.decision)
  )

/**
 * The decision a journal's `await` delivers (decoded with the wait's
 * decision schema), checked like one given to `resume`: it must be of the
 * schema's type (a journal that gives something else fails the run with
 * `InvalidResume`, and the hook does not run), then pass the wait's check.
 */
export const checkDelivered = (
  m: Middleware.Any,
  threadId: string,
  stored: unknown,
  decision: unknown
): Effect.Effect<unknown, unknown, any> =>
  Effect.gen(function*() {
    const wait = yield* waitOf(m, threadId)
    const typed = yield* parsed(Schema.typeSchema(wait.decision), "decode", decision, (reason) =>
      new InvalidResume({
        threadId,
        middleware: m.name,
        reason: `the journal delivered a decision that is not of the wait's decision type: ${reason}`
      }))
    return (yield* checkedDecoded(m, wait, threadId, stored, typed)).decision
  })

/**
 * A decision as a store keeps it (`posted`), decoded with `schema`; a refusal
 * (or a value whose reading throws) described by `refused`, scrubbed.
 */
export const decodePosted = <A, E>(
  schema: Schema.Schema<A, any>,
  posted: unknown,
  refused: (reason: string) => E
): Effect.Effect<A, E> => guarded(schema, () => Schema.decodeUnknown(schema)(posted), refused)

const waitOf = (m: Middleware.Any, threadId: string) =>
  m.wait === undefined
    ? Effect.fail(
      new InvalidResume({ threadId, middleware: m.name, reason: "the middleware declares no wait: nothing answers it" })
    )
    : Effect.succeed(m.wait)

const checked = (
  m: Middleware.Any,
  wait: NonNullable<Middleware.Any["wait"]>,
  threadId: string,
  stored: unknown,
  encoded: unknown
) =>
  Effect.flatMap(
    parsed(wait.decision, "decode", encoded, (reason) => new InvalidResume({ threadId, middleware: m.name, reason })),
    (decision) => checkedDecoded(m, wait, threadId, stored, decision)
  )

/** A decoded decision checked against the request it answers (the wait's `check`), with that request. */
const checkedDecoded = (
  m: Middleware.Any,
  wait: NonNullable<Middleware.Any["wait"]>,
  threadId: string,
  stored: unknown,
  decision: unknown
) =>
  Effect.gen(function*() {
    if (wait.check === undefined) {
      // what a person typed is named by the request too (a wait that forwards decisions: SubAgents)
      return { decision, request: wait.personTexts === undefined ? undefined : decodedRequest(wait, stored) }
    }
    const request = yield* parsed(wait.request, "decode", stored, (reason) =>
      new InvalidResume({
        threadId,
        middleware: m.name,
        reason: `the request the thread waits on does not decode with the wait's request schema: ${reason}`
      }))
    yield* wait.check({ threadId, request, decision })
    return { decision, request }
  })

/** The stored request decoded with the wait's request schema, or `undefined` when it does not decode. */
const decodedRequest = (wait: NonNullable<Middleware.Any["wait"]>, stored: unknown): unknown => {
  try {
    return Option.getOrUndefined(Schema.decodeUnknownOption(wait.request)(stored))
  } catch {
    return undefined // a schema whose reading throws
  }
}

/**
 * The decision `value` for the wait of `m` that asked `request` (as stored)
 * with each text a person typed in it replaced by `replace` (the wait's
 * `personTexts`); as it is when the wait names none (`Agent.personTexts`).
 */
export const personTextsOf = (
  m: Middleware.Any | undefined,
  request: unknown,
  value: unknown,
  replace: (text: string) => string
): unknown => {
  const wait = m?.wait
  return wait?.personTexts === undefined ? value : wait.personTexts(value, replace, decodedRequest(wait, request))
}

/**
 * The request a thread waits on, as stored (`value`), decoded with the wait
 * of `m` (the middleware that waits); as stored when the agent no longer has
 * that middleware or it declares no wait. A stored request its schema
 * refuses is a `CheckpointError`.
 */
export const decodeStoredRequest = (
  m: Middleware.Any | undefined,
  threadId: string,
  value: unknown
): Effect.Effect<unknown, CheckpointError> =>
  m?.wait === undefined ?
    Effect.succeed(value) :
    parsed(m.wait.request, "decode", value, (reason) =>
      new CheckpointError({
        threadId,
        operation: "load",
        reason:
          `the request of middleware "${m.name}" it waits on does not decode with its wait's request schema: ${reason}`
      }))
