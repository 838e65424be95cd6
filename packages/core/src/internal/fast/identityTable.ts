/**
 * A table of what a speed trick remembers per object (by identity, in a
 * `WeakMap`, so it keeps nothing alive), for a memo that is filled from
 * outside (a batch of counts) or read before it is built. Every use is a
 * row of this folder's README. An entry
 * only saves work: a table that forgets everything (`get` always
 * `undefined`) is the fallback, and leaves what its users compute the same.
 */
export interface IdentityTable<K extends object, V> {
  readonly get: (key: K) => V | undefined
  readonly set: (key: K, value: V) => void
  readonly delete: (key: K) => void
}

/** An empty table. */
export const make = <K extends object, V>(): IdentityTable<K, V> => new WeakMap<K, V>()
