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
 * - {@link ClearedView} (slice key `clearedView`): the tool results at these
 *   stored positions are replaced by a placeholder (and, in a group with
 *   `inputs`, the calls' arguments by `{}`).
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
import * as AgentState from "@stepwise-agent/core/AgentState"
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
 * A cleared part, by where it is stored: the part `part` of the stored
 * message `message`, a tool result (or, in a group with `inputs`, a tool
 * call) whose call id is `id`. Positions, not ids, say what was cleared:
 * providers may repeat a call id across replies (some number the calls of
 * each reply from `call_0`). A position whose part is not a tool part with
 * that id (a history rewritten since) clears nothing.
 *
 * @since 0.1.0
 * @category models
 */
export const ClearedPart = Schema.Struct({
  id: Schema.String,
  message: Schema.NonNegativeInt,
  part: Schema.NonNegativeInt
})

/**
 * @since 0.1.0
 * @category models
 */
export interface ClearedPart extends Schema.Schema.Type<typeof ClearedPart> {}

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
  /** The cleared parts (results, and with `inputs` their calls), in the order they were cleared. */
  parts: Schema.Array(ClearedPart)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface ClearedGroup extends Schema.Schema.Type<typeof ClearedGroup> {}

/**
 * A group as the first release of view mode recorded it, by bare call id
 * (`ids`), which cannot tell apart two results of one repeated id. It
 * decodes to no group: the results it cleared are shown again until the
 * next edit clears them by position (one change of the prompt prefix).
 */
const IdGroup = Schema.Struct({ placeholder: Schema.String, inputs: Schema.Boolean, ids: Schema.Array(Schema.String) })

const Groups = Schema.transform(
  Schema.Array(Schema.Union(ClearedGroup, IdGroup)),
  Schema.typeSchema(Schema.Array(ClearedGroup)),
  {
    strict: true,
    decode: (groups) => groups.filter((group): group is ClearedGroup => "parts" in group),
    encode: (groups) => groups
  }
)

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
  groups: Groups,
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
  /** The messages the model is sent (the system prompt apart), tool calls and results paired (`AgentState.paired`). */
  readonly messages: ReadonlyArray<Prompt.Message>
  /** The summarized stored messages, `[start, end)`, when a summary is in the view. */
  readonly summarized: Option.Option<{ readonly start: number; readonly end: number }>
  /** The call ids of the tool results cleared in the view, oldest edit first (an id repeated once per result). */
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

/** The tool part stored at `at` when it is a tool result or call with `at`'s id. */
const partAt = (
  messages: ReadonlyArray<Prompt.Message>,
  at: ClearedPart
): Prompt.ToolResultPart | Prompt.ToolCallPart | undefined => {
  const message = messages[at.message]
  if (message === undefined || (message.role !== "assistant" && message.role !== "tool")) return undefined
  const part = message.content[at.part]
  return part !== undefined && (part.type === "tool-result" || part.type === "tool-call") && part.id === at.id
    ? part
    : undefined
}

/**
 * The stored messages with a cleared view applied: each tool result at a
 * position a group lists is replaced by the group's placeholder (and with
 * `inputs` each listed call's arguments by `{}`). Only the text of parts
 * changes, never which messages or parts there are. Results already
 * cleared, and positions that hold no tool part with the listed id, stay as
 * they are.
 *
 * @example
 * ```ts
 * import { ContextView } from "@stepwise-agent/middleware"
 *
 * const view = {
 *   groups: [{ placeholder: "[cleared]", inputs: false, parts: [{ id: "call_1", message: 2, part: 0 }] }],
 *   edits: 1,
 *   tokensSaved: 120
 * }
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
  const contents = new Map<number, Array<Prompt.Part>>()
  for (const group of view.groups) {
    for (const at of group.parts) {
      const part = partAt(messages, at)
      if (part === undefined || part.options[markerKey]?.contextEditing === "cleared") continue
      if (part.type === "tool-call" && !group.inputs) continue
      let content = contents.get(at.message)
      if (content === undefined) {
        content = messages[at.message]!.content.slice() as Array<Prompt.Part>
        contents.set(at.message, content)
      }
      content[at.part] = part.type === "tool-result" ? clearResult(part, group) : clearCall(part)
    }
  }
  if (contents.size === 0) return messages
  const output = messages.slice()
  for (const [m, content] of contents) {
    const message = messages[m]!
    output[m] = Prompt.makeMessage(message.role, { content: content as any, options: message.options })
  }
  return output
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
  // the cleared view indexes the stored messages: it is applied before the summary, which moves them
  let messages = applyCleared(state.messages, cleared)
  let summarized = Option.none<{ readonly start: number; readonly end: number }>()
  if (summary !== undefined && summary.end <= messages.length) {
    messages = applySummary(messages, summary, summaryMessage(summary.text))
    summarized = Option.some({ start: summary.start, end: summary.end })
  }
  return {
    // tool calls and results paired, as the agent sends them
    messages: AgentState.paired(messages),
    summarized,
    cleared: cleared.groups.flatMap((group) =>
      group.parts.flatMap((at) => partAt(state.messages, at)?.type === "tool-result" ? [at.id] : [])
    )
  }
}
