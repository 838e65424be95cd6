/**
 * A middleware that records its hook calls, for tests of hook order, replays
 * and parity between ways of running an agent.
 *
 * @since 0.1.0
 */
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Effect from "effect/Effect"

/**
 * A middleware implementing `transformInput` and every node and wrap hook,
 * each passing through and appending to `log`: `name.hook` for
 * `transformInput` and node hooks, `name.wrapModelCall:in` / `:out` (and the
 * same for `wrapToolCall`) around the wrapped call.
 *
 * @example
 * ```ts
 * import { HookRecorder } from "@stepwise-agent/testing"
 *
 * const log: Array<string> = []
 * const recorder = HookRecorder.middleware("first", log)
 * // after a run: log is e.g. ["first.transformInput", "first.beforeAgent", "first.beforeModel", ...]
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (name: string, log: Array<string>): Middleware.Middleware => {
  const node = (hook: string) => () => Effect.sync(() => void log.push(`${name}.${hook}`))
  return Middleware.make({
    name,
    transformInput: ({ messages }) =>
      Effect.sync(() => {
        log.push(`${name}.transformInput`)
        return messages
      }),
    beforeAgent: node("beforeAgent"),
    beforeModel: node("beforeModel"),
    afterModel: node("afterModel"),
    afterAgent: node("afterAgent"),
    wrapModelCall: (request, next) =>
      Effect.sync(() => log.push(`${name}.wrapModelCall:in`)).pipe(
        Effect.zipRight(next(request)),
        Effect.tap(() => log.push(`${name}.wrapModelCall:out`))
      ),
    wrapToolCall: (request, next) =>
      Effect.sync(() => log.push(`${name}.wrapToolCall:in`)).pipe(
        Effect.zipRight(next(request)),
        Effect.tap(() => log.push(`${name}.wrapToolCall:out`))
      )
  })
}
