/**
 * LangChain JS v1's own cases for `summarizationMiddleware`, `contextEditingMiddleware` and
 * `todoListMiddleware` (`libs/langchain/src/agents/middleware/tests/{summarization,contextEditing,todoList}.test.ts`),
 * asserted through Stepwise's public API. Each test is named after LangChain's case.
 */
import { Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ContextEditing, Summarization, TodoList } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Schema } from "effect"

const Search = Tool.make("search", { parameters: { query: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Search)
const ToolsLive = Tools.toLayer({ search: ({ query }) => Effect.succeed(`results for ${query}`) })

const user = (text: string) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })
const assistant = (text: string) => Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text })] })
const call = (id: string, name = "search") =>
  Prompt.makeMessage("assistant", {
    content: [Prompt.makePart("tool-call", { id, name, params: { query: id }, providerExecuted: false })]
  })
const result = (id: string, text: string, name = "search") =>
  Prompt.makeMessage("tool", {
    content: [Prompt.makePart("tool-result", { id, name, result: text, isFailure: false, providerExecuted: false })]
  })

const textOf = (message: Prompt.Message | undefined): string => {
  if (message === undefined) return ""
  if (typeof message.content === "string") return message.content
  return message.content.map((part) => (part.type === "text" ? part.text : "")).join("")
}

const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

const x = (n: number) => "x".repeat(n)

describe("LangChain parity: summarizationMiddleware", () => {
  const withSummarizer = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.gen(function*() {
      const summarizer = yield* ScriptedModel.make([ScriptedModel.text("Previous conversation covered: a project.")])
      const value = yield* Effect.provide(effect, Summarization.layer(summarizer.model))
      return { value, summarizerCalls: (yield* summarizer.recorder.requests).length }
    })

  const history = [
    user(`I'm working on a complex software project. ${x(200)}`),
    assistant(`I understand your project. Let me help. ${x(200)}`),
    user(`Here are more details about the architecture. ${x(200)}`),
    assistant(`That's interesting. Tell me more. ${x(200)}`),
    user(`More information here. ${x(200)}`),
    assistant(`Got it. ${x(200)}`),
    user("What do you recommend?")
  ]

  it.effect("should trigger summarization when token count exceeds threshold", () =>
    Effect.gen(function*() {
      const { summarizerCalls, value: run } = yield* withSummarizer(Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [Summarization.middleware({ trigger: { tokens: 50 }, keep: { messages: 2 } })]
        })
        return yield* agent.run(history, { threadId: "t" })
      }))
      assert.strictEqual(summarizerCalls, 1)
      const [summary] = run.state.messages
      assert.strictEqual(summary!.role, "user")
      assert.include(textOf(summary), "Here is a summary of the conversation to date")
      assert.include(textOf(summary), "Previous conversation covered:")
      // summary + kept messages + new response
      assert.isAtMost(run.state.messages.length, 4)
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("Use Effect.")]), ToolsLive))))

  it.effect("should not trigger summarization when below token threshold", () =>
    Effect.gen(function*() {
      const { summarizerCalls, value: run } = yield* withSummarizer(Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [Summarization.middleware({ trigger: { tokens: 100_000 }, keep: { messages: 2 } })]
        })
        return yield* agent.run(history, { threadId: "t" })
      }))
      assert.strictEqual(summarizerCalls, 0)
      assert.strictEqual(run.state.messages.length, history.length + 1)
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("Use Effect.")]), ToolsLive))))

  it.effect("should handle trigger set to undefined (disabled)", () =>
    Effect.gen(function*() {
      const { summarizerCalls } = yield* withSummarizer(Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [Summarization.middleware({})] })
        return yield* agent.run(history, { threadId: "t" })
      }))
      assert.strictEqual(summarizerCalls, 0)
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("Use Effect.")]), ToolsLive))))

  it.effect("should not start preserved messages with AI message containing tool calls", () =>
    Effect.gen(function*() {
      const withPair = [
        user(`First message with some content to take up tokens. ${x(400)}`),
        assistant(`First response. ${x(400)}`),
        user(`Second message with more content to build up tokens. ${x(400)}`),
        assistant(`Second response. ${x(400)}`),
        user(`Third message with even more content. ${x(400)}`),
        assistant(`Third response. ${x(400)}`),
        user("Let me search for information."),
        call("call_1"),
        result("call_1", "Search results"),
        user("What did you find?")
      ]
      const { value: run } = yield* withSummarizer(Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [Summarization.middleware({ trigger: { tokens: 100 }, keep: { messages: 4 } })]
        })
        return yield* agent.run(withPair, { threadId: "t" })
      }))
      const messages = run.state.messages
      const summaryIndex = messages.findIndex((message) => textOf(message).includes("Here is a summary"))
      assert.isAtLeast(summaryIndex, 0)
      const preserved = messages.slice(summaryIndex + 1)
      assert.isAbove(preserved.length, 0)
      const first = preserved[0]!
      const startsWithCalls = first.role === "assistant" &&
        typeof first.content !== "string" && first.content.some((part) => part.type === "tool-call")
      assert.isFalse(startsWithCalls)
      assert.notStrictEqual(first.role, "tool")
      // the call and its result stay together
      assert.strictEqual(toolResults(messages).map((part) => part.id).join(), "call_1")
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("Found it.")]), ToolsLive))))

  it.effect("should preserve AI/Tool message pairs together", () =>
    Effect.gen(function*() {
      const withPair = [
        user(`Old conversation part 1. ${x(100)}`),
        assistant(`Old response 1. ${x(100)}`),
        user(`Old conversation part 2. ${x(100)}`),
        assistant(`Old response 2. ${x(100)}`),
        call("call_123"),
        result("call_123", "Weather in Paris: Rainy, 15°C"),
        user("Thanks for checking the weather!")
      ]
      const { value: run } = yield* withSummarizer(Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [Summarization.middleware({ trigger: { tokens: 100 }, keep: { messages: 2 } })]
        })
        return yield* agent.run(withPair, { threadId: "t" })
      }))
      const messages = run.state.messages
      const hasCall = messages.some((message) =>
        message.role === "assistant" && typeof message.content !== "string" &&
        message.content.some((part) => part.type === "tool-call" && part.id === "call_123")
      )
      const hasResult = toolResults(messages).some((part) => part.id === "call_123")
      assert.strictEqual(hasCall, hasResult)
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("Take an umbrella.")]), ToolsLive))))
})

