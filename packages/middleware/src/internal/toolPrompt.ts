/**
 * The `wrapModelCall` of a middleware that brings tools and a system prompt
 * about them (`TodoList`, `Filesystem`): the prompt is appended, after a
 * blank line, to the request's system prompt on every model call that
 * offers the tool.
 */
import type * as Middleware from "@stepwise-agent/core/Middleware"

/** Appends `prompt` to the system prompt of the model calls that offer the tool `toolName`. */
export const appendWhenOffered = (toolName: string, prompt: string) =>
(
  request: Middleware.ModelRequest,
  next: Middleware.NextModelCall
): ReturnType<Middleware.NextModelCall> =>
  next(
    request.tools.some((t) => t.name === toolName)
      ? {
        ...request,
        systemPrompt: request.systemPrompt === undefined || request.systemPrompt === ""
          ? prompt
          : `${request.systemPrompt}\n\n${prompt}`
      }
      : request
  )
