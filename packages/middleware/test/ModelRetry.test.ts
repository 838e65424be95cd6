import { AiError, LanguageModel, Response } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, AgentEvent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Duration, Effect, Exit, Fiber, Option, Schedule, Stream, TestClock } from "effect"
import * as Schema from "effect/Schema"
import * as ModelRetry from "../src/ModelRetry.js"

const request = {
  method: "POST" as const,
  url: "https://api.test/v1/responses",
  urlParams: [],
  hash: Option.none(),
  headers: {}
}
const status = ScriptedModel.httpError
const transport = new AiError.HttpRequestError({ module: "Test", method: "generateText", reason: "Transport", request })
const malformed = new AiError.MalformedOutput({ module: "Test", method: "generateText", description: "bad json" })

const requestCount = Effect.map(ScriptedModel.requests, (requests) => requests.length)

/** Moves the test clock and lets the forked run catch up. */
const advance = (duration: Duration.DurationInput) =>
  TestClock.adjust(duration).pipe(Effect.zipRight(Effect.repeatN(Effect.yieldNow(), 20)))

const decisionsOf = (events: Chunk.Chunk<AgentEvent.AgentEvent<any>>) =>
  Chunk.toReadonlyArray(events).filter(AgentEvent.$is("MiddlewareDecision")).map((e) => e.decision)

const noJitter = { jitter: false, initialDelay: "1 second", factor: 2 } as const

