import { AiError, LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type AgentEvent, Fork, Middleware, RunJournal, RunRecord, Secrets } from "@stepwise-agent/core"
import { HumanInTheLoop, SubAgents } from "@stepwise-agent/middleware"
import { Eval, ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RecordStore from "@stepwise-agent/workflow/RecordStore"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import {
  Chunk,
  Deferred,
  Effect,
  Either,
  FastCheck,
  Fiber,
  Layer,
  Option,
  Predicate,
  Schedule,
  Schema,
  Stream
} from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { tempDirectory } from "./support/databases.js"

const Runs = AgentWorkflow.make({ name: "durable-record", version: 1 })

const Calculator = Toolkit.make(
  Tool.make("add", {
    description: "Adds two numbers",
    parameters: { a: Schema.Number, b: Schema.Number },
    success: Schema.Number
  })
)

const script: ReadonlyArray<ScriptedModel.Turn> = [
  ScriptedModel.toolCalls([{ id: "call_1", name: "add", params: { a: 2, b: 3 } }]),
  ScriptedModel.toolCalls([{ id: "call_2", name: "add", params: { a: 5, b: 7 } }]),
  ScriptedModel.text("12")
]

/** A calculator whose `add` counts its calls. */
const counted = () => {
  const calls = { count: 0 }
  return { calls, layer: Calculator.toLayer({ add: ({ a, b }) => Effect.sync(() => (calls.count++, a + b)) }) }
}

/** Waits before model step `at` for `{ go }`, once per thread. */
const confirming = (at: number) =>
  Middleware.make({
    name: "confirm",
    wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.Struct({ go: Schema.Boolean }) },
    beforeModel: ({ resume, step }) =>
      Effect.succeed(Option.isNone(resume) && step === at ? { interrupt: { question: "Go on?" } } : undefined)
  })

/** Reports a decision before each model call, and inside each model call and tool call (in the journaled step). */
const audit = Middleware.make({
  name: "audit",
  beforeModel: ({ step }) => Effect.as(Middleware.report(`before model ${step}`, { step }), undefined),
  wrapModelCall: (request, next) => Effect.zipRight(Middleware.report("calling the model"), next(request)),
  wrapToolCall: (request, next) =>
    Effect.zipRight(Middleware.report(`running ${request.call.name}`, { callId: request.call.id }), next(request))
})

/** A record without its timing: when the run and each step started, and how long each took. */
/** A step's result without the thread's incarnation (a random nonce of each new thread's load). */
const withoutIncarnation = (entry: RunRecord.Entry & { readonly _tag: "Step" }) =>
  (entry.kind === "Load" || (entry.kind === "Nested" && entry.name.endsWith("/load"))) &&
    typeof entry.result === "object" && entry.result !== null
    ? { ...entry, result: { ...entry.result, incarnation: "" } }
    : entry

const timeless = (record: RunRecord.RunRecord) => ({
  header: { ...record.header, startedAt: 0 },
  entries: record.entries.map((entry) =>
    entry._tag === "Step"
      ? { ...withoutIncarnation(entry), startedAt: 0, durationMillis: 0 }
      : entry._tag === "End" || entry._tag === "Hook"
      ? { ...entry, durationMillis: 0 }
      : entry
  )
})

/**
 * The record of an in-process run of `turns` on thread "src", with the recording journal of
 * `RunRecord.record` over a journal that answers each wait with `{ go: true }` at once.
 */
const inProcessRecord = (turns: ReadonlyArray<ScriptedModel.Turn>, middleware: ReadonlyArray<Middleware.Any>) =>
  Effect.gen(function*() {
    const entries: Array<RunRecord.Entry> = []
    let input: RunRecord.Header["input"] = []
    const answering = RunJournal.RunJournal.of({
      ...RunJournal.inProcess,
      await: (interrupt) => Effect.map(RunJournal.decodeDecision(interrupt, { go: true }), Option.some)
    })
    const { add, journal } = RunRecord.recording(answering, {
      put: (slot, entry) =>
        Effect.sync(() => {
          entries[slot] = entry
        }),
      input: (messages) =>
        Effect.sync(() => {
          input = messages
        })
    })
    const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware })
    const result = yield* agent.run("What is 2 + 3 + 7?", { threadId: "src" }).pipe(
      Effect.provideService(RunJournal.RunJournal, journal)
    )
    yield* add(RunRecord.endOf(result, 0))
    const header = RunRecord.Header.make({ version: RunRecord.version, threadId: "src", startedAt: 0, input })
    return { header, entries }
  }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(turns), counted().layer)))

/** The engine: in memory, or SQLite in a new directory (or in `directory`, to read its files afterwards). */
type Engine = "memory" | "sqlite" | { readonly sqlite: string }

/** The durable stack on `engine`, with a record store, the agent on `turns` and the calculator counted by `tools`. */
const stack = (
  engine: Engine,
  turns: ReadonlyArray<ScriptedModel.Turn>,
  tools: Layer.Layer<any>,
  middleware: ReadonlyArray<Middleware.Any> = [confirming(1)],
  toolConcurrency?: number
) =>
  Effect.gen(function*() {
    const agent = Agent.layer({ toolkit: Calculator, systemPrompt: "You add.", middleware, toolConcurrency }).pipe(
      Layer.provide(tools)
    )
    const base = engine === "memory"
      ? Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory, RecordStore.layerMemory)
      : Layer.mergeAll(RunStore.layer(), RecordStore.layer(), SqlCheckpointer.layer()).pipe(
        Layer.provideMerge(
          AgentEngine.layerSqlite({
            filename: path.join(
              typeof engine === "object" ? engine.sqlite : yield* tempDirectory("stepwise-record-"),
              "runs.db"
            )
          })
        )
      )
    return yield* Layer.build(
      Runs.layer.pipe(
        Layer.provideMerge(agent),
        Layer.provideMerge(ScriptedModel.layer(turns)),
        Layer.provideMerge(base),
        Layer.provideMerge(Authorizer.layer(() => true))
      )
    )
  })

/** Runs the script on thread "src" durably: it waits at step 1, is resumed, and completes. */
const sourceRun = (run: <A, E>(effect: Effect.Effect<A, E, any>) => Effect.Effect<A, E, any>) =>
  Effect.gen(function*() {
    const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?", runId: "src-run" }))
    const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
    assert.strictEqual(waiting.state, "Waiting")
    yield* run(Runs.resume(runId, { go: true }, { principal: "alice" }))
    const done = yield* run(Runs.await(runId))
    assert.strictEqual(done.state, "Completed")
    return runId
  })

