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
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as KeyValueStore from "@effect/platform/KeyValueStore"
import { AgentState, Checkpointer } from "@stepwise-agent/core"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { callParams } from "./fakes.js"
import { makeBench } from "./fixtures.js"
import { allocated, type Sample, sample, sampleMany, type SampleOptions } from "./measure.js"

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

/**
 * A checkpointer the step measurement runs on.
 *
 * @since 0.1.0
 * @category models
 */
export type StepBackend = "memory" | "file system" | "KeyValueStore (memory)" | "KeyValueStore (file system)"

/**
 * What one more step costs on threads of each size, on one checkpointer.
 *
 * @since 0.1.0
 * @category models
 */
export interface StepResult {
  readonly backend: StepBackend
  /** One row per thread size, in the order measured. */
  readonly sizes: ReadonlyArray<{
    readonly messages: number
    /** `(longRun − answerRun) / steps` CPU µs: one more tool step (model call, tool call, checkpoint). */
    readonly stepUs: number
    /** The same in wall-clock µs (file writes wait on the disk). */
    readonly stepWallUs: number
    /**
     * The checkpointer alone: CPU µs of one save that adds one message to
     * the thread it saved last, measured the same way (`steps` such saves
     * after a first one, minus the first one). The arrays are not made by a
     * run's encoder, which records what each one extends, so a log-structured
     * checkpointer compares each with the last one message by message (an
     * O(n) scan a run's step does not pay).
     */
    readonly saveUs: number
    /**
     * Bytes allocated by one more step, measured the same way (the two runs'
     * allocations, see `allocated`), when asked for (`allocation`).
     */
    readonly stepBytes?: number | undefined
  }>
  /** The largest thread's step ÷ the smallest thread's (CPU). */
  readonly ratio: number
  /** The largest thread's save ÷ the smallest thread's (CPU). */
  readonly saveRatio: number
}

const checkpointerOf = (
  backend: StepBackend,
  directory: string
): Effect.Effect<Checkpointer.Service, unknown> => {
  switch (backend) {
    case "memory":
      return Checkpointer.makeMemory
    case "file system":
      return Checkpointer.makeFileSystem(directory).pipe(Effect.provide(NodeContext.layer))
    case "KeyValueStore (memory)":
      return Checkpointer.makeKeyValueStore().pipe(Effect.provide(KeyValueStore.layerMemory))
    case "KeyValueStore (file system)":
      return Checkpointer.makeKeyValueStore().pipe(
        Effect.provide(KeyValueStore.layerFileSystem(directory)),
        Effect.provide(NodeContext.layer)
      )
  }
}

