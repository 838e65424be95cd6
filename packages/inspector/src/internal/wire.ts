/**
 * What the page receives: agent events and thread summaries as JSON, with
 * long strings cut and values JSON cannot hold made readable.
 */
import type * as Prompt from "@effect/ai/Prompt"
import type * as Agent from "@stepwise-agent/core/Agent"
import type * as AgentEvent from "@stepwise-agent/core/AgentEvent"
import type * as AgentResult from "@stepwise-agent/core/AgentResult"
import * as AgentState from "@stepwise-agent/core/AgentState"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Option from "effect/Option"
import * as Crypto from "node:crypto"

/** The longest string sent as is; longer ones are cut with a note of what was left out. */
export const maxStringLength = 16_000

const replacer = function(this: unknown, _key: string, value: unknown): unknown {
  if (typeof value === "string") {
    return value.length <= maxStringLength
      ? value
      : `${value.slice(0, maxStringLength)}… [${value.length - maxStringLength} more characters]`
  }
  if (typeof value === "bigint") return value.toString()
  if (value instanceof Uint8Array) return `[${value.length} bytes]`
  if (value instanceof Error) return { name: value.name, message: value.message }
  return value
}

/** JSON of any value: never throws (a value JSON cannot hold becomes a description of it). */
export const stringify = (value: unknown): string => {
  try {
    return JSON.stringify(value, replacer) ?? "null"
  } catch (error) {
    return JSON.stringify(`[not representable as JSON: ${error instanceof Error ? error.message : String(error)}]`)
  }
}

const message = (value: Prompt.Message): unknown => AgentState.encodeMessages([value])[0]

const result = (value: AgentResult.AgentResult<any>): Record<string, unknown> =>
  value._tag === "Completed"
    ? {
      _tag: "Completed",
      text: value.text,
      output: Option.getOrNull(value.output),
      usage: value.usage,
      steps: value.steps
    }
    : { _tag: "Interrupted", interrupt: value.interrupt, usage: value.usage, steps: value.steps }

/**
 * An event as the page sees it: the assistant message encoded, tool calls
 * and results without their provider options, a run's result without its
 * state (the page reads the state through the thread route), and failure
 * messages with their credentials scrubbed.
 */
export const event = (value: AgentEvent.AgentEvent<any>): Record<string, unknown> => {
  switch (value._tag) {
    case "ModelResponded":
      return {
        _tag: value._tag,
        step: value.step,
        message: message(value.message),
        usage: value.usage,
        finishReason: value.finishReason,
        durationMillis: value.durationMillis
      }
    case "ModelRequestSent":
      // the request itself is kept aside and sent when asked for (`request`): a prompt per step would fill the log
      return {
        _tag: value._tag,
        step: value.step,
        messageCount: value.prompt.content.length,
        toolNames: value.toolNames,
        toolChoice: value.toolChoice
      }
    case "ToolCallStarted":
      return {
        _tag: value._tag,
        call: { id: value.call.id, name: value.call.name, params: value.call.params },
        // the call's entry in the effect ledger: plain strings (step, effect, keys)
        ...(value.ledger === undefined ? {} : { ledger: value.ledger })
      }
    case "ToolCallCompleted":
      return {
        _tag: value._tag,
        result: {
          id: value.result.id,
          name: value.result.name,
          result: value.result.result,
          isFailure: value.result.isFailure
        },
        durationMillis: value.durationMillis
      }
    case "MessageReceived":
      return {
        _tag: value._tag,
        mode: value.mode,
        step: value.step,
        messages: AgentState.encodeMessages(value.messages)
      }
    case "RunEnded":
      return { _tag: value._tag, result: result(value.result) }
    case "SubAgentEvent":
      // the child's event as the page sees any event: encoded, scrubbed
      return {
        _tag: value._tag,
        callId: value.callId,
        agent: value.agent,
        threadId: value.threadId,
        event: event(value.event)
      }
    case "ModelAttemptFailed":
    case "RunFailed":
      return { ...value, message: Secrets.scrubText(value.message) }
    default:
      return { ...value }
  }
}

/** The event of a model request. */
export type RequestSent = Extract<AgentEvent.AgentEvent<any>, { readonly _tag: "ModelRequestSent" }>

/**
 * A model request as the page shows it: the prompt's messages encoded (the
 * system prompt first), the tools offered and the tool choice, and the state
 * the call saw (its messages encoded, its slices as they were).
 */
export const request = (value: RequestSent): Record<string, unknown> => {
  const { messages, ...slices } = value.state as { readonly messages: ReadonlyArray<Prompt.Message> }
  return {
    step: value.step,
    prompt: AgentState.encodeMessages(value.prompt.content),
    toolNames: value.toolNames,
    toolChoice: value.toolChoice,
    state: { messages: AgentState.encodeMessages(messages), slices }
  }
}

