/**
 * The durable demo across processes: started in a child process in a fresh
 * working directory, SIGKILLed mid-run, started again. Stdin is not a
 * terminal, so the demo approves `read_file` by itself.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { bundleOf } from "../../workflow/test/support/child.js"

/** The demo's durable script, bundled once for this file: each start runs it under plain `node` (no tsx). */
const script = path.join(import.meta.dirname, "durableScript.ts")

interface Demo {
  readonly lines: ReadonlyArray<string>
  /** The first line (seen so far or later) that matches; fails on exit or after `timeoutMs`. */
  readonly waitForLine: (match: (line: string) => boolean, timeoutMs?: number) => Effect.Effect<string>
  /** The exit code, once it exits (fails after `timeoutMs`). */
  readonly exited: (timeoutMs?: number) => Effect.Effect<number | null>
  readonly kill: Effect.Effect<void>
}

/** Runs the demo in `cwd` (killed with the scope). */
const startDemo = (cwd: string, ...args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync((): Demo => {
      const child: ChildProcess = spawn(process.execPath, [
        bundleOf(script),
        "--pace",
        "150",
        ...args
      ], {
        cwd,
        env: { ...process.env, OPENAI_API_KEY: undefined },
        stdio: ["ignore", "pipe", "pipe"]
      })
      const lines: Array<string> = []
      let stderr = ""
      let code: number | null | undefined
      const wake = new Set<() => void>()
      readline.createInterface({ input: child.stdout! }).on("line", (line) => {
        lines.push(line)
        wake.forEach((f) => f())
      })
      child.stderr!.on("data", (chunk: Buffer) => void (stderr += chunk.toString("utf8")))
      const exit = new Promise<number | null>((resolve) =>
        child.on("exit", (exitCode) => {
          code = exitCode
          wake.forEach((f) => f())
          resolve(exitCode)
        })
      )
      const describe = () => `--- stdout\n${lines.join("\n")}\n--- stderr\n${stderr}`
      const bounded = <A>(promise: Promise<A>, timeoutMs: number, what: string) =>
        Effect.promise(() => {
          let timer: NodeJS.Timeout | undefined
          return Promise.race([
            promise,
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error(`${what} within ${timeoutMs} ms\n${describe()}`)), timeoutMs)
            })
          ]).finally(() => clearTimeout(timer))
        })
      return {
        lines,
        // (a start under tsx took ~25 s a process at load 13 on 2 cores; the bundle takes a fraction of that)
        waitForLine: (match, timeoutMs = 120_000) =>
          bounded(
            new Promise<string>((resolve, reject) => {
              const check = () => {
                const found = lines.find(match)
                if (found !== undefined || code !== undefined) wake.delete(check)
                if (found !== undefined) resolve(found)
                else if (code !== undefined) reject(new Error(`exited (${code}) before the line\n${describe()}`))
              }
              wake.add(check)
              check()
            }),
            timeoutMs,
            "no expected line"
          ),
        exited: (timeoutMs = 120_000) => bounded(exit, timeoutMs, "did not exit"),
        kill: Effect.suspend(() => {
          if (code === undefined) child.kill("SIGKILL")
          return Effect.asVoid(bounded(exit, 10_000, "did not die"))
        })
      }
    }),
    (demo) => demo.kill
  )

const tempDirectory = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-durable-demo-"))),
  (directory) => Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true }))
)

/** The call ids of the tool calls a process ran, and of those it took from the journal. */
const toolCalls = (lines: ReadonlyArray<string>) => ({
  ran: lines.flatMap((line) => line.match(/^ {3}[←✗] \S+ \[(\S+)\] ran now/)?.slice(1) ?? []),
  replayed: lines.flatMap((line) => line.match(/^ {3}↺ \S+ \[(\S+)\] from the journal/)?.slice(1) ?? [])
})

/** The transcript printed at the end: each message's role, and the call ids in it. */
const transcript = (lines: ReadonlyArray<string>) => {
  const start = lines.findIndex((line) => line.includes("transcript (from the checkpoint"))
  const entries = start === -1 ? [] : lines.slice(start + 1).filter((line) => /^ {3}\d+\.\s/.test(line))
  return entries.map((line) => ({
    role: line.replace(/^ {3}\d+\.\s+/, "").split(":")[0]!,
    ids: Array.from(line.matchAll(/\[(call_\w+)\]/g), (match) => match[1]!),
    line
  }))
}

