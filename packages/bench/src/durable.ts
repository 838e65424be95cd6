/**
 * The issue-8 figures: what durable mode (`@stepwise-agent/workflow`) adds to a
 * step, and how long a crashed run takes to come back.
 *
 * 1. Per step, on the bench's workload (the `LanguageModel.make` fake, one
 *    tool, no middleware, generate, 10-step runs): the in-process loop; the
 *    in-process loop checkpointing to SQLite (`SqlCheckpointer`, no engine);
 *    `AgentWorkflow` on `AgentEngine.layerMemory`; `AgentWorkflow` on
 *    `AgentEngine.layerSqlite` (a temporary file, with `SqlCheckpointer` and
 *    `RunStore.layer` on the same database); `AgentWorkflow` on
 *    `AgentEngine.layerPostgres` (one runner, the same stores), when a
 *    throwaway PostgreSQL server can be started (the workflow tests' one). A
 *    durable run is `AgentWorkflow.start` and then `workflow.execute` of the
 *    same run, which waits for the result without polling.
 * 2. One activity round trip on each engine: a bare workflow running 0 or 20
 *    trivial activities.
 * 3. Time to resume after a crash: a child process (`durableChild.ts`) runs
 *    a durable agent on SQLite and is SIGKILLed inside its first tool call;
 *    a fresh child on the same file resumes the run by itself and reports
 *    when node had booted, its modules were loaded, its layers were up, it
 *    made its first call of its own, and the run completed.
 *
 * The fake model decides from the prompt (it counts the tool results), not
 * from a counter, so a resumed process continues where the killed one
 * stopped.
 *
 * @since 0.1.0
 */
import { LanguageModel, Prompt, type Response, Toolkit } from "@effect/ai"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlClient from "@effect/sql/SqlClient"
import { Activity, Workflow, type WorkflowEngine } from "@effect/workflow"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Context, Effect, Exit, Layer, type Redacted, Schema, Scope, Stream } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import * as readline from "node:readline"
import { fileURLToPath, pathToFileURL } from "node:url"
import { answerDeltas, callParams, makeTools, usage, userInput } from "./fakes.js"
import * as FiberOps from "./fiberOps.js"
import { type Sample, sampleMany, type SampleOptions } from "./measure.js"
import * as SqliteStatements from "./sqliteStatements.js"

// ---------------------------------------------------------------------------
// the workload
// ---------------------------------------------------------------------------

/**
 * Model steps of a run that call a tool (the run makes one more model call,
 * the answer).
 *
 * @since 0.1.0
 * @category constructors
 */
export const steps = 10

/**
 * The tool results in `messages`.
 *
 * @since 0.1.0
 * @category utility
 */
export const countToolResults = (messages: ReadonlyArray<Prompt.Message>): number => {
  let n = 0
  for (const message of messages) {
    if (message.role === "tool") n += message.content.length
  }
  return n
}

const replies: ReadonlyArray<Array<Response.PartEncoded>> = Array.from({ length: steps + 1 }, (_, n) =>
  n < steps
    ? [
      { type: "tool-call", id: `call_${n + 1}`, name: "tool_0", params: callParams },
      { type: "finish", reason: "tool-calls", usage }
    ]
    : [{ type: "text", text: answerDeltas.join("") }, { type: "finish", reason: "stop", usage }])

const replyFor = (prompt: Prompt.Prompt) => replies[Math.min(countToolResults(prompt.content), steps)]!

/**
 * The bench's `LanguageModel.make` fake, deciding from the prompt: while the
 * prompt holds fewer than {@link steps} tool results it asks for one call of
 * `tool_0` (id `call_<n+1>`), then it answers. `onCall` runs on every call.
 *
 * @since 0.1.0
 * @category constructors
 */
