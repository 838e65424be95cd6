/**
 * The tools the built-in middleware add (`write_todos`, `read_offloaded`,
 * the Filesystem tools) are checked with the agent's other tools: a tool
 * whose name reads the same as one of them (case, full width, an invisible
 * character) fails `Agent.make` with `ToolNameClash`, so it cannot pass for
 * the middleware's tool before a person approving calls.
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect } from "effect"
import * as Filesystem from "../src/Filesystem.js"
import * as Offload from "../src/Offload.js"
import * as TodoList from "../src/TodoList.js"

/** A handled toolkit with one tool named `name`. */
const toolNamed = (name: string) => {
  const toolkit = Toolkit.make(Tool.make(name))
  return Effect.provide(toolkit, toolkit.toLayer({ [name]: () => Effect.void }))
}

describe("built-in middleware tools and look-alike names", () => {
  const cases = [
    ["TodoList's write_todos", TodoList.middleware(), "todoList", "write_todos", "Write_Todos"],
    ["Offload's read_offloaded", Offload.middleware(), "offload", "read_offloaded", "read_offloaded\u200b"],
    ["Filesystem's read_file", Filesystem.middleware(), "filesystem", "read_file", "\uff52ead_file"]
  ] as const
  for (const [what, middleware, source, twin, name] of cases) {
    it.effect(`a tool reading as ${what} fails Agent.make with ToolNameClash naming both`, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Agent.make({ toolkit: toolNamed(name), middleware: [middleware] }))
        assert.instanceOf(error, AgentError.ToolNameClash)
        assert.deepInclude(error, {
          tool: twin,
          source: `middleware "${source}"`,
          twin: name,
          twinSource: "the toolkit"
        })
        assert.deepStrictEqual(yield* ScriptedModel.requests, [])
      }).pipe(Effect.provide(ScriptedModel.layer([]))))
  }
})
