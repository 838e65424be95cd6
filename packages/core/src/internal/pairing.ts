import * as Prompt from "@effect/ai/Prompt"
import * as Middleware from "../Middleware.js"
import * as Lineage from "./fast/lineage.js"

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
  if (cached !== undefined) return cached
  const start = pairedThreads.get(messages)
  if (start !== undefined && start.length === messages.length) return start.value.out ?? messages
  // with no paired thread to continue from, the thread `messages` was appended to is remembered as paired, so
  // that another thread appended to it (a later run on the same loaded thread) continues from there
  const base = start === undefined ? Lineage.origin(messages) : undefined
  let out: Array<Prompt.Message> | undefined = start?.value.out?.slice()
  /** Calls of the last assistant message still waiting for their result. */
  let open: Map<string, Prompt.ToolCallPart> | undefined
  /** Whether tool messages may follow: the message before was an assistant or tool message. */
  let inToolRun = start?.value.inToolRun ?? false
  /** Where `out` became a copy of `messages` (its messages before that are the thread's, but for the last). */
  let copiedAt = 0
  const copy = (i: number) => {
    copiedAt = i
    return messages.slice(0, i)
  }
  const close = (i: number) => {
    if (open === undefined || open.size === 0) return
    out ??= copy(i)
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
    open = undefined
  }
  for (let i = start?.length ?? 0; i < messages.length; i++) {
    if (i === base && (open === undefined || open.size === 0)) {
      pairedThreads.set(messages, { inToolRun, out: out?.slice() }, i)
    }
    const message = messages[i]!
    if (message.role !== "tool") {
      close(i)
      inToolRun = message.role === "assistant"
      if (message.role === "assistant") {
        for (const part of message.content) {
          if (part.type === "tool-call" && !part.providerExecuted) (open ??= new Map()).set(part.id, part)
        }
      }
      out?.push(message)
      continue
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
      out ??= copy(i)
      if (kept.length > 0) out.push(Prompt.makeMessage("tool", { content: kept, options: message.options }))
    }
  }
  // with no call waiting for its result, what was found holds for any thread that starts with these messages
  // (`out` is never changed once returned)
  if (open === undefined || open.size === 0) pairedThreads.set(messages, { inToolRun, out })
  close(messages.length)
  if (out === undefined) return messages
  // recorded as made from what it continues, so that what the model call does next with it (lifting files)
  // also reads only its new messages
  if (start?.value.out !== undefined) Lineage.derive(out, start.value.out, start.value.out.length)
  else Lineage.derive(out, messages, Math.max(0, copiedAt - 1))
  repaired.set(messages, out)
  return out
}

/** The paired copy of each thread that was not paired as it was. */
const repaired = new WeakMap<ReadonlyArray<Prompt.Message>, ReadonlyArray<Prompt.Message>>()

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
