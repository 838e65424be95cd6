import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import type { WorkflowEngine } from "@effect/workflow"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import { Duration, Effect, Exit, Layer, Option, Redacted } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { spawnChild } from "./support/child.js"
import { tempDirectory } from "./support/databases.js"
import { describePostgres, PostgresServer } from "./support/postgres.js"
import { readAttempts, Toy, toyLayer } from "./support/toyWorkflow.js"

const runner = path.join(import.meta.dirname, "support", "toyRunner.ts")

/** Polls the run until it is complete (bounded), returning its exit. */
const awaitComplete = (executionId: string, within: Duration.DurationInput = "30 seconds") =>
  Effect.gen(function*() {
    const deadline = Date.now() + Duration.toMillis(within)
    while (Date.now() < deadline) {
      const result = yield* Toy.poll(executionId)
      if (result?._tag === "Complete") return result.exit
      yield* Effect.sleep("50 millis")
    }
    return yield* Effect.dieMessage(`run ${executionId} did not complete within ${Duration.format(within)}`)
  })

/** Starts `runId` and waits for its result. */
const runToy = (runId: string) =>
  Effect.flatMap(
    Toy.execute({ runId }, { discard: true }),
    (executionId) => awaitComplete(executionId)
  )

const startedKeys = (directory: string) =>
  readAttempts(directory).filter((attempt) => attempt.event === "start").map((attempt) => attempt.key)

/** The toy workflow registered on `engine`, as a context for the current scope. */
const withToy = <A, E>(
  engine: Layer.Layer<A | WorkflowEngine.WorkflowEngine, E>,
  directory: string,
  runner = "test"
) => Layer.build(toyLayer({ directory, runner }).pipe(Layer.provideMerge(engine)))

describe("AgentEngine.layerMemory", () => {
  it.scopedLive("runs a workflow; running it again returns the stored result", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const context = yield* withToy(AgentEngine.layerMemory, directory)
      const exit = yield* runToy("r1").pipe(Effect.provide(context))
      assert.deepStrictEqual(exit, Exit.succeed("r1/first+r1/second"))
      assert.deepStrictEqual(yield* runToy("r1").pipe(Effect.provide(context)), exit)
      assert.deepStrictEqual(startedKeys(directory), ["r1/first", "r1/second"])
    }))
})

