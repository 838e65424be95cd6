/**
 * Values as a run record keeps them: plain JSON with every known credential
 * scrubbed, compared by content (object keys in any order).
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Secrets from "../Secrets.js"

/**
 * `value` encoded with `schema` and kept ({@link kept}); a value the schema
 * does not encode (a hook handed the model something out of shape) is kept as it is.
 */
export const keptAs = <A, I>(schema: Schema.Schema<A, I>) => {
  const encode = Schema.encodeEither(schema)
  return (value: A): unknown => kept(Either.getOrElse(encode(value), () => value))
}

/** `value` as plain JSON, with every known credential scrubbed. */
export const kept = (value: unknown): unknown => {
  const json = JSON.stringify(value)
  return json === undefined ? null : Secrets.scrubError(JSON.parse(json))
}

/** Whether two plain JSON values are equal, whatever the order of their keys. */
export const same = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]))
  if (Array.isArray(b)) return false
  const keysA = Object.keys(a).filter((k) => (a as any)[k] !== undefined)
  const keysB = Object.keys(b).filter((k) => (b as any)[k] !== undefined)
  return keysA.length === keysB.length && keysA.every((k) => same((a as any)[k], (b as any)[k]))
}
