/**
 * Subagents: a `task` tool that hands a piece of work to one of several
 * named child agents (each its own model, toolkit, middleware and system
 * prompt, built with `Agent.make`), runs it on a fresh child thread of its
 * own and gives its final answer (or structured output) back as the tool's
 * result.
 *
 * The `task` calls of a reply run in the middleware's `afterModel` hook,
 * up to the agent's `toolConcurrency` at once, before the tools node runs
 * the reply's other calls. A child that interrupts (an approval of its own,
 * by `HumanInTheLoop` or any middleware) ends the parent `Interrupted` too,
 * with a {@link TaskInterrupt}: per waiting call, the call id, the agent,
 * the child thread and the child's own interrupt (itself a
 * `TaskInterrupt` when a grandchild waits). `Agent.resume` takes decisions
 * keyed by call id ({@link decide} builds them), checks each with the
 * child's own wait before anything runs, resumes each child
 * with its decision and continues the parent once none waits. The children
 * that completed meanwhile have their results in the parent's thread.
 *
 * Child runs go through the parent's journal under `task/<callId>/<n>`
 * (`RunJournal.nested`), so a durable parent records and replays its
 * children's model and tool calls as its own steps; their events reach the
 * parent's stream as `AgentEvent.SubAgentEvent`s. Limits are typed: a child
 * that delegates deeper than `maxDepth` fails with {@link DepthExceeded};
 * a child's own limits (`maxSteps`) fail the child.
 *
 * A child runs at most `timeout` (default: the agent's `toolTimeout` for the
 * `task` tool, else 10 minutes): then it is stopped and the call answered
 * with {@link SubAgentTimeout}. Children count against the limits of the
 * runs above them (`ModelCallLimit`, `ToolCallLimit`, `Budget`), whatever
 * the order of the middleware: each model and tool call of a child takes
 * from what the parent's limits have left (the children of one reply share
 * it), a child whose next model call would go over is stopped (its call is
 * answered with {@link ParentLimitReached}), a tool call over a limit gets a
 * failed result, and what the children spent is added to the parent's
 * counts. `shareLimits: false` leaves each child to its own limits.
 *
 * @since 0.1.0
 */
