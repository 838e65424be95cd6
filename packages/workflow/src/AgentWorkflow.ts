/**
 * Durable agent runs: the same agent (model, toolkit, middleware, system
 * prompt) run as an `@effect/workflow` workflow, so a run survives a crash,
 * waits days for an approval, and moves between processes.
 *
 * Each step the loop names (`RunJournal.StepKey`: the thread's load, each
 * model call, each tool call) is an `Activity` named
 * `RunJournal.stepName(key)`, whose result is journaled. A checkpoint's save
 * runs inside the next activity that executes, first; only before a wait and
 * at the end of the run is it an activity of its own. Each wait for a
 * decision (an approval) is a `DurableDeferred` named after the interrupt
 * key, optionally raced against a durable clock. Code between those — the
 * node hooks — runs again on replay; it only reads the journaled state, so it
 * decides the same way.
 *
 * The engine is a Layer (`AgentEngine`): in memory for tests, SQLite on one
 * machine, PostgreSQL for several runners.
 *
 * @since 0.1.0
 */
import * as AiError from "@effect/ai/AiError"
import * as Prompt from "@effect/ai/Prompt"
import type { PersistenceError } from "@effect/cluster/ClusterError"
import type * as Workflow from "@effect/workflow/Workflow"
import type * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import type * as Agent from "@stepwise-agent/core/Agent"
import * as AgentError from "@stepwise-agent/core/AgentError"
import type * as Fork from "@stepwise-agent/core/Fork"
import type * as RunRecord from "@stepwise-agent/core/RunRecord"
import * as Usage from "@stepwise-agent/core/Usage"
import type * as Wait from "@stepwise-agent/core/Wait"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import type * as Authorizer from "./Authorizer.js"
import { renamedKinds, renamedReason } from "./internal/renamedReason.js"
import * as internal from "./internal/workflow.js"
import type * as RecordStore from "./RecordStore.js"
import type * as RunStore from "./RunStore.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * What a durable fork ({@link AgentWorkflow.fork}) runs: the source record
 * (JSONL), what it is the record of (`from`: its thread, and its run when
 * forked by run id), the model step it forks before and its edit (a message
 * taken in, or a tool result replaced).
 *
 * @example
 * ```ts
 * import { AgentWorkflow } from "@stepwise-agent/workflow"
 * import { Schema } from "effect"
 *
 * const isFork = Schema.is(AgentWorkflow.ForkPayload)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const ForkPayload = Schema.Struct({
  record: Schema.String,
  /** The thread of the record forked, and its run when forked by its run id (for the fork's own record). */
  from: Schema.optional(Schema.Struct({ threadId: Schema.String, runId: Schema.optional(Schema.String) })),
  at: Schema.Number,
  edit: Schema.optional(Schema.Union(
    Schema.TaggedStruct("Message", { messages: Schema.Array(Prompt.Message) }),
    Schema.TaggedStruct("ToolResult", { callId: Schema.String, result: Schema.Unknown, isFailure: Schema.Boolean })
  ))
})

/**
 * The workflow's payload: the run id (its idempotency key), the thread it
 * continues, and the user messages it starts with; for a durable fork, what
 * it forks (`fork`) and no messages.
 *
 * @since 0.1.0
 * @category models
 */
export const Payload = Schema.Struct({
  runId: Schema.String,
  threadId: Schema.String,
  input: Schema.Array(Prompt.Message),
  fork: Schema.optional(ForkPayload)
})

/**
 * What a finished run gives, as its journal keeps it: the last assistant
 * text, the number of model calls, the token usage and, for an agent with a
 * `responseFormat`, the structured output encoded by it (`output`, absent in
 * journals of earlier versions). The messages are in the thread's
 * checkpoint. `status` gives it typed, as an {@link Outcome}.
 *
 * @since 0.1.0
 * @category models
 */
export const RunOutcome = Schema.Struct({
  text: Schema.String,
  steps: Schema.Number,
  usage: Usage.Usage,
  output: Schema.optional(Schema.Unknown)
})

/**
 * @since 0.1.0
 * @category models
 */
export type RunOutcome = typeof RunOutcome.Type

/**
 * What a completed run gave, typed like the `Completed` result of
 * `agent.run`: the last assistant text, the number of model calls, the
 * token usage and the structured output `O` (decoded with the agent's
 * `responseFormat`; `None` without one).
 *
 * @example
 * ```ts
 * import type { AgentWorkflow } from "@stepwise-agent/workflow"
 * import { Option } from "effect"
 *
 * const summary = (outcome: AgentWorkflow.Outcome<{ readonly answer: string }>) =>
 *   Option.match(outcome.output, { onNone: () => outcome.text, onSome: (output) => output.answer })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Outcome<O = unknown> {
  readonly text: string
  readonly steps: number
  readonly usage: Usage.Usage
  readonly output: Option.Option<O>
}

