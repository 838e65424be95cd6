import type { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Effect } from "effect"

const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

describe("Fixtures", () => {
  it.effect("a run calling the toolkit's tools gets their handlers' results", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Fixtures.toolkit })
      const result = yield* agent.run("go", { threadId: "t" })
      const results = toolResults(result.state.messages)
      assert.deepStrictEqual(
        results.map((part) => [part.name, part.isFailure, part.result]),
        [["echo", false, "hi"], ["add", false, 3], ["fail", true, { reason: "on demand" }]]
      )
      assert.deepStrictEqual((yield* ScriptedModel.requests)[0]!.toolNames, ["echo", "add", "fail"])
    }).pipe(Effect.provide([
      ScriptedModel.layer([
        ScriptedModel.toolCalls([
          { name: "echo", params: { text: "hi" } },
          { name: "add", params: { a: 1, b: 2 } },
          { name: "fail", params: { reason: "on demand" } }
        ]),
        ScriptedModel.text("done")
      ]),
      Fixtures.layer
    ])))

  it.effect("the echo toolkit answers with the text it was given", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual(toolResults(result.state.messages).map((part) => part.result), ["x"])
      assert.strictEqual(result._tag === "Completed" && result.text, "done")
    }).pipe(Effect.provide([
      ScriptedModel.layer([
        ScriptedModel.toolCalls([{ name: "echo", params: { text: "x" } }]),
        ScriptedModel.text("done")
      ]),
      Fixtures.echoLayer
    ])))
})
