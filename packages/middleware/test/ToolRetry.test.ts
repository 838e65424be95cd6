import type { Prompt } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import type { Duration } from "effect"
import { Chunk, Effect, Exit, Fiber, Layer, Schedule, Stream, TestClock } from "effect"
import * as Schema from "effect/Schema"
import * as ToolRetry from "../src/ToolRetry.js"

const Flaky = Tool.make("flaky", { parameters: { key: Schema.String }, success: Schema.String, failure: Schema.String })
const Crashy = Tool.make("crashy", { parameters: { key: Schema.String }, success: Schema.String })
const Stuck = Tool.make("stuck", { parameters: { key: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Flaky, Crashy, Stuck)

/**
 * Handlers that fail (flaky: a typed failure, crashy: a defect) the first
 * `failures` times they are called with a key, and record every attempt.
 */
const toolsLive = (failures: number, attempts: Array<string>) => {
  const seen = new Map<string, number>()
  const attempt = (tool: string, key: string) => {
    attempts.push(`${tool}:${key}`)
    const n = (seen.get(key) ?? 0) + 1
    seen.set(key, n)
    return n <= failures
  }
  return Tools.toLayer({
    flaky: ({ key }) => Effect.suspend(() => attempt("flaky", key) ? Effect.fail(`nope ${key}`) : Effect.succeed(key)),
    crashy: ({ key }) => Effect.suspend(() => attempt("crashy", key) ? Effect.die(`boom ${key}`) : Effect.succeed(key)),
    stuck: ({ key }) => Effect.suspend(() => (attempt("stuck", key), Effect.interrupt))
  })
}

const call = (name: string, key: string) => ({ name, params: { key }, id: `${name}_${key}` })
const scriptOf = (...calls: ReadonlyArray<{ name: string; params: unknown; id: string }>) => [
  ScriptedModel.toolCalls(calls),
  ScriptedModel.text("done")
]

const setup = (failures: number, script: ReadonlyArray<ScriptedModel.Turn>, attempts: Array<string>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), toolsLive(failures, attempts)))

const advance = (duration: Duration.DurationInput) =>
  TestClock.adjust(duration).pipe(Effect.zipRight(Effect.repeatN(Effect.yieldNow(), 20)))

const toolResults = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.flatMap((m) => m.role === "tool" ? m.content.map((p) => ({ isFailure: p.isFailure, result: p.result })) : [])

const noJitter = { jitter: false, initialDelay: "1 second", factor: 2 } as const

/** Runs on the event stream, moving the clock a minute, and returns the result and the retry decisions. */
const runCollecting = (agent: Agent.AgentOf<any>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(Stream.runCollect(agent.stream("go", { threadId: "t" })))
    yield* advance("1 minute")
    const events = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
    const ended = events.at(-1)!
    assert.strictEqual(ended._tag, "RunEnded")
    return {
      result: (ended as Extract<AgentEvent.AgentEvent, { _tag: "RunEnded" }>).result,
      decisions: events.filter(AgentEvent.$is("MiddlewareDecision")).map((e) => e.decision)
    }
  })