/**
 * A decision as journaled: the value handed to the interrupting hook, as
 * its wait's decision schema encodes it (JSON), who decided, and when.
 * {@link DecisionOf} reads the same stored form with the value decoded.
 *
 * @since 0.1.0
 * @category models
 */
export const Decision = Schema.Struct({
  // `Unknown`: the value encoded, read where the wait is not known (a claim in the RunStore); `DecisionOf` decodes it
  value: Schema.Unknown,
  by: Schema.String,
  decidedAt: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export type Decision = typeof Decision.Type

/**
 * A decision as journaled ({@link Decision}), its value decoded with the
 * wait's decision schema `value`: what a durable wait takes.
 *
 * @example
 * ```ts
 * import { AgentWorkflow } from "@stepwise-agent/workflow"
 * import { Schema } from "effect"
 *
 * const decode = Schema.decodeUnknown(AgentWorkflow.DecisionOf(Schema.Boolean))
 * // decode({ value: true, by: "ana", decidedAt: 1 }): { value: true, by: "ana", decidedAt: 1 }
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const DecisionOf = <A, I>(value: Schema.Schema<A, I>) =>
  Schema.Struct({ value, by: Schema.String, decidedAt: Schema.Number })

/**
 * Where a run is.
 *
 * - `Running`: working (or queued on a runner).
 * - `Waiting`: suspended until a decision arrives (`pending` says for what).
 * - `Completed`, `Failed`, `Cancelled`: done.
 *
 * @since 0.1.0
 * @category models
 */
export type RunState = "Running" | "Waiting" | "Completed" | "Failed" | "Cancelled"

/**
 * A run as `status` reports it, typed by the agent `A` the workflow was
 * made for (see {@link make}): its waits, its state and its structured
 * output.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunStatus<A extends AnyAgent = Agent.Service> {
  readonly runId: string
  readonly threadId: string
  readonly executionId: string
  readonly state: RunState
  /**
   * What the run waits for, while `Waiting`: the middleware and its request,
   * decoded with its wait's schema (typed by the agent's waits).
   */
  readonly pending: Option.Option<Wait.Interrupt<WaitsOf<A>>>
  /** The thread as last checkpointed (durable; live text is not). */
  readonly messages: ReadonlyArray<Prompt.Message>
  /** The thread's state as last checkpointed (its messages and its middleware's slices); `None` before the first. */
  readonly threadState: Option.Option<StateOf<A>>
  /** What the run gave, once `Completed`. */
  readonly outcome: Option.Option<Outcome<OutputOf<A>>>
  /** Why it failed, when `Failed`: the run's error, or an unreadable journal entry. */
  readonly failure: Option.Option<AgentRunFailed | JournalCorrupt>
}

/**
 * What {@link AgentWorkflow.send} did with a message, stored by then:
 *
 * - `"started"`: no run owned the thread's messages, so a run with the
 *   message as its input started (`runId`);
 * - `"stored"`: the run `runId` owns them (it runs, or waits for a
 *   decision): a steer message joins it before its next model step (or,
 *   if it ends first, the input of the run after it), a queued one is the
 *   input of a run of its own after it.
 *
 * @since 0.1.0
 * @category models
 */
export interface SendReceipt {
  readonly threadId: string
  readonly mode: "steer" | "queue"
  /** The message's place in send order, unique in the `RunStore`. */
  readonly sequence: number
  readonly delivery: "started" | "stored"
  /** The run that takes the message in, or that owns the thread's messages now. */
  readonly runId: Option.Option<string>
  /**
   * Whether an earlier send stored this message under the same
   * `idempotencyKey`: nothing was stored again, and `sequence` is the
   * earlier one's.
   */
  readonly duplicate: boolean
}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * An error a run failed with that is not one of the agent's own: a
 * middleware's, a tool's or the model provider's (`tag` is its `_tag`), or
 * a defect (`tag: "Defect"`). Only its tag is journaled: an error of another
 * package may hold what must not be stored. Its message, with credentials
 * scrubbed, is the failure's `reason`.
 *
 * @example
 * ```ts
 * import { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * const failed = new AgentWorkflow.AgentRunFailed({
 *   error: new AgentWorkflow.OtherError({ tag: "HttpResponseError" }),
 *   reason: "the provider answered 503"
 * })
 * failed.message // "The agent run failed with HttpResponseError: the provider answered 503"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class OtherError extends Schema.TaggedError<OtherError>(
  "@stepwise-agent/workflow/AgentWorkflow/OtherError"
)("OtherError", { tag: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The run failed with ${this.tag}`
  }
}

