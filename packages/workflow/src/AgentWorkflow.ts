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
import * as IdGenerator from "@effect/ai/IdGenerator"
import * as Prompt from "@effect/ai/Prompt"
import type { PersistenceError } from "@effect/cluster/ClusterError"
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as EntityAddress from "@effect/cluster/EntityAddress"
import * as EntityId from "@effect/cluster/EntityId"
import * as EntityType from "@effect/cluster/EntityType"
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as Sharding from "@effect/cluster/Sharding"
import * as Activity from "@effect/workflow/Activity"
import * as DurableClock from "@effect/workflow/DurableClock"
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Agent from "@stepwise-agent/core/Agent"
import { CheckpointError, ThreadStateError } from "@stepwise-agent/core/AgentError"
import * as RunJournal from "@stepwise-agent/core/RunJournal"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Usage from "@stepwise-agent/core/Usage"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as RunStore from "./RunStore.js"

/**
 * The id of a run started without one: from the context's `IdGenerator` when
 * there is one (a test can make ids predictable), else a random UUID.
 */
const newRunId: Effect.Effect<string> = Effect.flatMap(
  Effect.serviceOption(IdGenerator.IdGenerator),
  Option.match({ onNone: () => Effect.sync(() => crypto.randomUUID()), onSome: (ids) => ids.generateId() })
)

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * The workflow's payload: the run id (its idempotency key), the thread it
 * continues, and the user messages it starts with.
 *
 * @since 0.1.0
 * @category models
 */
export const Payload = Schema.Struct({
  runId: Schema.String,
  threadId: Schema.String,
  input: Schema.Array(Prompt.Message)
})

/**
 * What a finished run gives: the last assistant text, the number of model
 * calls and the token usage. The messages are in the thread's checkpoint.
 *
 * @since 0.1.0
 * @category models
 */
export const RunOutcome = Schema.Struct({
  text: Schema.String,
  steps: Schema.Number,
  usage: Usage.Usage
})

/**
 * @since 0.1.0
 * @category models
 */
export type RunOutcome = typeof RunOutcome.Type

/**
 * A decision as journaled: the value handed to the interrupting hook, who
 * decided, and when.
 *
 * @since 0.1.0
 * @category models
 */
