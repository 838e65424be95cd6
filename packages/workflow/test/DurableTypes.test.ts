/**
 * A durable run keeps the agent's types: a completed run's structured output
 * (journaled encoded by the agent's `responseFormat`, given back decoded),
 * the thread's state, and waits typed by the waiting middleware's decision
 * schema (a claimed decision it refuses is `DecisionCorrupt`, a timeout's
 * decision is encoded with it).
 */
import { assert, describe, it } from "@effect/vitest"
import type { AgentState } from "@stepwise-agent/core"
import { Agent, AgentError, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Effect, Layer, Option, Schema } from "effect"
import * as path from "node:path"
import { tempDirectory } from "./support/databases.js"

const durable = <A extends AgentWorkflow.AnyAgent, E>(
  runs: AgentWorkflow.AgentWorkflow<A>,
  agent: Layer.Layer<Agent.Agent, E>
) =>
  runs.layer.pipe(
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

class NotGo extends Schema.TaggedError<NotGo>()("NotGo", { given: Schema.String }) {}

const Answer = Schema.Struct({ answer: Schema.Number, at: Schema.DateFromString })

describe("a durable run's outcome is typed like agent.run's result", () => {
  it.scopedLive("a completed run gives its structured output decoded with the agent's responseFormat, and the thread's state", () =>
    Effect.gen(function*() {
      const Runs = AgentWorkflow.make<Agent.AgentOf<readonly [], typeof Answer.Type>>({
        name: "typed-outcome",
        version: 1
      })
      const agent = Agent.layer({ responseFormat: Answer }).pipe(
        Layer.provide(ScriptedModel.layer([
          ScriptedModel.toolCalls([{ name: "final_answer", params: { answer: 42, at: "2026-12-07T00:00:00.000Z" } }])
        ]))
      )
      const context = yield* Layer.build(durable(Runs, agent))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "What is 6 * 7?" }))
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      const outcome = Option.getOrThrow(done.outcome)
      const output: Option.Option<{ readonly answer: number; readonly at: Date }> = outcome.output
      assert.isTrue(Option.isSome(output))
      const value = Option.getOrThrow(output)
      assert.strictEqual(value.answer, 42)
      assert.isTrue(value.at instanceof Date)
      assert.strictEqual(value.at.toISOString(), "2026-12-07T00:00:00.000Z")
      assert.strictEqual(outcome.steps, 1)
      // the thread's state, typed by the agent's
      const state: Option.Option<AgentState.AgentState> = done.threadState
      assert.deepStrictEqual(
        Option.map(state, (s) => s.messages.length),
        Option.some(done.messages.length)
      )
      assert.isTrue(done.messages.length > 0)
    }))

  it.scopedLive("on SQLite the output is stored as JSON and comes back decoded", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-typed-outcome-")
      const Runs = AgentWorkflow.make<Agent.AgentOf<readonly [], typeof Answer.Type>>({
        name: "typed-outcome-sqlite",
        version: 1
      })
      const agent = Agent.layer({ responseFormat: Answer }).pipe(
        Layer.provide(ScriptedModel.layer([
          ScriptedModel.toolCalls([{ name: "final_answer", params: { answer: 7, at: "2026-12-08T00:00:00.000Z" } }])
        ]))
      )
      const live = Runs.layer.pipe(
        Layer.provideMerge(agent),
        Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
        Layer.provideMerge(Authorizer.layer(() => true)),
        Layer.provideMerge(AgentEngine.layerSqlite({ filename: path.join(directory, "runs.db") }))
      )
      const context = yield* Layer.build(live)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "when?" }))
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      const output = Option.getOrThrow(Option.getOrThrow(done.outcome).output)
      assert.strictEqual(output.answer, 7)
      assert.isTrue(output.at instanceof Date)
      assert.strictEqual(output.at.toISOString(), "2026-12-08T00:00:00.000Z")
    }), { timeout: 60_000 })

  it.scopedLive("a run of an agent without a responseFormat gives no output", () =>
    Effect.gen(function*() {
      const Runs = AgentWorkflow.make({ name: "untyped-outcome", version: 1 })
      const agent = Agent.layer({}).pipe(Layer.provide(ScriptedModel.layer([ScriptedModel.text("hello")])))
      const context = yield* Layer.build(durable(Runs, agent))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const done = yield* run(Runs.await(yield* run(Runs.start({ threadId: "t", input: "hi" }))))
      const outcome = Option.getOrThrow(done.outcome)
      assert.strictEqual(outcome.text, "hello")
      assert.isTrue(Option.isNone(outcome.output))
    }))
})

