import type { LanguageModel } from "@effect/ai"
import { Agent } from "@stepwise-agent/core"
import { Eval, Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import * as EvalVitest from "@stepwise-agent/testing/vitest"
import type { Layer } from "effect"
import { Context, Effect } from "effect"
import { describe, expect, test } from "tstyche"

class ApiKey extends Context.Tag("ApiKey")<ApiKey, string>() {}
class Store extends Context.Tag("Store")<Store, { readonly name: string }>() {}

const calculator = Agent.make({ toolkit: Fixtures.toolkit }).pipe(Effect.provide(Fixtures.layer))
declare const realModel: Layer.Layer<LanguageModel.LanguageModel, never, ApiKey>
const cases = [{ name: "adds", input: "1 + 2?", script: [ScriptedModel.text("3")] }]

describe("Eval.make", () => {
  test("the model the eval provides is not a requirement of the suite", () => {
    expect(Eval.make({ name: "s", agent: calculator, cases })).type.toBe<Eval.Suite<never>>()
  })

  test("the suite needs what its model layer and the agent's other services need", () => {
    const agent = Effect.zipLeft(calculator, Store)
    expect(Eval.make({ name: "s", agent, cases, model: realModel })).type.toBe<Eval.Suite<Store | ApiKey>>()
    expect(Eval.run(Eval.make({ name: "s", agent, cases, model: realModel }))).type.toBe<
      Effect.Effect<Eval.Report, Eval.InvalidEval, Store | ApiKey>
    >()
  })

  test("vitest takes only a suite that needs nothing", () => {
    EvalVitest.describe(Eval.make({ name: "s", agent: calculator, cases }))
    expect(EvalVitest.describe).type.not.toBeCallableWith(
      Eval.make({ name: "s", agent: calculator, cases, model: realModel })
    )
  })
})
