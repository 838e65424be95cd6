/**
 * The child process of the ablation (`ablation.ts`): loads one copy of the
 * core (`argv[2]`, a directory of it transpiled to JavaScript) and, on the parent's messages, builds the
 * agent of a configuration, warms it up and times batches of whole runs,
 * answering each with its CPU time. One copy per process, so no variant's
 * code shares the Effect runtime's call sites (and their inline caches) with
 * another's.
 *
 * @since 0.1.0
 */
import { LanguageModel } from "@effect/ai"
import { Effect, Stream } from "effect"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import { pathToFileURL } from "node:url"
import { makeToolkit, type Mode, rawModel, type Script } from "./fakes.js"

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
    readonly mode: Mode
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

const build = (request: Extract<Request, { _tag: "build" }>) =>
  Effect.gen(function*() {
    const script: Script = { toolSteps: request.steps, call: 0 }
    const checkpointer = yield* (Checkpointer.makeMemory as Effect.Effect<any>)
    const { kit, layer } = makeToolkit(1)
    const middleware = Array.from({ length: request.middleware }, (_, i) => Middleware.passThrough(`pass_${i}`))
    const agent = yield* (Agent.make({
      toolkit: kit,
      middleware,
      maxSteps: request.steps + 1,
      ...request.options
    }) as Effect.Effect<any, unknown, any>).pipe(
      Effect.provide(layer),
      Effect.provideService(LanguageModel.LanguageModel, rawModel(script)),
      Effect.provideService(Checkpointer.Checkpointer, checkpointer)
    )
    const input = "What is the weather in Paris?"
    return Effect.suspend(() => {
      script.call = 0
      return request.mode === "generate"
        ? agent.run(input, { threadId: "t" }) as Effect.Effect<unknown, unknown>
        : Stream.runDrain(agent.stream(input, { threadId: "t" }) as Stream.Stream<unknown, unknown>)
    }).pipe(Effect.ensuring(Effect.orDie(checkpointer.delete("t"))), Effect.asVoid)
  })

let run: Effect.Effect<void, unknown> | undefined

process.on("message", async (request: Request) => {
  if (request._tag === "build") {
    run = await Effect.runPromise(build(request) as Effect.Effect<Effect.Effect<void, unknown>, unknown>)
    // the JIT compiles on background threads, whose CPU time counts, and tiers a function up only
    // after thousands of calls: warm up well before timing, then report the warm cost of a run
    const until = performance.now() + 2000
    for (let done = 0; done < 200 || performance.now() < until; done++) await Effect.runPromise(run)
    const start = process.cpuUsage()
    for (let i = 0; i < 20; i++) await Effect.runPromise(run)
    const used = process.cpuUsage(start)
    process.send!({ _tag: "ready", cpuPerRun: (used.user + used.system) / 20 })
    return
  }
  const start = process.cpuUsage()
  for (let i = 0; i < request.runs; i++) await Effect.runPromise(run!)
  const used = process.cpuUsage(start)
  process.send!({ _tag: "batch", cpuPerRun: (used.user + used.system) / request.runs })
})
process.send!({ _tag: "loaded" })