/** Replays `record` in process on an agent with `systemPrompt`, `middleware` and no model turns. */
const replayOn = (
  record: RunRecord.RunRecord,
  systemPrompt = "You add.",
  middleware: ReadonlyArray<Middleware.Any> = [confirming(1)]
) =>
  Effect.gen(function*() {
    const { calls, layer } = counted()
    return yield* Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt, middleware })
      const outcome = yield* Effect.either(agent.replay(record))
      return { outcome, modelCalls: (yield* ScriptedModel.requests).length, toolCalls: calls.count }
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([]), layer)))
  })

const engines: ReadonlyArray<Engine> = ["memory", "sqlite"]

describe.each(engines)("the record of a durable run (%s engine)", (engine) => {
  it.scopedLive("a durable run waited, resumed and completed is recorded, and replays in process with no model or tool call", () =>
    Effect.gen(function*() {
      const { calls, layer } = counted()
      const context = yield* stack(engine, script, layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* sourceRun(run)
      assert.strictEqual(calls.count, 2)
      const record = yield* run(Runs.record(runId))
      assert.strictEqual(record.header.version, RunRecord.version)
      assert.strictEqual(record.header.threadId, "src")
      const names = record.entries.flatMap((entry) => entry._tag === "Step" ? [entry.name] : [])
      assert.includeMembers(names, ["load", "model/0", "tool/call_1", "model/1", "tool/call_2", "model/2"])
      // every model step that ran has the request as sent and the reply; steps come once each, in order
      const models = record.entries.filter((entry) => entry._tag === "Step" && entry.kind === "Model")
      assert.strictEqual(models.length, 3)
      for (const model of models) assert.isTrue(model._tag === "Step" && model.sent?.systemPrompt === "You add.")
      assert.strictEqual(new Set(names).size, names.length)
      assert.deepInclude(record.entries.find((entry) => entry._tag === "Wait"), {
        middleware: "confirm",
        step: 1,
        decision: { go: true }
      })
      assert.deepInclude(record.entries.at(-1), { _tag: "End", outcome: "Completed", text: "12", steps: 3 })

      // JSONL, then a replay: no model call, no tool call, the recorded answer
      const read = yield* RunRecord.fromJsonl(RunRecord.toJsonl(record))
      const { modelCalls, outcome, toolCalls } = yield* replayOn(read)
      const replayed = Either.getOrThrow(outcome)
      assert.strictEqual(replayed._tag === "Completed" && replayed.text, "12")
      assert.deepStrictEqual([modelCalls, toolCalls], [0, 0])
    }))

  it.scopedLive("a waiting durable run has a record up to its wait; its replay ends there", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      const context = yield* stack(engine, script, layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?" }))
      yield* run(Runs.await(runId, { untilWaiting: true }))
      const record = yield* run(Runs.record(runId))
      const wait = record.entries.find((entry) => entry._tag === "Wait")
      assert.isTrue(wait !== undefined && wait._tag === "Wait" && wait.decision === undefined)
      assert.isUndefined(record.entries.find((entry) => entry._tag === "End"))
      const { modelCalls, outcome } = yield* replayOn(record)
      assert.strictEqual(Either.getOrThrow(outcome)._tag, "Interrupted")
      assert.strictEqual(modelCalls, 0)
    }))

  it.scopedLive("a durable run's record agrees entry by entry with an in-process record of the same script, middleware decisions included, apart from timing", () =>
    Effect.gen(function*() {
      // no wait: the in-process record is RunRecord.record's own
      const plain = yield* Effect.gen(function*() {
        const context = yield* stack(engine, script, counted().layer, [audit])
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
        const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?" }))
        assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
        return yield* run(Runs.record(runId))
      })
      const recorded = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware: [audit] })
        return (yield* RunRecord.record(agent, "What is 2 + 3 + 7?", { threadId: "src" })).record
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), counted().layer)))
      assert.deepStrictEqual(timeless(plain), timeless(recorded))
      const decisions = plain.entries.flatMap((entry) => entry._tag === "Decision" ? [entry.decision] : [])
      assert.deepStrictEqual(decisions, [
        "before model 0",
        "calling the model",
        "running add",
        "before model 1",
        "calling the model",
        "running add",
        "before model 2",
        "calling the model"
      ])

      // a wait: the durable run executes again after it (its hooks report again, its steps replay), and still
      // has each decision once, in its place, with the wait and its decision
      const waited = yield* Effect.gen(function*() {
        const context = yield* stack(engine, script, counted().layer, [audit, confirming(1)])
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
        return yield* run(Runs.record(yield* sourceRun(run)))
      })
      assert.deepStrictEqual(timeless(waited), timeless(yield* inProcessRecord(script, [audit, confirming(1)])))
      // and it replays through the wait, with no model or tool call
      const { modelCalls, outcome, toolCalls } = yield* replayOn(waited)
      assert.strictEqual(Either.getOrThrow(outcome)._tag, "Completed")
      assert.deepStrictEqual([modelCalls, toolCalls], [0, 0])
    }))

  it.scopedLive("a durable run that failed has a Failed end with its error; its replay stops where it failed, with no model call", () =>
    Effect.gen(function*() {
      const failing: ReadonlyArray<ScriptedModel.Turn> = [
        script[0]!,
        new AiError.UnknownError({ module: "Test", method: "generateText", description: "the model is down" })
      ]
      const context = yield* stack(engine, failing, counted().layer, [audit])
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Failed")
      const record = yield* run(Runs.record(runId))
      const end = record.entries.at(-1)
      assert.isTrue(end !== undefined && end._tag === "End" && end.outcome === "Failed", JSON.stringify(end))
      assert.deepInclude(end, { steps: 1 })
      assert.include(end?._tag === "End" ? end.error?.message : undefined, "the model is down")
      // the JSONL reads back; the replay serves step 0 and its tool call, then stops where the run failed
      const read = yield* RunRecord.fromJsonl(RunRecord.toJsonl(record))
      const replayed = yield* replayOn(read, "You add.", [audit])
      const stopped = Option.getOrThrow(Either.getLeft(replayed.outcome))
      assert.instanceOf(stopped, RunRecord.ReplayStopped)
      assert.deepInclude(stopped, { step: 1, outcome: "Failed" })
      assert.deepStrictEqual([replayed.modelCalls, replayed.toolCalls], [0, 0])
    }))
})

