import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type AgentEvent, ToolEffect } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Schema, Stream } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"

const SendEmail = Tool.make("send_email", { parameters: { to: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(SendEmail)
const ToolsLive = Tools.toLayer({ send_email: ({ to }) => Effect.succeed(`sent to ${to}`) })

describe("HumanInTheLoop approvals and the effect ledger", () => {
  it.effect("an approval names the ledger entry of the call it allows: the same call id and fingerprint", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { send_email: true } })]
      })
      const waiting = yield* agent.run("Email Ada", { threadId: "t1" })
      assert.strictEqual(waiting._tag, "Interrupted")
      if (waiting._tag !== "Interrupted") return
      const request = Schema.decodeUnknownSync(HumanInTheLoop.ApprovalRequest)(waiting.interrupt.value)
      const action = request.actionRequests[0]!
      assert.strictEqual(action.fingerprint, ToolEffect.fingerprint("send_email", { to: "ada@example.com" }))
      const events = Chunk.toReadonlyArray(
        yield* Stream.runCollect(agent.resumeStream("t1", [HumanInTheLoop.approve(action)]))
      )
      const started = events.find((event): event is Extract<AgentEvent.AgentEvent, { _tag: "ToolCallStarted" }> =>
        event._tag === "ToolCallStarted"
      )
      assert.deepStrictEqual(
        started?.ledger && { callId: started.ledger.callId, fingerprint: started.ledger.fingerprint },
        { callId: action.callId, fingerprint: action.fingerprint }
      )
    }).pipe(
      Effect.provide(ToolsLive),
      Effect.provide(ScriptedModel.layer([
        ScriptedModel.toolCalls([{ name: "send_email", params: { to: "ada@example.com" }, id: "c1" }]),
        ScriptedModel.text("sent")
      ]))
    ))
})
