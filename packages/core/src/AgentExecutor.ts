/**
 * The execution seam of a run. Every effect of a run that must not be
 * repeated goes through the `AgentExecutor` of the context: loading the
 * thread, each model call (with its `wrapModelCall` hooks), each tool call
 * (with its `wrapToolCall` hooks), each checkpoint, and each wait for a
 * decision after an interrupt.
 *
 * Without one in the context a run executes in process ({@link inProcess}):
 * the effects run as they are and an interrupt ends the run as
 * `Interrupted`. A durable executor (`@stepwise-agent/workflow`) journals
 * model and tool calls as workflow activities and waits for decisions
 * durably, so the same agent and middleware run unchanged on
 * `@effect/workflow`.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { CheckpointError } from "./AgentError.js"
import type * as Checkpointer from "./Checkpointer.js"

/**
 * The outcome of one model call as the loop stores it: the reply, its usage
 * and finish reason, and the names of the tools the call offered (after the
 * `wrapModelCall` hooks changed the request). A Schema, so a durable executor
 * can journal it.
 *
 * @since 0.1.0
 * @category models
 */
export const ModelCall = Schema.Struct({
  message: Prompt.AssistantMessage,
  usage: Response.Usage,
  finishReason: Response.FinishReason,
  offered: Schema.Array(Schema.String)
})

/**
 * @since 0.1.0
 * @category models
 */
export type ModelCall = typeof ModelCall.Type

/**
 * A hook interrupted the run and waits for a value.
 *
 * @since 0.1.0
 * @category models
 */
export interface Interrupt {
  /** Unique within the run; a durable executor names its wait after it. */
  readonly key: string
  readonly threadId: string
  readonly step: number
  readonly middleware: string
  readonly node: Checkpointer.PendingInterrupt["node"]
  /** What the hook asked (for example `HumanInTheLoop.ApprovalRequest`). */
  readonly value: unknown
}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace AgentExecutor {
  /**
   * Each member receives the effect the loop would run and returns the
   * effect to run instead: the same one (in process), or one that journals
   * its result and replays it.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    readonly load: (
      threadId: string,
      load: Effect.Effect<Option.Option<Checkpointer.Checkpoint>, CheckpointError>
    ) => Effect.Effect<Option.Option<Checkpointer.Checkpoint>, CheckpointError>
    readonly save: (
      checkpoint: Checkpointer.Checkpoint,
      save: Effect.Effect<void, CheckpointError>
    ) => Effect.Effect<void, CheckpointError>
    readonly modelCall: <E, R>(step: number, call: Effect.Effect<ModelCall, E, R>) => Effect.Effect<ModelCall, E, R>
    readonly toolCall: <E, R>(
      call: Prompt.ToolCallPart,
      execute: Effect.Effect<Prompt.ToolResultPart, E, R>
    ) => Effect.Effect<Prompt.ToolResultPart, E, R>
    /**
     * Called after the loop saved the interrupted state. `None` ends the run
     * as `Interrupted` (to be resumed with `AgentLoop.resume`); `Some(value)`
     * runs the interrupting hook again at once with `value`.
     */
    readonly interrupt: (interrupt: Interrupt) => Effect.Effect<Option.Option<unknown>>
    /**
     * Whether the executor waits for decisions durably itself (a workflow).
     * A thread such an executor interrupted is marked durable in its
     * checkpoint: `AgentLoop.resume`, `resumeStream` and `discardPending`
     * refuse it (`DurableThreadError`) unless run with a durable executor.
     */
    readonly durable?: boolean | undefined
  }
}

/**
 * Where a run's effects execute. Provide one around `AgentLoop.run` (or
 * `resume`) to change how that run executes.
 *
 * @example
 * ```ts
 * import { AgentExecutor, AgentLoop } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * // Counts model calls, otherwise in process.
 * let calls = 0
 * const counting = AgentExecutor.AgentExecutor.of({
 *   ...AgentExecutor.inProcess,
 *   modelCall: (_step, call) => Effect.tap(call, () => Effect.sync(() => calls++))
 * })
 * const program = AgentLoop.run("hi", { threadId: "t1" }).pipe(
 *   Effect.provideService(AgentExecutor.AgentExecutor, counting)
 * )
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class AgentExecutor extends Context.Tag("@stepwise-agent/core/AgentExecutor")<
  AgentExecutor,
  AgentExecutor.Service
>() {}

/**
 * The default executor: every effect runs as it is, and an interrupt ends
 * the run (the thread waits in its checkpoint for `AgentLoop.resume`).
 *
 * @example
 * ```ts
 * import { AgentExecutor } from "@stepwise-agent/core"
 *
 * const executor = AgentExecutor.inProcess
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const inProcess: AgentExecutor.Service = AgentExecutor.of({
  load: (_threadId, load) => load,
  save: (_checkpoint, save) => save,
  modelCall: (_step, call) => call,
  toolCall: (_call, execute) => execute,
  interrupt: () => Effect.succeedNone
})
