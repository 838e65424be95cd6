import { assert, describe, it } from "@effect/vitest"
import type { AgentResult } from "@stepwise-agent/core"
import { Agent, RunRecord } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { Eval, Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Effect, FastCheck, Schema } from "effect"

// A case from a record replays it on the agent under test (`agent.replayStream`): the run the assertions read has
// the events a live run has, so each assertion means the same on a scripted, a recorded and a live case.

const calculator = Agent.make({ toolkit: Fixtures.toolkit }).pipe(Effect.provide(Fixtures.layer))
const gatedAgent = (gated: string) =>
  Agent.make({
    toolkit: Fixtures.toolkit,
    middleware: [HumanInTheLoop.middleware({ toolkit: Fixtures.toolkit, interruptOn: { [gated]: true } })]
  }).pipe(Effect.provide(Fixtures.layer))
const approve = (interrupt: AgentResult.Interrupt) =>
  HumanInTheLoop.approveAll(interrupt.value as HumanInTheLoop.ApprovalRequest)

const adds = ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }])
const script = [adds, ScriptedModel.text(`{"total":3}`)]

/** The record of `input` run on `agent` with `turns` as the model's replies, through JSONL. */
const recorded = (
  agent: Effect.Effect<Agent.Service<any, any, any, any>, unknown, any>,
  turns: ReadonlyArray<ScriptedModel.Turn>,
  threadId = "recorded"
) =>
  Effect.flatMap(agent, (agent) => RunRecord.record(agent, "What is 1 + 2?", { threadId })).pipe(
    Effect.provide(ScriptedModel.layer(turns)),
    Effect.flatMap(({ record }) => RunRecord.fromJsonl(RunRecord.toJsonl(record)))
  )

describe("Eval: noApprovalBypassed on a recorded case", () => {
  it.effect("a recorded run where a gated tool ran without an approval fails noApprovalBypassed, naming the call", () =>
    Effect.gen(function*() {
      // recorded on an agent whose gate named another tool, and on one without a gate: `add` ran unasked
      for (const agent of [gatedAgent("echo"), calculator]) {
        const record = yield* recorded(agent, script)
        const report = yield* Eval.run(Eval.make({
          name: "recorded bypass",
          agent,
          cases: [Eval.fromRecord(record, { name: "production" })],
          assertions: [Eval.noApprovalBypassed(["add"])]
        }))
        assert.isFalse(report.passed, Eval.table(report))
        const [bypass, replayed] = report.cases[0]!.assertions
        assert.strictEqual(bypass!.failures[0]!.reason, "ran without an approval from humanInTheLoop: add (c1)")
        // the replay itself took every step as recorded
        assert.strictEqual(replayed!.name, "replaysAsRecorded")
        assert.strictEqual(replayed!.passes, 1)
      }
    }))

  it.effect("a recorded run whose gated call ran after its approval (a recorded resume) passes noApprovalBypassed", () =>
    Effect.gen(function*() {
      // one agent (and one model script) for the run and its resume
      const agent = yield* gatedAgent("add").pipe(Effect.provide(ScriptedModel.layer(script)))
      const first = yield* RunRecord.record(agent, "What is 1 + 2?", { threadId: "approved" })
      if (first.result._tag !== "Interrupted") return assert.fail("the run did not wait")
      const decision = approve(first.result.interrupt)
      const resumed = yield* RunRecord.recordResume(agent, "approved", decision)
      assert.strictEqual(resumed.result._tag, "Completed")
      const report = yield* Eval.run(Eval.make({
        name: "recorded approval",
        agent: gatedAgent("add"),
        cases: [
          Eval.fromRecord(first.record, { name: "asks" }),
          Eval.fromRecord(resumed.record, { name: "approved" })
        ],
        assertions: [Eval.noApprovalBypassed(["add"])]
      }))
      assert.isTrue(report.passed, Eval.table(report))
      // the approval and the call are in the replayed events: the assertion counted the call, not nothing
      assert.deepStrictEqual(report.cases.map((c) => c.name), ["asks", "approved"])
      const approved = yield* Eval.run(Eval.make({
        name: "recorded approval",
        agent: gatedAgent("add"),
        cases: [Eval.fromRecord(resumed.record, { name: "approved" })],
        assertions: [
          Eval.custom("the gated call ran after its approval", (run) => {
            const tags = run.events.map((event) =>
              event._tag === "MiddlewareDecision" ? `${event._tag}:${event.decision}` : event._tag
            )
            const approvedAt = tags.indexOf("MiddlewareDecision:approve add")
            const startedAt = tags.indexOf("ToolCallStarted")
            return { passed: approvedAt >= 0 && startedAt > approvedAt, reason: tags.join(",") }
          })
        ]
      }))
      assert.isTrue(approved.passed, Eval.table(approved))
    }))

  it.effect("a recorded bypass replayed on an agent that now gates the tool fails the case (the replay diverges)", () =>
    Effect.gen(function*() {
      const record = yield* recorded(calculator, script)
      const report = yield* Eval.run(Eval.make({
        name: "now gated",
        agent: gatedAgent("add"),
        cases: [Eval.fromRecord(record)],
        assertions: [Eval.noApprovalBypassed(["add"])]
      }))
      assert.isFalse(report.passed)
      const replayed = report.cases[0]!.assertions.find((entry) => entry.name === "replaysAsRecorded")!
      assert.strictEqual(replayed.passes, 0)
      assert.include(replayed.failures[0]!.reason, "the replay diverged")
    }))
})

