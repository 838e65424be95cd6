/**
 * Child processes for crash tests: run a TypeScript script (bundled by
 * `bundleChild.mjs`, once per script and test process) with extra
 * environment variables, read its stdout line by line, wait for a line
 * (with a deadline), kill it with SIGKILL and wait for it to exit (bounded).
 */
import * as Effect from "effect/Effect"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"

/** A running child process. */
export interface Child {
  readonly pid: number
  /** Every stdout line so far. */
  readonly lines: ReadonlyArray<string>
  /** Everything written to stderr so far. */
  readonly stderr: () => string
  /** Resolves with the first line (seen so far or later) that matches; rejects after `timeoutMs` or on exit. */
  readonly waitForLine: (match: (line: string) => boolean, timeoutMs?: number) => Promise<string>
  /** Resolves when the process has exited, with its code or signal. */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  /** SIGKILLs the process (if still running) and waits for it to exit, at most `timeoutMs`. */
  readonly kill: (timeoutMs?: number) => Promise<void>
}

const here = path.dirname(fileURLToPath(import.meta.url))
/** Inside the repository, so that the packages a bundle leaves to Node are found from it. */
const bundles = path.resolve(here, "../../../../node_modules/.cache/stepwise-test-children")
const bundled = new Map<string, string>()

/** Whether the process `pid` still runs. */
const isRunning = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as { readonly code?: unknown }).code === "EPERM"
  }
}

/** Removes the bundles of test processes that have ended (named `<script>-<pid>-<n>.mjs`). */
const sweepBundles = () => {
  for (const file of fs.readdirSync(bundles)) {
    const pid = Number(/-(\d+)-\d+\.mjs$/.exec(file)?.[1])
    if (Number.isInteger(pid) && !isRunning(pid)) fs.rmSync(path.join(bundles, file), { force: true })
  }
}

/** `script` bundled into one module plain `node` runs, built on its first use in this process. */
export const bundleOf = (script: string): string => {
  let outfile = bundled.get(script)
  if (outfile === undefined) {
    fs.mkdirSync(bundles, { recursive: true })
    if (bundled.size === 0) sweepBundles()
    outfile = path.join(bundles, `${path.basename(script, ".ts")}-${process.pid}-${bundled.size}.mjs`)
    execFileSync(process.execPath, [path.join(here, "bundleChild.mjs"), script, outfile], { stdio: "inherit" })
    bundled.set(script, outfile)
  }
  return outfile
}

/**
 * Spawns `node <script bundled>` with `env` added to this process's environment, in `cwd` if given,
 * through `wrapper` if given (a command line that ends by running the one it is given after it).
 */
export const spawnChild = (
  script: string,
  env: Record<string, string>,
  cwd?: string,
  wrapper: ReadonlyArray<string> = []
): Child => {
  const node = [process.execPath, bundleOf(script)]
  const [command, ...args] = [...wrapper, ...node]
  const child: ChildProcess = spawn(command!, args, {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    ...(cwd === undefined ? {} : { cwd })
  })
  if (child.pid === undefined) throw new Error(`could not spawn ${script}`)
  const lines: Array<string> = []
  const waiters = new Set<() => void>()
  let stderr = ""
  let exit: { readonly code: number | null; readonly signal: NodeJS.Signals | null } | undefined
  const exited = new Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>((resolve) => {
    child.on("exit", (code, signal) => {
      exit = { code, signal }
      waiters.forEach((wake) => wake())
      resolve(exit)
    })
  })
  readline.createInterface({ input: child.stdout! }).on("line", (line) => {
    lines.push(line)
    waiters.forEach((wake) => wake())
  })
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8")
  })
  const describe = () => `${script} (pid ${child.pid})\n--- stdout\n${lines.join("\n")}\n--- stderr\n${stderr}`

  const waitForLine = (match: (line: string) => boolean, timeoutMs = 30_000) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const found = lines.find(match)
        if (found !== undefined) {
          done()
          resolve(found)
        } else if (exit !== undefined) {
          done()
          reject(new Error(`exited (${JSON.stringify(exit)}) before the expected line: ${describe()}`))
        }
      }
      const timer = setTimeout(() => {
        done()
        reject(new Error(`no expected line within ${timeoutMs} ms: ${describe()}`))
      }, timeoutMs)
      const done = () => {
        clearTimeout(timer)
        waiters.delete(check)
      }
      waiters.add(check)
      check()
    })

  const kill = async (timeoutMs = 10_000) => {
    if (exit === undefined) child.kill("SIGKILL")
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      exited,
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`did not exit within ${timeoutMs} ms of SIGKILL: ${describe()}`)),
          timeoutMs
        )
      })
    ]).finally(() => clearTimeout(timer))
  }

  return { pid: child.pid, lines, stderr: () => stderr, waitForLine, exited, kill }
}

/** A child as a scoped resource: killed (SIGKILL) when the scope closes. */
export const scopedChild = (script: string, env: Record<string, string>, cwd?: string) =>
  Effect.acquireRelease(
    Effect.sync(() => spawnChild(script, env, cwd)),
    (child) => Effect.promise(() => child.kill())
  )
