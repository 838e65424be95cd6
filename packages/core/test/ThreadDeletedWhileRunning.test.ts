/**
 * A run saves only over the thread it loaded: a run still going when its
 * thread is deleted (by another agent on the same store: another process) —
 * or deleted and made again — writes nothing and fails with `CheckpointError`
 * (`conflict` set), instead of writing the deleted thread back. In one agent,
 * `deleteThread` waits for the thread's run, then deletes.
 */
import { Tool, Toolkit } from "@effect/ai"
import { FileSystem, KeyValueStore } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, Checkpointer } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Deferred, Effect, Exit, FastCheck, Fiber, Layer, Option, Schema } from "effect"
import * as os from "node:os"

const Wait = Tool.make("wait", { parameters: {}, success: Schema.String })
const Waiting = Toolkit.make(Wait)

/** Two checkpointers on one store, as two processes have: the same one for the memory store, which has no other. */
const stores = [
  ["memory", Effect.map(Checkpointer.makeMemory, (store) => [store, store] as const)],
  [
    "KeyValueStore",
    Effect.flatMap(KeyValueStore.KeyValueStore, (kv) =>
      Effect.all([
        Checkpointer.makeKeyValueStore().pipe(Effect.provideService(KeyValueStore.KeyValueStore, kv)),
        Checkpointer.makeKeyValueStore().pipe(Effect.provideService(KeyValueStore.KeyValueStore, kv))
      ])).pipe(Effect.provide(KeyValueStore.layerMemory))
  ],
  [
    "file system",
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* fs.makeTempDirectoryScoped({ directory: os.tmpdir(), prefix: "stepwise-deleted-" })
      return [yield* Checkpointer.makeFileSystem(directory), yield* Checkpointer.makeFileSystem(directory)] as const
    })
  ]
] as const

/**
 * An agent whose run asks for `wait` twice, then answers "done": the first call answers at once (the run saves
 * the thread after it), the second signals `started` and waits for `release`. On checkpointer `store`.
 */
const waitingAgent = (
  store: Checkpointer.Service,
  started: Deferred.Deferred<void>,
  release: Deferred.Deferred<void>
) => {
  let calls = 0
  return Agent.make({ toolkit: Waiting }).pipe(
    Effect.provide(Layer.merge(
      ScriptedModel.layer([
        ScriptedModel.toolCalls([{ name: "wait", params: {} }]),
        ScriptedModel.toolCalls([{ name: "wait", params: {} }]),
        ScriptedModel.text("done")
      ]),
      Waiting.toLayer({
        wait: () =>
          ++calls === 1
            ? Effect.succeed("ok")
            : Deferred.succeed(started, undefined).pipe(Effect.zipRight(Deferred.await(release)), Effect.as("ok"))
      })
    )),
    Effect.provideService(Checkpointer.Checkpointer, store)
  )
}

/** Another agent (another process) on checkpointer `store`, answering `reply`. */
const otherAgent = (store: Checkpointer.Service, reply: string) =>
  Agent.make({ toolkit: Waiting }).pipe(
    Effect.provide(Layer.merge(
      ScriptedModel.layer([ScriptedModel.text(reply)]),
      Waiting.toLayer({ wait: () => Effect.succeed("unused") })
    )),
    Effect.provideService(Checkpointer.Checkpointer, store)
  )

const failureOf = (exit: Exit.Exit<unknown, unknown>): AgentError.CheckpointError => {
  assert.isTrue(Exit.isFailure(exit), "the run fails")
  const error = Exit.isFailure(exit) ?
    Option.getOrThrow(
      Exit.causeOption(exit).pipe(
        Option.flatMap((cause) => Option.fromNullable(cause._tag === "Fail" ? cause.error : undefined))
      )
    ) :
    undefined
  assert.instanceOf(error, AgentError.CheckpointError)
  return error as AgentError.CheckpointError
}

const userTexts = (checkpoint: Checkpointer.Checkpoint) =>
  checkpoint.messages.flatMap((message: any) =>
    message.role === "user" ? message.content.map((part: any) => typeof part === "string" ? part : part.text) : []
  )