import * as AiError from "@effect/ai/AiError"
import type * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import type * as Agent from "@stepwise-agent/core/Agent"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as AgentEvent from "@stepwise-agent/core/AgentEvent"
import type * as AgentResult from "@stepwise-agent/core/AgentResult"
import * as AgentState from "@stepwise-agent/core/AgentState"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as RunJournal from "@stepwise-agent/core/RunJournal"
import * as Secrets from "@stepwise-agent/core/Secrets"
import type * as UiMessageStream from "@stepwise-agent/core/UiMessageStream"
import * as Usage from "@stepwise-agent/core/Usage"
import type { Answer as WaitAnswer, Any as AnyWait, Declared } from "@stepwise-agent/core/Wait"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import { globalValue } from "effect/GlobalValue"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Allowance from "./internal/allowance.js"
import * as Check from "./internal/options.js"
import { undoUnsavedAtRunEnd } from "./internal/unsavedAtRunEnd.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * A child agent the `task` tool can run: what the model reads about it, and
 * the agent (built with `Agent.make`; a child with a model of its own gets
 * its `LanguageModel` provided to its `Agent.make`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SubAgent<E = any> {
  /** Tells the model when to pick this agent (listed in the tool's description). */
  readonly description: string
  readonly agent: Agent.Service<any, E, any>
}

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<Agents extends Record<string, SubAgent>> {
  /** The agents by name (the names the model picks from). */
  readonly agents: Agents
  /** The tool's name (default `"task"`). */
  readonly toolName?: string | undefined
  /** Text before the list of agents in the tool's description. */
  readonly toolDescription?: string | undefined
  /**
   * How many levels of delegation may be nested below this agent (default
   * 2): a descendant that calls `task` at that depth fails with
   * {@link DepthExceeded}. The tightest limit of every `SubAgents` above a
   * run applies.
   */
  readonly maxDepth?: number | undefined
  /** How many children run at once (default: the agent's `toolConcurrency`). */
  readonly concurrency?: number | "unbounded" | undefined
  /**
   * What a child's failure does (a model error, its `maxSteps`): `"result"`
   * (default) answers the call with a failed result naming the error, which
   * the parent's model reads; `"fail"` fails the parent's run with
   * {@link SubAgentFailed}.
   */
  readonly onFailure?: "result" | "fail" | undefined
  /**
   * The longest a child may run (default: the agent's `toolTimeout` for the
   * tool, else 10 minutes). A child still running then is stopped (its
   * finalizers run; one that ignores interruption is left to stop on its
   * own) and what happens is what `onFailure` says of a failure, with
   * {@link SubAgentTimeout}.
   */
  readonly timeout?: Duration.DurationInput | undefined
  /**
   * Whether the children count against the limits of the runs above them
   * (`ModelCallLimit`, `ToolCallLimit`, `Budget`; default `true`). With
   * `false` a child keeps only its own limits and its calls are not counted
   * by the parent's.
   */
  readonly shareLimits?: boolean | undefined
  /** The middleware's name (default `"subAgents"`). */
  readonly name?: string | undefined
}

/**
 * The parameters of the `task` tool: which agent, and the work it is to do.
 *
 * @since 0.1.0
 * @category models
 */
export interface TaskParams {
  readonly agent: string
  readonly task: string
}

/**
 * The child run a `task` call started: its call, the agent and the child
 * thread it runs on.
 *
 * @since 0.1.0
 * @category models
 */
export const Delegation = Schema.Struct({
  callId: Schema.String,
  agent: Schema.String,
  threadId: Schema.String
})

/**
 * @since 0.1.0
 * @category models
 */
export type Delegation = typeof Delegation.Type

/**
 * One child that waits: its {@link Delegation} and the child's own
 * interrupt (what its middleware asked).
 *
 * @since 0.1.0
 * @category models
 */
export const Wait = Schema.Struct({
  ...Delegation.fields,
  interrupt: Schema.Struct({ middleware: Schema.String, key: Schema.String, value: Schema.Unknown })
})

/**
 * @since 0.1.0
 * @category models
 */
export type Wait = typeof Wait.Type

/**
 * What a parent waits on when children interrupted: each waiting child.
 * The value of the parent's `Interrupted` result.
 *
 * @since 0.1.0
 * @category models
 */
export const TaskInterrupt = Schema.TaggedStruct("TaskInterrupt", { waits: Schema.Array(Wait) })

/**
 * @since 0.1.0
 * @category models
 */
export type TaskInterrupt = typeof TaskInterrupt.Type

/**
 * A resume value: the decision for each waiting child, by call id. A child
 * that waits on its own children takes decisions of the same shape.
 *
 * @since 0.1.0
 * @category models
 */
export const Decisions: Schema.Schema<{ readonly [callId: string]: unknown }> = Schema.declare(
  // kept as given, not rebuilt key by key: effect's `Schema.Record` drops an own `__proto__` key (a call id the
  // model may write) when it copies the object
  (input): input is { readonly [callId: string]: unknown } => Predicate.isRecord(input),
  { identifier: "Decisions", description: "the decision for each waiting child, by call id" }
)

/**
 * @since 0.1.0
 * @category models
 */
export type Decisions = typeof Decisions.Type

/**
 * The wait of the middleware, as the agent's type carries it: it asks with a
 * {@link TaskInterrupt} and is answered with {@link Decisions}.
 *
 * @since 0.1.0
 * @category models
 */
export type Waits = Declared<string, TaskInterrupt, Decisions>

/**
 * A wait somewhere down the tree of children: the delegations leading to
 * it, outermost first, and the interrupt of the child that asked.
 *
 * @since 0.1.0
 * @category models
 */
export interface Leaf {
  readonly path: ReadonlyArray<Delegation>
  readonly interrupt: Wait["interrupt"]
}

/**
 * A child thread a `task` call started: the agent and the thread.
 *
 * @since 0.1.0
 * @category models
 */
export const ChildThread = Schema.Struct({
  agent: Schema.String,
  threadId: Schema.String
})

/**
 * @since 0.1.0
 * @category models
 */
export type ChildThread = typeof ChildThread.Type

/**
 * The slice of the parent's state: how many child runs and resumes it
 * started (each one's journal path is numbered by it, the same on every
 * replay), the children it waits on with what each asked (a resume reads
 * them here, never from a child's thread, so a replay sees the same), and
 * the child threads it started, which `deleteThread` of the parent's thread
 * deletes with it (a slice stored without them reads as none).
 *
 * @since 0.1.0
 * @category models
 */
export const State = Schema.Struct({
  taskRuns: Schema.Number,
  taskWaits: Schema.Array(Wait),
  taskThreads: Schema.optionalWith(Schema.Array(ChildThread), { default: () => [] }),
  /** While children wait: what the parent's limits had left for them and what they spent so far. */
  taskAllowances: Schema.optionalWith(Schema.Array(Allowance.StoredPool), { default: () => [] }),
  /**
   * What the parent's limits had left at its last model call, by limit: a
   * run resumed at another middleware's wait (an approval of `task` calls)
   * runs no limit's hook before this one starts children.
   */
  taskLimits: Schema.optionalWith(
    Schema.Array(Schema.Struct({ limit: Schema.String, allowance: Allowance.Allowance })),
    { default: () => [] }
  )
})

/**
 * @since 0.1.0
 * @category models
 */
export type State = typeof State.Type

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/** An error's tag, for messages and events (`"Error"` for one without a tag). */
const tagOf = (error: unknown): string =>
  Predicate.hasProperty(error, "_tag") && typeof error._tag === "string" ? error._tag : "Error"

/** An error as text, for events and logs: its tag, and its message with credentials scrubbed. */
const errorParts = (error: unknown): { readonly error: string; readonly reason: string } => ({
  error: tagOf(error),
  reason: Secrets.messageOf(error)
})

/**
 * Why a resume's decisions for the waiting children were refused
 * ({@link TaskDecisionError}):
 *
 * - `"UnknownCall"`: a decision names a call whose child does not wait
 *   (`callIds`; `waiting`: the calls whose children do);
 * - `"NoDecision"`: the decisions name no waiting call;
 * - `"UnknownAgent"`: a call waits on an agent this middleware does not
 *   have (`callIds`: that call; `agent`).
 *
 * @since 0.1.0
 * @category errors
 */
export const TaskDecisionErrorReason = Schema.Literal("UnknownCall", "NoDecision", "UnknownAgent")

/**
 * @since 0.1.0
 * @category errors
 */
export type TaskDecisionErrorReason = typeof TaskDecisionErrorReason.Type

/**
 * A resume with decisions the waiting children cannot take: `reason` says
 * why ({@link TaskDecisionErrorReason}). Nothing ran; the thread still waits.
 *
 * @example
 * ```ts
 * import { SubAgents } from "@stepwise-agent/middleware"
 *
 * const error = new SubAgents.TaskDecisionError({ reason: "UnknownCall", threadId: "p", callIds: ["c9"], waiting: ["c1"] })
 * error.message // 'Thread "p": no child waits for call(s) c9; waiting: c1'
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class TaskDecisionError extends Schema.TaggedError<TaskDecisionError>(
  "@stepwise-agent/middleware/SubAgents/TaskDecisionError"
)("TaskDecisionError", {
  reason: TaskDecisionErrorReason,
  threadId: Schema.String,
  /** `"UnknownCall"`: the calls no child waits for; `"UnknownAgent"`: the call waiting on it. */
  callIds: Schema.optional(Schema.Array(Schema.String)),
  /** `"UnknownCall"`: the calls whose children wait. */
  waiting: Schema.optional(Schema.Array(Schema.String)),
  /** `"UnknownAgent"`: the agent the call waits on. */
  agent: Schema.optional(Schema.String)
}) {
  /**
   * @since 0.1.0
   */
  get message(): string {
    const callIds = (this.callIds ?? []).join(", ")
    switch (this.reason) {
      case "UnknownCall":
        return `Thread "${this.threadId}": no child waits for call(s) ${callIds}; ` +
          `waiting: ${(this.waiting ?? []).join(", ") || "none"}`
      case "NoDecision":
        return `Thread "${this.threadId}": the decisions name no waiting call`
      case "UnknownAgent":
        return `Thread "${this.threadId}": call ${callIds} waits on agent "${this.agent ?? ""}", ` +
          `which this middleware does not have`
    }
  }
}

