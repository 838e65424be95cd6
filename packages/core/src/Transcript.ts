/**
 * A conversation as text, one line per message: for logs, debugging and
 * tests that compare transcripts. Tool calls show their arguments and id,
 * tool results their tool, id and value (`✗` when the call failed); long
 * values are shortened.
 *
 * ```text
 * 1. user: What is 2 + 3?
 * 2. assistant: Let me add. → add({"a":2,"b":3}) [call_1]
 * 3. tool: add [call_1] → 5
 * 4. assistant: 2 + 3 = 5.
 * ```
 *
 * @since 0.1.0
 */
import type * as Prompt from "@effect/ai/Prompt"

/**
 * Options of {@link format}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Longer texts, arguments and results are cut to this many characters, with `…` (default 200). */
  readonly maxLength?: number | undefined
  /** Number the lines from 1 (default `true`). */
  readonly numbered?: boolean | undefined
}

const shorten = (text: string, maxLength: number): string =>
  text.length <= maxLength ? text : `${text.slice(0, Math.max(0, maxLength - 1))}…`

const show = (value: unknown): string => typeof value === "string" ? value : JSON.stringify(value) ?? String(value)

const textOf = (parts: ReadonlyArray<{ readonly type: string }>): string =>
  parts.flatMap((part) => part.type === "text" ? [(part as Prompt.TextPart).text] : []).join("")

/**
 * One message as a line (without its number).
 *
 * @example
 * ```ts
 * import { Transcript } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 *
 * const line = Transcript.line(Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "Hi" })] }))
 * // "user: Hi"
 * ```
 *
 * @since 0.1.0
 * @category formatting
 */
export const line = (message: Prompt.Message, options?: Options): string => {
  const maxLength = options?.maxLength ?? 200
  switch (message.role) {
    case "system":
      return `system: ${shorten(message.content, maxLength)}`
    case "user":
      return `user: ${shorten(textOf(message.content), maxLength)}`
    case "assistant": {
      const said = shorten(textOf(message.content), maxLength)
      const calls = message.content.flatMap((part) =>
        part.type === "tool-call" ? [`${part.name}(${shorten(show(part.params), maxLength)}) [${part.id}]`] : []
      )
      return `assistant: ${
        [said, ...(calls.length > 0 ? [`→ ${calls.join(", ")}`] : [])].filter((s) => s !== "").join(" ")
      }`
    }
    case "tool":
      return `tool: ${
        message.content.map((part) =>
          `${part.name} [${part.id}] ${part.isFailure ? "✗" : "→"} ${shorten(show(part.result), maxLength)}`
        ).join("; ")
      }`
  }
}

/**
 * The conversation as text, one line per message.
 *
 * @example
 * ```ts
 * import { Agent, Transcript } from "@stepwise-agent/core"
 * import { Console, Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({})
 *   const result = yield* agent.run("Hello", { threadId: "t1" })
 *   yield* Console.log(Transcript.format(result.state.messages))
 * })
 * ```
 *
 * @since 0.1.0
 * @category formatting
 */
export const format = (messages: ReadonlyArray<Prompt.Message>, options?: Options): string =>
  messages.map((message, index) =>
    options?.numbered === false ? line(message, options) : `${index + 1}. ${line(message, options)}`
  ).join("\n")
