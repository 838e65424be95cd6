/**
 * End to end: Summarization recovers from OpenAI's `context_length_exceeded`
 * over the real `@effect/ai-openai` client, against a fake OpenAI server on
 * 127.0.0.1 that rejects requests over its context window with the real
 * error body.
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, ModelProfile } from "@stepwise-agent/core"
import * as Summarization from "@stepwise-agent/middleware/Summarization"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import * as ScriptedModel from "@stepwise-agent/testing/ScriptedModel"
import { Cause, Effect, Exit, Layer, Option } from "effect"

const apiKey = "sk-secret-overflow-test-key"
/** The fake model's window, in the fake's estimate (characters of the request over 4). */
const window = 400

const setup = (script: ReadonlyArray<FakeOpenAi.Reply>) =>
  Effect.gen(function*() {
    const server = yield* FakeOpenAi.make(script, { contextWindow: window })
    const summarizer = yield* ScriptedModel.make(Array.from({ length: 5 }, () => ScriptedModel.text("SUMMARY")))
    // the name is written once: it builds the client and names the model for its profile
    const model = yield* Layer.build(
      ModelProfile.model("gpt-4o", (model) => FakeOpenAi.languageModel(server, { model, apiKey }))
    )
    const summarization = Summarization.middleware({ trigger: { fraction: 0.85 }, keep: { messages: 2 } })
    const agent = yield* Agent.make({ middleware: [summarization] }).pipe(
      Effect.provide(Layer.mergeAll(Layer.succeedContext(model), Summarization.layer(summarizer.model))),
      Effect.provide(Checkpointer.layerMemory)
    )
    return { server, agent, summarizer: summarizer.recorder, model }
  })

const rejected = (request: FakeOpenAi.RecordedRequest) => FakeOpenAi.inputTokens(request.body) > window

describe("context overflow end to end", () => {
  it.scoped("a rejected request is summarized and retried once; the thread is summarized before the next call", () =>
    Effect.gen(function*() {
      const { agent, model, server, summarizer } = yield* setup([
        FakeOpenAi.text("first answer"),
        FakeOpenAi.text("second answer"),
        FakeOpenAi.text("third answer")
      ])
      const run = (input: string) =>
        agent.run(input, { threadId: "t" }).pipe(
          Effect.provide(model),
          Effect.map((r) => r._tag === "Completed" && r.text)
        )

      // 0.85 of gpt-4o's 128k never triggers here: only the provider's limit does
      assert.strictEqual(yield* run(`A ${"a".repeat(700)}`), "first answer")
      assert.strictEqual(yield* run(`B ${"b".repeat(700)}`), "second answer")
      const requests = yield* server.requests
      assert.deepStrictEqual(requests.map(rejected), [false, true, false])
      assert.strictEqual(requests[1]!.answeredWith, "Json")
      const retry = FakeOpenAi.inputSummary(requests[2]!.body)
      assert.deepStrictEqual(retry.map((line) => line.slice(0, 40)), [
        `user:${Summarization.defaultSummaryPrefix}`.slice(0, 40),
        "assistant:first answer",
        `user:B ${"b".repeat(33)}`
      ])
      assert.include(retry[0]!, "SUMMARY")
      assert.strictEqual((yield* summarizer.requests).length, 1)

      // the stored thread still holds A: the next call summarizes it, under the trigger
      assert.strictEqual(yield* run("C"), "third answer")
      const third = FakeOpenAi.inputSummary((yield* server.requests)[3]!.body)
      assert.isTrue(third[0]!.startsWith(`user:${Summarization.defaultSummaryPrefix}`))
      assert.isFalse(third.some((line) => line.includes("aaaa")))
      assert.strictEqual((yield* summarizer.requests).length, 2)
      const stored = yield* agent.thread("t")
      assert.isTrue(Summarization.isSummary(Option.getOrThrow(stored).state.messages[0]!))
    }))

  it.scoped("when the summarized request is still too long the run fails with ContextOverflow, no secret in it", () =>
    Effect.gen(function*() {
      const { agent, model, server } = yield* setup([FakeOpenAi.text("hello")])
      const run = (input: string) => agent.run(input, { threadId: "t" }).pipe(Effect.provide(model))
      yield* run("hi")
      const exit = yield* Effect.exit(run(`huge ${"x".repeat(2000)}`))
      assert.isTrue(Exit.isFailure(exit))
      if (!Exit.isFailure(exit)) return
      const error = Option.getOrThrow(Cause.failureOption(exit.cause))
      assert.strictEqual(error._tag, "ContextOverflow")
      if (error._tag !== "ContextOverflow") return
      const requests = yield* server.requests
      // hi, the huge request, its summarized retry: both rejected
      assert.deepStrictEqual(requests.map(rejected), [false, true, true])
      assert.strictEqual(error.model, "gpt-4o")
      assert.strictEqual(error.compacted, true)
      assert.strictEqual(error.status, 400)
      assert.strictEqual(error.limit, window)
      assert.strictEqual(error.reportedTokens, FakeOpenAi.inputTokens(requests[2]!.body))
      assert.strictEqual(error.messages, 3)
      assert.isAbove(error.measuredTokens, 500)
      assert.include(error.providerMessage, `maximum context length is ${window} tokens`)
      assert.include(error.message, "even after compaction")
      // the client sent the key; the typed error holds none of it
      assert.strictEqual(requests[1]!.headers.authorization, `Bearer ${apiKey}`)
      assert.notInclude(JSON.stringify(error), apiKey)
      assert.notInclude(String(error), apiKey)
      assert.notInclude(Cause.pretty(exit.cause), apiKey)
    }))
})