/**
 * A `task` call at a depth of delegation the middleware does not allow.
 *
 * @since 0.1.0
 * @category errors
 */
export class DepthExceeded extends Schema.TaggedError<DepthExceeded>(
  "@stepwise-agent/middleware/SubAgents/DepthExceeded"
)("DepthExceeded", { threadId: Schema.String, agent: Schema.String }) {
  /**
   * @since 0.1.0
   */
  get message(): string {
    return `Thread "${this.threadId}" called agent "${this.agent}" deeper than a SubAgents maxDepth above it allows`
  }
}

/**
 * A child ran longer than its `timeout` and was stopped: which call, agent
 * and child thread, and the timeout.
 *
 * @since 0.1.0
 * @category errors
 */
export class SubAgentTimeout extends Schema.TaggedError<SubAgentTimeout>(
  "@stepwise-agent/middleware/SubAgents/SubAgentTimeout"
)("SubAgentTimeout", {
  ...Delegation.fields,
  timeoutMillis: Schema.Number
}) {
  /**
   * @since 0.1.0
   */
  get message(): string {
    return `Subagent "${this.agent}" (call ${this.callId}) ran longer than its timeout of ${this.timeoutMillis} ms`
  }
}

/**
 * What a child's run can fail with, as {@link SubAgentFailed} carries it:
 * the child agent's errors (`Agent.RunError<E>`, `E` its middleware's), or
 * {@link SubAgentTimeout}.
 *
 * @example
 * ```ts
 * import type { AgentError } from "@stepwise-agent/core"
 * import type { SubAgents } from "@stepwise-agent/middleware"
 *
 * type Failures = SubAgents.ChildFailure // AgentError | AiError | SubAgentTimeout
 * const steps = (error: SubAgents.ChildFailure) => error._tag === "MaxStepsExceeded" ? error.maxSteps : undefined
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type ChildFailure<E = never> = Agent.RunError<E> | SubAgentTimeout

/**
 * The schema of {@link SubAgentFailed}'s `error`: the agent's own errors
 * (`AgentError.AgentError`), the provider's (`AiError.AiError`) and
 * {@link SubAgentTimeout} decode into their classes; an error of a child's
 * middleware, which this module does not know, is kept as it is.
 */
const ChildFailureSchema = Schema.Union(AgentError.AgentError, AiError.AiError, SubAgentTimeout, Schema.Unknown)

/**
 * A child's run failed (with `onFailure: "fail"`): which call, agent and
 * child thread, the child's error as it failed (credentials scrubbed), typed
 * `E`, and its message as `reason`. The middleware's error type carries `E`
 * as its children declare it ({@link ChildFailure} of their errors), so the
 * error matches by `_tag` or class without a cast.
 *
 * @example
 * ```ts
 * import { SubAgents } from "@stepwise-agent/middleware"
 *
 * const timedOut = (failed: SubAgents.SubAgentFailed) =>
 *   failed.error._tag === "SubAgentTimeout" ? failed.error.timeoutMillis : undefined
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class SubAgentFailed<out E = ChildFailure> extends Schema.TaggedError<SubAgentFailed>(
  "@stepwise-agent/middleware/SubAgents/SubAgentFailed"
)("SubAgentFailed", {
  ...Delegation.fields,
  error: ChildFailureSchema,
  reason: Schema.String
}) {
  /** The child's error, a value (not its tag as text). */
  declare readonly error: E
  /**
   * @since 0.1.0
   */
  get message(): string {
    return `Subagent "${this.agent}" (call ${this.callId}, thread "${this.threadId}") failed: ${
      tagOf(this.error)
    }: ${this.reason}`
  }
}

/**
 * A child was stopped before a model call because a limit of a run above it
 * (`ModelCallLimit`, `Budget`) had nothing left. The call that started it is
 * answered with a failed result saying so, whatever `onFailure` says; the
 * parent's limit then ends (or fails) the parent's run at its next check.
 *
 * @since 0.1.0
 * @category errors
 */
