/**
 * `ContextEditing`'s view mode: `beforeModel` applies the edits to the
 * stored thread as the model sees it and records where the parts they
 * cleared are stored (the `clearedView` state slice, see
 * `ContextView.ClearedView`); `wrapModelCall` shows every request that view.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Middleware from "@stepwise-agent/core/Middleware"
import type * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Effect from "effect/Effect"
import type { ContextEdit, EditResult } from "../../ContextEditing.js"
import * as ContextView from "../../ContextView.js"
import * as CounterEdits from "../fast/counterEdits.js"
import * as HistoryCache from "../fast/historyCache.js"
import * as IdentityTable from "../fast/identityTable.js"
import { isCleared } from "../marker.js"

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

/** The view-mode middleware of `edits`, named `name`. */
export const make = (
  name: string,
  edits: ReadonlyArray<ContextEdit.Any>,
  counter: Effect.Effect<TokenCounter.Service, never, TokenCounter.TokenCounter>
) => {
  // per first message (one per thread, in practice), as the history caches (`fast/identityTable.ts`)
  const memos = IdentityTable.make<Prompt.Message, ViewMemo>()
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
      // (`concat`, not a spread: V8 copies an array into a literal element by element)
      output = memo.output.concat(messages.slice(memo.stored.length))
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
        const result: EditResult = yield* (CounterEdits.applyWith(edit, service, current) as Effect.Effect<
          EditResult,
          unknown,
          unknown
        >)
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
