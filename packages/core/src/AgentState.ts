/**
 * The agent state: the conversation plus one slice per middleware that
 * declares one, merged into a single object. The whole state encodes with
 * `Schema`, so it survives a checkpoint.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as Types from "effect/Types"
import { AgentConfigError } from "./AgentError.js"
import * as IdentityTable from "./internal/fast/identityTable.js"
import * as Lineage from "./internal/fast/lineage.js"
import * as MessageDecode from "./internal/fast/messageDecode.js"
import * as Pairing from "./internal/fast/pairing.js"
import type * as Middleware from "./Middleware.js"

/**
 * The state every agent has.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentState {
  /** The conversation, without the system prompt. */
  readonly messages: ReadonlyArray<Prompt.Message>
}

type UnionToIntersection<U> = (U extends any ? (k: U) => void : never) extends (k: infer I) => void ? I : never

type IsAny<A> = 0 extends 1 & A ? true : false

/**
 * The state of an agent with the given middleware: the messages and every
 * middleware's slice, as one flat object.
 *
 * @example
 * ```ts
 * import type { AgentState, Middleware } from "@stepwise-agent/core"
 *
 * type State = AgentState.Of<readonly [Middleware.Middleware<{ readonly calls: number }>]>
 * // { readonly messages: ReadonlyArray<Prompt.Message>; readonly calls: number }
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type Of<Mws extends ReadonlyArray<Middleware.Any>> = Flat<
  & AgentState
  & ([Middleware.State<Mws[number]>] extends [never] ? {} : UnionToIntersection<Middleware.State<Mws[number]>>)
>

type Flat<A> = IsAny<A> extends true ? A : Types.Simplify<A>

/** The keys of a middleware's slice; none known for an `any` slice. */
type KeysOf<M> = IsAny<Middleware.State<M>> extends true ? never : keyof Middleware.State<M> & string

type Clash<Mws, Seen extends string> = Mws extends readonly [infer M, ...infer Rest] ?
  "messages" extends KeysOf<M> ? `state key "messages" is the agent's conversation; a middleware cannot declare it`
  : [KeysOf<M> & Seen] extends [never] ? Clash<Rest, Seen | KeysOf<M>>
  : `state key "${OneOf<KeysOf<M> & Seen> & string}" is declared by two middleware`
  : unknown

/** One member of a union, so that a message names one key. */
type OneOf<U> = UnionToIntersection<U extends any ? () => U : never> extends () => infer K ? K : never

/**
 * Checks at compile time that the middleware of a list declare distinct
 * state keys (and none declares `messages`): `unknown` when they do, else a
 * message naming the key, which `Agent.make` intersects with its
 * `middleware` option so that the list does not compile. Lists that are not
 * tuples are checked at run time only.
 *
 * @example
 * ```ts
 * import type { AgentState, Middleware } from "@stepwise-agent/core"
 *
 * type A = Middleware.Middleware<{ readonly todos: number }>
 * type Clash = AgentState.CheckKeys<readonly [A, A]>
 * // `state key "todos" is declared by two middleware`
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type CheckKeys<Mws extends ReadonlyArray<Middleware.Any>> = Clash<Mws, never>

/**
 * The per-middleware layout the loop works on: the messages and each slice
 * under its middleware's name.
 *
 * @since 0.1.0
 * @category models
 */
export interface Slices {
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly slices: Readonly<Record<string, object>>
}

/**
 * How the state of one agent is laid out, checked and encoded.
 *
 * @since 0.1.0
 * @category models
 */
export interface Layout {
  /** Middleware names that own a slice, with the keys of their slice. */
  readonly owners: ReadonlyArray<{ readonly name: string; readonly keys: ReadonlyArray<string> }>
  /** The slices of a new thread. */
  readonly initial: Readonly<Record<string, object>>
  /** Flattens the per-middleware layout into the user-facing state: the messages and every slice's keys. */
  readonly flatten: (slices: Slices) => AgentState & Readonly<Record<string, unknown>>
  readonly encodeSlices: (
    slices: Readonly<Record<string, object>>
  ) => Effect.Effect<Record<string, unknown>, ParseResult.ParseError>
  readonly decodeSlices: (
    encoded: Readonly<Record<string, unknown>>
  ) => Effect.Effect<Record<string, object>, ParseResult.ParseError>
}

