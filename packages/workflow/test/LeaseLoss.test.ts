/**
 * A SQLite runner that loses its lease stops executing: its engine stops,
 * the run it was executing is interrupted (no activity starts after the
 * loss; the activity in flight ends, as the cluster runs activities to
 * their end), nothing of the run is recorded as ended, every later call
 * through the engine dies with `EngineLocked`, and the next owner resumes
 * the run. In one process, with a short lease (`LeaseTiming`).
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import type { WorkflowEngine } from "@effect/workflow"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import type { Context } from "effect"
import { Cause, Deferred, Duration, Effect, Exit, Layer, Option } from "effect"
import * as childProcess from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { LeaseTiming } from "../src/internal/leaseTiming.js"
import { tempDirectory } from "./support/databases.js"
import { readAttempts, Toy, toyLayer } from "./support/toyWorkflow.js"

const timing = Layer.succeed(LeaseTiming, { leaseFor: Duration.seconds(2), heartbeatEvery: Duration.millis(200) })

/**
 * A runner in this process: the toy workflow (each step taking `stepDelay`, after `hold` with its key) on a leased
 * engine.
 */
const runnerOn = (
  filename: string,
  directory: string,
  runner: string,
  stepDelay: Duration.DurationInput,
  hold?: (key: string) => Effect.Effect<void>
) =>
  Layer.build(
    toyLayer({ directory, runner, stepDelay, hold }).pipe(
      Layer.provideMerge(AgentEngine.layerSqlite({ filename, pollInterval: "100 millis" })),
      Layer.provide(timing)
    )
  )

/** Runs `f` with the SQL client of a client-only connection to `filename`. */
const asClient = <A>(filename: string, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.scoped(Effect.gen(function*() {
    const client = yield* Layer.build(AgentEngine.layerSqlite({ filename, clientOnly: true }))
    return yield* f(yield* Effect.provide(SqlClient.SqlClient, client))
  })).pipe(Effect.orDie)

/** Waits (bounded) until `predicate` holds. */
const eventually = (predicate: () => boolean, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 600; i++) {
      if (predicate()) return
      yield* Effect.sleep("50 millis")
    }
    return yield* Effect.dieMessage(`not within 30 s: ${what}`)
  })

const started = (directory: string, runner: string) =>
  readAttempts(directory).filter((attempt) => attempt.event === "start" && attempt.runner === runner)
    .map((attempt) => attempt.key)

/** The defect a call through an engine whose runner lost its lease dies with. */
const lockedDefect = <A, E>(
  effect: Effect.Effect<A, E, WorkflowEngine.WorkflowEngine>,
  context: Context.Context<WorkflowEngine.WorkflowEngine>
) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(Effect.timeout(Effect.provide(effect, context), "10 seconds"))
    assert.isTrue(Exit.isFailure(exit), "the call succeeded")
    const defect = Exit.isFailure(exit) ? Cause.dieOption(exit.cause) : Option.none()
    assert.isTrue(Option.isSome(defect), `not a defect: ${Exit.isFailure(exit) ? Cause.pretty(exit.cause) : ""}`)
    return defect.pipe(Option.getOrThrow) as AgentEngine.EngineLocked
  })

