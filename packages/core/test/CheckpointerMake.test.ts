/**
 * `Checkpointer.make` builds a checkpointer from a minimal implementation:
 * `load`, `delete`, and `save`, `append` or both, deriving the one left out.
 * A checkpointer's capability to take a checkpoint without its whole thread
 * built is its `append` member, visible to the type and to a spread.
 */
import { FileSystem, KeyValueStore } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Checkpointer } from "@stepwise-agent/core"
import { Effect, FastCheck, Option } from "effect"
import * as nodeFs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const checkpoint = (messages: ReadonlyArray<unknown>): Checkpointer.Checkpoint => ({
  version: 1,
  threadId: "t",
  messages,
  slices: { a: { n: messages.length } }
})

describe("Checkpointer.make", () => {
  it.effect("derives append from save: the whole checkpoint reaches save", () =>
    Effect.gen(function*() {
      const saved: Array<Checkpointer.Checkpoint> = []
      const checkpointer = Checkpointer.make({
        load: () => Effect.succeedNone,
        save: (_, value) => Effect.sync(() => void saved.push(value)),
        delete: () => Effect.void
      })
      const messages = [{ role: "user", content: "hi" }]
      yield* checkpointer.append("t", Checkpointer.deferred(checkpoint(messages)))
      assert.strictEqual(saved.length, 1)
      assert.strictEqual(saved[0].messages, messages)
      assert.deepStrictEqual(saved[0], checkpoint(messages))
    }))

  it.effect("derives save from append: append gets the checkpoint, deferred", () =>
    Effect.gen(function*() {
      const appended: Array<Checkpointer.DeferredCheckpoint> = []
      const checkpointer = Checkpointer.make({
        load: () => Effect.succeedNone,
        append: (_, value) => Effect.sync(() => void appended.push(value)),
        delete: () => Effect.void
      })
      const messages = [{ role: "user", content: "hi" }, { role: "assistant", content: "yes" }]
      yield* checkpointer.save("t", checkpoint(messages))
      assert.strictEqual(appended.length, 1)
      const got = appended[0]
      assert.strictEqual(got.length, 2)
      assert.strictEqual(got.messages(), messages)
      assert.deepStrictEqual(got.from(1), [messages[1]])
      // the checkpoint without its messages
      assert.deepStrictEqual(got.checkpoint, { version: 1, threadId: "t", slices: { a: { n: 2 } } })
      assert.deepStrictEqual(Checkpointer.build(got), checkpoint(messages))
    }))

  it.effect("keeps both when both are given", () =>
    Effect.gen(function*() {
      const save: Checkpointer.Service["save"] = () => Effect.void
      const append: NonNullable<Checkpointer.Service["append"]> = () => Effect.void
      const checkpointer = Checkpointer.make({
        load: () => Effect.succeedNone,
        save,
        append,
        delete: () => Effect.void
      })
      assert.strictEqual(checkpointer.save, save)
      assert.strictEqual(checkpointer.append, append)
    }))

  it.effect("made with neither save nor append (from JavaScript), fails each save with a CheckpointError", () =>
    Effect.gen(function*() {
      const checkpointer = Checkpointer.make({ load: () => Effect.succeedNone, delete: () => Effect.void } as any)
      const saved = yield* Effect.flip(checkpointer.save("t", checkpoint([])))
      assert.strictEqual(saved._tag, "CheckpointError")
      assert.include(saved.reason, "neither save nor append")
      const appended = yield* Effect.flip(checkpointer.append("t", Checkpointer.deferred(checkpoint([]))))
      assert.strictEqual(appended._tag, "CheckpointError")
    }))

  it.prop(
    "a deferred checkpoint extends another exactly when it keeps its messages, by reference",
    [FastCheck.integer({ min: 0, max: 6 }), FastCheck.integer({ min: 0, max: 6 }), FastCheck.boolean()],
    ([before, more, replaced]) => {
      const messages = Array.from({ length: before + more }, (_, i) => ({ i }))
      const previous = Checkpointer.deferred(checkpoint(messages.slice(0, before)))
      const next = messages.slice()
      if (replaced && before > 0) next[before - 1] = { ...next[before - 1] }
      assert.strictEqual(Checkpointer.deferred(checkpoint(next)).extends(previous), !(replaced && before > 0))
    }
  )
})

