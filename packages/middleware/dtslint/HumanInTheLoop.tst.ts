import type { Agent, AgentError, AgentState, Wait } from "@stepwise-agent/core"
import { UiMessageStream } from "@stepwise-agent/core"
import { HumanInTheLoop, RiskApproval, SubAgents } from "@stepwise-agent/middleware"
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

type Confirm = Wait.Declared<"confirm", { readonly question: string }, boolean>
declare const withApprovals: Agent.Service<AgentState.AgentState, never, never, HumanInTheLoop.Waits | Confirm>
declare const withoutApprovals: Agent.Service<AgentState.AgentState, never, never, Confirm>

describe("HumanInTheLoop.uiApprovals is checked against the agent's waits", () => {
  test("a chat handler takes it for an agent with the middleware, and refuses it for one without", () => {
    const options = { authorize: UiMessageStream.allowAll, approvals: HumanInTheLoop.uiApprovals }
    expect(UiMessageStream.toHttpApp).type.toBeCallableWith(withApprovals, options)
    expect(UiMessageStream.toHttpApp).type.not.toBeCallableWith(withoutApprovals, options)
    expect(UiMessageStream.messagesHttpApp).type.toBeCallableWith(withApprovals, options)
    expect(UiMessageStream.messagesHttpApp).type.not.toBeCallableWith(withoutApprovals, options)
  })

  test("its resume value is the middleware's decisions", () => {
    expect(HumanInTheLoop.uiApprovals.resumeValue).type.toBe<
      (
        interrupt: Wait.Interrupt,
        responses: ReadonlyArray<UiMessageStream.ApprovalResponse>
      ) => HumanInTheLoop.DecisionsGiven
    >()
  })

  test("seen through subagents, it answers with SubAgents' decisions or the middleware's", () => {
    const throughChildren = SubAgents.uiApprovals(HumanInTheLoop.uiApprovals)
    expect(throughChildren).type.toBeAssignableTo<UiMessageStream.Approvals<SubAgents.Waits>>()
    expect(throughChildren).type.toBeAssignableTo<UiMessageStream.Approvals<SubAgents.Waits | HumanInTheLoop.Waits>>()
    expect(UiMessageStream.toHttpApp).type.not.toBeCallableWith(withoutApprovals, {
      authorize: UiMessageStream.allowAll,
      approvals: SubAgents.uiApprovals(HumanInTheLoop.uiApprovals)
    })
  })
})
