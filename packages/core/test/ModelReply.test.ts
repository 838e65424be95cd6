import { Prompt, Response } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import * as ModelRetry from "@stepwise-agent/middleware/ModelRetry"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Fiber, Layer, Option, Stream, TestClock } from "effect"

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), Checkpointer.layerMemory))

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }

/** Runs `run` (generate), then `stream`, each on a fresh model with `turn`; returns both failures. */
const bothModes = (turn: ScriptedModel.Turn) =>
  Effect.gen(function*() {
    const generated = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({})
      return yield* Effect.flip(agent.run("hi", { threadId: "t" }))
    }).pipe(provide([turn]))
    const streamed = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({})
      return yield* Effect.flip(Stream.runDrain(agent.stream("hi", { threadId: "t" })))
    }).pipe(provide([turn]))
    return [generated, streamed] as const
  })

describe("model replies that cannot be an answer", () => {
  it.effect("a stream cut before its finish fails with ModelReplyError truncated, keeping the streamed text", () =>
    Effect.gen(function*() {
      const [generated, streamed] = yield* bothModes(
        ScriptedModel.truncated(ScriptedModel.text("It is sunny today."), { deltas: 2 })
      )
      assert.strictEqual(streamed._tag, "ModelReplyError")
      assert.strictEqual(generated._tag, "ModelReplyError")
      if (streamed._tag !== "ModelReplyError" || generated._tag !== "ModelReplyError") return
      assert.strictEqual(streamed.reason, "Truncated")
      assert.strictEqual(streamed.text, "It is ")
      assert.isTrue(streamed.streamed)
      assert.strictEqual(generated.reason, "Truncated")
      assert.strictEqual(generated.text, "It is sunny today.")
    }))

  it.effect("an empty reply fails with ModelReplyError empty over generate and stream", () =>
    Effect.gen(function*() {
      for (
        const turn of [
          [{ type: "finish", reason: "stop", usage }],
          [{ type: "text", text: "  " }, { type: "finish", reason: "stop", usage }],
          [{ type: "reasoning", text: "thinking" }, { type: "finish", reason: "length", usage }]
        ] as ReadonlyArray<ReadonlyArray<Response.PartEncoded>>
      ) {
        const [generated, streamed] = yield* bothModes(turn)
        for (const error of [generated, streamed]) {
          assert.strictEqual(error._tag, "ModelReplyError")
          if (error._tag === "ModelReplyError") assert.strictEqual(error.reason, "Empty")
        }
      }
    }))

  it.effect("a stream that sends nothing fails with ModelReplyError not-a-stream; the thread is not written", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({})
      const error = yield* Effect.flip(Stream.runDrain(agent.stream("hi", { threadId: "t" })))
      assert.strictEqual(error._tag, "ModelReplyError")
      if (error._tag === "ModelReplyError") assert.strictEqual(error.reason, "NotAStream")
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
    }).pipe(provide([[]])))

  it.effect("attaching a watcher (the inspector) does not change the outcome of an empty reply", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({})
      const error = yield* Effect.scoped(Effect.gen(function*() {
        yield* agent.watch
        return yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      }))
      assert.strictEqual(error._tag, "ModelReplyError")
      const requests = yield* ScriptedModel.requests
      assert.isTrue(requests[0]!.streamed)
    }).pipe(provide([[{ type: "finish", reason: "stop", usage }]])))

  it.effect("ModelRetry retries a stream dropped mid-reply; the second attempt is stored once", () =>
    Effect.gen(function*() {
      const retry = ModelRetry.middleware({ maxRetries: 1, initialDelay: "1 second", jitter: false })
      const agent = yield* Agent.make({ middleware: [retry] })
      const fiber = yield* Effect.fork(Stream.runCollect(agent.stream("hi", { threadId: "t" })))
      yield* TestClock.adjust("1 second")
      const events = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
      assert.deepStrictEqual(
        events.filter((event) => event._tag === "ModelAttemptFailed").map((event) => event._tag),
        ["ModelAttemptFailed"]
      )
      const stored = Option.getOrThrow(yield* agent.thread("t")).state.messages
      assert.deepStrictEqual(stored.map((message) => message.role), ["user", "assistant"])
      const answer = stored[1]!
      assert.deepStrictEqual(
        answer.role === "assistant" ? answer.content.map((part) => part.type === "text" ? part.text : "") : [],
        ["It is sunny today."]
      )
    }).pipe(provide([
      ScriptedModel.truncated(ScriptedModel.text("It is sunny today."), {
        deltas: 2,
        error: ScriptedModel.decodeError()
      }),
      ScriptedModel.text("It is sunny today.")
    ])))

  it.effect("a wrapModelCall answering with an empty message fails with EmptyModelResponse naming it", () =>
    Effect.gen(function*() {
      const cache = Middleware.make({
        name: "cache",
        wrapModelCall: () =>
          Effect.succeed({
            message: Prompt.makeMessage("assistant", { content: [] }),
            toolCalls: [],
            usage: new Response.Usage({ inputTokens: undefined, outputTokens: undefined, totalTokens: undefined }),
            finishReason: "stop" as const
          })
      })
      const agent = yield* Agent.make({ middleware: [cache] })
      const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      assert.strictEqual(error._tag, "EmptyModelResponse")
      if (error._tag === "EmptyModelResponse") assert.strictEqual(error.middleware, "cache")
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
    }).pipe(provide([])))
})
