/**
 * Which tool results `ContextEditing.ClearToolUses` clears once it fires:
 * oldest first, the results that may be cleared (they are sent, answering
 * their call, not cleared yet and not of an excluded tool) older than the
 * ones `keep` keeps, all of them or, with `clearAtLeast` / `clearTo`, the
 * fewest that reclaim enough.
 *
 * What it learns of a thread is kept in its history cache session
 * ({@link Clearing}) so that the next model call only looks at the new
 * messages: the calls and results are indexed once, and what clearing each
 * result reclaims is measured once.
 */
import type * as Prompt from "@effect/ai/Prompt"
import type * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Effect from "effect/Effect"
import * as HistoryCache from "../fast/historyCache.js"
import * as Marker from "../marker.js"
import type * as Look from "./clearLook.js"
import type { ResolvedKeep } from "./clearTrigger.js"
import * as Sent from "./sent.js"

interface Located<P> extends Look.Position {
  readonly part: P
}

/** A tool result that may be cleared: it is sent answering its call, is not cleared and not excluded. */
interface Eligible extends Look.ToClear {
  readonly result: Located<Prompt.ToolResultPart>
  readonly call: Located<Prompt.ToolCallPart>
  /** Its position among all tool results sent. */
  readonly position: number
}

/**
 * What one edit derives from the messages a history cache session has seen
 * (the tool calls and results, and the previous output), so that the next
 * model call of that thread only looks at the new ones. It is a cache: the
 * result of an edit is the same with or without it. The messages are indexed
 * when a call triggers the edit (a call that does not needs only the
 * totals), from where the last indexing stopped.
 */
export interface Clearing {
  /** What the model call is sent of the thread's first messages, measured. */
  readonly sent: Sent.Memo
  /** How many of the session's messages are indexed. */
  indexed: number
  readonly calls: Map<string, Located<Prompt.ToolCallPart>>
  readonly callsWithInputs: Set<Prompt.ToolCallPart>
  /** Every tool result sent answering a call, in order (what `keep` counts back over). */
  readonly results: Array<Prompt.ToolResultPart>
  readonly eligible: Array<Eligible>
  /** `reclaim[k]`: raw tokens reclaimed by clearing the first `k` eligible results. */
  readonly reclaim: Array<number>
  /** `most[k]`: the most of `reclaim[0..k]` (a placeholder longer than its result reclaims less than 0). */
  readonly most: Array<number>
  /** The indices of the tool calls cleared, per assistant message, by the eligible results measured so far. */
  readonly callsCleared: Map<number, ReadonlyArray<number>>
  /** The last output. */
  output: Look.Output | undefined
}

/** What an edit knows of a thread it has not seen. */
export const make = (): Clearing => ({
  sent: Sent.unknown(),
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

/**
 * Makes `clearing` hold only what it derived from the first `length`
 * messages of `messages` (a history that shares only those with the one it
 * saw; `sums`: its running raw sums): the measure of what is sent goes back
 * to within them, and the index, when it reached past them, starts again at
 * the next call that reaches the trigger.
 */
export const truncate = (
  clearing: Clearing,
  length: number,
  messages: ReadonlyArray<Prompt.Message>,
  sums: ReadonlyArray<number>
): void => {
  Sent.truncate(clearing.sent, length, messages, sums)
  if (clearing.indexed <= length && clearing.output === undefined) return
  if (clearing.indexed > length) {
    clearing.indexed = 0
    clearing.calls.clear()
    clearing.callsWithInputs.clear()
    clearing.results.length = 0
    clearing.eligible.length = 0
    clearing.reclaim.length = 1
    clearing.most.length = 1
    clearing.callsCleared.clear()
  }
  // (an output built on messages no longer shared is never continued from)
  if (clearing.output !== undefined && clearing.output.length > length) clearing.output = undefined
}

/** What the selection needs of the edit's options. */
export interface Rules {
  readonly excludeTools: ReadonlySet<string>
  readonly clearToolInputs: boolean
}

/**
 * Indexes the stored messages not indexed yet: their tool calls, and their
 * tool results that may be cleared. A result the agent drops (an orphan:
 * the model call is not sent it) is left alone and takes none of the `keep`
 * slots.
 */
export const index = (clearing: Clearing, rules: Rules, messages: ReadonlyArray<Prompt.Message>): void => {
  if (clearing.indexed >= messages.length) return
  // the results before `sent.at` are all sent when pairing changed none of those messages
  const isSent = Sent.sentResults(
    messages,
    clearing.sent.clean ? Math.max(clearing.indexed, clearing.sent.at) : clearing.indexed
  )
  for (let m = clearing.indexed; m < messages.length; m++) {
    const message = messages[m]!
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
        // A result answers a call made before it; one the agent drops is not sent
        const call = clearing.calls.get(part.id)
        if (call === undefined || !isSent(part, m)) continue
        const position = clearing.results.length
        clearing.results.push(part)
        if (Marker.isCleared(part)) continue
        if (rules.excludeTools.has(part.name) || rules.excludeTools.has(call.part.name)) continue
        const withCall = rules.clearToolInputs && !Marker.isCleared(call.part) &&
          !clearing.callsWithInputs.has(call.part)
        if (withCall) clearing.callsWithInputs.add(call.part)
        clearing.eligible.push({ result: { part, message: m, index: i }, call, position, withCall })
      }
    }
  }
  clearing.indexed = messages.length
}

