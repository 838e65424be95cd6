import type { LanguageModel } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import type { AgentResult } from "@stepwise-agent/core"
import { Agent, AgentEvent, Checkpointer, RunRecord, Usage } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { Eval, Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Arbitrary, Effect, FastCheck, Layer, Option, Schema } from "effect"

const calculator = Agent.make({ toolkit: Fixtures.toolkit }).pipe(Effect.provide(Fixtures.layer))

const adds = ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }])

/** A suite of one case on the calculator agent. */
const oneCase = (
  testCase: Partial<Eval.Case>,
  options?: Partial<Omit<Eval.Options<never, never, never>, "agent" | "model" | "name">>
) =>
  Eval.make({
    name: "calc",
    agent: calculator,
    cases: [{ name: "case", input: "What is 1 + 2?", script: [adds, ScriptedModel.text("3")], ...testCase }],
    ...options
  })

/** Runs a one-case suite with `assertions`; gives the case's assertion reports. */
const check = (assertions: ReadonlyArray<Eval.Assertion>, testCase: Partial<Eval.Case> = {}) =>
  Effect.map(Eval.run(oneCase(testCase, { assertions })), (report) => report.cases[0]!)

/** A synthetic run of `events`, for assertions that read events. */
const runOf = (events: ReadonlyArray<AgentEvent.AgentEvent<unknown, unknown>>): Eval.Run => ({
  case: "c",
  trial: 1,
  threadId: "t",
  events,
  result: Option.none(),
  error: Option.none(),
  toolCalls: [],
  usage: Usage.empty
})
const started = (name: string, id: string) =>
  AgentEvent.ToolCallStarted({ call: { type: "tool-call", id, name, params: {}, providerExecuted: false } as never })
const completed = (id: string) =>
  AgentEvent.ToolCallCompleted({
    result: { type: "tool-result", id, name: "add", result: 3, isFailure: false } as never,
    durationMillis: 0
  })
const decided = (decision: string, data: unknown, middleware = "humanInTheLoop") =>
  AgentEvent.MiddlewareDecision({ middleware, hook: "afterModel", decision, data })

