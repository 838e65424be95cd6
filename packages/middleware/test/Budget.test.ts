import type { Prompt } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { KeyValueStore } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import type { AgentResult } from "@stepwise-agent/core"
import { Agent, AgentEvent, Checkpointer, Middleware, ModelProfile } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, FastCheck, Layer, Option, Stream } from "effect"
import * as Schema from "effect/Schema"
import * as Budget from "../src/Budget.js"
import * as ModelCallLimit from "../src/ModelCallLimit.js"

const Echo = Tool.make("echo", { parameters: { text: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Echo)
const ToolsLive = Tools.toLayer({ echo: ({ text }) => Effect.succeed(text) })

interface Spend {
  readonly input: number
  readonly output: number
}

/**
 * A model that calls a tool on every call that offers tools, and answers
 * "answer" on a call without them; call `i` reports `spends[i]`.
 */
const greedy = (spends: ReadonlyArray<Spend>): ReadonlyArray<ScriptedModel.Turn> =>
  spends.map(({ input, output }, i) => (request: ScriptedModel.Request) => {
    const usage = { inputTokens: input, outputTokens: output, totalTokens: input + output }
    return request.toolChoice === "none" || request.toolNames.length === 0
      ? ScriptedModel.text("answer", usage)
      : ScriptedModel.toolCalls([{ name: "echo", params: { text: `${i}` }, id: `c${i}` }], { usage })
  })

const uniform = (input: number, output: number, length = 30) => Array.from({ length }, () => ({ input, output }))

const completed = <S>(result: AgentResult.AgentResult<S>) => {
  assert.strictEqual(result._tag, "Completed")
  return result as Extract<AgentResult.AgentResult<S>, { _tag: "Completed" }>
}

/** Every tool call has a result and every result a call; the thread ends on an assistant message calling nothing. */
const assertWellPairedAnswer = (messages: ReadonlyArray<Prompt.Message>) => {
  const calls = messages.flatMap((m) => m.role === "assistant" ? m.content.filter((p) => p.type === "tool-call") : [])
  const results = messages.flatMap((m) => m.role === "tool" ? m.content : [])
  assert.deepStrictEqual(results.map((r) => r.id).sort(), calls.map((c) => c.id).sort())
  const last = messages[messages.length - 1]!
  assert.strictEqual(last.role, "assistant")
  if (last.role === "assistant") assert.isFalse(last.content.some((p) => p.type === "tool-call"))
}

const systemOf = (request: ScriptedModel.Request) => {
  const first = request.prompt.content[0]
  return first?.role === "system" ? first.content : ""
}

const gpt4o = { "gpt-4o": { inputPerMillion: 2.5, outputPerMillion: 10 } }

describe("Budget", () => {
  it.effect("tokens, softLanding: the call that would likely go over has no tools; the run ends on its answer", () =>
    Effect.gen(function*() {
      const budget = Budget.middleware({ tokens: { runLimit: 100 }, softLanding: true })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [budget], systemPrompt: "Be brief." })
      const result = completed(yield* agent.run("go", { threadId: "t" }))
      assert.strictEqual(result.text, "answer")
      // 0 spent, then 40, then 80: 80 + 40 (the last call) > 100, so the third call lands
      const requests = yield* ScriptedModel.requests
      assert.deepStrictEqual(requests.map((r) => r.toolChoice), ["auto", "auto", "none"])
      assert.deepStrictEqual(requests.map(systemOf), [
        "Be brief.",
        "Be brief.",
        `Be brief.\n\n${ModelCallLimit.lastCallPrompt}`
      ])
      assert.strictEqual(result.state.budgetRunTokens, 120)
      assert.strictEqual(result.state.budgetThreadTokens, 120)
      assert.strictEqual(result.state.budgetLastCallTokens, 40)
      assertWellPairedAnswer(result.state.messages)
    }).pipe(Effect.provide([ScriptedModel.layer(greedy(uniform(30, 10))), ToolsLive])))

  it.effect("tokens, without softLanding: the run ends with a notice once the budget is spent", () =>
    Effect.gen(function*() {
      const budget = Budget.middleware({ tokens: { runLimit: 100 } })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [budget] })
      const result = completed(yield* agent.run("go", { threadId: "t" }))
      // 0, 40, 80 spent before the calls; 120 ≥ 100 before the fourth: refused
      assert.strictEqual(result.text, "Budget reached: run tokens (120/100).")
      assert.deepStrictEqual((yield* ScriptedModel.requests).map((r) => r.toolChoice), ["auto", "auto", "auto"])
      assertWellPairedAnswer(result.state.messages)
    }).pipe(Effect.provide([ScriptedModel.layer(greedy(uniform(30, 10))), ToolsLive])))

  it.effect("cost: priced from the agent's model by name, per million tokens; softLanding lands on the cost", () =>
    Effect.gen(function*() {
      const budget = Budget.middleware({ cost: { runLimit: 1, prices: gpt4o }, softLanding: true })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [budget] })
      const result = completed(yield* agent.run("go", { threadId: "t" }))
      // each call: 100k in × 2.5/M + 10k out × 10/M = 0.35; 0.70 + 0.35 > 1 lands the third call
      assert.deepStrictEqual((yield* ScriptedModel.requests).map((r) => r.toolChoice), ["auto", "auto", "none"])
      assert.strictEqual(result.text, "answer")
      assert.closeTo(result.state.budgetRunCost, 1.05, 1e-9)
      assert.closeTo(result.state.budgetLastCallCost, 0.35, 1e-9)
      assert.strictEqual(result.state.budgetRunTokens, 330_000)
    }).pipe(Effect.provide([
      ScriptedModel.layer(greedy(uniform(100_000, 10_000))),
      ToolsLive,
      ModelProfile.layerModel("openai/gpt-4o-2024-08-06")
    ])))

  it.effect("cost: a model the list does not price fails the run before any call, naming it", () =>
    Effect.gen(function*() {
      const budget = Budget.middleware({ cost: { threadLimit: 1, prices: gpt4o } })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [budget] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "UnpricedModel")
      if (error._tag !== "UnpricedModel") return
      assert.strictEqual(error.model, "claude-sonnet-4-5")
      assert.include(error.message, "no price for the model \"claude-sonnet-4-5\"")
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
      // an unnamed model too
      const unnamed = yield* Effect.flip(
        agent.run("go", { threadId: "u" }).pipe(Effect.provideService(ModelProfile.CurrentModel, Option.none()))
      )
      assert.strictEqual(unnamed._tag, "UnpricedModel")
    }).pipe(Effect.provide([
      ScriptedModel.layer(greedy(uniform(10, 5))),
      ToolsLive,
      ModelProfile.layerModel("claude-sonnet-4-5")
    ])))

  it.effect("error: fails with BudgetExceeded naming each limit reached, before the refused call", () =>
    Effect.gen(function*() {
      const budget = Budget.middleware({ tokens: { runLimit: 50, threadLimit: 80 }, exitBehavior: "error" })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [budget] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "BudgetExceeded")
      if (error._tag !== "BudgetExceeded") return
      assert.deepStrictEqual(error.reached, [
        { budget: "tokens", scope: "thread", spent: 80, limit: 80 },
        { budget: "tokens", scope: "run", spent: 80, limit: 50 }
      ])
      assert.include(error.message, "budget reached: thread tokens (80/80), run tokens (80/50)")
      assert.strictEqual((yield* ScriptedModel.requests).length, 2)
    }).pipe(Effect.provide([ScriptedModel.layer(greedy(uniform(30, 10))), ToolsLive])))

  it.effect("the thread's spending survives a checkpoint: a new agent on the same store goes on from it", () =>
    Effect.gen(function*() {
      const make = Effect.gen(function*() {
        const budget = Budget.middleware({ tokens: { threadLimit: 100 } })
        return yield* Agent.make({ toolkit: Tools, middleware: [budget] })
      })
      const first = completed(yield* (yield* make).run("one", { threadId: "t" }))
      assert.strictEqual(first.text, "a")
      assert.strictEqual(first.state.budgetThreadTokens, 60)
      const second = completed(yield* (yield* make).run("two", { threadId: "t" }))
      assert.strictEqual(second.text, "b")
      assert.deepStrictEqual([second.state.budgetThreadTokens, second.state.budgetRunTokens], [120, 60])
      const third = completed(yield* (yield* make).run("three", { threadId: "t" }))
      assert.strictEqual(third.text, "Budget reached: thread tokens (120/100).")
      assert.strictEqual((yield* ScriptedModel.requests).length, 2)
    }).pipe(Effect.provide([
      ScriptedModel.layer([
        ScriptedModel.text("a", { inputTokens: 50, outputTokens: 10, totalTokens: 60 }),
        ScriptedModel.text("b", { inputTokens: 50, outputTokens: 10, totalTokens: 60 })
      ]),
      ToolsLive,
      Checkpointer.layerKeyValueStore().pipe(Layer.provide(KeyValueStore.layerMemory))
    ])))

  it.effect("a resumed run keeps its spending, also when the run waited before the budget counted the call", () =>
    Effect.gen(function*() {
      const budget = Budget.middleware({ tokens: { runLimit: 100 }, softLanding: true })
      // listed after the budget: its afterModel runs first and waits before the budget's afterModel counts
      const pause = Middleware.make({
        name: "pause",
        wait: { request: Schema.String, decision: Schema.String },
        afterModel: ({ resume, step }) =>
          Effect.succeed(step === 1 && Option.isNone(resume) ? { interrupt: "wait" } : undefined)
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [budget, pause] })
      const waiting = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(waiting._tag, "Interrupted")
      const result = completed(yield* agent.resume("t", "go on"))
      assert.deepStrictEqual((yield* ScriptedModel.requests).map((r) => r.toolChoice), ["auto", "auto", "none"])
      assert.strictEqual(result.state.budgetRunTokens, 120)
      assert.strictEqual(result.text, "answer")
    }).pipe(Effect.provide([ScriptedModel.layer(greedy(uniform(30, 10))), ToolsLive])))

  it.effect("a new run resets the run's spending and lands again only on its own spending", () =>
    Effect.gen(function*() {
      const budget = Budget.middleware({ tokens: { runLimit: 100 }, softLanding: true })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [budget] })
      yield* agent.run("one", { threadId: "t" })
      const second = completed(yield* agent.run("two", { threadId: "t" }))
      // the last call of the first run (40) is the estimate: 0 + 40 ≤ 100, tools stay
      assert.deepStrictEqual(
        (yield* ScriptedModel.requests).map((r) => r.toolChoice),
        ["auto", "auto", "none", "auto", "auto", "none"]
      )
      assert.deepStrictEqual([second.state.budgetRunTokens, second.state.budgetThreadTokens], [120, 240])
    }).pipe(Effect.provide([ScriptedModel.layer(greedy(uniform(30, 10))), ToolsLive])))

  it.effect("reports the landing and the end on the event stream", () =>
    Effect.gen(function*() {
      const budget = Budget.middleware({ tokens: { runLimit: 70 }, softLanding: true, name: "budget" })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [budget] })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("go", { threadId: "t" })))
      const decisions = events.filter(AgentEvent.$is("MiddlewareDecision")).map((e) => [e.hook, e.decision])
      assert.deepStrictEqual(decisions, [[
        "wrapModelCall",
        "the next call would likely go over the run tokens budget (40 spent of 70, the last call took 40): tools disabled"
      ]])
    }).pipe(Effect.provide([ScriptedModel.layer(greedy(uniform(30, 10))), ToolsLive])))

  it.effect.prop(
    "no call starts once a limit is spent; with softLanding a call lands exactly when the last call's spending would go over; the thread ends well paired on an assistant message",
    {
      runLimit: FastCheck.integer({ min: 0, max: 400 }),
      spends: FastCheck.array(
        FastCheck.record({
          input: FastCheck.integer({ min: 0, max: 80 }),
          output: FastCheck.integer({ min: 1, max: 40 })
        }),
        { minLength: 40, maxLength: 40 }
      ),
      softLanding: FastCheck.boolean()
    },
    ({ runLimit, softLanding, spends }) =>
      Effect.gen(function*() {
        const budget = Budget.middleware({ tokens: { runLimit }, softLanding })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [budget], maxSteps: 100 })
        const result = completed(yield* agent.run("go", { threadId: "t" }))
        const requests = yield* ScriptedModel.requests
        const cost = spends.map((s) => s.input + s.output)
        let spent = 0
        for (const [i, request] of requests.entries()) {
          assert.isBelow(spent, runLimit, `call ${i} started with the budget spent`)
          const lands = softLanding && i > 0 && spent + cost[i - 1]! > runLimit
          assert.strictEqual(request.toolChoice, lands ? "none" : "auto", `call ${i}`)
          spent += cost[i]!
        }
        const landed = requests.length > 0 && requests[requests.length - 1]!.toolChoice === "none"
        // the run stops on the landing's answer, or because the budget was spent
        assert.isTrue(landed || spent >= runLimit)
        assert.strictEqual(result.text, landed ? "answer" : `Budget reached: run tokens (${spent}/${runLimit}).`)
        assert.strictEqual(result.state.budgetRunTokens, spent)
        assertWellPairedAnswer(result.state.messages)
      }).pipe(Effect.provide([ScriptedModel.layer(greedy(spends)), ToolsLive])),
    { fastCheck: { numRuns: 40 } }
  )

  describe("bad options", () => {
    const invalid = (options: Budget.Options) =>
      Effect.flip(Middleware.build(Budget.middleware(options))).pipe(Effect.map((e) => [e._tag, e.option] as const))

    it.effect("needs a budget with at least one limit", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* invalid({}), ["InvalidOptions", "tokens"])
        assert.deepStrictEqual(yield* invalid({ tokens: {} }), ["InvalidOptions", "tokens.threadLimit"])
        assert.deepStrictEqual(yield* invalid({ cost: { prices: gpt4o } }), ["InvalidOptions", "cost.threadLimit"])
      }))

    it.effect("rejects negative limits, a run limit above the thread limit and an unknown exit behavior", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* invalid({ tokens: { runLimit: -1 } }), ["InvalidOptions", "tokens.runLimit"])
        assert.deepStrictEqual(
          yield* invalid({ tokens: { runLimit: 10, threadLimit: 5 } }),
          ["InvalidOptions", "tokens.runLimit"]
        )
        assert.deepStrictEqual(
          yield* invalid({ tokens: { runLimit: 1 }, exitBehavior: "continue" as any }),
          ["InvalidOptions", "exitBehavior"]
        )
      }))

    it.effect("a cost budget needs prices of at least 0 for at least one model", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* invalid({ cost: { runLimit: 1, prices: {} } }), ["InvalidOptions", "cost.prices"])
        assert.deepStrictEqual(
          yield* invalid({ cost: { runLimit: 1, prices: { m: { inputPerMillion: -1, outputPerMillion: 1 } } } }),
          ["InvalidOptions", "cost.prices.m.inputPerMillion"]
        )
        assert.deepStrictEqual(
          yield* invalid({ cost: { runLimit: 1, prices: { m: { input: 1 } as any } } }),
          ["InvalidOptions", "cost.prices.m.input"]
        )
      }))
  })
})
