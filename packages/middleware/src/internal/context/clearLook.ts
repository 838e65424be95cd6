/**
 * How `ContextEditing.ClearToolUses` shows what it cleared: a tool result
 * replaced by the placeholder and, with `clearToolInputs`, its call's
 * arguments by `{}` (both marked, see `ContextView.clearedResult`), and the
 * messages holding them. Each edited object is made once per original
 * object, so the same input gives the same objects and a counter that caches
 * counts by identity counts them once (`fast/identityMemo.ts`).
 */
import * as Prompt from "@effect/ai/Prompt"
import * as ContextView from "../../ContextView.js"
import { identityMemo } from "../fast/identityMemo.js"

/** Where a tool part is stored: the message, and the part in it. */
export interface Position {
  readonly message: number
  readonly index: number
}

/** A tool result to clear, with its call (cleared too when `withCall`). */
export interface ToClear {
  readonly result: Position
  readonly call: Position
  readonly withCall: boolean
}

/** The last output of an edit: the first `k` results to clear cleared in the first `length` messages. */
export interface Output {
  readonly k: number
  readonly length: number
  readonly messages: ReadonlyArray<Prompt.Message>
  /** The indices of the parts cleared, per message. */
  readonly cleared: Map<number, Array<number>>
}

/** The cleared objects of one edit, made once per original object. */
export interface Look {
  readonly clearResult: (part: Prompt.ToolResultPart) => Prompt.ToolResultPart
  /** A tool result as a tool message of its own, as `keep: { tokens }` counts it. */
  readonly toolMessageOf: (part: Prompt.ToolResultPart) => Prompt.ToolMessage
  /** The message with the parts at `indices` (sorted) cleared; the message itself for none. */
  readonly variant: (message: Prompt.Message, indices: ReadonlyArray<number>) => Prompt.Message
  /**
   * The messages with the first `k` of `toClear` cleared, continuing from
   * `last` (the output of an earlier call on the same thread) when it cleared
   * no more of them.
   */
  readonly build: (
    messages: ReadonlyArray<Prompt.Message>,
    toClear: ReadonlyArray<ToClear>,
    k: number,
    last: Output | undefined
  ) => Output
}

/** The look of an edit whose cleared results say `placeholder`. */
export const make = (placeholder: string): Look => {
  const clearResult = identityMemo((part: Prompt.ToolResultPart) => ContextView.clearedResult(part, placeholder))
  const clearCall = identityMemo(ContextView.clearedCall)
  const toolMessageOf = identityMemo((part: Prompt.ToolResultPart) => Prompt.makeMessage("tool", { content: [part] }))
  // a message's cleared variants, by the indices of the parts cleared
  const variantsOf = identityMemo((_: Prompt.Message) => new Map<string, Prompt.Message>())

  const variant = (message: Prompt.Message, indices: ReadonlyArray<number>): Prompt.Message => {
    if (indices.length === 0 || (message.role !== "assistant" && message.role !== "tool")) return message
    const key = indices.join(",")
    const byKey = variantsOf(message)
    let edited = byKey.get(key)
    if (edited === undefined) {
      const content = message.content.map((part: Prompt.Part, index) => {
        if (!indices.includes(index)) return part
        return part.type === "tool-result" ? clearResult(part) : part.type === "tool-call" ? clearCall(part) : part
      })
      edited = Prompt.makeMessage(message.role, { content: content as any, options: message.options })
      byKey.set(key, edited)
    }
    return edited
  }

  const build: Look["build"] = (messages, toClear, k, last) => {
    const reuse = last !== undefined && last.k <= k
    const output = reuse ? last.messages.slice() : messages.slice()
    if (reuse) { for (let m = last.length; m < messages.length; m++) output.push(messages[m]!) }
    const cleared = reuse ? last.cleared : new Map<number, Array<number>>()
    const touched = new Set<number>()
    const clear = (message: number, index: number) => {
      const indices = cleared.get(message)
      if (indices === undefined) cleared.set(message, [index])
      else indices.push(index)
      touched.add(message)
    }
    for (let j = reuse ? last.k : 0; j < k; j++) {
      const entry = toClear[j]!
      clear(entry.result.message, entry.result.index)
      if (entry.withCall) clear(entry.call.message, entry.call.index)
    }
    for (const m of touched) output[m] = variant(messages[m]!, cleared.get(m)!.sort((a, b) => a - b))
    return { k, length: messages.length, messages: output, cleared }
  }

  return { clearResult, toolMessageOf, variant, build }
}
