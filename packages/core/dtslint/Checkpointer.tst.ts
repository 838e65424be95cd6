import { type AgentError, Checkpointer } from "@stepwise-agent/core"
import { Effect, Option } from "effect"
import { describe, expect, test } from "tstyche"

const load = () => Effect.succeed(Option.none<Checkpointer.Checkpoint>())
const remove = () => Effect.void
const save = (_: string, __: Checkpointer.Checkpoint) => Effect.void
const append = (_: string, __: Checkpointer.DeferredCheckpoint) => Effect.void

describe("Checkpointer.make", () => {
  test("takes save, append or both, and gives a service whose append is always there", () => {
    expect(Checkpointer.make({ load, save, delete: remove }).append).type.toBe<
      (
        threadId: string,
        checkpoint: Checkpointer.DeferredCheckpoint,
        options?: Checkpointer.SaveOptions | undefined
      ) => Effect.Effect<void, AgentError.CheckpointError>
    >()
    expect(Checkpointer.make({ load, append, delete: remove })).type.toBeAssignableTo<
      Checkpointer.Service
    >()
    expect(Checkpointer.make({ load, save, append, delete: remove })).type.toBeAssignableTo<
      Checkpointer.Service
    >()
  })

  test("needs save or append", () => {
    expect(Checkpointer.make).type.not.toBeCallableWith({ load, delete: remove })
  })
})

describe("Checkpointer.Service", () => {
  test("append is a visible, optional member: a spread keeps it, a service without it is still a service", () => {
    const service = Checkpointer.make({ load, save, delete: remove })
    const logged = { ...service, save }
    expect(logged.append).type.toBe<
      (
        threadId: string,
        checkpoint: Checkpointer.DeferredCheckpoint,
        options?: Checkpointer.SaveOptions | undefined
      ) => Effect.Effect<void, AgentError.CheckpointError>
    >()
    expect({ load, save, delete: remove }).type.toBeAssignableTo<Checkpointer.Service>()
  })
})

describe("Checkpointer.SaveOptions", () => {
  test("a save expects no thread or an incarnation (none for a thread stored before them), nothing else", () => {
    expect<Checkpointer.SaveOptions>().type.toBeAssignableFrom({ expected: "absent" as const })
    expect<Checkpointer.SaveOptions>().type.toBeAssignableFrom({ expected: { incarnation: "5f0c2a9e81d3b746" } })
    expect<Checkpointer.SaveOptions>().type.toBeAssignableFrom({ expected: { incarnation: undefined } })
    expect<Checkpointer.SaveOptions>().type.not.toBeAssignableFrom({ expected: "5f0c2a9e81d3b746" })
  })

  test("a store that takes no options is still a store (it saves blindly)", () => {
    expect({ load, save, append, delete: remove }).type.toBeAssignableTo<Checkpointer.Service>()
  })

  test("checkExpected fails with CheckpointError only", () => {
    expect(
      Checkpointer.checkExpected(
        "t",
        Checkpointer.deferred({ version: 1, threadId: "t", messages: [], slices: {} }),
        Option.none()
      )
    ).type.toBe<Effect.Effect<void, AgentError.CheckpointError>>()
  })
})
