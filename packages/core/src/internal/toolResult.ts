/**
 * The one place a tool result the agent keeps is made: a tool's success or
 * failure, a hook's or a guard's own answer, a timeout, a fork's edit. The
 * result is checked (`JsonValue`: nested at most `JsonDepth.maxDepth`
 * levels, no `bigint`, no cycle, readable as JSON) and scrubbed of credentials
 * (`Secrets.scrubToolResult`) before anything reads it: the hooks around,
 * the journal, the events, the stored thread, the next request. A result
 * that cannot be kept becomes a failed result naming the problem, which the
 * model reads like any other failure, so nothing downstream throws on it.
 */
import type * as Prompt from "@effect/ai/Prompt"
import { toolResult } from "../Middleware.js"
import * as Secrets from "../Secrets.js"
import * as JsonValue from "./jsonValue.js"

/**
 * What keeps `result` from being kept as a tool result (its failure if
 * `isFailure`), as a text naming it (`what` it is: `"the result"`), or
 * `undefined`. A failure is checked through every field its scrub copies.
 */
export const problem = (result: unknown, isFailure: boolean, what = "the result"): string | undefined => {
  const found = JsonValue.problemOf(result, { everyProperty: isFailure })
  return found === undefined ? undefined : JsonValue.describe(found, what)
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
    : problem(edit.result, edit.isFailure === true, "the edit's result")

/**
 * The part as the agent keeps it: its result checked and scrubbed, or,
 * when it cannot be kept, a failed result of the same call naming the
 * problem (none of the result kept).
 */
export const keep = (part: Prompt.ToolResultPart): Prompt.ToolResultPart => {
  const found = problem(part.result, part.isFailure)
  if (found === undefined) return Secrets.scrubToolResult(part)
  return { ...part, result: { error: `The result of "${part.name}" was not kept: ${found}` }, isFailure: true }
}

/** The result of `call` as the agent keeps it ({@link keep}). */
export const make = (
  call: Prompt.ToolCallPart,
  result: unknown,
  options?: { readonly isFailure?: boolean | undefined }
): Prompt.ToolResultPart => keep(toolResult(call, result, options))
