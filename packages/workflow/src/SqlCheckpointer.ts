/**
 * A `Checkpointer` in a SQL table, through @effect/sql's `SqlClient`: the
 * same code on SQLite and PostgreSQL, and the same database as a durable
 * engine (`AgentEngine.layerSqlite` / `layerPostgres` provide their
 * `SqlClient`).
 *
 * One row per thread holds its checkpoint as JSON, encoded with the core
 * `Checkpoint` schema. A save is a single upsert, so a crash during a save
 * leaves the previous checkpoint intact. The table is created if missing.
 *
 * A conditional save (`Checkpointer.SaveOptions`, how an agent's run saves)
 * is one statement too — an `UPDATE … WHERE` the stored incarnation is the one
 * expected, or an `INSERT … ON CONFLICT DO UPDATE … WHERE` it is the save's
 * own for a new thread — so the database checks and writes atomically, across
 * every process on it: a run still going when its thread is deleted (or
 * deleted and made again) writes nothing and fails with `CheckpointError`
 * (`conflict` set).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { CheckpointError, InvalidOptions } from "@stepwise-agent/core/AgentError"
import * as Checkpointer from "@stepwise-agent/core/Checkpointer"
import { describeValue } from "@stepwise-agent/core/Secrets"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { unknownKey } from "./internal/options.js"

/**
 * Options of {@link make}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The table's name. Default `stepwise_checkpoints`. */
  readonly table?: string | undefined
}

const sqlFailure = (threadId: string, operation: "load" | "save") => (error: SqlError) =>
  new CheckpointError({ threadId, operation, reason: String(error.cause ?? error.message), cause: error })

/** From JavaScript, a thread id that is not a string: refused by its kind under the empty id (as core's stores do). */
const notAThreadId = (threadId: unknown, operation: "load" | "save"): Effect.Effect<void, CheckpointError> =>
  typeof threadId === "string" ? Effect.void : Effect.fail(
    new CheckpointError({
      threadId: "",
      operation,
      reason: `the thread id must be a string, got ${describeValue(threadId)}`
    })
  )

