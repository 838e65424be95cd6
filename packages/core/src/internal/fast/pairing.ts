import * as Prompt from "@effect/ai/Prompt"
import * as Middleware from "../../Middleware.js"
import { answersAll } from "./answersAll.js"
import * as Lineage from "./lineage.js"

/**
 * The messages as the model may see them: every tool result answers a call
 * of the assistant message before it, and every such call has a result
 * before the next non-tool message. A result without its call (an orphan,
 * e.g. from input history) is dropped; a call without a result gets a failed
 * "not run" result. The stored thread is not changed: only the request is.
 * Paired messages come back as the same array, without copying; a thread
 * that extends one paired before (found paired or repaired) is checked from
 * where that one ended.
 */
export const paired = (messages: ReadonlyArray<Prompt.Message>): ReadonlyArray<Prompt.Message> => {
  const cached = repaired.get(messages)
  if (cached !== undefined && cached.length === messages.length) return cached.out
  const start = pairedThreads.get(messages)
  if (start !== undefined && start.length === messages.length) return start.value.out ?? messages
  // with no paired thread to continue from, the thread `messages` was appended to is remembered as paired, so
  // that another thread appended to it (a later run on the same loaded thread) continues from there
  const base = start === undefined ? Lineage.origin(messages) : undefined
  let out: Array<Prompt.Message> | undefined = start?.value.out?.slice()
  /**
   * The last assistant message while its calls still wait for their results and were not yet put in `open`
   * (most are answered all at once by the tool message that follows: `answersAll`).
   */
  let waiting: Prompt.AssistantMessage | undefined
  /** Calls of the last assistant message still waiting for their result. */
  let open: Map<string, Prompt.ToolCallPart> | undefined
  /** Whether tool messages may follow: the message before was an assistant or tool message. */
  let inToolRun = start?.value.inToolRun ?? false
  /** Where `out` became a copy of `messages` (its messages before that are the thread's, but for the last). */
  let copiedAt = 0
  for (let i = start?.length ?? 0; i < messages.length; i++) {
    if (i === base && waiting === undefined && (open === undefined || open.size === 0)) {
      pairedThreads.set(messages, { inToolRun, out: out?.slice() }, i)
    }
    const message = messages[i]!
    if (message.role !== "tool") {
      // the calls still waiting get a failed result before the next message
      if (waiting !== undefined) open = openCalls(waiting)
      waiting = undefined
      if (open !== undefined && open.size > 0) {
        if (out === undefined) {
          copiedAt = i
          out = messages.slice(0, i)
        }
        closeCalls(out, open)
      }
      open = undefined
      inToolRun = message.role === "assistant"
      if (message.role === "assistant" && callsTools(message)) waiting = message
      out?.push(message)
      continue
    }
    if (waiting !== undefined) {
      const answered = answersAll(waiting, message)
      open = answered ? undefined : openCalls(waiting)
      waiting = undefined
      if (answered) {
        out?.push(message)
        continue
      }
    }
    let kept: Array<Prompt.ToolResultPart> | undefined
    const content = message.content
    for (let j = 0; j < content.length; j++) {
      const part = content[j]!
      if (inToolRun && open?.delete(part.id) === true) kept?.push(part)
      else kept ??= content.slice(0, j)
    }
    if (kept === undefined) {
      out?.push(message)
    } else {
      if (out === undefined) {
        copiedAt = i
        out = messages.slice(0, i)
      }
      if (kept.length > 0) out.push(Prompt.makeMessage("tool", { content: kept, options: message.options }))
    }
  }
  if (waiting === undefined && (open === undefined || open.size === 0)) {
    // with no call waiting for its result, what was found holds for any thread that starts with these messages
    // (`out` is never changed once returned)
    pairedThreads.set(messages, { inToolRun, out })
  } else {
    // the calls still waiting get a failed result at the end
    if (waiting !== undefined) open = openCalls(waiting)
    if (open !== undefined && open.size > 0) {
      if (out === undefined) {
        copiedAt = messages.length
        out = messages.slice()
      }
      closeCalls(out, open)
    }
  }
  if (out === undefined) return messages
  // recorded as made from what it continues, so that what the model call does next with it (lifting files)
  // also reads only its new messages
  if (start?.value.out !== undefined) Lineage.derive(out, start.value.out, start.value.out.length)
  else Lineage.derive(out, messages, Math.max(0, copiedAt - 1))
  repaired.set(messages, { length: messages.length, out })
  return out
}

/** Whether `message` holds a call the agent answers (one the provider did not execute). */
const callsTools = (message: Prompt.AssistantMessage): boolean => {
  const content = message.content
  for (let i = 0; i < content.length; i++) {
    const part = content[i]!
    if (part.type === "tool-call" && !part.providerExecuted) return true
  }
  return false
}

/** The calls of `message` waiting for their result, by id (a later call of the same id replaces the first). */
const openCalls = (message: Prompt.AssistantMessage): Map<string, Prompt.ToolCallPart> => {
  const open = new Map<string, Prompt.ToolCallPart>()
  for (const part of message.content) {
    if (part.type === "tool-call" && !part.providerExecuted) open.set(part.id, part)
  }
  return open
}

/** The calls of `open` answered with a failed "not run" result, in `out`'s last tool message or a new one. */
const closeCalls = (out: Array<Prompt.Message>, open: Map<string, Prompt.ToolCallPart>): void => {
  const results = Array.from(open.values(), notRun)
  const last = out[out.length - 1]
  if (last !== undefined && last.role === "tool") {
    out[out.length - 1] = Prompt.makeMessage("tool", {
      content: [...last.content, ...results],
      options: last.options
    })
  } else {
    out.push(Prompt.makeMessage("tool", { content: results }))
  }
}

/**
 * The paired copy of each thread that was not paired as it was, at the
 * length it had then (the run may have grown it in place since: see
 * `RunState.unseen`).
 */
const repaired = new WeakMap<
  ReadonlyArray<Prompt.Message>,
  { readonly length: number; readonly out: ReadonlyArray<Prompt.Message> }
>()

/**
 * How far threads were paired, with no call waiting for its result there:
 * whether a tool message could follow (the last message is an assistant or
 * tool message), and the paired copy of those messages when they needed
 * repairs (`undefined`: they are paired as they are). A thread that starts
 * with such a prefix is checked from where it ends.
 */
const pairedThreads = new Lineage.PrefixMemo<{
  readonly inToolRun: boolean
  readonly out: ReadonlyArray<Prompt.Message> | undefined
}>()

const notRun = (call: Prompt.ToolCallPart): Prompt.ToolResultPart =>
  Middleware.toolResult(call, { error: "Not run: the call has no result in the conversation" }, { isFailure: true })
