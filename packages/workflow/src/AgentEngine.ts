/**
 * Engines for durable agent runs, as layers providing `WorkflowEngine`.
 *
 * - `layerMemory`: everything in the process; nothing survives it. For tests
 *   and simple apps.
 * - `layerSqlite`: one runner process on one machine, journal in a SQLite
 *   file. A lease stored in the database itself keeps a second runner
 *   process away, whatever name it opens the file by (two runners on one
 *   file would run the same activities twice), and a runner that loses it
 *   stops executing; processes that only start or approve runs connect
 *   with `clientOnly: true`.
 * - `layerPostgres`: several runner processes, on one machine or many, share
 *   a PostgreSQL database. Shards are spread over the live runners and held
 *   with advisory locks; when a runner dies the others take its runs over.
 *
 * The durable layers also provide the `SqlClient` they use (for
 * `SqlCheckpointer` and `RunStore` on the same database), and the cluster's
 * `Sharding` and `MessageStorage`. They build @effect/cluster's
 * `ShardingConfig` from the options alone and never read environment
 * variables.
 *
 * @since 0.1.0
 */
import { PersistenceError } from "@effect/cluster/ClusterError"
import * as ClusterWorkflowEngine from "@effect/cluster/ClusterWorkflowEngine"
import * as EntityId from "@effect/cluster/EntityId"
import type * as MessageStorage from "@effect/cluster/MessageStorage"
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import type * as ShardId from "@effect/cluster/ShardId"
import * as Sharding from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import type * as PgClient from "@effect/sql-pg/PgClient"
import type * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as AgentError from "@stepwise-agent/core/AgentError"
import { describeValue } from "@stepwise-agent/core/Secrets"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { LeaseTiming } from "./internal/leaseTiming.js"
import { keysOf, unknownKey } from "./internal/options.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * What the durable layers provide.
 *
 * @since 0.1.0
 * @category models
 */
export type Durable =
  | WorkflowEngine.WorkflowEngine
  | SqlClient.SqlClient
  | Sharding.Sharding
  | MessageStorage.MessageStorage

/**
 * Options of {@link layerSqlite}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteOptions {
  /**
   * The database file, relative to the working directory. Its folder is
   * created if missing. Default `.stepwise/runs.db`.
   */
  readonly filename?: string | undefined
  /**
   * How often the runner reads storage for messages written by other
   * processes (an approval, a start) and for due durable timers. Default
   * 500 ms, so a signal from another process resumes a run in about a second.
   */
  readonly pollInterval?: Duration.DurationInput | undefined
  /**
   * Connect without running anything: the process can start runs, poll them
   * and complete approvals, while the runner process executes them. Takes no
   * lease. Default `false`.
   */
  readonly clientOnly?: boolean | undefined
  /**
   * When a commit reaches the disk (SQLite's `PRAGMA synchronous`; the file
   * is in WAL mode).
   *
   * - `"normal"` (default): a commit is written to the WAL file, which is
   *   synced to disk only when it is copied into the database (a
   *   checkpoint: the runner makes one when it renews its lease, every 2
   *   seconds, and SQLite every ~4 MB). A crash of the process loses nothing
   *   committed; a crash of the operating system or a power cut can undo
   *   the last commits (the file stays consistent): the runs they belong to
   *   resume from an earlier point, and calls whose results were lost run
   *   again, as after any crash in a call.
   * - `"full"`: every commit is synced to disk first, so it survives a power
   *   cut too. Each step commits several times, so a step then waits for
   *   several disk syncs.
   */
  readonly synchronous?: "normal" | "full" | undefined
  /**
   * Advanced: overrides for @effect/cluster's `ShardingConfig`, applied last.
   * Its `runnerAddress` cannot change the process's role: one given with
   * `clientOnly: true` (a client would execute runs), or `Option.none()`
   * without it (a runner would hold the lease and execute nothing), is
   * refused with `AgentError.InvalidOptions` (`option: "sharding.runnerAddress"`).
   */
  readonly sharding?: Partial<ShardingConfig.ShardingConfig["Type"]> | undefined
}

/**
 * Options of {@link layerPostgres}.
 *
 * @since 0.1.0
 * @category models
 */
