/**
 * Builders of `@effect/ai` `Prompt` messages and parts for tests: system,
 * user and assistant text, assistant tool calls and tool results.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"

/**
 * A system message with `text`.
 *
 * @example
 * ```ts
 * import { Messages } from "@stepwise-agent/testing"
 *
 * const message = Messages.system("Be brief.")
 * console.log(message.role, message.content)
 * ```
 * <!-- output: system Be brief. -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const system = (text: string): Prompt.SystemMessage => Prompt.makeMessage("system", { content: text })

/**
 * A user message with one text part.
 *
 * @example
 * ```ts
 * import { Messages } from "@stepwise-agent/testing"
 *
 * const message = Messages.user("Hello")
 * console.log(message.role, message.content.length)
 * ```
 * <!-- output: user 1 -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const user = (text: string): Prompt.UserMessage =>
  Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })

/**
 * An assistant message with one text part (a text reply).
 *
 * @example
 * ```ts
 * import { Messages } from "@stepwise-agent/testing"
 *
 * const message = Messages.assistant("Hi!")
 * console.log(message.role, message.content.length)
 * ```
 * <!-- output: assistant 1 -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const assistant = (text: string): Prompt.AssistantMessage =>
  Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text })] })

/**
 * A tool-call part (not executed by the provider).
 *
 * @example
 * ```ts
 * import { Messages } from "@stepwise-agent/testing"
 *
 * const part = Messages.toolCall("c1", "search", { query: "effect" })
 * console.log(part.type, part.id, part.name)
 * ```
 * <!-- output: tool-call c1 search -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolCall = (id: string, name: string, params: unknown = {}): Prompt.ToolCallPart =>
  Prompt.makePart("tool-call", { id, name, params, providerExecuted: false })

/**
 * A tool-result part (not executed by the provider); `isFailure` defaults to
 * `false`.
 *
 * @example
 * ```ts
 * import { Messages } from "@stepwise-agent/testing"
 *
 * const part = Messages.toolResult("c1", "search", "found", { isFailure: true })
 * console.log(part.type, part.id, part.isFailure)
 * ```
 * <!-- output: tool-result c1 true -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolResult = (
  id: string,
  name: string,
  value: unknown,
  options?: { readonly isFailure?: boolean | undefined }
): Prompt.ToolResultPart =>
  Prompt.makePart("tool-result", {
    id,
    name,
    result: value,
    isFailure: options?.isFailure ?? false,
    providerExecuted: false
  })

/**
 * An assistant message with one tool call.
 *
 * @example
 * ```ts
 * import { Messages } from "@stepwise-agent/testing"
 *
 * const message = Messages.call("c1", "search", { query: "effect" })
 * console.log(message.role, message.content[0]!.type)
 * ```
 * <!-- output: assistant tool-call -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const call = (id: string, name: string, params: unknown = {}): Prompt.AssistantMessage =>
  calls(toolCall(id, name, params))

/**
 * An assistant message with several tool calls (parallel calls).
 *
 * @example
 * ```ts
 * import { Messages } from "@stepwise-agent/testing"
 *
 * const message = Messages.calls(Messages.toolCall("c1", "search"), Messages.toolCall("c2", "search"))
 * console.log(message.content.length)
 * ```
 * <!-- output: 2 -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const calls = (...parts: ReadonlyArray<Prompt.ToolCallPart>): Prompt.AssistantMessage =>
  Prompt.makeMessage("assistant", { content: parts })

/**
 * A tool message with one result; `isFailure` defaults to `false`.
 *
 * @example
 * ```ts
 * import { Messages } from "@stepwise-agent/testing"
 *
 * const message = Messages.result("c1", "search", "found")
 * console.log(message.role, message.content[0]!.id)
 * ```
 * <!-- output: tool c1 -->
 *
 * @since 0.1.0
 * @category constructors
 */
export const result = (
  id: string,
  name: string,
  value: unknown,
  options?: { readonly isFailure?: boolean | undefined }
): Prompt.ToolMessage => Prompt.makeMessage("tool", { content: [toolResult(id, name, value, options)] })
