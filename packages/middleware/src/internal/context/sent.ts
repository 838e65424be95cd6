/**
 * What a model call is sent of a thread's messages, for the context
 * triggers: `AgentState.paired` (a tool result without its call is dropped,
 * a call without a result is answered "not run"), which the agent applies to
 * every model request. A trigger measures this, not the stored messages, so
 * it never fires (or holds back) on text the model never sees.
 *
 * Measured incrementally, per thread. Pairing starts afresh at every
 * message that is not a tool message (the calls still open are answered
 * there), so the messages sent of a thread are those sent of its messages
 * before such a message, then those sent of the rest: what was measured up
 * to the last such message stays true for a longer thread with the same
 * first messages, and a model call pairs and measures only the messages
 * from there. Where pairing changes nothing, the running sums of the stored
 * messages give the tokens without measuring them again. A thread seen for
 * the first time is paired chunk by chunk as the history cache measures it
 * ({@link scanned}), not in a pass of its own afterwards.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as AgentState from "@stepwise-agent/core/AgentState"
import type * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Effect from "effect/Effect"

/**
 * What is sent of the first `at` messages of a thread (`at` is 0 or the
 * index of a message that is not a tool message): its raw tokens and its
 * number of messages. Kept with the history cache's session of the thread.
 */
export interface Memo {
  at: number
  raw: number
  length: number
  /** Whether the first `at` messages are sent as they are stored. */
  clean: boolean
  /** Whether pairing changed the messages from `at` on the last call (a call still open at the end, say). */
  changed: boolean
  /** Once not clean: the `at` up to which the messages are sent as stored, and the memo at each `at` since. */
  cleanTo: number
  readonly marks: Array<Mark>
  /** The pairing of a thread's messages from the first, made as they were measured (see {@link scanned}). */
  scan: Scan | undefined
}

/** Stored messages being paired: the calls still waiting for their result, and whether a tool run is open. */
interface Pairing {
  readonly open: Array<string>
  inToolRun: boolean
}

/** The pairing of `messages[0..to)`, or of the messages before `broken`, where they stopped pairing as stored. */
interface Scan extends Pairing {
  readonly messages: ReadonlyArray<Prompt.Message>
  to: number
  /** The index of the message at which the messages stopped pairing as stored, else -1. */
  broken: number
}

/** What a memo was at one of its `at`s. */
interface Mark {
  readonly at: number
  readonly raw: number
  readonly length: number
}

/** A thread of which nothing is measured yet. */
export const unknown = (): Memo => ({
  at: 0,
  raw: 0,
  length: 0,
  clean: true,
  changed: false,
  cleanTo: 0,
  marks: [],
  scan: undefined
})

const reset = (memo: Memo): void => {
  Object.assign(memo, unknown())
}

/** Records the memo's new `at` (a memo that is not clean goes back to one of them when truncated). */
const moved = (memo: Memo): void => {
  if (!memo.clean) memo.marks.push({ at: memo.at, raw: memo.raw, length: memo.length })
}

/**
 * Makes `memo` hold only what it knows of the first `length` messages of
 * `messages` (a history that shares only those with the one measured;
 * `sums` are its running raw sums, up to `length` at least): it goes back to
 * the last `at` it passed that lies within them, so the next call measures
 * from there.
 */
export const truncate = (
  memo: Memo,
  length: number,
  messages: ReadonlyArray<Prompt.Message>,
  sums: ReadonlyArray<number>
): void => {
  memo.scan = undefined
  // The memo may stop at a message both histories share, which is not a tool message (pairing starts afresh
  // there): not at the first message they do not share, whose calls the last history may have answered after.
  if (memo.at < length) return
  const { marks } = memo
  while (marks.length > 0 && marks[marks.length - 1]!.at >= length) marks.pop()
  const mark = marks[marks.length - 1]
  if (mark !== undefined) {
    memo.at = mark.at
    memo.raw = mark.raw
    memo.length = mark.length
  } else {
    // every message before `at` is sent as stored
    let at = Math.min(length - 1, memo.clean ? memo.at : memo.cleanTo)
    while (at > 0 && messages[at]!.role === "tool") at--
    memo.at = Math.max(at, 0)
    memo.raw = sums[memo.at]!
    memo.length = memo.at
    memo.clean = true
    memo.cleanTo = 0
  }
  memo.changed = true
}

/** What a model call is sent of a thread, measured. */
export interface Sent {
  /** Raw tokens of the messages sent (the counter's, before its calibration scale). */
  readonly raw: number
  /** The number of messages sent. */
  readonly length: number
}