/** Scripts of 0–3 tool-call turns (1–3 parallel `add` calls each) and a final answer. */
const scripts = FastCheck.array(
  FastCheck.array(FastCheck.tuple(FastCheck.integer({ min: -9, max: 9 }), FastCheck.integer({ min: 0, max: 9 })), {
    minLength: 1,
    maxLength: 3
  }),
  { maxLength: 3 }
).map((turns): ReadonlyArray<ScriptedModel.Turn> => [
  ...turns.map((calls, turn) =>
    ScriptedModel.toolCalls(calls.map(([a, b], i) => ({ name: "add", params: { a, b }, id: `c${turn}_${i}` })))
  ),
  ScriptedModel.text("done")
])

/**
 * `golden/record-v1.rows.json`: the stored rows (slot, line; the header at -1) of the run "src-run" of `script` with
 * `audit` and `confirming(1)`, waiting at step 1, as the recorder of the previous version wrote them (slots 0, 1,
 * 2, … in the run's order, no middleware decisions).
 */
const legacyRows: ReadonlyArray<readonly [number, string]> = JSON.parse(
  fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), "golden", "record-v1.rows.json"), "utf8")
)

describe.each(engines)("a record stored in the previous slot numbering (%s engine)", (engine) => {
  it.scopedLive("record-v1.rows.json reads as it was stored, and its run goes on in that numbering: each step once, in order, replayable", () =>
    Effect.gen(function*() {
      const { calls, layer } = counted()
      const context = yield* stack(engine, script, layer, [audit, confirming(1)])
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const store = yield* run(RecordStore.RecordStore)
      yield* Effect.forEach(legacyRows, ([slot, line]) => store.put("src-run", slot, line), { discard: true })
      const stored = yield* RunRecord.fromJsonl(legacyRows.map(([, line]) => line).join("\n"))
      // the run was waiting when the upgrade came: it executes again up to its wait, and stores nothing new
      const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?", runId: "src-run" }))
      assert.strictEqual((yield* run(Runs.await(runId, { untilWaiting: true }))).state, "Waiting")
      assert.deepStrictEqual(yield* run(Runs.record(runId)), stored)
      // then it goes on: each step once, in the run's order, the wait with its decision, the end
      yield* run(Runs.resume(runId, { go: true }, { principal: "alice" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      const record = yield* run(Runs.record(runId))
      const names = record.entries.flatMap((entry) => entry._tag === "Step" ? [entry.name] : [])
      assert.deepStrictEqual(
        names.filter((name) => name.startsWith("model/") || name.startsWith("tool/")),
        ["model/0", "tool/call_1", "model/1", "tool/call_2", "model/2"]
      )
      assert.strictEqual(new Set(names).size, names.length, names.join(", "))
      assert.deepStrictEqual(record.entries.slice(0, stored.entries.length - 1), stored.entries.slice(0, -1))
      assert.deepInclude(record.entries.find((entry) => entry._tag === "Wait"), { step: 1, decision: { go: true } })
      assert.deepInclude(record.entries.at(-1), { _tag: "End", outcome: "Completed", text: "12", steps: 3 })
      assert.strictEqual(calls.count, 2)
      // and it replays in process with no model or tool call
      const { modelCalls, outcome, toolCalls } = yield* replayOn(record, "You add.", [audit, confirming(1)])
      assert.strictEqual(Either.getOrThrow(outcome)._tag, "Completed")
      assert.deepStrictEqual([modelCalls, toolCalls], [0, 0])
    }))

  it.scopedLive("a run waiting in the previous numbering, cancelled, ends Cancelled after its wait, each entry once", () =>
    Effect.gen(function*() {
      const context = yield* stack(engine, script, counted().layer, [audit, confirming(1)])
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const store = yield* run(RecordStore.RecordStore)
      yield* Effect.forEach(legacyRows, ([slot, line]) => store.put("src-run", slot, line), { discard: true })
      const stored = yield* RunRecord.fromJsonl(legacyRows.map(([, line]) => line).join("\n"))
      const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?", runId: "src-run" }))
      yield* run(Runs.await(runId, { untilWaiting: true }))
      yield* run(Runs.cancel(runId))
      const record = yield* run(Runs.record(runId))
      assert.deepStrictEqual(record.entries.slice(0, -1), stored.entries)
      assert.deepInclude(record.entries.at(-1), { _tag: "End", outcome: "Cancelled", steps: 1 })
    }))
})

describe("an Eval case of a durable record", () => {
  const gate = HumanInTheLoop.middleware({ toolkit: Calculator, interruptOn: { add: true } })
  /** The record of a durable run of `script` with `middleware`; a wait is approved whole. */
  const durableRecord = (middleware: ReadonlyArray<Middleware.Any>) =>
    Effect.gen(function*() {
      const context = yield* stack("memory", script, counted().layer, middleware)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?" }))
      for (let waits = 0; waits < 5; waits++) {
        const status = yield* run(Runs.await(runId, { untilWaiting: true }))
        if (status.state !== "Waiting") break
        const request = Option.flatMap(
          status.pending,
          (wait) => Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)
        )
        yield* run(Runs.resume(runId, HumanInTheLoop.approveAll(Option.getOrThrow(request)), { principal: "ana" }))
      }
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      return yield* run(Runs.record(runId))
    })
  /** The verdicts of noApprovalBypassed and replaysAsRecorded on the record, replayed on an agent with `middleware`. */
  const verdicts = (record: RunRecord.RunRecord, middleware: ReadonlyArray<Middleware.Any>) =>
    Effect.map(
      Eval.run(Eval.make({
        name: "durable",
        agent: Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware }).pipe(
          Effect.provide(counted().layer)
        ),
        cases: [Eval.fromRecord(record, { name: "prod" })],
        assertions: [Eval.noApprovalBypassed(["add"]), Eval.toolCalled("add", undefined, { times: 2 })]
      })),
      (report) => report.cases[0]!.assertions.map((entry) => [entry.name, entry.passes, entry.failures[0]?.reason])
    )

  it.scopedLive("a durable run whose gated calls were approved through its waits passes noApprovalBypassed", () =>
    Effect.gen(function*() {
      const record = yield* durableRecord([gate])
      assert.deepStrictEqual(yield* verdicts(record, [gate]), [
        ["noApprovalBypassed(add)", 1, undefined],
        ["toolCalled(add, 2×)", 1, undefined],
        ["replaysAsRecorded", 1, undefined]
      ])
    }))

  it.scopedLive("an assertion over the hooks of a durable run's tool calls sees them in the case's events", () =>
    Effect.gen(function*() {
      const record = yield* durableRecord([audit])
      const wrapped = Eval.custom(
        "audit wrapped each add",
        (run) =>
          run.events.filter((event) =>
            event._tag === "HookCompleted" && event.middleware === "audit" && event.hook === "wrapToolCall"
          ).length === 2
      )
      const report = yield* Eval.run(Eval.make({
        name: "durable hooks",
        agent: Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware: [audit] }).pipe(
          Effect.provide(counted().layer)
        ),
        cases: [Eval.fromRecord(record, { name: "prod" })],
        assertions: [wrapped]
      }))
      assert.deepStrictEqual(
        report.cases[0]!.assertions.map((entry) => [entry.name, entry.passes, entry.failures[0]?.reason]),
        [["audit wrapped each add", 1, undefined], ["replaysAsRecorded", 1, undefined]]
      )
    }))

  it.scopedLive("a durable run whose gated tool ran without an approval fails noApprovalBypassed, naming each call", () =>
    Effect.gen(function*() {
      const record = yield* durableRecord([])
      assert.deepStrictEqual(yield* verdicts(record, []), [
        ["noApprovalBypassed(add)", 0, "ran without an approval from humanInTheLoop: add (call_1), add (call_2)"],
        ["toolCalled(add, 2×)", 1, undefined],
        ["replaysAsRecorded", 1, undefined]
      ])
    }))
})

