/**
 * The key check of the package's option objects (`Eval`, `FakeOpenAi`,
 * `ScriptedModel`, `Arbitraries`, the vitest helpers): a value that is not an
 * object, or a key the call does not know (a typo, an option of another
 * test library), is a problem naming it, worded as core's check of
 * `Agent.make`'s options. Each caller reports it as its own error.
 */
import * as AgentError from "@stepwise-agent/core/AgentError"
import { describeValue } from "@stepwise-agent/core/Secrets"

/** What is wrong with an options object: the option (its path) and why. */
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
 * The problem of `options` given at `path` (`"options"` for a call's whole
 * options, `"cases[0]"` for a nested one), if any: not an object, or its
 * first key that is not `known`. `undefined` stands for `{}`.
 */
export const problemOf = (options: unknown, known: ReadonlyArray<string>, path?: string): Problem | undefined => {
  if (options === undefined) return undefined
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    return { option: path ?? "options", reason: `must be an object, got ${describeValue(options)}` }
  }
  const key = Object.keys(options).find((name) => !known.includes(name))
  return key === undefined ? undefined : {
    option: path === undefined ? key.slice(0, 100) : `${path}.${key.slice(0, 100)}`,
    reason: `is unknown; expected ${known.map((name) => JSON.stringify(name)).join(" | ")}`
  }
}

/** {@link problemOf} as the `InvalidOptions` of `module`. */
export const unknownKey = (
  module: string,
  options: unknown,
  known: ReadonlyArray<string>,
  path?: string
): AgentError.InvalidOptions | undefined => {
  const problem = problemOf(options, known, path)
  return problem === undefined ? undefined : new AgentError.InvalidOptions({ module, ...problem })
}

/**
 * For a builder of a value (a reply, a turn): throws the `InvalidOptions` of
 * `options`, as `AgentWorkflow.make` throws its own.
 */
export const checkKeys = (module: string, options: unknown, known: ReadonlyArray<string>, path?: string): void => {
  const invalid = unknownKey(module, options, known, path)
  if (invalid !== undefined) throw invalid
}