/**
 * How many of the newest results `keep` keeps: a number of them, or the
 * newest whose tokens (each as a tool message of its own) add up to at most
 * `keep.value`, counting back until one does not fit.
 */
const keepCount = (
  counter: TokenCounter.Service,
  look: Look.Look,
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
      const counts = yield* counter.measure(results.slice(from, end).map(look.toolMessageOf))
      for (let j = counts.length - 1; j >= 0; j--) {
        total += HistoryCache.scaled(counts[j]!, scale)
        if (total > keep.value) return kept
        kept++
      }
    }
    return kept
  })
}

/**
 * The number of eligible results older than the ones `keep` keeps: the
 * candidates, which are the first ones of `clearing.eligible`.
 */
export const candidates = (
  counter: TokenCounter.Service,
  look: Look.Look,
  clearing: Clearing,
  keep: ResolvedKeep,
  scale: number
): Effect.Effect<number> =>
  Effect.map(keepCount(counter, look, clearing, keep, scale), (kept) => {
    const eligible = clearing.eligible
    const window = clearing.results.length - kept
    let lo = 0
    let hi = eligible.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (eligible[mid]!.position < window) lo = mid + 1
      else hi = mid
    }
    return lo
  })

/** Measures, once, what clearing each eligible result up to `candidates` reclaims. */
export const measureUpTo = (
  counter: TokenCounter.Service,
  look: Look.Look,
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
    items.push(entry.result.part, look.clearResult(entry.result.part))
    if (entry.withCall) {
      const m = entry.call.message
      const before = callsCleared.get(m) ?? clearing.callsCleared.get(m) ?? []
      const after = [...before, entry.call.index].sort((a, b) => a - b)
      callsCleared.set(m, after)
      items.push(look.variant(messages[m]!, before), look.variant(messages[m]!, after))
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

/**
 * How many of the candidates to clear, oldest first: all of them, or with
 * `clearAtLeast` (and `clearTo`) the fewest that reclaim at least that much
 * (and bring the request down to `clearTo`). `most` grows with the number
 * cleared: a binary search. `raw`: the raw tokens of the request.
 */
export const count = (
  clearing: Clearing,
  candidates: number,
  options: {
    readonly raw: number
    readonly tokensOf: (raw: number) => number
    readonly clearAtLeast: number
    readonly clearTo: number | undefined
  }
): number => {
  const { clearAtLeast, clearTo, raw, tokensOf } = options
  if (clearAtLeast === 0 && clearTo === undefined) return candidates
  const tokensBefore = tokensOf(raw)
  const enough = (n: number) =>
    tokensBefore - tokensOf(raw - clearing.most[n]!) >= clearAtLeast &&
    (clearTo === undefined || tokensOf(raw - clearing.most[n]!) <= clearTo)
  if (!enough(candidates)) return candidates
  let low = 1
  let high = candidates
  while (low < high) {
    const mid = (low + high) >>> 1
    if (enough(mid)) high = mid
    else low = mid + 1
  }
  return low
}
