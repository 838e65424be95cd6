/**
 * Fixtures of the AgentWorkflow tests: a middleware that records its hook calls.
 */
import { Middleware } from "@effect-agent/core"
import { Effect } from "effect"

/** A middleware implementing every hook, recording `name.hook` (and `:in` / `:out` for wrap hooks) in `log`. */
export const recording = (name: string, log: Array<string>) => {
  const node = (hook: string) => () => Effect.sync(() => void log.push(`${name}.${hook}`))
  return Middleware.make({
    name,
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
