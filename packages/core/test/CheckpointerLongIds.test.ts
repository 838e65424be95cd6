/**
 * Every thread id the file-system checkpointer is given is saved, loaded, listed and deleted, however long it is:
 * an id whose URI-encoded form leaves no room for a file's suffix in 255 bytes gets a bounded name derived from it
 * (the id itself is kept beside, for listing). A short id keeps the name every earlier version gave it.
 */
import { FileSystem } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { AgentError, Checkpointer } from "@stepwise-agent/core"
import { Effect, FastCheck, Layer, Option } from "effect"
import * as os from "node:os"
import * as path from "node:path"

const checkpoint = (threadId: string, messages = 2): Checkpointer.Checkpoint => ({
  version: 1,
  threadId,
  messages: Array.from({ length: messages }, (_, n) => ({ role: "user", content: `message ${n} of ${threadId}` })),
  slices: {},
  incarnation: "i1"
})

const tempDirectory = Effect.flatMap(
  FileSystem.FileSystem,
  (fs) => fs.makeTempDirectoryScoped({ directory: os.tmpdir(), prefix: "stepwise-long-ids-" })
).pipe(Effect.provide(NodeContext.layer))

const bytes = (text: string) => new TextEncoder().encode(text).length

/**
 * A checkpointer on `directory` whose file system records the file name of every path it is given, and those
 * names.
 */
const recording = (directory: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const names = new Set<string>()
    const seen = <A>(file: string, effect: A) => {
      names.add(path.basename(file))
      return effect
    }
    const recorded: FileSystem.FileSystem = {
      ...fs,
      readFileString: (file, encoding) => seen(file, fs.readFileString(file, encoding)),
      writeFileString: (file, text, options) => seen(file, fs.writeFileString(file, text, options)),
      writeFile: (file, data, options) => seen(file, fs.writeFile(file, data, options)),
      open: (file, options) => seen(file, fs.open(file, options)),
      rename: (from, to) => seen(from, seen(to, fs.rename(from, to))),
      remove: (file, options) => seen(file, fs.remove(file, options)),
      stat: (file) => seen(file, fs.stat(file)),
      utimes: (file, atime, mtime) => seen(file, fs.utimes(file, atime, mtime))
    }
    const checkpointer = yield* Checkpointer.makeFileSystem(directory).pipe(
      Effect.provide(Layer.merge(NodeContext.layer, Layer.succeed(FileSystem.FileSystem, recorded)))
    )
    return { checkpointer, names }
  })

/** Saves (twice: the second appends), loads, lists and deletes `ids` on a fresh checkpointer of `directory`. */
const roundTrip = (directory: string, ids: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const { checkpointer, names } = yield* recording(directory)
    for (const id of ids) {
      yield* checkpointer.save(id, checkpoint(id, 1), { expected: "absent" })
      yield* checkpointer.save(id, checkpoint(id, 2), { expected: { incarnation: "i1" } })
    }
    const sorted = [...ids].sort()
    // another instance (another process, say) knows nothing of these threads but what is on disk
    const other = yield* Checkpointer.makeFileSystem(directory)
    for (const instance of [checkpointer, other]) {
      assert.deepStrictEqual((yield* instance.list!()).threadIds, sorted)
      for (const id of ids) assert.deepStrictEqual(yield* instance.load(id), Option.some(checkpoint(id, 2)))
    }
    for (const id of ids) yield* checkpointer.delete(id)
    assert.deepStrictEqual((yield* other.list!()).threadIds, [])
    for (const id of ids) assert.isTrue(Option.isNone(yield* other.load(id)))
    assert.deepStrictEqual(yield* fs.readDirectory(directory), [])
    const longest = Math.max(...[...names].map(bytes))
    assert.isAtMost(longest, 255, "a file name longer than 255 bytes")
  }).pipe(Effect.provide(NodeContext.layer))