describe("Eval: every assertion reads a recorded case as it reads a scripted one", () => {
  const assertions = [
    Eval.toolCalled("add", { a: 1, b: 2 }),
    Eval.toolCalled("add", { a: 5 }),
    Eval.toolCalled("add", undefined, { times: 1 }),
    Eval.toolNeverCalled("echo"),
    Eval.toolNeverCalled("add"),
    Eval.outputMatches(Schema.Struct({ total: Schema.Number })),
    Eval.outputMatches(Schema.Struct({ total: Schema.String })),
    Eval.tokensAtMost(1_000),
    Eval.tokensAtMost(1),
    Eval.tokensAtMost(1, { kind: "output" }),
    Eval.costAtMost(1, { inputPerMillion: 1, outputPerMillion: 1 }),
    Eval.costAtMost(0, { inputPerMillion: 1, outputPerMillion: 1 }),
    Eval.noApprovalBypassed(["add"]),
    Eval.completed,
    Eval.custom("model replies seen", (run) => ({
      passed: run.events.some((event) => event._tag === "ModelResponded"),
      reason: `${run.events.filter((event) => event._tag === "ModelResponded").length} model replies`
    }))
  ]
  /** The assertions' verdicts (passes and reasons) on one case. */
  const verdicts = (report: Eval.Report) =>
    report.cases[0]!.assertions.filter((entry) => entry.name !== "replaysAsRecorded").map((entry) => ({
      name: entry.name,
      passes: entry.passes,
      reasons: entry.failures.map((failure) => failure.reason)
    }))

  it.effect("each assertion gives the same verdict and reason on a record case as on the scripted run it records", () =>
    Effect.gen(function*() {
      const record = yield* recorded(calculator, script)
      const scripted = yield* Eval.run(Eval.make({
        name: "same",
        agent: calculator,
        cases: [{ name: "case", input: "What is 1 + 2?", script }],
        assertions
      }))
      const replayed = yield* Eval.run(Eval.make({
        name: "same",
        agent: calculator,
        cases: [Eval.fromRecord(record, { name: "case" })],
        assertions
      }))
      assert.deepStrictEqual(verdicts(replayed), verdicts(scripted))
      // the failing ones fail for the run's reasons, not vacuously
      assert.deepStrictEqual(verdicts(replayed).map((verdict) => verdict.passes), [
        1,
        0,
        1,
        1,
        0,
        1,
        0,
        1,
        0,
        0,
        1,
        0,
        0,
        1,
        1
      ])
      assert.isTrue(
        replayed.cases[0]!.assertions.find((entry) => entry.name === "replaysAsRecorded")!.passes === 1
      )
    }))

  it.effect("outputMatches reads a recorded structured output as a scripted one (responseFormat)", () =>
    Effect.gen(function*() {
      const Total = Schema.Struct({ total: Schema.Number })
      const structured = Agent.make({ toolkit: Fixtures.toolkit, responseFormat: Total }).pipe(
        Effect.provide(Fixtures.layer)
      )
      const turns = [adds, ScriptedModel.toolCalls([{ name: "final_answer", params: { total: 3 } }])]
      const record = yield* recorded(structured, turns)
      const checks = [Eval.outputMatches(Total), Eval.outputMatches(Schema.Struct({ total: Schema.String }))]
      const scripted = yield* Eval.run(Eval.make({
        name: "same",
        agent: structured,
        cases: [{ name: "case", input: "What is 1 + 2?", script: turns }],
        assertions: checks
      }))
      const replayed = yield* Eval.run(Eval.make({
        name: "same",
        agent: structured,
        cases: [Eval.fromRecord(record, { name: "case" })],
        assertions: checks
      }))
      assert.deepStrictEqual(verdicts(replayed), verdicts(scripted))
      assert.deepStrictEqual(verdicts(replayed).map((verdict) => verdict.passes), [1, 0])
      assert.include(verdicts(replayed)[1]!.reasons[0]!, "the structured output does not match")
    }))

  it.effect.prop(
    "a record case and the scripted run it records give every assertion the same verdict (any tool calls)",
    [
      FastCheck.array(
        FastCheck.array(
          FastCheck.oneof(
            FastCheck.record({
              name: FastCheck.constant("add" as const),
              a: FastCheck.integer(),
              b: FastCheck.integer()
            }),
            FastCheck.record({ name: FastCheck.constant("echo" as const), text: FastCheck.string({ maxLength: 8 }) })
          ),
          { minLength: 1, maxLength: 3 }
        ),
        { maxLength: 3 }
      ),
      FastCheck.integer({ min: 0, max: 60 })
    ],
    ([steps, bound]) =>
      Effect.gen(function*() {
        let id = 0
        const turns: Array<ScriptedModel.Turn> = [
          ...steps.map((calls) =>
            ScriptedModel.toolCalls(calls.map((call) => ({
              id: `c${id++}`,
              name: call.name,
              params: call.name === "add" ? { a: call.a, b: call.b } : { text: call.text }
            })))
          ),
          ScriptedModel.text("done")
        ]
        const checks = [
          ...assertions,
          Eval.tokensAtMost(bound),
          Eval.toolCalled("echo", undefined, { times: 1 }),
          Eval.noApprovalBypassed(["echo"])
        ]
        const record = yield* recorded(calculator, turns)
        const scripted = yield* Eval.run(Eval.make({
          name: "same",
          agent: calculator,
          cases: [{ name: "case", input: "What is 1 + 2?", script: turns }],
          assertions: checks
        }))
        const replayed = yield* Eval.run(Eval.make({
          name: "same",
          agent: calculator,
          cases: [Eval.fromRecord(record, { name: "case" })],
          assertions: checks
        }))
        assert.deepStrictEqual(verdicts(replayed), verdicts(scripted))
      }),
    { fastCheck: { numRuns: 15 } }
  )
})

