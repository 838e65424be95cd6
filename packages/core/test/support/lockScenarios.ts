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
 * waited.
 */
export const holderThenRival = (file: string, holderFs: FileSystem.FileSystem, holdFor: Duration.DurationInput) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const holder = FileLock.make(holderFs, { staleMillis: 1000 })
    const rival = FileLock.make(fs, { staleMillis: 1000 })
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
 * the most that held it at once.
 */
export const mostHoldersAtOnce = (file: string) =>
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
      Array.from({ length: 8 }, () => FileLock.make(slow, { staleMillis: 1000 })),
      (lock, k) => Effect.zipRight(Effect.sleep(`${k * 7} millis`), lock(file, critical)),
      { concurrency: "unbounded" }
    )
    return most
  })

/**
 * A holder whose touches never reach the disk stalls past the stale limit while a successor takes `file` over;
 * `beforeRelease` runs just before the stalled holder lets go. Gives whether the successor's lock was still there
 * after that release, then lets the successor go.
 */
export const stalledThenSuccessor = (file: string, beforeRelease: Effect.Effect<void> = Effect.void) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const stalled = FileLock.make({ ...fs, utimes: () => Effect.void }, { staleMillis: 1000 })
    const successor = FileLock.make(fs, { staleMillis: 1000 })
    const entered = yield* Deferred.make<void>()
    const leave = yield* Deferred.make<void>()
    yield* stalled(
      file,
      Effect.gen(function*() {
        yield* Effect.fork(
          successor(file, Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(leave)))
        )
        yield* Deferred.await(entered)
        yield* beforeRelease
      })
    )
    const kept = yield* fs.exists(file)
    yield* Deferred.succeed(leave, undefined)
    yield* Effect.sleep("50 millis")
    return kept
  })