describe("a run whose thread is deleted while it runs", () => {
  for (const [name, open] of stores) {
    it.scoped(
      `${name}: the thread stays deleted, and the run fails with CheckpointError (ThreadDeleted) naming what was not saved`,
      () =>
        Effect.gen(function*() {
          const [mine, theirs] = yield* open
          const started = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const agent = yield* waitingAgent(mine, started, release)
          const other = yield* otherAgent(theirs, "unused")
          const run = yield* Effect.fork(agent.run("first", { threadId: "t" }))
          yield* Deferred.await(started)
          assert.isTrue(Option.isSome(yield* theirs.load("t")), "the run saved its thread before the waiting call")
          yield* other.deleteThread("t")
          yield* Deferred.succeed(release, undefined)
          const error = failureOf(yield* Fiber.await(run))
          assert.strictEqual(error.conflict, "ThreadDeleted")
          assert.strictEqual(error.threadId, "t")
          assert.strictEqual(error.operation, "save")
          assert.include(error.message, "deleted while the run ran")
          assert.include(error.message, "was not saved")
          assert.isTrue(Option.isNone(yield* theirs.load("t")), "the thread stays deleted")
          assert.isTrue(Option.isNone(yield* mine.load("t")), "the thread stays deleted")
        }).pipe(Effect.provide(NodeContext.layer))
    )

    it.scoped(
      `${name}: a thread deleted and made again by another run is not overwritten; the old run fails (Superseded)`,
      () =>
        Effect.gen(function*() {
          const [mine, theirs] = yield* open
          const started = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const agent = yield* waitingAgent(mine, started, release)
          const other = yield* otherAgent(theirs, "fresh")
          const run = yield* Effect.fork(agent.run("first", { threadId: "t" }))
          yield* Deferred.await(started)
          const old = Option.getOrThrow(yield* theirs.load("t")).incarnation
          yield* other.deleteThread("t")
          yield* other.run("second", { threadId: "t" })
          const made = Option.getOrThrow(yield* theirs.load("t"))
          yield* Deferred.succeed(release, undefined)
          const error = failureOf(yield* Fiber.await(run))
          assert.strictEqual(error.conflict, "Superseded")
          assert.include(error.message, "was not saved")
          const stored = Option.getOrThrow(yield* mine.load("t"))
          assert.deepStrictEqual(userTexts(stored), ["second"], "the new thread's own history")
          assert.strictEqual(stored.incarnation, made.incarnation)
          assert.notStrictEqual(stored.incarnation, old)
        }).pipe(Effect.provide(NodeContext.layer))
    )
  }

  for (const [name, open] of stores) {
    it.scoped(`${name}: an expectation of no known form (from JavaScript) fails the save, typed, and writes nothing`, () =>
      Effect.gen(function*() {
        const [store] = yield* open
        const checkpoint: Checkpointer.Checkpoint = {
          version: 1,
          threadId: "t",
          messages: [],
          slices: {},
          incarnation: "a"
        }
        for (const expected of ["gone", 7, null, ["absent"], { incarnation: 7 }]) {
          const error = yield* Effect.flip(store.save("t", checkpoint, { expected } as any))
          assert.strictEqual(error._tag, "CheckpointError")
          assert.include(error.reason, "options.expected must be")
          assert.isUndefined(error.conflict)
        }
        assert.isTrue(Option.isNone(yield* store.load("t")))
      }).pipe(Effect.provide(NodeContext.layer)))
  }

  it.scoped("a store of your own (Checkpointer.make) gets each save's expectation: none for a new thread, then its incarnation", () =>
    Effect.gen(function*() {
      const inner = yield* Checkpointer.makeMemory
      const seen: Array<Checkpointer.Expected | undefined> = []
      const store = Checkpointer.make({
        load: inner.load,
        delete: inner.delete,
        save: (threadId, checkpoint, options) => {
          seen.push(options?.expected)
          return inner.save(threadId, checkpoint, options)
        }
      })
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      yield* Deferred.succeed(release, undefined)
      const agent = yield* waitingAgent(store, started, release)
      yield* agent.run("first", { threadId: "t" })
      const incarnation = Option.getOrThrow(yield* store.load("t")).incarnation
      assert.isString(incarnation)
      assert.deepStrictEqual(seen, ["absent", { incarnation }, { incarnation }])
    }))

  it.scoped("in one agent, deleteThread waits for the thread's run, then deletes: the thread stays deleted", () =>
    Effect.gen(function*() {
      const store = yield* Checkpointer.makeMemory
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const agent = yield* waitingAgent(store, started, release)
      const run = yield* Effect.fork(agent.run("first", { threadId: "t" }))
      yield* Deferred.await(started)
      const deleting = yield* Effect.fork(agent.deleteThread("t"))
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual((yield* Fiber.join(run))._tag, "Completed")
      yield* Fiber.join(deleting)
      assert.isTrue(Option.isNone(yield* store.load("t")))
    }))
})