describe("Eval assertions", () => {
  it.effect("toolCalled matches arguments partially and deeply, and names the calls when none match", () =>
    Effect.gen(function*() {
      const report = yield* check([
        Eval.toolCalled("add"),
        Eval.toolCalled("add", { a: 1 }),
        Eval.toolCalled("add", { a: 1, b: (b: unknown) => typeof b === "number" && b > 1 }),
        Eval.toolCalled("add", { a: 5 }),
        Eval.toolCalled("echo"),
        Eval.toolCalled("add", { a: 1 }, { times: 2 })
      ])
      assert.deepStrictEqual(report.assertions.map((a) => a.passes), [1, 1, 1, 0, 0, 0])
      assert.include(report.assertions[3]!.failures[0]!.reason, `never with arguments matching {"a":5}: {"a":1,"b":2}`)
      assert.include(report.assertions[4]!.failures[0]!.reason, "echo was never called (tools called: add)")
      assert.include(report.assertions[5]!.failures[0]!.reason, "called 1 time(s) with matching arguments, expected 2")
      // matchers show in the assertion's name
      assert.strictEqual(
        Eval.toolCalled("add", { a: Schema.Int, b: (b: unknown) => b === 2 }).name,
        `toolCalled(add, {"a":"<Int>","b":"<function>"})`
      )
    }))

  it("matches: objects partially, arrays whole, values exactly", () => {
    assert.isTrue(Eval.matches({ a: { b: 1 } }, { a: { b: 1, c: 2 }, d: 3 }))
    assert.isFalse(Eval.matches({ a: { b: 1 } }, { a: { b: 2 } }))
    assert.isFalse(Eval.matches({ a: 1 }, {}))
    assert.isTrue(Eval.matches([{ a: 1 }], [{ a: 1, b: 2 }]))
    assert.isFalse(Eval.matches([1], [1, 2]))
    assert.isFalse(Eval.matches({ a: 1 }, [1]))
    assert.isFalse(Eval.matches("1", 1))
    assert.isTrue(Eval.matches({ a: undefined }, {}))
    // a Schema matches the values of its type
    assert.isTrue(Eval.matches({ a: Schema.Int, b: Schema.String }, { a: 3, b: "x" }))
    assert.isFalse(Eval.matches({ a: Schema.Int }, { a: 3.5 }))
    assert.isFalse(Eval.matches(Schema.Struct({ a: Schema.Number }), { a: "1" }))
  })

  it.effect("toolNeverCalled fails with the calls made", () =>
    Effect.gen(function*() {
      const report = yield* check([Eval.toolNeverCalled("add"), Eval.toolNeverCalled("fail")])
      assert.deepStrictEqual(report.assertions.map((a) => a.passes), [0, 1])
      assert.strictEqual(report.assertions[0]!.failures[0]!.reason, `add was called 1 time(s): {"a":1,"b":2}`)
    }))

  it.effect("outputMatches decodes the final text (as JSON when it is), or the structured output", () =>
    Effect.gen(function*() {
      const Total = Schema.Struct({ total: Schema.Number })
      const json = yield* check([Eval.outputMatches(Total)], { script: [ScriptedModel.text(`{"total":3}`)] })
      assert.strictEqual(json.assertions[0]!.passes, 1)
      const prose = yield* check([Eval.outputMatches(Total), Eval.outputMatches(Schema.String)], {
        script: [ScriptedModel.text("three")]
      })
      assert.deepStrictEqual(prose.assertions.map((a) => a.passes), [0, 1])
      assert.include(prose.assertions[0]!.failures[0]!.reason, "the final text does not match")
      // the schema's error names the field and what it got
      const wrong = yield* check([Eval.outputMatches(Total)], { script: [ScriptedModel.text(`{"total":"3"}`)] })
      assert.strictEqual(
        wrong.assertions[0]!.failures[0]!.reason,
        `the final text does not match: at total: expected number, got "3"`
      )
      // a reason over several lines stays indented under its trial in the table
      const lined = Eval.assertion("two lines", () => Effect.succeed({ passed: false, reason: "first\nsecond" }))
      const nested = yield* check([lined], { script: [ScriptedModel.text("done")] })
      const table = Eval.table(new Eval.Report({ suite: "s", trials: 1, threshold: 1, passed: false, cases: [nested] }))
      const lines = table.split("\n")
      const at = lines.findIndex((line) => line.startsWith("    trial 1: first"))
      assert.isAbove(at, 0)
      assert.isAbove(lines.length, at + 1)
      assert.isTrue(lines.slice(at + 1).every((line) => line.startsWith("      ")), table)

      const structured = yield* Eval.run(Eval.make({
        name: "structured",
        agent: Agent.make({ toolkit: Fixtures.toolkit, responseFormat: Total }).pipe(Effect.provide(Fixtures.layer)),
        cases: [{
          name: "answers",
          input: "1 + 2?",
          script: [ScriptedModel.toolCalls([{ name: "final_answer", params: { total: 3 } }])]
        }],
        assertions: [Eval.outputMatches(Total), Eval.outputMatches(Schema.Struct({ total: Schema.String }))]
      }))
      const [matching, other] = structured.cases[0]!.assertions
      assert.strictEqual(matching!.passes, 1)
      assert.include(other!.failures[0]!.reason, "the structured output does not match")
    }))

  it.effect("outputMatches fails an interrupted or failed run, saying so", () =>
    Effect.gen(function*() {
      const report = yield* check([Eval.outputMatches(Schema.String)], { script: [] })
      assert.include(report.assertions[0]!.failures[0]!.reason, "the run has no final output: it failed (UnknownError")
    }))

  it.effect("tokensAtMost and costAtMost sum the usage of every model reply", () =>
    Effect.gen(function*() {
      const usage = { inputTokens: 100, outputTokens: 10, totalTokens: 110 }
      const script = [
        ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }], { usage }),
        ScriptedModel.text("3", usage)
      ]
      const price = { inputPerMillion: 1_000, outputPerMillion: 10_000 } // 0.2 + 0.2
      const report = yield* check([
        Eval.tokensAtMost(220),
        Eval.tokensAtMost(219),
        Eval.tokensAtMost(20, { kind: "output" }),
        Eval.costAtMost(0.4, price),
        Eval.costAtMost(0.39, price)
      ], { script })
      assert.deepStrictEqual(report.assertions.map((a) => a.passes), [1, 0, 1, 1, 0])
      assert.include(report.assertions[1]!.failures[0]!.reason, "220 total tokens, over the bound of 219")
      assert.include(report.assertions[4]!.failures[0]!.reason, "over the bound of 0.39 (200 input, 20 output tokens)")
    }))

  it.effect("custom: a boolean, a verdict or an Effect; a check that throws or fails is a failed assertion", () =>
    Effect.gen(function*() {
      const report = yield* check([
        Eval.custom("true", () => true),
        Eval.custom("false", () => false),
        Eval.custom("verdict", () => ({ passed: false, reason: "too slow" })),
        Eval.custom("effect", () => Effect.succeed(true)),
        Eval.custom("throws", () => {
          throw new Error("boom")
        }),
        Eval.custom("fails", () => Effect.fail(new Error("nope"))),
        Eval.custom("dies", () => Effect.die("bad")),
        Eval.custom("resolves", async () => ({ passed: true, reason: "judged" })),
        Eval.custom("rejects", () => Promise.reject(new Error("judge unreachable")))
      ])
      assert.deepStrictEqual(report.assertions.map((a) => a.passes), [1, 0, 0, 1, 0, 0, 0, 1, 0])
      assert.deepStrictEqual(report.assertions.slice(1).map((a) => a.failures[0]?.reason), [
        "returned false",
        "too slow",
        undefined,
        "the check failed: boom",
        "the check failed: nope",
        "the check failed: bad",
        undefined,
        "the check failed: judge unreachable"
      ])
    }))
})

