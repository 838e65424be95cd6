/**
 * Tool-call arguments nested thousands deep (a few kilobytes of `[[[…]]]`)
 * are refused before a schema or a formatter walks them: the model gets a
 * failed result it can repair, as for other invalid arguments, and nothing
 * overflows the stack (the schema's error, the structured output's, the
 * events of a stream, the checkpoint).
 */
import type { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Chunk, Effect, FastCheck, Layer, Option, Schema, Stream } from "effect"
import { quickDepth } from "../src/internal/fast/quickDepth.js"
import * as JsonDepth from "../src/internal/jsonDepth.js"
import { Calculator, CalculatorLive, toolResults } from "./utils.js"

/** `{"a": [[…1…]], "b": 2}` with `depth` arrays, as JSON text. */
const deepText = (depth: number) => `{"a":${"[".repeat(depth)}1${"]".repeat(depth)},"b":2}`

const errorOf = (result: Prompt.ToolResultPart | undefined): string => {
  assert.isDefined(result)
  assert.isTrue(result!.isFailure)
  return (result!.result as { readonly error: string }).error
}

const runBy = (agent: Agent.Service, mode: "run" | "stream", input: string) =>
  mode === "run"
    ? Effect.map(agent.run(input, { threadId: "t" }), (result) => ({ events: [], result }))
    : Effect.map(Stream.runCollect(agent.stream(input, { threadId: "t" })), (chunk) => {
      const events = Chunk.toReadonlyArray(chunk)
      const last = events[events.length - 1]!
      assert.strictEqual(last._tag, "RunEnded")
      return { events, result: (last as Extract<typeof last, { _tag: "RunEnded" }>).result }
    })

describe("tool-call arguments nested too deep", () => {
  for (const mode of ["run", "stream"] as const) {
    it.effect(
      `${mode}: arguments nested 100,000 deep get a failed result the model repairs; the thread is stored`,
      () =>
        Effect.gen(function*() {
          const agent = yield* Agent.make({ toolkit: Calculator })
          const { events, result } = yield* runBy(agent, mode, "1 + 2?")
          assert.strictEqual(result._tag, "Completed")
          const [deep, repaired] = toolResults(result.state.messages)
          assert.include(errorOf(deep), `Invalid arguments for tool "add": the arguments nest arrays and objects`)
          assert.include(errorOf(deep), `more than ${JsonDepth.maxDepth} levels deep`)
          assert.strictEqual(repaired!.result, 3)
          // the stored call keeps its arguments cut just past the limit: still refused, writable by any encoder
          const stored = result.state.messages.flatMap((message) => message.role === "assistant" ? message.content : [])
            .find((part) => part.type === "tool-call" && part.id === "deep")
          assert.isTrue(stored !== undefined && stored.type === "tool-call")
          const params = (stored as Prompt.ToolCallPart).params
          assert.isTrue(JsonDepth.exceeds(params) && !JsonDepth.exceeds(params, JsonDepth.maxDepth + 1))
          assert.isTrue(JSON.stringify(params).length < 1000)
          assert.isTrue(Option.isSome(yield* agent.thread("t")))
          if (mode === "stream") assert.isTrue(events.some(AgentEvent.$is("ToolCallStarted")))
        }).pipe(Effect.provide(Layer.merge(
          ScriptedModel.layer([
            ScriptedModel.toolCalls([{ name: "add", params: JSON.parse(deepText(100_000)), id: "deep" }]),
            ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "good" }]),
            ScriptedModel.text("3")
          ]),
          CalculatorLive
        ))),
      { timeout: 30_000 }
    )

    it.scoped(
      `${mode}: through the OpenAI provider, deep arguments are answered and repaired`,
      () =>
        Effect.gen(function*() {
          const reply = mode === "run" ? FakeOpenAi.toolCalls : FakeOpenAi.streamToolCalls
          const server = yield* FakeOpenAi.make([
            reply([{ callId: "call_deep", name: "add", arguments: deepText(100_000) }]),
            reply([{ callId: "call_good", name: "add", arguments: { a: 1, b: 2 } }]),
            mode === "run" ? FakeOpenAi.text("3") : FakeOpenAi.streamText(["3"])
          ])
          const agent = yield* Agent.make({ toolkit: Calculator }).pipe(
            Effect.provide(yield* Layer.build(Layer.merge(FakeOpenAi.languageModel(server), CalculatorLive)))
          )
          const { result } = yield* runBy(agent, mode, "1 + 2?")
          assert.strictEqual(result._tag, "Completed")
          const [deep, repaired] = toolResults(result.state.messages)
          assert.include(errorOf(deep), "levels deep")
          assert.strictEqual(repaired!.result, 3)
        }),
      { timeout: 30_000 }
    )
  }

  it.effect("arguments at the limit still reach the schema (its own error); one level more is refused", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator })
      const result = yield* agent.run("1 + 2?", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const [atLimit, overLimit] = toolResults(result.state.messages).map(errorOf)
      // the object is one level, the arrays the rest
      assert.notInclude(atLimit, "levels deep")
      assert.include(atLimit, "Expected number")
      assert.include(overLimit, "levels deep")
    }).pipe(Effect.provide(Layer.merge(
      ScriptedModel.layer([
        ScriptedModel.toolCalls([{ name: "add", params: JSON.parse(deepText(JsonDepth.maxDepth - 1)), id: "at" }]),
        ScriptedModel.toolCalls([{ name: "add", params: JSON.parse(deepText(JsonDepth.maxDepth)), id: "over" }]),
        ScriptedModel.text("done")
      ]),
      CalculatorLive
    ))))

  it.effect(
    "a structured output nested 5,000 deep gets a failed result; the repaired one ends the run",
    () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ responseFormat: Schema.Struct({ answer: Schema.Unknown }) })
        const result = yield* agent.run("answer?", { threadId: "t" })
        assert.strictEqual(result._tag, "Completed")
        if (result._tag !== "Completed") return
        assert.deepStrictEqual(result.output, Option.some({ answer: 42 }))
        const [deep] = toolResults(result.state.messages)
        assert.include(errorOf(deep), "Invalid structured output: the fields nest arrays and objects")
      }).pipe(Effect.provide(ScriptedModel.layer([
        ScriptedModel.toolCalls([{ name: "final_answer", params: { answer: JSON.parse(deepText(5000)) }, id: "f1" }]),
        ScriptedModel.toolCalls([{ name: "final_answer", params: { answer: 42 }, id: "f2" }])
      ]))),
    { timeout: 30_000 }
  )
})

