/**
 * The checks of what a run is given: its thread id and its input.
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import { InvalidInput } from "../AgentError.js"

const formatParseError = (error: ParseResult.ParseError) => ParseResult.TreeFormatter.formatErrorSync(error)

const describeValue = (u: unknown): string =>
  u === null ? "null" : Array.isArray(u) ? "an array" : typeof u === "string" ? JSON.stringify(u) : typeof u

/** A lone surrogate (half of a UTF-16 pair): such a string does not encode as UTF-8. */
const loneSurrogate = /\p{Cs}/u

/** Whether a thread id is a non-empty, well-formed string (no thread is ever stored under another one). */
export const isThreadId = (threadId: unknown): threadId is string =>
  typeof threadId === "string" && threadId.length > 0 && !loneSurrogate.test(threadId)

/** The thread id, or `InvalidInput` when it is not a non-empty, well-formed string. */
export const checkThreadId = (threadId: unknown): Effect.Effect<string, InvalidInput> =>
  isThreadId(threadId)
    ? Effect.succeed(threadId)
    : Effect.fail(
      new InvalidInput({
        description: `the thread id must be a non-empty string without lone surrogates, got ${
          typeof threadId === "string" && threadId.length > 0
            ? "a string with a lone surrogate"
            : describeValue(threadId)
        }`
      })
    )

/** The input of a run as a prompt: a string, an array of messages or a `Prompt`; anything else is `InvalidInput`. */
export const promptOf = (input: Prompt.RawInput): Effect.Effect<Prompt.Prompt, InvalidInput> => {
  if (typeof input === "string" || Prompt.isPrompt(input)) return Effect.succeed(Prompt.make(input))
  if (!Array.isArray(input)) {
    return Effect.fail(
      new InvalidInput({
        description: `the input must be a string, an array of messages or a Prompt, got ${describeValue(input)}`
      })
    )
  }
  return Effect.try({
    try: () => Prompt.make(input),
    catch: (error) =>
      new InvalidInput({
        description: `the input messages do not decode: ${
          ParseResult.isParseError(error) ? formatParseError(error) : String(error)
        }`
      })
  })
}
