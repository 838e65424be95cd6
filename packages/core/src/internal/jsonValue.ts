/**
 * Whether a value can be kept as JSON, as a tool result is kept (the stored
 * thread, the next request, the run's events): nested at most
 * `JsonDepth.maxDepth` levels, with no `bigint`, no cycle, and readable (no
 * field or `toJSON` that throws). The encoders, scrubbers and providers
 * that take a result next walk it recursively, and `JSON.stringify` throws
 * on the others: such a value is found here, by a walk that never recurses
 * past the limit, before any of them sees it.
 */
import * as JsonDepth from "./jsonDepth.js"

/** What keeps a value from being kept as JSON. */
export type Problem = "TooDeep" | "BigInt" | "Cycle" | "Unreadable"

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
  if (!everyProperty) return json ?? (Array.isArray(value) ? value : Object.values(value))
  const children: Array<unknown> = json ?? (Array.isArray(value) ? [...value] : Object.values(value))
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