describe("LangChain parity: contextEditingMiddleware", () => {
  const history = (results: number, size: number) => [
    user("start"),
    ...Array.from({ length: results }, (_, i) => [call(`c${i}`), result(`c${i}`, `${i}:${x(size)}`)]).flat(),
    user("go on")
  ]
  const sentResults = Effect.map(ScriptedModel.requests, (requests) => toolResults(requests[0]!.prompt.content))

  it.effect("default behavior: should use not clear anything if the conversation is below the default threshold", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [ContextEditing.middleware()] })
      yield* agent.run(history(5, 100), { threadId: "t" })
      assert.isFalse((yield* sentResults).some(ContextEditing.isCleared))
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("ok")]), ToolsLive))))

  it.effect("custom ClearToolUsesEdit configuration: should keep the specified number of most recent tool results", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [ContextEditing.middleware({ edits: [ContextEditing.clearToolUses({ trigger: 100, keep: 2 })] })]
      })
      yield* agent.run(history(5, 400), { threadId: "t" })
      const sent = yield* sentResults
      assert.deepStrictEqual(sent.map(ContextEditing.isCleared), [true, true, true, false, false])
      assert.strictEqual(sent[0]!.result, "[cleared]")
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("ok")]), ToolsLive))))

  it.effect("custom ClearToolUsesEdit configuration: should exclude specified tools from clearing", () =>
    Effect.gen(function*() {
      const Other = Tool.make("important", { parameters: { query: Schema.String }, success: Schema.String })
      const Both = Toolkit.make(Search, Other)
      const agent = yield* Agent.make({
        toolkit: Both,
        middleware: [
          ContextEditing.middleware({
            edits: [ContextEditing.clearToolUses({ trigger: 100, keep: 0, excludeTools: ["important"] })]
          })
        ]
      }).pipe(Effect.provide(Both.toLayer({ search: () => Effect.succeed(""), important: () => Effect.succeed("") })))
      yield* agent.run([
        user("start"),
        call("a"),
        result("a", x(400)),
        call("b", "important"),
        result("b", x(400), "important"),
        user("go on")
      ], { threadId: "t" })
      const sent = yield* sentResults
      assert.deepStrictEqual(sent.map((part) => [part.name, ContextEditing.isCleared(part)]), [
        ["search", true],
        ["important", false]
      ])
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")]))))

  it.effect("custom ClearToolUsesEdit configuration: should clear tool inputs when clearToolInputs is true", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [
          ContextEditing.middleware({
            edits: [ContextEditing.clearToolUses({ trigger: 100, keep: 0, clearToolInputs: true })]
          })
        ]
      })
      yield* agent.run(history(1, 800), { threadId: "t" })
      const [request] = yield* ScriptedModel.requests
      const calls = request!.prompt.content.flatMap((message) =>
        message.role === "assistant" ? message.content.filter((part) => part.type === "tool-call") : []
      )
      assert.deepStrictEqual(calls.map((part) => part.params), [{}])
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("ok")]), ToolsLive))))

  it.effect("custom ClearToolUsesEdit configuration: should use custom placeholder text", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [
          ContextEditing.middleware({
            edits: [ContextEditing.clearToolUses({ trigger: 100, keep: 0, placeholder: "[removed]" })]
          })
        ]
      })
      yield* agent.run(history(1, 800), { threadId: "t" })
      assert.strictEqual((yield* sentResults)[0]!.result, "[removed]")
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("ok")]), ToolsLive))))
})

