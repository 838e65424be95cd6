/**
 * Memory of a long thread, and what continuing it costs.
 *
 * The thread is built by constructing `Prompt` messages of the shapes an
 * agent run produces (the user message, `toolSteps` × (assistant tool call +
 * tool result), the final answer: `2 × toolSteps + 2` messages, 10,000 for
 * 4,999 tool steps) and storing them as the thread's checkpoint, read back
 * from JSON as a durable store would return it. The agent (raw fake model,
 * one tool, no middleware) then runs on that thread. Heap figures are
 * `heapUsed` deltas after two forced collections (`global.gc`, exposed with
 * `--expose-gc` or at run time via `v8.setFlagsFromString`), taken after a
 * macrotask and an empty Effect run.
 *
 * @since 0.1.0
 */
import { Prompt } from "@effect/ai"
import { AgentState, type Checkpointer } from "@stepwise-agent/core"
import { Effect } from "effect"
import { callParams } from "./fakes.js"
import { makeBench } from "./fixtures.js"
import { type Sample, sample, type SampleOptions } from "./measure.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface MemoryResult {
  readonly messages: number
  /** Heap of the messages as `Prompt.Message` values (built with `Prompt.makeMessage`). */
  readonly decodedBytes: number
  /** Heap added by `AgentState.encodeMessages` of them (the encoded copies a checkpoint holds, and their cache). */
  readonly encodedBytes: number
  /** `JSON.stringify` of the checkpoint, in bytes. */
  readonly checkpointJsonBytes: number
  /**
   * Heap held after a run on the thread, beyond the stored checkpoint: the
   * run's result (the decoded thread), the new checkpoint's array and the
   * loop's per-message encode cache.
   */
  readonly heldBytes: number
  /** A run on the thread that makes one model call (the answer): load, decode, answer, save. */
  readonly answerRun: Sample
  /** The same with 100 tool steps before the answer (per run). */
  readonly longRun: Sample
  /** `(longRun − answerRun) / 100`: what one more step costs on a 10,000-message thread. */
  readonly stepUs: number
}

const buildMessages = (toolSteps: number): Array<Prompt.Message> => {
  const out: Array<Prompt.Message> = [
    Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "What is the weather in Paris?" })] })
  ]
  for (let i = 0; i < toolSteps; i++) {
    const id = `call_${i}`
    out.push(Prompt.makeMessage("assistant", {
      content: [
        Prompt.makePart("tool-call", { id, name: "tool_0", params: { ...callParams }, providerExecuted: false })
      ]
    }))
    out.push(Prompt.makeMessage("tool", {
      content: [
        Prompt.makePart("tool-result", { id, name: "tool_0", result: "ok", isFailure: false, providerExecuted: false })
      ]
    }))
  }
  out.push(Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text: "It is sunny." })] }))
  return out
}

/**
 * Builds a long thread and measures it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measure = async (
  gc: () => void,
  toolSteps: number,
  sampling: SampleOptions
): Promise<MemoryResult> => {
  // the runtime keeps the last fiber's result reachable until the next run and
  // macrotask: flush both, or a result would be counted in the next delta
  const heap = async () => {
    await Effect.runPromise(Effect.void)
    await new Promise((resolve) => setTimeout(resolve, 10))
    gc()
    gc()
    return process.memoryUsage().heapUsed
  }
  const threadId = "long"
  const h0 = await heap()
  let constructed: Array<Prompt.Message> | undefined = buildMessages(toolSteps)
  const h1 = await heap()
  let encoded: Array<Prompt.MessageEncoded> | undefined = AgentState.encodeMessages(constructed)
  const h2 = await heap()
  const messages = constructed.length
  const json = JSON.stringify({ version: 1, threadId, messages: encoded, slices: {} })
  const checkpointJsonBytes = Buffer.byteLength(json)
  constructed = undefined
  encoded = undefined
  const stored = JSON.parse(json) as Checkpointer.Checkpoint

  const bench = await Effect.runPromise(
    makeBench({ model: "raw", mode: "generate", middleware: 0, tools: 1, steps: 100 })
  )
  const { agent, checkpointer, script } = bench
  const runOn = (toolStepsInRun: number) =>
    checkpointer.save(threadId, stored).pipe(
      Effect.zipRight(Effect.sync(() => {
        script.call = 0
        script.toolSteps = toolStepsInRun
      })),
      Effect.zipRight(agent.run("And tomorrow?", { threadId }))
    )
  // once before measuring, so that code compiled on first use is not counted as held
  await Effect.runPromise(runOn(0))
  await Effect.runPromise(checkpointer.delete(threadId))
  const h3 = await heap()
  let result: unknown = await Effect.runPromise(runOn(0))
  const h4 = await heap()
  if (
    (result as { readonly state: { readonly messages: ReadonlyArray<unknown> } }).state.messages.length !== messages + 2
  ) {
    throw new Error("the run on the long thread did not see the whole thread")
  }
  result = undefined
  await Effect.runPromise(checkpointer.delete(threadId))

  const answerRun = await sample(Effect.asVoid(runOn(0)), { ...sampling, unitsPerRun: 1 })
  const longRun = await sample(Effect.asVoid(runOn(100)), { ...sampling, unitsPerRun: 1 })
  await Effect.runPromise(checkpointer.delete(threadId))
  return {
    messages,
    decodedBytes: h1 - h0,
    encodedBytes: h2 - h1,
    checkpointJsonBytes,
    heldBytes: h4 - h3,
    answerRun,
    longRun,
    stepUs: (longRun.cpuUs - answerRun.cpuUs) / 100
  }
}
