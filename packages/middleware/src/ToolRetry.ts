/**
 * ToolRetry: runs a failing tool call again, with backoff.
 *
 * `wrapToolCall` calls `next` again when the tool returns a failed result
 * (`isFailure`: the tool's typed failure) or dies (`ToolDefect`), as long as
 * `retryOn` accepts the failure (by default {@link isRetryable}: defects, and
 * failed results of known tools whose arguments are valid — invalid
 * arguments and unknown tools fail the same way every time), at most
 * `maxRetries` times, waiting between attempts by an exponential backoff
 * (`initialDelay`, `factor`, `maxDelay`, `jitter`) or by the user's
 * `schedule`. Each retry is reported (`Middleware.report`) as
 * `retry 1 of 2 after search failed, waiting 1s`. Interruption is never
 * retried.
 *
 * When the last attempt fails: a failed result is returned as it is (the
 * model reads it, as without this middleware); a defect becomes, with
 * `onFailure: "continue"` (the default, as in LangChain), a failed tool
 * result saying the tool crashed (without the crash's own message, which may
 * name internals), and with `"raise"` (or LangChain's `"error"`) fails the
 * run with the `ToolDefect`.
 *
 * A retried tool runs again with the same call id: make tools with side
 * effects idempotent on it.
 *
 * @since 0.1.0
 */
import type * as Prompt from "@effect/ai/Prompt"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Check from "./internal/options.js"
import * as Retry from "./internal/retry.js"

/**
 * A failed attempt of a tool call: a failed tool result, or a defect.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolFailure =
  | { readonly _tag: "FailedResult"; readonly result: Prompt.ToolResultPart }
  | { readonly _tag: "Defect"; readonly defect: AgentError.ToolDefect }

/**
 * What to do when a tool still dies: `"continue"` with a failed tool
 * result, or `"raise"` the `ToolDefect` (`"error"` is LangChain's name for
 * it, accepted as the same).
 *
 * @since 0.1.0
 * @category models
 */
export type OnFailure = "raise" | "error" | "continue"

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Retry only these tools (default: all).
   * `Agent.make` fails with `AgentError.UnknownTools` on a name that is not a tool of the agent.
   */
  readonly tools?: ReadonlyArray<string> | undefined
  /** Retries after the first attempt (default 2). */
  readonly maxRetries?: number | undefined
  /** Which failures to retry (default {@link isRetryable}). */
  readonly retryOn?: ((failure: ToolFailure, request: Middleware.ToolCallRequest) => boolean) | undefined
  /** The delay before the first retry (default 1 second). */
  readonly initialDelay?: Duration.DurationInput | undefined
  /** How much each delay grows over the previous one (default 2). */
  readonly factor?: number | undefined
  /** The longest delay (default 60 seconds). */
  readonly maxDelay?: Duration.DurationInput | undefined
  /** Multiply each delay by a random factor between 0.8 and 1.2 (default true). */
  readonly jitter?: boolean | undefined
  /**
   * A schedule of delays in place of the built-in backoff (it receives the
   * failure); it cannot be combined with `initialDelay`, `factor`,
   * `maxDelay` or `jitter`. `maxRetries` still applies.
   */
  readonly schedule?: Schedule.Schedule<unknown, ToolFailure> | undefined
  /** `"continue"` (default) or `"raise"` (`"error"` is the same). */
  readonly onFailure?: OnFailure | undefined
  /** The middleware's name (default `"toolRetry"`). */
  readonly name?: string | undefined
}

const argumentsDecode = (request: Middleware.ToolCallRequest): boolean => {
  if (request.tool === undefined) return false
  try {
    return Either.isRight(
      Schema.decodeUnknownEither(request.tool.parametersSchema as Schema.Schema<unknown, unknown>)(request.call.params)
    )
  } catch {
    // a schema that decodes asynchronously or needs services: assume the arguments are fine
    return true
  }
}

