/**
 * Context editing: pure, typed transforms of the conversation sent to the
 * model, and the middleware that applies them to every model request.
 *
 * An edit ({@link ContextEdit}) maps messages to an {@link EditResult}:
 * `(messages, context) => Effect<EditResult, E, TokenCounter>`,
 * deterministic for one input and one counter. It holds no state that could
 * change a result, only caches: the edited objects it builds (the same input
 * gives the same objects, whose token counts stay cached) and what it learnt
 * about a thread's history on the previous call.
 *
 * {@link clearToolUses} mirrors LangChain's `ClearToolUsesEdit`: when the
 * request reaches its trigger (tokens, messages, a fraction of the model's
 * input window), it replaces the results of old tool calls with a
 * placeholder. {@link middleware} applies edits in `wrapModelCall` to
 * the request only: the stored thread keeps the original messages.
 *
 * Cost per model call: `clearToolUses` remembers, per thread (the history
 * starting with the same first message object), the running token sums of
 * its messages, its tool calls and results (indexed once a call reaches
 * the trigger) and the previous output, so a model call counts and reads
 * only the messages added since the last one (with `keep: { tokens }`, it
 * also counts the kept results again, newest first, until one does not fit). The cleared parts and
 * messages are memoized per original object, so the exact counters, which
 * cache counts by identity (see `TokenCounter`), count them once.
 * What remains linear in the history is pointer work: checking that the
 * remembered messages are still the first ones (one identity comparison per
 * message) and copying the array of messages sent to the model.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as ContextView from "./ContextView.js"
import * as ContextLimit from "./internal/contextLimit.js"
import * as FailedEdits from "./internal/failedEdits.js"
import * as HistoryCache from "./internal/historyCache.js"
import * as Marker from "./internal/marker.js"
import * as Check from "./internal/options.js"

// ---------------------------------------------------------------------------
// errors
// ---------------------------------------------------------------------------

/**
 * An edit could not be applied. The built-in edits never fail when applied;
 * custom edits may fail with this error.
 *
 * @since 0.1.0
 * @category errors
 */
