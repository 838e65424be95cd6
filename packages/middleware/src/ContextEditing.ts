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
 * {@link ClearToolUses} mirrors LangChain's `ClearToolUsesEdit`: when the
 * request is over `trigger` tokens, it replaces the results of old tool calls
 * with a placeholder. {@link middleware} applies edits in `wrapModelCall` to
 * the request only: the stored thread keeps the original messages.
 *
 * Cost per model call: `ClearToolUses` remembers, per thread (the history
 * starting with the same first message object), the running token sums of
 * its messages, its tool calls and results (indexed once a call goes over
 * the trigger) and the previous output, so a model call counts and reads
 * only the messages added since the last one. The cleared parts and
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
  /** Whether the input was over the edit's trigger. */
  readonly triggered: boolean
  /** Ids of the tool calls whose results this edit cleared, oldest first. */
  readonly cleared: ReadonlyArray<string>
  /** Tokens of the system prompt and the input messages. */
  readonly tokensBefore: number
  /** Tokens of the system prompt and the output messages. */
  readonly tokensAfter: number
  /** `tokensBefore - tokensAfter`. */
  readonly reclaimed: number
  /** The token count above which the edit fires, for an edit that has one. */
  readonly trigger?: number | undefined
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

const marked = (options: Prompt.ProviderOptions): Prompt.ProviderOptions => ({
  ...options,
  [markerKey]: { ...options[markerKey], contextEditing: "cleared" }
})

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
 * Options of {@link ClearToolUses}; the defaults are LangChain's.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClearToolUsesOptions {
  /** Edit only when the request (system prompt included) is over this many tokens (default 100000). */
  readonly trigger?: number | undefined
  /**
   * Once triggered, clear oldest first until at least this many tokens are
   * reclaimed and the request is no longer over `trigger` (default 0: clear
   * every result that may be cleared).
   */
  readonly clearAtLeast?: number | undefined
  /** The number of most recent tool results never cleared (default 3). */
  readonly keep?: number | undefined
  /** Also replace the arguments of the cleared results' tool calls with `{}` (default false). */
  readonly clearToolInputs?: boolean | undefined
  /** Tools whose results are never cleared (default none). */
  readonly excludeTools?: ReadonlyArray<string> | undefined
  /** What a cleared result says (default `"[cleared]"`). */
  readonly placeholder?: string | undefined
}

interface ClearToolUsesConfig {
  readonly trigger: number
  readonly clearAtLeast: number
  readonly keep: number
  readonly clearToolInputs: boolean
  readonly excludeTools: ReadonlySet<string>
  readonly placeholder: string
}

const ClearToolUsesSchema = Schema.Struct({
  trigger: Schema.optional(Check.Count),
  clearAtLeast: Schema.optional(Check.Count),
  keep: Schema.optional(Check.Count),
  clearToolInputs: Schema.optional(Schema.Boolean),
  excludeTools: Schema.optional(Schema.Array(Schema.String)),
  placeholder: Schema.optional(Schema.String)
})

const validate = (
  options: ClearToolUsesOptions | undefined
): Either.Either<ClearToolUsesConfig, AgentError.InvalidOptions> =>
  Either.map(Check.validateEither("ClearToolUses", ClearToolUsesSchema, options), (checked) => ({
    trigger: checked.trigger ?? 100_000,
    clearAtLeast: checked.clearAtLeast ?? 0,
    keep: checked.keep ?? 3,
    clearToolInputs: checked.clearToolInputs ?? false,
    excludeTools: new Set(checked.excludeTools ?? []),
    placeholder: checked.placeholder ?? "[cleared]"
  }))

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
  /** Raw tokens clearing it reclaims, once measured. */
  delta: number
}

/**
 * What one edit derives from the messages a history cache session has seen
 * (the tool calls and results, and the previous output), so that the next
 * model call of that thread only looks at the new ones. It is a cache: the
 * result of an edit is the same with or without it. The messages are indexed
 * when a call is over the trigger (a call under it needs only the totals),
 * from where the last indexing stopped.
 */
