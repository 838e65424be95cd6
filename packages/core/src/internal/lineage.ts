/**
 * Which message arrays were made from which: an array built by appending to
 * (or replacing the tail of) another records how many leading elements it
 * shares with it, so "does this thread extend that one?" is answered by
 * following a few records instead of comparing every message. A chain of
 * records is kept to {@link maxDepth} arrays: older ones are not kept alive by
 * it (a thread's history of arrays would otherwise be, at a cost quadratic in
 * its length). An array with no record (built by a user's hook, say), or
 * further back than that, is compared element by element, as before. Arrays
 * are never changed in place once made (they are `ReadonlyArray`s
 * throughout), which is what makes a record stay true.
 */

interface Derivation {
  readonly base: ReadonlyArray<unknown>
  /** `next[i] === base[i]` for every `i < shared`. */
  readonly shared: number
}

const derivations = new WeakMap<ReadonlyArray<unknown>, Derivation>()

/** How many arrays a chain of records reaches back (a step of the loop makes two or three). */
const maxDepth = 4

/**
 * Records that `next` starts with the first `shared` elements of `base` (the same objects), and gives `next`.
 */
export const derive = <A>(next: ReadonlyArray<A>, base: ReadonlyArray<A>, shared: number): ReadonlyArray<A> => {
  record(next, base, shared)
  return next
}

const record = (next: ReadonlyArray<unknown>, base: ReadonlyArray<unknown>, shared: number): void => {
  derivations.set(next, { base, shared })
  let current = base
  for (let depth = 1; depth < maxDepth; depth++) {
    const derivation = derivations.get(current)
    if (derivation === undefined) return
    current = derivation.base
  }
  derivations.delete(current)
}

/** `base` with `items` appended (one copy), recorded as sharing all of `base`. */
export const append = <A>(base: ReadonlyArray<A>, items: ReadonlyArray<A>): ReadonlyArray<A> => {
  const next = base.concat(items)
  record(next, base, base.length)
  return next
}

/** `base` with its last element replaced by `last`, recorded as sharing all but that element. */
export const replaceLast = <A>(base: ReadonlyArray<A>, last: A): ReadonlyArray<A> => {
  const next = base.slice()
  next[next.length - 1] = last
  record(next, base, base.length - 1)
  return next
}

/** The array `next` was made from by appending to it, when that is recorded. */
export const appendedTo = <A>(next: ReadonlyArray<A>): ReadonlyArray<A> | undefined => {
  const derivation = derivations.get(next)
  return derivation !== undefined && derivation.shared === derivation.base.length
    ? derivation.base as ReadonlyArray<A>
    : undefined
}

/**
 * The nearest recorded ancestor of `next` (itself included) for which `found`
 * gives a value, with the number of leading elements the two share.
 */
export const findAncestor = <A, B>(
  next: ReadonlyArray<A>,
  found: (ancestor: ReadonlyArray<A>) => B | undefined
): { readonly ancestor: ReadonlyArray<A>; readonly shared: number; readonly value: B } | undefined => {
  let current: ReadonlyArray<A> = next
  let shared = next.length
  for (let depth = 0; depth <= maxDepth; depth++) {
    const value = found(current)
    if (value !== undefined) return { ancestor: current, shared, value }
    const derivation = derivations.get(current)
    if (derivation === undefined) return undefined
    shared = Math.min(shared, derivation.shared)
    current = derivation.base as ReadonlyArray<A>
  }
  return undefined
}

/** The number of leading elements `next` and `base` share by reference. */
export const sharedPrefix = <A>(base: ReadonlyArray<A>, next: ReadonlyArray<A>): number => {
  const recorded = findAncestor(next, (ancestor) => ancestor === base ? true : undefined)
  if (recorded !== undefined) return Math.min(recorded.shared, base.length)
  let i = 0
  const limit = Math.min(base.length, next.length)
  while (i < limit && base[i] === next[i]) i++
  return i
}
