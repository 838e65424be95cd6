import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Option, Ref, Schema, Stream } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as RiskApproval from "../src/RiskApproval.js"

const Deploy = Tool.make("deploy", {
  description: "Deploys the app",
  parameters: { env: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(Deploy)

const verdict = (risk: RiskApproval.Risk, reason: string) => ScriptedModel.text(JSON.stringify({ risk, reason }))

/** The agent deploys to staging and to prod in one reply; the classifier answers `verdicts` in turn. */
const setup = (verdicts: ReadonlyArray<ScriptedModel.Turn>, threshold?: RiskApproval.Risk) =>
  Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const classifier = yield* ScriptedModel.make(verdicts)
    const risky = yield* RiskApproval.make({ threshold }).pipe(
      Effect.provide(RiskApproval.layer(classifier.model))
    )
    const hitl = yield* HumanInTheLoop.middleware({
      toolkit: Tools,
      interruptOn: { deploy: { allowedDecisions: ["approve", "reject"], when: risky } }
    })
    const model = yield* ScriptedModel.make([
      ScriptedModel.toolCalls([
        { name: "deploy", params: { env: "staging" }, id: "c1" },
        { name: "deploy", params: { env: "prod" }, id: "c2" }
      ]),
      ScriptedModel.text("done")
    ])
    const agent = yield* Agent.make({ toolkit: Tools, middleware: [hitl] }).pipe(
      Effect.provide(Tools.toLayer({
        deploy: ({ env }) => Effect.as(Ref.update(log, (all) => [...all, env]), `deployed to ${env}`)
      })),
      Effect.provideService(LanguageModel.LanguageModel, model.model)
    )
    return { agent, log: Ref.get(log), asked: classifier.recorder.requests }
  })

describe("RiskApproval", () => {
  it.effect("calls below the threshold run; the others wait for a person; each verdict is reported with its reason", () =>
    Effect.gen(function*() {
      const { agent, asked, log } = yield* setup([
        verdict("low", "staging is a test environment"),
        verdict("high", "prod serves customers")
      ])
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("ship it", { threadId: "t" })))
      const decisions = events.filter(AgentEvent.$is("MiddlewareDecision")).map((event) => event.data)
      assert.deepStrictEqual(decisions.slice(0, 2), [
        { callId: "c1", risk: "low", reason: "staging is a test environment" },
        { callId: "c2", risk: "high", reason: "prod serves customers" }
      ])
      // the classifier saw each call, with what the user asked
      const shown = (yield* asked).map((request) => {
        const last = request.prompt.content.at(-1)!
        return last.role === "user"
          ? last.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")
          : ""
      })
      assert.include(shown[0]!, "The user asked: ship it")
      assert.include(shown[0]!, `"deploy" with the arguments {"env":"staging"}`)
      assert.include(shown[1]!, `{"env":"prod"}`)
      // only the prod call waits
      const pending = Option.getOrThrow(Option.getOrThrow(yield* agent.thread("t")).pending)
      const request = Option.getOrThrow(HumanInTheLoop.requestOf(pending))
      assert.deepStrictEqual(request.actionRequests.map((action) => action.callId), ["c2"])
      const result = yield* agent.resume("t", [HumanInTheLoop.approve(request.actionRequests[0]!)])
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["staging", "prod"])
      // resuming asked the classifier nothing more
      assert.strictEqual((yield* asked).length, 2)
    }))

  it.effect("the threshold is configurable: with high, a medium call runs", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([verdict("medium", "a"), verdict("medium", "b")], "high")
      const result = yield* agent.run("ship it", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["staging", "prod"])
    }))

  it.effect("a classifier that fails or answers no verdict makes the call wait for a person", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([
        ScriptedModel.text("I think it is fine"),
        ScriptedModel.httpError(503)
      ])
      const result = yield* agent.run("ship it", { threadId: "t" })
      assert.strictEqual(result._tag, "Interrupted")
      const pending = Option.getOrThrow(Option.getOrThrow(yield* agent.thread("t")).pending)
      const request = Option.getOrThrow(HumanInTheLoop.requestOf(pending))
      assert.deepStrictEqual(request.actionRequests.map((action) => action.callId), ["c1", "c2"])
      assert.deepStrictEqual(yield* log, [])
    }))
})
