/**
 * Scale in one process: many idle threads, many concurrent runs, one agent.
 *
 * The model here is stateless and driven by the prompt, not by a counter, so
 * concurrent runs cannot share a script: when the last message is the user's,
 * it calls `echo` with that text; when it is the tool's result, it answers
 * with that result. Each run's input names its thread, so its final answer and
 * its stored thread must name that thread and no other: any bleed between
 * threads (a lock, a cache or a checkpoint of another thread's run) fails the
 * measurement.
 *
 * - **Idle threads**: one agent (memory checkpointer) runs one short run
 *   (model → tool → model) on each of `threads` threads; the heap held after
 *   two forced collections, divided by the threads, is what an idle thread
 *   costs. That is its stored checkpoint (4 messages) and whatever the agent
 *   keeps per thread (nothing, if the locks and caches are released).
 * - **Concurrent runs**: `concurrent` runs started at once on as many fresh
 *   threads, all awaited; rounds are repeated and the median round is
 *   reported as runs per second of wall clock and CPU per run.
 *
 * @since 0.1.0
 */
import type { Prompt } from "@effect/ai"
import { LanguageModel, Response, Tool, Toolkit } from "@effect/ai"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { Effect, Schema } from "effect"
import { performance } from "node:perf_hooks"
import { cpuUs, median } from "./measure.js"

/**
 * What the scale section measured.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScaleResult {
  readonly idle: {
    readonly threads: number
    /** Heap held per idle thread after its run, in bytes. */
    readonly bytesPerThread: number
    /** Wall clock to run them all, 64 at a time, in ms. */
    readonly wallMs: number
  }
  readonly concurrent: {
    readonly runs: number
    readonly rounds: number
    /** Median over rounds of runs completed per second of wall clock. */
    readonly runsPerSecond: number
    /** Median over rounds of CPU (user + system) per run, in µs. */
    readonly cpuUsPerRun: number
    /** Median over rounds of the wall clock of a round, in ms. */
    readonly roundMs: number
  }
}

