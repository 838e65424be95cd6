/**
 * Per-thread locks shared by every checkpointer instance of this process on
 * one store: instances made separately (two layers, two agents) on one
 * `KeyValueStore` service object, or on one directory, take the same lock for
 * a thread, so a save's check and write and a delete of the thread never
 * interleave among them.
 *
 * The tables live at module level, keyed by what the instances share: the
 * store object (a `WeakMap`, so a store's table goes with it) or the
 * directory's absolute path. This is not a speed trick: separate instances
 * have nothing else in common to hang a lock on. Each table is
 * `fast/threadLocks.ts` (a thread's entry lives while someone holds or waits
 * for it).
 */
import type * as Effect from "effect/Effect"
import * as ThreadLocks from "./fast/threadLocks.js"

/** `effect` run holding the lock of `key`. */
export type Locks = <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

const byStore = new WeakMap<object, Locks>()

/** The locks of the instances on `store`. */
export const ofStore = (store: object): Locks => {
  let locks = byStore.get(store)
  if (locks === undefined) {
    locks = ThreadLocks.make()
    byStore.set(store, locks)
  }
  return locks
}

const byPath = ThreadLocks.make()

/** The locks of the instances on the directory at the absolute path `directory`. */
export const ofDirectory = (directory: string): Locks => (key, effect) => byPath(`${directory}\u0000${key}`, effect)
