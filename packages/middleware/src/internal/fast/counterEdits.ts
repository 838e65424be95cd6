/**
 * The edits that take their token counter as an argument: `ClearToolUses`
 * registers the function its `apply` runs once it has read the
 * `TokenCounter` service, so the middleware, which holds the counter, calls
 * it directly instead of providing the service around `apply` (a provide
 * copies the fiber's context and its table of refs, and undoes both after:
 * ~25 Effect operations at every model call). An edit without one (a
 * user's) gets the service provided, as before.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Effect from "effect/Effect"
import type { ContextEdit, EditContext, EditResult } from "../../ContextEditing.js"

/** An edit's `apply` with its counter given. */
export type ApplyWith = (
  counter: TokenCounter.Service,
  messages: ReadonlyArray<Prompt.Message>,
  context?: EditContext | undefined
) => Effect.Effect<EditResult>

const direct = new WeakMap<ContextEdit.Any, ApplyWith>()

/** Records that `edit`'s `apply` is `applyWith` run with the `TokenCounter` service; returns `edit`. */
export const register = <Edit extends ContextEdit.Any>(edit: Edit, applyWith: ApplyWith): Edit => {
  direct.set(edit, applyWith)
  return edit
}

/** `edit.apply(messages, context)` with `counter` as its `TokenCounter`. */
export const applyWith = <E, R>(
  edit: ContextEdit<E, R>,
  counter: TokenCounter.Service,
  messages: ReadonlyArray<Prompt.Message>,
  context?: EditContext | undefined
): Effect.Effect<EditResult, E, Exclude<R, TokenCounter.TokenCounter>> => {
  const own = direct.get(edit)
  return own !== undefined
    ? own(counter, messages, context)
    : Effect.provideService(edit.apply(messages, context), TokenCounter.TokenCounter, counter)
}
