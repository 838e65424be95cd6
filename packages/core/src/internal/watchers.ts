/**
 * The watchers of an agent's runs: each gets every event published while it
 * watches, in order. Closing a watcher's scope ends its stream once it has
 * taken what was published before the close, so a consumer that outlives
 * the scope (an inspector flushing its pages) loses no event.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

interface Watcher<A> {
  queued: Array<A>
  wake: Deferred.Deferred<void>
  closed: boolean
}

export interface Watchers<A> {
  /** How many watch now: publishing to none is free. */
  readonly size: () => number
  /** Hands `event` to every watcher. */
  readonly publish: (event: A) => void
  /** A stream of the events published while the scope is open. */
  readonly watch: Effect.Effect<Stream.Stream<A>, never, Scope.Scope>
}

const wakeUp = <A>(watcher: Watcher<A>) => {
  const woken = watcher.wake
  watcher.wake = Deferred.unsafeMake<void>(FiberId.none)
  Deferred.unsafeDone(woken, Exit.void)
}

export const make = <A>(): Watchers<A> => {
  const all = new Set<Watcher<A>>()
  const publish = (event: A) => {
    for (const watcher of all) {
      watcher.queued.push(event)
      wakeUp(watcher)
    }
  }
  const watch = Effect.acquireRelease(
    Effect.sync((): Watcher<A> => {
      const watcher: Watcher<A> = { queued: [], wake: Deferred.unsafeMake<void>(FiberId.none), closed: false }
      all.add(watcher)
      return watcher
    }),
    (watcher) =>
      Effect.sync(() => {
        all.delete(watcher)
        watcher.closed = true
        wakeUp(watcher)
      })
  ).pipe(Effect.map((watcher) => {
    const pull: Effect.Effect<ReadonlyArray<A>, Option.Option<never>> = Effect.suspend(() => {
      if (watcher.queued.length > 0) {
        const taken = watcher.queued
        watcher.queued = []
        return Effect.succeed(taken)
      }
      if (watcher.closed) return Effect.fail(Option.none())
      return Effect.zipRight(Deferred.await(watcher.wake), pull)
    })
    return Stream.repeatEffectOption(pull).pipe(Stream.flattenIterables)
  }))
  return { size: () => all.size, publish, watch }
}
