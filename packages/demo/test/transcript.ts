/**
 * A readable line per stored message, for the end-to-end tests' expectations.
 * `short` names tool calls without arguments and cuts string tool results to
 * 20 characters (others shown as `{…}`); `full` shows arguments and results as JSON.
 */
import type * as Prompt from "@effect/ai/Prompt"

export const transcript = (
  messages: ReadonlyArray<Prompt.Message>,
  detail: "short" | "full"
): ReadonlyArray<string> =>
  messages.map((message) => {
    switch (message.role) {
      case "system":
        return `system: ${message.content}`
      case "user":
        return `user: ${message.content.map((part) => part.type === "text" ? part.text : `[${part.type}]`).join("")}`
      case "assistant":
        return `assistant: ${
          message.content.map((part) =>
            part.type === "text"
              ? part.text
              : part.type === "tool-call"
              ? `call ${part.id} ${part.name}${detail === "full" ? `(${JSON.stringify(part.params)})` : ""}`
              : `[${part.type}]`
          ).join(" | ")
        }`
      case "tool":
        return `tool: ${
          message.content.map((part) => {
            const failed = part.isFailure ? " (failed)" : ""
            return detail === "full"
              ? `result ${part.id} ${part.name}${failed} ${JSON.stringify(part.result)}`
              : `${part.id}${failed} ${typeof part.result === "string" ? part.result.slice(0, 20) : "{…}"}`
          }).join(" | ")
        }`
    }
  })
