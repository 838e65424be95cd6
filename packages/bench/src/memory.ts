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
import { allocated, median, type Sample, sample, sampleMany, type SampleOptions } from "./measure.js"

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

/**
 * How large the stored thread's messages are: `tiny` (a short tool call and an `"ok"` result, ~150 bytes of
 * JSON each) or `realistic` (~2 KiB of JSON each: a tool call with a paragraph of arguments, a result with a
 * page of text).
 *
 * @since 0.1.0
 * @category models
 */
export type MessageSize = "tiny" | "realistic"

/** About 2 KiB of prose, different for each `i` (so that no two messages share their strings). */
const filler = (i: number, bytes: number): string => {
  const words = ["weather", "forecast", "Paris", "humidity", "wind", "pressure", "cloud", "sunny", "rain", "mild"]
  let text = `Report ${i}:`
  for (let k = 0; text.length < bytes; k++) text += ` ${words[(i * 7 + k * 3) % words.length]} ${(i + k) % 97}`
  return text
}

/**
 * A thread of `2 * toolSteps + 2` messages: the question, `toolSteps` tool
 * calls of `tool_0` with their results, and an answer.
 *
 * @since 0.1.0
 * @category constructors
 */
export const buildMessages = (toolSteps: number, size: MessageSize = "tiny"): Array<Prompt.Message> => {
  const out: Array<Prompt.Message> = [
    Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "What is the weather in Paris?" })] })
  ]
  for (let i = 0; i < toolSteps; i++) {
    const id = `call_${i}`
    const params = size === "tiny" ? { ...callParams } : { ...callParams, context: filler(i, 1900) }
    out.push(Prompt.makeMessage("assistant", {
      content: [
        Prompt.makePart("tool-call", { id, name: "tool_0", params, providerExecuted: false })
      ]
    }))
    out.push(Prompt.makeMessage("tool", {
      content: [
        Prompt.makePart("tool-result", {
          id,
          name: "tool_0",
          result: size === "tiny" ? "ok" : filler(i + 1, 1950),
          isFailure: false,
          providerExecuted: false
        })
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
  /** The size of the stored thread's messages. */
  readonly messageSize: MessageSize
  /** Where each run started. */
  readonly start: ThreadStart
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
     * allocations, see `allocated`; on a grown thread, each run continuing the
     * thread a run saved, after a reset), when asked for (`allocation`).
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
 * the step is their difference ÷ `steps`. With `start: "grown"` the runs
 * continue the thread the last run saved instead (see `sampleGrown`).
 * File-system backends write in a fresh temporary directory each.
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
  /** The size of the stored thread's messages (`tiny` unless given). */
  readonly messageSize?: MessageSize | undefined
  /** Where each run starts (`stored` unless given): see {@link ThreadStart}. */
  readonly start?: ThreadStart | undefined
}): Promise<Array<StepResult>> => {
  const out: Array<StepResult> = []
  const messageSize = options.messageSize ?? "tiny"
  const start = options.start ?? "stored"
  for (const backend of options.backends) {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-bench-steps-"))
    try {
      const workloads: Array<{ readonly effect: Effect.Effect<void, unknown>; readonly unitsPerRun: number }> = []
      const grownRuns: Array<GrownRuns> = []
      for (const size of options.sizes) {
        const threadId = `steps-${size}`
        const encoded = AgentState.encodeMessages(buildMessages((size - 2) / 2, messageSize))
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
        /** A run of `toolSteps` tool steps on the thread as stored now; the thread's length after it. */
        const continueThread = (toolSteps: number) =>
          Effect.suspend(() => {
            bench.script.call = 0
            bench.script.toolSteps = toolSteps
            return Effect.map(bench.agent.run("And tomorrow?", { threadId }), (result) => result.state.messages.length)
          })
        const runOn = (toolSteps: number) =>
          bench.checkpointer.save(threadId, stored).pipe(
            Effect.zipRight(continueThread(toolSteps)),
            Effect.flatMap((length) =>
              length === size + 2 + 2 * toolSteps
                ? Effect.void
                : Effect.dieMessage(`the run on the ${size}-message thread did not see the whole thread`)
            )
          )
        if (start === "grown") {
          grownRuns.push({
            size,
            reset: Effect.zipRight(bench.checkpointer.save(threadId, stored), continueThread(0)),
            run: continueThread
          })
        }
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
          // (a grown thread's runs are timed by `sampleGrown`)
          { effect: start === "grown" ? Effect.void : runOn(0), unitsPerRun: 1 },
          { effect: start === "grown" ? Effect.void : runOn(options.steps), unitsPerRun: 1 },
          { effect: savesOn(0), unitsPerRun: 1 },
          { effect: savesOn(options.steps), unitsPerRun: 1 }
        )
      }
      const samples = await sampleMany(workloads, options.sampling)
      const grownSteps = start === "grown" ? await sampleGrown(grownRuns, options.steps, options.sampling) : undefined
      const bytes: Array<number | undefined> = []
      for (let i = 0; i < options.sizes.length; i++) {
        // a grown thread's runs each continue a thread the last run saved (reset first, so it stays near its size)
        const grown = grownRuns[i]
        const [short, long] = grown === undefined
          ? [workloads[4 * i]!.effect, workloads[4 * i + 1]!.effect]
          : [Effect.zipRight(grown.reset, grown.run(0)), Effect.zipRight(grown.reset, grown.run(options.steps))]
        bytes.push(
          options.allocation === true
            ? ((await allocated(Effect.asVoid(long), 2, 1)) - (await allocated(Effect.asVoid(short), 2, 1))) /
              options.steps
            : undefined
        )
      }
      const sizes = options.sizes.map((messages, i) => ({
        messages,
        stepUs: grownSteps?.[i]!.cpuUs ?? (samples[4 * i + 1]!.cpuUs - samples[4 * i]!.cpuUs) / options.steps,
        stepWallUs: grownSteps?.[i]!.wallUs ??
          (samples[4 * i + 1]!.wallUs - samples[4 * i]!.wallUs) / options.steps,
        saveUs: (samples[4 * i + 3]!.cpuUs - samples[4 * i + 2]!.cpuUs) / options.steps,
        stepBytes: bytes[i]
      }))
      const result: StepResult = {
        backend,
        messageSize,
        start,
        sizes,
        ratio: sizes.at(-1)!.stepUs / sizes[0]!.stepUs,
        saveRatio: sizes.at(-1)!.saveUs / sizes[0]!.saveUs
      }
      options.log(
        `  ${backend.padEnd(28)} ${messageSize.padEnd(9)} ${start.padEnd(6)} ${
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

/**
 * Where each run of a step measurement starts: `stored`, a thread saved
 * afresh (from the same stored checkpoint) before each run; `grown`, the
 * thread the last run saved, as an app keeps using one thread.
 *
 * @since 0.1.0
 * @category models
 */
export type ThreadStart = "stored" | "grown"

interface GrownRuns {
  readonly size: number
  /** Saves the stored thread and runs once on it, so that the checkpointer holds what a run saved. */
  readonly reset: Effect.Effect<number, unknown>
  /** A run of that many tool steps continuing the thread; the thread's length after it. */
  readonly run: (toolSteps: number) => Effect.Effect<number, unknown>
}

/**
 * One more step on a thread that keeps growing: round-robin across the sizes, pairs of runs (one that only
 * answers, one of `steps` tool steps) continue the thread, each timed alone; once the thread has grown by 200
 * messages past its size it is reset, untimed. The step is the difference of the two medians ÷ `steps`.
 */
const sampleGrown = async (
  threads: ReadonlyArray<GrownRuns>,
  steps: number,
  sampling: Omit<SampleOptions, "unitsPerRun">
): Promise<Array<{ readonly cpuUs: number; readonly wallUs: number }>> => {
  const times = threads.map(() => ({
    short: { cpu: [] as Array<number>, wall: [] as Array<number> },
    long: { cpu: [] as Array<number>, wall: [] as Array<number> }
  }))
  const lengths = await Promise.all(threads.map((thread) => Effect.runPromise(thread.reset)))
  const timed = async (effect: Effect.Effect<number, unknown>, into: { cpu: Array<number>; wall: Array<number> }) => {
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    const length = await Effect.runPromise(effect)
    const t1 = performance.now()
    const used = process.cpuUsage(cpu0)
    into.wall.push((t1 - t0) * 1000)
    into.cpu.push(used.user + used.system)
    return length
  }
  const warmUntil = performance.now() + sampling.warmupMs
  const rounds = Math.max(5, sampling.samples * 5)
  for (let recorded = 0; recorded < rounds;) {
    const warm = performance.now() < warmUntil
    if (!warm) recorded++
    for (const [i, thread] of threads.entries()) {
      const sampleUntil = performance.now() + sampling.minSampleMs
      while (performance.now() < sampleUntil) {
        if (lengths[i]! > thread.size + 200) lengths[i] = await Effect.runPromise(thread.reset)
        const into = warm ? undefined : times[i]!
        const scratch = { cpu: [] as Array<number>, wall: [] as Array<number> }
        lengths[i] = await timed(thread.run(0), into?.short ?? scratch)
        lengths[i] = await timed(thread.run(steps), into?.long ?? scratch)
      }
    }
  }
  return times.map(({ long, short }) => ({
    cpuUs: (median(long.cpu) - median(short.cpu)) / steps,
    wallUs: (median(long.wall) - median(short.wall)) / steps
  }))
}

/**
 * The first load of a long thread from a KeyValueStore (in memory), alone and with the first save: a
 * checkpointer instance that has not seen the thread (another instance
 * saved it) loads it and decodes its messages, as the first run on the thread
 * in a new process does.
 *
 * @since 0.1.0
 * @category models
 */
export interface FirstLoadResult {
  readonly messageSize: MessageSize
  readonly messages: number
  /** The thread's messages as JSON, in bytes. */
  readonly jsonBytes: number
  /** CPU µs of the load and decode. */
  readonly loadUs: number
  /**
   * CPU µs of the load, decode and first save of the thread with one more message (what the first step of a run
   * on a stored thread adds to the load, in a new process).
   */
  readonly loadAndSaveUs: number
}

/**
 * Measures {@link FirstLoadResult} for threads of each of `sizes` messages.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measureFirstLoad = async (options: {
  readonly sizes: ReadonlyArray<number>
  readonly messageSize: MessageSize
  readonly sampling: Omit<SampleOptions, "unitsPerRun">
  readonly log: (line: string) => void
}): Promise<Array<FirstLoadResult>> => {
  const out: Array<FirstLoadResult> = []
  for (const size of options.sizes) {
    const threadId = `load-${size}`
    const messages = AgentState.encodeMessages(buildMessages((size - 2) / 2, options.messageSize))
    const jsonBytes = Buffer.byteLength(JSON.stringify(messages))
    const store = await Effect.runPromise(Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory))
    const writer = await Effect.runPromise(
      Effect.provideService(Checkpointer.makeKeyValueStore(), KeyValueStore.KeyValueStore, store)
    )
    // (the saves of the second workload go to a thread of their own)
    const savedId = `${threadId}-saved`
    await Effect.runPromise(writer.save(threadId, { version: 1, threadId, messages, slices: {} }))
    await Effect.runPromise(writer.save(savedId, { version: 1, threadId: savedId, messages, slices: {} }))
    const firstLoad = Effect.gen(function*() {
      const reader = yield* Effect.provideService(Checkpointer.makeKeyValueStore(), KeyValueStore.KeyValueStore, store)
      const loaded = yield* reader.load(threadId)
      if (loaded._tag === "None") return yield* Effect.dieMessage("the thread is not stored")
      const decoded = yield* AgentState.decodeMessages(loaded.value.messages)
      if (decoded.length !== size) return yield* Effect.dieMessage("the load did not read the whole thread")
    })
    // the same, then a save of the thread with one more message (always `size` + 1 messages: the message added
    // by the save before is replaced)
    const firstSave = Effect.gen(function*() {
      const reader = yield* Effect.provideService(Checkpointer.makeKeyValueStore(), KeyValueStore.KeyValueStore, store)
      const loaded = yield* reader.load(savedId)
      if (loaded._tag === "None") return yield* Effect.dieMessage("the thread is not stored")
      yield* AgentState.decodeMessages(loaded.value.messages)
      const next = loaded.value.messages.slice(0, size).concat([{ role: "user", content: "And tomorrow?" }])
      yield* reader.save(savedId, { ...loaded.value, messages: next })
    })
    const [result, withSave] = await sampleMany(
      [{ effect: firstLoad, unitsPerRun: 1 }, { effect: firstSave, unitsPerRun: 1 }],
      options.sampling
    )
    options.log(
      `  first load from a KeyValueStore, ${options.messageSize} messages, ${size}: ${
        (result!.cpuUs / 1000).toFixed(2)
      } ms CPU, with the first save ${(withSave!.cpuUs / 1000).toFixed(2)} ms (${
        (jsonBytes / 2 ** 20).toFixed(1)
      } MiB of JSON)`
    )
    out.push({
      messageSize: options.messageSize,
      messages: size,
      jsonBytes,
      loadUs: result!.cpuUs,
      loadAndSaveUs: withSave!.cpuUs
    })
  }
  return out
}
