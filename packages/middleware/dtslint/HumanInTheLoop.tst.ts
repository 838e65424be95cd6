import type { AgentError } from "@stepwise-agent/core"
import { HumanInTheLoop, RiskApproval } from "@stepwise-agent/middleware"
import type { Effect } from "effect"
import { describe, expect, test } from "tstyche"

declare const action: HumanInTheLoop.ActionRequest
declare const request: HumanInTheLoop.ApprovalRequest

describe("HumanInTheLoop decisions are built from the request's actions", () => {
  test("from an action: bound to its wait", () => {
    expect(HumanInTheLoop.approve(action)).type.toBe<HumanInTheLoop.Decision>()
    expect(HumanInTheLoop.edit(action, { path: "/tmp/b" })).type.toBe<HumanInTheLoop.Decision>()
    expect(HumanInTheLoop.reject(action, "no")).type.toBe<HumanInTheLoop.Decision>()
    expect(HumanInTheLoop.respond(action, "done")).type.toBe<HumanInTheLoop.Decision>()
    expect(HumanInTheLoop.approveAll(request)).type.toBe<ReadonlyArray<HumanInTheLoop.Decision>>()
  })

  test("from a bare call id: a type error", () => {
    expect(HumanInTheLoop.approve("c2")).type.toRaiseError("not assignable")
    expect(HumanInTheLoop.edit("c2", { path: "/tmp/b" })).type.toRaiseError("not assignable")
    expect(HumanInTheLoop.reject("c2", "no")).type.toRaiseError("not assignable")
    expect(HumanInTheLoop.respond("c2", "done")).type.toRaiseError("not assignable")
  })

  test("an action without its wait key or fingerprint: a type error", () => {
    expect(HumanInTheLoop.approve({
      callId: "c2",
      toolName: "wire_money",
      args: { to: "bob", amount: 100 },
      description: "",
      allowedDecisions: ["approve"],
      fingerprint: HumanInTheLoop.fingerprintOf("wire_money", { to: "bob", amount: 100 })
    })).type.toRaiseError("waitKey")
  })

  test("a decision names its wait and its call's fingerprint", () => {
    expect<HumanInTheLoop.Decision["waitKey"]>().type.toBe<string>()
    expect<HumanInTheLoop.Decision["fingerprint"]>().type.toBe<string>()
  })
})

describe("RiskApproval", () => {
  test("make: bad options are an InvalidOptions", () => {
    expect(RiskApproval.make({ timeout: "10 seconds" })).type.toBe<
      Effect.Effect<HumanInTheLoop.When, AgentError.InvalidOptions, RiskApproval.Classifier>
    >()
  })
})
