/**
 * A map of bounded size that evicts the least recently used entry. The
 * entries sit in slots linked from the most to the least recently used, and
 * a `Map` gives the slot of a key, so a hit costs one lookup and a few array
 * writes (no reinsertion), and an insertion over capacity reuses the slot of
 * the least recently used entry.
 */
export class Lru<K, V> {
  readonly #slots = new Map<K, number>()
  readonly #keys: Array<K> = []
  readonly #values: Array<V> = []
  /** The slot used just after (more recently than) each slot, -1 for none. */
  readonly #newer: Array<number> = []
  /** The slot used just before (less recently than) each slot, -1 for none. */
  readonly #older: Array<number> = []
  /** Slots emptied by `delete`, taken again before new ones. */
  readonly #free: Array<number> = []
  #newest = -1
  #oldest = -1

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.#slots.size
  }

  /** The value of `key`, which becomes the most recently used; `undefined` when absent. */
  get(key: K): V | undefined {
    const slot = this.#slots.get(key)
    if (slot === undefined) return undefined
    this.#touch(slot)
    return this.#values[slot]
  }

  /** Stores `value` as the most recently used, evicting the least recently used entry when full (a capacity below 1 keeps nothing). */
  set(key: K, value: V): void {
    if (this.capacity < 1) return
    let slot = this.#slots.get(key)
    if (slot !== undefined) {
      this.#values[slot] = value
      this.#touch(slot)
      return
    }
    if (this.#free.length > 0) {
      slot = this.#free.pop()!
      this.#keys[slot] = key
      this.#values[slot] = value
    } else if (this.#keys.length < this.capacity) {
      slot = this.#keys.length
      this.#keys.push(key)
      this.#values.push(value)
      this.#newer.push(-1)
      this.#older.push(-1)
    } else {
      slot = this.#oldest
      this.#slots.delete(this.#keys[slot]!)
      this.#unlink(slot)
      this.#keys[slot] = key
      this.#values[slot] = value
    }
    this.#slots.set(key, slot)
    this.#link(slot)
  }

  /** Makes `slot` the most recently used. */
  #touch(slot: number): void {
    if (slot === this.#newest) return
    this.#unlink(slot)
    this.#link(slot)
  }

  #unlink(slot: number): void {
    const newer = this.#newer[slot]!
    const older = this.#older[slot]!
    if (newer === -1) this.#newest = older
    else this.#older[newer] = older
    if (older === -1) this.#oldest = newer
    else this.#newer[older] = newer
  }

  /** Links `slot` (unlinked) as the most recently used. */
  #link(slot: number): void {
    this.#older[slot] = this.#newest
    this.#newer[slot] = -1
    if (this.#newest === -1) this.#oldest = slot
    else this.#newer[this.#newest] = slot
    this.#newest = slot
  }

  /** Removes `key`, if present; its slot is reused by the next insertion. */
  delete(key: K): void {
    const slot = this.#slots.get(key)
    if (slot === undefined) return
    this.#slots.delete(key)
    this.#unlink(slot)
    // the slot holds nothing the map could keep alive
    this.#keys[slot] = undefined as K
    this.#values[slot] = undefined as V
    this.#free.push(slot)
  }
}
