/**
 * A durable run never writes back a thread deleted while it ran: its next
 * save finds the thread gone (or made again) and writes nothing, and the run
 * ends `Failed` with `CheckpointError` (`conflict` set) — in a tool, after a
 * wait answered by its timeout, and after a runner restart that replays its
 * journal.
 */
import { Tool, Toolkit } from "@effect/ai"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, Checkpointer } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Deferred, Effect, Layer, Option, Schedule, Schema } from "effect"
import * as path from "node:path"
import { tempDirectory } from "./support/databases.js"

const Wait = Tool.make("wait", { parameters: {}, success: Schema.String })
const Pay = Tool.make("pay", { parameters: { amount: Schema.Number }, success: Schema.String })
const Tools = Toolkit.make(Wait, Pay)

/** "pay …": asks to pay (a wait for approval), then answers; else calls `wait` twice, then answers. */
const turn: ScriptedModel.Turn = (request) => {
  const messages = request.prompt.content
  const first = messages.find((message) => message.role === "user")
  const asked = JSON.stringify(first?.content ?? "")
  const calls = messages.filter((message) => message.role === "tool").length
  if (asked.includes("pay")) {
    return calls === 0
      ? ScriptedModel.toolCalls([{ name: "pay", params: { amount: 100 }, id: "call_pay" }])
      : ScriptedModel.text("paid")
  }
  return calls < 2 ? ScriptedModel.toolCalls([{ name: "wait", params: {} }]) : ScriptedModel.text("done")
}

/** `wait`: the first call of a run answers at once (the thread is saved after it), the next calls do `second`. */
const waitTool = (second: Effect.Effect<void>) => {
  let calls = 0
  return () => Effect.as(++calls % 2 === 1 ? Effect.void : second, "ok")
}

const stack = (
  filename: string,
  runs: AgentWorkflow.AgentWorkflow,
  second: Effect.Effect<void>,
  sharding?: AgentEngine.SqliteOptions["sharding"]
) =>
  runs.layer.pipe(
    Layer.provideMerge(Agent.layer({
      toolkit: Tools,
      middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { pay: true } })]
    })),
    Layer.provide(Layer.merge(
      ScriptedModel.layer(Array.from({ length: 20 }, () => turn)),
      Tools.toLayer({ wait: waitTool(second), pay: () => Effect.succeed("paid") })
    )),
    Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
    Layer.provideMerge(Authorizer.layer(() => true)),
    Layer.provideMerge(AgentEngine.layerSqlite({ filename, pollInterval: "100 millis", sharding }))
  )

/** The run's stored failure: the agent's `CheckpointError`. */
const checkpointFailure = (status: AgentWorkflow.RunStatus): AgentError.CheckpointError => {
  assert.strictEqual(status.state, "Failed")
  const failure = Option.getOrThrow(status.failure)
  assert.strictEqual(failure._tag, "AgentRunFailed")
  const error = failure._tag === "AgentRunFailed" ? failure.error : undefined
  assert.instanceOf(error, AgentError.CheckpointError)
  return error as AgentError.CheckpointError
}

/** What another process does to the thread: through its own client on the file, past this runner's agent. */
const elsewhere = <A, E>(filename: string, body: (store: Checkpointer.Service) => Effect.Effect<A, E>) =>
  Effect.scoped(
    Effect.flatMap(SqlCheckpointer.make(), body).pipe(
      Effect.provide(Layer.orDie(SqliteClient.layer({ filename })))
    )
  )

/** Another process's agent on the file, answering `reply`. */
const otherAgentRun = (filename: string, input: string, reply: string) =>
  Effect.scoped(
    Effect.flatMap(Agent.make({ toolkit: Tools }), (agent) => agent.run(input, { threadId: "t" })).pipe(
      Effect.provide(Layer.mergeAll(
        ScriptedModel.layer([ScriptedModel.text(reply)]),
        Tools.toLayer({ wait: () => Effect.succeed("ok"), pay: () => Effect.succeed("paid") }),
        SqlCheckpointer.layer().pipe(Layer.provide(Layer.orDie(SqliteClient.layer({ filename }))))
      ))
    )
  )

