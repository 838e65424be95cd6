import { denseLength, itemIndices } from "./quickDepth.js"

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
export const jsonLength = (value: unknown): number => walk(value, undefined, json)

/**
 * How a format spells a JSON-like value, for {@link lengthIn}: the lengths
 * that differ between formats. Both formats spell `true` in 4 characters,
 * `false` in 5, `null` in 4 and a bigint in its digits.
 */
export interface Style {
  readonly string: (text: string) => number
  readonly number: (value: number) => number
  /** Between two items of an array or two properties of an object. */
  readonly separator: number
  /** Between a key and its value. */
  readonly colon: number
  /** A value nested in itself, where it repeats. */
  readonly cycle: number
  /** `undefined`, a function or a symbol that is not inside an array or object. */
  readonly other: number
}

/**
 * The length of `value` spelled in `style`, measured without building it:
 * arrays and objects in brackets, an object's `undefined`, function and
 * symbol properties left out (an array's count as `null`, 4 characters), a
 * `toJSON` method (a `Date`) measured by what it returns.
 */
export const lengthIn = (style: Style) => (value: unknown): number => walk(value, undefined, style)

const json: Style = {
  string: (text) => text.length + 2,
  number: (value) => Number.isFinite(value) ? String(value).length : 4,
  separator: 1,
  colon: 1,
  cycle: 4,
  other: 0
}

const omitted = (value: unknown): boolean =>
  value === undefined || typeof value === "function" || typeof value === "symbol"

/**
 * The objects a value is nested in, innermost first: a node per object
 * level, made only when the walk goes down into an object or array (a flat
 * object of strings and numbers allocates nothing).
 */
interface Ancestors {
  readonly value: object
  readonly up: Ancestors | undefined
}

const walk = (value: unknown, ancestors: Ancestors | undefined, style: Style): number => {
  switch (typeof value) {
    case "string":
      return style.string(value)
    case "number":
      return style.number(value)
    case "bigint":
      return String(value).length
    case "boolean":
      return value ? 4 : 5
    case "object":
      break
    default:
      return style.other
  }
  if (value === null) return 4
  for (let up = ancestors; up !== undefined; up = up.up) if (up.value === value) return style.cycle
  const toJSON = (value as { readonly toJSON?: unknown }).toJSON
  if (typeof toJSON === "function") return walk(toJSON.call(value), ancestors, style)
  // this object as an ancestor of its items, made when the first item that is an object comes
  let here: Ancestors | undefined
  let length = 2
  if (Array.isArray(value) && value.length > denseLength) {
    // a long array by its keys, so a sparse one costs its items, not its length: each hole spelled as `null`
    const indices = itemIndices(value)
    for (const index of indices) {
      const item: unknown = value[index]
      if (typeof item === "object" && item !== null) here ??= { value, up: ancestors }
      length += omitted(item) ? 4 : walk(item, here, style)
    }
    length += (value.length - indices.length) * 4 + (value.length - 1) * style.separator
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i]
      if (typeof item === "object" && item !== null) here ??= { value, up: ancestors }
      length += (i > 0 ? style.separator : 0) + (omitted(item) ? 4 : walk(item, here, style))
    }
  } else {
    let properties = 0
    for (const key in value) {
      if (!Object.prototype.hasOwnProperty.call(value, key)) continue
      const item = (value as Record<string, unknown>)[key]
      if (omitted(item)) continue
      if (typeof item === "object" && item !== null) here ??= { value, up: ancestors }
      length += (properties++ > 0 ? style.separator : 0) + style.string(key) + style.colon + walk(item, here, style)
    }
  }
  return length
}
