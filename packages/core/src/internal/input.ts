/**
 * The checks of what a run is given: its thread id and its input. A `send`
 * takes what a user may send (user messages of text and file parts); `run`
 * and `stream` take a conversation of any role. Either holds at least one
 * message, within the agent's `maxInputChars` (provider options count).
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { describeParseError, InvalidInput } from "../AgentError.js"
import * as AgentState from "../AgentState.js"
import * as JsonDepth from "./jsonDepth.js"
import * as JsonValue from "./jsonValue.js"

const describeValue = (u: unknown): string =>
  u === null ? "null" : Array.isArray(u) ? "an array" : typeof u === "string" ? JSON.stringify(u) : typeof u

/** A lone surrogate (half of a UTF-16 pair): such a string does not encode as UTF-8. */
const loneSurrogate = /\p{Cs}/u

/** Whether a thread id is a non-empty, well-formed string (no thread is ever stored under another one). */
export const isThreadId = (threadId: unknown): threadId is string =>
  typeof threadId === "string" && threadId.length > 0 && !loneSurrogate.test(threadId)

/** The `InvalidInput` of a thread id that is not a non-empty, well-formed string (`isThreadId`). */
export const invalidThreadId = (threadId: unknown): InvalidInput =>
  new InvalidInput({
    reason: `the thread id must be a non-empty string without lone surrogates, got ${
      typeof threadId === "string" && threadId.length > 0
        ? "a string with a lone surrogate"
        : describeValue(threadId)
    }`
  })

/** The thread id, or `InvalidInput` when it is not a non-empty, well-formed string. */
export const checkThreadId = (threadId: unknown): Effect.Effect<string, InvalidInput> =>
  isThreadId(threadId) ? Effect.succeed(threadId) : Effect.fail(invalidThreadId(threadId))

/**
 * `maxInputMessages` when `Agent.make` is given none: more messages than any
 * context window takes. An array over the limit is refused before its
 * messages are decoded (which takes time for each, whatever its size).
 */
export const defaultMaxInputMessages = 10_000

/**
 * `maxInputParts` when `Agent.make` is given none: ten parts a message at
 * the message limit. Parts are counted before they are decoded, so a
 * message of a million empty parts costs nothing to refuse.
 */
export const defaultMaxInputParts = 100_000

/** How much one input may hold: `Agent.make`'s `maxInputChars`, `maxInputMessages` and `maxInputParts`. */
export interface InputLimits {
  readonly maxChars: number
  readonly maxMessages: number
  readonly maxParts: number
}

const tooManyMessages = (count: number, limits: InputLimits) =>
  new InvalidInput({
    reason: `the input holds ${count} messages, over the limit of ${limits.maxMessages} (Agent.make's maxInputMessages)`
  })

/** The parts of messages not yet decoded (a message's content, when it is an array). */
const partCount = (messages: ReadonlyArray<unknown>): number => {
  let count = 0
  for (const message of messages) {
    const content: unknown = typeof message === "object" && message !== null
      ? (message as { readonly content?: unknown }).content
      : undefined
    if (Array.isArray(content)) count += content.length
  }
  return count
}

/**
 * Why messages not yet decoded are too many or too large to decode: more
 * than `limits.maxMessages` messages or `limits.maxParts` parts, or values
 * (tool arguments, results, options) nested past `JsonDepth.maxDepth`, which
 * the schemas and formatters that take them next walk recursively.
 */
const outOfBounds = (messages: ReadonlyArray<unknown>, limits: InputLimits): InvalidInput | undefined => {
  if (messages.length > limits.maxMessages) return tooManyMessages(messages.length, limits)
  const parts = partCount(messages)
  if (parts > limits.maxParts) {
    return new InvalidInput({
      reason: `the input holds ${parts} parts, over the limit of ${limits.maxParts} (Agent.make's maxInputParts)`
    })
  }
  // the array, a message, its content, a part: then the part's own values
  if (JsonDepth.exceeds(messages, JsonDepth.maxDepth + 4)) {
    return new InvalidInput({ reason: JsonDepth.tooDeep("the input's tool arguments, results or options") })
  }
  const problem = toolValueProblem(messages)
  return problem === undefined ? undefined : new InvalidInput({ reason: problem })
}

/** Why `value` cannot be kept as JSON, described as `what`, or `undefined` (also for a value that is no object). */
const jsonProblem = (value: unknown, what: string): string | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const kept = JsonValue.snapshot(value)
  return kept._tag === "Refused" ? JsonValue.describe(kept.problem, what) : undefined
}

/**
 * Why a tool call's arguments, a tool result or the provider options of a
 * message or a part in `messages` cannot be kept as JSON
 * (`JsonValue.snapshot`: too large — a sparse array counts its length —, a
 * cycle, a bigint, unreadable), or `undefined`: what the thread would store,
 * the checkpointer write and the provider send, checked before any of them
 * walks it.
 */
