/**
 * Where the records of durable runs are kept (`RunRecord`, the same format
 * as a record made in process). With a `RecordStore` in the context of an
 * `AgentWorkflow`'s layer, each run of it is recorded as it goes: its header
 * (input, start), each step with its result (a model call with the request
 * as sent and the reply), each wait with the decision it got, each
 * middleware decision, and its end (completed, failed or cancelled).
 * `AgentWorkflow.record(runId)` reads the record back, of a finished run or
 * of one that waits, was cancelled or failed.
 *
 * A run's body executes again after each wait and after a crash, and gives
 * the same steps in the same order: each entry has its place (`slot`) in
 * that order, written once; a wait's entry is written again once its
 * decision arrives. Slots are ordered, not dense: the decisions between two
 * steps take the slots between theirs. `layer` keeps the records in a SQL table through
 * `@effect/sql`'s `SqlClient` (SQLite or PostgreSQL, e.g. the database of a
 * durable engine); `layerMemory` in the process.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { unknownKey } from "./internal/options.js"

/**
 * The store could not be read or written.
 *
 * @example
 * ```ts
 * import { RecordStore } from "@stepwise-agent/workflow"
 *
 * const error = new RecordStore.RecordStoreError({ operation: "read", reason: "database is locked" })
 * error.message // "Record store read failed: database is locked"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class RecordStoreError extends Schema.TaggedError<RecordStoreError>(
  "@stepwise-agent/workflow/RecordStore/RecordStoreError"
)("RecordStoreError", {
  operation: Schema.String,
  reason: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Record store ${this.operation} failed: ${this.reason}`
  }
}

/**
 * The run has no record: it ran without a `RecordStore` in its workflow's
 * context, has not started yet, or was pruned.
 *
 * @example
 * ```ts
 * import { RecordStore } from "@stepwise-agent/workflow"
 *
 * new RecordStore.RecordNotFound({ runId: "run-1" }).message // "Run \"run-1\" has no record"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class RecordNotFound extends Schema.TaggedError<RecordNotFound>(
  "@stepwise-agent/workflow/RecordStore/RecordNotFound"
)("RecordNotFound", { runId: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Run "${this.runId}" has no record`
  }
}

/**
 * The stored lines of one run's record: its header (slot `-1`), when
 * written, and its entries as JSON, by slot, in order.
 *
 * @example
 * ```ts
 * import type { RecordStore } from "@stepwise-agent/workflow"
 *
 * const lines = (stored: RecordStore.Stored) => stored.entries.map(([, line]) => line)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Stored {
  readonly header: string | undefined
  readonly entries: ReadonlyArray<readonly [slot: number, line: string]>
}

/**
 * The store of the records of durable runs.
 *
 * @example
 * ```ts
 * import { RecordStore } from "@stepwise-agent/workflow"
 * import { Effect } from "effect"
 *
 * const stored = Effect.flatMap(RecordStore.RecordStore, (store) => store.read("run-1"))
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class RecordStore extends Context.Tag("@stepwise-agent/workflow/RecordStore")<
  RecordStore,
  RecordStore.Service
>() {}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace RecordStore {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** Writes the line at `slot` of the run's record (`-1`: its header), over any line there. */
    readonly put: (runId: string, slot: number, line: string) => Effect.Effect<void, RecordStoreError>
    /** The run's record as stored. */
    readonly read: (runId: string) => Effect.Effect<Stored, RecordStoreError>
    /** Removes the run's record. */
    readonly delete: (runId: string) => Effect.Effect<void, RecordStoreError>
  }
}

