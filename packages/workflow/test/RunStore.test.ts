import { SqlClient } from "@effect/sql"
import { assert, describe, layer } from "@effect/vitest"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import { DateTime, Effect, Either, Layer, Option, Schema } from "effect"
import * as Databases from "./support/databases.js"
import { describePostgres } from "./support/postgres.js"

const run = (runId: string, threadId: string, at: number): RunStore.NewRun => ({
  runId,
  threadId,
  executionId: `exec-${runId}`,
  workflow: "AgentRun/v1",
  createdAt: DateTime.unsafeMake(at)
})

let tables = 0

/** An error's own fields (comparing the error objects themselves recurses forever). */
const fields = (error: object): Record<string, unknown> => ({ ...error })

/** The behaviour every store must have; `make` gives a fresh, empty store per call. */
const conformance = <R>(
  name: string,
  provide: Layer.Layer<R>,
  make: () => Effect.Effect<RunStore.RunStore.Service, unknown, R>
) =>
  layer(provide, { timeout: "60 seconds", excludeTestServices: true })(name, (it) => {
    it.effect("registers runs and finds them by id", () =>
      Effect.gen(function*() {
        const store = yield* make()
        const record = yield* store.register(run("r1", "t1", 1_000))
        assert.deepStrictEqual(record, {
          runId: "r1",
          threadId: "t1",
          executionId: "exec-r1",
          workflow: "AgentRun/v1",
          createdAt: DateTime.unsafeMake(1_000)
        })
        assert.deepStrictEqual(yield* store.get("r1"), record)
        const missing = yield* Effect.flip(store.get("nope"))
        assert.deepStrictEqual(fields(missing), { _tag: "RunNotFound", runId: "nope" })
      }))

    it.effect("registering an id again returns the first record", () =>
      Effect.gen(function*() {
        const store = yield* make()
        const first = yield* store.register(run("r1", "t1", 1_000))
        const again = yield* store.register({ ...run("r1", "t2", 2_000), executionId: "other" })
        assert.deepStrictEqual(again, first)
        assert.strictEqual((yield* store.list()).length, 1)
      }))

    it.effect("a run registered as owning its thread owns it only when this call created its record", () =>
      Effect.gen(function*() {
        const store = yield* make()
        yield* store.register({ ...run("r1", "t1", 1_000), ownsThread: true })
        assert.deepStrictEqual(yield* store.running("t1"), Option.some("r1"))
        // r1 ends: nothing is left, nobody owns the thread
        assert.deepStrictEqual(yield* store.claimNext("t1", "r1"), Option.none())
        assert.deepStrictEqual(yield* store.running("t1"), Option.none())
        // registering r1 again (a retried start) takes nothing back
        yield* store.register({ ...run("r1", "t1", 1_000), ownsThread: true })
        assert.deepStrictEqual(yield* store.running("t1"), Option.none())
        yield* store.register(run("r2", "t1", 2_000))
        assert.deepStrictEqual(yield* store.running("t1"), Option.none())
      }))

    it.effect("a post with claim takes the thread for a run when none owns it, in the same transaction", () =>
      Effect.gen(function*() {
        const store = yield* make()
        const first = yield* store.postMessage({ threadId: "t1", mode: "queue", messages: "a", claim: true })
        assert.deepStrictEqual(Option.map(first.started, (next) => next.runId), Option.some("sent-1"))
        assert.deepStrictEqual(first.running, Option.some("sent-1"))
        assert.deepStrictEqual((yield* store.inputOf("sent-1")).map((message) => message.messages), ["a"])
        // the thread is owned now: the next post is stored for that run
        const second = yield* store.postMessage({ threadId: "t1", mode: "queue", messages: "b", claim: true })
        assert.deepStrictEqual([second.started, second.running], [Option.none(), Option.some("sent-1")])
      }))

    it.effect("a post with an idempotency key the thread stored before stores nothing and gives the earlier message", () =>
      Effect.gen(function*() {
        const store = yield* make()
        const first = yield* store.postMessage({
          threadId: "t1",
          mode: "steer",
          messages: "a",
          claim: true,
          idempotencyKey: "k"
        })
        assert.deepStrictEqual([first.sequence, first.earlier], [1, Option.none()])
        const again = yield* store.postMessage({
          threadId: "t1",
          mode: "queue",
          messages: "b",
          claim: true,
          idempotencyKey: "k"
        })
        assert.deepStrictEqual(
          [again.sequence, again.started, again.running],
          [1, Option.none(), Option.some("sent-1")]
        )
        assert.deepInclude(Option.getOrThrow(again.earlier), {
          sequence: 1,
          threadId: "t1",
          mode: "steer",
          messages: "a"
        })
        // the key belongs to the thread: another thread's message with it is a message of its own, as is one without
        const other = yield* store.postMessage({ threadId: "t2", mode: "steer", messages: "a", idempotencyKey: "k" })
        const unkeyed = yield* store.postMessage({ threadId: "t1", mode: "steer", messages: "a" })
        assert.deepStrictEqual([other.sequence, other.earlier, unkeyed.sequence], [2, Option.none(), 3])
        // nothing of the duplicate was stored: the run's input is the first message alone
        assert.deepStrictEqual((yield* store.inputOf("sent-1")).map((message) => message.messages), ["a"])
      }))

    it.effect("lists runs newest first, by thread, with a limit", () =>
      Effect.gen(function*() {
        const store = yield* make()
        yield* store.register(run("a", "t1", 1_000))
        yield* store.register(run("b", "t2", 2_000))
        yield* store.register(run("c", "t1", 3_000))
        yield* store.register(run("d", "t1", 3_000)) // same millisecond as "c": registered later, so newer
        const ids = (runs: ReadonlyArray<RunStore.RunRecord>) => runs.map((r) => r.runId)
        assert.deepStrictEqual(ids(yield* store.list()), ["d", "c", "b", "a"])
        assert.deepStrictEqual(ids(yield* store.list({ threadId: "t1" })), ["d", "c", "a"])
        assert.deepStrictEqual(ids(yield* store.list({ threadId: "t1", limit: 2 })), ["d", "c"])
        assert.deepStrictEqual(ids(yield* store.list({ threadId: "unknown" })), [])
      }))

    it.effect("defaults createdAt to now", () =>
      Effect.gen(function*() {
        const store = yield* make()
        const before = Date.now()
        const { createdAt } = yield* store.register({ runId: "r", threadId: "t", executionId: "e", workflow: "w" })
        const millis = DateTime.toEpochMillis(createdAt)
        assert.isTrue(millis >= before && millis <= Date.now())
      }))

    it.effect("a decision is claimed once per run and key", () =>
      Effect.gen(function*() {
        const store = yield* make()
        yield* store.register(run("r1", "t1", 1_000))
        yield* store.register(run("r2", "t1", 2_000))
        assert.isFalse(yield* store.isDecided("r1", "call-1"))
        yield* store.claimDecision("r1", "call-1")
        assert.isTrue(yield* store.isDecided("r1", "call-1"))
        assert.isFalse(yield* store.isDecided("r2", "call-1"))
        const second = yield* Effect.flip(store.claimDecision("r1", "call-1"))
        assert.deepStrictEqual(fields(second), { _tag: "AlreadyDecided", runId: "r1", key: "call-1" })
        yield* store.claimDecision("r1", "call-2")
        yield* store.claimDecision("r2", "call-1")
        const unknown = yield* Effect.flip(store.claimDecision("nope", "call-1"))
        assert.deepStrictEqual(fields(unknown), { _tag: "RunNotFound", runId: "nope" })
      }))

    it.effect("a claim keeps its decision until it is marked delivered", () =>
      Effect.gen(function*() {
        const store = yield* make()
        yield* store.register(run("r1", "t1", 1_000))
        assert.isTrue(Option.isNone(yield* store.decisionOf("r1", "call-1")))
        const before = Date.now()
        yield* store.claimDecision("r1", "call-1", `{"value":"approve"}`)
        yield* store.claimDecision("r1", "call-2")
        const claimed = Option.getOrThrow(yield* store.decisionOf("r1", "call-1"))
        assert.deepStrictEqual({ ...claimed, decidedAt: 0 }, {
          key: "call-1",
          decidedAt: 0,
          decision: `{"value":"approve"}`,
          delivered: false
        })
        assert.isTrue(claimed.decidedAt >= before && claimed.decidedAt <= Date.now())
        assert.strictEqual(Option.getOrThrow(yield* store.decisionOf("r1", "call-2")).decision, undefined)
        yield* store.markDelivered("r1", "call-1")
        yield* store.markDelivered("r1", "call-1")
        yield* store.markDelivered("r1", "never-claimed")
        assert.isTrue(Option.getOrThrow(yield* store.decisionOf("r1", "call-1")).delivered)
        assert.isFalse(Option.getOrThrow(yield* store.decisionOf("r1", "call-2")).delivered)
        assert.isTrue(Option.isNone(yield* store.decisionOf("r1", "never-claimed")))
      }))

    it.effect("concurrent claims of one decision: exactly one wins", () =>
      Effect.gen(function*() {
        const store = yield* make()
        yield* store.register(run("r1", "t1", 1_000))
        const results = yield* Effect.all(
          Array.from({ length: 12 }, () => Effect.either(store.claimDecision("r1", "call-1"))),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(results.filter(Either.isRight).length, 1)
        for (const result of results.filter(Either.isLeft)) assert.strictEqual(result.left._tag, "AlreadyDecided")
      }))

    it.effect("a cancel request is a record of its own: no decision key stands for it, nor it for one", () =>
      Effect.gen(function*() {
        const store = yield* make()
        yield* store.register(run("r1", "t1", 1_000))
        yield* store.claimDecision("r1", "cancel", `{"value":"yes"}`)
        assert.isFalse(yield* store.isCancelRequested("r1"))
        yield* store.requestCancel("r1")
        yield* store.requestCancel("r1")
        assert.isTrue(yield* store.isCancelRequested("r1"))
        assert.isFalse(Option.getOrThrow(yield* store.decisionOf("r1", "cancel")).delivered)
        assert.isFalse(yield* store.isDecided("r1", "other"))
        assert.strictEqual((yield* Effect.flip(store.requestCancel("nope")))._tag, "RunNotFound")
        yield* store.delete("r1")
        assert.isFalse(yield* store.isCancelRequested("r1"))
      }))

    it.effect("releaseDecision removes an undelivered claim only, so the key can be claimed again", () =>
      Effect.gen(function*() {
        const store = yield* make()
        yield* store.register(run("r1", "t1", 1_000))
        yield* store.claimDecision("r1", "bad", "{not json")
        yield* store.claimDecision("r1", "done", "{}")
        yield* store.markDelivered("r1", "done")
        assert.isTrue(yield* store.releaseDecision("r1", "bad"))
        assert.isFalse(yield* store.releaseDecision("r1", "bad"))
        assert.isFalse(yield* store.releaseDecision("r1", "done"))
        assert.isTrue(Option.isSome(yield* store.decisionOf("r1", "done")))
        yield* store.claimDecision("r1", "bad", "{}")
        assert.strictEqual(Option.getOrThrow(yield* store.decisionOf("r1", "bad")).decision, "{}")
      }))

    it.effect("delete prunes a run and its decisions", () =>
      Effect.gen(function*() {
        const store = yield* make()
        yield* store.register(run("r1", "t1", 1_000))
        yield* store.register(run("r2", "t1", 2_000))
        yield* store.claimDecision("r1", "call-1")
        yield* store.delete("r1")
        yield* store.delete("never-registered")
        assert.strictEqual((yield* Effect.flip(store.get("r1")))._tag, "RunNotFound")
        assert.deepStrictEqual((yield* store.list()).map((r) => r.runId), ["r2"])
        yield* store.register(run("r1", "t1", 3_000))
        yield* store.claimDecision("r1", "call-1")
      }))

    it.effect("a ledgered call is marked started once per run and step, also when marks race; delete forgets them", () =>
      Effect.gen(function*() {
        const store = yield* make()
        yield* store.register(run("r1", "t1", 1_000))
        const marks = yield* Effect.all(
          Array.from({ length: 12 }, () => store.markStarted("r1", "tool/call_1")),
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual(marks.filter(Boolean).length, 1)
        assert.isFalse(yield* store.markStarted("r1", "tool/call_1"))
        assert.isTrue(yield* store.markStarted("r1", "tool/call_1#2"))
        assert.isTrue(yield* store.markStarted("r2", "tool/call_1"))
        yield* store.delete("r1")
        assert.isTrue(yield* store.markStarted("r1", "tool/call_1"))
        assert.isFalse(yield* store.markStarted("r2", "tool/call_1"))
      }))

    it.effect("a look claims the thread's steer messages once; asking again gives the same, nothing newer", () =>
      Effect.gen(function*() {
        const store = yield* make()
        const post = (threadId: string, mode: "steer" | "queue", messages: string) =>
          Effect.map(store.postMessage({ threadId, mode, messages }), (posted) => posted.sequence)
        const texts = (sent: ReadonlyArray<RunStore.SentMessage>) => sent.map((message) => message.messages)
        yield* post("t1", "steer", "a")
        yield* post("t1", "queue", "q")
        yield* post("t2", "steer", "other thread")
        yield* post("t1", "steer", "b")
        assert.deepStrictEqual(texts(yield* store.claimSteered("t1", "r1", "inbox/0")), ["a", "b"])
        yield* post("t1", "steer", "c")
        // a retried look (its first attempt's result was lost) takes in what the first took
        assert.deepStrictEqual(texts(yield* store.claimSteered("t1", "r1", "inbox/0")), ["a", "b"])
        assert.deepStrictEqual(texts(yield* store.claimSteered("t1", "r1", "inbox/1")), ["c"])
        assert.deepStrictEqual(texts(yield* store.claimSteered("t1", "r2", "inbox/0")), [])
        assert.deepStrictEqual(texts(yield* store.claimSteered("t2", "r3", "inbox/0")), ["other thread"])
      }))

    it.effect("the next run of a thread takes the steer messages left, else one queued message, once per owner", () =>
      Effect.gen(function*() {
        const store = yield* make()
        const post = (mode: "steer" | "queue", messages: string) =>
          Effect.map(store.postMessage({ threadId: "t", mode, messages }), (posted) => posted)
        const next = (owner: string | undefined) =>
          Effect.map(
            store.claimNext("t", owner),
            Option.map((taken) => ({ runId: taken.runId, messages: taken.messages.map((m) => m.messages) }))
          )
        // nobody owns the thread's messages: the sender is told so
        assert.deepStrictEqual((yield* post("queue", "q1")).running, Option.none())
        yield* store.setRunning("t", "r1")
        assert.deepStrictEqual((yield* post("queue", "q2")).running, Option.some("r1"))
        const late = yield* post("steer", "late")
        // only the owner's end hands them on
        assert.deepStrictEqual(yield* next("someone else"), Option.none())
        assert.deepStrictEqual(yield* next(undefined), Option.none())
        const first = Option.some({ runId: `sent-${late.sequence}`, messages: ["late"] })
        assert.deepStrictEqual(yield* next("r1"), first)
        // asked again (a retried activity): the same run, nothing more
        assert.deepStrictEqual(yield* next("r1"), first)
        assert.deepStrictEqual(yield* store.running("t"), Option.some(`sent-${late.sequence}`))
        assert.deepStrictEqual((yield* store.inputOf(`sent-${late.sequence}`)).map((m) => m.messages), ["late"])
        assert.deepStrictEqual(yield* next(`sent-${late.sequence}`), Option.some({ runId: "sent-1", messages: ["q1"] }))
        assert.deepStrictEqual(yield* next("sent-1"), Option.some({ runId: "sent-2", messages: ["q2"] }))
        // nothing left: nobody owns the thread's messages
        assert.deepStrictEqual(yield* next("sent-2"), Option.none())
        assert.deepStrictEqual(yield* store.running("t"), Option.none())
        // a sender finding nobody starts the next run itself
        yield* post("steer", "hello")
        assert.deepStrictEqual(yield* next(undefined), Option.some({ runId: "sent-4", messages: ["hello"] }))
      }))

    it.effect.prop(
      "every sent message is taken in at most once, by a claim of its own thread, and a repeated claim repeats",
      {
        ops: Schema.Array(Schema.Union(
          Schema.Struct({
            op: Schema.Literal("post"),
            thread: Schema.Literal("a", "b"),
            mode: Schema.Literal("steer", "queue")
          }),
          Schema.Struct({
            op: Schema.Literal("look"),
            thread: Schema.Literal("a", "b"),
            look: Schema.Int.pipe(Schema.between(0, 3))
          }),
          Schema.Struct({
            op: Schema.Literal("next"),
            thread: Schema.Literal("a", "b"),
            owner: Schema.Literal("r", "sent-1", "sent-2", "none")
          }),
          Schema.Struct({ op: Schema.Literal("start"), thread: Schema.Literal("a", "b") })
        )).pipe(Schema.maxItems(25))
      },
      ({ ops }) =>
        Effect.gen(function*() {
          const store = yield* make()
          const threadOf = new Map<number, string>()
          const modeOf = new Map<number, string>()
          /** The messages each claim took, by claim; a message's claim. */
          const claims = new Map<string, ReadonlyArray<number>>()
          const owner = new Map<number, string>()
          const record = (claim: string, thread: string, sent: ReadonlyArray<RunStore.SentMessage>) => {
            const sequences = sent.map((message) => message.sequence)
            const earlier = claims.get(claim)
            if (earlier !== undefined && earlier.length > 0) assert.deepStrictEqual(sequences, earlier)
            if (sequences.length > 0) claims.set(claim, sequences)
            for (const sequence of sequences) {
              assert.strictEqual(threadOf.get(sequence), thread)
              const taken = owner.get(sequence)
              if (taken !== undefined) assert.strictEqual(taken, claim, `message ${sequence} taken twice`)
              owner.set(sequence, claim)
            }
          }
          for (const op of ops) {
            switch (op.op) {
              case "post": {
                const { sequence } = yield* store.postMessage({ threadId: op.thread, mode: op.mode, messages: "m" })
                threadOf.set(sequence, op.thread)
                modeOf.set(sequence, op.mode)
                break
              }
              case "look": {
                const sent = yield* store.claimSteered(op.thread, `r-${op.thread}`, `inbox/${op.look}`)
                for (const message of sent) assert.strictEqual(modeOf.get(message.sequence), "steer")
                record(`${op.thread}:inbox/${op.look}`, op.thread, sent)
                break
              }
              case "next": {
                const next = yield* store.claimNext(op.thread, op.owner === "none" ? undefined : op.owner)
                if (Option.isSome(next)) {
                  assert.strictEqual(next.value.runId, `sent-${next.value.messages[0]!.sequence}`)
                  record(`input:${next.value.runId}`, op.thread, next.value.messages)
                }
                break
              }
              case "start": {
                yield* store.setRunning(op.thread, "r")
                break
              }
            }
          }
        }),
      { fastCheck: { numRuns: 30 } }
    )
  })

conformance("RunStore.layerMemory", Layer.empty, () => RunStore.makeMemory)

const sqlSuite = (name: string, database: Layer.Layer<SqlClient.SqlClient | Databases.TestDatabase>) => {
  conformance(name, database, () => RunStore.make({ prefix: `runs_${tables++}` }))

  layer(database, { timeout: "60 seconds", excludeTestServices: true })(`${name}: shared database`, (it) => {
    it.scoped("a second client (another process) sees the runs and the claimed decisions", () =>
      Effect.gen(function*() {
        const client = yield* Layer.build((yield* Databases.TestDatabase).client)
        const prefix = `runs_${tables++}`
        const store = yield* RunStore.make({ prefix })
        yield* store.register(run("r1", "t1", 1_000))
        yield* store.claimDecision("r1", "call-1")
        const other = yield* RunStore.make({ prefix }).pipe(Effect.provide(client))
        assert.deepStrictEqual((yield* other.list()).map((r) => r.runId), ["r1"])
        assert.strictEqual((yield* Effect.flip(other.claimDecision("r1", "call-1")))._tag, "AlreadyDecided")
        yield* other.claimDecision("r1", "call-2")
        assert.strictEqual((yield* Effect.flip(store.claimDecision("r1", "call-2")))._tag, "AlreadyDecided")
      }))

    it.scoped("tables of the first layout (claims without stored decisions) are upgraded in place", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const prefix = `runs_${tables++}`
        yield* sql`CREATE TABLE ${sql(`${prefix}_runs`)} (
          seq INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE, thread_id TEXT NOT NULL,
          execution_id TEXT NOT NULL, workflow TEXT NOT NULL, created_at BIGINT NOT NULL)`
        yield* sql`CREATE TABLE ${sql(`${prefix}_decisions`)} (
          run_id TEXT NOT NULL, decision_key TEXT NOT NULL, decided_at BIGINT NOT NULL,
          PRIMARY KEY (run_id, decision_key))`
        yield* sql`INSERT INTO ${sql(`${prefix}_runs`)} (seq, run_id, thread_id, execution_id, workflow, created_at)
          VALUES (1, 'r1', 't1', 'e1', 'AgentRun/v1', 1000)`
        yield* sql`INSERT INTO ${sql(`${prefix}_decisions`)} VALUES ('r1', 'old', 5)`

        const store = yield* RunStore.make({ prefix })
        assert.deepStrictEqual(Option.getOrThrow(yield* store.decisionOf("r1", "old")), {
          key: "old",
          decidedAt: 5,
          decision: undefined,
          delivered: false
        })
        yield* store.claimDecision("r1", "new", "{}")
        assert.strictEqual(Option.getOrThrow(yield* store.decisionOf("r1", "new")).decision, "{}")
        // the runs table got its cancel column
        assert.isFalse(yield* store.isCancelRequested("r1"))
        yield* store.requestCancel("r1")
        assert.isTrue(yield* store.isCancelRequested("r1"))
        // upgrading is idempotent
        yield* RunStore.make({ prefix })
      }))

    it.scoped("a messages table from before idempotency keys gets the key column, and its messages stay", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const prefix = `runs_${tables++}`
        const sequence = sql.onDialectOrElse({
          pg: () => sql.literal("seq BIGSERIAL PRIMARY KEY"),
          orElse: () => sql.literal("seq INTEGER PRIMARY KEY AUTOINCREMENT")
        })
        yield* sql`CREATE TABLE ${sql(`${prefix}_messages`)} (
          ${sequence}, thread_id TEXT NOT NULL, mode TEXT NOT NULL, messages TEXT NOT NULL,
          sent_at BIGINT NOT NULL, claimed_by TEXT, claimed_as TEXT, after_run TEXT)`
        yield* sql`INSERT INTO ${sql(`${prefix}_messages`)} (thread_id, mode, messages, sent_at)
          VALUES ('t1', 'steer', 'old', 5)`

        const store = yield* RunStore.make({ prefix })
        const keyed = yield* store.postMessage({ threadId: "t1", mode: "steer", messages: "new", idempotencyKey: "k" })
        const again = yield* store.postMessage({ threadId: "t1", mode: "steer", messages: "new", idempotencyKey: "k" })
        assert.deepStrictEqual([keyed.sequence, again.sequence, Option.isSome(again.earlier)], [2, 2, true])
        const next = Option.getOrThrow(yield* store.claimNext("t1", undefined))
        assert.deepStrictEqual(next.messages.map((message) => message.messages), ["old", "new"])
        // upgrading is idempotent
        yield* RunStore.make({ prefix })
      }))

    it.scoped("stores on one database are created concurrently without conflict", () =>
      Effect.gen(function*() {
        const { client: layer } = yield* Databases.TestDatabase
        const prefix = `runs_${tables++}`
        const stores = yield* Effect.all(
          Array.from({ length: 4 }, () =>
            Effect.flatMap(Layer.build(layer), (client) => RunStore.make({ prefix }).pipe(Effect.provide(client)))),
          { concurrency: "unbounded" }
        )
        yield* stores[0].register(run("r1", "t1", 1_000))
        assert.strictEqual((yield* stores[3].get("r1")).runId, "r1")
      }))
  })
}

describe("RunStore.layer", () => {
  sqlSuite("on SQLite", Databases.sqlite)
  describePostgres("the RunStore on PostgreSQL", () => sqlSuite("on PostgreSQL", Databases.postgres))
})