const toolValueProblem = (messages: ReadonlyArray<unknown>): string | undefined => {
  for (const [i, message] of messages.entries()) {
    if (typeof message !== "object" || message === null) continue
    const { content, options } = message as { readonly content?: unknown; readonly options?: unknown }
    const inOptions = jsonProblem(options, `the provider options of messages.${i}`)
    if (inOptions !== undefined) return inOptions
    if (!Array.isArray(content)) continue
    for (const [j, part] of content.entries()) {
      if (typeof part !== "object" || part === null) continue
      const { options, params, result, type } = part as {
        readonly type?: unknown
        readonly params?: unknown
        readonly result?: unknown
        readonly options?: unknown
      }
      const problem = jsonProblem(options, `the provider options of messages.${i}.content.${j}`) ??
        (type === "tool-call"
          ? jsonProblem(params, "a tool call's arguments in the input")
          : type === "tool-result"
          ? jsonProblem(result, "a tool result in the input")
          : undefined)
      if (problem !== undefined) return problem
    }
  }
  return undefined
}

/**
 * The input of a run as a prompt: a string, an array of messages or a
 * `Prompt`, within the bounds of {@link outOfBounds}; anything else is `InvalidInput`.
 */
const promptOf = (input: Prompt.RawInput, limits: InputLimits): Effect.Effect<Prompt.Prompt, InvalidInput> => {
  if (typeof input === "string") return Effect.succeed(Prompt.make(input))
  if (!Array.isArray(input) && !Prompt.isPrompt(input)) {
    return Effect.fail(
      new InvalidInput({
        reason: `the input must be a string, an array of messages or a Prompt, got ${describeValue(input)}`
      })
    )
  }
  const messages: unknown = Prompt.isPrompt(input) ? input.content : input
  if (!Array.isArray(messages)) return Effect.fail(malformed("content", "an array of messages", messages))
  const bounds = outOfBounds(messages, limits)
  if (bounds !== undefined) return Effect.fail(bounds)
  if (Prompt.isPrompt(input)) return Effect.succeed(input)
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

/**
 * The characters of a decision `Agent.resume` takes (what a person typed:
 * an answer, a reason, edited arguments), as its wait's schema encodes it:
 * every string in it and every key, however deep, bytes by their length.
 * Walks without recursion, each object once, an array longer than `limit`
 * by its items (not its length), and stops counting past `limit`; a value
 * whose reading throws counts 0 (its wait's schema took what it needs of it).
 */
const decisionSize = (value: unknown, limit: number): number => {
  let size = 0
  try {
    size = walkSize(value, limit)
  } catch {
    // (the schema that took it read what it needs; the rest is not the decision's)
  }
  return size
}

const walkSize = (value: unknown, limit: number): number => {
  let size = 0
  const values: Array<unknown> = [value]
  // the objects walked (a visited set of this walk: a shared or cyclic object counts once)
  const seen = new WeakSet<object>()
  while (values.length > 0 && size <= limit) {
    const current = values.pop()
    if (typeof current === "string") size += current.length
    if (typeof current !== "object" || current === null || seen.has(current)) continue
    seen.add(current)
    if (ArrayBuffer.isView(current)) {
      size += current.byteLength
      continue
    }
    if (Array.isArray(current)) {
      // a long array by its items (a sparse one, `a[2 ** 32 - 2] = 1`, holds few): holes hold no text
      const indexes = current.length > limit ? Object.keys(current).map(Number) : undefined
      for (let i = indexes?.length ?? current.length; i-- > 0;) values.push(current[indexes?.[i] ?? i])
      continue
    }
    for (const key of Object.keys(current)) {
      size += key.length
      values.push((current as Record<string, unknown>)[key])
    }
  }
  return size
}

/**
 * A decision for `Agent.resume` (or a durable run's, or a fork's) within
 * the agent's `maxInputChars`, counted as {@link decisionSize} does: what a
 * person types when answering a wait is bounded as what they type as input,
 * and refused with the same `InvalidInput`, once its wait's schema took it
 * and before any hook reads it.
 */
export const checkDecisionSize = (value: unknown, limits: InputLimits): Effect.Effect<void, InvalidInput> => {
  const size = decisionSize(value, limits.maxChars)
  return size > limits.maxChars
    ? Effect.fail(
      new InvalidInput({
        reason: `the decision holds more than ${limits.maxChars} characters of text and names, over the limit ` +
          `(Agent.make's maxInputChars)`
      })
    )
    : Effect.void
}

/** The characters of provider options as JSON; none for no option (`{}`). */
const optionsSize = (options: unknown): number =>
  typeof options === "object" && options !== null && Object.keys(options).length > 0 ? jsonSize(options) : 0

const roles: ReadonlySet<unknown> = new Set(["system", "user", "assistant", "tool"])

/** A message or part of a shape no message has (a `Prompt` built by hand): the field at `at` is not `expected`. */
const malformed = (at: string, expected: string, value: unknown) =>
  new InvalidInput({ reason: `${at}: expected ${expected}, got ${describeValue(value)}` })

const isUrl = Schema.is(Schema.URLFromSelf)

/** Whether a file part's data is of a kind a file part holds (and its schema stores): a string, bytes, or a `URL`. */
const isFileData = (data: unknown): data is Prompt.FilePart["data"] =>
  typeof data === "string" || data instanceof Uint8Array || isUrl(data)

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
 * The part types a message of each role holds, as `@effect/ai`'s `Prompt`
 * schema has them (a system message holds only its text): a part of another
 * type, such as a reasoning part in a user message, could not be stored.
 */
const partsByRole: Readonly<Record<string, ReadonlySet<unknown>>> = {
  user: new Set(["text", "file"]),
  assistant: new Set(["text", "file", "reasoning", "tool-call", "tool-result"]),
  tool: new Set(["tool-result"])
}

/** The string fields of each part type, each counted toward `maxInputChars` (a file's data is counted apart). */
const stringFields: Readonly<Record<string, ReadonlyArray<string>>> = {
  text: ["text"],
  reasoning: ["text"],
  file: ["mediaType", "fileName"],
  "tool-call": ["id", "name"],
  "tool-result": ["id", "name"]
}

/** The fields of a part that may be absent. */
const optionalFields: ReadonlySet<string> = new Set(["fileName"])

/**
 * What is wrong with the part at `at` (of a message of `role`), or its size in
 * characters: its type not one `role` holds, a string field that is not a
 * string, file data of no kind a file holds, the middleware's marker.
 */
const partSize = (part: unknown, role: string, at: string): number | InvalidInput => {
  if (typeof part !== "object" || part === null) return malformed(at, "a part (an object)", part)
  const fields = part as Readonly<Record<string, unknown>>
  const type = fields.type
  if (!partsByRole[role]!.has(type)) {
    return new InvalidInput({
      reason: `${at}: a part of type ${typeof type === "string" ? JSON.stringify(type) : typeof type} cannot be ` +
        `sent in ${role === "assistant" ? "an" : "a"} ${role} message; ${
          role === "user"
            ? "a user message holds text and file parts"
            : `it holds ${[...partsByRole[role]!].join(", ")} parts`
        }`
    })
  }
  if (hasMarker(fields.options)) return reservedMarker(at)
  let size = optionsSize(fields.options)
  for (const field of stringFields[type as string]!) {
    const value = fields[field]
    if (value === undefined && optionalFields.has(field)) continue
    if (typeof value !== "string") return malformed(`${at}.${field}`, "a string", value)
    size += value.length
  }
  if (type === "file") {
    if (!isFileData(fields.data)) return malformed(`${at}.data`, "a string, bytes or a URL", fields.data)
    size += fileSize(fields.data)
  } else if (type === "tool-call") {
    size += jsonSize(fields.params)
  } else if (type === "tool-result") {
    size += jsonSize(fields.result)
  }
  return size
}

/**
 * The messages encoded as a checkpoint stores them (`AgentState.encodeMessages`,
 * which remembers each, so the save that follows reuses the work), or
 * `InvalidInput` naming what the schema refused: whatever is accepted can be stored.
 */
const storable = (
  content: ReadonlyArray<Prompt.Message>
): Effect.Effect<ReadonlyArray<Prompt.Message>, InvalidInput> =>
  Effect.try({
    try: () => {
      AgentState.encodeMessages(content)
      return content
    },
    catch: (error) =>
      new InvalidInput({
        reason: `the input messages cannot be stored: ${
          ParseResult.isParseError(error) ? describeParseError(error) : String(error)
        }`
      })
  })

/**
 * The messages of the input of a run or a send, or `InvalidInput` naming what
 * is wrong: not a string, messages or a `Prompt` (see {@link promptOf}); no
 * message; for `"user"`, a message that is not the user's; a part a message
 * of its role does not hold (a user message holds text and file parts); a
 * user message with no part; the middleware's marker in provider options;
 * more than `limits.maxChars` characters of text, file data and names, tool
 * calls and results, and provider options; more than `limits.maxMessages`
 * messages or `limits.maxParts` parts; values nested too deep; anything the
 * checkpoint's schema cannot store.
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
      if (message.role === "system" || !Array.isArray(message.content)) {
        return Effect.fail(
          malformed(
            `messages.${i}.content`,
            message.role === "system" ? "a string" : "a string or an array of parts",
            message.content
          )
        )
      }
      if (message.role === "user" && message.content.length === 0) {
        return Effect.fail(
          new InvalidInput({ reason: `messages.${i}: a user message holds no part; give it text or a file` })
        )
      }
      for (const [j, part] of message.content.entries()) {
        const partSized = partSize(part, message.role, `messages.${i}.content.${j}`)
        if (typeof partSized !== "number") return Effect.fail(partSized)
        size += partSized
      }
    }
    return size > limits.maxChars
      ? Effect.fail(
        new InvalidInput({
          reason: `the input holds ${size} characters of text, file data and names, tool calls and results, and ` +
            `options, over the limit of ${limits.maxChars} (Agent.make's maxInputChars)`
        })
      )
      : storable(content)
  })
