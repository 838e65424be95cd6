/**
 * `Agent.fork`: the conversation of a stored thread before one of its model
 * steps, edited, saved as a new thread, which then runs live (with the
 * edit's message as input, resumed with its decision, or as it is). The
 * source thread is only read.
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import { InvalidInput } from "../AgentError.js"
import type * as AgentResult from "../AgentResult.js"
import * as AgentState from "../AgentState.js"
import type * as Checkpointer from "../Checkpointer.js"
import * as Fork from "../Fork.js"
import type * as RunRecord from "../RunRecord.js"
import * as Checkpoint from "./checkpoint.js"
import { checkThreadId } from "./input.js"
import { describeValue } from "./options.js"
import type * as Replay from "./replay.js"
import * as ToolResult from "./toolResult.js"

type Run = Effect.Effect<AgentResult.AgentResult<any>, unknown, any>

export interface Deps {
  readonly checkpointer: Checkpointer.Service
  /** The message of an edit, checked as a run's input. */
  readonly checkMessage: (input: Prompt.RawInput) => Effect.Effect<ReadonlyArray<Prompt.Message>, unknown>
  /** Runs the agent on a record from its model step `at` on, live, on thread `threadId` (a replay's fork). */
  readonly replay: (record: RunRecord.RunRecord, live: Replay.Live & { readonly threadId: string }) => Run
  readonly load: (threadId: string) => Effect.Effect<Checkpoint.Loaded, unknown>
  readonly start: (input: Prompt.RawInput, threadId: string) => Run
  readonly resume: (threadId: string, decision: unknown) => Run
  /** Checks a decision for the wait of `threadId` as `resume` does, running nothing. */
  readonly validateResume: (threadId: string, decision: unknown) => Effect.Effect<unknown, unknown, any>
  readonly proceed: (threadId: string) => Run
  /** Runs `threadId` from the hook `at` names, with no decision (the hook asks again), counting on from `progress`. */
  readonly reenter: (
    threadId: string,
    at: Checkpointer.PendingInterrupt,
    progress: Checkpointer.Checkpoint["run"]
  ) => Run
  /** Checks a decision against the decision schema of the wait `at` names, without a request. */
  readonly checkDecisionSchema: (
    threadId: string,
    at: Checkpointer.PendingInterrupt,
    decision: unknown
  ) => Effect.Effect<unknown, unknown, any>
  /** Runs `effect` holding the lock of `threadId` (no run of it starts meanwhile). */
  readonly locked: <A, E, R>(threadId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/**
 * The messages with the result of call `callId` replaced, kept as a tool's
 * result is (checked first: `ToolResult.editProblem`, and scrubbed);
 * `undefined` when no message holds it.
 */
const withToolResult = (
  messages: ReadonlyArray<Prompt.Message>,
  edit: Extract<Fork.Edit, { readonly _tag: "ToolResult" }>
): ReadonlyArray<Prompt.Message> | undefined => {
  let found = false
  const edited = messages.map((message) => {
    if (message.role !== "tool" || !message.content.some((part) => part.id === edit.callId)) return message
    found = true
    return Prompt.makeMessage("tool", {
      content: message.content.map((part) =>
        part.id !== edit.callId ? part : ToolResult.keep(Prompt.makePart("tool-result", {
          id: part.id,
          name: part.name,
          result: edit.result,
          isFailure: edit.isFailure ?? false,
          providerExecuted: part.providerExecuted
        }))
      )
    })
  })
  return found ? edited : undefined
}

/**
 * A fork of a recorded run: served up to step `at`, live from there, on the
 * new thread. The target is checked as the fork's run loads it, under its
 * lock (the replay's load): of two forks to one thread, the second finds it.
 */
const fromRecord = (deps: Deps, record: RunRecord.RunRecord, options: Fork.Options): Run =>
  Effect.gen(function*() {
    const to = yield* checkThreadId(options.to)
    yield* Fork.checkRecord(record, options)
    const edit = options.edit
    const message = edit?._tag === "Message" ? yield* deps.checkMessage(edit.message) : undefined
    return yield* deps.replay(record, {
      at: options.at,
      threadId: to,
      message,
      toolResult: edit?._tag === "ToolResult"
        ? { callId: edit.callId, result: edit.result, isFailure: edit.isFailure ?? false }
        : undefined
    })
  })

export const fork = (deps: Deps, source: string | RunRecord.RunRecord, options: Fork.Options): Run =>
  // from JavaScript: options that are not an object, or a source that is neither a thread id nor a record
  !Predicate.isObject(options)
    ? Effect.fail(new InvalidInput({ reason: `the fork's options must be an object, got ${describeValue(options)}` }))
    : typeof source !== "string" && !Predicate.isObject(source)
    ? Effect.fail(
      new InvalidInput({
        reason: `the fork's source must be a thread id or a run record, got ${describeValue(source)}`
      })
    )
    : Effect.suspend(() => {
      // a typo (`edits`) would fork without the edit
      const unknown = Object.keys(options).find((key) => !forkOptionKeys.includes(key))
      return unknown === undefined ? forkOf(deps, source, options) : Effect.fail(
        new InvalidInput({
          reason: `the fork's options have the unknown key ${JSON.stringify(unknown)}; expected "to" | "at" | "edit"`
        })
      )
    })

const forkOptionKeys: ReadonlyArray<string> = ["to", "at", "edit"]

const forkOf = (deps: Deps, source: string | RunRecord.RunRecord, options: Fork.Options): Run =>
  typeof source !== "string" ? fromRecord(deps, source, options) : Effect.gen(function*() {
    const from = yield* checkThreadId(source)
    const to = yield* checkThreadId(options.to)
    const fail = (reason: Fork.ForkError["reason"], detail: string) =>
      Effect.fail(new Fork.ForkError({ reason, threadId: from, detail }))
    if (to === from) return yield* fail("ThreadExists", "the fork must go to a new thread, not the source")
    const loaded = yield* deps.load(from)
    if (Option.isNone(loaded.checkpoint)) return yield* fail("NoSuchThread", "it has no checkpoint")
    // the model steps of the thread are its assistant replies, in order
    const replies: Array<number> = []
    loaded.messages.forEach((message, index) => message.role === "assistant" && replies.push(index))
    const at = options.at
    if (!Number.isInteger(at) || at < 0 || at > replies.length) {
      return yield* fail("NoSuchStep", `it has no step ${describeValue(at)}: its steps are 0 to ${replies.length}`)
    }
    let messages = at === replies.length ? loaded.messages : loaded.messages.slice(0, replies[at])
    const edit = options.edit
    if (edit?._tag === "ToolResult") {
      const problem = ToolResult.editProblem(edit)
      if (problem !== undefined) return yield* fail("InvalidToolResult", problem)
      const edited = withToolResult(messages, edit)
      if (edited === undefined) {
        return yield* fail("NoSuchToolCall", `no result of the call "${edit.callId}" comes before step ${at}`)
      }
      messages = edited
    }
    // a fork at the step the thread waits at does not take the source's wait (a wait may be bound to its
    // thread): it enters the hook that waits again, which asks again for the fork, and a decision answers that
    // a fork is a thread of its own, stored under an incarnation of its own: a run of a thread deleted before
    // the fork took its id finds another incarnation and does not write over it
    const { incarnation: _incarnation, pending, run, ...stored } = loaded.checkpoint.value
    const wait = at === replies.length ? pending : undefined
    if (wait !== undefined && edit?._tag === "Message") {
      return yield* fail("Waiting", `it waits for a decision at step ${at}: fork there without a message`)
    }
    if (wait === undefined && edit?._tag === "Decision") {
      return yield* fail("NotWaiting", `it does not wait for a decision at step ${at}`)
    }
    // the edit's message, or its decision's shape, is checked before anything is written (their runs check them
    // again: the decision against the fork's own wait)
    if (edit?._tag === "Message") yield* deps.checkMessage(edit.message)
    if (wait !== undefined && edit?._tag === "Decision") yield* deps.checkDecisionSchema(from, wait, edit.decision)
    // the target is checked and written under its lock: of two forks to one thread, the second finds it
    yield* deps.locked(
      to,
      Effect.flatMap(
        deps.checkpointer.load(to),
        (existing): Effect.Effect<unknown, unknown, any> =>
          Option.isSome(existing)
            ? Effect.asVoid(fail("ThreadExists", `the thread "${to}" already exists`))
            : Effect.flatMap(Checkpoint.newIncarnation, (incarnation) =>
              deps.checkpointer.save(
                to,
                { ...stored, threadId: to, messages: AgentState.encodeMessages(messages), incarnation },
                // another process may make the thread meanwhile: the fork does not write over it
                { expected: "absent" }
              ))
      )
    )
    if (edit?._tag === "Message") return yield* deps.start(edit.message, to)
    if (wait === undefined) return yield* deps.proceed(to)
    const asked = yield* deps.reenter(to, wait, run)
    if (edit?._tag !== "Decision" || asked._tag !== "Interrupted") return asked
    // the decision answers the fork's own wait; one it refuses takes the fork back
    yield* Effect.tapError(deps.validateResume(to, edit.decision), () => deps.checkpointer.delete(to))
    return yield* deps.resume(to, edit.decision)
  })