/**
 * Why `__proto__` cannot name a stored slice or key: effect's `Schema` decodes it as the decoded object's
 * prototype, so a stored thread would not load back (see `docs/upstream/effect-schema-proto-key.md`).
 */
const notStorable = (what: string) =>
  `"__proto__" cannot be a ${what} with state: a checkpoint would not load back (effect's Schema takes the key ` +
  `for the object's prototype)`

/**
 * Builds the state layout of a middleware list. Two middleware with one
 * name, or two slices declaring the same key (or the reserved `messages`),
 * fail with an `AgentConfigError`. The middleware are taken as built: one
 * made by `Middleware.unwrap` shows its state once `Middleware.build` (or
 * `Agent.make`) has run its setup.
 *
 * @example
 * ```ts
 * import { AgentState, Middleware } from "@stepwise-agent/core"
 * import { Effect, Schema } from "effect"
 *
 * const counter = Middleware.make({
 *   name: "counter",
 *   state: { schema: Schema.Struct({ calls: Schema.Number }), initial: { calls: 0 } }
 * })
 * const layout = Effect.runSync(AgentState.layout([counter]))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const layout = (middleware: ReadonlyArray<Middleware.Any>): Effect.Effect<Layout, AgentConfigError> =>
  Effect.suspend(() => {
    const names = new Set<string>()
    const keyOwner = new Map<string, string>([["messages", "the agent"]])
    const owners: Array<{ name: string; keys: ReadonlyArray<string>; schema: Schema.Schema<any, any> }> = []
    const initial: Record<string, object> = {}
    for (const m of middleware) {
      if (names.has(m.name)) {
        return Effect.fail(
          new AgentConfigError({ reason: `Two middleware are named "${m.name}"; middleware names must be unique` })
        )
      }
      names.add(m.name)
      if (m.state === undefined) continue
      if (m.name === "__proto__") return Effect.fail(new AgentConfigError({ reason: notStorable(`middleware name`) }))
      const keys = Object.keys(m.state.initial)
      for (const key of keys) {
        if (key === "__proto__") {
          return Effect.fail(new AgentConfigError({ reason: notStorable(`state key of middleware "${m.name}"`) }))
        }
        const owner = keyOwner.get(key)
        if (owner !== undefined) {
          return Effect.fail(
            new AgentConfigError({
              reason: `Middleware "${m.name}" declares state key "${key}", which ${owner} already owns`
            })
          )
        }
        keyOwner.set(key, `middleware "${m.name}"`)
      }
      owners.push({ name: m.name, keys, schema: m.state.schema })
      initial[m.name] = m.state.initial
    }
    const flatten = (state: Slices): AgentState & Readonly<Record<string, unknown>> => {
      const out: Record<string, unknown> = { messages: state.messages }
      for (const owner of owners) Object.assign(out, state.slices[owner.name])
      return out as AgentState & Readonly<Record<string, unknown>>
    }
    const encoders = owners.map((owner) => Schema.encodeUnknownEither(owner.schema))
    // A slice object is replaced, never changed, when a hook updates it: its encoding is kept with it.
    const encodedSlices = IdentityTable.make<object, unknown>()
    const encodeSlices = (slices: Readonly<Record<string, object>>) =>
      Effect.suspend(() => {
        const out: Record<string, unknown> = {}
        for (let i = 0; i < owners.length; i++) {
          const name = owners[i]!.name
          const slice = slices[name]!
          let encoded = encodedSlices.get(slice)
          if (encoded === undefined) {
            const result = encoders[i]!(slice)
            if (Either.isLeft(result)) return Effect.fail(result.left)
            encoded = result.right
            encodedSlices.set(slice, encoded)
          }
          out[name] = encoded
        }
        return Effect.succeed(out)
      })
    const decodeSlices = (encoded: Readonly<Record<string, unknown>>) =>
      Effect.forEach(owners, (owner) =>
        owner.name in encoded
          ? Effect.map(Schema.decodeUnknown(owner.schema)(encoded[owner.name]), (decoded) =>
            [owner.name, decoded as object] as const)
          : Effect.succeed([owner.name, initial[owner.name]!] as const)).pipe(Effect.map(Object.fromEntries))
    return Effect.succeed<Layout>({
      owners: owners.map(({ keys, name }) => ({ name, keys })),
      initial,
      flatten,
      encodeSlices,
      decodeSlices
    })
  })

const encodeMessageWithSchema = Schema.encodeSync(Prompt.Message)

const isOptions = (u: unknown): u is object => typeof u === "object" && u !== null

/**
 * The encoded form of the common parts, built directly: the fields the part's
 * Schema declares (dropping its type marker), which is what encoding through
 * the Schema gives, at a fraction of the cost. `undefined` for other parts.
 */
