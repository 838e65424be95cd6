/**
 * Who runs a thread's messages is changed only by its runner: a process
 * that connects to the same SQLite file (a client built with
 * `clientOnly: true`, or a second runner, which is refused) while this
 * process's runner has a run working (model calls, tool calls and journal
 * writes going on the whole time) leaves the thread's running run as it is,
 * so a steer sent seconds later joins that run instead of starting a new one
 * (`sent-1`). (A run that has ended, by its answer or at `maxSteps`, hands
 * the thread on: a steer sent after that starts a run of its own, as it
 * should; the run here works until the steer arrives.)
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Duration, Effect, Layer, Option, Schema, type Scope } from "effect"
import * as path from "node:path"
import { LeaseTiming } from "../src/internal/leaseTiming.js"
import { scopedChild } from "./support/child.js"
import { tempDirectory } from "./support/databases.js"

/** The script the other processes run: its `client`, `runner` and `sender` roles. */
const script = path.join(import.meta.dirname, "processes", "steeredAgent.ts")

// the workflow of that script: same name and version, so a send from its sender reaches this runner's runs
const Runs = AgentWorkflow.make({ name: "steered-across-processes", version: 1, steering: true })

const Tick = Tool.make("tick", { parameters: { n: Schema.Number }, success: Schema.String })
const Tools = Toolkit.make(Tick)
const steer = "only direct ones"

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : (content as ReadonlyArray<{ type: string; text?: string }>).flatMap((part) =>
      part.type === "text" ? [part.text!] : []
    ).join("")

/** Ticks (a model call, a tool call, their journal entries and a checkpoint each) until the steer arrives. */
const answer: ScriptedModel.Turn = (request) => {
  const users = request.prompt.content.filter((message) => message.role === "user").map((m) => textOf(m.content))
  return users.includes(steer)
    ? ScriptedModel.text(users.join(" | "))
    : ScriptedModel.toolCalls([{
      name: "tick",
      params: { n: request.prompt.content.length },
      id: `call_${users.length}`
    }])
}

/** This process's runner, on `filename`, whose run `run-1` works until a steer arrives. */
const runnerLayer = (filename: string) =>
  Runs.layer.pipe(
    // it works until the steer arrives, however long the other processes take to start on a busy machine
    Layer.provideMerge(Agent.layer({ toolkit: Tools, maxSteps: 100_000 })),
    Layer.provide(Layer.merge(
      ScriptedModel.layer(Array.from({ length: 100_000 }, () => answer)),
      Tools.toLayer({ tick: ({ n }) => Effect.as(Effect.sleep("100 millis"), `tick ${n}`) })
    )),
    Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
    Layer.provideMerge(AgentEngine.layerSqlite({ filename, pollInterval: "100 millis" })),
    // its lease renewed every 500 ms (2 s by default), lasting its default 10 s: three renewals in a wait of 1.5 s
    Layer.provide(Layer.succeed(LeaseTiming, {
      leaseFor: LeaseTiming.defaultValue().leaseFor,
      heartbeatEvery: Duration.millis(500)
    }))
  )

const waitFor = (
  child: { readonly waitForLine: (f: (line: string) => boolean, ms?: number) => Promise<string> },
  f: (line: string) => boolean
) => Effect.promise(() => child.waitForLine(f, 60_000))

/** While run-1 works in this process, `connect` connects other processes; a steer sent 1.5 s later joins run-1. */
const ownershipKept = (
  connect: (env: Record<string, string>) => Effect.Effect<void, never, Scope.Scope>
) =>
  Effect.gen(function*() {
    const directory = yield* tempDirectory("stepwise-owner-here-")
    const env = { DB: path.join(directory, "runs.db"), GO: path.join(directory, "go") }
    const context = yield* Layer.build(runnerLayer(env.DB))
    const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context) as Effect.Effect<A, E>
    yield* run(Runs.start({ threadId: "thread-1", input: "find flights", runId: "run-1" }))
    const running = yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.running("thread-1")))
    assert.deepStrictEqual(running, Option.some("run-1"))

    yield* connect(env)
    // longer than the pollInterval, lease renewals and storage reads of everyone connected
    yield* Effect.sleep("1500 millis")
    assert.deepStrictEqual(
      yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.running("thread-1"))),
      Option.some("run-1"),
      "the running run is still the thread's owner"
    )
    const sender = yield* scopedChild(script, { ...env, ROLE: "sender", MESSAGE: steer, MODE: "steer" })
    const line = yield* waitFor(sender, (line) => line.startsWith("sent "))
    const receipt = JSON.parse(line.slice(5)) as { readonly delivery: string; readonly runId: string }
    assert.deepStrictEqual([receipt.delivery, receipt.runId], ["stored", "run-1"])

    const status = yield* run(Runs.await("run-1"))
    assert.strictEqual(status.state, "Completed")
    assert.strictEqual(Option.getOrThrow(status.outcome).text, `find flights | ${steer}`)
    const runs = yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.list({ threadId: "thread-1" })))
    assert.deepStrictEqual(runs.map((record) => record.runId), ["run-1"], "no run of its own for the steer")
  })

describe("run ownership with the runner in this process (SQLite)", () => {
  it.scopedLive(
    "other processes connecting while the run works change nothing: a client-only process, one that shuts down (SIGTERM: its layers' finalizers run) and a second runner (refused); a steer sent seconds later joins the run",
    () =>
      ownershipKept((env) =>
        Effect.all([
          Effect.gen(function*() {
            const client = yield* scopedChild(script, { ...env, ROLE: "client" })
            yield* waitFor(client, (line) => line === "up")
          }),
          Effect.gen(function*() {
            const client = yield* scopedChild(script, { ...env, ROLE: "client" })
            yield* waitFor(client, (line) => line === "up")
            process.kill(client.pid, "SIGTERM")
            yield* Effect.promise(() => client.exited).pipe(
              Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => "the client did not stop" }),
              Effect.orDie
            )
          }),
          Effect.gen(function*() {
            const second = yield* scopedChild(script, { ...env, ROLE: "runner" })
            const exit = yield* Effect.promise(() => second.exited).pipe(
              Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => "the second runner did not stop" }),
              Effect.orDie
            )
            assert.notStrictEqual(exit.code, 0)
            assert.include([...second.lines, second.stderr()].join("\n"), "EngineLocked")
          })
        ], { concurrency: "unbounded", discard: true })
      ),
    { timeout: 240_000 }
  )
})
