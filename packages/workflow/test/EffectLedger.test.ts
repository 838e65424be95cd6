/**
 * The effect ledger across real crashes: a runner process dies (SIGKILL) at
 * each point of a call of a tool that writes, and a fresh runner on the same
 * SQLite file carries the run on. A call of a tool that is not idempotent is
 * never run again unasked: the run waits on the Uncertain question, and each
 * decision does what it says.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Child, spawnChild } from "./support/child.js"
import { tempDirectory } from "./support/databases.js"

const script = path.join(import.meta.dirname, "processes", "ledgerAgent.ts")

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

const spawn = (env: Record<string, string>) =>
  Effect.acquireRelease(Effect.sync(() => spawnChild(script, env)), (child) => promise(() => child.kill()))

/** What the tool and its undo did, line by line (`attempt <key>`, `undo <key>`). */
const sideLines = (side: string) =>
  fs.existsSync(side) ? fs.readFileSync(side, "utf8").split("\n").filter((line) => line !== "") : []

interface Done {
  readonly state: string
  readonly results: ReadonlyArray<unknown>
  readonly text?: string
}

const lineAfter = (child: Child, prefix: string) =>
  promise(() => child.waitForLine((line) => line.startsWith(prefix), 90_000)).pipe(
    Effect.map((line) => line.slice(prefix.length))
  )

const firstOf = (child: Child, prefixes: ReadonlyArray<string>) =>
  promise(() => child.waitForLine((line) => prefixes.some((prefix) => line.startsWith(prefix)), 90_000))

/** A run started in a process that dies at `crashAt`, in a directory of its own (`extra`: more of its environment). */
const crashed = (crashAt: string, effect = "uncertain", extra: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const directory = yield* tempDirectory("stepwise-ledger-")
    const env = {
      DB: path.join(directory, "runs.db"),
      SIDE: path.join(directory, "side.log"),
      EFFECT: effect,
      ...extra
    }
    const first = yield* spawn({ ...env, START: "run-1", CRASH_AT: crashAt })
    const exit = yield* promise(() => first.exited)
    assert.strictEqual(exit.signal, "SIGKILL")
    assert.include(first.lines, `crash ${crashAt}`)
    return env
  })

const timeout = { timeout: 240_000 }

