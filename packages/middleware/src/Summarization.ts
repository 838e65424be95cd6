/**
 * Summarization: when the conversation grows past a trigger, replace its
 * older messages with one summary written by a (possibly smaller, cheaper)
 * model, and keep the recent window as it is.
 *
 * As in LangChain v1's `SummarizationMiddleware`: before each model call
 * (`beforeModel`) the stored conversation is measured as the model call is
 * sent it (tool calls and results paired); when a `trigger` is
 * reached (`{ tokens }`, `{ messages }`, a `{ fraction }` of the model's
 * input limit, or several of them, which must all be reached; a list of
 * triggers is reached when any one is), the messages older than the `keep`
 * window (default: the 20 newest) are sent to the summarizer and replaced,
 * **in the stored thread**, by one user message holding `summaryPrefix` and
 * the summary ({@link isSummary} recognises it). The agent's next model
 * request, and every later run on the thread, sees the summary and the
 * window. Leading system messages stay in front, untouched. Without a
 * `trigger` it never summarizes on its own (only a request the provider
 * rejects as too long, see below).
 *
 * The cut never separates a tool call from its results: when the window
 * would start with tool results, it starts earlier, at the assistant message
 * that made the calls (so the window may be longer than `keep`). A window of
 * `{ tokens }` keeps at least the newest message.
 *
 * The summarizer is a `LanguageModel` behind its own tag, {@link Summarizer}
 * (provide {@link layer} or {@link layerFromLanguageModel}), so it may differ
 * from the agent's model. It is called with `generateText` on a transcript of
 * the older messages (at most `trimTokensToSummarize` tokens of them, the
 * newest, plus the previous summary), never through the agent's model or
 * stream: its text and usage never show in the agent's events or usage. When
 * it fails, the history stays as it was, and the run fails with
 * {@link SummarizationFailed} (`onFailure: "fail"`, the default) or goes on
 * unsummarized (`onFailure: "continue"`, reported as a decision).
 *
 * Tokens are counted with the `TokenCounter` the agent is given, or else an
 * approximate one (LangChain Python's count, 4 characters per token). Messages only (the system prompt
 * is not part of the stored conversation); with `calibrate: true` the counter
 * is calibrated with the input tokens the provider reports for each model
 * call, so its counts take in the system prompt and the tool definitions.
 *
 * A fraction is taken of the `contextWindow` option when given, else of the
 * `maxInputTokens` of the agent's model's profile (`ModelProfile`: name the
 * model with `ModelProfile.layerModel` or `ModelProfile.model`), looked up at
 * run time. A model without a profile gets `ModelProfile.fallback`'s window
 * (128,000 tokens) and one warning log per middleware and model.
 *
 * When the provider rejects a model request as too long anyway (see
 * `ContextOverflow.classify`), the middleware summarizes the request's older
 * messages whatever the trigger, retries once, and summarizes the stored
 * thread before the next model call; if the retry is rejected too, the run
 * fails with `ContextOverflow` (`onOverflow: "summarize"`, the default).
 *
 * Cost per model call: the middleware remembers, per thread (the history
 * starting with the same first message object), the running token sums of
 * the messages it has seen, so a call measures only the messages added since
 * the last one (the counter caches per message too); the trigger check is
 * then one comparison and the cut a binary search over the sums. After a
 * summary it continues from the new history without measuring it again. A
 * history that shares only its first messages with the last one (a run's
 * input after a stored thread, where the run before had its own) keeps what
 * was measured of those. How many messages two histories share is read from
 * the agent's records of which array it made from which
 * (`AgentState.sharedPrefix`), so in the agent loop the check costs the same
 * on a long thread as on a short one; other arrays are compared by identity,
 * message by message.
 *
 * @since 0.1.0
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as AgentState from "@stepwise-agent/core/AgentState"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Secrets from "@stepwise-agent/core/Secrets"
import type * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Usage from "@stepwise-agent/core/Usage"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as ContextOverflow from "./ContextOverflow.js"
import * as ContextView from "./ContextView.js"
import * as ContextLimit from "./internal/context/contextLimit.js"
import * as Sent from "./internal/context/sent.js"
import * as HistoryCache from "./internal/fast/historyCache.js"
import * as Marker from "./internal/marker.js"
import * as Check from "./internal/options.js"
import * as ThreadTexts from "./internal/threadTexts.js"
import * as Offload from "./Offload.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * A size of context: a number of tokens, a number of messages, or a fraction
 * (0 ≤ f ≤ 1) of the model's input limit (the `contextWindow` option, else
 * the model's profile). The size of the `keep` window.
 *
 * @since 0.1.0
 * @category models
 */
export type ContextSize =
  | { readonly tokens: number }
  | { readonly messages: number }
  | { readonly fraction: number }

/**
 * When to summarize: the messages the model call is sent of the stored ones
 * (tool calls and results paired, `AgentState.paired`: an orphan the agent
 * drops is not counted) reach `tokens` tokens, `messages` messages, and
 * `fraction` (0 < f ≤ 1) of the model's input limit. Give one
 * or more of them: the condition holds when every one given is reached
 * (`{ tokens: 4000, messages: 10 }` is 4000 tokens *and* 10 messages).
 *
 * @since 0.1.0
 * @category models
 */
export interface TriggerCondition {
  readonly tokens?: number | undefined
  readonly messages?: number | undefined
  readonly fraction?: number | undefined
}

/**
 * What to do when the summarizer fails: fail the run with
 * {@link SummarizationFailed}, or continue with the history unsummarized.
 *
 * @since 0.1.0
 * @category models
 */
export type OnFailure = "fail" | "continue"

/**
 * What to do when the provider rejects a request as too long: summarize the
 * older messages and retry once, or let the provider's error through.
 *
 * @since 0.1.0
 * @category models
 */
export type OnOverflow = "summarize" | "fail"

/**
 * Where a summary goes: `"rewrite"` replaces the summarized messages in the
 * stored thread; `"view"` keeps the stored thread whole and records the
 * summary and its cut in the `summaryView` state slice
 * (`ContextView.SummaryView`), applied to each model request.
 *
 * @since 0.1.0
 * @category models
 */