export class ContextEditError extends Schema.TaggedError<ContextEditError>(
  "@stepwise-agent/middleware/ContextEditing/ContextEditError"
)("ContextEditError", {
  edit: Schema.String,
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Context edit ${this.edit} failed: ${this.reason}`
  }
}

// ---------------------------------------------------------------------------
// models
// ---------------------------------------------------------------------------

/**
 * What an edit sees besides the messages.
 *
 * @since 0.1.0
 * @category models
 */
export interface EditContext {
  /**
   * The system prompt sent with the messages (a model request keeps it apart
   * from them). It counts towards the tokens; edits never change it.
   */
  readonly systemPrompt?: string | undefined
}

/**
 * The outcome of an edit.
 *
 * @since 0.1.0
 * @category models
 */
export interface EditResult {
  /** The edited messages; the input array itself when nothing changed. */
  readonly messages: ReadonlyArray<Prompt.Message>
  /** Whether the input reached the edit's trigger. */
  readonly triggered: boolean
  /** Ids of the tool calls whose results this edit cleared, oldest first. */
  readonly cleared: ReadonlyArray<string>
  /** Tokens of the system prompt and the input messages. */
  readonly tokensBefore: number
  /** Tokens of the system prompt and the output messages. */
  readonly tokensAfter: number
  /** `tokensBefore - tokensAfter`. */
  readonly reclaimed: number
  /** The lowest token count at which the edit fires, for an edit that has one. */
  readonly trigger?: number | undefined
  /**
   * What the cleared results say, for an edit that clears tool results (the
   * middleware's view mode shows the ids of `cleared` with it; default
   * `"[cleared]"`).
   */
  readonly placeholder?: string | undefined
  /** Whether the cleared results' calls lost their arguments too (default false). */
  readonly clearedInputs?: boolean | undefined
}

/**
 * A context edit: a pure transform of the messages sent to the model that
 * may fail with `E` and needs `R` besides the `TokenCounter`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ContextEdit<E = never, R = never> {
  /** Shown in decisions and spans. */
  readonly name: string
  readonly apply: (
    messages: ReadonlyArray<Prompt.Message>,
    context?: EditContext | undefined
  ) => Effect.Effect<EditResult, E, R | TokenCounter.TokenCounter>
}

/**
 * @since 0.1.0
 * @category models
 */
export declare namespace ContextEdit {
  /**
   * Any edit.
   *
   * @since 0.1.0
   * @category utility types
   */
  export type Any = ContextEdit<any, any>
  /**
   * The errors of an edit.
   *
   * @since 0.1.0
   * @category utility types
   */
  export type Error<T> = T extends ContextEdit<infer E, infer _R> ? E : never
  /**
   * The services an edit needs, besides the `TokenCounter`.
   *
   * @since 0.1.0
   * @category utility types
   */
  export type Context<T> = T extends ContextEdit<infer _E, infer R> ? Exclude<R, TokenCounter.TokenCounter> : never
}

// ---------------------------------------------------------------------------
// the cleared marker
// ---------------------------------------------------------------------------

/**
 * The key, in a part's provider `options`, under which context editing marks
 * what it cleared: `{ "stepwise": { contextEditing: "cleared" } }`.
 * Providers read only their own key, so the marker never reaches a model.
 *
 * @since 0.1.0
 * @category constructors
 */
export const markerKey = Marker.markerKey

/**
 * Whether context editing cleared this tool result (or, with
 * `clearToolInputs`, this tool call's arguments).
 *
 * @example
 * ```ts
 * import { ContextEditing } from "@stepwise-agent/middleware"
 * import { Prompt } from "@effect/ai"
 *
 * const part = Prompt.makePart("tool-result", {
 *   id: "call_1", name: "search", result: "[cleared]", isFailure: false, providerExecuted: false,
 *   options: { "stepwise": { contextEditing: "cleared" } }
 * })
 * ContextEditing.isCleared(part) // true
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const isCleared = (part: Prompt.ToolResultPart | Prompt.ToolCallPart): boolean =>
  part.options[markerKey]?.contextEditing === "cleared"

// ---------------------------------------------------------------------------
// ClearToolUses
// ---------------------------------------------------------------------------

/**
 * When {@link clearToolUses} fires: once the request reaches `tokens`
 * (system prompt included), the thread `messages` messages (the system prompt
 * apart), or `fraction` (0 < f ≤ 1) of the model's input window. A condition
 * with several of them fires when all are reached. LangChain's
 * `ContextSize` of a `trigger`.
 *
 * @since 0.1.0
 * @category models
 */
export interface TriggerCondition {
  /** Tokens of the system prompt and the messages; a number > 0. */
  readonly tokens?: number | undefined
  /** Messages of the thread; a whole number ≥ 1. */
  readonly messages?: number | undefined
  /**
   * A fraction (0 < f ≤ 1) of the input window: the `contextWindow` option,
   * else the `maxInputTokens` of the agent's model's profile (`ModelProfile`),
   * else `ModelProfile.fallback`'s. `floor(f × window)` tokens; a condition
   * whose fraction comes to 0 tokens never fires.
   */
  readonly fraction?: number | undefined
}

/**
 * Which tool results {@link clearToolUses} never clears, counting back from
 * the newest: a number (or `{ messages }`) of results; `{ tokens }`: the
 * newest results whose tokens (each counted as a tool message of its own)
 * add up to at most this many; `{ fraction }`: the same with `floor(f ×
 * window)` tokens of the input window (see {@link TriggerCondition}), or 3
 * results when that comes to 0. LangChain's `keep`.
 *
 * @since 0.1.0
 * @category models
 */
export type Keep =
  | number
  | { readonly messages: number }
  | { readonly tokens: number }
  | { readonly fraction: number }

/**
 * Options of {@link clearToolUses}; the defaults are LangChain's.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClearToolUsesOptions {
  /**
   * When to edit: a number of tokens (the request, system prompt included,
   * reaches it), a {@link TriggerCondition}, or a list of them (any one
   * fires). Default `100000` tokens.
   */
  readonly trigger?: number | TriggerCondition | ReadonlyArray<TriggerCondition> | undefined
  /**
   * Once triggered, clear old results, oldest first, until at least this
   * many tokens are reclaimed (default 0: clear every result that may be
   * cleared). When clearing them all reclaims less, all are cleared.
   */
  readonly clearAtLeast?: number | undefined
  /**
   * A low watermark: once triggered, clear old results, oldest first, only
   * until the request is at most this many tokens (a number, `{ tokens }`,
   * or a `{ fraction }` of the input window), below the trigger, so the next
   * edit waits until the context grows back past the trigger. With the
   * middleware's view mode the cleared results stay cleared, so the prompt
   * prefix a provider caches changes only at an edit. With `clearAtLeast`
   * too, both must hold. Default: none (clear every result that may be
   * cleared, or up to `clearAtLeast`).
   */
  readonly clearTo?: number | { readonly tokens: number } | { readonly fraction: number } | undefined
  /** The newest tool results never cleared (default 3 results); see {@link Keep}. */
  readonly keep?: Keep | undefined
  /** Also replace the arguments of the cleared results' tool calls with `{}` (default false). */
  readonly clearToolInputs?: boolean | undefined
  /** Tools whose results are never cleared (default none). */
  readonly excludeTools?: ReadonlyArray<string> | undefined
  /** What a cleared result says (default `"[cleared]"`). */
  readonly placeholder?: string | undefined
  /**
   * The input window fractions are taken of, in tokens. Default: the
   * `maxInputTokens` of the agent's model's profile (`ModelProfile`), looked
   * up when the edit runs, else `ModelProfile.fallback`'s.
   */
  readonly contextWindow?: number | undefined
  /**
   * LangChain JS's deprecated name for `trigger: { tokens: n }`, accepted for
   * ported code; ignored when `trigger` is given.
   *
   * @deprecated use `trigger`
   */
  readonly triggerTokens?: number | undefined
  /**
   * LangChain JS's deprecated name for `keep: { messages: n }`, accepted for
   * ported code; ignored when `keep` is given.
   *
   * @deprecated use `keep`
   */
  readonly keepMessages?: number | undefined
}

/** A trigger condition; `fraction` is left when no `contextWindow` was given, for the model's profile. */
interface Condition {
  readonly tokens: number | undefined
  readonly messages: number | undefined
  readonly fraction: number | undefined
}

type KeepConfig =
  | { readonly _tag: "messages"; readonly value: number }
  | { readonly _tag: "tokens"; readonly value: number }
  | { readonly _tag: "fraction"; readonly value: number }

interface ClearToolUsesConfig {
  readonly triggers: ReadonlyArray<Condition>
  readonly clearAtLeast: number
  /** The low watermark in tokens, or a fraction left for the model's profile. */
  readonly clearTo: { readonly _tag: "tokens" | "fraction"; readonly value: number } | undefined
  readonly keep: KeepConfig
  readonly clearToolInputs: boolean
  readonly excludeTools: ReadonlySet<string>
  readonly placeholder: string
  /** Whether a fraction is left to take of the model's profile when the edit runs. */
  readonly usesProfile: boolean
}

/** LangChain's default `keep`, and what a `keep` fraction that comes to 0 tokens keeps. */
const defaultKeep = 3

const Fraction = Schema.Number.pipe(
  Schema.filter((f) => f > 0 && f <= 1, { description: "a number greater than 0 and at most 1" })
)

const PositiveTokens = Schema.Number.pipe(
  Schema.filter((n) => Number.isFinite(n) && n > 0, { description: "a number greater than 0" })
)

const ConditionSchema = Schema.Struct({
  tokens: Schema.optional(PositiveTokens),
  messages: Schema.optional(Check.AtLeastOne),
  fraction: Schema.optional(Fraction)
}).pipe(
  Schema.filter((condition) =>
    condition.tokens !== undefined || condition.messages !== undefined || condition.fraction !== undefined ||
    "needs at least one of tokens, messages, fraction"
  )
)

const KeepSchema = Schema.Union(
  Check.Count,
  Schema.Struct({ messages: Check.Count }),
  Schema.Struct({
    tokens: Schema.Number.pipe(
      Schema.filter((n) => Number.isFinite(n) && n >= 0, { description: "a number of at least 0" })
    )
  }),
  Schema.Struct({
    fraction: Schema.Number.pipe(Schema.filter((f) => f >= 0 && f <= 1, { description: "a number from 0 to 1" }))
  })
)

const ClearToolUsesSchema = Schema.Struct({
  trigger: Schema.optional(Schema.Union(Check.Count, ConditionSchema, Schema.Array(ConditionSchema))),
  clearAtLeast: Schema.optional(Check.Count),
  clearTo: Schema.optional(Schema.Union(
    PositiveTokens,
    Schema.Struct({ tokens: PositiveTokens }),
    Schema.Struct({ fraction: Fraction })
  )),
  keep: Schema.optional(KeepSchema),
  clearToolInputs: Schema.optional(Schema.Boolean),
  excludeTools: Schema.optional(Schema.Array(Schema.String)),
  placeholder: Schema.optional(Schema.String),
  contextWindow: Schema.optional(Check.AtLeastOne),
  triggerTokens: Schema.optional(PositiveTokens),
  keepMessages: Schema.optional(Check.Count)
})

const validate = (
  options: ClearToolUsesOptions | undefined
): Either.Either<ClearToolUsesConfig, AgentError.InvalidOptions> =>
  Either.gen(function*() {
    const checked = yield* Check.validateEither("ClearToolUses", ClearToolUsesSchema, options)
    const { contextWindow } = checked
    const trigger = checked.trigger ??
      (checked.triggerTokens === undefined ? 100_000 : { tokens: checked.triggerTokens })
    const listed = Array.isArray(trigger)
    const given: ReadonlyArray<TriggerCondition> = typeof trigger === "number"
      ? [{ tokens: trigger }]
      : listed
      ? trigger as ReadonlyArray<TriggerCondition>
      : [trigger as TriggerCondition]
    if (given.length === 0) {
      return yield* Either.left(Check.invalid("ClearToolUses", "trigger", "is an empty list: nothing would trigger"))
    }
    const triggers: Array<Condition> = []
    for (const [index, condition] of given.entries()) {
      let { fraction, tokens } = condition
      if (fraction !== undefined && contextWindow !== undefined) {
        // With a window given, a fraction is a number of tokens: the stricter of the two when both are.
        const fromFraction = Math.floor(fraction * contextWindow)
        if (fromFraction < 1) {
          return yield* Either.left(Check.invalid(
            "ClearToolUses",
            `${listed ? `trigger[${index}]` : "trigger"}.fraction`,
            `${fraction} of a context window of ${contextWindow} is ${fromFraction} tokens; need at least 1`
          ))
        }
        tokens = Math.max(tokens ?? 0, fromFraction)
        fraction = undefined
      }
      triggers.push({ tokens, messages: condition.messages, fraction })
    }
    const keepOption = checked.keep ?? checked.keepMessages ?? defaultKeep
    let keep: KeepConfig = typeof keepOption === "number"
      ? { _tag: "messages", value: keepOption }
      : "messages" in keepOption
      ? { _tag: "messages", value: keepOption.messages }
      : "tokens" in keepOption
      ? { _tag: "tokens", value: keepOption.tokens }
      : { _tag: "fraction", value: keepOption.fraction }
    if (keep._tag === "fraction" && contextWindow !== undefined) {
      const tokens = Math.floor(keep.value * contextWindow)
      keep = tokens > 0 ? { _tag: "tokens", value: tokens } : { _tag: "messages", value: defaultKeep }
    }
    const clearToOption = checked.clearTo
    let clearTo: ClearToolUsesConfig["clearTo"] = clearToOption === undefined
      ? undefined
      : typeof clearToOption === "number"
      ? { _tag: "tokens", value: clearToOption }
      : "tokens" in clearToOption
      ? { _tag: "tokens", value: clearToOption.tokens }
      : { _tag: "fraction", value: clearToOption.fraction }
    if (clearTo?._tag === "fraction" && contextWindow !== undefined) {
      clearTo = { _tag: "tokens", value: Math.floor(clearTo.value * contextWindow) }
    }
    if (clearTo?._tag === "tokens" && triggers.every((condition) => condition.tokens !== undefined)) {
      const lowest = Math.min(...triggers.map((condition) => condition.tokens!))
      if (clearTo.value >= lowest) {
        return yield* Either.left(Check.invalid(
          "ClearToolUses",
          "clearTo",
          `is ${clearTo.value} tokens, not below the trigger (${lowest} tokens): a watermark must be lower`
        ))
      }
    }
    return {
      triggers,
      clearAtLeast: checked.clearAtLeast ?? 0,
      clearTo,
      keep,
      clearToolInputs: checked.clearToolInputs ?? false,
      excludeTools: new Set(checked.excludeTools ?? []),
      placeholder: checked.placeholder ?? "[cleared]",
      usesProfile: keep._tag === "fraction" || clearTo?._tag === "fraction" ||
        triggers.some((condition) => condition.fraction !== undefined)
    }
  })

interface Located<P> {
  readonly part: P
  readonly message: number
  readonly index: number
}

/** A tool result that may be cleared: it answers an earlier call, is not cleared and not excluded. */
interface Eligible {
  readonly result: Located<Prompt.ToolResultPart>
  readonly call: Located<Prompt.ToolCallPart>
  /** Its position among all tool results. */
  readonly position: number
  /** Whether clearing it also clears its call's arguments. */
  readonly withCall: boolean
}

/**
 * What one edit derives from the messages a history cache session has seen
 * (the tool calls and results, and the previous output), so that the next
 * model call of that thread only looks at the new ones. It is a cache: the
 * result of an edit is the same with or without it. The messages are indexed
 * when a call triggers the edit (a call that does not needs only the
 * totals), from where the last indexing stopped.
 */
interface Clearing {
  /** How many of the session's messages are indexed. */
  indexed: number
  readonly calls: Map<string, Located<Prompt.ToolCallPart>>
  readonly callsWithInputs: Set<Prompt.ToolCallPart>
  /** Every tool result that answers a call, in order (what `keep` counts back over). */
  readonly results: Array<Prompt.ToolResultPart>
  readonly eligible: Array<Eligible>
  /** `reclaim[k]`: raw tokens reclaimed by clearing the first `k` eligible results. */
  readonly reclaim: Array<number>
  /** `most[k]`: the most of `reclaim[0..k]` (a placeholder longer than its result reclaims less than 0). */
  readonly most: Array<number>
  /** The indices of the tool calls cleared, per assistant message, by the eligible results measured so far. */
  readonly callsCleared: Map<number, ReadonlyArray<number>>
  /** The last output: the first `k` eligible results cleared in the first `length` messages. */
  output:
    | {
      readonly k: number
      readonly length: number
      readonly messages: ReadonlyArray<Prompt.Message>
      readonly cleared: Map<number, Array<number>>
    }
    | undefined
}

const makeClearing = (): Clearing => ({
  indexed: 0,
  calls: new Map(),
  callsWithInputs: new Set(),
  results: [],
  eligible: [],
  reclaim: [0],
  most: [0],
  callsCleared: new Map(),
  output: undefined
})

/** A trigger condition with its fraction taken of the input window. */
interface Resolved {
  readonly tokens: number | undefined
  readonly messages: number | undefined
}

type ResolvedKeep = { readonly _tag: "messages" | "tokens"; readonly value: number }

const resolveTriggers = (triggers: ReadonlyArray<Condition>, inputTokens: number): ReadonlyArray<Resolved> =>
  triggers.flatMap((condition): ReadonlyArray<Resolved> => {
    if (condition.fraction === undefined) return [condition]
    // LangChain skips a condition whose fraction comes to no token.
    const fromFraction = Math.floor(condition.fraction * inputTokens)
    return fromFraction <= 0 ? [] : [{
      tokens: Math.max(condition.tokens ?? 0, fromFraction),
      messages: condition.messages
    }]
  })

const resolveKeep = (keep: KeepConfig, inputTokens: number): ResolvedKeep => {
  if (keep._tag !== "fraction") return keep
  const tokens = Math.floor(keep.value * inputTokens)
  return tokens > 0 ? { _tag: "tokens", value: tokens } : { _tag: "messages", value: defaultKeep }
}

/** The lowest token count that fires a condition, reported as the edit's trigger. */
const lowestTokens = (triggers: ReadonlyArray<Resolved>): number | undefined => {
  let lowest: number | undefined
  for (const condition of triggers) {
    if (condition.tokens !== undefined) lowest = Math.min(lowest ?? condition.tokens, condition.tokens)
  }
  return lowest
}

const makeClearToolUses = (config: ClearToolUsesConfig): ContextEdit => {
  const { clearAtLeast, clearToolInputs, excludeTools, placeholder } = config
  // Memos: the same original object always maps to the same edited object,
  // so the counter's identity cache keeps working across model calls.
  const clearedResults = new WeakMap<Prompt.ToolResultPart, Prompt.ToolResultPart>()
  const clearedCalls = new WeakMap<Prompt.ToolCallPart, Prompt.ToolCallPart>()
  const variants = new WeakMap<Prompt.Message, Map<string, Prompt.Message>>()
  // A tool result as a tool message of its own, as `keep: { tokens }` counts it.
  const alone = new WeakMap<Prompt.ToolResultPart, Prompt.ToolMessage>()
  let lastSystem: Prompt.SystemMessage | undefined
  // Fractions are taken of the input window, resolved when the edit runs when no contextWindow was given.
  const limit = ContextLimit.make({ module: "ClearToolUses", model: undefined })
  const sizes: Effect.Effect<
    {
      readonly triggers: ReadonlyArray<Resolved>
      readonly keep: ResolvedKeep
      readonly clearTo: number | undefined
    }
  > = config.usesProfile
    ? Effect.map(limit, ({ inputTokens }) => ({
      triggers: resolveTriggers(config.triggers, inputTokens),
      keep: resolveKeep(config.keep, inputTokens),
      clearTo: config.clearTo === undefined
        ? undefined
        : config.clearTo._tag === "tokens"
        ? config.clearTo.value
        : Math.floor(config.clearTo.value * inputTokens)
    }))
    : Effect.succeed({ triggers: config.triggers, keep: config.keep as ResolvedKeep, clearTo: config.clearTo?.value })

  const systemMessage = (text: string): Prompt.SystemMessage => {
    if (lastSystem === undefined || lastSystem.content !== text) {
      lastSystem = Prompt.makeMessage("system", { content: text })
    }
    return lastSystem
  }

  const clearResult = (part: Prompt.ToolResultPart): Prompt.ToolResultPart => {
    let cleared = clearedResults.get(part)
    if (cleared === undefined) {
      cleared = ContextView.clearedResult(part, placeholder)
      clearedResults.set(part, cleared)
    }
    return cleared
  }

  const clearCall = (part: Prompt.ToolCallPart): Prompt.ToolCallPart => {
    let cleared = clearedCalls.get(part)
    if (cleared === undefined) {
      cleared = ContextView.clearedCall(part)
      clearedCalls.set(part, cleared)
    }
    return cleared
  }

  const toolMessageOf = (part: Prompt.ToolResultPart): Prompt.ToolMessage => {
    let message = alone.get(part)
    if (message === undefined) {
      message = Prompt.makeMessage("tool", { content: [part] })
      alone.set(part, message)
    }
    return message
  }

  /** The message with the parts at `indices` (sorted) cleared; the message itself for none. */
  const variant = (message: Prompt.Message, indices: ReadonlyArray<number>): Prompt.Message => {
    if (indices.length === 0 || (message.role !== "assistant" && message.role !== "tool")) return message
    const key = indices.join(",")
    let byKey = variants.get(message)
    if (byKey === undefined) {
      byKey = new Map()
      variants.set(message, byKey)
    }
    let edited = byKey.get(key)
    if (edited === undefined) {
      const content = message.content.map((part: Prompt.Part, index) => {
        if (!indices.includes(index)) return part
        return part.type === "tool-result" ? clearResult(part) : part.type === "tool-call" ? clearCall(part) : part
      })
      edited = Prompt.makeMessage(message.role, { content: content as any, options: message.options })
      byKey.set(key, edited)
    }
    return edited
  }

  /** Indexes a message of a session: its tool calls, and its tool results that may be cleared. */
  const index = (clearing: Clearing, message: Prompt.Message, m: number): void => {
    if (message.role === "assistant") {
      const content = message.content
      for (let i = 0; i < content.length; i++) {
        const part = content[i]!
        if (part.type === "tool-call" && !part.providerExecuted) {
          clearing.calls.set(part.id, { part, message: m, index: i })
        }
      }
    } else if (message.role === "tool") {
      const content = message.content
      for (let i = 0; i < content.length; i++) {
        const part = content[i]!
        if (part.type !== "tool-result") continue
        // A result answers a call made before it; a result without one (an orphan, which
        // the model never sees) is left alone and takes none of the `keep` slots.
        const call = clearing.calls.get(part.id)
        if (call === undefined) continue
        const position = clearing.results.length
        clearing.results.push(part)
        if (isCleared(part)) continue
        if (excludeTools.has(part.name) || excludeTools.has(call.part.name)) continue
        const withCall = clearToolInputs && !isCleared(call.part) && !clearing.callsWithInputs.has(call.part)
        if (withCall) clearing.callsWithInputs.add(call.part)
        clearing.eligible.push({ result: { part, message: m, index: i }, call, position, withCall })
      }
    }
  }

  // Sessions, per counter and per first message (one per thread, in practice).
  const cache = HistoryCache.make({ init: makeClearing })

  /** The messages with the first `k` eligible results cleared. */
  const build = (
    clearing: Clearing,
    messages: ReadonlyArray<Prompt.Message>,
    k: number
  ): ReadonlyArray<Prompt.Message> => {
    const last = clearing.output
    const reuse = last !== undefined && last.k <= k
    const output = reuse ? last.messages.slice() : messages.slice()
    if (reuse) { for (let m = last.length; m < messages.length; m++) output.push(messages[m]!) }
    const cleared = reuse ? last.cleared : new Map<number, Array<number>>()
    const touched = new Set<number>()
    const clear = (message: number, index: number) => {
      const indices = cleared.get(message)
      if (indices === undefined) cleared.set(message, [index])
      else indices.push(index)
      touched.add(message)
    }
    for (let j = reuse ? last.k : 0; j < k; j++) {
      const entry = clearing.eligible[j]!
      clear(entry.result.message, entry.result.index)
      if (entry.withCall) clear(entry.call.message, entry.call.index)
    }
    for (const m of touched) output[m] = variant(messages[m]!, cleared.get(m)!.sort((a, b) => a - b))
    clearing.output = { k, length: messages.length, messages: output, cleared }
    return output
  }

  /**
   * How many of the newest results `keep` keeps: a number of them, or the
   * newest whose tokens (each as a tool message of its own) add up to at most
   * `keep.value`, counting back until one does not fit.
   */
  const keepCount = (
    counter: TokenCounter.Service,
    clearing: Clearing,
    keep: ResolvedKeep,
    scale: number
  ): Effect.Effect<number> => {
    if (keep._tag === "messages") return Effect.succeed(keep.value)
    return Effect.gen(function*() {
      const results = clearing.results
      let total = 0
      let kept = 0
      // Measured in batches, newest first: a result costs a lookup or a few reads to count again.
      let batch = 8
      for (let end = results.length; end > 0; end -= batch, batch *= 2) {
        const from = Math.max(0, end - batch)
        const counts = yield* counter.measure(results.slice(from, end).map(toolMessageOf))
        for (let j = counts.length - 1; j >= 0; j--) {
          total += HistoryCache.scaled(counts[j]!, scale)
          if (total > keep.value) return kept
          kept++
        }
      }
      return kept
    })
  }

  /** Measures, once, what clearing each eligible result up to `candidates` reclaims. */
  const measureUpTo = (
    counter: TokenCounter.Service,
    clearing: Clearing,
    messages: ReadonlyArray<Prompt.Message>,
    candidates: number
  ): Effect.Effect<void> => {
    const measured = clearing.reclaim.length - 1
    if (measured >= candidates) return Effect.void
    // Per candidate: its result and placeholder, and with its call the call's message before and
    // after (a counter may round a message as a whole, so the call is measured in its message).
    const items: Array<TokenCounter.Countable> = []
    // committed with the counts, so an interrupted measure leaves the cache as it was
    const callsCleared = new Map<number, ReadonlyArray<number>>()
    for (let j = measured; j < candidates; j++) {
      const entry = clearing.eligible[j]!
      items.push(entry.result.part, clearResult(entry.result.part))
      if (entry.withCall) {
        const m = entry.call.message
        const before = callsCleared.get(m) ?? clearing.callsCleared.get(m) ?? []
        const after = [...before, entry.call.index].sort((a, b) => a - b)
        callsCleared.set(m, after)
        items.push(variant(messages[m]!, before), variant(messages[m]!, after))
      }
    }
    return Effect.map(counter.measure(items), (counts) => {
      for (const [m, indices] of callsCleared) clearing.callsCleared.set(m, indices)
      let at = 0
      for (let j = measured; j < candidates; j++) {
        const entry = clearing.eligible[j]!
        let delta = counts[at]! - counts[at + 1]!
        at += 2
        if (entry.withCall) {
          delta += counts[at]! - counts[at + 1]!
          at += 2
        }
        const reclaim = clearing.reclaim[j]! + delta
        clearing.reclaim.push(reclaim)
        clearing.most.push(Math.max(clearing.most[j]!, reclaim))
      }
    })
  }

  const run = (
    counter: TokenCounter.Service,
    { state: clearing, sums }: HistoryCache.Session<Clearing>,
    messages: ReadonlyArray<Prompt.Message>,
    systemRaw: number,
    scale: number,
    triggers: ReadonlyArray<Resolved>,
    keep: ResolvedKeep,
    clearTo: number | undefined
  ): Effect.Effect<EditResult> =>
    Effect.gen(function*() {
      const tokensOf = (raw: number) => HistoryCache.scaled(raw, scale)
      const raw = sums[messages.length]! + systemRaw
      const tokensBefore = tokensOf(raw)
      const trigger = lowestTokens(triggers)
      const unchanged = (triggered: boolean): EditResult => ({
        messages,
        triggered,
        cleared: [],
        tokensBefore,
        tokensAfter: tokensBefore,
        reclaimed: 0,
        trigger
      })
      // Any condition whose every limit is reached fires.
      const fires = triggers.some((condition) =>
        (condition.tokens === undefined || tokensBefore >= condition.tokens) &&
        (condition.messages === undefined || messages.length >= condition.messages)
      )
      if (!fires) return unchanged(false)
      for (let m = clearing.indexed; m < messages.length; m++) index(clearing, messages[m]!, m)
      clearing.indexed = messages.length

      // The eligible results older than the ones `keep` keeps.
      const eligible = clearing.eligible
      const window = clearing.results.length - (yield* keepCount(counter, clearing, keep, scale))
      let lo = 0
      let hi = eligible.length
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (eligible[mid]!.position < window) lo = mid + 1
        else hi = mid
      }
      const candidates = lo
      if (candidates === 0) return unchanged(true)
      yield* measureUpTo(counter, clearing, messages, candidates)

      // Oldest first: all candidates, or with clearAtLeast (and clearTo) the fewest that reclaim
      // at least that much (and bring the request down to clearTo); `most` grows with the
      // number cleared: a binary search.
      let k = candidates
      if (clearAtLeast > 0 || clearTo !== undefined) {
        const enough = (n: number) =>
          tokensBefore - tokensOf(raw - clearing.most[n]!) >= clearAtLeast &&
          (clearTo === undefined || tokensOf(raw - clearing.most[n]!) <= clearTo)
        if (enough(candidates)) {
          let low = 1
          let high = candidates
          while (low < high) {
            const mid = (low + high) >>> 1
            if (enough(mid)) high = mid
            else low = mid + 1
          }
          k = low
        }
      }
      const tokensAfter = tokensOf(raw - clearing.reclaim[k]!)
      const cleared = new Array<string>(k)
      for (let j = 0; j < k; j++) cleared[j] = eligible[j]!.result.part.id
      return {
        messages: build(clearing, messages, k),
        triggered: true,
        cleared,
        tokensBefore,
        tokensAfter,
        reclaimed: tokensBefore - tokensAfter,
        trigger,
        placeholder,
        clearedInputs: clearToolInputs
      }
    })

  const apply = (
    messages: ReadonlyArray<Prompt.Message>,
    context?: EditContext | undefined
  ): Effect.Effect<EditResult, never, TokenCounter.TokenCounter> =>
    Effect.gen(function*() {
      const counter = yield* TokenCounter.TokenCounter
      const scale = yield* counter.scale
      const systemRaw = context?.systemPrompt === undefined
        ? 0
        : (yield* counter.measure([systemMessage(context.systemPrompt)]))[0]!
      const { clearTo, keep, triggers } = yield* sizes
      if (messages.length === 0) {
        const tokens = HistoryCache.scaled(systemRaw, scale)
        return {
          messages,
          triggered: false,
          cleared: [],
          tokensBefore: tokens,
          tokensAfter: tokens,
          reclaimed: 0,
          trigger: lowestTokens(triggers)
        }
      }
      return yield* cache.use(
        counter,
        messages,
        (session) => run(counter, session, messages, systemRaw, scale, triggers, keep, clearTo)
      )
    }).pipe(Effect.withSpan("ContextEditing.ClearToolUses", { captureStackTrace: false }))

  return { name: "ClearToolUses", apply }
}

