/**
 * A lock that excludes every process on one file system, the algorithm of
 * npm's `proper-lockfile`: the lock is taken by creating the empty file
 * `<lock>` atomically (flag `wx`: it fails when the file exists; one
 * `open`, cheaper than `proper-lockfile`'s `mkdir` and its recursive
 * removal); its holder touches its mtime every half stale limit while it holds
 * it, and removes it when done (on failure and interruption too). A waiter
 * polls, with a backoff from 2 to 100 ms, and can be interrupted while it
 * waits.
 *
 * A lock whose mtime is older than the stale limit belongs to a crashed
 * holder (or one stalled that long) and is taken over. So is a lock a waiter
 * saw unchanged (the same file, the same mtime) for longer than the stale
 * limit of its own monotonic clock, whatever its mtime says: one whose mtime
 * is ahead of the wall clock (clock skew on a shared file system, a clock
 * stepped back) is taken over after that wait, not when the wall clock
 * passes it, while a live holder, which touches its lock every half stale
 * limit (its clock stepped back too), keeps it. A lock (or `.break`) that is
 * not a regular file (a directory, a link to nothing), or has no valid mtime, fails the wait with a
 * `SystemError` naming it (`BadResource`): nothing could ever release it.
 *
 * Two waiters that both see it stale must not both take it: whoever breaks a
 * lock first creates `<lock>.break` (also with `wx`), looks at the lock again
 * under it, and removes it only if it is still stale. So a waiter that saw the old lock
 * never removes the new one its rival created since. A `.break` is held for
 * one `stat` and one `remove`; a stale one (its breaker crashed right then)
 * is removed.
 *
 * A holder that held its lock less than half the stale limit removes it
 * without looking: nobody could have taken it over. One that held it longer
 * (it touched it) removes it, and touches it, only while its mtime is the one
 * it last set: a lock taken over from it (it stalled past the stale limit) is
 * its new holder's, whose mtime is at least a stale limit later.
 */
