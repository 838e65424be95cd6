/**
 * Context edits built from bad options (`ContextEditing.clearToolUses`): an
 * edit is a value, so it carries its `InvalidOptions` until a middleware
 * that is given the edit is built and fails `Agent.make` with it. Applied
 * outside a middleware, such an edit dies with the error.
 */
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Effect from "effect/Effect"

/** An edit that carries the error of its options, so a middleware given it finds the error in it. */
class FailedEdit {
  constructor(readonly name: string, readonly error: AgentError.InvalidOptions) {}
  readonly apply = () => Effect.die(this.error)
}

/** An edit named `name` that stands for options that failed with `error`. */
export const failedEdit = <Edit extends object>(
  name: string,
  error: AgentError.InvalidOptions
): Edit => new FailedEdit(name, error) as unknown as Edit

/** The options error of the first of `edits` built from bad options. */
export const failureOf = (edits: ReadonlyArray<object>): AgentError.InvalidOptions | undefined => {
  for (const edit of edits) {
    if (edit instanceof FailedEdit) return edit.error
  }
  return undefined
}
