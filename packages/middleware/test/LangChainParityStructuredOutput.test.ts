/**
 * LangChain JS v1's own cases for structured output with the tool strategy
 * (`libs/langchain/src/agents/tests/responses.test.ts`), asserted through Stepwise's public API.
 * Stepwise always uses the tool strategy: one `final_answer` tool (docs/getting-started.md#structured-output).
 */
import type { Prompt } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Option, Ref, Schema } from "effect"

const Something = Tool.make("something", { parameters: { result: Schema.Number }, success: Schema.String })
const Tools = Toolkit.make(Something)
const Foo = Schema.Struct({ foo: Schema.String })

const run = <R>(
  script: ReadonlyArray<ScriptedModel.Turn>,
  body: (ran: Ref.Ref<number>) => Effect.Effect<void, unknown, R>
) =>
  Effect.gen(function*() {
    const ran = yield* Ref.make(0)
    const live = Tools.toLayer({ something: () => Effect.as(Ref.update(ran, (n) => n + 1), "done") })
    yield* body(ran).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), live)))
  })

const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

const finalAnswer = (params: unknown, id: string) => ({ name: "final_answer", params, id })

describe("LangChain parity: structured output (tool strategy)", () => {
  // two `final_answer` calls in one reply: each is answered with an error and the model asked again (before,
  // both were answered as valid and the last one became the output)
  it.effect("should retry by default when multiple structured outputs are called", () =>
    run([
      ScriptedModel.toolCalls([finalAnswer({ foo: "foo" }, "call_1"), finalAnswer({ foo: "other" }, "call_2")]),
      ScriptedModel.toolCalls([finalAnswer({ foo: "valid structured value" }, "call_3")])
    ], () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, responseFormat: Foo })
        const result = yield* agent.run("hi", { threadId: "t" })
        assert.strictEqual(result._tag, "Completed")
        if (result._tag !== "Completed") return
        assert.deepStrictEqual(Option.getOrUndefined(result.output), { foo: "valid structured value" })
        const first = toolResults(result.state.messages).slice(0, 2)
        assert.deepStrictEqual(first.map((part) => part.isFailure), [true, true])
        assert.include(JSON.stringify(first[0]!.result), "final_answer")
        assert.strictEqual((yield* ScriptedModel.requests).length, 2)
      })))

  it.effect("single structured output tool call: should retry if error handler is set to true", () =>
    run([
      ScriptedModel.toolCalls([finalAnswer({ bar: "foo" }, "call_1")]),
      ScriptedModel.toolCalls([finalAnswer({ foo: "fixed structured value" }, "call_2")])
    ], () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, responseFormat: Foo })
        const result = yield* agent.run("hi", { threadId: "t" })
        if (result._tag !== "Completed") return assert.fail("expected the run to complete")
        assert.deepStrictEqual(Option.getOrUndefined(result.output), { foo: "fixed structured value" })
        const [failed] = toolResults(result.state.messages)
        assert.isTrue(failed!.isFailure)
        assert.include(JSON.stringify(failed!.result), "Invalid structured output")
      })))

  it.effect("single structured output tool call: should return a structured response if it matches the schema", () =>
    run([
      ScriptedModel.toolCalls([
        { name: "something", params: { result: 123 }, id: "call_1" },
        finalAnswer({ foo: "bar" }, "call_2")
      ]),
      ScriptedModel.toolCalls([finalAnswer({ foo: "bar" }, "call_3")])
    ], (ran) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, responseFormat: Foo })
        const result = yield* agent.run("hi", { threadId: "t" })
        if (result._tag !== "Completed") return assert.fail("expected the run to complete")
        assert.deepStrictEqual(Option.getOrUndefined(result.output), { foo: "bar" })
        assert.strictEqual(yield* Ref.get(ran), 1)
        assert.strictEqual((yield* ScriptedModel.requests).length, 1)
      })))

  it.effect("every model call of a run with responseFormat requires a tool call (toolChoice required)", () =>
    run([ScriptedModel.toolCalls([finalAnswer({ foo: "bar" }, "call_1")])], () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, responseFormat: Foo })
        yield* agent.run("hi", { threadId: "t" })
        const [request] = yield* ScriptedModel.requests
        assert.strictEqual(request!.toolChoice, "required")
        assert.include(request!.toolNames, "final_answer")
      })))
})
