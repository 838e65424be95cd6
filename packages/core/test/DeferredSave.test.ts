/**
 * The checkpointers of this package take a run's checkpoints deferred: the
 * memory checkpointer builds the array of the whole encoded thread when the
 * thread is loaded, the thread log (file system, KeyValueStore) writes the
 * new messages encoded from the decoded thread, never building that array at
 * a step, through their `append`. What is stored must be what an eager save
 * stores, at every checkpoint; a wrapper that spreads a checkpointer keeps
 * its `append` in plain sight, and one without `append` gets every
 * checkpoint whole.
 */
import { Prompt } from "@effect/ai"
import { FileSystem, KeyValueStore } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentState, Checkpointer, Middleware } from "@stepwise-agent/core"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Effect, FastCheck, Layer, Option, type Scope } from "effect"
import * as os from "node:os"

/** `steps` echo calls (each of `calls + 1` calls), then an answer. */
const script = (steps: ReadonlyArray<number>) => [
  ...steps.map((calls, step) =>
    ScriptedModel.toolCalls(
      Array.from({ length: calls + 1 }, (_, i) => ({ name: "echo", params: { text: `${step}.${i}` } }))
    )
  ),
  ScriptedModel.text("done")
]

/** A store: `open` makes a checkpointer instance on the same storage each time (a fresh process, as far as it knows). */
type Store = Effect.Effect<Checkpointer.Checkpointer.Service, unknown, FileSystem.FileSystem | NodeContext.NodeContext>

const stores: ReadonlyArray<
  readonly [string, Effect.Effect<Store, unknown, FileSystem.FileSystem | Scope.Scope>]
> = [
  ["memory", Effect.map(Checkpointer.makeMemory, (checkpointer): Store => Effect.succeed(checkpointer))],
  [
    "file system",
    Effect.map(
      Effect.flatMap(
        FileSystem.FileSystem,
        (fs) => fs.makeTempDirectoryScoped({ directory: os.tmpdir(), prefix: "stepwise-deferred-" })
      ),
      (directory): Store => Checkpointer.makeFileSystem(directory)
    )
  ],
  [
    "KeyValueStore (memory)",
    Effect.map(
      Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory),
      (store): Store => Checkpointer.makeKeyValueStore().pipe(Effect.provideService(KeyValueStore.KeyValueStore, store))
    )
  ]
]

/** Replaces the text of the thread's first message at step `at` of every run: a history rewrite. */
const rewriteAt = (at: number) =>
  Middleware.make({
    name: "rewrite",
    beforeModel: ({ messages, step }) =>
      step !== at || messages.length === 0
        ? Effect.void
        : Effect.succeed({
          messages: [
            Prompt.makeMessage("user", {
              content: [Prompt.makePart("text", { text: `rewritten at ${messages.length}` })]
            }),
            ...messages.slice(1)
          ]
        })
  })