/**
 * LangChain's `ClearToolUsesEdit`. When a `trigger` condition is reached
 * (by default: the system prompt and messages reach 100000 tokens), it
 * replaces the result of old tool calls with `placeholder`, oldest first:
 * every tool result older than the ones `keep` keeps (the 3 newest by
 * default; counted over all results, excluded and already cleared ones
 * included), except results of `excludeTools`, results already cleared, and
 * results that answer no earlier call. With `clearToolInputs`, the arguments
 * of each cleared result's call become `{}`. Cleared parts carry a marker
 * ({@link isCleared}) so they are never cleared twice.
 *
 * With `clearAtLeast` = 0 it clears every such result, whatever their size
 * (a placeholder longer than a result makes the request larger, as in
 * LangChain). Otherwise it stops as soon as at least `clearAtLeast` tokens
 * are reclaimed, even if the request is still over the trigger (LangChain
 * Python's meaning); when clearing them all reclaims less, it
 * clears them all. With `clearAtLeast` = 0 the edit is idempotent: applied to
 * its own output it changes nothing. With `clearAtLeast` > 0 it is when its
 * output no longer reaches the trigger; otherwise applying it again clears
 * the next results (the middleware always applies it to the stored thread,
 * whose results are never cleared). Messages are never removed or reordered,
 * so no tool call loses its result; the system prompt, user and assistant
 * text are never changed.
 *
 * Fractions (`{ fraction }` in `trigger` or `keep`) are taken of
 * `contextWindow` when given, else of the agent's model's profile
 * (`ModelProfile`, looked up each time the edit runs), else of
 * `ModelProfile.fallback` (with one warning).
 *
 * The edit is a value, like a middleware. Bad options (a negative or
 * fractional count, a fraction out of range, a condition with no limit, a
 * `keep` with two keys, an unknown key) make `Agent.make` fail, when the
 * middleware given the edit is built, with `AgentError.InvalidOptions`
 * (module `"ClearToolUses"`) naming the option; applied by hand
 * ({@link applyEdits}), such an edit dies with that error.
 *
 * @example
 * ```ts
 * import { ContextEditing } from "@stepwise-agent/middleware"
 *
 * const edit = ContextEditing.clearToolUses({
 *   // 80% of the model's input window, or 40 messages with 30000 tokens
 *   trigger: [{ fraction: 0.8 }, { messages: 40, tokens: 30_000 }],
 *   keep: { tokens: 5_000 },
 *   excludeTools: ["read_todos"]
 * })
 * const contextEditing = ContextEditing.middleware({ edits: [edit] })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const clearToolUses = (options?: ClearToolUsesOptions): ContextEdit =>
  Either.match(validate(options), {
    onLeft: (error) => FailedEdits.failedEdit<ContextEdit>("ClearToolUses", error),
    onRight: makeClearToolUses
  })

/**
 * Applies edits in order, each to the output of the one before, and sums up
 * what they did: `tokensBefore` of the first, `tokensAfter` of the last, the
 * cleared ids of all.
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 * import { ContextEditing } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * const edit = ContextEditing.clearToolUses({ trigger: 1000 })
 * const program = ContextEditing.applyEdits([edit], [], { systemPrompt: "Be brief." }).pipe(
 *   Effect.provide(TokenCounter.layerApproximate())
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const applyEdits = <Edits extends ReadonlyArray<ContextEdit.Any>>(
  edits: Edits,
  messages: ReadonlyArray<Prompt.Message>,
  context?: EditContext | undefined
): Effect.Effect<
  EditResult,
  ContextEdit.Error<Edits[number]>,
  ContextEdit.Context<Edits[number]> | TokenCounter.TokenCounter
> =>
  Effect.gen(function*() {
    let current = messages
    let triggered = false
    let tokensBefore: number | undefined
    let tokensAfter: number | undefined
    let trigger: number | undefined
    const cleared: Array<string> = []
    for (const edit of edits) {
      const result: EditResult = yield* edit.apply(current, context)
      current = result.messages
      triggered ||= result.triggered
      if (result.trigger !== undefined) trigger = Math.min(trigger ?? result.trigger, result.trigger)
      tokensBefore ??= result.tokensBefore
      tokensAfter = result.tokensAfter
      for (const id of result.cleared) cleared.push(id)
    }
    if (tokensBefore === undefined || tokensAfter === undefined) {
      const counter = yield* TokenCounter.TokenCounter
      tokensBefore = tokensAfter = yield* counter.count(
        context?.systemPrompt === undefined
          ? messages
          : Array.of<Prompt.Message>(Prompt.makeMessage("system", { content: context.systemPrompt })).concat(messages)
      )
    }
    return {
      messages: current,
      triggered,
      cleared,
      tokensBefore,
      tokensAfter,
      reclaimed: tokensBefore - tokensAfter,
      ...(trigger === undefined ? {} : { trigger })
    }
  })

// ---------------------------------------------------------------------------
// middleware
// ---------------------------------------------------------------------------

/**
 * How the middleware counts tokens: `"approximate"` with its own approximate
 * counter (`TokenCounter.makeApproximate`: the counts of LangChain Python's
 * `count_tokens_approximately`), or
 * `"model"` with the `TokenCounter` the agent is given
 * (`TokenCounter.layerTiktoken`, or `TokenCounter.layerTokenizer` over a
 * provider's tokenizer).
 *
 * @since 0.1.0
 * @category models
 */
