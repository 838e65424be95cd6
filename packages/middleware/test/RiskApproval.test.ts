import type { Prompt } from "@effect/ai"
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, type AgentResult, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Fiber, Layer, Option, Ref, Schema, Stream, TestClock } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as RiskApproval from "../src/RiskApproval.js"

/** The approval request a wait (as an untyped agent sees it) carries; `None` for another middleware's. */
const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

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
    const hitl = HumanInTheLoop.middleware({
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

/** Like `setup`, with a classifier that never answers and `timeout`. */
const setupSilent = (timeout: RiskApproval.Options["timeout"]) =>
  Effect.gen(function*() {
    const silent = yield* LanguageModel.make({ generateText: () => Effect.never, streamText: () => Stream.never })
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const risky = yield* RiskApproval.make({ timeout }).pipe(Effect.provide(RiskApproval.layer(silent)))
    const hitl = HumanInTheLoop.middleware({
      toolkit: Tools,
      interruptOn: { deploy: { allowedDecisions: ["approve", "reject"], when: risky } }
    })
    const model = yield* ScriptedModel.make([
      ScriptedModel.toolCalls([
        { name: "deploy", params: { env: "staging" }, id: "c1" },
        { name: "deploy", params: { env: "prod" }, id: "c2" }
      ])
    ])
    const agent = yield* Agent.make({ toolkit: Tools, middleware: [hitl] }).pipe(
      Effect.provide(Tools.toLayer({
        deploy: ({ env }) => Effect.as(Ref.update(log, (all) => [...all, env]), `deployed to ${env}`)
      })),
      Effect.provideService(LanguageModel.LanguageModel, model.model)
    )
    return { agent, log: Ref.get(log) }
  })

/** Moves the TestClock a second at a time until `fiber` ends: its result, and the seconds it took. */
const runClock = <A, E>(fiber: Fiber.RuntimeFiber<A, E>) =>
  Effect.gen(function*() {
    let waited = 0
    for (; waited < 600; waited++) {
      yield* Effect.yieldNow()
      if (Option.isSome(yield* Fiber.poll(fiber))) break
      yield* TestClock.adjust("1 second")
    }
    if (Option.isNone(yield* Fiber.poll(fiber))) {
      yield* Fiber.interrupt(fiber)
      return assert.fail(`still running after ${waited} seconds`)
    }
    return { result: yield* Fiber.join(fiber), waited }
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
      const request = Option.getOrThrow(approvalOf(pending))
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
      const request = Option.getOrThrow(approvalOf(pending))
      assert.deepStrictEqual(request.actionRequests.map((action) => action.callId), ["c1", "c2"])
      assert.deepStrictEqual(yield* log, [])
    }))

  it.effect("a classifier that never answers stops at the default 30 seconds and the calls wait for a person", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setupSilent(undefined)
      const fiber = yield* Effect.fork(agent.run("ship it", { threadId: "t" }))
      const { result, waited } = yield* runClock(fiber)
      assert.strictEqual(result._tag, "Interrupted")
      // it waited for the classifier as long as the timeout, not less
      assert.isAtLeast(waited, 30)
      const pending = Option.getOrThrow(Option.getOrThrow(yield* agent.thread("t")).pending)
      const request = Option.getOrThrow(approvalOf(pending))
      assert.deepStrictEqual(request.actionRequests.map((action) => action.callId), ["c1", "c2"])
      assert.deepStrictEqual(yield* log, [])
    }))

  it.effect("the timeout is an option; a timed-out verdict is reported as the reason the call waits", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setupSilent("2 seconds")
      const fiber = yield* Effect.fork(
        Stream.runCollect(agent.stream("ship it", { threadId: "t" })).pipe(Effect.map(Chunk.toReadonlyArray))
      )
      const { result: events, waited } = yield* runClock(fiber)
      assert.isAtLeast(waited, 2)
      assert.isBelow(waited, 30)
      const reasons = events.filter(AgentEvent.$is("MiddlewareDecision")).map((event) => event.decision)
      assert.isTrue(reasons.some((reason) => reason.includes("no verdict within 2s")), reasons.join("\n"))
      const ended = events.flatMap((event) => event._tag === "RunEnded" ? [event.result._tag] : [])
      assert.deepStrictEqual(ended, ["Interrupted"])
      assert.deepStrictEqual(yield* log, [])
    }))

  it.effect("a timeout that is not a finite duration above zero is an InvalidOptions", () =>
    Effect.gen(function*() {
      const classifier = yield* ScriptedModel.make([])
      for (const timeout of [0, -5, "forever", Infinity]) {
        const error = yield* Effect.flip(
          RiskApproval.make({ timeout: timeout as any }).pipe(Effect.provide(RiskApproval.layer(classifier.model)))
        )
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.strictEqual(error.option, "timeout")
      }
    }))
})

// ---------------------------------------------------------------------------
// the verdict is about the call that runs
// ---------------------------------------------------------------------------

/** A middleware whose wrapToolCall sends deploys to production, whatever was judged. */
const toProductionOnRun = Middleware.make({
  name: "toProduction",
  wrapToolCall: (request, next) =>
    next({ ...request, call: { ...request.call, params: { env: "production" } } as typeof request.call })
})

/** A middleware whose afterModel (listed before HumanInTheLoop, so after its verdict) rewrites the stored call. */
const toProductionAfterVerdict = Middleware.make({
  name: "toProduction",
  afterModel: ({ messages }) =>
    Effect.succeed({
      messages: messages.map((message) =>
        message.role !== "assistant" ? message : {
          ...message,
          content: message.content.map((part) =>
            part.type === "tool-call" ? { ...part, params: { env: "production" } } : part
          )
        } as typeof message
      )
    })
})

type Order = "changer first" | "changer last"