describe("a durable record and an in-process one", () => {
  it.live.prop(
    "agree entry by entry apart from timing, whatever the script: decisions of every hook, parallel calls and a wait included",
    { turns: scripts },
    ({ turns }) =>
      Effect.scoped(Effect.gen(function*() {
        const middleware = [audit, confirming(1)]
        const context = yield* stack("memory", turns, counted().layer, middleware)
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
        const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?" }))
        const first = yield* run(Runs.await(runId, { untilWaiting: true }))
        if (first.state === "Waiting") yield* run(Runs.resume(runId, { go: true }, { principal: "alice" }))
        assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
        const durable = yield* run(Runs.record(runId))
        assert.deepStrictEqual(timeless(durable), timeless(yield* inProcessRecord(turns, middleware)))
      })) as Effect.Effect<void, unknown>,
    { fastCheck: { numRuns: 12 } }
  )
})

/** What an event says, without timings and the parts only a call to a model has (its request, its deltas). */
const shape = (event: AgentEvent.AgentEvent<any, any, any>): unknown => {
  switch (event._tag) {
    case "ModelResponded":
      return [event._tag, event.step, event.message, event.usage]
    case "ToolCallStarted":
      return [event._tag, event.call, event.ledger]
    case "ToolCallCompleted":
      return [event._tag, event.result]
    case "MiddlewareDecision":
      return [event._tag, event.middleware, event.hook, event.decision, event.data]
    case "RunEnded":
      return [event._tag, event.result._tag, event.result.steps]
    case "HookCompleted":
      return [event._tag, event.middleware, event.hook]
    default:
      return [event._tag]
  }
}

/** Events a replay does not emit: no request is sent and nothing is streamed. */
const sentOnly = new Set(["ModelRequestSent", "TextDelta", "ReasoningDelta"])

/** Answers the calls whose `b` is even itself, without the hooks inside it or the tool: they do not run. */
const answering = Middleware.make({
  name: "answering",
  wrapToolCall: (request, next) => {
    const b = Predicate.hasProperty(request.call.params, "b") ? request.call.params.b : undefined
    return typeof b === "number" && b % 2 === 0
      ? Effect.as(Middleware.report("answered", { callId: request.call.id }), Middleware.toolResult(request.call, 0))
      : next(request)
  }
})

describe("the replay of a durable record (sqlite engine)", () => {
  it.live.prop(
    "emits the durable run's live events minus ModelRequestSent and text deltas, HookCompleted of its tool calls included, whatever the script (its calls one at a time: the events of calls run at once interleave live)",
    { turns: scripts },
    ({ turns }) =>
      Effect.scoped(Effect.gen(function*() {
        const middleware = [answering, audit]
        const context = yield* stack("sqlite", turns, counted().layer, middleware, 1)
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
        // the run's events as the agent's watchers see them, from before it starts to its end
        const watched = yield* (yield* run(Agent.Agent)).watch
        const reading = yield* Effect.fork(Stream.runCollect(
          Stream.takeUntil(watched, (event) => event.event._tag === "RunEnded")
        ))
        const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?" }))
        assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
        const live = Chunk.toReadonlyArray(yield* Fiber.join(reading)).map((event) => event.event)
        const record = yield* run(Runs.record(runId))
        const replayed = yield* Effect.flatMap(
          Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware, toolConcurrency: 1 }),
          (agent) => Stream.runCollect(agent.replayStream(record))
        ).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([]), counted().layer)))
        assert.deepStrictEqual(
          Chunk.toReadonlyArray(replayed).map(shape),
          live.filter((event) => !sentOnly.has(event._tag)).map(shape)
        )
        // each tool call's hooks are in the record, named by it
        const calls = record.entries.flatMap((entry) => entry._tag === "Step" && entry.kind === "Tool" ? [entry] : [])
        for (const call of calls) {
          assert.isTrue(
            record.entries.some((entry) =>
              entry._tag === "Hook" && entry.inStep === call.name && entry.middleware === "answering"
            ),
            call.name
          )
        }
      })) as Effect.Effect<void, unknown>,
    { fastCheck: { numRuns: 8 } }
  )
})

