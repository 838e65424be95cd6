import { LanguageModel } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import * as ScriptedModel from "../src/ScriptedModel.js"

describe("ScriptedModel", () => {
  it.effect("replays its turns in order, records each request, and fails clearly once the script runs out", () =>
    Effect.gen(function*() {
      const first = yield* LanguageModel.generateText({ prompt: "hi" })
      assert.strictEqual(first.text, "Hello!")
      const streamed = yield* LanguageModel.streamText({ prompt: "again" }).pipe(Stream.runCollect)
      assert.strictEqual(
        Chunk.toReadonlyArray(streamed).flatMap((part) => part.type === "text-delta" ? [part.delta] : []).join(""),
        "Hello again, world."
      )
      const requests = yield* ScriptedModel.requests
      assert.deepStrictEqual(requests.map((request) => request.streamed), [false, true])
      const exhausted = yield* Effect.flip(LanguageModel.generateText({ prompt: "more" }))
      assert.include(exhausted.message, "has no scripted reply")
    }).pipe(
      Effect.provide(ScriptedModel.layer([ScriptedModel.text("Hello!"), ScriptedModel.text("Hello again, world.")]))
    ))

  it.effect("httpError fails the call as a provider's HTTP error, generated or streamed", () =>
    Effect.gen(function*() {
      const generated = yield* Effect.flip(LanguageModel.generateText({ prompt: "hi" }))
      assert.strictEqual(generated._tag, "HttpResponseError")
      if (generated._tag !== "HttpResponseError") return
      assert.strictEqual(generated.response.status, 429)
      assert.strictEqual(generated.response.headers["retry-after"], "2")
      const streamed = yield* Effect.flip(LanguageModel.streamText({ prompt: "hi" }).pipe(Stream.runDrain))
      assert.strictEqual(streamed._tag === "HttpResponseError" && streamed.response.status, 503)
      assert.strictEqual((yield* LanguageModel.generateText({ prompt: "hi" })).text, "recovered")
    }).pipe(Effect.provide(ScriptedModel.layer([
      ScriptedModel.httpError(429, { "retry-after": "2" }),
      ScriptedModel.httpError(503),
      ScriptedModel.text("recovered")
    ]))))
})