export const promptModel = (onCall: Effect.Effect<void> = Effect.void): Effect.Effect<LanguageModel.Service> =>
  LanguageModel.make({
    generateText: (options) => Effect.as(onCall, replyFor(options.prompt)),
    streamText: (options) =>
      Stream.unwrap(
        Effect.as(onCall, Stream.fromIterable(replyFor(options.prompt) as Array<Response.StreamPartEncoded>))
      )
  })

/**
 * The agent of the durable runs, as a layer: the fake model, `tool_0`
 * answering `"ok"` after `onTool`, at most `steps + 1` model calls. It takes
 * its `Checkpointer` from the context.
 *
 * @since 0.1.0
 * @category layers
 */
export const agentLayer = (hooks?: {
  readonly onModel?: Effect.Effect<void> | undefined
  readonly onTool?: Effect.Effect<void> | undefined
}): Layer.Layer<Agent.Agent, unknown, Checkpointer.Checkpointer> => {
  const kit = (Toolkit.make as (...tools: Array<any>) => Toolkit.Toolkit<Record<string, any>>)(...makeTools(1))
  const onTool = hooks?.onTool ?? Effect.void
  const handlers = (kit.toLayer as unknown as (handlers: unknown) => Layer.Layer<never>)({
    tool_0: () => Effect.as(onTool, "ok")
  })
  const toolkit = kit as unknown as Effect.Effect<Toolkit.WithHandler<any>>
  return Agent.layer({ toolkit, maxSteps: steps + 1 }).pipe(
    Layer.provide(handlers),
    Layer.provide(Layer.effect(LanguageModel.LanguageModel, promptModel(hooks?.onModel)))
  ) as Layer.Layer<Agent.Agent, unknown, Checkpointer.Checkpointer>
}

/**
 * The durable agent of the bench.
 *
 * @since 0.1.0
 * @category constructors
 */
export const Runs = AgentWorkflow.make({ name: "bench-agent", version: 1 })

/**
 * The payload of run `runId` on `threadId`, as `Runs.start` builds it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const payloadOf = (runId: string, threadId: string) => ({
  runId,
  threadId,
  input: Prompt.make(userInput).content
})

// A bare workflow of `count` trivial activities, for the cost of one round trip. With `reuse`, every activity
// gets the same exit schema: @effect/workflow builds a new `Schema.ExitFromSelf` in each `Activity.make`, and the
// engine decodes each result with it, so its parser is compiled again for every activity; `reuse` shows what
// building it once per success schema would save.
const Activities = Workflow.make({
  name: "bench-activities",
  payload: { runId: Schema.String, count: Schema.Number, reuse: Schema.Boolean },
  success: Schema.Number,
  idempotencyKey: ({ runId }) => runId
})

const sharedExit = Schema.ExitFromSelf({ success: Schema.Number, failure: Schema.Never, defect: Schema.Defect })

const ActivitiesLive = Activities.toLayer(({ count, reuse }) =>
  Effect.gen(function*() {
    let total = 0
    for (let i = 0; i < count; i++) {
      const activity = Activity.make({ name: `a/${i}`, success: Schema.Number, execute: Effect.succeed(i) })
      if (reuse) (activity as { exitSchema: unknown }).exitSchema = sharedExit
      total += yield* activity
    }
    return total
  })
)

/**
 * A durable stack: `Runs` (and a bare workflow of trivial activities)
 * registered on `engine`, with `agent` and the `stores` (a `Checkpointer` and
 * a `RunStore`) in between.
 *
 * @since 0.1.0
 * @category layers
 */
export const durableLayer = <E2, R2, G, E3>(
  agent: Layer.Layer<Agent.Agent, unknown, Checkpointer.Checkpointer>,
  stores: Layer.Layer<Checkpointer.Checkpointer | RunStore.RunStore, E2, R2>,
  engine: Layer.Layer<G | WorkflowEngine.WorkflowEngine, E3>
) =>
  Layer.mergeAll(Runs.layer, ActivitiesLive).pipe(
    Layer.provideMerge(agent),
    Layer.provideMerge(stores),
    Layer.provideMerge(engine)
  ) as Layer.Layer<
    Agent.Agent | Checkpointer.Checkpointer | RunStore.RunStore | G | WorkflowEngine.WorkflowEngine,
    unknown
  >