describe("a durable wait is typed by the waiting middleware's decision schema", () => {
  const waitingRun = <D, I>(name: string, decision: Schema.Schema<D, I>, options?: {
    readonly decisionTimeout?: AgentWorkflow.Options["decisionTimeout"]
  }) =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const Runs = AgentWorkflow.make({ name, version: 1, ...options })
      const agent = Agent.layer({ middleware: [asking(decision, seen)] }).pipe(
        Layer.provide(ScriptedModel.layer([ScriptedModel.text("done")]))
      )
      const context = yield* Layer.build(durable(Runs, agent))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "hi" }))
      return { Runs, run, runId, seen }
    })

  it.scopedLive("a claimed decision whose value its wait's schema refuses is DecisionCorrupt, never delivered, until discardDecision clears it", () =>
    Effect.gen(function*() {
      const { Runs, run, runId, seen } = yield* waitingRun("corrupt-value", Schema.NumberFromString)
      const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
      const key = Option.getOrThrow(waiting.pending).key
      // a well-formed stored decision whose value is no encoded number (as a wait changed since, or a bad write)
      const stored = JSON.stringify({ value: { not: "a number" }, by: "mallory", decidedAt: 1 })
      yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.claimDecision(runId, key, stored)))
      const corrupt = [
        yield* run(Effect.flip(Runs.status(runId))),
        yield* run(Effect.flip(Runs.await(runId))),
        yield* run(Effect.flip(Runs.resume(runId, 7, { principal: "alice" })))
      ]
      assert.deepStrictEqual(corrupt.map((error) => error._tag), [
        "DecisionCorrupt",
        "DecisionCorrupt",
        "DecisionCorrupt"
      ])
      assert.strictEqual((corrupt[0] as AgentWorkflow.DecisionCorrupt).key, key)
      assert.deepStrictEqual(seen, [])
      assert.isTrue(yield* run(Runs.discardDecision(runId)))
      assert.strictEqual((yield* run(Runs.status(runId))).state, "Waiting")
      yield* run(Runs.resume(runId, 7, { principal: "alice" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      assert.deepStrictEqual(seen, [7])
    }))

  it.scopedLive("a claimed decision of a value the wait's schema has no member for is DecisionCorrupt, naming it", () =>
    Effect.gen(function*() {
      const { Runs, run, runId, seen } = yield* waitingRun("corrupt-literal", Schema.Literal("yes", "no"))
      const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
      const key = Option.getOrThrow(waiting.pending).key
      const stored = JSON.stringify({ value: "maybe", by: "mallory", decidedAt: 1 })
      yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.claimDecision(runId, key, stored)))
      const error = yield* run(Effect.flip(Runs.status(runId)))
      assert.strictEqual(error._tag, "DecisionCorrupt")
      assert.include(error.message, "maybe")
      assert.deepStrictEqual(seen, [])
    }))

  it.scopedLive("a claimed decision the wait's check refuses is DecisionCorrupt, never delivered", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const Runs = AgentWorkflow.make({ name: "corrupt-checked", version: 1 })
      const checked = Middleware.make({
        name: "checked",
        wait: {
          request: Schema.Struct({ question: Schema.String }),
          decision: Schema.String,
          check: ({ decision }) => decision === "go" ? Effect.void : Effect.fail(new NotGo({ given: decision }))
        },
        beforeModel: (context) =>
          Effect.sync(() => {
            if (Option.isSome(context.resume)) {
              seen.push(context.resume.value)
              return undefined
            }
            return context.step === 0 ? { interrupt: { question: "go?" } } : undefined
          })
      })
      const agent = Agent.layer({ middleware: [checked] }).pipe(
        Layer.provide(ScriptedModel.layer([ScriptedModel.text("done")]))
      )
      const context = yield* Layer.build(durable(Runs, agent))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "hi" }))
      const key = Option.getOrThrow((yield* run(Runs.await(runId, { untilWaiting: true }))).pending).key
      const stored = JSON.stringify({ value: "stop", by: "mallory", decidedAt: 1 })
      yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.claimDecision(runId, key, stored)))
      const error = yield* run(Effect.flip(Runs.status(runId)))
      assert.strictEqual(error._tag, "DecisionCorrupt")
      assert.isTrue(yield* run(Runs.discardDecision(runId)))
      // a decision the check accepts goes through
      assert.strictEqual(
        (yield* run(Effect.flip(Runs.resume(runId, "stop", { principal: "alice" }))))._tag,
        "InvalidDecision"
      )
      yield* run(Runs.resume(runId, "go", { principal: "alice" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      assert.deepStrictEqual(seen, ["go"])
    }))

  it.scopedLive("a decision timeout's decision is encoded with the wait's schema: the hook gets it decoded", () =>
    Effect.gen(function*() {
      const { Runs, run, runId, seen } = yield* waitingRun("timeout-encoded", Schema.DateFromString, {
        decisionTimeout: { after: "10 millis", decide: () => new Date("2026-12-07T00:00:00.000Z") }
      })
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      assert.strictEqual(seen.length, 1)
      assert.isTrue(seen[0] instanceof Date)
      assert.strictEqual((seen[0] as Date).toISOString(), "2026-12-07T00:00:00.000Z")
    }))

  it.scopedLive("a decision timeout's decision its wait's schema refuses fails the run with InvalidResume, typed", () =>
    Effect.gen(function*() {
      const { Runs, run, runId, seen } = yield* waitingRun("timeout-refused", Schema.Boolean, {
        decisionTimeout: { after: "10 millis", decide: () => "not a boolean" }
      })
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Failed")
      const failure = Option.getOrThrow(done.failure)
      assert.strictEqual(failure._tag, "AgentRunFailed")
      if (failure._tag !== "AgentRunFailed") return
      assert.isTrue(failure.error instanceof AgentError.InvalidResume)
      assert.include(failure.reason, "decisionTimeout")
      assert.deepStrictEqual(seen, [])
    }))

  it.scopedLive(
    "on SQLite a resumed and a timed-out decision go through JSON and reach the hook decoded",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-typed-wait-")
        const seen: Array<unknown> = []
        const Answered = AgentWorkflow.make({ name: "typed-wait-sqlite-answered", version: 1 })
        const TimedOut = AgentWorkflow.make({
          name: "typed-wait-sqlite-timed-out",
          version: 1,
          decisionTimeout: { after: "10 millis", decide: () => new Date("2026-12-09T00:00:00.000Z") }
        })
        const agent = Agent.layer({ middleware: [asking(Schema.DateFromString, seen)] }).pipe(
          Layer.provide(ScriptedModel.layer([ScriptedModel.text("done"), ScriptedModel.text("done")]))
        )
        const live = Layer.merge(Answered.layer, TimedOut.layer).pipe(
          Layer.provideMerge(agent),
          Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
          Layer.provideMerge(Authorizer.layer(() => true)),
          Layer.provideMerge(AgentEngine.layerSqlite({ filename: path.join(directory, "runs.db") }))
        )
        const context = yield* Layer.build(live)
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
        // one run answered by resume, one by its timeout
        const answered = yield* run(Answered.start({ threadId: "answered", input: "hi" }))
        yield* run(Answered.await(answered, { untilWaiting: true }))
        yield* run(Answered.resume(answered, new Date("2026-12-08T00:00:00.000Z"), { principal: "alice" }))
        assert.strictEqual((yield* run(Answered.await(answered))).state, "Completed")
        const timedOut = yield* run(TimedOut.start({ threadId: "timed-out", input: "hi" }))
        assert.strictEqual((yield* run(TimedOut.await(timedOut))).state, "Completed")
        assert.deepStrictEqual(
          seen.map((value) => value instanceof Date ? value.toISOString() : value),
          ["2026-12-08T00:00:00.000Z", "2026-12-09T00:00:00.000Z"]
        )
      }),
    { timeout: 60_000 }
  )
})