/**
 * A name for a pending wait: the same wait always gets the same key, another
 * wait (other calls, another middleware, a later point of the thread) another
 * one. The page sends it back with its decision, so a decision meant for a
 * wait that is over is refused.
 */
export const interruptKey = (interrupt: AgentResult.Interrupt, messageCount: number): string =>
  Crypto.createHash("sha256")
    .update(stringify([interrupt.middleware, interrupt.key, messageCount, interrupt.value]))
    .digest("base64url")
    .slice(0, 22)

/**
 * What the page knows of a thread: whether a run is going on, what it waits
 * for, its state slices (everything but the messages) and the last failure.
 */
export interface ThreadInfo {
  readonly threadId: string
  readonly running: boolean
  readonly messageCount: number
  readonly pending: { readonly key: string; readonly middleware: string; readonly value: unknown } | null
  readonly slices: Record<string, unknown>
  readonly failure: { readonly error: string; readonly message: string } | null
}

/** The thread's summary from its checkpoint. */
export const threadInfo = (
  threadId: string,
  snapshot: Option.Option<Agent.ThreadSnapshot<any>>,
  running: boolean,
  failure: ThreadInfo["failure"]
): ThreadInfo => {
  if (Option.isNone(snapshot)) {
    return { threadId, running, messageCount: 0, pending: null, slices: {}, failure }
  }
  const { messages, ...slices } = snapshot.value.state as { readonly messages: ReadonlyArray<Prompt.Message> }
  const pending = Option.getOrNull(Option.map(snapshot.value.pending, (interrupt) => ({
    key: interruptKey(interrupt, messages.length),
    middleware: interrupt.middleware,
    value: interrupt.value
  })))
  return { threadId, running, messageCount: messages.length, pending, slices, failure }
}

/**
 * What view-mode context policies left out of what the model sees, read
 * from their state slices (`summaryView`, `clearedView`; see the middleware
 * package's `ContextView`): the stored messages a summary stands for, and
 * the tool parts cleared, by stored position (a call id may repeat).
 */
export interface Compaction {
  readonly summarized: { readonly start: number; readonly end: number } | null
  /** Stored message index → part index → the call id the part must have. */
  readonly cleared: ReadonlyMap<number, ReadonlyMap<number, string>>
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

/** The compaction of a thread's state (nothing when it has no view slices). */
export const compactionOf = (state: unknown): Compaction => {
  const summaryView = isRecord(state) ? state.summaryView : undefined
  const clearedView = isRecord(state) ? state.clearedView : undefined
  const summarized = isRecord(summaryView) && typeof summaryView.start === "number" &&
      typeof summaryView.end === "number"
    ? { start: summaryView.start, end: summaryView.end }
    : null
  const cleared = new Map<number, Map<number, string>>()
  if (isRecord(clearedView) && Array.isArray(clearedView.groups)) {
    for (const group of clearedView.groups) {
      if (!isRecord(group) || !Array.isArray(group.parts)) continue
      for (const at of group.parts) {
        if (!isRecord(at) || typeof at.id !== "string" || typeof at.message !== "number") continue
        if (typeof at.part !== "number") continue
        let parts = cleared.get(at.message)
        if (parts === undefined) cleared.set(at.message, parts = new Map())
        parts.set(at.part, at.id)
      }
    }
  }
  return { summarized, cleared }
}

/**
 * A page of a thread's messages, encoded. With a compaction, a message the
 * model sees only as part of a summary carries `compaction: "summarized"`,
 * and one holding tool results the model sees cleared `cleared: [ids]`.
 */
export const messages = (
  all: ReadonlyArray<Prompt.Message>,
  offset: number,
  limit: number,
  compaction?: Compaction | undefined
): ReadonlyArray<unknown> => {
  const encoded = AgentState.encodeMessages(all.slice(offset, offset + limit))
  if (compaction === undefined || (compaction.summarized === null && compaction.cleared.size === 0)) return encoded
  const { cleared, summarized } = compaction
  return encoded.map((message, i) => {
    const index = offset + i
    const inSummary = summarized !== null && index >= summarized.start && index < summarized.end
    const source = all[index]!
    const parts = cleared.get(index)
    const ids = source.role === "tool" && parts !== undefined
      ? source.content.filter((part, i) => parts.get(i) === part.id).map((part) => part.id)
      : []
    return !inSummary && ids.length === 0 ? message : {
      ...message,
      ...(inSummary ? { compaction: "summarized" } : {}),
      ...(ids.length > 0 ? { cleared: ids } : {})
    }
  })
}
