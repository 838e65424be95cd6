/**
 * Runs a script of this folder in a child `node` process (TypeScript through
 * tsx, the workspace packages from source), reading its stdout by lines;
 * killed with the scope.
 */
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { createRequire } from "node:module"
import * as readline from "node:readline"
import { fileURLToPath, pathToFileURL } from "node:url"

const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href

/** Starts `processes/<script>` with `env` added to this process's environment. */
export const start = (script: string, env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child: ChildProcess = spawn(
        process.execPath,
        ["--conditions=@stepwise-agent/source", "--import", tsxLoader, fileURLToPath(new URL(script, import.meta.url))],
        { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] }
      )
      const lines: Array<string> = []
      let stderr = ""
      const wake = new Set<() => void>()
      let exited = false
      readline.createInterface({ input: child.stdout! }).on("line", (line) => {
        lines.push(line)
        wake.forEach((f) => f())
      })
      child.stderr!.on("data", (chunk: Buffer) => void (stderr += chunk.toString("utf8")))
      const exit = new Promise<void>((resolve) =>
        child.on("exit", () => {
          exited = true
          wake.forEach((f) => f())
          resolve()
        })
      )
      /** The first line `match` accepts, once printed (fails if the child exits first, or after 30 s). */
      const waitFor = (match: (line: string) => boolean) =>
        Effect.async<string, Error>((resume) => {
          const check = () => {
            const found = lines.find(match)
            if (found !== undefined) resume(Effect.succeed(found))
            else if (exited) resume(Effect.fail(new Error(`the child exited: ${stderr}`)))
            else return false
            wake.delete(check)
            return true
          }
          if (!check()) wake.add(check)
          return Effect.sync(() => wake.delete(check))
        }).pipe(Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => new Error(`no line: ${stderr}`) }))
      const kill = Effect.promise(() => {
        if (!exited) child.kill("SIGKILL")
        return exit
      })
      return { lines, waitFor, kill }
    }),
    (child) => child.kill
  )
