/**
 * The workload of the benchmark without the agents: the tools and toolkits,
 * the script, and the two fake models. It imports nothing of Stepwise, so a
 * process timing a copy of the core (the ablation's) loads no other core.
 *
 * Two fake models, both driven by a {@link Script} counter (no per-call work
 * beyond returning a canned value):
 *
 * - `encoded`: built with `LanguageModel.make`, returning canned *encoded*
 *   parts, exactly as a real provider does. Every call pays @effect/ai's own
 *   per-call cost (building `Response.Part(toolkit)` and decoding the reply).
 * - `raw`: a hand-written `LanguageModel.Service` returning *already decoded*
 *   parts. No @effect/ai work at all on the model call, so a step costs our
 *   loop plus the tool call (`Toolkit.handle` and the handler).
 *
 * `ScriptedModel` from `@stepwise-agent/testing` is not used in the timed runs:
 * it records every request (a growing array holding every prompt, plus a
 * `tools.map` per call), which is the right thing in tests but is both
 * overhead and a leak over the ~10^5 calls of a benchmark.
 *
 * @since 0.1.0
 */
import { LanguageModel, Response, Tool, Toolkit } from "@effect/ai"
import type { Layer } from "effect"
import { Chunk, Effect, Schema, Stream } from "effect"

/**
 * Which fake model to use.
 *
 * @since 0.1.0
 * @category models
 */
export type ModelKind = "encoded" | "raw"

/**
 * How a run is driven: `agent.run` (generate) or `agent.stream` drained.
 *
 * @since 0.1.0
 * @category models
 */
export type Mode = "generate" | "stream"

/**
 * The fake model's script: the first `toolSteps` calls of a run answer with
 * one tool call, the next one with a short text. Reset before every run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Script {
  toolSteps: number
  call: number
}

/**
 * The token usage every scripted reply reports.
 *
 * @since 0.1.0
 * @category constructors
 */
export const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15 }

/**
 * The user's message that starts every run.
 *
 * @since 0.1.0
 * @category constructors
 */
export const userInput = "What is the weather in Paris?"

/**
 * The final answer, as the two text deltas the streaming fakes send.
 *
 * @since 0.1.0
 * @category constructors
 */
export const answerDeltas = ["It is ", "sunny."] as const

/**
 * The description of the benchmark tool `tool_<i>`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolDescription = (i: number): string =>
  `Benchmark tool ${i}: looks something up and returns a short answer.`

/**
 * The arguments every scripted tool call carries.
 *
 * @since 0.1.0
 * @category constructors
 */
export const callParams = { query: "weather in Paris", limit: 3 }

const encodedToolCall: Array<Response.PartEncoded> = [
  { type: "tool-call", id: "call_1", name: "tool_0", params: callParams },
  { type: "finish", reason: "tool-calls", usage }
]
const encodedText: Array<Response.PartEncoded> = [
  { type: "text", text: answerDeltas.join("") },
  { type: "finish", reason: "stop", usage }
]
const encodedToolCallStream = Chunk.unsafeFromArray(encodedToolCall as Array<Response.StreamPartEncoded>)
const encodedTextStream = Chunk.unsafeFromArray<Response.StreamPartEncoded>([
  { type: "text-start", id: "t" },
  { type: "text-delta", id: "t", delta: answerDeltas[0] },
  { type: "text-delta", id: "t", delta: answerDeltas[1] },
  { type: "text-end", id: "t" },
  { type: "finish", reason: "stop", usage }
])

const decodedUsage = new Response.Usage(usage)
const decodedToolCall: Array<Response.AnyPart> = [
  Response.makePart("tool-call", { id: "call_1", name: "tool_0", params: callParams, providerExecuted: false }),
  Response.makePart("finish", { reason: "tool-calls", usage: decodedUsage })
]
const decodedText: Array<Response.AnyPart> = [
  Response.makePart("text", { text: answerDeltas.join("") }),
  Response.makePart("finish", { reason: "stop", usage: decodedUsage })
]
const decodedToolCallStream = Chunk.unsafeFromArray(decodedToolCall)
const decodedTextStream = Chunk.unsafeFromArray<Response.AnyPart>([
  Response.makePart("text-start", { id: "t" }),
  Response.makePart("text-delta", { id: "t", delta: answerDeltas[0] }),
  Response.makePart("text-delta", { id: "t", delta: answerDeltas[1] }),
  Response.makePart("text-end", { id: "t" }),
  Response.makePart("finish", { reason: "stop", usage: decodedUsage })
])

/**
 * The fake built with `LanguageModel.make` (canned encoded parts); `make`
 * may come from another build of @effect/ai (see `effectAi.ts`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const encodedModel = (
  script: Script,
  make: typeof LanguageModel.make = LanguageModel.make
): Effect.Effect<LanguageModel.Service> =>
  make({
    generateText: () => Effect.sync(() => script.call++ < script.toolSteps ? encodedToolCall : encodedText),
    streamText: () =>
      Stream.suspend(() =>
        Stream.fromChunk(script.call++ < script.toolSteps ? encodedToolCallStream : encodedTextStream)
      )
  })

/**
 * A hand-written `LanguageModel.Service` returning decoded parts: no
 * @effect/ai schema work on the model call.
 *
 * @since 0.1.0
 * @category constructors
 */
export const rawModel = (script: Script): LanguageModel.Service => ({
  generateText: () =>
    Effect.sync(() =>
      new LanguageModel.GenerateTextResponse(
        (script.call++ < script.toolSteps ? decodedToolCall : decodedText) as Array<Response.Part<any>>
      )
    ),
  streamText: () =>
    Stream.suspend(() =>
      Stream.fromChunk(script.call++ < script.toolSteps ? decodedToolCallStream : decodedTextStream)
    ),
  generateObject: () => Effect.dieMessage("generateObject is not used by the benchmark")
} as unknown as LanguageModel.Service)

/**
 * `count` tools named `tool_0` … with two parameters, a description and a
 * string result; the model always calls `tool_0`. Undeclared (a durable run
 * records a ledger entry before each call), or read-only with
 * `STEPWISE_BENCH_READONLY_TOOLS=1` (no entry), for the ablation's durable
 * rows against a core from before the ledger.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeTools = (count: number): Array<Tool.Any> =>
  Array.from({ length: count }, (_, i) => {
    const tool = Tool.make(`tool_${i}`, {
      description: toolDescription(i),
      parameters: { query: Schema.String, limit: Schema.Number },
      success: Schema.String
    })
    return process.env["STEPWISE_BENCH_READONLY_TOOLS"] === "1" ? tool.annotate(Tool.Readonly, true) : tool
  })

/**
 * A toolkit of `count` tools and the layer of its handlers (every handler
 * answers `"ok"`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeToolkit = (count: number) => {
  const kit = (Toolkit.make as (...tools: Array<Tool.Any>) => Toolkit.Toolkit<Record<string, Tool.Any>>)(
    ...makeTools(count)
  )
  const handlers: Record<string, () => Effect.Effect<string>> = {}
  for (const name of Object.keys(kit.tools)) handlers[name] = () => Effect.succeed("ok")
  const layer = (kit.toLayer as unknown as (handlers: unknown) => Layer.Layer<never>)(handlers)
  return { kit, layer }
}
