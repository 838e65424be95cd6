/**
 * How middleware see a tool call the agent answers as invalid (arguments
 * that are not JSON): HumanInTheLoop does not ask about it (it cannot run;
 * the model gets the failed result); ToolCallLimit counts it as a call.
 */
import { LanguageModel, type Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Option, Ref, Schema } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as ToolCallLimit from "../src/ToolCallLimit.js"

const DeleteFile = Tool.make("delete_file", { parameters: { path: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(DeleteFile)

const notJson = `{"path": "/tmp/a"`

/** An agent with the tool (recording its runs) and `middleware`, on `script`. */
const setup = (script: ReadonlyArray<ScriptedModel.Turn>, middleware: ReadonlyArray<Middleware.Any>) =>
  Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const model = yield* ScriptedModel.make(script)
    const make = Agent.make({ toolkit: Tools, middleware }) as Effect.Effect<Agent.Service<any, any>, unknown>
    const agent = yield* make.pipe(
      Effect.provide(Tools.toLayer({
        delete_file: ({ path }) => Effect.as(Ref.update(log, (all) => [...all, path]), `deleted ${path}`)
      })),
      Effect.provideService(LanguageModel.LanguageModel, model.model)
    )
    return { agent, log: Ref.get(log) }
  })

describe("a call with arguments that are not JSON, in middleware", () => {
  // it cannot run, so no one is asked about it (issue 33, item 19): before, a person was asked and an approval
  // got the same failed result
  it.effect("HumanInTheLoop does not ask about it: the model gets the failed result saying what is wrong", () =>
    Effect.gen(function*() {
      const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([{ name: "delete_file", params: notJson, id: "c1" }]),
        ScriptedModel.text("done")
      ], [hitl])
      const result = yield* agent.run("clean up", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.isTrue(Option.isNone(Option.getOrThrow(yield* agent.thread("t")).pending))
      assert.deepStrictEqual(yield* log, [])
      const messages: ReadonlyArray<Prompt.Message> = result.state.messages
      const failed = messages.flatMap((message) => message.role === "tool" ? message.content : [])
      assert.isTrue(failed[0]!.isFailure)
      assert.include(JSON.stringify(failed[0]!.result), "not valid JSON")
    }))

  it.effect("ToolCallLimit counts it as a call", () =>
    Effect.gen(function*() {
      const limit = ToolCallLimit.middleware({ runLimit: 1, exitBehavior: "end" })
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([{ name: "delete_file", params: notJson, id: "c1" }]),
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/tmp/a" }, id: "c2" }]),
        ScriptedModel.text("done")
      ], [limit])
      const result = yield* agent.run("clean up", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      // the invalid call used the run's one call: the second is blocked and never runs
      assert.deepStrictEqual(yield* log, [])
    }))
})
