/**
 * The key check of the package's option objects (`Inspector.make`,
 * `TraceExport.layer`): a value that is not an object, or a key the call
 * does not know (a typo, an option of another tracer), is a problem naming
 * it, worded as core's check of `Agent.make`'s options.
 */
import { describeValue } from "@stepwise-agent/core/Secrets"

/** What is wrong with an options object: the option and why. */
export interface Problem {
  readonly option: string
  readonly reason: string
}

/**
 * The keys of an options type, each listed once: the compiler checks the
 * list against the type, so an option added to it is known here too.
 */
export const keysOf = <T>(keys: { readonly [K in keyof Required<T>]: true }): ReadonlyArray<string> => Object.keys(keys)

/**
 * The problem of `options`, if any: not an object, or its first key that is
 * not `known`. `undefined` stands for `{}`.
 */
export const unknownKey = (options: unknown, known: ReadonlyArray<string>): Problem | undefined => {
  if (options === undefined) return undefined
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    return { option: "options", reason: `must be an object, got ${describeValue(options)}` }
  }
  const key = Object.keys(options).find((name) => !known.includes(name))
  return key === undefined ? undefined : {
    option: key.slice(0, 100),
    reason: `is unknown; expected ${known.map((name) => JSON.stringify(name)).join(" | ")}`
  }
}
