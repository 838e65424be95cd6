/**
 * The memory checkpointer takes a run's checkpoints deferred: the array of
 * the whole encoded thread is built when the thread is loaded, not at every
 * step (`internal/deferredSave.ts`). What is stored must be what an eager save
 * stores, at every checkpoint, and a checkpointer whose `save` was replaced
 * must get every checkpoint whole.
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentState, Checkpointer, Middleware } from "@stepwise-agent/core"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Effect, FastCheck, Layer, Option } from "effect"

/** `steps` echo calls (each of `calls + 1` calls), then an answer. */
const script = (steps: ReadonlyArray<number>) => [
  ...steps.map((calls, step) =>
    ScriptedModel.toolCalls(
      Array.from({ length: calls + 1 }, (_, i) => ({ name: "echo", params: { text: `${step}.${i}` } }))
    )
  ),
  ScriptedModel.text("done")
]

describe("deferred saves of the memory checkpointer", () => {
  it.effect.prop(
    "every checkpoint loads as the eager encoding of the thread at that point, run after run",
    {
      runs: FastCheck.array(FastCheck.array(FastCheck.nat({ max: 2 }), { maxLength: 4 }), {
        minLength: 1,
        maxLength: 3
      }),
      history: FastCheck.boolean()
    },
    ({ history, runs }) =>
      Effect.gen(function*() {
        const memory = yield* Checkpointer.makeMemory
        // what the thread holds at each tool step, read back by a beforeModel hook of the next step
        const seen: Array<{ readonly stored: unknown; readonly expected: unknown }> = []
        const check = Middleware.make({
          name: "check",
          beforeModel: ({ messages, step, threadId }) =>
            Effect.map(memory.load(threadId), (stored) => {
              // after a tool step of this run (its checkpoint); before the first, the thread lacks the run's input
              if (step > 0) {
                seen.push({ stored: Option.getOrThrow(stored).messages, expected: AgentState.encodeMessages(messages) })
              }
            })
        })
        const agent = yield* Agent.make({
          toolkit: Fixtures.echoToolkit,
          middleware: history ? [check] : [],
          maxSteps: 10
        }).pipe(
          Effect.provide(Layer.mergeAll(
            Fixtures.echoLayer,
            Layer.succeed(Checkpointer.Checkpointer, memory),
            ScriptedModel.layer(runs.flatMap(script))
          ))
        )
        for (const [i, _] of runs.entries()) {
          const result = yield* agent.run(`run ${i}`, { threadId: "t" })
          const stored = Option.getOrThrow(yield* memory.load("t"))
          assert.deepStrictEqual(stored.messages, AgentState.encodeMessages(result.state.messages))
          // loaded twice, the same array: nothing rebuilds it
          assert.strictEqual(Option.getOrThrow(yield* memory.load("t")).messages, stored.messages)
        }
        // within a run, each tool step's checkpoint, loaded before the next model call
        assert.strictEqual(seen.length, history ? runs.flat().length : 0)
        for (const { expected, stored } of seen) assert.deepStrictEqual(stored, expected)
      }),
    { fastCheck: { numRuns: 40 } }
  )

  it.effect("a memory checkpointer whose save is replaced gets every checkpoint whole", () =>
    Effect.gen(function*() {
      const memory = yield* Checkpointer.makeMemory
      const saved: Array<ReadonlyArray<unknown>> = []
      const logging = Checkpointer.Checkpointer.of({
        ...memory,
        save: (threadId, checkpoint) => {
          saved.push(checkpoint.messages)
          return memory.save(threadId, checkpoint)
        }
      })
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, maxSteps: 10 }).pipe(
        Effect.provide(Layer.mergeAll(
          Fixtures.echoLayer,
          Layer.succeed(Checkpointer.Checkpointer, logging),
          ScriptedModel.layer(script([0, 1]))
        ))
      )
      const result = yield* agent.run("go", { threadId: "t" })
      // two tool steps and the end: three checkpoints, each with the messages of its point of the run
      assert.deepStrictEqual(saved.map((messages) => messages.length), [3, 5, 6])
      assert.deepStrictEqual(saved.at(-1), AgentState.encodeMessages(result.state.messages))
      assert.deepStrictEqual(Option.getOrThrow(yield* memory.load("t")).messages, saved.at(-1))
    }))
})