/**
 * Measures one more step on threads of each of `sizes` messages, on each
 * backend: a run that only answers and a run of `steps` tool steps then the
 * answer, on the stored thread (saved afresh before each run, as in
 * {@link measure}), timed round-robin across the sizes (see `sampleMany`);
 * the step is their difference ÷ `steps`. File-system backends write in a
 * fresh temporary directory each.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measureSteps = async (options: {
  readonly backends: ReadonlyArray<StepBackend>
  readonly sizes: ReadonlyArray<number>
  readonly steps: number
  readonly sampling: Omit<SampleOptions, "unitsPerRun">
  readonly log: (line: string) => void
  /** The agent's system prompt (none unless given). */
  readonly systemPrompt?: string | undefined
  /** Also measure the bytes a step allocates (run node with `--max-semi-space-size=128`, see `allocated`). */
  readonly allocation?: boolean | undefined
}): Promise<Array<StepResult>> => {
  const out: Array<StepResult> = []
  for (const backend of options.backends) {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-bench-steps-"))
    try {
      const workloads: Array<{ readonly effect: Effect.Effect<void, unknown>; readonly unitsPerRun: number }> = []
      for (const size of options.sizes) {
        const threadId = `steps-${size}`
        const encoded = AgentState.encodeMessages(buildMessages((size - 2) / 2))
        const stored = JSON.parse(
          JSON.stringify({ version: 1, threadId, messages: encoded, slices: {} })
        ) as Checkpointer.Checkpoint
        const bench = await Effect.runPromise(
          makeBench(
            {
              model: "raw",
              mode: "generate",
              middleware: 0,
              tools: 1,
              steps: options.steps,
              systemPrompt: options.systemPrompt
            },
            undefined,
            checkpointerOf(backend, directory)
          )
        )
        const runOn = (toolSteps: number) =>
          bench.checkpointer.save(threadId, stored).pipe(
            Effect.zipRight(Effect.sync(() => {
              bench.script.call = 0
              bench.script.toolSteps = toolSteps
            })),
            Effect.zipRight(bench.agent.run("And tomorrow?", { threadId })),
            Effect.flatMap((result) =>
              result.state.messages.length === size + 2 + 2 * toolSteps
                ? Effect.void
                : Effect.dieMessage(`the run on the ${size}-message thread did not see the whole thread`)
            )
          )
        // the saves alone: the stored thread, then `saves` times one more message (the checkpoints built
        // beforehand, so that copying the growing array is not timed)
        const grown: Array<Checkpointer.Checkpoint> = []
        for (let i = 0, messages = stored.messages; i < options.steps; i++) {
          messages = [...messages, { role: "assistant", content: [{ type: "text", text: `step ${i}` }] }]
          grown.push({ ...stored, messages })
        }
        const savesOn = (saves: number) =>
          Effect.gen(function*() {
            yield* bench.checkpointer.save(threadId, stored)
            for (let i = 0; i < saves; i++) yield* bench.checkpointer.save(threadId, grown[i]!)
          })
        workloads.push(
          { effect: runOn(0), unitsPerRun: 1 },
          { effect: runOn(options.steps), unitsPerRun: 1 },
          { effect: savesOn(0), unitsPerRun: 1 },
          { effect: savesOn(options.steps), unitsPerRun: 1 }
        )
      }
      const samples = await sampleMany(workloads, options.sampling)
      const bytes: Array<number | undefined> = []
      for (let i = 0; i < options.sizes.length; i++) {
        bytes.push(
          options.allocation === true
            ? ((await allocated(workloads[4 * i + 1]!.effect, 2, 1)) -
              (await allocated(workloads[4 * i]!.effect, 2, 1))) /
              options.steps
            : undefined
        )
      }
      const sizes = options.sizes.map((messages, i) => ({
        messages,
        stepUs: (samples[4 * i + 1]!.cpuUs - samples[4 * i]!.cpuUs) / options.steps,
        stepWallUs: (samples[4 * i + 1]!.wallUs - samples[4 * i]!.wallUs) / options.steps,
        saveUs: (samples[4 * i + 3]!.cpuUs - samples[4 * i + 2]!.cpuUs) / options.steps,
        stepBytes: bytes[i]
      }))
      const result: StepResult = {
        backend,
        sizes,
        ratio: sizes.at(-1)!.stepUs / sizes[0]!.stepUs,
        saveRatio: sizes.at(-1)!.saveUs / sizes[0]!.saveUs
      }
      options.log(
        `  ${backend.padEnd(28)} ${
          sizes.map((s) =>
            `${s.messages}: ${s.stepUs.toFixed(0)} µs CPU (${s.stepWallUs.toFixed(0)} wall), save ${
              s.saveUs.toFixed(0)
            }${s.stepBytes === undefined ? "" : `, ${(s.stepBytes / 1024).toFixed(1)} KiB allocated`}`
          ).join(", ")
        }; ratio ${result.ratio.toFixed(2)}, save ratio ${result.saveRatio.toFixed(2)}`
      )
      out.push(result)
    } finally {
      fs.rmSync(directory, { recursive: true, force: true })
    }
  }
  return out
}