/** The index of the last message at or after `from` that is not a tool message, else `from`. */
const lastRunStart = (messages: ReadonlyArray<Prompt.Message>, from: number): number => {
  for (let i = messages.length - 1; i > from; i--) if (messages[i]!.role !== "tool") return i
  return from
}

/** What a model call is sent of a slice of a thread, and whether that is the slice as it is. */
interface Paired {
  readonly sent: ReadonlyArray<Prompt.Message>
  readonly same: boolean
  /** The number of messages sent. */
  readonly length: number
}

const none: Paired = { sent: [], same: true, length: 0 }

/** `length` messages sent as they are stored. */
const asStored = (length: number): Paired => length === 0 ? none : { sent: [], same: true, length }

/**
 * What a model call is sent of `messages[from..to)`, `from` being 0 or a message that is not a tool message
 * (`scan`: a pairing of the messages made as they were measured, which may tell).
 */
const pairedSlice = (
  messages: ReadonlyArray<Prompt.Message>,
  from: number,
  to: number,
  scan?: Scan | undefined
): Paired => {
  if (from === to) return none
  if (fromScan(scan, messages, from, to) ?? pairsAsStored(messages, from, to)) return asStored(to - from)
  const slice = from === 0 && to === messages.length ? messages : messages.slice(from, to)
  const sent = AgentState.paired(slice)
  return { sent, same: sent === slice, length: sent.length }
}

/**
 * Pairs `messages[from..to)` on from `pairing` (a tool message's results each
 * answer a call of the assistant message before its tool messages, once, and
 * every such call is answered before the next message that is not a tool
 * message): the index of the first message at which they stop being sent as
 * they are stored, else -1 (the calls still open at `to` are in `pairing`).
 */
const pairOn = (pairing: Pairing, messages: ReadonlyArray<Prompt.Message>, from: number, to: number): number => {
  // (indexed loops, and no `splice`: a first call runs this over every message of a long thread, and an
  // iterator or a removed-elements array per message was most of what that call allocated)
  /** Ids of the calls of the last assistant message still waiting for their result, in no order (one array). */
  const { open } = pairing
  let inToolRun = pairing.inToolRun
  let broken = -1
  for (let i = from; i < to && broken < 0; i++) {
    const message = messages[i]!
    if (message.role !== "tool") {
      if (open.length > 0) {
        broken = i
        break
      }
      inToolRun = message.role === "assistant"
      if (message.role === "assistant") {
        const parts = message.content
        for (let p = 0; p < parts.length; p++) {
          const part = parts[p]!
          if (part.type === "tool-call" && !part.providerExecuted && !open.includes(part.id)) open.push(part.id)
        }
      }
      continue
    }
    const results = message.content
    for (let p = 0; p < results.length; p++) {
      const at = inToolRun ? open.indexOf(results[p]!.id) : -1
      if (at < 0) {
        broken = i
        break
      }
      const last = open.pop()!
      if (at < open.length) open[at] = last
    }
  }
  pairing.inToolRun = inToolRun
  return broken
}

/**
 * Whether `messages[from..to)` (`from` being a message that is not a tool
 * message) is sent as it is stored: `AgentState.paired` of the slice would
 * give the slice itself. Checked without building the slice (a step of the
 * loop asks it of its last messages).
 */
export const pairsAsStored = (
  messages: ReadonlyArray<Prompt.Message>,
  from: number,
  to: number = messages.length
): boolean => {
  const pairing: Pairing = { open: [], inToolRun: false }
  return pairOn(pairing, messages, from, to) < 0 && pairing.open.length === 0
}

/**
 * Pairs `messages[from..to)` as {@link pairsAsStored} would, right after the
 * history cache measured them (`HistoryCache.Options.measured`): a first
 * call on a long thread measures it in chunks, and pairing each chunk while
 * its messages are still in the processor's cache, rather than in a pass of
 * its own over the whole thread afterwards, roughly halves what pairing costs
 * that call (a pass that reads every message of a thread just built costs
 * about as much as the reading of the messages, not the work on them).
 * Only a pairing from the first message is kept, until {@link measure} uses it.
 */
export const scanned = (memo: Memo, messages: ReadonlyArray<Prompt.Message>, from: number, to: number): void => {
  if (from === 0) memo.scan = { messages, to: 0, open: [], inToolRun: false, broken: -1 }
  const scan = memo.scan
  if (scan === undefined || scan.messages !== messages || scan.to !== from || scan.broken >= 0) return
  scan.broken = pairOn(scan, messages, from, to)
  scan.to = to
}

