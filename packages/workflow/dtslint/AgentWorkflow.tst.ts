import type { AiError } from "@effect/ai"
import type { WorkflowEngine } from "@effect/workflow"
import type { AgentState, RunRecord, Wait } from "@stepwise-agent/core"
import { Agent, AgentError } from "@stepwise-agent/core"
import type { RecordStore, RunStore } from "@stepwise-agent/workflow"
import { AgentWorkflow } from "@stepwise-agent/workflow"
import type { Context, Effect, Option, ParseResult, Stream } from "effect"
import { Schema } from "effect"
import { describe, expect, test } from "tstyche"

type Support = Agent.Service<
  AgentState.AgentState,
  never,
  never,
  Wait.Declared<"confirm", { readonly question: string }, boolean>
>

interface Counted extends AgentState.AgentState {
  readonly counted: number
}

type Answering = Agent.Service<Counted, never, { readonly answer: number }, never>

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

  test("its status and await keep the agent's state and structured output", () => {
    const _Answers = AgentWorkflow.make<Answering>({ name: "answers", version: 1 })
    type Status = Effect.Effect.Success<ReturnType<typeof _Answers.status>>
    expect<Status>().type.toBe<AgentWorkflow.RunStatus<Answering>>()
    expect<Status["outcome"]>().type.toBe<Option.Option<AgentWorkflow.Outcome<{ readonly answer: number }>>>()
    expect<AgentWorkflow.Outcome<{ readonly answer: number }>["output"]>().type.toBe<
      Option.Option<{ readonly answer: number }>
    >()
    expect<Status["threadState"]>().type.toBe<Option.Option<Counted>>()
    expect<Effect.Effect.Success<ReturnType<typeof _Answers.await>>>().type.toBe<AgentWorkflow.RunStatus<Answering>>()
    expect<Stream.Stream.Success<ReturnType<typeof _Answers.watch>>>().type.toBe<
      Agent.RunEvent<Counted, { readonly answer: number }, never>
    >()
    // a failure as its journal keeps it: the agent's own errors whole, any other by its tag
    expect<Status["failure"]>().type.toBe<Option.Option<AgentWorkflow.AgentRunFailed | AgentWorkflow.JournalCorrupt>>()
    expect<AgentWorkflow.AgentRunFailed["error"]>().type.toBeAssignableFrom(
      new AgentError.InvalidResume({ threadId: "t", middleware: "m", reason: "r" })
    )
  })

  test("the agent type comes from an agent's own tag or Agent.AgentOf", () => {
    class _SupportAgent extends Agent.Tag("app/SupportAgent")<_SupportAgent, Answering>() {}
    const _Tagged = AgentWorkflow.make<Context.Tag.Service<typeof _SupportAgent>>({ name: "tagged", version: 1 })
    expect<Effect.Effect.Success<ReturnType<typeof _Tagged.status>>>().type.toBe<AgentWorkflow.RunStatus<Answering>>()
    expect<AgentWorkflow.OutputOf<Agent.AgentOf<readonly [], { readonly n: number }>>>().type.toBe<
      { readonly n: number }
    >()
    expect<AgentWorkflow.StateOf<Answering>>().type.toBe<Counted>()
  })

  test("without an agent type, any wait and any decision", () => {
    const Any = AgentWorkflow.make({ name: "any", version: 1 })
    expect(Any.resume).type.toBeCallableWith("run-1", "yes", { principal: "staff:a" })
    type Status = Effect.Effect.Success<ReturnType<typeof Any.status>>
    expect<Status["outcome"]>().type.toBe<Option.Option<AgentWorkflow.Outcome<unknown>>>()
    expect<Status["threadState"]>().type.toBe<Option.Option<AgentState.AgentState>>()
  })
})

declare const record: RunRecord.RunRecord
const Forks = AgentWorkflow.make({ name: "forks", version: 1 })

describe("AgentWorkflow.record and fork", () => {
  test("record reads a run's record from the RecordStore", () => {
    expect<Effect.Effect.Success<ReturnType<typeof Forks.record>>>().type.toBe<RunRecord.RunRecord>()
    expect<Effect.Effect.Context<ReturnType<typeof Forks.record>>>().type.toBe<
      RunStore.RunStore | RecordStore.RecordStore
    >()
  })
  test("a fork of a run id needs the RecordStore; a fork of a record does not; neither takes a decision", () => {
    expect(Forks.fork("run-1", { to: "t2", at: 1 })).type.toBe<
      Effect.Effect<
        string,
        AgentWorkflow.ForkFailure | RecordStore.RecordNotFound | RecordStore.RecordStoreError,
        WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent | RecordStore.RecordStore
      >
    >()
    expect(Forks.fork(record, { to: "t2", at: 1 })).type.toBe<
      Effect.Effect<string, AgentWorkflow.ForkFailure, WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent>
    >()
    expect(Forks.fork).type.not.toBeCallableWith(record, {
      to: "t2",
      at: 1,
      edit: { _tag: "Decision", decision: true }
    })
  })
})

describe("InvalidDecision", () => {
  class OverQuota extends Schema.TaggedError<OverQuota>()("OverQuota", { limit: Schema.Number }) {}
  type Quota = Agent.Service<AgentState.AgentState, OverQuota, never, Wait.Declared<"confirm", string, boolean>>

  test("its error is what a refused decision fails with, not unknown", () => {
    expect<AgentWorkflow.InvalidDecision["error"]>().type.toBe<AgentWorkflow.DecisionFailure>()
    expect<AgentWorkflow.DecisionFailure<OverQuota>>().type.toBe<
      | OverQuota
      | Exclude<AgentError.AgentError, AgentError.ThreadStateError | AgentError.CheckpointError>
      | AiError.AiError
      | ParseResult.ParseError
    >()
  })

  test("resume of a workflow typed by its agent carries the agent's errors in InvalidDecision", () => {
    const _Quotas = AgentWorkflow.make<Quota>({ name: "quotas", version: 1 })
    type Refused = Extract<Effect.Effect.Error<ReturnType<typeof _Quotas.resume>>, { readonly _tag: "InvalidDecision" }>
    expect<Refused>().type.toBe<AgentWorkflow.InvalidDecision<AgentWorkflow.DecisionFailure<OverQuota>>>()
    const limitOf = (refused: Refused) => refused.error._tag === "OverQuota" ? refused.error.limit : undefined
    expect(limitOf).type.toBe<(refused: Refused) => number | undefined>()
  })
})