describe("deferred saves", () => {
  for (const [name, makeStore] of stores) {
    it.scoped.prop(
      `${name}: every checkpoint loads as the eager encoding of the thread at that point, run after run`,
      {
        runs: FastCheck.array(FastCheck.array(FastCheck.nat({ max: 2 }), { maxLength: 4 }), {
          minLength: 1,
          maxLength: 3
        }),
        history: FastCheck.boolean(),
        rewrite: FastCheck.option(FastCheck.nat({ max: 3 }), { nil: undefined })
      },
      ({ history, rewrite, runs }) =>
        Effect.gen(function*() {
          const open = yield* makeStore
          const checkpointer = yield* open
          // what the thread holds at each tool step, read back by a beforeModel hook of the next step
          const seen: Array<{ readonly stored: unknown; readonly expected: unknown }> = []
          const check = Middleware.make({
            name: "check",
            beforeModel: ({ messages, step, threadId }) =>
              Effect.map(checkpointer.load(threadId), (stored) => {
                // after a tool step of this run (its checkpoint); before the first, the thread lacks the run's input
                if (step > 0) {
                  seen.push({
                    stored: Option.getOrThrow(stored).messages,
                    expected: AgentState.encodeMessages(messages)
                  })
                }
              })
          })
          const agent = yield* Agent.make({
            toolkit: Fixtures.echoToolkit,
            // the check first: it sees the checkpoint before a rewrite of this step
            middleware: [...(history ? [check] : []), ...(rewrite === undefined ? [] : [rewriteAt(rewrite)])],
            maxSteps: 10
          }).pipe(
            Effect.provide(Layer.mergeAll(
              Fixtures.echoLayer,
              Layer.succeed(Checkpointer.Checkpointer, checkpointer),
              ScriptedModel.layer(runs.flatMap(script))
            ))
          )
          for (const [i, _] of runs.entries()) {
            const result = yield* agent.run(`run ${i}`, { threadId: "t" })
            const expected = AgentState.encodeMessages(result.state.messages)
            const stored = Option.getOrThrow(yield* checkpointer.load("t"))
            assert.deepStrictEqual(stored.messages, expected)
            // loaded twice, the same array: nothing rebuilds it
            assert.strictEqual(Option.getOrThrow(yield* checkpointer.load("t")).messages, stored.messages)
            // and what another instance (a new process) reads from the store
            assert.deepStrictEqual(Option.getOrThrow(yield* (yield* open).load("t")).messages, expected)
          }
          // within a run, each tool step's checkpoint, loaded before the next model call
          assert.strictEqual(seen.length, history ? runs.flat().length : 0)
          for (const { expected, stored } of seen) assert.deepStrictEqual(stored, expected)
        }).pipe(Effect.provide(NodeContext.layer)),
      { fastCheck: { numRuns: name === "file system" ? 20 : 40 } }
    )
  }

  it.effect("a run on the KeyValueStore checkpointer builds no whole encoded thread at a step", () =>
    Effect.gen(function*() {
      const inner = yield* Checkpointer.makeKeyValueStore().pipe(Effect.provide(KeyValueStore.layerMemory))
      assert.isDefined(inner.append)
      // counts the appends, and the calls that build a save's whole encoded thread
      const counts = { deferred: 0, built: 0 }
      const spied: Checkpointer.Checkpointer.Service = {
        ...inner,
        append: (threadId, deferred) => {
          counts.deferred++
          const counted: Checkpointer.DeferredCheckpoint = Object.create(deferred, {
            messages: {
              value: () => {
                counts.built++
                return deferred.messages()
              }
            }
          })
          return inner.append!(threadId, counted)
        }
      }
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, maxSteps: 10 }).pipe(
        Effect.provide(Layer.mergeAll(
          Fixtures.echoLayer,
          Layer.succeed(Checkpointer.Checkpointer, spied),
          ScriptedModel.layer([...script([0, 1, 2]), ...script([0, 0])])
        ))
      )
      yield* agent.run("first", { threadId: "t" })
      const second = yield* agent.run("second", { threadId: "t" })
      // three tool steps and the end, then two and the end
      assert.strictEqual(counts.deferred, 7)
      // no save builds the thread whole (the first writes a new log from the decoded messages, the others
      // append theirs); the second run's load reads the first run's last checkpoint, built once
      assert.strictEqual(counts.built, 1)
      assert.deepStrictEqual(
        Option.getOrThrow(yield* inner.load("t")).messages,
        AgentState.encodeMessages(second.state.messages)
      )
    }))

  it.effect("a wrapper that spreads a checkpointer and replaces save keeps its append", () =>
    Effect.gen(function*() {
      const memory = yield* Checkpointer.makeMemory
      const saved: Array<number> = []
      const appended: Array<number> = []
      const logging: Checkpointer.Checkpointer.Service = {
        ...memory,
        save: (threadId, checkpoint) => {
          saved.push(checkpoint.messages.length)
          return memory.save(threadId, checkpoint)
        }
      }
      // the capability the spread kept is a member, in plain sight
      assert.strictEqual(logging.append, memory.append)
      const counting: Checkpointer.Checkpointer.Service = {
        ...logging,
        append: (threadId, checkpoint) => {
          appended.push(checkpoint.length)
          return memory.append!(threadId, checkpoint)
        }
      }
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, maxSteps: 10 }).pipe(
        Effect.provide(Layer.mergeAll(
          Fixtures.echoLayer,
          Layer.succeed(Checkpointer.Checkpointer, counting),
          ScriptedModel.layer(script([0, 1]))
        ))
      )
      const result = yield* agent.run("go", { threadId: "t" })
      // two tool steps and the end: three checkpoints, each through append
      assert.deepStrictEqual(appended, [3, 5, 6])
      assert.deepStrictEqual(saved, [])
      assert.deepStrictEqual(
        Option.getOrThrow(yield* memory.load("t")).messages,
        AgentState.encodeMessages(result.state.messages)
      )
    }))

  it.effect("a checkpointer without append gets every checkpoint whole through save", () =>
    Effect.gen(function*() {
      const memory = yield* Checkpointer.makeMemory
      const saved: Array<ReadonlyArray<unknown>> = []
      const logging: Checkpointer.Checkpointer.Service = {
        ...memory,
        append: undefined,
        save: (threadId, checkpoint) => {
          saved.push(checkpoint.messages)
          return memory.save(threadId, checkpoint)
        }
      }
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
