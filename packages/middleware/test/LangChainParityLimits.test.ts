/**
 * LangChain JS v1's own cases for `modelCallLimitMiddleware` and `toolCallLimitMiddleware`
 * (`libs/langchain/src/agents/middleware/tests/{modelCallLimit,toolCallLimit}.test.ts`), asserted through
 * Stepwise's public API. Each test is named after LangChain's case; the texts are ours (the guides list them).
 */
import type { Prompt } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ModelCallLimit, ToolCallLimit } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Ref, Schema } from "effect"
import { runLogged } from "./support/parityRun.js"

const Search = Tool.make("search", { parameters: { query: Schema.String }, success: Schema.String })
const Calculator = Tool.make("calculator", { parameters: { expression: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Search, Calculator)

/** The tools, counting their runs in a `Ref` the test reads. */
const toolsCounting = (runs: Ref.Ref<ReadonlyArray<string>>) =>
  Tools.toLayer({
    search: ({ query }) => Effect.as(Ref.update(runs, (all) => [...all, "search"]), `results for ${query}`),
    calculator: ({ expression }) => Effect.as(Ref.update(runs, (all) => [...all, "calculator"]), `= ${expression}`)
  })

const search = (query: string, id: string) => ({ name: "search", params: { query }, id })
const calculator = (expression: string, id: string) => ({ name: "calculator", params: { expression }, id })

const run = <R>(
  script: ReadonlyArray<ScriptedModel.Turn>,
  body: (runs: Ref.Ref<ReadonlyArray<string>>) => Effect.Effect<void, unknown, R>
) => runLogged(script, toolsCounting, body)

const lastText = (messages: ReadonlyArray<Prompt.Message>): string => {
  const last = messages.at(-1)
  if (last === undefined) return ""
  if (typeof last.content === "string") return last.content
  return last.content.map((part) => (part.type === "text" ? part.text : "")).join("")
}

const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

describe("LangChain parity: modelCallLimitMiddleware", () => {
  const threeCalls = ScriptedModel.toolCalls([
    search("a", "call_1"),
    calculator("1+1", "call_2"),
    search("b", "call_3")
  ])
  const script = [
    threeCalls,
    ScriptedModel.text("baz"),
    ScriptedModel.toolCalls([search("c", "call_1")]),
    ScriptedModel.toolCalls([calculator("2+2", "call_1")]),
    ScriptedModel.toolCalls([search("d", "call_1")]),
    ScriptedModel.text("fuzbaz")
  ]

  it.effect("run limit with exit behavior end: should not throw if the run limit exceeds", () =>
    run(script, () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [ModelCallLimit.middleware({ runLimit: 2, exitBehavior: "end" })]
        })
        const first = yield* agent.run("Hello, world!", { threadId: "t" })
        assert.strictEqual(lastText(first.state.messages), "baz")
        const second = yield* agent.run("Hello, world!", { threadId: "t" })
        assert.strictEqual(second._tag, "Completed")
        assert.strictEqual(lastText(second.state.messages), "Model call limit reached: run limit (2/2).")
        assert.strictEqual((yield* ScriptedModel.requests).length, 4)
      })))

  it.effect("run limit with exit behavior error: should not throw if the run limit exceeds", () =>
    run(script, () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [ModelCallLimit.middleware({ runLimit: 2, exitBehavior: "error" })]
        })
        const first = yield* agent.run("Hello, world!", { threadId: "t" })
        assert.strictEqual(lastText(first.state.messages), "baz")
        const error = yield* Effect.flip(agent.run("Hello, world!", { threadId: "t" }))
        assert.strictEqual(error._tag, "ModelCallLimitExceeded")
        if (error._tag !== "ModelCallLimitExceeded") return
        assert.strictEqual(error.runCount, 2)
        assert.strictEqual(error.runLimit, 2)
        assert.strictEqual((yield* ScriptedModel.requests).length, 4)
      })))

  const forever = Array.from({ length: 8 }, (_, i) => ScriptedModel.toolCalls([search(`${i}`, "call_1")]))

  it.effect("thread limit with exit behavior end: should throw an error if the thread limit is exceeded", () =>
    run(forever, () =>
      Effect.gen(function*() {
        const limit = ModelCallLimit.middleware({ threadLimit: 3, exitBehavior: "end" })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
        const first = yield* agent.run("Hello, world!", { threadId: "test-123" })
        assert.strictEqual(first.state.threadModelCallCount, 3)
        assert.strictEqual(lastText(first.state.messages), "Model call limit reached: thread limit (3/3).")
        // another agent on the same checkpointer: the thread's count is stored
        const again = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
        const second = yield* again.run("Hello, world!", { threadId: "test-123" })
        assert.strictEqual(second.state.threadModelCallCount, 3)
        assert.strictEqual(second.state.runModelCallCount, 0)
        assert.strictEqual(lastText(second.state.messages), "Model call limit reached: thread limit (3/3).")
        assert.strictEqual((yield* ScriptedModel.requests).length, 3)
      })))

  it.effect("thread limit with exit behavior error: should throw an error if the thread limit is exceeded", () =>
    run(forever, () =>
      Effect.gen(function*() {
        const limit = ModelCallLimit.middleware({ threadLimit: 3, exitBehavior: "error" })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
        const error = yield* Effect.flip(agent.run("Hello, world!", { threadId: "test-123" }))
        assert.strictEqual(error._tag, "ModelCallLimitExceeded")
        if (error._tag !== "ModelCallLimitExceeded") return
        assert.strictEqual(error.threadCount, 3)
        assert.strictEqual(error.threadLimit, 3)
        assert.strictEqual((yield* ScriptedModel.requests).length, 3)
      })))
})