export class ParentLimitReached extends Schema.TaggedError<ParentLimitReached>(
  "@stepwise-agent/middleware/SubAgents/ParentLimitReached"
)("ParentLimitReached", { threadId: Schema.String, reason: Schema.String }) {
  /**
   * @since 0.1.0
   */
  get message(): string {
    return `Thread "${this.threadId}" was stopped: ${this.reason}`
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export type SubAgentsError = TaskDecisionError | DepthExceeded | SubAgentFailed

/**
 * @since 0.1.0
 * @category errors
 */
export const SubAgentsError: Schema.Union<
  [typeof TaskDecisionError, typeof DepthExceeded, typeof SubAgentFailed]
> = Schema.Union(TaskDecisionError, DepthExceeded, SubAgentFailed)

// -----------------------------------------------------------------------------
// combinators
// -----------------------------------------------------------------------------

const decodeTaskInterrupt = Schema.decodeUnknownOption(TaskInterrupt)

/**
 * Every wait below an interrupt, with its path: a parent's
 * {@link TaskInterrupt} is opened down to the children that asked; any
 * other interrupt is one leaf with an empty path.
 *
 * @example
 * ```ts
 * import { SubAgents } from "@stepwise-agent/middleware"
 * import type { AgentResult } from "@stepwise-agent/core"
 *
 * declare const interrupt: AgentResult.Interrupt // an Interrupted result's `interrupt`
 * for (const leaf of SubAgents.leaves(interrupt)) {
 *   console.log(leaf.path.map((step) => step.agent).join(" > "), leaf.interrupt.middleware)
 * }
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const leaves = (
  // `unknown`: any agent's interrupt; a `TaskInterrupt` is recognised by decoding, down any depth of children
  interrupt: { readonly middleware: string; readonly key: string; readonly value: unknown }
) => {
  const out: Array<Leaf> = []
  const walk = (path: ReadonlyArray<Delegation>, at: Wait["interrupt"]) =>
    Option.match(decodeTaskInterrupt(at.value), {
      onNone: () => void out.push({ path, interrupt: at }),
      onSome: (request) => {
        for (const wait of request.waits) {
          walk([...path, { callId: wait.callId, agent: wait.agent, threadId: wait.threadId }], wait.interrupt)
        }
      }
    })
  walk([], { middleware: interrupt.middleware, key: interrupt.key, value: interrupt.value })
  return out as ReadonlyArray<Leaf>
}

/**
 * The resume value for an interrupt, from a decision per waiting leaf
 * (see {@link leaves}): `f` answers each leaf (or `undefined` to leave it
 * waiting), and the answers are routed by call id down each path.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { HumanInTheLoop, SubAgents } from "@stepwise-agent/middleware"
 * import { Effect, Option, Schema } from "effect"
 *
 * declare const agent: Agent.Service<any, any>
 * const program = Effect.gen(function*() {
 *   const result = yield* agent.run("Clean up the repository", { threadId: "t1" })
 *   if (result._tag !== "Interrupted") return result
 *   // approve every call any child asks about
 *   return yield* agent.resume(
 *     "t1",
 *     SubAgents.decide(result.interrupt, (leaf) =>
 *       Option.getOrUndefined(Option.map(
 *         Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(leaf.interrupt.value),
 *         HumanInTheLoop.approveAll
 *       )))
 *   )
 * })
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const decide: {
  /** An interrupt of this middleware: the decisions by call id. */
  <A>(
    interrupt: { readonly middleware: string; readonly key: string; readonly value: TaskInterrupt },
    f: (leaf: Leaf) => A
  ): Decisions
  /** Any interrupt: the decisions by call id, or `f`'s answer when no child waits (another middleware asked). */
  <A>(interrupt: { readonly middleware: string; readonly key: string; readonly value: unknown }, f: (leaf: Leaf) => A):
    | Decisions
    | A
} = <A>(
  interrupt: { readonly middleware: string; readonly key: string; readonly value: unknown },
  f: (leaf: Leaf) => A
): Decisions | A => {
  const route = (path: ReadonlyArray<Delegation>, at: Wait["interrupt"]): Decisions | A | undefined =>
    Option.match(decodeTaskInterrupt(at.value), {
      onNone: () => f({ path, interrupt: at }),
      onSome: (request) => {
        const decided: Array<readonly [string, unknown]> = []
        for (const wait of request.waits) {
          const decision = route(
            [...path, { callId: wait.callId, agent: wait.agent, threadId: wait.threadId }],
            wait.interrupt
          )
          if (decision !== undefined) decided.push([wait.callId, decision])
        }
        // a child none of whose waits is answered is left out (it goes on waiting); the top gives what it has.
        // (`fromEntries` defines each call id as an own key, `__proto__` included, as an assignment would not.)
        return decided.length === 0 && path.length > 0 ? undefined : Object.fromEntries(decided)
      }
    })
  return route([], { middleware: interrupt.middleware, key: interrupt.key, value: interrupt.value }) as Decisions | A
}

/** The id a waiting leaf's tool call gets in a chat UI: prefixed with the calls leading to it. */
const uiCallId = (leaf: Leaf, toolCallId: string) =>
  leaf.path.length === 0 ? toolCallId : `${leaf.path.map((step) => step.callId).join("/")}/${toolCallId}`

/**
 * A chat UI's approvals (`UiMessageStream.toHttpApp({ approvals })`) that
 * also see through subagents: each waiting leaf's requests, as `inner`
 * reads them (e.g. `HumanInTheLoop.uiApprovals`), shown as tool parts whose
 * ids are prefixed with the calls leading to them (`c1/call_7`); the
 * answers are routed back down each path ({@link decide}). `None` when a
 * leaf is not an approval `inner` reads. It answers with this middleware's
 * decisions, or `inner`'s for an interrupt of another middleware.
 *
 * @example
 * ```ts
 * import type { Agent } from "@stepwise-agent/core"
 * import { UiMessageStream } from "@stepwise-agent/core"
 * import { HumanInTheLoop, SubAgents } from "@stepwise-agent/middleware"
 *
 * declare const agent: Agent.Service<any, any>
 * const chat = UiMessageStream.toHttpApp(agent, {
 *   approvals: SubAgents.uiApprovals(HumanInTheLoop.uiApprovals),
 *   authorize: UiMessageStream.allowAll // demos only: check the user in a real app
 * })
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const uiApprovals = <D>(
  inner: UiMessageStream.Approvals<AnyWait, D>
): UiMessageStream.Approvals<Waits, Decisions> & UiMessageStream.Approvals<AnyWait, Decisions | D> => {
  const approvals: UiMessageStream.Approvals<AnyWait, Decisions | D> = {
    requests: (interrupt) => {
      const all: Array<UiMessageStream.ApprovalRequest> = []
      for (const leaf of leaves(interrupt)) {
        const requests = inner.requests(leaf.interrupt)
        if (Option.isNone(requests)) return Option.none()
        for (const request of requests.value) {
          all.push({
            ...request,
            approvalId: uiCallId(leaf, request.approvalId),
            toolCallId: uiCallId(leaf, request.toolCallId)
          })
        }
      }
      return Option.some(all)
    },
    resumeValue: (interrupt, responses) => {
      const decided = decide(interrupt, (leaf) => {
        // the leaf's own requests, matched by the ids `requests` gave them (a provider's id may hold a "/")
        const asked = Option.match(inner.requests(leaf.interrupt), {
          onNone: () => new Set<string>(),
          onSome: (requests) => new Set(requests.map((request) => uiCallId(leaf, request.toolCallId)))
        })
        const prefix = uiCallId(leaf, "")
        const mine = responses.filter((response) => asked.has(response.request.toolCallId))
        if (mine.length === 0) return undefined
        return inner.resumeValue(
          leaf.interrupt,
          mine.map((response) => ({
            ...response,
            request: {
              ...response.request,
              approvalId: response.request.approvalId.slice(prefix.length),
              toolCallId: response.request.toolCallId.slice(prefix.length)
            }
          }))
        )
      })
      // another middleware's interrupt none of the responses answers: `inner` says what that gives
      return decided === undefined ? inner.resumeValue(interrupt, responses) : decided
    }
  }
  // read for this middleware's waits alone, it answers with its decisions (`decide` on its interrupt)
  return approvals as UiMessageStream.Approvals<Waits, Decisions> & UiMessageStream.Approvals<AnyWait, Decisions | D>
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/**
 * How many more levels of delegation the running fiber may start: unlimited
 * in a top-level run; a child gets one less than the tightest `maxDepth`
 * above it.
 */
const remainingDepth: FiberRef.FiberRef<number> = globalValue(
  Symbol.for("@stepwise-agent/middleware/SubAgents/remainingDepth"),
  () => FiberRef.unsafeMake(Number.POSITIVE_INFINITY)
)

const defaultToolDescription = "Hands a self-contained task to a subagent, which works on it in a fresh " +
  "conversation of its own (it sees only the task you write, so include everything it needs) and answers " +
  "with its final result. Independent tasks can run in parallel: call the tool several times in one reply. " +
  "Available agents:"

const AgentService = Schema.declare(
  (u: unknown): u is Agent.Service<any, any, any> =>
    Predicate.hasProperty(u, "run") && typeof u.run === "function" &&
    Predicate.hasProperty(u, "resume") && typeof u.resume === "function",
  { identifier: "an agent (Agent.make)" }
)

const OptionsSchema = Schema.Struct({
  agents: Schema.Record({
    key: Check.NonEmpty,
    value: Schema.Struct({ description: Check.NonBlank, agent: AgentService })
  }).pipe(Schema.filter((agents) => Object.keys(agents).length > 0 || "must name at least one agent")),
  toolName: Schema.optional(Check.NonEmpty),
  toolDescription: Schema.optional(Check.NonBlank),
  maxDepth: Schema.optional(Check.AtLeastOne),
  concurrency: Schema.optional(Schema.Union(Schema.Literal("unbounded"), Check.AtLeastOne)),
  onFailure: Schema.optional(Schema.Literal("result", "fail")),
  timeout: Schema.optional(Check.DurationInput.pipe(Schema.filter((input) => {
    const duration = Duration.decode(input)
    return (Duration.greaterThan(duration, Duration.zero) && Duration.isFinite(duration)) ||
      "must be a finite duration above zero"
  }))),
  shareLimits: Schema.optional(Schema.Boolean),
  name: Schema.optional(Check.NonEmpty)
})

/** The errors a child agent's run or `validateResume` fails with. */
type ChildError<Agents> = Agents[keyof Agents] extends infer A
  ? A extends { readonly agent: Agent.Service<any, infer E, any> } ? Agent.RunError<E> : never
  : never

/** What one child run or resume came to. */
type Outcome =
  | { readonly _tag: "Done"; readonly result: Prompt.ToolResultPart }
  | { readonly _tag: "Waits"; readonly wait: Wait }

/** The failed result of a call the middleware cannot run. */
const refused = (call: Prompt.ToolCallPart, reason: string): Outcome => ({
  _tag: "Done",
  result: Middleware.toolResult(call, reason, { isFailure: true })
})

/**
 * The middleware: the `task` tool, its calls run in `afterModel`, the
 * children's waits surfaced as the parent's and resumed through it. Put a
 * `HumanInTheLoop` that approves `task` calls after it in the list (after*
 * hooks run in reverse list order, so the approval comes first).
 *
 * @example
 * ```ts
 * import { LanguageModel, Tool, Toolkit } from "@effect/ai"
 * import { Agent } from "@stepwise-agent/core"
 * import { HumanInTheLoop, SubAgents } from "@stepwise-agent/middleware"
 * import { Effect, Schema } from "effect"
 *
 * const FileTools = Toolkit.make(Tool.make("delete_file", { parameters: { path: Schema.String } }))
 * declare const cheapModel: LanguageModel.Service
 *
 * const program = Effect.gen(function*() {
 *   const cleaner = yield* Agent.make({
 *     systemPrompt: "You delete files the user no longer needs.",
 *     toolkit: FileTools,
 *     middleware: [HumanInTheLoop.middleware({ toolkit: FileTools, interruptOn: { delete_file: true } })]
 *   }).pipe(
 *     Effect.provideService(LanguageModel.LanguageModel, cheapModel),
 *     Effect.provide(FileTools.toLayer({ delete_file: () => Effect.void }))
 *   )
 *   const lead = yield* Agent.make({
 *     middleware: [SubAgents.middleware({ agents: { cleaner: { description: "Deletes files", agent: cleaner } } })]
 *   })
 *   return yield* lead.run("Free some disk space", { threadId: "t1" })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = <const Agents extends Record<string, SubAgent>>(
  options: Options<Agents>
): Middleware.Middleware<
  State,
  TaskDecisionError | DepthExceeded | SubAgentFailed<ChildError<Agents> | SubAgentTimeout> | ChildError<Agents>,
  never,
  AgentError.InvalidOptions,
  Waits
> => Check.middlewareOf("SubAgents", OptionsSchema, options, (checked) => build(checked as Options<Agents>)) as any

/** The value of `key` of `record` if it is the record's own (a name such as `constructor` is data). */
const ownValue = <A>(record: Readonly<Record<string, A>>, key: string): A | undefined =>
  Object.hasOwn(record, key) ? record[key] : undefined

/**
 * `effect` failing with `onTimeout()` once `duration` passed: then it is told
 * to stop and left to do so, so work that ignores interruption (a call that
 * never answers and never stops) does not hold the caller. An interruption
 * from outside waits for it to stop, as usual.
 */
const leftAtTimeout = <A, E, R, E2>(
  effect: Effect.Effect<A, E, R>,
  duration: Duration.Duration,
  onTimeout: () => E2
): Effect.Effect<A, E | E2, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(
      Effect.forkDaemon(restore(effect)),
      (fiber) =>
        restore(Effect.timeoutOption(Fiber.join(fiber), duration)).pipe(
          Effect.onInterrupt(() => Fiber.interrupt(fiber)),
          Effect.flatMap(Option.match({
            onNone: () => Effect.zipRight(Fiber.interruptFork(fiber), Effect.fail(onTimeout())),
            onSome: Effect.succeed
          }))
        )
    )
  )