describe("Eval: a record case's record", () => {
  it.effect("a record of another format version, or no record at all, fails with InvalidEval naming the case's record", () =>
    Effect.gen(function*() {
      const record = yield* recorded(calculator, script)
      const field = (record: unknown) =>
        Eval.run(Eval.make({
          name: "bad record",
          agent: calculator,
          cases: [{ name: "case", input: [], record: record as RunRecord.RunRecord }]
        })).pipe(Effect.flip, Effect.map((error) => [error.field, error.reason]))
      assert.deepStrictEqual(yield* field({ ...record, header: { ...record.header, version: 4 } }), [
        "cases[0].record",
        "the record is of version 4; this build replays versions 1, 2, 3"
      ])
      assert.deepStrictEqual(yield* field({ entries: [] }), [
        "cases[0].record",
        "not a run record (RunRecord.record, RunRecord.fromJsonl, …)"
      ])
    }))
})

describe("Eval: a record case with decide", () => {
  /** The record of a run that waits for an approval of `add`, and the record of its resume with `decision`. */
  const recordedWithResume = (decide: (interrupt: AgentResult.Interrupt) => unknown) =>
    Effect.gen(function*() {
      const agent = yield* gatedAgent("add").pipe(Effect.provide(ScriptedModel.layer(script)))
      const first = yield* RunRecord.record(agent, "What is 1 + 2?", { threadId: "gated" })
      if (first.result._tag !== "Interrupted") return yield* Effect.dieMessage("the run did not wait")
      const resumed = yield* RunRecord.recordResume(agent, "gated", decide(first.result.interrupt) as any)
      return { first: first.record, resumed: resumed.record }
    })
  const reject = (interrupt: AgentResult.Interrupt) => HumanInTheLoop.rejectAll("no")(interrupt)

  it.effect("a record that ends waiting and has no recorded resume fails the case with RecordEndsWaiting, saying how to record it", () =>
    Effect.gen(function*() {
      const { first } = yield* recordedWithResume(approve)
      const report = yield* Eval.run(Eval.make({
        name: "ends waiting",
        agent: gatedAgent("add"),
        cases: [Eval.fromRecord(first, { name: "asks", decide: approve })],
        assertions: [Eval.noApprovalBypassed(["add"])]
      }))
      assert.isFalse(report.passed, Eval.table(report))
      const reason = report.cases[0]!.errors[0]!.reason
      assert.include(reason, "RecordEndsWaiting")
      assert.include(reason, "ends waiting (humanInTheLoop)")
      assert.include(reason, "RunRecord.recordResume")
    }))

  it.effect("the recorded resume is served with the case's decision: the same decision passes, and the run's events include the resume's", () =>
    Effect.gen(function*() {
      const { first, resumed } = yield* recordedWithResume(approve)
      const report = yield* Eval.run(Eval.make({
        name: "resumed",
        agent: gatedAgent("add"),
        cases: [Eval.fromRecord(first, { name: "approved", decide: approve, resumes: [resumed] })],
        assertions: [
          Eval.noApprovalBypassed(["add"]),
          Eval.toolCalled("add", { a: 1, b: 2 }),
          Eval.outputMatches(Schema.Struct({ total: Schema.Number })),
          Eval.custom("ended completed", (run) => run.result._tag === "Some" && run.result.value._tag === "Completed")
        ]
      }))
      assert.isTrue(report.passed, Eval.table(report))
      // without `decide`, the recorded decision is taken
      const recordedDecision = yield* Eval.run(Eval.make({
        name: "resumed",
        agent: gatedAgent("add"),
        cases: [Eval.fromRecord(first, { name: "approved", resumes: [resumed] })],
        assertions: [Eval.toolCalled("add", { a: 1, b: 2 })]
      }))
      assert.isTrue(recordedDecision.passed, Eval.table(recordedDecision))
    }))

  it.effect("a decision that differs from the recorded one is a divergence: replaysAsRecorded fails naming the decision", () =>
    Effect.gen(function*() {
      const { first, resumed } = yield* recordedWithResume(approve)
      const report = yield* Eval.run(Eval.make({
        name: "rejected instead",
        agent: gatedAgent("add"),
        cases: [Eval.fromRecord(first, { name: "rejected", decide: reject, resumes: [resumed] })]
      }))
      assert.isFalse(report.passed, Eval.table(report))
      const replayed = report.cases[0]!.assertions.find((entry) => entry.name === "replaysAsRecorded")!
      assert.strictEqual(replayed.passes, 0)
      assert.include(replayed.failures[0]!.reason, "decision")
    }))

  it.effect("recorded resumes of another thread, or records of runs that were not resumed, are refused with InvalidEval", () =>
    Effect.gen(function*() {
      const { first, resumed } = yield* recordedWithResume(approve)
      const invalid = (resumes: ReadonlyArray<RunRecord.RunRecord>) =>
        Effect.flip(Eval.run(Eval.make({
          name: "bad resumes",
          agent: gatedAgent("add"),
          cases: [Eval.fromRecord(first, { name: "x", decide: approve, resumes })]
        })))
      const notResumed = yield* invalid([first])
      assert.deepInclude(notResumed, { _tag: "InvalidEval", field: "cases[0].resumes[0]" })
      const otherThread = yield* invalid([{ ...resumed, header: { ...resumed.header, threadId: "other" } }])
      assert.include(otherThread.reason, "other")
    }))
})
