/**
 * Tracing: records what each model call and tool call was asked and what it
 * gave, as OpenTelemetry-style `gen_ai.*` attributes on the spans of the run.
 *
 * The agent loop already opens a span per hook (`Middleware.<hook>`, with a
 * `middleware` attribute) inside `Agent.modelCall` / `Agent.toolCall`,
 * and `Middleware.report` adds each decision to the current span. This
 * middleware adds, to its own `Middleware.wrapModelCall` span (put it first
 * in the list so that span covers the whole call, retries and fallbacks
 * included):
 *
 * - `gen_ai.operation.name` = `"chat"`, `gen_ai.conversation.id` (the
 *   thread), `gen_ai.agent.step` (model calls made so far in the run), `gen_ai.request.message_count`,
 *   `gen_ai.request.tool_names`, `gen_ai.request.tool_choice`,
 *   `gen_ai.request.system_prompt` (whether there is one);
 * - on success `gen_ai.response.finish_reasons`, `gen_ai.response.tool_calls`
 *   (the names called), `gen_ai.usage.input_tokens`, `output_tokens`,
 *   `total_tokens` (and `reasoning_tokens`, `cached_input_tokens` when known);
 * - on failure `error.type` (the error's tag).
 *
 * and to its `Middleware.wrapToolCall` span: `gen_ai.operation.name` =
 * `"execute_tool"`, `gen_ai.tool.name`, `gen_ai.tool.call.id`,
 * `gen_ai.tool.known` (whether the agent has the tool),
 * `gen_ai.conversation.id`, `gen_ai.agent.step` (the model call that asked
 * for it), then
 * `gen_ai.tool.is_failure`, or `error.type` when the tool died.
 *
 * Message contents and tool arguments are never recorded.
 *
 * @since 0.1.0
 */
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Usage from "@stepwise-agent/core/Usage"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Check from "./internal/options.js"

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The middleware's name (default `"tracing"`). */
  readonly name?: string | undefined
}

const OptionsSchema = Schema.Struct({ name: Schema.optional(Check.NonEmpty) })

const defined = (attributes: Record<string, unknown>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(attributes)) if (value !== undefined) out[key] = value
  return out
}

const errorType = (error: unknown): string =>
  Predicate.hasProperty(error, "_tag") && typeof error._tag === "string" ? error._tag : "unknown"

const annotateFailure = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.tapErrorCause(effect, (cause) =>
    Effect.annotateCurrentSpan(
      "error.type",
      Option.match(Cause.failureOption(cause), {
        onNone: () => Cause.isInterruptedOnly(cause) ? "interrupted" : "defect",
        onSome: errorType
      })
    ))

/**
 * Builds the middleware. It changes nothing about a run; it only annotates
 * spans (see the module documentation for the attributes). Bad options (an
 * unknown key too) make `Agent.make` fail with `AgentError.InvalidOptions`.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import * as Tracing from "@stepwise-agent/middleware/Tracing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   // first, so its span covers the whole model call
 *   const agent = yield* Agent.make({ middleware: [Tracing.middleware()] })
 *   return yield* agent.run("hello", { threadId: "t1" })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (options?: Options | undefined): Middleware.Middleware =>
  Check.middlewareOf("Tracing", OptionsSchema, options, make)

const make = (options: Options): Middleware.Middleware =>
  Middleware.make({
    name: options.name ?? "tracing",
    wrapModelCall: (request, next) =>
      Effect.gen(function*() {
        yield* Effect.annotateCurrentSpan({
          "gen_ai.operation.name": "chat",
          "gen_ai.conversation.id": request.threadId,
          "gen_ai.agent.step": request.step,
          "gen_ai.request.message_count": request.messages.length,
          "gen_ai.request.tool_names": request.tools.map((tool) => tool.name),
          "gen_ai.request.tool_choice": typeof request.toolChoice === "string"
            ? request.toolChoice
            : JSON.stringify(request.toolChoice),
          "gen_ai.request.system_prompt": request.systemPrompt !== undefined
        })
        const response = yield* annotateFailure(next(request))
        const usage = Usage.read(response.usage)
        yield* Effect.annotateCurrentSpan(defined({
          "gen_ai.response.finish_reasons": [response.finishReason],
          "gen_ai.response.tool_calls": response.toolCalls.map((call) => call.name),
          "gen_ai.usage.input_tokens": usage.inputTokens,
          "gen_ai.usage.output_tokens": usage.outputTokens,
          "gen_ai.usage.total_tokens": usage.totalTokens,
          "gen_ai.usage.reasoning_tokens": usage.reasoningTokens,
          "gen_ai.usage.cached_input_tokens": usage.cachedInputTokens
        }))
        return response
      }),
    wrapToolCall: (request, next) =>
      Effect.gen(function*() {
        yield* Effect.annotateCurrentSpan({
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": request.call.name,
          "gen_ai.tool.call.id": request.call.id,
          "gen_ai.tool.known": request.tool !== undefined,
          "gen_ai.conversation.id": request.threadId,
          "gen_ai.agent.step": request.step
        })
        const result = yield* annotateFailure(next(request))
        yield* Effect.annotateCurrentSpan("gen_ai.tool.is_failure", result.isFailure)
        return result
      })
  })
