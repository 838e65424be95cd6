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
 * placeholder. The trigger counts what the model call is sent: the
 * messages with tool calls and results paired (`AgentState.paired`), so an
 * orphan the agent drops never counts. {@link middleware} applies edits in
 * `wrapModelCall` to the request only: the stored thread keeps the original
 * messages.
 *
 * `clearToolUses` is put together in `internal/context/`: its options
 * (`clearOptions.ts`), trigger (`clearTrigger.ts`, measured by `sent.ts`),
 * selection of the results to clear (`clearSelection.ts`) and how a cleared
 * result looks (`clearLook.ts`); view mode is `viewMode.ts`.
 *
 * Cost per model call: `clearToolUses` remembers, per thread (the history
 * starting with the same first message object), the running token sums of
 * its messages, what is sent of them up to the last message that is not a
 * tool message, its tool calls and results (indexed once a call reaches
 * the trigger) and the previous output, so a model call counts and reads
 * only the messages added since the last one (with `keep: { tokens }`, it
 * also counts the kept results again, newest first, until one does not fit). The cleared parts and
 * messages are memoized per original object, so the exact counters, which
 * cache counts by identity (see `TokenCounter`), count them once. A history
 * that shares only its first messages with the last one (a run's input
 * after a stored thread, where the run before had its own; a message
 * edited by another middleware) keeps what was learnt of those. How many
 * messages two histories share is read from the agent's records of which
 * array it made from which (`AgentState.sharedPrefix`), so in the agent
 * loop a step costs the same on a long thread as on a short one; other
 * arrays are compared by identity, message by message. When results are
 * cleared, the array of messages sent to the model is copied.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import * as AgentState from "@stepwise-agent/core/AgentState"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import type * as ContextView from "./ContextView.js"
import * as Options from "./internal/context/clearOptions.js"
import * as ClearToolUsesEdit from "./internal/context/clearToolUses.js"
import * as ViewMode from "./internal/context/viewMode.js"
import * as FailedEdits from "./internal/failedEdits.js"
import * as CounterEdits from "./internal/fast/counterEdits.js"
import * as HistoryCache from "./internal/fast/historyCache.js"
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
  /** Tokens of the system prompt and the input messages, as the model call is sent them (`AgentState.paired`). */
  readonly tokensBefore: number
  /** Tokens of the system prompt and the output messages, as the model call is sent them. */
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
export const isCleared = (part: Prompt.ToolResultPart | Prompt.ToolCallPart): boolean => Marker.isCleared(part)

// ---------------------------------------------------------------------------
// ClearToolUses
// ---------------------------------------------------------------------------

/**
 * When {@link clearToolUses} fires: once the request reaches `tokens`
 * (system prompt included), `messages` messages (the system prompt apart),
 * or `fraction` (0 < f ≤ 1) of the model's input window, counted on what the
 * model call is sent (tool calls and results paired, `AgentState.paired`). A condition
 * with several of them fires when all are reached. LangChain's
 * `ContextSize` of a `trigger`.
 *
 * @since 0.1.0
 * @category models
 */
export interface TriggerCondition {
  /** Tokens of the system prompt and the messages; a number > 0. */
  readonly tokens?: number | undefined
  /** Messages the model call is sent; a whole number ≥ 1. */
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

/**
 * LangChain's `ClearToolUsesEdit`. When a `trigger` condition is reached
 * by what the model call is sent (by default: the system prompt and the
 * messages, with tool calls and results paired as `AgentState.paired` pairs
 * them, reach 100000 tokens), it replaces the result of old tool calls with
 * `placeholder`, oldest first: every tool result older than the ones `keep`
 * keeps (the 3 newest by default; counted over all results sent, excluded
 * and already cleared ones included), except results of `excludeTools`,
 * results already cleared, and results the agent does not send (orphans). With `clearToolInputs`, the arguments
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
  Either.match(Options.validate(options), {
    onLeft: (error) => FailedEdits.failedEdit<ContextEdit>("ClearToolUses", error),
    onRight: ClearToolUsesEdit.make
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
> => foldEdits(edits, messages, context, (edit, current) => edit.apply(current, context), TokenCounter.TokenCounter)

/**
 * {@link applyEdits}, each edit applied by `apply` and the counter (needed
 * when there is no edit) read from `counter`.
 */
const foldEdits = <E, R>(
  edits: ReadonlyArray<ContextEdit.Any>,
  messages: ReadonlyArray<Prompt.Message>,
  context: EditContext | undefined,
  apply: (edit: ContextEdit.Any, messages: ReadonlyArray<Prompt.Message>) => Effect.Effect<EditResult, E, R>,
  counter: Effect.Effect<TokenCounter.Service, never, R>
): Effect.Effect<EditResult, E, R> =>
  Effect.gen(function*() {
    let current = messages
    let triggered = false
    let tokensBefore: number | undefined
    let tokensAfter: number | undefined
    let trigger: number | undefined
    const cleared: Array<string> = []
    for (const edit of edits) {
      const result: EditResult = yield* apply(edit, current)
      current = result.messages
      triggered ||= result.triggered
      if (result.trigger !== undefined) trigger = Math.min(trigger ?? result.trigger, result.trigger)
      tokensBefore ??= result.tokensBefore
      tokensAfter = result.tokensAfter
      for (const id of result.cleared) cleared.push(id)
    }
    if (tokensBefore === undefined || tokensAfter === undefined) {
      const service = yield* counter
      // what the model call is sent of the messages
      const sent = AgentState.paired(messages)
      tokensBefore = tokensAfter = yield* service.count(
        context?.systemPrompt === undefined
          ? sent
          : Array.of<Prompt.Message>(Prompt.makeMessage("system", { content: context.systemPrompt })).concat(sent)
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
  const edits: ReadonlyArray<ContextEdit.Any> = options.edits ??
    [ClearToolUsesEdit.make(Either.getOrThrow(Options.validate({})))]
  const method: TokenCountMethod = options.tokenCountMethod ?? "approximate"
  const counter: Effect.Effect<TokenCounter.Service, never, TokenCounter.TokenCounter> = method === "model"
    ? TokenCounter.TokenCounter
    : HistoryCache.lazyApproximate()
  const name = options.name ?? "contextEditing"
  if (options.mode === "view") return ViewMode.make(name, edits, counter)
  return Middleware.make({
    name,
    wrapModelCall: (request, next) =>
      Effect.gen(function*() {
        const service = yield* counter
        const context: EditContext = { systemPrompt: request.systemPrompt }
        const result = yield* (foldEdits(
          edits,
          request.messages,
          context,
          (edit, messages) => CounterEdits.applyWith(edit, service, messages, context),
          Effect.succeed(service)
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
