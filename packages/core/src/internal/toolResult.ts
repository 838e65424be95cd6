/**
 * The one place a tool result the agent keeps is made: a tool's success or
 * failure, a hook's or a guard's own answer, a timeout, a fork's edit. The
 * result kept is a snapshot of what JSON writes of it (`JsonValue.snapshot`:
 * plain data, read once, nested at most `JsonDepth.maxDepth` levels, at most
 * `JsonValue.maxValues` values, no `bigint`, no cycle, readable as JSON), and
 * that snapshot is scrubbed of credentials (`Secrets.scrubToolResult`, whose
 * walk of plain data reaches every string) before anything reads it: the hooks around,
 * the journal, the events, the stored thread, the next request. A result
 * that cannot be kept becomes a failed result naming the problem, which the
 * model reads like any other failure, so nothing downstream throws on it.
 */
import type * as Prompt from "@effect/ai/Prompt"
import { toolResult } from "../Middleware.js"
import * as Secrets from "../Secrets.js"
import * as JsonValue from "./jsonValue.js"

/**
 * What keeps `result` from being kept as a tool result (its snapshot is
 * refused), as a text naming it (`what` it is: `"the result"`), or
 * `undefined`.
 */
export const problem = (result: unknown, what = "the result"): string | undefined => {
  const taken = JsonValue.snapshot(result)
  return taken._tag === "Kept" ? undefined : JsonValue.describe(taken.problem, what)
}

/**
 * What is wrong with a fork's `ToolResult` edit, checked as a tool's result
 * is, or `undefined`: the fork fails with it, nothing written.
 */
export const editProblem = (
  edit: { readonly result: unknown; readonly isFailure?: unknown }
): string | undefined =>
  edit.isFailure !== undefined && typeof edit.isFailure !== "boolean"
    ? "the edit's isFailure is not a boolean"
    : problem(edit.result, "the edit's result")

/**
 * The part as the agent keeps it: its result's snapshot (what JSON writes
 * of it), scrubbed, or, when it cannot be kept, a failed result of the
 * same call naming the problem (none of the result kept). A result that is
 * a primitive is its own snapshot, and a part with nothing to change is
 * returned as it is.
 */
export const keep = (part: Prompt.ToolResultPart): Prompt.ToolResultPart => {
  const result = part.result
  // a string, a boolean and null are their own snapshot (a number may not be: -0 is written 0)
  if (typeof result === "string" || typeof result === "boolean" || result === null) {
    return Secrets.scrubToolResult(part)
  }
  const taken = JsonValue.snapshot(result)
  if (taken._tag === "Refused") {
    const found = JsonValue.describe(taken.problem, "the result")
    return { ...part, result: { error: `The result of "${part.name}" was not kept: ${found}` }, isFailure: true }
  }
  return Secrets.scrubToolResult(taken.value === result ? part : { ...part, result: taken.value })
}

/** The result of `call` as the agent keeps it ({@link keep}). */
export const make = (
  call: Prompt.ToolCallPart,
  result: unknown,
  options?: { readonly isFailure?: boolean | undefined }
): Prompt.ToolResultPart => keep(toolResult(call, result, options))
