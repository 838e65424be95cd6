import { assert, describe, it } from "@effect/vitest"
import type { AgentEvent } from "@stepwise-agent/core"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Deferred, Effect, Fiber, Layer, Stream, TestClock } from "effect"
import { Calculator, CalculatorLive } from "./utils.js"

const script = (): ReadonlyArray<ScriptedModel.Turn> => [
  ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }]),
  ScriptedModel.text("3")
]

/** Who each reported decision was filed under, as `middleware.hook: decision`. */
const decisionsOf = (events: ReadonlyArray<AgentEvent.AgentEvent<any>>) =>
  events.flatMap((event) =>
    event._tag === "MiddlewareDecision" ? [`${event.middleware}.${event.hook}: ${event.decision}`] : []
  )

/**
 * `outer` runs `next` and a report concurrently, and reports only once the
 * inner hook has started, so the report happens while `inner` is running.
 */
const concurrentReporters = Effect.gen(function*() {
  const innerStarted = yield* Deferred.make<void>()
  const outerReported = yield* Deferred.make<void>()
  const outer = Middleware.make({
    name: "outer",
    wrapToolCall: (request, next) =>
      Effect.map(
        Effect.all([
          next(request),
          Deferred.await(innerStarted).pipe(
            Effect.zipRight(Middleware.report("outer says")),
            Effect.zipRight(Deferred.succeed(outerReported, undefined))
          )
        ], { concurrency: "unbounded" }),
        ([result]) => result
      ),
    wrapModelCall: (request, next) =>
      Effect.map(
        Effect.all([next(request), Middleware.report("outer model")], { concurrency: "unbounded" }),
        ([response]) => response
      )
  })
  const inner = Middleware.make({
    name: "inner",
    wrapToolCall: (request, next) =>
      Deferred.succeed(innerStarted, undefined).pipe(
        Effect.zipRight(Deferred.await(outerReported)),
        Effect.zipRight(Middleware.report("inner says")),
        Effect.zipRight(next(request))
      ),
    afterModel: () => Effect.as(Middleware.report("inner after"), undefined)
  })
  return [outer, inner] as const
})

describe("decision attribution", () => {
  it.effect("a report from work a wrap hook forked is filed under that hook, while an inner hook runs", () =>
    Effect.gen(function*() {
      const middleware = yield* concurrentReporters
      const agent = yield* Agent.make({ toolkit: Calculator, middleware })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("1 + 2?", { threadId: "t" })))
      const decisions = decisionsOf(events)
      assert.includeMembers(decisions, [
        "outer.wrapToolCall: outer says",
        "inner.wrapToolCall: inner says",
        "outer.wrapModelCall: outer model",
        "inner.afterModel: inner after"
      ])
      assert.deepStrictEqual(decisions.filter((d) => d.endsWith("outer says")), ["outer.wrapToolCall: outer says"])
      assert.deepStrictEqual(
        decisions.filter((d) => d.endsWith("inner after")),
        ["inner.afterModel: inner after", "inner.afterModel: inner after"]
      )
      const ended = events.at(-1)
      assert.isTrue(ended?._tag === "RunEnded" && ended.result._tag === "Completed")
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script()), CalculatorLive))))

  it.effect("concurrent tool calls each file their reports under the hook that made them", () =>
    Effect.gen(function*() {
      const reporter = Middleware.make({
        name: "reporter",
        wrapToolCall: (request, next) => Effect.zipRight(Middleware.report(`ran ${request.call.id}`), next(request))
      })
      const after = Middleware.make({
        name: "after",
        afterAgent: () => Effect.as(Middleware.report("done"), undefined)
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [reporter, after], toolConcurrency: 2 })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("sums?", { threadId: "t" })))
      assert.sameMembers(decisionsOf(events), [
        "reporter.wrapToolCall: ran c1",
        "reporter.wrapToolCall: ran c2",
        "after.afterAgent: done"
      ])
    }).pipe(Effect.provide(Layer.merge(
      ScriptedModel.layer([
        ScriptedModel.toolCalls([
          { name: "add", params: { a: 1, b: 2 }, id: "c1" },
          { name: "add", params: { a: 3, b: 4 }, id: "c2" }
        ]),
        ScriptedModel.text("3 and 7")
      ]),
      CalculatorLive
    ))))

  it.effect("a report after an inner hook failed, or was cut off by a timeout, is filed under the hook that reports", () =>
    Effect.gen(function*() {
      const outer = Middleware.make({
        name: "outer",
        wrapToolCall: (request, next) =>
          // the failing call runs in this fiber, the stalling one under a timeout (in a fiber of its own)
          (request.call.id === "c1" ? next(request) : Effect.timeout(next(request), "1 second")).pipe(
            Effect.catchAll(() => Effect.as(Middleware.report("recovered"), Middleware.toolResult(request.call, "0")))
          )
      })
      const inner = Middleware.make({
        name: "inner",
        wrapToolCall: (request) =>
          request.call.id === "c1"
            ? Effect.zipRight(Middleware.report("failing"), Effect.fail("inner failed"))
            : Effect.zipRight(Middleware.report("stalling"), Effect.never)
      })
      const after = Middleware.make({
        name: "after",
        afterAgent: () => Effect.as(Middleware.report("done"), undefined)
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [after, outer, inner] })
      const fiber = yield* Effect.fork(Stream.runCollect(agent.stream("sums?", { threadId: "t" })))
      yield* TestClock.adjust("1 second")
      const events = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
      assert.deepStrictEqual(decisionsOf(events), [
        "inner.wrapToolCall: failing",
        "outer.wrapToolCall: recovered",
        "inner.wrapToolCall: stalling",
        "outer.wrapToolCall: recovered",
        "after.afterAgent: done"
      ])
    }).pipe(Effect.provide(Layer.merge(
      ScriptedModel.layer([
        ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }]),
        ScriptedModel.toolCalls([{ name: "add", params: { a: 3, b: 4 }, id: "c2" }]),
        ScriptedModel.text("done")
      ]),
      CalculatorLive
    ))))
})
