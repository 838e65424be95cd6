/**
 * Databases for the store and engine tests: a temporary SQLite file and a
 * fresh database on a throwaway PostgreSQL server, each as a layer giving a
 * `SqlClient` plus `TestDatabase`, which tells how to open another,
 * independent client on the same database (as a second process would).
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { PostgresServer } from "./postgres.js"

export class TestDatabase extends Context.Tag("test/TestDatabase")<TestDatabase, {
  readonly dialect: "sqlite" | "pg"
  /** The file (SQLite) or url (PostgreSQL). */
  readonly location: string
  /** Another client on the same database. */
  readonly client: Layer.Layer<SqlClient.SqlClient>
}>() {}

/** A temporary folder, removed with the scope. */
export const tempDirectory = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), prefix))),
    (directory) => Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true }))
  )

const sqliteClient = (filename: string): Layer.Layer<SqlClient.SqlClient> =>
  Layer.orDie(SqliteClient.layer({ filename }))

const pgClient = (url: string): Layer.Layer<SqlClient.SqlClient> =>
  Layer.orDie(PgClient.layer({ url: Redacted.make(url) }))

/** A SQLite file in a temporary folder. */
export const sqlite: Layer.Layer<SqlClient.SqlClient | TestDatabase> = Layer.unwrapScoped(
  Effect.map(tempDirectory("stepwise-sqlite-"), (directory) => {
    const filename = path.join(directory, "test.db")
    return sqliteClient(filename).pipe(
      Layer.merge(
        Layer.succeed(TestDatabase, { dialect: "sqlite", location: filename, client: sqliteClient(filename) })
      )
    )
  })
)

let databases = 0

/** A fresh database on a throwaway PostgreSQL server (started and stopped with the layer). */
export const postgres: Layer.Layer<SqlClient.SqlClient | TestDatabase> = Layer.unwrapScoped(
  Effect.gen(function*() {
    const server = yield* PostgresServer
    const name = `test_${databases++}`
    yield* Effect.promise(() => server.createDatabase(name))
    const url = server.urlOf(name)
    return pgClient(url).pipe(
      Layer.merge(Layer.succeed(TestDatabase, { dialect: "pg", location: url, client: pgClient(url) }))
    )
  })
)
