/**
 * Which message arrays were made from which, so that "does this thread extend
 * that one, and by how much?" is answered without comparing every message.
 *
 * Each recorded array sits on a *line*: arrays each of which starts with every
 * shorter one of the line (the same objects), so of two arrays on one line the
 * shorter is a prefix of the longer. An array made by appending to the longest
 * array of a line joins that line; any other (a hook replaced the tail, or a
 * second array was appended to an array the line already grew past) starts a
 * line of its own, which remembers how many leading elements it shares with
 * the lines it forked from, up to {@link maxDepth} lines back. Further back, or
 * between arrays with no record (built by a user's hook, say), elements are
 * compared one by one. What a {@link PrefixMemo} learnt of a line's prefixes
 * (how far a thread was paired, or lifted) rides on the line itself.
 *
 * The records hold lines, never arrays, so they keep no array alive. (They
 * used to hold the array each one was made from: V8's young-generation
 * collector treats a `WeakMap`'s values as strong, so each step's arrays of a
 * long thread outlived a collection or two, copied and promoted, and most of a
 * step's cost on a 10,000-message thread was that garbage collection.)
 *
 * Arrays are never changed in place once anyone else may hold them (they are
 * `ReadonlyArray`s throughout); the one exception, {@link extendUnseen}, is for
 * an array only the run's state holds (`RunState.unseen`; others hold only
 * views that know its length then: a model call's prompt, a deferred save),
 * and keeps its line true. Who compares such an array with an earlier state
 * of itself gives {@link sharedPrefix} the lengths.
 */

interface Line {
  /** The length of the array that started the line. */
  readonly start: number
  /** The length of the longest array on the line. */
  end: number
  /** The lines this one forked from, nearest first (at most {@link maxDepth}). */
  readonly forks: ReadonlyArray<Fork>
  /** What each {@link PrefixMemo} knows of the line's prefixes, by the memo's slot. */
  memos: Array<Known<any> | undefined> | undefined
}

/**
 * Every array of the line that has the fork shares its first `shared`
 * elements (or all of the other one, if shorter) with every array of `line`.
 */
interface Fork {
  readonly line: Line
  readonly shared: number
}

/**
 * The line of each array recorded here. (Not a property of the array: an
 * array with any own property but its elements loses V8's fast path of
 * `concat`, ~6 times dearer on a 10,000-message thread, and a thread's arrays
 * are concatenated at every step, by the run and by hooks.)
 */
const lines = new WeakMap<ReadonlyArray<unknown>, Line>()

/** How many forks a line remembers (a step of the loop makes at most one). */
const maxDepth = 4

/** The line of `array`, which starts a line of its own if it has none. */
const lineOf = (array: ReadonlyArray<unknown>): Line => {
  let line = lines.get(array)
  if (line === undefined) {
    line = { start: array.length, end: array.length, forks: [], memos: undefined }
    lines.set(array, line)
  }
  return line
}

/** Records `next`, which shares its first `shared` elements with `base` (and is at least that long). */
const record = (next: ReadonlyArray<unknown>, base: ReadonlyArray<unknown>, shared: number): void => {
  const line = lineOf(base)
  if (shared === base.length && base.length === line.end) {
    // `base` is the longest array of its line (any other that long is equal to it), and `next` starts with it
    line.end = next.length
    lines.set(next, line)
    return
  }
  const forks: Array<Fork> = [{ line, shared }]
  for (let i = 0; i < line.forks.length && forks.length < maxDepth; i++) {
    const fork = line.forks[i]!
    forks.push({ line: fork.line, shared: Math.min(fork.shared, shared) })
  }
  lines.set(next, { start: next.length, end: next.length, forks, memos: undefined })
}

/**
 * Records that `next` starts with the first `shared` elements of `base` (the same objects), and gives `next`.
 */
export const derive = <A>(next: ReadonlyArray<A>, base: ReadonlyArray<A>, shared: number): ReadonlyArray<A> => {
  record(next, base, shared)
  return next
}

/** `base` with `items` appended (one copy), recorded as sharing all of `base`. */
export const append = <A>(base: ReadonlyArray<A>, items: ReadonlyArray<A>): ReadonlyArray<A> => {
  const next = base.concat(items)
  record(next, base, base.length)
  return next
}

/**
 * {@link append}, leaving room for one more element in the new array's
 * storage, so that {@link extendUnseen} can add it without copying the array
 * again. (A JavaScript array made by `concat` has no spare capacity: pushing
 * onto it copies it into storage half as large again. Made one longer and
 * popped, it keeps the slot, and its elements stay packed.)
 */