interface Clearing {
  /** How many of the session's messages are indexed. */
  indexed: number
  readonly calls: Map<string, Located<Prompt.ToolCallPart>>
  readonly callsWithInputs: Set<Prompt.ToolCallPart>
  results: number
  readonly eligible: Array<Eligible>
  /** `reclaim[k]`: raw tokens reclaimed by clearing the first `k` eligible results (those that reclaim anything). */
  readonly reclaim: Array<number>
  /** `selected[k]`: how many of the first `k` eligible results reclaim anything. */
  readonly selected: Array<number>
  /** The ids of the eligible results that reclaim anything, in order. */
  readonly ids: Array<string>
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
  results: 0,
  eligible: [],
  reclaim: [0],
  selected: [0],
  ids: [],
  output: undefined
})

const makeClearToolUses = (config: ClearToolUsesConfig): ContextEdit => {
  const { clearAtLeast, clearToolInputs, excludeTools, keep, placeholder, trigger } = config
  // Memos: the same original object always maps to the same edited object,
  // so the counter's identity cache keeps working across model calls.
  const clearedResults = new WeakMap<Prompt.ToolResultPart, Prompt.ToolResultPart>()
  const clearedCalls = new WeakMap<Prompt.ToolCallPart, Prompt.ToolCallPart>()
  const variants = new WeakMap<Prompt.Message, Map<string, Prompt.Message>>()
  let lastSystem: Prompt.SystemMessage | undefined

  const systemMessage = (text: string): Prompt.SystemMessage => {
    if (lastSystem === undefined || lastSystem.content !== text) {
      lastSystem = Prompt.makeMessage("system", { content: text })
    }
    return lastSystem
  }

  const clearResult = (part: Prompt.ToolResultPart): Prompt.ToolResultPart => {
    let cleared = clearedResults.get(part)
    if (cleared === undefined) {
      cleared = Prompt.makePart("tool-result", {
        id: part.id,
        name: part.name,
        isFailure: part.isFailure,
        result: placeholder,
        providerExecuted: part.providerExecuted,
        options: marked(part.options)
      })
      clearedResults.set(part, cleared)
    }
    return cleared
  }

  const clearCall = (part: Prompt.ToolCallPart): Prompt.ToolCallPart => {
    let cleared = clearedCalls.get(part)
    if (cleared === undefined) {
      cleared = Prompt.makePart("tool-call", {
        id: part.id,
        name: part.name,
        params: {},
        providerExecuted: part.providerExecuted,
        options: marked(part.options)
      })
      clearedCalls.set(part, cleared)
    }
    return cleared
  }

  /** The message with the parts at `indices` (sorted) cleared. */
  const variant = (message: Prompt.Message, indices: ReadonlyArray<number>): Prompt.Message => {
    if (message.role !== "assistant" && message.role !== "tool") return message
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
        const position = clearing.results++
        if (isCleared(part)) continue
        if (excludeTools.has(part.name) || excludeTools.has(call.part.name)) continue
        const withCall = clearToolInputs && !isCleared(call.part) && !clearing.callsWithInputs.has(call.part)
        if (withCall) clearing.callsWithInputs.add(call.part)
        clearing.eligible.push({ result: { part, message: m, index: i }, call, position, withCall, delta: 0 })
      }
    }
  }

  // Sessions, per counter and per first message (one per thread, in practice).
  const cache = HistoryCache.make({ init: makeClearing })

  /** The messages with the first `k` eligible results cleared (those that reclaim anything). */
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
      if (entry.delta <= 0) continue
      clear(entry.result.message, entry.result.index)
      if (entry.withCall) clear(entry.call.message, entry.call.index)
    }
    for (const m of touched) output[m] = variant(messages[m]!, cleared.get(m)!.sort((a, b) => a - b))
    clearing.output = { k, length: messages.length, messages: output, cleared }
    return output
  }

  const run = (
    counter: TokenCounter.TokenCounter.Service,
    { state: clearing, sums }: HistoryCache.Session<Clearing>,
    messages: ReadonlyArray<Prompt.Message>,
    systemRaw: number,
    scale: number
  ): Effect.Effect<EditResult> =>
    Effect.gen(function*() {
      const tokensOf = (raw: number) => HistoryCache.scaled(raw, scale)
      const raw = sums[messages.length]! + systemRaw
      const tokensBefore = tokensOf(raw)
      const unchanged = (triggered: boolean): EditResult => ({
        messages,
        triggered,
        cleared: [],
        tokensBefore,
        tokensAfter: tokensBefore,
        reclaimed: 0,
        trigger
      })
      if (tokensBefore <= trigger) return unchanged(false)
      for (let m = clearing.indexed; m < messages.length; m++) index(clearing, messages[m]!, m)
      clearing.indexed = messages.length

      // The eligible results older than the `keep` newest.
      const eligible = clearing.eligible
      const window = clearing.results - keep
      let lo = 0
      let hi = eligible.length
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (eligible[mid]!.position < window) lo = mid + 1
        else hi = mid
      }
      const candidates = lo
      if (candidates === 0) return unchanged(true)

      // Measure, once, what clearing each new candidate would reclaim: the
      // parts it replaces less the parts it puts in their place.
      const measured = clearing.reclaim.length - 1
      if (measured < candidates) {
        const parts: Array<Prompt.Part> = []
        for (let j = measured; j < candidates; j++) {
          const entry = eligible[j]!
          parts.push(entry.result.part, clearResult(entry.result.part))
          if (entry.withCall) parts.push(entry.call.part, clearCall(entry.call.part))
        }
        const counts = yield* counter.measure(parts)
        let at = 0
        for (let j = measured; j < candidates; j++) {
          const entry = eligible[j]!
          let delta = counts[at]! - counts[at + 1]!
          at += 2
          if (entry.withCall) {
            delta += counts[at]! - counts[at + 1]!
            at += 2
          }
          // A clearing that would not make the request smaller (a result
          // shorter than the placeholder) is skipped.
          entry.delta = delta
          const positive = delta > 0
          clearing.reclaim.push(clearing.reclaim[j]! + (positive ? delta : 0))
          clearing.selected.push(clearing.selected[j]! + (positive ? 1 : 0))
          if (positive) clearing.ids.push(entry.result.part.id)
        }
      }

      // Oldest first: all candidates, or with clearAtLeast the fewest that
      // reclaim at least that much and bring the request under the trigger
      // (both grow with the number cleared, so a binary search finds it).
      let k = candidates
      if (clearAtLeast > 0) {
        const enough = (n: number) => {
          const after = tokensOf(raw - clearing.reclaim[n]!)
          return tokensBefore - after >= clearAtLeast && after <= trigger
        }
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
      const count = clearing.selected[k]!
      if (count === 0) return unchanged(true)
      const tokensAfter = tokensOf(raw - clearing.reclaim[k]!)
      return {
        messages: build(clearing, messages, k),
        triggered: true,
        cleared: clearing.ids.slice(0, count),
        tokensBefore,
        tokensAfter,
        reclaimed: tokensBefore - tokensAfter,
        trigger
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
      if (messages.length === 0) {
        const tokens = HistoryCache.scaled(systemRaw, scale)
        return {
          messages,
          triggered: false,
          cleared: [],
          tokensBefore: tokens,
          tokensAfter: tokens,
          reclaimed: 0,
          trigger: config.trigger
        }
      }
      return yield* cache.use(counter, messages, (session) => run(counter, session, messages, systemRaw, scale))
    }).pipe(Effect.withSpan("ContextEditing.ClearToolUses", { captureStackTrace: false }))

  return { name: "ClearToolUses", apply }
}

