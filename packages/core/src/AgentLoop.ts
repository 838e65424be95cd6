/**
 * The `AgentLoop` service: run an agent on a thread, stream a run, resume an
 * interrupted one, read a thread's state. Build it with `Agent.make` or
 * `Agent.layer`.
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import type * as Prompt from "@effect/ai/Prompt"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type * as AgentError from "./AgentError.js"
import type * as AgentEvent from "./AgentEvent.js"
import type * as AgentResult from "./AgentResult.js"
import type * as AgentState from "./AgentState.js"
import type * as Checkpointer from "./Checkpointer.js"

/**
 * Options of a run.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunOptions {
  /**
   * The conversation to continue (or start): a non-empty string without
   * lone surrogates. Any other value fails `run`, `stream`, `resume` and
   * `thread` with `InvalidInput` (`deleteThread` and `discardPending` treat
   * it as an unknown thread: nothing can be stored under it).
   */
  readonly threadId: string
}

/**
 * What a thread looks like in its last checkpoint.
 *
 * @since 0.1.0
 * @category models
 */
export interface ThreadSnapshot<S> {
  readonly threadId: string
  readonly state: S
  /** Set while the thread waits for `resume`. */
  readonly pending: Option.Option<AgentResult.Interrupt>
}

/**
 * An event of one of the runs of an agent, as `watch` reports it.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunEvent<S = AgentState.AgentState, O = unknown> {
  /** Unique per run (a resume is a run of its own). */
  readonly runId: string
  readonly threadId: string
  readonly event: AgentEvent.AgentEvent<S, O>
}

/**
 * The errors of a run on an agent whose middleware fail with `E`.
 *
 * @since 0.1.0
 * @category models
 */
export type RunError<E> = E | AgentError.AgentError | AiError.AiError

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace AgentLoop {
  /**
   * An agent, typed by its state `S`, the errors `E` its middleware add and
   * its structured output `O`.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Service<S = AgentState.AgentState, E = never, O = unknown> {
    /** Appends `input` to the thread as a user message and runs until the agent finishes or interrupts. */
    readonly run: (
      input: Prompt.RawInput,
      options: RunOptions
    ) => Effect.Effect<AgentResult.AgentResult<S, O>, RunError<E>>
    /** The same run as `run`, through the same middleware path, as a stream of events ending in `RunEnded`. */
    readonly stream: (
      input: Prompt.RawInput,
      options: RunOptions
    ) => Stream.Stream<AgentEvent.AgentEvent<S, O>, RunError<E>>
    /**
     * Continues an interrupted thread: the hook that interrupted runs again
     * and receives `value`. A thread waiting in a durable run fails with
     * `DurableThreadError` (answer it through the run) and is left as it was.
     */
    readonly resume: (threadId: string, value: unknown) => Effect.Effect<AgentResult.AgentResult<S, O>, RunError<E>>
    /** `resume` as a stream of events. */
    readonly resumeStream: (
      threadId: string,
      value: unknown
    ) => Stream.Stream<AgentEvent.AgentEvent<S, O>, RunError<E>>
    /**
     * Checks `value` against the interrupt `threadId` waits on (the
     * middleware's `validateResume`) without running anything; gives the
     * pending interrupt. `resume` runs the same check first.
     */
    readonly validateResume: (
      threadId: string,
      value: unknown
    ) => Effect.Effect<Checkpointer.PendingInterrupt, RunError<E>>
    /**
     * Subscribes, for the life of the scope, to the events of every run of
     * this agent (`run`, `stream`, `resume`, `resumeStream`) that starts from
     * now on, tagged with their run and thread: for inspectors and
     * dashboards. While anybody watches, runs stream their model calls (so
     * watchers see text as it is written); while nobody does, runs cost
     * nothing extra. Closing the scope ends the stream once it has
     * delivered the events published before the close.
     */
    readonly watch: Effect.Effect<Stream.Stream<RunEvent<S, O>>, never, Scope.Scope>
    /**
     * Gives up the decision `threadId` waits for: the tool calls of its last
     * reply still without results are answered as not run (with `reason`),
     * so the thread stays well-formed, and the thread can run again. `false`
     * when it waited for nothing. A wait of a durable run is given up only
     * with a durable journal in the context (`AgentWorkflow.cancel` does);
     * otherwise `DurableThreadError`, and nothing changes.
     */
    readonly discardPending: (
      threadId: string,
      reason: string
    ) => Effect.Effect<boolean, AgentError.CheckpointError | AgentError.DurableThreadError>
    /**
     * Deletes the thread's checkpoint (its messages, state and any pending
     * decision), once a run of it in this process has ended; the thread
     * then starts afresh. Then each middleware's `onThreadDeleted` runs, to
     * free what it keeps for the thread outside the checkpoint.
     */
    readonly deleteThread: (threadId: string) => Effect.Effect<void, AgentError.CheckpointError>
    /** The thread's last checkpoint. */
    readonly thread: (
      threadId: string
    ) => Effect.Effect<Option.Option<ThreadSnapshot<S>>, AgentError.CheckpointError | AgentError.InvalidInput>
  }
}

/**
 * A tag of your own for one agent, keeping its exact types (state, middleware
 * errors, structured output) where the shared `AgentLoop` tag has `any`. Pass
 * the service type, usually the success type of the `Agent.make` effect.
 *
 * @example
 * ```ts
 * import { Agent, AgentLoop } from "@stepwise-agent/core"
 * import { Effect, Layer } from "effect"
 *
 * const makeSupport = Agent.make({ systemPrompt: "You help customers." })
 *
 * class Support extends AgentLoop.Tag("app/Support")<Support, Effect.Effect.Success<typeof makeSupport>>() {}
 *
 * const SupportLive = Layer.effect(Support, makeSupport)
 * const answer = Effect.flatMap(Support, (agent) => agent.run("Where is my order?", { threadId: "c-1" }))
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export const Tag =
  <const Id extends string>(id: Id) =>
  <Self, Service extends AgentLoop.Service<any, any, any> = AgentLoop.Service>(): Context.TagClass<Self, Id, Service> =>
    Context.Tag(id)<Self, Service>()

/**
 * The agent of an application. Its service is typed loosely (any state
 * slices, any middleware errors) so one tag serves every agent; use the value
 * `Agent.make` returns, or a tag of your own, to keep the exact types.
 *
 * @since 0.1.0
 * @category tags
 */
export class AgentLoop extends Context.Tag("@stepwise-agent/core/AgentLoop")<
  AgentLoop,
  AgentLoop.Service<any, any>
>() {}

/**
 * Runs the `AgentLoop` of the context.
 *
 * @example
 * ```ts
 * import { AgentLoop } from "@stepwise-agent/core"
 *
 * const program = AgentLoop.run("What is 2 + 2?", { threadId: "t1" })
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const run = (input: Prompt.RawInput, options: RunOptions) =>
  Effect.flatMap(AgentLoop, (agent) => agent.run(input, options))

/**
 * Resumes a thread of the `AgentLoop` of the context.
 *
 * @example
 * ```ts
 * import { AgentLoop } from "@stepwise-agent/core"
 *
 * // the value the interrupting middleware waits for (HumanInTheLoop: decisions built from its request)
 * const program = AgentLoop.resume("t1", { answer: "yes" })
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const resume = (threadId: string, value: unknown) =>
  Effect.flatMap(AgentLoop, (agent) => agent.resume(threadId, value))
