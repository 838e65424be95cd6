/**
 * The checks of what a run is given: its thread id and its input. A `send`
 * takes what a user may send (user messages of text and file parts); `run`
 * and `stream` take a conversation of any role. Either holds at least one
 * message, within the agent's `maxInputChars` (provider options count).
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import { describeParseError, InvalidInput } from "../AgentError.js"

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
        reason: `the thread id must be a non-empty string without lone surrogates, got ${
          typeof threadId === "string" && threadId.length > 0
            ? "a string with a lone surrogate"
            : describeValue(threadId)
        }`
      })
    )

/**
 * `maxInputMessages` when `Agent.make` is given none: more messages than any
 * context window takes. An array over the limit is refused before its
 * messages are decoded (which takes time for each, whatever its size).
 */
export const defaultMaxInputMessages = 10_000

/** How much one input may hold: `Agent.make`'s `maxInputChars` and `maxInputMessages`. */
export interface InputLimits {
  readonly maxChars: number
  readonly maxMessages: number
}

const tooManyMessages = (count: number, limits: InputLimits) =>
  new InvalidInput({
    reason: `the input holds ${count} messages, over the limit of ${limits.maxMessages} (Agent.make's maxInputMessages)`
  })

/**
 * The input of a run as a prompt: a string, an array of messages or a
 * `Prompt`, of at most `limits.maxMessages` messages; anything else is `InvalidInput`.
 */
const promptOf = (input: Prompt.RawInput, limits: InputLimits): Effect.Effect<Prompt.Prompt, InvalidInput> => {
  if (typeof input === "string") return Effect.succeed(Prompt.make(input))
  if (Prompt.isPrompt(input)) {
    return input.content.length > limits.maxMessages
      ? Effect.fail(tooManyMessages(input.content.length, limits))
      : Effect.succeed(input)
  }
  if (Array.isArray(input) && input.length > limits.maxMessages) {
    return Effect.fail(tooManyMessages(input.length, limits))
  }
  if (!Array.isArray(input)) {
    return Effect.fail(
      new InvalidInput({
        reason: `the input must be a string, an array of messages or a Prompt, got ${describeValue(input)}`
      })
    )
  }
  return Effect.try({
    try: () => Prompt.make(input),
    catch: (error) =>
      new InvalidInput({
        reason: `the input messages do not decode: ${
          ParseResult.isParseError(error) ? describeParseError(error) : String(error)
        }`
      })
  })
}

const reservedMarker = (at: string) =>
  new InvalidInput({
    reason: `${at}.options.${markerKey}: the agent's middleware mark their own messages there; an input ` +
      `cannot carry it`
  })

/** `maxInputChars` when `Agent.make` is given none: 4 MiB of text (about a million tokens, above any context window). */
export const defaultMaxInputChars = 4 * 1024 * 1024

/**
 * The key of provider `options` under which the agent's middleware mark what they wrote (a summary, an
 * offloaded result): an input carrying it could pass for their work, so it is not the user's to send.
 */
const markerKey = "stepwise"

const hasMarker = (options: unknown): boolean =>
  typeof options === "object" && options !== null && Object.hasOwn(options, markerKey)

/** The characters of a value as JSON (a tool call's arguments, a tool result); a value JSON cannot write counts 0. */
const jsonSize = (value: unknown): number => {
  try {
    return JSON.stringify(value)?.length ?? 0
  } catch {
    return 0
  }
}

/** The characters of provider options as JSON; none for no option (`{}`). */
const optionsSize = (options: unknown): number =>
  typeof options === "object" && options !== null && Object.keys(options).length > 0 ? jsonSize(options) : 0

const roles: ReadonlySet<unknown> = new Set(["system", "user", "assistant", "tool"])

/** A message or part of a shape no message has (a `Prompt` built by hand): the field at `at` is not `expected`. */
const malformed = (at: string, expected: string, value: unknown) =>
  new InvalidInput({ reason: `${at}: expected ${expected}, got ${describeValue(value)}` })

/** Whether a file part's data is of a kind a file part holds: a string, bytes, or a URL (an object with an `href`). */
const isFileData = (data: unknown): data is Prompt.FilePart["data"] =>
  typeof data === "string" || data instanceof Uint8Array ||
  (typeof data === "object" && data !== null && typeof (data as { readonly href?: unknown }).href === "string")

/** The size of a file part's data: its characters (base64 or a URL) or its bytes. */
const fileSize = (data: Prompt.FilePart["data"]): number =>
  typeof data === "string" ? data.length : data instanceof Uint8Array ? data.byteLength : String(data).length

