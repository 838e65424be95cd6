/**
 * A middleware's wait at the run's boundaries: the request a hook interrupts
 * with is encoded with its `wait.request` schema before it is stored; a
 * decision is checked against `wait.decision` (and the wait's `check`)
 * before a resumed run starts, and given to the hook decoded.
 */
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { CheckpointError, InvalidHookResult, InvalidResume } from "../AgentError.js"
import type * as Middleware from "../Middleware.js"

const formatParseError = (error: ParseResult.ParseError) => ParseResult.TreeFormatter.formatErrorSync(error)

/** The request a hook of `m` interrupted with, encoded for storage; a middleware with no wait cannot interrupt. */
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
    : Effect.mapError(Schema.encodeUnknown(m.wait.request)(request), (error) =>
      new InvalidHookResult({
        middleware: m.name,
        hook,
        reason: `interrupted with a request its wait's request schema refuses: ${formatParseError(error)}`
      }))

/**
 * Checks the decision `value` a caller gives for the wait of `m` that the
 * thread stops at (`stored`: its request as stored): it must encode with the
 * wait's decision schema, and pass the wait's check. Gives the decision
 * encoded (what a durable journal stores) and decoded (what the hook gets).
 */
export const checkDecision = (
  m: Middleware.Any,
  threadId: string,
  stored: unknown,
  value: unknown
): Effect.Effect<{ readonly encoded: unknown; readonly decision: unknown }, unknown, any> =>
  Effect.gen(function*() {
    const wait = yield* waitOf(m, threadId)
    const encoded = yield* Effect.mapError(
      Schema.encodeUnknown(wait.decision)(value),
      (error) => new InvalidResume({ threadId, middleware: m.name, reason: formatParseError(error) })
    )
    return { encoded, decision: yield* checked(m, wait, threadId, stored, encoded) }
  })

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
  Effect.flatMap(waitOf(m, threadId), (wait) => checked(m, wait, threadId, stored, encoded))

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
  Effect.gen(function*() {
    const decision = yield* Effect.mapError(
      Schema.decodeUnknown(wait.decision)(encoded),
      (error) => new InvalidResume({ threadId, middleware: m.name, reason: formatParseError(error) })
    )
    if (wait.check !== undefined) {
      const request = yield* Effect.mapError(
        Schema.decodeUnknown(wait.request)(stored),
        (error) =>
          new InvalidResume({
            threadId,
            middleware: m.name,
            reason: `the request the thread waits on does not decode with the wait's request schema: ${
              formatParseError(error)
            }`
          })
      )
      yield* wait.check({ threadId, request, decision })
    }
    return decision
  })

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
  m?.wait === undefined ? Effect.succeed(value) : Effect.mapError(
    Schema.decodeUnknown(m.wait.request)(value),
    (error) =>
      new CheckpointError({
        threadId,
        operation: "load",
        description:
          `the request of middleware "${m.name}" it waits on does not decode with its wait's request schema: ${
            formatParseError(error)
          }`
      })
  )
