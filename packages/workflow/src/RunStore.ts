/**
 * A registry of durable runs: which thread and workflow execution a run id
 * stands for, the runs of a thread (newest first), and a one-time claim per
 * decision so that an approval sent twice — by a double click, a retried
 * request or two processes — is applied once, and a cancel request per run
 * (a record of its own: no decision key can stand for it); and the messages
 * sent to threads (`AgentWorkflow.send`) until a run takes them in, each
 * taken in once.
 *
 * `layer` keeps it in SQL tables through @effect/sql's `SqlClient` (SQLite or
 * PostgreSQL, e.g. the database of a durable engine); `layerMemory` in the
 * process.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { sentence, unknownKey } from "./internal/options.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * A registered run.
 *
 * @since 0.1.0
 * @category models
 */
export const RunRecord = Schema.Struct({
  runId: Schema.String,
  threadId: Schema.String,
  /** The workflow engine's execution id of the run. */
  executionId: Schema.String,
  /** The workflow's name (with its version). */
  workflow: Schema.String,
  createdAt: Schema.DateTimeUtcFromNumber
})

/**
 * @since 0.1.0
 * @category models
 */
export type RunRecord = typeof RunRecord.Type

/**
 * What `register` needs; `createdAt` defaults to now.
 *
 * @since 0.1.0
 * @category models
 */
export interface NewRun {
  readonly runId: string
  readonly threadId: string
  readonly executionId: string
  readonly workflow: string
  readonly createdAt?: DateTime.Utc | undefined
  /**
   * With `true`, a run this call registers also becomes the run that owns
   * the thread's messages (`setRunning`), in the same transaction; a run
   * registered before (a retried start) changes nothing.
   */
  readonly ownsThread?: boolean | undefined
}

/**
 * A claimed decision: when it was claimed, the decision as the claimer
 * encoded it (when it gave one) and whether it reached the run.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimedDecision {
  readonly key: string
  readonly decidedAt: number
  /** The decision, encoded by whoever claimed it (for `AgentWorkflow`, JSON). */
  readonly decision: string | undefined
  /** Whether the decision was handed to the run (`markDelivered`). */
  readonly delivered: boolean
}

/**
 * A message sent to a thread, as stored: its place in send order
 * (`sequence`, unique in the store), how it joins the thread, and its
 * messages as the sender encoded them (for `AgentWorkflow`, JSON).
 *
 * @since 0.1.0
 * @category models
 */
export interface SentMessage {
  readonly sequence: number
  readonly threadId: string
  readonly mode: "steer" | "queue"
  readonly messages: string
  readonly sentAt: number
}

/**
 * What {@link RunStore.Service.claimNext} took for the next run of a thread:
 * the run's id (`sent-<sequence of its first message>`) and its input.
 *
 * @since 0.1.0
 * @category models
 */
export interface NextRun {
  readonly runId: string
  readonly messages: ReadonlyArray<SentMessage>
}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * No run is registered under this id. A run id that is not a string (from
 * JavaScript) names no run either: `runId` is then `""` and `reason` says
 * what was given.
 *
 * @since 0.1.0
 * @category errors
 */
export class RunNotFound extends Schema.TaggedError<RunNotFound>("@stepwise-agent/workflow/RunStore/RunNotFound")(
  "RunNotFound",
  { runId: Schema.String, reason: Schema.optional(Schema.String) }
) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.reason === undefined
      ? `No run is registered under the id "${this.runId}"`
      : `No run is registered under the id given: ${this.reason}`
  }
}

/**
 * The decision `key` of the run was already claimed.
 *
 * @since 0.1.0
 * @category errors
 */
export class AlreadyDecided extends Schema.TaggedError<AlreadyDecided>(
  "@stepwise-agent/workflow/RunStore/AlreadyDecided"
)("AlreadyDecided", { runId: Schema.String, key: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Run "${this.runId}" already has a decision for "${this.key}"`
  }
}

/**
 * The store could not be read or written.
 *
 * @since 0.1.0
 * @category errors
 */
export class RunStoreError extends Schema.TaggedError<RunStoreError>(
  "@stepwise-agent/workflow/RunStore/RunStoreError"
)("RunStoreError", {
  operation: Schema.String,
  reason: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Run store ${this.operation} failed: ${this.reason}`
  }
}

// -----------------------------------------------------------------------------
// tag
// -----------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category tags
 */
