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
 * messages give the tokens without measuring them again.
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
}

/** A thread of which nothing is measured yet. */
export const unknown = (): Memo => ({ at: 0, raw: 0, length: 0, clean: true, changed: false })

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
}

const none: Paired = { sent: [], same: true }

/** What a model call is sent of `messages[from..to)`, `from` being 0 or a message that is not a tool message. */
const pairedSlice = (messages: ReadonlyArray<Prompt.Message>, from: number, to: number): Paired => {
  if (from === to) return none
  const slice = from === 0 && to === messages.length ? messages : messages.slice(from, to)
  const sent = AgentState.paired(slice)
  return { sent, same: sent === slice }
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
  if (memo.at > messages.length) Object.assign(memo, unknown())
  const { at } = memo
  // (a thread seen whole for the first time, or whose last messages were not sent as stored, is
  // measured in two parts at once)
  if (at === 0 || memo.changed || !pairedSlice(messages, at, messages.length).same) return undefined
  const next = lastRunStart(messages, at)
  memo.raw += sums[next]! - sums[at]!
  memo.length += next - at
  memo.at = next
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
  if (memo.at > messages.length) Object.assign(memo, unknown())
  const { at } = memo
  const next = lastRunStart(messages, at)
  const head = pairedSlice(messages, at, next)
  const rest = pairedSlice(messages, next, messages.length)
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
    memo.at = next
    memo.raw += headRaw
    memo.length += head.sent.length
    memo.clean &&= head.same
    memo.changed = !head.same || !rest.same
    return { raw: memo.raw + restRaw, length: memo.length + rest.sent.length }
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
