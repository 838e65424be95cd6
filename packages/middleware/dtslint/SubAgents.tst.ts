import type { AiError } from "@effect/ai"
import type { Agent, AgentError, Middleware } from "@stepwise-agent/core"
import { SubAgents } from "@stepwise-agent/middleware"
import { Schema } from "effect"
import { describe, expect, test } from "tstyche"

class OverQuota extends Schema.TaggedError<OverQuota>()("OverQuota", { limit: Schema.Number }) {}

declare const plain: Agent.Service<{}, never>
declare const quota: Agent.Service<{}, OverQuota>

describe("SubAgentFailed", () => {
  test("its error is what a child fails with, not unknown", () => {
    expect<SubAgents.SubAgentFailed["error"]>().type.toBe<
      AgentError.AgentError | AiError.AiError | SubAgents.SubAgentTimeout
    >()
    expect<SubAgents.ChildFailure<OverQuota>>().type.toBe<
      OverQuota | AgentError.AgentError | AiError.AiError | SubAgents.SubAgentTimeout
    >()
  })

  test("the middleware's error carries its children's errors in SubAgentFailed", () => {
    const _subAgents = SubAgents.middleware({
      agents: { plain: { description: "d", agent: plain }, quota: { description: "d", agent: quota } }
    })
    type Failed = Extract<Middleware.Error<typeof _subAgents>, { readonly _tag: "SubAgentFailed" }>
    expect<Failed>().type.toBe<SubAgents.SubAgentFailed<SubAgents.ChildFailure<OverQuota>>>()
    expect<Failed["error"]>().type.toBe<SubAgents.ChildFailure<OverQuota>>()
  })

  test("a caller narrows the child's error by _tag without a cast", () => {
    const limitOf = (failed: SubAgents.SubAgentFailed<SubAgents.ChildFailure<OverQuota>>) =>
      failed.error._tag === "OverQuota" ? failed.error.limit : undefined
    expect(limitOf).type.toBe<
      (failed: SubAgents.SubAgentFailed<SubAgents.ChildFailure<OverQuota>>) => number | undefined
    >()
  })

  test("its schema decodes to the class", () => {
    expect<Schema.Schema.Type<typeof SubAgents.SubAgentFailed>>().type.toBe<SubAgents.SubAgentFailed>()
  })
})
