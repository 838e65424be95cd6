/**
 * LangChain JS v1's own cases for middleware hooks (`libs/langchain/src/agents/tests/middleware.test.ts`),
 * asserted through Stepwise's public API. Each test is named after LangChain's case.
 */
import { Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { HookRecorder, ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Schema } from "effect"

const SampleTool = Tool.make("sample_tool", { parameters: { query: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(SampleTool)
const toolLog: Array<string> = []
const ToolsLive = Tools.toLayer({
  sample_tool: ({ query }) => Effect.sync(() => (toolLog.push(`tool:${query}`), `Result for: ${query}`))
})
const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), ToolsLive))
const callTool = (query: string, id = "1") => ScriptedModel.toolCalls([{ name: "sample_tool", params: { query }, id }])

/** A middleware whose node hooks only log, as LangChain's `createMiddleware({ beforeAgent, … })` in its tests. */
const logging = (name: string, log: Array<string>) =>
  Middleware.make({
    name,
    beforeAgent: () => Effect.sync(() => void log.push(`${name}.before_agent`)),
    beforeModel: () => Effect.sync(() => void log.push(`${name}.before_model`)),
    afterModel: () => Effect.sync(() => void log.push(`${name}.after_model`)),
    afterAgent: () => Effect.sync(() => void log.push(`${name}.after_agent`))
  })

describe("LangChain parity: hook order", () => {
  it.effect("should support all hooks together with correct execution order", () =>
    Effect.gen(function*() {
      toolLog.length = 0
      const log: Array<string> = []
      const tools = Middleware.make({
        name: "tools",
        wrapToolCall: (request, next) =>
          Effect.tap(next(request), () => Effect.sync(() => void log.push("tool_execution")))
      })
      const withTools = yield* Agent.make({ toolkit: Tools, middleware: [logging("m", log), tools] })
      yield* withTools.run("Test", { threadId: "t" })
      assert.deepStrictEqual(log, [
        "m.before_agent",
        "m.before_model",
        "m.after_model",
        "tool_execution",
        "m.before_model",
        "m.after_model",
        "m.after_agent"
      ])
    }).pipe(provide([callTool("test"), ScriptedModel.text("done")])))

  it.effect("should run before_agent and after_agent only once with multiple model calls", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [logging("m", log)] })
      yield* agent.run("Test", { threadId: "t" })
      assert.strictEqual(log.filter((entry) => entry === "m.before_agent").length, 1)
      assert.strictEqual(log.filter((entry) => entry === "m.after_agent").length, 1)
      assert.strictEqual(log.filter((entry) => entry === "m.before_model").length, 3)
    }).pipe(provide([callTool("a"), callTool("b", "2"), ScriptedModel.text("done")])))

  it.effect("should execute multiple before_agent and after_agent middleware in correct order", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [logging("1", log), logging("2", log)] })
      yield* agent.run("Test", { threadId: "t" })
      assert.deepStrictEqual(log.filter((entry) => entry.endsWith("_agent")), [
        "1.before_agent",
        "2.before_agent",
        "2.after_agent",
        "1.after_agent"
      ])
    }).pipe(provide([ScriptedModel.text("done")])))

  it.effect("hooks run before/after every invocation", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [logging("m", log)] })
      yield* agent.run("first", { threadId: "t" })
      yield* agent.run("second", { threadId: "t" })
      assert.strictEqual(log.filter((entry) => entry === "m.before_agent").length, 2)
      assert.strictEqual(log.filter((entry) => entry === "m.after_agent").length, 2)
    }).pipe(provide([ScriptedModel.text("one"), ScriptedModel.text("two")])))

  it.effect("should compose three middlewares where first is outermost wrapper", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [
          HookRecorder.middleware("a", log),
          HookRecorder.middleware("b", log),
          HookRecorder.middleware("c", log)
        ]
      })
      yield* agent.run("Test", { threadId: "t" })
      assert.deepStrictEqual(log.filter((entry) => entry.includes("wrapModelCall")), [
        "a.wrapModelCall:in",
        "b.wrapModelCall:in",
        "c.wrapModelCall:in",
        "c.wrapModelCall:out",
        "b.wrapModelCall:out",
        "a.wrapModelCall:out"
      ])
    }).pipe(provide([ScriptedModel.text("done")])))

  it.effect("should chain multiple wrapToolCall handlers correctly", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [HookRecorder.middleware("a", log), HookRecorder.middleware("b", log)]
      })
      yield* agent.run("Test", { threadId: "t" })
      assert.deepStrictEqual(log.filter((entry) => entry.includes("wrapToolCall")), [
        "a.wrapToolCall:in",
        "b.wrapToolCall:in",
        "b.wrapToolCall:out",
        "a.wrapToolCall:out"
      ])
    }).pipe(provide([callTool("x"), ScriptedModel.text("done")])))
})

