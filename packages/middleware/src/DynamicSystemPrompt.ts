/**
 * DynamicSystemPrompt: computes the system prompt of every model call.
 *
 * `wrapModelCall` calls the given function with the model request — which
 * carries the conversation (`messages`), the whole agent state (`state`),
 * the thread, the step and the agent's own system prompt (`systemPrompt`) —
 * and sends its result as the system prompt of that call. The stored
 * conversation is not changed. Returning `undefined` sends no system prompt.
 * The function may be an `Effect`: its errors and requirements become the
 * middleware's (and so the agent's). A function that gives anything but a
 * string or `undefined` fails the run with `AgentError.InvalidHookResult`.
 *
 * @since 0.1.0
 */
import { InvalidHookResult } from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Check from "./internal/options.js"

/**
 * Computes the system prompt of a model call.
 *
 * @since 0.1.0
 * @category models
 */
export type Prompt<E, R> = (
  request: Middleware.ModelRequest
) => string | undefined | Effect.Effect<string | undefined, E, R>

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The middleware's name (default `"dynamicSystemPrompt"`). */
  readonly name?: string | undefined
}

const OptionsSchema = Schema.Struct({ name: Schema.optional(Check.NonEmpty) })

/**
 * Builds the middleware. A `prompt` that is not a function or bad options
 * (an unknown key too) make `Agent.make` fail with `AgentError.InvalidOptions`.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Clock, Effect } from "effect"
 * import * as DynamicSystemPrompt from "@stepwise-agent/middleware/DynamicSystemPrompt"
 *
 * // extend the agent's prompt with the time and the length of the conversation
 * const prompt = DynamicSystemPrompt.middleware((request) =>
 *   Effect.map(Clock.currentTimeMillis, (now) =>
 *     `${request.systemPrompt ?? ""}\nIt is ${new Date(now).toISOString()}; ` +
 *     `the conversation has ${request.messages.length} messages.`)
 * )
 * const program = Agent.make({ systemPrompt: "You are helpful.", middleware: [prompt] })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = <E = never, R = never>(
  prompt: Prompt<E, R>,
  options?: Options | undefined
): Middleware.Middleware<{}, E | InvalidHookResult, R> =>
  typeof prompt !== "function"
    ? Check.failing(Check.invalid("DynamicSystemPrompt", "prompt", "must be a function"))
    : Check.middlewareOf("DynamicSystemPrompt", OptionsSchema, options, (checked) => make(prompt, checked))

const make = <E, R>(prompt: Prompt<E, R>, options: Options): Middleware.Middleware<{}, E | InvalidHookResult, R> => {
  const name = options.name ?? "dynamicSystemPrompt"
  return Middleware.make({
    name,
    wrapModelCall: (request, next) =>
      Effect.suspend(() => {
        const computed = prompt(request)
        return Effect.isEffect(computed) ? computed : Effect.succeed(computed)
      }).pipe(
        Effect.filterOrFail(
          (systemPrompt: unknown): systemPrompt is string | undefined =>
            systemPrompt === undefined || typeof systemPrompt === "string",
          (systemPrompt: unknown) =>
            new InvalidHookResult({
              middleware: name,
              hook: "wrapModelCall",
              reason: `the prompt function gave ${
                systemPrompt === null ? "null" : `a value of type ${typeof systemPrompt}`
              }, not a string or undefined`
            })
        ),
        Effect.flatMap((systemPrompt) => next({ ...request, systemPrompt }))
      )
  }) as Middleware.Middleware<{}, E | InvalidHookResult, R>
}
