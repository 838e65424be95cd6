/**
 * The rows of `contextLoop.ts` counted instead of timed: the Effect
 * operations and the bytes a context policy's call at a step of a run takes
 * in the loop and alone, so that a difference between the two is found
 * whatever the machine's load. Same workload: a stored thread of 10,000
 * messages, each run starting from the one stored copy and making 20 tool
 * steps; the policy's hooks are wrapped in the loop (their operations and
 * the heap's growth counted between their start and their end, the model
 * call they pass on left out) and called alone, right after each run, by a
 * second instance on the very arrays the loop passed (`callAlone`: each hook
 * in its own `runSync`, which the counts include, ~12 operations each).
 * Operations are counted by the default scheduler's `shouldYield`, wrapped
 * to count its questions (the runtime asks once per operation); bytes are the growth of
 * `heapUsed`, the median over the steps (a step that a collection fell in is
 * an outlier): `node --max-semi-space-size=128 --conditions=@stepwise-agent/source
 * --import tsx packages/bench/src/contextLoopCount.ts`.
 *
 * @since 0.1.0
 */
import { LanguageModel, type Prompt } from "@effect/ai"
import type { Middleware } from "@stepwise-agent/core"
import { Agent, AgentState, Checkpointer } from "@stepwise-agent/core"
import { Effect, Scheduler } from "effect"
import { loopThread } from "./context.js"
import { build, callAlone, policies, services } from "./contextLoop.js"
import { makeToolkit, rawModel, type Script } from "./fakes.js"
import { median } from "./measure.js"

/** What one call of a policy took. */
interface Counted {
  readonly messages: ReadonlyArray<Prompt.Message>
  ops: number
  bytes: number
}

let counting = false
let ops = 0
// the schedulers of every fiber (the default one) and of every `runSync` (a `SyncScheduler` each, as the alone
// calls make), asked once per operation
const shouldYield = Scheduler.defaultScheduler.shouldYield.bind(Scheduler.defaultScheduler)
;(Scheduler.defaultScheduler as { shouldYield: Scheduler.Scheduler["shouldYield"] }).shouldYield = (fiber) => {
  if (counting) ops++
  return shouldYield(fiber)
}
const syncShouldYield = Scheduler.SyncScheduler.prototype.shouldYield
Scheduler.SyncScheduler.prototype.shouldYield = function(fiber) {
  if (counting) ops++
  return syncShouldYield.call(this, fiber)
}

let opsAtStart = 0
let heapAtStart = 0
const start = () => {
  opsAtStart = ops
  heapAtStart = process.memoryUsage().heapUsed
  counting = true
}
const stop = (call: Counted) => {
  const heap = process.memoryUsage().heapUsed
  counting = false
  call.ops += ops - opsAtStart
  call.bytes += heap - heapAtStart
}

/** `mw` with what its hooks take in each model call counted into `calls` (the call it passes on left out). */
const metered = (mw: Middleware.Any, calls: Array<Counted>): Middleware.Any => {
  let current: Counted | undefined
  const callOf = (messages: ReadonlyArray<Prompt.Message>) => {
    if (current === undefined) {
      current = { messages, ops: 0, bytes: 0 }
      calls.push(current)
    }
    return current
  }
  const before = mw.beforeModel
  const wrap = mw.wrapModelCall
  return {
    ...mw,
    ...(before === undefined ? {} : {
      beforeModel: (context: any) =>
        Effect.suspend(() => {
          const call = callOf(context.messages)
          start()
          return Effect.map(before(context), (update) => {
            stop(call)
            if (wrap === undefined) current = undefined
            return update
          })
        })
    }),
    ...(wrap === undefined ? {} : {
      wrapModelCall: (request: any, next: any) =>
        Effect.suspend(() => {
          const call = callOf(request.messages)
          start()
          const passOn = (r: any): Effect.Effect<any, any> =>
            Effect.suspend(() => {
              stop(call)
              return Effect.map(next(r), (response: unknown) => {
                start()
                return response
              })
            })
          return Effect.map(wrap(request, passOn), (response) => {
            stop(call)
            current = undefined
            return response
          })
        })
    })
  } as Middleware.Any
}

const main = async () => {
  const runs = 15
  const steps = 20
  const stored = loopThread(10_000)
  const copy = JSON.parse(JSON.stringify({
    version: 1,
    threadId: "bench",
    messages: AgentState.encodeMessages(stored),
    slices: {}
  }))
  console.log("| policy | a step's call in the loop: operations / KiB | alone: operations / KiB |")
  console.log("|---|---:|---:|")
  for (const policy of policies) {
    const calls: Array<Counted> = []
    const script: Script = { toolSteps: 0, call: 0 }
    const checkpointer = await Effect.runPromise(Checkpointer.makeMemory)
    const { kit, layer } = makeToolkit(1)
    const agent = await Effect.runPromise(
      Agent.make({ toolkit: kit as any, middleware: [metered(await build(policy), calls)], maxSteps: steps + 1 }).pipe(
        Effect.provide(layer),
        Effect.provideService(LanguageModel.LanguageModel, rawModel(script)),
        Effect.provideService(Checkpointer.Checkpointer, checkpointer),
        Effect.provide(services)
      ) as Effect.Effect<Agent.AgentOf<ReadonlyArray<Middleware.Any>>>
    )
    const alone = await build(policy)
    const loopSteps: Array<Counted> = []
    const aloneSteps: Array<Counted> = []
    for (let i = 0; i < runs; i++) {
      await Effect.runPromise(checkpointer.save("bench", copy))
      script.call = 0
      script.toolSteps = steps
      const from = calls.length
      const result = await Effect.runPromise(agent.run("And tomorrow?", { threadId: "bench" }))
      if (result._tag !== "Completed") throw new Error(`the run ended as ${result._tag}`)
      const run = calls.slice(from)
      const replayed = run.map((call, k) => {
        const counted: Counted = { messages: call.messages, ops: 0, bytes: 0 }
        start()
        callAlone(alone, call.messages, k)
        stop(counted)
        return counted
      })
      // the first three runs warm up
      if (i >= 3) {
        loopSteps.push(...run.slice(1))
        aloneSteps.push(...replayed.slice(1))
      }
    }
    const row = (counted: ReadonlyArray<Counted>) =>
      `${median(counted.map((c) => c.ops)).toFixed(0)} / ${(median(counted.map((c) => c.bytes)) / 1024).toFixed(1)}`
    console.log(`| ${policy.what} | ${row(loopSteps)} | ${row(aloneSteps)} |`)
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
