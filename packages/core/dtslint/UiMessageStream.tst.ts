import type { Agent, AgentState, Wait } from "@stepwise-agent/core"
import { UiMessageStream } from "@stepwise-agent/core"
import { Effect, Option } from "effect"
import { describe, expect, test } from "tstyche"

declare const agent: Agent.Service

const ownChats: UiMessageStream.Authorize = (request, threadId) =>
  Effect.succeed(request.headers["x-user"] !== undefined && threadId.startsWith(`${request.headers["x-user"]}/`))

describe("UiMessageStream.toHttpApp", () => {
  test("authorize is required: who may use which chat is always said", () => {
    expect(UiMessageStream.toHttpApp).type.not.toBeCallableWith(agent)
    expect(UiMessageStream.toHttpApp).type.not.toBeCallableWith(agent, {})
    expect(UiMessageStream.toHttpApp).type.toBeCallableWith(agent, { authorize: UiMessageStream.allowAll })
    expect(UiMessageStream.toHttpApp).type.toBeCallableWith(agent, { authorize: ownChats, maxBodyBytes: 1024 })
  })
})

type Confirm = Wait.Declared<"confirm", { readonly callId: string; readonly toolName: string }, boolean>
type Pick = Wait.Declared<"pick", { readonly choices: ReadonlyArray<string> }, string>
declare const confirming: Agent.Service<AgentState.AgentState, never, never, Confirm>
declare const neverWaits: Agent.Service<AgentState.AgentState, never, never, never>
declare const confirmingOrPicking: Agent.Service<AgentState.AgentState, never, never, Confirm | Pick>

const yesNo: UiMessageStream.Approvals<Confirm> = {
  requests: (interrupt) => {
    expect(interrupt.value).type.toBe<{ readonly callId: string; readonly toolName: string }>()
    return Option.some([
      { approvalId: interrupt.key, toolCallId: interrupt.value.callId, toolName: interrupt.value.toolName, input: {} }
    ])
  },
  resumeValue: (_interrupt, responses) => responses.every((response) => response.approved)
}
/** Reads any interrupt, answers with a string (as a middleware's own adapter, e.g. `uiApprovals`, does). */
declare const picks: UiMessageStream.Approvals<Wait.Any, string>

describe("UiMessageStream.Approvals", () => {
  test("an adapter is typed by the waits it reads: the interrupt's value is the request, the answer a decision", () => {
    expect<UiMessageStream.Approvals<Confirm>["resumeValue"]>().type.toBe<
      (interrupt: Wait.Interrupt<Confirm>, responses: ReadonlyArray<UiMessageStream.ApprovalResponse>) => boolean
    >()
    expect<UiMessageStream.Approvals<Confirm>>().type.not.toBeAssignableFrom({
      requests: () => Option.none(),
      resumeValue: () => "yes"
    })
  })

  test("the chat handlers take an adapter only when the agent's waits accept its decisions", () => {
    expect(UiMessageStream.toHttpApp).type.toBeCallableWith(confirming, { authorize: ownChats, approvals: yesNo })
    expect(UiMessageStream.toHttpApp).type.not.toBeCallableWith(confirming, { authorize: ownChats, approvals: picks })
    expect(UiMessageStream.toHttpApp).type.toBeCallableWith(confirmingOrPicking, {
      authorize: ownChats,
      approvals: picks
    })
    expect(UiMessageStream.messagesHttpApp).type.toBeCallableWith(confirming, { authorize: ownChats, approvals: yesNo })
    expect(UiMessageStream.messagesHttpApp).type.not.toBeCallableWith(confirming, {
      authorize: ownChats,
      approvals: picks
    })
    // an agent typed loosely takes any adapter; one that never waits, options of any (it reads no adapter)
    expect(UiMessageStream.toHttpApp).type.toBeCallableWith(agent, { authorize: ownChats, approvals: picks })
    const loose: UiMessageStream.Options = { authorize: ownChats, approvals: picks }
    expect(UiMessageStream.toHttpApp).type.toBeCallableWith(neverWaits, loose)
    expect(UiMessageStream.toHttpApp).type.not.toBeCallableWith(confirming, loose)
  })

  test("fromEvents reads a run's interrupts with an adapter of its agent's waits", () => {
    expect(UiMessageStream.fromEvents).type.toBeCallableWith(confirming.stream("hi", { threadId: "t" }), {
      approvals: yesNo
    })
    expect(UiMessageStream.fromEvents).type.not.toBeCallableWith(confirming.stream("hi", { threadId: "t" }), {
      approvals: picks
    })
  })
})