const encodePartDirectly = (part: Prompt.Part): object | undefined => {
  if (!isOptions(part.options)) return undefined
  switch (part.type) {
    case "text":
    case "reasoning":
      return typeof part.text === "string" ? { type: part.type, text: part.text, options: part.options } : undefined
    case "tool-call":
      return typeof part.id === "string" && typeof part.name === "string" &&
          typeof part.providerExecuted === "boolean"
        ? {
          type: part.type,
          id: part.id,
          name: part.name,
          params: part.params,
          providerExecuted: part.providerExecuted,
          options: part.options
        }
        : undefined
    case "tool-result":
      return typeof part.id === "string" && typeof part.name === "string" && typeof part.isFailure === "boolean" &&
          typeof part.providerExecuted === "boolean"
        ? {
          type: part.type,
          id: part.id,
          name: part.name,
          isFailure: part.isFailure,
          result: part.result,
          providerExecuted: part.providerExecuted,
          options: part.options
        }
        : undefined
    default:
      return undefined
  }
}

const partsByRole: Record<"user" | "assistant" | "tool", ReadonlyArray<Prompt.Part["type"]>> = {
  user: ["text"],
  assistant: ["text", "reasoning", "tool-call", "tool-result"],
  tool: ["tool-result"]
}

/** Encodes a message; through its Schema when it has a part the direct encoding does not cover (files). */
const encodeMessage = (message: Prompt.Message): Prompt.MessageEncoded => {
  if (!isOptions(message.options)) return encodeMessageWithSchema(message)
  if (message.role === "system") {
    return typeof message.content === "string"
      ? { role: "system", content: message.content, options: message.options }
      : encodeMessageWithSchema(message)
  }
  if (!Array.isArray(message.content)) return encodeMessageWithSchema(message)
  const allowed = partsByRole[message.role]
  const content = new Array<object>(message.content.length)
  for (let i = 0; i < content.length; i++) {
    const part = allowed.includes(message.content[i]!.type) ? encodePartDirectly(message.content[i]!) : undefined
    if (part === undefined) return encodeMessageWithSchema(message)
    content[i] = part
  }
  return { role: message.role, content, options: message.options } as Prompt.MessageEncoded
}
const decodeMessage = Schema.decodeUnknownEither(Prompt.Message)
const encodedMessages = IdentityTable.make<Prompt.Message, Prompt.MessageEncoded>()
// The reverse: a stored (encoded) message object to its decoded message, so
// reading back a checkpoint this process wrote costs one lookup per message.
const decodedMessages = IdentityTable.make<object, Prompt.Message>()