/**
 * What a run failed with, as its journal keeps it: one of the agent's own
 * errors (every `AgentError`, and `ToolTimeout`), typed and whole, or any
 * other (a middleware's, the model provider's `AiError`) as an
 * {@link OtherError} that keeps its tag.
 *
 * @example
 * ```ts
 * import { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * const describe = (error: AgentWorkflow.RunError) =>
 *   error._tag === "MaxStepsExceeded" ? `stopped after ${error.maxSteps} steps` : error.message
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunError = Schema.Union(
  AgentError.MaxStepsExceeded,
  AgentError.InvalidJump,
  AgentError.ToolDefect,
  AgentError.CheckpointError,
  AgentError.ThreadStateError,
  AgentError.DurableThreadError,
  AgentError.StructuredOutputError,
  AgentError.InvalidInput,
  AgentError.ModelReplyError,
  AgentError.EmptyModelResponse,
  AgentError.ToolTimeout,
  AgentError.InvalidToolCalls,
  AgentError.AgentClosed,
  AgentError.InvalidHookResult,
  AgentError.InvalidResume,
  OtherError
)

/**
 * @since 0.1.0
 * @category models
 */
export type RunError = typeof RunError.Type

/**
 * The agent's errors as journals of an earlier version kept them, with their
 * free text under `description` or `problem` (now `reason`), or a reason
 * kind spelled in lower case (`"not-a-stream"`, now `"NotAStream"`).
 */
const RunErrorBefore = Schema.Union(
  renamedReason(AgentError.ToolDefect, "description"),
  renamedReason(AgentError.CheckpointError, "description"),
  renamedReason(AgentError.StructuredOutputError, "description"),
  renamedReason(AgentError.InvalidInput, "description"),
  renamedReason(AgentError.InvalidToolCalls, "problem"),
  renamedKinds(AgentError.ModelReplyError, { truncated: "Truncated", "not-a-stream": "NotAStream", empty: "Empty" })
)

/** A run's error as journals of an earlier version kept it, by its tag alone. */
const TagOnly = Schema.transform(Schema.String, Schema.typeSchema(OtherError), {
  strict: true,
  decode: (tag) => new OtherError({ tag }),
  encode: (error) => error.tag
})

/**
 * A run failed: a model or tool call failed for good, or a middleware failed.
 * The thread keeps everything stored up to its last checkpoint.
 *
 * @since 0.1.0
 * @category errors
 */
