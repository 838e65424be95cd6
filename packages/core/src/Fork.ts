/**
 * Forks of a thread: `agent.fork(threadId, { to, at, edit })` starts the
 * thread `to` from the conversation of `threadId` as it stood before its
 * model step `at`, with an optional edit, and continues it live. The source
 * thread is only read.
 *
 * @since 0.1.0
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { describeValue } from "./internal/options.js"
import * as ToolResult from "./internal/toolResult.js"
import type * as RunRecord from "./RunRecord.js"

/**
 * What a fork changes before it continues: a `Message` (the fork's run
 * takes it in as its input), a `ToolResult` (the result of the call `callId`
 * in the forked conversation is replaced), or a `Decision` (for a fork at the
 * step a waiting thread stopped at: it answers the fork's own wait). Without
 * an edit the fork calls the model again at step `at`; at the step a thread
 * waits at, the hook that waits asks again, for the fork (its wait is the
 * fork's own, with a request of its own).
 *
 * @example
 * ```ts
 * import type { Fork } from "@stepwise-agent/core"
 *
 * const edit: Fork.Edit = { _tag: "ToolResult", callId: "call_1", result: { temperature: 31 } }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Edit<D = unknown> =
  | { readonly _tag: "Message"; readonly message: Prompt.RawInput }
  | { readonly _tag: "ToolResult"; readonly callId: string; readonly result: unknown; readonly isFailure?: boolean }
  | { readonly _tag: "Decision"; readonly decision: D }

/**
 * The options of `agent.fork`: the new thread `to`, the model step `at` to
 * fork before (0 is the first reply of the thread; the number of replies the
 * thread has forks after the last one), and an optional {@link Edit}.
 *
 * @example
 * ```ts
 * import type { Fork } from "@stepwise-agent/core"
 *
 * const options: Fork.Options = { to: "t1-retry", at: 2, edit: { _tag: "Message", message: "Use metric units." } }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<D = unknown> {
  readonly to: string
  readonly at: number
  readonly edit?: Edit<D> | undefined
}

/**
 * A fork that cannot start, and nothing was written: the source thread has no
 * checkpoint (`NoSuchThread`), step `at` is not one of its steps
 * (`NoSuchStep`), the edited tool call is not in the forked conversation
 * (`NoSuchToolCall`), the edit's result cannot be kept as a tool result
 * (`InvalidToolResult`: nested past 128 levels, holding a `bigint` or a
 * cycle, or an `isFailure` that is not a boolean), the target thread already exists or is the source
 * (`ThreadExists`), a `Message` edit was given where the thread waits for a
 * decision (`Waiting`), or a `Decision` edit where it does not wait
 * (`NotWaiting`).
 *
 * @example
 * ```ts
 * import type { Fork } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * declare const forked: Effect.Effect<unknown, Fork.ForkError>
 * const why = Effect.catchTag(forked, "ForkError", (error) => Effect.succeed(error.reason))
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ForkError extends Schema.TaggedError<ForkError>("@stepwise-agent/core/ForkError")("ForkError", {
  reason: Schema.Literal(
    "NoSuchThread",
    "NoSuchStep",
    "NoSuchToolCall",
    "InvalidToolResult",
    "ThreadExists",
    "Waiting",
    "NotWaiting"
  ),
  threadId: Schema.String,
  detail: Schema.String
}) {
  get message(): string {
    return `cannot fork thread "${this.threadId}": ${this.detail}`
  }
}

/**
 * Whether a fork of `record` with `options` can start: `at` is one of its
 * model steps (0 to their number), a `ToolResult` edit names a call whose
 * result comes before step `at` and gives a result that can be kept (see
 * {@link ForkError}), and no `Decision` edit is given (a record
 * takes none: its recorded decisions are given again). The target thread is
 * not looked at: the fork checks it as it starts, under its lock.
 * `agent.fork(record, …)` and the durable fork of `@stepwise-agent/workflow`
 * check with it before they start anything.
 *
 * @example
 * ```ts
 * import { Fork } from "@stepwise-agent/core"
 * import type { RunRecord } from "@stepwise-agent/core"
 *
 * declare const record: RunRecord.RunRecord
 * const canFork = Fork.checkRecord(record, { to: "t1-retry", at: 9 }) // Left(ForkError NoSuchStep) for a shorter run
 * ```
 *
 * @since 0.1.0
 * @category validation
 */
export const checkRecord = (record: RunRecord.RunRecord, options: Options): Either.Either<void, ForkError> => {
  // from JavaScript, a value that is not a record has no steps to fork at
  if (
    !Predicate.hasProperty(record, "header") || !Predicate.hasProperty(record.header, "threadId") ||
    typeof record.header.threadId !== "string" || !Array.isArray(record.entries)
  ) {
    return Either.left(new ForkError({ reason: "NoSuchStep", threadId: "", detail: "the source is not a run record" }))
  }
  const fail = (reason: ForkError["reason"], detail: string) =>
    Either.left(new ForkError({ reason, threadId: record.header.threadId, detail }))
  // the recorded model steps, and the model step each tool call came after
  let models = 0
  const toolStep = new Map<string, number>()
  for (const entry of record.entries) {
    if (entry._tag !== "Step") continue
    if (entry.kind === "Model") models++
    else if (entry.kind === "Tool") toolStep.set(entry.name, models - 1)
  }
  const at = options.at
  if (!Number.isInteger(at) || at < 0 || at > models) {
    return fail("NoSuchStep", `the record has no step ${describeValue(at)}: its steps are 0 to ${models}`)
  }
  const edit = options.edit
  if (edit?._tag === "Decision") return fail("NotWaiting", "a fork of a recorded run takes no decision")
  if (edit?._tag === "ToolResult") {
    const problem = ToolResult.editProblem(edit)
    if (problem !== undefined) return fail("InvalidToolResult", problem)
    const step = toolStep.get(`tool/${edit.callId}`)
    if (step === undefined || step >= at) {
      return fail("NoSuchToolCall", `no result of the call "${edit.callId}" comes before step ${at}`)
    }
  }
  return Either.void
}
