/**
 * The key check of the package's option objects (`Eval`, `FakeOpenAi`,
 * `ScriptedModel`, `Arbitraries`, the vitest helpers): a value that is not an
 * object, or a key the call does not know (a typo, an option of another
 * test library), is a problem naming it, worded as core's check of
 * `Agent.make`'s options. Each caller reports it as its own error.
 */
import * as AgentError from "@stepwise-agent/core/AgentError"

/**
 * The keys of an options type, each listed once: the compiler checks the
 * list against the type, so an option added to it is known here too.
 */
export const keysOf = <T>(keys: { readonly [K in keyof Required<T>]: true }): ReadonlyArray<string> => Object.keys(keys)

/** The `InvalidOptions` of `options` given at `path`, if any (`AgentError.unknownOption`). */
export const unknownKey = AgentError.unknownOption

/**
 * For a builder of a value (a reply, a turn): throws the `InvalidOptions` of
 * `options`, as `AgentWorkflow.make` throws its own.
 */
export const checkKeys = (module: string, options: unknown, known: ReadonlyArray<string>, path?: string): void => {
  const invalid = unknownKey(module, options, known, path)
  if (invalid !== undefined) throw invalid
}
