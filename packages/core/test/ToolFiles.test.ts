import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Schema } from "effect"

/** `shot(items)`: answers with the items it is given (file items among them). */
const Shot = Tool.make("shot", { parameters: { items: Schema.Array(Schema.Unknown) }, success: Schema.Unknown })
const Tools = Toolkit.make(Shot)
const ToolsLive = Tools.toLayer({ shot: ({ items }) => Effect.succeed(items) })

const png = "iVBORw0KGgo="

/** The messages of the model's second request, after one `shot` call with `items`. */
const secondRequest = (items: ReadonlyArray<unknown>) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({ toolkit: Tools })
    const result = yield* agent.run("go", { threadId: "t1" })
    assert.strictEqual(result._tag, "Completed")
    const [, second] = yield* ScriptedModel.requests
    return { messages: second!.prompt.content, stored: result.state.messages }
  }).pipe(
    Effect.provide(ToolsLive),
    Effect.provide(ScriptedModel.layer([
      ScriptedModel.toolCalls([{ name: "shot", params: { items }, id: "c1" }]),
      ScriptedModel.text("done")
    ]))
  )

describe("files in tool results", () => {
  it.effect("a file item of a tool result reaches the model as a file part after the tool message", () =>
    Effect.gen(function*() {
      const { messages, stored } = yield* secondRequest([
        { type: "text", text: "the screen" },
        { type: "file", mediaType: "image/png", data: png, fileName: "screen.png" }
      ])
      const index = messages.findIndex((message) => message.role === "tool")
      const tool = messages[index]!
      assert.notInclude(JSON.stringify(tool), png)
      const user = messages[index + 1]!
      assert.strictEqual(user.role, "user")
      const file = user.role === "user" ? user.content.find((part) => part.type === "file") : undefined
      assert.strictEqual(file?.mediaType, "image/png")
      assert.strictEqual(file?.fileName, "screen.png")
      assert.deepStrictEqual(Array.from(file?.data as Uint8Array), [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
      // the stored thread is unchanged: JSON, with the base64 text
      assert.include(JSON.stringify(stored), png)
    }))

  it.effect("a result without file items is sent as it is", () =>
    Effect.gen(function*() {
      const { messages } = yield* secondRequest([{ type: "text", text: "plain" }, { type: "file", mediaType: 3 }])
      assert.deepStrictEqual(messages.map((message) => message.role), ["user", "assistant", "tool"])
    }))

  it.effect("a file item whose data is not base64 is dropped with a note, not sent", () =>
    Effect.gen(function*() {
      const { messages } = yield* secondRequest([{ type: "file", mediaType: "image/png", data: "%%% not base64" }])
      assert.deepStrictEqual(messages.map((message) => message.role), ["user", "assistant", "tool"])
      assert.include(JSON.stringify(messages[2]), "not valid base64")
    }))
})
