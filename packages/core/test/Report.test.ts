/**
 * `Middleware.report`: what it files (the run's `MiddlewareDecision` event,
 * the current span's `decision` attribute) and what it costs where there is
 * no span (a policy called directly, outside a run).
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel, SpanRecorder } from "@stepwise-agent/testing"
import { Chunk, Effect, Layer, Scheduler, Stream } from "effect"
import { CalculatorLive } from "./utils.js"

/** Effect operations `effect` runs (the scheduler is asked once per operation). */
const operations = (effect: Effect.Effect<unknown>): number => {
  let count = 0
  const counting: Scheduler.Scheduler = {
    scheduleTask: (task, priority) => Scheduler.defaultScheduler.scheduleTask(task, priority),
    shouldYield: (fiber) => {
      count++
      return Scheduler.defaultScheduler.shouldYield(fiber)
    }
  }
  Effect.runSync(Effect.withScheduler(effect, counting))
  return count
}

describe("Middleware.report", () => {
  it.effect("in a watched, traced run: files the decision as an event under its hook and on the current span", () => {
    const { spans, tracer } = SpanRecorder.make()
    return Effect.gen(function*() {
      const agent = yield* Agent.make({
        middleware: [
          Middleware.make({ name: "judge", beforeModel: () => Effect.as(Middleware.report("ok"), undefined) })
        ]
      })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("hi", { threadId: "t" })))
      const decisions = events.flatMap((event) =>
        event._tag === "MiddlewareDecision" ? [`${event.middleware}.${event.hook}: ${event.decision}`] : []
      )
      assert.deepStrictEqual(decisions, ["judge.beforeModel: ok"])
      const hook = spans.find((span) => span.name === "Middleware.beforeModel")
      assert.strictEqual(hook?.attributes.get("decision"), "ok")
    }).pipe(
      Effect.withTracer(tracer),
      Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("hello")]), CalculatorLive))
    )
  })

  it("sets the decision attribute of the current span outside a run too", () => {
    const { spans, tracer } = SpanRecorder.make()
    Effect.runSync(Middleware.report("ok").pipe(Effect.withSpan("policy"), Effect.withTracer(tracer)))
    assert.strictEqual(spans.find((span) => span.name === "policy")?.attributes.get("decision"), "ok")
  })

  it("leaves a span of the built-in tracer, which exports nothing, unannotated", () => {
    const attributes = Effect.runSync(
      Effect.zipRight(Middleware.report("ok"), Effect.map(Effect.currentSpan, (span) => span.attributes)).pipe(
        Effect.withSpan("policy")
      )
    )
    assert.isFalse(attributes.has("decision"))
  })

  it("with no span and no run, is one operation: it makes no error to ignore", () => {
    const bare = operations(Effect.void)
    // (`Effect.annotateCurrentSpan` with no span fails with a `NoSuchElementException`, stack trace and all,
    // and ignores it: ~28 operations at every report of a policy called directly)
    assert.isAtMost(operations(Middleware.report("ok", { n: 1 })) - bare, 2)
  })
})