/**
 * Encodes messages for a checkpoint. Each message is encoded once and
 * remembered, so saving a growing thread costs in proportion to the new
 * messages.
 *
 * @example
 * ```ts
 * import { AgentState } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 *
 * const encoded = AgentState.encodeMessages(Prompt.make("hello").content)
 * ```
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeMessages = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.MessageEncoded> => {
  const out = new Array<Prompt.MessageEncoded>(messages.length)
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    let encoded = encodedMessages.get(message)
    if (encoded === undefined) {
      encoded = encodeMessage(message)
      encodedMessages.set(message, encoded)
      decodedMessages.set(encoded, message)
    }
    out[i] = encoded
  }
  return out
}

/**
 * Decodes messages read from a checkpoint.
 *
 * @example
 * ```ts
 * import { AgentState } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const messages = Effect.runSync(AgentState.decodeMessages([{ role: "user", content: "hi" }]))
 * ```
 *
 * @since 0.1.0
 * @category encoding
 */
export const decodeMessages = (
  encoded: ReadonlyArray<unknown>
): Effect.Effect<Array<Prompt.Message>, ParseResult.ParseError> =>
  Effect.suspend(() => {
    const out = new Array<Prompt.Message>(encoded.length)
    for (let i = 0; i < encoded.length; i++) {
      const raw = encoded[i]
      const known = typeof raw === "object" && raw !== null ? decodedMessages.get(raw) : undefined
      if (known !== undefined) {
        out[i] = known
        continue
      }
      let message = MessageDecode.decodeMessage(raw)
      if (message === undefined) {
        const decoded = decodeMessage(raw)
        if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
        message = decoded.right
      }
      out[i] = message
      encodedMessages.set(message, raw as Prompt.MessageEncoded)
      if (typeof raw === "object" && raw !== null) decodedMessages.set(raw, message)
    }
    return Effect.succeed(out)
  })

/**
 * The tool calls of the last assistant message that have no result yet
 * (another hook may have answered some), with that message's index;
 * `undefined` when there is no assistant message.
 *
 * @example
 * ```ts
 * import { AgentState } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 *
 * const messages = Prompt.make([
 *   { role: "assistant", content: [{ type: "tool-call", id: "c1", name: "add", params: {} }] }
 * ]).content
 * AgentState.pendingToolCalls(messages)?.calls.map((call) => call.id) // ["c1"]
 * ```
 *
 * @since 0.1.0
 * @category messages
 */
export const pendingToolCalls = (
  messages: ReadonlyArray<Prompt.Message>
): { readonly index: number; readonly calls: ReadonlyArray<Prompt.ToolCallPart> } | undefined => {
  let index = messages.length - 1
  while (index >= 0 && messages[index]!.role !== "assistant") index--
  if (index < 0) return undefined
  // (made at the first result: a reply just received has none)
  let answered: Set<string> | undefined
  for (let i = index; i < messages.length; i++) {
    const message = messages[i]!
    if (message.role === "tool" || message.role === "assistant") {
      for (const part of message.content) if (part.type === "tool-result") (answered ??= new Set()).add(part.id)
    }
  }
  const calls: Array<Prompt.ToolCallPart> = []
  for (const part of (messages[index] as Prompt.AssistantMessage).content) {
    if (part.type === "tool-call" && !part.providerExecuted && answered?.has(part.id) !== true) calls.push(part)
  }
  return { index, calls }
}

/**
 * Answers every pending tool call (see `pendingToolCalls`) with a failed
 * result saying it was not run and why, so the thread never keeps a call
 * without its result (providers reject such a thread). A thread with nothing
 * pending is returned as is.
 *
 * @example
 * ```ts
 * import { AgentState } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 *
 * const call = Prompt.makePart("tool-call", { id: "c1", name: "deploy", params: {}, providerExecuted: false })
 * const messages = AgentState.answerPending(
 *   [Prompt.makeMessage("assistant", { content: [call] })],
 *   "the user cancelled the run"
 * )
 * // the last message is a tool message: c1 failed with "Not run: the user cancelled the run"
 * ```
 *
 * @since 0.1.0
 * @category messages
 */
export const answerPending = (
  messages: ReadonlyArray<Prompt.Message>,
  reason: string
): ReadonlyArray<Prompt.Message> =>
  appendToolResults(
    messages,
    (pendingToolCalls(messages)?.calls ?? []).map((call) =>
      Prompt.makePart("tool-result", {
        id: call.id,
        name: call.name,
        result: { error: `Not run: ${reason}` },
        isFailure: true,
        providerExecuted: false
      })
    )
  )

