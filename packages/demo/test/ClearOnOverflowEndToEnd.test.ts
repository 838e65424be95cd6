/**
 * End to end: `ContextOverflow.middleware({ policy: "clearToolUses" })`
 * recovers from OpenAI's `context_length_exceeded` over the real
 * `@effect/ai-openai` client, against a fake OpenAI server on 127.0.0.1 that
 * rejects requests over its context window with the real error body: the
 * old tool results are cleared from the request and it is retried once.
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, ModelProfile } from "@stepwise-agent/core"
import * as ContextEditing from "@stepwise-agent/middleware/ContextEditing"
import * as ContextOverflow from "@stepwise-agent/middleware/ContextOverflow"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Cause, Effect, Exit, Layer, Option, Schema } from "effect"

const apiKey = "sk-secret-clear-on-overflow-key"
/** The fake model's window, in the fake's estimate (characters of the request over 4). */
const window = 500

const Fetch = Tool.make("fetch", { parameters: { page: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Fetch)
/** Every page is 1,200 characters (about 300 of the fake's tokens): one fits in the window, two do not. */
const ToolsLive = Tools.toLayer({
  fetch: ({ page }) => Effect.succeed(`${page}:${page.repeat(1200 - page.length - 1)}`)
})

const fetchCall = (page: string) =>
  FakeOpenAi.toolCalls([{ callId: `call_${page}`, name: "fetch", arguments: { page } }])

const setup = (script: ReadonlyArray<FakeOpenAi.Reply>) =>
  Effect.gen(function*() {
    const server = yield* FakeOpenAi.make(script, { contextWindow: window })
    const model = yield* Layer.build(
      ModelProfile.model("gpt-4o", (model) => FakeOpenAi.languageModel(server, { model, apiKey }))
    )
    const overflow = ContextOverflow.middleware({ policy: "clearToolUses", keep: 1 })
    const agent = yield* Agent.make({ toolkit: Tools, middleware: [overflow] }).pipe(
      Effect.provide(Layer.mergeAll(Layer.succeedContext(model), ToolsLive, Checkpointer.layerMemory))
    )
    const run = (input: string) =>
      agent.run(input, { threadId: "t" }).pipe(
        Effect.provide(model),
        Effect.map((r) => r._tag === "Completed" && r.text)
      )
    return { server, agent, run }
  })

const rejected = (request: FakeOpenAi.RecordedRequest) => FakeOpenAi.inputTokens(request.body) > window
const outputs = (request: FakeOpenAi.RecordedRequest) =>
  FakeOpenAi.inputSummary(request.body).filter((line) => line.startsWith("function_call_output")).map((line) =>
    line.slice(0, 40)
  )

describe("clear tool results on overflow, end to end", () => {
  it.scoped("a rejected request has its old tool results cleared and is retried once; later calls clear first", () =>
    Effect.gen(function*() {
      const { agent, run, server } = yield* setup([
        fetchCall("a"),
        fetchCall("b"),
        FakeOpenAi.text("first answer"),
        FakeOpenAi.text("second answer")
      ])
      assert.strictEqual(yield* run("Read pages a and b"), "first answer")
      const requests = yield* server.requests
      // call a, call b, the answer with both results (rejected), its retry with a's result cleared
      assert.deepStrictEqual(requests.map(rejected), [false, false, true, false])
      assert.strictEqual(requests[2]!.answeredWith, "Json")
      assert.deepStrictEqual(outputs(requests[2]!), [
        `function_call_output:call_a:"a:${"a".repeat(9)}`,
        `function_call_output:call_b:"b:${"b".repeat(9)}`
      ])
      assert.deepStrictEqual(outputs(requests[3]!), [
        "function_call_output:call_a:\"[cleared]\"",
        `function_call_output:call_b:"b:${"b".repeat(9)}`
      ])

      // the stored thread keeps both results whole
      const stored = Option.getOrThrow(yield* agent.thread("t")).state.messages
      const results = stored.flatMap((m) => m.role === "tool" ? m.content : [])
      assert.deepStrictEqual(results.map((r) => (r.result as string).length), [1200, 1200])
      assert.isFalse(results.some(ContextEditing.isCleared))

      // the thread overflowed: its next call is cleared before it is sent, and is not rejected
      assert.strictEqual(yield* run("Thanks"), "second answer")
      const after = yield* server.requests
      assert.deepStrictEqual(after.slice(4).map(rejected), [false])
      assert.deepStrictEqual(outputs(after[4]!), [
        "function_call_output:call_a:\"[cleared]\"",
        `function_call_output:call_b:"b:${"b".repeat(9)}`
      ])
    }))

  it.scoped("when the cleared request is still too long the run fails with ContextOverflow, no secret in it", () =>
    Effect.gen(function*() {
      const { run, server } = yield* setup([fetchCall("a"), FakeOpenAi.text("unused")])
      const exit = yield* Effect.exit(run(`Read page a. ${"x".repeat(1400)}`))
      assert.isTrue(Exit.isFailure(exit))
      if (!Exit.isFailure(exit)) return
      const error = Option.getOrThrow(Cause.failureOption(exit.cause))
      assert.strictEqual(error._tag, "ContextOverflow")
      if (error._tag !== "ContextOverflow") return
      const requests = yield* server.requests
      // the user message alone nearly fills the window: with a's result it is rejected, and a
      // is the one result kept (keep: 1), so there is nothing to clear
      assert.deepStrictEqual(requests.map(rejected), [false, true])
      assert.deepStrictEqual(
        [error.model, error.compacted, error.status, error.limit],
        ["gpt-4o", false, 400, window]
      )
      assert.strictEqual(error.reportedTokens, FakeOpenAi.inputTokens(requests[1]!.body))
      assert.include(error.message, "nothing to compact")
      assert.strictEqual(requests[1]!.headers.authorization, `Bearer ${apiKey}`)
      assert.notInclude(JSON.stringify(error), apiKey)
      assert.notInclude(Cause.pretty(exit.cause), apiKey)
    }))
})
