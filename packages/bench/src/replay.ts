/**
 * What a replay costs per step against a live step, and how large a run
 * record is per step. Run alone with
 * `npx tsx --conditions=@stepwise-agent/source packages/bench/src/replay.ts [--quick]`
 * (prints a Markdown table); not a section of `npm run bench`.
 *
 * Runs of 10 steps (one tool call each, then an answer) on the raw fake
 * model with one tool, on a fresh thread each: live (`agent.run`),
 * recorded (`RunRecord.record`, which streams the run) and replayed
 * (`agent.replay` of one record, no model or tool call), with a streamed
 * live run (`agent.stream`) beside the recorded one (a recording streams). CPU time of the
 * process, batches alternating live / recorded / replayed after a warm-up;
 * per step is the median over the rounds ÷ 10. Checked each round: the
 * replay made no model call and gave the live run's text and steps.
 *
 * @since 0.1.0
 */
import { LanguageModel, type Tool, Toolkit } from "@effect/ai"
import { Agent, RunRecord } from "@stepwise-agent/core"
import { Effect, type Layer, Stream } from "effect"
import { pathToFileURL } from "node:url"
import { makeTools, rawModel, type Script, userInput } from "./fakes.js"
import { cpuUs, median } from "./measure.js"

const STEPS = 10

/**
 * The figures.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReplayResult {
  readonly steps: number
  readonly rounds: number
  readonly runsPerBatch: number
  /** CPU µs per run, medians over the rounds. */
  readonly live: number
  readonly streamed: number
  readonly recorded: number
  readonly replayed: number
  /** JSONL bytes of one record, and per model step. */
  readonly recordBytes: number
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
): Promise<ReplayResult> => {
  const started = cpuUs()
  const rounds = options.quick ? 5 : 20
  const runsPerBatch = options.quick ? 20 : 100
  const script: Script = { toolSteps: STEPS, call: 0 }
  const kit = (Toolkit.make as (...tools: Array<Tool.Any>) => Toolkit.Toolkit<Record<string, Tool.Any>>)(
    ...makeTools(1)
  )
  const handlers = (kit.toLayer as unknown as (handlers: unknown) => Layer.Layer<Tool.Handler<string>>)({
    tool_0: () => Effect.succeed("ok")
  })
  const agent: Agent.Service = await Effect.runPromise(
    Agent.make({ toolkit: kit, maxSteps: 100 }).pipe(
      Effect.provide(handlers),
      Effect.provideService(LanguageModel.LanguageModel, rawModel(script))
    )
  )
  let threads = 0
  const fresh = () => {
    script.call = 0
    return `bench-${threads++}`
  }
  const live = Effect.suspend(() => {
    const threadId = fresh()
    return Effect.tap(agent.run(userInput, { threadId }), () => agent.deleteThread(threadId))
  })
  const streamed = Effect.suspend(() => {
    const threadId = fresh()
    return Effect.tap(Stream.runDrain(agent.stream(userInput, { threadId })), () => agent.deleteThread(threadId))
  })
  const recorded = Effect.suspend(() => {
    const threadId = fresh()
    return Effect.tap(RunRecord.record(agent, userInput, { threadId }), () => agent.deleteThread(threadId))
  })
  const { record, result: expected } = await Effect.runPromise(recorded)
  const recordBytes = new TextEncoder().encode(RunRecord.toJsonl(record)).length
  const replayed = Effect.suspend(() => {
    script.call = 0
    return agent.replay(record)
  })
  const batch = async (run: Effect.Effect<unknown, unknown>) => {
    const before = cpuUs()
    for (let i = 0; i < runsPerBatch; i++) await Effect.runPromise(run)
    return (cpuUs() - before) / runsPerBatch
  }
  for (let i = 0; i < 3; i++) {
    await batch(live)
    await batch(streamed)
    await batch(recorded)
    await batch(replayed)
  }
  const lives: Array<number> = []
  const streams: Array<number> = []
  const records: Array<number> = []
  const replays: Array<number> = []
  for (let round = 0; round < rounds; round++) {
    lives.push(await batch(live))
    streams.push(await batch(streamed))
    records.push(await batch(recorded))
    replays.push(await batch(replayed))
    const check = await Effect.runPromise(replayed)
    if (script.call !== 0 || check.steps !== expected.steps || check._tag !== expected._tag) {
      throw new Error(
        `the replay did not go as recorded: ${JSON.stringify({ calls: script.call, steps: check.steps })}`
      )
    }
  }
  const result: ReplayResult = {
    steps: STEPS + 1,
    rounds,
    runsPerBatch,
    live: median(lives),
    streamed: median(streams),
    recorded: median(records),
    replayed: median(replays),
    recordBytes,
    seconds: (cpuUs() - started) / 1e6
  }
  options.log(
    `  a replayed step: ${(result.replayed / result.steps).toFixed(1)} µs CPU (live ${
      (result.live / result.steps).toFixed(1)
    } µs)`
  )
  return result
}

/**
 * Renders the table.
 *
 * @since 0.1.0
 * @category constructors
 */
export const render = (result: ReplayResult): string => {
  const f = (us: number) => us.toFixed(1)
  return [
    `Runs of ${result.steps} model steps and ${result.steps - 1} tool calls (the raw fake, one tool), each on a ` +
    `fresh thread; CPU time, batches of ${result.runsPerBatch} runs, ${result.rounds} rounds after a warm-up, ` +
    "medians (`packages/bench/src/replay.ts`).",
    "",
    `| run of ${result.steps} model steps | CPU µs per run | per model step |`,
    "|---|---:|---:|",
    `| live (\`agent.run\`) | ${f(result.live)} | ${f(result.live / result.steps)} |`,
    `| live, streamed (\`agent.stream\`) | ${f(result.streamed)} | ${f(result.streamed / result.steps)} |`,
    `| recorded (\`RunRecord.record\`, streamed) | ${f(result.recorded)} | ${f(result.recorded / result.steps)} |`,
    `| replayed (\`agent.replay\`, no model or tool call) | ${f(result.replayed)} | ${
      f(result.replayed / result.steps)
    } |`,
    "",
    `Record size: ${result.recordBytes} bytes of JSONL, ${Math.round(result.recordBytes / result.steps)} bytes per ` +
    "model step (with its tool call).",
    "",
    `(This took ${result.seconds.toFixed(1)} s of CPU.)`
  ].join("\n")
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const result = await measure({ quick: process.argv.includes("--quick"), log: (line) => console.log(line) })
  console.log(render(result))
}
