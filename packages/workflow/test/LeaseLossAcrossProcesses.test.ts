/**
 * A runner process paused (SIGSTOP) past its lease while another runner
 * took the database over: once it runs again (SIGCONT) it starts no tool
 * call, and the new owner completes the run, each call of a tool that is
 * not idempotent run once (the effect ledger). A short lease (LEASE_MS).
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { spawnChild } from "./support/child.js"
import { tempDirectory } from "./support/databases.js"

const script = path.join(import.meta.dirname, "processes", "ledgerAgent.ts")

const spawn = (env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => spawnChild(script, env)),
    (child) =>
      Effect.promise(() => {
        try {
          // a stopped process is killed all the same; SIGCONT lets it exit at once
          process.kill(child.pid, "SIGCONT")
        } catch {
          // it has exited
        }
        return child.kill()
      })
  )

/** What the tool did, line by line (`attempt <key>`). */
const sideLines = (side: string) =>
  fs.existsSync(side) ? fs.readFileSync(side, "utf8").split("\n").filter((line) => line !== "") : []

/** Waits (bounded) until `predicate` holds. */
const eventually = (predicate: () => boolean, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1200; i++) {
      if (predicate()) return
      yield* Effect.sleep("50 millis")
    }
    return yield* Effect.dieMessage(`not within 60 s: ${what}`)
  })

/** Runs `f` with the SQL client of a client-only connection to `filename`. */
const asClient = <A>(filename: string, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.scoped(Effect.gen(function*() {
    const client = yield* Layer.build(AgentEngine.layerSqlite({ filename, clientOnly: true }))
    return yield* f(yield* Effect.provide(SqlClient.SqlClient, client))
  }))

/** Whether `error` is SQLite's "database is locked" (another connection holds the write lock). */
const isBusy = (error: unknown): boolean =>
  typeof error === "object" && error !== null &&
  ((error as { readonly code?: unknown }).code === "SQLITE_BUSY" ||
    isBusy((error as { readonly cause?: unknown }).cause))

/**
 * Stops `pid` past its lease, then takes the database over as a runner of
 * another machine would (`takeOver`). A process stopped inside a write holds
 * SQLite's write lock, so no other process can write until it runs again:
 * then it is let run a moment and stopped again. The side effects logged
 * when it was last stopped are returned.
 */
const stopPastLeaseAndTakeOver = (pid: number, side: string, takeOver: Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    for (let attempt = 1;; attempt++) {
      process.kill(pid, "SIGSTOP")
      const before = sideLines(side)
      yield* Effect.sleep("2 seconds")
      const taken = yield* Effect.either(takeOver)
      if (taken._tag === "Right") return before
      if (!isBusy(taken.left) || attempt === 5) return yield* Effect.die(taken.left)
      process.kill(pid, "SIGCONT")
      yield* Effect.sleep("100 millis")
    }
  })

describe("a SQLite runner process that loses its lease", () => {
  it.scopedLive(
    "paused past its lease while another runner took over: after SIGCONT it starts no tool call; the new owner completes the run, each call run once",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-lease-")
        const env = {
          DB: path.join(directory, "runs.db"),
          SIDE: path.join(directory, "side.log"),
          CALLS: "4",
          TOOL_MS: "300",
          LEASE_MS: "1500",
          HEARTBEAT_MS: "250",
          DECIDE: "markDone"
        }
        const first = yield* spawn({ ...env, START: "run-1" })
        yield* eventually(() => sideLines(env.SIDE).length >= 2, "two calls ran")
        // past the lease, a runner of another machine takes the database over, as its takeover writes it
        const before = yield* stopPastLeaseAndTakeOver(
          first.pid,
          env.SIDE,
          asClient(env.DB, (sql) =>
            sql`UPDATE stepwise_runner_lease SET owner = 'usurper', pid = 4242, host = 'elsewhere',
              machine = 'elsewhere', started = '', expires_at = ${Date.now() + 600_000}`)
        )
        process.kill(first.pid, "SIGCONT")
        const lost = yield* Effect.promise(() =>
          first.waitForLine((line) =>
            line.startsWith("lost "), 60_000)
        )
        assert.include(lost, `"lost":"TakenOver"`)
        assert.include(lost, `"pid":4242`)
        // several tool calls' time: the paused runner started none
        yield* Effect.sleep("2 seconds")
        assert.deepStrictEqual(sideLines(env.SIDE), before)

        // the new owner (the usurper gone) resumes the run where the journal has it
        yield* Effect.orDie(asClient(env.DB, (sql) => sql`UPDATE stepwise_runner_lease SET expires_at = 0`))
        const next = yield* spawn({ ...env, RUN_ID: "run-1" })
        const done = JSON.parse(
          (yield* Effect.promise(() => next.waitForLine((line) => line.startsWith("done "), 90_000))).slice(5)
        ) as { readonly state: string; readonly results: ReadonlyArray<unknown> }
        assert.strictEqual(done.state, "Completed")
        assert.strictEqual(done.results.length, 4)
        const attempts = sideLines(env.SIDE)
        assert.deepStrictEqual(
          [...new Set(attempts)].length,
          attempts.length,
          `a call ran twice:\n${attempts.join("\n")}`
        )
        assert.isAtMost(attempts.length, 4)
      }),
    { timeout: 180_000 }
  )
})
