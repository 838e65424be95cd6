import { AiError, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel, SpanRecorder } from "@stepwise-agent/testing"
import { Effect, Layer, Option, Schema } from "effect"
import * as Tracing from "../src/Tracing.js"

const Add = Tool.make("add", {
  parameters: { a: Schema.Number, b: Schema.Number },
  success: Schema.Number
})
const Tools = Toolkit.make(Add)
const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), Tools.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })))

const hookSpans = (spans: ReadonlyArray<SpanRecorder.RecordedSpan>, hook: string) =>
  spans.filter((span) => span.name === `Middleware.${hook}` && span.attributes.get("middleware") === "tracing")

/** The attributes this middleware writes (the loop adds others of its own). */
const genAi = (attributes: ReadonlyMap<string, unknown>) =>
  Object.fromEntries([...attributes].filter(([key]) => key.startsWith("gen_ai.") || key === "error.type"))

describe("Tracing", () => {
  it.effect("records the request and the response of each model call on its span", () => {
    const { spans, tracer } = SpanRecorder.make()
    return Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        systemPrompt: "Add.",
        middleware: [
          Tracing.middleware(),
          Middleware.make({ name: "inner", wrapModelCall: (request, next) => next(request) })
        ]
      })
      yield* agent.run("1 + 2?", { threadId: "thread-7" })
      const [first, second] = hookSpans(spans, "wrapModelCall")
      assert.deepStrictEqual(genAi(first!.attributes), {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": "thread-7",
        "gen_ai.agent.step": 0,
        "gen_ai.request.message_count": 1,
        "gen_ai.request.tool_names": ["add"],
        "gen_ai.request.tool_choice": "auto",
        "gen_ai.request.system_prompt": true,
        "gen_ai.response.finish_reasons": ["tool-calls"],
        "gen_ai.response.tool_calls": ["add"],
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 3,
        "gen_ai.usage.total_tokens": 10
      })
      assert.strictEqual(second!.attributes.get("gen_ai.agent.step"), 1)
      assert.strictEqual(second!.attributes.get("gen_ai.request.message_count"), 3)
      assert.deepStrictEqual(second!.attributes.get("gen_ai.response.finish_reasons"), ["stop"])
      assert.deepStrictEqual(second!.attributes.get("gen_ai.response.tool_calls"), [])
      // the span sits in the loop's model call span and ended successfully
      const parent = Option.getOrThrow(first!.parent) as SpanRecorder.RecordedSpan
      assert.strictEqual(parent.name, "Agent.modelCall")
      assert.strictEqual(first!.status._tag === "Ended" && first!.status.exit._tag, "Success")
    }).pipe(
      provide([
        ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }], {
          usage: { inputTokens: 7, outputTokens: 3, totalTokens: 10 }
        }),
        ScriptedModel.text("3")
      ]),
      Effect.withTracer(tracer)
    )
  })

  it.effect("records each tool call: name, id, whether the agent knows it and whether it failed", () => {
    const { spans, tracer } = SpanRecorder.make()
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [Tracing.middleware({ name: "tracing" })] })
      yield* agent.run("go", { threadId: "t" })
      const tools = hookSpans(spans, "wrapToolCall").map((span) => genAi(span.attributes))
      const byId = Object.fromEntries(tools.map((attributes) => [attributes["gen_ai.tool.call.id"], attributes]))
      assert.deepStrictEqual(byId["ok"], {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "ok",
        "gen_ai.tool.known": true,
        "gen_ai.conversation.id": "t",
        "gen_ai.agent.step": 0,
        "gen_ai.tool.is_failure": false
      })
      assert.strictEqual(byId["bad"]!["gen_ai.tool.is_failure"], true)
      assert.strictEqual(byId["bad"]!["gen_ai.tool.known"], true)
      assert.strictEqual(byId["unknown"]!["gen_ai.tool.known"], false)
      assert.strictEqual(byId["unknown"]!["gen_ai.tool.is_failure"], true)
      const parent = Option.getOrThrow(hookSpans(spans, "wrapToolCall")[0]!.parent) as SpanRecorder.RecordedSpan
      assert.strictEqual(parent.name, "Agent.toolCall")
    }).pipe(
      provide([
        ScriptedModel.toolCalls([
          { name: "add", params: { a: 1, b: 2 }, id: "ok" },
          { name: "add", params: { a: "one" }, id: "bad" },
          { name: "multiply", params: {}, id: "unknown" }
        ]),
        ScriptedModel.text("done")
      ]),
      Effect.withTracer(tracer)
    )
  })

  it.effect("records the error type of a failed model call and lets the error through", () => {
    const { spans, tracer } = SpanRecorder.make()
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [Tracing.middleware()] })
      const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      assert.strictEqual(error._tag, "UnknownError")
      const [span] = hookSpans(spans, "wrapModelCall")
      assert.strictEqual(span!.attributes.get("error.type"), "UnknownError")
      assert.isFalse(span!.attributes.has("gen_ai.response.finish_reasons"))
      assert.strictEqual(span!.status._tag === "Ended" && span!.status.exit._tag, "Failure")
    }).pipe(
      provide([new AiError.UnknownError({ module: "Test", method: "generateText", description: "down" })]),
      Effect.withTracer(tracer)
    )
  })

  it.effect("changes nothing about the run", () =>
    Effect.gen(function*() {
      const plain = yield* Agent.make({ toolkit: Tools })
      const traced = yield* Agent.make({ toolkit: Tools, middleware: [Tracing.middleware()] })
      const a = yield* plain.run("1 + 2?", { threadId: "a" })
      const b = yield* traced.run("1 + 2?", { threadId: "b" })
      assert.deepStrictEqual(b.state.messages, a.state.messages)
      const requests = yield* ScriptedModel.requests
      assert.deepStrictEqual(requests[2]!.prompt, requests[0]!.prompt)
      assert.deepStrictEqual(requests[3]!.prompt, requests[1]!.prompt)
    }).pipe(provide([
      ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c" }]),
      ScriptedModel.text("3"),
      ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c" }]),
      ScriptedModel.text("3")
    ])))
})