describe("Checkpointer.makeFileSystem: thread ids of any length", () => {
  for (const length of [1, 200, 209, 210, 255, 256, 1_000, 10_000]) {
    it.scopedLive(
      `an id of ${length} bytes: saved, loaded, listed and deleted, every file name within 255 bytes`,
      () =>
        Effect.gen(function*() {
          const directory = yield* tempDirectory
          yield* roundTrip(directory, ["x".repeat(length), `/${"y".repeat(length - 1)}`])
        }),
      30_000
    )
  }

  it.scopedLive("multi-byte UTF-8 ids (2, 3 and 4 bytes a character), short and long", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory
      yield* roundTrip(directory, [
        "ü",
        "ü".repeat(34),
        "ü".repeat(35),
        "ü".repeat(200),
        "日本".repeat(11),
        "日本".repeat(12),
        "日本".repeat(500),
        "😀".repeat(17),
        "😀".repeat(18),
        "😀".repeat(3_000)
      ])
    }), 30_000)

  it.scopedLive("ids that differ only past the cut of a long name are separate threads", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory
      const start = "x".repeat(300)
      yield* roundTrip(directory, [
        start,
        `${start}a`,
        `${start}b`,
        `${start}ü`,
        `${"%".repeat(100)}a`,
        `${"%".repeat(100)}b`
      ])
    }), 30_000)

  it.scopedLive(
    "a short id keeps the file name earlier versions gave it (its URI encoding); a long one is bounded",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const checkpointer = yield* Checkpointer.makeFileSystem(directory)
        const short = `a/b ü${"x".repeat(209 - "a%2Fb%20%C3%BC".length)}`
        const long = `${short}x`
        yield* checkpointer.save(short, checkpoint(short))
        yield* checkpointer.save(long, checkpoint(long))
        const heads = (yield* fs.readDirectory(directory)).filter((file) => file.endsWith(".json")).sort()
        assert.strictEqual(heads.length, 2)
        assert.include(heads, `${encodeURIComponent(short)}.json`)
        const hashed = heads.find((file) => file !== `${encodeURIComponent(short)}.json`)!
        assert.match(hashed, /^a%2Fb%20%C3%BCx+#[0-9a-f]{64}\.json$/)
        assert.strictEqual(yield* fs.readFileString(path.join(directory, hashed.replace(/\.json$/, ".id"))), long)
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )

  it.scopedLive(
    "a thread stored under a short id's name by an earlier version loads and lists",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const id = "old thread/ü"
        // the previous format: the whole checkpoint in `<thread>.json`
        yield* fs.writeFileString(
          path.join(directory, `${encodeURIComponent(id)}.json`),
          yield* Checkpointer.toJson(id, checkpoint(id))
        )
        const checkpointer = yield* Checkpointer.makeFileSystem(directory)
        assert.deepStrictEqual((yield* checkpointer.list!()).threadIds, [id])
        assert.deepStrictEqual(yield* checkpointer.load(id), Option.some(checkpoint(id)))
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )

  it.scopedLive(
    "listing leaves out a long name's head whose id is gone or is another id's",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const checkpointer = yield* Checkpointer.makeFileSystem(directory)
        const [kept, lost, forged] = ["k", "l", "f"].map((c) => c.repeat(300))
        for (const id of [kept!, lost!, forged!]) yield* checkpointer.save(id, checkpoint(id))
        const idFile = (start: string) =>
          Effect.map(
            fs.readDirectory(directory),
            (files) => path.join(directory, files.find((file) => file.startsWith(start) && file.endsWith(".id"))!)
          )
        yield* fs.remove(yield* idFile("lll"))
        yield* fs.writeFileString(yield* idFile("fff"), kept!)
        assert.deepStrictEqual((yield* checkpointer.list!()).threadIds, [kept])
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )

  it.scopedLive(
    "an id with a lone surrogate (no UTF-8, so no file name) fails with CheckpointError",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory
        const checkpointer = yield* Checkpointer.makeFileSystem(directory)
        for (const id of ["\uD800", `a${"x".repeat(300)}\uDC00`]) {
          const saved = yield* Effect.flip(checkpointer.save(id, checkpoint(id)))
          assert.instanceOf(saved, AgentError.CheckpointError)
          assert.include(saved.reason, "lone surrogate")
          const loaded = yield* Effect.flip(checkpointer.load(id))
          assert.instanceOf(loaded, AgentError.CheckpointError)
          assert.strictEqual(loaded.operation, "load")
        }
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )

  it.live.prop(
    "any ids: saved, loaded, listed and deleted, every file name within 255 bytes",
    {
      ids: FastCheck.uniqueArray(
        FastCheck.oneof(
          FastCheck.fullUnicodeString({ minLength: 1, maxLength: 8 }),
          FastCheck.fullUnicodeString({ minLength: 40, maxLength: 400 }),
          FastCheck.string({ minLength: 150, maxLength: 300 })
        ),
        { minLength: 1, maxLength: 6 }
      )
    },
    ({ ids }) => Effect.scoped(Effect.flatMap(tempDirectory, (directory) => roundTrip(directory, ids))),
    { timeout: 120_000, fastCheck: { numRuns: 40 } }
  )
})

describe("Checkpointer.makeFileSystem on a case-insensitive file system", () => {
  /** The file system with every name under `directory` taken in small letters, as macOS and Windows take names. */
  const caseInsensitive = (directory: string) =>
    Effect.map(FileSystem.FileSystem, (fs) => {
      const fold = (value: unknown) =>
        typeof value === "string" && value.startsWith(`${directory}/`)
          ? `${directory}/${value.slice(directory.length + 1).toLowerCase()}`
          : value
      return new Proxy(fs, {
        get: (target, key) => {
          const member: unknown = Reflect.get(target, key)
          return typeof member === "function"
            ? (...args: Array<unknown>) => Reflect.apply(member, target, args.map(fold))
            : member
        }
      })
    })

  it.scopedLive(
    "a thread whose id differs from a stored one only in case fails to load or save: nothing is read",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory
        const fs = yield* caseInsensitive(directory)
        const checkpointer = yield* Checkpointer.makeFileSystem(directory).pipe(
          Effect.provide(Layer.merge(NodeContext.layer, Layer.succeed(FileSystem.FileSystem, fs)))
        )
        yield* checkpointer.save("Alice", checkpoint("Alice"))
        const load = yield* Effect.flip(checkpointer.load("alice"))
        assert.instanceOf(load, AgentError.CheckpointError)
        assert.include(load.reason, "differ only in case")
        const save = yield* Effect.flip(checkpointer.save("alice", checkpoint("alice")))
        assert.instanceOf(save, AgentError.CheckpointError)
        // Alice's thread is as it was
        const alice = yield* checkpointer.load("Alice")
        assert.deepStrictEqual(Option.map(alice, (found) => found.messages), Option.some(checkpoint("Alice").messages))
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )
})
