/**
 * The LangChain JS side of the benchmark: `createAgent` (langchain 1.5) on
 * the same workload as our loop, measured in the same process run.
 *
 * - The model is {@link ScriptedChatModel}, a `BaseChatModel` driven by the
 *   same kind of counter as our fakes: the first `steps` calls of a run
 *   answer with one call of `tool_0` (same arguments as ours), the next one
 *   with "It is sunny.". Each call builds a fresh `AIMessage` (as a provider
 *   does; LangGraph's message reducer stamps ids on the messages it stores).
 *   `bindTools` binds the tools as call options without converting them to
 *   JSON Schema, as our fakes receive the toolkit without converting it: no
 *   network, no provider work.
 * - Streaming: `_streamResponseChunks` sends the tool call as one chunk, or
 *   the answer as the same two text deltas as our stream fakes, and reports
 *   each chunk to the callbacks (`handleLLMNewToken`), as providers do.
 * - Tools: `tool_i` made with `tool()` and a zod schema
 *   `{ query: string, limit: number }`, answering `"ok"`.
 * - Middleware: `createMiddleware` with all six hooks as pass-throughs, like
 *   pass-through middleware (`passThrough` in `fixtures.ts`).
 * - State: a `MemorySaver` checkpointer (ours checkpoints to memory too), a
 *   fresh thread each run, deleted afterwards.
 * - generate = `agent.invoke`; stream = `agent.stream` with
 *   `streamMode: ["updates", "messages"]` drained (node updates plus the
 *   model's chunks, the nearest to our event stream).
 *
 * @since 0.1.0
 */
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager"
import type { BaseChatModelCallOptions, BindToolsInput } from "@langchain/core/language_models/chat_models"
import { BaseChatModel } from "@langchain/core/language_models/chat_models"
import type { AIMessageChunkFields, BaseMessage, UsageMetadata } from "@langchain/core/messages"
import { ChatGenerationChunk, type ChatResult } from "@langchain/core/outputs"
import { MemorySaver } from "@langchain/langgraph"
import { Effect } from "effect"
import { AIMessage, AIMessageChunk, createAgent, createMiddleware, tool, ToolMessage } from "langchain"
import { z } from "zod"
import { answerDeltas, callParams, type Mode, toolDescription, usage, userInput } from "./fakes.js"

/**
 * A configuration of the LangChain workload (always 1 tool call per step).
 *
 * @since 0.1.0
 * @category models
 */
export interface LangChainConfig {
  readonly mode: Mode
  readonly middleware: number
  readonly tools: number
  /** Model steps that call a tool; the run makes one more model call (the final answer). */
  readonly steps: number
}

/**
 * What one checked run did: model calls, tool results in the thread, the
 * final text, and (stream) the text the model streamed and in how many chunks.
 *
 * @since 0.1.0
 * @category models
 */
export interface LangChainCheck {
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
export interface LangChainBench {
  /** One whole run on a fresh thread (the thread is deleted afterwards). */
  readonly runOnce: Effect.Effect<void, unknown>
  /** One run, returning what the benchmark checks. */
  readonly check: Effect.Effect<LangChainCheck, unknown>
}

interface ScriptedCallOptions extends BaseChatModelCallOptions {
  readonly tools?: ReadonlyArray<BindToolsInput>
}

const usageMetadata: UsageMetadata = {
  input_tokens: usage.inputTokens,
  output_tokens: usage.outputTokens,
  total_tokens: usage.totalTokens
}

// under `exactOptionalPropertyTypes` the declared type of `usage_metadata` resolves to `undefined`
const aiFields = (fields: Omit<AIMessageChunkFields, "usage_metadata"> & { readonly usage_metadata?: UsageMetadata }) =>
  fields as unknown as AIMessageChunkFields

/**
 * A scripted LangChain chat model: the first `toolSteps` calls of a run
 * answer with one call of `tool_0`, the next one with the final text. Reset
 * `call` before every run.
 *
 * @since 0.1.0
 * @category models
 */
export class ScriptedChatModel extends BaseChatModel<ScriptedCallOptions, AIMessageChunk> {
  call = 0
  readonly toolSteps: number

  constructor(toolSteps: number) {
    super({})
    this.toolSteps = toolSteps
  }

  _llmType(): string {
    return "scripted"
  }

  override bindTools(tools: Array<BindToolsInput>, kwargs?: Partial<ScriptedCallOptions>) {
    return this.withConfig({ ...kwargs, tools })
  }

