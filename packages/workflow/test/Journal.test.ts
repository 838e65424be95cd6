import { LanguageModel } from "@effect/ai"
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Deferred, Effect, Exit, Fiber, Layer, Option, Schedule, Schema, Scope } from "effect"
import * as path from "node:path"
import { approvalStack, Tools } from "./support/approvalStack.js"
import { tempDirectory } from "./support/databases.js"

/** The approval request a durable run's wait carries (its status is untyped); `None` for another middleware's. */
const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

/**
 * Deletes /a (call `call_<n>` for the n-th user message), then answers — decided from the prompt,
 * so a replay in a new layer continues.
 */
const answer: ScriptedModel.Turn = (request) => {
  const users = request.prompt.content.filter((message) => message.role === "user").length
  return request.prompt.content.at(-1)?.role === "tool"
    ? ScriptedModel.text("done")
    : ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/a" }, id: `call_${users}` }])
}

const Runs = AgentWorkflow.make({ name: "journal-agent", version: 1 })

const stack = (filename: string, ran: Array<string>) => approvalStack({ runs: Runs, answer, turns: 9, filename, ran })

describe("a corrupt journal entry", () => {
  it.scopedLive(
    "fails the run with JournalCorrupt; nothing runs again and the stored thread is kept",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-journal-")
        const filename = path.join(directory, "runs.db")
        const ran: Array<string> = []

        // first process: the run reaches its approval and the process goes away
        const first = yield* Scope.make()
        const context = yield* Layer.buildWithScope(stack(filename, ran), first)
        const runId = yield* Runs.start({ threadId: "t", input: "delete /a" }).pipe(Effect.provide(context))
        const waiting = yield* Runs.await(runId, { untilWaiting: true }).pipe(Effect.provide(context))
        assert.strictEqual(waiting.state, "Waiting")
        // the journaled reply of model/0 is damaged on disk
        const sql = yield* Effect.provide(SqlClient.SqlClient, context)
        const damaged = yield* sql<{ readonly id: unknown }>`
        UPDATE cluster_replies SET payload = replace(payload, '"role":"assistant"', '"role":"robot"')
        WHERE payload LIKE '%tool-call%' RETURNING id`
        assert.strictEqual(damaged.length, 1)
        yield* Scope.close(first, Exit.void)

        // second process: approving replays the run, which meets the damaged entry
        const second = yield* Layer.build(stack(filename, ran))
        const approval = HumanInTheLoop.approveAll(
          Option.getOrThrow(Option.flatMap(waiting.pending, approvalOf))
        )
        yield* Runs.resume(runId, approval, { principal: "alice" }).pipe(
          Effect.provide(second)
        )
        const status = yield* Runs.await(runId).pipe(Effect.provide(second))
        assert.strictEqual(status.state, "Failed")
        const failure = Option.getOrThrow(status.failure)
        assert.strictEqual(failure._tag, "JournalCorrupt")
        assert.include(failure.message, runId)
        assert.deepStrictEqual(ran, [])
        assert.deepStrictEqual(status.messages.map((message) => message.role), ["user", "assistant"])
      }),
    { timeout: 60_000 }
  )
})

describe("the journal of a run on SQLite", () => {
  it.scopedLive("holds its load, model and tool calls; checkpoints are activities only before a wait and at the end", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-journal-")
      const ran: Array<string> = []
      const context = yield* Layer.build(stack(path.join(directory, "runs.db"), ran))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "delete /a" }))
      const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
      const request = Option.getOrThrow(Option.flatMap(waiting.pending, approvalOf))
      yield* run(Runs.resume(runId, HumanInTheLoop.approveAll(request), { principal: "alice" }))
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      const sql = yield* run(SqlClient.SqlClient)
      const activities = yield* sql<{ readonly payload: string }>`
        SELECT payload FROM cluster_messages WHERE entity_id = ${done.executionId} AND tag = 'activity' ORDER BY id`
      // the saves after the wait and after the tool call are written by the activity that follows each
      assert.deepStrictEqual(activities.map((row) => JSON.parse(row.payload).name), [
        "load",
        "model/0",
        "checkpoint/0",
        // the call marks itself started in the RunStore's ledger inside its own activity: no activity more
        "tool/call_1",
        "model/1",
        "checkpoint/3"
      ])
      const marks = yield* sql<{ readonly step: string }>`SELECT step FROM stepwise_ledger WHERE run_id = ${runId}`
      assert.deepStrictEqual(marks.map((row) => row.step), ["tool/call_1"])
      assert.deepStrictEqual(done.messages.map((message) => message.role), [
        "user",
        "assistant",
        "tool",
        "assistant"
      ])
      assert.isTrue(Option.isNone(done.pending))
      assert.deepStrictEqual(ran, ["/a"])
    }))
})