/** How long a child may run when neither `timeout` nor the agent's `toolTimeout` says. */
const defaultTimeout = Duration.minutes(10)

/**
 * The journal of a child's run: each of its model and tool calls admitted
 * against `pools` (the limits of the runs above it) and counted in them. A
 * model call none is left for fails the child with {@link ParentLimitReached};
 * a tool call over a limit is answered with a failed result without running.
 * The steps of the child's own children (nested keys) are checked by the
 * journal the child gives them.
 */
const guarded = (
  journal: RunJournal.Service,
  pools: ReadonlyArray<Allowance.Pool>,
  threadId: string
): RunJournal.Service =>
  RunJournal.RunJournal.of({
    step: (key, effect) => {
      switch (key._tag) {
        case "Model":
          return Effect.suspend(() => {
            const refused = Allowance.admitModelCall(pools)
            if (refused !== undefined) return Effect.fail(new ParentLimitReached({ threadId, reason: refused }) as any)
            return Effect.tap(journal.step(key, effect), (call) =>
              Effect.sync(() => Allowance.countUsage(pools, Usage.read(key.result.from(call).usage))))
          })
        case "Tool":
          return Effect.suspend(() => {
            const blocked = Allowance.admitToolCall(pools, key.call)
            return blocked === undefined
              ? journal.step(key, effect)
              : Effect.succeed(key.result.to(Middleware.toolResult(key.call, { error: blocked }, { isFailure: true })))
          })
        default:
          return journal.step(key, effect)
      }
    },
    await: journal.await,
    durable: journal.durable,
    // the child's decisions still reach the recorder of the run above
    ...(journal.witness === undefined ? {} : { witness: journal.witness })
  })

