/**
 * A map of bounded size that evicts the least recently used entry: a `Map`
 * keeps insertion order, so a hit moves its entry to the end (delete, then
 * set) and an insertion over capacity deletes the first key.
 */
export class Lru<K, V> {
  readonly #entries = new Map<K, V>()

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.#entries.size
  }

  /** The value of `key`, which becomes the most recently used; `undefined` when absent. */
  get(key: K): V | undefined {
    const value = this.#entries.get(key)
    if (value !== undefined) {
      this.#entries.delete(key)
      this.#entries.set(key, value)
    }
    return value
  }

  /** Stores `value` as the most recently used, evicting the least recently used entry when full. */
  set(key: K, value: V): void {
    this.#entries.delete(key)
    if (this.#entries.size >= this.capacity) this.#entries.delete(this.#entries.keys().next().value!)
    this.#entries.set(key, value)
  }

  /** Removes `key`, if present. */
  delete(key: K): void {
    this.#entries.delete(key)
  }
}