/**
 * Who may have written the messages of an input: `"user"` for `send` (a
 * message to a thread that may be mid-run: only user messages, so a tool
 * result without its call, an unanswered tool call or a system message never
 * lands between the agent's own), `"conversation"` for `run` and `stream` (a
 * history of any role may start or continue a thread, as LangChain's
 * `invoke({ messages })`; the loop pairs its tool calls and results).
 */
export type Author = "user" | "conversation"

/**
 * The messages of the input of a run or a send, or `InvalidInput` naming what
 * is wrong: not a string, messages or a `Prompt` (see {@link promptOf}); no
 * message; for `"user"`, a message that is not the user's or a user part
 * other than text and file; a user message with no part; the middleware's
 * marker in provider options; more than `limits.maxChars` characters of text, file
 * data, tool arguments and results, and provider options, or more than
 * `limits.maxMessages` messages.
 */
export const checkInput = (
  input: Prompt.RawInput,
  author: Author,
  limits: InputLimits
): Effect.Effect<ReadonlyArray<Prompt.Message>, InvalidInput> =>
  Effect.flatMap(promptOf(input, limits), ({ content }) => {
    if (content.length === 0) return Effect.fail(new InvalidInput({ reason: "the input holds no message" }))
    let size = 0
    for (const [i, message] of content.entries()) {
      if (typeof message !== "object" || message === null) {
        return Effect.fail(malformed(`messages.${i}`, "a message (an object)", message))
      }
      if (author === "user" && message.role !== "user") {
        return Effect.fail(
          new InvalidInput({
            reason:
              `messages.${i}: ${
                message.role === "assistant" ? "an" : "a"
              } ${message.role} message cannot be sent to a thread; send takes only ` +
              `user messages (of text and file parts), the agent writes the others`
          })
        )
      }
      // a Prompt passes unchecked by its schema, and one built by hand may hold anything
      if (!roles.has(message.role)) {
        return Effect.fail(malformed(`messages.${i}.role`, "system, user, assistant or tool", message.role))
      }
      if (hasMarker(message.options)) return Effect.fail(reservedMarker(`messages.${i}`))
      size += optionsSize(message.options)
      if (typeof message.content === "string") {
        size += message.content.length
        continue
      }
      if (!Array.isArray(message.content)) {
        return Effect.fail(malformed(`messages.${i}.content`, "a string or an array of parts", message.content))
      }
      if (message.role === "user" && message.content.length === 0) {
        return Effect.fail(
          new InvalidInput({ reason: `messages.${i}: a user message holds no part; give it text or a file` })
        )
      }
      for (const [j, part] of message.content.entries()) {
        if (typeof part !== "object" || part === null) {
          return Effect.fail(malformed(`messages.${i}.content.${j}`, "a part (an object)", part))
        }
        if (hasMarker((part as { readonly options?: unknown }).options)) {
          return Effect.fail(reservedMarker(`messages.${i}.content.${j}`))
        }
        size += optionsSize((part as { readonly options?: unknown }).options)
        // the Prompt schema allows only text and file parts in a user message; a part built by hand may be anything
        const type: unknown = (part as { readonly type?: unknown }).type
        if (type === "text" || type === "reasoning") {
          const text: unknown = (part as { readonly text?: unknown }).text
          if (typeof text !== "string") {
            return Effect.fail(malformed(`messages.${i}.content.${j}.text`, "a string", text))
          }
          size += text.length
        } else if (type === "file") {
          const data: unknown = (part as { readonly data?: unknown }).data
          if (!isFileData(data)) {
            return Effect.fail(malformed(`messages.${i}.content.${j}.data`, "a string, bytes or a URL", data))
          }
          size += fileSize(data)
        } else if (message.role !== "user" && (type === "tool-call" || type === "tool-result")) {
          const { params, result } = part as { readonly params?: unknown; readonly result?: unknown }
          size += jsonSize(type === "tool-call" ? params : result)
        } else {
          return Effect.fail(
            new InvalidInput({
              reason: `messages.${i}.content.${j}: a part of type ${
                typeof type === "string" ? JSON.stringify(type) : typeof type
              } cannot be sent; a user message holds text and file parts`
            })
          )
        }
      }
    }
    return size > limits.maxChars
      ? Effect.fail(
        new InvalidInput({
          reason: `the input holds ${size} characters of text and file data, over the limit of ${limits.maxChars} ` +
            `(Agent.make's maxInputChars)`
        })
      )
      : Effect.succeed(content)
  })
