/**
 * Compaction as a view: what the model sees of a thread whose stored history
 * stays whole.
 *
 * In view mode (`Summarization.middleware({ mode: "view" })`,
 * `ContextEditing.middleware({ mode: "view" })`) a policy does not rewrite the
 * stored messages. It records what it decided in its state slice, which is
 * checkpointed (and journaled in a durable run) with the thread:
 *
 * - {@link SummaryView} (slice key `summaryView`): the stored messages
 *   `start` to `end` (exclusive) are replaced, in what the model sees, by one
 *   summary message;
 * - {@link ClearedView} (slice key `clearedView`): the results of these tool
 *   calls are replaced by a placeholder (and, in a group with `inputs`, the
 *   calls' arguments by `{}`).
 *
 * The stored history only grows in view mode, so indices into it stay valid;
 * both records only grow too, and a later model call extends them from the
 * new messages instead of recomputing them. {@link of} gives, from a thread's
 * state (`agent.thread(id)`), the messages the model sees and which stored
 * messages were summarized or cleared.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { markerKey } from "./internal/marker.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * A summary in view mode: the stored messages `start` (the first one after
 * the leading system messages) to `end` (exclusive) are shown to the model
 * as one user message whose text is `text` (the summary prefix and the
 * summary).
 *
 * @since 0.1.0
 * @category models
 */
export const SummaryView = Schema.Struct({
  start: Schema.NonNegativeInt,
  end: Schema.NonNegativeInt,
  text: Schema.String
})

/**
 * @since 0.1.0
 * @category models
 */
export interface SummaryView extends Schema.Schema.Type<typeof SummaryView> {}

/**
 * Tool results cleared alike: shown as `placeholder`, and with `inputs` their
 * calls' arguments as `{}`.
 *
 * @since 0.1.0
 * @category models
 */