describe("the replay of a durable record with calls run at once (memory engine)", () => {
  it.live.prop(
    "emits as many of each event as the live run, ModelRequestSent and text deltas aside, HookCompleted included, whatever the script",
    { turns: scripts },
    ({ turns }) =>
      Effect.scoped(Effect.gen(function*() {
        const middleware = [answering, audit]
        const context = yield* stack("memory", turns, counted().layer, middleware)
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
        const watched = yield* (yield* run(Agent.Agent)).watch
        const reading = yield* Effect.fork(Stream.runCollect(
          Stream.takeUntil(watched, (event) => event.event._tag === "RunEnded")
        ))
        const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?" }))
        assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
        const live = Chunk.toReadonlyArray(yield* Fiber.join(reading)).map((event) => event.event)
        const record = yield* run(Runs.record(runId))
        const replayed = yield* Effect.flatMap(
          Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware }),
          (agent) => Stream.runCollect(agent.replayStream(record))
        ).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([]), counted().layer)))
        // the same events, as many of each: the calls of a turn interleave live, and are served one by one
        const multiset = (events: ReadonlyArray<AgentEvent.AgentEvent<any, any, any>>) =>
          events.map((event) => JSON.stringify(shape(event))).sort()
        assert.deepStrictEqual(
          multiset(Chunk.toReadonlyArray(replayed)),
          multiset(live.filter((event) => !sentOnly.has(event._tag)))
        )
      })) as Effect.Effect<void, unknown>,
    { fastCheck: { numRuns: 8 } }
  )
})

describe("the durable record of a run that delegates to a subagent", () => {
  /** SubAgents with a child that adds (under `audit`) then answers: a child of its own for each run. */
  const delegating = () =>
    Middleware.unwrap(Effect.gen(function*() {
      const { model } = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([{ id: "k1", name: "add", params: { a: 1, b: 2 } }]),
        ScriptedModel.text("3")
      ])
      const adder = yield* Agent.make({ toolkit: Calculator, middleware: [audit] }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model),
        Effect.provide(counted().layer)
      )
      return SubAgents.middleware({ agents: { adder: { description: "Adds", agent: adder } } })
    }))
  const parent: ReadonlyArray<ScriptedModel.Turn> = [
    ScriptedModel.toolCalls([{ id: "t1", name: "task", params: { agent: "adder", task: "1 + 2" } }]),
    ScriptedModel.text("it is 3")
  ]

  it.scopedLive("keeps the hooks that completed in the child's model and tool calls, named by the child's run, as an in-process record does", () =>
    Effect.gen(function*() {
      const context = yield* stack("memory", parent, counted().layer, [delegating()])
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      const durable = yield* run(Runs.record(runId))
      const hooks = durable.entries.flatMap((entry) =>
        entry._tag === "Hook" ? [[entry.middleware, entry.hook, entry.inStep, entry.run]] : []
      )
      assert.deepInclude(hooks, ["audit", "wrapToolCall", "task/t1/1/tool/k1", "task/t1/1"])
      assert.deepInclude(hooks, ["audit", "wrapModelCall", "task/t1/1/model/0", "task/t1/1"])
      assert.deepStrictEqual(timeless(durable), timeless(yield* inProcessRecord(parent, [delegating()])))
    }))
})

describe("the record of a durable fork", () => {
  it.scopedLive("keeps the decisions and hooks of each call, those it served from the source's record as those it ran, as the source's record has them", () =>
    Effect.gen(function*() {
      const context = yield* stack("memory", [...script, ...script.slice(1)], counted().layer, [audit])
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const source = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?" }))
      assert.strictEqual((yield* run(Runs.await(source))).state, "Completed")
      // model step 0 and its tool call are served from the source's record; the fork runs the rest
      const forkId = yield* run(Runs.fork(source, { to: "fork", at: 1 }))
      assert.strictEqual((yield* run(Runs.await(forkId))).state, "Completed")
      const inSteps = (record: RunRecord.RunRecord) =>
        record.entries.flatMap((entry) =>
          (entry._tag === "Hook" || entry._tag === "Decision") && entry.inStep !== undefined
            ? [[entry._tag, entry.middleware, entry.hook, entry.inStep]]
            : []
        )
      const forked = inSteps(yield* run(Runs.record(forkId)))
      assert.deepInclude(forked, ["Hook", "audit", "wrapToolCall", "tool/call_1"])
      assert.deepInclude(forked, ["Decision", "audit", "wrapToolCall", "tool/call_1"])
      assert.deepInclude(forked, ["Hook", "audit", "wrapToolCall", "tool/call_2"])
      assert.deepStrictEqual(forked, inSteps(yield* run(Runs.record(source))))
    }))
})

describe("a durable record's failure paths", () => {
  it.scopedLive("a record replayed on another version of the agent fails typed: ReplayDiverged, or RunRecordError for another format version", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      const context = yield* stack("memory", script, layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const record = yield* run(Runs.record(yield* sourceRun(run)))
      const changed = yield* replayOn(record, "You add carefully.")
      assert.isTrue(Either.isLeft(changed.outcome))
      assert.instanceOf(Either.getLeft(changed.outcome).pipe(Option.getOrThrow), RunRecord.ReplayDiverged)
      assert.deepInclude(Option.getOrThrow(Either.getLeft(changed.outcome)), { step: 0, field: "systemPrompt" })
      assert.strictEqual(changed.modelCalls, 0)
      // a record of another format version: refused by replay and by a durable fork, typed
      const later = { ...record, header: { ...record.header, version: 4 } } as unknown as RunRecord.RunRecord
      const replayed = yield* replayOn(later)
      assert.deepInclude(Option.getOrThrow(Either.getLeft(replayed.outcome)), {
        _tag: "RunRecordError",
        reason: "UnsupportedVersion"
      })
      const forked = yield* Effect.flip(run(Runs.fork(later, { to: "f", at: 1 })))
      assert.deepInclude(forked, { _tag: "RunRecordError", reason: "UnsupportedVersion" })
      // and read from JSONL, the header is refused at once
      const text = RunRecord.toJsonl(record).replace(`"version":${RunRecord.version}`, "\"version\":4")
      assert.deepInclude(yield* Effect.flip(RunRecord.fromJsonl(text)), { reason: "UnsupportedVersion", line: 1 })
    }))

  it.scopedLive("the record of a run that does not exist, or ran without a record store, fails typed", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      const context = yield* stack("memory", script, layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      assert.deepInclude(yield* Effect.flip(run(Runs.record("nothing"))), { _tag: "RunNotFound" })
      // a run of a workflow whose layer had no RecordStore
      const bare = yield* Layer.build(
        Runs.layer.pipe(
          Layer.provideMerge(Agent.layer({ toolkit: Calculator }).pipe(Layer.provide(layer))),
          Layer.provideMerge(ScriptedModel.layer([ScriptedModel.text("hi")])),
          Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory))
        )
      )
      const runId = yield* Effect.provide(Runs.start({ threadId: "t", input: "hello" }), bare)
      yield* Effect.provide(Runs.await(runId), bare)
      const missing = yield* Effect.flip(
        Effect.provide(Runs.record(runId), Layer.merge(Layer.succeedContext(bare), RecordStore.layerMemory))
      )
      assert.deepInclude(missing, { _tag: "RecordNotFound", runId })
    }))

  it.scopedLive("a durable fork at a step that does not exist, or with an edit that does not apply, fails with ForkError and starts nothing", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      const context = yield* stack("memory", script, layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* sourceRun(run)
      const cases: ReadonlyArray<readonly [AgentWorkflow.ForkOptions, Fork.ForkError["reason"]]> = [
        [{ to: "f", at: 4 }, "NoSuchStep"],
        [{ to: "f", at: -1 }, "NoSuchStep"],
        [{ to: "f", at: 1.5 }, "NoSuchStep"],
        [{ to: "f", at: 1, edit: { _tag: "ToolResult", callId: "call_2", result: 1 } }, "NoSuchToolCall"],
        [{ to: "src", at: 1 }, "ThreadExists"]
      ]
      for (const [options, reason] of cases) {
        const error = yield* Effect.flip(run(Runs.fork(runId, options)))
        assert.instanceOf(error, Fork.ForkError, JSON.stringify(options))
        assert.deepInclude(error as Fork.ForkError, { reason, threadId: "src" })
      }
      // a message edit with no message, and a run id of another thread, start nothing either
      assert.deepInclude(
        yield* Effect.flip(run(Runs.fork(runId, { to: "f", at: 1, edit: { _tag: "Message", message: [] } }))),
        { _tag: "InvalidInput" }
      )
      assert.deepInclude(yield* Effect.flip(run(Runs.fork(runId, { to: "f", at: 1, runId }))), {
        _tag: "RunIdTaken",
        threadId: "src"
      })
      const agent = yield* run(Agent.Agent)
      assert.isTrue(Option.isNone(yield* agent.thread("f")))
      assert.deepStrictEqual(
        yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.list({ threadId: "f" }))),
        []
      )
    }))
})