export type Mode = "rewrite" | "view"

/**
 * The state slice the `offload` option adds: the texts the thread's
 * summaries evicted to the `Offload.OffloadStore`, by reference (`null`
 * until one is), so that `deleteThread` removes them. A fork starts with its
 * source's slice, which names the source: deleting the fork removes none of
 * them.
 *
 * @example
 * ```ts
 * import * as Summarization from "@stepwise-agent/middleware/Summarization"
 *
 * // the references of the evicted messages a thread's state records
 * const refsOf = (state: Summarization.OffloadSlice): ReadonlyArray<string> => state.summaryOffloads?.refs ?? []
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const OffloadSlice = Schema.Struct({ summaryOffloads: Schema.NullOr(Offload.Offloads) })

/**
 * @since 0.1.0
 * @category models
 */
export interface OffloadSlice extends Schema.Schema.Type<typeof OffloadSlice> {}

/** The key of {@link OffloadSlice}. */
const offloadKey = "summaryOffloads" as const

/**
 * The state slice of the middleware in a mode, with `offload` or without:
 * `summaryView` in view mode (a mode given as the literal `"view"`; a mode
 * known only at run time types no slice), none in rewrite mode; and
 * {@link OffloadSlice} with `offload: true` (given as the literal `true`).
 *
 * @since 0.1.0
 * @category utility types
 */
export type SliceOf<M extends Mode, O extends boolean = false> =
  & ([M] extends ["view"] ? ContextView.SummarySlice : {})
  & ([O] extends [true] ? OffloadSlice : {})

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * `"rewrite"` (the default, as LangChain's `SummarizationMiddleware`):
   * the summary replaces the older messages in the stored thread. `"view"`:
   * the stored thread keeps every message, and only the model's requests
   * see the summary (see `ContextView`).
   */
  readonly mode?: Mode | undefined
  /**
   * Write the messages a summary evicts to the `Offload.OffloadStore` (which
   * the agent then needs: provide `Offload.layerMemory`,
   * `Offload.layerKeyValueStore` or `Offload.layerWorkspace`) and name their
   * reference in the summary message, so the model can read them back with
   * `read_offloaded` (list `Offload.middleware()` for the tool). They are
   * stored as {@link evictedContent} (the encoded messages as JSON);
   * {@link decodeEvicted} gives them back. Their references are kept in the
   * thread's state ({@link OffloadSlice}), and `deleteThread` removes them
   * from the store. Default `false`.
   */
  readonly offload?: boolean | undefined
  /**
   * When to summarize: a condition (every size it gives reached), or a list
   * of conditions (any one of them holding). Token and message counts are
   * whole numbers ≥ 1, as is a fraction once taken of the input limit.
   * Default: none, so the middleware never summarizes on its own (as in
   * LangChain); an empty list is the same.
   */
  readonly trigger?: TriggerCondition | ReadonlyArray<TriggerCondition> | undefined
  /**
   * The recent window kept as it is: the newest messages that fit in this
   * many tokens (or this fraction of the input limit; at least the newest
   * message), or this many newest messages (`0` summarizes them all).
   * Extended to keep tool calls with their results. Default
   * `{ messages: 20 }`, as in LangChain.
   */
  readonly keep?: ContextSize | undefined
  /**
   * The input limit fractions are taken of, in tokens. Default: the
   * `maxInputTokens` of the agent model's profile (`ModelProfile`), else
   * `ModelProfile.fallback`'s.
   */
  readonly contextWindow?: number | undefined
  /**
   * The name of the agent's model, whose profile sizes fractions and names
   * the model in `ContextOverflow` (default: `ModelProfile.CurrentModel`).
   */
  readonly agentModel?: string | undefined
  /** Default `"summarize"`. */
  readonly onOverflow?: OnOverflow | undefined
  /**
   * Calibrate the token counter with the input tokens the provider reports
   * for each model call (`TokenCounter.calibrate`), so counts take in what
   * the provider counts besides the messages: the system prompt, the tool
   * definitions, its framing. Default `false`.
   */
  readonly calibrate?: boolean | undefined
  /**
   * The summarizer's instructions; `{messages}` is replaced by the transcript
   * of the messages to summarize (default {@link defaultSummaryPrompt}).
   */
  readonly summaryPrompt?: string | undefined
  /**
   * The text in front of the summary in the summary message, followed by a
   * blank line (default {@link defaultSummaryPrefix}).
   */
  readonly summaryPrefix?: string | undefined
  /**
   * The most tokens of older messages sent to the summarizer (default 4000):
   * the newest of them that fit (at least one), plus the previous summary.
   * `false` sends them all.
   */
  readonly trimTokensToSummarize?: number | false | undefined
  /** Default `"fail"`. */
  readonly onFailure?: OnFailure | undefined
  /** The middleware's name (default `"summarization"`). */
  readonly name?: string | undefined
}

/**
 * The summarizer's default instructions.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultSummaryPrompt = `You are summarizing the earlier part of a conversation between a user and an \
AI agent that uses tools. The agent will continue the work with only your summary and the most recent messages.

Write a concise summary that keeps:
- the user's goals, requests and constraints;
- decisions made, and why;
- facts learnt from tool results that may be needed later (names, numbers, identifiers, paths, URLs);
- what was done, what remains to be done, and open questions.

Leave out pleasantries and anything that no longer matters. If the messages begin with an earlier summary, \
fold it in. Answer with the summary only.

<messages>
{messages}
</messages>`

/**
 * The default `summaryPrefix`: the text in front of the summary in the
 * summary message (LangChain's).
 *
 * @since 0.1.0
 * @category models
 */
export const defaultSummaryPrefix = "Here is a summary of the conversation to date:"

/** How many newest messages are kept when no `keep` is given (LangChain's default). */
const defaultKeep = 20

/**
 * The key, in a message's provider `options`, under which the summary
 * message is marked: `{ "stepwise": { summarization: "summary" } }`.
 * Providers read only their own key, so the marker never reaches a model.
 *
 * @since 0.1.0
 * @category models
 */