export const appendWithRoom = <A>(base: ReadonlyArray<A>, items: ReadonlyArray<A>): ReadonlyArray<A> => {
  const next = base.concat(items, room as ReadonlyArray<A>)
  next.pop()
  record(next, base, base.length)
  return next
}

const room: ReadonlyArray<unknown> = [undefined]

/**
 * `array` with `items` appended *in place* (and recorded), for an array that
 * only its maker has seen since it was made by {@link appendWithRoom}: one
 * that anyone else may hold must never change. Copies instead when `array` is
 * not the longest of its line (something was appended to it already).
 */
export const extendUnseen = <A>(array: ReadonlyArray<A>, items: ReadonlyArray<A>): ReadonlyArray<A> => {
  const line = lines.get(array)
  if (line === undefined || line.end !== array.length) return append(array, items)
  ;(array as Array<A>).push(...items)
  line.end = array.length
  return array
}

/** `base` with its last element replaced by `last`, recorded as sharing all but that element. */
export const replaceLast = <A>(base: ReadonlyArray<A>, last: A): ReadonlyArray<A> => {
  const next = base.slice()
  next[next.length - 1] = last
  record(next, base, base.length - 1)
  return next
}

/** How many leading elements every array of `a` shares with every array of `b` at least, when recorded. */
const sharedByLines = (a: Line, b: Line): number | undefined => {
  if (a === b) return Number.MAX_SAFE_INTEGER
  for (const fork of a.forks) if (fork.line === b) return fork.shared
  for (const fork of b.forks) if (fork.line === a) return fork.shared
  for (const fork of a.forks) {
    for (const other of b.forks) if (fork.line === other.line) return Math.min(fork.shared, other.shared)
  }
  return undefined
}

/**
 * The number of leading elements `next` and `base` share by reference: read
 * from the records when they relate the two (at least what they share then),
 * else by comparing them. An array the run grew in place since (see
 * {@link extendUnseen}) is given with the length it had then.
 */
export const sharedPrefix = <A>(
  base: ReadonlyArray<A>,
  next: ReadonlyArray<A>,
  baseLength: number = base.length,
  nextLength: number = next.length
): number => {
  const limit = Math.min(baseLength, nextLength)
  if (base === next) return limit
  const a = lines.get(next)
  const b = a === undefined ? undefined : lines.get(base)
  const recorded = b === undefined ? undefined : sharedByLines(a!, b)
  if (recorded !== undefined) return Math.min(recorded, limit)
  let i = 0
  while (i < limit && base[i] === next[i]) i++
  return i
}

/**
 * The length of the array the line of `next` started from: for an array made
 * by appending to one with no record, that one's length.
 */
export const origin = (next: ReadonlyArray<unknown>): number | undefined => lines.get(next)?.start

interface Memo<B> {
  readonly length: number
  readonly value: B
}

/** What a memo knows of a line: its shortest and its latest record. */
interface Known<B> {
  first: Memo<B>
  last: Memo<B>
}

/** The next free slot of a line's `memos`. */
let memoSlots = 0

/**
 * Something found out about the first elements of an array that holds for
 * any array starting with them (the pairing of a thread's messages): kept on
 * the line (its shortest and its latest record), so it lives as long as an
 * array of the line does, and keeps no array alive.
 */
export class PrefixMemo<B> {
  private readonly slot = memoSlots++

  /** Records `value` for the first `length` elements of `array` (all of it unless told). */
  set(array: ReadonlyArray<unknown>, value: B, length: number = array.length): void {
    const line = lineOf(array)
    const memo = { length, value }
    const memos = line.memos ??= []
    const known: Known<B> | undefined = memos[this.slot]
    if (known === undefined) memos[this.slot] = { first: memo, last: memo }
    else {
      known.last = memo
      if (length <= known.first.length) known.first = memo
    }
  }

  /** The longest recorded prefix of `next` (perhaps all of it) this memo can tell, with its value. */
  get(next: ReadonlyArray<unknown>): Memo<B> | undefined {
    const line = lines.get(next)
    if (line === undefined) return undefined
    const own = this.within(line, next.length)
    if (own !== undefined) return own
    for (const fork of line.forks) {
      const found = this.within(fork.line, fork.shared)
      if (found !== undefined) return found
    }
    return undefined
  }

  private within(line: Line, length: number): Memo<B> | undefined {
    const known: Known<B> | undefined = line.memos?.[this.slot]
    return known === undefined
      ? undefined
      : known.last.length <= length
      ? known.last
      : known.first.length <= length
      ? known.first
      : undefined
  }
}