export type TokenCountMethod = "approximate" | "model"

/**
 * Where the middleware keeps what it cleared: `"request"` recomputes the
 * edits on every model request from the stored thread (nothing is kept);
 * `"view"` decides in `beforeModel` on the stored thread as the model sees
 * it, records where the cleared tool parts are stored (message and part
 * index, with their call ids) in the `clearedView` state slice
 * (`ContextView.ClearedView`, checkpointed with the thread) and applies
 * them to every request: what was cleared stays cleared, and new results
 * are cleared only when an edit fires again.
 *
 * @since 0.1.0
 * @category models
 */
export type Mode = "request" | "view"

/**
 * The state slice of the middleware in a mode: `clearedView` in view mode (a
 * mode given as the literal `"view"`; a mode known only at run time types no
 * slice),
 * none in request mode.
 *
 * @since 0.1.0
 * @category utility types
 */
export type SliceOf<M extends Mode> = [M] extends ["view"] ? ContextView.ClearedSlice : {}

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface MiddlewareOptions<
  Edits extends ReadonlyArray<ContextEdit.Any>,
  Method extends TokenCountMethod,
  M extends Mode = "request"
> {
  /** The middleware's name (default `"contextEditing"`). */
  readonly name?: string | undefined
  /**
   * Default `"request"`. In `"view"` mode the edits' token counts leave out
   * the system prompt (the view is decided before the request is made), and
   * only what edits clear (the ids they report) is kept and shown: an edit's
   * other changes to messages are not.
   */
  readonly mode?: M | undefined
  /** The edits, applied in order (default `[clearToolUses()]` with LangChain's defaults). */
  readonly edits?: Edits | undefined
  /** Default `"approximate"`. */
  readonly tokenCountMethod?: Method | undefined
}

