/**
 * The characters of a JSON value, measured without serialising it: the
 * length `JSON.stringify(value)` would have if no character of a string
 * needed escaping. A string counts its length plus 2 (the quotes), a number
 * or bigint the characters of its decimal form, `true` 4, `false` 5, `null` 4;
 * an array 2 plus its items and a comma between each two; an object 2 plus,
 * per property, the key's length plus 3 (quotes and colon), its value and a
 * comma between each two. As in JSON, an object's `undefined`, function and
 * symbol properties are left out and count 0 (in an array they count as
 * `null`), and a `toJSON` method (a `Date`) is measured by what it returns. A
 * value nested in itself counts 4 (`null`) where it repeats, where
 * `JSON.stringify` would throw.
 */
export const jsonLength = (value: unknown): number => measure(value, [])

const omitted = (value: unknown): boolean =>
  value === undefined || typeof value === "function" || typeof value === "symbol"

const measure = (value: unknown, ancestors: Array<object>): number => {
  switch (typeof value) {
    case "string":
      return value.length + 2
    case "number":
      return Number.isFinite(value) ? String(value).length : 4
    case "bigint":
      return String(value).length
    case "boolean":
      return value ? 4 : 5
    case "object":
      break
    default:
      return 0
  }
  if (value === null || ancestors.includes(value)) return 4
  const toJSON = (value as { readonly toJSON?: unknown }).toJSON
  if (typeof toJSON === "function") return measure(toJSON.call(value), ancestors)
  ancestors.push(value)
  let length = 2
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i]
      length += (i > 0 ? 1 : 0) + (omitted(item) ? 4 : measure(item, ancestors))
    }
  } else {
    let properties = 0
    for (const key in value) {
      if (!Object.prototype.hasOwnProperty.call(value, key)) continue
      const item = (value as Record<string, unknown>)[key]
      if (omitted(item)) continue
      length += (properties++ > 0 ? 1 : 0) + key.length + 3 + measure(item, ancestors)
    }
  }
  ancestors.pop()
  return length
}