describe("JsonDepth.exceeds", () => {
  /** The depth of a JSON value, by recursion (the values are shallow). */
  const depthOf = (value: unknown): number =>
    typeof value !== "object" || value === null
      ? 0
      : 1 + Math.max(0, ...(Array.isArray(value) ? value : Object.values(value)).map(depthOf))

  it.prop(
    "agrees with the depth of any JSON value, at every limit",
    [FastCheck.jsonValue({ maxDepth: 6 })],
    ([json]) => {
      const depth = depthOf(json)
      for (let limit = 0; limit <= 7; limit++) assert.strictEqual(JsonDepth.exceeds(json, limit), depth > limit)
    }
  )

  it.prop("cut keeps a value within the limit, and cuts one past it to just past it", [
    FastCheck.jsonValue({ maxDepth: 6 }),
    FastCheck.integer({ min: 0, max: 6 })
  ], ([json, limit]) => {
    const cut = JsonDepth.cut(json, limit)
    if (depthOf(json) <= limit) assert.strictEqual(cut, json)
    else assert.strictEqual(depthOf(cut), limit + 1)
  })

  it("a shared value is walked again only deeper, and a cycle ends past the limit", () => {
    let shared: unknown = 1
    // 60 levels of a pair of one value: 2^60 paths, walked in 60 steps
    for (let i = 0; i < 60; i++) shared = [shared, shared]
    assert.isFalse(JsonDepth.exceeds(shared, 60))
    assert.isTrue(JsonDepth.exceeds(shared, 59))
    const cycle: Array<unknown> = []
    cycle.push(cycle)
    assert.isTrue(JsonDepth.exceeds(cycle))
  })

  it.prop(
    "agrees with the depth of a value whose shared part outgrows the quick walk, wherever its deepest path is",
    [FastCheck.jsonValue({ maxDepth: 6 }), FastCheck.integer({ min: 10, max: 16 }), FastCheck.boolean()],
    ([json, levels, sharedFirst]) => {
      // `levels` levels of an object holding one value twice: 2^levels paths, more than the quick walk visits
      let shared: unknown = 1
      for (let i = 0; i < levels; i++) shared = { left: shared, right: shared }
      const value = sharedFirst ? { shared, json } : [json, shared]
      const depth = 1 + Math.max(levels, depthOf(json))
      for (const limit of [0, 3, levels - 1, levels, levels + 1, depth - 1, depth]) {
        assert.strictEqual(JsonDepth.exceeds(value, limit), depth > limit)
      }
    }
  )

  it("the quick walk answers for a small value or a cycle, and leaves a value shared many times over", () => {
    let shared: unknown = 1
    for (let i = 0; i < 20; i++) shared = [shared, shared]
    assert.strictEqual(quickDepth(shared as object, 60), "Unsure")
    assert.strictEqual(quickDepth(shared as object, 10), "Past")
    const cycle: Array<unknown> = []
    cycle.push({ cycle })
    assert.strictEqual(quickDepth(cycle, JsonDepth.maxDepth), "Past")
    assert.strictEqual(quickDepth({ query: "x", limit: [1, { a: 2 }] }, 3), "Within")
    assert.strictEqual(quickDepth({ query: "x", limit: [1, { a: 2 }] }, 2), "Past")
  })

  it("reads the own enumerable values only, as Object.values does, and skips bytes", () => {
    const inherited = Object.create({ deep: [[[[1]]]] }) as Record<string, unknown>
    inherited.flat = 1
    Object.defineProperty(inherited, "hidden", { value: [[[[1]]]], enumerable: false })
    assert.isFalse(JsonDepth.exceeds(inherited, 1))
    assert.isFalse(JsonDepth.exceeds({ bytes: new Uint8Array(8) }, 2))
    assert.isTrue(JsonDepth.exceeds({ bytes: new Uint8Array(8) }, 1))
  })
})
