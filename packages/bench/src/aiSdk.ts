/**
 * The Vercel AI SDK 7 side of the benchmark: `ToolLoopAgent` (`ai@7.0.185`,
 * installed under the alias `ai7` beside the repository's `ai@6`) on the same
 * workload as our loop, measured in the same process run.
 *
 * - The model is the SDK's own `MockLanguageModelV4` (`ai/test`), replaying
 *   the same script as our fakes: the first `steps` calls of a run answer
 *   with one call of `tool_0` (same arguments, JSON-encoded as a provider
 *   sends them), the next one with "It is sunny.", each with usage. The
 *   mock records every call it gets; the bench empties that record before
 *   each run (over the ~10^5 calls of a bench run it would hold every prompt).
 * - Streaming: `doStream` returns a fresh `ReadableStream` holding the whole
 *   reply (`convertArrayToReadableStream` of `ai/test`: the tool call as one
 *   part, or the answer as the same two text deltas as ours), the counterpart
 *   of our fakes' `Stream.fromChunk`. (`simulateReadableStream` would wait a
 *   timer per part.)
 * - Tools: `tool_i` made with `tool()` and a zod schema
 *   `{ query: string, limit: number }`, answering `"ok"`.
 * - Middleware: `wrapLanguageModel` with pass-through middleware implementing
 *   all three hooks (`transformParams`, `wrapGenerate`, `wrapStream`). The
 *   SDK's middleware wraps model calls only; it has no node or tool hooks.
 * - State: none. The SDK keeps a run's messages in the result and stores no
 *   thread; ours checkpoints the thread to memory after every step.
 * - generate = `agent.generate`; stream = `agent.stream` with its
 *   `fullStream` drained (text deltas, tool calls and results, step
 *   boundaries: the nearest to our event stream).
 *
 * @since 0.1.0
 */
import { isStepCount, type LanguageModelMiddleware, tool, ToolLoopAgent, type ToolSet, wrapLanguageModel } from "ai7"
import { convertArrayToReadableStream, MockLanguageModelV4 } from "ai7/test"
import { Effect } from "effect"
import { z } from "zod"
import { answerDeltas, callParams, type Mode, toolDescription, usage, userInput } from "./fakes.js"

// the provider's V4 types, read off the mock (`@ai-sdk/provider` 4 is nested under `ai7`)
type GenerateResult = Awaited<ReturnType<MockLanguageModelV4["doGenerate"]>>
type StreamPart = Awaited<ReturnType<MockLanguageModelV4["doStream"]>>["stream"] extends ReadableStream<infer A> ? A
  : never

/**
 * A configuration of the AI SDK workload (always 1 tool call per step).
 *
 * @since 0.1.0
 * @category models
 */
export interface AiSdkConfig {
  readonly mode: Mode
  readonly middleware: number
  readonly tools: number
  /** Model steps that call a tool; the run makes one more model call (the final answer). */
  readonly steps: number
}

/**
 * What one checked run did: model calls, tool results, the final text, and
 * (stream) the text the model streamed and in how many deltas.
 *
 * @since 0.1.0
 * @category models
 */
export interface AiSdkCheck {
  readonly steps: number
  readonly toolResults: number
  readonly text: string
  readonly streamedText: string
  readonly streamedChunks: number
}

/**
 * An agent ready to run a configuration.
 *
 * @since 0.1.0
 * @category models
 */
export interface AiSdkBench {
  /** One whole run. */
  readonly runOnce: Effect.Effect<void, unknown>
  /** One run, returning what the benchmark checks. */
  readonly check: Effect.Effect<AiSdkCheck, unknown>
}

const v4Usage = {
  inputTokens: { total: usage.inputTokens, noCache: usage.inputTokens, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: usage.outputTokens, text: usage.outputTokens, reasoning: undefined }
}
const toolInput = JSON.stringify(callParams)

