import type { Agent, AgentState, Wait } from "@stepwise-agent/core"
import { AgentWorkflow } from "@stepwise-agent/workflow"
import type { Effect, Option } from "effect"
import { describe, expect, test } from "tstyche"

type Support = Agent.Service<
  AgentState.AgentState,
  never,
  never,
  Wait.Declared<"confirm", { readonly question: string }, boolean>
>

describe("AgentWorkflow.make", () => {
  test("made for an agent type, its status and resume are typed by the agent's waits", () => {
    const Support = AgentWorkflow.make<Support>({
      name: "support",
      version: 1,
      decisionTimeout: {
        after: "1 day",
        decide: (wait) => {
          expect(wait.value).type.toBe<{ readonly question: string }>()
          return false
        }
      }
    })
    type Status = Effect.Effect.Success<ReturnType<typeof Support.status>>
    expect<Status["pending"]>().type.toBe<
      Option.Option<
        { readonly middleware: "confirm"; readonly value: { readonly question: string }; readonly key: string }
      >
    >()
    expect(Support.resume).type.toBeCallableWith("run-1", true, { principal: "staff:a" })
    expect(Support.resume).type.not.toBeCallableWith("run-1", "yes", { principal: "staff:a" })
  })

  test("without an agent type, any wait and any decision", () => {
    const Any = AgentWorkflow.make({ name: "any", version: 1 })
    expect(Any.resume).type.toBeCallableWith("run-1", "yes", { principal: "staff:a" })
  })
})