describe("Eval.noApprovalBypassed", () => {
  const gatedAgent = (gated: string) =>
    Agent.make({
      toolkit: Fixtures.toolkit,
      middleware: [HumanInTheLoop.middleware({ toolkit: Fixtures.toolkit, interruptOn: { [gated]: true } })]
    }).pipe(Effect.provide(Fixtures.layer))
  const approve = (interrupt: AgentResult.Interrupt) =>
    HumanInTheLoop.approveAll(interrupt.value as HumanInTheLoop.ApprovalRequest)

  it.effect("passes when the gated call ran after its approval (the run resumed with `decide`)", () =>
    Effect.gen(function*() {
      const report = yield* Eval.run(Eval.make({
        name: "gated",
        agent: gatedAgent("add"),
        cases: [{ name: "approved", input: "1 + 2?", script: [adds, ScriptedModel.text("3")], decide: approve }],
        assertions: [Eval.noApprovalBypassed(["add"]), Eval.toolCalled("add"), Eval.completed]
      }))
      assert.isTrue(report.passed, Eval.table(report))
    }))

  it.effect("fails, naming the call, when a tool meant to be gated ran unasked (the gate names another tool)", () =>
    Effect.gen(function*() {
      const report = yield* Eval.run(Eval.make({
        name: "misgated",
        agent: gatedAgent("echo"),
        cases: [{ name: "unasked", input: "1 + 2?", script: [adds, ScriptedModel.text("3")], decide: approve }],
        assertions: [Eval.noApprovalBypassed(["add"])]
      }))
      assert.isFalse(report.passed)
      assert.strictEqual(
        report.cases[0]!.assertions[0]!.failures[0]!.reason,
        "ran without an approval from humanInTheLoop: add (c1)"
      )
    }))

  it.effect("a decide that throws, or gives a decision the wait refuses, is a failed trial naming why", () =>
    Effect.gen(function*() {
      const report = yield* Eval.run(Eval.make({
        name: "bad decisions",
        agent: gatedAgent("add"),
        cases: [
          {
            name: "throws",
            input: "1 + 2?",
            script: [adds],
            decide: () => {
              throw new Error("no approver on duty")
            }
          },
          { name: "refused", input: "1 + 2?", script: [adds], decide: () => ["approve it all"] }
        ]
      }))
      assert.deepStrictEqual(report.cases.map((c) => c.passes), [0, 0])
      assert.strictEqual(report.cases[0]!.errors[0]!.reason, "no approver on duty")
      assert.include(report.cases[1]!.errors[0]!.reason, "InvalidResume")
    }))

  it.effect("an interrupted run without `decide` ran nothing gated: it passes, and `completed` fails", () =>
    Effect.gen(function*() {
      const report = yield* Eval.run(Eval.make({
        name: "waiting",
        agent: gatedAgent("add"),
        cases: [{ name: "waits", input: "1 + 2?", script: [adds] }],
        assertions: [Eval.noApprovalBypassed(["add"]), Eval.completed]
      }))
      const [bypass, completed] = report.cases[0]!.assertions
      assert.strictEqual(bypass!.passes, 1)
      assert.include(completed!.failures[0]!.reason, "the run ended Interrupted, waiting on humanInTheLoop")
    }))

  it.effect("an approval counts only for its own call, before the call, from the gating middleware", () =>
    Effect.gen(function*() {
      const verdict = (events: ReadonlyArray<AgentEvent.AgentEvent<unknown, unknown>>) =>
        Eval.noApprovalBypassed(["add"]).check(runOf(events))
      assert.isTrue((yield* verdict([decided("approve add", { callId: "c1" }), started("add", "c1")])).passed)
      assert.isTrue((yield* verdict([decided("edit add", { callId: "c1" }), started("add", "c1")])).passed)
      assert.isTrue(
        (yield* verdict([decided("1 call(s) need no decision (when)", { callIds: ["c1"] }), started("add", "c1")]))
          .passed
      )
      // another call's approval
      assert.isFalse((yield* verdict([decided("approve add", { callId: "c0" }), started("add", "c1")])).passed)
      // the approval after the call ran
      assert.isFalse((yield* verdict([started("add", "c1"), decided("approve add", { callId: "c1" })])).passed)
      // a rejection, or another middleware's approval
      assert.isFalse((yield* verdict([decided("reject add", { callId: "c1" }), started("add", "c1")])).passed)
      assert.isFalse((yield* verdict([decided("approve add", { callId: "c1" }, "other"), started("add", "c1")])).passed)
      // a tool that is not gated needs nothing
      assert.isTrue((yield* verdict([started("echo", "c1")])).passed)
      // one approval clears one start: provider call ids repeat across replies
      const twice = yield* verdict([
        decided("approve add", { callId: "c1" }),
        started("add", "c1"),
        completed("c1"),
        started("add", "c1"),
        completed("c1")
      ])
      assert.strictEqual(twice.reason, "ran without an approval from humanInTheLoop: add (c1)")
      // judged where the tool runs (the guard at the end of the wrapToolCall chain): cleared, or refused
      assert.isTrue(
        (yield* verdict([
          started("add", "c1"),
          decided("add (c1) is not the call cleared to run: judged again", { callId: "c1", toolName: "add" }),
          completed("c1")
        ])).passed
      )
      assert.isTrue(
        (yield* verdict([
          started("add", "c1"),
          decided("add (c1) did not run: no Approvals service to ask", { callId: "c1" }),
          completed("c1")
        ])).passed
      )
      // a call that started unasked and never finished (the run failed in it)
      assert.isFalse((yield* verdict([started("add", "c1")])).passed)
    }))
})

