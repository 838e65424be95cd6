import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Child, spawnChild } from "./support/child.js"
import { tempDirectory } from "./support/databases.js"

const script = path.join(import.meta.dirname, "processes", "durableAgent.ts")

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

/** The lines of the side-effect file, by kind. */
const sideEffects = (side: string) => {
  const lines = fs.existsSync(side) ? fs.readFileSync(side, "utf8").split("\n").filter((line) => line !== "") : []
  return {
    effects: lines.filter((line) => line.startsWith("effect ")).map((line) => line.slice(7)),
    attempts: lines.filter((line) => line.startsWith("attempt ")).map((line) => line.slice(8))
  }
}

const spawn = (env: Record<string, string>) =>
  Effect.acquireRelease(Effect.sync(() => spawnChild(script, env)), (child) => promise(() => child.kill()))

const done = (child: Child) =>
  promise(() => child.waitForLine((line) => line.startsWith("done "), 60_000)).pipe(
    Effect.map((line) =>
      JSON.parse(line.slice(5)) as { state: string; messages: number; results: ReadonlyArray<unknown> }
    )
  )

describe("durable runs across processes (SQLite)", () => {
  it.scopedLive(
    "a runner killed right after its first tool call: a fresh process finishes the run, each effect once",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-crash-")
        const env = { DB: path.join(directory, "runs.db"), SIDE: path.join(directory, "side.log") }
        const first = yield* spawn({ ...env, ROLE: "runner", START: "run-crash" })
        yield* promise(() => first.waitForLine((line) => line === "tool thread-1/call_1"))
        yield* promise(() => first.kill())
        assert.deepStrictEqual(sideEffects(env.SIDE).effects, ["thread-1/call_1"])

        const second = yield* spawn({ ...env, ROLE: "runner", RUN_ID: "run-crash" })
        const result = yield* done(second)
        assert.strictEqual(result.state, "Completed")
        // user, call 1, result 1, call 2, result 2, answer
        assert.strictEqual(result.messages, 6)
        const { attempts, effects } = sideEffects(env.SIDE)
        assert.deepStrictEqual(effects, ["thread-1/call_1", "thread-1/call_2"])
        // at-least-once: the killed call may have run again, but wrote nothing twice
        assert.isAtMost(attempts.filter((key) => key === "thread-1/call_1").length, 2)
        assert.deepStrictEqual(attempts.filter((key) => key === "thread-1/call_2"), ["thread-1/call_2"])
      }),
    { timeout: 120_000 }
  )

  const approvalAcrossProcesses = (decide: (callId: string) => unknown) =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-approval-")
      const env = { DB: path.join(directory, "runs.db"), SIDE: path.join(directory, "side.log"), APPROVAL: "1" }
      // process 1 starts the run and leaves once it waits
      const starter = yield* spawn({ ...env, ROLE: "runner", START: "run-approval", EXIT_WHEN_WAITING: "1" })
      yield* promise(() => starter.waitForLine((line) => line.startsWith("status run-approval Waiting"), 60_000))
      yield* promise(() => starter.exited)
      // process 2 is the runner from then on; process 3, client only, decides each wait by run id
      const runner = yield* spawn({ ...env, ROLE: "runner", RUN_ID: "run-approval" })
      for (const callId of ["call_1", "call_2"]) {
        yield* promise(() =>
          runner.waitForLine((line) => line.startsWith(`status run-approval Waiting approval/${callId}@`), 60_000)
        )
        const client = yield* spawn({
          ...env,
          ROLE: "client",
          RUN_ID: "run-approval",
          DECIDE: JSON.stringify([decide(callId)])
        })
        yield* promise(() => client.waitForLine((line) => line === "decided", 60_000))
      }
      const result = yield* done(runner)
      assert.strictEqual(result.state, "Completed")
      return { result, effects: sideEffects(env.SIDE).effects }
    })

  it.scopedLive(
    "a run waits for approval; another process approves by run id; the run finishes",
    () =>
      Effect.gen(function*() {
        const { effects, result } = yield* approvalAcrossProcesses((callId) => ({ type: "approve", callId }))
        assert.deepStrictEqual(effects, ["thread-1/call_1", "thread-1/call_2"])
        assert.deepStrictEqual(result.results, ["deleted /tmp/a", "deleted /tmp/b"])
      }),
    { timeout: 180_000 }
  )

  it.scopedLive(
    "another process edits one call and rejects the other; the transcript says so",
    () =>
      Effect.gen(function*() {
        const { effects, result } = yield* approvalAcrossProcesses((callId) =>
          callId === "call_1"
            ? { type: "edit", callId, args: { path: "/tmp/safe" } }
            : { type: "reject", callId, message: "keep /tmp/b" }
        )
        assert.deepStrictEqual(effects, ["thread-1/call_1"])
        assert.strictEqual(result.results[0], "deleted /tmp/safe")
        assert.include(JSON.stringify(result.results[1]), "keep /tmp/b")
      }),
    { timeout: 180_000 }
  )
})