describe.each(engines)("a durable fork (%s engine)", (engine) => {
  it.scopedLive("forks a durable run at a step into a new durable run that goes on on the engine; the source run is untouched", () =>
    Effect.gen(function*() {
      const { calls, layer } = counted()
      const context = yield* stack(engine, [...script, ScriptedModel.text("stopped")], layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const source = yield* sourceRun(run)
      const agent = yield* run(Agent.Agent)
      const before = {
        record: yield* run(Runs.record(source)),
        status: yield* run(Runs.status(source)),
        thread: yield* agent.thread("src")
      }
      const requestsBefore = (yield* run(ScriptedModel.requests)).length
      calls.count = 0
      const forkId = yield* run(Runs.fork(source, {
        to: "fork",
        at: 1,
        runId: "fork-run",
        edit: { _tag: "Message", message: "Stop here." }
      }))
      assert.strictEqual(forkId, "fork-run")
      const done = yield* run(Runs.await(forkId))
      // a retried fork (same run id and thread) gives its run again, and starts nothing more
      assert.strictEqual(yield* run(Runs.fork(source, { to: "fork", at: 1, runId: "fork-run" })), "fork-run")
      assert.strictEqual(done.state, "Completed")
      assert.strictEqual(Option.getOrThrow(done.outcome).text, "stopped")
      assert.strictEqual(done.threadId, "fork")
      // one live model call (step 1), no tool run: step 0 and its tool call were served from the record
      assert.strictEqual((yield* run(ScriptedModel.requests)).length - requestsBefore, 1)
      assert.strictEqual(calls.count, 0)
      assert.deepStrictEqual(done.messages.map((message) => message.role), [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant"
      ])
      // the source: its record, status and thread as they were
      assert.deepStrictEqual(yield* run(Runs.record(source)), before.record)
      assert.deepStrictEqual(yield* run(Runs.status(source)), before.status)
      assert.deepStrictEqual(yield* agent.thread("src"), before.thread)
    }))

  it.scopedLive("a durable fork is recorded: its record says what it forked and starts with the steps it served; it replays in process, and a fork of the fork goes on from it", () =>
    Effect.gen(function*() {
      const { calls, layer } = counted()
      const turns = [...script, ScriptedModel.text("stopped"), ScriptedModel.text("again")]
      const context = yield* stack(engine, turns, layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const source = yield* sourceRun(run)
      const forkId = yield* run(Runs.fork(source, {
        to: "fork",
        at: 1,
        runId: "fork-run",
        edit: { _tag: "Message", message: "Stop here." }
      }))
      assert.strictEqual((yield* run(Runs.await(forkId))).state, "Completed")
      const record = yield* run(Runs.record(forkId))
      assert.strictEqual(record.header.threadId, "fork")
      assert.deepStrictEqual(record.header.forkedFrom, { threadId: "src", runId: "src-run", at: 1 })
      const names = record.entries.flatMap((entry) => entry._tag === "Step" ? [entry.name] : [])
      assert.includeMembers(names, ["load", "model/0", "tool/call_1", "model/1"])
      assert.notInclude(names, "model/2")
      assert.deepInclude(record.entries.find((entry) => entry._tag === "Wait"), { step: 1, decision: { go: true } })
      assert.deepInclude(record.entries.at(-1), { _tag: "End", outcome: "Completed", text: "stopped", steps: 2 })
      // the fork's own step has the request it sent, with the edit's message
      const live = record.entries.find((entry) => entry._tag === "Step" && entry.name === "model/1")
      assert.include(JSON.stringify(live?._tag === "Step" ? live.sent?.messages : undefined), "Stop here.")

      // its record replays in process: no model or tool call
      const replayed = yield* replayOn(yield* RunRecord.fromJsonl(RunRecord.toJsonl(record)))
      const result = Either.getOrThrow(replayed.outcome)
      assert.strictEqual(result._tag === "Completed" && result.text, "stopped")
      assert.deepStrictEqual([replayed.modelCalls, replayed.toolCalls], [0, 0])

      // a fork of the fork, by its run id: its steps before 1 served from the fork's record
      calls.count = 0
      const requestsBefore = (yield* run(ScriptedModel.requests)).length
      const againId = yield* run(Runs.fork(forkId, {
        to: "fork-2",
        at: 1,
        edit: { _tag: "Message", message: "Say it again." }
      }))
      const again = yield* run(Runs.await(againId))
      assert.strictEqual(again.state, "Completed")
      assert.strictEqual(Option.getOrThrow(again.outcome).text, "again")
      assert.strictEqual((yield* run(ScriptedModel.requests)).length - requestsBefore, 1)
      assert.strictEqual(calls.count, 0)
      assert.deepStrictEqual(again.messages.map((message) => message.role), [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant"
      ])
      const second = yield* run(Runs.record(againId))
      assert.deepStrictEqual(second.header.forkedFrom, { threadId: "fork", runId: forkId, at: 1 })
    }))

  it.scopedLive("a durable fork before the source's wait waits durably itself, and is resumed through the workflow", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      const context = yield* stack(engine, [ScriptedModel.text("forked")], layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      // a record made in process, with no wait: forked at step 1 onto the durable agent, which waits there
      const { record } = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add." })
        return yield* RunRecord.record(agent, "What is 2 + 3 + 7?", { threadId: "prod" })
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), counted().layer)))
      const forkId = yield* run(Runs.fork(record, { to: "fork", at: 1 }))
      const waiting = yield* run(Runs.await(forkId, { untilWaiting: true }))
      assert.strictEqual(waiting.state, "Waiting")
      assert.strictEqual(Option.getOrThrow(waiting.pending).middleware, "confirm")
      yield* run(Runs.resume(forkId, { go: true }, { principal: "alice" }))
      const done = yield* run(Runs.await(forkId))
      assert.strictEqual(done.state, "Completed")
      assert.strictEqual(Option.getOrThrow(done.outcome).text, "forked")
    }))

  it.scopedLive("two durable forks to one new thread at once: exactly one completes, the other fails typed and the thread is the first one's", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      const context = yield* stack(engine, [...script, ScriptedModel.text("a"), ScriptedModel.text("b")], layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const source = yield* sourceRun(run)
      const started = yield* Effect.all(
        ["a", "b"].map((name) => Effect.either(run(Runs.fork(source, { to: "same", at: 2, runId: `fork-${name}` })))),
        { concurrency: "unbounded" }
      )
      // a fork refused at once, or one whose run found the thread as it loaded it
      const ended = yield* Effect.forEach(
        started,
        (outcome): Effect.Effect<{ readonly state: string; readonly error: unknown }, unknown, any> =>
          Either.isLeft(outcome)
            ? Effect.succeed({ state: "Refused", error: outcome.left })
            : Effect.map(run(Runs.await(outcome.right)), (status) => ({
              state: status.state,
              error: Option.getOrUndefined(status.failure)
            }))
      )
      const completed = ended.filter((end) => end.state === "Completed")
      const failed = ended.filter((end) => end.state !== "Completed")
      assert.strictEqual(completed.length, 1, JSON.stringify(ended))
      assert.strictEqual(failed.length, 1)
      const error = failed[0]!.error
      const reason = error instanceof Fork.ForkError
        ? error.reason
        : error instanceof AgentWorkflow.AgentRunFailed && error.error._tag === "OtherError"
        ? error.error.tag
        : undefined
      assert.include(["ThreadExists", "ForkError"], reason, String(error))
      // the thread is the run that completed, whole: replies 0 and 1 served, reply 2 live
      const stored = Option.getOrThrow(yield* (yield* run(Agent.Agent)).thread("same"))
      const roles = stored.state.messages.map((message: { readonly role: string }) => message.role)
      assert.strictEqual(roles.filter((role: string) => role === "assistant").length, 3)
      assert.strictEqual(stored.pending._tag, "None")
    }))
})