/**
 * The middleware: applies edits to every model request in `wrapModelCall`.
 * Only the request changes; the agent's stored messages keep the original
 * tool results, so a later edit policy (or a human) can still read them.
 * When an edit cleared something it reports the decision
 * `"cleared N tool results, M tokens reclaimed"` (with the ids and counts as
 * data) as a `MiddlewareDecision` event. Bad options (an unknown key, an
 * edit that is not a `ContextEdit`, an edit built from bad options) make
 * `Agent.make` fail with `AgentError.InvalidOptions` naming the option.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { ContextEditing } from "@stepwise-agent/middleware"
 *
 * const edit = ContextEditing.clearToolUses({ trigger: 60_000, keep: 4, clearToolInputs: true })
 * const program = Agent.make({ middleware: [ContextEditing.middleware({ edits: [edit] })] })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = <
  const Edits extends ReadonlyArray<ContextEdit.Any> = readonly [ContextEdit],
  const Method extends TokenCountMethod = "approximate",
  const M extends Mode = "request"
>(
  options?: MiddlewareOptions<Edits, Method, M> | undefined
): Middleware.Middleware<
  SliceOf<M>,
  ContextEdit.Error<Edits[number]>,
  ContextEdit.Context<Edits[number]> | (Method extends "model" ? TokenCounter.TokenCounter : never)
> =>
  Check.middlewareOf("ContextEditing", MiddlewareOptionsSchema, options, (checked) => {
    const failed = FailedEdits.failureOf(checked.edits ?? [])
    return failed === undefined ? make(checked) : Check.failing(failed)
  })

const EditSchema = Schema.declare(
  (u: unknown): u is ContextEdit.Any =>
    Predicate.hasProperty(u, "name") && typeof u.name === "string" &&
    Predicate.hasProperty(u, "apply") && typeof u.apply === "function",
  { identifier: "a ContextEdit (built by clearToolUses, or with a name and an apply function)" }
)

const MiddlewareOptionsSchema = Schema.Struct({
  name: Schema.optional(Check.NonEmpty),
  edits: Schema.optional(Schema.Array(EditSchema)),
  tokenCountMethod: Schema.optional(Schema.Literal("approximate", "model")),
  mode: Schema.optional(Schema.Literal("request", "view"))
})

const make = (options: typeof MiddlewareOptionsSchema.Type): any => {
  const edits: ReadonlyArray<ContextEdit.Any> = options.edits ?? [makeClearToolUses(Either.getOrThrow(validate({})))]
  const method: TokenCountMethod = options.tokenCountMethod ?? "approximate"
  const counter: Effect.Effect<TokenCounter.Service, never, TokenCounter.TokenCounter> = method === "model"
    ? TokenCounter.TokenCounter
    : HistoryCache.lazyApproximate()
  const name = options.name ?? "contextEditing"
  if (options.mode === "view") return makeView(name, edits, counter)
  return Middleware.make({
    name,
    wrapModelCall: (request, next) =>
      Effect.gen(function*() {
        const service = yield* counter
        const result = yield* (applyEdits(edits, request.messages, { systemPrompt: request.systemPrompt }).pipe(
          Effect.provideService(TokenCounter.TokenCounter, service)
        ) as Effect.Effect<EditResult, unknown, unknown>)
        if (result.cleared.length > 0) {
          yield* Middleware.report(
            `cleared ${result.cleared.length} tool results, ${result.reclaimed} tokens reclaimed`,
            {
              cleared: result.cleared,
              tokensBefore: result.tokensBefore,
              tokensAfter: result.tokensAfter,
              reclaimed: result.reclaimed,
              trigger: result.trigger
            }
          )
        } else {
          yield* Middleware.report(
            `${result.tokensBefore} tokens${result.trigger === undefined ? "" : ` (trigger ${result.trigger})`}`,
            { tokensBefore: result.tokensBefore, tokensAfter: result.tokensAfter, trigger: result.trigger }
          )
        }
        return yield* next(result.messages === request.messages ? request : { ...request, messages: result.messages })
      })
  }) as any
}

/** The messages a thread's view was last applied to, and the output, so that the next call only appends. */
interface ViewMemo {
  readonly stored: ReadonlyArray<Prompt.Message>
  readonly view: ContextView.ClearedView
  readonly output: ReadonlyArray<Prompt.Message>
}