const build = (options: Options<Record<string, SubAgent>>) => {
  const agents = options.agents
  const names = Object.keys(agents) as [string, ...Array<string>]
  const ownTimeout = options.timeout === undefined ? undefined : Duration.decode(options.timeout)
  const shareLimits = options.shareLimits !== false
  const toolName = options.toolName ?? "task"
  const maxDepth = options.maxDepth ?? 2
  const onFailure = options.onFailure ?? "result"
  const description = `${options.toolDescription ?? defaultToolDescription}\n` +
    names.map((name) => `- ${name}: ${agents[name]!.description}`).join("\n")
  const params = { agent: Schema.Literal(...names), task: Schema.String }
  const tool = Tool.make(toolName, { description, parameters: params, success: Schema.Unknown, failure: Schema.String })
  const kit = Toolkit.make(tool)
  // The hook answers every call before the tools node runs; a call that reaches the handler was skipped by a
  // jump past this middleware's afterModel.
  const handled = Effect.flatMap(
    kit.toContext({
      [toolName]: () => Effect.fail(`not run: "${toolName}" calls run in the ${options.name ?? "subAgents"} middleware`)
    } as any),
    (context) => Effect.provide(kit, context)
  )
  const decodeParams = Schema.decodeUnknownEither(Schema.Struct(params))

  /** What a child's run came to, for the parent. */
  const outcomeOf = (
    call: Prompt.ToolCallPart,
    delegation: Delegation,
    ran: Effect.Effect<AgentResult.AgentResult<any, any>, unknown>
  ) =>
    Effect.matchEffect(ran, {
      onFailure: (error) => {
        const parts = errorParts(error)
        if (error instanceof ParentLimitReached) {
          return Effect.as(
            Middleware.report(`${delegation.agent} stopped: ${error.reason}`, { ...delegation, reason: error.reason }),
            refused(call, `The subagent "${delegation.agent}" was stopped: ${error.reason}`)
          )
        }
        return Effect.zipRight(
          Middleware.report(`${delegation.agent} failed: ${parts.error}`, { ...delegation, ...parts }),
          onFailure === "fail"
            ? Effect.fail(new SubAgentFailed({ ...delegation, error: Secrets.scrubError(error), reason: parts.reason }))
            : Effect.succeed(
              refused(call, `The subagent "${delegation.agent}" failed: ${parts.error}: ${parts.reason}`)
            )
        )
      },
      onSuccess: (result): Effect.Effect<Outcome> => {
        if (result._tag === "Interrupted") {
          return Effect.as(
            Middleware.report(`${delegation.agent} waits (${result.interrupt.middleware})`, { ...delegation }),
            { _tag: "Waits", wait: { ...delegation, interrupt: result.interrupt } } as const
          )
        }
        const answer = Option.getOrElse(result.output, () => result.text)
        return Effect.as(
          Middleware.report(`${delegation.agent} completed in ${result.steps} step(s)`, { ...delegation }),
          { _tag: "Done", result: Middleware.toolResult(call, answer) } as const
        )
      }
    })

  /**
   * The `task` call `call` as a child's run (or resume), journaled under
   * `path`, one level deeper. While someone watches the parent, the call is
   * reported like any tool call (`ToolCallStarted`, then `ToolCallCompleted`
   * once it has its result) and the child's events between, as
   * `SubAgentEvent`s; the child then runs streamed.
   */
  const delegate = (
    call: Prompt.ToolCallPart,
    delegation: Delegation,
    path: string,
    start: {
      readonly run: Effect.Effect<AgentResult.AgentResult<any, any>, unknown>
      readonly stream: Stream.Stream<AgentEvent.AgentEvent<any, any>, unknown>
    },
    limits: { readonly pools: ReadonlyArray<Allowance.Pool>; readonly timeout: Duration.Duration }
  ) =>
    Effect.gen(function*() {
      const outer = Option.getOrElse(yield* Effect.serviceOption(RunJournal.RunJournal), () => RunJournal.inProcess)
      const remaining = Math.min(yield* FiberRef.get(remainingDepth), maxDepth)
      const sink = yield* Middleware.eventSink
      const journal = limits.pools.length === 0
        ? RunJournal.nested(outer, path)
        : guarded(RunJournal.nested(outer, path), limits.pools, delegation.threadId)
      const timeoutMillis = Duration.toMillis(limits.timeout)
      // in process (and no limit above) the child's journal is the default one: nothing to provide
      const nested = <A, E>(effect: Effect.Effect<A, E>) =>
        (journal === RunJournal.inProcess
          ? effect
          : Effect.provideService(effect, RunJournal.RunJournal, journal)).pipe(
            Effect.locally(remainingDepth, remaining - 1),
            Effect.locally(Allowance.CurrentPools, limits.pools),
            Allowance.ownBoard,
            (child) => leftAtTimeout(child, limits.timeout, () => new SubAgentTimeout({ ...delegation, timeoutMillis }))
          )
      if (sink === undefined) return yield* outcomeOf(call, delegation, nested(start.run))
      sink(AgentEvent.ToolCallStarted({ call }))
      const started = yield* Clock.currentTimeMillis
      const watched = Effect.flatMap(
        Stream.runFold(start.stream, undefined as AgentResult.AgentResult<any, any> | undefined, (ended, event) => {
          sink(AgentEvent.SubAgentEvent({ ...delegation, event }))
          return event._tag === "RunEnded" ? event.result : ended
        }),
        (ended) =>
          ended === undefined ? Effect.dieMessage("a subagent's stream ended without RunEnded") : Effect.succeed(ended)
      )
      const outcome = yield* outcomeOf(call, delegation, nested(watched))
      if (outcome._tag === "Done") {
        const durationMillis = (yield* Clock.currentTimeMillis) - started
        sink(AgentEvent.ToolCallCompleted({ result: outcome.result, durationMillis }))
      }
      return outcome
    })

  const afterModel = (context: Middleware.HookContext<State, Decisions>) =>
    Effect.gen(function*() {
      const replyCalls = AgentState.pendingToolCalls(context.messages)?.calls ?? []
      const isTask = (call: Prompt.ToolCallPart) => call.name === toolName
      const pending = replyCalls.filter(isTask)
      if (pending.length === 0) return undefined
      const byId = new Map(pending.map((call) => [call.id, call]))
      let runs = context.state.taskRuns
      const threads = context.state.taskThreads.slice()
      const jobs: Array<Effect.Effect<Outcome, SubAgentsError>> = []
      // The limits of the runs above this one, and this run's own, as pools its children share. A resumed
      // run goes on with the pools it stored when its children began to wait.
      const inherited = shareLimits ? yield* FiberRef.get(Allowance.CurrentPools) : []
      const posted = shareLimits ? yield* Allowance.allowancesOf(context.threadId) : new Map()
      const own = !shareLimits
        ? []
        : context.state.taskAllowances.length > 0 && Option.isSome(context.resume)
        ? context.state.taskAllowances.map(Allowance.restore)
        : posted.size > 0
        ? Array.from(posted, ([limit, allowance]) => Allowance.poolOf(limit, allowance, context.usage))
        // a run resumed at another middleware's wait: the limits posted nothing in this pass, so what they had
        // left at the model call whose reply this is
        : context.state.taskLimits.map(({ allowance, limit }) => Allowance.poolOf(limit, allowance, context.usage))
      const pools = [...inherited, ...own]
      const limits = {
        pools,
        timeout: ownTimeout ?? context.toolTimeout?.(toolName) ?? defaultTimeout
      }
      if (Option.isSome(context.resume)) {
        const decisions = Option.getOrElse(context.resume, () => ({} as Decisions))
        for (const wait of context.state.taskWaits) {
          const call = byId.get(wait.callId)
          const child = ownValue(agents, wait.agent)
          if (call === undefined || child === undefined) continue
          if (!Object.hasOwn(decisions, wait.callId)) {
            // not decided this time: it still waits on what it asked
            jobs.push(Effect.succeed({ _tag: "Waits", wait }))
            continue
          }
          const delegation = { callId: wait.callId, agent: wait.agent, threadId: wait.threadId }
          const decision = decisions[wait.callId]
          jobs.push(delegate(call, delegation, `task/${call.id}/${++runs}`, {
            run: child.agent.resume(wait.threadId, decision),
            stream: child.agent.resumeStream(wait.threadId, decision)
          }, limits))
        }
      } else {
        const remaining = Math.min(yield* FiberRef.get(remainingDepth), maxDepth)
        // The reply's calls against the tool call limits, in order: a limit that ends or fails the run decides
        // itself (no child runs); the task calls over a limit get its failed result. The limits above count only
        // the task calls here (this run's other calls reach them through its journal).
        const reply = Allowance.decideReply(own, replyCalls, isTask)
        if (reply.stops) return undefined
        const above = Allowance.decideReply(inherited, pending, isTask)
        for (const call of pending) {
          const blocked = reply.blocked.get(call.id) ?? above.blocked.get(call.id)
          if (blocked !== undefined) {
            // answered as the limit answers a call over it
            const result = Middleware.toolResult(call, { error: blocked }, { isFailure: true })
            jobs.push(Effect.succeed({ _tag: "Done", result }))
            continue
          }
          const decoded = decodeParams(call.params)
          if (Either.isLeft(decoded)) {
            const agent = Predicate.hasProperty(call.params, "agent") ? String(call.params.agent) : undefined
            jobs.push(Effect.succeed(refused(
              call,
              agent !== undefined && !names.includes(agent)
                ? `Unknown agent "${agent}". Available agents: ${names.join(", ")}`
                : `Invalid arguments for "${toolName}": expected { agent: one of ${names.join(", ")}, task: text }`
            )))
            continue
          }
          if (remaining < 1) {
            return yield* new DepthExceeded({ threadId: context.threadId, agent: decoded.right.agent })
          }
          const n = ++runs
          const delegation = {
            callId: call.id,
            agent: decoded.right.agent,
            threadId: `${context.threadId}/task/${call.id}/${n}`
          }
          threads.push({ agent: delegation.agent, threadId: delegation.threadId })
          const child = ownValue(agents, delegation.agent)!.agent
          const input = decoded.right.task
          jobs.push(delegate(call, delegation, `task/${call.id}/${n}`, {
            run: child.run(input, { threadId: delegation.threadId }),
            stream: child.stream(input, { threadId: delegation.threadId })
          }, limits))
        }
      }
      // the child threads this reply starts are deleted when the run ends unless a save records them (the run
      // failed or was interrupted first, or its thread was deleted or made again): a run from the last save would
      // start the same child threads again, and a deleted thread's children would stay
      const started = threads.slice(context.state.taskThreads.length)
      yield* undoUnsavedAtRunEnd(
        context.threadId,
        started.map((child) => child.threadId),
        (saved) => ((saved as Partial<State>).taskThreads ?? []).map((child) => child.threadId),
        (unsaved) => deleteChildren(started.filter((child) => unsaved.includes(child.threadId)))
      )
      // one child needs no fiber of its own (a concurrent `Effect.all` of one costs ~80 KiB)
      const outcomes = jobs.length === 1
        ? [yield* jobs[0]!]
        : yield* Effect.all(jobs, { concurrency: options.concurrency ?? context.toolConcurrency ?? 8 })
      const results: Array<Prompt.ToolResultPart> = []
      const waits: Array<Wait> = []
      for (const outcome of outcomes) {
        if (outcome._tag === "Done") results.push(outcome.result)
        else waits.push(outcome.wait)
      }
      const messages = results.length === 0 ? undefined : AgentState.appendToolResults(context.messages, results)
      const state = {
        taskRuns: runs,
        taskWaits: waits,
        taskThreads: threads,
        // while children wait, what they spent stays with the pools (the run ends here); else the limits count it
        taskAllowances: waits.length === 0 ? [] : own.map(Allowance.store)
      }
      if (waits.length === 0) {
        yield* Allowance.postSpent(context.threadId, Allowance.spentOf(own))
        return { messages, state }
      }
      const interrupt: TaskInterrupt = { _tag: "TaskInterrupt", waits }
      return { messages, state, interrupt, interruptKey: `${toolName}/${waits.map((w) => w.callId).join(",")}` }
    })

  /** Checks decisions against the children that wait: each goes to a waiting child, which checks it in turn. */
  const check = ({ decision, request, threadId }: WaitAnswer<TaskInterrupt, Decisions>) =>
    Effect.gen(function*() {
      const waiting = request.waits.map((wait) => wait.callId)
      const unknown = Object.keys(decision).filter((id) => !waiting.includes(id))
      if (unknown.length > 0) {
        return yield* new TaskDecisionError({ reason: "UnknownCall", threadId, callIds: unknown, waiting })
      }
      if (Object.keys(decision).length === 0) return yield* new TaskDecisionError({ reason: "NoDecision", threadId })
      // each decision is checked by the child it goes to, before any child runs
      yield* Effect.forEach(
        request.waits.filter((wait) => Object.hasOwn(decision, wait.callId)),
        (wait) => {
          const child = ownValue(agents, wait.agent)
          return child === undefined
            ? new TaskDecisionError({ reason: "UnknownAgent", threadId, callIds: [wait.callId], agent: wait.agent })
            : child.agent.validateResume(wait.threadId, decision[wait.callId])
        },
        { discard: true }
      )
    })

  /**
   * The texts a person typed in the decisions, as the child each goes to
   * names them (its waiting middleware's own `personTexts`, a grandchild's
   * through its child): the parent's `validateResume` passes them through
   * the parent's input hooks, so a durable parent stores them redacted.
   */
  const personTexts = (
    decisions: Decisions,
    replace: (text: string) => string,
    request: TaskInterrupt | undefined
  ): Decisions => {
    const out: Record<string, unknown> = { ...decisions }
    for (const wait of request?.waits ?? []) {
      const child = ownValue(agents, wait.agent)
      if (child === undefined || !Object.hasOwn(decisions, wait.callId)) continue
      // (defined, not assigned: a call id may be `__proto__`)
      Object.defineProperty(out, wait.callId, {
        value: child.agent.personTexts(wait.interrupt, decisions[wait.callId], replace),
        enumerable: true,
        writable: true,
        configurable: true
      })
    }
    return out
  }

  /** Deletes child threads (theirs in turn, through their own middleware); a failure is logged. */
  const deleteChildren = (children: ReadonlyArray<ChildThread>) =>
    Effect.forEach(
      children,
      ({ agent, threadId }) => {
        const child = ownValue(agents, agent)
        return child === undefined ? Effect.void : child.agent.deleteThread(threadId).pipe(
          Effect.catchAllCause((cause) => {
            const parts = errorParts(Cause.squash(cause))
            return Effect.logWarning(
              `SubAgents: the child thread "${threadId}" of agent "${agent}" was not deleted: ${parts.error}: ${parts.reason}`
            )
          })
        )
      },
      { discard: true }
    )

  /**
   * Deletes the child threads a deleted thread started: those under its own id (a fork starts with its source's
   * list, whose children stay the source's).
   */
  const onThreadDeleted = (threadId: string, state: Option.Option<State>) =>
    deleteChildren(
      Option.match(state, {
        onNone: () => [],
        onSome: (slice) => slice.taskThreads.filter((child) => child.threadId.startsWith(`${threadId}/task/`))
      })
    )

  /**
   * Keeps what the limits posted for this model call in the slice (see
   * `taskLimits`): every `beforeModel` hook has run by then, whatever the
   * order of the middleware.
   */
  const wrapModelCall = (request: Middleware.ModelRequest, next: Middleware.NextModelCall) =>
    Effect.flatMap(
      next(request),
      (response) =>
        Effect.map(Allowance.allowancesOf(request.threadId), (posted) =>
          posted.size === 0 && !(request.state.taskLimits as ReadonlyArray<unknown> | undefined)?.length
            ? response
            : {
              ...response,
              state: { taskLimits: Array.from(posted, ([limit, allowance]) => ({ limit, allowance })) }
            })
    )

  return Middleware.make({
    name: options.name ?? "subAgents",
    state: {
      schema: State,
      initial: { taskRuns: 0, taskWaits: [], taskThreads: [], taskAllowances: [], taskLimits: [] }
    },
    tools: handled,
    wrapModelCall: shareLimits ? wrapModelCall : undefined,
    wait: { request: TaskInterrupt, decision: Decisions, check, personTexts },
    afterModel,
    onThreadDeleted
  })
}
