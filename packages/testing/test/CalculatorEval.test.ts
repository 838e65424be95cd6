// The first sample of docs/evals.md, as a runnable example: npx vitest run packages/testing/test/CalculatorEval.test.ts
import { Agent } from "@stepwise-agent/core"
import { Eval, Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import * as EvalVitest from "@stepwise-agent/testing/vitest"
import { Effect, Schema } from "effect"

const calculator = Agent.make({ toolkit: Fixtures.toolkit, systemPrompt: "Use the add tool." }).pipe(
  Effect.provide(Fixtures.layer)
)

EvalVitest.describe(Eval.make({
  name: "calculator",
  agent: calculator,
  trials: 3,
  cases: [
    {
      name: "adds with the tool",
      input: "What is 1 + 2?",
      script: [
        ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }]),
        ScriptedModel.text(`{"total":3}`)
      ],
      assertions: [
        Eval.toolCalled("add", { a: 1, b: 2 }),
        Eval.outputMatches(Schema.Struct({ total: Schema.Number }))
      ]
    },
    {
      name: "says hello without tools",
      input: "Hello!",
      script: [ScriptedModel.text("Hello! What shall I add?")],
      assertions: [Eval.toolNeverCalled("add")]
    }
  ],
  // checked on every case
  assertions: [Eval.completed, Eval.toolNeverCalled("fail"), Eval.tokensAtMost(100)]
}))
