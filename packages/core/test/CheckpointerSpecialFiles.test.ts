/**
 * The file-system checkpointer opens a thread's files only when they are regular files: a FIFO where a head,
 * an id or a log belongs (opening it for reading waits for a writer, holding one of libuv's four threads), or
 * a link to a device (`/dev/zero` never ends) fails at once with a `CheckpointError` naming the file and what it
 * is. A head committing more of its log than the file holds, or more than one text can hold, fails the same way
 * instead of allocating it.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Checkpointer } from "@stepwise-agent/core"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const hasFifos = process.platform !== "win32" && fs.existsSync("/dev/zero")

const checkpoint = (threadId: string): Checkpointer.Checkpoint => ({
  version: 1,
  threadId,
  messages: [{ role: "user", content: "hello" }],
  slices: {}
})

const directory = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-special-"))),
  (made) => Effect.sync(() => fs.rmSync(made, { recursive: true, force: true }))
)

/** Puts a FIFO at `file`; on release, a writer comes and goes, so a reader the old code left waiting ends. */
const fifoAt = (file: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      fs.rmSync(file, { force: true })
      execFileSync("mkfifo", [file])
    }),
    () =>
      Effect.sync(() => {
        fs.closeSync(fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_NONBLOCK))
        fs.rmSync(file, { force: true })
      })
  )

/** `effect` failed at once (well before the bound) with a `CheckpointError` whose message holds `expected`. */
const failsNaming = <A, E extends { readonly message: string; readonly _tag: string }>(
  effect: Effect.Effect<A, E>,
  ...expected: ReadonlyArray<string>
) =>
  Effect.gen(function*() {
    const failure = yield* effect.pipe(
      Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "blocked" as const }),
      Effect.flip
    )
    assert.notStrictEqual(failure, "blocked")
    if (failure === "blocked") return
    assert.strictEqual(failure._tag, "CheckpointError")
    for (const text of expected) assert.include(failure.message, text)
  })

const saved = (dir: string, threadId: string) =>
  Effect.flatMap(Checkpointer.makeFileSystem(dir), (store) => store.save(threadId, checkpoint(threadId)))

const fileOf = (dir: string, ends: string) => path.join(dir, fs.readdirSync(dir).find((name) => name.endsWith(ends))!)

describe.skipIf(!hasFifos)("Checkpointer.makeFileSystem on special files", () => {
  it.scopedLive("a FIFO where a thread's head belongs fails its load and its save, naming it", () =>
    Effect.gen(function*() {
      const dir = yield* directory
      yield* fifoAt(path.join(dir, "t.json"))
      const store = yield* Checkpointer.makeFileSystem(dir)
      yield* failsNaming(store.load("t"), "t.json", "a FIFO where a regular file belongs")
      yield* failsNaming(store.save("t", checkpoint("t")), "t.json", "FIFO")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a head that links to /dev/zero or /dev/urandom fails its load, naming the device", () =>
    Effect.gen(function*() {
      const dir = yield* directory
      fs.symlinkSync("/dev/zero", path.join(dir, "zero.json"))
      fs.symlinkSync("/dev/urandom", path.join(dir, "random.json"))
      const store = yield* Checkpointer.makeFileSystem(dir)
      yield* failsNaming(store.load("zero"), "zero.json", "CharacterDevice")
      yield* failsNaming(store.load("random"), "random.json", "CharacterDevice")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a FIFO where a thread's log belongs fails its load and its next save", () =>
    Effect.gen(function*() {
      const dir = yield* directory
      const writer = yield* Checkpointer.makeFileSystem(dir)
      const first = checkpoint("t")
      yield* writer.save("t", first)
      yield* fifoAt(fileOf(dir, ".log"))
      // a new instance: nothing of the thread is cached
      const store = yield* Checkpointer.makeFileSystem(dir)
      yield* failsNaming(store.load("t"), ".log", "a FIFO where a regular file belongs")
      // the log's writer appends to it
      const more = { ...first, messages: [...first.messages, { role: "user", content: "more" }] }
      yield* failsNaming(writer.save("t", more), ".log", "FIFO")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a FIFO where a long id's .id file belongs fails the list", () =>
    Effect.gen(function*() {
      const dir = yield* directory
      const id = "x".repeat(300)
      yield* saved(dir, id)
      yield* fifoAt(fileOf(dir, ".id"))
      const store = yield* Checkpointer.makeFileSystem(dir)
      yield* failsNaming(store.list!(), "cannot read")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a head committing more of its log than the file holds, or than a text holds, fails without allocating it", () =>
    Effect.gen(function*() {
      const dir = yield* directory
      yield* saved(dir, "t")
      const head = path.join(dir, "t.json")
      const text = fs.readFileSync(head, "utf8")
      const end = 8 * 2 ** 30
      fs.writeFileSync(head, text.replace(/"end":\d+/, `"end":${end}`))
      const store = yield* Checkpointer.makeFileSystem(dir)
      yield* failsNaming(store.load("t"), "missing or holds fewer than its 1 committed messages")
      // the same head over a sparse log of that size: too long to read at once
      fs.truncateSync(fileOf(dir, ".log"), end)
      const again = yield* Checkpointer.makeFileSystem(dir)
      yield* failsNaming(again.load("t"), "over the 536870888 read at once")
    }).pipe(Effect.provide(NodeContext.layer)))
})