describe("LangChain parity: toolCallLimitMiddleware", () => {
  it.effect("should persist thread count across multiple runs", () =>
    run([
      ScriptedModel.toolCalls([search("test1", "1"), calculator("1+1", "2")]),
      ScriptedModel.text("First run response"),
      ScriptedModel.toolCalls([search("test2", "3"), calculator("2+2", "4")]),
      ScriptedModel.text("Second run response"),
      ScriptedModel.toolCalls([search("test3", "5")]),
      ScriptedModel.text("Should be blocked")
    ], (runs) =>
      Effect.gen(function*() {
        const limit = ToolCallLimit.middleware({ threadLimit: 4, exitBehavior: "end" })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
        yield* agent.run("First question", { threadId: "test-thread" })
        yield* agent.run("Second question", { threadId: "test-thread" })
        const agent2 = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
        const final = yield* agent2.run("Third question", { threadId: "test-thread" })
        const last = lastText(final.state.messages)
        assert.include(last, "thread limit")
        assert.include(last, "5/4")
        const ran = yield* Ref.get(runs)
        assert.strictEqual(ran.filter((name) => name === "search").length, 2)
        assert.strictEqual(ran.filter((name) => name === "calculator").length, 2)
      })))

  it.effect("should block exceeded tools but let other tools continue", () =>
    run([
      ScriptedModel.toolCalls([search("q1", "1"), calculator("1+1", "2")]),
      ScriptedModel.toolCalls([search("q2", "3"), calculator("2+2", "4")]),
      ScriptedModel.toolCalls([search("q3", "5"), calculator("3+3", "6")]),
      ScriptedModel.text("Final response")
    ], (runs) =>
      Effect.gen(function*() {
        const limit = ToolCallLimit.middleware({ toolName: "search", threadLimit: 2, exitBehavior: "continue" })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
        const result = yield* agent.run("Question", { threadId: "test_thread" })
        assert.strictEqual(lastText(result.state.messages), "Final response")
        const results = toolResults(result.state.messages)
        const ofSearch = results.filter((part) => part.name === "search")
        assert.deepStrictEqual(ofSearch.map((part) => part.isFailure), [false, false, true])
        assert.deepStrictEqual(results.filter((part) => part.name === "calculator").map((part) => part.isFailure), [
          false,
          false,
          false
        ])
        const blocked = JSON.stringify(ofSearch[2]!.result)
        assert.include(blocked, "limit")
        assert.include(blocked, "search")
        const ran = yield* Ref.get(runs)
        assert.strictEqual(ran.filter((name) => name === "search").length, 2)
      })))

  it.effect("should only trigger when limit is exceeded (>), not when reached (==)", () =>
    run([
      ScriptedModel.toolCalls([search("a", "1")]),
      ScriptedModel.toolCalls([search("b", "2")]),
      ScriptedModel.text("within the limits"),
      ScriptedModel.toolCalls([search("c", "3")]),
      ScriptedModel.toolCalls([search("d", "4")]),
      ScriptedModel.text("never")
    ], (runs) =>
      Effect.gen(function*() {
        const limit = ToolCallLimit.middleware({ threadLimit: 3, runLimit: 2, exitBehavior: "end" })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
        // the run reaches its limit of 2 without exceeding it
        const first = yield* agent.run("go", { threadId: "t" })
        assert.strictEqual(lastText(first.state.messages), "within the limits")
        // the thread reaches 3, then the fourth call exceeds it
        const second = yield* agent.run("go on", { threadId: "t" })
        assert.include(lastText(second.state.messages), "thread limit (4/3)")
        assert.strictEqual((yield* Ref.get(runs)).length, 3)
      })))

  it.effect("should throw ToolCallLimitExceededError when exitBehavior is error", () =>
    run(
      [ScriptedModel.toolCalls([search("a", "1")]), ScriptedModel.toolCalls([search("b", "2")])],
      (runs) =>
        Effect.gen(function*() {
          const limit = ToolCallLimit.middleware({ toolName: "search", runLimit: 1, exitBehavior: "error" })
          const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
          const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
          assert.strictEqual(error._tag, "ToolCallLimitExceeded")
          if (error._tag !== "ToolCallLimitExceeded") return
          assert.strictEqual(error.toolName, "search")
          assert.strictEqual(error.runLimit, 1)
          assert.strictEqual(error.runCount, 2)
          assert.strictEqual((yield* Ref.get(runs)).length, 1)
        })
    ))

  it.effect("should throw an error if run limit exceeds thread limit", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Agent.make({ toolkit: Tools, middleware: [ToolCallLimit.middleware({ threadLimit: 1, runLimit: 2 })] })
      )
      assert.strictEqual(error._tag, "InvalidOptions")
    }).pipe(
      Effect.provide(Layer.mergeAll(ScriptedModel.layer([]), toolsCounting(Ref.unsafeMake<ReadonlyArray<string>>([]))))
    ))
})
