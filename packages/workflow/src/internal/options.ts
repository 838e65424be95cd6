/**
 * The key check of the package's option objects (the engine layers, the
 * stores, `AgentWorkflow.make` and its calls' options): a value that is not
 * an object, or a key the call does not know (a typo, a LangChain option),
 * is a problem naming it, worded as core's check of `Agent.make`'s options.
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
 * options, `"sharding"` for a nested one), if any: not an object, or its
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

/** A problem as one sentence, for an error of its own kind (`InvalidInput`, `InvalidSend`): `"edits is unknown; …"`. */
export const sentence = (problem: Problem): string => `${problem.option} ${problem.reason}`

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