export class RunStore extends Context.Tag("@stepwise-agent/workflow/RunStore")<RunStore, RunStore.Service>() {}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace RunStore {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /**
     * Registers a run, or returns the record already registered under its
     * id (registering is idempotent: the first record wins).
     */
    readonly register: (run: NewRun) => Effect.Effect<RunRecord, RunStoreError>
    /** The run registered under `runId`. */
    readonly get: (runId: string) => Effect.Effect<RunRecord, RunNotFound | RunStoreError>
    /**
     * Registered runs, newest first; only the thread's when `threadId` is given. Options with a key it does not
     * know (a `thread` meant as `threadId`, which would list every run) fail with `RunStoreError`.
     */
    readonly list: (options?: {
      readonly threadId?: string | undefined
      readonly limit?: number | undefined
    }) => Effect.Effect<ReadonlyArray<RunRecord>, RunStoreError>
    /**
     * Claims the decision `key` (e.g. the tool call id of an approval) of a
     * run, storing the encoded `decision` with the claim: succeeds once per
     * `(runId, key)`, atomically across processes; fails with
     * `AlreadyDecided` every later time.
     */
    readonly claimDecision: (
      runId: string,
      key: string,
      decision?: string | undefined
    ) => Effect.Effect<void, AlreadyDecided | RunNotFound | RunStoreError>
    /** Whether the decision `key` of a run was claimed. */
    readonly isDecided: (runId: string, key: string) => Effect.Effect<boolean, RunStoreError>
    /** The claim of the decision `key` of a run, if any. */
    readonly decisionOf: (runId: string, key: string) => Effect.Effect<Option.Option<ClaimedDecision>, RunStoreError>
    /**
     * Removes the claim of the decision `key` of a run if it has not reached
     * the run (e.g. its stored decision cannot be read), so a new decision
     * can be claimed; `false` when there was no such claim.
     */
    readonly releaseDecision: (runId: string, key: string) => Effect.Effect<boolean, RunStoreError>
    /** Records that the run was asked to stop (idempotent). */
    readonly requestCancel: (runId: string) => Effect.Effect<void, RunNotFound | RunStoreError>
    /** Whether the run was asked to stop. */
    readonly isCancelRequested: (runId: string) => Effect.Effect<boolean, RunStoreError>
    /**
     * Records that the claimed decision reached the run. A claim left
     * undelivered (its claimer died in between) is delivered by the next one
     * who finds it.
     */
    readonly markDelivered: (runId: string, key: string) => Effect.Effect<void, RunStoreError>
    /** Removes a run and its claimed decisions (pruning); nothing happens for an unknown id. */
    readonly delete: (runId: string) => Effect.Effect<void, RunStoreError>
    /**
     * Stores a message sent to a thread and, in the same transaction, reads
     * the run that owns the thread's messages now (`setRunning`,
     * `claimNext`): none means no run will take the message in by itself.
     * With `claim: true`, when no run owns them, the same transaction also
     * claims the next run's input (as `claimNext` with no owner): `started`
     * is that run, and `running` names it. With an `idempotencyKey` that an
     * earlier message of the thread was stored with, nothing is stored:
     * `earlier` is that message (and `sequence` its), `started` is none.
     */
    readonly postMessage: (message: {
      readonly threadId: string
      readonly mode: "steer" | "queue"
      readonly messages: string
      readonly claim?: boolean | undefined
      readonly idempotencyKey?: string | undefined
    }) => Effect.Effect<
      {
        readonly sequence: number
        readonly running: Option.Option<string>
        readonly started: Option.Option<NextRun>
        readonly earlier: Option.Option<SentMessage>
      },
      RunStoreError
    >
    /** Makes `runId` the run that owns the thread's messages (a run started on it). */
    readonly setRunning: (threadId: string, runId: string) => Effect.Effect<void, RunStoreError>
    /** The run that owns the thread's messages, if any. */
    readonly running: (threadId: string) => Effect.Effect<Option.Option<string>, RunStoreError>
    /**
     * Claims, for the look `look` of run `runId` into its inbox, every steer
     * message of the thread no run has taken in, in send order, atomically
     * across processes. Idempotent: once a look has claimed messages, asking
     * again gives those and claims nothing more, so a look retried after a
     * crash takes in what the first attempt took.
     */
    readonly claimSteered: (
      threadId: string,
      runId: string,
      look: string
    ) => Effect.Effect<ReadonlyArray<SentMessage>, RunStoreError>
    /**
     * Claims the input of the next run of a thread once `owner` (the run that
     * owned its messages) has ended, or, with no `owner`, when no run owns
     * them: every steer message left, else the first queued one; the run
     * that takes them in then owns the thread's messages. With nothing left,
     * nobody does. Idempotent per `owner`: asking again gives the same run.
     * `None` when another run owns the thread's messages, or nothing is left.
     */
    readonly claimNext: (
      threadId: string,
      owner: string | undefined
    ) => Effect.Effect<Option.Option<NextRun>, RunStoreError>
    /** The messages a run took in as its input (`claimNext`), in send order. */
    readonly inputOf: (runId: string) => Effect.Effect<ReadonlyArray<SentMessage>, RunStoreError>
    /**
     * Marks the ledgered tool call `step` of a run (its journal step, e.g.
     * `tool/call_1`) as started, before its tool runs: `true` the first
     * time, atomically across processes, and `false` every later time — the
     * call started before and its result was never recorded (a crash cut it
     * off). See `ToolEffect` and the effect ledger guide.
     */
    readonly markStarted: (runId: string, step: string) => Effect.Effect<boolean, RunStoreError>
  }
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

