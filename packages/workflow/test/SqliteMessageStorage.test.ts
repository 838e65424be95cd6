/**
 * The patch this repository applies to @effect/cluster 0.60.2
 * (`packages/workflow/assets/patches`, applied by `npm ci` through patch-package):
 * on SQLite, `SqlMessageStorage` writes a request with one
 * `INSERT … ON CONFLICT DO NOTHING RETURNING` (0.60.2: a transaction of a
 * lookup and an `INSERT OR IGNORE`) and reads the unprocessed messages with
 * one prepared `UPDATE … RETURNING` that marks them read (0.60.2: a
 * transaction of an unprepared `SELECT` and an unprepared `UPDATE`). These
 * tests fail when the patch is missing, and check on the storage itself that
 * what it gives back is what 0.60.2 gives: duplicates found with their
 * original id and reply, unprocessed messages in the order they were written,
 * each read once, replied and not yet due ones left out, a due one read once
 * its time has come.
 */
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as DeliverAt from "@effect/cluster/DeliverAt"
import { EntityAddress } from "@effect/cluster/EntityAddress"
import { EntityId } from "@effect/cluster/EntityId"
import { EntityType } from "@effect/cluster/EntityType"
import * as Envelope from "@effect/cluster/Envelope"
import * as Message from "@effect/cluster/Message"
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as Reply from "@effect/cluster/Reply"
import * as ShardId from "@effect/cluster/ShardId"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as Snowflake from "@effect/cluster/Snowflake"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as Headers from "@effect/platform/Headers"
import * as Rpc from "@effect/rpc/Rpc"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import { Context, DateTime, Effect, Exit, Layer, Option, PrimaryKey, Schema, TestClock } from "effect"

const shardId = ShardId.make("default", 1)
const address = new EntityAddress({ entityType: EntityType.make("Test"), entityId: EntityId.make("e-1"), shardId })

/** A persisted request with a primary key, delivered when it is due (`at`, ms since the epoch) or at once. */
class Ping extends Schema.Class<Ping>("Ping")({ key: Schema.String, at: Schema.NullOr(Schema.Number) }) {
  [PrimaryKey.symbol]() {
    return this.key
  }
  [DeliverAt.symbol]() {
    return DateTime.unsafeMake(this.at ?? 0)
  }
}
const PingRpc = Rpc.make("ping", { payload: Ping, success: Schema.Number }).annotate(ClusterSchema.Persisted, true)

/** `ping` with `at: null` is due at once (the epoch); the others at `at`. */
const request = (id: bigint, key: string, at: number | null) =>
  new Message.OutgoingRequest({
    envelope: Envelope.makeRequest<typeof PingRpc>({
      requestId: Snowflake.Snowflake(id),
      address,
      tag: "ping",
      payload: new Ping({ key, at }),
      headers: Headers.empty
    }),
    context: Context.empty() as never,
    lastReceivedReply: Option.none(),
    rpc: PingRpc,
    respond: () => Effect.void
  })

const reply = (requestId: bigint, value: number) =>
  new Reply.ReplyWithContext({
    reply: new Reply.WithExit<typeof PingRpc>({
      requestId: Snowflake.Snowflake(requestId),
      id: Snowflake.Snowflake(requestId + 1_000_000n),
      exit: Exit.succeed(value)
    }),
    context: Context.empty() as never,
    rpc: PingRpc
  })

/** The storage over a fresh in-memory SQLite database. */
const storageLayer = SqlMessageStorage.layer.pipe(
  Layer.provide(ShardingConfig.layer()),
  Layer.provide(Layer.orDie(SqliteClient.layer({ filename: ":memory:" })))
)

const unprocessedIds = Effect.map(
  Effect.flatMap(MessageStorage.MessageStorage, (storage) => storage.unprocessedMessages([shardId])),
  (messages) => messages.map((message) => message.envelope._tag === "Request" ? message.envelope.requestId : -1n)
)

/** Now, when the test starts: "past" requests are due before it, "future" ones after. */
const now = 1_000_000
const dueOf = { none: null, past: now - 1000, future: now + 60_000 } as const

describe("SqlMessageStorage on SQLite (the @effect/cluster patch)", () => {
  it("is installed: the SQLite storage marks itself as the patched build", () => {
    assert.strictEqual((SqlMessageStorage as Record<string, unknown>)["sqliteSingleStatements"], true)
  })

  it.effect("a request saved again after its address was cleared is stored anew, and read", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(now)
      const storage = yield* MessageStorage.MessageStorage
      assert.strictEqual((yield* storage.saveRequest(request(1n, "a", null)))._tag, "Success")
      yield* storage.saveReply(reply(1n, 1))
      assert.strictEqual((yield* storage.saveRequest(request(2n, "a", null)))._tag, "Duplicate")
      yield* storage.clearAddress(address)
      assert.strictEqual((yield* storage.saveRequest(request(3n, "a", null)))._tag, "Success")
      assert.deepStrictEqual(yield* unprocessedIds, [3n])
    }).pipe(Effect.provide(storageLayer)))

  it.effect.prop(
    "finds duplicates and reads each due, unreplied request once, in the order of their ids (0.60.2's ORDER BY rowid)",
    {
      requests: Schema.Array(Schema.Struct({
        key: Schema.Literal("a", "b", "c", "d", "e"),
        due: Schema.Literal("none", "past", "future"),
        replied: Schema.Boolean
      })).pipe(Schema.minItems(1), Schema.maxItems(8))
    },
    ({ requests }) =>
      Effect.gen(function*() {
        yield* TestClock.setTime(now)
        const storage = yield* MessageStorage.MessageStorage
        // the model: the first request of each key is stored, the later ones are duplicates of it
        const original = new Map<string, { readonly id: bigint; readonly replied: boolean }>()
        const expected: Array<{ readonly id: bigint; readonly due: "none" | "past" | "future" }> = []
        for (const [i, { due, key, replied }] of requests.entries()) {
          // ids out of the order of writing (distinct for up to 11 requests): the read sorts by id, the rowid
          const id = BigInt(((i * 5 + 3) % 11) + 1)
          const saved = yield* storage.saveRequest(request(id, key, dueOf[due]))
          const first = original.get(key)
          if (first === undefined) {
            assert.strictEqual(saved._tag, "Success")
            original.set(key, { id, replied })
            if (replied) yield* storage.saveReply(reply(id, i))
            else expected.push({ id, due })
          } else {
            assert.strictEqual(saved._tag, "Duplicate")
            if (saved._tag !== "Duplicate") return
            assert.strictEqual(saved.originalId, first.id)
            // a duplicate of a replied request comes back with that reply
            assert.strictEqual(
              Option.isSome(saved.lastReceivedReply) && saved.lastReceivedReply.value._tag === "WithExit",
              first.replied
            )
          }
        }
        expected.sort((a, b) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
        const dueNow = expected.filter(({ due }) => due !== "future").map(({ id }) => id)
        assert.deepStrictEqual(yield* unprocessedIds, dueNow)
        // read once: a second read, before the others are due, finds nothing
        assert.deepStrictEqual(yield* unprocessedIds, [])
        yield* TestClock.adjust("2 minutes")
        assert.deepStrictEqual(
          yield* unprocessedIds,
          expected.filter(({ due }) => due === "future").map(({ id }) => id)
        )
      }).pipe(Effect.provide(storageLayer))
  )
})
