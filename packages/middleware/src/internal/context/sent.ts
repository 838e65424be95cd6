/**
 * What a model call is sent of a thread's messages, for the context
 * triggers: `AgentState.paired` (a tool result without its call is dropped,
 * a call without a result is answered "not run"), which the agent applies to
 * every model request. A trigger measures this, not the stored messages, so
 * it never fires (or holds back) on text the model never sees.
 *
 * Found incrementally, per thread: pairing is decided message by message,
 * and at a non-tool message it starts afresh once every call before it has
 * its result. So when the messages up to such a message were found sent as
 * they are, a longer thread with the same first messages is sent as it is
 * exactly when its tail from that message is: only the tail is paired again.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as AgentState from "@stepwise-agent/core/AgentState"

/**
 * How much of a thread's messages is known to be sent as it is: the first
 * `length` messages, ending before a non-tool message (or 0). Kept with the
 * history cache's session of the thread, whose messages it counts.
 */
export interface PairedPrefix {
  length: number
}

/** A thread of which nothing is known yet. */
export const unknown = (): PairedPrefix => ({ length: 0 })

/** The index of the last non-tool message at or after `from`, else `from`. */
const lastRunStart = (messages: ReadonlyArray<Prompt.Message>, from: number): number => {
  for (let i = messages.length - 1; i > from; i--) if (messages[i]!.role !== "tool") return i
  return from
}

/**
 * The messages a model call is sent of `messages`: `messages` itself when it
 * pairs as it is, else the paired copy. `known` tells how many first
 * messages (the same objects as `messages`' own, as the history cache
 * checked) were found sent as they are; it grows as the thread does.
 */
export const of = (messages: ReadonlyArray<Prompt.Message>, known: PairedPrefix): ReadonlyArray<Prompt.Message> => {
  const from = known.length > messages.length ? 0 : known.length
  const tail = from === 0 ? messages : messages.slice(from)
  if (AgentState.paired(tail) !== tail) return AgentState.paired(messages)
  known.length = lastRunStart(messages, from)
  return messages
}
