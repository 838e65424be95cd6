/**
 * `AgentEvent.ModelRequestSent`: a watched run reports each model request as the model gets it, at the end of the
 * `wrapModelCall` chain, with the state the call saw.
 */
import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Layer, Schema, Stream } from "effect"
import { Calculator, CalculatorLive } from "./utils.js"

const script = (): ReadonlyArray<ScriptedModel.Turn> => [
  ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }]),
  ScriptedModel.text("3")
]

/** Counts model calls in a slice, and adds a note to each request (the model sees it, the thread does not). */
const noting = Middleware.make({
  name: "noting",
  state: { schema: Schema.Struct({ calls: Schema.Number }), initial: { calls: 0 } },
  beforeModel: ({ state }) => Effect.succeed({ state: { calls: state.calls + 1 } }),
  wrapModelCall: (request, next) =>
    next({
      ...request,
      messages: [
        ...request.messages,
        Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "(note)" })] })
      ]
    })
})

describe("ModelRequestSent", () => {
  it.effect("a streamed run reports each request as sent (system prompt, a wrap hook's change) with the state then", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware: [noting] })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("1 + 2?", { threadId: "t" })))
      const sent = events.flatMap((event) => event._tag === "ModelRequestSent" ? [event] : [])
      const requests = yield* ScriptedModel.requests
      assert.deepStrictEqual(sent.map((event) => event.step), [0, 1])
      // what the model got, exactly
      assert.deepStrictEqual(sent.map((event) => event.prompt), requests.map((request) => request.prompt))
      assert.strictEqual(sent[0]!.prompt.content[0]!.role, "system")
      assert.strictEqual(sent[0]!.prompt.content.at(-1)!.role, "user")
      assert.deepStrictEqual(sent.map((event) => event.toolNames), [["add"], ["add"]])
      // the state the call saw: the thread's messages (without the note) and the slices then
      const states = sent.map((event) =>
        event.state as { readonly messages: ReadonlyArray<Prompt.Message>; readonly calls: number }
      )
      assert.deepStrictEqual(states.map((state) => state.calls), [1, 2])
      assert.deepStrictEqual(states.map((state) => state.messages.length), [1, 3])
      // reported after the step starts, before the reply
      const tags = events.map((event) => event._tag)
      assert.isTrue(tags.indexOf("ModelCallStarted") < tags.indexOf("ModelRequestSent"))
      assert.isTrue(tags.indexOf("ModelRequestSent") < tags.indexOf("ModelResponded"))
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script()), CalculatorLive))))
})