/**
 * A store in the process's memory (tests, one process).
 *
 * @example
 * ```ts
 * import { RecordStore } from "@stepwise-agent/workflow"
 * import { Effect } from "effect"
 *
 * const lines = Effect.flatMap(RecordStore.makeMemory, (store) => store.read("run-1"))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<RecordStore.Service> = Effect.sync(() => {
  const runs = new Map<string, Map<number, string>>()
  return RecordStore.of({
    put: (runId, slot, line) =>
      Effect.sync(() => {
        let lines = runs.get(runId)
        if (lines === undefined) {
          lines = new Map()
          runs.set(runId, lines)
        }
        lines.set(slot, line)
      }),
    read: (runId) =>
      Effect.sync(() => {
        const lines = runs.get(runId) ?? new Map<number, string>()
        return {
          header: lines.get(-1),
          entries: [...lines].filter(([slot]) => slot >= 0).sort(([a], [b]) => a - b)
        }
      }),
    delete: (runId) =>
      Effect.sync(() => {
        runs.delete(runId)
      })
  })
})

/**
 * Options of {@link make}.
 *
 * @example
 * ```ts
 * import { RecordStore } from "@stepwise-agent/workflow"
 *
 * const Records = RecordStore.layer({ table: "support_run_records" })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The table's name. Default `stepwise_run_records`. */
  readonly table?: string | undefined
}

const sqlFailure = (operation: string) => (error: SqlError) =>
  new RecordStoreError({ operation, reason: String(error.cause ?? error.message), cause: error })

/**
 * Builds the store on the `SqlClient` in context, creating its table if
 * missing: one row per entry, keyed by run and slot. Options with a key it
 * does not know fail with `AgentError.InvalidOptions` naming it.
 *
 * @example
 * ```ts
 * import { SqliteClient } from "@effect/sql-sqlite-node"
 * import { RecordStore } from "@stepwise-agent/workflow"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const store = yield* RecordStore.make()
 *   return yield* store.read("run-1")
 * }).pipe(Effect.provide(SqliteClient.layer({ filename: "runs.db" })))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.fnUntraced(function*(options?: Options | undefined) {
  const unknown = unknownKey("RecordStore", options, ["table"])
  if (unknown !== undefined) return yield* unknown
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  const table = sql(options?.table ?? "stepwise_run_records")
  const create = sql`CREATE TABLE IF NOT EXISTS ${table} (
    run_id TEXT NOT NULL,
    slot INTEGER NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (run_id, slot)
  )`
  // Concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL: serialize it across processes.
  yield* sql.onDialectOrElse({
    pg: () => sql.withTransaction(Effect.zipRight(sql`SELECT pg_advisory_xact_lock(1701143653, 3)`, create)),
    orElse: () => create
  })
  return RecordStore.of({
    put: (runId, slot, line) =>
      sql`
        INSERT INTO ${table} (run_id, slot, entry) VALUES (${runId}, ${slot}, ${line})
        ON CONFLICT (run_id, slot) DO UPDATE SET entry = excluded.entry
      `.pipe(Effect.asVoid, Effect.mapError(sqlFailure("put"))),
    read: (runId) =>
      sql<{ readonly slot: number | string; readonly entry: string }>`
        SELECT slot, entry FROM ${table} WHERE run_id = ${runId} ORDER BY slot
      `.pipe(
        Effect.map((rows) => {
          const lines = rows.map((row) => [Number(row.slot), row.entry] as const)
          return {
            header: lines.find(([slot]) => slot === -1)?.[1],
            entries: lines.filter(([slot]) => slot >= 0)
          }
        }),
        Effect.mapError(sqlFailure("read"))
      ),
    delete: (runId) =>
      sql`DELETE FROM ${table} WHERE run_id = ${runId}`.pipe(Effect.asVoid, Effect.mapError(sqlFailure("delete")))
  })
})

/**
 * The store in memory, as a layer.
 *
 * @example
 * ```ts
 * import { RecordStore } from "@stepwise-agent/workflow"
 *
 * const Records = RecordStore.layerMemory
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<RecordStore> = Layer.effect(RecordStore, makeMemory)

/**
 * The store in a SQL table, as a layer on the `SqlClient` in context.
 *
 * @example
 * ```ts
 * import { AgentEngine, RecordStore } from "@stepwise-agent/workflow"
 * import { Layer } from "effect"
 *
 * // records next to the durable runs, in the same SQLite file
 * const Records = RecordStore.layer().pipe(Layer.provideMerge(AgentEngine.layerSqlite()))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options?: Options | undefined
): Layer.Layer<RecordStore, SqlError | AgentError.InvalidOptions, SqlClient.SqlClient> =>
  Layer.effect(RecordStore, make(options))
