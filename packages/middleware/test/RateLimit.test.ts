import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import type { Duration } from "effect"
import { Chunk, Clock, Effect, Fiber, Layer, Option, Schema, Stream, TestClock } from "effect"
import * as RateLimit from "../src/RateLimit.js"

const Search = Tool.make("search", { parameters: { q: Schema.String }, success: Schema.String })
const Fetch = Tool.make("fetch", { parameters: { url: Schema.String }, success: Schema.String })
const Read = Tool.make("read", { parameters: { path: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Search, Fetch, Read)

/** Handlers that record `name@millis` when they run. */
const toolsLive = (log: Array<string>) => {
  const at = (name: string) => Effect.map(Clock.currentTimeMillis, (now) => (log.push(`${name}@${now}`), name))
  return Tools.toLayer({ search: () => at("search"), fetch: () => at("fetch"), read: () => at("read") })
}

/** A scripted turn that records when the model was called. */
const timed = (log: Array<number>, parts: ReadonlyArray<any>): ScriptedModel.Turn => () =>
  Effect.map(Clock.currentTimeMillis, (now) => (log.push(now), parts))

const provide = (script: ReadonlyArray<ScriptedModel.Turn>, toolLog: Array<string> = []) =>
  Effect.provide(Layer.mergeAll(ScriptedModel.layer(script), toolsLive(toolLog), RateLimit.layer))

const search = (q: string) => ScriptedModel.toolCalls([{ name: "search", params: { q } }])

/** Runs `effect` in a fiber, advancing the TestClock by `step` until it is done. */
const runOnClock = <A, E, R>(effect: Effect.Effect<A, E, R>, step: Duration.DurationInput, maxSteps = 20) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(effect)
    for (let i = 0; i < maxSteps; i++) {
      const done = yield* Fiber.poll(fiber)
      if (Option.isSome(done)) break
      yield* TestClock.adjust(step)
    }
    return yield* Fiber.join(fiber)
  })

describe("RateLimit model", () => {
  it.effect("spaces model calls by the limit", () => {
    const calls: Array<number> = []
    return Effect.gen(function*() {
      const rateLimit = RateLimit.middleware({ model: { limit: 1, interval: "1 second" } })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [rateLimit] })
      const result = yield* runOnClock(agent.run("go", { threadId: "t" }), "100 millis")
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(calls, [0, 1000, 2000])
    }).pipe(provide([
      timed(calls, search("a")),
      timed(calls, search("b")),
      timed(calls, ScriptedModel.text("done"))
    ]))
  })

  it.effect("the bucket outlives a run: the next run waits for it", () => {
    const calls: Array<number> = []
    return Effect.gen(function*() {
      const rateLimit = RateLimit.middleware({ model: { limit: 2, interval: "10 seconds" } })
      const agent = yield* Agent.make({ middleware: [rateLimit] })
      yield* agent.run("one", { threadId: "a" })
      yield* agent.run("two", { threadId: "b" })
      const third = yield* Effect.fork(agent.run("three", { threadId: "c" }))
      yield* TestClock.adjust("4999 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(third)))
      yield* TestClock.adjust("1 millis")
      yield* Fiber.join(third)
      assert.deepStrictEqual(calls, [0, 0, 5000])
    }).pipe(provide([
      timed(calls, ScriptedModel.text("1")),
      timed(calls, ScriptedModel.text("2")),
      timed(calls, ScriptedModel.text("3"))
    ]))
  })

  it.effect("fixed-window lets the limit through per window", () => {
    const calls: Array<number> = []
    return Effect.gen(function*() {
      const rateLimit = RateLimit.middleware({
        model: { limit: 2, interval: "1 minute", algorithm: "fixed-window" }
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [rateLimit] })
      yield* runOnClock(agent.run("go", { threadId: "t" }), "10 seconds")
      assert.deepStrictEqual(calls, [0, 0, 60000])
    }).pipe(provide([
      timed(calls, search("a")),
      timed(calls, search("b")),
      timed(calls, ScriptedModel.text("done"))
    ]))
  })

  it.effect("agents sharing the layer share the bucket; another middleware name has its own", () => {
    const calls: Array<number> = []
    return Effect.gen(function*() {
      const options = { model: { limit: 1, interval: "1 second" } } as const
      const first = yield* Agent.make({ middleware: [RateLimit.middleware(options)] })
      const second = yield* Agent.make({ middleware: [RateLimit.middleware(options)] })
      const other = yield* Agent.make({ middleware: [RateLimit.middleware({ ...options, name: "other" })] })
      yield* first.run("1", { threadId: "a" })
      yield* other.run("2", { threadId: "b" })
      yield* runOnClock(second.run("3", { threadId: "c" }), "250 millis")
      assert.deepStrictEqual(calls, [0, 0, 1000])
    }).pipe(provide([
      timed(calls, ScriptedModel.text("1")),
      timed(calls, ScriptedModel.text("2")),
      timed(calls, ScriptedModel.text("3"))
    ]))
  })

  it.effect("a call that waited reports how long", () =>
    Effect.gen(function*() {
      const rateLimit = RateLimit.middleware({ model: { limit: 1, interval: "2 seconds" } })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [rateLimit] })
      const events = yield* runOnClock(
        agent.stream("go", { threadId: "t" }).pipe(Stream.runCollect, Effect.map(Chunk.toArray)),
        "500 millis"
      )
      const decisions = events.filter(AgentEvent.$is("MiddlewareDecision"))
      assert.deepStrictEqual(decisions.map((d) => [d.middleware, d.hook, d.decision, d.data]), [
        ["rateLimit", "wrapModelCall", "waited 2000ms for the model rate limit (1 per 2s)", {
          target: "model",
          waitedMillis: 2000
        }]
      ])
    }).pipe(provide([search("a"), ScriptedModel.text("done")])))
})