/**
 * The default `retryOn`: every defect, and a failed result of a tool the
 * agent has, called with arguments its parameters schema accepts.
 *
 * @example
 * ```ts
 * import * as ToolRetry from "@stepwise-agent/middleware/ToolRetry"
 *
 * // retry defects only, never a tool's own failure
 * const defectsOnly = ToolRetry.middleware({
 *   retryOn: (failure, request) => failure._tag === "Defect" && ToolRetry.isRetryable(failure, request)
 * })
 * ```
 *
 * @since 0.1.0
 * @category predicates
 */
export const isRetryable = (failure: ToolFailure, request: Middleware.ToolCallRequest): boolean =>
  failure._tag === "Defect" || argumentsDecode(request)

const describe = (failure: ToolFailure, name: string) =>
  failure._tag === "Defect" ? `${name} crashed` : `${name} failed`

const OptionsSchema = Schema.Struct({
  ...Retry.optionFields,
  tools: Schema.optional(Schema.Array(Check.NonEmpty))
})

/**
 * Builds the middleware. Bad options fail `Agent.make` with
 * `AgentError.InvalidOptions` (naming the option; an unknown option is an error too): `maxRetries` must be a whole number of at
 * least 0, delays finite durations with `maxDelay` at least `initialDelay`,
 * `factor` at least 1, `tools` non-empty names, and `schedule` cannot be
 * combined with the backoff options.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 * import * as ToolRetry from "@stepwise-agent/middleware/ToolRetry"
 *
 * const program = Effect.gen(function*() {
 *   const retry = ToolRetry.middleware({ tools: ["search"], maxRetries: 3, initialDelay: "200 millis" })
 *   return yield* Agent.make({ middleware: [retry] })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (options?: Options | undefined): Middleware.Middleware =>
  Middleware.unwrap(setup(options), { name: Check.nameOf(options, "toolRetry") })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: (
  options?: Options | undefined
) => Effect.Effect<Middleware.Middleware, AgentError.InvalidOptions> = Effect.fn("ToolRetry.middleware")(
  function*(options: Options | undefined) {
    yield* Check.validate("ToolRetry", OptionsSchema, options)
    const opts = options ?? {}
    const backoff = Retry.resolveBackoff<ToolFailure>(opts, { maxRetries: 2 })
    if (Either.isLeft(backoff)) return yield* Check.invalid("ToolRetry", backoff.left.option, backoff.left.reason)
    const onFailure = opts.onFailure ?? "continue"
    const only = opts.tools === undefined ? undefined : new Set(opts.tools)
    const retryOn = opts.retryOn ?? isRetryable
    return Middleware.make({
      name: opts.name ?? "toolRetry",
      uses: { tools: opts.tools },
      wrapToolCall: (request, next) => {
        if (only !== undefined && !only.has(request.call.name)) return next(request)
        return Retry.retrying({
          attempt: next(request).pipe(
            Effect.map((result): Either.Either<Prompt.ToolResultPart, ToolFailure> =>
              result.isFailure ? Either.left({ _tag: "FailedResult", result }) : Either.right(result)
            ),
            Effect.catchTag("ToolDefect", (defect) => Effect.succeed(Either.left({ _tag: "Defect" as const, defect })))
          ),
          backoff: backoff.right,
          shouldRetry: (failure) => retryOn(failure, request),
          describe: (failure) => describe(failure, request.call.name)
        }).pipe(
          Effect.flatMap(Either.match({
            onRight: Effect.succeed,
            onLeft: ({ attempts, failure }): Effect.Effect<Prompt.ToolResultPart, AgentError.ToolDefect> => {
              if (failure._tag === "FailedResult") return Effect.succeed(failure.result)
              if (onFailure !== "continue") return Effect.fail(failure.defect)
              return Effect.as(
                Middleware.report(`giving up after ${attempts} attempt(s): ${request.call.name} crashed`),
                // without the crash's own text, which may name internals (hosts, paths): as LangChain does
                Middleware.toolResult(request.call, {
                  error: `Tool "${request.call.name}" crashed after ${attempts} attempt${attempts === 1 ? "" : "s"}.`
                }, { isFailure: true })
              )
            }
          }))
        )
      }
    })
  }
)
