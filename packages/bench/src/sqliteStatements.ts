/**
 * Counts what SQLite is asked to do in this process: statements executed,
 * statements prepared (a prepared-statement cache miss, or a statement run
 * unprepared) and transactions begun. A deterministic measure of a storage
 * path, where timings on a shared machine are not.
 *
 * The counters wrap better-sqlite3's `Database.prototype.prepare` and the
 * execution methods of its statements, once, on first use; they count only
 * inside {@link count}.
 *
 * @since 0.1.0
 */
import { createRequire } from "node:module"

/**
 * What SQLite was asked to do.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteWork {
  /** Statements executed (`run`, `all`, `get`, `iterate`), `BEGIN` and `COMMIT` included. */
  readonly statements: number
  /** Statements compiled by SQLite (`prepare`). */
  readonly prepares: number
  /** Explicit transactions (`BEGIN …` executed). */
  readonly transactions: number
}

let counting = false
let statements = 0
let prepares = 0
let transactions = 0
let installed = false

const install = () => {
  if (installed) return
  installed = true
  // better-sqlite3 is a dependency of @effect/sql-sqlite-node, resolved from there
  const require = createRequire(createRequire(import.meta.url).resolve("@effect/sql-sqlite-node/SqliteClient"))
  type Statement = Record<string, (...args: Array<unknown>) => unknown>
  const Database = require("better-sqlite3") as {
    new(filename: string): { prepare: (sql: string) => Statement; close: () => void }
    prototype: { prepare: (sql: string) => Statement }
  }
  // every statement, cached ones included, shares one prototype
  const probe = new Database(":memory:")
  const statementPrototype = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Statement
  probe.close()
  for (const method of ["run", "all", "get", "iterate"]) {
    const execute = statementPrototype[method]!
    statementPrototype[method] = function(this: { readonly source: string }, ...args: Array<unknown>) {
      if (counting) {
        statements++
        if (/^\s*BEGIN\b/i.test(this.source)) transactions++
      }
      return execute.apply(this, args)
    }
  }
  const prepare = Database.prototype.prepare
  Database.prototype.prepare = function(this: unknown, sql: string) {
    if (counting) prepares++
    return prepare.call(this, sql)
  }
}

/**
 * Runs `f` and counts what SQLite was asked to do meanwhile (by anything in
 * the process: keep other work out of the window).
 *
 * @since 0.1.0
 * @category constructors
 */
export const count = async <A>(f: () => Promise<A>): Promise<{ readonly result: A; readonly work: SqliteWork }> => {
  install()
  statements = prepares = transactions = 0
  counting = true
  try {
    const result = await f()
    return { result, work: { statements, prepares, transactions } }
  } finally {
    counting = false
  }
}
