import { ShardingConfig } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import type { WorkflowEngine } from "@effect/workflow"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import { Cause, Duration, Effect, Exit, Layer, Option, Redacted } from "effect"
import * as childProcess from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
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

  /** A runner process on a fresh `runs.db`, ready (`env`: more of its environment). */
  const firstRunnerWith = (env: Record<string, string>) =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const filename = path.join(directory, "runs.db")
      const first = spawnChild(runner, {
        ENGINE: "sqlite",
        DATABASE: filename,
        DIRECTORY: directory,
        RUNNER: "first",
        ...env
      })
      yield* Effect.addFinalizer(() => Effect.promise(() => first.kill()))
      yield* Effect.promise(() => first.waitForLine((line) => line.startsWith("ready"), 60_000))
      return { directory, filename, first }
    })
  /** A runner process on a fresh `runs.db`, ready. */
  const firstRunner = firstRunnerWith({})

  it.scopedLive(
    "a second runner opening the file through a symbolic link is refused, naming the first; through a hard link too",
    () =>
      Effect.gen(function*() {
        const { directory, filename, first } = yield* firstRunner
        const symlink = path.join(directory, "elsewhere", "link.db")
        fs.mkdirSync(path.dirname(symlink))
        fs.symlinkSync(filename, symlink)
        const locked = yield* Effect.flip(withToy(AgentEngine.layerSqlite({ filename: symlink }), directory, "second"))
        assert.strictEqual(locked._tag, "EngineLocked")
        assert.strictEqual(locked._tag === "EngineLocked" ? locked.pid : undefined, first.pid)

        const hardLink = path.join(directory, "elsewhere", "hard.db")
        fs.linkSync(filename, hardLink)
        const refused = yield* Effect.flip(withToy(AgentEngine.layerSqlite({ filename: hardLink }), directory, "third"))
        assert.strictEqual(refused._tag, "InvalidOptions")
        assert.include(refused.message, "has 2 hard links")
      })
  )

  /** Building a runner on `filename` in this process fails with EngineLocked naming `pid`. */
  const assertRefused = (filename: string, directory: string, pid: number) =>
    Effect.gen(function*() {
      const locked = yield* Effect.flip(withToy(AgentEngine.layerSqlite({ filename }), directory, "second"))
      assert.strictEqual(locked._tag, "EngineLocked")
      assert.strictEqual(locked._tag === "EngineLocked" ? locked.pid : undefined, pid)
    })

  it.scopedLive("two runners started together on a fresh file: one runs, the other is refused naming it", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const env = { ENGINE: "sqlite", DATABASE: path.join(directory, "runs.db"), DIRECTORY: directory }
      const runners = ["a", "b"].map((name) => spawnChild(runner, { ...env, RUNNER: name }))
      yield* Effect.addFinalizer(() => Effect.promise(() => Promise.all(runners.map((child) => child.kill()))))
      const outcomes = yield* Effect.promise(() =>
        Promise.all(
          runners.map((child) =>
            child.waitForLine((line) => line.startsWith("ready") || line.startsWith("failed"), 60_000)
          )
        )
      )
      const ready = runners.filter((_, i) => outcomes[i]!.startsWith("ready"))
      const refused = outcomes.filter((line) => line.startsWith("failed"))
      assert.strictEqual(ready.length, 1, outcomes.join("\n"))
      assert.strictEqual(refused.length, 1, outcomes.join("\n"))
      assert.include(refused[0], "failed EngineLocked")
      assert.include(refused[0], `process ${ready[0]!.pid}`)
    }))

  it.scopedLive(
    "a runner waits for a file another connection holds locked longer than SQLite's busy timeout",
    () =>
      Effect.gen(function*() {
        // (the class of two processes creating one file at once: the loser found the file locked, and was refused
        // with InvalidOptions, not waiting, nor told it was locked)
        const directory = yield* tempDirectory("stepwise-engine-")
        const filename = path.join(directory, "runs.db")
        const holder = yield* Effect.provide(SqlClient.SqlClient, yield* Layer.build(SqliteClient.layer({ filename })))
        yield* holder.unsafe("BEGIN IMMEDIATE")
        // released a moment after the runner first finds the file locked (better-sqlite3 waits 5 s, blocking)
        yield* Effect.forkScoped(Effect.delay(holder.unsafe("COMMIT"), "100 millis"))
        const context = yield* withToy(AgentEngine.layerSqlite({ filename }), directory)
        assert.deepStrictEqual(yield* runToy("r1").pipe(Effect.provide(context)), Exit.succeed("r1/first+r1/second"))
      }),
    60_000
  )

  it.scopedLive("a second runner is refused when the database was renamed under the first", () =>
    Effect.gen(function*() {
      const { directory, filename, first } = yield* firstRunner
      const moved = path.join(directory, "moved.db")
      fs.renameSync(filename, moved)
      yield* assertRefused(moved, directory, first.pid)
    }))

  it.scopedLive("a second runner is refused when every file beside the database was deleted (a .lock file too)", () =>
    Effect.gen(function*() {
      const { directory, filename, first } = yield* firstRunner
      for (const file of fs.readdirSync(directory)) {
        const other = path.join(directory, file)
        if (other !== filename && fs.statSync(other).isFile()) fs.rmSync(other)
      }
      fs.rmSync(`${filename}.lock`, { force: true })
      yield* assertRefused(filename, directory, first.pid)
    }))

  it.scopedLive("a second runner is refused through a hard link whose first name was removed", () =>
    Effect.gen(function*() {
      const { directory, filename, first } = yield* firstRunner
      const hardLink = path.join(directory, "elsewhere.db")
      fs.linkSync(filename, hardLink)
      fs.rmSync(filename)
      yield* assertRefused(hardLink, directory, first.pid)
    }))

  /** Whether this process may bind-mount a file in a mount namespace of its own (root with CAP_SYS_ADMIN). */
  const canBindMount = (() => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-mount-"))
    try {
      fs.writeFileSync(path.join(directory, "a"), "")
      fs.writeFileSync(path.join(directory, "b"), "")
      const probe = childProcess.spawnSync("unshare", [
        "--mount",
        "--propagation",
        "private",
        "mount",
        "--bind",
        "a",
        "b"
      ], {
        cwd: directory
      })
      return probe.status === 0
    } catch {
      return false
    } finally {
      fs.rmSync(directory, { recursive: true, force: true })
    }
  })()
  /** Why the bind-mount cases are skipped, in their names. */
  const mountNote = canBindMount
    ? ""
    : " (skipped: needs `unshare --mount` and `mount --bind`, root with CAP_SYS_ADMIN)"

  /** A runner process that opens `mounted`, a bind mount of `filename` in a mount namespace (and pid namespace) of its own. */
  const mountedRunner = (filename: string, directory: string, mounted: string, ownPidNamespace: boolean) => {
    fs.mkdirSync(path.dirname(mounted), { recursive: true })
    fs.writeFileSync(mounted, "")
    const wrapper = [
      "unshare",
      "--mount",
      "--propagation",
      "private",
      ...(ownPidNamespace ? ["--pid", "--kill-child"] : []),
      "sh",
      "-c",
      "mount --bind \"$1\" \"$2\" && shift 2 && exec \"$@\"",
      "sh",
      filename,
      mounted
    ]
    return spawnChild(
      runner,
      { ENGINE: "sqlite", DATABASE: mounted, DIRECTORY: directory, RUNNER: "mounted" },
      undefined,
      wrapper
    )
  }

  it.scopedLive.skipIf(!canBindMount)(
    "a second runner is refused through a bind mount of the database",
    () =>
      Effect.gen(function*() {
        const { directory, filename, first } = yield* firstRunner
        const second = mountedRunner(filename, directory, path.join(directory, "mounted", "runs.db"), false)
        yield* Effect.addFinalizer(() => Effect.promise(() => second.kill()))
        const refusal = yield* Effect.promise(() =>
          second.waitForLine((line) => line.startsWith("ready") || line.startsWith("failed"), 60_000)
        )
        assert.include(refusal, "failed EngineLocked")
        assert.include(refusal, `process ${first.pid}`)
      })
  )

  it.scopedLive.skipIf(!canBindMount)(
    `a runner of another pid namespace is refused while the first renews its lease, past the lease's length${mountNote}`,
    () =>
      Effect.gen(function*() {
        // a lease of 5 s (10 s by default), renewed every 500 ms (2 s): as many renewals fit in a lease, and more
        const { directory, filename, first } = yield* firstRunnerWith({ LEASE_MS: "5000", HEARTBEAT_MS: "500" })
        // longer than a lease lasts unrenewed: only renewals written into the file itself keep it
        yield* Effect.sleep("6 seconds")
        const second = mountedRunner(filename, directory, path.join(directory, "mounted", "runs.db"), true)
        yield* Effect.addFinalizer(() => Effect.promise(() => second.kill()))
        const refusal = yield* Effect.promise(() =>
          second.waitForLine((line) => line.startsWith("ready") || line.startsWith("failed"), 60_000)
        )
        assert.include(refusal, "failed EngineLocked")
        assert.include(refusal, `process ${first.pid}`)
      }),
    { timeout: 120_000 }
  )

  it.scopedLive("a stored lease is taken over when its runner is gone: dead on this machine, or expired elsewhere", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const hostMachine = yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* withToy(AgentEngine.layerSqlite({ filename: path.join(directory, "own.db") }), directory)
        const sql = yield* Effect.provide(SqlClient.SqlClient, context)
        const [row] = yield* sql<{ readonly machine: string }>`SELECT machine FROM stepwise_runner_lease`
        return row!.machine
      }))
      // a process that has exited (its pid is free, or another process's now)
      const exited = childProcess.spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"])
      const deadPid = Number(exited.stdout.toString())
      const cases: ReadonlyArray<[string, { pid: number; machine: string; expiresIn: number }, boolean]> = [
        [
          "a dead process of this machine, lease not expired",
          { pid: deadPid, machine: hostMachine, expiresIn: 60_000 },
          true
        ],
        [
          "a process of another machine, lease expired",
          { pid: process.pid, machine: "elsewhere", expiresIn: -1 },
          true
        ],
        [
          "a process of another machine, lease not expired",
          { pid: 4242, machine: "elsewhere", expiresIn: 60_000 },
          false
        ],
        ["this live process, lease expired", { pid: process.pid, machine: hostMachine, expiresIn: -60_000 }, false]
      ]
      for (const [name, lease, takenOver] of cases) {
        const filename = path.join(directory, `${cases.findIndex(([n]) => n === name)}.db`)
        yield* Effect.scoped(Effect.gen(function*() {
          const sql = yield* Effect.provide(
            SqlClient.SqlClient,
            yield* Layer.build(AgentEngine.layerSqlite({ filename, clientOnly: true }))
          )
          yield* sql`CREATE TABLE stepwise_runner_lease (id INTEGER PRIMARY KEY CHECK (id = 1), owner TEXT NOT NULL,
            pid INTEGER NOT NULL, host TEXT NOT NULL, machine TEXT NOT NULL, started TEXT NOT NULL, expires_at INTEGER NOT NULL)`
          yield* sql`INSERT INTO stepwise_runner_lease VALUES (1, 'someone', ${lease.pid}, 'their-host', ${lease.machine},
            '', ${Date.now() + lease.expiresIn})`
        }))
        const built = yield* Effect.exit(Effect.scoped(withToy(AgentEngine.layerSqlite({ filename }), directory)))
        if (takenOver) {
          assert.isTrue(Exit.isSuccess(built), name)
        } else {
          const error = Exit.isFailure(built) ? Cause.failureOption(built.cause) : Option.none()
          assert.deepStrictEqual(
            Option.map(error, (e) => e._tag === "EngineLocked" ? [e._tag, e.pid, e.host] : [e._tag]),
            Option.some(["EngineLocked", lease.pid, "their-host"]),
            name
          )
        }
      }
    }))

  it.scopedLive("through a symbolic link to a missing file, creates the file and holds it", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const filename = path.join(directory, "data", "runs.db")
      fs.mkdirSync(path.dirname(filename))
      const symlink = path.join(directory, "link.db")
      fs.symlinkSync(filename, symlink)
      const context = yield* withToy(AgentEngine.layerSqlite({ filename: symlink }), directory)
      assert.deepStrictEqual(yield* runToy("r1").pipe(Effect.provide(context)), Exit.succeed("r1/first+r1/second"))
      assert.isTrue(fs.lstatSync(filename).isFile())
      const locked = yield* Effect.flip(withToy(AgentEngine.layerSqlite({ filename }), directory))
      assert.strictEqual(locked._tag, "EngineLocked")
    }))

  // (a recursive mkdir under /proc never ended, blocking the process: it makes /proc, finds it, tries again)
  it.scopedLive.skipIf(!fs.existsSync("/proc/self"))(
    "a file whose folder answers ENOENT though it exists (under /proc) is refused at once, naming it",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-engine-")
        const filename = "/proc/stepwise-x/runs.db"
        const child = spawnChild(runner, { ENGINE: "sqlite", DATABASE: filename, DIRECTORY: directory, RUNNER: "proc" })
        yield* Effect.addFinalizer(() => Effect.promise(() => child.kill()))
        const line = yield* Effect.promise(() =>
          child.waitForLine((line) => line.startsWith("ready") || line.startsWith("failed"), 60_000)
        )
        assert.include(line, "failed InvalidOptions")
        assert.include(line, `cannot open "${filename}"`)
      })
  )

  // (SQLite would open them: a FIFO or a terminal waits for a writer, /dev/zero never ends)
  it.scopedLive.skipIf(process.platform === "win32" || !fs.existsSync("/dev/zero"))(
    "a FIFO, a device or a directory (or a link to one) as the file is refused before SQLite opens it, naming it",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-engine-")
        const fifo = path.join(directory, "fifo.db")
        childProcess.execFileSync("mkfifo", [fifo])
        const linkToFifo = path.join(directory, "link.db")
        fs.symlinkSync(fifo, linkToFifo)
        const zero = path.join(directory, "zero.db")
        fs.symlinkSync("/dev/zero", zero)
        const folder = path.join(directory, "folder.db")
        fs.mkdirSync(folder)
        for (
          const [filename, kind] of [[fifo, "a FIFO"], [linkToFifo, "a FIFO"], [zero, "a device"], [
            folder,
            "a directory"
          ]]
        ) {
          const refused = yield* Layer.build(AgentEngine.layerSqlite({ filename })).pipe(
            Effect.timeout("10 seconds"),
            Effect.flip
          )
          assert.strictEqual(refused._tag, "InvalidOptions", filename)
          assert.include(refused.message, `is ${kind}, not a regular file`)
        }
      })
  )

  it.scopedLive("defaults to .stepwise/runs.db under the working directory", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const child = spawnChild(runner, { ENGINE: "sqlite", DIRECTORY: directory, RUNNER: "default" }, directory)
      yield* Effect.addFinalizer(() => Effect.promise(() => child.kill()))
      yield* Effect.promise(() => child.waitForLine((line) => line.startsWith("ready"), 60_000))
      assert.isTrue(fs.existsSync(path.join(directory, ".stepwise", "runs.db")))
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

  it.scopedLive("rejects bad options with InvalidOptions", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const file = path.join(directory, "a-file")
      fs.writeFileSync(file, "")
      fs.writeFileSync(path.join(directory, "garbage.db"), "not a database, but long enough to be read as one")
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
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.strictEqual(error._tag === "InvalidOptions" ? error.option : undefined, option)
        assert.strictEqual(error._tag === "InvalidOptions" ? error.module : undefined, "AgentEngine")
      }
    }))
})