/**
 * The SQLite stack of the bench: `AgentEngine.layerSqlite` on `filename`,
 * with `SqlCheckpointer` and `RunStore.layer` on the same database.
 *
 * @since 0.1.0
 * @category layers
 */
export const sqliteLayer = (
  agent: Layer.Layer<Agent.Agent, unknown, Checkpointer.Checkpointer>,
  filename: string
) =>
  durableLayer(
    agent,
    Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer()),
    AgentEngine.layerSqlite({ filename })
  )

/**
 * The PostgreSQL stack of the bench: `AgentEngine.layerPostgres` (one runner)
 * on `url`, with `SqlCheckpointer` and `RunStore.layer` on the same database.
 *
 * @since 0.1.0
 * @category layers
 */
export const postgresLayer = (
  agent: Layer.Layer<Agent.Agent, unknown, Checkpointer.Checkpointer>,
  url: Redacted.Redacted
) =>
  durableLayer(
    agent,
    Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer()),
    AgentEngine.layerPostgres({ url })
  )

/** A running throwaway PostgreSQL server (see `packages/workflow/test/support/postgresServer.ts`). */
interface PostgresServer {
  readonly createDatabase: (name: string) => Promise<Redacted.Redacted>
  readonly stop: () => Promise<void>
}

/**
 * Starts the workflow tests' throwaway PostgreSQL server (`initdb` in a
 * temporary folder, `fsync = off`), imported at run time: it is test support,
 * outside this package. Why none could be started, when none was.
 */
const startPostgres = async (): Promise<PostgresServer | string> => {
  const file = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../workflow/test/support/postgresServer.ts")
  try {
    const support = await import(pathToFileURL(file).href) as { readonly startPostgres: () => Promise<PostgresServer> }
    return await support.startPostgres()
  } catch (error) {
    return error instanceof Error ? error.message.split("\n")[0]! : String(error)
  }
}

// ---------------------------------------------------------------------------
// results
// ---------------------------------------------------------------------------

/**
 * A way of running the workload, timed per step.
 *
 * @since 0.1.0
 * @category models
 */
export interface StepRow {
  readonly key: "inProcess" | "inProcessSql" | "memory" | "sqlite" | "postgres"
  readonly label: string
  readonly result: Sample
}

/**
 * One crash and resume (ms, wall clock).
 *
 * @since 0.1.0
 * @category models
 */
export interface ResumeSample {
  /** First process: spawn → its first tool call (a cold start of a new run), when it was killed. */
  readonly crashedAfterMs: number
  /** Fresh process: spawn → node bootstrapped. */
  readonly bootMs: number
  /** Node bootstrapped → the script's body runs (tsx and the module graph). */
  readonly loadMs: number
  /** Body → layers built (SQLite opened, runner lock, cluster tables, shards taken). */
  readonly layersMs: number
  /** Layers up → the first model or tool call made by this process (redelivery and journal replay). */
  readonly replayMs: number
  /** First call → the run is complete (the rest of the run). */
  readonly restMs: number
  /** Spawn → complete. */
  readonly totalMs: number
  /** Model and tool calls this process made. */
  readonly modelCalls: number
  readonly toolCalls: number
}

/**
 * One engine's activity round trip: runs of the bare workflow.
 *
 * @since 0.1.0
 * @category models
 */
export interface ActivityRow {
  readonly engine: "memory" | "sqlite" | "postgres"
  /** A run with no activity. */
  readonly empty: Sample
  /** A run of `activityCount` activities. */
  readonly full: Sample
  /** The same, every activity with one shared exit schema. */
  readonly reused: Sample
}

