import type { AiError } from "@effect/ai"
import type { Agent, AgentError, AgentEvent, AgentResult, AgentState, Fork, Wait } from "@stepwise-agent/core"
import { RunRecord } from "@stepwise-agent/core"
import type { Effect, Stream } from "effect"
import { describe, expect, test } from "tstyche"

interface Slice extends AgentState.AgentState {
  readonly count: number
}
class Oops {
  readonly _tag = "Oops"
}
declare const agent: Agent.Service<Slice, Oops, { readonly n: number }, Wait.Any>
declare const record: RunRecord.RunRecord

describe("Agent.replay", () => {
  test("gives the agent's result and fails with a divergence, a stop, a record error or a run error", () => {
    expect(agent.replay(record)).type.toBe<
      Effect.Effect<
        AgentResult.AgentResult<Slice, { readonly n: number }, Wait.Any>,
        | Oops
        | AgentError.AgentError
        | AiError.AiError
        | RunRecord.ReplayDiverged
        | RunRecord.ReplayStopped
        | RunRecord.RunRecordError
      >
    >()
  })

  test("replayStream gives the agent's events and fails as replay does", () => {
    expect(agent.replayStream(record)).type.toBe<
      Stream.Stream<
        AgentEvent.AgentEvent<Slice, { readonly n: number }, Wait.Any>,
        | Oops
        | AgentError.AgentError
        | AiError.AiError
        | RunRecord.ReplayDiverged
        | RunRecord.ReplayStopped
        | RunRecord.RunRecordError
      >
    >()
  })

  test("record keeps the agent's types", () => {
    expect(RunRecord.record(agent, "hi", { threadId: "t" })).type.toBe<
      Effect.Effect<
        {
          readonly result: AgentResult.AgentResult<Slice, { readonly n: number }, Wait.Any>
          readonly record: RunRecord.RunRecord
        },
        Oops | AgentError.AgentError | AiError.AiError
      >
    >()
  })

  test("recordResume takes the agent's decision type and keeps its types", () => {
    const confirming = null as unknown as Agent.Service<Slice, Oops, never, Wait.Declared<"confirm", string, boolean>>
    expect(RunRecord.recordResume(confirming, "t", true)).type.toBe<
      Effect.Effect<
        {
          readonly result: AgentResult.AgentResult<Slice, never, Wait.Declared<"confirm", string, boolean>>
          readonly record: RunRecord.RunRecord
        },
        Oops | AgentError.AgentError | AiError.AiError
      >
    >()
    expect(RunRecord.recordResume).type.not.toBeCallableWith(confirming, "t", "yes")
  })

  test("a divergence names one of the fields", () => {
    expect<RunRecord.ReplayDiverged["field"]>().type.toBe<
      "input" | "systemPrompt" | "messages" | "tools" | "toolChoice" | "steps" | "result" | "decision"
    >()
  })
})

describe("Agent.fork", () => {
  test("takes a thread or a record, and the decision of the agent's waits", () => {
    expect(agent.fork("t1", { to: "t2", at: 0 })).type.toBe<
      Effect.Effect<
        AgentResult.AgentResult<Slice, { readonly n: number }, Wait.Any>,
        Oops | AgentError.AgentError | AiError.AiError | Fork.ForkError
      >
    >()
    expect(agent.fork(record, { to: "t2", at: 1, edit: { _tag: "Message", message: "hi" } })).type.not.toRaiseError()
    expect(agent.fork("t1", { to: "t2" })).type.toRaiseError()
  })
})