export interface PostgresOptions {
  /** The connection url, e.g. `postgres://user@host:5432/db`. */
  readonly url: Redacted.Redacted
  /**
   * The runner's identity in the cluster: unique among live runners, and
   * best stable across restarts (e.g. the pod name), so a restarted runner
   * takes its shards back at once. `Option.none()` makes a client-only
   * process that starts, polls and approves runs but executes none. Default
   * `{ host: os.hostname(), port: process.pid }`. Runners talk only through
   * the database; nothing listens on this address.
   */
  readonly runnerAddress?: Option.Option<{ readonly host: string; readonly port: number }> | undefined
  /**
   * How often a runner reads storage for messages written by other processes
   * and for due durable timers. Default 500 ms.
   */
  readonly pollInterval?: Duration.DurationInput | undefined
  /**
   * How long a runner that stopped sending heartbeats (it crashed) keeps its
   * shards before the other runners take its runs over. Shards stay
   * exclusive regardless: they are held with advisory locks, which die with
   * the runner's connection. Default 10 seconds.
   */
  readonly takeoverAfter?: Duration.DurationInput | undefined
  /** The connection pool's size (at least 3; one connection holds the shard locks). Default 10. */
  readonly maxConnections?: number | undefined
  /**
   * Advanced: overrides for @effect/cluster's `ShardingConfig`, applied last.
   * With `runnerAddress: Option.none()` (a client), a `runnerAddress` here
   * that is some address is refused with `AgentError.InvalidOptions`
   * (`option: "sharding.runnerAddress"`): a client never executes runs.
   */
  readonly sharding?: Partial<ShardingConfig.ShardingConfig["Type"]> | undefined
}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * Another runner process works on this SQLite file: it holds the lease
 * stored in the database. Two runners on one file would both execute the
 * same runs.
 *
 * A runner that starts while another holds the lease fails with it. A
 * runner that loses its lease while it runs (`lost` says how) stops its
 * engine, and every later call through that engine (starting, polling,
 * resuming a run) dies with it.
 *
 * @example
 * ```ts
 * import { AgentEngine } from "@stepwise-agent/workflow"
 *
 * const locked = new AgentEngine.EngineLocked({ filename: "runs.db", pid: 42, host: "db1", lost: "TakenOver" })
 * locked.message // "This runner lost the run database \"runs.db\" to a runner (process 42 on db1) …"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EngineLocked extends Schema.TaggedError<EngineLocked>(
  "@stepwise-agent/workflow/AgentEngine/EngineLocked"
)("EngineLocked", {
  filename: Schema.String,
  pid: Schema.optional(Schema.Number),
  host: Schema.optional(Schema.String),
  /**
   * Set when this runner held the lease and lost it: another runner took it
   * over (`"TakenOver"`), its row was deleted (`"Deleted"`), or it could not
   * be renewed before it would have expired (`"NotRenewed"`).
   */
  lost: Schema.optional(Schema.Literal("TakenOver", "Deleted", "NotRenewed"))
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    const owner = this.pid === undefined ? "another process" : `process ${this.pid} on ${this.host ?? "this host"}`
    const stopped = "This runner stopped executing runs (the new owner resumes them from their journal); " +
      "restart the process to run again."
    switch (this.lost) {
      case "TakenOver":
        return `This runner lost the run database "${this.filename}" to a runner (${owner}). ${stopped}`
      case "Deleted":
        return `The runner lease of "${this.filename}" was deleted. ${stopped}`
      case "NotRenewed":
        return `This runner could not renew its lease of "${this.filename}" before it would have expired. ${stopped}`
      case undefined:
        return `The run database "${this.filename}" is in use by a runner (${owner}). ` +
          `Stop it first, or connect with { clientOnly: true } to start and approve runs through it.`
    }
  }
}

/**
 * The errors of the engine layers: an invalid option (`AgentError.InvalidOptions`
 * of module `"AgentEngine"`, `option` naming it), or a database another runner
 * holds.
 *
 * @since 0.1.0
 * @category errors
 */
export type EngineError = AgentError.InvalidOptions | EngineLocked

/**
 * @since 0.1.0
 * @category errors
 */
export const EngineError: Schema.Union<[typeof AgentError.InvalidOptions, typeof EngineLocked]> = Schema.Union(
  AgentError.InvalidOptions,
  EngineLocked
)

// -----------------------------------------------------------------------------
// layers
// -----------------------------------------------------------------------------

/**
 * The in-memory engine: runs, journal, approvals and timers live in the
 * process.
 *
 * @example
 * ```ts
 * import { AgentEngine } from "@stepwise-agent/workflow"
 * import { Layer } from "effect"
 *
 * // AgentRunLive = MyWorkflow.toLayer(...)
 * declare const AgentRunLive: Layer.Layer<never>
 * const MainLive = AgentRunLive.pipe(Layer.provideMerge(AgentEngine.layerMemory))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<WorkflowEngine.WorkflowEngine> = WorkflowEngine.layerMemory

/** The default of `SqliteOptions.filename`. */
const defaultFilename = path.join(".stepwise", "runs.db")

const decodePositiveDuration = (
  option: string,
  input: Duration.DurationInput | undefined,
  fallback: Duration.Duration
) =>
  Effect.suspend(() => {
    if (input === undefined) return Effect.succeed(fallback)
    const duration = Duration.decodeUnknown(input)
    return Option.isSome(duration) && Duration.greaterThan(duration.value, Duration.zero) &&
        Duration.isFinite(duration.value)
      ? Effect.succeed(duration.value)
      : Effect.fail(
        new AgentError.InvalidOptions({
          module: "AgentEngine",
          option,
          reason: `expected a positive, finite duration, got ${shown(input)}`
        })
      )
  })

const sqliteKeys = keysOf<SqliteOptions>({
  filename: true,
  pollInterval: true,
  clientOnly: true,
  synchronous: true,
  sharding: true
})

const postgresKeys = keysOf<PostgresOptions>({
  url: true,
  runnerAddress: true,
  pollInterval: true,
  takeoverAfter: true,
  maxConnections: true,
  sharding: true
})

const shardingKeys = Object.keys(ShardingConfig.defaults)

/** The `InvalidOptions` of an engine's options that are not an object, or of their (or their `sharding`'s) unknown key. */
const unknownEngineKey = (options: unknown, known: ReadonlyArray<string>): AgentError.InvalidOptions | undefined =>
  unknownKey("AgentEngine", options, known) ??
    (Predicate.hasProperty(options, "sharding")
      ? unknownKey("AgentEngine", options.sharding, shardingKeys, "sharding")
      : undefined)

/** An option's value as an error shows it: a text as given (cut), anything else by `describeValue`. */
const shown = (value: unknown): string => typeof value === "string" ? value.slice(0, 200) : describeValue(value)

const clusterEngine = (
  config: Partial<ShardingConfig.ShardingConfig["Type"]>,
  runnerStorage: Layer.Layer<RunnerStorage.RunnerStorage, SqlError, SqlClient.SqlClient | ShardingConfig.ShardingConfig>
): Layer.Layer<
  WorkflowEngine.WorkflowEngine | Sharding.Sharding | MessageStorage.MessageStorage,
  SqlError,
  SqlClient.SqlClient
