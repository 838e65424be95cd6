/**
 * The child process of the ablation (`ablation.ts`): loads one copy of the
 * core (`argv[2]`, a directory of it transpiled to JavaScript) and, on the
 * parent's messages, builds the agent of a configuration, warms it up and
 * times batches of whole runs, answering each with its CPU time. One copy per process, so no variant's
 * code shares the Effect runtime's call sites (and their inline caches) with
 * another's.
 *
 * @since 0.1.0
 */
import { LanguageModel, Prompt } from "@effect/ai"
import { Effect, Exit, Layer, Scope, Stream } from "effect"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { makeToolkit, type Mode, rawModel, type Script, userInput } from "./fakes.js"

/**
 * What a configuration runs: a generated or a streamed run, or a durable one
 * (`AgentWorkflow` on `AgentEngine.layerMemory`, the copy's workflow package).
 *
 * @since 0.1.0
 * @category models
 */
export type AblationMode = Mode | "durable"

/**
 * What the parent asks: build a configuration (answered with `ready` and the
 * warm CPU µs of a run), or time `runs` runs of it (answered with their CPU µs
 * per run).
 *
 * @since 0.1.0
 * @category models
 */
export type Request =
  | {
    readonly _tag: "build"
    readonly mode: AblationMode
    readonly middleware: number
    readonly steps: number
    readonly options: Readonly<Record<string, unknown>>
  }
  | { readonly _tag: "batch"; readonly runs: number }

const dir = process.argv[2]
if (dir === undefined) throw new Error("ablationChild.ts needs the directory of a core copy")
const load = (file: string) => import(pathToFileURL(path.join(dir, file)).href)
const [Agent, Middleware, Checkpointer] = await Promise.all([
  load("Agent.js"),
  load("Middleware.js"),
  load("Checkpointer.js")
])

/** What both kinds of agent run on: the script of the raw fake, its one tool, the pass-through middleware. */
const workload = (request: Extract<Request, { _tag: "build" }>) => {
  const script: Script = { toolSteps: request.steps, call: 0 }
  const { kit, layer } = makeToolkit(1)
  const middleware = Array.from({ length: request.middleware }, (_, i) =>
    // every hook passes through: a node hook returns nothing, a wrap hook calls `next` once
    Middleware.make({
      name: `pass_${i}`,
      beforeAgent: () => Effect.void,
      beforeModel: () => Effect.void,
      afterModel: () => Effect.void,
      afterAgent: () => Effect.void,
      wrapModelCall: (request: unknown, next: (request: unknown) => unknown) => next(request),
      wrapToolCall: (request: unknown, next: (request: unknown) => unknown) => next(request)
    }))
  const agentOptions = { toolkit: kit, middleware, maxSteps: request.steps + 1, ...request.options }
  return { script, layer, agentOptions, model: rawModel(script) }
}

/** CPU µs per run of `effect`, over `runs` runs. */
const cpuPerRun = async (effect: Effect.Effect<void, unknown>, runs: number): Promise<number> => {
  const start = process.cpuUsage()
  for (let i = 0; i < runs; i++) await Effect.runPromise(effect)
  const used = process.cpuUsage(start)
  return (used.user + used.system) / runs
}

/**
 * A durable run of the configuration: started, then awaited, on the memory
 * engine; its thread deleted after. The engine keeps every execution and
 * activity it ran (~30 KiB per run here), and a heap that grows makes the
 * garbage collector's cost drift from batch to batch by more than the
 * variants differ: `renew` replaces the stack with a fresh one before each
 * batch (untimed).
 */