const Echo = Tool.make("echo", {
  description: "Returns its text",
  parameters: { text: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(Echo)
const ToolsLive = Tools.toLayer({ echo: ({ text }) => Effect.succeed(`echo:${text}`) })

const usage = new Response.Usage({ inputTokens: 10, outputTokens: 5, totalTokens: 15 })

const textOf = (message: Prompt.Message): string => {
  if (message.role === "tool") {
    const part = message.content[0]
    return part !== undefined && part.type === "tool-result" ? String(part.result) : ""
  }
  if (typeof message.content === "string") return message.content
  let out = ""
  for (const part of message.content) if (part.type === "text") out += part.text
  return out
}

/** A stateless model: a tool call for the user's text, then the tool's result as the answer. */
const promptDrivenModel: LanguageModel.Service = {
  generateText: (options: { readonly prompt: Prompt.Prompt }) =>
    Effect.sync(() => {
      const messages = options.prompt.content
      const last = messages[messages.length - 1]!
      const parts: Array<Response.AnyPart> = last.role === "tool"
        ? [
          Response.makePart("text", { text: textOf(last) }),
          Response.makePart("finish", { reason: "stop", usage })
        ]
        : [
          Response.makePart("tool-call", {
            id: `call_${messages.length}`,
            name: "echo",
            params: { text: textOf(last) },
            providerExecuted: false
          }),
          Response.makePart("finish", { reason: "tool-calls", usage })
        ]
      return new LanguageModel.GenerateTextResponse(parts as Array<Response.Part<any>>)
    }),
  streamText: () => Effect.dieMessage("streamText is not used by the scale section"),
  generateObject: () => Effect.dieMessage("generateObject is not used by the scale section")
} as unknown as LanguageModel.Service

const makeAgent = Effect.gen(function*() {
  const checkpointer = yield* Checkpointer.makeMemory
  const agent = yield* Agent.make({ toolkit: Tools, maxSteps: 3 }).pipe(
    Effect.provide(ToolsLive),
    Effect.provideService(LanguageModel.LanguageModel, promptDrivenModel),
    Effect.provideService(Checkpointer.Checkpointer, checkpointer)
  )
  return { agent, checkpointer }
})

type Made = Effect.Effect.Success<typeof makeAgent>

/** One run on `threadId`; fails the measurement unless the answer and the stored thread are this thread's own. */
const runChecked = ({ agent, checkpointer }: Made, threadId: string) =>
  Effect.gen(function*() {
    const input = `from ${threadId}`
    const result = yield* agent.run(input, { threadId })
    if (result._tag !== "Completed" || result.text !== `echo:${input}`) {
      return yield* Effect.dieMessage(`thread ${threadId} answered ${JSON.stringify(result)}`)
    }
    const stored = yield* checkpointer.load(threadId)
    // each of the 4 stored messages (question, call, result, answer) carries this thread's input
    const texts = stored._tag === "Some" ? stored.value.messages.map((message) => JSON.stringify(message)) : []
    if (texts.length !== 4 || texts.some((text) => !text.includes(`${threadId}"`))) {
      return yield* Effect.dieMessage(`thread ${threadId} stored ${texts.length} messages: ${texts.join(" | ")}`)
    }
  })

const settledHeap = async (gc: () => void) => {
  await new Promise((resolve) => setTimeout(resolve, 0))
  gc()
  gc()
  return process.memoryUsage().heapUsed
}

/**
 * Runs the scale section.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measure = async (options: {
  readonly gc: () => void
  readonly quick: boolean
  readonly log: (line: string) => void
}): Promise<ScaleResult> => {
  const threads = options.quick ? 2_000 : 10_000
  const concurrent = 1_000
  const rounds = options.quick ? 3 : 7

  // idle threads: the heap one agent holds for them after their runs
  const made = await Effect.runPromise(makeAgent)
  // warm the agent up on threads it then forgets
  for (let i = 0; i < 200; i++) await Effect.runPromise(runChecked(made, `warm-${i}`))
  for (let i = 0; i < 200; i++) await Effect.runPromise(made.checkpointer.delete(`warm-${i}`))
  const before = await settledHeap(options.gc)
  const started = performance.now()
  await Effect.runPromise(
    Effect.forEach(Array.from({ length: threads }, (_, i) => `thread-${i}`), (id) => runChecked(made, id), {
      concurrency: 64,
      discard: true
    })
  )
  const wallMs = performance.now() - started
  const after = await settledHeap(options.gc)
  const bytesPerThread = (after - before) / threads
  options.log(
    `  ${threads} idle threads: ${(bytesPerThread / 1024).toFixed(2)} KiB each ` +
      `(${((after - before) / 2 ** 20).toFixed(1)} MiB), run in ${wallMs.toFixed(0)} ms`
  )

  // concurrent runs: every run of a round started at once, on a fresh agent per round
  const perRound: Array<{ wallMs: number; cpuUs: number }> = []
  for (let round = 0; round < rounds; round++) {
    const fresh = await Effect.runPromise(makeAgent)
    const ids = Array.from({ length: concurrent }, (_, i) => `thread-${round}-${i}`)
    const cpu0 = cpuUs()
    const wall0 = performance.now()
    await Effect.runPromise(
      Effect.forEach(ids, (id) => runChecked(fresh, id), { concurrency: "unbounded", discard: true })
    )
    perRound.push({ wallMs: performance.now() - wall0, cpuUs: cpuUs() - cpu0 })
  }
  const roundMs = median(perRound.map((r) => r.wallMs))
  const result: ScaleResult = {
    idle: { threads, bytesPerThread, wallMs },
    concurrent: {
      runs: concurrent,
      rounds,
      runsPerSecond: concurrent / (roundMs / 1000),
      cpuUsPerRun: median(perRound.map((r) => r.cpuUs / concurrent)),
      roundMs
    }
  }
  options.log(
    `  ${concurrent} concurrent runs: ${result.concurrent.runsPerSecond.toFixed(0)} runs/s, ` +
      `${result.concurrent.cpuUsPerRun.toFixed(0)} µs CPU per run (median of ${rounds} rounds, ${
        roundMs.toFixed(0)
      } ms each)`
  )
  return result
}

/**
 * The scale section of `docs/benchmarks.md`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const render = (result: ScaleResult): string =>
  [
    "One agent (memory checkpointer, one tool, no middleware) on a stateless model driven by the prompt: it " +
    "calls `echo` with the user's text, then answers with the tool's result, so a run is two model calls and a " +
    "tool call. Every run's input names its thread; the bench fails unless each run's answer and each stored " +
    "thread (all four messages) carry that thread's input and no other: no bleed between threads.",
    "",
    "| workload | figure |",
    "|---|---|",
    `| ${result.idle.threads.toLocaleString("en-US")} idle threads (one run each, 64 at a time, then two forced ` +
    `collections) | **${(result.idle.bytesPerThread / 1024).toFixed(2)} KiB** of heap per idle thread |`,
    `| ${result.concurrent.runs.toLocaleString("en-US")} runs started at once on fresh threads (median of ` +
    `${result.concurrent.rounds} rounds) | **${result.concurrent.runsPerSecond.toFixed(0)} runs/s** wall clock ` +
    `(${result.concurrent.roundMs.toFixed(0)} ms a round), ${
      result.concurrent.cpuUsPerRun.toFixed(0)
    } µs CPU per run |`,
    "",
    "An idle thread's heap is its stored checkpoint (four encoded messages) and the decoded copy the loop keeps " +
    "with it (a load of a thread this process saved is one lookup); no lock or run state outlives a run."
  ].join("\n")
