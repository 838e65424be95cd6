import type { Agent, AgentState, Wait } from "@stepwise-agent/core"
import { Authorizer } from "@stepwise-agent/workflow"
import type { Context, Layer } from "effect"
import { Effect } from "effect"
import { describe, expect, test } from "tstyche"

type Refund = Wait.Declared<"refund", { readonly amount: number }, boolean>
type Confirm = Wait.Declared<"confirm", { readonly question: string }, "yes" | "no">

type Refunds = Agent.Service<AgentState.AgentState, never, unknown, Refund | Confirm>

describe("Authorizer", () => {
  test("made for an agent type, it sees the pending wait's request and the decision typed by the agent's waits", () => {
    const service = Authorizer.make<Refunds>((request) => {
      expect(request.pending).type.toBe<Wait.Interrupt<Refund | Confirm>>()
      expect(request.value).type.toBe<boolean | "yes" | "no">()
      if (request.pending.middleware === "refund") {
        expect(request.pending.value).type.toBe<{ readonly amount: number }>()
      }
      return Effect.void
    })
    expect(service).type.toBe<Context.Tag.Service<Authorizer.Authorizer>>()
    expect(
      Authorizer.layer<Refunds>((request) =>
        request.pending.middleware !== "refund" || request.pending.value.amount < 100
      )
    ).type.toBe<Layer.Layer<Authorizer.Authorizer>>()
  })

  test("a request field the agent's waits do not have is a type error", () => {
    // a decision no wait of the agent takes
    expect(Authorizer.layer<Refunds>((request) => request.value === 42)).type.toRaiseError(
      "This comparison appears to be unintentional"
    )
    // the request of a wait not narrowed to: "confirm" asks no amount
    expect(Authorizer.layer<Refunds>((request) => request.pending.value.amount < 100)).type.toRaiseError(
      "Property 'amount' does not exist"
    )
    expect(Authorizer.make<Refunds>).type.not.toBeCallableWith(
      (request: Authorizer.DecisionRequest<Wait.Declared<"refund", { readonly amount: string }, boolean>>) =>
        Effect.succeed(request.pending.value.amount)
    )
  })

  test("without an agent type, any wait and any decision", () => {
    Authorizer.layer((request) => {
      expect(request.pending).type.toBe<
        { readonly middleware: string; readonly value: unknown; readonly key: string }
      >()
      expect(request.value).type.toBe<unknown>()
      return true
    })
  })
})
