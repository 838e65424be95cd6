/**
 * What `AgentWorkflow.send` stores, and its checks: only user messages of
 * text and file parts, for a valid thread id, mode and idempotency key,
 * kept as JSON in the `RunStore` and decoded again by the run that takes
 * them in.
 */
import * as Prompt from "@effect/ai/Prompt"
import { describeParseError } from "@stepwise-agent/core/AgentError"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
// the values of AgentWorkflow.ts are read only inside functions: it imports this module (a cycle)
import { describeValue } from "@stepwise-agent/core/Secrets"
import { InvalidSend } from "../AgentWorkflow.js"
import type * as RunStore from "../RunStore.js"

/** The messages of one `send`, as the `RunStore` keeps them: JSON, decoded again by the run that takes them in. */
const SentJson = Schema.parseJson(Schema.Array(Prompt.Message))
const encodeSent = Schema.encode(SentJson)
const decodeSent = Schema.decode(SentJson)

/** The messages of stored sends, in send order (they were encoded by `send`: one that no longer decodes is a defect). */
export const decodeStored = (stored: ReadonlyArray<RunStore.SentMessage>) =>
  Effect.map(Effect.forEach(stored, (message) => Effect.orDie(decodeSent(message.messages))), (all) => all.flat())

/** A thread id `send` accepts: what `Agent` accepts (a non-empty string without lone surrogates). */
const ThreadId = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.filter((id) => !/\p{Cs}/u.test(id), { message: () => "must not hold a lone surrogate" })
)
const SendMode = Schema.Literal("steer", "queue")
/** A sender's idempotency key: a non-empty string, at most 256 characters. */
const IdempotencyKey = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(256, { message: () => "must be at most 256 characters" })
)

/** The most characters of text and file data one send stores (the agent's default `maxInputChars`). */
const maxSendChars = 4 * 1024 * 1024

/**
 * What is wrong with a sent message for a thread that may be mid-run, or undefined: only user messages of text
 * and file parts, without the middleware's marker (`options.stepwise`), within {@link maxSendChars} — as
 * `Agent.send` takes (a tool result without its call, an unanswered call or a system message would land between
 * the run's own messages).
 */
const userMessagesProblem = (messages: ReadonlyArray<Prompt.Message>): string | undefined => {
  const marked = (options: unknown) =>
    typeof options === "object" && options !== null && Object.hasOwn(options, "stepwise")
  let size = 0
  for (const [i, message] of messages.entries()) {
    if (message.role !== "user") {
      return `messages.${i}: ${message.role === "assistant" ? "an" : "a"} ${message.role} message cannot be sent; ` +
        `send takes only user messages (of text and file parts), the agent writes the others`
    }
    if (marked(message.options)) {
      return `messages.${i}.options.stepwise: the agent's middleware mark their own messages there`
    }
    for (const [j, part] of message.content.entries()) {
      const type: unknown = (part as { readonly type?: unknown }).type
      if (type !== "text" && type !== "file") {
        return `messages.${i}.content.${j}: a part of type ${JSON.stringify(String(type))} cannot be sent`
      }
      if (marked(part.options)) {
        return `messages.${i}.content.${j}.options.stepwise: the agent's middleware mark their own messages there`
      }
      size += part.type === "text"
        ? part.text.length
        : typeof part.data === "string"
        ? part.data.length
        : part.data instanceof Uint8Array
        ? part.data.byteLength
        : 0
    }
  }
  return size > maxSendChars
    ? `holds ${size} characters of text and file data, over the limit of ${maxSendChars}`
    : undefined
}

/** `send`'s checks: the thread id, the mode and the message, which it gives encoded for the store. */
export const checkSend = (
  threadId: unknown,
  message: Prompt.RawInput,
  mode: unknown,
  idempotencyKey: unknown
): Effect.Effect<
  {
    readonly threadId: string
    readonly mode: "steer" | "queue"
    readonly messages: string
    readonly idempotencyKey: string | undefined
  },
  InvalidSend
> =>
  Effect.gen(function*() {
    const shown = typeof threadId === "string" ? threadId : describeValue(threadId)
    const refuse = (field: InvalidSend["field"]) => (reason: string) =>
      new InvalidSend({ threadId: shown, field, reason })
    const id = yield* Schema.decodeUnknown(ThreadId)(threadId).pipe(
      Effect.mapError((error) => refuse("threadId")(describeParseError(error)))
    )
    const checkedMode = yield* Schema.decodeUnknown(SendMode)(mode ?? "steer").pipe(
      Effect.mapError((error) => refuse("mode")(describeParseError(error)))
    )
    const key = idempotencyKey === undefined ? undefined : yield* Schema.decodeUnknown(IdempotencyKey)(
      idempotencyKey
    ).pipe(Effect.mapError((error) => refuse("idempotencyKey")(describeParseError(error))))
    if (typeof message !== "string" && !Prompt.isPrompt(message) && !Array.isArray(message)) {
      return yield* refuse("message")(
        `must be a string, an array of messages or a Prompt, got ${message === null ? "null" : typeof message}`
      )
    }
    const prompt = yield* Effect.try({
      try: () => Prompt.make(message),
      catch: (error) =>
        refuse("message")(
          `does not decode: ${ParseResult.isParseError(error) ? describeParseError(error) : String(error)}`
        )
    })
    if (prompt.content.length === 0) return yield* refuse("message")("holds no message")
    const notTheUsers = userMessagesProblem(prompt.content)
    if (notTheUsers !== undefined) return yield* refuse("message")(notTheUsers)
    const messages = yield* encodeSent(prompt.content).pipe(
      Effect.mapError((error) => refuse("message")(`cannot be stored: ${describeParseError(error)}`))
    )
    return { threadId: id, mode: checkedMode, messages, idempotencyKey: key }
  })
