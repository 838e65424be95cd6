/**
 * Whether a value can be kept as JSON, as a tool result is kept (the stored
 * thread, the next request, the run's events): nested at most
 * `JsonDepth.maxDepth` levels, with no `bigint`, no cycle, and readable (no
 * field or `toJSON` that throws). The encoders, scrubbers and providers
 * that take a result next walk it recursively, and `JSON.stringify` throws
 * on the others: such a value is found here, by a walk that never recurses
 * past the limit, before any of them sees it. A tool result is kept as its
 * {@link snapshot}: what JSON writes of it, read once, as plain data, with
 * at most {@link maxValues} values.
 */
import { denseLength } from "./fast/quickDepth.js"
import * as JsonDepth from "./jsonDepth.js"

/** What keeps a value from being kept as JSON. */
export type Problem = "TooDeep" | "BigInt" | "Cycle" | "Unreadable" | "TooLarge"

/** The problem the model or a caller reads, of `what` (`"the result"`). */
export const describe = (problem: Problem, what: string): string => {
  switch (problem) {
    case "TooDeep":
      return `${what} nests arrays and objects more than ${JsonDepth.maxDepth} levels deep; send a flatter value`
    case "BigInt":
      return `${what} holds a bigint, which JSON cannot hold; send it as a string or a number`
    case "Cycle":
      return `${what} holds an object that contains itself (a cycle), which JSON cannot hold`
    case "Unreadable":
      return `${what} could not be read as JSON (a field or its toJSON threw)`
    case "TooLarge":
      return `${what} is too large: its JSON writes more than ${maxValues} values; send a smaller value`
  }
}

/**
 * The values an object holds: what JSON writes of it (the value of its
 * `toJSON`, counted a level deeper, or its enumerable fields), and with
 * `everyProperty` also the other fields a scrub copies and the entries of a
 * map or a set.
 */
const childrenOf = (value: object, everyProperty: boolean): ArrayLike<unknown> => {
  const toJson = (value as { readonly toJSON?: unknown }).toJSON
  const written: unknown = typeof toJson === "function" ? toJson.call(value, "") : value
  const json = written === value ? undefined : [written]
  // (a long array by its values, so a sparse one, `a[2 ** 32 - 2] = 1`, costs its items, not its length: a hole is
  // written as `null`, which holds no problem)
  const dense = Array.isArray(value) && value.length <= denseLength
  if (!everyProperty) return json ?? (dense ? value as Array<unknown> : Object.values(value))
  const children: Array<unknown> = json ?? (dense ? [...value as Array<unknown>] : Object.values(value))
  if (value instanceof Map) children.push(...value.keys(), ...value.values())
  else if (value instanceof Set) children.push(...value)
  for (const key of Reflect.ownKeys(value)) {
    const descriptor = Object.getOwnPropertyDescriptor(value, key)!
    // the fields JSON writes are in already
    const inJson = json === undefined && descriptor.enumerable === true && typeof key === "string"
    if ("value" in descriptor && !inJson) children.push(descriptor.value)
  }
  return children
}

/** Marks, on the walk's stack, the end of an object's values (it leaves the path). */
const leave = -1

/**
 * The exact walk, without recursion: a cycle is told from a deep value by
 * the objects on the path, and a value met again is walked again only when
 * met deeper (a shared value costs at most `JsonDepth.maxDepth` walks).
 */
const exactProblemOf = (value: object, everyProperty: boolean): Problem | undefined => {
  let found: Problem | undefined
  const values: Array<object> = [value]
  const depths: Array<number> = [1]
  const onPath = new Set<object>()
  const deepest = new Map<object, number>()
  while (values.length > 0) {
    const current = values.pop()!
    const depth = depths.pop()!
    if (depth === leave) {
      onPath.delete(current)
      continue
    }
    if (depth > JsonDepth.maxDepth) return "TooDeep"
    if (onPath.has(current)) {
      found ??= "Cycle"
      continue
    }
    if ((deepest.get(current) ?? 0) >= depth) continue
    deepest.set(current, depth)
    if (ArrayBuffer.isView(current)) {
      found ??= bytesProblem(current)
      continue
    }
    onPath.add(current)
    values.push(current)
    depths.push(leave)
    const children = childrenOf(current, everyProperty)
    for (let i = 0; i < children.length; i++) {
      const child = children[i]
      if (typeof child === "object" && child !== null) {
        values.push(child)
        depths.push(depth + 1)
      } else if (typeof child === "bigint") {
        found ??= "BigInt"
      }
    }
  }
  return found
}

