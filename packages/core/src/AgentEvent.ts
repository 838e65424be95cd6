/**
 * What a streamed run reports as it goes: text as the model writes it, each
 * model response, each tool call and result, state updates, middleware
 * decisions, and the final result.
 *
 * @since 0.1.0
 */
import type * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Data from "effect/Data"
import * as Option from "effect/Option"
import type * as AgentResult from "./AgentResult.js"
import type * as AgentState from "./AgentState.js"
import type * as ToolEffect from "./ToolEffect.js"
import type * as Wait from "./Wait.js"

/**
 * @since 0.1.0
 * @category models
 */
export type AgentEvent<S = AgentState.AgentState, O = unknown, W extends Wait.Any = Wait.Any> = Variants<
  S,
  O,
  Wait.Interrupt<W>
>

/** The variants, typed by the interrupt of `RunEnded`'s result (so the constructors infer it). */
type Variants<S, O, I> = Data.TaggedEnum<{
  /** A run starts (`resumed` when it continues an interrupted thread). */
  RunStarted: { readonly threadId: string; readonly resumed: boolean }
  /**
   * Messages sent with `Agent.send` joined the thread: `"steer"` ones before
   * this run's model step `step` (after the `transformInput` hooks, before
   * the `beforeModel` hooks), or, as the input of a run `send` started, at
   * its start (`mode` as sent; `step` is the run's first).
   */
  MessageReceived: {
    readonly mode: "steer" | "queue"
    readonly step: number
    readonly messages: ReadonlyArray<Prompt.Message>
  }
  /** A model call starts. */
  ModelCallStarted: { readonly step: number; readonly messageCount: number; readonly toolNames: ReadonlyArray<string> }
  /**
   * The request as the model gets it, at the end of the `wrapModelCall`
   * chain (once per attempt): the prompt (the system prompt and the messages
   * as sent), the tools offered, the tool choice, and the state as the call
   * saw it (`state`: the messages and slices then). Reported only while
   * someone streams or watches the run: an unwatched run builds nothing.
   */
  ModelRequestSent: {
    readonly step: number
    readonly prompt: Prompt.Prompt
    readonly toolNames: ReadonlyArray<string>
    readonly toolChoice: unknown
    readonly state: S
  }
  /** A piece of text the model is writing (live, best effort). */
  TextDelta: { readonly step: number; readonly delta: string }
  /**
   * A model call failed (a middleware may retry it or fall back). Text
   * deltas streamed since the last `ModelCallStarted` belong to the failed
   * attempt and will not be stored.
   */
  ModelAttemptFailed: {
    readonly step: number
    readonly error: string
    readonly message: string
    readonly discardedText: boolean
  }
  /**
   * The model answered. Emitted after the `afterModel` hooks, with the reply
   * as stored (a hook may have rewritten or redacted it).
   */
  ModelResponded: {
    readonly step: number
    readonly message: Prompt.AssistantMessage
    readonly usage: Response.Usage
    readonly finishReason: Response.FinishReason
    readonly durationMillis: number
  }
  /**
   * A tool call starts. `ledger` is its entry in the effect ledger (see
   * `ToolEffect`): what its tool declares it does, its idempotency key and
   * fingerprint; absent for a read-only tool.
   */
  ToolCallStarted: { readonly call: Prompt.ToolCallPart; readonly ledger?: ToolEffect.LedgerEntry | undefined }
  /** A tool call finished (`result.isFailure` when it failed or its arguments were invalid). */
  ToolCallCompleted: { readonly result: Prompt.ToolResultPart; readonly durationMillis: number }
  /** A middleware hook updated the state. */
  StateUpdated: {
    readonly middleware: string
    readonly hook: string
    readonly keys: ReadonlyArray<string>
    readonly messagesReplaced: boolean
  }
  /** A middleware reported what it decided (`Middleware.report`), or jumped. */
  MiddlewareDecision: {
    readonly middleware: string
    readonly hook: string
    readonly decision: string
    readonly data: unknown
  }
  /**
   * A middleware hook finished, after `durationMillis` (a wrap hook's time
   * includes the call it wraps). Reported only to streams and watchers.
   */
  HookCompleted: { readonly middleware: string; readonly hook: string; readonly durationMillis: number }
  /**
   * An event of a subagent's run, started by the `task` call `callId` of
   * this run (the `SubAgents` middleware) on the child thread `threadId`.
   * A grandchild's event arrives nested twice.
   */
  SubAgentEvent: {
    readonly callId: string
    readonly agent: string
    readonly threadId: string
    readonly event: AgentEvent<any, any>
  }
  /** The run ended. */
  RunEnded: { readonly result: AgentResult.Variants<S, O, I> }
  /**
   * The run failed (`error` is the error's tag, `Defect` or `Interrupted`).
   * Only `Agent.watch` reports it; a run's own stream fails instead.
   */
  RunFailed: { readonly error: string; readonly message: string }
}>

interface AgentEventDefinition extends Data.TaggedEnum.WithGenerics<3> {
  readonly taggedEnum: Variants<this["A"], this["B"], this["C"]>
}

const constructors = Data.taggedEnum<AgentEventDefinition>()

/**
 * The constructors of each event.
 *
 * @since 0.1.0
 * @category constructors
 */
export const {
  /** @since 0.1.0 */
  $is,
  /** @since 0.1.0 */
  $match,
  /** @since 0.1.0 */
  HookCompleted,
  /** @since 0.1.0 */
  MessageReceived,
  /** @since 0.1.0 */
  MiddlewareDecision,
  /** @since 0.1.0 */
  ModelAttemptFailed,
  /** @since 0.1.0 */
  ModelCallStarted,
  /** @since 0.1.0 */
  ModelRequestSent,
  /** @since 0.1.0 */
  ModelResponded,
  /** @since 0.1.0 */
  RunEnded,
  /** @since 0.1.0 */
  RunFailed,
  /** @since 0.1.0 */
  RunStarted,
  /** @since 0.1.0 */
  StateUpdated,
  /** @since 0.1.0 */
  SubAgentEvent,
  /** @since 0.1.0 */
  TextDelta,
  /** @since 0.1.0 */
  ToolCallCompleted,
  /** @since 0.1.0 */
  ToolCallStarted
} = constructors

/**
 * The result a `RunEnded` event carries, `None` for every other event: for
 * `Stream.filterMap`, to stream a run and still get its result (`$is` does
 * not narrow the generic event in `Stream.filter`).
 *
 * @example
 * ```ts
 * import { Agent, AgentEvent } from "@stepwise-agent/core"
 * import { Console, Effect, Stream } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({})
 *   // Option<AgentResult>: the last event of a run that did not fail is RunEnded
 *   return yield* agent.stream("hello", { threadId: "t1" }).pipe(
 *     Stream.tap((event) => Console.log(event._tag)),
 *     Stream.filterMap(AgentEvent.result),
 *     Stream.runLast
 *   )
 * })
 * ```
 *
 * @since 0.1.0
 * @category getters
 */
export const result = <S, O, W extends Wait.Any>(
  event: AgentEvent<S, O, W>
): Option.Option<AgentResult.AgentResult<S, O, W>> =>
  event._tag === "RunEnded" ? Option.some(event.result) : Option.none()
