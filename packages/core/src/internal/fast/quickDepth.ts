/**
 * Whether a value nests arrays and objects past a limit, by a walk that
 * allocates nothing (`JsonDepth.exceeds` asks it first): recursive (at most
 * `limit + 1` frames deep), with no table of the objects met and no array of
 * their values. A cycle ends it past the limit; a value shared many times
 * over ends it past {@link quickVisits} objects, unsure, and
 * `JsonDepth.exceeds` walks it exactly (with a table of the objects met).
 */

/** How many objects the quick walk visits before it leaves a value to the exact walk. */
export const quickVisits = 10_000

/** The length past which an array is walked by its keys (its items), not index by index. */
export const denseLength = 65_536

/**
 * The indices of an array's items, from its own keys: a long array's walk
 * (over {@link denseLength}), so a sparse one (`a[2 ** 32 - 2] = 1`) costs
 * its items, not its length.
 */
export const itemIndices = (array: ReadonlyArray<unknown>): Array<number> => {
  const indices: Array<number> = []
  for (const key of Object.keys(array)) {
    const index = Number(key)
    if (String(index) === key) indices.push(index)
  }
  return indices
}

/** What the quick walk found: within the limit, past it, or too many objects to say. */
export type QuickDepth = "Within" | "Past" | "Unsure"

/** The state of a quick walk: how many objects it visited. */
interface Walk {
  visits: number
}

/**
 * Whether `value` (an array or an object) nests past `limit` (`[]` and `{}`
 * have depth 1), reading each object's own enumerable values as
 * `Object.values` does, bytes (a file's data) not walked.
 */
export const quickDepth = (value: object, limit: number): QuickDepth => walk(value, 1, limit, { visits: 0 })

const walk = (current: object, depth: number, limit: number, state: Walk): QuickDepth => {
  if (depth > limit) return "Past"
  if (++state.visits > quickVisits) return "Unsure"
  if (ArrayBuffer.isView(current)) return "Within"
  if (Array.isArray(current) && current.length <= denseLength) {
    for (let i = 0; i < current.length; i++) {
      const child: unknown = current[i]
      if (typeof child === "object" && child !== null) {
        const found = walk(child, depth + 1, limit, state)
        if (found !== "Within") return found
      }
    }
    return "Within"
  }
  // the own enumerable values, as `Object.values` reads them, without its array (a long array's too: by its
  // keys, so a sparse one, `a[2 ** 32 - 2] = 1`, costs its items, not its length)
  for (const key in current) {
    if (!Object.hasOwn(current, key)) continue
    const child: unknown = (current as Record<string, unknown>)[key]
    if (typeof child === "object" && child !== null) {
      const found = walk(child, depth + 1, limit, state)
      if (found !== "Within") return found
    }
  }
  return "Within"
}