describe("Eval.run", () => {
  it.effect("a failing agent in one trial is a failed trial with its reason, not a failed eval", () =>
    Effect.gen(function*() {
      let call = 0
      // every other trial, the model fails
      const flaky: ScriptedModel.Turn = () =>
        call++ % 2 === 0 ? Effect.succeed(ScriptedModel.text("3")) : Effect.die("provider exploded")
      const report = yield* Eval.run(oneCase({ script: [flaky] }, { trials: 4, assertions: [Eval.completed] }))
      const result = report.cases[0]!
      assert.strictEqual(result.passes, 2)
      assert.strictEqual(result.passRate, 0.5)
      assert.isFalse(result.passed)
      assert.deepStrictEqual(result.errors.map((error) => error.trial), [2, 4])
      assert.include(result.errors[0]!.reason, "provider exploded")
      assert.deepStrictEqual(result.assertions[0]!.failures.map((failure) => failure.trial), [2, 4])
    }))

  it.effect("a tool that dies, or an agent that cannot be built, fails its trials with the reason", () =>
    Effect.gen(function*() {
      const exploding = Agent.make({ toolkit: Fixtures.echoToolkit }).pipe(
        Effect.provide(Fixtures.echoToolkit.toLayer({ echo: () => Effect.die(new Error("tool exploded")) }))
      )
      const script = [ScriptedModel.toolCalls([{ name: "echo", params: { text: "hi" } }]), ScriptedModel.text("ok")]
      const report = yield* Eval.run(Eval.make({
        name: "broken",
        agent: exploding,
        trials: 2,
        cases: [{ name: "echoes", input: "echo hi", script }],
        assertions: [Eval.toolCalled("echo", { text: "hi" })]
      }))
      const result = report.cases[0]!
      // the call was made (the assertion passes), but the run failed: the trial fails with why
      assert.strictEqual(result.passes, 0)
      assert.strictEqual(result.assertions[0]!.passes, 2)
      assert.include(result.errors[0]!.reason, "tool exploded")

      const unbuildable = yield* Eval.run(Eval.make({
        name: "unbuildable",
        agent: Agent.make({ toolkit: Fixtures.toolkit, maxSteps: 0 }).pipe(Effect.provide(Fixtures.layer)),
        cases: [{ name: "any", input: "hi", script: [] }]
      }))
      assert.include(unbuildable.cases[0]!.errors[0]!.reason, "AgentConfigError")
    }))

  it.effect("a case passes when its pass rate reaches passRate", () =>
    Effect.gen(function*() {
      const firstThree = Eval.custom("first three", (run) => run.trial <= 3)
      const at = (passRate: number) =>
        Eval.run(oneCase({}, { trials: 5, passRate, assertions: [firstThree] })).pipe(
          Effect.map((report) => report.passed)
        )
      assert.isTrue(yield* at(0.6))
      assert.isFalse(yield* at(0.8))
      assert.isTrue(yield* at(0))
    }))

  it.effect("each trial gets a fresh agent, script and thread", () =>
    Effect.gen(function*() {
      const threads = new Set<string>()
      const report = yield* Eval.run(oneCase({}, {
        trials: 3,
        concurrency: 3,
        assertions: [
          Eval.custom("one thread per trial", (run) => {
            threads.add(run.threadId)
            return run.toolCalls.length === 1
          })
        ]
      }))
      assert.isTrue(report.passed, Eval.table(report))
      assert.strictEqual(threads.size, 3)
    }))

  it.effect("a second run of an eval on a lasting checkpointer starts fresh threads", () =>
    Effect.gen(function*() {
      const suite = Eval.make({
        name: "lasting",
        agent: Agent.make({ toolkit: Fixtures.toolkit }).pipe(Effect.provide(Fixtures.layer)),
        cases: [{
          name: "fresh",
          input: "Hi",
          script: [(request) => ScriptedModel.text(`${request.prompt.content.length} message(s)`)]
        }],
        assertions: [
          Eval.custom("a fresh thread", (run) =>
            Option.exists(run.result, (result) => result._tag === "Completed" && result.text === "1 message(s)"))
        ]
      })
      const first = yield* Eval.run(suite)
      const second = yield* Eval.run(suite)
      assert.isTrue(first.passed && second.passed, Eval.table(second))
    }).pipe(Effect.provide(Checkpointer.layerMemory)))

  it.effect("a case without a script is answered by the suite's model, built for each trial", () =>
    Effect.gen(function*() {
      const suite = (model: Layer.Layer<LanguageModel.LanguageModel, unknown>) =>
        Eval.make({
          name: "real",
          agent: calculator,
          model,
          trials: 2,
          cases: [
            { name: "live", input: "What is 1 + 2?" },
            { name: "scripted", input: "Hi", script: [ScriptedModel.text("scripted")] }
          ],
          assertions: [Eval.completed]
        })
      // a fresh layer per trial: each trial's model starts its script from the first turn
      const report = yield* Eval.run(suite(ScriptedModel.layer([adds, ScriptedModel.text("3")])))
      assert.isTrue(report.passed, Eval.table(report))
      // a model that cannot be built fails the trials it serves, with the reason
      const broken = yield* Eval.run(suite(Layer.fail(new Error("no OPENAI_API_KEY"))))
      assert.deepStrictEqual(broken.cases.map((c) => c.passes), [0, 2])
      assert.strictEqual(broken.cases[0]!.errors[0]!.reason, "no OPENAI_API_KEY")
    }))

  it.effect("history seeds the thread before the input", () =>
    Effect.gen(function*() {
      const report = yield* Eval.run(oneCase({
        history: [{ role: "user", content: "My name is Ada." }, { role: "assistant", content: "Hello Ada." }],
        input: "What is my name?",
        script: [(request) => ScriptedModel.text(`${request.prompt.content.length} messages`)]
      }, {
        assertions: [
          Eval.custom("saw the history", (run) =>
            Option.exists(run.result, (result) => result._tag === "Completed" && result.text === "3 messages"))
        ]
      }))
      assert.isTrue(report.passed, Eval.table(report))
    }))

  it.live("a run over its timeout is a failed trial", () =>
    Effect.gen(function*() {
      const report = yield* Eval.run(oneCase({ script: [() => Effect.never] }, { timeout: "20 millis", trials: 2 }))
      assert.strictEqual(report.cases[0]!.passes, 0)
      assert.include(report.cases[0]!.errors[0]!.reason, "the run took longer than")
    }))

  it.effect("a case from a RunRecord replays its recorded replies on the agent as it is now", () =>
    Effect.gen(function*() {
      const { record } = yield* Effect.flatMap(
        calculator,
        (agent) => RunRecord.record(agent, "What is 1 + 2?", { threadId: "recorded" })
      ).pipe(Effect.provide(ScriptedModel.layer([adds, ScriptedModel.text("It is 3.")])))
      const fromJsonl = yield* RunRecord.fromJsonl(RunRecord.toJsonl(record))
      const report = yield* Eval.run(Eval.make({
        name: "recorded",
        agent: calculator,
        cases: [Eval.fromRecord(fromJsonl)],
        trials: 2,
        assertions: [
          Eval.toolCalled("add", { a: 1, b: 2 }),
          Eval.tokensAtMost(30),
          Eval.custom(
            "same answer",
            (run) => Option.exists(run.result, (result) => result._tag === "Completed" && result.text === "It is 3.")
          )
        ]
      }))
      assert.strictEqual(report.cases[0]!.name, "recorded")
      assert.isTrue(report.passed, Eval.table(report))
    }))

  it.effect("a recorded case replays its record on the agent under test: no model or tool call; a changed prompt fails replaysAsRecorded with the step and field", () =>
    Effect.gen(function*() {
      const { record } = yield* Effect.flatMap(
        calculator,
        (agent) => RunRecord.record(agent, "What is 1 + 2?", { threadId: "recorded" })
      ).pipe(Effect.provide(ScriptedModel.layer([adds, ScriptedModel.text("It is 3.")])))
      let toolRuns = 0
      const counting = Fixtures.toolkit.toLayer({
        echo: ({ text }) => Effect.sync(() => (toolRuns++, text)),
        add: ({ a, b }) => Effect.sync(() => (toolRuns++, a + b)),
        fail: ({ reason }) => Effect.zipRight(Effect.sync(() => toolRuns++), Effect.fail({ reason }))
      })
      const suite = (systemPrompt: string | undefined) =>
        Eval.make({
          name: "recorded",
          agent: Agent.make({ toolkit: Fixtures.toolkit, ...(systemPrompt === undefined ? {} : { systemPrompt }) })
            .pipe(Effect.provide(counting)),
          cases: [Eval.fromRecord(record, { name: "support-42" })],
          assertions: [Eval.completed, Eval.toolCalled("add", { a: 1, b: 2 })]
        })
      // as recorded: every assertion passes, no tool ran (and the model layer is an empty script: no call)
      const same = yield* Eval.run(suite(undefined))
      assert.isTrue(same.passed, Eval.table(same))
      assert.deepStrictEqual(same.cases[0]!.assertions.map((entry) => entry.name), [
        "completed",
        "toolCalled(add, {\"a\":1,\"b\":2})",
        "replaysAsRecorded"
      ])
      assert.strictEqual(toolRuns, 0)
      // another system prompt: the replay diverges at step 0, and the case fails on that assertion
      const changed = yield* Eval.run(suite("You add carefully."))
      assert.isFalse(changed.passed)
      const replayed = changed.cases[0]!.assertions.find((entry) => entry.name === "replaysAsRecorded")!
      assert.strictEqual(replayed.passes, 0)
      assert.include(replayed.failures[0]!.reason, "step 0, systemPrompt")
      assert.deepStrictEqual(changed.cases[0]!.errors, [])
      assert.strictEqual(toolRuns, 0)
    }))

  it.effect("bad options fail with InvalidEval naming the option", () =>
    Effect.gen(function*() {
      const field = (suite: Eval.Suite, cases?: ReadonlyArray<string>) =>
        Eval.run(suite, { cases }).pipe(Effect.flip, Effect.map((error) => [error._tag, error.field]))
      assert.deepStrictEqual(yield* field(oneCase({}, { trials: 0 })), ["InvalidEval", "trials"])
      assert.deepStrictEqual(yield* field(oneCase({}, { trials: 1.5 })), ["InvalidEval", "trials"])
      assert.deepStrictEqual(yield* field(oneCase({}, { concurrency: 0 })), ["InvalidEval", "concurrency"])
      assert.deepStrictEqual(yield* field(oneCase({}, { passRate: 1.5 })), ["InvalidEval", "passRate"])
      assert.deepStrictEqual(yield* field(oneCase({}, { passRate: Number.NaN })), ["InvalidEval", "passRate"])
      assert.deepStrictEqual(yield* field(oneCase({}, { timeout: "0 millis" })), ["InvalidEval", "timeout"])
      assert.deepStrictEqual(yield* field(oneCase({}, { cases: [] })), ["InvalidEval", "cases"])
      assert.deepStrictEqual(yield* field(oneCase({ name: "" })), ["InvalidEval", "cases[0].name"])
      assert.deepStrictEqual(yield* field(oneCase({ input: [] })), ["InvalidEval", "cases[0].input"])
      assert.deepStrictEqual(yield* field(oneCase({ input: [{ role: "robot" }] as never })), [
        "InvalidEval",
        "cases[0].input"
      ])
      assert.deepStrictEqual(yield* field(oneCase({}, { assertions: [Eval.tokensAtMost(-1)] })), [
        "InvalidEval",
        "assertions[0]"
      ])
      assert.deepStrictEqual(
        yield* field(oneCase({}, { assertions: [Eval.costAtMost(1, { inputPerMillion: -1, outputPerMillion: 1 })] })),
        ["InvalidEval", "assertions[0]"]
      )
      assert.deepStrictEqual(yield* field(oneCase({ assertions: [Eval.noApprovalBypassed([])] })), [
        "InvalidEval",
        "cases[0].assertions[0]"
      ])
      assert.deepStrictEqual(yield* field(oneCase({}), ["nope"]), ["InvalidEval", "cases"])
      assert.deepStrictEqual(yield* field(oneCase({}), []), ["InvalidEval", "cases"])
      assert.deepStrictEqual(yield* field(oneCase({}, { assertions: [Eval.toolCalled("")] })), [
        "InvalidEval",
        "assertions[0]"
      ])
      assert.deepStrictEqual(yield* field(oneCase({}, { assertions: [Eval.noApprovalBypassed("add" as never)] })), [
        "InvalidEval",
        "assertions[0]"
      ])
      assert.deepStrictEqual(yield* field(oneCase({}, { timeout: "soon" as never })), ["InvalidEval", "timeout"])
      // one turn where the list of turns belongs
      assert.deepStrictEqual(yield* field(oneCase({ script: ScriptedModel.text("3") as never })), [
        "InvalidEval",
        "cases[0].script[0]"
      ])
      assert.deepStrictEqual(yield* field(oneCase({ script: "3" as never })), ["InvalidEval", "cases[0].script"])
      assert.deepStrictEqual(yield* field(oneCase({ history: [{ role: "robot" }] as never })), [
        "InvalidEval",
        "cases[0].history"
      ])
      // a constructor passed where its result belongs
      const notAnAssertion = yield* Effect.flip(Eval.run(oneCase({}, { assertions: [Eval.toolCalled as never] })))
      assert.strictEqual(notAnAssertion.field, "assertions[0]")
      assert.include(notAnAssertion.reason, "not an assertion")
      const unscripted = Eval.make({ name: "real", agent: calculator, cases: [{ name: "a", input: "x" }] })
      assert.deepStrictEqual(yield* field(unscripted), ["InvalidEval", "cases[0].script"])
      const twice = Eval.make({
        name: "twice",
        agent: calculator,
        cases: [{ name: "a", input: "x", script: [] }, { name: "a", input: "y", script: [] }]
      })
      const error = yield* Effect.flip(Eval.run(twice))
      assert.strictEqual(error.field, "cases[1].name")
      assert.include(error.message, `two cases are named "a"`)
    }))

  it.effect("options.cases runs only the cases named", () =>
    Effect.gen(function*() {
      const suite = Eval.make({
        name: "two",
        agent: calculator,
        cases: [
          { name: "a", input: "x", script: [ScriptedModel.text("a")] },
          { name: "b", input: "y", script: [] }
        ]
      })
      const report = yield* Eval.run(suite, { cases: ["a"] })
      assert.deepStrictEqual(report.cases.map((c) => c.name), ["a"])
      assert.isTrue(report.passed)
    }))

  it.effect.prop(
    "the pass rate of a case and of an assertion is passes / trials, whatever the outcomes",
    {
      outcomes: FastCheck.array(FastCheck.boolean(), { minLength: 1, maxLength: 12 }),
      concurrency: FastCheck.integer({ min: 1, max: 4 })
    },
    ({ concurrency, outcomes }) =>
      Effect.gen(function*() {
        const report = yield* Eval.run(oneCase({ script: [ScriptedModel.text("3")] }, {
          trials: outcomes.length,
          concurrency,
          passRate: 0.5,
          assertions: [Eval.custom("scripted outcome", (run) => outcomes[run.trial - 1]!), Eval.completed]
        }))
        const result = report.cases[0]!
        const passes = outcomes.filter(Boolean).length
        assert.strictEqual(result.trials, outcomes.length)
        assert.strictEqual(result.passes, passes)
        assert.strictEqual(result.passRate, passes / outcomes.length)
        assert.strictEqual(result.passed, passes / outcomes.length >= 0.5)
        assert.deepStrictEqual(
          result.assertions[0]!.failures.map((failure) => failure.trial),
          outcomes.flatMap((outcome, index) => outcome ? [] : [index + 1])
        )
        assert.strictEqual(result.assertions[1]!.passRate, 1)
      }),
    { fastCheck: { numRuns: 25 } }
  )
})