/**
 * What one durable agent run leaves in the SQLite journal (@effect/cluster's
 * `cluster_messages` and `cluster_replies`).
 *
 * @since 0.1.0
 * @category models
 */
export interface JournalGrowth {
  readonly messages: number
  readonly replies: number
  /** Bytes of the stored payloads (JSON text). */
  readonly payloadBytes: number
}

/**
 * What SQLite is asked to do for one activity round trip and one agent step
 * (counted, not timed: the least of 3 tries, each the difference of a bare run
 * of `activityCount` activities and one of none, or one agent run over its
 * steps).
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteWorkRow {
  readonly perActivity: SqliteStatements.SqliteWork
  readonly perStep: SqliteStatements.SqliteWork
}

/**
 * Which build of @effect/cluster ran: with the repository's patch (one
 * statement to write a request, one to read the unprocessed messages, on
 * SQLite) or as published.
 *
 * @since 0.1.0
 * @category constructors
 */
export const clusterBuild: "patched" | "as published" =
  (SqlMessageStorage as Record<string, unknown>)["sqliteSingleStatements"] === true ? "patched" : "as published"

/**
 * What {@link measure} gives.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableResult {
  readonly steps: number
  readonly sampling: Omit<SampleOptions, "unitsPerRun">
  readonly perStep: ReadonlyArray<StepRow>
  /** Activities per run of the bare workflow. */
  readonly activityCount: number
  readonly activities: ReadonlyArray<ActivityRow>
  readonly journal: JournalGrowth
  /** What SQLite is asked to do per activity and per step. */
  readonly sqliteWork: SqliteWorkRow
  /** Fiber operations per durable step on the memory engine (counted, `fiberOps.ts`; the least of 3 runs). */
  readonly memoryFiberOps: number
  /** The build of @effect/cluster that ran. */
  readonly clusterBuild: "patched" | "as published"
  readonly resume: ReadonlyArray<ResumeSample>
  /** The file system of the temporary SQLite files. */
  readonly filesystem: string
  /** SQLite's `PRAGMA synchronous` on the engine's connection (`OFF`, `NORMAL`, `FULL`, `EXTRA`). */
  readonly synchronous: string
  /** Why there is no PostgreSQL row, when there is none. */
  readonly postgresMissing: string | undefined
  /** How long the measurements took, s. */
  readonly seconds: number
}

// ---------------------------------------------------------------------------
// measuring
// ---------------------------------------------------------------------------

