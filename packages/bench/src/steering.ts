/**
 * What a steering message adds to a step: section 9 of `npm run bench`, or
 * alone with `npx tsx --conditions=@stepwise-agent/source packages/bench/src/steering.ts [--quick]`
 * (prints the section's Markdown).
 *
 * Runs of 10 steps (one tool call each, then an answer) on the raw fake
 * model with one tool, generated, on a fresh thread each. Without sends,
 * and with one `agent.send(threadId, message)` (mode `"steer"`) from inside
 * each tool call, so each of the 10 later model steps takes one message in
 * (the send, the look into the inbox, the append, the larger checkpoint).
 * The tool handler is the same in both; only the send differs. CPU time of
 * the process (`process.cpuUsage`), batches of runs alternating without /
 * with (paired and interleaved, so a change in the machine's load hits both
 * alike), after a warm-up of both; the overhead is the median over the
 * rounds of (with − without) ÷ 10. Checked each round, deterministically:
 * the runs with sends store 10 more user messages, and make as many model
 * calls, as the runs without.
 *
 * @since 0.1.0
 */
import { LanguageModel, type Tool, Toolkit } from "@effect/ai"
import { Agent } from "@stepwise-agent/core"
import { Effect, type Layer } from "effect"
import { pathToFileURL } from "node:url"
import { makeTools, rawModel, type Script, userInput } from "./fakes.js"
import { cpuUs, median } from "./measure.js"

const STEPS = 10

/**
 * The section's figures.
 *
 * @since 0.1.0
 * @category models
 */
export interface SteeringResult {
  readonly steps: number
  readonly rounds: number
  readonly runsPerBatch: number
  /** CPU µs per run, median over the rounds. */
  readonly without: number
  readonly withSends: number
  /** CPU µs a steer message adds: the median over the rounds of (with − without) ÷ steps. */
  readonly overhead: number
  readonly overheadRange: readonly [number, number]
  readonly seconds: number
}

/**
 * Runs the measurement.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measure = async (
  options: { readonly quick: boolean; readonly log: (line: string) => void }
): Promise<SteeringResult> => {
  const started = cpuUs()
  const rounds = options.quick ? 5 : 30
  const runsPerBatch = options.quick ? 20 : 100
  const script: Script = { toolSteps: STEPS, call: 0 }
  const current: { send: boolean; threadId: string; agent: Agent.Service | undefined } = {
    send: false,
    threadId: "",
    agent: undefined
  }
  const kit = (Toolkit.make as (...tools: Array<Tool.Any>) => Toolkit.Toolkit<Record<string, Tool.Any>>)(
    ...makeTools(1)
  )
  // the one tool: answers "ok", and in the runs with sends sends the steer message first
  const handlers = (kit.toLayer as unknown as (handlers: unknown) => Layer.Layer<Tool.Handler<string>>)({
    tool_0: () =>
      current.send && current.agent !== undefined
        ? Effect.as(current.agent.send(current.threadId, "Also: use metric units."), "ok")
        : Effect.succeed("ok")
  })
  const agent: Agent.Service = await Effect.runPromise(
    Agent.make({ toolkit: kit, maxSteps: 100 }).pipe(
      Effect.provide(handlers),
      Effect.provideService(LanguageModel.LanguageModel, rawModel(script))
    )
  )
  current.agent = agent
  let threads = 0
  // one run on a fresh thread (deleted after): its user messages and model calls
  const oneRun = (send: boolean) =>
    Effect.suspend(() => {
      script.call = 0
      current.send = send
      current.threadId = `bench-${threads++}`
      return Effect.map(agent.run(userInput, { threadId: current.threadId }), (result) => ({
        users: result.state.messages.filter((m) => m.role === "user").length,
        calls: script.call
      }))
    }).pipe(Effect.tap(() => agent.deleteThread(current.threadId)))
  const batch = async (send: boolean) => {
    let shape = { users: 0, calls: 0 }
    const before = cpuUs()
    for (let i = 0; i < runsPerBatch; i++) shape = await Effect.runPromise(oneRun(send))
    return { cpuPerRun: (cpuUs() - before) / runsPerBatch, shape }
  }
  for (let i = 0; i < 3; i++) {
    await batch(false)
    await batch(true)
  }
  const without: Array<number> = []
  const withSends: Array<number> = []
  const overheads: Array<number> = []
  for (let round = 0; round < rounds; round++) {
    const a = await batch(false)
    const b = await batch(true)
    if (b.shape.users !== a.shape.users + STEPS || b.shape.calls !== a.shape.calls) {
      throw new Error(`the runs did not go as scripted: ${JSON.stringify({ without: a.shape, with: b.shape })}`)
    }
    without.push(a.cpuPerRun)
    withSends.push(b.cpuPerRun)
    overheads.push((b.cpuPerRun - a.cpuPerRun) / STEPS)
  }
  const result: SteeringResult = {
    steps: STEPS,
    rounds,
    runsPerBatch,
    without: median(without),
    withSends: median(withSends),
    overhead: median(overheads),
    overheadRange: [Math.min(...overheads), Math.max(...overheads)],
    seconds: (cpuUs() - started) / 1e6
  }
  options.log(
    `  a steer message: ${result.overhead.toFixed(1)} µs CPU (a step without: ${
      (result.without / STEPS).toFixed(1)
    } µs)`
  )
  return result
}

/**
 * Renders the section.
 *
 * @since 0.1.0
 * @category constructors
 */
export const render = (result: SteeringResult): string => {
  const f = (us: number) => us.toFixed(1)
  return [
    `Runs of ${result.steps} steps (generated, the raw fake, one tool), each on a fresh thread: without sends, ` +
    "and with one `agent.send(threadId, message)` (steer) from inside each tool call, so each later model step " +
    "takes one message in. CPU time; batches of " +
    `${result.runsPerBatch} runs alternating without / with, ${result.rounds} rounds after a warm-up; the ` +
    "overhead is the median over the rounds of the paired difference per message (`packages/bench/src/steering.ts`).",
    "",
    `| run of ${result.steps} steps | CPU µs per run | per step |`,
    "|---|---:|---:|",
    `| no message sent | ${f(result.without)} | ${f(result.without / result.steps)} |`,
    `| one steer message sent per step | ${f(result.withSends)} | ${f(result.withSends / result.steps)} |`,
    `| **what a steer message adds** (range of the rounds: ${f(result.overheadRange[0])} … ${
      f(result.overheadRange[1])
    }) | | **${f(result.overhead)}** |`,
    "",
    `(This section took ${result.seconds.toFixed(1)} s of CPU.)`
  ].join("\n")
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const result = await measure({ quick: process.argv.includes("--quick"), log: (line) => console.log(line) })
  console.log(render(result))
}
