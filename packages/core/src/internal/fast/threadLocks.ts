/**
 * One run at a time per thread in this process: a second run of a thread
 * waits, so it starts from the first one's final checkpoint instead of
 * overwriting it. A thread's lock lives while a run holds or waits for it.
 *
 * The speed trick: a `Map` of locks counted by hand, each a flag and a queue
 * of waiters woken in turn, where the idiomatic version is an `RcMap` of
 * semaphores keyed by thread id. An `RcMap.get` of a thread no run holds
 * forks a fiber and opens a scope, on every run of an idle thread (see
 * `README.md`); and an `RcMap` closes with the agent's scope, while reading,
 * giving up a wait and deleting threads must still lock a closed agent's
 * threads. A semaphore's `withPermits` and the count's own `ensuring` took
 * ~35 fiber operations per run of a free thread; here a free lock is taken
 * in the step that counts it, and given back (to the next waiter, if any) in
 * one `ensuring`. A lock has nothing to release when the agent closes: only
 * a running effect holds it.
 */
import * as Effect from "effect/Effect"

/** A thread's lock: whether an effect holds it, who waits for it (first first), and how many do either. */
interface Lock {
  held: boolean
  readonly waiting: Array<() => void>
  users: number
}

/** Makes the locks of one agent: `effect` run holding the lock of `threadId`. */
export const make = () => {
  const locks = new Map<string, Lock>()
  /** `lock` given back by its holder: the first waiter takes it over (it stays held), else it is free. */
  const giveBack = (threadId: string, lock: Lock) => {
    const next = lock.waiting.shift()
    if (next === undefined) lock.held = false
    else next()
    if (--lock.users === 0) locks.delete(threadId)
  }
  return <A, E, R>(threadId: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        let lock = locks.get(threadId)
        if (lock === undefined) {
          lock = { held: false, waiting: [], users: 0 }
          locks.set(threadId, lock)
        }
        const held = lock
        held.users++
        const holding = Effect.ensuring(restore(effect), Effect.sync(() => giveBack(threadId, held)))
        if (!held.held) {
          held.held = true
          return holding
        }
        // the wait is interruptible; once woken, the lock is this effect's until `holding` gives it back
        const taken = Effect.async<void>((resume) => {
          const wake = () => resume(Effect.void)
          held.waiting.push(wake)
          return Effect.sync(() => {
            const index = held.waiting.indexOf(wake)
            if (index < 0) {
              // woken as the interruption came: the lock was handed over, so hand it on
              giveBack(threadId, held)
            } else {
              held.waiting.splice(index, 1)
              if (--held.users === 0) locks.delete(threadId)
            }
          })
        })
        return Effect.zipRight(restore(taken), holding)
      })
    )
}
