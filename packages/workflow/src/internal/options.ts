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

/** A problem as one sentence, for an error of its own kind (`InvalidInput`, `InvalidSend`): `"edits is unknown; …"`. */
export const sentence = (problem: AgentError.InvalidOptions): string => `${problem.option} ${problem.reason}`

/** The `InvalidOptions` of `options` given at `path`, if any (`AgentError.unknownOption`). */
export const unknownKey = AgentError.unknownOption
