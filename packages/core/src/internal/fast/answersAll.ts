/**
 * Whether a tool message answers every call of the assistant message before
 * it, exactly and in order: the common case of `pairing.ts`, checked
 * without the table of open calls the general rule keeps (a `Map` made per
 * model call otherwise). See the README's row.
 */
import type * as Prompt from "@effect/ai/Prompt"

/** The most calls {@link answersAll} compares without a table (it checks their ids distinct pair by pair). */
const fewCalls = 8

/**
 * Whether `results` answers every call of `assistant` and nothing else: a
 * result per call, in the calls' order, their ids distinct; then the tool
 * message is kept as it is and no call is left waiting, what the table of
 * open calls would find, without making it. Past {@link fewCalls} calls (or
 * any other tool message) the caller's table decides.
 *
 * @example
 * ```ts
 * // [call a, call b] then [result a, result b]: true; [result b, result a]: false (the table decides)
 * answersAll(assistant, tool)
 * ```
 *
 * @since 0.1.0
 */
export const answersAll = (assistant: Prompt.AssistantMessage, results: Prompt.ToolMessage): boolean => {
  const content = results.content
  if (content.length > fewCalls) return false
  const calls = assistant.content
  let n = 0
  for (let i = 0; i < calls.length; i++) {
    const part = calls[i]!
    if (part.type !== "tool-call" || part.providerExecuted) continue
    if (n >= content.length || content[n]!.id !== part.id) return false
    for (let k = 0; k < n; k++) if (content[k]!.id === part.id) return false
    n++
  }
  return n === content.length
}