describe("RateLimit tools", () => {
  it.effect("spaces calls of a limited tool, also parallel ones; other tools are not held", () => {
    const ran: Array<string> = []
    return Effect.gen(function*() {
      const rateLimit = RateLimit.middleware({ tools: { search: { limit: 1, interval: "1 second" } } })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [rateLimit] })
      yield* runOnClock(agent.run("go", { threadId: "t" }), "100 millis")
      assert.deepStrictEqual(ran.filter((entry) => entry.startsWith("search")), [
        "search@0",
        "search@1000",
        "search@2000"
      ])
      assert.deepStrictEqual(ran.filter((entry) => !entry.startsWith("search")), ["fetch@0", "read@0"])
    }).pipe(provide([
      ScriptedModel.toolCalls([
        { name: "search", params: { q: "a" } },
        { name: "search", params: { q: "b" } },
        { name: "fetch", params: { url: "u" } },
        { name: "search", params: { q: "c" } },
        { name: "read", params: { path: "p" } }
      ]),
      ScriptedModel.text("done")
    ], ran))
  })

  it.effect("tools without their own limit share the \"*\" bucket", () => {
    const ran: Array<string> = []
    return Effect.gen(function*() {
      const rateLimit = RateLimit.middleware({
        tools: { search: { limit: 5, interval: "1 second" }, "*": { limit: 1, interval: "3 seconds" } }
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [rateLimit], toolConcurrency: 1 })
      yield* runOnClock(agent.run("go", { threadId: "t" }), "500 millis")
      assert.deepStrictEqual(ran, ["fetch@0", "search@0", "read@3000"])
    }).pipe(provide([
      ScriptedModel.toolCalls([
        { name: "fetch", params: { url: "u" } },
        { name: "search", params: { q: "a" } },
        { name: "read", params: { path: "p" } }
      ]),
      ScriptedModel.text("done")
    ], ran))
  })
})

describe("RateLimit options", () => {
  it.effect("a limited tool the agent lacks fails Agent.make with UnknownTools", () =>
    Effect.gen(function*() {
      const rateLimit = RateLimit.middleware({
        tools: { serach: { limit: 1, interval: "1 second" }, "*": { limit: 1, interval: "1 second" } }
      })
      const error = yield* Effect.flip(Agent.make({ toolkit: Tools, middleware: [rateLimit] }))
      assert.strictEqual(error._tag, "UnknownTools")
      if (error._tag !== "UnknownTools") return
      assert.strictEqual(error.middleware, "rateLimit")
      assert.deepStrictEqual(error.names, ["serach"])
      assert.include(error.message, "Available tools: search, fetch, read")
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(provide([ScriptedModel.text("never")])))

  it.effect("bad options fail with InvalidOptions naming the option", () =>
    Effect.gen(function*() {
      const cases: Array<[RateLimit.Options, string, string]> = [
        [{}, "model", "give a model limit"],
        [{ model: { limit: 0, interval: "1 second" } }, "model.limit", "at least 1, actual 0"],
        [{ model: { limit: 1.5, interval: "1 second" } }, "model.limit", "whole number"],
        [{ model: { limit: 1, interval: "0 seconds" } }, "model.interval", "positive finite duration"],
        [{ model: { limit: 1, interval: "soon" as any } }, "model.interval", "actual \"soon\""],
        [{ model: { limit: 1, interval: Infinity } }, "model.interval", "positive finite"],
        [
          { model: { limit: 1, interval: "1 second", algorithm: "leaky" as any } },
          "model.algorithm",
          "actual \"leaky\""
        ],
        [{ tools: { "": { limit: 1, interval: "1 second" } } }, "tools[\"\"]", "a non-empty text"],
        [{ tools: { search: { limit: -1, interval: "1 second" } } }, "tools.search.limit", "at least 1"],
        [{ tools: { search: 3 as any } }, "tools.search", "Expected a limit { limit, interval, algorithm? }, actual 3"]
      ]
      for (const [options, option, reason] of cases) {
        const error = yield* Effect.flip(Middleware.build(RateLimit.middleware(options))).pipe(
          Effect.provide(RateLimit.layer)
        )
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.strictEqual(error.option, option)
        assert.include(error.message, reason)
      }
    }))
})
