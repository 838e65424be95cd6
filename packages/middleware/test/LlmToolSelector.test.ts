import { type Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Layer, Schema, Stream } from "effect"
import * as LlmToolSelector from "../src/LlmToolSelector.js"

const tool = (name: string, description: string) =>
  Tool.make(name, { description, parameters: { input: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(
  tool("search", "Searches the web"),
  tool("fetch", "Fetches a URL"),
  tool("read", "Reads a file"),
  tool("write", "Writes a file"),
  tool("calc", "Evaluates arithmetic")
)
const ToolsLive = Tools.toLayer({
  search: ({ input }) => Effect.succeed(input),
  fetch: ({ input }) => Effect.succeed(input),
  read: ({ input }) => Effect.succeed(input),
  write: ({ input }) => Effect.succeed(input),
  calc: ({ input }) => Effect.succeed(input)
})

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), ToolsLive))

const pick = (...tools: Array<string>) => ScriptedModel.text(JSON.stringify({ tools }))

const textOf = (message: Prompt.Message): string =>
  message.role === "system"
    ? message.content
    : message.role === "tool"
    ? ""
    : message.content.map((part) => part.type === "text" ? part.text : "").join("")

describe("LlmToolSelector", () => {
  it.effect("offers the main model only the tools the selector picked, in the agent's order", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([pick("calc", "fetch")])
      const middleware = LlmToolSelector.middleware({ model: selector.model })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] })
      yield* agent.run("What is 2 + 2?", { threadId: "t" })
      const [main] = yield* ScriptedModel.requests
      assert.deepStrictEqual(main!.toolNames, ["fetch", "calc"])
      const [asked] = yield* selector.recorder.requests
      assert.deepStrictEqual(asked!.toolNames, [])
      const [system, user] = asked!.prompt.content
      assert.include(textOf(system!), LlmToolSelector.defaultSystemPrompt)
      for (const line of ["- search: Searches the web", "- calc: Evaluates arithmetic", "- write: Writes a file"]) {
        assert.include(textOf(system!), line)
      }
      assert.strictEqual(textOf(user!), "What is 2 + 2?")
    }).pipe(provide([ScriptedModel.text("4")])))

  it.effect("keeps at most maxTools, the first ones listed; alwaysInclude tools are kept on top", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([pick("read", "calc", "fetch")])
      const middleware = LlmToolSelector.middleware({
        model: selector.model,
        maxTools: 2,
        alwaysInclude: ["search"],
        systemPrompt: "Pick tools."
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] })
      yield* agent.run("go", { threadId: "t" })
      const [main] = yield* ScriptedModel.requests
      assert.deepStrictEqual(main!.toolNames, ["search", "read", "calc"])
      const [asked] = yield* selector.recorder.requests
      const system = textOf(asked!.prompt.content[0]!)
      assert.isTrue(system.startsWith("Pick tools.\nIMPORTANT"))
      assert.include(system, "only the first 2 will be used")
      // the always included tool is not a candidate
      assert.notInclude(system, "- search:")
    }).pipe(provide([ScriptedModel.text("done")])))

  it.effect("ignores names the selector made up, and reports the decision", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([pick("teleport", "calc", "calc")])
      const middleware = LlmToolSelector.middleware({ model: selector.model })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] })
      const events = yield* agent.stream("go", { threadId: "t" }).pipe(Stream.runCollect, Effect.map(Chunk.toArray))
      const [main] = yield* ScriptedModel.requests
      assert.deepStrictEqual(main!.toolNames, ["calc"])
      const decision = events.find(AgentEvent.$is("MiddlewareDecision"))!
      assert.strictEqual(decision.decision, "offering 1 of 5 tools: calc")
      assert.deepStrictEqual(decision.data, {
        selected: ["calc"],
        alwaysIncluded: [],
        ignored: ["teleport"],
        offered: ["calc"]
      })
    }).pipe(provide([ScriptedModel.text("done")])))

  it.effect("selects again before every model call, from the last user message", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([pick("calc"), pick("write", "read")])
      const middleware = LlmToolSelector.middleware({ model: selector.model })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] })
      yield* agent.run("compute then save", { threadId: "t" })
      assert.deepStrictEqual((yield* ScriptedModel.requests).map((r) => r.toolNames), [["calc"], ["read", "write"]])
      const asked = yield* selector.recorder.requests
      assert.deepStrictEqual(asked.map((r) => textOf(r.prompt.content[1]!)), ["compute then save", "compute then save"])
    }).pipe(provide([
      ScriptedModel.toolCalls([{ name: "calc", params: { input: "1+1" } }]),
      ScriptedModel.text("saved")
    ])))

  it.effect("without a model it asks the model of the context it was built in", () =>
    Effect.gen(function*() {
      const middleware = LlmToolSelector.middleware({ maxTools: 1 })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag === "Completed" ? result.text : "", "done")
      const [selection, main] = yield* ScriptedModel.requests
      assert.deepStrictEqual(selection!.toolNames, [])
      assert.deepStrictEqual(main!.toolNames, ["search"])
    }).pipe(provide([pick("search", "read"), ScriptedModel.text("done")])))

  it.effect("keeps a tool the request's toolChoice names", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([pick("calc")])
      const force = Middleware.make({
        name: "force",
        wrapModelCall: (request, next) => next({ ...request, toolChoice: { tool: "write" } })
      })
      const middleware = LlmToolSelector.middleware({ model: selector.model })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [force, middleware] })
      yield* agent.run("go", { threadId: "t" })
      const [main] = yield* ScriptedModel.requests
      assert.deepStrictEqual(main!.toolNames, ["write", "calc"])
    }).pipe(provide([ScriptedModel.text("done")])))

  it.effect("alwaysInclude names the agent lacks fail Agent.make with UnknownTools", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([pick("calc")])
      const middleware = LlmToolSelector.middleware({ model: selector.model, alwaysInclude: ["calc", "email"] })
      const error = yield* Effect.flip(Agent.make({ toolkit: Tools, middleware: [middleware] }))
      assert.strictEqual(error._tag, "UnknownTools")
      if (error._tag !== "UnknownTools") return
      assert.strictEqual(error.middleware, "llmToolSelector")
      assert.deepStrictEqual(error.names, ["email"])
      assert.include(error.message, "Available tools: search, fetch, read, write, calc")
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
      assert.strictEqual((yield* selector.recorder.requests).length, 0)
    }).pipe(provide([ScriptedModel.text("never")])))

  it.effect("an answer that is not { tools: [...] } fails the call with the selector's AiError", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([ScriptedModel.text("calc, please")])
      const middleware = LlmToolSelector.middleware({ model: selector.model })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "MalformedOutput")
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(provide([ScriptedModel.text("never")])))

  it.effect("an agent without tools is passed through without asking the selector", () =>
    Effect.gen(function*() {
      const selector = yield* ScriptedModel.make([])
      const middleware = LlmToolSelector.middleware({ model: selector.model })
      const agent = yield* Agent.make({ middleware: [middleware] })
      yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual((yield* selector.recorder.requests).length, 0)
    }).pipe(provide([ScriptedModel.text("hello")])))

  it.effect("bad options fail with InvalidOptions naming the option", () =>
    Effect.gen(function*() {
      const { model } = yield* ScriptedModel.make([])
      const cases: Array<[LlmToolSelector.Options, string]> = [
        [{ model, maxTools: 0 }, "maxTools"],
        [{ model, maxTools: 2.5 }, "maxTools"],
        [{ model, alwaysInclude: [""] }, "alwaysInclude[0]"],
        [{ model, alwaysInclude: "search" as any }, "alwaysInclude"],
        [{ model, systemPrompt: "  " }, "systemPrompt"],
        [{ model: {} as any }, "model"]
      ]
      for (const [options, option] of cases) {
        const error = yield* Effect.flip(Middleware.build(LlmToolSelector.middleware(options as any)))
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.strictEqual(error.option, option)
      }
    }))
})