/**
 * Builds the checkpointer on the `SqlClient` in context, creating its table
 * if missing. Options with a key it does not know fail with `InvalidOptions`
 * naming it.
 *
 * @example
 * ```ts
 * import { SqlCheckpointer } from "@stepwise-agent/workflow"
 * import { SqliteClient } from "@effect/sql-sqlite-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const checkpointer = yield* SqlCheckpointer.make()
 *   return yield* checkpointer.load("thread-1")
 * }).pipe(Effect.provide(SqliteClient.layer({ filename: "threads.db" })))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.fnUntraced(function*(options?: Options | undefined) {
  const unknown = unknownKey("SqlCheckpointer", options, ["table"])
  if (unknown !== undefined) return yield* unknown
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  const name: unknown = options?.table ?? "stepwise_checkpoints"
  if (typeof name !== "string" || name.length === 0) {
    return yield* new InvalidOptions({
      module: "SqlCheckpointer",
      option: "table",
      reason: `must be a non-empty string, got ${typeof name === "string" ? "an empty string" : describeValue(name)}`
    })
  }
  const table = sql(name)
  const create = sql`CREATE TABLE IF NOT EXISTS ${table} (
    thread_id TEXT PRIMARY KEY,
    checkpoint TEXT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  // Concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL: serialize it across processes.
  yield* sql.onDialectOrElse({
    pg: () => sql.withTransaction(Effect.zipRight(sql`SELECT pg_advisory_xact_lock(1701143653, 1)`, create)),
    orElse: () => create
  })

  // the incarnation of the stored row (SQL NULL for none), in the statements of a conditional save
  const storedIncarnation = sql.onDialectOrElse({
    pg: () => sql`(${table}.checkpoint::jsonb ->> 'incarnation')`,
    orElse: () => sql`json_extract(${table}.checkpoint, '$.incarnation')`
  })

  return Checkpointer.make({
    load: Effect.fn("SqlCheckpointer.load")(function*(threadId) {
      yield* notAThreadId(threadId, "load")
      const rows = yield* sql<{ readonly checkpoint: string }>`
        SELECT checkpoint FROM ${table} WHERE thread_id = ${threadId}
      `.pipe(Effect.mapError(sqlFailure(threadId, "load")))
      if (rows.length === 0) return Option.none()
      return Option.some(yield* Checkpointer.fromJson(threadId, rows[0].checkpoint))
    }),
    save: Effect.fn("SqlCheckpointer.save")(function*(threadId, checkpoint, saveOptions) {
      yield* notAThreadId(threadId, "save")
      const json = yield* Checkpointer.toJson(threadId, checkpoint)
      const now = yield* Clock.currentTimeMillis
      const expected = saveOptions?.expected
      if (expected === undefined) {
        return yield* sql`
          INSERT INTO ${table} (thread_id, checkpoint, updated_at) VALUES (${threadId}, ${json}, ${now})
          ON CONFLICT (thread_id) DO UPDATE SET checkpoint = excluded.checkpoint, updated_at = excluded.updated_at
        `.pipe(Effect.asVoid, Effect.mapError(sqlFailure(threadId, "save")))
      }
      const saved = { checkpoint, length: checkpoint.messages.length }
      if (
        expected !== "absent" &&
        (typeof expected !== "object" || expected === null || Array.isArray(expected) ||
          (expected.incarnation !== undefined && typeof expected.incarnation !== "string"))
      ) {
        // an expectation of no known form (from JavaScript): `checkExpected` refuses it, typed
        return yield* Checkpointer.checkExpected(threadId, saved, Option.none(), saveOptions)
      }
      // the rule of `Checkpointer.checkExpected`, in the statement that writes: a thread of the save's own
      // incarnation, else no thread (`"absent"`), else one of the expected incarnation or of none
      const own = checkpoint.incarnation ?? null
      const written = yield* (expected === "absent"
        ? sql<{ readonly thread_id: string }>`
          INSERT INTO ${table} (thread_id, checkpoint, updated_at) VALUES (${threadId}, ${json}, ${now})
          ON CONFLICT (thread_id) DO UPDATE SET checkpoint = excluded.checkpoint, updated_at = excluded.updated_at
          WHERE ${storedIncarnation} = ${own}
          RETURNING thread_id
        `
        : sql<{ readonly thread_id: string }>`
          UPDATE ${table} SET checkpoint = ${json}, updated_at = ${now}
          WHERE thread_id = ${threadId} AND (
            ${storedIncarnation} IS NULL OR ${storedIncarnation} = ${expected.incarnation ?? null} OR
            ${storedIncarnation} = ${own}
          )
          RETURNING thread_id
        `).pipe(Effect.mapError(sqlFailure(threadId, "save")))
      if (written.length > 0) return
      // nothing written: the error says what is stored instead
      const found = yield* sql<{ readonly incarnation: string | null }>`
        SELECT ${storedIncarnation} AS incarnation FROM ${table} WHERE thread_id = ${threadId}
      `.pipe(Effect.mapError(sqlFailure(threadId, "save")))
      const stored = found.length === 0
        ? Option.none()
        : Option.some({ incarnation: found[0].incarnation ?? undefined })
      yield* Checkpointer.checkExpected(threadId, saved, stored, saveOptions)
      return yield* new CheckpointError({
        threadId,
        operation: "save",
        conflict: "Superseded",
        reason:
          `the stored thread changed while the run saved: nothing was written (this checkpoint of the run, ${checkpoint.messages.length} messages, was not saved)`
      })
    }),
    delete: Effect.fn("SqlCheckpointer.delete")(function*(threadId) {
      yield* notAThreadId(threadId, "save")
      yield* sql`DELETE FROM ${table} WHERE thread_id = ${threadId}`.pipe(
        Effect.mapError(sqlFailure(threadId, "save"))
      )
    })
  })
})

/**
 * The checkpointer as a layer, on the `SqlClient` in context.
 *
 * @example
 * ```ts
 * import { AgentEngine, SqlCheckpointer } from "@stepwise-agent/workflow"
 * import { Layer } from "effect"
 *
 * // checkpoints next to the durable runs, in the same SQLite file
 * const Live = SqlCheckpointer.layer().pipe(Layer.provideMerge(AgentEngine.layerSqlite()))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options?: Options | undefined
): Layer.Layer<Checkpointer.Checkpointer, SqlError | InvalidOptions, SqlClient.SqlClient> =>
  Layer.effect(Checkpointer.Checkpointer, make(options))
