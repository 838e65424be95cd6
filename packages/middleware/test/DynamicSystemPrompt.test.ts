import type { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Context, Effect } from "effect"
import * as Schema from "effect/Schema"
import * as DynamicSystemPrompt from "../src/DynamicSystemPrompt.js"
import * as ModelCallLimit from "../src/ModelCallLimit.js"

const script = [ScriptedModel.toolCalls([{ name: "echo", params: { text: "x" } }]), ScriptedModel.text("done")]

/** The system message of each request the model received (undefined when there was none). */
const systemPrompts = Effect.map(ScriptedModel.requests, (requests) =>
  requests.map((request) => {
    const first: Prompt.Message | undefined = request.prompt.content[0]
    return first?.role === "system" ? first.content : undefined
  }))

class Persona extends Context.Tag("test/Persona")<Persona, string>() {}

describe("DynamicSystemPrompt", () => {
  it.effect("computes the system prompt of every call from the request", () =>
    Effect.gen(function*() {
      const prompt = DynamicSystemPrompt.middleware((request) =>
        `step ${request.step}, ${request.messages.length} message(s), thread ${request.threadId}`
      )
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, middleware: [prompt] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual(yield* systemPrompts, ["step 0, 1 message(s), thread t", "step 1, 3 message(s), thread t"])
      // the stored conversation holds no system message
      assert.isFalse(result.state.messages.some((m) => m.role === "system"))
    }).pipe(Effect.provide([ScriptedModel.layer(script), Fixtures.echoLayer])))

  it.effect("sees the agent's own prompt and the whole state", () =>
    Effect.gen(function*() {
      const limit = ModelCallLimit.middleware({ threadLimit: 10 })
      const prompt = DynamicSystemPrompt.middleware((request) =>
        Effect.succeed(`${request.systemPrompt} (model calls so far: ${request.state.threadModelCallCount})`)
      )
      const agent = yield* Agent.make({
        toolkit: Fixtures.echoToolkit,
        systemPrompt: "Be brief.",
        middleware: [limit, prompt]
      })
      yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual(yield* systemPrompts, [
        "Be brief. (model calls so far: 0)",
        "Be brief. (model calls so far: 1)"
      ])
    }).pipe(Effect.provide([ScriptedModel.layer(script), Fixtures.echoLayer])))

  it.effect("its requirements become the agent's, provided when the agent is built", () =>
    Effect.gen(function*() {
      const prompt = DynamicSystemPrompt.middleware(() => Effect.map(Persona, (persona) => `You are ${persona}.`))
      const agent = yield* Agent.make({ middleware: [prompt] }).pipe(Effect.provideService(Persona, "a pirate"))
      yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual(yield* systemPrompts, ["You are a pirate."])
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("arr")]))))

  it.effect("undefined sends no system prompt", () =>
    Effect.gen(function*() {
      const prompt = DynamicSystemPrompt.middleware(() => undefined)
      const agent = yield* Agent.make({ systemPrompt: "ignored", middleware: [prompt] })
      yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual(yield* systemPrompts, [undefined])
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")]))))

  it.effect("a failure of the prompt fails the run with its typed error, before the model is called", () => {
    class PromptStoreDown extends Schema.TaggedError<PromptStoreDown>()("PromptStoreDown", {}) {}
    return Effect.gen(function*() {
      const prompt = DynamicSystemPrompt.middleware(() => Effect.fail(new PromptStoreDown()), { name: "prompts" })
      assert.strictEqual(prompt.name, "prompts")
      const agent = yield* Agent.make({ middleware: [prompt] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "PromptStoreDown")
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")])))
  })
  for (
    const [label, value, gave] of [
      ["a number", 42, "a value of type number"],
      ["null", null, "null"],
      ["an object, from an Effect", { text: "hi" }, "a value of type object"]
    ] as const
  ) {
    it.effect(`a prompt function that gives ${label} fails the run with InvalidHookResult naming the middleware`, () =>
      Effect.gen(function*() {
        const prompt = DynamicSystemPrompt.middleware(
          (() => label.endsWith("Effect") ? Effect.succeed(value) : value) as any,
          { name: "persona" }
        )
        const agent = yield* Agent.make({ middleware: [prompt] })
        const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
        assert.strictEqual(error._tag, "InvalidHookResult")
        assert.strictEqual(
          error.message,
          `Middleware "persona" wrapModelCall: the prompt function gave ${gave}, not a string or undefined`
        )
        assert.deepStrictEqual(yield* ScriptedModel.requests, [])
      }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("hi")]))))
  }
})