const buildDurable = (request: Extract<Request, { _tag: "build" }>) =>
  Effect.gen(function*() {
    const [AgentWorkflow, AgentEngine, RunStore] = yield* Effect.promise(() =>
      Promise.all([load("workflow/AgentWorkflow.js"), load("workflow/AgentEngine.js"), load("workflow/RunStore.js")])
    )
    const { agentOptions, layer, model, script } = workload(request)
    const agent = (Agent.layer(agentOptions) as Layer.Layer<any>).pipe(
      Layer.provide(layer),
      Layer.provide(Layer.succeed(LanguageModel.LanguageModel, model))
    )
    const Runs = AgentWorkflow.make({ name: "ablation", version: 1 })
    const stack = (Runs.layer as Layer.Layer<any>).pipe(
      Layer.provideMerge(agent),
      Layer.provideMerge(Layer.mergeAll(Checkpointer.layerMemory, RunStore.layerMemory)),
      Layer.provideMerge(AgentEngine.layerMemory)
    ) as Layer.Layer<any, unknown>
    let scope = yield* Scope.make()
    let context = yield* Layer.buildWithScope(stack, scope)
    const renew = Effect.gen(function*() {
      yield* Scope.close(scope, Exit.void)
      scope = yield* Scope.make()
      context = yield* Layer.buildWithScope(stack, scope)
    })
    let runs = 0
    const run = Effect.suspend(() => {
      script.call = 0
      const runId = `run-${runs++}`
      const threadId = `thread-${runId}`
      return Effect.gen(function*() {
        yield* Runs.start({ threadId, input: userInput, runId })
        const outcome = yield* Runs.workflow.execute({ runId, threadId, input: Prompt.make(userInput).content })
        if (outcome.steps !== request.steps + 1) throw new Error(`a durable run made ${outcome.steps} model calls`)
        yield* Effect.flatMap(Checkpointer.Checkpointer, (checkpointer: any) => checkpointer.delete(threadId))
      }).pipe(Effect.provide(context))
    }) as Effect.Effect<void, unknown>
    return { run, renew: renew as Effect.Effect<void, unknown> }
  })

/** A configuration built: its run, and what makes its state fresh between batches (if it keeps any). */
interface Built {
  readonly run: Effect.Effect<void, unknown>
  readonly renew?: Effect.Effect<void, unknown> | undefined
}

const build = (request: Extract<Request, { _tag: "build" }>): Effect.Effect<Built, unknown> =>
  request.mode === "durable" ? buildDurable(request) : Effect.gen(function*() {
    const { agentOptions, layer, model, script } = workload(request)
    const checkpointer = yield* (Checkpointer.makeMemory as Effect.Effect<any>)
    const agent = yield* (Agent.make(agentOptions) as Effect.Effect<any, unknown, any>).pipe(
      Effect.provide(layer),
      Effect.provideService(LanguageModel.LanguageModel, model),
      Effect.provideService(Checkpointer.Checkpointer, checkpointer)
    )
    const run = Effect.suspend(() => {
      script.call = 0
      return request.mode === "generate"
        ? agent.run(userInput, { threadId: "t" }) as Effect.Effect<unknown, unknown>
        : Stream.runDrain(agent.stream(userInput, { threadId: "t" }) as Stream.Stream<unknown, unknown>)
    }).pipe(Effect.ensuring(Effect.orDie(checkpointer.delete("t"))), Effect.asVoid) as Effect.Effect<void, unknown>
    return { run }
  })

/** The CPU time a process warms a configuration up for before it is timed. */
const WARM_UP_CPU_US = 2_000_000

let built: Built | undefined

process.on("message", async (request: Request) => {
  if (request._tag === "build") {
    built = await Effect.runPromise(build(request))
    const run = built.run
    // the JIT compiles on background threads, whose CPU time counts, and tiers a function up only
    // after thousands of calls: warm up well before timing (2 s of this process's own CPU time, so
    // processes warming up side by side each get as much), then report the warm cost of a run
    const start = process.cpuUsage()
    const warm = () => {
      const used = process.cpuUsage(start)
      return used.user + used.system >= WARM_UP_CPU_US
    }
    for (let done = 0; done < 200 || !warm(); done++) await Effect.runPromise(run)
    if (built.renew !== undefined) await Effect.runPromise(built.renew)
    process.send!({ _tag: "ready", cpuPerRun: await cpuPerRun(run, 20) })
    return
  }
  if (built!.renew !== undefined) await Effect.runPromise(built!.renew)
  process.send!({ _tag: "batch", cpuPerRun: await cpuPerRun(built!.run, request.runs) })
})
process.send!({ _tag: "loaded" })