describe("LangChain parity: todoListMiddleware", () => {
  const write = (id: string) => ({
    name: "write_todos",
    params: { todos: [{ content: "Write the code", status: "in_progress" }] },
    id
  })
  const systemOf = (request: ScriptedModel.Request) => {
    const first = request.prompt.content[0]
    return first?.role === "system" ? first.content : ""
  }

  it.effect("should add the system prompt to the model request", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [TodoList.middleware()] })
      yield* agent.run("plan", { threadId: "t" })
      const [request] = yield* ScriptedModel.requests
      assert.include(systemOf(request!), TodoList.defaultSystemPrompt)
      assert.include(request!.toolNames, "write_todos")
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("ok")]), ToolsLive))))

  it.effect("should add the custom system prompt to the model request and custom tool description", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [TodoList.middleware({ systemPrompt: "Custom todo prompt", toolDescription: "Custom description" })]
      })
      yield* agent.run("plan", { threadId: "t" })
      const [request] = yield* ScriptedModel.requests
      assert.include(systemOf(request!), "Custom todo prompt")
      assert.notInclude(systemOf(request!), TodoList.defaultSystemPrompt)
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("ok")]), ToolsLive))))

  it.effect("parallel write_todos detection: should reject parallel write_todos calls with error messages", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [TodoList.middleware()] })
      const run = yield* agent.run("plan", { threadId: "t" })
      const results = toolResults(run.state.messages)
      assert.deepStrictEqual(results.map((part) => part.isFailure), [true, true])
      assert.include(JSON.stringify(results[0]!.result), "should never be called multiple times in parallel")
      assert.deepStrictEqual(run.state.todos, [])
    }).pipe(Effect.provide(Layer.merge(
      ScriptedModel.layer([ScriptedModel.toolCalls([write("1"), write("2")]), ScriptedModel.text("ok")]),
      ToolsLive
    ))))

  it.effect("parallel write_todos detection: should reject parallel write_todos calls even when mixed with other tools", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [TodoList.middleware()] })
      const run = yield* agent.run("plan", { threadId: "t" })
      const results = toolResults(run.state.messages)
      assert.deepStrictEqual(results.map((part) => [part.name, part.isFailure]), [
        ["write_todos", true],
        ["search", false],
        ["write_todos", true]
      ])
    }).pipe(Effect.provide(Layer.merge(
      ScriptedModel.layer([
        ScriptedModel.toolCalls([write("1"), { name: "search", params: { query: "q" }, id: "s" }, write("2")]),
        ScriptedModel.text("ok")
      ]),
      ToolsLive
    ))))

  it.effect("parallel write_todos detection: should allow a single write_todos call", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [TodoList.middleware()] })
      const run = yield* agent.run("plan", { threadId: "t" })
      assert.deepStrictEqual(toolResults(run.state.messages).map((part) => part.isFailure), [false])
      assert.deepStrictEqual(run.state.todos, [{ content: "Write the code", status: "in_progress" }])
    }).pipe(Effect.provide(Layer.merge(
      ScriptedModel.layer([ScriptedModel.toolCalls([write("1")]), ScriptedModel.text("ok")]),
      ToolsLive
    ))))
})
