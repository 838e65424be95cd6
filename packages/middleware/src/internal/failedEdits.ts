/**
 * Context edits built from bad options (`ContextEditing.clearToolUses`): an
 * edit is a value, so the `InvalidOptions` waits here, keyed by the edit,
 * until a middleware that is given the edit is built and fails `Agent.make`
 * with it. Applied outside a middleware, such an edit dies with the error.
 */
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Effect from "effect/Effect"

const failed = new WeakMap<object, AgentError.InvalidOptions>()

/** An edit named `name` that stands for options that failed with `error`. */
export const failedEdit = <Edit extends object>(
  name: string,
  error: AgentError.InvalidOptions
): Edit => {
  const edit = { name, apply: () => Effect.die(error) }
  failed.set(edit, error)
  return edit as unknown as Edit
}

/** The options error of the first of `edits` built from bad options. */
export const failureOf = (edits: ReadonlyArray<object>): AgentError.InvalidOptions | undefined => {
  for (const edit of edits) {
    const error = failed.get(edit)
    if (error !== undefined) return error
  }
  return undefined
}
