/**
 * The key check of core's own option objects (`Agent.make`, the token
 * counters): a value that is not an object, or a key the constructor does not
 * know (a typo, a LangChain option), is an `InvalidOptions` naming it, as the
 * built-in middleware's Schema checks report it.
 */
import { InvalidOptions } from "../AgentError.js"

/**
 * The `InvalidOptions` for the first unknown key of `options`, if any; `undefined` stands for `{}`. The options
 * of a method (`send`, `run`) are named after it: `send.mode`.
 */
export const unknownKey = (
  module: string,
  options: unknown,
  known: ReadonlyArray<string>,
  method?: string
): InvalidOptions | undefined => {
  if (options === undefined) return undefined
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    return new InvalidOptions({
      module,
      option: method === undefined ? "options" : method,
      reason: "must be an object"
    })
  }
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) {
      return new InvalidOptions({
        module,
        option: method === undefined ? key : `${method}.${key}`,
        reason: `is unknown; expected ${known.map((name) => JSON.stringify(name)).join(" | ")}`
      })
    }
  }
  return undefined
}

/** A caller's value as an error message may show it (`Secrets.describeValue`). */
export { describeValue } from "../Secrets.js"
