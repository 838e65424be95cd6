/**
 * The agent inspector: a local web page, served by the library, that shows
 * an agent's runs as they happen (model calls, what each middleware did and
 * why, tool calls, live text, the todo list, token counts) and lets a person
 * answer the approvals a run waits for, start a run, and fork a thread from
 * one of its steps with an edit.
 *
 * `Inspector.layer()` attaches it to the `Agent` of the context (or
 * `Inspector.make(agent)` to any agent service) and serves it with
 * `@effect/platform`'s HTTP server on Node. Safe by default: it binds
 * 127.0.0.1, and every route — the page, its files, the event stream, the
 * API — answers 401 without the random access token carried by the printed
 * URL. The server stops with the layer's scope.
 *
 * @since 0.1.0
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Agent from "@stepwise-agent/core/Agent"
import * as Checkpointer from "@stepwise-agent/core/Checkpointer"
import * as Fork from "@stepwise-agent/core/Fork"
import * as HttpConnection from "@stepwise-agent/core/HttpConnection"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import * as Assets from "./internal/assets.js"
import * as EventLog from "./internal/eventLog.js"
import * as Guard from "./internal/guard.js"
import { keysOf, unknownKey } from "./internal/options.js"
import * as Wire from "./internal/wire.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * Options of {@link make} and {@link layer}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The port to listen on (default 0: one the system picks; read it from the service's `url`). */
  readonly port?: number | undefined
  /**
   * The address to bind (default `"127.0.0.1"`: only this machine can
   * connect). Binding another address lets other machines reach the page;
   * they still need the token.
   */
  readonly host?: string | undefined
  /**
   * How many events (and thread summaries) the inspector keeps for pages
   * that open later (default 100,000; the oldest go first).
   */
  readonly maxEvents?: number | undefined
  /**
   * How an accepted decision continues its thread (default: the agent's
   * `resumeStream`). For durable runs, pass one that hands the decision to
   * the run's workflow, e.g. `AgentWorkflow.resume` of the thread's latest run:
   * without it, a decision for a durable run's wait is refused (`409`,
   * `DurableThreadError`) and nothing runs.
   */
  readonly resume?: ((threadId: string, value: unknown) => Effect.Effect<void, unknown>) | undefined
  /**
   * More names the page may be reached by (the `Host` header's name, port
   * aside), e.g. the machine's name when `host` is `"0.0.0.0"`. Always
   * allowed: `127.0.0.1`, `localhost`, `[::1]` and `host`; requests naming
   * another host are refused (421), against DNS rebinding.
   */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  /**
   * The largest request body accepted, in bytes (default 1 MiB); a larger
   * one is refused (413) without being kept.
   */
  readonly maxBodyBytes?: number | undefined
  /**
   * The longest a request's whole body may take to arrive (default 30
   * seconds, at most 24 days); a body still coming then is refused (408)
   * and the connection closed.
   */
  readonly bodyTimeout?: Duration.DurationInput | undefined
  /**
   * The threads stored before the inspector started, a page at a time, for
   * its list of stored threads (default: the `list` of the `Checkpointer`
   * in the context, when it has one). For durable runs, list the threads of
   * the run store's runs (`RunStore.list`).
   */
  readonly storedThreads?:
    | ((options: Checkpointer.ListOptions) => Effect.Effect<Checkpointer.ThreadPage, unknown>)
    | undefined
  /**
   * How many model requests (with the state each call saw) the inspector
   * keeps for the page, the latest ones (default 500; the oldest go first).
   * They are kept as the run has them, and encoded when the page asks.
   */
  readonly maxRequests?: number | undefined
}

const optionKeys = keysOf<Options>({
  port: true,
  host: true,
  maxEvents: true,
  resume: true,
  allowedHosts: true,
  maxBodyBytes: true,
  bodyTimeout: true,
  storedThreads: true,
  maxRequests: true
})

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * The inspector could not start: the port is taken, the address cannot be
 * bound, the page's files are missing, or an option is wrong (a key it does
 * not know included, named in `reason`).
 *
 * @since 0.1.0
 * @category errors
 */