/** Whether two views clear the same parts alike (the same object, or equal positions, in order). */
const sameView = (a: ContextView.ClearedView, b: ContextView.ClearedView): boolean =>
  a === b || (a.edits === b.edits && a.groups.length === b.groups.length && a.groups.every((group, g) => {
    const other = b.groups[g]!
    return group.placeholder === other.placeholder && group.inputs === other.inputs &&
      group.parts.length === other.parts.length && group.parts.every((at, i) => {
        const that = other.parts[i]!
        return at.id === that.id && at.message === that.message && at.part === that.part
      })
  }))

/** One past the last stored message a view clears a part of. */
const reachOf = (view: ContextView.ClearedView): number => {
  let reach = 0
  for (const group of view.groups) for (const at of group.parts) reach = Math.max(reach, at.message + 1)
  return reach
}

/**
 * Where the parts an edit cleared are in `before`, the messages it was
 * given: the tool parts of the results it reports that its output (the same
 * messages) shows newly cleared. For an edit that changed which messages
 * there are, the oldest result not cleared of each reported id.
 */
const clearedParts = (
  before: ReadonlyArray<Prompt.Message>,
  result: EditResult
): ReadonlyArray<ContextView.ClearedPart> => {
  const after = result.messages
  const ids = new Set(result.cleared)
  const parts: Array<ContextView.ClearedPart> = []
  if (after.length === before.length) {
    for (let m = 0; m < before.length; m++) {
      const was = before[m]!
      const now = after[m]!
      if (now === was || now.role !== was.role || (was.role !== "assistant" && was.role !== "tool")) continue
      const length = Math.min(was.content.length, now.content.length)
      for (let i = 0; i < length; i++) {
        const old = was.content[i]!
        const part = now.content[i]! as Prompt.Part
        if (part === old || (part.type !== "tool-result" && part.type !== "tool-call")) continue
        if (old.type !== part.type || old.id !== part.id || !ids.has(part.id)) continue
        if (isCleared(part) && !isCleared(old)) parts.push({ id: part.id, message: m, part: i })
      }
    }
    return parts
  }
  const taken = new Set<string>()
  for (const id of result.cleared) {
    found: for (let m = 0; m < before.length; m++) {
      const message = before[m]!
      if (message.role !== "tool") continue
      for (let i = 0; i < message.content.length; i++) {
        const part = message.content[i]!
        if (part.type !== "tool-result" || part.id !== id || isCleared(part) || taken.has(`${m}:${i}`)) continue
        taken.add(`${m}:${i}`)
        parts.push({ id, message: m, part: i })
        break found
      }
    }
  }
  return parts
}

