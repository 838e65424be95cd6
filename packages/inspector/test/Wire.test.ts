import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { AgentEvent } from "@stepwise-agent/core"
import * as Wire from "../src/internal/wire.js"

describe("Wire.event", () => {
  it("sends a subagent's event as any event: nested under its call, encoded and scrubbed", () => {
    const failed = AgentEvent.RunFailed({ error: "HttpResponseError", message: "authorization: Bearer sk-secret-123" })
    const responded = AgentEvent.ModelResponded({
      step: 0,
      message: Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text: "hi" })] }),
      usage: undefined as any,
      finishReason: "stop",
      durationMillis: 1
    })
    const nested = (event: AgentEvent.AgentEvent<any, any>) =>
      AgentEvent.SubAgentEvent({
        callId: "c1",
        agent: "manager",
        threadId: "t/task/c1/1",
        event: AgentEvent.SubAgentEvent({ callId: "g1", agent: "cleaner", threadId: "t/task/c1/1/task/g1/1", event })
      })
    const sent = Wire.stringify(Wire.event(nested(failed)))
    assert.notInclude(sent, "sk-secret-123")
    assert.include(sent, `"callId":"g1"`)
    const encoded = Wire.event(nested(responded)) as any
    assert.deepStrictEqual([encoded.callId, encoded.event.callId], ["c1", "g1"])
    // the assistant message in its encoded form (a plain object, no Prompt class instance)
    const message = encoded.event.event.message
    assert.strictEqual(Object.getPrototypeOf(message), Object.prototype)
    assert.strictEqual(JSON.parse(Wire.stringify(message)).content[0].text, "hi")
  })
})

describe("Wire.event: the effect ledger", () => {
  it("sends a tool call's ledger entry with its start, and none for a read-only tool", () => {
    const call = Prompt.makePart("tool-call", {
      id: "c1",
      name: "send_email",
      params: { to: "a" },
      providerExecuted: false
    })
    const ledger = {
      step: "tool/c1",
      callId: "c1",
      toolName: "send_email",
      effect: "Uncertain" as const,
      idempotencyKey: "t1/c1",
      fingerprint: "0123"
    }
    const withEntry = JSON.parse(Wire.stringify(Wire.event(AgentEvent.ToolCallStarted({ call, ledger }))))
    assert.deepStrictEqual(withEntry.ledger, ledger)
    const read = JSON.parse(Wire.stringify(Wire.event(AgentEvent.ToolCallStarted({ call }))))
    assert.isFalse("ledger" in read)
  })
})