describe("AgentWorkflow.prune", () => {
  it.scopedLive("removes an ended run's journal, record, claims and thread; other runs keep theirs", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-prune-")
      const ran: Array<string> = []
      const context = yield* Layer.build(stack(path.join(directory, "runs.db"), ran))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const sql = yield* run(SqlClient.SqlClient)
      const journalOf = (executionId: string) =>
        sql<{ readonly messages: number | string; readonly replies: number | string }>`
          SELECT
            (SELECT COUNT(*) FROM cluster_messages WHERE entity_id = ${executionId}) AS messages,
            (SELECT COUNT(*) FROM cluster_replies WHERE request_id IN
              (SELECT id FROM cluster_messages WHERE entity_id = ${executionId})) AS replies
        `.pipe(Effect.map(([row]) => ({ messages: Number(row.messages), replies: Number(row.replies) })))

      const finish = (threadId: string) =>
        Effect.gen(function*() {
          const runId = yield* run(Runs.start({ threadId, input: "delete /a" }))
          const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
          const request = Option.getOrThrow(Option.flatMap(waiting.pending, approvalOf))
          yield* run(Runs.resume(runId, HumanInTheLoop.approveAll(request), { principal: "alice" }))
          return yield* run(Runs.await(runId))
        })
      const kept = yield* finish("kept")
      const pruned = yield* finish("pruned")
      assert.strictEqual(pruned.state, "Completed")
      assert.isAbove((yield* journalOf(pruned.executionId)).replies, 0)

      // a run still waiting is refused
      const waitingId = yield* run(Runs.start({ threadId: "waiting", input: "delete /a" }))
      yield* run(Runs.await(waitingId, { untilWaiting: true }))
      const refused = yield* run(Effect.flip(Runs.prune(waitingId)))
      assert.deepStrictEqual({ tag: refused._tag, state: (refused as AgentWorkflow.RunNotEnded).state }, {
        tag: "RunNotEnded",
        state: "Waiting"
      })
      // and so is deleting the thread of an ended run while a later run of it waits
      const laterId = yield* run(Runs.start({ threadId: "kept", input: "delete /a" }))
      yield* run(Runs.await(laterId, { untilWaiting: true }))
      const busy = yield* run(Effect.flip(Runs.prune(kept.runId, { deleteThread: true })))
      assert.deepStrictEqual({ tag: busy._tag, runId: (busy as AgentWorkflow.RunNotEnded).runId }, {
        tag: "RunNotEnded",
        runId: laterId
      })
      assert.strictEqual((yield* run(Runs.status(kept.runId))).state, "Completed")

      // a run registered by a start that died before executing it: nothing to cancel, and it prunes
      const orphan = yield* run(
        Effect.flatMap(
          RunStore.RunStore,
          (store) =>
            store.register({ runId: "orphan", threadId: "orphan", executionId: "never-executed", workflow: Runs.name })
        )
      )
      assert.strictEqual((yield* run(Runs.status(orphan.runId))).state, "Running")
      yield* run(Runs.cancel(orphan.runId))
      yield* run(Runs.prune(orphan.runId))
      assert.strictEqual((yield* run(Effect.flip(Runs.status(orphan.runId))))._tag, "RunNotFound")

      yield* run(Runs.prune(pruned.runId, { deleteThread: true }))
      assert.deepStrictEqual(yield* journalOf(pruned.executionId), { messages: 0, replies: 0 })
      assert.strictEqual((yield* run(Effect.flip(Runs.status(pruned.runId))))._tag, "RunNotFound")
      assert.strictEqual((yield* run(Effect.flip(Runs.prune(pruned.runId))))._tag, "RunNotFound")
      const loop = yield* run(Agent.Agent)
      assert.isTrue(Option.isNone(yield* loop.thread("pruned")))

      // the other runs are untouched
      assert.isAbove((yield* journalOf(kept.executionId)).replies, 0)
      assert.strictEqual((yield* run(Runs.status(kept.runId))).state, "Completed")
      assert.isTrue(Option.isSome(yield* loop.thread("kept")))
      assert.isTrue(Option.isSome((yield* run(Runs.status(laterId))).pending))
      assert.strictEqual((yield* run(Runs.status(waitingId))).state, "Waiting")
      assert.strictEqual((yield* run(Runs.status(laterId))).state, "Waiting")
    }))
})

describe("cancel on the SQLite engine", () => {
  it.scopedLive("stops a working run at its next call: the call in flight finishes, nothing after it runs", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-cancel-")
      const inTool = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const ran: Array<string> = []
      const Stoppable = AgentWorkflow.make({ name: "stoppable-agent", version: 1 })
      // deletes /a (blocking until released), then /b, then answers
      const script: ReadonlyArray<ScriptedModel.Turn> = [
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/a" }, id: "call_a" }]),
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/b" }, id: "call_b" }]),
        ScriptedModel.text("never")
      ]
      const model = yield* ScriptedModel.make(script)
      const context = yield* Layer.build(Stoppable.layer.pipe(
        Layer.provideMerge(Agent.layer({ toolkit: Tools })),
        Layer.provide(Layer.merge(
          Layer.succeed(LanguageModel.LanguageModel, model.model),
          Tools.toLayer({
            delete_file: ({ path }) =>
              Effect.sync(() => (ran.push(path), `deleted ${path}`)).pipe(
                Effect.zipLeft(
                  path === "/a"
                    ? Effect.zipRight(Deferred.succeed(inTool, void 0), Deferred.await(release))
                    : Effect.void
                )
              )
          })
        )),
        Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
        Layer.provideMerge(
          AgentEngine.layerSqlite({ filename: path.join(directory, "runs.db"), pollInterval: "100 millis" })
        )
      ))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Stoppable.start({ threadId: "t", input: "delete /a and /b" }))
      yield* Deferred.await(inTool)
      const cancelled = yield* Effect.fork(run(Stoppable.cancel(runId)))
      // the call in flight finishes once the cancel is requested (a fixed wait let it finish first under load)
      yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.isCancelRequested(runId))).pipe(
        Effect.repeat({ schedule: Schedule.spaced("10 millis"), until: (requested) => requested })
      )
      yield* Deferred.succeed(release, void 0)
      yield* Fiber.join(cancelled)
      assert.strictEqual((yield* run(Stoppable.status(runId))).state, "Cancelled")
      assert.strictEqual((yield* model.recorder.requests).length, 1)
      assert.deepStrictEqual(ran, ["/a"])
    }))
})
