/**
 * A key a testing helper does not know (a typo, an option of another test
 * library) fails with the helper's typed error naming it and the keys it
 * knows: `InvalidOptions` from `FakeOpenAi` and `ScriptedModel` (failed by
 * an effect or a layer, thrown by a builder of a value), `InvalidEval` from
 * `Eval` (its options, a case, `run`'s options) and the vitest helpers, and
 * `Arbitraries.conversation` throws as for its other bad options. Before,
 * the key was ignored.
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Arbitraries, Eval, ScriptedModel } from "@stepwise-agent/testing"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import * as EvalVitest from "@stepwise-agent/testing/vitest"
import { Cause, Effect, Exit, FastCheck, Layer, Option } from "effect"

/** What `f` throws; not throwing fails the test. */
const thrown = (label: string, f: () => unknown): { readonly _tag?: string; readonly message: string } => {
  try {
    f()
  } catch (error) {
    return error as { readonly _tag?: string; readonly message: string }
  }
  return assert.fail(`${label}: did not throw`)
}

const failureOf = (label: string, effect: Effect.Effect<unknown, unknown, any>) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(Effect.scoped(effect))
    if (Exit.isSuccess(exit)) return assert.fail(`${label}: succeeded`)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isNone(failure)) return assert.fail(`${label}: died: ${Cause.pretty(exit.cause).slice(0, 300)}`)
    return failure.value as { readonly _tag: string; readonly message: string; readonly field?: string }
  })

const bogus = { bogus: 1 } as any

