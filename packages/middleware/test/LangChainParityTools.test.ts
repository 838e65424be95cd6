/**
 * LangChain JS v1's own cases for `toolEmulatorMiddleware`, `llmToolSelectorMiddleware`,
 * `toolErrorMiddleware` and `dynamicSystemPromptMiddleware`
 * (`libs/langchain/src/agents/middleware/tests/{toolEmulator,llmToolSelector,toolError,dynamicSystemPrompt}.test.ts`),
 * asserted through Stepwise's public API. Each test is named after LangChain's case.
 */
import type { Prompt } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { DynamicSystemPrompt, LlmToolSelector, ToolEmulator, ToolErrors, ToolRetry } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Schema } from "effect"

const tool = (name: string) =>
  Tool.make(name, { description: `The ${name} tool`, parameters: { input: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(tool("get_weather"), tool("search"), tool("calculator"), tool("send_email"))

/** Real handlers that log each run. */
const toolsLive = (ran: Array<string>) =>
  Tools.toLayer({
    get_weather: ({ input }) => Effect.sync(() => (ran.push(`get_weather:${input}`), "real weather")),
    search: ({ input }) => Effect.sync(() => (ran.push(`search:${input}`), "real search")),
    calculator: ({ input }) => Effect.sync(() => (ran.push(`calculator:${input}`), "real calculator")),
    send_email: ({ input }) => Effect.sync(() => (ran.push(`send_email:${input}`), "real email"))
  })

const provide = (script: ReadonlyArray<ScriptedModel.Turn>, ran: Array<string> = []) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), toolsLive(ran)))

const callOf = (name: string, id: string) => ({ name, params: { input: "x" }, id })

const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

describe("LangChain parity: toolEmulatorMiddleware", () => {
  it.effect("Integration with createAgent: should emulate tools in agent execution", () => {
    const ran: Array<string> = []
    return Effect.gen(function*() {
      const emulator = yield* ScriptedModel.make([ScriptedModel.text("Sunny, 72°F")])
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [ToolEmulator.middleware({ model: emulator.model })]
      })
      const result = yield* agent.run("weather?", { threadId: "t" })
      assert.deepStrictEqual(ran, [])
      assert.deepStrictEqual(toolResults(result.state.messages).map((part) => part.result), ["Sunny, 72°F"])
      assert.strictEqual((yield* emulator.recorder.requests).length, 1)
    }).pipe(provide([ScriptedModel.toolCalls([callOf("get_weather", "1")]), ScriptedModel.text("done")], ran))
  })

  it.effect("Integration with createAgent: should allow non-emulated tools to execute normally", () => {
    const ran: Array<string> = []
    return Effect.gen(function*() {
      const emulator = yield* ScriptedModel.make([ScriptedModel.text("Emulated weather")])
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [ToolEmulator.middleware({ tools: ["get_weather"], model: emulator.model })]
      })
      const result = yield* agent.run("both", { threadId: "t" })
      assert.deepStrictEqual(ran, ["calculator:x"])
      assert.deepStrictEqual(toolResults(result.state.messages).map((part) => part.result), [
        "Emulated weather",
        "real calculator"
      ])
    }).pipe(provide([
      ScriptedModel.toolCalls([callOf("get_weather", "1"), callOf("calculator", "2")]),
      ScriptedModel.text("done")
    ], ran))
  })

  it.effect("Integration with createAgent: should use agent model when no model is provided to middleware", () => {
    const ran: Array<string> = []
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [ToolEmulator.middleware()] })
      const result = yield* agent.run("weather?", { threadId: "t" })
      assert.deepStrictEqual(ran, [])
      assert.deepStrictEqual(toolResults(result.state.messages).map((part) => part.result), [
        "emulated by the agent's model"
      ])
      assert.strictEqual((yield* ScriptedModel.requests).length, 3)
    }).pipe(provide([
      ScriptedModel.toolCalls([callOf("get_weather", "1")]),
      ScriptedModel.text("emulated by the agent's model"),
      ScriptedModel.text("done")
    ], ran))
  })
})

