/**
 * One run at a time per thread in this process: a second run of a thread
 * waits, so it starts from the first one's final checkpoint instead of
 * overwriting it. A thread's lock lives while a run holds or waits for it.
 *
 * The speed trick: a `Map` of semaphores counted by hand, where the
 * idiomatic version is an `RcMap` of semaphores keyed by thread id. An
 * `RcMap.get` of a thread no run holds forks a fiber and opens a scope, on
 * every run of an idle thread (see `README.md`); and an `RcMap` closes with
 * the agent's scope, while reading, giving up a wait and deleting threads
 * must still lock a closed agent's threads. A lock has nothing to release
 * when the agent closes: only a running effect holds it.
 */
import * as Effect from "effect/Effect"

/** Makes the locks of one agent: `effect` run holding the lock of `threadId`. */
export const make = () => {
  const locks = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>()
  return <A, E, R>(threadId: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      let lock = locks.get(threadId)
      if (lock === undefined) {
        lock = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
        locks.set(threadId, lock)
      }
      const held = lock
      held.users++
      return held.semaphore.withPermits(1)(effect).pipe(
        Effect.ensuring(Effect.sync(() => {
          if (--held.users === 0) locks.delete(threadId)
        }))
      )
    })
}
