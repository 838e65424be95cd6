/**
 * The key check of the package's option objects (the engine layers, the
 * stores, `AgentWorkflow.make` and its calls' options): a value that is not
 * an object, or a key the call does not know (a typo, a LangChain option),
 * is a problem naming it, worded as core's check of `Agent.make`'s options.
 */
import * as AgentError from "@stepwise-agent/core/AgentError"

/**
 * The keys of an options type, each listed once: the compiler checks the
 * list against the type, so an option added to it is known here too.
 */
export const keysOf = <T>(keys: { readonly [K in keyof Required<T>]: true }): ReadonlyArray<string> => Object.keys(keys)

/** What is wrong with an options object: the option (its path) and why. */
export interface Problem {
  readonly option: string
  readonly reason: string
}

/**
 * The problem of `options` given at `path` (see `AgentError.unknownOption`), if any, for an error of another
 * kind than `InvalidOptions`.
 */
export const problemOf = (options: unknown, known: ReadonlyArray<string>, path?: string): Problem | undefined => {
  const invalid = AgentError.unknownOption("", options, known, path)
  return invalid === undefined ? undefined : { option: invalid.option, reason: invalid.reason }
}

/** A problem as one sentence, for an error of its own kind (`InvalidInput`, `InvalidSend`): `"edits is unknown; …"`. */
export const sentence = (problem: Problem): string => `${problem.option} ${problem.reason}`

/** The `InvalidOptions` of `options` given at `path`, if any (`AgentError.unknownOption`). */
export const unknownKey = AgentError.unknownOption
