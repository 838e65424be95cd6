import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Messages } from "@stepwise-agent/testing"
import { Schema } from "effect"

describe("Messages", () => {
  it("builds messages the Prompt.Message schema round-trips", () => {
    const messages = [
      Messages.system("Be brief."),
      Messages.user("Hello"),
      Messages.call("c1", "search", { query: "effect" }),
      Messages.result("c1", "search", "found", { isFailure: true }),
      Messages.calls(Messages.toolCall("c2", "search"), Messages.toolCall("c3", "add", { a: 1 })),
      Messages.assistant("Hi!")
    ]
    for (const message of messages) {
      const encoded = Schema.encodeSync(Prompt.Message)(message)
      const decoded = Schema.decodeUnknownSync(Prompt.Message)(encoded)
      assert.deepStrictEqual(Schema.encodeSync(Prompt.Message)(decoded), encoded)
    }
    assert.deepStrictEqual(messages.map((message) => message.role), [
      "system",
      "user",
      "assistant",
      "tool",
      "assistant",
      "assistant"
    ])
    const result = messages[3] as Prompt.ToolMessage
    assert.strictEqual(result.content[0]!.isFailure, true)
    assert.strictEqual(result.content[0]!.result, "found")
  })
})