  async _generate(_messages: Array<BaseMessage>): Promise<ChatResult> {
    const n = this.call++
    const message = n < this.toolSteps
      ? new AIMessage(aiFields({
        content: "",
        tool_calls: [{ id: `call_${n}`, name: "tool_0", args: callParams, type: "tool_call" }],
        usage_metadata: usageMetadata
      }))
      : new AIMessage(aiFields({ content: answerDeltas.join(""), usage_metadata: usageMetadata }))
    return { generations: [{ text: message.text, message }] }
  }

  override async *_streamResponseChunks(
    _messages: Array<BaseMessage>,
    _options: this["ParsedCallOptions"],
    runManager?: CallbackManagerForLLMRun
  ): AsyncGenerator<ChatGenerationChunk> {
    const n = this.call++
    const chunks = n < this.toolSteps
      ? [
        new ChatGenerationChunk({
          text: "",
          message: new AIMessageChunk(aiFields({
            content: "",
            tool_call_chunks: [{
              id: `call_${n}`,
              name: "tool_0",
              args: JSON.stringify(callParams),
              index: 0,
              type: "tool_call_chunk"
            }],
            usage_metadata: usageMetadata
          }))
        })
      ]
      : answerDeltas.map((delta, i) =>
        new ChatGenerationChunk({
          text: delta,
          message: new AIMessageChunk(aiFields({
            content: delta,
            ...(i === answerDeltas.length - 1 ? { usage_metadata: usageMetadata } : {})
          }))
        })
      )
    // as providers do: each chunk goes to the callbacks too (LangGraph's "messages" stream listens there)
    for (const chunk of chunks) {
      yield chunk
      await runManager?.handleLLMNewToken(chunk.text, undefined, undefined, undefined, undefined, { chunk })
    }
  }
}

const makeTools = (count: number) =>
  Array.from({ length: count }, (_, i) =>
    tool(async () => "ok", {
      name: `tool_${i}`,
      description: toolDescription(i),
      schema: z.object({ query: z.string(), limit: z.number() })
    }))

const passThrough = (name: string) =>
  createMiddleware({
    name,
    beforeAgent: () => undefined,
    beforeModel: () => undefined,
    afterModel: () => undefined,
    afterAgent: () => undefined,
    wrapModelCall: (request, handler) => handler(request),
    wrapToolCall: (request, handler) => handler(request)
  })

/**
 * Builds the `createAgent` of a configuration. Fails if LangSmith tracing is
 * switched on in the environment (it would time the network).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeLangChainBench = (config: LangChainConfig): LangChainBench => {
  for (const name of ["LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"]) {
    if (process.env[name] === "true") throw new Error(`unset ${name}: the LangChain bench must not trace`)
  }
  const model = new ScriptedChatModel(config.steps)
  const checkpointer = new MemorySaver()
  const agent = createAgent({
    model,
    tools: makeTools(config.tools),
    middleware: Array.from({ length: config.middleware }, (_, i) => passThrough(`pass_${i}`)),
    checkpointer
  })
  const threadId = "bench"
  // each middleware hook is a graph node: a step takes 2 + 2 × middleware supersteps
  const runConfig = { configurable: { thread_id: threadId }, recursionLimit: 10_000 }
  const input = { messages: [{ role: "user", content: userInput }] }
  // `check` also streams "values" to read the final thread; the timed runs do not
  const run = async (check: boolean): Promise<LangChainCheck> => {
    model.call = 0
    try {
      let messages: ReadonlyArray<BaseMessage> = []
      let streamedText = ""
      let streamedChunks = 0
      if (config.mode === "generate") {
        messages = (await agent.invoke(input, runConfig)).messages
      } else {
        const streamMode = check ? ["updates", "messages", "values"] as const : ["updates", "messages"] as const
        for await (const [mode, payload] of await agent.stream(input, { ...runConfig, streamMode: [...streamMode] })) {
          if (!check) continue
          if (mode === "messages") {
            const [chunk] = payload as [BaseMessage, unknown]
            if (AIMessageChunk.isInstance(chunk) && chunk.text !== "") {
              streamedText += chunk.text
              streamedChunks++
            }
          } else if (mode === "values") {
            messages = (payload as { readonly messages: ReadonlyArray<BaseMessage> }).messages
          }
        }
      }
      return {
        steps: model.call,
        toolResults: messages.filter((m) => ToolMessage.isInstance(m)).length,
        text: messages.at(-1)?.text ?? "",
        streamedText,
        streamedChunks
      }
    } finally {
      await checkpointer.deleteThread(threadId)
    }
  }
  const runOnce = Effect.asVoid(Effect.tryPromise(() => run(false)))
  const check = Effect.tryPromise(() => run(true))
  return { runOnce, check }
}
