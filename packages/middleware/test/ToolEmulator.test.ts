import type { Prompt } from "@effect/ai"
import { AiError, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Layer, Schema, Stream } from "effect"
import * as ToolEmulator from "../src/ToolEmulator.js"

const Weather = Tool.make("weather", {
  description: "Current weather of a city",
  parameters: { city: Schema.String },
  success: Schema.String
})
const Charge = Tool.make("charge_card", {
  description: "Charges the customer's card",
  parameters: { cents: Schema.Number },
  success: Schema.String
})
const Tools = Toolkit.make(Weather, Charge)

const provide = (script: ReadonlyArray<ScriptedModel.Turn>, ran: Array<string>) =>
  Effect.provide(Layer.merge(
    ScriptedModel.layer(script),
    Tools.toLayer({
      weather: ({ city }) => Effect.sync(() => (ran.push(`weather:${city}`), "real weather")),
      charge_card: ({ cents }) => Effect.sync(() => (ran.push(`charge_card:${cents}`), "real charge"))
    })
  ))

const results = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.flatMap((message) =>
    message.role === "tool" ? message.content.map((part) => [part.name, part.result, part.isFailure] as const) : []
  )

const textOf = (message: Prompt.Message | undefined): string =>
  message === undefined || message.role === "system" || message.role === "tool"
    ? ""
    : message.content.map((part) => part.type === "text" ? part.text : "").join("")

const bothTools = ScriptedModel.toolCalls([
  { name: "weather", params: { city: "Paris" }, id: "w" },
  { name: "charge_card", params: { cents: 500 }, id: "c" }
])