/** `view` with the parts an edit cleared added (to its last group when it has the same placeholder and inputs). */
const extendView = (
  view: ContextView.ClearedView,
  result: EditResult,
  parts: ReadonlyArray<ContextView.ClearedPart>
): ContextView.ClearedView => {
  const placeholder = result.placeholder ?? "[cleared]"
  const inputs = result.clearedInputs ?? false
  const last = view.groups[view.groups.length - 1]
  const groups = last !== undefined && last.placeholder === placeholder && last.inputs === inputs
    ? [...view.groups.slice(0, -1), { placeholder, inputs, parts: [...last.parts, ...parts] }]
    : [...view.groups, { placeholder, inputs, parts }]
  return { ...view, groups }
}

/**
 * The request's messages (the stored ones as an outer middleware changed
 * them, a summary view for one) with each stored message the view changed
 * replaced by its view, found by identity.
 */
const carried = (
  stored: ReadonlyArray<Prompt.Message>,
  shown: ReadonlyArray<Prompt.Message>,
  view: ContextView.ClearedView,
  messages: ReadonlyArray<Prompt.Message>
): ReadonlyArray<Prompt.Message> => {
  if (shown === stored) return messages
  const replaced = new Map<Prompt.Message, Prompt.Message>()
  for (const group of view.groups) {
    for (const at of group.parts) {
      const message = stored[at.message]
      if (message !== undefined && shown[at.message] !== message) replaced.set(message, shown[at.message]!)
    }
  }
  let output: Array<Prompt.Message> | undefined
  for (let i = 0; i < messages.length; i++) {
    const viewed = replaced.get(messages[i]!)
    if (viewed === undefined) continue
    output ??= messages.slice()
    output[i] = viewed
  }
  return output ?? messages
}