const build = async <A, E>(layer: Layer.Layer<A, E>) => {
  const scope = await Effect.runPromise(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  return { context, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

const fileSystemOf = (directory: string): string => {
  const types: Record<number, string> = {
    0x01021994: "tmpfs",
    0xef53: "ext4",
    0x794c7630: "overlayfs",
    0x58465342: "xfs",
    0x9123683e: "btrfs"
  }
  try {
    const type = Number(fs.statfsSync(directory).type)
    return types[type] ?? `type 0x${type.toString(16)}`
  } catch {
    return "unknown"
  }
}

const answer = answerDeltas.join("")

interface Check {
  readonly steps: number
  readonly toolResults: number
  readonly text: string
}

const verify = (label: string, checked: Check) => {
  if (checked.steps !== steps + 1 || checked.toolResults !== steps || checked.text !== answer) {
    throw new Error(`${label} did not run as scripted: ${JSON.stringify(checked)}`)
  }
}

let runCounter = 0

interface Bench {
  readonly runOnce: Effect.Effect<void, unknown>
  readonly check: Effect.Effect<Check, unknown>
}

/** The in-process loop on the `Checkpointer` of `context`: one run on a fresh thread, deleted afterwards. */
const inProcessBench = async (context: Context.Context<Checkpointer.Checkpointer>): Promise<Bench> => {
  const built = await build(agentLayer().pipe(Layer.provide(Layer.succeedContext(context))))
  const agent = Context.get(built.context, Agent.Agent)
  const checkpointer = Context.get(context, Checkpointer.Checkpointer)
  const once = Effect.suspend(() => {
    const threadId = `in-process-${runCounter++}`
    return agent.run(userInput, { threadId }).pipe(Effect.ensuring(Effect.orDie(checkpointer.delete(threadId))))
  })
  const check = Effect.map(once, (result): Check => {
    if (result._tag !== "Completed") throw new Error(`run ended as ${result._tag}`)
    return { steps: result.steps, toolResults: countToolResults(result.state.messages), text: result.text }
  })
  return { runOnce: Effect.asVoid(once), check }
}

/** A durable run on the stack of `context`: start, then wait for the result; the thread is deleted afterwards. */
const durableBench = (
  context: Context.Context<
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Checkpointer.Checkpointer | Agent.Agent
  >
): Bench => {
  const checkpointer = Context.get(context, Checkpointer.Checkpointer)
  const run = (inspect: boolean) =>
    Effect.gen(function*() {
      const runId = `run-${runCounter++}`
      const threadId = `thread-${runId}`
      yield* Runs.start({ threadId, input: userInput, runId })
      const outcome = yield* Runs.workflow.execute(payloadOf(runId, threadId))
      const messages = inspect ? (yield* Runs.status(runId)).messages : []
      yield* checkpointer.delete(threadId)
      return { steps: outcome.steps, toolResults: countToolResults(messages), text: outcome.text }
    }).pipe(Effect.provide(context))
  return { runOnce: Effect.asVoid(run(false)), check: run(true) }
}

const synchronousOf = (context: Context.Context<SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly synchronous: number }>`PRAGMA synchronous`
    return ["OFF", "NORMAL", "FULL", "EXTRA"][Number(rows[0]?.synchronous)] ?? "unknown"
  }).pipe(Effect.provide(context))

/** Rows and payload bytes in @effect/cluster's message and reply tables. */
const journalSize = (context: Context.Context<SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly messages: number; readonly replies: number; readonly bytes: number }>`
      SELECT
        (SELECT COUNT(*) FROM cluster_messages) AS messages,
        (SELECT COUNT(*) FROM cluster_replies) AS replies,
        (SELECT COALESCE(SUM(LENGTH(payload)), 0) FROM cluster_messages) +
          (SELECT COALESCE(SUM(LENGTH(payload)), 0) FROM cluster_replies) AS bytes
    `
    const row = rows[0]!
    return { messages: Number(row.messages), replies: Number(row.replies), payloadBytes: Number(row.bytes) }
  }).pipe(Effect.provide(context))

const activityRun = (context: Context.Context<WorkflowEngine.WorkflowEngine>, count: number, reuse: boolean) =>
  Effect.suspend(() => Activities.execute({ runId: `activities-${runCounter++}`, count, reuse })).pipe(
    Effect.asVoid,
    Effect.provide(context)
  )

const divide = (work: SqliteStatements.SqliteWork, by: number): SqliteStatements.SqliteWork => ({
  statements: work.statements / by,
  prepares: work.prepares / by,
  transactions: work.transactions / by
})

const least = (works: ReadonlyArray<SqliteStatements.SqliteWork>): SqliteStatements.SqliteWork => ({
  statements: Math.min(...works.map((w) => w.statements)),
  prepares: Math.min(...works.map((w) => w.prepares)),
  transactions: Math.min(...works.map((w) => w.transactions))
})