describe("the effect ledger across crashes (SQLite, SIGKILL)", () => {
  it.scopedLive(
    "a runner killed while a call of an uncertain tool runs: the next runner waits on Uncertain, the tool not run again",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-ledger-")
        const env = { DB: path.join(directory, "runs.db"), SIDE: path.join(directory, "side.log") }
        const first = yield* spawn({ ...env, START: "run-1", HANG: "1" })
        yield* promise(() => first.waitForLine((line) => line === "tool running", 90_000))
        yield* promise(() => first.kill())
        assert.deepStrictEqual(sideLines(env.SIDE), ["attempt thread-1/call_1"])

        const second = yield* spawn({ ...env, RUN_ID: "run-1" })
        const waiting = JSON.parse(yield* lineAfter(second, "waiting ")) as {
          key: string
          entry: { step: string; effect: string; idempotencyKey: string }
          allowedDecisions: ReadonlyArray<string>
        }
        assert.strictEqual(waiting.key, "uncertain/tool/call_1")
        assert.deepStrictEqual(
          { step: waiting.entry.step, effect: waiting.entry.effect, key: waiting.entry.idempotencyKey },
          { step: "tool/call_1", effect: "Uncertain", key: "thread-1/call_1" }
        )
        assert.deepStrictEqual(waiting.allowedDecisions, ["retry", "markDone"])
        yield* promise(() => second.exited)
        // the cut-off call did not run a second time
        assert.deepStrictEqual(sideLines(env.SIDE), ["attempt thread-1/call_1"])
      }),
    timeout
  )

  it.scopedLive(
    "a crash after the call was marked started, then markDone: the model gets the given result, the tool ran once",
    () =>
      Effect.gen(function*() {
        const env = yield* crashed("afterStarted")
        const second = yield* spawn({ ...env, RUN_ID: "run-1", DECIDE: "markDone" })
        const done = JSON.parse(yield* lineAfter(second, "done ")) as Done
        assert.deepStrictEqual(done.results, ["sent by hand"])
        assert.strictEqual(done.text, `answer after "sent by hand"`)
        assert.deepStrictEqual(sideLines(env.SIDE), ["attempt thread-1/call_1"])
      }),
    timeout
  )

  it.scopedLive(
    "a crash after the call was marked started, then retry: the call runs again once, with the same key",
    () =>
      Effect.gen(function*() {
        const env = yield* crashed("afterStarted")
        const second = yield* spawn({ ...env, RUN_ID: "run-1", DECIDE: "retry" })
        const done = JSON.parse(yield* lineAfter(second, "done ")) as Done
        assert.strictEqual(done.state, "Completed")
        assert.deepStrictEqual(done.results, ["sent to ada@example.com"])
        assert.deepStrictEqual(sideLines(env.SIDE), ["attempt thread-1/call_1", "attempt thread-1/call_1"])
      }),
    timeout
  )

  it.scopedLive(
    "a crash after a compensatable tool's call was marked started, then compensate: its undo runs, not the tool",
    () =>
      Effect.gen(function*() {
        const env = yield* crashed("afterStarted", "compensatable")
        const second = yield* spawn({ ...env, RUN_ID: "run-1", DECIDE: "compensate" })
        const done = JSON.parse(yield* lineAfter(second, "done ")) as Done
        assert.strictEqual(done.state, "Completed")
        assert.include(JSON.stringify(done.results), "undone")
        assert.deepStrictEqual(sideLines(env.SIDE), ["attempt thread-1/call_1", "undo thread-1/call_1"])
      }),
    timeout
  )

  it.scopedLive(
    "compensating a call of a tool that has no undo is refused; the run keeps waiting, nothing runs",
    () =>
      Effect.gen(function*() {
        const env = yield* crashed("afterStarted")
        const second = yield* spawn({ ...env, RUN_ID: "run-1", DECIDE: "compensate" })
        assert.strictEqual(
          yield* firstOf(second, ["error ", "done "]),
          "error InvalidDecision InvalidUncertainDecision"
        )
        const third = yield* spawn({ ...env, RUN_ID: "run-1", DECIDE: "wrongStep" })
        assert.strictEqual(yield* firstOf(third, ["error ", "done "]), "error InvalidDecision InvalidUncertainDecision")
        assert.deepStrictEqual(sideLines(env.SIDE), ["attempt thread-1/call_1"])
      }),
    timeout
  )

  it.scopedLive(
    "a crash right after the call was marked started, before its tool began: the next runner asks, the tool never ran unasked",
    () =>
      Effect.gen(function*() {
        const env = yield* crashed("afterMarked")
        assert.deepStrictEqual(sideLines(env.SIDE), [])
        const second = yield* spawn({ ...env, RUN_ID: "run-1" })
        const waiting = JSON.parse(yield* lineAfter(second, "waiting ")) as { key: string }
        assert.strictEqual(waiting.key, "uncertain/tool/call_1")
        yield* promise(() => second.exited)
        assert.deepStrictEqual(sideLines(env.SIDE), [])
        // asked, the run retries the call: it runs once
        const third = yield* spawn({ ...env, RUN_ID: "run-1", DECIDE: "retry" })
        const done = JSON.parse(yield* lineAfter(third, "done ")) as Done
        assert.strictEqual(done.state, "Completed")
        assert.deepStrictEqual(sideLines(env.SIDE), ["attempt thread-1/call_1"])
      }),
    timeout
  )

  it.scopedLive(
    "a crash before the call was marked started: it had not begun, and runs once without a question",
    () =>
      Effect.gen(function*() {
        const env = yield* crashed("beforeStarted")
        assert.deepStrictEqual(sideLines(env.SIDE), [])
        const second = yield* spawn({ ...env, RUN_ID: "run-1" })
        const done = JSON.parse(
          yield* firstOf(second, ["waiting ", "done "]).pipe(
            Effect.map((line) => line.startsWith("done ") ? line.slice(5) : "null")
          )
        ) as Done | null
        assert.strictEqual(done?.state, "Completed")
        assert.deepStrictEqual(sideLines(env.SIDE), ["attempt thread-1/call_1"])
      }),
    timeout
  )

  it.scopedLive(
    "a crash after the recorded result: the result replays, the tool is not run again",
    () =>
      Effect.gen(function*() {
        const env = yield* crashed("afterResult")
        const second = yield* spawn({ ...env, RUN_ID: "run-1" })
        const done = JSON.parse(
          yield* firstOf(second, ["waiting ", "done "]).pipe(
            Effect.map((line) => line.startsWith("done ") ? line.slice(5) : "null")
          )
        ) as Done | null
        assert.deepStrictEqual(done?.results, ["sent to ada@example.com"])
        assert.deepStrictEqual(sideLines(env.SIDE), ["attempt thread-1/call_1"])
      }),
    timeout
  )

  it.scopedLive(
    "a run journaled with the ledger's first form (an activity <step>/started per call) replays: the call with a recorded result is not run again, the next one is marked and runs once",
    () =>
      Effect.gen(function*() {
        // golden/ledgerStarted-v1.sqlite: ledgerAgent at cb4a83b (CALLS=2, CRASH_AT=afterResult) killed after
        // call_1's result was journaled, its WAL folded in; the file has no ledger table yet
        const directory = yield* tempDirectory("stepwise-ledger-")
        const env = { DB: path.join(directory, "runs.db"), SIDE: path.join(directory, "side.log"), CALLS: "2" }
        fs.copyFileSync(path.join(import.meta.dirname, "golden", "ledgerStarted-v1.sqlite"), env.DB)
        const runner = yield* spawn({ ...env, RUN_ID: "run-1" })
        const done = JSON.parse(yield* lineAfter(runner, "done ")) as Done
        assert.strictEqual(done.state, "Completed")
        assert.deepStrictEqual(done.results, ["sent to ada@example.com", "sent to ada@example.com"])
        assert.deepStrictEqual(sideLines(env.SIDE), ["attempt thread-1/call_2"])
      }),
    timeout
  )

  it.scopedLive(
    "a subagent's call cut off by a crash: the durable parent waits on the child's typed Uncertain question, the tool not run again",
    () =>
      Effect.gen(function*() {
        const env = yield* crashed("afterStarted", "uncertain", { SUBAGENT: "1" })
        const attempts = sideLines(env.SIDE)
        assert.strictEqual(attempts.length, 1)
        const second = yield* spawn({ ...env, RUN_ID: "run-1" })
        const waiting = JSON.parse(yield* lineAfter(second, "waiting ")) as {
          key: string
          path: ReadonlyArray<{ callId: string; agent: string }>
          entry: { step: string; effect: string; toolName: string }
          allowedDecisions: ReadonlyArray<string>
        }
        // the question is the child's, under the task call that leads to it
        assert.deepStrictEqual(waiting.path.map((step) => [step.callId, step.agent]), [["task_1", "mailer"]])
        assert.strictEqual(waiting.key, "uncertain/tool/call_1")
        assert.deepStrictEqual(
          { step: waiting.entry.step, effect: waiting.entry.effect, tool: waiting.entry.toolName },
          { step: "tool/call_1", effect: "Uncertain", tool: "send_email" }
        )
        assert.deepStrictEqual(waiting.allowedDecisions, ["retry", "markDone"])
        yield* promise(() => second.exited)
        assert.deepStrictEqual(sideLines(env.SIDE), attempts)
        // answered through the parent, routed to the child: the child's model reads the given result
        const third = yield* spawn({ ...env, RUN_ID: "run-1", DECIDE: "markDone" })
        const done = JSON.parse(yield* lineAfter(third, "done ")) as Done
        assert.strictEqual(done.state, "Completed")
        assert.strictEqual(done.text, "the mailer is done")
        assert.deepStrictEqual(sideLines(env.SIDE), attempts)
      }),
    timeout
  )

  it.scopedLive(
    "an idempotent tool cut off after it ran runs again by itself, under the same key",
    () =>
      Effect.gen(function*() {
        const env = yield* crashed("afterStarted", "idempotent")
        const second = yield* spawn({ ...env, RUN_ID: "run-1" })
        const done = JSON.parse(
          yield* firstOf(second, ["waiting ", "done "]).pipe(
            Effect.map((line) => line.startsWith("done ") ? line.slice(5) : "null")
          )
        ) as Done | null
        assert.strictEqual(done?.state, "Completed")
        const lines = sideLines(env.SIDE)
        assert.strictEqual(lines.length, 2)
        assert.strictEqual(lines[0], lines[1])
        assert.match(lines[0]!, /^attempt thread-1\/send_email\/[0-9a-f]{28}$/)
      }),
    timeout
  )
})