describe("a durable run whose thread is deleted while it runs (SQLite)", () => {
  it.scopedLive(
    "in a tool: the thread stays deleted, and the run ends Failed with CheckpointError (ThreadDeleted)",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-deleted-")
        const filename = path.join(directory, "runs.db")
        const started = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const Runs = AgentWorkflow.make({ name: "deleted-in-tool", version: 1 })
        const context = yield* Layer.build(
          stack(filename, Runs, Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release)))
        )
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context) as Effect.Effect<A, E>

        const runId = yield* run(Runs.start({ threadId: "t", input: "work" }))
        yield* Deferred.await(started)
        assert.isTrue(Option.isSome(yield* elsewhere(filename, (store) => store.load("t"))), "saved before the wait")
        yield* elsewhere(filename, (store) => store.delete("t"))
        yield* Deferred.succeed(release, undefined)

        const error = checkpointFailure(yield* run(Runs.await(runId)))
        assert.strictEqual(error.conflict, "ThreadDeleted")
        assert.strictEqual(error.threadId, "t")
        assert.include(error.reason, "was not saved")
        assert.isTrue(Option.isNone(yield* elsewhere(filename, (store) => store.load("t"))), "the thread stays deleted")
      }),
    { timeout: 120_000 }
  )

  it.scopedLive(
    "in a tool, deleted and made again by another process: the new thread is kept, the run fails (Superseded)",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-deleted-")
        const filename = path.join(directory, "runs.db")
        const started = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const Runs = AgentWorkflow.make({ name: "recreated-in-tool", version: 1 })
        const context = yield* Layer.build(
          stack(filename, Runs, Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release)))
        )
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context) as Effect.Effect<A, E>

        const runId = yield* run(Runs.start({ threadId: "t", input: "work" }))
        yield* Deferred.await(started)
        yield* elsewhere(filename, (store) => store.delete("t"))
        yield* otherAgentRun(filename, "a new conversation", "fresh")
        const made = Option.getOrThrow(yield* elsewhere(filename, (store) => store.load("t")))
        yield* Deferred.succeed(release, undefined)

        const error = checkpointFailure(yield* run(Runs.await(runId)))
        assert.strictEqual(error.conflict, "Superseded")
        assert.deepStrictEqual(yield* elsewhere(filename, (store) => store.load("t")), Option.some(made))
      }),
    { timeout: 120_000 }
  )

  it.scopedLive(
    "waiting for a decision, deleteThread, then its decisionTimeout answers: the thread stays deleted",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-deleted-")
        const filename = path.join(directory, "runs.db")
        const Runs = AgentWorkflow.make({
          name: "deleted-waiting",
          version: 1,
          // generous (the engine may take seconds to start the run on a busy machine): the thread is deleted as
          // soon as the run is seen waiting
          decisionTimeout: { after: "5 seconds", decide: HumanInTheLoop.rejectAll("nobody answered") }
        })
        const context = yield* Layer.build(stack(filename, Runs, Effect.void))
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context) as Effect.Effect<A, E>

        const runId = yield* run(Runs.start({ threadId: "t", input: "pay bob 100" }))
        // (a wait raced against its timeout reads as running: the stored thread tells that it waits)
        yield* run(Effect.flatMap(Checkpointer.Checkpointer, (store) => store.load("t"))).pipe(
          Effect.repeat({
            schedule: Schedule.spaced("50 millis"),
            until: (stored) => Option.isSome(stored) && stored.value.pending !== undefined
          })
        )
        const stored = yield* run(Effect.flatMap(Checkpointer.Checkpointer, (store) => store.load("t")))
        const request = Schema.decodeUnknownSync(HumanInTheLoop.ApprovalRequest)(
          Option.getOrThrow(stored).pending!.value
        )
        yield* run(Effect.flatMap(Agent.Agent, (agent) => agent.deleteThread("t")))
        // a person's decision finds no wait to answer: refused, and nothing is written
        const refused = yield* run(
          Effect.flip(Runs.resume(runId, HumanInTheLoop.approveAll(request), { principal: "alice" }))
        )
        assert.strictEqual(refused._tag, "NotWaiting")
        assert.include(refused.message, `thread "t" is not stored (it was deleted)`)
        assert.isTrue(Option.isNone(yield* run(Effect.flatMap(Checkpointer.Checkpointer, (store) => store.load("t")))))

        const error = checkpointFailure(yield* run(Runs.await(runId)))
        assert.strictEqual(error.conflict, "ThreadDeleted")
        assert.isTrue(Option.isNone(yield* run(Effect.flatMap(Checkpointer.Checkpointer, (store) => store.load("t")))))
      }),
    { timeout: 120_000 }
  )

  it.scopedLive(
    "waiting for a decision, deleteThread, then cancel: the run ends Cancelled, the thread stays deleted",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-deleted-")
        const filename = path.join(directory, "runs.db")
        const Runs = AgentWorkflow.make({ name: "deleted-cancelled", version: 1 })
        const context = yield* Layer.build(stack(filename, Runs, Effect.void))
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context) as Effect.Effect<A, E>

        const runId = yield* run(Runs.start({ threadId: "t", input: "pay bob 100" }))
        assert.strictEqual((yield* run(Runs.await(runId, { untilWaiting: true }))).state, "Waiting")
        yield* run(Effect.flatMap(Agent.Agent, (agent) => agent.deleteThread("t")))
        yield* run(Runs.cancel(runId))
        assert.strictEqual((yield* run(Runs.await(runId))).state, "Cancelled")
        assert.isTrue(Option.isNone(yield* run(Effect.flatMap(Checkpointer.Checkpointer, (store) => store.load("t")))))
      }),
    { timeout: 120_000 }
  )

  it.scopedLive(
    "after a runner restart, the run replaying its journal does not write the deleted thread back",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-deleted-")
        const filename = path.join(directory, "runs.db")
        const Runs = AgentWorkflow.make({ name: "deleted-restart", version: 1 })
        // the first runner stops while the run is in its tool
        const runId = yield* Effect.scoped(Effect.gen(function*() {
          const started = yield* Deferred.make<void>()
          const context = yield* Layer.build(
            // stopped at once (the cluster's default gives the run in its tool 15 s to end)
            stack(filename, Runs, Effect.zipRight(Deferred.succeed(started, undefined), Effect.never), {
              entityTerminationTimeout: "500 millis"
            })
          )
          const runId = yield* Effect.provide(Runs.start({ threadId: "t", input: "work" }), context)
          yield* Deferred.await(started)
          return runId
        }))
        assert.isTrue(Option.isSome(yield* elsewhere(filename, (store) => store.load("t"))), "saved before the stop")
        yield* elsewhere(filename, (store) => store.delete("t"))

        // a new runner on the file takes the run up again, and replays its journal
        const context = yield* Layer.build(stack(filename, Runs, Effect.void))
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context) as Effect.Effect<A, E>
        const error = checkpointFailure(yield* run(Runs.await(runId)))
        assert.strictEqual(error.conflict, "ThreadDeleted")
        assert.isTrue(Option.isNone(yield* elsewhere(filename, (store) => store.load("t"))), "the thread stays deleted")
      }),
    { timeout: 120_000 }
  )
})
