/**
 * Where a durable run is, derived from what the engine polled, what the
 * thread waits for and the decision claimed for that wait. Pure: no storage
 * is read here.
 */
import type * as Workflow from "@effect/workflow/Workflow"
import { describeParseError } from "@stepwise-agent/core/AgentError"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Cause from "effect/Cause"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
// the values of AgentWorkflow.ts are read only inside functions: it imports this module (a cycle)
import {
  AgentRunFailed,
  JournalCorrupt,
  OtherError,
  type RunCancelled,
  type RunOutcome,
  type RunStatus
} from "../AgentWorkflow.js"
import type * as RunStore from "../RunStore.js"

/** A schema decoding failure, as itself or as its name once the engine has serialized it. */
export const isParseError = (defect: unknown): boolean =>
  ParseResult.isParseError(defect) || (defect instanceof Error && defect.name === "ParseError")

/**
 * A failed run's reason: its typed failure, or, for a defect, `JournalCorrupt`
 * when a stored result no longer decodes and an `AgentRunFailed` otherwise.
 */
const failureOf = (runId: string, cause: Cause.Cause<never>): AgentRunFailed | JournalCorrupt => {
  const defect = Cause.squash(cause)
  // A stored result that no longer decodes surfaces as a ParseError defect (as
  // itself, or as its name once the engine has serialized it).
  if (ParseResult.isParseError(defect)) {
    return new JournalCorrupt({ runId, reason: describeParseError(defect) })
  }
  return isParseError(defect)
    ? new JournalCorrupt({ runId, reason: Secrets.messageOf(defect) })
    : new AgentRunFailed({ error: new OtherError({ tag: "Defect" }), reason: Secrets.messageOf(defect) })
}

/**
 * Where a run is, read from what the engine polled, what its thread waits
 * for and the decision claimed for that wait: a run not ended that waits for
 * a decision nobody gave is `Waiting` (a decision on its way counts as given:
 * the run is about to go on), one not yet started or working is `Running`.
 */
export const stateOf = (
  runId: string,
  polled: Workflow.Result<RunOutcome, AgentRunFailed | RunCancelled> | undefined,
  pending: Option.Option<unknown>,
  claim: Option.Option<RunStore.ClaimedDecision>
): Pick<RunStatus, "state" | "failure"> & { readonly outcome: Option.Option<RunOutcome> } => {
  const none = { outcome: Option.none(), failure: Option.none() }
  if (polled === undefined) return { state: "Running", ...none }
  if (polled._tag !== "Complete") {
    return { state: Option.isSome(pending) && Option.isNone(claim) ? "Waiting" : "Running", ...none }
  }
  const exit = polled.exit
  if (Exit.isSuccess(exit)) return { state: "Completed", outcome: Option.some(exit.value), failure: Option.none() }
  if (Cause.isInterruptedOnly(exit.cause)) return { state: "Cancelled", ...none }
  return Either.match(Cause.failureOrCause(exit.cause), {
    onLeft: (failure) =>
      failure._tag === "RunCancelled"
        ? { state: "Cancelled", ...none }
        : { state: "Failed", outcome: Option.none(), failure: Option.some(failure) },
    onRight: (defect) => ({ state: "Failed", outcome: Option.none(), failure: Option.some(failureOf(runId, defect)) })
  })
}
