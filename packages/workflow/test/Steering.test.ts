import type { Prompt } from "@effect/ai"
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import { Effect, Layer, Option, Schema } from "effect"
import * as path from "node:path"
import { approvalStack } from "./support/approvalStack.js"
import { tempDirectory } from "./support/databases.js"

/** The approval request a durable run's wait carries (its status is untyped); `None` for another middleware's. */
const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

const textOf = (message: Prompt.Message): string =>
  typeof message.content === "string"
    ? message.content
    : message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")

/** After a user message: delete the path it names (call `call_<n>` for the n-th user message); after a result: done. */
const answer: ScriptedModel.Turn = (request) => {
  const users = request.prompt.content.filter((message) => message.role === "user")
  return request.prompt.content.at(-1)?.role === "tool"
    ? ScriptedModel.text("done")
    : ScriptedModel.toolCalls([{
      name: "delete_file",
      params: { path: textOf(users.at(-1)!).split(" ").at(-1)! },
      id: `call_${users.length}`
    }])
}

const Runs = AgentWorkflow.make({ name: "steered-agent", version: 1, steering: true })

const stack = (filename: string, ran: Array<string>) => approvalStack({ runs: Runs, answer, turns: 12, filename, ran })

/** Approves every call the run waits for, once it waits. */
const approver = (run: <A, E>(effect: Effect.Effect<A, E, any>) => Effect.Effect<A, E, any>) => (runId: string) =>
  Effect.gen(function*() {
    const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
    assert.strictEqual(waiting.state, "Waiting")
    const request = Option.getOrThrow(Option.flatMap(waiting.pending, approvalOf))
    yield* run(Runs.resume(runId, HumanInTheLoop.approveAll(request), { principal: "alice" }))
  })

describe("steering a durable run", () => {
  it.scopedLive(
    "a message sent while the run waits joins it after the approved call, journaled: each replay takes it in once, at the same point",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-steer-")
        const ran: Array<string> = []
        const context = yield* Layer.build(stack(path.join(directory, "runs.db"), ran))
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
        const agent = yield* run(Agent.Agent)
        const approve = approver(run)

        const runId = yield* run(Runs.start({ threadId: "t", input: "delete /a" }))
        yield* run(Runs.await(runId, { untilWaiting: true }))
        // the run waits for its first approval: the message waits with it
        const sent = yield* agent.send("t", "also delete /b")
        assert.strictEqual(sent.delivery, "held")
        // approved: /a is deleted, then the message joins before the next model call, which asks to delete /b
        yield* approve(runId)
        // the second approval replays the run: the journaled look gives the message again, at the same point
        yield* approve(runId)
        const done = yield* run(Runs.await(runId))
        assert.strictEqual(done.state, "Completed")
        assert.deepStrictEqual(ran, ["/a", "/b"])
        assert.deepStrictEqual(done.messages.map((message) => message.role), [
          "user",
          "assistant",
          "tool",
          "user",
          "assistant",
          "tool",
          "assistant"
        ])
        assert.deepStrictEqual(
          done.messages.filter((message) => message.role === "user").map(textOf),
          ["delete /a", "also delete /b"]
        )
        const result = yield* sent.result
        assert.strictEqual(result._tag, "Completed")
        const sql = yield* run(SqlClient.SqlClient)
        const activities = yield* sql<{ readonly payload: string }>`
          SELECT payload FROM cluster_messages WHERE entity_id = ${done.executionId} AND tag = 'activity' ORDER BY id`
        const names = activities.map((row) => JSON.parse(row.payload).name as string)
        // one look before each model step, journaled once
        assert.deepStrictEqual(names.filter((name) => name.startsWith("inbox/")), ["inbox/0", "inbox/1", "inbox/2"])
        assert.isBelow(names.indexOf("tool/call_1"), names.indexOf("inbox/1"))
        assert.isBelow(names.indexOf("inbox/1"), names.indexOf("model/1"))
      }),
    { timeout: 60_000 }
  )

  it.scopedLive(
    "a message stored with AgentWorkflow.send while the run waits joins it after the resume, once",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-steer-stored-")
        const ran: Array<string> = []
        const context = yield* Layer.build(stack(path.join(directory, "runs.db"), ran))
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
        const approve = approver(run)

        const runId = yield* run(Runs.start({ threadId: "t", input: "delete /a" }))
        yield* run(Runs.await(runId, { untilWaiting: true }))
        const receipt = yield* run(Runs.send("t", "also delete /b"))
        // the waiting run owns the thread's messages: it takes this one in once it goes on
        assert.deepStrictEqual([receipt.delivery, receipt.runId], ["stored", Option.some(runId)])
        yield* approve(runId)
        yield* approve(runId)
        const done = yield* run(Runs.await(runId))
        assert.strictEqual(done.state, "Completed")
        assert.deepStrictEqual(ran, ["/a", "/b"])
        assert.deepStrictEqual(
          done.messages.filter((message) => message.role === "user").map(textOf),
          ["delete /a", "also delete /b"]
        )
        // it ended with nothing left: no run after it
        assert.deepStrictEqual(
          (yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.list({ threadId: "t" })))).map((r) => r.runId),
          [runId]
        )
      }),
    { timeout: 60_000 }
  )
})
