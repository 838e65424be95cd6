import { Tool } from "@effect/ai"
import type { Middleware, Wait } from "@stepwise-agent/core"
import { ToolEffect } from "@stepwise-agent/core"
import { Schema } from "effect"
import { describe, expect, test } from "tstyche"

describe("ToolEffect", () => {
  test("declare keeps the tool's type", () => {
    const Send = Tool.make("send", { parameters: { to: Schema.String }, success: Schema.String })
    expect(Send.pipe(ToolEffect.declare(ToolEffect.uncertain))).type.toBe<typeof Send>()
    expect(ToolEffect.declare(Send, ToolEffect.readOnly)).type.toBe<typeof Send>()
  })

  test("the middleware's wait is the Uncertain question: its request and its bound decisions", () => {
    expect<Middleware.Waits<ReturnType<typeof ToolEffect.middleware>>>().type.toBe<
      Wait.Declared<"effectLedger", ToolEffect.UncertainRequest, ToolEffect.UncertainDecision>
    >()
  })

  test("a decision is built from the request it answers", () => {
    const request = {} as ToolEffect.UncertainRequest
    expect(ToolEffect.retry(request)).type.toBe<ToolEffect.UncertainDecision>()
    expect(ToolEffect.markDone).type.not.toBeCallableWith(request)
    expect(ToolEffect.compensate).type.not.toBeCallableWith({ step: "tool/c1" })
  })
})