describe("the record of a cancelled durable run", () => {
  it.scopedLive("ends at its wait, with no decision, then a Cancelled end; it replays to the wait", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      const context = yield* stack("memory", script, layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?" }))
      yield* run(Runs.await(runId, { untilWaiting: true }))
      yield* run(Runs.cancel(runId))
      assert.strictEqual((yield* run(Runs.status(runId))).state, "Cancelled")
      const record = yield* run(Runs.record(runId))
      const wait = record.entries.at(-2)
      assert.isTrue(wait !== undefined && wait._tag === "Wait" && wait.decision === undefined)
      assert.deepInclude(record.entries.at(-1), { _tag: "End", outcome: "Cancelled", steps: 1 })
      // a second cancel adds nothing
      yield* run(Runs.cancel(runId))
      assert.deepStrictEqual(yield* run(Runs.record(runId)), record)
      const { modelCalls, outcome } = yield* replayOn(record)
      assert.strictEqual(Either.getOrThrow(outcome)._tag, "Interrupted")
      assert.strictEqual(modelCalls, 0)
      // pruned, the run has no record any more
      yield* run(Runs.prune(runId))
      assert.deepInclude(yield* Effect.flip(run(Runs.record(runId))), { _tag: "RunNotFound" })
      assert.deepStrictEqual(yield* run(Effect.flatMap(RecordStore.RecordStore, (store) => store.read(runId))), {
        header: undefined,
        entries: []
      })
    }))
})

describe("the record of a durable run cancelled while it works", () => {
  it.scopedLive("ends Cancelled after the call in flight; its replay stops where the run stopped", () =>
    Effect.gen(function*() {
      const inTool = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      // the first add blocks until released: the run is working, not waiting, when cancelled
      const slow = Calculator.toLayer({
        add: ({ a, b }) =>
          Effect.zipRight(
            Effect.zipRight(Deferred.succeed(inTool, void 0), Deferred.await(release)),
            Effect.succeed(a + b)
          )
      })
      const context = yield* stack("memory", script, slow, [])
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "src", input: "What is 2 + 3 + 7?" }))
      yield* Deferred.await(inTool)
      const cancelling = yield* Effect.fork(run(Runs.cancel(runId)))
      // the cancel is requested before the call in flight finishes: the run stops before its next model call
      yield* Effect.flatMap(RunStore.RunStore, (store) => store.isCancelRequested(runId)).pipe(
        Effect.provide(context),
        Effect.repeat({ until: (requested) => requested, schedule: Schedule.spaced("10 millis") })
      )
      yield* Deferred.succeed(release, void 0)
      yield* Fiber.join(cancelling)
      assert.strictEqual((yield* run(Runs.status(runId))).state, "Cancelled")
      const record = yield* run(Runs.record(runId))
      const names = record.entries.flatMap((entry) => entry._tag === "Step" ? [entry.name] : [])
      assert.includeMembers(names, ["model/0", "tool/call_1"])
      assert.notInclude(names, "model/1")
      const ends = record.entries.filter((entry) => entry._tag === "End")
      assert.strictEqual(ends.length, 1)
      assert.deepInclude(ends[0], { outcome: "Cancelled", steps: 1 })
      const replayed = yield* replayOn(record, "You add.", [])
      assert.deepInclude(Option.getOrThrow(Either.getLeft(replayed.outcome)), {
        _tag: "ReplayStopped",
        step: 1,
        outcome: "Cancelled"
      })
      assert.deepStrictEqual([replayed.modelCalls, replayed.toolCalls], [0, 0])
    }))
})

