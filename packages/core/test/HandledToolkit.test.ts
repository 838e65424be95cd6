/**
 * A handled toolkit (`Toolkit.WithHandler`: what `yield* Tools` or `yield* McpToolkit.make(…)` gives) is taken
 * as an agent's `toolkit` and a middleware's `tools` as is, as the Effect of one is: an app that needs the
 * toolkit's value too (HumanInTheLoop's `toolkit`, for an MCP server's tools) passes the same value to both.
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Schema } from "effect"
import { Calculator, CalculatorLive, toolResults } from "./utils.js"

const Shout = Toolkit.make(Tool.make("shout", { parameters: { text: Schema.String }, success: Schema.String }))
const ShoutLive = Shout.toLayer({ shout: ({ text }) => Effect.succeed(text.toUpperCase()) })

const script = ScriptedModel.layer([
  ScriptedModel.toolCalls([{ name: "add", params: { a: 2, b: 3 }, id: "c1" }, {
    name: "shout",
    params: { text: "hi" },
    id: "c2"
  }]),
  ScriptedModel.text("done")
])

describe("a handled toolkit", () => {
  it.effect("runs as the agent's toolkit and as a middleware's tools, given as a value", () =>
    Effect.gen(function*() {
      const calculator = yield* Calculator
      const shout = yield* Shout
      const agent = yield* Agent.make({
        toolkit: calculator,
        middleware: [Middleware.make({ name: "shouting", tools: shout })]
      })
      const result = yield* agent.run("add and shout", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(
        toolResults(result.state.messages).map((part) => [part.id, part.result, part.isFailure]),
        [["c1", 5, false], ["c2", "HI", false]]
      )
    }).pipe(Effect.provide(Layer.mergeAll(script, CalculatorLive, ShoutLive))))

  it.effect("has its names checked with the others: a twin of another tool fails Agent.make with ToolNameClash", () =>
    Effect.gen(function*() {
      const calculator = yield* Calculator
      const error = yield* Effect.flip(Agent.make({
        toolkit: calculator,
        middleware: [Middleware.make({ name: "again", tools: calculator })]
      }))
      assert.strictEqual(error._tag, "ToolNameClash")
    }).pipe(Effect.provide(Layer.mergeAll(ScriptedModel.layer([]), CalculatorLive))))

  it.effect("an object that is neither (tools without a handle, a handle without tools) fails with InvalidOptions", () =>
    Effect.gen(function*() {
      const calculator = yield* Calculator
      const notToolkits: ReadonlyArray<unknown> = [
        { tools: calculator.tools },
        { handle: calculator.handle },
        { tools: "add", handle: calculator.handle },
        { tools: calculator.tools, handle: "add" }
      ]
      for (const value of notToolkits) {
        const error = yield* Effect.flip(Agent.make({ toolkit: value } as never))
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.include(error.message, `option "toolkit"`)
        assert.include(error.message, "or a handled toolkit")
      }
    }).pipe(Effect.provide(Layer.mergeAll(ScriptedModel.layer([]), CalculatorLive))))
})