/**
 * LangChain's `ClearToolUsesEdit`. When the system prompt and messages are
 * over `trigger` tokens, it replaces the result of old tool calls with
 * `placeholder`, oldest first: every tool result but the `keep` most recent
 * ones (counted over all results, excluded and already cleared ones
 * included), except results of `excludeTools`, results already cleared, and
 * results that answer no earlier call. With `clearToolInputs`, the arguments
 * of each cleared result's call become `{}`. Cleared parts carry a marker
 * ({@link isCleared}) so they are never cleared twice.
 *
 * With `clearAtLeast` = 0 it clears every such result. Otherwise it stops
 * as soon as at least `clearAtLeast` tokens are reclaimed and the request is
 * no longer over `trigger` (LangChain stops at `clearAtLeast` alone; also
 * requiring the trigger makes the edit idempotent: its output never triggers
 * it again unless nothing is left to clear). A result whose placeholder would
 * not be smaller is left as it is. Messages are never removed or reordered,
 * so no tool call loses its result; the system prompt, user and assistant
 * text are never changed.
 *
 * Bad options (a negative or fractional count, an unknown key) are a `Left`
 * of `AgentError.InvalidOptions` (module `"ClearToolUses"`) naming the
 * option; an `Either` can be `yield*`ed in `Effect.gen`.
 *
 * @example
 * ```ts
 * import { ContextEditing } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const edit = yield* ContextEditing.ClearToolUses({ trigger: 50_000, keep: 5, excludeTools: ["read_todos"] })
 *   return ContextEditing.middleware({ edits: [edit] })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const ClearToolUses = (
  options?: ClearToolUsesOptions
): Either.Either<ContextEdit, AgentError.InvalidOptions> => Either.map(validate(options), makeClearToolUses)

/**
 * Applies edits in order, each to the output of the one before, and sums up
 * what they did: `tokensBefore` of the first, `tokensAfter` of the last, the
 * cleared ids of all.
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 * import { ContextEditing } from "@stepwise-agent/middleware"
 * import { Effect, Either } from "effect"
 *
 * const edit = Either.getOrThrow(ContextEditing.ClearToolUses({ trigger: 1000 }))
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
      const system = context?.systemPrompt === undefined
        ? []
        : [Prompt.makeMessage("system", { content: context.systemPrompt })]
      tokensBefore = tokensAfter = yield* counter.count([...system, ...messages])
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
 * counter (4 characters per token, `TokenCounter.makeApproximate`), or
 * `"model"` with the `TokenCounter` the agent is given
 * (`TokenCounter.layerTiktoken`, or `TokenCounter.layerTokenizer` over a
 * provider's tokenizer).
 *
 * @since 0.1.0
 * @category models
 */