import * as PlatformError from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/** Options of {@link make}. */
export interface Options {
  /** A lock (or `.break`) whose mtime is older than this is taken over (ms). */
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

const no = Effect.succeed(false)

/** Creates the file `lock`; whether it did (false: it exists). */
const create = (fs: FileSystem.FileSystem, lock: string) =>
  fs.writeFileString(lock, "", { flag: "wx" }).pipe(
    Effect.as(true),
    Effect.catchIf(isAlreadyExists, () => no)
  )

const remove = (fs: FileSystem.FileSystem, lock: string) =>
  fs.remove(lock).pipe(Effect.catchIf(isNotFound, () => Effect.void))

/** The monotonic clock (ms): how long a waiter watched a lock, or a holder held it, whatever the wall clock does. */
const monotonic = () => Number(wallClock.unsafeCurrentTimeNanos()) / 1e6

/** A lock file as `stat` shows it: its mtime (ms) and inode, which together tell one lock from the next. */
interface Seen {
  readonly mtime: number
  readonly ino: number | undefined
}

const unusable = (file: string, description: string) =>
  new PlatformError.SystemError({
    reason: "BadResource",
    module: "FileSystem",
    method: "lock",
    pathOrDescriptor: file,
    description
  })

/**
 * The lock file `file`, or none when it is gone. Fails when it is not a regular file or has no valid mtime: no
 * holder would ever remove it, nor could its age be told.
 */
const statOf = (fs: FileSystem.FileSystem, file: string) =>
  fs.stat(file).pipe(
    Effect.flatMap((info): Effect.Effect<Option.Option<Seen>, PlatformError.SystemError> => {
      if (info.type !== "File") {
        return Effect.fail(unusable(file, `a ${info.type} where a lock file belongs; remove it`))
      }
      const mtime = Option.match(info.mtime, { onNone: () => Number.NaN, onSome: (date) => date.getTime() })
      return Number.isFinite(mtime)
        ? Effect.succeedSome({ mtime, ino: Option.getOrUndefined(info.ino) })
        : Effect.fail(unusable(file, "the lock file has no valid mtime; remove it if no process holds it"))
    }),
    // (the failures above are `BadResource`)
    Effect.catchIf(isNotFound, () =>
      // gone, or a link to nothing (`stat` follows links): `create` fails on such a link forever
      fs.readLink(file).pipe(
        Effect.matchEffect({
          onFailure: () => Effect.succeed(Option.none<Seen>()),
          onSuccess: () =>
            Effect.fail(unusable(file, "a symbolic link to nothing where a lock file belongs; remove it"))
        })
      ))
  )

/** The mtime of `lock` (ms), or none when it is gone. */
const mtimeOf = (fs: FileSystem.FileSystem, lock: string) =>
  Effect.map(statOf(fs, lock), Option.map((seen) => seen.mtime))

/**
 * A waiter's judge of staleness: whether a file it found held (a lock or a `.break`) exists and is stale, its
 * mtime older than the stale limit or the same file with the same mtime watched by this waiter for longer than
 * the stale limit (see the module's comment).
 */
const makeIsStale = (fs: FileSystem.FileSystem, staleMillis: number) => {
  const watched = new Map<string, { readonly seen: Seen; readonly since: number }>()
  return (file: string) =>
    Effect.map(statOf(fs, file), (found) => {
      if (Option.isNone(found)) {
        watched.delete(file)
        return false
      }
      const seen = found.value
      if (wallClock.unsafeCurrentTimeMillis() - seen.mtime > staleMillis) return true
      const at = monotonic()
      const before = watched.get(file)
      if (before === undefined || before.seen.mtime !== seen.mtime || before.seen.ino !== seen.ino) {
        watched.set(file, { seen, since: at })
        return false
      }
      return at - before.since > staleMillis
    })
}

type IsStale = ReturnType<typeof makeIsStale>

/**
 * Removes `lock` if it is still stale, holding `<lock>.break` (so that no rival removes the lock that replaces
 * it); whether it did.
 */
const breakStale = (fs: FileSystem.FileSystem, lock: string, isStale: IsStale) => {
  const breaker = `${lock}.break`
  return Effect.acquireUseRelease(
    create(fs, breaker),
    (held) =>
      held
        ? Effect.flatMap(isStale(lock), (stale) => stale ? Effect.as(remove(fs, lock), true) : no)
        : Effect.flatMap(isStale(breaker), (stale) => stale ? Effect.zipRight(remove(fs, breaker), no) : no),
    (held) => held ? Effect.ignore(remove(fs, breaker)) : Effect.void
  )
}

const firstDelay = 2
const maxDelay = 100

/**
 * Makes the locks of `fs`: `effect` run holding the lock `lock` (a path).
 * Fails with the file system's error when the lock cannot be made for another
 * reason than that it is held (an unwritable directory, a name too long).
 */
export const make = (fs: FileSystem.FileSystem, options: Options) => {
  const { staleMillis } = options
  const refreshEvery = Duration.millis(Math.max(1, staleMillis / 2))
  return <A, E, R>(
    lock: string,
    effect: Effect.Effect<A, E, R>
  ): Effect.Effect<A, E | PlatformError.PlatformError, R> =>
    Effect.suspend(() => {
      /** When this holder created the lock, then the mtime it last gave it; undefined once it lost it. */
      let mtime: number | undefined
      /** Whether the lock's mtime is still the one this holder last gave it (a takeover's is a stale limit later). */
      const isOwn = Effect.map(
        mtimeOf(fs, lock),
        (found) => mtime !== undefined && Option.isSome(found) && Math.abs(found.value - mtime) < staleMillis / 2
      )
      // the mtime read back, not the one asked for: a touch that did not land leaves the lock to go stale
      const touch = Effect.flatMap(isOwn, (own) => {
        if (!own) return Effect.sync(() => void (mtime = undefined))
        const at = new Date(wallClock.unsafeCurrentTimeMillis())
        return Effect.zipRight(
          Effect.ignore(fs.utimes(lock, at, at)),
          Effect.map(mtimeOf(fs, lock), (found) => void (mtime = Option.getOrUndefined(found)))
        )
      })
      /** When (monotonic) this holder created the lock. */
      let acquired = 0
      const refreshing = Effect.forever(Effect.zipRight(wallClock.sleep(refreshEvery), Effect.ignore(touch)))
      const held = Effect.scoped(Effect.zipRight(Effect.forkScoped(refreshing), effect))
      const release = Effect.suspend(() =>
        monotonic() - acquired < staleMillis / 2
          ? Effect.ignore(remove(fs, lock))
          : Effect.flatMap(isOwn, (own) => own ? remove(fs, lock) : Effect.void).pipe(Effect.ignore)
      )
      const isStale = makeIsStale(fs, staleMillis)
      const attempt = (delay: number): Effect.Effect<A, E | PlatformError.PlatformError, R> =>
        Effect.acquireUseRelease(
          Effect.suspend(() => {
            const started = monotonic()
            const at = wallClock.unsafeCurrentTimeMillis()
            return Effect.map(create(fs, lock), (created) => {
              acquired = started
              mtime = created ? at : undefined
              return created
            })
          }),
          (created) => created ? Effect.asSome(held) : Effect.succeedNone,
          (created) => created ? release : Effect.void
        ).pipe(
          Effect.flatMap(Option.match({
            onSome: Effect.succeed,
            onNone: () =>
              isStale(lock).pipe(
                Effect.flatMap((stale) => stale ? breakStale(fs, lock, isStale) : no),
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