describe("LangChain parity: llmToolSelectorMiddleware", () => {
  const pick = (...tools: Array<string>) => ScriptedModel.text(JSON.stringify({ tools }))

  it.effect("should successfully select valid tools within limit", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([pick("get_weather", "calculator")])
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [LlmToolSelector.middleware({ model: selector.model, maxTools: 3 })]
      })
      yield* agent.run("What is the weather?", { threadId: "t" })
      const [main] = yield* ScriptedModel.requests
      assert.deepStrictEqual(main!.toolNames, ["get_weather", "calculator"])
    }).pipe(provide([ScriptedModel.text("done")])))

  it.effect("should limit tools to maxTools when more are selected", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([pick("get_weather", "search", "calculator")])
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [LlmToolSelector.middleware({ model: selector.model, maxTools: 2 })]
      })
      yield* agent.run("What is the weather?", { threadId: "t" })
      const [main] = yield* ScriptedModel.requests
      assert.deepStrictEqual(main!.toolNames, ["get_weather", "search"])
    }).pipe(provide([ScriptedModel.text("done")])))

  it.effect("should not count alwaysInclude tools against maxTools limit", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([pick("get_weather", "search")])
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [
          LlmToolSelector.middleware({ model: selector.model, maxTools: 2, alwaysInclude: ["send_email"] })
        ]
      })
      yield* agent.run("What is the weather?", { threadId: "t" })
      const [main] = yield* ScriptedModel.requests
      assert.sameMembers([...main!.toolNames], ["get_weather", "search", "send_email"])
    }).pipe(provide([ScriptedModel.text("done")])))

  it.effect("should throw error when alwaysInclude tool not found", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([])
      const error = yield* Effect.flip(Agent.make({
        toolkit: Tools,
        middleware: [LlmToolSelector.middleware({ model: selector.model, alwaysInclude: ["nonexistent"] })]
      }))
      assert.strictEqual(error._tag, "UnknownTools")
    }).pipe(provide([])))

  it.effect("should get last user message from history", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([pick("search")])
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [LlmToolSelector.middleware({ model: selector.model })]
      })
      yield* agent.run([
        { role: "user", content: "First question" },
        { role: "assistant", content: "First answer" },
        { role: "user", content: "Last question about search" }
      ], { threadId: "t" })
      const [asked] = yield* selector.recorder.requests
      const sent = JSON.stringify(asked!.prompt.content.filter((message) => message.role === "user"))
      assert.include(sent, "Last question about search")
      assert.notInclude(sent, "First question")
    }).pipe(provide([ScriptedModel.text("done")])))
})

describe("LangChain parity: toolErrorMiddleware", () => {
  const Failing = Tool.make("failing_tool", { parameters: { value: Schema.String }, success: Schema.String })
  const Failings = Toolkit.make(Failing)
  const failingLive = (attempts: Array<string>) =>
    Failings.toLayer({
      failing_tool: () => Effect.suspend(() => (attempts.push("attempt"), Effect.die(new Error("secret detail"))))
    })
  const failingCall = ScriptedModel.toolCalls([{ name: "failing_tool", params: { value: "v" }, id: "call_1" }])

  it.effect("returns handler content as an error ToolMessage", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const errors = ToolErrors.middleware({
        onError: (failure, request) => (seen.push(request.call.name), `Tool failed with ${failure._tag}.`)
      })
      const agent = yield* Agent.make({ toolkit: Failings, middleware: [errors] })
      const result = yield* agent.run("Use the failing tool", { threadId: "t" })
      const results = toolResults(result.state.messages)
      assert.deepStrictEqual(results.map((part) => [part.id, part.name, part.isFailure, part.result]), [
        ["call_1", "failing_tool", true, "Tool failed with Defect."]
      ])
      assert.notInclude(JSON.stringify(result.state.messages), "secret detail")
      assert.deepStrictEqual(seen, ["failing_tool"])
    }).pipe(
      Effect.provide(Layer.merge(ScriptedModel.layer([failingCall, ScriptedModel.text("done")]), failingLive([])))
    ))

  it.effect("propagates the original error when the handler returns nothing", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Failings,
        middleware: [ToolErrors.middleware({ onError: () => undefined })]
      })
      const error = yield* Effect.flip(agent.run("Use the failing tool", { threadId: "t" }))
      assert.strictEqual(error._tag, "ToolDefect")
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([failingCall]), failingLive([])))))

  it.live("handles the original error after retries are exhausted", () => {
    const attempts: Array<string> = []
    return Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Failings,
        middleware: [
          ToolErrors.middleware({ onError: () => "Tool failed after retries." }),
          ToolRetry.middleware({ maxRetries: 2, initialDelay: "1 millis", jitter: false, onFailure: "error" })
        ]
      })
      const result = yield* agent.run("Use the failing tool", { threadId: "t" })
      assert.strictEqual(attempts.length, 3)
      assert.deepStrictEqual(toolResults(result.state.messages).map((part) => part.result), [
        "Tool failed after retries."
      ])
    }).pipe(
      Effect.provide(Layer.merge(ScriptedModel.layer([failingCall, ScriptedModel.text("done")]), failingLive(attempts)))
    )
  })
})

describe("LangChain parity: dynamicSystemPromptMiddleware", () => {
  it.effect("should set system message from dynamic prompt before model call", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [
          DynamicSystemPrompt.middleware((request) => `You are a helpful assistant. Thread: ${request.threadId}`)
        ]
      })
      yield* agent.run("Hello", { threadId: "t-1" })
      const [request] = yield* ScriptedModel.requests
      const first = request!.prompt.content[0]
      assert.strictEqual(first?.role === "system" ? first.content : "", "You are a helpful assistant. Thread: t-1")
    }).pipe(provide([ScriptedModel.text("Hi")])))
})