describe("AgentEngine.layerSqlite", () => {
  it.scopedLive("runs a workflow; the result survives a restart on the same file", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const filename = path.join(directory, "nested", "runs.db")
      const executionId = yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* withToy(AgentEngine.layerSqlite({ filename }), directory)
        const executionId = yield* Toy.execute({ runId: "r1" }, { discard: true }).pipe(Effect.provide(context))
        assert.deepStrictEqual(
          yield* awaitComplete(executionId).pipe(Effect.provide(context)),
          Exit.succeed("r1/first+r1/second")
        )
        return executionId
      }))
      assert.isTrue(fs.existsSync(filename))
      // a second "process" on the same file: the run is there, nothing runs again, and the SqlClient is shared
      const context = yield* withToy(AgentEngine.layerSqlite({ filename }), directory)
      const result = yield* Toy.poll(executionId).pipe(Effect.provide(context))
      assert.deepStrictEqual(result?._tag === "Complete" ? result.exit : result, Exit.succeed("r1/first+r1/second"))
      assert.deepStrictEqual(startedKeys(directory), ["r1/first", "r1/second"])
      const runs = yield* RunStore.make().pipe(Effect.provide(context))
      yield* runs.register({ runId: "r1", threadId: "t1", executionId, workflow: Toy.name })
      assert.strictEqual((yield* runs.get("r1")).executionId, executionId)
    }))

  it.scopedLive(
    "a second runner process on the file is refused, naming the first; clients may connect; a dead runner's lock is taken over",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-engine-")
        const filename = path.join(directory, "runs.db")
        const env = { ENGINE: "sqlite", DATABASE: filename, DIRECTORY: directory }
        const first = spawnChild(runner, { ...env, RUNNER: "first" })
        yield* Effect.addFinalizer(() => Effect.promise(() => first.kill()))
        yield* Effect.promise(() => first.waitForLine((line) => line.startsWith("ready"), 60_000))

        const second = spawnChild(runner, { ...env, RUNNER: "second" })
        yield* Effect.addFinalizer(() => Effect.promise(() => second.kill()))
        const refusal = yield* Effect.promise(() =>
          second.waitForLine((line) => line.startsWith("ready") || line.startsWith("failed"), 60_000)
        )
        assert.include(refusal, "failed EngineLocked")
        assert.include(refusal, `process ${first.pid}`)

        const locked = yield* Effect.flip(withToy(AgentEngine.layerSqlite({ filename }), directory))
        assert.strictEqual(locked._tag, "EngineLocked")
        assert.strictEqual(locked._tag === "EngineLocked" ? locked.pid : undefined, first.pid)

        // a client-only process starts a run; the runner process executes it
        const exit = yield* Effect.scoped(Effect.gen(function*() {
          const client = yield* withToy(AgentEngine.layerSqlite({ filename, clientOnly: true }), directory, "client")
          return yield* runToy("r1").pipe(Effect.provide(client))
        }))
        assert.deepStrictEqual(exit, Exit.succeed("r1/first+r1/second"))
        assert.deepStrictEqual(readAttempts(directory).map((attempt) => attempt.runner), [
          "first",
          "first",
          "first",
          "first"
        ])

        yield* Effect.promise(() => first.kill())
        const context = yield* withToy(AgentEngine.layerSqlite({ filename }), directory, "third")
        assert.deepStrictEqual(yield* runToy("r2").pipe(Effect.provide(context)), Exit.succeed("r2/first+r2/second"))
      })
  )

  it.scopedLive("a journal written with more shards per group is moved to the runner's one shard and runs", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const filename = path.join(directory, "runs.db")
      // an older layout: @effect/cluster's 300 shards; a client writes two runs and nothing executes them
      const executionIds = yield* Effect.scoped(Effect.gen(function*() {
        const client = yield* withToy(
          AgentEngine.layerSqlite({ filename, clientOnly: true, sharding: { shardsPerGroup: 300 } }),
          directory,
          "client"
        )
        return yield* Effect.forEach(["r1", "r2"], (runId) => Toy.execute({ runId }, { discard: true })).pipe(
          Effect.provide(client)
        )
      }))
      assert.deepStrictEqual(startedKeys(directory), [])
      // a runner of today opens the file: both runs are moved to its shard and execute
      const context = yield* withToy(AgentEngine.layerSqlite({ filename }), directory)
      const exits = yield* Effect.forEach(executionIds, (executionId) => awaitComplete(executionId, "10 seconds")).pipe(
        Effect.provide(context)
      )
      assert.deepStrictEqual(exits, [Exit.succeed("r1/first+r1/second"), Exit.succeed("r2/first+r2/second")])
      const sql = yield* Effect.provide(SqlClient.SqlClient, context)
      const shards = yield* sql<{ readonly shard_id: string }>`SELECT DISTINCT shard_id FROM cluster_messages`
      assert.deepStrictEqual(shards.map((row) => row.shard_id), ["default:1"])
    }))

  it.scopedLive(
    "a second runner opening the file through a symbolic link is refused, naming the first; through a hard link too",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-engine-")
        const filename = path.join(directory, "runs.db")
        const first = spawnChild(runner, {
          ENGINE: "sqlite",
          DATABASE: filename,
          DIRECTORY: directory,
          RUNNER: "first"
        })
        yield* Effect.addFinalizer(() => Effect.promise(() => first.kill()))
        yield* Effect.promise(() => first.waitForLine((line) => line.startsWith("ready"), 60_000))

        const symlink = path.join(directory, "elsewhere", "link.db")
        fs.mkdirSync(path.dirname(symlink))
        fs.symlinkSync(filename, symlink)
        const locked = yield* Effect.flip(withToy(AgentEngine.layerSqlite({ filename: symlink }), directory, "second"))
        assert.strictEqual(locked._tag, "EngineLocked")
        assert.strictEqual(locked._tag === "EngineLocked" ? locked.pid : undefined, first.pid)

        const hardLink = path.join(directory, "elsewhere", "hard.db")
        fs.linkSync(filename, hardLink)
        const refused = yield* Effect.flip(withToy(AgentEngine.layerSqlite({ filename: hardLink }), directory, "third"))
        assert.strictEqual(refused._tag, "EngineConfigError")
        assert.include(refused.message, "has 2 hard links")
      })
  )

  it.scopedLive("through a symbolic link to a missing file, creates the file and locks it by its real name", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const filename = path.join(directory, "data", "runs.db")
      fs.mkdirSync(path.dirname(filename))
      const symlink = path.join(directory, "link.db")
      fs.symlinkSync(filename, symlink)
      const context = yield* withToy(AgentEngine.layerSqlite({ filename: symlink }), directory)
      assert.deepStrictEqual(yield* runToy("r1").pipe(Effect.provide(context)), Exit.succeed("r1/first+r1/second"))
      assert.isTrue(fs.lstatSync(filename).isFile())
      assert.isTrue(fs.existsSync(`${filename}.lock`))
      assert.isFalse(fs.existsSync(`${symlink}.lock`))
      const locked = yield* Effect.flip(withToy(AgentEngine.layerSqlite({ filename }), directory))
      assert.strictEqual(locked._tag, "EngineLocked")
    }))

  it.scopedLive("defaults to .stepwise/runs.db under the working directory", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const child = spawnChild(runner, { ENGINE: "sqlite", DIRECTORY: directory, RUNNER: "default" }, directory)
      yield* Effect.addFinalizer(() => Effect.promise(() => child.kill()))
      yield* Effect.promise(() => child.waitForLine((line) => line.startsWith("ready"), 60_000))
      assert.isTrue(fs.existsSync(path.join(directory, ".stepwise", "runs.db")))
      assert.isTrue(fs.existsSync(path.join(directory, ".stepwise", "runs.db.lock")))
    }))

  it.scopedLive("keeps the file in WAL mode, synced to disk at checkpoints, or at every commit with synchronous: full", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const pragmas = (options: AgentEngine.SqliteOptions) =>
        Effect.scoped(Effect.gen(function*() {
          const sql = yield* Effect.provide(SqlClient.SqlClient, yield* Layer.build(AgentEngine.layerSqlite(options)))
          const [mode] = yield* sql<{ readonly journal_mode: string }>`PRAGMA journal_mode`
          const [sync] = yield* sql<{ readonly synchronous: number }>`PRAGMA synchronous`
          return [mode?.journal_mode, sync?.synchronous]
        }))
      assert.deepStrictEqual(yield* pragmas({ filename: path.join(directory, "a.db") }), ["wal", 1])
      assert.deepStrictEqual(yield* pragmas({ filename: path.join(directory, "b.db"), synchronous: "full" }), [
        "wal",
        2
      ])
    }))

  it.scopedLive("rejects bad options with EngineConfigError", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const file = path.join(directory, "a-file")
      fs.writeFileSync(file, "")
      fs.writeFileSync(path.join(directory, "garbage.db.lock"), "not a database, but long enough to be read as one")
      const cases: ReadonlyArray<[string, AgentEngine.SqliteOptions]> = [
        ["pollInterval", { filename: path.join(directory, "x.db"), pollInterval: "0 millis" }],
        ["pollInterval", { filename: path.join(directory, "x.db"), pollInterval: Duration.infinity }],
        ["filename", { filename: " " }],
        ["filename", { filename: path.join(file, "runs.db") }],
        ["filename", { filename: path.join(directory, "garbage.db") }],
        ["synchronous", { filename: path.join(directory, "x.db"), synchronous: "off" as "normal" }]
      ]
      for (const [option, options] of cases) {
        const error = yield* Effect.flip(Layer.build(AgentEngine.layerSqlite(options)))
        assert.strictEqual(error._tag, "EngineConfigError")
        assert.strictEqual(error._tag === "EngineConfigError" ? error.option : undefined, option)
      }
    }))
})