describe("ToolEmulator", () => {
  it.effect("emulates every tool when none are listed: the handlers never run", () => {
    const ran: Array<string> = []
    return Effect.gen(function*() {
      const emulator = yield* ScriptedModel.make([ScriptedModel.text("Sunny, 24°C"), ScriptedModel.text("charged: ok")])
      const middleware = ToolEmulator.middleware({ model: emulator.model })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware], toolConcurrency: 1 })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual(ran, [])
      assert.deepStrictEqual(results(result.state.messages), [
        ["weather", "Sunny, 24°C", false],
        ["charge_card", "charged: ok", false]
      ])
      const asked = yield* emulator.recorder.requests
      assert.strictEqual(asked.length, 2)
      const prompt = textOf(asked[0]!.prompt.content[0])
      for (
        const line of [
          "Tool: weather",
          "Description: Current weather of a city",
          "Arguments: {\"city\":\"Paris\"}",
          "\"city\":{\"type\":\"string\"}"
        ]
      ) {
        assert.include(prompt, line)
      }
      assert.deepStrictEqual(asked[0]!.toolNames, [])
      // the main model reads the emulated results
      const [, second] = yield* ScriptedModel.requests
      assert.deepStrictEqual(
        results(second!.prompt.content),
        [["weather", "Sunny, 24°C", false], ["charge_card", "charged: ok", false]]
      )
    }).pipe(provide([bothTools, ScriptedModel.text("done")], ran))
  })

  it.effect("emulates only the listed tools; the others run", () => {
    const ran: Array<string> = []
    return Effect.gen(function*() {
      const emulator = yield* ScriptedModel.make([ScriptedModel.text("charged 500 cents")])
      const middleware = ToolEmulator.middleware({ model: emulator.model, tools: ["charge_card"] })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] })
      const events = yield* agent.stream("go", { threadId: "t" }).pipe(Stream.runCollect, Effect.map(Chunk.toArray))
      assert.deepStrictEqual(ran, ["weather:Paris"])
      const completed = events.filter(AgentEvent.$is("ToolCallCompleted")).map((e) => [e.result.name, e.result.result])
      assert.deepStrictEqual(completed.sort(), [["charge_card", "charged 500 cents"], ["weather", "real weather"]])
      const decisions = events.filter(AgentEvent.$is("MiddlewareDecision")).map((e) => [e.hook, e.decision, e.data])
      assert.deepStrictEqual(decisions, [["wrapToolCall", "emulated charge_card", { callId: "c" }]])
    }).pipe(provide([bothTools, ScriptedModel.text("done")], ran))
  })

  it.effect("without a model it asks the model of the context it was built in", () => {
    const ran: Array<string> = []
    return Effect.gen(function*() {
      const middleware = ToolEmulator.middleware()
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual(ran, [])
      assert.deepStrictEqual(results(result.state.messages), [["weather", "Rainy", false]])
      const requests = yield* ScriptedModel.requests
      assert.deepStrictEqual(requests.map((r) => r.toolNames.length > 0), [true, false, true])
    }).pipe(provide([
      ScriptedModel.toolCalls([{ name: "weather", params: { city: "Oslo" } }]),
      ScriptedModel.text("Rainy"),
      ScriptedModel.text("done")
    ], ran))
  })

  it.effect("a call of a tool the agent lacks is left to the agent's error result", () => {
    const ran: Array<string> = []
    return Effect.gen(function*() {
      const emulator = yield* ScriptedModel.make([])
      const middleware = ToolEmulator.middleware({ model: emulator.model })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] })
      const result = yield* agent.run("go", { threadId: "t" })
      const [[name, , isFailure]] = results(result.state.messages)
      assert.deepStrictEqual([name, isFailure], ["teleport", true])
      assert.strictEqual((yield* emulator.recorder.requests).length, 0)
    }).pipe(provide([ScriptedModel.toolCalls([{ name: "teleport", params: {} }]), ScriptedModel.text("done")], ran))
  })

  it.effect("a failure of the emulator model fails the run with its AiError", () => {
    const ran: Array<string> = []
    return Effect.gen(function*() {
      const emulator = yield* ScriptedModel.make([
        new AiError.UnknownError({ module: "Test", method: "generateText", description: "down" })
      ])
      const middleware = ToolEmulator.middleware({ model: emulator.model })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "UnknownError")
      assert.deepStrictEqual(ran, [])
    }).pipe(provide([ScriptedModel.toolCalls([{ name: "weather", params: { city: "Rome" } }])], ran))
  })

  it.effect("a listed tool the agent lacks fails Agent.make with UnknownTools, before anything runs", () => {
    const ran: Array<string> = []
    return Effect.gen(function*() {
      const emulator = yield* ScriptedModel.make([])
      const middleware = ToolEmulator.middleware({ model: emulator.model, tools: ["charge_crad"] })
      const error = yield* Effect.flip(Agent.make({ toolkit: Tools, middleware: [middleware] }))
      assert.strictEqual(error._tag, "UnknownTools")
      if (error._tag !== "UnknownTools") return
      assert.strictEqual(error.middleware, "toolEmulator")
      assert.deepStrictEqual(error.names, ["charge_crad"])
      assert.include(error.message, "Available tools: weather, charge_card")
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
      assert.deepStrictEqual(ran, [])
    }).pipe(provide([bothTools], ran))
  })

  it.effect("bad options fail with InvalidOptions naming the option", () =>
    Effect.gen(function*() {
      const { model } = yield* ScriptedModel.make([])
      const cases: Array<[ToolEmulator.Options, string, string]> = [
        [{ model, tools: [] }, "tools", "omit it to emulate every tool"],
        [{ model, tools: ["weather", "weather"] }, "tools", "names \"weather\" twice"],
        [{ model, tools: [""] }, "tools[0]", "Expected a non-empty text, actual \"\""],
        [{ model, tools: "weather" as any }, "tools", "actual \"weather\""],
        [{ model: {} as any }, "model", "LanguageModel"]
      ]
      for (const [options, option, reason] of cases) {
        const error = yield* Effect.flip(Middleware.build(ToolEmulator.middleware(options as any)))
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.strictEqual(error.option, option)
        assert.include(error.message, reason)
      }
    }))
})