describe("a subagent in a durable run across processes (SQLite)", () => {
  /** The model calls the SIDE file logged, as `<agent> <tool results seen>`. */
  const modelCalls = (side: string) =>
    fs.readFileSync(side, "utf8").split("\n").filter((line) => line.startsWith("model ")).map((line) => line.slice(6))

  it.scopedLive(
    "a runner killed during a child's tool: a fresh process finishes the child and the parent, no step runs twice",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-subagent-crash-")
        const env = { DB: path.join(directory, "runs.db"), SIDE: path.join(directory, "side.log"), SUBAGENT: "1" }
        const first = yield* spawn({ ...env, ROLE: "runner", START: "run-sub", HANG_FIRST: "1" })
        const key = "thread-1/task/task_1/1/call_1"
        yield* promise(() => first.waitForLine((line) => line === `tool ${key}`, 60_000))
        yield* promise(() => first.kill())
        assert.deepStrictEqual(modelCalls(env.SIDE), ["lead 0", "cleaner 0"])

        const second = yield* spawn({ ...env, ROLE: "runner", RUN_ID: "run-sub" })
        const result = yield* done(second)
        assert.strictEqual(result.state, "Completed")
        assert.deepStrictEqual(result.results, ["cleaned"])
        const { attempts, effects } = sideEffects(env.SIDE)
        // the killed call ran again (its activity had no result) and wrote nothing twice
        assert.deepStrictEqual(effects, [key])
        assert.deepStrictEqual(attempts, [key, key])
        // the model calls before the crash were replayed from the journal, not made again
        assert.deepStrictEqual(modelCalls(env.SIDE), ["lead 0", "cleaner 0", "cleaner 1", "lead 1"])
      }),
    { timeout: 120_000 }
  )

  it.scopedLive(
    "a child's approval waits in the parent's run; another process approves it through AgentWorkflow.resume",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-subagent-approval-")
        const env = {
          DB: path.join(directory, "runs.db"),
          SIDE: path.join(directory, "side.log"),
          SUBAGENT: "1",
          APPROVAL: "1"
        }
        const starter = yield* spawn({ ...env, ROLE: "runner", START: "run-sub", EXIT_WHEN_WAITING: "1" })
        yield* promise(() => starter.waitForLine((line) => line === "status run-sub Waiting task/task_1", 60_000))
        yield* promise(() => starter.exited)
        assert.deepStrictEqual(sideEffects(env.SIDE).effects, [])

        const runner = yield* spawn({ ...env, ROLE: "runner", RUN_ID: "run-sub" })
        // a decision the child refuses (its HumanInTheLoop has no call_9) is refused before anything runs
        const stray = yield* spawn({
          ...env,
          ROLE: "client",
          RUN_ID: "run-sub",
          DECIDE: JSON.stringify([{ type: "approve", callId: "call_9" }])
        })
        const refused = yield* promise(() => stray.waitForLine((line) => line.startsWith("error "), 60_000))
        assert.strictEqual(refused, "error InvalidDecision")
        const client = yield* spawn({
          ...env,
          ROLE: "client",
          RUN_ID: "run-sub",
          DECIDE: JSON.stringify([{ type: "approve", callId: "call_1" }])
        })
        yield* promise(() => client.waitForLine((line) => line === "decided", 60_000))
        const result = yield* done(runner)
        assert.strictEqual(result.state, "Completed")
        assert.deepStrictEqual(result.results, ["cleaned"])
        assert.deepStrictEqual(sideEffects(env.SIDE).effects, ["thread-1/task/task_1/1/call_1"])
        // each model call once: the starter's were replayed by the runner
        assert.deepStrictEqual(modelCalls(env.SIDE), ["lead 0", "cleaner 0", "cleaner 1", "lead 1"])
      }),
    { timeout: 180_000 }
  )
})