> =>
  ClusterWorkflowEngine.layer.pipe(
    Layer.provideMerge(Sharding.layer),
    Layer.provide(Runners.layerNoop),
    Layer.provideMerge(SqlMessageStorage.layer),
    Layer.provide([runnerStorage, RunnerHealth.layerNoop]),
    Layer.provide(ShardingConfig.layer(config))
  )

/**
 * A folder and its missing parents, made one at a time: a recursive `mkdir` never ends where `mkdir` answers
 * ENOENT under a folder that exists (`/proc/x`): it makes the parent, finds it there, and tries again, forever.
 */
const makeDirectories = (directory: string): void => {
  const missing: Array<string> = []
  for (let current = directory; !fs.existsSync(current);) {
    missing.push(current)
    const parent = path.dirname(current)
    if (parent === current) break
    current = parent
  }
  for (const folder of missing.reverse()) {
    try {
      fs.mkdirSync(folder)
    } catch (error) {
      // (made at the same moment by another process: there it is)
      if (!(Predicate.hasProperty(error, "code") && error.code === "EEXIST")) throw error
    }
  }
}

/**
 * Creates an empty file (an empty SQLite database) unless one exists, also
 * through a symbolic link to a missing file. An existing file is never
 * opened here: closing a descriptor drops every lock the process holds on
 * the file, SQLite's included.
 */
const createIfMissing = (filename: string) => {
  if (!fs.existsSync(filename)) fs.closeSync(fs.openSync(filename, "a"))
}

/** What a file is, when it is not a regular file (`undefined` when it is). */
const notRegular = (stats: fs.Stats) =>
  stats.isFile()
    ? undefined
    : stats.isDirectory()
    ? "a directory"
    : stats.isFIFO()
    ? "a FIFO"
    : stats.isSocket()
    ? "a socket"
    : stats.isCharacterDevice() || stats.isBlockDevice()
    ? "a device"
    : "not a regular file"

/**
 * The database file by its one real name: its folder and the file are
 * created if missing, and symbolic links are resolved. Anything but a
 * regular file is refused before SQLite opens it (a FIFO or a terminal
 * waits for a writer; `/dev/zero` never ends). A file with several hard
 * links is refused: a process through another name would not share
 * SQLite's WAL file, which SQLite keeps next to the name.
 */
const realFile = (filename: string) =>
  Effect.try({
    try: () => {
      makeDirectories(path.dirname(filename))
      createIfMissing(filename)
      const real = fs.realpathSync(filename)
      const stats = fs.statSync(real)
      return { real, links: stats.nlink, kind: notRegular(stats) }
    },
    catch: (cause) =>
      new AgentError.InvalidOptions({
        module: "AgentEngine",
        option: "filename",
        reason: `cannot open "${filename}": ${String(cause)}`
      })
  }).pipe(
    Effect.filterOrFail(
      ({ kind }) => kind === undefined,
      ({ kind, real }) =>
        new AgentError.InvalidOptions({
          module: "AgentEngine",
          option: "filename",
          reason: `"${real}" is ${kind}, not a regular file: SQLite keeps its database in a regular file`
        })
    ),
    Effect.filterOrFail(
      ({ links }) => links === 1,
      ({ links, real }) =>
        new AgentError.InvalidOptions({
          module: "AgentEngine",
          option: "filename",
          reason: `"${real}" has ${links} hard links; processes opening it by different names would not share ` +
            `SQLite's WAL file (and could corrupt the database). Keep one name (a symbolic link is fine).`
        })
    ),
    Effect.map(({ real }) => real)
  )

/**
 * A SQL driver, loaded when an engine on it is built: the drivers are optional peers, so an app on one
 * database installs only that one's (and a missing one is a typed error naming the package to install).
 */
const loadDriver = <M>(
  engine: string,
  name: string,
  load: () => Promise<M>
): Effect.Effect<M, AgentError.InvalidOptions> =>
  Effect.tryPromise({
    try: load,
    catch: (error) =>
      new AgentError.InvalidOptions({
        module: "AgentEngine",
        option: "driver",
        reason: `${engine} needs the package ${name} (and its native driver) installed: ${
          error instanceof Error ? error.message : String(error)
        }`
      })
  })

const sqliteDriver = loadDriver<typeof SqliteClient>(
  "AgentEngine.layerSqlite",
  "@effect/sql-sqlite-node",
  () => import("@effect/sql-sqlite-node/SqliteClient")
)

const pgDriver = loadDriver<typeof PgClient>(
  "AgentEngine.layerPostgres",
  "@effect/sql-pg",
  () => import("@effect/sql-pg/PgClient")
)

const describeCause = (cause: Cause.Cause<unknown>) => {
  const error = Cause.squash(cause)
  return error instanceof Error ? error.message : String(error)
}

/** A line of `/proc`, or `""` where there is none (not Linux, no access). */
const procText = (file: string) => {
  try {
    return fs.readFileSync(file, "utf8").trim()
  } catch {
    return ""
  }
}

/**
 * Where a process id names one process: the host, its boot and the pid namespace (on Linux; the host
 * alone elsewhere). A runner of another machine (another container, a reboot) is known only by its lease.
 */
const machineOf = () => {
  let pidNamespace = ""
  try {
    pidNamespace = fs.readlinkSync("/proc/self/ns/pid")
  } catch {
    // not Linux
  }
  return `${os.hostname()}/${procText("/proc/sys/kernel/random/boot_id")}/${pidNamespace}`
}

