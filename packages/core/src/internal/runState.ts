/**
 * A run as data: the thread's messages, the middleware slices, the step
 * count, the token usage, the structured output, the tools the last model
 * call offered, the answer to a wait the next hook takes, the reply waiting to
 * be reported, the counters that bound a run, and what its next save expects
 * the store to hold. Every change is a pure
 * transition returning the next state; the driver (`driver.ts`) holds the one
 * current value.
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Option from "effect/Option"
import * as AgentState from "../AgentState.js"
import type * as Checkpointer from "../Checkpointer.js"
import type * as Middleware from "../Middleware.js"
import type * as RunJournal from "../RunJournal.js"
import * as Usage from "../Usage.js"
import * as Lineage from "./fast/lineage.js"
import type { Facts } from "./machine.js"
import * as Tokens from "./tokens.js"
import { lastAssistantCallsTools } from "./tools.js"

export interface RunState {
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly slices: Readonly<Record<string, object>>
  /** Model calls made so far (the number of the next one). */
  readonly step: number
  /** Tokens summed over the model calls so far (a `Usage` only in a result: see `usageOf`). */
  readonly usage: Tokens.Tokens
  readonly output: Option.Option<unknown>
  /** The tools the model call whose reply runs now offered; unknown (all) after a resume. */
  readonly offered: ReadonlyArray<string> | undefined
  /** Model replies in a row with a call the agent answers as invalid (bounded by `maxToolCallRepairs`). */
  readonly repairRounds: number
  /** Jumps to the tools with no call to run (each counts toward `maxSteps` like a model call). */
  readonly idleToolRounds: number
  /** The answer to a wait, for the first hook the next hook node runs (the hook that waited). */
  readonly resume: Option.Option<unknown>
  /** The last model reply, reported (`ModelResponded`) once the `afterModel` hooks stored it; only while watched. */
  readonly replied: Replied | undefined
  /**
   * The messages array while only the run holds it: the run made it, and
   * handed it to no hook, journal or caller, only to views that know its
   * length then (a model call's prompt, a deferred save: see
   * `fast/prefixViews.ts`, `checkpoint.ts`). The next reply and tool
   * results are appended to it in place (see {@link appendReply}),
   * instead of copying the thread at every step; `undefined` once anything
   * else may hold it.
   */
  readonly unseen: ReadonlyArray<Prompt.Message> | undefined
  /**
   * What the run's next save expects the store to hold (`Checkpointer.SaveOptions`): the thread its load found
   * (`"absent"` for a new thread, else the loaded incarnation) until its first save, then its own incarnation
   * ({@link saved}). A save finding another thread (deleted, or made again) writes nothing and fails the run.
   */
  readonly expected: Checkpointer.Expected
}

/** A model reply as `ModelResponded` reports it: where it is stored, and the call's facts. */
export interface Replied {
  /** The index of the reply in the thread. */
  readonly index: number
  readonly step: number
  readonly reply: RunJournal.ModelCall
  readonly durationMillis: number
}

/**
 * The state a run starts from: a loaded thread, the progress of the run it
 * resumes, and what its first save expects the store to hold.
 */
export const make = (
  messages: ReadonlyArray<Prompt.Message>,
  slices: Readonly<Record<string, object>>,
  progress: Checkpointer.Checkpoint["run"],
  expected: Checkpointer.Expected
): RunState => ({
  messages,
  slices,
  step: progress?.step ?? 0,
  usage: {
    inputTokens: progress?.inputTokens ?? 0,
    outputTokens: progress?.outputTokens ?? 0,
    totalTokens: progress?.totalTokens ?? 0
  },
  output: Option.none(),
  offered: undefined,
  repairRounds: 0,
  idleToolRounds: 0,
  resume: Option.none(),
  replied: undefined,
  unseen: undefined,
  expected
})

/** The state with the answer to a wait, for the hook that waited. */
export const withResume = (state: RunState, value: Option.Option<unknown>): RunState => ({ ...state, resume: value })

/** The state with the answer taken by the hook it was for. */
export const resumeTaken = (state: RunState): RunState =>
  Option.isNone(state.resume) ? state : { ...state, resume: Option.none() }

/** The state once a hook may hold its messages array: nothing is appended to it in place any more. */
export const seen = (state: RunState): RunState => state.unseen === undefined ? state : { ...state, unseen: undefined }

/** The state with the reply to report (`undefined`: reported). */
export const withReplied = (state: RunState, replied: Replied | undefined): RunState =>
  replied === state.replied ? state : { ...state, replied }

/** The state with one more jump to the tools that had nothing to run. */
export const countIdleToolRound = (state: RunState): RunState => ({
  ...state,
  idleToolRounds: state.idleToolRounds + 1
})