export class AgentRunFailed extends Schema.TaggedError<AgentRunFailed>(
  "@stepwise-agent/workflow/AgentWorkflow/AgentRunFailed"
)("AgentRunFailed", {
  /** What the run failed with (a journal of an earlier version kept only its tag: an `OtherError`). */
  error: Schema.Union(RunError, RunErrorBefore, TagOnly),
  /** The error's message, with credentials scrubbed. */
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The agent run failed with ${
      this.error._tag === "OtherError" ? this.error.tag : this.error._tag
    }: ${this.reason}`
  }
}

/**
 * A run stopped because `cancel` asked it to: a working run fails with it
 * before its next model call (`status` reports it `Cancelled`).
 *
 * @example
 * ```ts
 * import { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * const stopped = new AgentWorkflow.RunCancelled({ runId: "run-1" })
 * stopped.message // "Run \"run-1\" was cancelled"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class RunCancelled extends Schema.TaggedError<RunCancelled>(
  "@stepwise-agent/workflow/AgentWorkflow/RunCancelled"
)("RunCancelled", { runId: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Run "${this.runId}" was cancelled`
  }
}

/**
 * A cancellation as journals of an earlier version kept it: an
 * `AgentRunFailed` with the error `"Cancelled"`. It decodes as the
 * `RunCancelled` it was (its run id was not kept: empty).
 */
const CancelledBefore = Schema.transform(
  Schema.Struct({
    _tag: Schema.Literal("AgentRunFailed"),
    error: Schema.Literal("Cancelled"),
    description: Schema.Literal("the run was cancelled")
  }),
  Schema.typeSchema(RunCancelled),
  {
    strict: true,
    decode: () => new RunCancelled({ runId: "" }),
    encode: () => ({ _tag: "AgentRunFailed", error: "Cancelled", description: "the run was cancelled" } as const)
  }
)

/**
 * How a run's workflow can fail: a failure of the run, or its cancellation.
 * Failures journaled by earlier versions decode too.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunFailure = Schema.Union(
  RunCancelled,
  CancelledBefore,
  AgentRunFailed,
  renamedReason(AgentRunFailed, "description")
)

/**
 * A decision arrived for a run that is not waiting for it (it runs, it
 * finished, or it waits for another key).
 *
 * @since 0.1.0
 * @category errors
 */
export class NotWaiting extends Schema.TaggedError<NotWaiting>(
  "@stepwise-agent/workflow/AgentWorkflow/NotWaiting"
)("NotWaiting", { runId: Schema.String, reason: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Run "${this.runId}" is not waiting for this decision: ${this.reason}`
  }
}

/**
 * `prune` was asked to remove a run that is still running or waiting.
 *
 * @since 0.1.0
 * @category errors
 */
export class RunNotEnded extends Schema.TaggedError<RunNotEnded>(
  "@stepwise-agent/workflow/AgentWorkflow/RunNotEnded"
)("RunNotEnded", { runId: Schema.String, state: Schema.Literal("Running", "Waiting") }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Run "${this.runId}" is ${this.state}: cancel it or let it end before pruning it`
  }
}

/**
 * `start` was given a run id that names a run of another thread.
 *
 * @since 0.1.0
 * @category errors
 */
export class RunIdTaken extends Schema.TaggedError<RunIdTaken>(
  "@stepwise-agent/workflow/AgentWorkflow/RunIdTaken"
)("RunIdTaken", { runId: Schema.String, threadId: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The run id "${this.runId}" is already a run of thread "${this.threadId}"`
  }
}

/**
 * What a refused decision can fail with, as {@link InvalidDecision} carries
 * it: what `agent.validateResume` fails with when the thread waits (the
 * waiting middleware's wait refused it: `AgentError.InvalidResume` for its
 * schema, its `check`'s own error, e.g. a `HumanInTheLoop.DecisionError`;
 * or an error of the agent's, `E` its middleware's), or the `ParseError` of
 * a decision whose encoded form is not JSON.
 *
 * @example
 * ```ts
 * import type { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * const why = (error: AgentWorkflow.DecisionFailure) =>
 *   error._tag === "InvalidResume" ? error.reason : error.message
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type DecisionFailure<E = never> =
  | Exclude<Agent.RunError<E>, AgentError.ThreadStateError | AgentError.CheckpointError>
  | ParseResult.ParseError

/**
 * The schema of {@link InvalidDecision}'s `error`: the agent's own errors
 * (`AgentError.AgentError`) and the provider's (`AiError.AiError`) decode
 * into their classes; any other (a middleware's own, a `ParseError`) is
 * kept as it is.
 */
const DecisionFailureSchema = Schema.Union(AgentError.AgentError, AiError.AiError, Schema.Unknown)

/**
 * The waiting middleware refused a decision (its wait's schema or check), e.g. an
 * approval for a call that is not waiting; or the decision is not JSON.
 * Nothing was claimed: a corrected decision may follow. `error` is typed by
 * the agent's errors `E` ({@link DecisionFailure}): `resume` of a workflow
 * typed by its agent narrows it by `_tag` without a cast.
 *
 * @example
 * ```ts
 * import type { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * const schemaRefused = (refused: AgentWorkflow.InvalidDecision) => refused.error._tag === "InvalidResume"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidDecision<out E = DecisionFailure> extends Schema.TaggedError<InvalidDecision>(
  "@stepwise-agent/workflow/AgentWorkflow/InvalidDecision"
)("InvalidDecision", {
  runId: Schema.String,
  error: DecisionFailureSchema,
  reason: Schema.String
}) {
  /**
   * The waiting middleware's error as it failed (e.g. a
   * `HumanInTheLoop.DecisionError`), or the `ParseError` of a decision that
   * is not JSON: match it by `_tag` or with the middleware's own error classes.
   */
  declare readonly error: E
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The decision for run "${this.runId}" is invalid: ${this.reason}`
  }
}

/**
 * The decision claimed for a run's wait cannot reach the run: it was stored
 * without its value (by an older version) or no longer decodes. The run
 * would wait for good, so `status`, `await` and `resume` fail with this until
 * `discardDecision` removes it; a new decision can then be given.
 *
 * @since 0.1.0
 * @category errors
 */
export class DecisionCorrupt extends Schema.TaggedError<DecisionCorrupt>(
  "@stepwise-agent/workflow/AgentWorkflow/DecisionCorrupt"
)("DecisionCorrupt", { runId: Schema.String, key: Schema.String, reason: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The decision stored for the wait "${this.key}" of run "${this.runId}" cannot be delivered ` +
      `(${this.reason}); remove it with discardDecision, then decide again`
  }
}