/**
 * The state (`Z`: exited, not yet reaped) and start time (clock ticks since boot: a reused pid starts
 * later) of the process `pid` on Linux; `""` each where unknown.
 */
const statOf = (pid: number) => {
  // the fields after the command name (which may hold spaces and parentheses): the 3rd field on
  const fields = procText(`/proc/${pid}/stat`).split(") ").at(-1)?.split(" ") ?? []
  return { state: fields[0] ?? "", started: fields[19] ?? "" }
}

/** Whether the process `pid`, started at `started` (`""`: unknown), still runs on this machine. */
const isAlive = (pid: number, started: string) => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    // EPERM: it runs, as another user
    if ((error as { readonly code?: unknown }).code !== "EPERM") return false
  }
  const now = statOf(pid)
  return now.state !== "Z" && (started === "" || now.started === "" || now.started === started)
}

interface LeaseRow {
  readonly owner: string
  readonly pid: number | bigint
  readonly host: string
  readonly machine: string
  readonly started: string
  readonly expires_at: number | bigint
}

/** The runner lease a runner holds: see {@link holdRunnerLease}. */
interface RunnerLease {
  /**
   * Succeeds while this runner can show that it holds the lease: its last
   * renewal is recent, or, when it is not (the process was paused, the
   * event loop blocked), a renewal now succeeds. Fails with how the lease
   * was lost otherwise, and from then on.
   */
  readonly check: Effect.Effect<void, EngineLocked>
  /** Waits until the lease is lost. */
  readonly lost: Effect.Effect<EngineLocked>
}

/** Whether an error is another connection holding the file locked (`SQLITE_BUSY…`, `SQLITE_LOCKED…`). */
const isBusy = (error: SqlError | EngineLocked): boolean => {
  if (error._tag !== "SqlError") return false
  const code = Predicate.hasProperty(error.cause, "code") ? error.cause.code : undefined
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
}

/** How a runner taking the lease waits for a file another process holds locked: about 10 s in all. */
const busyRetries = Schedule.exponential("20 millis", 1.5).pipe(
  Schedule.union(Schedule.spaced("1 second")),
  Schedule.upTo("10 seconds")
)

/**
 * Holds the runner lease of a SQLite database for the scope: a row inside
 * the database itself (so no other name of the file, no rename, link or
 * mount, and no deleted file next to it, escapes it), written only by the
 * process that holds it. A runner finding another's live lease fails with
 * `EngineLocked`. A lease is live while its process runs, when that
 * process is of this machine (same host, boot and pid namespace), and
 * otherwise until it expires: its holder renews it every `heartbeatEvery`,
 * for `leaseFor`, and copies it into the database file (a WAL checkpoint),
 * where a process opening the file by another name (which SQLite gives a
 * WAL file of its own) finds it. The lease is given up when the scope
 * closes.
 *
 * A renewal writes over the row exactly as this runner last wrote it, so a
 * renewal that succeeds shows that no other runner wrote the lease since,
 * however long ago the last one was. The lease is lost when a renewal finds
 * the row taken over or deleted, or when renewals fail until less than a
 * heartbeat is left before the lease would expire.
 */
