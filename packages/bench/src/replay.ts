/**
 * What a replay costs per step against a live step, how large a run record
 * is per step, and what a fork of a 10,000-message thread costs. Section 10
 * of `npm run bench`; alone with
 * `npx tsx --conditions=@stepwise-agent/source packages/bench/src/replay.ts [--quick]`
 * (prints its Markdown).
 *
 * Replay: runs of 10 steps (one tool call each, then an answer) on the raw
 * fake model with one tool, on a fresh thread each: live (`agent.run`),
 * recorded (`RunRecord.record`, which streams the run) and replayed
 * (`agent.replay` of one record, no model or tool call), with a streamed
 * live run (`agent.stream`) beside the recorded one (a recording streams). CPU time of the
 * process, batches alternating live / recorded / replayed after a warm-up;
 * per step is the median over the rounds ÷ 10. Checked each round: the
 * replay made no model call and gave the live run's text and steps.
 *
 * Fork: a stored thread of 10,000 messages (5,000 tool steps, then an
 * answer, on the memory checkpointer), forked (`agent.fork`, no edit) at its
 * last step and at its middle step to a new thread, which then runs one
 * answer live; beside it, one answer-only run on a stored copy of the same
 * thread (`agent.run`). Every fork and run goes to a fresh thread, deleted
 * after it. CPU time per fork or run, median over the rounds.
 *
 * @since 0.1.0
 */
import { LanguageModel, type Tool, Toolkit } from "@effect/ai"
import { Agent, AgentState, type Checkpointer, RunRecord } from "@stepwise-agent/core"
import { Effect, type Layer, Stream } from "effect"
import { pathToFileURL } from "node:url"
import { makeTools, rawModel, type Script, userInput } from "./fakes.js"
import { makeBench } from "./fixtures.js"
import { cpuUs, median } from "./measure.js"
import { buildMessages } from "./memory.js"

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
 * What a fork of a long stored thread costs.
 *
 * @since 0.1.0
 * @category models
 */
export interface ForkResult {
  /** The messages of the stored thread, and its model steps (assistant replies). */
  readonly messages: number
  readonly steps: number
  readonly rounds: number
  readonly runsPerBatch: number
  /** CPU µs per fork (and its one live answer) at the last step, at the middle step; per answer-only run. */
  readonly atLast: number
  readonly atMiddle: number
  readonly run: number
  readonly seconds: number
}

/**
 * Forks a 10,000-message stored thread (see the module's comment).
 *
 * @since 0.1.0
 * @category constructors
 */
export const measureFork = async (
  options: { readonly quick: boolean; readonly log: (line: string) => void }
): Promise<ForkResult> => {
  const started = cpuUs()
  const rounds = options.quick ? 3 : 7
  const runsPerBatch = options.quick ? 2 : 5
  const messages = 10_000
  const source = "long"
  const stored = JSON.parse(JSON.stringify({
    version: 1,
    threadId: source,
    messages: AgentState.encodeMessages(buildMessages((messages - 2) / 2)),
    slices: {}
  })) as Checkpointer.Checkpoint
  const { agent, checkpointer, script } = await Effect.runPromise(
    makeBench({ model: "raw", mode: "generate", middleware: 0, tools: 1, steps: 1 })
  )
  await Effect.runPromise(checkpointer.save(source, stored))
  const steps = (messages - 2) / 2 + 1
  let threads = 0
  /** `effect` on a fresh thread answered at once, which is deleted after; fails unless it saw `expected` messages. */
  const onFresh = (
    expected: number,
    effect: (
      threadId: string
    ) => Effect.Effect<{ readonly state: { readonly messages: ReadonlyArray<unknown> } }, unknown>
  ) =>
    Effect.suspend(() => {
      script.call = 0
      script.toolSteps = 0
      const threadId = `fork-${threads++}`
      return effect(threadId).pipe(
        Effect.flatMap((result) =>
          result.state.messages.length === expected
            ? agent.deleteThread(threadId)
            : Effect.dieMessage(`expected ${expected} messages, got ${result.state.messages.length}`)
        )
      )
    })
  const middle = Math.floor(steps / 2)
  const atLast = onFresh(messages + 1, (to) => agent.fork(source, { to, at: steps }))
  // the messages before reply `middle` (the question, then a call and its result per reply), and the answer
  const atMiddle = onFresh(1 + 2 * middle + 1, (to) => agent.fork(source, { to, at: middle }))
  const run = onFresh(
    messages + 2,
    (threadId) =>
      Effect.zipRight(checkpointer.save(threadId, { ...stored, threadId }), agent.run("And tomorrow?", { threadId }))
  )
  const batch = async (effect: Effect.Effect<unknown, unknown>) => {
    const before = cpuUs()
    for (let i = 0; i < runsPerBatch; i++) await Effect.runPromise(effect)
    return (cpuUs() - before) / runsPerBatch
  }
  for (const effect of [atLast, atMiddle, run]) await batch(effect)
  const lasts: Array<number> = []
  const middles: Array<number> = []
  const runs: Array<number> = []
  for (let round = 0; round < rounds; round++) {
    lasts.push(await batch(atLast))
    middles.push(await batch(atMiddle))
    runs.push(await batch(run))
  }
  const result: ForkResult = {
    messages,
    steps,
    rounds,
    runsPerBatch,
    atLast: median(lasts),
    atMiddle: median(middles),
    run: median(runs),
    seconds: (cpuUs() - started) / 1e6
  }
  options.log(
    `  a fork of a ${messages}-message thread: ${(result.atLast / 1000).toFixed(1)} ms CPU at its last step ` +
      `(an answer-only run on it: ${(result.run / 1000).toFixed(1)} ms)`
  )
  return result
}

