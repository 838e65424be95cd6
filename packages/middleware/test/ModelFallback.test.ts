import { LanguageModel, type Response } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Fiber, Layer, Option, Stream, TestClock } from "effect"
import * as Schema from "effect/Schema"
import * as ModelFallback from "../src/ModelFallback.js"
import * as ModelRetry from "../src/ModelRetry.js"

const status = (code: number) => ScriptedModel.httpError(code)

/** The agent's own (primary) model. */
const primary = (script: ReadonlyArray<ScriptedModel.Turn>) => Effect.provide(ScriptedModel.layer(script))
const requestCount = Effect.map(ScriptedModel.requests, (requests) => requests.length)
const countOf = (recorder: ScriptedModel.ScriptedModel.Service) =>
  Effect.map(recorder.requests, (requests) => requests.length)

describe("ModelFallback", () => {
  it.effect("answers with the next model when the primary one fails", () =>
    Effect.gen(function*() {
      const backup = yield* ScriptedModel.make([ScriptedModel.text("from backup")])
      const fallback = ModelFallback.middleware(backup.model)
      const agent = yield* Agent.make({ middleware: [fallback] })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("go", { threadId: "t" })))
      const ended = events.at(-1)!
      assert.strictEqual(
        ended._tag === "RunEnded" && ended.result._tag === "Completed" && ended.result.text,
        "from backup"
      )
      assert.deepStrictEqual(
        events.filter(AgentEvent.$is("MiddlewareDecision")).map((e) => e.decision),
        ["primary failed (500); trying fallback 1"]
      )
      assert.strictEqual(yield* requestCount, 1)
      assert.strictEqual(yield* countOf(backup.recorder), 1)
    }).pipe(primary([status(500)])))

  it.effect("tries the fallbacks in order and stops at the first success", () =>
    Effect.gen(function*() {
      const a = yield* ScriptedModel.make([status(429)])
      const b = yield* ScriptedModel.make([ScriptedModel.text("from b")])
      const c = yield* ScriptedModel.make([ScriptedModel.text("from c")])
      const fallback = ModelFallback.middleware(a.model, b.model, c.model)
      const agent = yield* Agent.make({ middleware: [fallback] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag === "Completed" && result.text, "from b")
      assert.deepStrictEqual(
        [yield* requestCount, yield* countOf(a.recorder), yield* countOf(b.recorder), yield* countOf(c.recorder)],
        [1, 1, 1, 0]
      )
      // the fallback received the same conversation
      const [seen] = yield* b.recorder.requests
      assert.deepStrictEqual(seen!.prompt.content.map((m) => m.role), ["user"])
    }).pipe(primary([status(503)])))

  it.effect("fails with ModelFallbackExhausted recording every attempt when all models fail", () =>
    Effect.gen(function*() {
      const a = yield* ScriptedModel.make([status(429)])
      const b = yield* ScriptedModel.make([status(400)])
      const fallback = ModelFallback.middleware(a.model, b.model)
      const agent = yield* Agent.make({ middleware: [fallback] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "ModelFallbackExhausted")
      if (error._tag !== "ModelFallbackExhausted") return
      assert.deepStrictEqual(
        error.attempts.map(({ error, model }) => [model, error._tag === "HttpResponseError" && error.response.status]),
        [["primary", 500], ["fallback 1", 429], ["fallback 2", 400]]
      )
      assert.strictEqual(error.lastError, error.attempts[2].error)
      assert.strictEqual(
        error.message,
        "All 3 models failed (primary: HttpResponseError 500; fallback 1: HttpResponseError 429; " +
          "fallback 2: HttpResponseError 400)"
      )
    }).pipe(primary([status(500)])))

  it.effect("starts every model call from the primary model", () =>
    Effect.gen(function*() {
      const backup = yield* ScriptedModel.make([ScriptedModel.toolCalls([{ name: "echo", params: { text: "x" } }])])
      const fallback = ModelFallback.middleware(backup.model)
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, middleware: [fallback] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag === "Completed" && result.text, "primary is back")
      assert.deepStrictEqual([yield* requestCount, yield* countOf(backup.recorder)], [2, 1])
    }).pipe(primary([status(500), ScriptedModel.text("primary is back")]), Effect.provide(Fixtures.echoLayer)))

  it.effect("builds an Effect or Layer fallback on first use, once per run", () =>
    Effect.gen(function*() {
      let effectBuilds = 0
      let layerBuilds = 0
      const first = yield* ScriptedModel.make([status(500), status(500), status(500), status(500)])
      const second = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([{ name: "echo", params: { text: "x" } }]),
        ScriptedModel.text("one"),
        ScriptedModel.text("two")
      ])
      const fromEffect = Effect.sync(() => (effectBuilds++, first.model))
      const fromLayer = Layer.effect(LanguageModel.LanguageModel, Effect.sync(() => (layerBuilds++, second.model)))
      const fallback = ModelFallback.middleware(fromEffect, fromLayer)
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, middleware: [fallback] })
      const one = yield* agent.run("one", { threadId: "t" })
      assert.strictEqual(one._tag === "Completed" && one.text, "one")
      assert.deepStrictEqual([effectBuilds, layerBuilds], [1, 1])
      const two = yield* agent.run("two", { threadId: "t" })
      assert.strictEqual(two._tag === "Completed" && two.text, "two")
      assert.deepStrictEqual([effectBuilds, layerBuilds], [2, 2])
    }).pipe(primary([status(500), status(500), status(500)]), Effect.provide(Fixtures.echoLayer)))

  it.effect("a fallback that cannot be built fails the run with its own error", () => {
    class NoApiKey extends Schema.TaggedError<NoApiKey>()("NoApiKey", {}) {}
    return Effect.gen(function*() {
      const fallback = ModelFallback.middleware(Effect.fail(new NoApiKey()))
      const agent = yield* Agent.make({ middleware: [fallback] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "NoApiKey")
    }).pipe(primary([status(500)]))
  })

  it.effect("lets errors of inner middleware through without falling back", () => {
    class Tripwire extends Schema.TaggedError<Tripwire>()("Tripwire", {}) {}
    const guard = Middleware.make({ name: "guard", wrapModelCall: () => Effect.fail(new Tripwire()) })
    return Effect.gen(function*() {
      const backup = yield* ScriptedModel.make([ScriptedModel.text("backup")])
      const fallback = ModelFallback.middleware(backup.model)
      const agent = yield* Agent.make({ middleware: [fallback, guard] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "Tripwire")
      assert.strictEqual(yield* countOf(backup.recorder), 0)
    }).pipe(primary([]))
  })

  it.effect("with ModelRetry inside, retries each model before falling back", () =>
    Effect.gen(function*() {
      const backup = yield* ScriptedModel.make([ScriptedModel.text("backup")])
      const fallback = ModelFallback.middleware(backup.model)
      const retry = ModelRetry.middleware({ maxRetries: 1, jitter: false, initialDelay: "1 second" })
      const agent = yield* Agent.make({ middleware: [fallback, retry] })
      const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result._tag === "Completed" && result.text, "backup")
      assert.deepStrictEqual([yield* requestCount, yield* countOf(backup.recorder)], [2, 1])
    }).pipe(primary([status(503), status(503)])))

  describe("replies that cannot be an answer (ModelReplyError)", () => {
    const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
    /** The roles of the thread's stored messages, if it was stored. */
    const roles = Option.map((
      thread: { readonly state: { readonly messages: ReadonlyArray<{ readonly role: string }> } }
    ) => thread.state.messages.map((m) => m.role))

    it.effect("falls back when the primary reply is cut short (run)", () =>
      Effect.gen(function*() {
        const backup = yield* ScriptedModel.make([ScriptedModel.text("from backup")])
        const fallback = ModelFallback.middleware(backup.model)
        const agent = yield* Agent.make({ middleware: [fallback] })
        const result = yield* agent.run("go", { threadId: "t" })
        assert.strictEqual(result._tag === "Completed" && result.text, "from backup")
        assert.deepStrictEqual(roles(yield* agent.thread("t")), Option.some(["user", "assistant"]))
      }).pipe(primary([ScriptedModel.truncated(ScriptedModel.text("It is sunny today."))])))

    for (
      const [what, turn] of [
        ["sends nothing (not a stream)", []],
        ["is empty", [{ type: "finish", reason: "stop", usage }]],
        ["is only reasoning", [{ type: "reasoning", text: "thinking" }, { type: "finish", reason: "stop", usage }]]
      ] as ReadonlyArray<readonly [string, ReadonlyArray<Response.PartEncoded>]>
    ) {
      it.effect(`falls back when a streamed primary reply ${what}, before any text was streamed`, () =>
        Effect.gen(function*() {
          const backup = yield* ScriptedModel.make([ScriptedModel.text("from backup")])
          const fallback = ModelFallback.middleware(backup.model)
          const agent = yield* Agent.make({ middleware: [fallback] })
          const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("go", { threadId: "t" })))
          const ended = events.at(-1)!
          assert.strictEqual(
            ended._tag === "RunEnded" && ended.result._tag === "Completed" && ended.result.text,
            "from backup"
          )
          assert.strictEqual(events.filter(AgentEvent.$is("TextDelta")).map((e) => e.delta).join(""), "from backup")
          assert.deepStrictEqual(yield* countOf(backup.recorder), 1)
        }).pipe(primary([turn])))
    }

    it.effect("a streamed reply cut short after its text was streamed fails with that ModelReplyError, not spliced with a fallback's", () =>
      Effect.gen(function*() {
        const backup = yield* ScriptedModel.make([ScriptedModel.text("from backup")])
        const fallback = ModelFallback.middleware(backup.model)
        const agent = yield* Agent.make({ middleware: [fallback] })
        const events: Array<AgentEvent.AgentEvent> = []
        const error = yield* Effect.flip(
          Stream.runForEach(agent.stream("go", { threadId: "t" }), (event) => Effect.sync(() => events.push(event)))
        )
        assert.strictEqual(error._tag, "ModelReplyError")
        if (error._tag !== "ModelReplyError") return
        assert.deepStrictEqual([error.reason, error.text], ["Truncated", "It is "])
        assert.strictEqual(events.filter(AgentEvent.$is("TextDelta")).map((e) => e.delta).join(""), "It is ")
        assert.deepStrictEqual(
          events.filter(AgentEvent.$is("MiddlewareDecision")).map((e) => e.decision),
          ["primary failed (truncated reply) after streaming text; not falling back"]
        )
        assert.strictEqual(yield* countOf(backup.recorder), 0)
        assert.deepStrictEqual(roles(yield* agent.thread("t")), Option.none())
      }).pipe(primary([ScriptedModel.truncated(ScriptedModel.text("It is sunny today."), { deltas: 2 })])))

    it.effect("records ModelReplyError attempts in ModelFallbackExhausted", () =>
      Effect.gen(function*() {
        const backup = yield* ScriptedModel.make([[{ type: "finish", reason: "stop", usage }]])
        const fallback = ModelFallback.middleware(backup.model)
        const agent = yield* Agent.make({ middleware: [fallback] })
        const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
        assert.strictEqual(error._tag, "ModelFallbackExhausted")
        if (error._tag !== "ModelFallbackExhausted") return
        assert.deepStrictEqual(
          error.attempts.map(({ error, model }) => [model, error._tag === "ModelReplyError" && error.reason]),
          [["primary", "Truncated"], ["fallback 1", "Empty"]]
        )
        assert.strictEqual(
          error.message,
          "All 2 models failed (primary: ModelReplyError truncated reply; fallback 1: ModelReplyError empty reply)"
        )
        assert.deepStrictEqual(roles(yield* agent.thread("t")), Option.none())
      }).pipe(primary([ScriptedModel.truncated(ScriptedModel.text("It is sunny today."))])))
  })

  describe("bad arguments", () => {
    it.effect("needs at least one fallback", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Middleware.build(ModelFallback.middleware()))
        assert.deepStrictEqual([error._tag, error.option], ["InvalidOptions", "models"])
      }))

    it.effect("rejects a value that is not a model source", () =>
      Effect.gen(function*() {
        const backup = yield* ScriptedModel.make([])
        const error = yield* Effect.flip(
          Middleware.build(ModelFallback.middleware(backup.model, { generateText: 1 } as any) as Middleware.Middleware)
        )
        assert.deepStrictEqual([error._tag, error.option], ["InvalidOptions", "models[1]"])
      }))
  })
})
