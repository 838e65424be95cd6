/**
 * `Checkpointer.Service.list`: the stored threads a page at a time, in the order of their ids, for the memory and
 * file-system checkpointers, and kept by `Checkpointer.make`.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Checkpointer } from "@stepwise-agent/core"
import { Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const checkpoint = (threadId: string): Checkpointer.Checkpoint => ({
  version: 1,
  threadId,
  messages: [{ role: "user", content: [{ type: "text", text: `hello ${threadId}` }] }],
  slices: {}
})

/** Every page of `checkpointer`'s list, `limit` at a time. */
const allPages = (checkpointer: Checkpointer.Service, limit: number) =>
  Effect.gen(function*() {
    const pages: Array<ReadonlyArray<string>> = []
    let cursor: string | undefined
    do {
      const page = yield* checkpointer.list!({ cursor, limit })
      pages.push(page.threadIds)
      cursor = page.next
    } while (cursor !== undefined && pages.length < 1000)
    return pages
  })

const sorted = (ids: Iterable<string>) => [...ids].sort((a, b) => a < b ? -1 : a > b ? 1 : 0)

// any thread id a checkpointer stores: slashes, dots, ".json" in it, non-ASCII
const ThreadId = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(12))
const Case = {
  saved: Schema.Array(ThreadId).pipe(Schema.maxItems(12)),
  deleted: Schema.Array(Schema.Number.pipe(Schema.int(), Schema.between(0, 11))).pipe(Schema.maxItems(4)),
  limit: Schema.Number.pipe(Schema.int(), Schema.between(1, 5))
}

/** Saves `saved`, deletes some, then pages: every stored id once, in order, full pages but the last. */
const checkListing = (checkpointer: Checkpointer.Service, { deleted, limit, saved }: {
  readonly saved: ReadonlyArray<string>
  readonly deleted: ReadonlyArray<number>
  readonly limit: number
}) =>
  Effect.gen(function*() {
    for (const id of saved) yield* checkpointer.save(id, checkpoint(id))
    const gone = new Set(deleted.flatMap((i) => i < saved.length ? [saved[i]!] : []))
    for (const id of gone) yield* checkpointer.delete(id)
    const expected = sorted(new Set(saved.filter((id) => !gone.has(id))))
    const pages = yield* allPages(checkpointer, limit)
    assert.deepStrictEqual(pages.flat(), expected)
    assert.isTrue(pages.slice(0, -1).every((page) => page.length === limit), "only the last page is short")
    assert.isTrue(pages.at(-1)!.length <= limit)
  })

describe("Checkpointer.list", () => {
  it.effect.prop(
    "the memory checkpointer lists every stored thread once, in order, a page at a time",
    Case,
    (input) => Effect.flatMap(Checkpointer.makeMemory, (checkpointer) => checkListing(checkpointer, input))
  )

  it.effect.prop(
    "the file-system checkpointer lists every stored thread once, in order, a page at a time (no log or temporary file is a thread)",
    Case,
    (input) =>
      Effect.gen(function*() {
        const directory = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-list-"))
        try {
          const checkpointer = yield* Checkpointer.makeFileSystem(directory)
          yield* checkListing(checkpointer, input)
          // a checkpointer started later on the same folder lists what an earlier one stored
          const later = yield* Checkpointer.makeFileSystem(directory)
          assert.deepStrictEqual((yield* allPages(later, 100)).flat(), (yield* allPages(checkpointer, 100)).flat())
        } finally {
          fs.rmSync(directory, { recursive: true, force: true })
        }
      }).pipe(Effect.provide(NodeContext.layer)),
    { fastCheck: { numRuns: 20 } }
  )

  it.effect("listing reads no thread: a file-system thread whose log is unreadable is still listed", () =>
    Effect.gen(function*() {
      const directory = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-list-"))
      try {
        const checkpointer = yield* Checkpointer.makeFileSystem(directory)
        yield* checkpointer.save("a", checkpoint("a"))
        for (const file of fs.readdirSync(directory)) {
          if (file.endsWith(".log")) fs.writeFileSync(path.join(directory, file), "not a log")
        }
        assert.deepStrictEqual(yield* checkpointer.list!(), { threadIds: ["a"], next: undefined })
        const failed = yield* Effect.flip((yield* Checkpointer.makeFileSystem(directory)).load("a"))
        assert.strictEqual(failed._tag, "CheckpointError")
      } finally {
        fs.rmSync(directory, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("a file-system folder that is gone fails the listing with a CheckpointError naming it", () =>
    Effect.gen(function*() {
      const directory = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-list-"))
      const checkpointer = yield* Checkpointer.makeFileSystem(directory)
      fs.rmSync(directory, { recursive: true, force: true })
      const error = yield* Effect.flip(checkpointer.list!())
      assert.strictEqual(error.operation, "list")
      assert.include(error.message, `Could not list the stored threads: cannot read ${directory}`)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("Checkpointer.make keeps a store's list; a store without one has none", () =>
    Effect.gen(function*() {
      const store = new Map<string, Checkpointer.Checkpoint>()
      const options = {
        load: (threadId: string) => Effect.sync(() => Option.fromNullable(store.get(threadId))),
        save: (threadId: string, value: Checkpointer.Checkpoint) => Effect.sync(() => void store.set(threadId, value)),
        delete: (threadId: string) => Effect.sync(() => void store.delete(threadId))
      }
      const listing = Checkpointer.make({
        ...options,
        list: (page) => Effect.sync(() => Checkpointer.pageOf(store.keys(), page))
      })
      yield* listing.save("b", checkpoint("b"))
      yield* listing.append("a", Checkpointer.deferred(checkpoint("a")))
      assert.deepStrictEqual(yield* listing.list!({ limit: 1 }), { threadIds: ["a"], next: "a" })
      assert.deepStrictEqual(yield* listing.list!({ cursor: "a", limit: 1 }), { threadIds: ["b"], next: undefined })
      assert.isUndefined(Checkpointer.make(options).list)
    }))

  it("pageOf: a limit that is no count gives a page of the default size; at least one id a page", () => {
    const ids = Array.from({ length: 150 }, (_, i) => `t${String(i).padStart(3, "0")}`)
    assert.strictEqual(Checkpointer.pageOf(ids, { limit: Number.NaN }).threadIds.length, 100)
    assert.strictEqual(Checkpointer.pageOf(ids, { limit: 0 }).threadIds.length, 1)
    assert.deepStrictEqual(Checkpointer.pageOf(ids, { cursor: "t148", limit: 10 }), {
      threadIds: ["t149"],
      next: undefined
    })
  })
})