/**
 * The state once a save of the run took its place in the journal (run or
 * replayed, so a durable run replaying its journal expects what it expected
 * when it first ran): the store holds the run's own incarnation.
 */
export const saved = (state: RunState, incarnation: string | undefined): RunState =>
  state.expected !== "absent" && state.expected.incarnation === incarnation
    ? state
    : { ...state, expected: { incarnation } }

/** The state with the thread's messages replaced (by an array others may hold: it is not `unseen`). */
export const withMessages = (state: RunState, messages: ReadonlyArray<Prompt.Message>): RunState =>
  messages === state.messages ? state : { ...state, messages, unseen: undefined }

/**
 * A hook's result applied: its messages replace the thread's, and its state
 * update goes into the slice of `middleware`, keeping only the keys the
 * slice declares (`declared`; a middleware without a slice keeps none).
 * Gives the keys that were updated.
 */
export const applyHookResult = (
  state: RunState,
  middleware: string,
  declared: ReadonlySet<string> | undefined,
  result: Middleware.HookResult<object, Middleware.Jump, unknown>
): { readonly state: RunState; readonly keys: ReadonlyArray<string> } => {
  const keys: Array<string> = []
  let update: Record<string, unknown> | undefined
  if (result.state !== undefined && declared !== undefined) {
    for (const key of Object.keys(result.state)) {
      if (!declared.has(key)) continue
      keys.push(key)
      ;(update ??= {})[key] = (result.state as Record<string, unknown>)[key]
    }
  }
  if (update === undefined && result.messages === undefined) return { state, keys }
  return {
    state: {
      ...state,
      messages: result.messages ?? state.messages,
      unseen: result.messages === undefined ? state.unseen : undefined,
      slices: update === undefined ? state.slices : {
        ...state.slices,
        [middleware]: { ...state.slices[middleware], ...update }
      }
    },
    keys
  }
}

/** The state with a reply counted toward `maxToolCallRepairs`: one holding an invalid call adds one, any other resets. */
export const countRepair = (state: RunState, invalid: boolean): RunState =>
  invalid
    ? { ...state, repairRounds: state.repairRounds + 1 }
    : state.repairRounds === 0
    ? state
    : { ...state, repairRounds: 0 }

/**
 * The model's reply stored: appended to the thread, its usage added, the
 * step counted. `inPlace`: the model call handed the messages array to
 * nobody (no `wrapModelCall` hook, no journal but the in-process one), so an
 * `unseen` array grows in place; any other is copied once (with room for the
 * tool results, see {@link appendToolResults}). The new array is `unseen`
 * until a hook may hold it.
 */
export const appendReply = (state: RunState, reply: RunJournal.ModelCall, inPlace: boolean): RunState => {
  const messages = inPlace && state.unseen === state.messages
    ? Lineage.extendUnseen(state.messages, [reply.message])
    : Lineage.appendWithRoom(state.messages, [reply.message])
  return {
    ...state,
    messages,
    usage: Tokens.add(state.usage, reply.usage),
    step: state.step + 1,
    offered: reply.offered,
    unseen: messages
  }
}

/**
 * The tool results stored after their calls, and the structured output if a
 * call gave it. On a thread still `unseen` (no hook ran since the reply was
 * appended, no `wrapToolCall` hook saw the tool step's state), the results
 * extend that array in place instead of copying the thread once more; the
 * thread stays `unseen` for the next reply.
 */
export const appendToolResults = (
  state: RunState,
  results: ReadonlyArray<Prompt.ToolResultPart>,
  output: Option.Option<unknown>
): RunState => {
  const last = state.messages[state.messages.length - 1]
  const inPlace = state.unseen === state.messages && results.length > 0 && last !== undefined &&
    last.role !== "tool"
  const messages = inPlace
    ? Lineage.extendUnseen(state.messages, [Prompt.makeMessage("tool", { content: results })])
    : AgentState.appendToolResults(state.messages, results)
  return {
    ...state,
    messages,
    output: Option.isSome(output) ? output : state.output,
    // an array made here is held by nobody else yet
    unseen: messages === state.messages ? state.unseen : messages
  }
}

/** Every call still without a result answered as not run, for `reason`. */
export const answerPending = (state: RunState, reason: string): RunState =>
  withMessages(state, AgentState.answerPending(state.messages, reason))

/**
 * The run's usage as a result reports it. Summed as plain numbers step by
 * step (a `Usage` is a Schema class, ~50 times dearer to make), it becomes a
 * `Usage` once, when the run ends or waits.
 */
export const usageOf = (state: RunState): Usage.Usage => new Usage.Usage(state.usage, true)

/** What the phase machine routes on. */
export const factsOf = (state: RunState): Facts => ({
  callsTools: lastAssistantCallsTools(state.messages),
  hasOutput: Option.isSome(state.output)
})