/**
 * What a scan tells of `pairsAsStored(messages, from, to)` (`from` being 0 or
 * a message that is not a tool message), undefined when it does not: the
 * messages paired from the first message without a break up to a message
 * that is not a tool message (or to the end, with no call open) pair the same
 * from any such message before it, and a break at or after `from` is in
 * every range from `from` that reaches it.
 */
const fromScan = (
  scan: Scan | undefined,
  messages: ReadonlyArray<Prompt.Message>,
  from: number,
  to: number
): boolean | undefined => {
  if (scan === undefined || scan.messages !== messages) return undefined
  // (the pairing at a tool message is not one a scan kept)
  if (to < messages.length && messages[to]!.role === "tool") return undefined
  if (scan.broken >= 0) return from <= scan.broken ? to < scan.broken : undefined
  if (to < scan.to) return true
  return to === scan.to && to === messages.length ? scan.open.length === 0 : undefined
}

/**
 * What a model call is sent of `messages`, whose raw token sums are `sums`
 * (`sums[i]`: the first `i` messages), when the messages since `memo` (what
 * an earlier call measured of the same first messages) are sent as they are
 * stored: the sums have it, nothing is measured. Moves `memo` on. Undefined
 * otherwise (see {@link measure}).
 */
export const ifStored = (
  messages: ReadonlyArray<Prompt.Message>,
  sums: ReadonlyArray<number>,
  memo: Memo
): Sent | undefined => {
  if (memo.at > messages.length) reset(memo)
  const { at } = memo
  // (a thread seen whole for the first time, or whose last messages were not sent as stored, is measured in two
  // parts at once)
  if (at === 0 || memo.changed || !pairsAsStored(messages, at)) return undefined
  const next = lastRunStart(messages, at)
  memo.raw += sums[next]! - sums[at]!
  memo.length += next - at
  memo.at = next
  moved(memo)
  return { raw: memo.raw + sums[messages.length]! - sums[next]!, length: memo.length + messages.length - next }
}

/**
 * What a model call is sent of `messages` (see {@link ifStored}, which is
 * cheaper when it answers), measuring what pairing changed. Moves `memo` on.
 */
export const measure = (
  counter: TokenCounter.Service,
  messages: ReadonlyArray<Prompt.Message>,
  sums: ReadonlyArray<number>,
  memo: Memo
): Effect.Effect<Sent> => {
  if (memo.at > messages.length) reset(memo)
  const { at } = memo
  const next = lastRunStart(messages, at)
  const { scan } = memo
  memo.scan = undefined
  const head = pairedSlice(messages, at, next, scan)
  const rest = pairedSlice(messages, next, messages.length, scan)
  const toMeasure = head.same ? (rest.same ? [] : rest.sent) : rest.same ? head.sent : head.sent.concat(rest.sent)
  return Effect.map(toMeasure.length === 0 ? Effect.succeed([]) : counter.measure(toMeasure), (counts) => {
    let i = 0
    const sumOf = (part: Paired, raw: number) => {
      if (part.same) return raw
      let total = 0
      for (const end = i + part.sent.length; i < end; i++) total += counts[i]!
      return total
    }
    const headRaw = sumOf(head, sums[next]! - sums[at]!)
    const restRaw = sumOf(rest, sums[messages.length]! - sums[next]!)
    // committed once measured, so an interrupted measure leaves the memo as it was
    if (memo.clean && !head.same) memo.cleanTo = at
    memo.at = next
    memo.raw += headRaw
    memo.length += head.length
    memo.clean &&= head.same
    memo.changed = !head.same || !rest.same
    moved(memo)
    return { raw: memo.raw + restRaw, length: memo.length + rest.length }
  })
}

/**
 * Whether a model call is sent the tool result `part` stored in
 * `messages[m]`, for the messages from `from` on (a result before `from` is
 * taken as sent). Pairing keeps a result as the same part object.
 */
export const sentResults = (
  messages: ReadonlyArray<Prompt.Message>,
  from: number
): (part: Prompt.ToolResultPart, m: number) => boolean => {
  let start = Math.min(from, messages.length)
  while (start > 0 && messages[start]?.role === "tool") start--
  const { same, sent } = pairedSlice(messages, start, messages.length)
  if (same) return () => true
  const results = new Set<Prompt.ToolResultPart>()
  for (const message of sent) {
    if (message.role === "tool") { for (const part of message.content) results.add(part) }
  }
  return (part, m) => m < start || results.has(part)
}