/** One step of an interleaving: a run starts (loads), a run saves one more message, or the thread is deleted. */
type Op =
  | { readonly _tag: "Start"; readonly run: number }
  | { readonly _tag: "Save"; readonly run: number }
  | { readonly _tag: "Delete" }

const op: FastCheck.Arbitrary<Op> = FastCheck.oneof(
  FastCheck.record({ _tag: FastCheck.constant("Start" as const), run: FastCheck.integer({ min: 0, max: 3 }) }),
  FastCheck.record({ _tag: FastCheck.constant("Save" as const), run: FastCheck.integer({ min: 0, max: 3 }) }),
  FastCheck.record({ _tag: FastCheck.constant("Delete" as const) })
)

interface Run {
  readonly incarnation: string
  readonly loaded: ReadonlyArray<unknown>
  readonly own: Array<unknown>
  expected: Checkpointer.Expected
}

describe("conditional saves over interleavings of runs, deletions and re-creations", () => {
  for (const [name, open] of stores) {
    it.scoped.prop(
      `${name}: the stored thread is always one live incarnation's own history, and a save fails exactly when its thread is gone`,
      [FastCheck.array(op, { maxLength: 24 })],
      ([ops]) =>
        Effect.gen(function*() {
          const [mine, theirs] = yield* open
          const runs = new Map<number, Run>()
          const dead = new Set<string>()
          let made = 0
          for (const [i, step] of ops.entries()) {
            // the runs alternate between the two checkpointers, as runs of two processes do
            const store = i % 2 === 0 ? mine : theirs
            const stored = yield* store.load("t")
            if (step._tag === "Delete") {
              if (Option.isSome(stored)) dead.add(stored.value.incarnation!)
              yield* store.delete("t")
              continue
            }
            if (step._tag === "Start") {
              // as a run loads: a new thread gets a new incarnation, and its first save expects none stored
              runs.set(
                step.run,
                Option.isNone(stored)
                  ? { incarnation: `i${made++}`, loaded: [], own: [], expected: "absent" }
                  : {
                    incarnation: stored.value.incarnation!,
                    loaded: stored.value.messages,
                    own: [],
                    expected: { incarnation: stored.value.incarnation }
                  }
              )
              continue
            }
            const run = runs.get(step.run)
            if (run === undefined) continue
            const message = { incarnation: run.incarnation, n: run.own.length }
            const checkpoint: Checkpointer.Checkpoint = {
              version: 1,
              threadId: "t",
              messages: [...run.loaded, ...run.own, message],
              slices: {},
              incarnation: run.incarnation
            }
            const lands = !dead.has(run.incarnation) && (Option.isSome(stored)
              ? stored.value.incarnation === run.incarnation
              : run.expected === "absent")
            const saved = yield* Effect.either(store.save("t", checkpoint, { expected: run.expected }))
            assert.strictEqual(saved._tag === "Right", lands, `save ${i} of run ${step.run}`)
            if (saved._tag === "Right") {
              run.own.push(message)
              run.expected = { incarnation: run.incarnation }
            } else {
              assert.strictEqual(saved.left.conflict, Option.isNone(stored) ? "ThreadDeleted" : "Superseded")
              runs.delete(step.run)
            }
            const now = yield* theirs.load("t")
            if (Option.isSome(now)) {
              assert.isFalse(dead.has(now.value.incarnation!), "a deleted incarnation never comes back")
              for (const stored of now.value.messages as ReadonlyArray<{ readonly incarnation: string }>) {
                assert.strictEqual(stored.incarnation, now.value.incarnation, "one incarnation's own history")
              }
            }
          }
        }).pipe(Effect.provide(NodeContext.layer)),
      { fastCheck: { numRuns: 40 } }
    )
  }
})