const byNewest = (a: RunRecord, b: RunRecord) =>
  DateTime.toEpochMillis(b.createdAt) - DateTime.toEpochMillis(a.createdAt)

/** The id of a run that takes sent messages in as its input: named after the first of them. */
const nextRunId = (first: SentMessage) => `sent-${first.sequence}`

/** What the next run of a thread takes in: every steer message left, else the first queued one. */
const nextInput = <M extends { readonly mode: "steer" | "queue" }>(unclaimed: ReadonlyArray<M>): ReadonlyArray<M> => {
  const steered = unclaimed.filter((message) => message.mode === "steer")
  return steered.length > 0 ? steered : unclaimed.slice(0, 1)
}

const createdAtOf = (run: NewRun) =>
  run.createdAt === undefined ? Effect.map(Clock.currentTimeMillis, DateTime.unsafeMake) : Effect.succeed(run.createdAt)

/** `list`'s options: an object of known keys, if given (as both stores check them). */
const listOptions = (options: unknown): Effect.Effect<void, RunStoreError> => {
  const problem = unknownKey("RunStore", options, ["threadId", "limit"], "list")
  return problem === undefined
    ? Effect.void
    : Effect.fail(new RunStoreError({ operation: "list", reason: `the option ${sentence(problem)}` }))
}

/**
 * A store in the process.
 *
 * @example
 * ```ts
 * import { RunStore } from "@stepwise-agent/workflow"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const runs = yield* RunStore.makeMemory
 *   yield* runs.register({ runId: "run-1", threadId: "t-1", executionId: "e-1", workflow: "AgentRun/v1" })
 *   yield* runs.claimDecision("run-1", "call-1")
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<RunStore.Service> = Effect.sync(() => {
  // insertion order breaks ties between runs created in the same millisecond (newest = inserted last)
  const runs = new Map<string, RunRecord>()
  const decisions = new Map<string, Map<string, ClaimedDecision>>()
  const cancels = new Set<string>()
  /** The ledgered calls marked started, by run. */
  const started = new Map<string, Set<string>>()
  /** Sent messages in send order, each with the run (and the look, or `input`) that took it in. */
  const sent: Array<{ message: SentMessage; claimedBy?: string; claimedAs?: string; after?: string | undefined }> = []
  /** The sequence of the message stored with each idempotency key, by thread and key. */
  const keyed = new Map<string, number>()
  const runningRuns = new Map<string, string>()
  const claimedBy = (runId: string, as: string) =>
    sent.filter((entry) => entry.claimedBy === runId && entry.claimedAs === as).map((entry) => entry.message)
  const claimNext = (threadId: string, owner: string | undefined): Option.Option<NextRun> => {
    if (owner !== undefined) {
      const earlier = sent.find((entry) =>
        entry.message.threadId === threadId && entry.after === owner && entry.claimedAs === "input"
      )
      if (earlier !== undefined) {
        return Option.some({ runId: earlier.claimedBy!, messages: claimedBy(earlier.claimedBy!, "input") })
      }
    }
    if (runningRuns.get(threadId) !== owner) return Option.none()
    const taken = nextInput(
      sent.filter((entry) => entry.claimedBy === undefined && entry.message.threadId === threadId).map((entry) => ({
        ...entry,
        mode: entry.message.mode
      }))
    )
    if (taken.length === 0) {
      runningRuns.delete(threadId)
      return Option.none()
    }
    const runId = nextRunId(taken[0]!.message)
    for (const entry of taken) {
      Object.assign(sent[entry.message.sequence - 1]!, { claimedBy: runId, claimedAs: "input", after: owner })
    }
    runningRuns.set(threadId, runId)
    return Option.some({ runId, messages: taken.map((entry) => entry.message) })
  }
  return RunStore.of({
    register: Effect.fn("RunStore.register")(function*(run) {
      const existing = runs.get(run.runId)
      if (existing !== undefined) return existing
      const record: RunRecord = {
        runId: run.runId,
        threadId: run.threadId,
        executionId: run.executionId,
        workflow: run.workflow,
        createdAt: yield* createdAtOf(run)
      }
      runs.set(run.runId, record)
      if (run.ownsThread === true) runningRuns.set(run.threadId, run.runId)
      return record
    }),
    get: Effect.fn("RunStore.get")(function*(runId) {
      const record = runs.get(runId)
      if (record === undefined) return yield* new RunNotFound({ runId })
      return record
    }),
    list: (options) =>
      Effect.zipRight(
        listOptions(options),
        Effect.sync(() =>
          Array.from(runs.values())
            .reverse()
            .filter((run) => options?.threadId === undefined || run.threadId === options.threadId)
            .sort(byNewest)
            .slice(0, options?.limit)
        )
      ),
    claimDecision: Effect.fn("RunStore.claimDecision")(function*(runId, key, decision) {
      if (!runs.has(runId)) return yield* new RunNotFound({ runId })
      const claimed = decisions.get(runId) ?? new Map<string, ClaimedDecision>()
      if (claimed.has(key)) return yield* new AlreadyDecided({ runId, key })
      const decidedAt = yield* Clock.currentTimeMillis
      decisions.set(runId, claimed.set(key, { key, decidedAt, decision, delivered: false }))
    }),
    isDecided: (runId, key) => Effect.sync(() => decisions.get(runId)?.has(key) === true),
    decisionOf: (runId, key) => Effect.sync(() => Option.fromNullable(decisions.get(runId)?.get(key))),
    releaseDecision: (runId, key) =>
      Effect.sync(() => {
        const claimed = decisions.get(runId)?.get(key)
        return claimed !== undefined && !claimed.delivered && decisions.get(runId)!.delete(key)
      }),
    requestCancel: Effect.fn("RunStore.requestCancel")(function*(runId) {
      if (!runs.has(runId)) return yield* new RunNotFound({ runId })
      cancels.add(runId)
    }),
    isCancelRequested: (runId) => Effect.sync(() => cancels.has(runId)),
    markDelivered: (runId, key) =>
      Effect.sync(() => {
        const claimed = decisions.get(runId)?.get(key)
        if (claimed !== undefined) decisions.get(runId)!.set(key, { ...claimed, delivered: true })
      }),
    delete: (runId) =>
      Effect.sync(() => {
        runs.delete(runId)
        decisions.delete(runId)
        cancels.delete(runId)
        started.delete(runId)
      }),
    postMessage: ({ claim, idempotencyKey, ...message }) =>
      Effect.map(Clock.currentTimeMillis, (sentAt) => {
        const running = () => Option.fromNullable(runningRuns.get(message.threadId))
        const key = idempotencyKey === undefined ? undefined : `${message.threadId}\u0000${idempotencyKey}`
        const stored = key === undefined ? undefined : keyed.get(key)
        if (stored !== undefined) {
          const earlier = sent[stored - 1]!.message
          return { sequence: stored, running: running(), started: Option.none(), earlier: Option.some(earlier) }
        }
        const sequence = sent.length + 1
        sent.push({ message: { ...message, sequence, sentAt } })
        if (key !== undefined) keyed.set(key, sequence)
        const started = claim === true && !runningRuns.has(message.threadId)
          ? claimNext(message.threadId, undefined)
          : Option.none()
        return { sequence, running: running(), started, earlier: Option.none() }
      }),
    setRunning: (threadId, runId) => Effect.sync(() => void runningRuns.set(threadId, runId)),
    running: (threadId) => Effect.sync(() => Option.fromNullable(runningRuns.get(threadId))),
    claimSteered: (threadId, runId, look) =>
      Effect.sync(() => {
        const claimed = claimedBy(runId, look)
        if (claimed.length > 0) return claimed
        const taken = sent.filter((entry) =>
          entry.claimedBy === undefined && entry.message.threadId === threadId && entry.message.mode === "steer"
        )
        for (const entry of taken) Object.assign(entry, { claimedBy: runId, claimedAs: look })
        return taken.map((entry) => entry.message)
      }),
    claimNext: (threadId, owner) => Effect.sync(() => claimNext(threadId, owner)),
    inputOf: (runId) => Effect.sync(() => claimedBy(runId, "input")),
    markStarted: (runId, step) =>
      Effect.sync(() => {
        const steps = started.get(runId) ?? new Set<string>()
        if (steps.has(step)) return false
        started.set(runId, steps.add(step))
        return true
      })
  })
})