/**
 * View mode (see {@link Mode}): `beforeModel` applies the edits to the thread
 * as the model sees it and records what they cleared; `wrapModelCall` shows
 * the request the recorded view.
 */
const makeView = (
  name: string,
  edits: ReadonlyArray<ContextEdit.Any>,
  counter: Effect.Effect<TokenCounter.Service, never, TokenCounter.TokenCounter>
) => {
  // per first message (one per thread, in practice), as the history caches
  const memos = new WeakMap<Prompt.Message, ViewMemo>()
  /** The stored messages with the view applied; only the messages added since the last call are new work. */
  const viewOf = (
    messages: ReadonlyArray<Prompt.Message>,
    view: ContextView.ClearedView
  ): ReadonlyArray<Prompt.Message> => {
    if (view.groups.length === 0 || messages.length === 0) return messages
    const memo = memos.get(messages[0]!)
    let output: ReadonlyArray<Prompt.Message>
    if (
      memo !== undefined && sameView(memo.view, view) && HistoryCache.isPrefix(memo.stored, messages) &&
      reachOf(view) <= memo.stored.length
    ) {
      // the view clears no part past the messages it was applied to: the new messages are shown as they are
      if (memo.stored.length === messages.length) return memo.output
      output = [...memo.output, ...messages.slice(memo.stored.length)]
    } else {
      output = ContextView.applyCleared(messages, view)
    }
    memos.set(messages[0]!, { stored: messages, view, output })
    return output
  }

  const beforeModel = ({ messages, state }: Middleware.HookContext<ContextView.ClearedSlice>) =>
    Effect.gen(function*() {
      if (messages.length === 0) return undefined
      const service = yield* counter
      let view = state.clearedView
      let current = viewOf(messages, view)
      let tokensBefore: number | undefined
      let tokensAfter = 0
      let reclaimed = 0
      let trigger: number | undefined
      const cleared: Array<string> = []
      for (const edit of edits) {
        const result: EditResult = yield* (edit.apply(current).pipe(
          Effect.provideService(TokenCounter.TokenCounter, service)
        ) as Effect.Effect<EditResult, unknown, unknown>)
        tokensBefore ??= result.tokensBefore
        tokensAfter = result.tokensAfter
        if (result.trigger !== undefined) trigger = Math.min(trigger ?? result.trigger, result.trigger)
        if (result.cleared.length === 0) continue
        reclaimed += result.reclaimed
        for (const id of result.cleared) cleared.push(id)
        view = extendView(view, result, clearedParts(current, result))
        // `current` stays aligned with the stored messages, which the view's positions index
        current = result.messages.length === messages.length
          ? result.messages
          : ContextView.applyCleared(messages, view)
      }
      const data = { tokensBefore, tokensAfter, trigger, edits: view.edits, tokensSaved: view.tokensSaved }
      if (cleared.length === 0) {
        yield* Middleware.report(
          `${tokensBefore ?? 0} tokens${trigger === undefined ? "" : ` (trigger ${trigger})`}, view unchanged`,
          { ...data, prefixChanged: false }
        )
        return undefined
      }
      view = { ...view, edits: view.edits + 1, tokensSaved: view.tokensSaved + reclaimed }
      memos.set(messages[0]!, { stored: messages, view, output: current })
      yield* Middleware.report(
        `cleared ${cleared.length} tool results, ${reclaimed} tokens reclaimed; the prompt prefix changed ` +
          `(edit ${view.edits})`,
        { ...data, cleared, reclaimed, edits: view.edits, tokensSaved: view.tokensSaved, prefixChanged: true }
      )
      return { state: { clearedView: view } }
    })

  return Middleware.make({
    name,
    state: { schema: ContextView.ClearedSlice, initial: { clearedView: ContextView.emptyCleared } },
    beforeModel,
    wrapModelCall: (request, next) => {
      const state = request.state as Partial<ContextView.ClearedSlice> & {
        readonly messages?: ReadonlyArray<Prompt.Message>
      }
      const view = state.clearedView ?? ContextView.emptyCleared
      // the view indexes the stored messages; an outer middleware may have changed the request's
      const stored = state.messages ?? request.messages
      const shown = viewOf(stored, view)
      const messages = stored === request.messages ? shown : carried(stored, shown, view, request.messages)
      return next(messages === request.messages ? request : { ...request, messages })
    }
  }) as any
}
