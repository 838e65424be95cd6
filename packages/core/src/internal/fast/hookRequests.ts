/**
 * Fewer objects per node hook call (`internal/nodes.ts`): a middleware
 * without state sees one frozen empty slice, not a new `{}` per call, and a
 * hook gets the request the hook before it got when it would get the same
 * fields (the same slice, no decision), not a copy of it: ten middleware
 * without state make one request per node, not ten.
 */
import type * as Option from "effect/Option"
import type * as Middleware from "../../Middleware.js"

/** The state slice a hook of a middleware without state sees (frozen: no hook can write into another's). */
export const emptySlice: object = Object.freeze({})

/**
 * Whether a hook that would get `slice` and `resume` can get `previous`, the
 * request the hook before it got in the same pass over the same state.
 */
export const reusable = (
  previous: Middleware.HookContext<object, unknown> | undefined,
  slice: object,
  resume: Option.Option<unknown>
): previous is Middleware.HookContext<object, unknown> =>
  previous !== undefined && previous.state === slice && previous.resume === resume
