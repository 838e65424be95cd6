/**
 * DynamicSystemPrompt: computes the system prompt of every model call.
 *
 * `wrapModelCall` calls the given function with the model request — which
 * carries the conversation (`messages`), the whole agent state (`state`),
 * the thread, the step and the agent's own system prompt (`systemPrompt`) —
 * and sends its result as the system prompt of that call. The stored
 * conversation is not changed. Returning `undefined` sends no system prompt.
 * The function may be an `Effect`: its errors and requirements become the
 * middleware's (and so the agent's).
 *
 * @since 0.1.0
 */
import * as Middleware from "@effect-agent/core/Middleware"
import * as Effect from "effect/Effect"

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

/**
 * Builds the middleware.
 *
 * @example
 * ```ts
 * import { Agent } from "@effect-agent/core"
 * import { Clock, Effect } from "effect"
 * import * as DynamicSystemPrompt from "@effect-agent/middleware/DynamicSystemPrompt"
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
): Middleware.Middleware<{}, E, R> =>
  Middleware.make({
    name: options?.name ?? "dynamicSystemPrompt",
    wrapModelCall: (request, next) =>
      Effect.suspend(() => {
        const computed = prompt(request)
        return Effect.isEffect(computed) ? computed : Effect.succeed(computed)
      }).pipe(Effect.flatMap((systemPrompt) => next({ ...request, systemPrompt })))
  }) as Middleware.Middleware<{}, E, R>