/** Bytes hold no value to walk; JSON writes a typed array's items, and cannot write a bigint one's. */
const bytesProblem = (bytes: ArrayBufferView): Problem | undefined =>
  (bytes instanceof BigInt64Array || bytes instanceof BigUint64Array) && bytes.length > 0 ? "BigInt" : undefined

/** How many objects the quick walk visits before it leaves the value to the exact one. */
const quickVisits = 100_000

/** The state of a quick walk: what it found, and how many objects it visited. */
interface Quick {
  readonly everyProperty: boolean
  visits: number
  found: Problem | undefined
}

/**
 * The quick walk of a value that can be kept, as most are: recursive, with
 * no table of the objects met. It stops (`false`) past `JsonDepth.maxDepth`
 * levels (so the recursion stays far from the stack's end, and a cycle
 * stops it too) or past {@link quickVisits} objects (a value shared many
 * times over), and leaves the value to the exact walk.
 */
const quickWalk = (current: object, depth: number, quick: Quick): boolean => {
  if (depth > JsonDepth.maxDepth || ++quick.visits > quickVisits) return false
  if (ArrayBuffer.isView(current)) {
    quick.found ??= bytesProblem(current)
    return true
  }
  const children = childrenOf(current, quick.everyProperty)
  for (let i = 0; i < children.length; i++) {
    const child = children[i]
    if (typeof child === "object" && child !== null) {
      if (!quickWalk(child, depth + 1, quick)) return false
    } else if (typeof child === "bigint") {
      quick.found ??= "BigInt"
    }
  }
  return true
}

/**
 * What keeps `value` from being kept as JSON, or `undefined`. The walk
 * follows arrays and the enumerable fields of objects (what `JSON.stringify`
 * writes); with `everyProperty`, also the other own fields and the entries
 * of maps and sets (what `Secrets.scrubError` copies). A value that throws
 * as it is read is `"Unreadable"`. A `"TooDeep"` found
 * anywhere wins over the other problems (a caller that only bounds a
 * recursive walk asks for it); bytes are not walked. A value within the
 * limit takes one quick walk; one past it, a cycle or a value shared many
 * times over takes the exact walk too; neither recurses past the limit.
 */
export const problemOf = (value: unknown, options?: { readonly everyProperty?: boolean }): Problem | undefined => {
  if (typeof value === "bigint") return "BigInt"
  if (typeof value !== "object" || value === null) return undefined
  const everyProperty = options?.everyProperty === true
  const quick: Quick = { everyProperty, visits: 0, found: undefined }
  // a getter, a proxy or a toJSON may throw: the value is unreadable, and nothing throws past here
  try {
    return quickWalk(value, 1, quick) ? quick.found : exactProblemOf(value, everyProperty)
  } catch {
    return "Unreadable"
  }
}

/**
 * How many values a {@link snapshot} writes at most: every value JSON
 * writes (an object or an array, each of its items, an object met twice
 * counted twice, an array's length counted before its items are read),
 * and every field it reads and leaves out. Far past a result a model can
 * read, and far below what blocks the process to copy and scrub.
 */
export const maxValues = 100_000

/** A value's {@link snapshot}: what JSON writes of it, or the problem that keeps it from being kept. */
export type Snapshot =
  | { readonly _tag: "Kept"; readonly value: unknown }
  | { readonly _tag: "Refused"; readonly problem: Problem }

/** Stops a snapshot's walk with its problem. */
class Refusal {
  constructor(readonly problem: Problem) {}
}

/** The state of a snapshot's walk: the values it wrote, and the objects on its path (at most the depth limit's). */
interface Walk {
  written: number
  readonly path: Array<object>
}

/** Counts `count` more values written, past {@link maxValues}: too large. */
const write = (walk: Walk, count: number): void => {
  walk.written += count
  if (walk.written > maxValues) throw new Refusal("TooLarge")
}

/** Whether `value` carries the internal slot `valueOf` reads (a boxed primitive of that type). */
const holds = (valueOf: (this: unknown) => unknown, value: object): boolean => {
  try {
    valueOf.call(value)
    return true
  } catch {
    return false
  }
}

/**
 * The primitive JSON writes of a boxed `String`, `Number`, `Boolean` or
 * `BigInt` (read as JSON reads it), or the object itself. Only an object
 * that names its own type (`Symbol.toStringTag`) or whose type is not a
 * plain object's is tried against each box, so a plain object costs no
 * exception.
 */