describe("ToolRetry", () => {
  it.effect("retries a failed result with exponential backoff until it succeeds", () => {
    const attempts: Array<string> = []
    return Effect.gen(function*() {
      const retry = ToolRetry.middleware({ maxRetries: 3, ...noJitter })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [retry] })
      const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
      yield* advance(0)
      assert.strictEqual(attempts.length, 1)
      yield* advance("999 millis")
      assert.strictEqual(attempts.length, 1)
      yield* advance("1 milli")
      assert.strictEqual(attempts.length, 2)
      yield* advance("1999 millis")
      assert.strictEqual(attempts.length, 2)
      yield* advance("1 milli")
      assert.strictEqual(attempts.length, 3)
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(toolResults(result.state.messages), [{ isFailure: false, result: "a" }])
    }).pipe(setup(2, scriptOf(call("flaky", "a")), attempts))
  })

  it.effect("reports each retry", () => {
    const attempts: Array<string> = []
    return Effect.gen(function*() {
      const retry = ToolRetry.middleware({ maxRetries: 3, ...noJitter })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [retry] })
      const { decisions } = yield* runCollecting(agent)
      assert.deepStrictEqual(decisions, [
        "retry 1 of 3 after crashy crashed, waiting 1s",
        "retry 2 of 3 after crashy crashed, waiting 2s"
      ])
    }).pipe(setup(2, scriptOf(call("crashy", "a")), attempts))
  })

  it.effect("returns the last failed result as it is when the retries run out", () => {
    const attempts: Array<string> = []
    return Effect.gen(function*() {
      const retry = ToolRetry.middleware({ maxRetries: 2, ...noJitter })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [retry] })
      const { result } = yield* runCollecting(agent)
      assert.deepStrictEqual(attempts, ["flaky:a", "flaky:a", "flaky:a"])
      assert.deepStrictEqual(toolResults(result.state.messages), [{ isFailure: true, result: "nope a" }])
      assert.strictEqual(result._tag === "Completed" && result.text, "done")
    }).pipe(setup(5, scriptOf(call("flaky", "a")), attempts))
  })

  it.effect("continue: a tool that keeps crashing becomes a failed result, and the run goes on", () => {
    const attempts: Array<string> = []
    return Effect.gen(function*() {
      const retry = ToolRetry.middleware({ maxRetries: 1, ...noJitter })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [retry] })
      const { decisions, result } = yield* runCollecting(agent)
      assert.deepStrictEqual(attempts, ["crashy:a", "crashy:a"])
      const [only] = toolResults(result.state.messages)
      assert.isTrue(only!.isFailure)
      assert.strictEqual((only!.result as { error: string }).error, `Tool "crashy" crashed after 2 attempts.`)
      assert.strictEqual(result._tag === "Completed" && result.text, "done")
      assert.strictEqual(decisions.at(-1), "giving up after 2 attempt(s): crashy crashed")
    }).pipe(setup(5, scriptOf(call("crashy", "a")), attempts))
  })

  it.effect.each(["raise", "error"] as const)(
    "%s: a tool that keeps crashing fails the run with its ToolDefect",
    (onFailure) => {
      const attempts: Array<string> = []
      return Effect.gen(function*() {
        const retry = ToolRetry.middleware({ maxRetries: 2, onFailure, ...noJitter })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [retry] })
        const fiber = yield* Effect.fork(Effect.flip(agent.run("go", { threadId: "t" })))
        yield* advance("1 minute")
        const error = yield* Fiber.join(fiber)
        assert.strictEqual(error._tag, "ToolDefect")
        assert.strictEqual(error._tag === "ToolDefect" && error.toolName, "crashy")
        assert.strictEqual(attempts.length, 3)
      }).pipe(setup(5, scriptOf(call("crashy", "a")), attempts))
    }
  )

  it.effect("does not retry invalid arguments or unknown tools", () => {
    const attempts: Array<string> = []
    return Effect.gen(function*() {
      const retry = ToolRetry.middleware({ maxRetries: 3, ...noJitter })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [retry] })
      const { decisions, result } = yield* runCollecting(agent)
      assert.deepStrictEqual(decisions, [])
      assert.deepStrictEqual(attempts, [])
      assert.deepStrictEqual(toolResults(result.state.messages).map((r) => r.isFailure), [true, true])
    }).pipe(setup(
      5,
      scriptOf({ name: "flaky", params: { key: 1 }, id: "bad" }, { name: "nope", params: {}, id: "unknown" }),
      attempts
    ))
  })

  it.effect("retries only the tools listed in tools", () => {
    const attempts: Array<string> = []
    return Effect.gen(function*() {
      const retry = ToolRetry.middleware({ tools: ["crashy"], maxRetries: 1, ...noJitter })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [retry] })
      const { result } = yield* runCollecting(agent)
      assert.deepStrictEqual([...attempts].sort(), ["crashy:b", "crashy:b", "flaky:a"])
      assert.deepStrictEqual(toolResults(result.state.messages), [
        { isFailure: true, result: "nope a" },
        { isFailure: false, result: "b" }
      ])
    }).pipe(setup(1, scriptOf(call("flaky", "a"), call("crashy", "b")), attempts))
  })

  it.effect("a custom retryOn decides what is retried", () => {
    const attempts: Array<string> = []
    return Effect.gen(function*() {
      const retry = ToolRetry.middleware({
        retryOn: (failure) => failure._tag === "Defect",
        maxRetries: 1,
        ...noJitter
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [retry] })
      yield* runCollecting(agent)
      assert.deepStrictEqual([...attempts].sort(), ["crashy:b", "crashy:b", "flaky:a"])
    }).pipe(setup(1, scriptOf(call("flaky", "a"), call("crashy", "b")), attempts))
  })

  it.effect("parallel calls back off independently", () => {
    const attempts: Array<string> = []
    return Effect.gen(function*() {
      const retry = ToolRetry.middleware({ maxRetries: 1, ...noJitter })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [retry] })
      const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
      yield* advance(0)
      assert.strictEqual(attempts.length, 2)
      yield* advance("1 second")
      assert.strictEqual(attempts.length, 4)
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(toolResults(result.state.messages).map((r) => r.isFailure), [false, false])
    }).pipe(setup(1, scriptOf(call("flaky", "a"), call("flaky", "b")), attempts))
  })

  it.effect("a user schedule sets the delays", () => {
    const attempts: Array<string> = []
    return Effect.gen(function*() {
      const retry = ToolRetry.middleware({ maxRetries: 2, schedule: Schedule.spaced("5 seconds") })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [retry] })
      const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
      yield* advance("4999 millis")
      assert.strictEqual(attempts.length, 1)
      yield* advance("1 milli")
      assert.strictEqual(attempts.length, 2)
      yield* advance("5 seconds")
      assert.strictEqual(attempts.length, 3)
      yield* Fiber.join(fiber)
    }).pipe(setup(2, scriptOf(call("flaky", "a")), attempts))
  })

  it.effect("never retries an interrupt", () => {
    const attempts: Array<string> = []
    return Effect.gen(function*() {
      const retry = ToolRetry.middleware({ maxRetries: 3, ...noJitter })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [retry] })
      const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
      yield* advance("1 minute")
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.isInterrupted(exit))
      assert.deepStrictEqual(attempts, ["stuck:a"])
    }).pipe(setup(0, scriptOf(call("stuck", "a")), attempts))
  })

  describe("bad options", () => {
    const cases: ReadonlyArray<readonly [string, ToolRetry.Options]> = [
      ["maxRetries", { maxRetries: -2 }],
      ["factor", { factor: Number.POSITIVE_INFINITY }],
      ["maxDelay", { maxDelay: "-1 seconds" as any }],
      ["jitter", { schedule: Schedule.spaced("1 second"), jitter: true }],
      ["schedule", { schedule: "1 second" as any }],
      ["onFailure", { onFailure: "fail" as any }],
      ["tools[1]", { tools: ["search", ""] }],
      ["retryOn", { retryOn: "defects" as any }]
    ]
    for (const [option, options] of cases) {
      const shown = JSON.stringify(options, (_, v) => Schedule.isSchedule(v) ? "<schedule>" : v)
      it.effect(`rejects ${option} in ${shown}`, () =>
        Effect.gen(function*() {
          const error = yield* Effect.flip(Middleware.build(ToolRetry.middleware(options)))
          assert.deepStrictEqual([error._tag, error.option], ["InvalidOptions", option])
        }))
    }
  })
})