describe("the record of a durable run, scrubbed", () => {
  it.scopedLive("credential-named fields and credentials in text are scrubbed from what the durable record keeps", () =>
    Effect.gen(function*() {
      const Login = Tool.make("login", {
        parameters: { user: Schema.String, apiKey: Schema.String },
        success: Schema.String
      })
      const kit = Toolkit.make(Login)
      const turns: ReadonlyArray<ScriptedModel.Turn> = [
        ScriptedModel.toolCalls([{ id: "c1", name: "login", params: { user: "ada", apiKey: "k-9" } }]),
        ScriptedModel.text("in")
      ]
      const context = yield* Layer.build(
        Runs.layer.pipe(
          Layer.provideMerge(
            Agent.layer({ toolkit: kit }).pipe(
              Layer.provide(
                kit.toLayer({ login: () => Effect.succeed("GET /v1?key=abc ok; Authorization: Bearer tok-0123456789") })
              )
            )
          ),
          Layer.provideMerge(ScriptedModel.layer(turns)),
          Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory, RecordStore.layerMemory))
        )
      )
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "log in" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      const text = RunRecord.toJsonl(yield* run(Runs.record(runId)))
      assert.include(text, "ada")
      for (const leaked of ["k-9", "key=abc", "tok-0123456789"]) assert.notInclude(text, leaked)
    }))
})

describe("a durable record after a lost write", () => {
  it.scopedLive("an entry whose write was lost (the process died after its step) is written by the next execution, from the journal, in its place", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      // a store that loses the first write of the entry of model step 0, as a process dying after the step would
      const lossy = Layer.effect(
        RecordStore.RecordStore,
        Effect.map(RecordStore.makeMemory, (memory) => {
          let lost = false
          return RecordStore.RecordStore.of({
            ...memory,
            put: (runId, slot, line) =>
              !lost && line.includes("\"name\":\"model/0\"") ?
                Effect.sync(() => {
                  lost = true
                }) :
                memory.put(runId, slot, line)
          })
        })
      )
      const context = yield* Layer.build(
        Runs.layer.pipe(
          Layer.provideMerge(
            Agent.layer({ toolkit: Calculator, systemPrompt: "You add.", middleware: [confirming(1)] }).pipe(
              Layer.provide(layer)
            )
          ),
          Layer.provideMerge(ScriptedModel.layer(script)),
          Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory, lossy)),
          Layer.provideMerge(Authorizer.layer(() => true))
        )
      )
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* sourceRun(run)
      const record = yield* run(Runs.record(runId))
      const names = record.entries.flatMap((entry) => entry._tag === "Step" ? [entry.name] : [])
      assert.deepStrictEqual(names.filter((name) => name.startsWith("model/") || name.startsWith("tool/")), [
        "model/0",
        "tool/call_1",
        "model/1",
        "tool/call_2",
        "model/2"
      ])
      const model0 = record.entries.find((entry) => entry._tag === "Step" && entry.name === "model/0")
      // its result is the journal's; the request as sent was only in the process that died
      assert.isTrue(model0 !== undefined && model0._tag === "Step" && model0.sent === undefined)
      const { modelCalls, outcome } = yield* replayOn(record)
      assert.strictEqual(Either.getOrThrow(outcome)._tag, "Completed")
      assert.strictEqual(modelCalls, 0)
    }))
})

describe("a durable fork with an edited tool result", () => {
  it.scopedLive("the fork's run has the edited result in place of the recorded one, and no tool runs", () =>
    Effect.gen(function*() {
      const { calls, layer } = counted()
      const context = yield* stack("memory", [...script, ScriptedModel.text("it was 50")], layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const source = yield* sourceRun(run)
      calls.count = 0
      const forkId = yield* run(Runs.fork(source, {
        to: "fork",
        at: 1,
        edit: { _tag: "ToolResult", callId: "call_1", result: 50 }
      }))
      const done = yield* run(Runs.await(forkId))
      assert.strictEqual(done.state, "Completed")
      assert.strictEqual(Option.getOrThrow(done.outcome).text, "it was 50")
      assert.strictEqual(calls.count, 0)
      const tool = done.messages[2]!
      assert.isTrue(
        tool.role === "tool" && tool.content.some((part) => part.type === "tool-result" && part.result === 50)
      )
    }))

  it.scopedLive("a known secret in the edited result reaches neither the engine's files nor the fork's thread", () =>
    Effect.gen(function*() {
      const secret = "sk-fork-Zx9qWv3LmN7pRt2YbK5s"
      yield* Secrets.register(secret)
      const directory = yield* tempDirectory("stepwise-fork-secret-")
      const context = yield* stack({ sqlite: directory }, [
        ...script,
        ...[1, 2, 3].map(() => ScriptedModel.text("done"))
      ], counted().layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const source = yield* sourceRun(run)
      const forkIds: Array<string> = []
      for (const result of [{ token: secret }, `auth with ${secret}`, [{ deep: { note: `Bearer ${secret}` } }]]) {
        const forkId = yield* run(Runs.fork(source, {
          to: `fork-${forkIds.length}`,
          at: 1,
          edit: {
            _tag: "ToolResult",
            callId: "call_1",
            result
          }
        }))
        forkIds.push(forkId)
        const done = yield* run(Runs.await(forkId))
        assert.strictEqual(done.state, "Completed")
        assert.notInclude(JSON.stringify(done.messages), secret)
      }
      // every file of the engine's store (the database, its journal and WAL)
      for (const name of fs.readdirSync(directory)) {
        assert.notInclude(fs.readFileSync(path.join(directory, name)).toString("latin1"), secret, name)
      }
    }))
})