const unboxed = (value: object): unknown => {
  if (Symbol.toStringTag in value) {
    if (holds(Number.prototype.valueOf, value)) return +value
    if (holds(String.prototype.valueOf, value)) return String(value)
    if (holds(Boolean.prototype.valueOf, value)) return Boolean.prototype.valueOf.call(value)
    if (holds(BigInt.prototype.valueOf, value)) return BigInt.prototype.valueOf.call(value)
    return value
  }
  switch (Object.prototype.toString.call(value)) {
    case "[object Number]":
      return +value
    case "[object String]":
      return String(value)
    case "[object Boolean]":
      return Boolean.prototype.valueOf.call(value)
    default:
      return value
  }
}

/**
 * What JSON writes of `value`, read from its holder under `key` at
 * `depth`: a primitive, a fresh plain array or object, or `undefined`
 * when JSON leaves it out (a function, a symbol, `undefined`).
 */
const snapshotOf = (value: unknown, key: string | number, depth: number, walk: Walk): unknown => {
  write(walk, 1)
  let current = value
  const isObject = (typeof value === "object" && value !== null) || typeof value === "function"
  if (isObject || typeof value === "bigint") {
    const toJson = (value as { readonly toJSON?: unknown }).toJSON
    if (typeof toJson === "function") {
      // an object whose toJSON gives it again, deeper, is a cycle (JSON would call it forever)
      if (isObject && walk.path.includes(value as object)) throw new Refusal("Cycle")
      current = toJson.call(value, String(key))
    }
  }
  if (typeof current === "object" && current !== null) current = unboxed(current)
  switch (typeof current) {
    case "string":
    case "boolean":
      return current
    case "number":
      // -0 is written 0
      return Number.isFinite(current) ? current + 0 : null
    case "bigint":
      throw new Refusal("BigInt")
    case "object":
      if (current === null) return null
      return snapshotObject(current, isObject && current !== value ? value as object : undefined, depth, walk)
    default:
      return undefined
  }
}

/** Sets `key` of a fresh object as `JSON.parse` does (`__proto__` an own field, not the prototype). */
const define = (target: Record<string, unknown>, key: string, value: unknown): void => {
  if (key === "__proto__") {
    Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true })
  } else target[key] = value
}

/** What JSON writes of an object or an array (the value its holder's toJSON gave, if any) at `depth`. */
const snapshotObject = (value: object, holder: object | undefined, depth: number, walk: Walk): unknown => {
  if (depth > JsonDepth.maxDepth) throw new Refusal("TooDeep")
  if (walk.path.includes(value)) throw new Refusal("Cycle")
  walk.path.push(value)
  if (holder !== undefined) walk.path.push(holder)
  let copy: unknown
  if (Array.isArray(value)) {
    const length = Math.min(Math.max(Math.trunc(Number(value.length)) || 0, 0), Number.MAX_SAFE_INTEGER)
    // a sparse array's holes are written too: counted before any is read
    if (walk.written + length > maxValues) throw new Refusal("TooLarge")
    const items: Array<unknown> = []
    for (let i = 0; i < length; i++) {
      const item = snapshotOf(value[i], i, depth + 1, walk)
      items.push(item === undefined ? null : item)
    }
    copy = items
  } else {
    const keys = Object.keys(value)
    if (walk.written + keys.length > maxValues) throw new Refusal("TooLarge")
    const fields: Record<string, unknown> = {}
    for (const key of keys) {
      const field = snapshotOf((value as Record<string, unknown>)[key], key, depth + 1, walk)
      if (field !== undefined) define(fields, key, field)
    }
    copy = fields
  }
  walk.path.length -= holder === undefined ? 1 : 2
  return copy
}

/**
 * What `JSON.stringify(value)` writes, as plain data (`JSON.parse` of it),
 * read once: each field and `toJSON` read once, as JSON reads them (a
 * value's `toJSON` called with its key, boxed primitives unboxed, only own
 * enumerable string-keyed fields, holes and non-finite numbers `null`,
 * functions, symbols and `undefined` left out of objects and `null` in
 * arrays). A value JSON cannot write (a `bigint`, a cycle, a read that
 * throws), nested past `JsonDepth.maxDepth`, or writing more than
 * {@link maxValues} values is refused, naming the problem; a value JSON
 * writes nothing of is kept as `undefined`. The walk recurses no deeper
 * than the limit, and its work is bounded by {@link maxValues}.
 */
export const snapshot = (value: unknown): Snapshot => {
  try {
    return { _tag: "Kept", value: snapshotOf(value, "", 1, { written: 0, path: [] }) }
  } catch (error) {
    return { _tag: "Refused", problem: error instanceof Refusal ? error.problem : "Unreadable" }
  }
}
