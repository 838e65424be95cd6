/**
 * The file-system checkpointer's lock files against clocks that disagree (a lock file whose mtime is ahead of the
 * wall clock: skew on a shared file system, a clock stepped back) and against lock files no holder can release
 * (a directory, a file without a valid mtime, one that cannot be read). Each case ends: the lock is taken over, the
 * waiter goes on waiting for a live holder, or the save fails with an error naming the file; none hangs.
 */
import { FileSystem } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as PlatformError from "@effect/platform/Error"
import { assert, describe, it } from "@effect/vitest"
import { AgentError, Checkpointer } from "@stepwise-agent/core"
import { Cause, Effect, Layer, Option } from "effect"
import * as path from "node:path"
import { vi } from "vitest"
import * as LockScenarios from "./support/lockScenarios.js"

const checkpoint: Checkpointer.Checkpoint = {
  version: 1,
  threadId: "t",
  messages: [{ role: "user", content: "hello" }],
  slices: {},
  incarnation: "i1"
}

const tempDirectory = LockScenarios.tempDirectory("stepwise-lock-clock-")

const hour = 3_600_000

/** A checkpointer on `directory` whose locks go stale after a second, on the node file system or `fs`. */
const onDisk = (directory: string, fs?: FileSystem.FileSystem) =>
  Checkpointer.makeFileSystem(directory, { staleLockAfter: "1 second" }).pipe(
    Effect.provide(
      fs === undefined
        ? NodeContext.layer
        : Layer.merge(NodeContext.layer, Layer.succeed(FileSystem.FileSystem, fs))
    )
  )

/** Sets the mtime of `file` to `offset` ms from now. */
const age = (file: string, offset: number) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => {
    const at = new Date(Date.now() + offset)
    return fs.utimes(file, at, at)
  })

/**
 * `effect`, or a failure of the test when it has not ended within `millis` (a hang). The bounds are far above
 * what the saves take (milliseconds, or a stale limit of a second, on a quiet machine), for a loaded machine.
 */
const within = <A, E, R>(millis: number, effect: Effect.Effect<A, E, R>) =>
  Effect.timeoutFailCause(effect, {
    duration: millis,
    onTimeout: () => Cause.die(new Error(`still waiting after ${millis} ms`))
  })

describe("Checkpointer.makeFileSystem: a lock file whose mtime is ahead of the wall clock", () => {
  for (const [variant, offset] of [["an hour ahead", hour], ["ahead by less than the stale limit", 500]] as const) {
    it.scopedLive(
      `left by a crashed holder, ${variant}: taken over after the stale limit, then removed`,
      () =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const directory = yield* tempDirectory
          const lock = path.join(directory, "t.lock")
          yield* fs.writeFileString(lock, "")
          yield* age(lock, offset)
          const checkpointer = yield* onDisk(directory)
          yield* within(20_000, checkpointer.save("t", checkpoint, { expected: "absent" }))
          assert.isFalse(yield* fs.exists(lock))
          assert.deepStrictEqual(yield* checkpointer.load("t"), Option.some(checkpoint))
        }).pipe(Effect.provide(NodeContext.layer)),
      30_000
    )
  }

  it.scopedLive(
    "held by a live holder whose clock is an hour ahead: a rival waits until it is released",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const file = path.join(directory, "t.lock")
        // the holder's touches write its clock's time: an hour ahead of the rival's
        const ahead: FileSystem.FileSystem = {
          ...fs,
          utimes: (target, atime, mtime) => fs.utimes(target, atime, new Date(new Date(mtime).getTime() + hour))
        }
        assert.deepStrictEqual(yield* LockScenarios.holderThenRival(file, ahead, "3 seconds"), [
          "holder done",
          "rival in"
        ])
        assert.isFalse(yield* fs.exists(file))
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )

  it.scopedLive(
    "several takers of one lock an hour ahead: exactly one holds it at a time",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const file = path.join(directory, "t.lock")
        yield* fs.writeFileString(file, "")
        yield* age(file, hour)
        // (one second: the takers wait that long, watching the lock ahead unchanged, before any takes it)
        assert.strictEqual(yield* within(20_000, LockScenarios.mostHoldersAtOnce(file, 1000)), 1)
        assert.isFalse(yield* fs.exists(file))
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )

  it.scopedLive(
    "a `.break` an hour ahead, left by a crashed breaker, is removed: the stale lock is taken over",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const lock = path.join(directory, "t.lock")
        yield* fs.writeFileString(lock, "")
        yield* age(lock, -60_000)
        yield* fs.writeFileString(`${lock}.break`, "")
        yield* age(`${lock}.break`, hour)
        const checkpointer = yield* onDisk(directory)
        yield* within(20_000, checkpointer.save("t", checkpoint, { expected: "absent" }))
        assert.deepStrictEqual((yield* fs.readDirectory(directory)).filter((file) => !/\.(json|log)$/.test(file)), [])
        assert.deepStrictEqual(yield* checkpointer.load("t"), Option.some(checkpoint))
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )
})

