/**
 * What a step costs on a long thread, per checkpointer: a run that makes one
 * model call (the answer) on a thread of `messages` messages stored in the
 * memory, file-system (temporary folder) or `KeyValueStore` (in memory)
 * checkpointer. Each run loads the thread, answers and saves it, so the
 * thread grows by two messages a run, as a conversation does: a timed batch
 * is `runs` runs on the thread stored afresh (not timed) before the batch.
 *
 * @since 0.1.0
 */
import { LanguageModel, Prompt } from "@effect/ai"
import type { Toolkit } from "@effect/ai"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as KeyValueStore from "@effect/platform/KeyValueStore"
import { Agent, AgentState, Checkpointer } from "@stepwise-agent/core"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import { callParams, makeToolkit, rawModel, type Script } from "./fakes.js"
import { median } from "./measure.js"

/**
 * The checkpointers measured.
 *
 * @since 0.1.0
 * @category models
 */
export type Store = "memory" | "fileSystem" | "keyValueStore"

/**
 * @since 0.1.0
 * @category models
 */
export interface LongThreadResult {
  readonly store: Store
  readonly messages: number
  /** Median CPU (user + system) µs of one run of one model call on the thread: load, answer, save. */
  readonly cpuUs: number
  /** Median wall-clock µs of the same. */
  readonly wallUs: number
}

/**
 * How much to measure: `batches` timed batches of `runs` runs each, after
 * `warmup` untimed batches.
 *
 * @since 0.1.0
 * @category models
 */
export interface Sampling {
  readonly warmup: number
  readonly batches: number
  readonly runs: number
}

/** `count` (even) messages of the shapes a run produces: a user message, tool calls and their results, an answer. */
const buildMessages = (count: number): Array<Prompt.Message> => {
  const out: Array<Prompt.Message> = [
    Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "What is the weather in Paris?" })] })
  ]
  for (let i = 0; out.length < count - 1; i++) {
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

const makeCheckpointer = (store: Store, directory: string): Effect.Effect<Checkpointer.Checkpointer.Service, unknown> =>
  store === "memory"
    ? Checkpointer.makeMemory
    : store === "fileSystem"
    ? Effect.provide(Checkpointer.makeFileSystem(directory), NodeContext.layer)
    : Effect.provide(Checkpointer.makeKeyValueStore(), KeyValueStore.layerMemory)

/**
 * Measures a step on a thread of `messages` messages in `store`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measure = async (store: Store, messages: number, sampling: Sampling): Promise<LongThreadResult> => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-long-thread-"))
  try {
    const threadId = "long"
    const script: Script = { toolSteps: 0, call: 0 }
    const { kit, layer } = makeToolkit(1)
    const checkpointer = await Effect.runPromise(makeCheckpointer(store, directory))
    const agent = await Effect.runPromise(
      Agent.make({ toolkit: kit as unknown as Effect.Effect<Toolkit.WithHandler<any>>, maxSteps: 2 }).pipe(
        Effect.provide(layer),
        Effect.provideService(LanguageModel.LanguageModel, rawModel(script)),
        Effect.provideService(Checkpointer.Checkpointer, checkpointer)
      )
    )
    // stored as a durable store returns it: read back from JSON
    const encoded = JSON.parse(JSON.stringify(AgentState.encodeMessages(buildMessages(messages))))
    const seed = checkpointer.save(threadId, { version: 1, threadId, messages: encoded, slices: {} })
    const run = Effect.suspend(() => {
      script.call = 0
      return agent.run("And tomorrow?", { threadId })
    })
    const cpu: Array<number> = []
    const wall: Array<number> = []
    for (let batch = 0; batch < sampling.warmup + sampling.batches; batch++) {
      await Effect.runPromise(seed)
      const cpu0 = process.cpuUsage()
      const t0 = performance.now()
      for (let i = 0; i < sampling.runs; i++) await Effect.runPromise(run)
      const t1 = performance.now()
      const used = process.cpuUsage(cpu0)
      if (batch < sampling.warmup) continue
      wall.push((t1 - t0) * 1000 / sampling.runs)
      cpu.push((used.user + used.system) / sampling.runs)
    }
    return { store, messages, cpuUs: median(cpu), wallUs: median(wall) }
  } finally {
    fs.rmSync(directory, { recursive: true, force: true })
  }
}
