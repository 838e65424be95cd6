/**
 * ToolErrors: answers the failures of selected tools with a tool result of
 * your own, as LangChain's `toolErrorMiddleware` does.
 *
 * `wrapToolCall` gives each failure of a tool call to `onError`: a failed
 * result (the tool's typed failure, invalid arguments, an unknown tool) or a
 * defect (`ToolDefect`: the tool died, threw, or returned what its `success`
 * schema rejects). When `onError` returns content, the model reads it as the
 * call's failed result (`isFailure: true`) and the run goes on; when it
 * returns `undefined`, the failure goes on unchanged (a failed result to the
 * model, a defect failing the run). Interruption is never handled.
 *
 * Say what went wrong without the raw error message: it may carry internal
 * details, and the model (and the stored thread) keeps what you return. To
 * retry first, put `ToolRetry` with `onFailure: "raise"` after this
 * middleware (a later middleware's `wrapToolCall` runs inside this one's).
 *
 * @since 0.1.0
 */
import type * as Prompt from "@effect/ai/Prompt"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Check from "./internal/options.js"
import type * as ToolRetry from "./ToolRetry.js"

/**
 * A failure of a tool call: a failed tool result, or a defect (the same as
 * `ToolRetry`'s).
 *
 * @since 0.1.0
 * @category models
 */
export type ToolFailure = ToolRetry.ToolFailure

/**
 * What `onError` answers a failure with: the content the model reads, or
 * `undefined` to leave the failure as it is (as a value, or an effect of one).
 *
 * @since 0.1.0
 * @category models
 */
export type Answer = string | undefined | Effect.Effect<string | undefined>

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Handle only the failures of these tools (default: all).
   * `Agent.make` fails with `AgentError.UnknownTools` on a name that is not a tool of the agent.
   */
  readonly tools?: ReadonlyArray<string> | undefined
  /** The content the model reads for this failure, or `undefined` to leave it as it is. */
  readonly onError: (failure: ToolFailure, request: Middleware.ToolCallRequest) => Answer
  /** The middleware's name (default `"toolErrors"`). */
  readonly name?: string | undefined
}

const OptionsSchema = Schema.Struct({
  tools: Schema.optional(Schema.Array(Check.NonEmpty)),
  onError: Check.AnyFunction,
  name: Schema.optional(Check.NonEmpty)
})

/**
 * Builds the middleware. Bad options fail `Agent.make` with `AgentError.InvalidOptions`
 * naming the option (an unknown option too): `onError` must be a function,
 * `tools` non-empty names.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 * import * as ToolErrors from "@stepwise-agent/middleware/ToolErrors"
 *
 * const program = Effect.gen(function*() {
 *   const errors = ToolErrors.middleware({
 *     tools: ["search"],
 *     onError: (failure, request) =>
 *       failure._tag === "Defect" ? `The tool ${request.call.name} is unavailable; answer without it.` : undefined
 *   })
 *   return yield* Agent.make({ middleware: [errors] })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (options: Options): Middleware.Middleware =>
  Middleware.unwrap(setup(options), { name: Check.nameOf(options, "toolErrors") })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: (options: Options) => Effect.Effect<Middleware.Middleware, AgentError.InvalidOptions> = Effect
  .fn("ToolErrors.middleware")(function*(options: Options) {
    yield* Check.validate("ToolErrors", OptionsSchema, options)
    const only = options.tools === undefined ? undefined : new Set(options.tools)
    const onError = options.onError
    return Middleware.make({
      name: options.name ?? "toolErrors",
      uses: { tools: options.tools },
      wrapToolCall: (request, next) => {
        if (only !== undefined && !only.has(request.call.name)) return next(request)
        /** The failure answered with `onError`'s content, or `otherwise`. */
        const answer = (
          failure: ToolFailure,
          otherwise: Effect.Effect<Prompt.ToolResultPart, AgentError.ToolDefect>
        ): Effect.Effect<Prompt.ToolResultPart, AgentError.ToolDefect> =>
          Effect.flatMap(
            Effect.suspend(() => {
              const answered = onError(failure, request)
              return Effect.isEffect(answered) ? answered : Effect.succeed(answered)
            }),
            (content) =>
              content === undefined ? otherwise : Effect.as(
                Middleware.report(
                  `answered the ${failure._tag === "Defect" ? "crash" : "failure"} of ${request.call.name}`,
                  { tool: request.call.name, callId: request.call.id, failure: failure._tag }
                ),
                Middleware.toolResult(request.call, content, { isFailure: true })
              )
          )
        return next(request).pipe(
          Effect.flatMap((result) =>
            result.isFailure ? answer({ _tag: "FailedResult", result }, Effect.succeed(result)) : Effect.succeed(result)
          ),
          Effect.catchTag("ToolDefect", (defect) => answer({ _tag: "Defect", defect }, Effect.fail(defect)))
        )
      }
    })
  })
