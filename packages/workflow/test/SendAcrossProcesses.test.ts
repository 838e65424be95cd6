import { assert, describe, it } from "@effect/vitest"
import { Effect, type Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Child, scopedChild } from "./support/child.js"
import { tempDirectory } from "./support/databases.js"

const script = path.join(import.meta.dirname, "processes", "steeredAgent.ts")

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

interface Ended {
  readonly state: string
  readonly users: ReadonlyArray<string>
  readonly text: string
}

/** The `done` line of a run, parsed. */
const ended = (child: Child, runId: string) =>
  promise(() => child.waitForLine((line) => line.startsWith(`done ${runId} `), 60_000)).pipe(
    Effect.map((line) => JSON.parse(line.slice(`done ${runId} `.length)) as Ended)
  )

/** Sends from a process of its own (client only) and gives its receipt. */
const send = (env: Record<string, string>, message: string, mode: "steer" | "queue") =>
  Effect.gen(function*() {
    const sender = yield* scopedChild(script, { ...env, ROLE: "sender", MESSAGE: message, MODE: mode })
    const line = yield* promise(() => sender.waitForLine((line) => line.startsWith("sent "), 60_000))
    return JSON.parse(line.slice(5)) as { readonly delivery: string; readonly runId: string; readonly sequence: number }
  })

/** A fresh SQLite file and a runner (with `extra` in its environment) whose run-1 waits in its search. */
const searchingRunner = (prefix: string, extra: Record<string, string>) =>
  Effect.gen(function*() {
    const directory = yield* tempDirectory(prefix)
    const env = { DB: path.join(directory, "runs.db"), GO: path.join(directory, "go") }
    const runner = yield* scopedChild(script, { ...env, ROLE: "runner", START: "run-1", ...extra })
    yield* promise(() => runner.waitForLine((line) => line === "searching", 60_000))
    return { env, runner }
  })

/** What run-1 ends with when it took "only direct ones" in before its second model call. */
const steered: Ended = {
  state: "Completed",
  users: ["find flights", "only direct ones"],
  text: "find flights | only direct ones"
}

describe("AgentWorkflow.send across processes (SQLite)", () => {
  it.scopedLive(
    "a message sent from another process joins the running run before its next model call, once",
    () =>
      Effect.gen(function*() {
        const { env, runner: runner } = yield* searchingRunner("stepwise-send-", {})
        const receipt = yield* send(env, "only direct ones", "steer")
        assert.deepStrictEqual(
          receipt,
          {
            threadId: "thread-1",
            mode: "steer",
            sequence: 1,
            delivery: "stored",
            runId: "run-1",
            duplicate: false
          } as any
        )
        fs.writeFileSync(env.GO, "")
        const run = yield* ended(runner, "run-1")
        assert.deepStrictEqual(run, steered)
      }),
    { timeout: 120_000 }
  )

  it.scopedLive(
    "a runner SIGKILLed after its look claimed the message, before the look was journaled: the next runner takes it in once",
    () =>
      Effect.gen(function*() {
        const { env, runner: first } = yield* searchingRunner("stepwise-send-kill-", { KILL_AFTER_CLAIM: "1" })
        yield* send(env, "only direct ones", "steer")
        fs.writeFileSync(env.GO, "")
        yield* promise(() => first.waitForLine((line) => line === "claimed 1", 60_000))
        yield* promise(() => first.kill())

        const second = yield* scopedChild(script, { ...env, ROLE: "runner" })
        const run = yield* ended(second, "run-1")
        // the look ran again and took in what the killed one had claimed: neither lost nor twice
        assert.deepStrictEqual(run, steered)
      }),
    { timeout: 120_000 }
  )

  it.scopedLive(
    "a queued message sent from another process starts a follow-up run once the running run has ended",
    () =>
      Effect.gen(function*() {
        const { env, runner: runner } = yield* searchingRunner("stepwise-send-queue-", { EXPECT_RUNS: "2" })
        const receipt = yield* send(env, "and a hotel", "queue")
        assert.strictEqual(receipt.delivery, "stored")
        fs.writeFileSync(env.GO, "")
        const first = yield* ended(runner, "run-1")
        // its model never saw the queued message (its status shows the thread as it is now, later runs included)
        assert.deepStrictEqual([first.state, first.text], ["Completed", "find flights"])
        const next = yield* ended(runner, `sent-${receipt.sequence}`)
        assert.deepStrictEqual(next, {
          state: "Completed",
          users: ["find flights", "and a hotel"],
          text: "find flights | and a hotel"
        })
      }),
    { timeout: 120_000 }
  )
})

describe("run ownership across processes (SQLite)", () => {
  /** A steer sent after `connect` has connected to the file (and `wait` has passed) joins run-1, which takes it in. */
  const ownershipKept = (connect: (env: Record<string, string>) => Effect.Effect<void, never, Scope.Scope>) =>
    Effect.gen(function*() {
      // the runner renews its lease every 500 ms (2 s by default): three renewals in the wait below
      const { env, runner } = yield* searchingRunner("stepwise-owner-", { HEARTBEAT_MS: "500" })
      yield* connect(env)
      // longer than the pollInterval, lease renewals and storage reads of everyone connected
      yield* Effect.sleep("1500 millis")
      const receipt = yield* send(env, "only direct ones", "steer")
      assert.deepStrictEqual([receipt.delivery, receipt.runId], ["stored", "run-1"])
      fs.writeFileSync(env.GO, "")
      assert.deepStrictEqual(yield* ended(runner, "run-1"), steered)
    })

  it.scopedLive(
    "a client-only process connecting while a run works changes nothing: a steer sent seconds later joins the run",
    () =>
      ownershipKept((env) =>
        Effect.gen(function*() {
          const client = yield* scopedChild(script, { ...env, ROLE: "client" })
          yield* promise(() => client.waitForLine((line) => line === "up", 60_000))
        })
      ),
    { timeout: 240_000 }
  )

  it.scopedLive(
    "a second runner process started while a run works is refused and changes nothing: a steer sent then joins the run",
    () =>
      ownershipKept((env) =>
        Effect.gen(function*() {
          // what a runner lock kept beside the database would have been found by
          fs.rmSync(`${env.DB}.lock`, { force: true })
          const second = yield* scopedChild(script, { ...env, ROLE: "runner" })
          const exit = yield* promise(() => second.exited).pipe(
            Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => "the second runner did not stop" }),
            Effect.orDie
          )
          assert.notStrictEqual(exit.code, 0)
          assert.include([...second.lines, second.stderr()].join("\n"), "EngineLocked")
        })
      ),
    { timeout: 240_000 }
  )

  it.scopedLive(
    "a steer sent from one client while another client's start is between registering and executing its run joins that run",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-owner-start-")
        const env = { DB: path.join(directory, "runs.db"), GO: path.join(directory, "go") }
        const registerGo = path.join(directory, "register-go")
        const runner = yield* scopedChild(script, { ...env, ROLE: "runner" })
        const starter = yield* scopedChild(script, { ...env, ROLE: "starter", START: "run-1", REGISTER_GO: registerGo })
        yield* promise(() => starter.waitForLine((line) => line === "registered", 60_000))
        const receipt = yield* send(env, "only direct ones", "steer")
        assert.deepStrictEqual([receipt.delivery, receipt.runId], ["stored", "run-1"])
        fs.writeFileSync(registerGo, "")
        yield* promise(() => starter.waitForLine((line) => line === "started", 60_000))
        fs.writeFileSync(env.GO, "")
        assert.deepStrictEqual(yield* ended(runner, "run-1"), steered)
      }),
    { timeout: 240_000 }
  )
})
