/**
 * The key check of `McpToolkit`'s options and of their transport: a value
 * that is not an object, or a key the toolkit does not know (a typo, an
 * option of another MCP client), is an `InvalidOptions` naming it, worded as
 * core's check of `Agent.make`'s options.
 */
import * as AgentError from "@stepwise-agent/core/AgentError"

/**
 * The keys of an options type, each listed once: the compiler checks the
 * list against the type, so an option added to it is known here too.
 */
export const keysOf = <T>(keys: { readonly [K in keyof Required<T>]: true }): ReadonlyArray<string> => Object.keys(keys)

/** The `InvalidOptions` of `options` given at `path` (none for the whole options, `"transport"` for a nested one). */
export const unknownKey = AgentError.unknownOption
