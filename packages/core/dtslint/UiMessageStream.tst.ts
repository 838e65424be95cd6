import type { Agent } from "@stepwise-agent/core"
import { UiMessageStream } from "@stepwise-agent/core"
import { Effect } from "effect"
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
