/**
 * What a steering message adds to a step (run it with
 * `npx tsx packages/bench/src/steering.ts [--quick]`; it prints a markdown
 * table).
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
import { makeTools, rawModel, type Script, userInput } from "./fakes.js"
import { cpuUs, median } from "./measure.js"

const STEPS = 10
const quick = process.argv.includes("--quick")
const rounds = quick ? 5 : 30
const runsPerBatch = quick ? 20 : 100

const script: Script = { toolSteps: STEPS, call: 0 }
const current: { send: boolean; threadId: string; agent: Agent.Agent.Service | undefined } = {
  send: false,
  threadId: "",
  agent: undefined
}

const kit = (Toolkit.make as (...tools: Array<Tool.Any>) => Toolkit.Toolkit<Record<string, Tool.Any>>)(
  ...makeTools(1)
)
/** The one tool: answers "ok", and sends the steer message first in the runs with sends. */
const handlers = (kit.toLayer as unknown as (handlers: unknown) => Layer.Layer<Tool.Handler<string>>)({
  tool_0: () =>
    current.send && current.agent !== undefined
      ? Effect.as(current.agent.send(current.threadId, "Also: use metric units."), "ok")
      : Effect.succeed("ok")
})

const agent: Agent.Agent.Service = await Effect.runPromise(
  Agent.make({ toolkit: kit, maxSteps: 100 }).pipe(
    Effect.provide(handlers),
    Effect.provideService(LanguageModel.LanguageModel, rawModel(script))
  )
)
current.agent = agent

let threads = 0
/** One run on a fresh thread; its user messages and model calls. */
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

// warm up both
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

const f = (us: number) => us.toFixed(1)
console.log(`| run of ${STEPS} steps (generate, raw fake, 1 tool) | CPU µs per run | per step |`)
console.log("|---|---:|---:|")
console.log(`| no message sent | ${f(median(without))} | ${f(median(without) / STEPS)} |`)
console.log(`| one steer message sent per step | ${f(median(withSends))} | ${f(median(withSends) / STEPS)} |`)
console.log(
  `| **a steer message's overhead** (median of paired differences, ${rounds} rounds × ${runsPerBatch} runs) | | ` +
    `**${f(median(overheads))}** (range ${f(Math.min(...overheads))} … ${f(Math.max(...overheads))}) |`
)
