/**
 * Child processes for crash tests: run a TypeScript script under tsx with
 * extra environment variables, read its stdout line by line, wait for a line
 * (with a deadline), kill it with SIGKILL and wait for it to exit (bounded).
 */
import * as Effect from "effect/Effect"
import { type ChildProcess, spawn } from "node:child_process"
import { createRequire } from "node:module"
import * as readline from "node:readline"
import { pathToFileURL } from "node:url"

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

/** tsx's loader by absolute url, so a child can run in any working directory. */
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href

/**
 * Spawns `node --import tsx <script>` with `env` added to this process's environment, in `cwd` if given,
 * through `wrapper` if given (a command line that ends by running the one it is given after it).
 */
export const spawnChild = (
  script: string,
  env: Record<string, string>,
  cwd?: string,
  wrapper: ReadonlyArray<string> = []
): Child => {
  const node = [process.execPath, "--conditions=@stepwise-agent/source", "--import", tsxLoader, script]
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
