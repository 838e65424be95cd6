import type { Prompt } from "@effect/ai"
import type { AgentError, Checkpointer } from "@stepwise-agent/core"
import { RunJournal } from "@stepwise-agent/core"
import { Effect, Option } from "effect"
import { describe, expect, test } from "tstyche"

declare const journal: RunJournal.Service
declare const call: Prompt.ToolCallPart
declare const modelCall: RunJournal.ModelCall

describe("RunJournal.StepKey", () => {
  test("a key is typed by what its step gives", () => {
    expect(RunJournal.StepKey.Load()).type.toBe<RunJournal.StepKey.Load<Option.Option<Checkpointer.Checkpoint>>>()
    expect(RunJournal.StepKey.Checkpoint({ index: 0 })).type.toBe<RunJournal.StepKey.Checkpoint<void>>()
    expect(RunJournal.StepKey.Inbox({ index: 0 })).type.toBe<RunJournal.StepKey.Inbox<ReadonlyArray<Prompt.Message>>>()
    expect(RunJournal.StepKey.Model({ step: 0 })).type.toBe<RunJournal.StepKey.Model<RunJournal.ModelCall>>()
    expect(RunJournal.StepKey.Tool({ call, occurrence: 1 })).type.toBe<RunJournal.StepKey.Tool<RunJournal.ToolCall>>()
    expect(RunJournal.StepKey.Nested({ path: "task/c1/1", key: RunJournal.StepKey.Model({ step: 0 }) })).type.toBe<
      RunJournal.StepKey.Nested<RunJournal.ModelCall>
    >()
  })

  test("step takes only an effect that gives what the key's step gives", () => {
    expect(journal.step(RunJournal.StepKey.Model({ step: 0 }), Effect.succeed(modelCall))).type.toBe<
      Effect.Effect<RunJournal.ModelCall>
    >()
    expect(journal.step(RunJournal.StepKey.Model({ step: 0 }), Effect.succeed("a reply"))).type.toRaiseError()
    expect(journal.step(RunJournal.StepKey.Tool({ call, occurrence: 1 }), Effect.succeed(modelCall))).type
      .toRaiseError()
  })

  test("stepWitnessed takes and gives what the key's step gives with what was witnessed inside it", () => {
    const witnessed: RunJournal.Witnessed = [{
      _tag: "Hook",
      middleware: "audit",
      hook: "wrapToolCall",
      durationMillis: 1
    }]
    const stepWitnessed = journal.stepWitnessed!
    expect(stepWitnessed(RunJournal.StepKey.Model({ step: 0 }), Effect.succeed([modelCall, witnessed] as const))).type
      .toBe<Effect.Effect<readonly [RunJournal.ModelCall, RunJournal.Witnessed]>>()
    expect(stepWitnessed(RunJournal.StepKey.Model({ step: 0 }), Effect.succeed(modelCall))).type.toRaiseError()
    expect(stepWitnessed(RunJournal.StepKey.Model({ step: 0 }), Effect.succeed(["a reply", witnessed] as const))).type
      .toRaiseError()
  })

  test("a journal matching on _tag reads and gives the kind's values without a cast", () => {
    const replaying = <A, E, R>(key: RunJournal.StepKey<A>, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
      const step = RunJournal.innermost(key)
      switch (step._tag) {
        case "Model":
          expect(step.result.from).type.toBe<(value: A) => RunJournal.ModelCall>()
          return Effect.succeed(step.result.to(modelCall))
        case "Checkpoint":
          return Effect.succeed(step.result.to(undefined))
        default:
          return effect
      }
    }
    expect(replaying).type.not.toBe<never>()
    // without the witness, a value of the kind's type is not the step's
    expect(<A>(_key: RunJournal.StepKey.Model<A>): A => modelCall).type.toRaiseError()
  })
})

declare const confirm: RunJournal.Interrupt<{ readonly question: string }, boolean>

describe("RunJournal.await", () => {
  test("answers with the decision type of the interrupt's wait", () => {
    expect(journal.await(confirm)).type.toBe<Effect.Effect<Option.Option<boolean>, AgentError.InvalidResume>>()
    expect(confirm.value).type.toBe<{ readonly question: string }>()
    expect(RunJournal.decodeDecision(confirm, "posted")).type.toBe<Effect.Effect<boolean, AgentError.InvalidResume>>()
  })

  test("a journal that answers with another type than the wait's decision is a type error", () => {
    expect(RunJournal.RunJournal.of).type.not.toBeCallableWith({
      ...RunJournal.inProcess,
      await: () => Effect.succeed(Option.some("yes"))
    })
    expect(RunJournal.RunJournal.of).type.toBeCallableWith({
      ...RunJournal.inProcess,
      await: <Request, Decision>(interrupt: RunJournal.Interrupt<Request, Decision>) =>
        Effect.map(RunJournal.decodeDecision(interrupt, "yes"), Option.some)
    })
  })

  test("a list of interrupts of any waits holds Interrupt.Any", () => {
    const seen: Array<RunJournal.Interrupt.Any> = []
    const keeping = <Request, Decision>(interrupt: RunJournal.Interrupt<Request, Decision>) => seen.push(interrupt)
    expect(keeping(confirm)).type.toBe<number>()
  })
})
