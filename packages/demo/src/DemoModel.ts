/**
 * The demo's model and audit middleware: OpenAI when `OPENAI_API_KEY` is set
 * (`OPENAI_MODEL` picks the model, default gpt-4o-mini), the given scripted
 * model otherwise.
 *
 * @since 0.1.0
 */
import * as OpenAiClient from "@effect/ai-openai/OpenAiClient"
import * as OpenAiLanguageModel from "@effect/ai-openai/OpenAiLanguageModel"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

/**
 * OpenAI when `OPENAI_API_KEY` is set (and not empty), `scripted` otherwise;
 * says which on the console, for the agent `who` (when the demo has several).
 *
 * @example
 * ```ts
 * import * as DemoModel from "./DemoModel.js"
 * import { ScriptedModel } from "@stepwise-agent/testing"
 *
 * const ModelLive = DemoModel.layer(ScriptedModel.layer([ScriptedModel.text("hi")]))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  scripted: Layer.Layer<LanguageModel.LanguageModel>,
  who?: string
): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const apiKey = Option.filter(
        yield* Config.option(Config.redacted("OPENAI_API_KEY")),
        (key) => Redacted.value(key).length > 0
      )
      const label = who === undefined ? "Model" : `Model of the ${who}`
      if (Option.isNone(apiKey)) {
        yield* Console.log(`${label}: scripted (set OPENAI_API_KEY to use OpenAI)`)
        return scripted
      }
      const model = yield* Config.withDefault(Config.string("OPENAI_MODEL"), "gpt-4o-mini")
      yield* Console.log(`${label}: OpenAI ${model}`)
      return OpenAiLanguageModel.layer({ model, config: { strict: false } }).pipe(
        Layer.provide(OpenAiClient.layer({ apiKey: apiKey.value })),
        Layer.provide(NodeHttpClient.layerUndici)
      )
    }).pipe(Effect.orDie)
  )

/**
 * Reports each tool call it lets through, so `Middleware.report` shows in the
 * event stream (a wrap hook: in a durable run it runs inside the journaled call).
 *
 * @example
 * ```ts
 * import * as DemoModel from "./DemoModel.js"
 *
 * const middleware = [DemoModel.audit]
 * ```
 *
 * @since 0.1.0
 * @category middleware
 */
export const audit = Middleware.make({
  name: "audit",
  wrapToolCall: (request, next) =>
    Middleware.report(`allowing ${request.call.name}`).pipe(Effect.zipRight(next(request)))
})