describe("LangChain parity: jumpTo", () => {
  it.effect("should jump to afterAgent when beforeAgent jumps to end", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const first = Middleware.make({
        name: "Middleware1",
        canJumpTo: ["end"],
        beforeAgent: () => Effect.sync(() => (log.push("before_agent_1"), { jumpTo: "end" as const })),
        afterAgent: () => Effect.sync(() => void log.push("after_agent_1"))
      })
      const second = Middleware.make({
        name: "Middleware2",
        beforeAgent: () => Effect.sync(() => void log.push("before_agent_2")),
        afterAgent: () => Effect.sync(() => void log.push("after_agent_2"))
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [first, second] })
      const result = yield* agent.run("Test", { threadId: "t" })
      assert.deepStrictEqual(log, ["before_agent_1", "after_agent_2", "after_agent_1"])
      assert.deepStrictEqual(result.state.messages.map((message) => message.role), ["user"])
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("should terminate when afterModel jumps to end (skips tools)", () =>
    Effect.gen(function*() {
      toolLog.length = 0
      const log: Array<string> = []
      const stop = Middleware.make({
        name: "Middleware",
        canJumpTo: ["end"],
        afterModel: () => Effect.sync(() => (log.push("after_model"), { jumpTo: "end" as const }))
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [stop] })
      const result = yield* agent.run("Test", { threadId: "t" })
      assert.deepStrictEqual(log, ["after_model"])
      assert.deepStrictEqual(toolLog, [])
      // LangChain leaves the call without a result (2 messages). Here each unanswered call gets a failed
      // result, so the stored thread never holds a call without its result (docs/migrating-from-langchain.md).
      assert.deepStrictEqual(result.state.messages.map((message) => message.role), ["user", "assistant", "tool"])
      const last = result.state.messages[2]!
      const parts = typeof last.content === "string" ? [] : last.content
      assert.strictEqual(parts.length, 1)
      const part = parts[0]!
      assert.strictEqual(part.type, "tool-result")
      if (part.type !== "tool-result") return
      assert.strictEqual(part.id, "test_id")
      assert.isTrue(part.isFailure)
      assert.include(JSON.stringify(part.result), "Not run")
    }).pipe(provide([callTool("Test", "test_id")])))

  it.effect("should terminate the agent in beforeModel hook", () =>
    Effect.gen(function*() {
      toolLog.length = 0
      const failing = Middleware.make({
        name: "middleware",
        beforeModel: () => Effect.fail(new Error("middleware terminated"))
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [failing] })
      const error = yield* Effect.flip(agent.run("Hello, world!", { threadId: "t" }))
      assert.strictEqual(error instanceof Error ? error.message : "", "middleware terminated")
      assert.deepStrictEqual(toolLog, [])
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
    }).pipe(provide([ScriptedModel.text("The weather in Tokyo is 25°C")])))

  it.effect("should terminate the agent in afterModel hook", () =>
    Effect.gen(function*() {
      toolLog.length = 0
      let beforeModel = 0
      const failing = Middleware.make({
        name: "middleware",
        beforeModel: () => Effect.sync(() => void beforeModel++),
        afterModel: () => Effect.fail(new Error("middleware terminated in afterModel"))
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [failing] })
      const error = yield* Effect.flip(agent.run("Hello, world!", { threadId: "t" }))
      assert.strictEqual(error instanceof Error ? error.message : "", "middleware terminated in afterModel")
      assert.deepStrictEqual(toolLog, [])
      assert.strictEqual(beforeModel, 1)
    }).pipe(provide([callTool("test", "call_1")])))
})

describe("LangChain parity: state", () => {
  const Counter = Schema.Struct({ counter: Schema.Number })

  it.effect("should allow state modifications in before and after agent hook", () =>
    Effect.gen(function*() {
      const counting = Middleware.make({
        name: "counting",
        state: { schema: Counter, initial: { counter: 0 } },
        beforeAgent: ({ state }) => Effect.succeed({ state: { counter: state.counter + 1 } }),
        afterAgent: ({ state }) => Effect.succeed({ state: { counter: state.counter + 10 } })
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [counting] })
      const result = yield* agent.run("Test", { threadId: "t" })
      assert.strictEqual(result.state.counter, 11)
    }).pipe(provide([ScriptedModel.text("done")])))

  it.effect("should propagate state changes from before_agent through the entire agent execution", () =>
    Effect.gen(function*() {
      const seen: Array<number> = []
      const counting = Middleware.make({
        name: "counting",
        state: { schema: Counter, initial: { counter: 0 } },
        beforeAgent: () => Effect.succeed({ state: { counter: 42 } }),
        beforeModel: ({ state }) => Effect.sync(() => void seen.push(state.counter)),
        afterModel: ({ state }) => Effect.sync(() => void seen.push(state.counter)),
        afterAgent: ({ state }) => Effect.sync(() => void seen.push(state.counter))
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [counting] })
      yield* agent.run("Test", { threadId: "t" })
      assert.deepStrictEqual(seen, [42, 42, 42])
    }).pipe(provide([ScriptedModel.text("done")])))

  it.effect("should not leak beforeAgent middleware state across thread_id", () =>
    Effect.gen(function*() {
      const counting = Middleware.make({
        name: "counting",
        state: { schema: Counter, initial: { counter: 0 } },
        beforeAgent: ({ state }) => Effect.succeed({ state: { counter: state.counter + 1 } })
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [counting] })
      const one = yield* agent.run("one", { threadId: "thread-1" })
      const again = yield* agent.run("again", { threadId: "thread-1" })
      const other = yield* agent.run("other", { threadId: "thread-2" })
      assert.deepStrictEqual([one.state.counter, again.state.counter, other.state.counter], [1, 2, 1])
    }).pipe(provide([ScriptedModel.text("a"), ScriptedModel.text("b"), ScriptedModel.text("c")])))

  it.effect("should preserve message additions in before_agent", () =>
    Effect.gen(function*() {
      const adding = Middleware.make({
        name: "adding",
        beforeAgent: ({ messages }) =>
          Effect.succeed({
            messages: [
              ...messages,
              Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "Added by middleware" })] })
            ]
          })
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [adding] })
      const result = yield* agent.run("Test", { threadId: "t" })
      const texts = result.state.messages.map((message) =>
        typeof message.content === "string"
          ? message.content
          : message.content.map((part) => (part.type === "text" ? part.text : "")).join("")
      )
      assert.deepStrictEqual(texts, ["Test", "Added by middleware", "done"])
      const [request] = yield* ScriptedModel.requests
      assert.strictEqual(request!.prompt.content.length, 2)
    }).pipe(provide([ScriptedModel.text("done")])))
})

