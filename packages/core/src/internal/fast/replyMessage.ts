/**
 * The assistant message of a reply whose parts are whole (a generated reply:
 * text, reasoning and tool calls, no streamed deltas, no tool results), built
 * directly with `Prompt.makeMessage` / `Prompt.makePart`: what
 * `Prompt.fromResponseParts(parts).content[0]` gives for such parts, without
 * the two maps of streamed blocks, the arrays of tool results and messages,
 * and the prompt it builds around the message (a model step's reply is
 * judged at every step).
 */
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"

/**
 * The assistant message of `parts`, when none of them needs
 * `Prompt.fromResponseParts` (a streamed block's part, a tool result);
 * `undefined` otherwise. Parts of other kinds (finish, metadata, …) are left
 * out, as `fromResponseParts` leaves them; no part gives an empty message.
 */
export const assistantMessage = (parts: ReadonlyArray<Response.AnyPart>): Prompt.AssistantMessage | undefined => {
  const content: Array<Prompt.AssistantMessagePart> = []
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    switch (part.type) {
      case "text":
      case "reasoning": {
        content.push(Prompt.makePart(part.type, { text: part.text }))
        break
      }
      case "tool-call": {
        content.push(Prompt.makePart("tool-call", {
          id: part.id,
          name: part.providerName ?? part.name,
          params: part.params,
          providerExecuted: part.providerExecuted ?? false
        }))
        break
      }
      case "text-start":
      case "text-delta":
      case "text-end":
      case "reasoning-start":
      case "reasoning-delta":
      case "reasoning-end":
      case "tool-result":
        return undefined
    }
  }
  return Prompt.makeMessage("assistant", { content })
}