/**
 * Appends tool results, merging them into a trailing tool message, in the
 * order of the calls of the last assistant message (results a middleware
 * answered early would otherwise come before the ones the tools produced).
 *
 * @example
 * ```ts
 * import { AgentState, Middleware } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 *
 * const call = Prompt.makePart("tool-call", { id: "c1", name: "add", params: {}, providerExecuted: false })
 * const messages = AgentState.appendToolResults(
 *   [Prompt.makeMessage("assistant", { content: [call] })],
 *   [Middleware.toolResult(call, 3)]
 * )
 * ```
 *
 * @since 0.1.0
 * @category messages
 */
export const appendToolResults = (
  messages: ReadonlyArray<Prompt.Message>,
  results: ReadonlyArray<Prompt.ToolResultPart>
): ReadonlyArray<Prompt.Message> => {
  if (results.length === 0) return messages
  const last = messages[messages.length - 1]
  if (last === undefined || last.role !== "tool") {
    return Lineage.append(messages, [Prompt.makeMessage("tool", { content: results })])
  }
  const order = new Map<string, number>()
  for (let i = messages.length - 2; i >= 0; i--) {
    const message = messages[i]!
    if (message.role === "assistant") {
      message.content.forEach((part, index) => {
        if (part.type === "tool-call") order.set(part.id, index)
      })
      break
    }
  }
  const rank = (part: Prompt.ToolResultPart) => order.get(part.id) ?? Number.MAX_SAFE_INTEGER
  const content = [...last.content, ...results].sort((a, b) => rank(a) - rank(b))
  return Lineage.replaceLast(messages, Prompt.makeMessage("tool", { content }))
}

/**
 * The messages a model call is sent of `messages`: every tool result answers
 * a call of the assistant message before it, and every such call has a
 * result before the next non-tool message. A result without its call (an
 * orphan, e.g. from input history) is dropped; a call without a result is
 * answered by a failed "not run" result. The agent applies this to each
 * model request (after every `wrapModelCall` hook), so a middleware that
 * measures the request, such as a context trigger, measures this. Paired
 * messages come back as the same array; `messages` is never changed.
 *
 * @example
 * ```ts
 * import { AgentState } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 *
 * const call = Prompt.makePart("tool-call", { id: "c1", name: "add", params: {}, providerExecuted: false })
 * const orphan = Prompt.makePart("tool-result", {
 *   id: "c0", name: "add", result: 1, isFailure: false, providerExecuted: false
 * })
 * const sent = AgentState.paired([
 *   Prompt.makeMessage("tool", { content: [orphan] }),
 *   Prompt.makeMessage("assistant", { content: [call] })
 * ])
 * // [assistant c1, tool: c1 failed with "Not run: ..."]: the orphan result is dropped
 * ```
 *
 * @since 0.1.0
 * @category messages
 */
export const paired = (messages: ReadonlyArray<Prompt.Message>): ReadonlyArray<Prompt.Message> =>
  Pairing.paired(messages)

/**
 * How many leading messages `next` shares with `base`, as the same objects.
 * The agent records which thread it made from which (appending a reply,
 * tool results, a run's input), so for two threads of one run, or a run's
 * thread and the stored thread it continued, this is read from the record
 * without looking at the messages; other arrays are compared message by
 * message. A context policy uses it to keep what it learnt of `base` and
 * look only at the rest of `next`.
 *
 * @example
 * ```ts
 * import { AgentState } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 *
 * const hello = Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "Hello" })] })
 * const again = Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "Again" })] })
 * AgentState.sharedPrefix([hello], [hello, again]) // 1
 * ```
 *
 * @since 0.1.0
 * @category messages
 */
export const sharedPrefix = (base: ReadonlyArray<Prompt.Message>, next: ReadonlyArray<Prompt.Message>): number =>
  Lineage.sharedPrefix(base, next)
