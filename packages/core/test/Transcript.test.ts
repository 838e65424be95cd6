import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Transcript } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer } from "effect"
import { Calculator, CalculatorLive } from "./utils.js"

describe("Transcript", () => {
  it.effect("a run as one line per message: calls with arguments and ids, results, failures", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add numbers." })
      const result = yield* agent.run("What is 2 + 3?", { threadId: "t" })
      assert.strictEqual(
        Transcript.format(result.state.messages),
        [
          "1. user: What is 2 + 3?",
          `2. assistant: Let me add. → add({"a":2,"b":3}) [call_1], divide({"a":1,"b":0}) [call_2]`,
          `3. tool: add [call_1] → 5; divide [call_2] ✗ {"error":"Unknown tool \\"divide\\". Available tools: add"}`,
          "4. assistant: 2 + 3 = 5."
        ].join("\n")
      )
    }).pipe(Effect.provide(Layer.merge(
      ScriptedModel.layer([
        ScriptedModel.toolCalls([
          { name: "add", params: { a: 2, b: 3 }, id: "call_1" },
          { name: "divide", params: { a: 1, b: 0 }, id: "call_2" }
        ], { text: "Let me add." }),
        ScriptedModel.text("2 + 3 = 5.")
      ]),
      CalculatorLive
    ))))

  it("shortens long values and can leave out the numbers", () => {
    const messages = [
      Prompt.makeMessage("system", { content: "Be brief." }),
      Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "x".repeat(50) })] })
    ]
    assert.strictEqual(
      Transcript.format(messages, { maxLength: 10, numbered: false }),
      `system: Be brief.\nuser: ${"x".repeat(9)}…`
    )
  })
})
