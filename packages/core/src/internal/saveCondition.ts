/**
 * The rule of a conditional save (`Checkpointer.SaveOptions`): whether a save
 * may replace the thread a store holds, and the error that says why not and
 * what was not saved. Every bundled store checks it in the step that writes.
 */
import * as Option from "effect/Option"
import { CheckpointError } from "../AgentError.js"
import type * as Checkpointer from "../Checkpointer.js"

/** `Checkpointer.checkExpected`, synchronously: the error, or `undefined` when the save may write. */
export const conflictOf = (
  threadId: string,
  saved: Pick<Checkpointer.DeferredCheckpoint, "checkpoint" | "length">,
  stored: Option.Option<{ readonly incarnation?: string | undefined }>,
  options: Checkpointer.SaveOptions | undefined
): CheckpointError | undefined => {
  const expected = options?.expected
  if (expected === undefined) return undefined
  if (!isExpected(expected)) {
    return new CheckpointError({
      threadId,
      operation: "save",
      reason: `options.expected must be "absent" or { incarnation: string | undefined }; got ${describe(expected)}`
    })
  }
  if (Option.isNone(stored)) {
    return expected === "absent"
      ? undefined
      : conflict(threadId, saved, expected, Option.none())
  }
  const own = saved.checkpoint.incarnation
  const found = stored.value.incarnation
  const admitted = (own !== undefined && found === own) ||
    (expected !== "absent" && (found === undefined || found === expected.incarnation))
  return admitted ? undefined : conflict(threadId, saved, expected, Option.some(found))
}

/** Whether `expected` (from JavaScript: of any type) is a `Checkpointer.Expected`. */
const isExpected = (expected: unknown): expected is Checkpointer.Expected =>
  expected === "absent" ||
  (typeof expected === "object" && expected !== null && !Array.isArray(expected) &&
    (typeof (expected as { readonly incarnation?: unknown }).incarnation === "string" ||
      (expected as { readonly incarnation?: unknown }).incarnation === undefined))

/** `value` in an error: its type, and a short text of a string (an expectation holds no secret, but may be long). */
const describe = (value: unknown): string =>
  typeof value === "string"
    ? `the string ${JSON.stringify(value.slice(0, 40))}`
    : Array.isArray(value)
    ? "an array"
    : typeof value

/** The error of a conditional save that found `found` (none: no thread) where it expected `expected`. */
const conflict = (
  threadId: string,
  saved: Pick<Checkpointer.DeferredCheckpoint, "checkpoint" | "length">,
  expected: Checkpointer.Expected,
  found: Option.Option<string | undefined>
): CheckpointError => {
  const loaded = expected === "absent"
    ? "the run's thread was new"
    : `the run loaded incarnation ${expected.incarnation ?? "(none)"}`
  const lost = `nothing was written: this checkpoint of the run (${saved.length} messages` +
    `${saved.checkpoint.pending === undefined ? "" : ", and the wait it stopped at"}) was not saved`
  return Option.isNone(found)
    ? new CheckpointError({
      threadId,
      operation: "save",
      conflict: "ThreadDeleted",
      reason: `the thread was deleted while the run ran (${loaded}; no thread is stored now): ${lost}`
    })
    : new CheckpointError({
      threadId,
      operation: "save",
      conflict: "Superseded",
      reason: `another incarnation of the thread is stored (${loaded}; incarnation ${
        found.value ?? "(none)"
      } is stored now: the thread was deleted and made again, or made by another run at once): ${lost}`
    })
}