describePostgres("AgentEngine.layerPostgres", () => {
  it.scopedLive("a runner executes runs that a client-only process starts", () =>
    Effect.gen(function*() {
      const server = yield* PostgresServer
      const url = yield* Effect.promise(() => server.createDatabase("engine"))
      const directory = yield* tempDirectory("stepwise-engine-")
      const options = { url, takeoverAfter: "3 seconds" } as const
      const runnerContext = yield* withToy(
        AgentEngine.layerPostgres({ ...options, runnerAddress: Option.some({ host: "127.0.0.1", port: 1 }) }),
        directory,
        "runner"
      )
      const client = yield* withToy(
        AgentEngine.layerPostgres({ ...options, runnerAddress: Option.none() }),
        directory,
        "client"
      )
      const exits = yield* Effect.all(["r1", "r2", "r3"].map(runToy), { concurrency: "unbounded" }).pipe(
        Effect.provide(client)
      )
      assert.deepStrictEqual(exits, ["r1", "r2", "r3"].map((id) => Exit.succeed(`${id}/first+${id}/second`)))
      assert.deepStrictEqual(new Set(readAttempts(directory).map((attempt) => attempt.runner)), new Set(["runner"]))
      assert.strictEqual(startedKeys(directory).length, 6)
      // the runner's own view agrees
      const r1 = yield* Toy.executionId({ runId: "r1" })
      assert.strictEqual((yield* Toy.poll(r1).pipe(Effect.provide(runnerContext)))?._tag, "Complete")
    }))

  it.scopedLive("rejects bad options with EngineConfigError", () =>
    Effect.gen(function*() {
      const url = Redacted.make("postgres://nobody@127.0.0.1:1/none")
      const cases: ReadonlyArray<[string, AgentEngine.PostgresOptions]> = [
        ["takeoverAfter", { url, takeoverAfter: "1 second" }],
        ["pollInterval", { url, pollInterval: "-5 millis" }],
        ["maxConnections", { url, maxConnections: 1 }],
        ["runnerAddress", { url, runnerAddress: Option.some({ host: "", port: 1 }) }]
      ]
      for (const [option, options] of cases) {
        const error = yield* Effect.flip(Layer.build(AgentEngine.layerPostgres(options)))
        assert.strictEqual(error._tag, "EngineConfigError")
        assert.strictEqual(error._tag === "EngineConfigError" ? error.option : undefined, option)
      }
    }))
})
