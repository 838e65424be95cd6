/**
 * What a `task` call (SubAgents) adds to a step: a parent run whose one tool
 * call is a `task` handed to a child agent that answers in one model call,
 * beside the same parent calling an ordinary tool, and beside the child's
 * run alone. The overhead of delegating is `task − tool − child`: what the
 * middleware, the child's thread and its journal path cost beyond the work
 * the child itself does. CPU per parent run, timed round-robin in one
 * process (`sampleMany`); bytes allocated per run (`allocated`).
 *
 * Run: `node --expose-gc --max-semi-space-size=128 --conditions=@stepwise-agent/source --import tsx
 * packages/bench/src/subAgentStep.ts [--quick]`. `micro.ts` reports the same rows.
 *
 * @since 0.1.0
 */
import { LanguageModel, Response } from "@effect/ai"
import type { Toolkit } from "@effect/ai"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { SubAgents } from "@stepwise-agent/middleware"
import { Effect, Stream } from "effect"
import { fileURLToPath } from "node:url"
import { callParams, makeToolkit, usage, userInput } from "./fakes.js"
import { allocated, type Sample, sampleMany, type SampleOptions } from "./measure.js"
import type { MicroResult } from "./micro.js"

const decodedUsage = new Response.Usage(usage)
const finish = (reason: "tool-calls" | "stop") => Response.makePart("finish", { reason, usage: decodedUsage })
const call = (
  name: string,
  params: unknown
) => [Response.makePart("tool-call", { id: "call_1", name, params, providerExecuted: false }), finish("tool-calls")]
const answer = [Response.makePart("text", { text: "It is sunny." }), finish("stop")]

/** A decoded-parts model answering `replies` in turn, from the first again after `reset`. */
const replying = (replies: ReadonlyArray<ReadonlyArray<Response.AnyPart>>) => {
  let next = 0
  const model = {
    generateText: () =>
      Effect.sync(() =>
        new LanguageModel.GenerateTextResponse(replies[Math.min(next++, replies.length - 1)] as Array<any>)
      ),
    streamText: () => Stream.suspend(() => Stream.fromIterable(replies[Math.min(next++, replies.length - 1)]!)),
    generateObject: () => Effect.dieMessage("generateObject is not used by the benchmark")
  } as unknown as LanguageModel.Service
  return { model, reset: () => void (next = 0) }
}

interface Workload {
  readonly name: string
  readonly note: string
  readonly effect: Effect.Effect<void, unknown>
}

/** The three workloads: a parent with a tool call, the same with a `task` call, the child alone. */
export const workloads: Effect.Effect<ReadonlyArray<Workload>, unknown> = Effect.gen(function*() {
  const checkpointer = yield* Checkpointer.makeMemory
  const threadId = "bench"
  const childThread = `${threadId}/task/call_1/1`
  const childModel = replying([answer])
  const child = yield* Agent.make({}).pipe(
    Effect.provideService(LanguageModel.LanguageModel, childModel.model),
    Effect.provideService(Checkpointer.Checkpointer, checkpointer)
  )
  const toolModel = replying([call("tool_0", callParams), answer])
  const { kit, layer } = makeToolkit(1)
  const withTool = yield* Agent.make({ toolkit: kit as unknown as Effect.Effect<Toolkit.WithHandler<any>> }).pipe(
    Effect.provide(layer),
    Effect.provideService(LanguageModel.LanguageModel, toolModel.model),
    Effect.provideService(Checkpointer.Checkpointer, checkpointer)
  )
  const taskModel = replying([call("task", { agent: "worker", task: userInput }), answer])
  const withTask = yield* Agent.make({
    middleware: [SubAgents.middleware({ agents: { worker: { description: "Looks things up", agent: child } } })]
  }).pipe(
    Effect.provideService(LanguageModel.LanguageModel, taskModel.model),
    Effect.provideService(Checkpointer.Checkpointer, checkpointer)
  )
  const fresh = (reset: () => void, run: Effect.Effect<unknown, unknown>, ...threads: ReadonlyArray<string>) =>
    Effect.suspend(() => {
      reset()
      childModel.reset()
      return run
    }).pipe(
      Effect.ensuring(Effect.orDie(Effect.forEach(threads, (id) => checkpointer.delete(id), { discard: true }))),
      Effect.asVoid
    )
  /** A workload that is run once first and must complete after `steps` model calls. */
  const checked = (
    name: string,
    note: string,
    steps: number,
    reset: () => void,
    run: Effect.Effect<{ readonly _tag: string; readonly steps: number }, unknown>,
    ...threads: ReadonlyArray<string>
  ) =>
    Effect.gen(function*() {
      let result: { readonly _tag: string; readonly steps: number } | undefined
      yield* fresh(reset, Effect.map(run, (ended) => void (result = ended)), ...threads)
      if (result?._tag !== "Completed" || result.steps !== steps) {
        return yield* Effect.dieMessage(`"${name}" ended as ${result?._tag} after ${result?.steps} step(s)`)
      }
      return { name, note, effect: fresh(reset, run, ...threads) }
    })
  return [
    yield* checked(
      "parent step with a tool call (2 model calls, 1 tool)",
      "the baseline: an ordinary tool",
      2,
      toolModel.reset,
      withTool.run(userInput, { threadId }),
      threadId
    ),
    yield* checked(
      "parent step with a `task` call (2 model calls, a child of 1 model call)",
      "SubAgents: the call runs a child on its own thread",
      2,
      taskModel.reset,
      withTask.run(userInput, { threadId }),
      threadId,
      childThread
    ),
    yield* checked(
      "the child's run alone (1 model call)",
      "what the child does itself",
      1,
      () => undefined,
      child.run(userInput, { threadId: childThread }),
      childThread
    )
  ]
})

/**
 * The rows: the three workloads, and the overhead of the `task` call
 * (`task − tool − child`), CPU per parent run.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measure = async (sampling: Omit<SampleOptions, "unitsPerRun">): Promise<Array<MicroResult>> => {
  const all = await Effect.runPromise(workloads)
  const timed = await sampleMany(all.map((w) => ({ effect: w.effect, unitsPerRun: 1 })), sampling)
  const [tool, task, child] = timed as [Sample, Sample, Sample]
  const rows: Array<MicroResult> = all.map((w, i) => ({ name: w.name, note: w.note, result: timed[i]! }))
  rows.push({
    name: "a `task` call's overhead (`task` − tool − child)",
    note: "what delegating adds to a step beyond the child's own work",
    result: {
      ...task,
      cpuUs: task.cpuUs - tool.cpuUs - child.cpuUs,
      wallUs: task.wallUs - tool.wallUs - child.wallUs
    }
  })
  return rows
}

const main = async () => {
  const quick = process.argv.includes("--quick")
  const sampling = quick
    ? { warmupMs: 200, minSampleMs: 20, samples: 5 }
    : { warmupMs: 800, minSampleMs: 40, samples: 15 }
  const rows = await measure(sampling)
  const all = await Effect.runPromise(workloads)
  const bytes: Array<number> = []
  for (const w of all) bytes.push(await allocated(w.effect, 50, 1))
  bytes.push(bytes[1]! - bytes[0]! - bytes[2]!)
  console.log("| workload | µs CPU per run | KiB allocated per run |")
  console.log("|---|---|---|")
  rows.forEach((row, i) =>
    console.log(`| ${row.name} | ${row.result.cpuUs.toFixed(0)} | ${(bytes[i]! / 1024).toFixed(1)} |`)
  )
}

if (process.argv[1] === fileURLToPath(import.meta.url)) void main()