const toolCallReply: GenerateResult = {
  content: [{ type: "tool-call", toolCallId: "call_1", toolName: "tool_0", input: toolInput }],
  finishReason: { unified: "tool-calls", raw: undefined },
  usage: v4Usage,
  warnings: []
}
const textReply: GenerateResult = {
  content: [{ type: "text", text: answerDeltas.join("") }],
  finishReason: { unified: "stop", raw: undefined },
  usage: v4Usage,
  warnings: []
}
const toolCallParts: ReadonlyArray<StreamPart> = [
  { type: "tool-call", toolCallId: "call_1", toolName: "tool_0", input: toolInput },
  { type: "finish", finishReason: { unified: "tool-calls", raw: undefined }, usage: v4Usage }
]
const textParts: ReadonlyArray<StreamPart> = [
  { type: "text-start", id: "t" },
  { type: "text-delta", id: "t", delta: answerDeltas[0] },
  { type: "text-delta", id: "t", delta: answerDeltas[1] },
  { type: "text-end", id: "t" },
  { type: "finish", finishReason: { unified: "stop", raw: undefined }, usage: v4Usage }
]

/**
 * The SDK's `MockLanguageModelV4` replaying the script: the first
 * `toolSteps` calls of a run ask for one call of `tool_0`, the next one
 * answers. `reset` before every run.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedMockModel = (toolSteps: number) => {
  let call = 0
  const model = new MockLanguageModelV4({
    doGenerate: async () => call++ < toolSteps ? toolCallReply : textReply,
    doStream: async () => ({
      stream: convertArrayToReadableStream([...(call++ < toolSteps ? toolCallParts : textParts)])
    })
  })
  return {
    model,
    calls: () => call,
    reset: () => {
      call = 0
      model.doGenerateCalls.length = 0
      model.doStreamCalls.length = 0
    }
  }
}

const makeTools = (count: number): ToolSet => {
  const tools: ToolSet = {}
  for (let i = 0; i < count; i++) {
    tools[`tool_${i}`] = tool({
      description: toolDescription(i),
      inputSchema: z.object({ query: z.string(), limit: z.number() }),
      execute: async () => "ok"
    })
  }
  return tools
}

const passThrough: LanguageModelMiddleware = {
  specificationVersion: "v4",
  transformParams: async ({ params }) => params,
  wrapGenerate: ({ doGenerate }) => doGenerate(),
  wrapStream: ({ doStream }) => doStream()
}

/**
 * Builds the `ToolLoopAgent` of a configuration: the mock model wrapped in
 * `middleware` pass-through middleware, stopping after `steps + 1` model
 * calls (as our `maxSteps`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeAiSdkBench = (config: AiSdkConfig): AiSdkBench => {
  const script = scriptedMockModel(config.steps)
  const model = config.middleware === 0
    ? script.model
    : wrapLanguageModel({
      model: script.model,
      middleware: Array.from({ length: config.middleware }, () => passThrough)
    })
  const agent = new ToolLoopAgent({
    model,
    tools: makeTools(config.tools),
    stopWhen: isStepCount(config.steps + 1)
  })
  const run = async (check: boolean): Promise<AiSdkCheck> => {
    script.reset()
    let streamedText = ""
    let streamedChunks = 0
    if (config.mode === "generate") {
      const result = await agent.generate({ prompt: userInput })
      if (!check) return { steps: 0, toolResults: 0, text: "", streamedText, streamedChunks }
      return {
        steps: script.calls(),
        toolResults: result.steps.reduce((n, step) => n + step.toolResults.length, 0),
        text: result.text,
        streamedText,
        streamedChunks
      }
    }
    const result = await agent.stream({ prompt: userInput })
    for await (const part of result.fullStream) {
      if (check && part.type === "text-delta") {
        streamedText += part.text
        streamedChunks++
      }
    }
    if (!check) return { steps: 0, toolResults: 0, text: "", streamedText, streamedChunks }
    const steps = await result.steps
    return {
      steps: script.calls(),
      toolResults: steps.reduce((n, step) => n + step.toolResults.length, 0),
      text: await result.text,
      streamedText,
      streamedChunks
    }
  }
  return {
    runOnce: Effect.asVoid(Effect.tryPromise(() => run(false))),
    check: Effect.tryPromise(() => run(true))
  }
}
