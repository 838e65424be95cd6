/**
 * `AgentWorkflow.fork`: a new durable run on a new thread that replays a
 * record up to a model step and goes on live on the engine. What it forks
 * travels in the run's payload (the record as JSONL, the step, the edit), so
 * the body reads the same on every execution; the steps before `at` are
 * served from it, the fork's own through the durable journal
 * (`agent.fork(record, …)` under it). Everything that can be checked before
 * is, and nothing starts when a check fails.
 */
import * as Prompt from "@effect/ai/Prompt"
import type * as Workflow from "@effect/workflow/Workflow"
import * as Agent from "@stepwise-agent/core/Agent"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as Fork from "@stepwise-agent/core/Fork"
import * as RunRecord from "@stepwise-agent/core/RunRecord"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
// the values of AgentWorkflow.ts are read only inside functions: it imports this module (a cycle)
import { type ForkOptions, type ForkPayload, type Payload, RunIdTaken } from "../AgentWorkflow.js"
import * as RunStore from "../RunStore.js"

/** The fork a payload describes, as `agent.fork` takes it. */
export const forkOf = (fork: typeof ForkPayload.Type, to: string) =>
  Effect.map(RunRecord.fromJsonl(fork.record), (record) => ({
    record,
    options: {
      to,
      at: fork.at,
      edit: fork.edit === undefined
        ? undefined
        : fork.edit._tag === "Message"
        ? { _tag: "Message" as const, message: Prompt.fromMessages(fork.edit.messages) }
        : fork.edit
    } satisfies Fork.Options<never>
  }))

/** What a fork's record says it forked (`RunRecord.Header.forkedFrom`); nothing for a run that is no fork. */
export const forkedFrom = (fork: typeof ForkPayload.Type | undefined): RunRecord.Header["forkedFrom"] =>
  fork?.from === undefined ? undefined : { ...fork.from, at: fork.at }

/** The messages of a `Message` edit; none, or input that is no prompt, is `InvalidInput` (the run checks the rest). */
const messagesOf = (input: Prompt.RawInput) =>
  Effect.try({
    try: () => Prompt.make(input).content,
    catch: () => new AgentError.InvalidInput({ reason: "the fork's message is not a prompt" })
  }).pipe(
    Effect.filterOrFail(
      (messages) => messages.length > 0,
      () => new AgentError.InvalidInput({ reason: "the fork's message holds no message" })
    )
  )

/**
 * An edited tool result as the payload stores it: scrubbed as the fork's
 * thread will keep it (`Fork.checkRecord` has refused a result that is not
 * JSON data), so the engine's storage holds no credential the thread would not.
 */
const keptResult = (result: unknown, isFailure: boolean) => Secrets.scrubToolResult({ result, isFailure })

/**
 * Checks the fork of `record` (of the run `sourceRunId`, when forked by its
 * id) with `options` and starts its run (`runId`) on the engine. A retried
 * fork, whose run `runId` of the thread `to` is registered and its thread
 * written, gives the run's id again.
 */
export const startFork = (
  workflow: Workflow.Workflow<string, typeof Payload, any, any>,
  name: string,
  ownsThread: boolean,
  { options, record, runId, sourceRunId }: {
    readonly record: RunRecord.RunRecord
    readonly options: ForkOptions
    readonly runId: string
    readonly sourceRunId: string | undefined
  }
) =>
  Effect.gen(function*() {
    yield* RunRecord.checkVersion(record)
    yield* Fork.checkRecord(record, options)
    const agent = yield* Agent.Agent
    const store = yield* RunStore.RunStore
    const to = options.to
    // a retried fork (the same run id, to the same thread) that started gives its run again
    const earlier = yield* Effect.option(store.get(runId))
    if (Option.isSome(earlier) && earlier.value.threadId !== to) {
      return yield* new RunIdTaken({ runId, threadId: earlier.value.threadId })
    }
    // a thread id that is not one fails with InvalidInput here; the run checks again under the thread's lock
    const existing = yield* agent.thread(to)
    if (Option.isSome(existing) && Option.isSome(earlier)) return runId
    if (Option.isSome(existing)) {
      return yield* new Fork.ForkError({
        reason: "ThreadExists",
        threadId: record.header.threadId,
        detail: `the thread "${to}" already exists`
      })
    }
    const edit = options.edit
    const message = edit?._tag === "Message" ? yield* messagesOf(edit.message) : undefined
    const payload: typeof Payload.Type = {
      runId,
      threadId: to,
      input: [],
      fork: {
        record: RunRecord.toJsonl(record),
        from: { threadId: record.header.threadId, ...(sourceRunId === undefined ? {} : { runId: sourceRunId }) },
        at: options.at,
        edit: message !== undefined
          ? { _tag: "Message", messages: message }
          : edit?._tag === "ToolResult"
          ? { _tag: "ToolResult", callId: edit.callId, ...keptResult(edit.result, edit.isFailure ?? false) }
          : undefined
      }
    }
    const executionId = yield* workflow.executionId(payload)
    const registered = yield* store.register({
      runId,
      threadId: to,
      executionId,
      workflow: name,
      ownsThread
    })
    if (registered.threadId !== to) return yield* new RunIdTaken({ runId, threadId: registered.threadId })
    yield* workflow.execute(payload, { discard: true })
    return runId
  })
