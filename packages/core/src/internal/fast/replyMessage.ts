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
  // counted first, so that the content array is made at its size: an array grown by `push` from `[]` gets room
  // for 16 elements at the first push
  let kept = 0
  for (let i = 0; i < parts.length; i++) {
    switch (parts[i]!.type) {
      case "text":
      case "reasoning":
      case "tool-call": {
        kept++
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
  const content = sized<Prompt.AssistantMessagePart>(kept)
  let at = 0
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    switch (part.type) {
      case "text":
      case "reasoning": {
        content[at++] = Prompt.makePart(part.type, { text: part.text })
        break
      }
      case "tool-call": {
        content[at++] = Prompt.makePart("tool-call", {
          id: part.id,
          name: part.providerName ?? part.name,
          params: part.params,
          providerExecuted: part.providerExecuted ?? false
        })
        break
      }
    }
  }
  return Prompt.makeMessage("assistant", { content })
}

/**
 * The tool calls of `message` the agent runs (those the provider did not
 * execute), in their order, in an array made at its size.
 */
export const toolCallsOf = (message: Prompt.AssistantMessage): Array<Prompt.ToolCallPart> => {
  const content = message.content
  let count = 0
  for (let i = 0; i < content.length; i++) {
    const part = content[i]!
    if (part.type === "tool-call" && !part.providerExecuted) count++
  }
  const calls = sized<Prompt.ToolCallPart>(count)
  let at = 0
  for (let i = 0; i < content.length; i++) {
    const part = content[i]!
    if (part.type === "tool-call" && !part.providerExecuted) calls[at++] = part
  }
  return calls
}

/**
 * An array of `length` elements, to be filled at once by index (`new Array(length)`: its store holds exactly
 * `length`); an empty one is a literal, as `[]` would be.
 */
const sized = <A>(length: number): Array<A> => length === 0 ? [] : new Array<A>(length)