const holdRunnerLease = (filename: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const { heartbeatEvery, leaseFor } = yield* LeaseTiming
    const leaseMillis = Duration.toMillis(leaseFor)
    const machine = machineOf()
    const me = {
      owner: crypto.randomUUID(),
      pid: process.pid,
      host: os.hostname(),
      started: statOf(process.pid).started
    }
    const lease = sql("stepwise_runner_lease")
    const checkpoint = Effect.ignore(sql.unsafe("PRAGMA wal_checkpoint(PASSIVE)"))
    const live = (held: LeaseRow, now: number) =>
      held.machine === machine ? isAlive(Number(held.pid), held.started) : Number(held.expires_at) > now
    /** The row of this runner's lease, as written at `now`. */
    const mine = (now: number) =>
      sql`(id, owner, pid, host, machine, started, expires_at) VALUES (1, ${me.owner}, ${me.pid}, ${me.host},
        ${machine}, ${me.started}, ${now + leaseMillis})`
    /** Writes this runner's lease: over none, or over `held` if it is still the one stored. */
    const write = (now: number, held: LeaseRow | undefined) =>
      held === undefined
        ? sql`INSERT INTO ${lease} ${mine(now)} ON CONFLICT (id) DO NOTHING RETURNING owner`
        : sql`INSERT INTO ${lease} ${mine(now)} ON CONFLICT (id) DO UPDATE
            SET owner = excluded.owner, pid = excluded.pid, host = excluded.host, machine = excluded.machine,
              started = excluded.started, expires_at = excluded.expires_at
            WHERE ${lease}.owner = ${held.owner} AND ${lease}.expires_at = ${held.expires_at}
            RETURNING owner`
    /** Takes the lease, or finds another's live one: until when it is held. */
    const take = Effect.gen(function*() {
      yield* sql`CREATE TABLE IF NOT EXISTS ${lease} (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        owner TEXT NOT NULL,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        machine TEXT NOT NULL,
        started TEXT NOT NULL,
        expires_at INTEGER NOT NULL
      )`
      // a write over what was read, unless another process wrote in between: then read again
      for (let attempt = 0; attempt < 3; attempt++) {
        const now = yield* Clock.currentTimeMillis
        const [held] = yield* sql<LeaseRow>`SELECT owner, pid, host, machine, started, expires_at FROM ${lease}`
        if (held !== undefined && held.owner !== me.owner && live(held, now)) {
          return yield* new EngineLocked({ filename, pid: Number(held.pid), host: held.host })
        }
        if ((yield* write(now, held)).length > 0) return now + leaseMillis
      }
      return yield* new EngineLocked({ filename })
    })
    // another process opening the same file at once (creating it, its tables, its lease) holds it locked for a moment
    let expiresAt: number = yield* take.pipe(
      Effect.retry({ while: isBusy, schedule: busyRetries }),
      Effect.catchIf(isBusy, () => new EngineLocked({ filename }))
    )
    yield* checkpoint
    yield* Effect.addFinalizer(() =>
      Effect.ignore(sql`DELETE FROM ${lease} WHERE owner = ${me.owner}`).pipe(Effect.zipRight(checkpoint))
    )

    const lost = yield* Deferred.make<EngineLocked>()
    const failLost = Effect.flatMap(Deferred.await(lost), Effect.fail)
    /** Records the lease as lost (the first loss found stays), failing with it. */
    const lose = (error: EngineLocked) => Effect.zipRight(Deferred.succeed(lost, error), failLost)
    /** Until when a renewal is not needed to show the lease is held: a heartbeat before it would expire. */
    const provenUntil = () => expiresAt! - Duration.toMillis(heartbeatEvery)
    const renewals = yield* Effect.makeSemaphore(1)
    /** Renews the lease over the row as last written, or finds it lost. */
    const renew = renewals.withPermits(1)(Effect.gen(function*() {
      if (yield* Deferred.isDone(lost)) return yield* failLost
      const now = yield* Clock.currentTimeMillis
      const renewed = yield* Effect.either(sql`UPDATE ${lease} SET expires_at = ${now + leaseMillis}
        WHERE owner = ${me.owner} AND expires_at = ${expiresAt!} RETURNING owner`)
      if (Either.isLeft(renewed)) {
        // the database failed: the lease is still this runner's until it would expire (less a heartbeat)
        if (now < provenUntil()) return yield* Effect.logWarning("Could not renew the runner lease", renewed.left)
        return yield* lose(new EngineLocked({ filename, lost: "NotRenewed" }))
      }
      if (renewed.right.length > 0) {
        expiresAt = now + leaseMillis
        return yield* checkpoint
      }
      const [held] = yield* Effect.orElseSucceed(
        sql<LeaseRow>`SELECT owner, pid, host, machine, started, expires_at FROM ${lease}`,
        () => []
      )
      return yield* lose(
        held === undefined
          ? new EngineLocked({ filename, lost: "Deleted" })
          : new EngineLocked({ filename, pid: Number(held.pid), host: held.host, lost: "TakenOver" })
      )
    }))
    yield* Effect.forkScoped(
      Effect.ignore(Effect.repeat(Effect.delay(renew, heartbeatEvery), Schedule.forever))
    )
    return {
      check: Effect.gen(function*() {
        if (yield* Deferred.isDone(lost)) return yield* failLost
        if ((yield* Clock.currentTimeMillis) >= provenUntil()) return yield* renew
      }),
      lost: Deferred.await(lost)
    } satisfies RunnerLease
  }).pipe(
    Effect.catchTag("SqlError", (error) =>
      new AgentError.InvalidOptions({
        module: "AgentEngine",
        option: "filename",
        reason: `cannot take the runner lease of "${filename}": ${String(error.cause ?? error.message)}`
      }))
  )

/**
 * The runner storage of a leased SQLite engine: shards are held (acquired,
 * refreshed) only while the lease is. Once it is lost, @effect/cluster's
 * own handling of shard locks it can no longer refresh takes over: every
 * entity of the runner, so every run it executes, is interrupted at once,
 * and no shard is taken again. `held` collects the shards it gave out.
 */
const leasedRunnerStorage = (lease: RunnerLease, held: Set<ShardId.ShardId>) =>
  Layer.effect(
    RunnerStorage.RunnerStorage,
    Effect.map(RunnerStorage.makeMemory, (memory) => {
      const whileHeld = <A>(effect: Effect.Effect<A, PersistenceError>) =>
        Effect.zipRight(Effect.mapError(lease.check, (cause) => new PersistenceError({ cause })), effect)
      return RunnerStorage.RunnerStorage.of({
        ...memory,
        acquire: (address, shardIds) =>
          whileHeld(memory.acquire(address, shardIds)).pipe(
            Effect.tap((acquired) => acquired.forEach((shardId) => held.add(shardId)))
          ),
        refresh: (address, shardIds) => whileHeld(memory.refresh(address, shardIds))
      })
    })
  )

/**
 * The workflow engine of a leased SQLite engine: each call first checks the
 * lease (a recent renewal, or a renewal now: see {@link RunnerLease}), so a
 * runner whose process was paused past its lease starts no activity before
 * it has shown it still holds it. Once the lease is lost, a call from a run
 * waits there until the engine stops the run (a run must not record
 * anything: its new owner resumes it), and any other call dies with
 * `EngineLocked`.
 */
const leasedWorkflowEngine = (
  engine: WorkflowEngine.WorkflowEngine["Type"],
  lease: RunnerLease
): WorkflowEngine.WorkflowEngine["Type"] => {
  const held = Effect.catchAll(lease.check, (locked) =>
    Effect.flatMap(
      Effect.serviceOption(WorkflowEngine.WorkflowInstance),
      (instance) => Option.isSome(instance) ? Effect.never : Effect.die(locked)
    ))
  const guard =
    <Args extends ReadonlyArray<any>, A, E, R>(call: (...args: Args) => Effect.Effect<A, E, R>) => (...args: Args) =>
      Effect.zipRight(held, Effect.suspend(() => call(...args)))
  return WorkflowEngine.WorkflowEngine.of({
    register: guard(engine.register) as typeof engine.register,
    execute: guard(engine.execute) as typeof engine.execute,
    poll: guard(engine.poll) as typeof engine.poll,
    interrupt: guard(engine.interrupt),
    resume: guard(engine.resume),
    activityExecute: guard(engine.activityExecute) as typeof engine.activityExecute,
    deferredResult: guard(engine.deferredResult) as typeof engine.deferredResult,
    deferredDone: guard(engine.deferredDone) as typeof engine.deferredDone,
    scheduleClock: guard(engine.scheduleClock)
  })
}