/**
 * Why {@link AgentWorkflow.resume} refused a decision (`E`: the agent's
 * errors, which a refused decision's {@link InvalidDecision} may carry).
 *
 * @since 0.1.0
 * @category errors
 */
export type ResumeError<E = never> =
  | NotWaiting
  | Authorizer.Unauthorized
  | InvalidDecision<DecisionFailure<E>>
  | JournalCorrupt
  | DecisionCorrupt
  | RunStore.AlreadyDecided
  | RunStore.RunNotFound
  | RunStore.RunStoreError
  | AgentError.CheckpointError

/**
 * The stored journal or checkpoint of a run could not be read back.
 *
 * @since 0.1.0
 * @category errors
 */
export class JournalCorrupt extends Schema.TaggedError<JournalCorrupt>(
  "@stepwise-agent/workflow/AgentWorkflow/JournalCorrupt"
)("JournalCorrupt", { runId: Schema.String, reason: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The stored state of run "${this.runId}" is unreadable: ${this.reason}`
  }
}

/**
 * `send` refused a message, and stored nothing: `field` names what was wrong
 * (the thread id, the message, the mode, the idempotency key, or a workflow
 * made without `steering`).
 *
 * @example
 * ```ts
 * import { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * const refused = new AgentWorkflow.InvalidSend({ threadId: "t-1", field: "mode", reason: "must be \"steer\" or \"queue\"" })
 * refused.message // "Cannot send to thread \"t-1\": the mode must be \"steer\" or \"queue\""
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidSend extends Schema.TaggedError<InvalidSend>(
  "@stepwise-agent/workflow/AgentWorkflow/InvalidSend"
)("InvalidSend", {
  threadId: Schema.String,
  field: Schema.Literal("threadId", "message", "mode", "idempotencyKey", "options", "workflow"),
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Cannot send to thread ${JSON.stringify(this.threadId)}: the ${
      this.field === "threadId" ? "thread id" : this.field === "idempotencyKey" ? "idempotency key" : this.field
    } ${this.reason}`
  }
}

// -----------------------------------------------------------------------------
// the workflow
// -----------------------------------------------------------------------------

/**
 * Options of {@link make}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<W extends Wait.Any = Wait.Any> {
  /** The workflow's name; `/v<version>` is appended. */
  readonly name: string
  /**
   * Bump it when the agent changes in a way that would replay old journals
   * differently (other middleware, other tools); keep the old version's
   * layer registered until its runs drain.
   */
  readonly version: number
  /**
   * A wait for a decision ends after this long with the value `decide`
   * gives (for `HumanInTheLoop`, e.g. rejecting every call). Timed by a
   * durable clock, so it survives restarts.
   */
  readonly decisionTimeout?: {
    readonly after: Duration.DurationInput
    readonly decide: (interrupt: Wait.Interrupt<W>) => Wait.DecisionOf<W>
  } | undefined
  /**
   * Undo steps by tool name: when a run fails or is cancelled, each tool call
   * that succeeded gets its tool's undo, latest first (a saga's
   * compensation). Journaled results replay, so the undo sees the call and
   * result the run stored. A tool declared `ToolEffect.compensatable` needs
   * no entry: its own `undo` (with the call's arguments and ledger entry) is
   * its compensation; an entry here takes its place. Use it for the tools
   * that declare none.
   */
  readonly undo?: {
    readonly [toolName: string]: (call: Prompt.ToolCallPart, result: Prompt.ToolResultPart) => Effect.Effect<void>
  } | undefined
  /**
   * Let messages steer the runs of this workflow (default `false`): those
   * of {@link AgentWorkflow.send}, stored in the `RunStore` and taken in
   * wherever the run executes, and those of `Agent.send` in the process the
   * run executes in. The run then looks into its thread's inbox before each
   * model step, as an activity of its own (`inbox/<n>`, one more per step),
   * which claims the stored messages it takes in: a replay (or a retry after
   * a crash) takes in the same messages at the same point, and never one
   * twice. A run that ends, or fails, starts the next run of what is left
   * (an activity `next`). Without it a steer message of `Agent.send` waits
   * for the run's end and becomes the input of a run of its own, in process,
   * and `AgentWorkflow.send` refuses messages.
   */
  readonly steering?: boolean | undefined
}

/**
 * A durable agent: the workflow, the layer that registers its body with an
 * engine, and the operations on its runs.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentWorkflow<A extends AnyAgent = Agent.Service> {
  readonly name: string
  readonly workflow: Workflow.Workflow<string, typeof Payload, typeof RunOutcome, typeof RunFailure>
  /**
   * Registers the run body with the engine of the context. The runs use the
   * `Agent` of the context (build it with `Agent.layer` and a
   * checkpointer every runner shares, e.g. `SqlCheckpointer.layer`).
   */
  readonly layer: Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | Agent.Agent | RunStore.RunStore>
  /**
   * Starts a run on the thread and returns its id at once (a given `runId` makes starting idempotent). A request
   * with a key it does not know is `InvalidInput`, naming the key.
   */
  readonly start: (options: {
    readonly threadId: string
    readonly input: Prompt.RawInput
    readonly runId?: string | undefined
  }) => Effect.Effect<
    string,
    RunIdTaken | RunStore.RunStoreError | AgentError.InvalidInput,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore
  >
  /**
   * Where a run is, with its stored messages and state, what it waits for,
   * and, once it completed, its outcome (its structured output decoded with
   * the agent's `responseFormat`: one that no longer decodes is
   * `JournalCorrupt`).
   */
  readonly status: (runId: string) => Effect.Effect<
    RunStatus<A>,
    RunStore.RunNotFound | RunStore.RunStoreError | JournalCorrupt | DecisionCorrupt | AgentError.CheckpointError,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent
  >
  /**
   * Answers the wait of a run (from any process): asks the
   * {@link Authorizer.Authorizer}, checks the value against the waiting middleware
   * (its wait's schema and check, as `agent.validateResume` does), claims the decision once (a second one fails with
   * `AlreadyDecided`), stores it with the claim and completes the durable
   * wait. A decision claimed by a process that died before completing the
   * wait is completed by the next `resume` or `status` of the run. Options
   * with a key other than `principal` are `Unauthorized`, naming the key.
   */
  resume(runId: string, value: Wait.DecisionOf<WaitsOf<A>>, options: { readonly principal: string }): Effect.Effect<
    void,
    ResumeError<ErrorOf<A>>,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent | Authorizer.Authorizer
  >
  /**
   * Removes the decision claimed for the run's current wait when it cannot
   * reach the run ({@link DecisionCorrupt}), so a new `resume` can decide;
   * `false` when there is no such decision (a readable claimed decision is
   * delivered instead, as `status` would).
   */
  readonly discardDecision: (runId: string) => Effect.Effect<
    boolean,
    RunStore.RunNotFound | RunStore.RunStoreError | AgentError.CheckpointError,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent
  >
  /**
   * Cancels a run and waits until it has ended `Cancelled` (finalizers and
   * `undo` steps run). A waiting run is interrupted at its wait, and the
   * decision it waited for is given up (its calls answered as not run), so
   * the thread can run again; a working run stops before its next model call,
   * once the calls in flight have finished. A run the engine has not got
   * (its `start` died, or has not executed it yet) is recorded as cancelled
   * and hands the thread's messages on at once: if it executes later, it
   * stops before its first model call.
   */
  readonly cancel: (runId: string) => Effect.Effect<
    void,
    RunStore.RunNotFound | RunStore.RunStoreError | AgentError.CheckpointError | PersistenceError,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent
  >
  /**
   * Removes a run that has ended: its journal (on a durable engine: the
   * workflow's messages and replies and its durable clocks), its `RunStore`
   * record and claimed decisions, its run record (with a `RecordStore` in
   * the context), and, with `deleteThread`, its thread's
   * checkpoint (only when no later run of the thread is to come). Give new
   * runs new ids: a pruned id would start over. Options with a key it does
   * not know fail with `AgentError.InvalidOptions` (`option: "prune.<key>"`).
   */
  readonly prune: (runId: string, options?: { readonly deleteThread?: boolean | undefined }) => Effect.Effect<
    void,
    | RunNotEnded
    | RunStore.RunNotFound
    | RunStore.RunStoreError
    | AgentError.CheckpointError
    | PersistenceError
    | AgentError.InvalidOptions,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent
  >
  /**
   * The record of a run (`RunRecord`, as `RunRecord.record` makes in
   * process), kept as the run went by the `RecordStore` of the workflow's
   * context: the run's input, each step with its result (a model call with
   * the request as sent and the reply), each wait with the decision it got,
   * each middleware decision, and its end: completed, or failed (with the
   * error) or cancelled. Of a finished run, or one that waits. A fork's
   * record (`forkedFrom` in its header) starts with the steps it served
   * from the record it forked, so it replays and forks like every other record. Replay
   * it in process with `agent.replay(record)`: no model or tool is called.
   */
  readonly record: (runId: string) => Effect.Effect<
    RunRecord.RunRecord,
    | RunStore.RunNotFound
    | RunStore.RunStoreError
    | RecordStore.RecordNotFound
    | RecordStore.RecordStoreError
    | RunRecord.RunRecordError,
    RunStore.RunStore | RecordStore.RecordStore
  >
  /**
   * Forks a durable run (by its id: its stored record) or a record at its
   * model step `options.at`, with an optional edit (a message, a tool
   * result), into a new durable run on the new thread `options.to`: the
   * steps before `at` are served from the record (no model or tool call),
   * then the run goes on live on the engine, journaled like every other run (it
   * survives a crash, waits durably) and recorded like every other run (with the
   * steps it served first). The source run, its thread and its journal are
   * only read. A step the record does not have, an edit that
   * does not apply or a target thread that exists fail with `ForkError`,
   * and nothing is started; so do a `Message` edit that holds no message
   * (`InvalidInput`), options or an edit with a key they do not know
   * (`InvalidInput`, naming it) and a run id of another thread (`RunIdTaken`). Gives
   * the new run's id (`options.runId`, or a new one); a retried fork with
   * the same `runId` and `to`, whose run started, gives it again.
   */
  fork(source: string, options: ForkOptions): Effect.Effect<
    string,
    ForkFailure | RecordStore.RecordNotFound | RecordStore.RecordStoreError,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent | RecordStore.RecordStore
  >
  fork(source: RunRecord.RunRecord, options: ForkOptions): Effect.Effect<
    string,
    ForkFailure,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent
  >
  /**
   * Waits until the run is done (or waiting, with `untilWaiting`) and gives its status. Options with a key it
   * does not know fail with `AgentError.InvalidOptions` (`option: "await.<key>"`).
   */
  readonly await: (runId: string, options?: {
    readonly untilWaiting?: boolean | undefined
    readonly pollEvery?: Duration.DurationInput | undefined
  }) => Effect.Effect<
    RunStatus<A>,
    | RunStore.RunNotFound
    | RunStore.RunStoreError
    | JournalCorrupt
    | DecisionCorrupt
    | AgentError.CheckpointError
    | AgentError.InvalidOptions,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent
  >
  /**
   * The live events of a run executing in this process (text deltas,
   * tool calls, decisions) on its thread, ending when the run ends or starts
   * waiting (also when it does so elsewhere: `status` is polled). Best
   * effort: a run executing in another process shows no events, and a replay
   * reports journaled steps again; `status` is the durable truth.
   */
  readonly watch: (runId: string) => Stream.Stream<
    Agent.RunEvent<StateOf<A>, OutputOf<A>, WaitsOf<A>>,
    RunStore.RunNotFound | RunStore.RunStoreError | JournalCorrupt | DecisionCorrupt | AgentError.CheckpointError,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent
  >
  /**
   * Sends a message to a thread from any process (a workflow made with
   * `steering: true`): it is stored in the `RunStore` first, then taken in
   * exactly once, wherever the thread's run executes. `"steer"` (the
   * default) joins the running run before its next model step (a run
   * waiting for a decision takes it in after the resume); `"queue"` is the
   * input of a run of its own once the running one has ended. With no run
   * going, a run with the message as its input starts at once.
   *
   * A sender that may send again after a failure it cannot read (a timeout,
   * a lost connection) gives the message an `idempotencyKey`: a second send
   * to the thread with the same key and the same message stores nothing and
   * answers for the first one (`duplicate: true`); the same key with another
   * message fails with `InvalidSend` (`field: "idempotencyKey"`). Options
   * with a key it does not know fail with `InvalidSend` (`field: "options"`).
   */
  readonly send: (
    threadId: string,
    message: Prompt.RawInput,
    options?: {
      readonly mode?: "steer" | "queue" | undefined
      readonly idempotencyKey?: string | undefined
    } | undefined
  ) => Effect.Effect<
    SendReceipt,
    InvalidSend | RunStore.RunStoreError,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore
  >
}

/**
 * The options of {@link AgentWorkflow.fork}: those of `agent.fork` (a new
 * thread `to`, the model step `at`, an optional `Message` or `ToolResult`
 * edit) and the new run's id.
 *
 * @example
 * ```ts
 * import type { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * const options: AgentWorkflow.ForkOptions = { to: "ticket-42-retry", at: 1, runId: "run-42-fork" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ForkOptions extends Fork.Options<never> {
  readonly runId?: string | undefined
}

/**
 * Why {@link AgentWorkflow.fork} started nothing: the fork cannot start
 * (`ForkError`), the record is of another format version, the new run's id
 * names a run of another thread, or a store failed.
 *
 * @example
 * ```ts
 * import type { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * const why = (failure: AgentWorkflow.ForkFailure) => failure._tag === "ForkError" ? failure.reason : failure._tag
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type ForkFailure =
  | Fork.ForkError
  | RunRecord.RunRecordError
  | RunIdTaken
  | RunStore.RunNotFound
  | RunStore.RunStoreError
  | AgentError.CheckpointError
  | AgentError.InvalidInput

/**
 * Defines a durable agent. Give the agent's type (`A`: the service of its
 * `Agent.Tag`, `Agent.AgentOf<typeof middleware, Output>`, or the success
 * type of its `Agent.make`) to type the workflow by it: `resume` takes its
 * decisions, `status` gives its typed waits, state and structured output.
 * Without it, any.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { AgentEngine, AgentWorkflow, Authorizer, RunStore, SqlCheckpointer } from "@stepwise-agent/workflow"
 * import { Effect, Layer } from "effect"
 *
 * const Support = AgentWorkflow.make({ name: "support", version: 1 })
 *
 * // the body registered with the engine, over the agent, the stores and who may decide
 * const Live = Support.layer.pipe(
 *   Layer.provideMerge(Agent.layer({ systemPrompt: "You help with orders." })),
 *   Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
 *   Layer.provideMerge(Authorizer.layer((request) => request.principal.startsWith("staff:"))),
 *   Layer.provideMerge(AgentEngine.layerSqlite({ filename: "runs.db" }))
 * )
 *
 * const program = Effect.gen(function*() {
 *   const runId = yield* Support.start({ threadId: "ticket-42", input: "My order is late" })
 *   return yield* Support.await(runId)
 * })
 * // program.pipe(Effect.provide(Live), Effect.provide(SomeLanguageModelLayer))
 * ```
 *
 * Options the types rule out (from JavaScript: a name that is not a
 * non-empty string, a version that is not a number, a key it does not know,
 * in the options or in `decisionTimeout`) throw an
 * `AgentError.InvalidOptions` naming the option.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <A extends AnyAgent = Agent.Service>(
  options: Options<WaitsOf<A>>
): AgentWorkflow<A> => internal.make(options as Options) as AgentWorkflow<any>

/**
 * Any agent type: what {@link make} and {@link AgentWorkflow} are typed by.
 *
 * @example
 * ```ts
 * import type { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * const nameOf = <A extends AgentWorkflow.AnyAgent>(workflow: AgentWorkflow.AgentWorkflow<A>) => workflow.name
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type AnyAgent = Agent.Service<any, any, any, any>

/**
 * The waits of the agent type `A` (see `Wait`): what an {@link AgentWorkflow}
 * made for it is typed by.
 *
 * @example
 * ```ts
 * import type { Agent, Wait } from "@stepwise-agent/core"
 * import type { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * type Confirm = Wait.Declared<"confirm", string, boolean>
 * type Waits = AgentWorkflow.WaitsOf<Agent.Service<any, never, never, Confirm>> // Confirm
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type WaitsOf<A> = A extends Agent.Service<any, any, any, infer W> ? W : never

/**
 * The errors the middleware of the agent type `A` add (its `E`): what a
 * refused decision's {@link InvalidDecision} of its workflow may carry.
 *
 * @example
 * ```ts
 * import type { Agent } from "@stepwise-agent/core"
 * import type { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * type OverQuota = { readonly _tag: "OverQuota" }
 * type Errors = AgentWorkflow.ErrorOf<Agent.Service<any, OverQuota>> // OverQuota
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type ErrorOf<A> = A extends Agent.Service<any, infer E, any, any> ? E : never

/**
 * The state of the agent type `A` (its messages and its middleware's
 * slices): what {@link RunStatus.threadState} is typed by.
 *
 * @example
 * ```ts
 * import type { Agent, AgentState } from "@stepwise-agent/core"
 * import type { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * type State = AgentWorkflow.StateOf<Agent.Service<AgentState.AgentState>> // AgentState
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type StateOf<A> = A extends Agent.Service<infer S, any, any, any> ? S : never

/**
 * The structured output of the agent type `A` (the type of its
 * `responseFormat`): what a completed run's {@link Outcome} carries.
 *
 * @example
 * ```ts
 * import type { Agent, AgentState } from "@stepwise-agent/core"
 * import type { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * type Output = AgentWorkflow.OutputOf<Agent.Service<AgentState.AgentState, never, { readonly answer: string }>>
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type OutputOf<A> = A extends Agent.Service<any, any, infer O, any> ? O : never
