import { SqlClient } from "@effect/sql"
import { assert, describe, layer } from "@effect/vitest"
import { Agent, type AgentError, Checkpointer, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Effect, FastCheck, Layer, Option, Schema } from "effect"
import * as Databases from "./support/databases.js"
import { describePostgres } from "./support/postgres.js"

const checkpoint = (threadId: string, note: string): Checkpointer.Checkpoint => ({
  version: 1,
  threadId,
  messages: [{ role: "user", content: [{ type: "text", text: `hello ${note}` }] }],
  slices: { counter: { modelCalls: "2" }, notes: { last: note } },
  pending: { node: "beforeModel", middleware: "approval", value: { question: "ok?" } },
  run: { step: 3, inputTokens: 10, outputTokens: 5, totalTokens: 15 }
})

let tables = 0
const fresh = () => SqlCheckpointer.make({ table: `checkpoints_${tables++}` })

/** Counts model calls; stored as a string, so the checkpoint must encode and decode it. */
const counter = Middleware.make({
  name: "counter",
  state: { schema: Schema.Struct({ modelCalls: Schema.NumberFromString }), initial: { modelCalls: 0 } },
  beforeModel: ({ state }) => Effect.succeed({ state: { modelCalls: state.modelCalls + 1 } })
})

/** A checkpoint of `incarnation` (none: stored before incarnations) holding `messages` notes. */
const of = (incarnation: string | undefined, ...notes: ReadonlyArray<string>): Checkpointer.Checkpoint => ({
  version: 1,
  threadId: "t",
  messages: notes.map((note) => ({ role: "user", content: [{ type: "text", text: note }] })),
  slices: {},
  ...(incarnation === undefined ? {} : { incarnation })
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

const suite = (name: string, database: Layer.Layer<SqlClient.SqlClient | Databases.TestDatabase>) =>
  layer(database, { timeout: "60 seconds", excludeTestServices: true })(name, (it) => {
    it.effect("round-trips a checkpoint; unknown threads load as none", () =>
      Effect.gen(function*() {
        const store = yield* fresh()
        assert.isTrue(Option.isNone(yield* store.load("t1")))
        yield* store.save("t1", checkpoint("t1", "a"))
        assert.deepStrictEqual(yield* store.load("t1"), Option.some(checkpoint("t1", "a")))
        assert.isTrue(Option.isNone(yield* store.load("t2")))
      }))

    it.effect("has append (Checkpointer.make): an appended checkpoint loads back whole", () =>
      Effect.gen(function*() {
        const store = yield* fresh()
        assert.isFunction(store.append)
        yield* store.append("t1", Checkpointer.deferred(checkpoint("t1", "a")))
        assert.deepStrictEqual(yield* store.load("t1"), Option.some(checkpoint("t1", "a")))
      }))

    it.effect("a save replaces the thread's checkpoint (one row per thread); delete removes it", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const table = `checkpoints_${tables++}`
        const store = yield* SqlCheckpointer.make({ table })
        yield* store.save("t1", checkpoint("t1", "a"))
        yield* store.save("t2", checkpoint("t2", "x"))
        yield* store.save("t1", checkpoint("t1", "b"))
        assert.deepStrictEqual(yield* store.load("t1"), Option.some(checkpoint("t1", "b")))
        const rows = yield* sql<{ readonly n: number | string }>`SELECT COUNT(*) AS n FROM ${sql(table)}`
        assert.strictEqual(Number(rows[0].n), 2)
        yield* store.delete("t1")
        yield* store.delete("never-saved")
        assert.isTrue(Option.isNone(yield* store.load("t1")))
        assert.deepStrictEqual(yield* store.load("t2"), Option.some(checkpoint("t2", "x")))
      }))

    it.effect("concurrent saves of one thread leave exactly one of them, whole", () =>
      Effect.gen(function*() {
        const store = yield* fresh()
        const notes = Array.from({ length: 16 }, (_, i) => `n${i}`)
        yield* Effect.all(notes.map((note) => store.save("t1", checkpoint("t1", note))), {
          concurrency: "unbounded"
        })
        const loaded = Option.getOrThrow(yield* store.load("t1"))
        const note = (loaded.slices.notes as { readonly last: string }).last
        assert.include(notes, note)
        assert.deepStrictEqual(loaded, checkpoint("t1", note))
      }))

    it.effect("a corrupt row fails the load with a CheckpointError", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const table = `checkpoints_${tables++}`
        const store = yield* SqlCheckpointer.make({ table })
        yield* store.save("t1", checkpoint("t1", "a"))
        yield* sql`UPDATE ${sql(table)} SET checkpoint = ${"{\"version\":2}"} WHERE thread_id = ${"t1"}`
        const error = yield* Effect.flip(store.load("t1"))
        assert.strictEqual(error._tag, "CheckpointError")
        assert.strictEqual(error.threadId, "t1")
        assert.strictEqual(error.operation, "load")
        assert.include(error.reason, "not valid")
        yield* sql`UPDATE ${sql(table)} SET checkpoint = ${"not json"} WHERE thread_id = ${"t1"}`
        assert.strictEqual((yield* Effect.flip(store.load("t1")))._tag, "CheckpointError")
      }))

    it.effect("a value outside the schema fails the save and keeps the stored checkpoint", () =>
      Effect.gen(function*() {
        const store = yield* fresh()
        yield* store.save("t1", checkpoint("t1", "a"))
        const error = yield* Effect.flip(
          store.save("t1", { ...checkpoint("t1", "b"), version: 2 } as unknown as Checkpointer.Checkpoint)
        )
        assert.strictEqual(error.operation, "save")
        assert.deepStrictEqual(yield* store.load("t1"), Option.some(checkpoint("t1", "a")))
      }))

    it.scoped("an agent thread continues in a fresh agent on another client (a new process)", () =>
      Effect.gen(function*() {
        const table = `checkpoints_${tables++}`
        const otherClient = yield* Layer.build((yield* Databases.TestDatabase).client)
        const process = <A, E>(
          script: ReadonlyArray<ScriptedModel.Turn>,
          client: Layer.Layer<SqlClient.SqlClient>,
          body: (agent: Agent.AgentOf<readonly [typeof counter]>) => Effect.Effect<A, E>
        ) =>
          Agent.make({ systemPrompt: "Be brief.", middleware: [counter] }).pipe(
            Effect.flatMap(body),
            Effect.provide(Layer.mergeAll(
              ScriptedModel.layer(script),
              SqlCheckpointer.layer({ table }).pipe(Layer.provide(client))
            ))
          )
        const client = Layer.succeedContext(yield* Effect.context<SqlClient.SqlClient>())
        const first = yield* process(
          [ScriptedModel.text("Hi.")],
          client,
          (agent) => agent.run("Hello", { threadId: "t" })
        )
        assert.strictEqual(first._tag, "Completed")
        const second = yield* process(
          [ScriptedModel.text("Still here.")],
          Layer.succeedContext(otherClient),
          (agent) => agent.run("Again", { threadId: "t" })
        )
        assert.strictEqual(second._tag, "Completed")
        assert.strictEqual(second.state.modelCalls, 2)
        assert.deepStrictEqual(second.state.messages.map((message) => message.role), [
          "user",
          "assistant",
          "user",
          "assistant"
        ])
      }))

    it.scoped("a conditional save writes only over the thread it expects; else nothing, with ThreadDeleted or Superseded", () =>
      Effect.gen(function*() {
        const table = `checkpoints_${tables++}`
        const mine = yield* SqlCheckpointer.make({ table })
        // another process, on a client of its own
        const theirs = yield* SqlCheckpointer.make({ table }).pipe(
          Effect.provide(yield* Layer.build((yield* Databases.TestDatabase).client))
        )
        const conflict = (effect: Effect.Effect<void, AgentError.CheckpointError>) =>
          Effect.map(Effect.flip(effect), (error) => error.conflict)

        // a new thread: written when none is stored, and again by its own retry
        yield* mine.save("t", of("a", "1"), { expected: "absent" })
        yield* mine.save("t", of("a", "1", "2"), { expected: "absent" })
        yield* theirs.save("t", of("a", "1", "2", "3"), { expected: { incarnation: "a" } })
        assert.deepStrictEqual(yield* mine.load("t"), Option.some(of("a", "1", "2", "3")))
        // another new thread of that id finds it: nothing written
        assert.strictEqual(yield* conflict(theirs.save("t", of("b", "x"), { expected: "absent" })), "Superseded")
        // deleted: a run of it writes nothing, and the thread stays deleted
        yield* theirs.delete("t")
        const deleted = yield* Effect.flip(
          mine.save("t", of("a", "1", "2", "3", "4"), { expected: { incarnation: "a" } })
        )
        assert.strictEqual(deleted.conflict, "ThreadDeleted")
        assert.include(deleted.message, "was not saved")
        assert.isTrue(Option.isNone(yield* theirs.load("t")))
        // made again: the old incarnation's run writes nothing over it
        yield* theirs.save("t", of("b", "x"), { expected: "absent" })
        assert.strictEqual(
          yield* conflict(mine.save("t", of("a", "1"), { expected: { incarnation: "a" } })),
          "Superseded"
        )
        assert.deepStrictEqual(yield* mine.load("t"), Option.some(of("b", "x")))
        // a thread stored before incarnations: a run expecting an incarnation writes over it; a run of one stored
        // before incarnations writes over none but its own
        yield* mine.save("old", { ...of(undefined, "o"), threadId: "old" })
        yield* mine.save("old", { ...of(undefined, "o", "p"), threadId: "old" }, {
          expected: { incarnation: undefined }
        })
        yield* theirs.save("old", { ...of("c", "o", "p"), threadId: "old" }, { expected: { incarnation: "c" } })
        assert.strictEqual(
          yield* conflict(
            mine.save("old", { ...of(undefined, "o"), threadId: "old" }, { expected: { incarnation: undefined } })
          ),
          "Superseded"
        )
        assert.deepStrictEqual(yield* mine.load("old"), Option.some({ ...of("c", "o", "p"), threadId: "old" }))
        // an expectation of no known form (from JavaScript): a typed failure, nothing written
        for (const expected of ["gone", 7, null, ["absent"], { incarnation: 7 }]) {
          const error = yield* Effect.flip(mine.save("old", of("d"), { expected } as any))
          assert.include(error.reason, "options.expected must be")
        }
        assert.deepStrictEqual(yield* mine.load("old"), Option.some({ ...of("c", "o", "p"), threadId: "old" }))
      }))

    it.scoped.prop(
      "over interleavings of runs (on two clients), deletions and re-creations, the stored thread is one live incarnation's own history",
      [FastCheck.array(op, { maxLength: 20 })],
      ([ops]) =>
        Effect.gen(function*() {
          const table = `checkpoints_${tables++}`
          const stores = [
            yield* SqlCheckpointer.make({ table }),
            yield* SqlCheckpointer.make({ table }).pipe(
              Effect.provide(yield* Layer.build((yield* Databases.TestDatabase).client))
            )
          ]
          const runs = new Map<
            number,
            { incarnation: string; messages: Array<unknown>; expected: Checkpointer.Expected }
          >()
          const dead = new Set<string>()
          let made = 0
          for (const [i, step] of ops.entries()) {
            const store = stores[i % 2]!
            const stored = yield* store.load("t")
            if (step._tag === "Delete") {
              if (Option.isSome(stored)) dead.add(stored.value.incarnation!)
              yield* store.delete("t")
            } else if (step._tag === "Start") {
              runs.set(
                step.run,
                Option.isNone(stored)
                  ? { incarnation: `i${made++}`, messages: [], expected: "absent" }
                  : {
                    incarnation: stored.value.incarnation!,
                    messages: [...stored.value.messages],
                    expected: { incarnation: stored.value.incarnation }
                  }
              )
            } else {
              const run = runs.get(step.run)
              if (run === undefined) continue
              const messages = [...run.messages, { incarnation: run.incarnation }]
              const lands = !dead.has(run.incarnation) && (Option.isSome(stored)
                ? stored.value.incarnation === run.incarnation
                : run.expected === "absent")
              const saved = yield* Effect.either(store.save(
                "t",
                { version: 1, threadId: "t", messages, slices: {}, incarnation: run.incarnation },
                { expected: run.expected }
              ))
              assert.strictEqual(saved._tag === "Right", lands)
              if (saved._tag === "Right") {
                run.messages = messages
                run.expected = { incarnation: run.incarnation }
              } else {
                runs.delete(step.run)
              }
            }
            const now = yield* stores[0]!.load("t")
            if (Option.isSome(now)) {
              assert.isFalse(dead.has(now.value.incarnation!), "a deleted incarnation never comes back")
              for (const message of now.value.messages as ReadonlyArray<{ readonly incarnation: string }>) {
                assert.strictEqual(message.incarnation, now.value.incarnation)
              }
            }
          }
        }),
      { fastCheck: { numRuns: 25 } }
    )
  })

describe("SqlCheckpointer", () => {
  suite("on SQLite", Databases.sqlite)
  describePostgres("the SqlCheckpointer on PostgreSQL", () => suite("on PostgreSQL", Databases.postgres))
})