export class InspectorError extends Schema.TaggedError<InspectorError>(
  "@stepwise-agent/inspector/Inspector/InspectorError"
)("InspectorError", {
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The agent inspector could not start: ${this.reason}`
  }
}

// -----------------------------------------------------------------------------
// tags
// -----------------------------------------------------------------------------

/**
 * A running inspector.
 *
 * @since 0.1.0
 * @category tags
 */
export class Inspector extends Context.Tag("@stepwise-agent/inspector/Inspector")<Inspector, Inspector.Service>() {}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace Inspector {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** The page's address, carrying the access token: open it in a browser. */
    readonly url: string
    /** The address the server is bound to. */
    readonly host: string
    /** The port the server listens on (the system's pick when the option was 0). */
    readonly port: number
  }
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

const securityHeaders = {
  "cache-control": "no-store",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

const json = (status: number, body: unknown) =>
  HttpServerResponse.text(Wire.stringify(body), { status, contentType: "application/json; charset=utf-8" })

const sameToken = (expected: Buffer, given: string | null | undefined): boolean => {
  if (given === null || given === undefined) return false
  const buffer = Buffer.from(given)
  return buffer.length === expected.length && Crypto.timingSafeEqual(buffer, expected)
}

const errorOf = (
  cause: Cause.Cause<unknown>
): { readonly error: string; readonly reason?: string; readonly message: string } => {
  if (Cause.isInterruptedOnly(cause)) return { error: "Interrupted", message: "the run was interrupted" }
  const error = Cause.squash(cause)
  const tag = typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "Defect"
  const reason = Predicate.hasProperty(error, "reason") ? kindOf(error.reason) : undefined
  return { error: tag, ...(reason === undefined ? {} : { reason }), message: Secrets.messageOf(error) }
}

/** A domain error's `reason` when it is a kind (a literal such as `"Stale"`), not free text. */
const kindOf = (reason: unknown): string | undefined =>
  typeof reason === "string" && /^[A-Z][A-Za-z0-9]*$/.test(Secrets.scrubText(reason)) ? reason : undefined

const ResumeBody = Schema.Struct({
  /** The key of the wait the decision is for, as the page got it. */
  key: Schema.String,
  value: Schema.Unknown
})

/** A message typed into the page's message box, for `Agent.send`. */
const SendBody = Schema.Struct({
  message: Schema.String.pipe(Schema.minLength(1)),
  mode: Schema.optional(Schema.Literal("steer", "queue"))
})

/**
 * The page's fork of a thread (`Agent.fork`): the new thread `to`, the model
 * step `at` to fork before, and an optional edit (a message typed in, or the
 * result of a tool call before that step replaced, or the decision of a
 * thread forked where it waits).
 */
const ForkBody = Schema.Struct({
  to: Schema.String.pipe(Schema.minLength(1)),
  at: Schema.Int.pipe(Schema.nonNegative()),
  edit: Schema.optionalWith(
    Schema.Union(
      Schema.TaggedStruct("Message", { message: Schema.String.pipe(Schema.minLength(1)) }),
      Schema.TaggedStruct("ToolResult", {
        callId: Schema.String.pipe(Schema.minLength(1)),
        result: Schema.Unknown,
        isFailure: Schema.optionalWith(Schema.Boolean, { exact: true })
      }),
      Schema.TaggedStruct("Decision", { decision: Schema.Unknown })
    ),
    { exact: true }
  )
})

/** What was wrong with a body, each issue with where it is (`edit.message: Expected …`). */
const describeIssues = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => `${issue.path.length === 0 ? "the body" : issue.path.join(".")}: ${issue.message}`)
    .join("; ")

/** A refusal of a decision made for another wait than the one it answers (`409` for a fork's decision). */
const isStale = (refused: ReturnType<typeof errorOf>): boolean =>
  refused.error === "DecisionError" && refused.reason === "Stale"

/** The HTTP status of a fork that cannot start, by its reason. */
const forkStatus: Record<Fork.ForkError["reason"], number> = {
  NoSuchThread: 404,
  ThreadExists: 409,
  NoSuchStep: 422,
  NoSuchToolCall: 422,
  InvalidToolResult: 422,
  Waiting: 422,
  NotWaiting: 422
}

type Outcome =
  | { readonly _tag: "Resumed" }
  | { readonly _tag: "NotFound"; readonly message: string }
  | { readonly _tag: "AlreadyDecided"; readonly message: string }
  | { readonly _tag: "Durable"; readonly message: string }
  | { readonly _tag: "Rejected"; readonly error: string; readonly reason?: string; readonly message: string }

const resumed: Outcome = { _tag: "Resumed" }

const alreadyDecided = (threadId: string): Outcome => ({
  _tag: "AlreadyDecided",
  message: `Already decided: thread "${threadId}" no longer waits for this decision (another tab or client ` +
    `answered it)`
})

/** The errors that say another tab, client or process answered the wait first. */
const decidedElsewhere = new Set(["ThreadStateError", "AlreadyDecided"])

/**
 * Starts an inspector for `agent`: follows its runs (from now on) through
 * `agent.watch`, and serves the page until the scope closes. Closing the
 * scope ends the pages' event streams (after they received every event)
 * and closes the server.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Inspector } from "@stepwise-agent/inspector"
 * import { Console, Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({ systemPrompt: "Be brief." })
 *   const inspector = yield* Inspector.make(agent)
 *   yield* Console.log(`Inspector: ${inspector.url}`)
 *   yield* agent.run("hello", { threadId: "t1" })
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (
  agent: Agent.Service<any, any>,
  options?: Options | undefined
) => Effect.Effect<Inspector.Service, InspectorError, Scope.Scope> = Effect.fn("Inspector.make")(
  function*(agent: Agent.Service<any, any>, options?: Options | undefined) {
    if (options !== undefined && !Predicate.isObject(options)) {
      return yield* new InspectorError({
        reason: `the options must be an object, got ${Secrets.describeValue(options)}`
      })
    }
    const unknown = unknownKey("Inspector", options, optionKeys)
    if (unknown !== undefined) {
      return yield* new InspectorError({ reason: `the option ${JSON.stringify(unknown.option)} ${unknown.reason}` })
    }
    const host: unknown = options?.host ?? "127.0.0.1"
    if (typeof host !== "string" || host.length === 0) {
      return yield* new InspectorError({
        reason: `host must be a non-empty string, got ${Secrets.describeValue(host)}`
      })
    }
    const listenOn: unknown = options?.port ?? 0
    if (typeof listenOn !== "number" || !Number.isInteger(listenOn) || listenOn < 0 || listenOn > 65535) {
      return yield* new InspectorError({
        reason: `port must be a whole number from 0 to 65535, got ${Secrets.describeValue(listenOn)}`
      })
    }
    const maxEvents = options?.maxEvents ?? 100_000
    if (!Number.isInteger(maxEvents) || maxEvents < 1) {
      return yield* new InspectorError({
        reason: `maxEvents must be a whole number of at least 1, got ${Secrets.describeValue(maxEvents)}`
      })
    }
    const maxBodyBytes = options?.maxBodyBytes ?? 1024 * 1024
    if (!Number.isInteger(maxBodyBytes) || maxBodyBytes < 1) {
      return yield* new InspectorError({
        reason: `maxBodyBytes must be a whole number of at least 1, got ${Secrets.describeValue(maxBodyBytes)}`
      })
    }
    const bodyTimeout = options?.bodyTimeout === undefined
      ? Option.some(Duration.seconds(30))
      : Duration.decodeUnknown(options.bodyTimeout)
    // a timer set for longer than 24 days fires at once
    if (
      Option.isNone(bodyTimeout) || !Duration.greaterThan(bodyTimeout.value, Duration.zero) ||
      Duration.greaterThan(bodyTimeout.value, Duration.days(24))
    ) {
      return yield* new InspectorError({
        reason: `bodyTimeout must be a duration above zero, at most 24 days, got ${
          typeof options?.bodyTimeout === "string"
            ? options.bodyTimeout.slice(0, 80)
            : Secrets.describeValue(options?.bodyTimeout)
        }`
      })
    }
    const bodyTimeoutMillis = Duration.toMillis(bodyTimeout.value)
    const allowedHosts: unknown = options?.allowedHosts ?? []
    if (!Array.isArray(allowedHosts)) {
      return yield* new InspectorError({
        reason: `allowedHosts must be an array of host names, got ${Secrets.describeValue(allowedHosts)}`
      })
    }
    const notName: unknown = allowedHosts.find((name) => typeof name !== "string" || !Guard.isHostName(name))
    if (notName !== undefined) {
      return yield* new InspectorError({
        reason: `allowedHosts holds ${
          typeof notName === "string" ? JSON.stringify(notName.slice(0, 200)) : Secrets.describeValue(notName)
        }, which is not a host name or address without a port`
      })
    }
    const hostNames = Guard.hostNames(host, allowedHosts)
    const assets = yield* Effect.mapError(Assets.load, (reason) => new InspectorError({ reason }))
    const token = Crypto.randomBytes(24).toString("base64url")
    const expected = Buffer.from(token)
    const page = assets.page.replaceAll("%TOKEN%", token)
    const log = yield* EventLog.make(maxEvents)
    const maxRequests = options?.maxRequests ?? 500
    if (!Number.isInteger(maxRequests) || maxRequests < 0) {
      return yield* new InspectorError({
        reason: `maxRequests must be a whole number of at least 0, got ${Secrets.describeValue(maxRequests)}`
      })
    }
    const storedThreads = options?.storedThreads ?? Option.getOrUndefined(Option.flatMap(
      yield* Effect.serviceOption(Checkpointer.Checkpointer),
      (checkpointer) =>
        Option.map(
          Option.fromNullable(checkpointer.list),
          (list) => (page: Checkpointer.ListOptions) => list(page)
        )
    ))
    /** The latest model requests by `<runId>/<step>`, as the run reported them (encoded when asked for). */
    const requests = new Map<string, Wire.RequestSent>()

    // -- following the runs ---------------------------------------------------

    const running = new Map<string, Set<string>>()
    const failures = new Map<string, { readonly error: string; readonly message: string }>()
    const published = new Map<string, string>()

    const refresh = (threadId: string) =>
      agent.thread(threadId).pipe(
        Effect.flatMap((snapshot) => {
          const info = Wire.threadInfo(
            threadId,
            snapshot,
            (running.get(threadId)?.size ?? 0) > 0,
            failures.get(threadId) ?? null
          )
          const encoded = Wire.stringify(info)
          if (published.get(threadId) === encoded) return Effect.void
          published.set(threadId, encoded)
          return log.append({ type: "thread", thread: info })
        }),
        Effect.catchAllCause((cause) => Effect.logWarning(`Inspector: cannot read thread "${threadId}"`, cause))
      )

    /**
     * The forks from the page waiting for their run to start, by target thread: none once started. A fork
     * with a decision has started once its resumed run starts, past the check of its decision.
     */
    const forking = new Map<
      string,
      { readonly outcome: Deferred.Deferred<Option.Option<Cause.Cause<unknown>>>; readonly decision: boolean }
    >()

    const follow = ({ event, runId, threadId }: Agent.RunEvent<any>) =>
      Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        const fork = forking.get(threadId)
        if (event._tag === "RunStarted" && fork !== undefined && (!fork.decision || event.resumed)) {
          yield* Deferred.succeed(fork.outcome, Option.none())
        }
        const page = Wire.event(event)
        if (event._tag === "ModelRequestSent" && maxRequests > 0) {
          const key = `${runId}/${event.step}`
          requests.delete(key)
          requests.set(key, event)
          if (requests.size > maxRequests) requests.delete(requests.keys().next().value!)
        }
        yield* log.append({ type: "event", runId, threadId, at, event: page })
        if (event._tag !== "RunStarted" && event._tag !== "RunEnded" && event._tag !== "RunFailed") return
        let runs = running.get(threadId)
        if (runs === undefined) running.set(threadId, runs = new Set())
        if (event._tag === "RunStarted") {
          runs.add(runId)
          failures.delete(threadId)
        } else {
          runs.delete(runId)
          if (event._tag === "RunFailed") {
            failures.set(threadId, { error: event.error, message: page.message as string })
          }
        }
        yield* refresh(threadId)
      })

    // Watched in a scope of its own: closing it ends the stream after the events already published.
    const watching = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
    const events = yield* Scope.extend(agent.watch, watching)
    const following = yield* events.pipe(Stream.runForEach(follow), Effect.forkScoped)

    // -- decisions --------------------------------------------------------------

    const resumes = yield* FiberSet.make<void>()
    const lock = yield* Effect.makeSemaphore(1)
    const claimed = new Set<string>()

    /**
     * Claims the thread's wait for this decision (refused when it is not the
     * wait the page saw, or another decision is being applied), checks the
     * value, then resumes. Answers once the resumed run got past the check
     * (its first event after `RunStarted`), or failed before.
     */
    const decide = (threadId: string, key: string, value: unknown): Effect.Effect<Outcome> =>
      Effect.gen(function*() {
        const claim = yield* lock.withPermits(1)(Effect.gen(function*() {
          if (claimed.has(threadId)) return Option.some(alreadyDecided(threadId))
          const snapshot = yield* agent.thread(threadId)
          if (Option.isNone(snapshot)) {
            return Option.some<Outcome>({ _tag: "NotFound", message: `No thread "${threadId}"` })
          }
          const pending = Option.flatMap(snapshot, (thread) =>
            Option.map(thread.pending, (interrupt) => ({
              interrupt,
              messageCount: (thread.state as { readonly messages: ReadonlyArray<unknown> }).messages.length
            })))
          if (
            Option.isNone(pending) ||
            Wire.interruptKey(pending.value.interrupt, pending.value.messageCount) !== key
          ) {
            return Option.some(alreadyDecided(threadId))
          }
          const checked = yield* Effect.exit(agent.validateResume(threadId, value))
          if (Exit.isFailure(checked)) {
            const refused = errorOf(checked.cause)
            return Option.some<Outcome>(
              refused.error === "ThreadStateError" ? alreadyDecided(threadId) : { _tag: "Rejected", ...refused }
            )
          }
          claimed.add(threadId)
          return Option.none()
        }))
        if (Option.isSome(claim)) return claim.value
        const outcome = yield* Deferred.make<Outcome>()
        const resume = options?.resume
        yield* (resume === undefined
          ? agent.resumeStream(threadId, value).pipe(
            Stream.runForEach((event) => event._tag === "RunStarted" ? Effect.void : Deferred.succeed(outcome, resumed))
          )
          : resume(threadId, value)).pipe(
            Effect.exit,
            Effect.flatMap((exit) => {
              if (Exit.isSuccess(exit)) return Deferred.succeed(outcome, resumed)
              const refused = errorOf(exit.cause)
              const { error, message } = refused
              // a durable `resume` reports a decision made elsewhere as AlreadyDecided, and a run that
              // moved on (it ended, or waits for something else) as NotWaiting, which says which
              const failed: Outcome = error === "NotWaiting"
                ? { _tag: "AlreadyDecided", message: `Already decided: ${message}` }
                : error === "DurableThreadError"
                // the wait belongs to a durable run, and this inspector has no `resume` to reach it
                ? { _tag: "Durable", message: `${message}; give the inspector a \`resume\` option that does` }
                : decidedElsewhere.has(error)
                ? alreadyDecided(threadId)
                : { _tag: "Rejected", ...refused }
              return Deferred.succeed(outcome, failed)
            }),
            Effect.ensuring(Effect.sync(() => claimed.delete(threadId))),
            // A trace of its own: not a child of whatever span the inspector was started in.
            Effect.withSpan("Inspector.resume", { root: true, attributes: { threadId }, captureStackTrace: false }),
            FiberSet.run(resumes)
          )
        return yield* Deferred.await(outcome)
      }).pipe(
        Effect.catchAllCause((cause) => Effect.succeed<Outcome>({ _tag: "Rejected", ...errorOf(cause) }))
      )

    // -- routes -------------------------------------------------------------------

    const searchParam = (name: string) =>
      Effect.map(HttpServerRequest.ParsedSearchParams, (params) => {
        const value = params[name]
        return typeof value === "string" ? value : undefined
      })

    const threadRoute = Effect.gen(function*() {
      const { threadId = "" } = yield* HttpRouter.params
      const snapshot = yield* agent.thread(threadId)
      if (Option.isNone(snapshot)) return json(404, { error: "NotFound", message: `No thread "${threadId}"` })
      const messages = (snapshot.value.state as { readonly messages: ReadonlyArray<any> }).messages
      const limit = Math.min(Math.max(Number((yield* searchParam("limit")) ?? 100) || 100, 1), 1000)
      const endParam = yield* searchParam("end")
      const end = endParam === undefined
        ? messages.length
        : Math.min(Math.max(Number(endParam) || 0, 0), messages.length)
      const offset = Math.max(0, end - limit)
      return json(200, {
        threadId,
        info: Wire.threadInfo(
          threadId,
          snapshot,
          (running.get(threadId)?.size ?? 0) > 0,
          failures.get(threadId) ?? null
        ),
        messageCount: messages.length,
        offset,
        messages: Wire.messages(messages, offset, end - offset, Wire.compactionOf(snapshot.value.state))
      })
    }).pipe(
      Effect.catchAllCause((cause) => Effect.succeed(json(500, errorOf(cause))))
    )

    const resumeRoute = Effect.gen(function*() {
      const { threadId = "" } = yield* HttpRouter.params
      const body = yield* Effect.either(HttpServerRequest.schemaBodyJson(ResumeBody))
      if (body._tag === "Left") {
        return json(400, { error: "BadRequest", message: "expected a JSON body { key, value }" })
      }
      const outcome = yield* decide(threadId, body.right.key, body.right.value)
      switch (outcome._tag) {
        case "Resumed":
          return json(202, { status: "resumed" })
        case "NotFound":
          return json(404, { error: "NotFound", message: outcome.message })
        case "AlreadyDecided":
          return json(409, { error: "AlreadyDecided", message: outcome.message })
        case "Durable":
          return json(409, { error: "DurableThreadError", message: outcome.message })
        case "Rejected":
          return json(422, {
            error: outcome.error,
            ...(outcome.reason === undefined ? {} : { reason: outcome.reason }),
            message: outcome.message
          })
      }
    })

    // the page's message box: `Agent.send` to the thread (steers a running run, queues, or starts one)
    const sendRoute = Effect.gen(function*() {
      const { threadId = "" } = yield* HttpRouter.params
      const body = yield* Effect.either(HttpServerRequest.schemaBodyJson(SendBody))
      if (body._tag === "Left") {
        return json(400, {
          error: "BadRequest",
          message: "expected a JSON body { message, mode?: \"steer\" | \"queue\" }"
        })
      }
      const sent = yield* agent.send(threadId, body.right.message, { mode: body.right.mode })
      return json(202, { delivery: sent.delivery, mode: sent.mode })
    }).pipe(
      Effect.catchTags({
        InvalidInput: (error) => Effect.succeed(json(422, { error: error._tag, message: error.message })),
        InvalidOptions: (error) => Effect.succeed(json(422, { error: error._tag, message: error.message }))
      }),
      Effect.catchAllCause((cause) => Effect.succeed(json(500, errorOf(cause))))
    )

    // a fork of the thread from one of its steps, with an edit (`Agent.fork`); answers once the fork's run
    // started, or with why it could not start (nothing is written then)
    const forkRoute = Effect.gen(function*() {
      const { threadId = "" } = yield* HttpRouter.params
      const request = yield* HttpServerRequest.HttpServerRequest
      const parsed = yield* Effect.either(request.json)
      const body = Either.flatMap(
        Either.mapLeft(parsed, () => "the body is not JSON"),
        (value) =>
          typeof value !== "object" || value === null || Array.isArray(value)
            ? Either.left(`the body is not a JSON object, got ${Array.isArray(value) ? "an array" : String(value)}`)
            : Either.mapLeft(Schema.decodeUnknownEither(ForkBody)(value, { onExcessProperty: "error" }), describeIssues)
      )
      if (Either.isLeft(body)) {
        return json(400, {
          error: "BadRequest",
          message: `expected a JSON body { to, at, edit? } (edit: { _tag: "Message", message } | ` +
            `{ _tag: "ToolResult", callId, result, isFailure? } | { _tag: "Decision", decision }): ` +
            Secrets.scrubText(body.left)
        })
      }
      const { at, edit, to } = body.right
      const outcome = yield* Deferred.make<Option.Option<Cause.Cause<unknown>>>()
      // checked and claimed in one go: of two forks to one thread from the page, the second is refused here
      if (forking.has(to)) {
        return json(409, {
          error: "ForkError",
          reason: "ThreadExists",
          message: `cannot fork thread "${threadId}": a fork to the thread "${to}" is starting`
        })
      }
      forking.set(to, { outcome, decision: edit?._tag === "Decision" })
      const failure = yield* agent.fork(threadId, { to, at, edit }).pipe(
        Effect.exit,
        Effect.flatMap((exit) =>
          Deferred.succeed(outcome, Exit.isSuccess(exit) ? Option.none() : Option.some(exit.cause))
        ),
        Effect.asVoid,
        // A trace of its own: not a child of whatever span the inspector was started in.
        Effect.withSpan("Inspector.fork", { root: true, attributes: { threadId, to }, captureStackTrace: false }),
        FiberSet.run(resumes),
        Effect.zipRight(Deferred.await(outcome)),
        Effect.ensuring(Effect.sync(() => forking.delete(to)))
      )
      const forked = json(202, { status: "forked", threadId: to })
      if (Option.isNone(failure)) return forked
      const error = Cause.squash(failure.value)
      if (error instanceof Fork.ForkError) {
        return json(forkStatus[error.reason], { error: error._tag, reason: error.reason, message: error.message })
      }
      // a fork that could not start wrote nothing: a written target is a fork whose run failed once it started
      // (before its start reached this page), which the page shows as that run's failure
      if (Option.isSome(yield* Effect.orElseSucceed(agent.thread(to), () => Option.none()))) return forked
      const refused = errorOf(failure.value)
      if (refused.error === "CheckpointError" || refused.error === "Defect") return json(500, refused)
      // a decision the fork's wait refused: one bound to another wait conflicts with it, any other is bad
      if (edit?._tag === "Decision") return json(isStale(refused) ? 409 : 400, refused)
      return json(422, refused)
    }).pipe(
      Effect.catchAllCause((cause) => Effect.succeed(json(500, errorOf(cause))))
    )

    // the threads stored before the inspector started, a page at a time
    const storedRoute = Effect.gen(function*() {
      if (storedThreads === undefined) {
        return json(501, {
          error: "NotAvailable",
          message: "no listing of stored threads: give the inspector a storedThreads option, or a Checkpointer " +
            "with list"
        })
      }
      const limitParam = yield* searchParam("limit")
      const limit = limitParam === undefined ? 50 : Number(limitParam)
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
        return json(400, {
          error: "BadRequest",
          message: `limit must be a whole number from 1 to 1000, got "${limitParam}"`
        })
      }
      const cursor = yield* searchParam("cursor")
      const page = yield* storedThreads({ cursor, limit })
      return json(200, { threadIds: page.threadIds, next: page.next ?? null })
    }).pipe(
      Effect.catchAllCause((cause) => Effect.succeed(json(500, errorOf(cause))))
    )

    // a model call's request as sent, and the state the call saw, while the inspector keeps it
    const requestRoute = Effect.gen(function*() {
      const { runId = "", step = "" } = yield* HttpRouter.params
      const event = requests.get(`${runId}/${step}`)
      if (event === undefined) {
        return json(404, {
          error: "NotFound",
          message: `The request of step ${step} of run "${runId}" is not kept (the inspector keeps the latest ` +
            `${maxRequests}, of the runs it watched)`
        })
      }
      return json(200, Wire.request(event))
    })

    const eventsRoute = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const after = Number(request.headers["last-event-id"] ?? (yield* searchParam("after")) ?? 0)
      return HttpServerResponse.stream(
        Stream.encodeText(log.frames(Number.isInteger(after) && after > 0 ? after : 0)),
        { contentType: "text/event-stream", headers: { "x-accel-buffering": "no" } }
      )
    })

    const router = HttpRouter.empty.pipe(
      HttpRouter.get("/", Effect.succeed(HttpServerResponse.text(page, { contentType: "text/html; charset=utf-8" }))),
      HttpRouter.get(
        "/assets/:name",
        Effect.map(HttpRouter.params, ({ name = "" }) => {
          const asset = assets.files.get(name)
          return asset === undefined
            ? HttpServerResponse.text("Not found", { status: 404 })
            : HttpServerResponse.text(asset.body, { contentType: asset.contentType })
        })
      ),
      HttpRouter.get("/events", eventsRoute),
      HttpRouter.get("/api/stored-threads", storedRoute),
      HttpRouter.get("/api/runs/:runId/steps/:step/request", requestRoute),
      HttpRouter.get("/api/threads/:threadId", threadRoute),
      HttpRouter.post("/api/threads/:threadId/resume", resumeRoute),
      HttpRouter.post("/api/threads/:threadId/send", sendRoute),
      HttpRouter.post("/api/threads/:threadId/fork", forkRoute)
    )

    const refuse = (status: number, message: string) =>
      HttpServerResponse.text(message, { status, headers: { connection: "close" } })

    // An answer given before the request's body was read whole closes the connection: the unread rest would
    // keep it open (a slow client holding the socket until Node's requestTimeout). No later request on a
    // connection so closed reaches the routes (HttpConnection.guard): it could not be answered.
    const app = HttpConnection.guard(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      let bodyRead = HttpConnection.hasNoBody(request)
      return Effect.gen(function*() {
        const hostHeader = request.headers["host"]
        if (!Guard.hostAllowed(hostHeader, hostNames)) {
          return refuse(
            421,
            `421 Misdirected Request: this inspector does not answer for host "${hostHeader ?? ""}"; open the ` +
              `address it printed, or add the name to the allowedHosts option.`
          )
        }
        if (!Guard.originAllowed(request.method, request.headers["origin"], hostHeader)) {
          return refuse(
            403,
            `403 Forbidden: requests from origin "${request.headers["origin"]}" may not change anything.`
          )
        }
        const url = new URL(request.url, "http://inspector")
        const authorization = request.headers["authorization"]
        const given = url.searchParams.get("token") ?? request.headers["x-inspector-token"] ??
          (authorization?.startsWith("Bearer ") ? authorization.slice(7) : undefined)
        if (!sameToken(expected, given)) {
          return HttpServerResponse.text(
            "401 Unauthorized: open the address the inspector printed; it carries the access token.",
            { status: 401 }
          )
        }
        const tooLarge = `413 Payload Too Large: the body may have at most ${maxBodyBytes} bytes.`
        if (Guard.declaredTooLarge(request.headers["content-length"], maxBodyBytes)) return refuse(413, tooLarge)
        const read = yield* Guard.bounded(request, maxBodyBytes, bodyTimeoutMillis)
        if (read._tag === "TooLarge") return refuse(413, tooLarge)
        if (read._tag === "Late") {
          return refuse(
            408,
            `408 Request Timeout: the body did not arrive within ${Duration.format(bodyTimeout.value)}.`
          )
        }
        if (read._tag === "Read") bodyRead = true
        return yield* router.pipe(
          Effect.catchTag("RouteNotFound", () => Effect.succeed(HttpServerResponse.text("Not found", { status: 404 }))),
          Effect.provideService(HttpServerRequest.HttpServerRequest, read.request)
        )
      }).pipe(
        Effect.catchAllCause((cause) => Effect.succeed(json(500, errorOf(cause)))),
        Effect.map(HttpServerResponse.setHeaders(securityHeaders)),
        Effect.map((response) => HttpConnection.closeUnlessRead(response, bodyRead))
      )
    }))

    // -- the server ---------------------------------------------------------------

    const nodeServer = Http.createServer()
    const server = yield* NodeHttpServer.make(() => nodeServer, { port: listenOn, host }).pipe(
      Effect.mapError((error) =>
        new InspectorError({
          reason: `cannot listen on ${host}:${listenOn}: ${
            error.cause instanceof Error ? error.cause.message : String(error.cause)
          }`
        })
      )
    )
    yield* server.serve(app)
    // Runs before the server closes: log the events of runs that already ended, let each page
    // receive what the log holds, then drop the connections.
    yield* Effect.addFinalizer(() =>
      Scope.close(watching, Exit.void).pipe(
        Effect.zipRight(Effect.timeoutOption(Fiber.await(following), "2 seconds")),
        Effect.zipRight(log.close("2 seconds")),
        Effect.zipRight(Effect.sync(() => nodeServer.closeAllConnections()))
      )
    )
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return Inspector.of({ url: `http://${Guard.bracketed(host)}:${port}/?token=${token}`, host, port })
  }
)

// -----------------------------------------------------------------------------
// layers
// -----------------------------------------------------------------------------

/**
 * Serves the inspector for the `Agent` of the context while the layer
 * lives, and logs its URL.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Inspector } from "@stepwise-agent/inspector"
 * import { Layer } from "effect"
 *
 * const AgentLive = Agent.layer({ systemPrompt: "Be brief." })
 * // Provide the model and tools to AgentLive, then:
 * const AppLive = Inspector.layer({ port: 4317 }).pipe(Layer.provideMerge(AgentLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: Options | undefined): Layer.Layer<Inspector, InspectorError, Agent.Agent> =>
  Layer.scoped(
    Inspector,
    Agent.Agent.pipe(
      Effect.flatMap((agent) => make(agent, options)),
      Effect.tap((inspector) => Effect.logInfo(`Agent inspector: ${inspector.url}`))
    )
  )