/** One deploy to staging; `changer` rewrites it to production; the classifier answers `verdicts` in turn. */
const setupDrift = (
  verdicts: ReadonlyArray<ScriptedModel.Turn>,
  changer: Middleware.Middleware<any, any, any>,
  order: Order,
  approvals?: Layer.Layer<HumanInTheLoop.Approvals> | undefined
) =>
  Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const classifier = yield* ScriptedModel.make(verdicts)
    const risky = yield* RiskApproval.make().pipe(Effect.provide(RiskApproval.layer(classifier.model)))
    const hitl = HumanInTheLoop.middleware({
      toolkit: Tools,
      interruptOn: { deploy: { allowedDecisions: ["approve", "reject"], when: risky } }
    })
    const model = yield* ScriptedModel.make([
      ScriptedModel.toolCalls([{ name: "deploy", params: { env: "staging" }, id: "c1" }]),
      ScriptedModel.text("done")
    ])
    const agent = yield* Agent.make({
      toolkit: Tools,
      middleware: order === "changer first" ? [changer, hitl] : [hitl, changer]
    }).pipe(
      Effect.provide(Tools.toLayer({
        deploy: ({ env }) => Effect.as(Ref.update(log, (all) => [...all, env]), `deployed to ${env}`)
      })),
      Effect.provide(approvals ?? Layer.empty),
      Effect.provideService(LanguageModel.LanguageModel, model.model)
    )
    return { agent, log: Ref.get(log), asked: classifier.recorder.requests }
  })

const deployResults = (result: AgentResult.AgentResult<any>): Array<Prompt.ToolResultPart> =>
  result.state.messages.flatMap((message: Prompt.Message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

describe("RiskApproval: the verdict is about the call that runs", () => {
  for (const order of ["changer first", "changer last"] as const) {
    it.effect(`a wrapToolCall (${order}) changing staging to production after a low verdict: production is judged again and does not run unasked`, () =>
      Effect.gen(function*() {
        const { agent, asked, log } = yield* setupDrift(
          [verdict("low", "staging"), verdict("high", "production serves customers")],
          toProductionOnRun,
          order
        )
        const result = yield* agent.run("ship to staging", { threadId: "t" })
        assert.deepStrictEqual(yield* log, [])
        // the classifier judged the call that was to run as well
        const shown = (yield* asked).map((request) => JSON.stringify(request.prompt.content.at(-1)))
        assert.strictEqual(shown.length, 2)
        assert.include(shown[1]!, "production")
        const [answer] = deployResults(result)
        assert.isTrue(answer!.isFailure)
        assert.include(JSON.stringify(answer!.result), "changed after it was cleared to run")
      }))

    it.effect(`a wrapToolCall (${order}) changing the call to one judged low runs it`, () =>
      Effect.gen(function*() {
        const { agent, log } = yield* setupDrift(
          [verdict("low", "staging"), verdict("low", "fine")],
          toProductionOnRun,
          order
        )
        const result = yield* agent.run("ship to staging", { threadId: "t" })
        assert.strictEqual(result._tag, "Completed")
        assert.deepStrictEqual(yield* log, ["production"])
      }))

    it.effect(`with an Approvals service (${order}), the changed call is put to it: rejected, it does not run`, () =>
      Effect.gen(function*() {
        const seen = yield* Ref.make<ReadonlyArray<unknown>>([])
        const approvals = HumanInTheLoop.layerApprovals((request) =>
          Effect.as(
            Ref.update(seen, (all) => [...all, ...request.actionRequests.map((action) => action.args)]),
            request.actionRequests.map((action) => HumanInTheLoop.reject(action, "not production"))
          )
        )
        const { agent, log } = yield* setupDrift(
          [verdict("low", "staging"), verdict("high", "production")],
          toProductionOnRun,
          order,
          approvals
        )
        const result = yield* agent.run("ship to staging", { threadId: "t" })
        assert.deepStrictEqual(yield* log, [])
        assert.deepStrictEqual(yield* Ref.get(seen), [{ env: "production" }])
        assert.include(JSON.stringify(deployResults(result)[0]!.result), "not production")
      }))
  }

  it.effect("an afterModel listed before HumanInTheLoop rewriting the call after the verdict: judged again, not run unasked", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setupDrift(
        [verdict("low", "staging"), verdict("high", "production")],
        toProductionAfterVerdict,
        "changer first"
      )
      const result = yield* agent.run("ship to staging", { threadId: "t" })
      assert.deepStrictEqual(yield* log, [])
      assert.isTrue(deployResults(result)[0]!.isFailure)
    }))
})

describe("RiskApproval and calls that cannot run (issue 33, item 19)", () => {
  it.effect("a call whose arguments do not decode is not classified: the model gets the repair error", () =>
    Effect.gen(function*() {
      const classifier = yield* ScriptedModel.make([verdict("high", "prod")])
      const risky = yield* RiskApproval.make({}).pipe(Effect.provide(RiskApproval.layer(classifier.model)))
      const hitl = HumanInTheLoop.middleware({
        toolkit: Tools,
        interruptOn: { deploy: { allowedDecisions: ["approve", "reject"], when: risky } }
      })
      const model = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([{ name: "deploy", params: { env: 42 }, id: "c1" }]),
        ScriptedModel.text("done")
      ])
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [hitl] }).pipe(
        Effect.provide(Tools.toLayer({ deploy: ({ env }) => Effect.succeed(`deployed to ${env}`) })),
        Effect.provideService(LanguageModel.LanguageModel, model.model)
      )
      const result = yield* agent.run("deploy", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(yield* classifier.recorder.requests, [])
      const answered = result.state.messages.flatMap((message) => message.role === "tool" ? message.content : [])
      assert.isTrue(answered.length === 1 && answered[0]!.isFailure)
    }))
})