describe("testing helpers given an option key they do not know", () => {
  it("FakeOpenAi's and ScriptedModel's reply builders throw InvalidOptions naming it", () => {
    const builders: ReadonlyArray<readonly [string, () => unknown, string]> = [
      ["envelope", () => FakeOpenAi.envelope([], { usage: [1, 1], ...bogus }), "\"status\""],
      ["text", () => FakeOpenAi.text("hi", { ...bogus }), "\"usage\""],
      ["toolCalls", () => FakeOpenAi.toolCalls([{ name: "a", arguments: {} } as any], bogus), "\"usage\""],
      ["textNotStreamed", () => FakeOpenAi.textNotStreamed("hi", bogus), "\"id\""],
      ["textEvents", () => FakeOpenAi.textEvents(["hi"], bogus), "\"usage\""],
      ["toolCallEvents", () => FakeOpenAi.toolCallEvents([{ name: "a", arguments: {} } as any], bogus), "\"id\""],
      ["streamText", () => FakeOpenAi.streamText(["hi"], bogus), "\"usage\""],
      ["streamToolCalls", () => FakeOpenAi.streamToolCalls([{ name: "a", arguments: {} } as any], bogus), "\"id\""],
      ["streamTextCut", () => FakeOpenAi.streamTextCut(["hi"], { deltas: 1, ...bogus }), "\"deltas\""],
      ["json", () => FakeOpenAi.json({}, bogus), "\"headers\""],
      ["raw", () => FakeOpenAi.raw("x", bogus), "\"status\""],
      ["error", () => FakeOpenAi.error(500, "no", bogus), "\"type\""],
      ["sse", () => FakeOpenAi.sse([], bogus), "\"stallAfter\""],
      ["ScriptedModel.toolCalls", () => ScriptedModel.toolCalls([], bogus), "\"text\""],
      ["ScriptedModel.truncated", () => ScriptedModel.truncated([], bogus), "\"deltas\""]
    ]
    for (const [label, build, knows] of builders) {
      const error = thrown(label, build)
      assert.strictEqual(error._tag, "InvalidOptions", `${label}: ${error.message}`)
      assert.include(error.message, "\"bogus\": is unknown; expected", label)
      assert.include(error.message, knows, label)
    }
  })

  it.effect("FakeOpenAi.make and FakeOpenAi.languageModel fail with InvalidOptions naming it", () =>
    Effect.gen(function*() {
      const made = yield* failureOf("make", FakeOpenAi.make([], { contextWindw: 100 } as any))
      assert.strictEqual(made._tag, "InvalidOptions")
      assert.include(made.message, "\"contextWindw\": is unknown; expected \"contextWindow\"")
      const layer = yield* failureOf(
        "languageModel",
        Layer.build(FakeOpenAi.languageModel({ url: "http://127.0.0.1:1" }, { baseURL: "x" } as any))
      )
      assert.strictEqual(layer._tag, "InvalidOptions")
      assert.include(layer.message, "\"baseURL\": is unknown; expected")
      assert.include(layer.message, "\"apiKey\"")
    }))

  it.effect("Eval: a key of make's options, a case, run's options or an assertion's fails the run with InvalidEval", () =>
    Effect.gen(function*() {
      const valid = {
        name: "suite",
        agent: Agent.make({}),
        cases: [{ name: "hi", input: "hi", script: [ScriptedModel.text("hello")] }]
      }
      const cases: ReadonlyArray<readonly [string, Eval.Suite, unknown, string, string]> = [
        ["make", Eval.make({ ...valid, retries: 2 } as any), undefined, "retries", "\"passRate\""],
        ["make (LangChain)", Eval.make({ ...valid, evaluators: [] } as any), undefined, "evaluators", "\"assertions\""],
        [
          "a case",
          Eval.make({ ...valid, cases: [{ ...valid.cases[0]!, expected: "hello" }] } as any),
          undefined,
          "cases[0].expected",
          "\"script\""
        ],
        ["run", Eval.make(valid), { cases: ["hi"], trials: 3 }, "run.trials", "\"cases\""],
        [
          "tokensAtMost",
          Eval.make({ ...valid, assertions: [Eval.tokensAtMost(10, { type: "input" } as any)] }),
          undefined,
          "assertions[0]",
          "type is unknown; expected \"kind\""
        ],
        [
          "noApprovalBypassed",
          Eval.make({ ...valid, assertions: [Eval.noApprovalBypassed(["a"], { middlewareName: "x" } as any)] }),
          undefined,
          "assertions[0]",
          "middlewareName is unknown; expected \"middleware\""
        ]
      ]
      for (const [label, suite, options, field, knows] of cases) {
        const error = yield* failureOf(label, Eval.run(suite, options as any))
        assert.strictEqual(error._tag, "InvalidEval", `${label}: ${error.message}`)
        assert.strictEqual(error.field, field, label)
        assert.include(error.message, "is unknown; expected", label)
        assert.include(error.message, knows, label)
      }
    }))

  it("the vitest helpers throw InvalidEval naming it, before registering anything", () => {
    const suite = Eval.make({ name: "never-registered", agent: Agent.make({}), cases: [] })
    for (
      const [label, register] of [
        ["describe", () => EvalVitest.describe(suite, { timeout: 1000, retry: 2 } as any)],
        ["it", () => EvalVitest.it(suite, { skip: true } as any)]
      ] as const
    ) {
      const error = thrown(label, register)
      assert.strictEqual(error._tag, "InvalidEval", label)
      assert.include(error.message, `${label}.`, label)
      assert.include(error.message, "is unknown; expected \"timeout\" | \"fails\"", label)
    }
  })

  it("Arbitraries.conversation throws naming it, as for its other bad options", () => {
    const error = thrown("conversation", () => Arbitraries.conversation({ maxTurn: 3 } as any))
    assert.include(error.message, "Arbitraries.conversation: maxTurn is unknown; expected")
    assert.include(error.message, "\"maxTurns\"")
  })

  it.prop(
    "any key outside a builder's options throws, naming it; its known keys do not",
    { key: FastCheck.string({ minLength: 1, maxLength: 20 }) },
    ({ key }) => {
      const options = { [key]: undefined } as any
      if (key === "id" || key === "usage") {
        FakeOpenAi.text("hi", options)
        return
      }
      const error = thrown(key, () => FakeOpenAi.text("hi", options)) as { readonly option?: string }
      assert.strictEqual(error.option, key)
    },
    { fastCheck: { numRuns: 50 } }
  )
})