/**
 * The engine of a runner holding `lease`, built in a scope of its own that
 * is closed when the lease is lost: first @effect/cluster interrupts the
 * runs (its shard locks fail, see {@link leasedRunnerStorage}), then the
 * engine (sharding, storage polling, workflow engine) stops, and calls
 * through it die with `EngineLocked` from then on.
 */
const leasedEngine = (
  config: Partial<ShardingConfig.ShardingConfig["Type"]>,
  lease: RunnerLease
): Effect.Effect<
  Context.Context<WorkflowEngine.WorkflowEngine | Sharding.Sharding | MessageStorage.MessageStorage>,
  SqlError,
  SqlClient.SqlClient | Scope.Scope
> =>
  Effect.gen(function*() {
    const engineScope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
    const held = new Set<ShardId.ShardId>()
    const context = yield* Layer.buildWithScope(clusterEngine(config, leasedRunnerStorage(lease, held)), engineScope)
    const sharding = Context.get(context, Sharding.Sharding)
    const runsStopped = Effect.gen(function*() {
      while (
        [...held].some((shardId) => sharding.hasShardId(shardId)) || (yield* sharding.activeEntityCount) > 0
      ) {
        yield* Effect.sleep(Duration.millis(50))
      }
    })
    yield* Effect.forkScoped(Effect.gen(function*() {
      const locked = yield* lease.lost
      yield* Effect.logError(locked.message)
      // bounded: the runs' fibers wait at the lease check anyway, until the scope of their registration closes
      yield* Effect.ignore(Effect.timeout(runsStopped, Duration.seconds(30)))
      yield* Scope.close(engineScope, Exit.fail(locked))
    }))
    return Context.add(
      context,
      WorkflowEngine.WorkflowEngine,
      leasedWorkflowEngine(Context.get(context, WorkflowEngine.WorkflowEngine), lease)
    )
  })

/**
 * Shards per shard group on SQLite. A single runner owns every shard, so
 * more would only lengthen its storage reads: each lists the runner's
 * shards, and @effect/cluster's default of 300 made that list most of the
 * read's cost (parsed anew each time, as the list is written into the
 * query). One per group keeps each run's messages where they are found.
 */
const sqliteShardsPerGroup = 1

/** A stored shard id, `<group>:<id>`. */
const parseShardId = (shardId: string) => {
  const colon = shardId.lastIndexOf(":")
  return { group: shardId.slice(0, colon), id: Number(shardId.slice(colon + 1)) }
}

/**
 * Moves the messages a journal holds under shards the runner no longer has
 * (written with more shards per group: @effect/cluster's default of 300,
 * before `layerSqlite` used {@link sqliteShardsPerGroup}) to the shard each
 * one's run belongs to now, so that the runner reads them again: a run
 * waiting in such a journal resumes, a decision reaches it. The check costs
 * one index seek per stored shard; the move happens once, in one transaction.
 */
const rehomeMessages = (shardsPerGroup: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const sharding = yield* Sharding.Sharding
    // the distinct shards stored, by seeks on the index that leads with shard_id
    const stored: Array<string> = []
    while (true) {
      const [next] = yield* sql<{ readonly shard_id: string }>`
        SELECT shard_id FROM cluster_messages WHERE shard_id > ${stored.at(-1) ?? ""} ORDER BY shard_id LIMIT 1`
      if (next === undefined) break
      stored.push(next.shard_id)
    }
    if (stored.every((shardId) => parseShardId(shardId).id <= shardsPerGroup)) return
    yield* sql.withTransaction(Effect.gen(function*() {
      const entities = yield* sql<{ readonly entity_id: string; readonly shard_id: string }>`
        SELECT DISTINCT entity_id, shard_id FROM cluster_messages`
      for (const { entity_id, shard_id } of entities) {
        const owner = sharding.getShardId(EntityId.make(entity_id), parseShardId(shard_id).group).toString()
        if (owner !== shard_id) {
          yield* sql`UPDATE cluster_messages SET shard_id = ${owner} WHERE entity_id = ${entity_id} AND shard_id = ${shard_id}`
        }
      }
    }))
    yield* sharding.pollStorage
  })

