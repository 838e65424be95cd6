import * as Prompt from "@effect/ai/Prompt"
import * as Middleware from "../Middleware.js"
import * as Lineage from "./lineage.js"

/**
 * The messages as the model may see them: every tool result answers a call
 * of the assistant message before it, and every such call has a result
 * before the next non-tool message. A result without its call (an orphan,
 * e.g. from input history) is dropped; a call without a result gets a failed
 * "not run" result. The stored thread is not changed: only the request is.
 * Paired messages come back as the same array, without copying; a thread
 * that extends one found paired before is checked from where that one ended.
 */
export const paired = (messages: ReadonlyArray<Prompt.Message>): ReadonlyArray<Prompt.Message> => {
  const cached = cache.get(messages)
  if (cached !== undefined) return cached
  const start = pairedPrefix(messages)
  // with no paired thread to continue from, the thread `messages` was appended to is remembered as paired if it
  // is, so that the next thread appended to it (a later run on a loaded thread) continues from there
  const base = start === undefined ? Lineage.appendedTo(messages) : undefined
  let out: Array<Prompt.Message> | undefined
  /** Calls of the last assistant message still waiting for their result. */
  let open: Map<string, Prompt.ToolCallPart> | undefined
  /** Whether tool messages may follow: the message before was an assistant or tool message. */
  let inToolRun = start?.inToolRun ?? false
  const close = (i: number) => {
    if (open === undefined || open.size === 0) return
    out ??= messages.slice(0, i)
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
  for (let i = start?.prefix.length ?? 0; i < messages.length; i++) {
    if (i === base?.length && out === undefined && (open === undefined || open.size === 0)) {
      pairedThreads.set(base, inToolRun)
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
      out ??= messages.slice(0, i)
      if (kept.length > 0) out.push(Prompt.makeMessage("tool", { content: kept, options: message.options }))
    }
  }
  close(messages.length)
  const result = out ?? messages
  cache.set(messages, result)
  if (result === messages) pairedThreads.set(messages, inToolRun)
  return result
}

const cache = new WeakMap<ReadonlyArray<Prompt.Message>, ReadonlyArray<Prompt.Message>>()

/** A thread found paired as it was, and whether a tool message could have followed it. */
interface PairedThread {
  readonly prefix: ReadonlyArray<Prompt.Message>
  readonly inToolRun: boolean
}

/**
 * The threads found paired as they were, each with whether a tool message
 * could follow it (its last message is an assistant or tool message). Keyed
 * by the array, weakly: an entry keeps nothing alive.
 */
const pairedThreads = new WeakMap<ReadonlyArray<Prompt.Message>, boolean>()

/** A thread found paired that `messages` extends (recorded in its lineage), and whether a tool message could follow it. */
const pairedPrefix = (messages: ReadonlyArray<Prompt.Message>): PairedThread | undefined => {
  const found = Lineage.findAncestor(messages, (ancestor) => pairedThreads.get(ancestor))
  return found !== undefined && found.shared === found.ancestor.length
    ? { prefix: found.ancestor, inToolRun: found.value }
    : undefined
}

const notRun = (call: Prompt.ToolCallPart): Prompt.ToolResultPart =>
  Middleware.toolResult(call, { error: "Not run: the call has no result in the conversation" }, { isFailure: true })
