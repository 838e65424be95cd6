/**
 * The key check of core's own option objects (`Agent.make`, the token
 * counters): a value that is not an object, or a key the constructor does not
 * know (a typo, a LangChain option), is an `InvalidOptions` naming it, as the
 * built-in middleware's Schema checks report it.
 */
import { unknownOption } from "../AgentError.js"

/**
 * The `InvalidOptions` for the first unknown key of `options`, if any (see `AgentError.unknownOption`); the
 * options of a method (`send`, `run`) are named after it: `send.mode`.
 */
export const unknownKey = unknownOption

/** A caller's value as an error message may show it (`Secrets.describeValue`). */
export { describeValue } from "../Secrets.js"