/** A save's failure: a `CheckpointError` whose reason names `file` and says `says`. */
const assertNames = (failure: AgentError.CheckpointError, file: string, says: string) => {
  assert.instanceOf(failure, AgentError.CheckpointError)
  assert.include(failure.reason, file)
  assert.include(failure.reason, says)
}

describe("Checkpointer.makeFileSystem: a lock file no holder can release fails the save, naming it", () => {
  it.scopedLive("a directory where the lock file belongs", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const lock = path.join(directory, "t.lock")
      yield* fs.makeDirectory(lock)
      const checkpointer = yield* onDisk(directory)
      assertNames(yield* within(20_000, Effect.flip(checkpointer.save("t", checkpoint))), lock, "Directory")
      assert.isTrue(Option.isNone(yield* checkpointer.load("t")))
    }).pipe(Effect.provide(NodeContext.layer)), 30_000)

  it.scopedLive("a directory where the `.break` of a stale lock belongs", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const lock = path.join(directory, "t.lock")
      yield* fs.writeFileString(lock, "")
      yield* age(lock, -60_000)
      yield* fs.makeDirectory(`${lock}.break`)
      const checkpointer = yield* onDisk(directory)
      assertNames(yield* within(20_000, Effect.flip(checkpointer.save("t", checkpoint))), `${lock}.break`, "Directory")
    }).pipe(Effect.provide(NodeContext.layer)), 30_000)

  it.scopedLive(
    "a link to nothing where the lock file, or the `.break` of a stale lock, belongs",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const lock = path.join(directory, "t.lock")
        yield* fs.symlink(path.join(directory, "nowhere"), lock)
        const checkpointer = yield* onDisk(directory)
        assertNames(yield* within(20_000, Effect.flip(checkpointer.save("t", checkpoint))), lock, "link to nothing")
        assertNames(yield* within(20_000, Effect.flip(checkpointer.delete("t"))), lock, "link to nothing")
        // a stale lock, and a link to nothing where its breaker's file belongs
        yield* fs.remove(lock)
        yield* fs.writeFileString(lock, "")
        yield* age(lock, -60_000)
        yield* fs.symlink(path.join(directory, "nowhere"), `${lock}.break`)
        assertNames(
          yield* within(20_000, Effect.flip(checkpointer.save("t", checkpoint))),
          `${lock}.break`,
          "link to nothing"
        )
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )

  for (
    const [variant, mtime] of [
      ["no mtime", Option.none<Date>()],
      ["an invalid mtime", Option.some(new Date(Number.NaN))]
    ] as const
  ) {
    it.scopedLive(`a lock file with ${variant}`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const lock = path.join(directory, "t.lock")
        yield* fs.writeFileString(lock, "")
        const checkpointer = yield* onDisk(directory, {
          ...fs,
          stat: (file) => file === lock ? Effect.map(fs.stat(file), (info) => ({ ...info, mtime })) : fs.stat(file)
        })
        assertNames(yield* within(20_000, Effect.flip(checkpointer.save("t", checkpoint))), lock, "mtime")
      }).pipe(Effect.provide(NodeContext.layer)), 30_000)
  }

  it.scopedLive("a lock file that cannot be read", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const lock = path.join(directory, "t.lock")
      yield* fs.writeFileString(lock, "")
      const checkpointer = yield* onDisk(directory, {
        ...fs,
        stat: (file) =>
          file === lock
            ? Effect.fail(
              new PlatformError.SystemError({
                reason: "PermissionDenied",
                module: "FileSystem",
                method: "stat",
                pathOrDescriptor: file
              })
            )
            : fs.stat(file)
      })
      assertNames(yield* within(20_000, Effect.flip(checkpointer.save("t", checkpoint))), lock, "PermissionDenied")
    }).pipe(Effect.provide(NodeContext.layer)), 30_000)
})

describe("the lock file of a holder whose wall clock is stepped back while it holds it", () => {
  it.scopedLive(
    "past the stale limit, taken over: its release leaves its successor's lock alone",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const file = path.join(directory, "t.lock")
        const wallTime = Date.now
        // the wall clock goes back an hour before the stalled holder lets go (and comes back once it did)
        const kept = yield* LockScenarios.stalledThenSuccessor(
          file,
          Effect.sync(() => void vi.spyOn(Date, "now").mockImplementation(() => wallTime() - hour))
        ).pipe(Effect.ensuring(Effect.sync(() => vi.restoreAllMocks())))
        assert.isTrue(kept, "the successor's lock is left alone")
        assert.isFalse(yield* fs.exists(file))
      }).pipe(Effect.provide(NodeContext.layer)),
    30_000
  )
})
