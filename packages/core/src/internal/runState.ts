/**
 * A run's progress as data: the thread's messages, the middleware slices, the
 * step count, the token usage, the structured output and the tools the last
 * model call offered. Every change is a pure transition returning the next
 * state; the driver in `loop.ts` holds the one current value.
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Option from "effect/Option"
import * as AgentState from "../AgentState.js"
import type * as Checkpointer from "../Checkpointer.js"
import type * as Middleware from "../Middleware.js"
import type * as RunJournal from "../RunJournal.js"
import * as Usage from "../Usage.js"
import * as Lineage from "./lineage.js"
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
}

/** The state a run starts from: a loaded thread, and the progress of the run it resumes. */
export const make = (
  messages: ReadonlyArray<Prompt.Message>,
  slices: Readonly<Record<string, object>>,
  progress: Checkpointer.Checkpoint["run"]
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
  repairRounds: 0
})

/** The state with the thread's messages replaced. */
export const withMessages = (state: RunState, messages: ReadonlyArray<Prompt.Message>): RunState =>
  messages === state.messages ? state : { ...state, messages }

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
  result: Middleware.HookResult<object>
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
      slices: update === undefined ? state.slices : {
        ...state.slices,
        [middleware]: { ...state.slices[middleware], ...update }
      }
    },
    keys
  }
}

/**
 * The model's reply stored: appended to the thread (with room for the tool
 * results, see {@link appendToolResultsToUnseen}), its usage added, the step
 * counted.
 */
/** The state with a reply counted toward `maxToolCallRepairs`: one holding an invalid call adds one, any other resets. */
export const countRepair = (state: RunState, invalid: boolean): RunState =>
  invalid
    ? { ...state, repairRounds: state.repairRounds + 1 }
    : state.repairRounds === 0
    ? state
    : { ...state, repairRounds: 0 }

export const appendReply = (state: RunState, reply: RunJournal.ModelCall): RunState => ({
  ...state,
  messages: Lineage.appendWithRoom(state.messages, [reply.message]),
  usage: Tokens.add(state.usage, reply.usage),
  step: state.step + 1,
  offered: reply.offered
})

/** The tool results stored after their calls, and the structured output if a call gave it. */
export const appendToolResults = (
  state: RunState,
  results: ReadonlyArray<Prompt.ToolResultPart>,
  output: Option.Option<unknown>
): RunState => ({
  ...state,
  messages: AgentState.appendToolResults(state.messages, results),
  output: Option.isSome(output) ? output : state.output
})

/**
 * {@link appendToolResults} on a thread whose array only the loop has seen
 * since the model's reply was appended to it (no hook ran, no `wrapToolCall`
 * hook will see the tool step's state): the results extend that array in
 * place instead of copying the thread once more.
 */
export const appendToolResultsToUnseen = (
  state: RunState,
  results: ReadonlyArray<Prompt.ToolResultPart>,
  output: Option.Option<unknown>
): RunState => {
  const last = state.messages[state.messages.length - 1]
  return results.length === 0 || last === undefined || last.role === "tool"
    ? appendToolResults(state, results, output)
    : {
      ...state,
      messages: Lineage.extendUnseen(state.messages, [Prompt.makeMessage("tool", { content: results })]),
      output: Option.isSome(output) ? output : state.output
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
