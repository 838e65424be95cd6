/**
 * How middleware see a tool call the agent answers as invalid (arguments
 * that are not JSON): as a call like any other. HumanInTheLoop asks about it
 * with the arguments as they came, and an edit repairs it; ToolCallLimit
 * counts it.
 */
import { LanguageModel, type Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Option, Ref, Schema } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as ToolCallLimit from "../src/ToolCallLimit.js"

/** The approval request a wait (as an untyped agent sees it) carries; `None` for another middleware's. */
const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

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
  it.effect("HumanInTheLoop asks about it with the arguments as they came; an edit repairs it", () =>
    Effect.gen(function*() {
      const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([{ name: "delete_file", params: notJson, id: "c1" }]),
        ScriptedModel.text("done")
      ], [hitl])
      const waiting = yield* agent.run("clean up", { threadId: "t" })
      assert.strictEqual(waiting._tag, "Interrupted")
      const request = Option.getOrThrow(approvalOf(Option.getOrThrow(
        Option.flatMap(yield* agent.thread("t"), (thread) => thread.pending)
      )))
      assert.deepStrictEqual(request.actionRequests.map((action) => action.args), [notJson])
      const decisions = [HumanInTheLoop.edit(request.actionRequests[0]!, { path: "/tmp/a" })]
      const result = yield* agent.resume("t", decisions)
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["/tmp/a"])
    }))

  it.effect("HumanInTheLoop approving it as it came gets the failed result saying what is wrong", () =>
    Effect.gen(function*() {
      const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([{ name: "delete_file", params: notJson, id: "c1" }]),
        ScriptedModel.text("done")
      ], [hitl])
      yield* agent.run("clean up", { threadId: "t" })
      const request = Option.getOrThrow(approvalOf(Option.getOrThrow(
        Option.flatMap(yield* agent.thread("t"), (thread) => thread.pending)
      )))
      const result = yield* agent.resume("t", [HumanInTheLoop.approve(request.actionRequests[0]!)])
      assert.strictEqual(result._tag, "Completed")
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