describe("the checkpointers of this package", () => {
  const stores = [
    ["memory", Checkpointer.makeMemory],
    ["KeyValueStore", Checkpointer.makeKeyValueStore().pipe(Effect.provide(KeyValueStore.layerMemory))],
    [
      "file system",
      Effect.flatMap(
        Effect.flatMap(
          FileSystem.FileSystem,
          (fs) => fs.makeTempDirectoryScoped({ directory: os.tmpdir(), prefix: "stepwise-make-" })
        ),
        (directory) => Checkpointer.makeFileSystem(directory)
      )
    ]
  ] as const

  for (const [name, open] of stores) {
    it.scoped(`${name}: has append, and save and append store the same checkpoint`, () =>
      Effect.gen(function*() {
        const checkpointer: Checkpointer.Service = yield* open
        assert.isFunction(checkpointer.append)
        const first = [{ role: "user", content: "a" }]
        yield* checkpointer.save("t", checkpoint(first))
        assert.deepStrictEqual(Option.getOrThrow(yield* checkpointer.load("t")), checkpoint(first))
        const second = [...first, { role: "assistant", content: "b" }]
        yield* checkpointer.append!("t", Checkpointer.deferred(checkpoint(second)))
        assert.deepStrictEqual(Option.getOrThrow(yield* checkpointer.load("t")), checkpoint(second))
        yield* checkpointer.delete("t")
        assert.isTrue(Option.isNone(yield* checkpointer.load("t")))
      }).pipe(Effect.provide(NodeContext.layer)))
  }
})

describe("Checkpointer.makeFileSystem: the directory", () => {
  // what a JavaScript caller (or a config read without its schema) may pass: the types refuse these
  const notPaths: ReadonlyArray<readonly [string, unknown]> = [
    ["an object", { directory: "/tmp" }],
    ["a number", 42],
    ["null", null],
    ["undefined", undefined],
    ["an empty string", ""]
  ]
  for (const [what, directory] of notPaths) {
    it.effect(`${what} fails with a CheckpointError saying so, not a defect`, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Checkpointer.makeFileSystem(directory as string))
        assert.strictEqual(error._tag, "CheckpointError")
        assert.include(error.reason, "the checkpoint directory must be a non-empty path")
        assert.include(error.reason, what)
      }).pipe(Effect.provide(NodeContext.layer)))
  }

  it.scoped("a directory that cannot be made (under a file) fails with a CheckpointError naming it", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const file = path.join(yield* fs.makeTempDirectoryScoped(), "a-file")
      yield* fs.writeFileString(file, "")
      const error = yield* Effect.flip(Checkpointer.makeFileSystem(path.join(file, "threads")))
      assert.strictEqual(error._tag, "CheckpointError")
      assert.strictEqual(error.threadId, "")
      assert.include(error.reason, `cannot create the checkpoint directory "${path.join(file, "threads")}"`)
    }).pipe(Effect.provide(NodeContext.layer)))

  // (a recursive mkdir there never ended: it makes /proc, finds it, tries /proc/x again; the folder is
  // made one level at a time now)
  it.scoped.skipIf(!nodeFs.existsSync("/proc/self"))(
    "a directory whose folder answers ENOENT though it exists (under /proc) fails at once, naming it",
    () =>
      Effect.gen(function*() {
        for (const directory of ["/proc/stepwise-x/threads", "/proc/stepwise-x"]) {
          const error = yield* Effect.flip(Checkpointer.makeFileSystem(directory)).pipe(
            Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error(`${directory}: no answer`) })
          )
          assert.strictEqual(error._tag, "CheckpointError")
          assert.include(error.reason, `cannot create the checkpoint directory "${directory}"`)
        }
      }).pipe(Effect.provide(NodeContext.layer))
  )
})
