/**
 * A caller's value as an error message may show it (the counterpart of
 * core's, whose `internal/` this package cannot import): without converting
 * it (a symbol or an object without a prototype throws when made a string)
 * and without its text (a string given where a number belongs may be a
 * secret): a number, a boolean or a bigint as written, anything else by its
 * kind.
 */
export const describeValue = (value: unknown): string =>
  typeof value === "number" || typeof value === "boolean"
    ? String(value)
    : typeof value === "bigint"
    ? `${value}n`
    : value === null
    ? "null"
    : Array.isArray(value)
    ? "an array"
    : typeof value === "object"
    ? "an object"
    : typeof value === "undefined"
    ? "undefined"
    : `a ${typeof value}`
