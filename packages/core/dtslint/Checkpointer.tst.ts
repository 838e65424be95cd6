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
      (threadId: string, checkpoint: Checkpointer.DeferredCheckpoint) => Effect.Effect<void, AgentError.CheckpointError>
    >()
    expect(Checkpointer.make({ load, append, delete: remove })).type.toBeAssignableTo<
      Checkpointer.Checkpointer.Service
    >()
    expect(Checkpointer.make({ load, save, append, delete: remove })).type.toBeAssignableTo<
      Checkpointer.Checkpointer.Service
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
      (threadId: string, checkpoint: Checkpointer.DeferredCheckpoint) => Effect.Effect<void, AgentError.CheckpointError>
    >()
    expect({ load, save, delete: remove }).type.toBeAssignableTo<Checkpointer.Checkpointer.Service>()
  })
})