/**
 * The durable engine for one machine: @effect/cluster's workflow engine with
 * a single runner, journal and messages in a SQLite file. Needs the optional
 * peer `@effect/sql-sqlite-node` (and its better-sqlite3 build) installed;
 * without it the layer fails with `AgentError.InvalidOptions` (`option: "driver"`).
 *
 * Only one runner process may use a file: the runner holds a lease stored in
 * the database (table `stepwise_runner_lease`), and a second one fails with
 * `EngineLocked`, naming the first, whatever name it opens the file by (a
 * symbolic link, a rename, a hard link, a bind mount); one that finds the
 * file locked by another connection waits up to about 10 seconds, then
 * fails with `EngineLocked` too. A file with several
 * hard links is refused (`AgentError.InvalidOptions`, to runners and clients alike).
 * The lease of a crashed runner of this machine (host, boot and pid
 * namespace) is taken over at once; one held from elsewhere, 10 seconds
 * after its last renewal. Other processes can still start runs and
 * send approvals through the file with `clientOnly: true`; the runner sees
 * their messages within `pollInterval`.
 *
 * A runner that loses its lease stops executing: another runner took it
 * over (after the runner's renewals stopped for 10 seconds: a paused
 * process, a suspended machine), its row was deleted, or the database
 * failed its renewals until the lease would soon expire. Its engine stops,
 * as @effect/cluster stops a runner that lost its shard locks: every run
 * it executes is interrupted at once and left in the journal for the new
 * owner to resume (a tool call already running ends, as activities do;
 * none starts after), and every later call through the engine dies with
 * `EngineLocked` (`lost` says how). A runner whose process or event loop
 * was paused renews its lease before it starts any step (model or tool
 * call), so it finds a takeover before it goes on. Restart the process to
 * run again.
 *
 * @example
 * ```ts
 * import { AgentEngine } from "@stepwise-agent/workflow"
 * import { Layer } from "effect"
 *
 * declare const AgentRunLive: Layer.Layer<never>
 * const MainLive = AgentRunLive.pipe(
 *   Layer.provideMerge(AgentEngine.layerSqlite({ filename: "data/runs.db" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqlite = (
  options?: SqliteOptions | undefined
): Layer.Layer<Durable, EngineError | SqlError> =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const unknown = unknownEngineKey(options, sqliteKeys)
    if (unknown !== undefined) return yield* unknown
    const pollInterval = yield* decodePositiveDuration("pollInterval", options?.pollInterval, Duration.millis(500))
    const SqliteClient = yield* sqliteDriver
    const given: unknown = options?.filename ?? defaultFilename
    if (typeof given !== "string" || given.trim().length === 0) {
      return yield* new AgentError.InvalidOptions({
        module: "AgentEngine",
        option: "filename",
        reason: `expected a file name, got ${typeof given === "string" ? "an empty string" : describeValue(given)}`
      })
    }
    const inMemory = given === ":memory:"
    const filename = inMemory ? given : yield* realFile(path.resolve(given))
    const clientOnly = options?.clientOnly === true
    yield* checkRole(options?.sharding, clientOnly, clientOnly ? "clientOnly: true" : "a runner (no clientOnly)")
    const config = {
      runnerAddress: clientOnly ? Option.none() : ShardingConfig.defaults.runnerAddress,
      entityMessagePollInterval: pollInterval,
      shardsPerGroup: sqliteShardsPerGroup,
      ...options?.sharding
    }
    const synchronous = options?.synchronous ?? "normal"
    if (synchronous !== "normal" && synchronous !== "full") {
      return yield* new AgentError.InvalidOptions({
        module: "AgentEngine",
        option: "synchronous",
        reason: `expected "normal" or "full", got ${shown(synchronous)}`
      })
    }
    // `SqliteClient.make` raises no `ConfigError`; a file that is not a database throws while it opens it
    const sqlite = SqliteClient.layer({ filename }).pipe(
      // set, not left to the build of SQLite (better-sqlite3's makes NORMAL the default in WAL mode)
      Layer.tap((context) =>
        Context.get(context, SqliteClient.SqliteClient).unsafe(`PRAGMA synchronous = ${synchronous}`)
      ),
      Layer.catchAllCause((cause) =>
        Layer.fail(
          new AgentError.InvalidOptions({
            module: "AgentEngine",
            option: "filename",
            reason: `cannot open "${filename}" as a SQLite database: ${describeCause(cause)}`
          })
        )
      )
    )
    if (clientOnly || inMemory) {
      const engine = clusterEngine(config, RunnerStorage.layerMemory)
      return clientOnly
        ? engine.pipe(Layer.provideMerge(sqlite))
        : Layer.effectDiscard(rehomeMessages(config.shardsPerGroup)).pipe(
          Layer.provideMerge(engine),
          Layer.provideMerge(sqlite)
        )
    }
    // the lease is taken before the engine starts, stops the engine when lost, and is given up after it stopped
    const { heartbeatEvery } = yield* LeaseTiming
    const leased = Layer.scopedContext(Effect.flatMap(holdRunnerLease(filename), (lease) =>
      leasedEngine({
        ...config,
        // how soon a lost lease stops the runs: the cluster checks its (in-memory) shard locks this often
        shardLockRefreshInterval: Duration.unsafeDivide(heartbeatEvery, 4),
        ...options?.sharding
      }, lease)))
    return Layer.effectDiscard(rehomeMessages(config.shardsPerGroup)).pipe(
      Layer.provideMerge(leased),
      Layer.provideMerge(sqlite)
    )
  }))

/**
 * Refuses a `sharding.runnerAddress` that contradicts the role the layer's
 * own option gives the process (`role` names that option): a client's would
 * make it execute runs (without the SQLite lease, next to the runner), a
 * SQLite runner's `Option.none()` would make it hold the lease and execute
 * nothing.
 */
const checkRole = (
  sharding: Partial<ShardingConfig.ShardingConfig["Type"]> | undefined,
  client: boolean,
  role: string
): Effect.Effect<void, AgentError.InvalidOptions> => {
  const address = sharding?.runnerAddress
  if (address === undefined || Option.isSome(address) !== client) return Effect.void
  return Effect.fail(
    new AgentError.InvalidOptions({
      module: "AgentEngine",
      option: "sharding.runnerAddress",
      reason: client
        ? `${role} makes a client, which never executes runs; sharding.runnerAddress would make it a runner. ` +
          `Leave sharding.runnerAddress out, or start a runner without ${role}`
        : `Option.none() makes a process that executes no runs, yet ${role} holds the file's lease, so no ` +
          `runner could execute them: connect with clientOnly: true instead`
    })
  )
}