/** Counts the SQLite work of an activity round trip and of an agent step (the least of 3 tries each). */
const countSqliteWork = async (
  context: Context.Context<WorkflowEngine.WorkflowEngine>,
  agent: Bench,
  activityCount: number
): Promise<SqliteWorkRow> => {
  const perActivity: Array<SqliteStatements.SqliteWork> = []
  const perStep: Array<SqliteStatements.SqliteWork> = []
  for (let i = 0; i < 3; i++) {
    const full = await SqliteStatements.count(() => Effect.runPromise(activityRun(context, activityCount, true)))
    const empty = await SqliteStatements.count(() => Effect.runPromise(activityRun(context, 0, true)))
    perActivity.push(divide({
      statements: full.work.statements - empty.work.statements,
      prepares: full.work.prepares - empty.work.prepares,
      transactions: full.work.transactions - empty.work.transactions
    }, activityCount))
    perStep.push(divide((await SqliteStatements.count(() => Effect.runPromise(agent.runOnce))).work, steps))
  }
  return { perActivity: least(perActivity), perStep: least(perStep) }
}

// ---------------------------------------------------------------------------
// crash and resume
// ---------------------------------------------------------------------------

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), "durableChild.ts")

const epochMs = () => performance.timeOrigin + performance.now()

/** Spawns the child script with `args` under this process's loader flags (tsx). */
const spawnChild = (args: ReadonlyArray<string>) => {
  const child = spawn(process.execPath, [...process.execArgv, CHILD, ...args], { stdio: ["ignore", "pipe", "pipe"] })
  let stderr = ""
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const lines: Array<string> = []
  const waiters = new Set<() => void>()
  readline.createInterface({ input: child.stdout }).on("line", (line) => {
    lines.push(line)
    waiters.forEach((wake) => wake())
  })
  const exited = new Promise<void>((resolve) =>
    child.on("exit", () => {
      waiters.forEach((wake) => wake())
      resolve()
    })
  )
  const running = () => child.exitCode === null && child.signalCode === null
  /** The rest of the first stdout line starting with `prefix`. */
  const waitFor = (prefix: string, timeoutMs: number) =>
    new Promise<string>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer)
        waiters.delete(check)
      }
      const check = () => {
        const line = lines.find((l) => l.startsWith(prefix))
        if (line !== undefined) {
          done()
          resolve(line.slice(prefix.length))
        } else if (!running()) {
          done()
          reject(new Error(`the child exited before printing "${prefix}"; stderr:\n${stderr}`))
        }
      }
      const timer = setTimeout(() => {
        done()
        reject(new Error(`no "${prefix}" line within ${timeoutMs} ms; stderr:\n${stderr}`))
      }, timeoutMs)
      waiters.add(check)
      check()
    })
  const kill = async () => {
    if (running()) child.kill("SIGKILL")
    await exited
  }
  return { waitFor, kill }
}

/** What the resuming child prints after `done ` (epoch ms and counts). */
interface ChildReport {
  readonly boot: number
  readonly main: number
  readonly layers: number
  readonly first: number
  readonly done: number
  readonly modelCalls: number
  readonly toolCalls: number
  readonly state: string
  readonly steps: number
  readonly toolResults: number
  readonly text: string
}

/** One crash and resume on a fresh SQLite file. */
const crashAndResume = async (directory: string, index: number): Promise<ResumeSample> => {
  const db = path.join(directory, `crash-${index}.db`)
  const firstAt = epochMs()
  const first = spawnChild(["--crash", `--db=${db}`])
  try {
    await first.waitFor("tool ", 60_000)
  } finally {
    await first.kill()
  }
  const crashedAfterMs = epochMs() - firstAt
  const spawnedAt = epochMs()
  const second = spawnChild(["--resume", `--db=${db}`])
  try {
    const report = JSON.parse(await second.waitFor("done ", 60_000)) as ChildReport
    if (
      report.state !== "Completed" || report.steps !== steps + 1 || report.toolResults !== steps ||
      report.text !== answer
    ) {
      throw new Error(`the resumed run did not finish as scripted: ${JSON.stringify(report)}`)
    }
    return {
      crashedAfterMs,
      bootMs: report.boot - spawnedAt,
      loadMs: report.main - report.boot,
      layersMs: report.layers - report.main,
      replayMs: report.first - report.layers,
      restMs: report.done - report.first,
      totalMs: report.done - spawnedAt,
      modelCalls: report.modelCalls,
      toolCalls: report.toolCalls
    }
  } finally {
    await second.kill()
  }
}