/**
 * Options of {@link make}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Prefix of the tables `<prefix>_runs`, `<prefix>_decisions`,
   * `<prefix>_messages` and `<prefix>_threads`. Default `stepwise`.
   */
  readonly prefix?: string | undefined
}

interface RunRow {
  readonly run_id: string
  readonly thread_id: string
  readonly execution_id: string
  readonly workflow: string
  readonly created_at: number | string | bigint
}

interface DecisionRow {
  readonly decided_at: number | string | bigint
  readonly decision: string | null
  readonly delivered_at: number | string | bigint | null
}

interface MessageRow {
  readonly seq: number | string | bigint
  readonly thread_id: string
  readonly mode: string
  readonly messages: string
  readonly sent_at: number | string | bigint
}

const messageFromRow = (row: MessageRow): SentMessage => ({
  sequence: Number(row.seq),
  threadId: row.thread_id,
  mode: row.mode === "queue" ? "queue" : "steer",
  messages: row.messages,
  sentAt: Number(row.sent_at)
})

const fromRow = (row: RunRow): RunRecord => ({
  runId: row.run_id,
  threadId: row.thread_id,
  executionId: row.execution_id,
  workflow: row.workflow,
  createdAt: DateTime.unsafeMake(Number(row.created_at))
})

const storeFailure = (operation: string) => (error: SqlError) =>
  new RunStoreError({ operation, reason: String(error.cause ?? error.message), cause: error })

