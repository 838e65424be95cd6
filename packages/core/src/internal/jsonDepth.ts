/**
 * The nesting depth of values a model or a caller hands the agent (a tool
 * call's arguments, a tool result, provider options). Schemas, formatters
 * and encoders walk such values recursively: a value nested thousands deep
 * (a few kilobytes of `[[[…]]]`) overflows the stack in them. It is measured
 * here by a recursion that stops just past the limit, or without one, and
 * refused above {@link maxDepth} before any of them sees it.
 */
import { denseLength, itemIndices, quickDepth } from "./fast/quickDepth.js"

/**
 * How deep a value the agent takes: 128 levels of arrays and objects, far
 * past any tool's arguments and far below where a recursive walk overflows.
 */
export const maxDepth = 128

/**
 * Whether `value` nests arrays and objects deeper than `limit` (a scalar has
 * depth 0, `[]` and `{}` depth 1). A quick walk answers for most values
 * (`fast/quickDepth.ts`); one that shares objects many times over is walked
 * iteratively, stopping at the first path past the limit, an object met
 * again walked again only when met deeper (a shared value costs at most
 * `limit` walks, a cycle ends past it).
 */
export const exceeds = (value: unknown, limit: number = maxDepth): boolean => {
  if (typeof value !== "object" || value === null) return false
  const quick = quickDepth(value, limit)
  return quick === "Unsure" ? exactlyExceeds(value, limit) : quick === "Past"
}

/** {@link exceeds} by the exact walk, for a value the quick walk left. */
const exactlyExceeds = (value: object, limit: number): boolean => {
  const values: Array<object> = [value]
  const depths: Array<number> = [1]
  const deepest = new WeakMap<object, number>()
  while (values.length > 0) {
    const current = values.pop()!
    const depth = depths.pop()!
    if (depth > limit) return true
    if ((deepest.get(current) ?? 0) >= depth) continue
    deepest.set(current, depth)
    // bytes (a file's data) hold no value to walk
    if (ArrayBuffer.isView(current)) continue
    // (a long array by its values, so a sparse one costs its items, not its length)
    const children: ArrayLike<unknown> = Array.isArray(current) && current.length <= denseLength
      ? current
      : Object.values(current)
    for (let i = 0; i < children.length; i++) {
      const child = children[i]
      if (typeof child === "object" && child !== null) {
        values.push(child)
        depths.push(depth + 1)
      }
    }
  }
  return false
}

/** The problem the model or a caller reads for a value nested past {@link maxDepth}. */
export const tooDeep = (what: string): string =>
  `${what} nest arrays and objects more than ${maxDepth} levels deep; send a flatter value`

/** What {@link cut} puts in place of the arrays and objects past its limit. */
export const cutMark = "…"

/**
 * A copy of `value` down to `limit + 1` levels, its arrays and objects past
 * that replaced by {@link cutMark}: still past the limit (so still refused),
 * but shallow enough for any encoder, formatter or provider that writes it
 * again (the stored call, the next request). `value` itself when it is within
 * the limit.
 */
export const cut = (value: unknown, limit: number = maxDepth): unknown => {
  if (!exceeds(value, limit)) return value
  // the recursion goes `limit + 2` levels deep at most
  const copy = (current: unknown, depth: number): unknown => {
    if (typeof current !== "object" || current === null) return current
    if (depth > limit + 1) return cutMark
    if (Array.isArray(current)) {
      if (current.length <= denseLength) return current.map((item) => copy(item, depth + 1))
      // a long array by its keys (a sparse one costs its items), its holes kept
      const items = new Array<unknown>(current.length)
      for (const index of itemIndices(current)) items[index] = copy(current[index], depth + 1)
      return items
    }
    // (fromEntries defines a `__proto__` key as a field, as JSON.parse does)
    return Object.fromEntries(Object.entries(current).map(([key, item]) => [key, copy(item, depth + 1)]))
  }
  return copy(value, 1)
}