/**
 * Renders the section: the replay table, the record size, the fork table.
 *
 * @since 0.1.0
 * @category constructors
 */
export const render = (result: ReplayResult, fork?: ForkResult | undefined): string => {
  const f = (us: number) => us.toFixed(1)
  const ms = (us: number) => (us / 1000).toFixed(1)
  const replay = [
    `Runs of ${result.steps} model steps and ${result.steps - 1} tool calls (the raw fake, one tool), each on a ` +
    `fresh thread; CPU time, batches of ${result.runsPerBatch} runs, ${result.rounds} rounds after a warm-up, ` +
    "medians (`packages/bench/src/replay.ts`).",
    "",
    `| run of ${result.steps} model steps | CPU µs per run | per model step | × a live step |`,
    "|---|---:|---:|---:|",
    ...([
      ["live (`agent.run`)", result.live],
      ["live, streamed (`agent.stream`)", result.streamed],
      ["recorded (`RunRecord.record`, streamed)", result.recorded],
      ["replayed (`agent.replay`, no model or tool call)", result.replayed]
    ] as const).map(([name, us]) =>
      `| ${name} | ${f(us)} | ${f(us / result.steps)} | ${(us / result.live).toFixed(2)} |`
    ),
    "",
    `Record size: ${result.recordBytes} bytes of JSONL, ${Math.round(result.recordBytes / result.steps)} bytes per ` +
    "model step (with its tool call).",
    "",
    `(This took ${result.seconds.toFixed(1)} s of CPU.)`
  ]
  if (fork === undefined) return replay.join("\n")
  return [
    ...replay,
    "",
    `A stored thread of ${fork.messages.toLocaleString("en-US")} messages (${
      fork.steps.toLocaleString("en-US")
    } model steps) on the memory checkpointer, forked with no edit to a fresh thread that answers once live; ` +
    `CPU time, batches of ${fork.runsPerBatch}, ${fork.rounds} rounds after a warm-up, medians.`,
    "",
    "| on the 10,000-message thread | CPU ms | × the run |",
    "|---|---:|---:|",
    `| fork at the last step (\`agent.fork\`, ${fork.messages.toLocaleString("en-US")} messages copied) | ${
      ms(fork.atLast)
    } | ${(fork.atLast / fork.run).toFixed(2)} |`,
    `| fork at the middle step (${(2 * Math.floor(fork.steps / 2) + 1).toLocaleString("en-US")} messages) | ${
      ms(fork.atMiddle)
    } | ${(fork.atMiddle / fork.run).toFixed(2)} |`,
    `| an answer-only run on a stored copy (\`agent.run\`) | ${ms(fork.run)} | 1.00 |`,
    "",
    `(This took ${fork.seconds.toFixed(1)} s of CPU.)`
  ].join("\n")
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const log = (line: string) => console.log(line)
  const quick = process.argv.includes("--quick")
  const result = await measure({ quick, log })
  const fork = await measureFork({ quick, log })
  console.log(render(result, fork))
}
