/**
 * The child process of the crash-and-resume measurement (`durable.ts`): the
 * bench's durable agent on a SQLite file given with `--db=<file>`.
 *
 * - `--crash`: starts run `crash` and prints `tool <id>` inside its first tool
 *   call, which then never returns (the parent SIGKILLs the process there, so
 *   the call's activity has no journaled result).
 * - `--resume`: builds the same layers on the same file and lets the runner
 *   pick the run up by itself (nothing is called to resume it); polls the
 *   run until it is complete and prints `done <json>`: epoch ms when node had
 *   booted, the script's body started (modules loaded), the layers were up,
 *   this process made its first model or tool call, and the run was
 *   complete; the calls it made; and the run's outcome.
 *
 * @since 0.1.0
 */
import { Effect, Layer, Option } from "effect"
import { performance } from "node:perf_hooks"
import { agentLayer, countToolResults, payloadOf, Runs, sqliteLayer } from "./durable.js"
import { userInput } from "./fakes.js"

const main = performance.timeOrigin + performance.now()
const boot = performance.timeOrigin + performance.nodeTiming.bootstrapComplete
const epochMs = () => performance.timeOrigin + performance.now()

const args = process.argv.slice(2)
const db = args.find((arg) => arg.startsWith("--db="))?.slice(5)
if (db === undefined) throw new Error("durableChild.ts needs --db=<file>")
const runId = "crash"
const threadId = "crash-thread"

let first: number | undefined
let modelCalls = 0
let toolCalls = 0
const mark = Effect.sync(() => {
  first ??= epochMs()
})

const crash = Effect.gen(function*() {
  const agent = agentLayer({
    onTool: Effect.suspend(() => {
      console.log(`tool call_${++toolCalls}`)
      return Effect.never
    })
  })
  yield* Effect.provide(
    Effect.zipRight(Runs.start({ threadId, input: userInput, runId }), Effect.never),
    sqliteLayer(agent, db)
  )
})

const resume = Effect.gen(function*() {
  const agent = agentLayer({
    onModel: Effect.zipRight(mark, Effect.sync(() => void modelCalls++)),
    onTool: Effect.zipRight(mark, Effect.sync(() => void toolCalls++))
  })
  const context = yield* Layer.build(sqliteLayer(agent, db))
  const layers = epochMs()
  const executionId = yield* Runs.workflow.executionId(payloadOf(runId, threadId))
  while (true) {
    const polled = yield* Runs.workflow.poll(executionId).pipe(Effect.provide(context))
    if (polled !== undefined && polled._tag === "Complete") break
    yield* Effect.sleep("5 millis")
  }
  const done = epochMs()
  const status = yield* Runs.status(runId).pipe(Effect.provide(context))
  const outcome = Option.getOrUndefined(status.outcome)
  console.log(`done ${
    JSON.stringify({
      boot,
      main,
      layers,
      first: first ?? done,
      done,
      modelCalls,
      toolCalls,
      state: status.state,
      steps: outcome?.steps ?? 0,
      toolResults: countToolResults(status.messages),
      text: outcome?.text ?? ""
    })
  }`)
}).pipe(Effect.scoped)

Effect.runPromise(args.includes("--crash") ? crash : resume).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
