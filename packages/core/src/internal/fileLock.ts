/**
 * A lock file that excludes every process on one file system, the algorithm
 * of npm's `proper-lockfile`: the lock is taken by creating `<file>`
 * atomically (`wx`: it fails when the file exists) with a random token in it;
 * its holder touches the file's mtime every half stale limit while it holds
 * it, and removes it when done (on failure and interruption too) if it still
 * holds its own token. A waiter polls, with a backoff from 2 to 100 ms, and
 * can be interrupted while it waits. Instances of one process on one directory
 * also share an in-process lock (`storeLocks.ts`) taken first, so only other
 * processes' locks are ever polled for.
 *
 * A lock whose mtime is older than the stale limit belongs to a crashed
 * holder (or one stalled that long) and is taken over. Two waiters that both
 * see it stale must not both take it: whoever breaks a lock first creates
 * `<file>.break` (also `wx`), looks at the lock again under it, and removes
 * it only if it is still stale. So a waiter that saw the old lock never
 * removes the new one its rival created since. A `.break` file is held for
 * one `stat` and one `remove`; one older than the stale limit (its breaker
 * crashed right then) is removed.
 */
import type * as PlatformError from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/** Options of {@link make}. */
export interface Options {
  /** A lock (or `.break` file) whose mtime is older than this is taken over (ms). */
  readonly staleMillis: number
}

/**
 * The wall clock, not the `Clock` service: the lock's mtime is wall time and its holder may be another process,
 * which a test clock neither shows nor moves.
 */
const wallClock = Clock.make()

const reasonIs = (reason: string) => (error: PlatformError.PlatformError) =>
  error._tag === "SystemError" && error.reason === reason

const isAlreadyExists = reasonIs("AlreadyExists")
const isNotFound = reasonIs("NotFound")

/** Creates `file` holding `token`; whether it did (false: the file exists). */
const create = (fs: FileSystem.FileSystem, file: string, token: string) =>
  fs.writeFileString(file, token, { flag: "wx" }).pipe(
    Effect.as(true),
    Effect.catchIf(isAlreadyExists, () => Effect.succeed(false))
  )

/** Whether `file` exists and its mtime is older than the stale limit (a missing file is not stale). */
const isStale = (fs: FileSystem.FileSystem, file: string, staleMillis: number) =>
  Effect.zipWith(
    fs.stat(file).pipe(
      Effect.map((info) => Option.map(info.mtime, (mtime) => mtime.getTime())),
      Effect.catchIf(isNotFound, () => Effect.succeedNone)
    ),
    Effect.sync(() => wallClock.unsafeCurrentTimeMillis()),
    (mtime, now) => Option.isSome(mtime) && now - mtime.value > staleMillis
  )

const no = Effect.succeed(false)

/** Removes `file` if it still holds `token` (a lock taken over by another holder is left alone). */
const removeOwn = (fs: FileSystem.FileSystem, file: string, token: string) =>
  fs.readFileString(file).pipe(
    Effect.flatMap((text) => text === token ? fs.remove(file) : Effect.void),
    Effect.ignore
  )

/**
 * Removes `lock` if it is still stale, holding `<lock>.break` (so that no rival removes the lock that replaces
 * it); whether it did.
 */
const breakStale = (fs: FileSystem.FileSystem, lock: string, staleMillis: number) => {
  const breaker = `${lock}.break`
  const token = crypto.randomUUID()
  return Effect.acquireUseRelease(
    create(fs, breaker, token),
    (held) =>
      held
        ? Effect.flatMap(isStale(fs, lock, staleMillis), (stale) => stale ? Effect.as(fs.remove(lock), true) : no).pipe(
          Effect.catchIf(isNotFound, () => no)
        )
        : Effect.flatMap(isStale(fs, breaker, staleMillis), (stale) =>
          stale
            ? fs.remove(breaker).pipe(Effect.catchIf(isNotFound, () => Effect.void), Effect.zipRight(no))
            : no),
    (held) => held ? removeOwn(fs, breaker, token) : Effect.void
  )
}

const firstDelay = 2
const maxDelay = 100

/**
 * Makes the lock files of `fs`: `effect` run holding the lock `file`. Fails
 * with the file system's error when the lock cannot be made for another reason
 * than that it is held (an unwritable directory, a name too long).
 */
export const make = (fs: FileSystem.FileSystem, options: Options) => {
  const refreshEvery = Duration.millis(Math.max(1, options.staleMillis / 2))
  return <A, E, R>(
    file: string,
    effect: Effect.Effect<A, E, R>
  ): Effect.Effect<A, E | PlatformError.PlatformError, R> =>
    Effect.suspend(() => {
      const token = crypto.randomUUID()
      const touch = Effect.suspend(() => {
        const now = new Date()
        return Effect.ignore(fs.utimes(file, now, now))
      })
      const held = Effect.scoped(
        Effect.zipRight(Effect.forkScoped(Effect.forever(Effect.zipRight(wallClock.sleep(refreshEvery), touch))), effect)
      )
      const attempt = (delay: number): Effect.Effect<A, E | PlatformError.PlatformError, R> =>
        Effect.acquireUseRelease(
          create(fs, file, token),
          (created) => created ? Effect.asSome(held) : Effect.succeedNone,
          (created) => created ? removeOwn(fs, file, token) : Effect.void
        ).pipe(
          Effect.flatMap(Option.match({
            onSome: Effect.succeed,
            onNone: () =>
              isStale(fs, file, options.staleMillis).pipe(
                Effect.flatMap((stale) => stale ? breakStale(fs, file, options.staleMillis) : no),
                Effect.flatMap((broken) =>
                  broken
                    ? attempt(firstDelay)
                    : Effect.zipRight(wallClock.sleep(Duration.millis(delay)), attempt(Math.min(maxDelay, delay * 2)))
                )
              )
          }))
        )
      return attempt(firstDelay)
    })
}
