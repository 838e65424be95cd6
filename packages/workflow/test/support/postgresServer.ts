/**
 * A throwaway PostgreSQL server: `initdb` into a temporary folder, listen on
 * 127.0.0.1 on a free port (unix socket inside the folder), stop and remove
 * everything afterwards. Free of vitest, so that the benchmark
 * (`packages/bench/src/durable.ts`) starts its server with it too.
 *
 * Needs Debian's `postgresql` package (`apt-get install -y postgresql`) or
 * `PG_BIN` naming a folder with initdb and pg_ctl. When run as root, the
 * server runs as the `postgres` user (initdb refuses root).
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

/** A running throwaway server. */
export interface PostgresServer {
  readonly port: number
  readonly directory: string
  /** Creates a fresh database and returns its connection url. */
  readonly createDatabase: (name: string) => Promise<Redacted.Redacted>
  /** The connection url of an existing database (as a plain string, e.g. for a child process). */
  readonly urlOf: (database: string) => string
  /** Stops the server (immediate shutdown) and removes its folder. Safe to call twice. */
  readonly stop: () => Promise<void>
}

/** The folder holding initdb: `$PG_BIN`, else the newest `/usr/lib/postgresql/<version>/bin`; none: `undefined`. */
export const binaries: string | undefined = [
  ...(process.env.PG_BIN ? [process.env.PG_BIN] : []),
  ...(fs.existsSync("/usr/lib/postgresql")
    ? fs.readdirSync("/usr/lib/postgresql")
      .sort((a, b) => Number(b) - Number(a))
      .map((version) => path.join("/usr/lib/postgresql", version, "bin"))
    : [])
].find((dir) => fs.existsSync(path.join(dir, "initdb")))

/** Why no server can be started, when {@link binaries} is `undefined`. */
export const missing = "PostgreSQL binaries (initdb, pg_ctl) are not in /usr/lib/postgresql/*/bin or $PG_BIN; " +
  "install them (`apt-get install -y postgresql`) or set PG_BIN to run these tests"

const binDirectory = (): string => {
  if (binaries === undefined) throw new Error(missing)
  return binaries
}

const postgresUser = (): { readonly uid: number; readonly gid: number } | undefined => {
  if (process.getuid?.() !== 0) return undefined
  const line = fs.readFileSync("/etc/passwd", "utf8").split("\n").find((entry) => entry.startsWith("postgres:"))
  if (line === undefined) {
    throw new Error("Running as root, but there is no `postgres` user to run PostgreSQL as (install `postgresql`).")
  }
  const [, , uid, gid] = line.split(":")
  return { uid: Number(uid), gid: Number(gid) }
}

const run = (file: string, args: ReadonlyArray<string>, asUser: boolean): Promise<string> =>
  new Promise((resolve, reject) => {
    const [command, commandArgs] = asUser ? ["runuser", ["-u", "postgres", "--", file, ...args]] : [file, args]
    execFile(command, commandArgs, { timeout: 60_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${path.basename(file)} ${args.join(" ")} failed: ${error.message}\n${stderr}`))
      else resolve(stdout)
    })
  })

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

/** Starts a throwaway server; call `stop` when done (e.g. in `afterAll`). */
export const startPostgres = async (): Promise<PostgresServer> => {
  const bin = binDirectory()
  const user = postgresUser()
  const asUser = user !== undefined
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-pg-"))
  if (user) fs.chownSync(directory, user.uid, user.gid)
  const data = path.join(directory, "data")
  const tool = (name: string) => path.join(bin, name)
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    await run(tool("pg_ctl"), ["-D", data, "-m", "immediate", "-w", "stop"], asUser).catch(() => undefined)
    fs.rmSync(directory, { recursive: true, force: true })
  }
  try {
    await run(tool("initdb"), ["-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"], asUser)
    let port = 0
    for (let attempt = 0; attempt < 5 && port === 0; attempt++) {
      const candidate = await freePort()
      const started = await run(tool("pg_ctl"), [
        "-D",
        data,
        "-w",
        "-t",
        "60",
        "-l",
        path.join(directory, "postgres.log"),
        "-o",
        `-c listen_addresses=127.0.0.1 -p ${candidate} -k ${directory} -c fsync=off -c max_connections=200`,
        "start"
      ], asUser).then(() => true, () => false)
      if (started) port = candidate
    }
    if (port === 0) {
      const log = fs.existsSync(path.join(directory, "postgres.log"))
        ? fs.readFileSync(path.join(directory, "postgres.log"), "utf8")
        : ""
      throw new Error(`PostgreSQL did not start:\n${log}`)
    }
    const urlOf = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`
    return {
      port,
      directory,
      urlOf,
      createDatabase: async (name) => {
        await run(tool("createdb"), ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", name], false)
        return Redacted.make(urlOf(name))
      },
      stop
    }
  } catch (error) {
    await stop()
    throw error
  }
}

/** The server as a scoped resource: started on acquire, stopped and removed on release. */
export const PostgresServer = Effect.acquireRelease(
  Effect.promise(startPostgres),
  (server) => Effect.promise(server.stop)
)