export const ClearedGroup = Schema.Struct({
  placeholder: Schema.String,
  inputs: Schema.Boolean,
  /** The tool call ids, in the order they were cleared. */
  ids: Schema.Array(Schema.String)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface ClearedGroup extends Schema.Schema.Type<typeof ClearedGroup> {}

/**
 * The cleared tool results in view mode, and how often the view changed:
 * `edits` counts the model calls at which more results were cleared (each
 * changes the prompt prefix a provider caches); `tokensSaved` sums what the
 * edits reclaimed, as measured when they were made.
 *
 * @since 0.1.0
 * @category models
 */
export const ClearedView = Schema.Struct({
  groups: Schema.Array(ClearedGroup),
  edits: Schema.NonNegativeInt,
  tokensSaved: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export interface ClearedView extends Schema.Schema.Type<typeof ClearedView> {}

/**
 * The state slice of `Summarization` in view mode.
 *
 * @since 0.1.0
 * @category models
 */
export const SummarySlice = Schema.Struct({ summaryView: Schema.NullOr(SummaryView) })

/**
 * @since 0.1.0
 * @category models
 */
export interface SummarySlice extends Schema.Schema.Type<typeof SummarySlice> {}

/**
 * The state slice of `ContextEditing` in view mode.
 *
 * @since 0.1.0
 * @category models
 */
export const ClearedSlice = Schema.Struct({ clearedView: ClearedView })

/**
 * @since 0.1.0
 * @category models
 */
export interface ClearedSlice extends Schema.Schema.Type<typeof ClearedSlice> {}

/**
 * A `ClearedView` with nothing cleared.
 *
 * @since 0.1.0
 * @category constructors
 */
export const emptyCleared: ClearedView = { groups: [], edits: 0, tokensSaved: 0 }

/**
 * What the model sees of a thread, and what of the stored history it does
 * not see as stored.
 *
 * @since 0.1.0
 * @category models
 */
export interface View {
  /** The messages the model is sent (the system prompt apart). */
  readonly messages: ReadonlyArray<Prompt.Message>
  /** The summarized stored messages, `[start, end)`, when a summary is in the view. */
  readonly summarized: Option.Option<{ readonly start: number; readonly end: number }>
  /** The tool call ids whose results are cleared in the view, oldest edit first. */
  readonly cleared: ReadonlyArray<string>
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/**
 * The summary message shown in place of the summarized messages: a user
 * message holding `text`, marked so that `Summarization.isSummary` knows it.
 *
 * @example
 * ```ts
 * import { ContextView } from "@stepwise-agent/middleware"
 *
 * const message = ContextView.summaryMessage("Here is a summary of the conversation to date:\n\nThey met in Lisbon.")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const summaryMessage = (text: string): Prompt.UserMessage =>
  Prompt.makeMessage("user", {
    content: [Prompt.makePart("text", { text })],
    options: { [markerKey]: { summarization: "summary" } }
  })

const marked = (options: Prompt.ProviderOptions): Prompt.ProviderOptions => ({
  ...options,
  [markerKey]: { ...options[markerKey], contextEditing: "cleared" }
})

/**
 * A tool result with its result replaced by `placeholder`, marked as cleared.
 *
 * @example
 * ```ts
 * import { ContextView } from "@stepwise-agent/middleware"
 * import { Prompt } from "@effect/ai"
 *
 * const part = Prompt.makePart("tool-result", {
 *   id: "call_1", name: "search", result: "a long page", isFailure: false, providerExecuted: false
 * })
 * ContextView.clearedResult(part, "[cleared]").result // "[cleared]"
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const clearedResult = (part: Prompt.ToolResultPart, placeholder: string): Prompt.ToolResultPart =>
  Prompt.makePart("tool-result", {
    id: part.id,
    name: part.name,
    isFailure: part.isFailure,
    result: placeholder,
    providerExecuted: part.providerExecuted,
    options: marked(part.options)
  })

/**
 * A tool call with its arguments replaced by `{}`, marked as cleared.
 *
 * @example
 * ```ts
 * import { ContextView } from "@stepwise-agent/middleware"
 * import { Prompt } from "@effect/ai"
 *
 * const part = Prompt.makePart("tool-call", { id: "call_1", name: "search", params: { q: "x" }, providerExecuted: false })
 * ContextView.clearedCall(part).params // {}
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const clearedCall = (part: Prompt.ToolCallPart): Prompt.ToolCallPart =>
  Prompt.makePart("tool-call", {
    id: part.id,
    name: part.name,
    params: {},
    providerExecuted: part.providerExecuted,
    options: marked(part.options)
  })

// -----------------------------------------------------------------------------
// combinators
// -----------------------------------------------------------------------------

/**
 * The messages with a summary view applied: the messages `start` to `end`
 * replaced by `summary`. Messages shorter than `end` (a history rewritten
 * since) are returned as they are.
 *
 * @example
 * ```ts
 * import { ContextView } from "@stepwise-agent/middleware"
 * import { Prompt } from "@effect/ai"
 *
 * const messages = ["a", "b", "c"].map((text) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] }))
 * const view = { start: 0, end: 2, text: "Summary: a, b" }
 * ContextView.applySummary(messages, view, ContextView.summaryMessage(view.text)).length // 2
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const applySummary = (
  messages: ReadonlyArray<Prompt.Message>,
  view: SummaryView,
  summary: Prompt.Message
): ReadonlyArray<Prompt.Message> =>
  view.end > messages.length || view.start > view.end
    ? messages
    : [...messages.slice(0, view.start), summary, ...messages.slice(view.end)]

/**
 * The messages with a cleared view applied: each tool result whose call id a
 * group lists is replaced by the group's placeholder (and with `inputs` the
 * call's arguments by `{}`). Only the text of parts changes, never which
 * messages or parts there are. Results already cleared stay as they are.
 *
 * @example
 * ```ts
 * import { ContextView } from "@stepwise-agent/middleware"
 *
 * const view = { groups: [{ placeholder: "[cleared]", inputs: false, ids: ["call_1"] }], edits: 1, tokensSaved: 120 }
 * ContextView.applyCleared([], view) // []
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const applyCleared = (
  messages: ReadonlyArray<Prompt.Message>,
  view: ClearedView,
  clearResult: (part: Prompt.ToolResultPart, group: ClearedGroup) => Prompt.ToolResultPart = (part, group) =>
    clearedResult(part, group.placeholder),
  clearCall: (part: Prompt.ToolCallPart) => Prompt.ToolCallPart = clearedCall
): ReadonlyArray<Prompt.Message> => {
  if (view.groups.length === 0) return messages
  const groupOf = new Map<string, ClearedGroup>()
  for (const group of view.groups) for (const id of group.ids) groupOf.set(id, group)
  let output: Array<Prompt.Message> | undefined
  for (let m = 0; m < messages.length; m++) {
    const message = messages[m]!
    if (message.role !== "assistant" && message.role !== "tool") continue
    let content: Array<Prompt.Part> | undefined
    for (let i = 0; i < message.content.length; i++) {
      const part = message.content[i]!
      if (part.type !== "tool-result" && part.type !== "tool-call") continue
      const group = groupOf.get(part.id)
      if (group === undefined || part.options[markerKey]?.contextEditing === "cleared") continue
      if (part.type === "tool-call" && !group.inputs) continue
      content ??= message.content.slice()
      content[i] = part.type === "tool-result" ? clearResult(part, group) : clearCall(part)
    }
    if (content === undefined) continue
    output ??= messages.slice()
    output[m] = Prompt.makeMessage(message.role, { content: content as any, options: message.options })
  }
  return output ?? messages
}

/**
 * What the model sees of a thread: its stored messages with the view of
 * each view-mode policy applied (the `summaryView` and `clearedView` slices
 * of its state), and which stored messages those views summarize or clear.
 * Give it the state of `agent.thread(id)`; a state without view slices gives
 * the stored messages.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { ContextView } from "@stepwise-agent/middleware"
 * import { Effect, Option } from "effect"
 *
 * const seen = Effect.flatMap(Agent.Agent, (agent) => agent.thread("t1")).pipe(
 *   Effect.map(Option.map((snapshot) => ContextView.of(snapshot.state)))
 * )
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const of = (state: { readonly messages: ReadonlyArray<Prompt.Message> }): View => {
  const slices = state as { readonly summaryView?: unknown; readonly clearedView?: unknown }
  const summary = Schema.is(SummaryView)(slices.summaryView) ? slices.summaryView : undefined
  const cleared = Schema.is(ClearedView)(slices.clearedView) ? slices.clearedView : emptyCleared
  let messages = state.messages
  let summarized = Option.none<{ readonly start: number; readonly end: number }>()
  if (summary !== undefined && summary.end <= messages.length) {
    messages = applySummary(messages, summary, summaryMessage(summary.text))
    summarized = Option.some({ start: summary.start, end: summary.end })
  }
  return {
    messages: applyCleared(messages, cleared),
    summarized,
    cleared: cleared.groups.flatMap((group) => group.ids)
  }
}