const notesOf = (cwd: string) => {
  const file = path.join(cwd, ".stepwise", "demo-notes.md")
  return fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter((line) => line !== "") : []
}

const completed = (line: string) => line === `── run "demo-run" Completed`

describe("npm run demo -- --durable", () => {
  it.scopedLive(
    "killed after its first tool call, a second start carries on from the journal and completes",
    () =>
      Effect.gen(function*() {
        const cwd = yield* tempDirectory
        const first = yield* startDemo(cwd)
        yield* first.waitForLine((line) => toolCalls([line]).ran.length > 0)
        yield* first.kill
        const before = toolCalls(first.lines)
        assert.isAbove(before.ran.length, 0)
        assert.isFalse(first.lines.some(completed), "the first process must not have finished the run")

        const second = yield* startDemo(cwd)
        assert.strictEqual(yield* second.exited(), 0)
        assert.isTrue(second.lines.some((line) => line.includes(`Run "demo-run" found in the journal`)))
        assert.isTrue(second.lines.some(completed))
        // what ran before the kill came back from the journal and did not run again
        const after = toolCalls(second.lines)
        for (const id of before.ran) {
          assert.include(after.replayed, id)
          assert.notInclude(after.ran, id)
        }
        // each tool call ran once over both processes, the note was written once
        const all = [...before.ran, ...after.ran]
        assert.strictEqual(all.length, new Set(all).size)
        assert.strictEqual(notesOf(cwd).length, 1)
        assert.include(notesOf(cwd)[0], "demo/call_note")

        // the transcript: question, five steps of calls and results, the answer; every call answered
        const messages = transcript(second.lines)
        assert.deepStrictEqual(messages.map((message) => message.role), [
          "user",
          ...Array.from({ length: 5 }, () => ["assistant", "tool"]).flat(),
          "assistant"
        ])
        const called = messages.filter((m) => m.role === "assistant").flatMap((m) => m.ids)
        const answered = messages.filter((m) => m.role === "tool").flatMap((m) => m.ids)
        assert.deepStrictEqual(answered, called)
        assert.strictEqual(called.length, 8)
        // every call either ran (in one of the processes) or came back from the journal
        assert.deepStrictEqual([...new Set([...all, ...after.replayed])].sort(), [...called].sort())
        assert.include(messages[messages.length - 1]!.line, "25.30")

        // a third start finds the run complete and runs nothing
        const third = yield* startDemo(cwd)
        assert.strictEqual(yield* third.exited(), 0)
        assert.isTrue(third.lines.some((line) => line.includes(`found in the journal, Completed`)))
        assert.deepStrictEqual(toolCalls(third.lines).ran, [])
        assert.strictEqual(transcript(third.lines).length, messages.length)

        // --reset starts over
        const fourth = yield* startDemo(cwd, "--reset")
        assert.strictEqual(yield* fourth.exited(), 0)
        assert.isTrue(fourth.lines.some((line) => line.startsWith(`Starting run "demo-run"`)))
        assert.strictEqual(toolCalls(fourth.lines).ran.length, 8)
        assert.strictEqual(notesOf(cwd).length, 1)
      }),
    { timeout: 360_000 }
  )

  it.scopedLive(
    "killed while the note call finishes, the call runs again and does not write twice",
    () =>
      Effect.gen(function*() {
        const cwd = yield* tempDirectory
        const first = yield* startDemo(cwd)
        yield* first.waitForLine((line) => line.includes("✎ wrote a line"))
        yield* first.kill
        assert.strictEqual(notesOf(cwd).length, 1)

        const second = yield* startDemo(cwd)
        assert.strictEqual(yield* second.exited(), 0)
        assert.isTrue(second.lines.some(completed))
        // the call was cut off after its write (it takes a moment to finish): it ran again, found its
        // line by its idempotency key, and did not write it twice
        assert.include(toolCalls(second.lines).ran, "call_note")
        assert.isTrue(second.lines.some((line) => line.includes("already hold the line of demo/call_note")))
        assert.deepStrictEqual(notesOf(cwd), ["- Weekend shopping: 25.30 in total <!-- demo/call_note -->"])
      }),
    { timeout: 360_000 }
  )
})