export type TokenCountMethod = "approximate" | "model"

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface MiddlewareOptions<Edits extends ReadonlyArray<ContextEdit.Any>, Method extends TokenCountMethod> {
  /** The middleware's name (default `"contextEditing"`). */
  readonly name?: string | undefined
  /** The edits, applied in order (default `[ClearToolUses()]` with LangChain's defaults). */
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
 * edit that is not a `ContextEdit`) make `Agent.make` fail with
 * `AgentError.InvalidOptions` naming the option.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { ContextEditing } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const edit = yield* ContextEditing.ClearToolUses({ trigger: 60_000, keep: 4, clearToolInputs: true })
 *   return yield* Agent.make({ middleware: [ContextEditing.middleware({ edits: [edit] })] })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = <
  const Edits extends ReadonlyArray<ContextEdit.Any> = readonly [ContextEdit],
  const Method extends TokenCountMethod = "approximate"
>(
  options?: MiddlewareOptions<Edits, Method> | undefined
): Middleware.Middleware<
  {},
  ContextEdit.Error<Edits[number]>,
  ContextEdit.Context<Edits[number]> | (Method extends "model" ? TokenCounter.TokenCounter : never)
> => Check.middlewareOf("ContextEditing", MiddlewareOptionsSchema, options, make)

const EditSchema = Schema.declare(
  (u: unknown): u is ContextEdit.Any =>
    Predicate.hasProperty(u, "name") && typeof u.name === "string" &&
    Predicate.hasProperty(u, "apply") && typeof u.apply === "function",
  { identifier: "a ContextEdit (built by ClearToolUses, or with a name and an apply function)" }
)

const MiddlewareOptionsSchema = Schema.Struct({
  name: Schema.optional(Check.NonEmpty),
  edits: Schema.optional(Schema.Array(EditSchema)),
  tokenCountMethod: Schema.optional(Schema.Literal("approximate", "model"))
})

const make = (options: typeof MiddlewareOptionsSchema.Type): any => {
  const edits: ReadonlyArray<ContextEdit.Any> = options.edits ?? [makeClearToolUses(Either.getOrThrow(validate({})))]
  const method: TokenCountMethod = options.tokenCountMethod ?? "approximate"
  const counter: Effect.Effect<TokenCounter.TokenCounter.Service, never, TokenCounter.TokenCounter> = method === "model"
    ? TokenCounter.TokenCounter
    : HistoryCache.lazyApproximate()
  return Middleware.make({
    name: options.name ?? "contextEditing",
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