// ---------------------------------------------------------------------------
// measure
// ---------------------------------------------------------------------------

/**
 * Runs the measurements.
 *
 * @since 0.1.0
 * @category constructors
 */
export const measure = async (options: {
  readonly quick: boolean
  readonly sampling: Omit<SampleOptions, "unitsPerRun">
  readonly log: (line: string) => void
}): Promise<DurableResult> => {
  const { log, sampling } = options
  const started = performance.now()
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-durable-"))
  const closers: Array<() => Promise<void>> = []
  try {
    const filename = path.join(directory, "runs.db")
    const memory = await build(
      durableLayer(
        agentLayer(),
        Layer.mergeAll(Checkpointer.layerMemory, RunStore.layerMemory),
        AgentEngine.layerMemory
      )
    )
    closers.push(memory.close)
    const sqlite = await build(sqliteLayer(agentLayer(), filename))
    closers.push(sqlite.close)

    const server = await startPostgres()
    const postgres = typeof server === "string" ? undefined : await (async () => {
      closers.push(server.stop)
      const built = await build(postgresLayer(agentLayer(), await server.createDatabase("bench")))
      closers.push(built.close)
      return built
    })()
    if (typeof server === "string") log(`  no PostgreSQL row: ${server}`)

    const memoryCheckpointer = await Effect.runPromise(Checkpointer.makeMemory)
    const sqlCheckpointer = await Effect.runPromise(
      SqlCheckpointer.make({ table: "in_process_checkpoints" }).pipe(Effect.provide(sqlite.context))
    )
    const rows: ReadonlyArray<{ readonly key: StepRow["key"]; readonly label: string; readonly bench: Bench }> = [
      {
        key: "inProcess",
        label: "in-process loop (memory checkpointer)",
        bench: await inProcessBench(Context.make(Checkpointer.Checkpointer, memoryCheckpointer))
      },
      {
        key: "inProcessSql",
        label: "in-process loop, `SqlCheckpointer` on SQLite (no engine)",
        bench: await inProcessBench(Context.make(Checkpointer.Checkpointer, sqlCheckpointer))
      },
      { key: "memory", label: "`AgentWorkflow` on `AgentEngine.layerMemory`", bench: durableBench(memory.context) },
      {
        key: "sqlite",
        label: "`AgentWorkflow` on `AgentEngine.layerSqlite` (+ `SqlCheckpointer`, `RunStore.layer`)",
        bench: durableBench(sqlite.context)
      },
      ...(postgres === undefined ? [] : [{
        key: "postgres" as const,
        label: "`AgentWorkflow` on `AgentEngine.layerPostgres`, one runner (+ `SqlCheckpointer`, `RunStore.layer`)",
        bench: durableBench(postgres.context)
      }])
    ]
    for (const row of rows) verify(row.label, await Effect.runPromise(row.bench.check))
    const before = await Effect.runPromise(journalSize(sqlite.context))
    await Effect.runPromise(rows.find((row) => row.key === "sqlite")!.bench.runOnce)
    const after = await Effect.runPromise(journalSize(sqlite.context))
    const journal: JournalGrowth = {
      messages: after.messages - before.messages,
      replies: after.replies - before.replies,
      payloadBytes: after.payloadBytes - before.payloadBytes
    }
    log(
      `  one run journals ${journal.messages} messages and ${journal.replies} replies, ` +
        `${(journal.payloadBytes / 1024).toFixed(1)} KiB of payloads`
    )
    const activityCount = 20
    const sqliteWork = await countSqliteWork(
      sqlite.context,
      rows.find((row) => row.key === "sqlite")!.bench,
      activityCount
    )
    log(
      `  SQLite per activity: ${sqliteWork.perActivity.statements.toFixed(2)} statements, ` +
        `${sqliteWork.perActivity.prepares.toFixed(2)} prepared, ${sqliteWork.perActivity.transactions.toFixed(2)} ` +
        `transactions; per step: ${
          sqliteWork.perStep.statements.toFixed(1)
        } statements (@effect/cluster ${clusterBuild})`
    )
    // the least of 3 runs, one after another (the counter is the process's)
    const memoryRun = rows.find((row) => row.key === "memory")!.bench.runOnce
    let memoryFiberOps = Infinity
    for (let i = 0; i < 3; i++) {
      memoryFiberOps = Math.min(memoryFiberOps, (await FiberOps.count(memoryRun)).operations / steps)
    }
    log(`  memory engine: ${memoryFiberOps.toFixed(1)} fiber operations per step`)
    const results = await sampleMany(rows.map((row) => ({ effect: row.bench.runOnce, unitsPerRun: steps })), sampling)
    const perStep = rows.map((row, i): StepRow => {
      const result = results[i]!
      log(
        `  ${row.key.padEnd(13)} ${result.cpuUs.toFixed(1).padStart(8)} µs CPU/step  ` +
          `${result.wallUs.toFixed(1).padStart(8)} µs wall/step`
      )
      return { key: row.key, label: row.label, result }
    })

    const engines: ReadonlyArray<readonly [ActivityRow["engine"], Context.Context<WorkflowEngine.WorkflowEngine>]> = [
      ["memory", memory.context],
      ["sqlite", sqlite.context],
      ...(postgres === undefined ? [] : [["postgres", postgres.context] as const])
    ]
    const activitySamples = await sampleMany(
      engines.flatMap(([, context]) => [
        { effect: activityRun(context, 0, false), unitsPerRun: 1 },
        { effect: activityRun(context, activityCount, false), unitsPerRun: 1 },
        { effect: activityRun(context, activityCount, true), unitsPerRun: 1 }
      ]),
      sampling
    )
    const activities = engines.map(([engine], i): ActivityRow => {
      const empty = activitySamples[3 * i]!
      const full = activitySamples[3 * i + 1]!
      const reused = activitySamples[3 * i + 2]!
      const per = (sample: Sample) => ((sample.wallUs - empty.wallUs) / activityCount).toFixed(1).padStart(8)
      log(
        `  activity on ${engine.padEnd(8)} ${per(full)} µs wall, ${per(reused)} µs with a shared exit schema ` +
          `(a run with none: ${empty.wallUs.toFixed(0)} µs)`
      )
      return { engine, empty, full, reused }
    })

    const resume: Array<ResumeSample> = []
    const samples = options.quick ? 2 : 3
    for (let i = 0; i < samples; i++) {
      const sample = await crashAndResume(directory, i)
      log(
        `  resume ${i + 1}: ${sample.totalMs.toFixed(0)} ms (boot ${sample.bootMs.toFixed(0)}, load ` +
          `${sample.loadMs.toFixed(0)}, layers ${sample.layersMs.toFixed(0)}, replay ${sample.replayMs.toFixed(0)}, ` +
          `rest ${sample.restMs.toFixed(0)}); the first process was killed ${sample.crashedAfterMs.toFixed(0)} ms ` +
          `after its spawn`
      )
      resume.push(sample)
    }
    return {
      steps,
      sampling,
      perStep,
      activityCount,
      activities,
      journal,
      sqliteWork,
      memoryFiberOps,
      clusterBuild,
      resume,
      filesystem: fileSystemOf(directory),
      synchronous: await Effect.runPromise(synchronousOf(sqlite.context)),
      postgresMissing: typeof server === "string" ? server : undefined,
      seconds: (performance.now() - started) / 1000
    }
  } finally {
    for (const close of closers.reverse()) await close()
    fs.rmSync(directory, { recursive: true, force: true })
  }
}