describe("LangChain parity: wrapModelCall", () => {
  const ToolA = Tool.make("toolA", { parameters: { input: Schema.String }, success: Schema.String })
  const ToolB = Tool.make("toolB", { parameters: { input: Schema.String }, success: Schema.String })
  const AB = Toolkit.make(ToolA, ToolB)
  const ran: Array<string> = []
  const ABLive = AB.toLayer({
    toolA: ({ input }) => Effect.sync(() => (ran.push("toolA"), `Tool A executed: ${input}`)),
    toolB: ({ input }) => Effect.sync(() => (ran.push("toolB"), `Tool B executed: ${input}`))
  })
  const script = [
    ScriptedModel.toolCalls([{ name: "toolA", params: { input: "test data" }, id: "call_1" }]),
    ScriptedModel.text("Done")
  ]
  const provideAB = Effect.provide(Layer.merge(ScriptedModel.layer(script), ABLive))
  const toB = (part: Prompt.ToolCallPart, params: unknown = part.params) =>
    Prompt.makePart("tool-call", { id: part.id, name: "toolB", params, providerExecuted: false })
  /** A `wrapModelCall` that rewrites the reply's calls of toolA with `rewrite`. */
  const redirect = (
    rewrite: (response: Middleware.ModelResponse) => Middleware.ModelResponse
  ) =>
    Middleware.make({
      name: "ToolRedirectMiddleware",
      wrapModelCall: (request, next) =>
        Effect.map(next(request), (response) => response.toolCalls.length > 0 ? rewrite(response) : response)
    })

  it.effect("should allow middleware to modify tool calls in response", () =>
    Effect.gen(function*() {
      ran.length = 0
      const middleware = redirect((response) => {
        const [call] = response.toolCalls
        return Middleware.modelResponse("", { toolCalls: [toB(call!)] })
      })
      const agent = yield* Agent.make({ toolkit: AB, middleware: [middleware] })
      const result = yield* agent.run("Call a tool", { threadId: "t" })
      assert.deepStrictEqual(ran, ["toolB"])
      const results = result.state.messages.flatMap((message) =>
        message.role === "tool" ? message.content.filter((part) => part.type === "tool-result") : []
      )
      assert.deepStrictEqual(results.map((part) => [part.name, part.result]), [["toolB", "Tool B executed: test data"]])
    }).pipe(provideAB))

  // LangChain's reply is one list of tool calls; a ModelResponse has two views of them, its message's
  // tool-call parts (what the agent runs and stores) and `toolCalls`. A hook that changes one and not the
  // other fails the run, naming the hook, instead of seeing its change silently ignored.
  const disagreeing: ReadonlyArray<
    readonly [string, (response: Middleware.ModelResponse) => Middleware.ModelResponse]
  > = [
    ["only toolCalls renamed", (response) => ({ ...response, toolCalls: response.toolCalls.map((call) => toB(call)) })],
    ["only the message renamed", (response) => ({
      ...response,
      message: Prompt.makeMessage("assistant", {
        content: response.message.content.map((part) => part.type === "tool-call" ? toB(part) : part)
      })
    })],
    ["only toolCalls' arguments changed", (response) => ({
      ...response,
      toolCalls: response.toolCalls.map((call) =>
        Prompt.makePart("tool-call", {
          id: call.id,
          name: call.name,
          params: { input: "other" },
          providerExecuted: false
        })
      )
    })],
    ["toolCalls emptied", (response) => ({ ...response, toolCalls: [] })]
  ]
  for (const [label, rewrite] of disagreeing) {
    it.effect(`a wrapModelCall response whose toolCalls disagree with its message fails with InvalidHookResult (${label})`, () =>
      Effect.gen(function*() {
        ran.length = 0
        const agent = yield* Agent.make({ toolkit: AB, middleware: [redirect(rewrite)] })
        const error = yield* Effect.flip(agent.run("Call a tool", { threadId: "t" }))
        assert.strictEqual(error._tag, "InvalidHookResult")
        if (error._tag !== "InvalidHookResult") return
        assert.strictEqual(error.middleware, "ToolRedirectMiddleware")
        assert.strictEqual(error.hook, "wrapModelCall")
        assert.include(error.reason, "not the tool calls of its message")
        assert.deepStrictEqual(ran, [])
      }).pipe(provideAB))
  }

  it.effect("a wrapModelCall response rebuilt with equal tool calls (new objects, keys in another order) passes", () =>
    Effect.gen(function*() {
      ran.length = 0
      const copy = (part: Prompt.ToolCallPart) =>
        Prompt.makePart("tool-call", {
          id: part.id,
          name: part.name,
          params: Object.fromEntries(Object.entries(part.params as object).reverse()),
          providerExecuted: false
        })
      const middleware = redirect((response) => ({ ...response, toolCalls: response.toolCalls.map(copy) }))
      const agent = yield* Agent.make({ toolkit: AB, middleware: [middleware] })
      const result = yield* agent.run("Call a tool", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(ran, ["toolA"])
    }).pipe(provideAB))
})
