import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Eval, Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import * as EvalVitest from "@stepwise-agent/testing/vitest"
import { Effect } from "effect"

const calculator = Agent.make({ toolkit: Fixtures.toolkit, systemPrompt: "Use add." }).pipe(
  Effect.provide(Fixtures.layer)
)

const suite = (answer: string) =>
  Eval.make({
    name: "calculator",
    agent: calculator,
    trials: 3,
    cases: [
      {
        name: "adds with the tool",
        input: "What is 1 + 2?",
        script: [ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }]), ScriptedModel.text(answer)]
      },
      { name: "answers without tools", input: "Say hi", script: [ScriptedModel.text("hi")] }
    ],
    assertions: [Eval.toolNeverCalled("fail"), Eval.completed],
    passRate: 1
  })

// one vitest test per case, each running its trials
EvalVitest.describe(suite("3"))

// one vitest test for the whole suite
EvalVitest.it(Eval.make({
  name: "calculator (one test)",
  agent: calculator,
  cases: [{ name: "adds", input: "1 + 2?", script: [ScriptedModel.text("3")] }],
  assertions: [Eval.completed]
}))

describe("EvalVitest", () => {
  const failing = Eval.make({
    name: "strict",
    agent: calculator,
    trials: 2,
    cases: [{ name: "adds", input: "1 + 2?", script: [ScriptedModel.text("3")] }],
    assertions: [Eval.toolCalled("add", { a: 1 })]
  })

  // expected to fail: vitest passes these tests only when the case's test throws
  EvalVitest.describe(failing, { fails: true })
  EvalVitest.it(failing, { fails: true })

  it.effect("a failing case's message is the table of its failed assertions", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.flatMap(Eval.run(failing), Eval.assertPassed))
      assert.include(error.message, "strict: FAILED, 1 of 1 case(s)")
      assert.include(error.message, "trial 2: add was never called (tools called: none)")
    }))
})
