import { SqlClient } from "@effect/sql"
import { assert, it } from "@effect/vitest"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import { Effect, Exit, Layer, Option } from "effect"
import * as path from "node:path"
import { spawnChild } from "./support/child.js"
import { tempDirectory } from "./support/databases.js"
import { describePostgres, PostgresServer } from "./support/postgres.js"
import { type Attempt, readAttempts, readEffects, Toy, toyLayer } from "./support/toyWorkflow.js"

const runnerScript = path.join(import.meta.dirname, "support", "toyRunner.ts")
const RUNS = 20

/** Polls `check` every 50 ms until it returns a value, failing after `millis`. */
const eventually = <A, E, R>(what: string, millis: number, check: Effect.Effect<A | undefined, E, R>) =>
  Effect.gen(function*() {
    const deadline = Date.now() + millis
    while (Date.now() < deadline) {
      const value = yield* check
      if (value !== undefined) return value
      yield* Effect.sleep("50 millis")
    }
    return yield* Effect.dieMessage(`${what}: not within ${millis} ms`)
  })

describePostgres("scale-out on PostgreSQL", () => {
  it.scopedLive(
    "two runner processes share 20 runs; one is killed mid-way; every run completes and every effect happens once",
    () =>
      Effect.gen(function*() {
        const server = yield* PostgresServer
        const url = yield* Effect.promise(() => server.createDatabase("scaleout"))
        const directory = yield* tempDirectory("stepwise-scaleout-")
        const spawnRunner = (name: string, port: number) => {
          const child = spawnChild(runnerScript, {
            ENGINE: "postgres",
            DATABASE: server.urlOf("scaleout"),
            DIRECTORY: directory,
            RUNNER: name,
            RUNNER_PORT: String(port),
            STEP_DELAY_MS: "1000",
            TAKEOVER_MS: "3000"
          })
          return Effect.as(Effect.addFinalizer(() => Effect.promise(() => child.kill())), child)
        }
        const a = yield* spawnRunner("A", 1)
        const b = yield* spawnRunner("B", 2)
        for (const child of [a, b]) {
          const line = yield* Effect.promise(() =>
            child.waitForLine((line) => line.startsWith("ready") || line.startsWith("failed"), 60_000)
          )
          assert.strictEqual(line, `ready ${child.pid}`)
        }

        // this process only starts and polls runs
        const client = yield* Layer.build(
          toyLayer({ directory, runner: "client" }).pipe(
            Layer.provideMerge(AgentEngine.layerPostgres({ url, runnerAddress: Option.none() }))
          )
        )
        const sql = Effect.provide(SqlClient.SqlClient, client)
        // wait until the two runners hold all 300 shard locks between them
        yield* eventually(
          "shards split between the runners",
          30_000,
          Effect.flatMap(sql, (sql) =>
            sql<{ readonly locks: string | number; readonly holders: string | number }>`
              SELECT COUNT(*) AS locks, COUNT(DISTINCT pid) AS holders FROM pg_locks
              WHERE locktype = 'advisory' AND granted AND objsubid = 1
            `).pipe(
              Effect.map(([row]) => Number(row.locks) === 300 && Number(row.holders) === 2 ? true : undefined)
            )
        )

        const runIds = Array.from({ length: RUNS }, (_, i) => `run-${i}`)
        const executionIds = yield* Effect.forEach(
          runIds,
          (runId) => Toy.execute({ runId }, { discard: true })
        ).pipe(Effect.provide(client))

        // kill A once it has applied an effect: its other activities are then in flight (each takes 1 s)
        yield* eventually(
          "runner A applied an effect",
          30_000,
          Effect.sync(() =>
            readAttempts(directory).some((attempt) => attempt.runner === "A" && attempt.event === "applied")
              ? true
              : undefined
          )
        )
        yield* Effect.promise(() => a.kill())
        const killedAt = Date.now()

        const exits = yield* eventually(
          "every run complete",
          60_000,
          Effect.forEach(executionIds, (id) => Toy.poll(id)).pipe(
            Effect.map((results) =>
              results.every((result) => result?._tag === "Complete")
                ? results.map((result) => result?._tag === "Complete" ? result.exit : undefined)
                : undefined
            ),
            Effect.provide(client)
          )
        )
        assert.deepStrictEqual(exits, runIds.map((id) => Exit.succeed(`${id}/first+${id}/second`)))

        const attempts = readAttempts(directory)
        const of = (runner: string, event: Attempt["event"]) =>
          attempts.filter((attempt) => attempt.runner === runner && attempt.event === event)

        // every effect happened exactly once: one file per key, named by the runner that wrote it
        const effects = readEffects(directory)
        const keys = runIds.flatMap((id) => [`${id}/first`, `${id}/second`])
        assert.deepStrictEqual(Array.from(effects.keys()).sort(), [...keys].sort())
        const applied = attempts.filter((attempt) => attempt.event === "applied").map((attempt) => attempt.key)
        assert.strictEqual(new Set(applied).size, applied.length)
        // the kill may land between writing an effect and logging it: then A wrote the file and B's retry skipped it
        for (const key of keys.filter((key) => !applied.includes(key))) {
          assert.strictEqual(effects.get(key), "A", `${key}: not applied, yet not written by the killed runner`)
          assert.isTrue(
            attempts.some((attempt) => attempt.key === key && attempt.runner === "B" && attempt.event === "skipped")
          )
        }

        // both runners worked; the client never ran anything; nothing ran on A after it died
        assert.isAbove(of("A", "start").length, 0)
        assert.isAbove(of("B", "start").length, 0)
        assert.strictEqual(attempts.filter((attempt) => attempt.runner === "client").length, 0)
        assert.isTrue(attempts.every((attempt) => attempt.runner !== "A" || attempt.at < killedAt))

        // activities ran again only when A was cut off in them, and B took them over
        const starts = new Map<string, Array<Attempt>>()
        for (const attempt of attempts.filter((attempt) => attempt.event === "start")) {
          starts.set(attempt.key, [...(starts.get(attempt.key) ?? []), attempt])
        }
        const repeated = Array.from(starts.values()).filter((list) => list.length > 1)
        assert.isAbove(repeated.length, 0, "the kill cut off no activity: the test did not exercise a takeover")
        for (const [first, ...again] of repeated) {
          assert.strictEqual(first.runner, "A")
          assert.isTrue(again.every((attempt) => attempt.runner === "B" && attempt.at > killedAt))
        }
        assert.strictEqual(b.lines.filter((line) => line.startsWith("failed")).length, 0)
      }),
    120_000
  )
})