describe("Eval reports", () => {
  it.effect.prop(
    "toJson then fromJson gives the report back",
    { report: Arbitrary.make(Eval.Report) },
    ({ report }) =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* Eval.fromJson(Eval.toJson(report)), report)
      }),
    { fastCheck: { numRuns: 50 } }
  )

  it.effect("fromJson fails with InvalidReport on text that is not a report", () =>
    Effect.gen(function*() {
      const notJson = yield* Effect.flip(Eval.fromJson("{"))
      assert.strictEqual(notJson._tag, "InvalidReport")
      const notReport = yield* Effect.flip(Eval.fromJson(`{"suite":"x"}`))
      assert.include(notReport.message, "trials")
    }))

  it.effect("the table shows each case and assertion, with the reason of each failed trial", () =>
    Effect.gen(function*() {
      const report = yield* Eval.run(oneCase({}, {
        trials: 2,
        assertions: [Eval.toolCalled("add"), Eval.toolNeverCalled("add")]
      }))
      const text = Eval.table(report)
      assert.include(text, "calc: FAILED, 1 of 1 case(s)")
      assert.match(text, /^case\s+0\/2\s+0%\s+FAIL$/m)
      assert.match(text, /^ {2}toolCalled\(add\)\s+2\/2\s+100%$/m)
      assert.match(text, /^ {2}toolNeverCalled\(add\)\s+0\/2\s+0%$/m)
      assert.include(text, `    trial 2: add was called 1 time(s): {"a":1,"b":2}`)
      const failed = yield* Effect.flip(Eval.assertPassed(report))
      assert.strictEqual(failed._tag, "EvalFailed")
      assert.include(failed.message, "trial 1: add was called")
      // a passing case is left out of the failures-only table
      const passing = new Eval.Report({ ...report, cases: [{ ...report.cases[0]!, name: "fine", passed: true }] })
      assert.include(Eval.table(passing), "fine")
      assert.notInclude(Eval.table(passing, { failuresOnly: true }), "fine")
      // and a passing assertion of a failing case
      assert.notInclude(failed.message, "toolCalled(add)")
    }))

  it.effect("reasons never carry a credential-shaped token", () =>
    Effect.gen(function*() {
      const report = yield* check([Eval.toolCalled("echo", { text: "x" })], {
        script: [
          ScriptedModel.toolCalls([{ name: "echo", params: { text: "sk-live-abcdefghijklmnopqrstuvwx" } }]),
          ScriptedModel.text("ok")
        ]
      })
      assert.notInclude(JSON.stringify(report), "sk-live-abcdefghijklmnopqrstuvwx")
    }))
})
