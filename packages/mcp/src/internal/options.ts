/**
 * The key check of `McpToolkit`'s options and of their transport: a value
 * that is not an object, or a key the toolkit does not know (a typo, an
 * option of another MCP client), is an `InvalidOptions` naming it, worded as
 * core's check of `Agent.make`'s options.
 */
import * as AgentError from "@stepwise-agent/core/AgentError"
import { describeValue } from "@stepwise-agent/core/Secrets"

/**
 * The keys of an options type, each listed once: the compiler checks the
 * list against the type, so an option added to it is known here too.
 */
export const keysOf = <T>(keys: { readonly [K in keyof Required<T>]: true }): ReadonlyArray<string> => Object.keys(keys)

/**
 * The `InvalidOptions` of `options` given at `path` (none for the whole
 * options, `"transport"` for a nested one), if any: not an object, or its
 * first key that is not `known`. `undefined` stands for `{}`.
 */
export const unknownKey = (
  module: string,
  options: unknown,
  known: ReadonlyArray<string>,
  path?: string
): AgentError.InvalidOptions | undefined => {
  if (options === undefined) return undefined
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    return new AgentError.InvalidOptions({
      module,
      option: path ?? "options",
      reason: `must be an object, got ${describeValue(options)}`
    })
  }
  const key = Object.keys(options).find((name) => !known.includes(name))
  return key === undefined ? undefined : new AgentError.InvalidOptions({
    module,
    option: path === undefined ? key.slice(0, 100) : `${path}.${key.slice(0, 100)}`,
    reason: `is unknown; expected ${known.map((name) => JSON.stringify(name)).join(" | ")}`
  })
}
