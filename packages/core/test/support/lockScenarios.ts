/**
 * Scenarios of the file-system checkpointer's lock files (`internal/fileLock.ts`) that several tests play with
 * other file systems or clocks: a holder and a rival, many takers of a stale lock, a stalled holder and its
 * successor.
 */
import { FileSystem } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Deferred, type Duration, Effect, Fiber } from "effect"
import * as os from "node:os"
import * as FileLock from "../../src/internal/fileLock.js"

/** A temporary directory for the test's scope, its name starting with `prefix`. */
export const tempDirectory = (prefix: string) =>
  Effect.flatMap(
    FileSystem.FileSystem,
    (fs) => fs.makeTempDirectoryScoped({ directory: os.tmpdir(), prefix })
  ).pipe(Effect.provide(NodeContext.layer))

/**
 * A holder (its locks on `holderFs`) takes `file` for `holdFor`; once it holds it, a rival (on the node file
 * system) asks for it too. Gives the order in which they got done: `["holder done", "rival in"]` when the rival
 * waited. The rival takes over a lock left untouched for 2 s (`holdFor` must be longer); the holder touches its
 * lock every 250 ms (half its stale limit), so a holder held up by a loaded machine for up to 1.7 s between two
 * touches still keeps it (with one stale limit for both, 500 ms was the margin: too little on a busy machine).
 */
export const holderThenRival = (file: string, holderFs: FileSystem.FileSystem, holdFor: Duration.DurationInput) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const holder = FileLock.make(holderFs, { staleMillis: 500 })
    const rival = FileLock.make(fs, { staleMillis: 2000 })
    const order: Array<string> = []
    const entered = yield* Deferred.make<void>()
    const holding = yield* Effect.fork(holder(
      file,
      Effect.gen(function*() {
        yield* Deferred.succeed(entered, undefined)
        yield* Effect.sleep(holdFor)
        order.push("holder done")
      })
    ))
    yield* Deferred.await(entered)
    yield* rival(file, Effect.sync(() => order.push("rival in")))
    yield* Fiber.join(holding)
    return order
  })

/**
 * Eight takers of `file` (a stale lock, or none), one after another 7 ms apart, each holding it 30 ms, on a file
 * system whose removal of `file` is slow (a taker that saw it stale has time to remove a rival's new lock). Gives
 * the most that held it at once. `staleMillis` is the takers' stale limit: a taker held up longer than that in
 * its 30 ms (a loaded machine) may rightly lose the lock, so keep it long where the test does not wait for it.
 */
export const mostHoldersAtOnce = (file: string, staleMillis: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    let inside = 0
    let most = 0
    const critical = Effect.gen(function*() {
      inside++
      most = Math.max(most, inside)
      yield* Effect.sleep("30 millis")
      inside--
    })
    const slow: FileSystem.FileSystem = {
      ...fs,
      remove: (target, options) =>
        target === file
          ? Effect.zipRight(Effect.sleep("20 millis"), fs.remove(target, options))
          : fs.remove(target, options)
    }
    yield* Effect.forEach(
      Array.from({ length: 8 }, () => FileLock.make(slow, { staleMillis })),
      (lock, k) => Effect.zipRight(Effect.sleep(`${k * 7} millis`), lock(file, critical)),
      { concurrency: "unbounded" }
    )
    return most
  })

/**
 * A holder whose touches never reach the disk stalls past the stale limit while a successor takes `file` over;
 * `beforeRelease` runs just before the stalled holder lets go. Gives whether the successor's lock was still there
 * after that release, once the successor let go (its lock removed).
 */
export const stalledThenSuccessor = (file: string, beforeRelease: Effect.Effect<void> = Effect.void) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const stalled = FileLock.make({ ...fs, utimes: () => Effect.void }, { staleMillis: 1000 })
    const successor = FileLock.make(fs, { staleMillis: 1000 })
    const entered = yield* Deferred.make<void>()
    const leave = yield* Deferred.make<void>()
    const holding = yield* stalled(
      file,
      Effect.gen(function*() {
        const holding = yield* Effect.fork(
          successor(file, Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(leave)))
        )
        yield* Deferred.await(entered)
        yield* beforeRelease
        return holding
      })
    )
    const kept = yield* fs.exists(file)
    yield* Deferred.succeed(leave, undefined)
    yield* Fiber.join(holding)
    return kept
  })