export const markerKey = Marker.markerKey

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * The summarizer failed (or answered with no text). The history was left as
 * it was.
 *
 * @since 0.1.0
 * @category errors
 */
export class SummarizationFailed extends Schema.TaggedError<SummarizationFailed>(
  "@stepwise-agent/middleware/Summarization/SummarizationFailed"
)("SummarizationFailed", {
  /** How many messages were to be summarized. */
  messages: Schema.Number,
  reason: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Summarizing ${this.messages} message(s) failed: ${this.reason}`
  }
}

// -----------------------------------------------------------------------------
// tags
// -----------------------------------------------------------------------------

/**
 * The model that writes summaries.
 *
 * @since 0.1.0
 * @category tags
 */
export class Summarizer extends Context.Tag("@stepwise-agent/middleware/Summarization/Summarizer")<
  Summarizer,
  LanguageModel.Service
>() {}

// -----------------------------------------------------------------------------
// layers
// -----------------------------------------------------------------------------

/**
 * Provides a `LanguageModel` service as the {@link Summarizer}.
 *
 * @example
 * ```ts
 * import * as Summarization from "@stepwise-agent/middleware/Summarization"
 * import type { LanguageModel } from "@effect/ai"
 *
 * // e.g. built with OpenAiLanguageModel.make({ model: "gpt-4o-mini" }) from @effect/ai-openai
 * declare const cheapModel: LanguageModel.Service
 * const SummarizerLive = Summarization.layer(cheapModel)
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (model: LanguageModel.Service): Layer.Layer<Summarizer> => Layer.succeed(Summarizer, model)

/**
 * Provides the `LanguageModel` of the context as the {@link Summarizer}:
 * give it a provider's model layer, e.g. a cheaper model than the agent's.
 *
 * @example
 * ```ts
 * import * as Summarization from "@stepwise-agent/middleware/Summarization"
 * import type { LanguageModel } from "@effect/ai"
 * import { Layer } from "effect"
 *
 * // e.g. OpenAiLanguageModel.layer({ model: "gpt-4o-mini" }) from @effect/ai-openai
 * declare const CheapModelLive: Layer.Layer<LanguageModel.LanguageModel>
 * const SummarizerLive = Summarization.layerFromLanguageModel.pipe(Layer.provide(CheapModelLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromLanguageModel: Layer.Layer<Summarizer, never, LanguageModel.LanguageModel> = Layer.effect(
  Summarizer,
  LanguageModel.LanguageModel
)

// -----------------------------------------------------------------------------
// guards
// -----------------------------------------------------------------------------

/**
 * Whether a message is a summary written by this middleware.
 *
 * @example
 * ```ts
 * import * as Summarization from "@stepwise-agent/middleware/Summarization"
 * import { Prompt } from "@effect/ai"
 *
 * const message = Prompt.makeMessage("user", {
 *   content: [Prompt.makePart("text", { text: "Here is a summary of the conversation to date: ..." })],
 *   options: { "stepwise": { summarization: "summary" } }
 * })
 * Summarization.isSummary(message) // true
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const isSummary = (message: Prompt.Message): boolean =>
  message.role === "user" && (message.options[markerKey] as { readonly summarization?: unknown } | undefined)
      ?.summarization === "summary"

const summaryMessage = (prefix: string, summary: string): Prompt.UserMessage =>
  ContextView.summaryMessage(`${prefix}\n\n${summary}`)

// -----------------------------------------------------------------------------
// evicted messages
// -----------------------------------------------------------------------------

/**
 * The text the `offload` option stores for the messages a summary evicts:
 * a JSON array of the encoded messages (as a checkpoint encodes them), one
 * message per line.
 *
 * @example
 * ```ts
 * import * as Summarization from "@stepwise-agent/middleware/Summarization"
 * import { Prompt } from "@effect/ai"
 *
 * Summarization.evictedContent(Prompt.make("hello").content)
 * // '[\n{"role":"user","content":[{"type":"text","text":"hello","options":{}}],"options":{}}\n]'
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const evictedContent = (messages: ReadonlyArray<Prompt.Message>): string =>
  `[\n${AgentState.encodeMessages(messages).map((message) => JSON.stringify(message)).join(",\n")}\n]`

/**
 * The stored text of evicted messages is not what {@link evictedContent}
 * writes.
 *
 * @since 0.1.0
 * @category errors
 */
export class EvictedDecodeError extends Schema.TaggedError<EvictedDecodeError>(
  "@stepwise-agent/middleware/Summarization/EvictedDecodeError"
)("EvictedDecodeError", { reason: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The offloaded messages could not be read: ${this.reason}`
  }
}

/**
 * The messages back from the text {@link evictedContent} wrote (read from
 * the offload store by the reference the summary names).
 *
 * @example
 * ```ts
 * import * as Summarization from "@stepwise-agent/middleware/Summarization"
 * import { Prompt } from "@effect/ai"
 * import { Effect } from "effect"
 *
 * const messages = Prompt.make("hello").content
 * const again = Effect.runSync(Summarization.decodeEvicted(Summarization.evictedContent(messages)))
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const decodeEvicted = (content: string): Effect.Effect<Array<Prompt.Message>, EvictedDecodeError> =>
  Effect.flatMap(
    Effect.try({
      try: () => JSON.parse(content) as unknown,
      catch: (error) => new EvictedDecodeError({ reason: `not JSON: ${String(error)}` })
    }),
    (parsed) =>
      Array.isArray(parsed)
        ? Effect.mapError(
          AgentState.decodeMessages(parsed),
          (error) => new EvictedDecodeError({ reason: `not messages: ${error.message}` })
        )
        : Effect.fail(new EvictedDecodeError({ reason: "not a JSON array" }))
  )

/** The line of a summary that names where the evicted messages are. */
const evictedReference = (ref: string, count: number): string =>
  `[The ${count} summarized message(s) are stored in full under reference "${ref}"; read them with ` +
  `${Offload.toolName}({ "ref": "${ref}", "offset": 0 }).]`

// -----------------------------------------------------------------------------
// transcript
// -----------------------------------------------------------------------------

const stringify = (value: unknown): string => {
  if (typeof value === "string") return value
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

const resultLine = (part: Prompt.ToolResultPart): string =>
  `Tool result (${part.name})${part.isFailure ? " [failed]" : ""}: ${stringify(part.result)}`

const fileLine = (part: Prompt.FilePart): string =>
  `[file${part.fileName === undefined ? "" : ` ${part.fileName}`} (${part.mediaType})]`

/**
 * One line per message (tool calls and results on lines of their own). Reasoning is left out; an
 * earlier summary loses its `prefix`.
 */
const transcript = (messages: ReadonlyArray<Prompt.Message>, prefix: string): string => {
  const lines: Array<string> = []
  const framing = `${prefix}\n\n`
  for (const message of messages) {
    switch (message.role) {
      case "system": {
        lines.push(`System: ${message.content}`)
        break
      }
      case "user": {
        const text = message.content.map((part) => part.type === "text" ? part.text : fileLine(part)).join("")
        lines.push(
          isSummary(message)
            ? `Earlier summary: ${text.startsWith(framing) ? text.slice(framing.length) : text}`
            : `User: ${text}`
        )
        break
      }
      case "assistant": {
        let text = ""
        const after: Array<string> = []
        for (const part of message.content) {
          if (part.type === "text") text += part.text
          else if (part.type === "file") text += fileLine(part)
          else if (part.type === "tool-call") after.push(`Assistant called ${part.name}(${stringify(part.params)})`)
          else if (part.type === "tool-result") after.push(resultLine(part))
        }
        if (text.length > 0) lines.push(`Assistant: ${text}`)
        lines.push(...after)
        break
      }
      case "tool": {
        for (const part of message.content) lines.push(resultLine(part))
        break
      }
    }
  }
  return lines.join("\n")
}

// -----------------------------------------------------------------------------
// options
// -----------------------------------------------------------------------------

type Size =
  | { readonly _tag: "tokens"; readonly value: number }
  | { readonly _tag: "messages"; readonly value: number }

/** A size, or a fraction of an input limit known at run time. */
type SizeOf = Size | { readonly _tag: "fraction"; readonly value: number }

interface Config {
  /** Summarize when, for any condition, every size in it is reached. */
  readonly triggers: ReadonlyArray<ReadonlyArray<SizeOf>>
  readonly keep: SizeOf
  readonly summaryPrompt: string
  readonly summaryPrefix: string
  readonly trim: number | undefined
  readonly onFailure: OnFailure
  readonly onOverflow: OnOverflow
  readonly calibrate: boolean
  readonly agentModel: string | undefined
  readonly mode: Mode
  readonly offload: boolean
  readonly name: string
}

/** A whole number of at least 0. */
const NonNegative = Schema.Number.pipe(
  Schema.filter((n) => Number.isInteger(n) && n >= 0, { description: "a whole number of at least 0" })
)

const TriggerSchema = Schema.Struct({
  tokens: Schema.optional(Check.AtLeastOne),
  messages: Schema.optional(Check.AtLeastOne),
  fraction: Schema.optional(
    Schema.Number.pipe(Schema.filter((f) => f > 0 && f <= 1, { description: "a number in (0, 1]" }))
  )
}).pipe(
  Schema.filter((condition) =>
    condition.tokens !== undefined || condition.messages !== undefined || condition.fraction !== undefined ||
    "gives no size: give one or more of tokens, messages, fraction (all must be reached)"
  )
)

const KeepSchema = Schema.Struct({
  tokens: Schema.optional(NonNegative),
  messages: Schema.optional(NonNegative),
  fraction: Schema.optional(
    Schema.Number.pipe(Schema.filter((f) => f >= 0 && f <= 1, { description: "a number in [0, 1]" }))
  )
}).pipe(
  Schema.filter((keep) => {
    const given = [keep.tokens, keep.messages, keep.fraction].filter((size) => size !== undefined).length
    return given === 1 || `gives ${given} sizes: give exactly one of tokens, messages, fraction`
  })
)

const OptionsSchema = Schema.Struct({
  trigger: Schema.optional(Schema.Union(TriggerSchema, Schema.Array(TriggerSchema))),
  keep: Schema.optional(KeepSchema),
  contextWindow: Schema.optional(Check.AtLeastOne),
  summaryPrompt: Schema.optional(Schema.String.pipe(
    Schema.filter((text) => text.includes("{messages}"), {
      description: "a text with a {messages} placeholder for the messages to summarize"
    })
  )),
  summaryPrefix: Schema.optional(Schema.String),
  trimTokensToSummarize: Schema.optional(Schema.Union(Check.AtLeastOne, Schema.Literal(false))),
  onFailure: Schema.optional(Schema.Literal("fail", "continue")),
  agentModel: Schema.optional(Check.NonEmpty),
  onOverflow: Schema.optional(Schema.Literal("summarize", "fail")),
  calibrate: Schema.optional(Schema.Boolean),
  mode: Schema.optional(Schema.Literal("rewrite", "view")),
  offload: Schema.optional(Schema.Boolean),
  name: Schema.optional(Check.NonEmpty)
})

/**
 * The sizes of a trigger condition, every one to be reached. A fraction is
 * taken of `contextWindow` (at least 1 token), or kept for the model's
 * profile at run time.
 */
const conditionOf = (
  option: string,
  condition: TriggerCondition,
  contextWindow: number | undefined
): Either.Either<ReadonlyArray<SizeOf>, AgentError.InvalidOptions> => {
  const sizes: Array<SizeOf> = []
  if (condition.tokens !== undefined) sizes.push({ _tag: "tokens", value: condition.tokens })
  if (condition.messages !== undefined) sizes.push({ _tag: "messages", value: condition.messages })
  const { fraction } = condition
  if (fraction === undefined) return Either.right(sizes)
  if (contextWindow === undefined) return Either.right([...sizes, { _tag: "fraction", value: fraction }])
  const tokens = Math.floor(fraction * contextWindow)
  return tokens >= 1 ? Either.right([...sizes, { _tag: "tokens", value: tokens }]) : Either.left(
    Check.invalid(
      "Summarization",
      `${option}.fraction`,
      `${fraction} of a context window of ${contextWindow} is ${tokens} tokens; need at least 1`
    )
  )
}

/** The size of the kept window (exactly one size given); a fraction is taken of `contextWindow`, or kept for the model's profile. */
const keepOf = (keep: typeof KeepSchema.Type, contextWindow: number | undefined): SizeOf =>
  keep.tokens !== undefined
    ? { _tag: "tokens", value: keep.tokens }
    : keep.messages !== undefined
    ? { _tag: "messages", value: keep.messages }
    : contextWindow === undefined
    ? { _tag: "fraction", value: keep.fraction! }
    : { _tag: "tokens", value: Math.floor(keep.fraction! * contextWindow) }

const validate = (options: Options): Either.Either<Config, AgentError.InvalidOptions> =>
  Either.gen(function*() {
    const checked = yield* Check.validateEither("Summarization", OptionsSchema, options)
    const { contextWindow } = checked
    const listed = Array.isArray(checked.trigger)
    const conditions: ReadonlyArray<TriggerCondition> = checked.trigger === undefined
      ? []
      : listed
      ? checked.trigger as ReadonlyArray<TriggerCondition>
      : [checked.trigger as TriggerCondition]
    const triggers: Array<ReadonlyArray<SizeOf>> = []
    for (const [index, condition] of conditions.entries()) {
      triggers.push(yield* conditionOf(listed ? `trigger[${index}]` : "trigger", condition, contextWindow))
    }
    const keep = checked.keep === undefined
      ? { _tag: "messages" as const, value: defaultKeep }
      : keepOf(checked.keep, contextWindow)
    const trim = checked.trimTokensToSummarize ?? 4000
    return {
      triggers,
      keep,
      summaryPrompt: checked.summaryPrompt ?? defaultSummaryPrompt,
      summaryPrefix: checked.summaryPrefix ?? defaultSummaryPrefix,
      trim: trim === false ? undefined : trim,
      onFailure: checked.onFailure ?? "fail",
      onOverflow: checked.onOverflow ?? "summarize",
      calibrate: checked.calibrate ?? false,
      agentModel: checked.agentModel,
      mode: checked.mode ?? "rewrite",
      offload: checked.offload ?? false,
      name: checked.name ?? "summarization"
    }
  })

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/** A fraction of an input limit in tokens, rounded down (and at least `least`). */
const resolveSize = (size: SizeOf, inputTokens: number, least: number): Size =>
  size._tag === "fraction" ? { _tag: "tokens", value: Math.max(least, Math.floor(size.value * inputTokens)) } : size

/** The leading system messages stay in front: the index of the first other message. */
const firstNonSystem = (messages: ReadonlyArray<Prompt.Message>): number => {
  let start = 0
  while (start < messages.length && messages[start]!.role === "system") start++
  return start
}

/**
 * Where the kept window starts: the newest `keep` messages, or the longest
 * suffix within `keep` tokens but at least the newest message (a binary
 * search; `tokensFrom(i)` is the tokens of `messages[i..]`), moved back so
 * that it never starts with tool results.
 */
const cutAt = (
  messages: ReadonlyArray<Prompt.Message>,
  start: number,
  keep: Size,
  tokensFrom: (index: number) => number
): number => {
  const length = messages.length
  let cut: number
  if (keep._tag === "messages") {
    cut = Math.max(start, length - keep.value)
  } else {
    let low = start
    let high = length
    while (low < high) {
      const mid = (low + high) >>> 1
      if (tokensFrom(mid) <= keep.value) high = mid
      else low = mid + 1
    }
    // as in LangChain: a token window keeps the newest message even when it is larger
    cut = Math.max(start, Math.min(low, length - 1))
  }
  // Never start the window with tool results: start at the call.
  while (cut > start && messages[cut]?.role === "tool") cut--
  return cut
}

const make = (config: Config) => {
  const { onFailure, summaryPrefix, summaryPrompt, trim } = config
  // Running token sums per thread, and what the model call is sent of it, measured
  const cache = HistoryCache.make({ init: Sent.unknown, truncate: Sent.truncate, measured: Sent.scanned })
  const counterOf = HistoryCache.agentCounterOrApproximate()
  // Fractions are taken of the input limit, resolved at run time when no contextWindow was given.
  const limit = ContextLimit.make({ module: "Summarization", model: config.agentModel })
  const sizes: Effect.Effect<{ readonly triggers: ReadonlyArray<ReadonlyArray<Size>>; readonly keep: Size }> =
    [...config.triggers.flat(), config.keep].some((size) => size._tag === "fraction")
      ? Effect.map(limit, ({ inputTokens }) => ({
        triggers: config.triggers.map((condition) => condition.map((size) => resolveSize(size, inputTokens, 1))),
        keep: resolveSize(config.keep, inputTokens, 0)
      }))
      : Effect.succeed({
        triggers: config.triggers as ReadonlyArray<ReadonlyArray<Size>>,
        keep: config.keep as Size
      })
  // Threads whose last request overflowed: summarized before their next model call, whatever the trigger.
  const overflowed = new Set<string>()

  /**
   * Writes the evicted messages to the offload store; their reference, or
   * undefined (reported) when the store failed.
   */
  const offloadEvicted = (thread: Offload.Thread, evicted: ReadonlyArray<Prompt.Message>) =>
    Effect.gen(function*() {
      const content = evictedContent(evicted)
      const ref = Offload.referenceOf(thread, content)
      const store = yield* Offload.OffloadStore
      return yield* store.put(ref, content).pipe(
        Effect.as(ref),
        Effect.catchAll((error) =>
          Effect.as(
            Middleware.report(`the offload store failed, the summary names no reference: ${error.reason}`, { ref }),
            undefined
          )
        )
      )
    })

  const summarize = (
    thread: Offload.Thread,
    counter: TokenCounter.Service,
    scale: number,
    toSummarize: ReadonlyArray<Prompt.Message>,
    raw: (index: number) => number
  ) =>
    Effect.gen(function*() {
      // The previous summary first (it stands for everything before it), then
      // the newest messages that fit in the budget (at least one).
      const previous = isSummary(toSummarize[0]!) ? 1 : 0
      let from = toSummarize.length
      if (trim === undefined) {
        from = previous
      } else {
        let budget = trim - (previous === 1 ? Math.round(raw(0) * scale) : 0)
        while (from > previous) {
          const tokens = Math.round(raw(from - 1) * scale)
          if (from < toSummarize.length && tokens > budget) break
          budget -= tokens
          from--
        }
      }
      const sent = [...toSummarize.slice(0, previous), ...toSummarize.slice(from)]
      const model = yield* Summarizer
      const prompt = summaryPrompt.replace("{messages}", () => transcript(sent, summaryPrefix))
      const response = yield* model.generateText({ prompt }).pipe(
        Effect.mapError((error) =>
          new SummarizationFailed({
            messages: toSummarize.length,
            // the summarizer is called here, not through the loop: its error is scrubbed here
            reason: `the summarizer failed: ${Secrets.messageOf(error)}`,
            cause: Secrets.scrubError(error)
          })
        ),
        Effect.withSpan("Summarization.summarize", {
          attributes: { messages: toSummarize.length, sent: sent.length },
          captureStackTrace: false
        })
      )
      const text = response.text.trim()
      if (text.length === 0) {
        return yield* new SummarizationFailed({
          messages: toSummarize.length,
          reason: "the summarizer answered with no text"
        })
      }
      const ref = config.offload ? yield* offloadEvicted(thread, toSummarize) : undefined
      const summary = summaryMessage(
        summaryPrefix,
        ref === undefined ? text : `${text}\n\n${evictedReference(ref, toSummarize.length)}`
      )
      const [summaryRaw] = yield* counter.measure([summary])
      return { summary, summaryRaw: summaryRaw!, sent: sent.length, offloaded: ref }
    })

  /**
   * The history summarized when a trigger is reached (or `forced`): the new
   * messages, where the summary is in them (`start`) and where the kept
   * window starts in `messages` (`cut`). None when nothing is summarized.
   */
  const summarizeHistory = (thread: Offload.Thread, messages: ReadonlyArray<Prompt.Message>, forced: boolean) =>
    Effect.gen(function*() {
      const counter = yield* counterOf
      const scale = yield* counter.scale
      const { keep, triggers } = yield* sizes
      return yield* cache.use(counter, messages, ({ state: known, sums }) =>
        Effect.gen(function*() {
          const none = Option.none<{
            readonly result: ReadonlyArray<Prompt.Message>
            readonly summary: Prompt.UserMessage
            readonly start: number
            readonly cut: number
            readonly offloaded: string | undefined
          }>()
          const length = messages.length
          const tokensOf = (raw: number) => HistoryCache.scaled(raw, scale)
          /** Raw tokens of `messages[i]`. */
          const rawOf = (i: number) => sums[i + 1]! - sums[i]!
          // the trigger measures what the model call is sent: orphans the agent drops are not
          const sent = Sent.ifStored(messages, sums, known) ?? (yield* Sent.measure(counter, messages, sums, known))
          const sentTokens = tokensOf(sent.raw)
          const reached = (size: Size) => size._tag === "tokens" ? sentTokens >= size.value : sent.length >= size.value
          const triggered = forced || triggers.some((condition) => condition.every(reached))
          if (!triggered) return none

          const start = firstNonSystem(messages)
          const cut = cutAt(messages, start, keep, (i) => tokensOf(sums[length]! - sums[i]!))
          const toSummarize = messages.slice(start, cut)
          if (toSummarize.length === 0 || (toSummarize.length === 1 && isSummary(toSummarize[0]!))) return none

          const outcome = yield* summarize(thread, counter, scale, toSummarize, (i) => rawOf(start + i)).pipe(
            Effect.map(Option.some),
            Effect.catchAll((error) =>
              onFailure === "fail" ? Effect.fail(error) : Effect.as(
                Middleware.report(`summarization failed, continuing unsummarized: ${error.reason}`, {
                  messages: error.messages
                }),
                Option.none()
              )
            )
          )
          if (Option.isNone(outcome)) return none
          const { offloaded, sent: sentCount, summary, summaryRaw } = outcome.value
          const result = [...messages.slice(0, start), summary, ...messages.slice(cut)]

          // Continue from the new history: its sums follow from the old ones.
          const next = cache.seed(
            counter,
            result,
            (i) => i < start ? rawOf(i) : i === start ? summaryRaw : rawOf(cut + i - start - 1)
          )
          const tokensAfter = tokensOf((yield* Sent.measure(counter, result, next.sums, next.state)).raw)
          yield* Middleware.report(
            `summarized ${toSummarize.length} messages, kept ${length - cut}; ${sentTokens} → ${tokensAfter} tokens`,
            {
              summarized: toSummarize.length,
              sentToSummarizer: sentCount,
              kept: length - cut,
              tokensBefore: sentTokens,
              tokensAfter,
              mode: config.mode,
              ...(offloaded === undefined ? {} : { offloaded })
            }
          )
          return Option.some({ result, summary, start, cut, offloaded })
        }))
    })

  /** Removes evicted texts from the store (it cannot fail). */
  const remove = ThreadTexts.remover("Summarization")
  const forget = (refs: ReadonlyArray<string>) =>
    refs.length === 0 ? Effect.void : Effect.flatMap(Offload.OffloadStore, (store) => remove(store, refs))

  /**
   * The texts a summary of the thread evicted in a step whose model call has not answered yet. When the
   * thread's next step starts (or the thread is deleted) and its state does not record them, that step was
   * never saved, and they are removed. In an agent's run, its end removes them first (and those of a step that
   * answered but was not saved: `ThreadTexts.removeUnsavedAtRunEnd`); this covers the hooks run on their own.
   */
  const unsaved = new Map<string, ReadonlyArray<string>>()

  /** Removes the texts an unsaved step of the thread evicted that its state does not record. */
  const settle = (state: object, threadId: string) => {
    const written = unsaved.get(threadId)
    if (written === undefined) return Effect.void
    unsaved.delete(threadId)
    const own = new Set(ThreadTexts.ownRefs(state, offloadKey, threadId))
    return forget(written.filter((ref) => !own.has(ref)))
  }

  /**
   * The update of the thread's state recording the text a summary evicted under `ref` (none when there is
   * none, or the state has it), unsaved until the model call answers; the text is removed when the run ends
   * before a save holds it.
   */
  const recordEvicted = (state: object, threadId: string, ref: string | undefined) =>
    Effect.suspend(() => {
      const recorded = ref === undefined ? undefined : ThreadTexts.recording(state, offloadKey, threadId, [ref])
      if (recorded === undefined) return Effect.succeed(undefined)
      unsaved.set(threadId, recorded.fresh)
      return Effect.as(
        ThreadTexts.removeUnsavedAtRunEnd(offloadKey, threadId, recorded.fresh, forget),
        recorded.state
      )
    })

  const beforeModel = (
    { incarnation, messages, state, threadId }: Middleware.HookContext<any>
  ) =>
    Effect.gen(function*() {
      if (config.offload) yield* settle(state, threadId)
      const forced = overflowed.delete(threadId)
      if (messages.length === 0 || (!forced && config.triggers.length === 0)) return undefined
      const outcome = yield* summarizeHistory({ threadId, incarnation }, messages, forced)
      if (Option.isNone(outcome)) return undefined
      const record = yield* recordEvicted(state, threadId, outcome.value.offloaded)
      return record === undefined
        ? { messages: outcome.value.result }
        : { messages: outcome.value.result, state: record }
    })

  // View mode: the summary message of each view, one object per text, so that its count stays cached.
  const summaries = new Map<string, Prompt.UserMessage>()
  const summaryOf = (text: string): Prompt.UserMessage => {
    let message = summaries.get(text)
    if (message === undefined) {
      if (summaries.size >= 256) summaries.delete(summaries.keys().next().value!)
      message = ContextView.summaryMessage(text)
      summaries.set(text, message)
    }
    return message
  }
  const viewOf = (messages: ReadonlyArray<Prompt.Message>, view: ContextView.SummaryView | null) =>
    view === null ? messages : ContextView.applySummary(messages, view, summaryOf(view.text))

  const beforeModelView = (
    { incarnation, messages, state, threadId }: Middleware.HookContext<ContextView.SummarySlice>
  ) =>
    Effect.gen(function*() {
      if (config.offload) yield* settle(state, threadId)
      const forced = overflowed.delete(threadId)
      if (messages.length === 0 || (!forced && config.triggers.length === 0)) return undefined
      // A view whose cut lies past the stored messages belongs to a history rewritten since: start afresh.
      const previous = state.summaryView !== null && state.summaryView.end <= messages.length
        ? state.summaryView
        : null
      const outcome = yield* summarizeHistory({ threadId, incarnation }, viewOf(messages, previous), forced)
      if (Option.isNone(outcome)) {
        return previous === state.summaryView ? undefined : { state: { summaryView: null } }
      }
      const { cut, offloaded, start, summary } = outcome.value
      // `cut` indexes the view: past a previous summary, view index i is stored index previous.end + i - start - 1.
      const end = previous === null ? cut : previous.end + cut - start - 1
      const text = (summary.content[0] as Prompt.TextPart).text
      summaries.set(text, summary)
      return { state: { summaryView: { start, end, text }, ...yield* recordEvicted(state, threadId, offloaded) } }
    })

  /** The request with the thread's summary view applied. */
  const viewed = (request: Middleware.ModelRequest): Middleware.ModelRequest => {
    const view = (request.state as Partial<ContextView.SummarySlice>).summaryView ?? null
    const messages = viewOf(request.messages, view)
    return messages === request.messages ? request : { ...request, messages }
  }

  /**
   * The request with its older messages summarized, whatever the trigger; None when there is nothing to summarize.
   * `onEvicted` is given the reference of the text the summary evicted (`offload`).
   */
  const compact = (request: Middleware.ModelRequest, onEvicted: (ref: string) => void) =>
    Effect.gen(function*() {
      const { messages } = request
      const counter = yield* counterOf
      const scale = yield* counter.scale
      const { keep } = yield* sizes
      const raw = yield* counter.measure(messages)
      const sums = [0]
      for (const tokens of raw) sums.push(sums[sums.length - 1]! + tokens)
      const start = firstNonSystem(messages)
      const cut = cutAt(messages, start, keep, (i) => HistoryCache.scaled(sums[messages.length]! - sums[i]!, scale))
      const toSummarize = messages.slice(start, cut)
      if (toSummarize.length === 0 || (toSummarize.length === 1 && isSummary(toSummarize[0]!))) {
        return Option.none<Middleware.ModelRequest>()
      }
      const outcome = yield* summarize(request, counter, scale, toSummarize, (i) => raw[start + i]!).pipe(
        Effect.map(Option.some),
        Effect.catchAll((error) =>
          onFailure === "fail" ? Effect.fail(error) : Effect.as(
            Middleware.report(`summarization failed, not compacting the request: ${error.reason}`, {
              messages: error.messages
            }),
            Option.none()
          )
        )
      )
      if (Option.isNone(outcome)) return Option.none<Middleware.ModelRequest>()
      if (outcome.value.offloaded !== undefined) onEvicted(outcome.value.offloaded)
      overflowed.add(request.threadId)
      return Option.some<Middleware.ModelRequest>({
        ...request,
        messages: [...messages.slice(0, start), outcome.value.summary, ...messages.slice(cut)]
      })
    })

  // the system message of the last prompt calibrated with, kept so that its count stays cached
  let system: Prompt.SystemMessage | undefined
  /** Calibrates the counter with the input tokens the provider reported for what `request` sent. */
  const calibrate = (request: Middleware.ModelRequest, response: Middleware.ModelResponse) =>
    Effect.gen(function*() {
      const reported = Usage.read(response.usage).inputTokens
      if (reported === undefined) return
      const counter = yield* counterOf
      // the provider counted what the model call was sent
      const messages = AgentState.paired(request.messages)
      if (request.systemPrompt === undefined) return yield* counter.calibrate(reported, messages)
      if (system?.content !== request.systemPrompt) {
        system = Prompt.makeMessage("system", { content: request.systemPrompt })
      }
      yield* counter.calibrate(reported, Array.of<Prompt.Message>(system).concat(messages))
    })
  /** The recovery from an overflow that compacts the request, giving `onEvicted` what the compaction evicted. */
  const recoverWith = (onEvicted: (ref: string) => void) =>
    ContextOverflow.recover({ compact: (request) => compact(request, onEvicted), model: config.agentModel })
  const recover = config.onOverflow === "summarize" ? recoverWith(() => {}) : undefined
  /**
   * The response of a call whose request may be compacted, recording the text the compaction evicted in the
   * thread's state; when the call fails, that text is removed (unless the thread already had it), and so it is
   * when the run ends before a save holds it.
   */
  const recordingCompacted = (
    request: Middleware.ModelRequest,
    next: Middleware.NextModelCall
  ): Effect.Effect<Middleware.ModelResponse, unknown, unknown> =>
    Effect.suspend(() => {
      // the reference of the text a compaction of this run of the call evicted
      let evicted: string | undefined
      return recoverWith((ref) => {
        evicted = ref
      })(request, next).pipe(
        Effect.flatMap((response) => {
          const ref = evicted
          const recorded = ref === undefined
            ? undefined
            : ThreadTexts.recording(request.state, offloadKey, request.threadId, [ref])
          return recorded === undefined ? Effect.succeed(response) : Effect.as(
            ThreadTexts.removeUnsavedAtRunEnd(offloadKey, request.threadId, recorded.fresh, forget),
            { ...response, state: recorded.state }
          )
        }),
        Effect.onError(() => {
          const ref = evicted
          return ref === undefined
            ? Effect.void
            : forget(ThreadTexts.recording(request.state, offloadKey, request.threadId, [ref])?.fresh ?? [])
        })
      )
    })
  const compacting: Middleware.WrapModelCall<any, any> = (request, next) => {
    const sent: Middleware.NextModelCall = config.calibrate
      ? (request) => Effect.tap(next(request), (response) => calibrate(request, response))
      : next
    if (!config.offload) return recover === undefined ? sent(request) : recover(request, sent)
    const call = recover === undefined ? sent(request) : recordingCompacted(request, sent)
    // the step's state, with the texts its summary evicted, is saved
    return Effect.tap(call, () => Effect.sync(() => void unsaved.delete(request.threadId)))
  }
  const onThreadDeleted = (threadId: string, slice: Option.Option<object>) =>
    Effect.suspend(() => {
      overflowed.delete(threadId)
      if (!config.offload) return Effect.void
      const written = unsaved.get(threadId) ?? []
      unsaved.delete(threadId)
      const own = Option.match(slice, {
        onNone: () => [],
        onSome: (slice) => ThreadTexts.ownRefs(slice, offloadKey, threadId)
      })
      return forget(written.length === 0 ? own : [...new Set([...own, ...written])])
    })

  // the provider's errors it lets through are already the agent's
  if (config.mode === "view") {
    return Middleware.make({
      name: config.name,
      state: (config.offload
        ? {
          schema: Schema.Struct({ ...ContextView.SummarySlice.fields, ...OffloadSlice.fields }),
          initial: { summaryView: null, summaryOffloads: null }
        }
        : { schema: ContextView.SummarySlice, initial: { summaryView: null } }) as Middleware.StateSlice<any>,
      beforeModel: beforeModelView,
      // the view first, so that overflow recovery and calibration see what the model is sent
      wrapModelCall: (request, next) => compacting(viewed(request), next),
      onThreadDeleted
    }) as Middleware.Middleware<any, SummarizationFailed | ContextOverflow.ContextOverflow, Summarizer>
  }
  return Middleware.make({
    name: config.name,
    state: config.offload
      ? { schema: OffloadSlice, initial: { summaryOffloads: null } } as Middleware.StateSlice<any>
      : undefined,
    beforeModel,
    ...(recover !== undefined || config.calibrate || config.offload ? { wrapModelCall: compacting } : {}),
    onThreadDeleted
  }) as Middleware.Middleware<any, SummarizationFailed | ContextOverflow.ContextOverflow, Summarizer>
}

/**
 * Builds the middleware (see the module documentation). It needs the
 * {@link Summarizer}; bad options (an unknown key too) fail `Agent.make`
 * with `AgentError.InvalidOptions` naming the option. When it summarizes it reports the
 * decision `"summarized N messages, kept M; before → after tokens"`.
 *
 * List it after middleware that rewrite the input (such as `Pii`), so the
 * summarizer sees what they made of it.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import * as Summarization from "@stepwise-agent/middleware/Summarization"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   // 0.8 of the input limit of the agent's model profile
 *   const summarization = Summarization.middleware({ trigger: { fraction: 0.8 }, keep: { messages: 20 } })
 *   const agent = yield* Agent.make({ middleware: [summarization] })
 *   return yield* agent.run("Where were we?", { threadId: "t1" })
 * })
 * // provide the agent's model named with ModelProfile.model("gpt-4o", ...), and
 * // Summarization.layer(...) for the summarizer
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = <M extends Mode = "rewrite", O extends boolean = false>(
  options: Options & { readonly mode?: M | undefined; readonly offload?: O | undefined }
): Middleware.Middleware<
  SliceOf<M, O>,
  SummarizationFailed | ContextOverflow.ContextOverflow,
  Summarizer | ([O] extends [true] ? Offload.OffloadStore : never)
> => Middleware.unwrap(setup(options), { name: Check.nameOf(options, "summarization") })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: <M extends Mode = "rewrite", O extends boolean = false>(
  options: Options & { readonly mode?: M | undefined; readonly offload?: O | undefined }
) => Effect.Effect<
  Middleware.Middleware<
    SliceOf<M, O>,
    SummarizationFailed | ContextOverflow.ContextOverflow,
    Summarizer | ([O] extends [true] ? Offload.OffloadStore : never)
  >,
  AgentError.InvalidOptions
> = Effect
  .fn("Summarization.middleware")(function*(options: Options) {
    return make(yield* validate(options))
  })
