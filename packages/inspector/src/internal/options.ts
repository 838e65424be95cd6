/**
 * The key check of the package's option objects (`Inspector.make`,
 * `TraceExport.layer`): a value that is not an object, or a key the call
 * does not know (a typo, an option of another tracer), is a problem naming
 * it, worded as core's check of `Agent.make`'s options.
 */
import * as AgentError from "@stepwise-agent/core/AgentError"

/**
 * The keys of an options type, each listed once: the compiler checks the
 * list against the type, so an option added to it is known here too.
 */
export const keysOf = <T>(keys: { readonly [K in keyof Required<T>]: true }): ReadonlyArray<string> => Object.keys(keys)

/** The `InvalidOptions` of `options` (`AgentError.unknownOption`), for the package's own errors too. */
export const unknownKey = AgentError.unknownOption
