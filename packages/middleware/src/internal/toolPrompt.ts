/**
 * Adding to a model call's system prompt: a paragraph appended after a blank
 * line (`appendToSystemPrompt`), and the `wrapModelCall` of a middleware that
 * brings tools and a system prompt about them (`TodoList`, `Filesystem`),
 * which appends it on every model call that offers the tool.
 */
import type * as Middleware from "@stepwise-agent/core/Middleware"

/** `request` with `text` appended, after a blank line, to its system prompt (or as it, when it has none). */
export const appendToSystemPrompt = (request: Middleware.ModelRequest, text: string): Middleware.ModelRequest => ({
  ...request,
  systemPrompt: request.systemPrompt === undefined || request.systemPrompt === ""
    ? text
    : `${request.systemPrompt}\n\n${text}`
})

/** Appends `prompt` to the system prompt of the model calls that offer the tool `toolName`. */
export const appendWhenOffered = (toolName: string, prompt: string) =>
(
  request: Middleware.ModelRequest,
  next: Middleware.NextModelCall
): ReturnType<Middleware.NextModelCall> =>
  next(request.tools.some((t) => t.name === toolName) ? appendToSystemPrompt(request, prompt) : request)