export const Decision = Schema.Struct({
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
 * A run as `status` reports it.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunStatus {
  readonly runId: string
  readonly threadId: string
  readonly executionId: string
  readonly state: RunState
  /** What the run waits for, while `Waiting`. */
  readonly pending: Option.Option<{ readonly key: string; readonly middleware: string; readonly value: unknown }>
  /** The thread as last checkpointed (durable; live text is not). */
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly outcome: Option.Option<RunOutcome>
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
 * A run failed: a model or tool call failed for good, or a middleware failed.
 * The thread keeps everything stored up to its last checkpoint.
 *
 * @since 0.1.0
 * @category errors
 */
export class AgentRunFailed extends Schema.TaggedError<AgentRunFailed>(
  "@stepwise-agent/workflow/AgentWorkflow/AgentRunFailed"
)("AgentRunFailed", {
  /** The tag of the underlying error (or `Defect`). */
  error: Schema.String,
  description: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The agent run failed with ${this.error}: ${this.description}`
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
 * How a run's workflow can fail: a failure of the run, or its cancellation.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunFailure = Schema.Union(AgentRunFailed, RunCancelled)

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
 * The app's {@link Authorizer} refused a decision.
 *
 * @since 0.1.0
 * @category errors
 */
export class Unauthorized extends Schema.TaggedError<Unauthorized>(
  "@stepwise-agent/workflow/AgentWorkflow/Unauthorized"
)("Unauthorized", { runId: Schema.String, principal: Schema.String, reason: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `"${this.principal}" may not decide for run "${this.runId}": ${this.reason}`
  }
}

/**
 * The waiting middleware refused a decision (`validateResume`), e.g. an
 * approval for a call that is not waiting; or the decision is not JSON.
 * Nothing was claimed: a corrected decision may follow.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidDecision extends Schema.TaggedError<InvalidDecision>(
  "@stepwise-agent/workflow/AgentWorkflow/InvalidDecision"
)("InvalidDecision", {
  runId: Schema.String,
  /** The tag of the middleware's error, e.g. `UnknownCallId`. */
  error: Schema.String,
  description: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The decision for run "${this.runId}" is invalid (${this.error}): ${this.description}`
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
)("DecisionCorrupt", { runId: Schema.String, key: Schema.String, description: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The decision stored for the wait "${this.key}" of run "${this.runId}" cannot be delivered ` +
      `(${this.description}); remove it with discardDecision, then decide again`
  }
}

/**
 * Why {@link AgentWorkflow.resume} refused a decision.
 *
 * @since 0.1.0
 * @category errors
 */
export type ResumeError =
  | NotWaiting
  | Unauthorized
  | InvalidDecision
  | JournalCorrupt
  | DecisionCorrupt
  | RunStore.AlreadyDecided
  | RunStore.RunNotFound
  | RunStore.RunStoreError
  | CheckpointError

/**
 * The stored journal or checkpoint of a run could not be read back.
 *
 * @since 0.1.0
 * @category errors
 */
export class JournalCorrupt extends Schema.TaggedError<JournalCorrupt>(
  "@stepwise-agent/workflow/AgentWorkflow/JournalCorrupt"
)("JournalCorrupt", { runId: Schema.String, description: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The stored state of run "${this.runId}" is unreadable: ${this.description}`
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
  field: Schema.Literal("threadId", "message", "mode", "idempotencyKey", "workflow"),
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
// authorization
// -----------------------------------------------------------------------------

/**
 * What a decision asks to do, for the {@link Authorizer}.
 *
 * @since 0.1.0
 * @category models
 */
export interface DecisionRequest {
  readonly runId: string
  readonly threadId: string
  /** Who decides, as the app identified them. */
  readonly principal: string
  readonly pending: { readonly key: string; readonly middleware: string; readonly value: unknown }
  readonly value: unknown
}

/**
 * Decides who may answer a waiting run. A workflow's wait is named after its
 * run and key, so anyone who can reach the engine could complete it: every
 * decision of {@link AgentWorkflow.resume} goes through this service first.
 *
 * @since 0.1.0
 * @category tags
 */
export class Authorizer extends Context.Tag("@stepwise-agent/workflow/AgentWorkflow/Authorizer")<
  Authorizer,
  { readonly authorize: (request: DecisionRequest) => Effect.Effect<void, Unauthorized> }
>() {}

/**
 * An {@link Authorizer} from a predicate.
 *
 * @example
 * ```ts
 * import { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * const AdminsOnly = AgentWorkflow.layerAuthorizer((request) => request.principal.startsWith("admin:"))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerAuthorizer = (
  allow: (request: DecisionRequest) => boolean | Effect.Effect<boolean>
): Layer.Layer<Authorizer> =>
  Layer.succeed(Authorizer, {
    authorize: (request) => {
      const allowed = allow(request)
      return Effect.flatMap(Effect.isEffect(allowed) ? allowed : Effect.succeed(allowed), (ok) =>
        ok ? Effect.void : Effect.fail(
          new Unauthorized({ runId: request.runId, principal: request.principal, reason: "refused by the authorizer" })
        ))
    }
  })

// -----------------------------------------------------------------------------
// the workflow
// -----------------------------------------------------------------------------

/**
 * Options of {@link make}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
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
    readonly decide: (interrupt: RunJournal.Interrupt) => unknown
  } | undefined
  /**
   * Undo steps by tool name: when a run fails or is cancelled, each tool call
   * that succeeded gets its tool's undo, latest first (a saga's
   * compensation). Journaled results replay, so the undo sees the call and
   * result the run stored.
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
export interface AgentWorkflow {
  readonly name: string
  readonly workflow: Workflow.Workflow<string, typeof Payload, typeof RunOutcome, typeof RunFailure>
  /**
   * Registers the run body with the engine of the context. The runs use the
   * `Agent` of the context (build it with `Agent.layer` and a
   * checkpointer every runner shares, e.g. `SqlCheckpointer.layer`).
   */
  readonly layer: Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | Agent.Agent | RunStore.RunStore>
  /** Starts a run on the thread and returns its id at once (a given `runId` makes starting idempotent). */
  readonly start: (options: {
    readonly threadId: string
    readonly input: Prompt.RawInput
    readonly runId?: string | undefined
  }) => Effect.Effect<string, RunIdTaken | RunStore.RunStoreError, WorkflowEngine.WorkflowEngine | RunStore.RunStore>
  /** Where a run is, with its stored messages and what it waits for. */
  readonly status: (runId: string) => Effect.Effect<
    RunStatus,
    RunStore.RunNotFound | RunStore.RunStoreError | JournalCorrupt | DecisionCorrupt | CheckpointError,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent
  >
  /**
   * Answers the wait of a run (from any process): asks the
   * {@link Authorizer}, checks the value against the waiting middleware
   * (`validateResume`), claims the decision once (a second one fails with
   * `AlreadyDecided`), stores it with the claim and completes the durable
   * wait. A decision claimed by a process that died before completing the
   * wait is completed by the next `resume` or `status` of the run.
   */
  readonly resume: (runId: string, value: unknown, options: { readonly principal: string }) => Effect.Effect<
    void,
    ResumeError,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent | Authorizer
  >
  /**
   * Removes the decision claimed for the run's current wait when it cannot
   * reach the run ({@link DecisionCorrupt}), so a new `resume` can decide;
   * `false` when there is no such decision (a readable claimed decision is
   * delivered instead, as `status` would).
   */
  readonly discardDecision: (runId: string) => Effect.Effect<
    boolean,
    RunStore.RunNotFound | RunStore.RunStoreError | CheckpointError,
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
    RunStore.RunNotFound | RunStore.RunStoreError | CheckpointError | PersistenceError,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent
  >
  /**
   * Removes a run that has ended: its journal (on a durable engine: the
   * workflow's messages and replies and its durable clocks), its `RunStore`
   * record and claimed decisions, and, with `deleteThread`, its thread's
   * checkpoint (only when no later run of the thread is to come). Give new
   * runs new ids: a pruned id would start over.
   */
  readonly prune: (runId: string, options?: { readonly deleteThread?: boolean | undefined }) => Effect.Effect<
    void,
    RunNotEnded | RunStore.RunNotFound | RunStore.RunStoreError | CheckpointError | PersistenceError,
    WorkflowEngine.WorkflowEngine | RunStore.RunStore | Agent.Agent
  >
  /** Waits until the run is done (or waiting, with `untilWaiting`) and gives its status. */
  readonly await: (runId: string, options?: {
    readonly untilWaiting?: boolean | undefined
    readonly pollEvery?: Duration.DurationInput | undefined
  }) => Effect.Effect<
    RunStatus,
    RunStore.RunNotFound | RunStore.RunStoreError | JournalCorrupt | DecisionCorrupt | CheckpointError,
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
    Agent.RunEvent,
    RunStore.RunNotFound | RunStore.RunStoreError | JournalCorrupt | DecisionCorrupt | CheckpointError,
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
   * message fails with `InvalidSend` (`field: "idempotencyKey"`).
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

const tagOf = (error: unknown): string =>
  typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "Error"

/** An error's message as stored: never with credentials in it. */
const describe = (error: unknown): string => Secrets.messageOf(error)

/** A schema decoding failure, as itself or as its name once the engine has serialized it. */
const isParseError = (defect: unknown): boolean =>
  ParseResult.isParseError(defect) || (defect instanceof Error && defect.name === "ParseError")

/** A failed run's reason: its typed error, or `JournalCorrupt` when a stored result no longer decodes. */
const failureOf = (
  runId: string,
  cause: Cause.Cause<AgentRunFailed | RunCancelled>
): AgentRunFailed | JournalCorrupt => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    return failure.value._tag === "AgentRunFailed"
      ? failure.value
      : new AgentRunFailed({ error: "RunCancelled", description: failure.value.message })
  }
  const defect = Cause.squash(cause)
  // A stored result that no longer decodes surfaces as a ParseError defect (as
  // itself, or as its name once the engine has serialized it).
  if (ParseResult.isParseError(defect)) {
    return new JournalCorrupt({ runId, description: ParseResult.TreeFormatter.formatErrorSync(defect) })
  }
  return isParseError(defect)
    ? new JournalCorrupt({ runId, description: describe(defect) })
    : new AgentRunFailed({ error: "Defect", description: describe(defect) })
}

/** Whether a run ended by failing with `RunCancelled` (or, in a journal of an earlier version, its string form). */
const isCancelled = (cause: Cause.Cause<AgentRunFailed | RunCancelled>): boolean =>
  Option.exists(
    Cause.failureOption(cause),
    (error) =>
      error._tag === "RunCancelled" ||
      (error.error === "Cancelled" && error.description === "the run was cancelled")
  )

/**
 * Where a run is, read from what the engine polled, what its thread waits
 * for and the decision claimed for that wait: a run not ended that waits for
 * a decision nobody gave is `Waiting` (a decision on its way counts as given:
 * the run is about to go on), one not yet started or working is `Running`.
 */
const stateOf = (
  runId: string,
  polled: Workflow.Result<RunOutcome, AgentRunFailed | RunCancelled> | undefined,
  pending: Option.Option<unknown>,
  claim: Option.Option<RunStore.ClaimedDecision>
): Pick<RunStatus, "state" | "outcome" | "failure"> => {
  const none = { outcome: Option.none(), failure: Option.none() }
  if (polled === undefined) return { state: "Running", ...none }
  if (polled._tag !== "Complete") {
    return { state: Option.isSome(pending) && Option.isNone(claim) ? "Waiting" : "Running", ...none }
  }
  const exit = polled.exit
  if (Exit.isSuccess(exit)) return { state: "Completed", outcome: Option.some(exit.value), failure: Option.none() }
  if (Cause.isInterruptedOnly(exit.cause) || isCancelled(exit.cause)) return { state: "Cancelled", ...none }
  return { state: "Failed", outcome: Option.none(), failure: Option.some(failureOf(runId, exit.cause)) }
}

/** A run's failure as journaled: a cancellation stays one, anything else becomes an `AgentRunFailed`. */
const asRunFailure = (error: unknown): AgentRunFailed | RunCancelled =>
  error instanceof AgentRunFailed || error instanceof RunCancelled
    ? error
    : new AgentRunFailed({ error: tagOf(error), description: describe(error) })

/**
 * The exit schema of our activities, one per success schema. @effect/workflow
 * 0.19 builds a new one in every `Activity.make`, and its engine compiles a
 * decoder for each: most of an activity's cost on the memory engine.
 */
const exitSchemas = new Map<Schema.Schema.Any, Schema.Schema.Any>()
const exitSchemaOf = (success: Schema.Schema.Any) => {
  let schema = exitSchemas.get(success)
  if (schema === undefined) {
    schema = Schema.ExitFromSelf({ success, failure: RunFailure, defect: Schema.Defect })
    exitSchemas.set(success, schema)
  }
  return schema
}

/** A decision as stored with its claim. */
const DecisionJson = Schema.parseJson(Decision)
const encodeDecision = Schema.encode(DecisionJson)
const decodeDecision = Schema.decode(DecisionJson)

/** The messages of one `send`, as the `RunStore` keeps them: JSON, decoded again by the run that takes them in. */
const SentJson = Schema.parseJson(Schema.Array(Prompt.Message))
const encodeSent = Schema.encode(SentJson)
const decodeSent = Schema.decode(SentJson)

/** The messages of stored sends, in send order (they were encoded by `send`: one that no longer decodes is a defect). */
const decodeStored = (stored: ReadonlyArray<RunStore.SentMessage>) =>
  Effect.map(Effect.forEach(stored, (message) => Effect.orDie(decodeSent(message.messages))), (all) => all.flat())

/** A thread id `send` accepts: what `Agent` accepts (a non-empty string without lone surrogates). */
const ThreadId = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.filter((id) => !/\p{Cs}/u.test(id), { message: () => "must not hold a lone surrogate" })
)
const SendMode = Schema.Literal("steer", "queue")
/** A sender's idempotency key: a non-empty string, at most 256 characters. */
const IdempotencyKey = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(256, { message: () => "must be at most 256 characters" })
)

const formatIssue = (error: ParseResult.ParseError) => ParseResult.TreeFormatter.formatErrorSync(error)

/** The most characters of text and file data one send stores (the agent's default `maxInputChars`). */
const maxSendChars = 4 * 1024 * 1024

/**
 * What is wrong with a sent message for a thread that may be mid-run, or undefined: only user messages of text
 * and file parts, without the middleware's marker (`options.stepwise`), within {@link maxSendChars} — as
 * `Agent.send` takes (a tool result without its call, an unanswered call or a system message would land between
 * the run's own messages).
 */
const userMessagesProblem = (messages: ReadonlyArray<Prompt.Message>): string | undefined => {
  const marked = (options: unknown) =>
    typeof options === "object" && options !== null && Object.hasOwn(options, "stepwise")
  let size = 0
  for (const [i, message] of messages.entries()) {
    if (message.role !== "user") {
      return `messages.${i}: ${message.role === "assistant" ? "an" : "a"} ${message.role} message cannot be sent; ` +
        `send takes only user messages (of text and file parts), the agent writes the others`
    }
    if (marked(message.options)) {
      return `messages.${i}.options.stepwise: the agent's middleware mark their own messages there`
    }
    for (const [j, part] of message.content.entries()) {
      const type: unknown = (part as { readonly type?: unknown }).type
      if (type !== "text" && type !== "file") {
        return `messages.${i}.content.${j}: a part of type ${JSON.stringify(String(type))} cannot be sent`
      }
      if (marked(part.options)) {
        return `messages.${i}.content.${j}.options.stepwise: the agent's middleware mark their own messages there`
      }
      size += part.type === "text"
        ? part.text.length
        : typeof part.data === "string"
        ? part.data.length
        : part.data instanceof Uint8Array
        ? part.data.byteLength
        : 0
    }
  }
  return size > maxSendChars
    ? `holds ${size} characters of text and file data, over the limit of ${maxSendChars}`
    : undefined
}

/** `send`'s checks: the thread id, the mode and the message, which it gives encoded for the store. */
const checkSend = (
  threadId: unknown,
  message: Prompt.RawInput,
  mode: unknown,
  idempotencyKey: unknown
): Effect.Effect<
  {
    readonly threadId: string
    readonly mode: "steer" | "queue"
    readonly messages: string
    readonly idempotencyKey: string | undefined
  },
  InvalidSend
> =>
  Effect.gen(function*() {
    const shown = typeof threadId === "string" ? threadId : String(threadId)
    const refuse = (field: InvalidSend["field"]) => (reason: string) =>
      new InvalidSend({ threadId: shown, field, reason })
    const id = yield* Schema.decodeUnknown(ThreadId)(threadId).pipe(
      Effect.mapError((error) => refuse("threadId")(formatIssue(error)))
    )
    const checkedMode = yield* Schema.decodeUnknown(SendMode)(mode ?? "steer").pipe(
      Effect.mapError((error) => refuse("mode")(formatIssue(error)))
    )
    const key = idempotencyKey === undefined ? undefined : yield* Schema.decodeUnknown(IdempotencyKey)(
      idempotencyKey
    ).pipe(Effect.mapError((error) => refuse("idempotencyKey")(formatIssue(error))))
    if (typeof message !== "string" && !Prompt.isPrompt(message) && !Array.isArray(message)) {
      return yield* refuse("message")(
        `must be a string, an array of messages or a Prompt, got ${message === null ? "null" : typeof message}`
      )
    }
    const prompt = yield* Effect.try({
      try: () => Prompt.make(message),
      catch: (error) =>
        refuse("message")(`does not decode: ${ParseResult.isParseError(error) ? formatIssue(error) : String(error)}`)
    })
    if (prompt.content.length === 0) return yield* refuse("message")("holds no message")
    const notTheUsers = userMessagesProblem(prompt.content)
    if (notTheUsers !== undefined) return yield* refuse("message")(notTheUsers)
    const messages = yield* encodeSent(prompt.content).pipe(
      Effect.mapError((error) => refuse("message")(`cannot be stored: ${formatIssue(error)}`))
    )
    return { threadId: id, mode: checkedMode, messages, idempotencyKey: key }
  })

/**
 * Runs a step of the loop as an activity named after its key, with the
 * services of the loop (an engine may execute the activity on another fiber).
 */
const inActivity = <A, I, E, R>(
  name: string,
  success: Schema.Schema<A, I>,
  effect: Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const context = Context.omit(WorkflowEngine.WorkflowInstance)(yield* Effect.context<R>())
    const activity = Activity.make({
      name,
      success: success as Schema.Schema<A, I, never>,
      error: RunFailure,
      execute: effect.pipe(
        // defects are journaled as they are: scrubbed first, as failures are by `asRunFailure`
        Effect.mapErrorCause(Secrets.scrubCause),
        Effect.mapError(asRunFailure),
        Effect.provide(context as Context.Context<R>)
      )
    })
    return yield* Object.assign(activity, { exitSchema: exitSchemaOf(success) })
  })

/*
 * `cancel` records its request in the `RunStore` (`requestCancel`, a record of
 * its own, apart from the decisions of waits) before it interrupts a run. The
 * engines apply a cancel only when a run suspends (or, in memory, ends): a
 * run that is working would otherwise go on to its end (on the cluster engine
 * the signal even waits behind the running execution). So a working run
 * reads the request before each model call it makes, and fails with
 * {@link RunCancelled} instead; `status` reads that as `Cancelled`.
 */

/** The durable side of a thread, for giving up a wait its run made once that run has ended. */
const owner: RunJournal.Service = { ...RunJournal.inProcess, durable: true }

/**
 * The journal of one run on the workflow engine, and `flush`, which writes
 * the checkpoints it still holds.
 *
 * A checkpoint is not an activity of its own: its save waits for the next
 * activity that executes and runs inside it, first (one round trip through
 * the engine's storage less per step). An activity that executes runs after
 * every save before it, so it writes those it took; one that replays from
 * the journal executed earlier with the same saves before it, so they were
 * written then and are dropped, and a replay never writes an older
 * checkpoint over a newer one. Before a wait and when the run ends there is
 * no next activity: `flush` writes what is left as one activity, named
 * after the last of those checkpoints.
 */
const makeJournal = (
  options: Options,
  runId: string,
  cancelled: Effect.Effect<boolean>,
  claimSteered: (look: string) => Effect.Effect<ReadonlyArray<Prompt.Message>>
) => {
  // A look into the inbox takes in the messages sent in this process, then those stored for the thread.
  // The stored ones are claimed first: a store that fails ends the look before it took any message out of
  // the inbox, so none is lost.
  const withStored = (held: Effect.Effect<ReadonlyArray<Prompt.Message>>, look: string) =>
    Effect.flatMap(claimSteered(look), (stored) => Effect.map(held, (inProcess) => [...inProcess, ...stored]))
  // A model call about to run (a replayed one is read from the journal and never gets here) checks
  // for a cancel first and ends the run instead: the tool calls before it all have their results.
  const unlessCancelled = <A, E, R>(call: Effect.Effect<A, E, R>): Effect.Effect<A, E | RunCancelled, R> =>
    Effect.flatMap(
      cancelled,
      (yes): Effect.Effect<A, E | RunCancelled, R> => yes ? Effect.fail(new RunCancelled({ runId })) : call
    )
  // a subagent's step (`Nested`) is treated as the step it names: its checkpoints wait, its tool calls compensate
  const compensated = <A, E, R>(key: RunJournal.StepKey, activity: Effect.Effect<A, E, R>) => {
    const step = RunJournal.innermost(key)
    const undo = step._tag === "Tool" ? options.undo?.[step.call.name] : undefined
    return undo === undefined || step._tag !== "Tool" ? activity : Workflow.withCompensation(
      activity,
      (result) =>
        (result as Prompt.ToolResultPart).isFailure ? Effect.void : undo(step.call, result as Prompt.ToolResultPart)
    )
  }
  /** The checkpoints saved since the last activity began, in order, not yet written. */
  const unwritten: Array<{ readonly key: RunJournal.StepKey; readonly save: Effect.Effect<unknown, unknown> }> = []
  /** `call`, after the writes of the checkpoints taken (all there are, as the activity starts). */
  const afterUnwritten = <A, E, R>(call: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R> => {
    const saves = unwritten.splice(0)
    return saves.length === 0 ? call : Effect.zipRight(Effect.forEach(saves, (s) => s.save, { discard: true }), call)
  }
  const flush = Effect.suspend(() => {
    const last = unwritten.at(-1)
    return last === undefined
      ? Effect.void
      : inActivity(RunJournal.stepName(last.key), Schema.Void, afterUnwritten(Effect.void))
  })
  const journal = RunJournal.RunJournal.of({
    durable: true,
    step: (key, schema, effect) => {
      const kind = RunJournal.innermost(key)._tag
      return kind === "Checkpoint"
        ? Effect.sync(() => void unwritten.push({ key, save: effect as Effect.Effect<unknown, unknown> })) as any
        : kind === "Inbox" && options.steering !== true
        // without steering a run never takes messages in: nothing to journal
        ? Effect.succeed([]) as any
        : Effect.suspend(() =>
          compensated(
            key,
            inActivity(
              RunJournal.stepName(key),
              schema,
              afterUnwritten(
                kind === "Model"
                  ? unlessCancelled(effect)
                  // the run's own look also claims the thread's stored messages; a subagent's looks only its inbox
                  : key._tag === "Inbox"
                  ? withStored(effect as any, RunJournal.stepName(key)) as any
                  : effect
              )
            )
          )
        ) as any
    },
    await: (interrupt) => {
      const deferred = DurableDeferred.make(interrupt.key, { success: Decision })
      const timeout = options.decisionTimeout
      const decided = timeout === undefined
        ? DurableDeferred.await(deferred)
        : DurableDeferred.raceAll({
          name: interrupt.key,
          success: Decision,
          error: Schema.Never,
          effects: [
            DurableDeferred.await(deferred),
            DurableClock.sleep({ name: `timeout/${interrupt.key}`, duration: timeout.after }).pipe(
              Effect.zipRight(Effect.map(Clock.currentTimeMillis, (decidedAt): Decision => ({
                value: timeout.decide(interrupt),
                by: "timeout",
                decidedAt
              })))
            )
          ]
        })
      // the thread as it waits (the interrupt in its checkpoint) is stored before the run suspends
      return Effect.zipRight(flush, Effect.map(decided, (decision) => Option.some(decision.value))) as Effect.Effect<
        Option.Option<unknown>
      >
    }
  })
  return { journal, flush }
}

/**
 * Defines a durable agent.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { AgentEngine, AgentWorkflow, RunStore, SqlCheckpointer } from "@stepwise-agent/workflow"
 * import { Effect, Layer } from "effect"
 *
 * const Support = AgentWorkflow.make({ name: "support", version: 1 })
 *
 * // the body registered with the engine, over the agent, the stores and who may decide
 * const Live = Support.layer.pipe(
 *   Layer.provideMerge(Agent.layer({ systemPrompt: "You help with orders." })),
 *   Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
 *   Layer.provideMerge(AgentWorkflow.layerAuthorizer((request) => request.principal.startsWith("staff:"))),
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
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): AgentWorkflow => {
  const name = `${options.name}/v${options.version}`
  const workflow = Workflow.make({
    name,
    payload: Payload,
    success: RunOutcome,
    error: RunFailure,
    idempotencyKey: (payload) => payload.runId
  })

  const steering = options.steering === true

  /** Registers and executes the run `runId` of `threadId` with the stored messages as its input (idempotent). */
  const launch = (threadId: string, runId: string, messages: ReadonlyArray<RunStore.SentMessage>) =>
    Effect.gen(function*() {
      const payload = { runId, threadId, input: yield* decodeStored(messages) }
      const executionId = yield* workflow.executionId(payload)
      yield* (yield* RunStore.RunStore).register({ runId, threadId, executionId, workflow: name })
      // never a child of the run whose end starts it (an activity runs in its instance): its cancel must not reach this one
      yield* workflow.execute(payload, { discard: true }).pipe(
        Effect.mapInputContext((context: Context.Context<WorkflowEngine.WorkflowEngine>) =>
          Context.omit(WorkflowEngine.WorkflowInstance)(context) as Context.Context<WorkflowEngine.WorkflowEngine>
        )
      )
    })

  /**
   * Starts the run of what waits for the thread once `owner`, the run that
   * owned its messages, has ended (with no `owner`: when none owns them).
   * Idempotent per owner: the claim names the run, whose id and input stay
   * the same, and starting it again starts nothing.
   */
  const startNext = (threadId: string, owner: string | undefined) =>
    Effect.gen(function*() {
      const next = yield* (yield* RunStore.RunStore).claimNext(threadId, owner)
      if (Option.isNone(next)) return Option.none<string>()
      yield* launch(threadId, next.value.runId, next.value.messages)
      return Option.some(next.value.runId)
    })

  const layer = workflow.toLayer((payload) =>
    Effect.gen(function*() {
      const loop = yield* Agent.Agent
      const store = yield* RunStore.RunStore
      const cancelled = Effect.orDie(store.isCancelRequested(payload.runId))
      const claimSteered = (look: string) =>
        Effect.flatMap(Effect.orDie(store.claimSteered(payload.threadId, payload.runId, look)), decodeStored)
      const { flush, journal } = makeJournal(options, payload.runId, cancelled, claimSteered)
      const exit = yield* loop.run(Prompt.fromMessages(payload.input), { threadId: payload.threadId }).pipe(
        Effect.provideService(RunJournal.RunJournal, journal),
        // the checkpoints saved after the last activity are written before the run ends, failing or not
        Effect.zipLeft(flush),
        Effect.tapErrorCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.void : flush),
        Effect.mapError(asRunFailure),
        Effect.exit
      )
      // A run that ended or failed (not one suspending to wait) starts the run of what was sent and not taken in.
      if (steering && !(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause))) {
        yield* inActivity(
          "next",
          Schema.Option(Schema.String),
          Effect.orDie(startNext(payload.threadId, payload.runId))
        )
      }
      const result = yield* exit
      if (result._tag === "Interrupted") {
        return yield* new AgentRunFailed({ error: "Interrupted", description: "the run ended waiting in process" })
      }
      return { text: result.text, steps: result.steps, usage: result.usage }
    })
  )

  const start: AgentWorkflow["start"] = Effect.fn("AgentWorkflow.start")(function*(request) {
    const store = yield* RunStore.RunStore
    const runId = request.runId ?? (yield* newRunId)
    const input = Prompt.make(request.input).content
    const payload = { runId, threadId: request.threadId, input }
    const executionId = yield* workflow.executionId(payload)
    // the thread's messages are this run's to take in, and to hand on when it ends; a retried start of a run
    // registered before (perhaps ended) takes nothing back
    const record = yield* store.register({
      runId,
      threadId: request.threadId,
      executionId,
      workflow: name,
      ownsThread: steering
    })
    if (record.threadId !== request.threadId) return yield* new RunIdTaken({ runId, threadId: record.threadId })
    yield* workflow.execute(payload, { discard: true })
    return runId
  })

  const send: AgentWorkflow["send"] = Effect.fn("AgentWorkflow.send")(function*(threadId, message, sendOptions) {
    const checked = yield* checkSend(threadId, message, sendOptions?.mode, sendOptions?.idempotencyKey)
    if (!steering) {
      return yield* new InvalidSend({
        threadId: checked.threadId,
        field: "workflow",
        reason: `"${name}" was made without \`steering: true\`: its runs never take sent messages in`
      })
    }
    const store = yield* RunStore.RunStore
    // The message and, when no run owns the thread, the claim of the run that takes it in are one
    // transaction: a message is never stored without a run to take it in. From there to the run executing,
    // nothing interrupts the send; a launch that fails is done by the next send (`ensureTaken`).
    return yield* Effect.uninterruptible(Effect.gen(function*() {
      const posted = yield* store.postMessage({ ...checked, claim: true })
      if (
        Option.isSome(posted.earlier) &&
        (posted.earlier.value.mode !== checked.mode || posted.earlier.value.messages !== checked.messages)
      ) {
        return yield* new InvalidSend({
          threadId: checked.threadId,
          field: "idempotencyKey",
          reason: `was given to another message of this thread (sequence ${posted.sequence})`
        })
      }
      // a duplicate goes on as a message already stored: its run, if a crash kept it from executing, executes now
      const receipt = {
        threadId: checked.threadId,
        mode: checked.mode,
        sequence: posted.sequence,
        duplicate: Option.isSome(posted.earlier)
      }
      if (Option.isSome(posted.started)) {
        yield* launch(checked.threadId, posted.started.value.runId, posted.started.value.messages)
        return { ...receipt, delivery: "started", runId: Option.some(posted.started.value.runId) } satisfies SendReceipt
      }
      const next = Option.isSome(posted.running)
        ? yield* ensureTaken(checked.threadId, posted.running.value)
        : Option.none<string>()
      return Option.isSome(next)
        ? { ...receipt, delivery: "started", runId: next } satisfies SendReceipt
        : { ...receipt, delivery: "stored", runId: posted.running } satisfies SendReceipt
    }))
  })

  /**
   * Makes sure `runId`, the run that owns the thread's messages, will take
   * them in or hand them on, deciding from what is stored only (never from
   * what this process runs). A run a `send` started, whose sender died
   * before executing it, is executed (its input is stored: idempotent). A
   * run `start` registered whose execution is not stored yet keeps them:
   * its `start` may be between registering and executing it, in any
   * process, and the run takes them in when it starts (a `start` that died
   * there leaves them to `cancel`, `prune` or a retried `start`). A run that
   * has ended without handing them on (its `next` died, or a process died
   * between its end and `cancel`'s hand-on), or that is not registered (it
   * was pruned), hands them on now (`startNext`, idempotent per owner): the
   * run started, if any.
   */
  const ensureTaken = (threadId: string, runId: string) =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const input = yield* store.inputOf(runId)
      const stored = yield* Effect.option(store.get(runId))
      const executionId = Option.isSome(stored)
        ? stored.value.executionId
        : input.length === 0
        ? undefined
        : yield* workflow.executionId({ runId, threadId, input: yield* decodeStored(input) })
      const executed = executionId !== undefined && (yield* Effect.orDie(executionExists(executionId)))
      if (!executed && input.length > 0) {
        yield* Effect.orDie(launch(threadId, runId, input))
        return Option.none<string>()
      }
      if (!executed && Option.isSome(stored)) return Option.none<string>()
      const ended = !executed || (yield* workflow.poll(executionId!))?._tag === "Complete"
      return ended ? yield* Effect.orDie(startNext(threadId, runId)) : Option.none<string>()
    })

  const status: AgentWorkflow["status"] = Effect.fn("AgentWorkflow.status")(function*(runId) {
    const store = yield* RunStore.RunStore
    const record = yield* store.get(runId)
    const loop = yield* Agent.Agent
    // the thread id of a stored run was checked when the run started
    const snapshot = yield* Effect.catchTag(loop.thread(record.threadId), "InvalidInput", Effect.die)
    // a stored reply that no longer decodes is a corrupt journal; other defects (storage down) stay defects
    const polled = yield* Effect.catchAllDefect(
      workflow.poll(record.executionId),
      (defect) =>
        isParseError(defect) ? new JournalCorrupt({ runId, description: describe(defect) }) : Effect.die(defect)
    )
    const pending = Option.flatMap(snapshot, (thread) => thread.pending)
    const claim = polled !== undefined && polled._tag !== "Complete" && Option.isSome(pending)
      ? yield* store.decisionOf(runId, pending.value.key)
      : Option.none()
    if (Option.isSome(claim) && !claim.value.delivered) {
      yield* undeliverable(runId, claim.value)
      yield* deliverClaimed(record, claim.value)
    }
    const { failure, outcome, state } = stateOf(runId, polled, pending, claim)
    return {
      runId,
      threadId: record.threadId,
      executionId: record.executionId,
      state,
      pending: state === "Waiting" ? pending : Option.none(),
      messages: Option.match(snapshot, { onNone: () => [], onSome: (thread) => thread.state.messages }),
      outcome,
      failure
    }
  })

  /** Completes the wait `key` of a run with `decision` (the engine keeps the first) and records the delivery. */
  const deliver = (record: RunStore.RunRecord, key: string, decision: Decision) =>
    Effect.gen(function*() {
      const deferred = DurableDeferred.make(key, { success: Decision })
      const token = DurableDeferred.tokenFromExecutionId(deferred, { workflow, executionId: record.executionId })
      yield* DurableDeferred.succeed(deferred, { token, value: decision })
      yield* (yield* RunStore.RunStore).markDelivered(record.runId, key)
    })

  /** Fails with `DecisionCorrupt` when a claim that has not reached the run never can. */
  const undeliverable = (runId: string, claim: RunStore.ClaimedDecision) =>
    claim.delivered ? Effect.void : claim.decision === undefined
      ? new DecisionCorrupt({ runId, key: claim.key, description: "it was stored without the decision" })
      : decodeDecision(claim.decision).pipe(
        Effect.asVoid,
        Effect.mapError((error) =>
          new DecisionCorrupt({ runId, key: claim.key, description: ParseResult.TreeFormatter.formatErrorSync(error) })
        )
      )

  /**
   * Delivers a decision whose claimer died before delivering it. Best effort:
   * a failure is logged and the next `status` or `resume` tries again. A
   * claim stored without a decision cannot be delivered.
   */
  const deliverClaimed = (record: RunStore.RunRecord, claim: RunStore.ClaimedDecision) =>
    claim.delivered || claim.decision === undefined ? Effect.void : decodeDecision(claim.decision).pipe(
      Effect.flatMap((decision) => deliver(record, claim.key, decision)),
      Effect.catchAllCause((cause) =>
        Effect.logWarning(`could not deliver the claimed decision "${claim.key}" of run "${record.runId}"`, cause)
      )
    )

  const resume: AgentWorkflow["resume"] = Effect.fn("AgentWorkflow.resume")(function*(runId, value, { principal }) {
    const store = yield* RunStore.RunStore
    const record = yield* store.get(runId)
    const polled = yield* workflow.poll(record.executionId)
    if (polled !== undefined && polled._tag === "Complete") {
      return yield* new NotWaiting({ runId, reason: "the run has finished" })
    }
    const loop = yield* Agent.Agent
    // who may decide is asked first: the checks below tell what the run waits for
    const waiting = Option.flatMap(
      yield* Effect.catchTag(loop.thread(record.threadId), "InvalidInput", Effect.die),
      (thread) => thread.pending
    )
    if (Option.isNone(waiting)) {
      return yield* new NotWaiting({ runId, reason: "it waits for no decision (any it waited for was given)" })
    }
    const { key, middleware } = waiting.value
    // the run gets the decision as stored (JSON), here or after a restart: check and authorize that
    const encoded = yield* encodeDecision({ value, by: principal, decidedAt: yield* Clock.currentTimeMillis }).pipe(
      Effect.mapError((error) => new InvalidDecision({ runId, error: "NotJson", description: error.message }))
    )
    const decision = yield* Effect.orDie(decodeDecision(encoded))
    yield* (yield* Authorizer).authorize({
      runId,
      threadId: record.threadId,
      principal,
      pending: { key, middleware, value: waiting.value.value },
      value: decision.value
    })
    const pending = yield* loop.validateResume(record.threadId, decision.value).pipe(
      Effect.mapError((error: unknown): NotWaiting | InvalidDecision | CheckpointError =>
        error instanceof ThreadStateError
          ? new NotWaiting({ runId, reason: describe(error) })
          : error instanceof CheckpointError
          ? error
          : new InvalidDecision({ runId, error: tagOf(error), description: describe(error) })
      )
    )
    if (pending.key !== undefined && pending.key !== key) {
      return yield* new NotWaiting({ runId, reason: "the decision it waited for changed while this one was checked" })
    }
    yield* store.claimDecision(runId, key, encoded).pipe(
      // the claim that won may not have reached the run (its claimer died): deliver it, and still refuse this
      // one; a claim that can never reach it says so instead
      Effect.tapError((error) =>
        error._tag === "AlreadyDecided"
          ? Effect.flatMap(
            store.decisionOf(runId, key),
            Option.match({
              onNone: () => Effect.void,
              onSome: (claim) => Effect.zipRight(undeliverable(runId, claim), deliverClaimed(record, claim))
            })
          )
          : Effect.void
      )
    )
    yield* deliver(record, key, decision)
  })

  const discardDecision: AgentWorkflow["discardDecision"] = Effect.fn("AgentWorkflow.discardDecision")(
    function*(runId) {
      const store = yield* RunStore.RunStore
      const record = yield* store.get(runId)
      const waiting = Option.flatMap(
        yield* Effect.catchTag((yield* Agent.Agent).thread(record.threadId), "InvalidInput", Effect.die),
        (t) => t.pending
      )
      if (Option.isNone(waiting)) return false
      const claim = yield* store.decisionOf(runId, waiting.value.key)
      if (Option.isNone(claim) || claim.value.delivered) return false
      const corrupt = yield* Effect.either(undeliverable(runId, claim.value))
      if (corrupt._tag === "Left") return yield* store.releaseDecision(runId, waiting.value.key)
      yield* deliverClaimed(record, claim.value)
      return false
    }
  )

  const cancel: AgentWorkflow["cancel"] = Effect.fn("AgentWorkflow.cancel")(function*(runId) {
    const store = yield* RunStore.RunStore
    const record = yield* store.get(runId)
    // a working run reads this before its next call and stops there; a run not executed yet, before its first
    yield* store.requestCancel(runId)
    // a run whose execution is not stored (its `start` died, or has not executed it yet) has nothing to stop
    // now, and hands on what was sent
    if (!(yield* executionExists(record.executionId))) {
      if (steering) yield* Effect.orDie(startNext(record.threadId, runId))
      return
    }
    yield* workflow.interrupt(record.executionId)
    // An engine may apply the interrupt later (on its next storage poll): the run
    // must have stopped before its wait is given up, or it could wait again.
    yield* workflow.poll(record.executionId).pipe(
      Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (polled) => polled?._tag === "Complete" })
    )
    // the run that owned the wait has ended: give it up as its owner
    yield* (yield* Agent.Agent).discardPending(record.threadId, "the run was cancelled").pipe(
      Effect.provideService(RunJournal.RunJournal, owner),
      Effect.catchTag("DurableThreadError", Effect.die)
    )
    // what was sent to the thread and not taken in starts its run (a run cancelled at its wait ran no `next`)
    if (steering) yield* Effect.orDie(startNext(record.threadId, runId))
  })

  /**
   * The journal of an execution in cluster storage, when the engine keeps
   * one there (the durable layers): its storage and the address of its
   * entity of each type.
   */
  const journalOf = (executionId: string) =>
    Effect.gen(function*() {
      const sharding = yield* Effect.serviceOption(Sharding.Sharding)
      const storage = yield* Effect.serviceOption(MessageStorage.MessageStorage)
      if (Option.isNone(sharding) || Option.isNone(storage)) return Option.none()
      const entityId = EntityId.make(executionId)
      const shardId = sharding.value.getShardId(
        entityId,
        Context.get(workflow.annotations, ClusterSchema.ShardGroup)(entityId)
      )
      const addressOf = (type: string) =>
        new EntityAddress.EntityAddress({ shardId, entityType: EntityType.EntityType.make(type), entityId })
      return Option.some({ storage: storage.value, addressOf })
    })

  /** Clears the journal of an execution: the run's own entity, and the clocks of its decision timeouts. */
  const clearJournal = (executionId: string) =>
    Effect.flatMap(journalOf(executionId), (journal) =>
      Option.isNone(journal) ? Effect.void : Effect.forEach(
        [`Workflow/${name}`, "Workflow/-/DurableClock"],
        (type) => journal.value.storage.clearAddress(journal.value.addressOf(type)),
        { discard: true }
      ))

  /**
   * Whether the engine ever got the execution: `false` for a run registered
   * by a `start` that died before executing it, or whose journal was pruned.
   * The memory engine cannot tell: `true`.
   */
  const executionExists = (executionId: string) =>
    Effect.flatMap(
      journalOf(executionId),
      (journal) =>
        Option.isNone(journal) ? Effect.succeed(true) : journal.value.storage.requestIdForPrimaryKey({
          address: journal.value.addressOf(`Workflow/${name}`),
          tag: "run",
          id: ""
        }).pipe(Effect.map(Option.isSome))
    )

  /** Where a run is, for pruning: an execution the engine never got counts as ended. */
  const settledState = (record: RunStore.RunRecord) =>
    status(record.runId).pipe(
      Effect.map((current) => current.state),
      // a journal that no longer reads is what pruning is for: it counts as ended
      Effect.catchTag("JournalCorrupt", () => Effect.succeed<RunState>("Failed")),
      // a decision that cannot reach the run leaves it waiting
      Effect.catchTag("DecisionCorrupt", () => Effect.succeed<RunState>("Waiting")),
      Effect.flatMap((state) =>
        state === "Running"
          ? Effect.map(executionExists(record.executionId), (exists): RunState => exists ? "Running" : "Cancelled")
          : Effect.succeed(state)
      )
    )

  const prune: AgentWorkflow["prune"] = Effect.fn("AgentWorkflow.prune")(function*(runId, pruneOptions) {
    const store = yield* RunStore.RunStore
    const record = yield* store.get(runId)
    const state = yield* settledState(record)
    if (state === "Running" || state === "Waiting") return yield* new RunNotEnded({ runId, state })
    const deleteThread = pruneOptions?.deleteThread === true
    if (deleteThread) {
      // another run of the thread still going would lose the thread under it
      for (const other of yield* store.list({ threadId: record.threadId })) {
        if (other.runId === runId) continue
        const otherState = yield* settledState(other)
        if (otherState === "Running" || otherState === "Waiting") {
          return yield* new RunNotEnded({ runId: other.runId, state: otherState })
        }
      }
    }
    // the journal goes first: a prune cut off after it finds the run ended (no execution) and finishes
    yield* clearJournal(record.executionId)
    yield* store.delete(runId)
    if (deleteThread) yield* (yield* Agent.Agent).deleteThread(record.threadId)
  })

  const await_: AgentWorkflow["await"] = Effect.fn("AgentWorkflow.await")(function*(runId, awaitOptions) {
    const untilWaiting = awaitOptions?.untilWaiting === true
    return yield* status(runId).pipe(Effect.repeat({
      // the passthrough makes the last status the result
      schedule: Schedule.passthrough(Schedule.spaced(awaitOptions?.pollEvery ?? "100 millis")) as Schedule.Schedule<
        RunStatus,
        RunStatus
      >,
      until: (current) => current.state !== "Running" && (current.state !== "Waiting" || untilWaiting)
    }))
  })

  const watch: AgentWorkflow["watch"] = (runId) =>
    Stream.unwrapScoped(Effect.gen(function*() {
      const record = yield* (yield* RunStore.RunStore).get(runId)
      const events = yield* (yield* Agent.Agent).watch
      // the durable truth ends the stream too: a run elsewhere, or already settled, reports nothing here
      const settled = status(runId).pipe(
        Effect.repeat({ schedule: Schedule.spaced("200 millis"), while: (current) => current.state === "Running" })
      )
      return events.pipe(
        Stream.filter((event) => event.threadId === record.threadId),
        Stream.takeUntil((event) => event.event._tag === "RunEnded" || event.event._tag === "RunFailed"),
        Stream.interruptWhen(settled)
      )
    }))

  return { name, workflow, layer, start, status, resume, discardDecision, cancel, prune, await: await_, watch, send }
}