describe("AgentEngine: a client never acts as a runner", () => {
  it.scopedLive("sharding.runnerAddress that contradicts clientOnly is refused, naming both; one that agrees is not", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-engine-")
      const filename = path.join(directory, "runs.db")
      const refused: ReadonlyArray<[AgentEngine.SqliteOptions, string]> = [
        // a client with a runner's address would execute runs without the lease
        [
          { filename, clientOnly: true, sharding: { runnerAddress: ShardingConfig.defaults.runnerAddress } },
          "clientOnly"
        ],
        // a runner with no address would hold the lease and execute nothing
        [{ filename, sharding: { runnerAddress: Option.none() } }, "clientOnly"]
      ]
      for (const [options, named] of refused) {
        const error = yield* Effect.flip(Layer.build(AgentEngine.layerSqlite(options)))
        assert.strictEqual(error._tag, "InvalidOptions")
        if (error._tag !== "InvalidOptions") continue
        assert.strictEqual(error.option, "sharding.runnerAddress")
        assert.include(error.reason, named)
      }
      // nothing was opened: no runner took the lease, so a runner starts on the file and runs a workflow
      const context = yield* withToy(AgentEngine.layerSqlite({ filename }), directory)
      assert.deepStrictEqual(yield* runToy("r1").pipe(Effect.provide(context)), Exit.succeed("r1/first+r1/second"))
      // a client whose override agrees with its role connects
      yield* Layer.build(
        AgentEngine.layerSqlite({ filename, clientOnly: true, sharding: { runnerAddress: Option.none() } })
      )
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

  it.scopedLive("rejects bad options with InvalidOptions", () =>
    Effect.gen(function*() {
      const url = Redacted.make("postgres://nobody@127.0.0.1:1/none")
      const cases: ReadonlyArray<[string, AgentEngine.PostgresOptions]> = [
        ["takeoverAfter", { url, takeoverAfter: "1 second" }],
        ["pollInterval", { url, pollInterval: "-5 millis" }],
        ["maxConnections", { url, maxConnections: 1 }],
        ["runnerAddress", { url, runnerAddress: Option.some({ host: "", port: 1 }) }],
        // a client (no runner address) made a runner by an override
        ["sharding.runnerAddress", {
          url,
          runnerAddress: Option.none(),
          sharding: { runnerAddress: ShardingConfig.defaults.runnerAddress }
        }]
      ]
      for (const [option, options] of cases) {
        const error = yield* Effect.flip(Layer.build(AgentEngine.layerPostgres(options)))
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.strictEqual(error._tag === "InvalidOptions" ? error.option : undefined, option)
        assert.strictEqual(error._tag === "InvalidOptions" ? error.module : undefined, "AgentEngine")
      }
    }))
})