/**
 * The advisory lock (two-key form, which never collides with the cluster's one-key shard locks) that
 * serializes schema creation between processes.
 */
const schemaLockKey = "1701143653, 1"

/**
 * The durable engine for several runner processes or machines sharing one
 * PostgreSQL database (through the optional peer `@effect/sql-pg`, which
 * must be installed: without it the layer fails with `AgentError.InvalidOptions`,
 * `option: "driver"`). Each runner registers itself (no network listener:
 * runners exchange everything through the database), the shards of the runs
 * are spread over the live runners and held with advisory locks, and when a
 * runner dies the others take its runs over after `takeoverAfter`, resuming
 * each from its journal. Activities cut off by the crash run again
 * (at-least-once).
 *
 * @example
 * ```ts
 * import { AgentEngine } from "@stepwise-agent/workflow"
 * import { Layer, Option, Redacted } from "effect"
 *
 * declare const AgentRunLive: Layer.Layer<never>
 * const url = Redacted.make("postgres://agent@db:5432/agent")
 * // a runner
 * const RunnerLive = AgentRunLive.pipe(Layer.provideMerge(AgentEngine.layerPostgres({ url })))
 * // an API process that starts and approves runs but executes none
 * const ClientLive = AgentRunLive.pipe(
 *   Layer.provideMerge(AgentEngine.layerPostgres({ url, runnerAddress: Option.none() }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPostgres = (options: PostgresOptions): Layer.Layer<Durable, EngineError | SqlError> =>
  Layer.unwrapEffect(Effect.gen(function*() {
    // from JavaScript: the URL (which holds the password) is never shown, only its kind
    if (!Predicate.isObject(options)) {
      return yield* new AgentError.InvalidOptions({
        module: "AgentEngine",
        option: "options",
        reason: `expected an object with a url, got ${describeValue(options)}`
      })
    }
    const unknown = unknownEngineKey(options, postgresKeys)
    if (unknown !== undefined) return yield* unknown
    if (!Redacted.isRedacted(options.url)) {
      return yield* new AgentError.InvalidOptions({
        module: "AgentEngine",
        option: "url",
        reason: `expected a Redacted connection URL (Redacted.make(url)), got ${describeValue(options.url)}`
      })
    }
    const pollInterval = yield* decodePositiveDuration("pollInterval", options.pollInterval, Duration.millis(500))
    const PgClient = yield* pgDriver
    const takeoverAfter = yield* decodePositiveDuration("takeoverAfter", options.takeoverAfter, Duration.seconds(10))
    if (Duration.lessThan(takeoverAfter, Duration.seconds(3))) {
      return yield* new AgentError.InvalidOptions({
        module: "AgentEngine",
        option: "takeoverAfter",
        reason: "expected at least 3 seconds (heartbeats are sent every third of it)"
      })
    }
    const maxConnections = options.maxConnections ?? 10
    if (!Number.isInteger(maxConnections) || maxConnections < 3) {
      return yield* new AgentError.InvalidOptions({
        module: "AgentEngine",
        option: "maxConnections",
        reason: `expected an integer of at least 3 (one is held for shard locks), got ${describeValue(maxConnections)}`
      })
    }
    if (options.runnerAddress !== undefined && Option.isNone(options.runnerAddress)) {
      yield* checkRole(options.sharding, true, "runnerAddress: Option.none()")
    }
    const given = options.runnerAddress ?? Option.some({ host: os.hostname(), port: process.pid })
    if (!Option.isOption(given)) {
      return yield* new AgentError.InvalidOptions({
        module: "AgentEngine",
        option: "runnerAddress",
        reason: `expected an Option of a host and a port, got ${describeValue(given)}`
      })
    }
    const unknownAddressKey = Option.isSome(given) && Predicate.isObject(given.value)
      ? unknownKey("AgentEngine", given.value, ["host", "port"], "runnerAddress")
      : undefined
    if (unknownAddressKey !== undefined) return yield* unknownAddressKey
    if (
      Option.isSome(given) &&
      (typeof given.value?.host !== "string" || given.value.host.length === 0 || !Number.isInteger(given.value.port))
    ) {
      const { host, port } = Predicate.isObject(given.value) ? given.value : { host: undefined, port: undefined }
      return yield* new AgentError.InvalidOptions({
        module: "AgentEngine",
        option: "runnerAddress",
        reason: `expected a non-empty host and an integer port, got ${
          typeof host === "string" && typeof port === "number"
            ? JSON.stringify({ host: host.slice(0, 200), port })
            : `host ${shown(host)}, port ${shown(port)}`
        }`
      })
    }
    const engine = clusterEngine({
      runnerAddress: Option.map(given, (address) => RunnerAddress.RunnerAddress.make(address)),
      entityMessagePollInterval: pollInterval,
      shardLockExpiration: takeoverAfter,
      refreshAssignmentsInterval: Duration.seconds(1),
      ...options.sharding
    }, SqlRunnerStorage.layer)
    return Layer.scopedContext(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const scope = yield* Effect.scope
      // Runners starting together on a fresh database would race creating the cluster's tables
      // (PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe concurrently): build one at a time.
      return yield* Effect.scoped(Effect.gen(function*() {
        const connection = yield* sql.reserve
        yield* Effect.acquireRelease(
          connection.executeRaw(`SELECT pg_advisory_lock(${schemaLockKey})`, []),
          () => Effect.ignore(connection.executeRaw(`SELECT pg_advisory_unlock(${schemaLockKey})`, []))
        )
        return yield* Layer.buildWithScope(engine, scope)
      }))
    })).pipe(Layer.provideMerge(PgClient.layer({ url: options.url, maxConnections })))
  }))
