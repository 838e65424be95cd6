/**
 * Whether a value can be kept as JSON, as a tool result is kept (the stored
 * thread, the next request, the run's events): nested at most
 * `JsonDepth.maxDepth` levels, with no `bigint` and no cycle. The encoders,
 * scrubbers and providers that take a result next walk it recursively, and
 * `JSON.stringify` throws on a `bigint` or a cycle: such a value is found
 * here, in one walk without recursion, before any of them sees it.
 */
import * as JsonDepth from "./jsonDepth.js"

/** What keeps a value from being kept as JSON. */
export type Problem = "TooDeep" | "BigInt" | "Cycle"

/** The problem the model or a caller reads, of `what` (`"the result"`). */
export const describe = (problem: Problem, what: string): string => {
  switch (problem) {
    case "TooDeep":
      return `${what} nests arrays and objects more than ${JsonDepth.maxDepth} levels deep; send a flatter value`
    case "BigInt":
      return `${what} holds a bigint, which JSON cannot hold; send it as a string or a number`
    case "Cycle":
      return `${what} holds an object that contains itself (a cycle), which JSON cannot hold`
  }
}

/** The values an object holds: its enumerable fields, or with `everyProperty` every field a scrub copies. */
const childrenOf = (value: object, everyProperty: boolean): ArrayLike<unknown> => {
  if (Array.isArray(value)) return value
  if (!everyProperty) return Object.values(value)
  if (value instanceof Map) return [...value.keys(), ...value.values()]
  if (value instanceof Set) return [...value]
  const children: Array<unknown> = []
  for (const key of Reflect.ownKeys(value)) {
    const descriptor = Object.getOwnPropertyDescriptor(value, key)
    if (descriptor !== undefined && "value" in descriptor) children.push(descriptor.value)
  }
  return children
}

/** Marks, on the walk's stack, the end of an object's values (it leaves the path). */
const leave = -1

/**
 * What keeps `value` from being kept as JSON, or `undefined`. The walk
 * follows arrays and the enumerable fields of objects (what `JSON.stringify`
 * writes); with `everyProperty`, also the other own fields and the entries
 * of maps and sets (what `Secrets.scrubError` copies). A `"TooDeep"` found
 * anywhere wins over the other problems (a caller that only bounds a
 * recursive walk asks for it); bytes are not walked. Without recursion, and
 * a value met again is walked again only when met deeper (a shared value
 * costs at most `JsonDepth.maxDepth` walks).
 */
export const problemOf = (value: unknown, options?: { readonly everyProperty?: boolean }): Problem | undefined => {
  if (typeof value === "bigint") return "BigInt"
  if (typeof value !== "object" || value === null) return undefined
  const everyProperty = options?.everyProperty === true
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
      // bytes hold no value to walk; JSON writes a typed array's items, and cannot write a bigint one's
      if ((current instanceof BigInt64Array || current instanceof BigUint64Array) && current.length > 0) {
        found ??= "BigInt"
      }
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