describe("ModelRetry", () => {
  it.effect("retries 429 and 5xx with exponential backoff, then succeeds", () =>
    Effect.gen(function*() {
      const retry = ModelRetry.middleware({ maxRetries: 3, ...noJitter })
      const agent = yield* Agent.make({ middleware: [retry] })
      const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
      yield* advance(0)
      assert.strictEqual(yield* requestCount, 1)
      yield* advance("999 millis")
      assert.strictEqual(yield* requestCount, 1)
      yield* advance("1 milli")
      assert.strictEqual(yield* requestCount, 2)
      yield* advance("1999 millis")
      assert.strictEqual(yield* requestCount, 2)
      yield* advance("1 milli")
      assert.strictEqual(yield* requestCount, 3)
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result._tag === "Completed" && result.text, "ok")
    }).pipe(Effect.provide(ScriptedModel.layer([status(429), status(503), ScriptedModel.text("ok")]))))

  it.effect("reports each retry with its delay", () =>
    Effect.gen(function*() {
      const retry = ModelRetry.middleware({ maxRetries: 3, ...noJitter })
      const agent = yield* Agent.make({ middleware: [retry] })
      const fiber = yield* Effect.fork(Stream.runCollect(agent.stream("go", { threadId: "t" })))
      yield* advance("1 minute")
      const events = yield* Fiber.join(fiber)
      assert.deepStrictEqual(decisionsOf(events), [
        "retry 1 of 3 after 429, waiting 1s",
        "retry 2 of 3 after Transport, waiting 2s",
        "retry 3 of 3 after 500, waiting 4s"
      ])
      const data = Chunk.toReadonlyArray(events).filter(AgentEvent.$is("MiddlewareDecision")).map((e) => e.data)
      assert.deepStrictEqual(data[0], { attempt: 1, maxRetries: 3, failure: "429", delayMillis: 1000 })
    }).pipe(Effect.provide(ScriptedModel.layer([status(429), transport, status(500), ScriptedModel.text("ok")]))))

  it.effect.each([undefined, "raise", "error"] as const)(
    "raise (onFailure %s): fails with the last error after maxRetries retries",
    (onFailure) =>
      Effect.gen(function*() {
        const retry = ModelRetry.middleware({ maxRetries: 2, ...noJitter, ...(onFailure ? { onFailure } : {}) })
        const agent = yield* Agent.make({ middleware: [retry] })
        const fiber = yield* Effect.fork(Effect.flip(agent.run("go", { threadId: "t" })))
        yield* advance("1 minute")
        const error = yield* Fiber.join(fiber)
        assert.strictEqual(error._tag, "HttpResponseError")
        assert.strictEqual(error._tag === "HttpResponseError" && error.response.status, 502)
        assert.strictEqual(yield* requestCount, 3)
      }).pipe(Effect.provide(ScriptedModel.layer([status(500), status(503), status(502), ScriptedModel.text("ok")])))
  )

  it.effect("continue: answers with an assistant message explaining the failure", () =>
    Effect.gen(function*() {
      const retry = ModelRetry.middleware({ maxRetries: 1, onFailure: "continue", ...noJitter })
      const agent = yield* Agent.make({ middleware: [retry] })
      const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
      yield* advance("1 minute")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(
        result._tag === "Completed" && result.text,
        "The model call failed after 2 attempts (HttpResponseError 500: status 500)."
      )
      assert.strictEqual(yield* requestCount, 2)
    }).pipe(Effect.provide(ScriptedModel.layer([status(500), status(500), ScriptedModel.text("ok")]))))

  it.effect("does not retry errors retryOn rejects (a 400, malformed output)", () =>
    Effect.gen(function*() {
      const retry = ModelRetry.middleware({ maxRetries: 3, onFailure: "continue", ...noJitter })
      const agent = yield* Agent.make({ middleware: [retry] })
      const first = yield* agent.run("one", { threadId: "t" })
      assert.strictEqual(
        first._tag === "Completed" && first.text,
        "The model call failed after 1 attempt (HttpResponseError 400: status 400)."
      )
      const second = yield* agent.run("two", { threadId: "t" })
      assert.strictEqual(
        second._tag === "Completed" && second.text,
        "The model call failed after 1 attempt (MalformedOutput MalformedOutput: bad json)."
      )
      assert.strictEqual(yield* requestCount, 2)
    }).pipe(Effect.provide(ScriptedModel.layer([status(400), malformed, ScriptedModel.text("ok")]))))

  it.effect("a custom retryOn decides what is retried", () =>
    Effect.gen(function*() {
      const retry = ModelRetry.middleware({
        retryOn: (error) => error._tag === "MalformedOutput",
        ...noJitter
      })
      const agent = yield* Agent.make({ middleware: [retry] })
      const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
      yield* advance("1 second")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result._tag === "Completed" && result.text, "ok")
      assert.strictEqual(yield* requestCount, 2)
    }).pipe(Effect.provide(ScriptedModel.layer([malformed, ScriptedModel.text("ok")]))))

  describe("retry-after", () => {
    const waitsFor = (header: Record<string, string>, options: ModelRetry.Options, expected: number) =>
      Effect.gen(function*() {
        const retry = ModelRetry.middleware({ ...noJitter, ...options })
        const agent = yield* Agent.make({ middleware: [retry] })
        const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
        yield* advance(expected - 1)
        assert.strictEqual(yield* requestCount, 1)
        yield* advance(1)
        assert.strictEqual(yield* requestCount, 2)
        yield* Fiber.join(fiber)
      }).pipe(Effect.provide(ScriptedModel.layer([status(429, header), ScriptedModel.text("ok")])))

    it.effect("waits the seconds of a retry-after header when longer than the backoff", () =>
      waitsFor({ "retry-after": "5" }, {}, 5000))

    it.effect("reads retry-after-ms first, and header names in any case", () =>
      waitsFor({ "Retry-After-Ms": "2500", "retry-after": "9" }, {}, 2500))

    it.effect("reads an HTTP date", () =>
      // the test clock starts at the epoch
      waitsFor({ "retry-after": new Date(3000).toUTCString() }, {}, 3000))

    it.effect("keeps the backoff when it is longer than retry-after", () =>
      waitsFor({ "retry-after": "1" }, { initialDelay: "4 seconds" }, 4000))

    it.effect("cuts a retry-after longer than maxRetryAfter", () =>
      waitsFor({ "retry-after": "3600" }, { maxRetryAfter: "30 seconds" }, 30_000))

    it.effect("ignores retry-after when respectRetryAfter is false", () =>
      waitsFor({ "retry-after": "30" }, { respectRetryAfter: false }, 1000))

    it("retryAfter reads what the error carries", () => {
      assert.deepStrictEqual(
        ModelRetry.retryAfter(status(429, { "retry-after": "2" }), 0),
        Option.some(Duration.seconds(2))
      )
      assert.deepStrictEqual(ModelRetry.retryAfter(status(429, { "retry-after": "soon" }), 0), Option.none())
      assert.deepStrictEqual(ModelRetry.retryAfter(status(429), 0), Option.none())
      assert.deepStrictEqual(ModelRetry.retryAfter(transport, 0), Option.none())
      assert.deepStrictEqual(
        ModelRetry.retryAfter(status(503, { "retry-after": new Date(10_000).toUTCString() }), 4_000),
        Option.some(Duration.millis(6000))
      )
    })
  })

  it.effect("a user schedule replaces the backoff; maxRetries still applies", () =>
    Effect.gen(function*() {
      const retry = ModelRetry.middleware({ maxRetries: 2, schedule: Schedule.spaced("3 seconds") })
      const agent = yield* Agent.make({ middleware: [retry] })
      const fiber = yield* Effect.fork(Effect.flip(agent.run("go", { threadId: "t" })))
      yield* advance("2999 millis")
      assert.strictEqual(yield* requestCount, 1)
      yield* advance("1 milli")
      assert.strictEqual(yield* requestCount, 2)
      yield* advance("3 seconds")
      assert.strictEqual(yield* requestCount, 3)
      yield* advance("1 minute")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "HttpResponseError")
      assert.strictEqual(yield* requestCount, 3)
    }).pipe(Effect.provide(ScriptedModel.layer([status(500), status(500), status(500), ScriptedModel.text("ok")]))))

  it.effect("a schedule that ends stops the retries before maxRetries", () =>
    Effect.gen(function*() {
      const retry = ModelRetry.middleware({ maxRetries: 5, schedule: Schedule.recurs(1) })
      const agent = yield* Agent.make({ middleware: [retry] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "HttpResponseError")
      assert.strictEqual(yield* requestCount, 2)
    }).pipe(Effect.provide(ScriptedModel.layer([status(500), status(500), status(500)]))))

  it.effect.prop(
    "jittered delays stay within 0.8 to 1.2 of the exponential backoff, capped at maxDelay",
    { seed: Schema.Int },
    () =>
      Effect.gen(function*() {
        const retry = ModelRetry.middleware({ maxRetries: 4, initialDelay: "1 second", maxDelay: "5 seconds" })
        const agent = yield* Agent.make({ middleware: [retry] })
        const fiber = yield* Effect.fork(Stream.runCollect(agent.stream("go", { threadId: "t" })))
        yield* advance("1 minute")
        const delays = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
          .filter(AgentEvent.$is("MiddlewareDecision"))
          .map((e) => (e.data as { delayMillis: number }).delayMillis)
        assert.strictEqual(delays.length, 4)
        const expected = [1000, 2000, 4000, 8000]
        delays.forEach((delay, i) => {
          assert.isAtLeast(delay, Math.min(0.8 * expected[i]!, 5000))
          assert.isAtMost(delay, Math.min(1.2 * expected[i]!, 5000))
        })
      }).pipe(Effect.provide(ScriptedModel.layer([...Array(4).fill(status(503)), ScriptedModel.text("ok")]))),
    { fastCheck: { numRuns: 10 } }
  )

  it.effect("never retries an interrupt", () =>
    Effect.gen(function*() {
      const retry = ModelRetry.middleware({ maxRetries: 3, ...noJitter })
      const agent = yield* Agent.make({ middleware: [retry] })
      const exit = yield* Effect.exit(agent.run("go", { threadId: "t" }))
      assert.isTrue(Exit.isInterrupted(exit))
      assert.strictEqual(yield* requestCount, 1)
    }).pipe(Effect.provide(ScriptedModel.layer([() => Effect.interrupt, ScriptedModel.text("ok")]))))

  it.effect("stops retrying when the run is interrupted during the backoff", () =>
    Effect.gen(function*() {
      const retry = ModelRetry.middleware({ maxRetries: 3, ...noJitter })
      const agent = yield* Agent.make({ middleware: [retry] })
      const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
      yield* advance("500 millis")
      yield* Fiber.interrupt(fiber)
      yield* advance("1 minute")
      assert.strictEqual(yield* requestCount, 1)
    }).pipe(Effect.provide(ScriptedModel.layer([status(429), ScriptedModel.text("ok")]))))

  it.effect("does not retry defects", () =>
    Effect.gen(function*() {
      const retry = ModelRetry.middleware({ maxRetries: 3, ...noJitter })
      const agent = yield* Agent.make({ middleware: [retry] })
      const exit = yield* Effect.exit(agent.run("go", { threadId: "t" }))
      assert.isTrue(Exit.isFailure(exit) && !Exit.isInterrupted(exit))
      assert.strictEqual(yield* requestCount, 1)
    }).pipe(Effect.provide(ScriptedModel.layer([() => Effect.die("boom"), ScriptedModel.text("ok")]))))

  it.effect("lets errors of inner middleware through without retrying", () => {
    class Tripwire extends Schema.TaggedError<Tripwire>()("Tripwire", {}) {}
    let calls = 0
    const guard = Middleware.make({
      name: "guard",
      wrapModelCall: () => Effect.suspend(() => (calls++, Effect.fail(new Tripwire())))
    })
    return Effect.gen(function*() {
      const retry = ModelRetry.middleware({ maxRetries: 3, onFailure: "continue", ...noJitter })
      const agent = yield* Agent.make({ middleware: [retry, guard] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "Tripwire")
      assert.strictEqual(calls, 1)
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")])))
  })

  describe("bad options", () => {
    const invalid = (options: ModelRetry.Options) =>
      Effect.flip(Middleware.build(ModelRetry.middleware(options))).pipe(Effect.map((e) => [e._tag, e.option] as const))
    const cases: ReadonlyArray<readonly [string, ModelRetry.Options]> = [
      ["maxRetries", { maxRetries: -1 }],
      ["maxRetries", { maxRetries: 1.5 }],
      ["factor", { factor: 0.5 }],
      ["initialDelay", { initialDelay: "soon" as any }],
      ["maxDelay", { initialDelay: "10 seconds", maxDelay: "1 second" }],
      ["initialDelay", { schedule: Schedule.spaced("1 second"), initialDelay: "1 second" }],
      ["onFailure", { onFailure: "ignore" as any }],
      ["retryOn", { retryOn: true as any }],
      ["maxRetryAfter", { maxRetryAfter: "forever" as any }],
      ["respectRetryAfter", { respectRetryAfter: "yes" as any }]
    ]
    for (const [option, options] of cases) {
      const shown = JSON.stringify(options, (_, v) => Schedule.isSchedule(v) ? "<schedule>" : v)
      it.effect(`rejects ${option} in ${shown}`, () =>
        Effect.gen(function*() {
          assert.deepStrictEqual(yield* invalid(options), ["InvalidOptions", option])
        }))
    }
  })
})

describe("ModelRetry and the agent's modelTimeout", () => {
  it.live("a model call past modelTimeout is retried, and the next attempt answers", () =>
    Effect.gen(function*() {
      let calls = 0
      const model = {
        generateText: () =>
          Effect.suspend(() =>
            calls++ === 0
              ? Effect.never
              : Effect.succeed(
                new LanguageModel.GenerateTextResponse([
                  Response.makePart("text", { text: "answered" }),
                  Response.makePart("finish", {
                    reason: "stop",
                    usage: new Response.Usage({ inputTokens: 1, outputTokens: 1, totalTokens: 2 })
                  })
                ] as Array<Response.Part<any>>)
              )
          ),
        streamText: () => Stream.never,
        generateObject: () => Effect.dieMessage("not used")
      } as unknown as LanguageModel.Service
      const retry = ModelRetry.middleware({ maxRetries: 2, initialDelay: "1 millis", jitter: false })
      const agent = yield* Agent.make({ middleware: [retry], modelTimeout: "50 millis" }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model)
      )
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag === "Completed" ? result.text : undefined, "answered")
      assert.strictEqual(calls, 2)
    }))

  it("is not retried past maxReplyChars: the same stream would cost as much again", () => {
    const error = new AgentError.ModelReplyError({
      reason: "TooLarge",
      step: 0,
      streamed: true,
      text: "",
      received: []
    })
    assert.isFalse(ModelRetry.isRetryable(error))
    assert.isTrue(ModelRetry.isRetryable(new AgentError.ModelReplyError({ ...error, reason: "TimedOut" })))
  })
})
