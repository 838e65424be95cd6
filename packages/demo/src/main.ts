/**
 * `npm run demo`: a small agent with three tools and middleware, on a
 * scripted model by default, or on OpenAI when `OPENAI_API_KEY` is set
 * (`OPENAI_MODEL` picks the model, default gpt-4o-mini).
 *
 * @since 0.1.0
 */
import { Agent, AgentEvent, Middleware } from "@effect-agent/core"
import { ScriptedModel } from "@effect-agent/testing"
import type { LanguageModel } from "@effect/ai"
import { OpenAiClient, OpenAiLanguageModel } from "@effect/ai-openai"
import { NodeContext, NodeHttpClient, NodeRuntime } from "@effect/platform-node"
import { Config, Console, Effect, Layer, Stream } from "effect"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { DemoToolkit, layerHandlers } from "./DemoTools.js"

const dataDirectory = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "data")

const question = "What does the weekend shopping list in my files cost in total?"

const script = [
  ScriptedModel.toolCalls([{ name: "list_files", params: {} }], { text: "Let me look at your files first." }),
  ScriptedModel.toolCalls([{ name: "read_file", params: { path: "shopping-list.txt" } }]),
  ScriptedModel.toolCalls([{ name: "calculate", params: { expression: "3 x 2.50 + 4 x 1.25 + 12.80" } }]),
  ScriptedModel.toolCalls([{ name: "calculate", params: { expression: "3 * 2.50 + 4 * 1.25 + 12.80" } }], {
    text: "I used the wrong multiplication sign; trying again."
  }),
  ScriptedModel.text(
    "The weekend shopping costs 25.30 in total: bread 7.50 (3 × 2.50), milk 5.00 (4 × 1.25) and cheese 12.80."
  )
]

const ModelLive: Layer.Layer<LanguageModel.LanguageModel> = Layer.unwrapEffect(
  Effect.gen(function*() {
    const apiKey = yield* Config.option(Config.redacted("OPENAI_API_KEY"))
    if (apiKey._tag === "None") {
      yield* Console.log("Model: scripted (set OPENAI_API_KEY to use OpenAI)\n")
      return ScriptedModel.layer(script)
    }
    const model = yield* Config.withDefault(Config.string("OPENAI_MODEL"), "gpt-4o-mini")
    yield* Console.log(`Model: OpenAI ${model}\n`)
    return OpenAiLanguageModel.layer({ model, config: { strict: false } }).pipe(
      Layer.provide(OpenAiClient.layer({ apiKey: apiKey.value })),
      Layer.provide(NodeHttpClient.layerUndici)
    )
  }).pipe(Effect.orDie)
)

/** Reports each tool call it lets through; shows `Middleware.report` in the event stream. */
const audit = Middleware.make({
  name: "audit",
  wrapToolCall: (request, next) =>
    Middleware.report(`allowing ${request.call.name}(${JSON.stringify(request.call.params)})`).pipe(
      Effect.zipRight(next(request))
    )
})

const show = (value: unknown) => {
  const text = typeof value === "string" ? value : JSON.stringify(value)
  return text.length > 160 ? `${text.slice(0, 157)}...` : text
}

const printEvent = (event: AgentEvent.AgentEvent) =>
  AgentEvent.$match(event, {
    ModelCallStarted: ({ messageCount, step }) =>
      Console.log(`\n── step ${step + 1}: model call with ${messageCount} messages`),
    TextDelta: ({ delta }) => Effect.sync(() => process.stdout.write(delta)),
    ModelAttemptFailed: ({ discardedText, message }) =>
      Console.log(`\n   model call failed${discardedText ? " (the text above is discarded)" : ""}: ${message}`),
    ModelResponded: ({ durationMillis, finishReason, message, usage }) => {
      const calls = message.content.filter((part) => part.type === "tool-call").length
      const hasText = message.content.some((part) => part.type === "text")
      return Console.log(
        `${hasText ? "\n" : ""}   model finished (${finishReason}) in ${durationMillis} ms, ${calls} tool call(s), ` +
          `${usage.inputTokens ?? "?"} tokens in / ${usage.outputTokens ?? "?"} out`
      )
    },
    ToolCallStarted: ({ call }) => Console.log(`   → ${call.name}(${show(call.params)})`),
    ToolCallCompleted: ({ durationMillis, result }) =>
      Console.log(`   ${result.isFailure ? "✗" : "←"} ${result.name}: ${show(result.result)} (${durationMillis} ms)`),
    StateUpdated: ({ hook, keys, middleware }) => Console.log(`   state: ${middleware}.${hook} set ${keys.join(", ")}`),
    MiddlewareDecision: ({ decision, middleware }) => Console.log(`   [${middleware}] ${decision}`),
    RunEnded: ({ result }) =>
      result._tag === "Completed"
        ? Console.log(
          `\n── done in ${result.steps} model calls, ${result.usage.totalTokens} tokens, ` +
            `${result.state.messages.length} messages in thread "${result.threadId}"`
        )
        : Console.log(`\n── waiting: ${show(result.interrupt)}`)
  })

const program = Effect.gen(function*() {
  const agent = yield* Agent.make({
    toolkit: DemoToolkit,
    systemPrompt: "You answer questions about the user's files. Use the tools; do arithmetic with calculate.",
    middleware: [audit],
    maxSteps: 10
  })
  yield* Console.log(`User: ${question}`)
  yield* agent.stream(question, { threadId: "demo" }).pipe(Stream.runForEach(printEvent))
})

program.pipe(
  Effect.provide(layerHandlers(dataDirectory)),
  Effect.provide(ModelLive),
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain
)