describe("a SQLite runner that loses its lease", () => {
  const cases = [
    {
      name: "taken over by another runner",
      lose: (sql: SqlClient.SqlClient) =>
        sql`UPDATE stepwise_runner_lease SET owner = 'usurper', pid = 4242, host = 'elsewhere', machine = 'elsewhere',
          expires_at = ${Date.now() + 600_000}`,
      handOver: (sql: SqlClient.SqlClient) => sql`UPDATE stepwise_runner_lease SET expires_at = 0`,
      lost: "TakenOver",
      pid: 4242,
      step: "1500 millis"
    },
    {
      name: "deleted",
      lose: (sql: SqlClient.SqlClient) => sql`DELETE FROM stepwise_runner_lease`,
      handOver: (_sql: SqlClient.SqlClient) => Effect.void as Effect.Effect<unknown>,
      lost: "Deleted",
      pid: undefined,
      step: "1500 millis"
    },
    {
      // the step outlasts the lease: the runner holds it until it would expire within a heartbeat
      name: "not renewed (every renewal fails, the database refusing the write)",
      lose: (sql: SqlClient.SqlClient) =>
        sql`CREATE TRIGGER failing_renewal BEFORE UPDATE ON stepwise_runner_lease
          BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`,
      handOver: (sql: SqlClient.SqlClient) =>
        Effect.zipRight(sql`DROP TRIGGER failing_renewal`, sql`DELETE FROM stepwise_runner_lease`),
      lost: "NotRenewed",
      pid: undefined,
      step: "2500 millis"
    }
  ] as const
  for (const { handOver, lose, lost, name, pid, step } of cases) {
    it.scopedLive(
      `${name}: stops its run at once (no activity starts after), later calls die with EngineLocked, the next runner resumes it`,
      () =>
        Effect.gen(function*() {
          const directory = yield* tempDirectory("stepwise-lease-")
          const filename = path.join(directory, "runs.db")
          // the first step, once started, waits for the loss: the loss lands with the step in flight and its whole
          // delay to run, however long this process takes to write it on a loaded machine
          const inStep = yield* Deferred.make<void>()
          const lostIt = yield* Deferred.make<void>()
          const first = yield* runnerOn(filename, directory, "first", step, (key) =>
            key === "r1/first"
              ? Effect.zipRight(Deferred.succeed(inStep, undefined), Deferred.await(lostIt))
              : Effect.void)
          const executionId = yield* Toy.execute({ runId: "r1" }, { discard: true }).pipe(Effect.provide(first))
          yield* Deferred.await(inStep)
          assert.deepStrictEqual(started(directory, "first"), ["r1/first"])

          yield* asClient(filename, lose)
          yield* Deferred.succeed(lostIt, undefined)
          // past the step in flight (it ends: the cluster runs activities to their end) and several heartbeats
          yield* Effect.sleep("4 seconds")
          assert.deepStrictEqual(started(directory, "first"), ["r1/first"])

          const locked = yield* lockedDefect(Toy.execute({ runId: "r2" }, { discard: true }), first)
          assert.strictEqual(locked._tag, "EngineLocked")
          assert.strictEqual(locked.lost, lost)
          assert.strictEqual(locked.pid, pid)
          assert.strictEqual((yield* lockedDefect(Toy.poll(executionId), first))._tag, "EngineLocked")

          // the run was not recorded as ended: a runner taking the file over resumes it
          yield* asClient(filename, handOver)
          const next = yield* runnerOn(filename, directory, "next", "10 millis")
          yield* eventually(() => started(directory, "next").includes("r1/second"), "the next runner ran the run")
          const result = yield* Effect.gen(function*() {
            while (true) {
              const polled = yield* Toy.poll(executionId)
              if (polled !== undefined) return polled
              yield* Effect.sleep("50 millis")
            }
          }).pipe(Effect.provide(next), Effect.timeout("30 seconds"))
          assert.deepStrictEqual(result._tag === "Complete" ? result.exit : result, Exit.succeed("r1/first+r1/second"))
          assert.deepStrictEqual(started(directory, "first"), ["r1/first"])
        }),
      { timeout: 90_000 }
    )
  }

  it.scopedLive(
    "not lost by a pause alone: an event loop blocked past the lease, the lease untouched, the runner renews it and goes on",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-lease-")
        const filename = path.join(directory, "runs.db")
        const runner = yield* runnerOn(filename, directory, "only", "500 millis")
        const executionId = yield* Toy.execute({ runId: "r1" }, { discard: true }).pipe(Effect.provide(runner))
        yield* eventually(() => started(directory, "only").length === 1, "the first step started")
        // longer than the 2 s lease: no renewal in between, but no other runner wrote the lease either
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3000)
        const result = yield* Effect.gen(function*() {
          while (true) {
            const polled = yield* Toy.poll(executionId)
            if (polled !== undefined) return polled
            yield* Effect.sleep("50 millis")
          }
        }).pipe(Effect.provide(runner), Effect.timeout("30 seconds"))
        assert.deepStrictEqual(result._tag === "Complete" ? result.exit : result, Exit.succeed("r1/first+r1/second"))
        assert.deepStrictEqual(started(directory, "only"), ["r1/first", "r1/second"])
      }),
    { timeout: 60_000 }
  )

  it.scopedLive(
    "an event loop blocked past the lease while another runner took it over: once it runs again it starts no step",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-lease-")
        const filename = path.join(directory, "runs.db")
        const runner = yield* runnerOn(filename, directory, "first", "300 millis")
        yield* Toy.execute({ runId: "r1" }, { discard: true }).pipe(Effect.provide(runner))
        yield* eventually(() => started(directory, "first").length === 1, "the first step started")
        // another process takes the lease over while this one is blocked (its timers, the step's and the
        // renewal's, all fire together once it runs again)
        const marker = path.join(directory, "taken")
        const usurper = childProcess.spawn(process.execPath, [
          "-e",
          `setTimeout(() => { new (require("better-sqlite3"))(process.argv[1]).prepare(
            "UPDATE stepwise_runner_lease SET owner = 'usurper', pid = 4242, host = 'elsewhere', machine = 'elsewhere', expires_at = ?"
          ).run(Date.now() + 600000); require("fs").writeFileSync(process.argv[2], ""); console.log("taken") }, 300)`,
          filename,
          marker
        ], { cwd: process.cwd(), stdio: ["ignore", "pipe", "inherit"] })
        let taken = ""
        usurper.stdout.on("data", (chunk: Buffer) => taken += chunk.toString())
        // blocked past the lease, and until the usurper wrote it (its process may be slow to start on a loaded
        // machine: a write after this process ran again would race the step's timer), at most 30 s
        const blocked = Date.now()
        while (Date.now() - blocked < 3000 || (!fs.existsSync(marker) && Date.now() - blocked < 30_000)) {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20)
        }
        yield* eventually(() => taken.includes("taken"), "the usurper wrote the lease")
        yield* Effect.sleep("1500 millis")
        assert.deepStrictEqual(started(directory, "first"), ["r1/first"])
        const locked = yield* lockedDefect(Toy.execute({ runId: "r2" }, { discard: true }), runner)
        assert.strictEqual(locked.lost, "TakenOver")
      }),
    { timeout: 60_000 }
  )
})
