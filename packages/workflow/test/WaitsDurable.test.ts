import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import { Effect, Layer, Option, Schema } from "effect"

const Runs = AgentWorkflow.make({ name: "waits-durable", version: 1 })

const durable = <E>(agent: Layer.Layer<Agent.Agent, E>) =>
  Runs.layer.pipe(
    Layer.provideMerge(agent),
    Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory)),
    Layer.provideMerge(Authorizer.layer(() => true))
  )

/** Asks once before the first model call with a wait on `decision`; keeps what the hook gets. */
const asking = <D, I>(decision: Schema.Schema<D, I>, seen: Array<unknown>) =>
  Middleware.make({
    name: "asking",
    wait: { request: Schema.Struct({ question: Schema.String }), decision },
    beforeModel: (context) =>
      Effect.sync(() => {
        if (Option.isSome(context.resume)) {
          seen.push(context.resume.value)
          return undefined
        }
        return context.step === 0 ? { interrupt: { question: "go on?" } } : undefined
      })
  })

class Approval extends Schema.Class<Approval>("Approval")({ approve: Schema.Boolean, note: Schema.String }) {}

const roundTrip = <D, I>(label: string, decision: Schema.Schema<D, I>, value: D, check: (seen: unknown) => void) =>
  it.scopedLive(label, () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const agent = Agent.layer({ middleware: [asking(decision, seen)] }).pipe(
        Layer.provide(ScriptedModel.layer([ScriptedModel.text("done")]))
      )
      const context = yield* Layer.build(durable(agent))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "hi" }))
      yield* run(Runs.await(runId, { untilWaiting: true }))
      const resumed = yield* Effect.either(run(Runs.resume(runId, value as never, { principal: "alice" })))
      assert.strictEqual(resumed._tag, "Right")
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      assert.strictEqual(seen.length, 1)
      check(seen[0])
    }))

describe("typed waits on a durable run", () => {
  roundTrip("a Date decision (DateFromString)", Schema.DateFromString, new Date("2026-12-07T00:00:00.000Z"), (seen) => {
    assert.isTrue(seen instanceof Date)
    assert.strictEqual((seen as Date).toISOString(), "2026-12-07T00:00:00.000Z")
  })
  roundTrip("a number decision (NumberFromString)", Schema.NumberFromString, 42, (seen) => assert.strictEqual(seen, 42))
  roundTrip("a class decision", Approval, new Approval({ approve: true, note: "ok" }), (seen) => {
    assert.isTrue(seen instanceof Approval)
    assert.strictEqual((seen as Approval).note, "ok")
  })

  it.scopedLive("a decision refused by its schema, unreadable, or whose encoded form is not JSON fails resume with InvalidDecision; the run still waits and takes a good one", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const agent = Agent.layer({ middleware: [asking(Schema.Unknown, seen)] }).pipe(
        Layer.provide(ScriptedModel.layer([ScriptedModel.text("done")]))
      )
      const context = yield* Layer.build(durable(agent))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "hi" }))
      yield* run(Runs.await(runId, { untilWaiting: true }))
      const cyclic: Record<string, unknown> = {}
      cyclic.self = cyclic
      const unreadable = {
        get yes(): boolean {
          throw new Error("getter boom")
        }
      }
      for (const value of [{ n: 1n }, cyclic, unreadable]) {
        const error = yield* Effect.flip(run(Runs.resume(runId, value, { principal: "alice" })))
        assert.strictEqual(error._tag, "InvalidDecision")
        assert.strictEqual((yield* run(Runs.status(runId))).state, "Waiting")
      }
      yield* run(Runs.resume(runId, { yes: true }, { principal: "alice" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      assert.deepStrictEqual(seen, [{ yes: true }])
    }))

  it.scopedLive("a decision whose encoded form JSON does not give back as it decodes (NaN for a number) is refused before it is claimed", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const agent = Agent.layer({ middleware: [asking(Schema.Number, seen)] }).pipe(
        Layer.provide(ScriptedModel.layer([ScriptedModel.text("done")]))
      )
      const context = yield* Layer.build(durable(agent))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "hi" }))
      yield* run(Runs.await(runId, { untilWaiting: true }))
      const error = yield* Effect.flip(run(Runs.resume(runId, Number.NaN, { principal: "alice" })))
      assert.strictEqual(error._tag, "InvalidDecision")
      assert.strictEqual((yield* run(Runs.status(runId))).state, "Waiting")
      yield* run(Runs.resume(runId, 7, { principal: "alice" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      assert.deepStrictEqual(seen, [7])
    }))
})
