/**
 * Refused input is described by what was wrong and where, not by the whole
 * schema it failed (a new user's trial found an 818-character resume error
 * and a 1,131-character record error that printed their schemas).
 */
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, RunRecord } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Either, FastCheck, Schema } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"

const Refund = Tool.make("refund", { parameters: { order: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Refund)

const waitingAgent = Effect.gen(function*() {
  const model = yield* ScriptedModel.make([
    ScriptedModel.toolCalls([{ name: "refund", params: { order: "A-1" }, id: "c1" }]),
    ScriptedModel.text("done")
  ])
  const agent = yield* Agent.make({
    toolkit: Tools,
    middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { refund: true } })]
  }).pipe(
    Effect.provideService(ScriptedModel.ScriptedModel, model.recorder),
    Effect.provide(Tools.toLayer({ refund: ({ order }) => Effect.succeed(`refunded ${order}`) })),
    Effect.provideService(LanguageModel.LanguageModel, model.model)
  )
  yield* agent.run("refund A-1", { threadId: "t" })
  return agent
})

describe("errors name what was wrong, briefly", () => {
  it.effect("a resume value that is no list of decisions names the decisions' type and the value given", () =>
    Effect.gen(function*() {
      const agent = yield* waitingAgent
      const error = yield* Effect.flip(agent.resume("t", { approve: true } as never))
      assert.strictEqual(error._tag, "InvalidResume")
      assert.isBelow(error.message.length, 400, error.message)
      assert.include(error.message, "HumanInTheLoop.Decisions")
      assert.include(error.message, `got {"approve":true}`)
      // a decision missing its fields names the field
      const missing = yield* Effect.flip(agent.resume("t", [{ type: "approve" }] as never))
      assert.include(missing.message, "at [0].callId: is missing")
      assert.isBelow(missing.message.length, 400, missing.message)
    }))

  it.effect("resuming a thread that does not exist says so", () =>
    Effect.gen(function*() {
      const agent = yield* waitingAgent
      const error = yield* Effect.flip(agent.resume("never-made", [] as never))
      assert.strictEqual(error._tag, "ThreadStateError")
      assert.include(error.message, "does not exist")
    }))

  it.effect("a first line that is no run record header names the missing field", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(RunRecord.fromJsonl(`{"hello":1}\n`))
      assert.strictEqual(error._tag, "RunRecordError")
      assert.include(error.message, "at _tag: is missing")
      assert.isBelow(error.message.length, 300, error.message)
    }))

  it.prop(
    "a refusal of any value by a large schema is a few bounded lines at most",
    [FastCheck.anything({ maxDepth: 4 })],
    ([value]) => {
      const decoded = Schema.decodeUnknownEither(HumanInTheLoop.Decisions, { errors: "all" })(value)
      if (Either.isRight(decoded)) return
      const text = AgentError.describeParseError(decoded.left)
      // three problems of two bounded sides each, their paths, and "and N more"
      assert.isBelow(text.length, 1_200, text)
      assert.isAbove(text.length, 0)
    }
  )
})
