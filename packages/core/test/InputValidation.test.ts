import type { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Layer, Stream } from "effect"
import { Calculator, CalculatorLive, toolResults } from "./utils.js"

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))

const loneSurrogate = "thread-\uD800"

describe("run input", () => {
  for (const [label, input] of [["42", 42], ["{}", {}], ["null", null], ["undefined", undefined]] as const) {
    it.effect(`run(${label}) fails with InvalidInput naming the input, and the model is never called`, () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator })
        const error = yield* Effect.flip(agent.run(input as unknown as Prompt.RawInput, { threadId: "t" }))
        assert.strictEqual(error._tag, "InvalidInput")
        assert.include(
          error.message,
          `the input must be a string, an array of messages or a Prompt, got ${input === null ? "null" : typeof input}`
        )
        assert.deepStrictEqual(yield* ScriptedModel.requests, [])
        assert.isTrue((yield* agent.thread("t"))._tag === "None")
      }).pipe(provide([])))
  }

  it.effect("stream({}) ends with InvalidInput, not a defect", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator })
      const error = yield* Effect.flip(Stream.runDrain(agent.stream({} as Prompt.RawInput, { threadId: "t" })))
      assert.strictEqual((error as { _tag: string })._tag, "InvalidInput")
    }).pipe(provide([])))

  it.effect("a message array that is not a conversation fails with InvalidInput", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator })
      const error = yield* Effect.flip(agent.run([{ role: "wizard" }] as unknown as Prompt.RawInput, { threadId: "t" }))
      assert.strictEqual(error._tag, "InvalidInput")
      assert.include(error.message, "the input messages do not decode")
    }).pipe(provide([])))
})

describe("thread ids", () => {
  for (const [label, threadId] of [["a lone surrogate", loneSurrogate], ["empty", ""], ["a number", 7]] as const) {
    it.effect(`a thread id that is ${label} fails run, stream, resume and thread with InvalidInput`, () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator })
        const id = threadId as unknown as string
        const errors = [
          yield* Effect.flip(agent.run("hi", { threadId: id })),
          yield* Effect.flip(Stream.runDrain(agent.stream("hi", { threadId: id }))),
          yield* Effect.flip(agent.resume(id, "yes" as never)),
          yield* Effect.flip(agent.thread(id))
        ]
        for (const error of errors) {
          assert.strictEqual((error as { _tag: string })._tag, "InvalidInput")
          assert.include((error as Error).message, "the thread id must be a non-empty string without lone surrogates")
        }
        assert.deepStrictEqual(yield* ScriptedModel.requests, [])
        // nothing can be stored under such an id: deleting or discarding it is a no-op
        assert.isFalse(yield* agent.discardPending(id, "gone"))
        yield* agent.deleteThread(id)
      }).pipe(provide([])))
  }
})

describe("tool names from the model", () => {
  for (const name of ["constructor", "toString", "__proto__", "hasOwnProperty"]) {
    it.effect(`a call of a tool named ${name} gets the unknown-tool result and the run continues`, () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator })
        const result = yield* agent.run("hi", { threadId: "t" })
        assert.strictEqual(result._tag, "Completed")
        const [seen] = toolResults(result.state.messages)
        assert.strictEqual(seen!.name, name)
        assert.isTrue(seen!.isFailure)
        assert.include((seen!.result as { error: string }).error, `Unknown tool "${name}". Available tools: add`)
        assert.strictEqual(result._tag === "Completed" ? result.text : "", "done")
      }).pipe(provide([ScriptedModel.toolCalls([{ name, params: {}, id: "c1" }]), ScriptedModel.text("done")])))

    it.effect(`a streamed call of a tool named ${name} gets the unknown-tool result too`, () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator })
        const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("hi", { threadId: "t" })))
        const last = events[events.length - 1]!
        assert.strictEqual(last._tag, "RunEnded")
        if (last._tag !== "RunEnded") return
        const [seen] = toolResults(last.result.state.messages)
        assert.strictEqual(seen!.name, name)
        assert.isTrue(seen!.isFailure)
      }).pipe(provide([ScriptedModel.toolCalls([{ name, params: {}, id: "c1" }]), ScriptedModel.text("done")])))
  }
})