/**
 * A store in SQL tables on the `SqlClient` in context (SQLite ≥ 3.35 or
 * PostgreSQL), created if missing. `claimDecision` is a single
 * `INSERT … ON CONFLICT DO NOTHING RETURNING`, so concurrent claims from
 * several processes succeed exactly once. Options with a key it does not
 * know fail with `AgentError.InvalidOptions` naming it.
 *
 * @example
 * ```ts
 * import { RunStore } from "@stepwise-agent/workflow"
 * import { SqliteClient } from "@effect/sql-sqlite-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const runs = yield* RunStore.make()
 *   return yield* runs.list({ threadId: "t-1" })
 * }).pipe(Effect.provide(SqliteClient.layer({ filename: "runs.db" })))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.fnUntraced(function*(options?: Options | undefined) {
  const unknown = unknownKey("RunStore", options, ["prefix"])
  if (unknown !== undefined) return yield* unknown
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  const prefix = options?.prefix ?? "stepwise"
  const runsTable = sql(`${prefix}_runs`)
  const decisionsTable = sql(`${prefix}_decisions`)
  const messagesTable = sql(`${prefix}_messages`)
  const threadsTable = sql(`${prefix}_threads`)
  const ledgerTable = sql(`${prefix}_ledger`)
  const sequence = sql.onDialectOrElse({
    pg: () => sql.literal("seq BIGSERIAL PRIMARY KEY"),
    orElse: () => sql.literal("seq INTEGER PRIMARY KEY AUTOINCREMENT")
  })
  const create = Effect.all([
    sql`CREATE TABLE IF NOT EXISTS ${runsTable} (
      ${sequence},
      run_id TEXT NOT NULL UNIQUE,
      thread_id TEXT NOT NULL,
      execution_id TEXT NOT NULL,
      workflow TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      cancel_requested_at BIGINT
    )`,
    sql`CREATE INDEX IF NOT EXISTS ${sql(`${prefix}_runs_thread`)} ON ${runsTable} (thread_id, created_at)`,
    sql`CREATE TABLE IF NOT EXISTS ${decisionsTable} (
      run_id TEXT NOT NULL,
      decision_key TEXT NOT NULL,
      decided_at BIGINT NOT NULL,
      decision TEXT,
      delivered_at BIGINT,
      PRIMARY KEY (run_id, decision_key)
    )`,
    // claimed_by: the run that took the message in; claimed_as: how (`inbox/<n>`, or `input`);
    // after_run: for an input, the run whose end started its run (none: `send` started it);
    // send_key: the sender's idempotency key, if any (unique per thread: see `upgrade`)
    sql`CREATE TABLE IF NOT EXISTS ${messagesTable} (
      ${sequence},
      thread_id TEXT NOT NULL,
      mode TEXT NOT NULL,
      messages TEXT NOT NULL,
      sent_at BIGINT NOT NULL,
      claimed_by TEXT,
      claimed_as TEXT,
      after_run TEXT,
      send_key TEXT
    )`,
    sql`CREATE INDEX IF NOT EXISTS ${sql(`${prefix}_messages_thread`)} ON ${messagesTable} (thread_id, claimed_by)`,
    sql`CREATE INDEX IF NOT EXISTS ${sql(`${prefix}_messages_claim`)} ON ${messagesTable} (claimed_by, claimed_as)`,
    sql`CREATE INDEX IF NOT EXISTS ${sql(`${prefix}_messages_after`)} ON ${messagesTable} (thread_id, after_run)`,
    sql`CREATE TABLE IF NOT EXISTS ${threadsTable} (thread_id TEXT PRIMARY KEY, running TEXT)`,
    // the effect ledger: a row per ledgered tool call that started (`markStarted`)
    sql`CREATE TABLE IF NOT EXISTS ${ledgerTable} (
      run_id TEXT NOT NULL,
      step TEXT NOT NULL,
      started_at BIGINT NOT NULL,
      PRIMARY KEY (run_id, step)
    )`
  ], { discard: true })
  // Tables of 0.1.0 before stored decisions lack two columns of the decisions table, tables from
  // before cancel requests had a record of their own lack one of the runs table, and tables from
  // before idempotent sends lack the messages' key (its index needs the column, so it is made here).
  const keyIndex = sql`CREATE UNIQUE INDEX IF NOT EXISTS ${sql(`${prefix}_messages_key`)}
    ON ${messagesTable} (thread_id, send_key)`
  const upgrade = sql.onDialectOrElse({
    pg: () =>
      Effect.all([
        sql`ALTER TABLE ${decisionsTable} ADD COLUMN IF NOT EXISTS decision TEXT`,
        sql`ALTER TABLE ${decisionsTable} ADD COLUMN IF NOT EXISTS delivered_at BIGINT`,
        sql`ALTER TABLE ${runsTable} ADD COLUMN IF NOT EXISTS cancel_requested_at BIGINT`,
        sql`ALTER TABLE ${messagesTable} ADD COLUMN IF NOT EXISTS send_key TEXT`,
        keyIndex
      ], { discard: true }),
    orElse: () =>
      Effect.gen(function*() {
        const columnsOf = (table: string) =>
          Effect.map(
            sql<{ readonly name: string }>`SELECT name FROM pragma_table_info(${`${prefix}_${table}`})`,
            (rows) => new Set(rows.map((row) => row.name))
          )
        const decisionColumns = yield* columnsOf("decisions")
        if (!decisionColumns.has("decision")) yield* sql`ALTER TABLE ${decisionsTable} ADD COLUMN decision TEXT`
        if (!decisionColumns.has("delivered_at")) {
          yield* sql`ALTER TABLE ${decisionsTable} ADD COLUMN delivered_at BIGINT`
        }
        if (!(yield* columnsOf("runs")).has("cancel_requested_at")) {
          yield* sql`ALTER TABLE ${runsTable} ADD COLUMN cancel_requested_at BIGINT`
        }
        if (!(yield* columnsOf("messages")).has("send_key")) {
          yield* sql`ALTER TABLE ${messagesTable} ADD COLUMN send_key TEXT`
        }
        yield* keyIndex
      })
  })
  // Concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL: serialize it across processes.
  yield* sql.onDialectOrElse({
    pg: () =>
      sql.withTransaction(
        Effect.zipRight(sql`SELECT pg_advisory_xact_lock(1701143653, 1)`, Effect.zipRight(create, upgrade))
      ),
    orElse: () => Effect.zipRight(create, upgrade)
  })

  const columns = sql.literal("run_id, thread_id, execution_id, workflow, created_at")
  const find = (runId: string) => sql<RunRow>`SELECT ${columns} FROM ${runsTable} WHERE run_id = ${runId}`

  const messageColumns = sql.literal("seq, thread_id, mode, messages, sent_at")
  const claimedBy = (runId: string, as: string) =>
    sql<MessageRow>`
      SELECT ${messageColumns} FROM ${messagesTable} WHERE claimed_by = ${runId} AND claimed_as = ${as} ORDER BY seq
    `.pipe(Effect.map((rows) => rows.map(messageFromRow)))
  /**
   * `effect` in a transaction that first takes the write lock on the thread's
   * row (on SQLite a write statement takes the database's; on PostgreSQL the
   * row lock), so claims of one thread from several processes run one after
   * another, and a read inside never works on a snapshot another claim changed.
   */
  const lockedThread = <A, E, R>(threadId: string, effect: Effect.Effect<A, E, R>) =>
    sql.withTransaction(Effect.zipRight(
      sql.onDialectOrElse({
        pg: () =>
          sql`INSERT INTO ${threadsTable} (thread_id, running) VALUES (${threadId}, NULL)
            ON CONFLICT (thread_id) DO UPDATE SET running = ${threadsTable}.running`,
        orElse: () =>
          sql`INSERT INTO ${threadsTable} (thread_id, running) VALUES (${threadId}, NULL)
            ON CONFLICT (thread_id) DO UPDATE SET running = running`
      }),
      effect
    ))
  const runningOf = (threadId: string) =>
    sql<{ readonly running: string | null }>`SELECT running FROM ${threadsTable} WHERE thread_id = ${threadId}`.pipe(
      Effect.map((rows) => Option.fromNullable(rows[0]?.running))
    )

  /** `claimNext` inside a transaction that holds the thread's lock. */
  const claimNextLocked = (threadId: string, owner: string | undefined) =>
    Effect.gen(function*() {
      if (owner !== undefined) {
        const earlier = yield* sql<{ readonly claimed_by: string }>`
        SELECT claimed_by FROM ${messagesTable}
        WHERE thread_id = ${threadId} AND after_run = ${owner} AND claimed_as = 'input' LIMIT 1
      `
        if (earlier.length > 0) {
          const runId = earlier[0]!.claimed_by
          return Option.some<NextRun>({ runId, messages: yield* claimedBy(runId, "input") })
        }
      }
      const running = yield* runningOf(threadId)
      if (Option.getOrUndefined(running) !== owner) return Option.none()
      const unclaimed = yield* sql<MessageRow>`
      SELECT ${messageColumns} FROM ${messagesTable}
      WHERE thread_id = ${threadId} AND claimed_by IS NULL ORDER BY seq
    `
      const taken = nextInput(unclaimed.map(messageFromRow))
      if (taken.length === 0) {
        yield* sql`UPDATE ${threadsTable} SET running = NULL WHERE thread_id = ${threadId}`
        return Option.none()
      }
      const runId = nextRunId(taken[0]!)
      yield* sql`
      UPDATE ${messagesTable} SET claimed_by = ${runId}, claimed_as = 'input', after_run = ${owner ?? null}
      WHERE ${sql.in("seq", taken.map((message) => message.sequence))}
    `
      yield* sql`UPDATE ${threadsTable} SET running = ${runId} WHERE thread_id = ${threadId}`
      return Option.some<NextRun>({ runId, messages: taken })
    })

  return RunStore.of({
    register: Effect.fn("RunStore.register")(function*(run) {
      const createdAt = DateTime.toEpochMillis(yield* createdAtOf(run))
      const insert = sql`
        INSERT INTO ${runsTable} (run_id, thread_id, execution_id, workflow, created_at)
        VALUES (${run.runId}, ${run.threadId}, ${run.executionId}, ${run.workflow}, ${createdAt})
        ON CONFLICT (run_id) DO NOTHING
        RETURNING run_id
      `
      const rows = yield* (run.ownsThread === true
        ? lockedThread(
          run.threadId,
          Effect.flatMap(insert, (created) =>
            created.length === 0
              ? Effect.void
              : sql`UPDATE ${threadsTable} SET running = ${run.runId} WHERE thread_id = ${run.threadId}`)
        )
        : insert).pipe(Effect.zipRight(find(run.runId)), Effect.mapError(storeFailure("register")))
      if (rows.length === 0) {
        return yield* new RunStoreError({ operation: "register", reason: `run "${run.runId}" vanished` })
      }
      return fromRow(rows[0])
    }),
    get: Effect.fn("RunStore.get")(function*(runId) {
      const rows = yield* find(runId).pipe(Effect.mapError(storeFailure("get")))
      if (rows.length === 0) return yield* new RunNotFound({ runId })
      return fromRow(rows[0])
    }),
    list: Effect.fn("RunStore.list")(function*(options) {
      yield* listOptions(options)
      const where = options?.threadId === undefined ? sql.literal("") : sql`WHERE thread_id = ${options.threadId}`
      const limit = options?.limit === undefined ? sql.literal("") : sql`LIMIT ${options.limit}`
      const rows = yield* sql<RunRow>`
        SELECT ${columns} FROM ${runsTable} ${where} ORDER BY created_at DESC, seq DESC ${limit}
      `.pipe(Effect.mapError(storeFailure("list")))
      return rows.map(fromRow)
    }),
    claimDecision: Effect.fn("RunStore.claimDecision")(function*(runId, key, decision) {
      const now = yield* Clock.currentTimeMillis
      const claimed = yield* sql`
        INSERT INTO ${decisionsTable} (run_id, decision_key, decided_at, decision)
        SELECT run_id, CAST(${key} AS TEXT), CAST(${now} AS BIGINT), CAST(${decision ?? null} AS TEXT)
        FROM ${runsTable} WHERE run_id = ${runId}
        ON CONFLICT (run_id, decision_key) DO NOTHING
        RETURNING run_id
      `.pipe(Effect.mapError(storeFailure("claimDecision")))
      if (claimed.length > 0) return
      const run = yield* find(runId).pipe(Effect.mapError(storeFailure("claimDecision")))
      return yield* run.length === 0 ? new RunNotFound({ runId }) : new AlreadyDecided({ runId, key })
    }),
    isDecided: Effect.fn("RunStore.isDecided")(function*(runId, key) {
      const rows = yield* sql`
        SELECT run_id FROM ${decisionsTable} WHERE run_id = ${runId} AND decision_key = ${key}
      `.pipe(Effect.mapError(storeFailure("isDecided")))
      return rows.length > 0
    }),
    decisionOf: Effect.fn("RunStore.decisionOf")(function*(runId, key) {
      const rows = yield* sql<DecisionRow>`
        SELECT decided_at, decision, delivered_at FROM ${decisionsTable}
        WHERE run_id = ${runId} AND decision_key = ${key}
      `.pipe(Effect.mapError(storeFailure("decisionOf")))
      return Option.map(Option.fromNullable(rows[0]), (row): ClaimedDecision => ({
        key,
        decidedAt: Number(row.decided_at),
        decision: row.decision ?? undefined,
        delivered: row.delivered_at !== null
      }))
    }),
    releaseDecision: Effect.fn("RunStore.releaseDecision")(function*(runId, key) {
      const rows = yield* sql`
        DELETE FROM ${decisionsTable}
        WHERE run_id = ${runId} AND decision_key = ${key} AND delivered_at IS NULL
        RETURNING run_id
      `.pipe(Effect.mapError(storeFailure("releaseDecision")))
      return rows.length > 0
    }),
    requestCancel: Effect.fn("RunStore.requestCancel")(function*(runId) {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* sql`
        UPDATE ${runsTable} SET cancel_requested_at = COALESCE(cancel_requested_at, ${now})
        WHERE run_id = ${runId}
        RETURNING run_id
      `.pipe(Effect.mapError(storeFailure("requestCancel")))
      if (rows.length === 0) return yield* new RunNotFound({ runId })
    }),
    isCancelRequested: Effect.fn("RunStore.isCancelRequested")(function*(runId) {
      const rows = yield* sql`
        SELECT run_id FROM ${runsTable} WHERE run_id = ${runId} AND cancel_requested_at IS NOT NULL
      `.pipe(Effect.mapError(storeFailure("isCancelRequested")))
      return rows.length > 0
    }),
    markDelivered: Effect.fn("RunStore.markDelivered")(function*(runId, key) {
      const now = yield* Clock.currentTimeMillis
      yield* sql`
        UPDATE ${decisionsTable} SET delivered_at = ${now}
        WHERE run_id = ${runId} AND decision_key = ${key} AND delivered_at IS NULL
      `.pipe(Effect.mapError(storeFailure("markDelivered")))
    }),
    delete: Effect.fn("RunStore.delete")(function*(runId) {
      yield* sql.withTransaction(Effect.zipRight(
        Effect.all([
          sql`DELETE FROM ${decisionsTable} WHERE run_id = ${runId}`,
          sql`DELETE FROM ${ledgerTable} WHERE run_id = ${runId}`
        ], { discard: true }),
        sql`DELETE FROM ${runsTable} WHERE run_id = ${runId}`
      )).pipe(Effect.mapError(storeFailure("delete")))
    }),
    postMessage: Effect.fn("RunStore.postMessage")(function*(message) {
      const now = yield* Clock.currentTimeMillis
      return yield* lockedThread(
        message.threadId,
        Effect.gen(function*() {
          const key = message.idempotencyKey ?? null
          if (key !== null) {
            const stored = yield* sql<MessageRow>`
              SELECT ${messageColumns} FROM ${messagesTable} WHERE thread_id = ${message.threadId} AND send_key = ${key}
            `
            if (stored.length > 0) {
              const earlier = messageFromRow(stored[0]!)
              return {
                sequence: earlier.sequence,
                running: yield* runningOf(message.threadId),
                started: Option.none<NextRun>(),
                earlier: Option.some(earlier)
              }
            }
          }
          const rows = yield* sql<{ readonly seq: number | string | bigint }>`
            INSERT INTO ${messagesTable} (thread_id, mode, messages, sent_at, send_key)
            VALUES (${message.threadId}, ${message.mode}, ${message.messages}, ${now}, ${key})
            RETURNING seq
          `
          const running = yield* runningOf(message.threadId)
          const started = message.claim === true && Option.isNone(running)
            ? yield* claimNextLocked(message.threadId, undefined)
            : Option.none<NextRun>()
          return {
            sequence: Number(rows[0]!.seq),
            running: Option.isSome(started) ? Option.some(started.value.runId) : running,
            started,
            earlier: Option.none<SentMessage>()
          }
        })
      ).pipe(Effect.mapError(storeFailure("postMessage")))
    }),
    setRunning: Effect.fn("RunStore.setRunning")(function*(threadId, runId) {
      yield* sql`
        INSERT INTO ${threadsTable} (thread_id, running) VALUES (${threadId}, ${runId})
        ON CONFLICT (thread_id) DO UPDATE SET running = ${runId}
      `.pipe(Effect.mapError(storeFailure("setRunning")))
    }),
    running: Effect.fn("RunStore.running")(function*(threadId) {
      return yield* runningOf(threadId).pipe(Effect.mapError(storeFailure("running")))
    }),
    claimSteered: Effect.fn("RunStore.claimSteered")(function*(threadId, runId, look) {
      return yield* lockedThread(
        threadId,
        Effect.gen(function*() {
          const claimed = yield* claimedBy(runId, look)
          if (claimed.length > 0) return claimed
          yield* sql`
            UPDATE ${messagesTable} SET claimed_by = ${runId}, claimed_as = ${look}
            WHERE thread_id = ${threadId} AND claimed_by IS NULL AND mode = 'steer'
          `
          return yield* claimedBy(runId, look)
        })
      ).pipe(Effect.mapError(storeFailure("claimSteered")))
    }),
    claimNext: Effect.fn("RunStore.claimNext")(function*(threadId, owner) {
      return yield* lockedThread(threadId, claimNextLocked(threadId, owner)).pipe(
        Effect.mapError(storeFailure("claimNext"))
      )
    }),
    markStarted: Effect.fn("RunStore.markStarted")(function*(runId, step) {
      const now = yield* Clock.currentTimeMillis
      const marked = yield* sql`
        INSERT INTO ${ledgerTable} (run_id, step, started_at) VALUES (${runId}, ${step}, ${now})
        ON CONFLICT (run_id, step) DO NOTHING
        RETURNING run_id
      `.pipe(Effect.mapError(storeFailure("markStarted")))
      return marked.length > 0
    }),
    inputOf: Effect.fn("RunStore.inputOf")(function*(runId) {
      return yield* claimedBy(runId, "input").pipe(Effect.mapError(storeFailure("inputOf")))
    })
  })
})

// -----------------------------------------------------------------------------
// layers
// -----------------------------------------------------------------------------

/**
 * The store in the process.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<RunStore> = Layer.effect(RunStore, makeMemory)

/**
 * The store in SQL tables on the `SqlClient` in context.
 *
 * @example
 * ```ts
 * import { AgentEngine, RunStore } from "@stepwise-agent/workflow"
 * import { Layer } from "effect"
 *
 * const Live = RunStore.layer().pipe(Layer.provideMerge(AgentEngine.layerSqlite()))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options?: Options | undefined
): Layer.Layer<RunStore, SqlError | AgentError.InvalidOptions, SqlClient.SqlClient> =>
  Layer.effect(RunStore, make(options))
