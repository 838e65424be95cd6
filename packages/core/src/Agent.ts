/**
 * An agent: a `LanguageModel`, a toolkit and a list of middleware, run as a
 * loop (model → tools → model … until the model answers without tool calls)
 * that every middleware can observe and steer. This module holds the concept
 * whole: the `Agent` service tag and its `Service` (run, stream, resume,
 * read a thread), a typed tag factory `Agent.Tag(id)`, the constructors
 * `Agent.make` / `Agent.layer` and the accessors `Agent.run` / `Agent.resume`.
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import * as AgentError from "./AgentError.js"
import type * as AgentEvent from "./AgentEvent.js"
import type * as AgentResult from "./AgentResult.js"
import * as AgentState from "./AgentState.js"
import * as Checkpointer from "./Checkpointer.js"
import type * as Fork from "./Fork.js"
import * as EffectAiPatch from "./internal/effectAiPatch.js"
import { defaultMaxInputChars, defaultMaxInputMessages, defaultMaxInputParts } from "./internal/input.js"
import { makeLoop } from "./internal/loop.js"
import { describeValue, unknownKey } from "./internal/options.js"
import * as OutputTool from "./internal/outputTool.js"
import { entriesOf, isHandledToolkit, type ToolEntry, toolkitEffect, withTimeout } from "./internal/tools.js"
import * as Middleware from "./Middleware.js"
import type * as RunRecord from "./RunRecord.js"
import * as ToolName from "./ToolName.js"
import type * as Wait from "./Wait.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * Options of a run.
 *
 * @example
 * ```ts
 * import type { Agent } from "@stepwise-agent/core"
 *
 * const options: Agent.RunOptions = { threadId: "user-42" }
 * ```
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
 * Options of `replay` and `replayStream`. `decision`: for the record of a
 * resumed run (`RunRecord.recordResume`), the decision to resume with
 * instead of the recorded one; checked by the wait as `resume` checks it,
 * and compared, encoded as the thread stores it, with the recorded one: one
 * that differs fails the replay with `ReplayDiverged` (field `decision`),
 * since the record holds the run that went on with the recorded decision.
 *
 * @example
 * ```ts
 * import type { Agent, RunRecord } from "@stepwise-agent/core"
 *
 * declare const agent: Agent.Service<unknown, never, unknown, any>
 * declare const resumed: RunRecord.RunRecord
 * const again = agent.replay(resumed, { decision: { approvals: [] } })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ReplayOptions<D = unknown> {
  readonly decision?: D | undefined
}

/**
 * Options of `send`: how the message joins the thread while a run of it is
 * going.
 *
 * - `"steer"` (the default): before the running run's next model call. The
 *   message goes through the `transformInput` hooks and is appended to the
 *   thread as the run enters `beforeModel`, before its hooks (so PII,
 *   guardrails and summarization see it), and never while a tool call of the
 *   last reply waits for its result. Steer messages sent before one model
 *   step join together, in send order.
 * - `"queue"`: as the input of a run of its own, started once the running one
 *   has ended; each queued message is one run, in send order.
 *
 * @example
 * ```ts
 * import type { Agent } from "@stepwise-agent/core"
 *
 * const options: Agent.SendOptions = { mode: "queue" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface SendOptions {
  readonly mode?: "steer" | "queue" | undefined
}

/**
 * What `send` did with a message, and the outcome of the run that takes it
 * in.
 *
 * `delivery` says where the message went:
 *
 * - `"steered"`: into the inbox of the running run, for its next model call;
 * - `"queued"`: behind the running run, for a run of its own;
 * - `"started"`: the thread was idle, so a run with the message as its input
 *   started in the background;
 * - `"held"`: the thread waits for a decision (an interrupt); the message waits
 *   with it, in this agent's memory: a steer message joins the resumed run
 *   before its next model call, a queued one runs after it (or once
 *   `discardPending` frees the thread).
 *
 * A steer message whose run ends before its next model call is not lost: it
 * becomes the input of the next run of the thread (every such message
 * together), which starts as soon as the thread is free, before any queued
 * message.
 *
 * `result` waits for the run that takes the message in and gives its result,
 * or fails as that run failed (a run `send` started is reported through
 * `watch` and logged too). Runs `send` starts belong to the scope the agent
 * was built in (`Agent.layer`'s): closing it interrupts them, and the
 * `result` of every message no run will answer now (taken in by an
 * interrupted run, or held for a thread that waits for a decision) fails
 * with `ThreadStateError` rather than waiting; once it is closed `send`
 * itself fails with `AgentClosed`, delivering nothing. A `send` that fails
 * delivered nothing: retrying it sends the message once.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.Agent
 *   const sent = yield* agent.send("t1", "Also check the invoices")
 *   return sent.delivery === "steered" ? "joined the running run" : sent.delivery
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Sent<S = AgentState.AgentState, E = never, O = unknown, W extends Wait.Any = Wait.Any> {
  readonly threadId: string
  readonly mode: "steer" | "queue"
  readonly delivery: "steered" | "queued" | "started" | "held"
  readonly result: Effect.Effect<AgentResult.AgentResult<S, O, W>, RunError<E>>
}

/**
 * What a thread looks like in its last checkpoint, as `thread` gives it.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect, Option } from "effect"
 *
 * const waiting = Effect.flatMap(Agent.Agent, (agent) => agent.thread("t1")).pipe(
 *   Effect.map(Option.exists((snapshot: Agent.ThreadSnapshot<unknown>) => Option.isSome(snapshot.pending)))
 * )
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ThreadSnapshot<S, W extends Wait.Any = Wait.Any> {
  readonly threadId: string
  readonly state: S
  /**
   * Set while the thread waits for `resume`: what it waits for, its request
   * decoded with the waiting middleware's `wait.request` schema (as stored
   * when the agent no longer has that middleware).
   */
  readonly pending: Option.Option<Wait.Interrupt<W>>
}

/**
 * An event of one of the runs of an agent, as `watch` reports it.
 *
 * @example
 * ```ts
 * import type { Agent } from "@stepwise-agent/core"
 *
 * const describe = ({ event, runId, threadId }: Agent.RunEvent) => `${threadId}/${runId}: ${event._tag}`
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface RunEvent<S = AgentState.AgentState, O = unknown, W extends Wait.Any = Wait.Any> {
  /** Unique per run (a resume is a run of its own). */
  readonly runId: string
  readonly threadId: string
  readonly event: AgentEvent.AgentEvent<S, O, W>
}

/**
 * The errors of a run on an agent whose middleware fail with `E`: `E`, the
 * agent's own `AgentError`s and the model's `AiError`.
 *
 * @example
 * ```ts
 * import type { Agent } from "@stepwise-agent/core"
 * import { Data } from "effect"
 *
 * class OverQuota extends Data.TaggedError("OverQuota") {}
 *
 * type Errors = Agent.RunError<OverQuota> // OverQuota | AgentError | AiError
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type RunError<E> = E | AgentError.AgentError | AiError.AiError

// -----------------------------------------------------------------------------
// tags
// -----------------------------------------------------------------------------

/**
 * An agent, typed by its state `S`, the errors `E` its middleware add and
 * its structured output `O`: what `Agent.make` builds and the `Agent` tag
 * holds.
 *
 * @example
 * ```ts
 * import type { Agent } from "@stepwise-agent/core"
 *
 * const greet = (agent: Agent.Service) => agent.run("Hello!", { threadId: "t1" })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Service<S = AgentState.AgentState, E = never, O = unknown, W extends Wait.Any = Wait.Any> {
  /**
   * Appends `input` to the thread and runs until the agent finishes or interrupts. The input is a string (a
   * user message) or a conversation (messages of any role, at least one, e.g. a history to start the thread
   * from), within `maxInputChars`; anything else fails with `InvalidInput` and nothing is stored.
   */
  readonly run: (
    input: Prompt.RawInput,
    options: RunOptions
  ) => Effect.Effect<AgentResult.AgentResult<S, O, W>, RunError<E>>
  /** The same run as `run`, through the same middleware path, as a stream of events ending in `RunEnded`. */
  readonly stream: (
    input: Prompt.RawInput,
    options: RunOptions
  ) => Stream.Stream<AgentEvent.AgentEvent<S, O, W>, RunError<E>>
  /**
   * Continues an interrupted thread with `value`, a decision of the wait it
   * stopped at: `value` is checked against that wait's `decision` schema (a
   * value that does not fit fails with `InvalidResume`, naming what is
   * wrong) and its `check`, then the hook that interrupted runs again and
   * receives it, with the texts a person typed in it (its wait's
   * `personTexts`) as the agent's `transformInput` hooks (Pii, …) give them
   * back. A thread waiting in a durable run fails with
   * `DurableThreadError` (answer it through the run) and is left as it was.
   */
  resume(threadId: string, value: Wait.DecisionOf<W>): Effect.Effect<AgentResult.AgentResult<S, O, W>, RunError<E>>
  /** `resume` as a stream of events. */
  resumeStream(threadId: string, value: Wait.DecisionOf<W>): Stream.Stream<AgentEvent.AgentEvent<S, O, W>, RunError<E>>
  /**
   * Checks `value` against the wait `threadId` stops at (its middleware's
   * `wait`: the decision schema, then its `check`) without running
   * anything; gives the pending interrupt, with the decision encoded by
   * the wait's decision schema as JSON keeps it (`encodedDecision`: what a
   * durable run posts, and decodes for the hook). `resume` runs the same
   * check first; this one also refuses a decision whose encoded form JSON
   * cannot write or does not give back as it decodes (a BigInt, a NaN for
   * `Schema.Number`), as a durable run would. The texts a person typed in
   * the decision (its wait's `personTexts`) are given as the agent's
   * `transformInput` hooks (Pii, …) give them back: what is stored is
   * redacted.
   */
  validateResume(
    threadId: string,
    value: Wait.DecisionOf<W>
    // `unknown`: the decision's encoded form, whose type the agent's waits do not carry (a store keeps it as JSON)
  ): Effect.Effect<Checkpointer.PendingInterrupt & { readonly encodedDecision: unknown }, RunError<E>>
  /**
   * The decision `value` for the wait `interrupt` of this agent (the
   * middleware that waits and its request) with each text a person typed in
   * it replaced by `replace`, as that middleware's wait declares them (its
   * `personTexts`); `value` as it is when the wait names none. A parent that
   * forwards decisions to this agent (`SubAgents`) names their texts with
   * it, so its own `validateResume` redacts them before a durable run stores
   * them.
   */
  readonly personTexts: (
    // `unknown`: a forwarded child's wait as its parent stored it (encoded), decoded here with the child's wait
    interrupt: { readonly middleware: string; readonly value: unknown },
    value: unknown,
    replace: (text: string) => string
  ) => unknown
  /**
   * Checks a decision as a durable run posts it (`encoded`: the
   * `encodedDecision` of `validateResume`, as JSON keeps it) against the
   * wait `threadId` stops at, as the run will when it gets it: decoded with
   * the wait's `decision` schema, then its `check`. Gives the decision
   * decoded; nothing runs. A decision that no longer decodes (the wait
   * changed since it was stored) fails with `InvalidResume`.
   */
  validatePosted(
    threadId: string,
    // `unknown`: a decision as a store gives it back (JSON), decoded here with the wait's decision schema
    encoded: unknown
  ): Effect.Effect<Wait.DecisionOf<W>, RunError<E>>
  /**
   * A structured output (a completed result's `output`) encoded by the
   * agent's `responseFormat`, as JSON keeps it: what a durable run journals.
   * Without a `responseFormat` the value as it is.
   */
  encodeOutput(output: O): Effect.Effect<unknown, ParseResult.ParseError>
  /** An output as {@link Service.encodeOutput} gives it, decoded by the agent's `responseFormat`. */
  decodeOutput(encoded: unknown): Effect.Effect<O, ParseResult.ParseError>
  /**
   * Runs the agent again on a recorded run (`RunRecord.record`, or read with
   * `RunRecord.fromJsonl`) without calling the model or any tool: the
   * recorded replies and tool results are served in order, every hook runs
   * again, nothing is stored. Each model request is compared with the one
   * recorded; the first difference (the input, the system prompt, a
   * message, a tool offered, the tool choice, or a step taken or left that
   * the record does not have) fails with `ReplayDiverged`, naming the step
   * and the field. A record of a run that failed or was cancelled (a
   * durable run's) fails with `ReplayStopped` where the run stopped. A
   * record of another format version fails with `RunRecordError`
   * (`UnsupportedVersion`). Gives the replayed result. With
   * `options.decision`, the record of a resumed run is resumed with that
   * decision ({@link ReplayOptions}).
   */
  // (a method: an agent without waits takes no decision, and is still an agent of any waits)
  replay(
    record: RunRecord.RunRecord,
    options?: ReplayOptions<Wait.DecisionOf<W>> | undefined
  ): Effect.Effect<
    AgentResult.AgentResult<S, O, W>,
    RunError<E> | RunRecord.ReplayDiverged | RunRecord.ReplayStopped | RunRecord.RunRecordError
  >
  /**
   * `replay` as a stream of events: the events a live run of the record
   * emits (the served replies as `ModelResponded`, the served tool results
   * as `ToolCallStarted` / `ToolCallCompleted` with their ledger entries,
   * each middleware decision, each wait), ending in `RunEnded`; no
   * `ModelRequestSent` (no request is sent). A replay that differs from its
   * record fails the stream with `ReplayDiverged` after the events up to
   * there.
   */
  replayStream(
    record: RunRecord.RunRecord,
    options?: ReplayOptions<Wait.DecisionOf<W>> | undefined
  ): Stream.Stream<
    AgentEvent.AgentEvent<S, O, W>,
    RunError<E> | RunRecord.ReplayDiverged | RunRecord.ReplayStopped | RunRecord.RunRecordError
  >
  /**
   * Starts the new thread `options.to` from the conversation of a stored
   * thread (`source` a thread id) or a recorded run (`source` a
   * `RunRecord`) as it stood before its model step `options.at`, with an
   * optional edit (`Fork.Edit`: a message taken in, a tool result replaced,
   * or the decision a waiting thread resumes with), and runs it live. A
   * stored thread's steps are its assistant replies (the number of replies
   * forks after the last one) and the fork keeps its latest state slices; a
   * record's steps before `at` are replayed from the record (no model or
   * tool call, whatever the system prompt: fork onto an agent with another
   * prompt to edit it), then the run goes on live. The source is only read.
   * A step the source does not have, an edit that does not apply, or a
   * target thread that exists fail with `ForkError`, and nothing is written.
   */
  fork(
    source: string | RunRecord.RunRecord,
    options: Fork.Options<Wait.DecisionOf<W>>
  ): Effect.Effect<AgentResult.AgentResult<S, O, W>, RunError<E> | Fork.ForkError>
  /**
   * Sends `message` to the thread `threadId`, whether a run of it is going
   * or not. While a run is going, `{ mode: "steer" }` (the default) adds
   * the message to the thread before that run's next model call, and
   * `{ mode: "queue" }` starts a run with it once the running one has
   * ended. On an idle thread either mode starts a run with the message in
   * the background; on a thread waiting for a decision the message waits
   * for the resume. Gives at once where the message went and how to wait
   * for the run that takes it in ({@link Sent}). The message is what a
   * user may send: a string, or user messages of text and file parts. A
   * thread id that is not a non-empty string, an empty message, a message
   * that is not the user's, one over `maxInputChars` or an unknown mode
   * fail with `InvalidInput` / `InvalidOptions`, and nothing is sent; so
   * does a closed agent, with `AgentClosed`.
   */
  readonly send: (
    threadId: string,
    message: Prompt.RawInput,
    options?: SendOptions | undefined
  ) => Effect.Effect<
    Sent<S, E, O, W>,
    AgentError.InvalidInput | AgentError.InvalidOptions | AgentError.CheckpointError | AgentError.AgentClosed
  >
  /**
   * Subscribes, for the life of the scope, to the events of every run of
   * this agent (`run`, `stream`, `resume`, `resumeStream`) that starts from
   * now on, tagged with their run and thread: for inspectors and
   * dashboards. While anybody watches, runs stream their model calls (so
   * watchers see text as it is written); while nobody does, runs cost
   * nothing extra. Closing the scope, or the agent's, ends the stream once
   * it has delivered the events published before the close.
   */
  readonly watch: Effect.Effect<Stream.Stream<RunEvent<S, O, W>>, never, Scope.Scope>
  /**
   * Gives up the decision `threadId` waits for: the tool calls of its last
   * reply still without results are answered as not run (with `reason`),
   * so the thread stays well-formed, and the thread can run again. `false`
   * when it waited for nothing. A wait of a durable run is given up only
   * with `RunJournal.DurableOwner` in the context (`AgentWorkflow.cancel`
   * provides it); otherwise `DurableThreadError`, and nothing changes.
   */
  readonly discardPending: (
    threadId: string,
    reason: string
  ) => Effect.Effect<boolean, AgentError.CheckpointError | AgentError.DurableThreadError>
  /**
   * Deletes the thread's checkpoint (its messages, state and any pending
   * decision), once a run of it in this process has ended; the thread
   * then starts afresh. Then each middleware's `onThreadDeleted` runs with
   * its slice as stored, to free what it keeps for the thread outside the
   * checkpoint (`SubAgents` deletes the child threads the thread started).
   * A run of the thread still going elsewhere (another process or agent on
   * the store, a durable run waiting for a decision) writes nothing over the
   * deleted thread: its next save fails it with `CheckpointError`
   * (`conflict: "ThreadDeleted"`).
   */
  readonly deleteThread: (threadId: string) => Effect.Effect<void, AgentError.CheckpointError>
  /** The thread's last checkpoint. */
  readonly thread: (
    threadId: string
  ) => Effect.Effect<Option.Option<ThreadSnapshot<S, W>>, AgentError.CheckpointError | AgentError.InvalidInput>
}

/**
 * A tag of your own for one agent, keeping its exact types (state, middleware
 * errors, structured output) where the shared `Agent` tag has `any`. Pass
 * the service type, usually the success type of the `Agent.make` effect.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect, Layer } from "effect"
 *
 * const makeSupport = Agent.make({ systemPrompt: "You help customers." })
 *
 * class Support extends Agent.Tag("app/Support")<Support, Effect.Effect.Success<typeof makeSupport>>() {}
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
  <Self, S extends Service<any, any, any, any> = Service>(): Context.TagClass<Self, Id, S> => Context.Tag(id)<Self, S>()

/**
 * The agent of an application, as `Agent.layer` provides it. Its service is
 * typed loosely (any state slices, any middleware errors) so one tag serves
 * every agent; use the value `Agent.make` returns, or a tag of your own
 * ({@link Tag}), to keep the exact types.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.Agent
 *   const result = yield* agent.run("What is 2 + 2?", { threadId: "t1" })
 *   return result._tag === "Completed" ? result.text : "waiting for a decision"
 * })
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class Agent extends Context.Tag("@stepwise-agent/core/Agent")<
  Agent,
  Service<any, any>
>() {}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/**
 * Options of {@link make} and {@link layer}.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 *
 * const options: Agent.Options<readonly [], never, never> = { systemPrompt: "Be brief.", maxSteps: 10 }
 * const AgentLive = Agent.layer(options)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<
  Mws extends ReadonlyArray<Middleware.Any>,
  TE,
  TR,
  O = never,
  LA = never,
  LE = never,
  LR = never
> {
  /**
   * Services the agent holds for its whole life: the layer (a provider's
   * model and HTTP client, a summarizer, a middleware's dependency) is built
   * in the agent's own scope, when `Agent.make` runs, and released when the
   * agent closes, so what it provides is never released under a live agent
   * (as a layer given with `Effect.provide` around `Agent.make` alone is, as
   * soon as `make` ends). What it provides leaves `Agent.make`'s
   * requirements; `Agent.make` then needs a `Scope` (`Agent.layer` gives one).
   */
  readonly provide?: Layer.Layer<LA, LE, LR> | undefined
  /**
   * The agent's tools: a `Toolkit` (which needs its handler layer), an Effect
   * of a handled toolkit (`McpToolkit.make`), or a handled toolkit itself
   * (what such an Effect yields).
   */
  readonly toolkit?: Effect.Effect<Toolkit.WithHandler<any>, TE, TR> | Toolkit.WithHandler<any> | undefined
  /** Middleware, outermost first. */
  readonly middleware?: Mws | undefined
  readonly systemPrompt?: string | undefined
  /**
   * Ask for structured output: the model gets a tool named `outputToolName`
   * (default `"final_answer"`) whose parameters are this schema, is required
   * to call a tool on every turn, and the run completes with the decoded value
   * as `output`, typed `O`. Invalid output is answered with a failed tool
   * result the model can repair.
   */
  readonly responseFormat?: Schema.Schema<O, any> | undefined
  /** The name of the structured output tool; one that reads as another tool's fails `make` with `ToolNameClash`. */
  readonly outputToolName?: string | undefined
  /** The most model calls one run may make (default 50); more is a `MaxStepsExceeded` error. */
  readonly maxSteps?: number | undefined
  /**
   * How many model replies in a row may hold invalid tool calls (default 3;
   * 0 for none). Each invalid call — a tool the agent does not have,
   * arguments that are not JSON or fail the tool's schema, structured output
   * that does not decode — is answered with a failed tool result saying what
   * was wrong (scrubbed, at most 1000 characters), and the model tries
   * again; the call stays in the thread with its arguments as they came
   * (text that is not JSON as that string). One reply more than this fails
   * the run with `InvalidToolCalls`, naming the tool and the problem. A
   * reply without invalid calls resets the count.
   */
  readonly maxToolCallRepairs?: number | undefined
  /** How many tool calls of one model response run at once (default 8). */
  readonly toolConcurrency?: number | "unbounded" | undefined
  /**
   * The most characters one input of `run`, `stream` or `send` may hold,
   * counting every string of it: text, file data, file names and media
   * types, tool calls' ids, names and arguments, tool results, provider
   * options (default 4194304, 4 MiB); a larger input fails with
   * `InvalidInput` and nothing is stored.
   */
  readonly maxInputChars?: number | undefined
  /**
   * The most messages one input of `run`, `stream` or `send` may hold
   * (default 10,000); a longer input fails with `InvalidInput` before its
   * messages are decoded, and nothing is stored.
   */
  readonly maxInputMessages?: number | undefined
  /**
   * The most parts (text, files, tool calls and results) the messages of one
   * input of `run`, `stream` or `send` may hold together (default 100,000); a
   * larger input fails with `InvalidInput` before its messages are decoded,
   * and nothing is stored.
   */
  readonly maxInputParts?: number | undefined
  /**
   * The longest a tool call may run (default: no limit). A call that takes
   * longer is interrupted (its finalizers run) and fails with `ToolTimeout`:
   * `wrapToolCall` hooks see that error, and the model gets a failed tool
   * result saying the call timed out; the run goes on.
   */
  readonly toolTimeout?: Duration.DurationInput | undefined
  /**
   * Timeouts of single tools, by name, in place of `toolTimeout`
   * (`Duration.infinity` for none). Every name must be one of the agent's tools.
   */
  readonly toolTimeouts?: Readonly<Record<string, Duration.DurationInput>> | undefined
  /**
   * The longest one model call may take (default: no limit): each attempt
   * (a `wrapModelCall` hook that calls `next` again makes another), from the
   * request until the reply's last event. A call that takes longer is
   * interrupted (the provider's request is aborted) and fails with
   * `ModelReplyError` (`"TimedOut"`), which `ModelRetry` and `ModelFallback`
   * see as they see a reply cut short; nothing of it is stored.
   */
  readonly modelTimeout?: Duration.DurationInput | undefined
  /**
   * The most a streamed model reply may hold, in characters: the text,
   * reasoning and tool-call arguments it streams, and 64 for each event
   * besides (default 16,777,216). A reply that goes past it is cut off there
   * (the provider's stream is closed) and fails the model call with
   * `ModelReplyError` (`"TooLarge"`); nothing of it is stored. It bounds the
   * memory a provider that never ends its stream can take.
   */
  readonly maxReplyChars?: number | undefined
  /**
   * Give every hook, model call and tool call its own span (`Middleware.<hook>`,
   * `Agent.modelCall`, `Agent.toolCall`). By default they are made
   * when a tracer other than Effect's built-in one is installed (e.g. an
   * OpenTelemetry exporter): the built-in tracer exports nothing, and a span
   * costs a few microseconds. The run itself always has a span.
   */
  readonly spans?: boolean | undefined
}

/** Every key of {@link Options}: the type makes sure none is missing. */
const optionKeys = Object.keys(
  {
    toolkit: true,
    middleware: true,
    systemPrompt: true,
    responseFormat: true,
    outputToolName: true,
    maxSteps: true,
    maxToolCallRepairs: true,
    toolConcurrency: true,
    maxInputChars: true,
    maxInputMessages: true,
    maxInputParts: true,
    toolTimeout: true,
    toolTimeouts: true,
    modelTimeout: true,
    maxReplyChars: true,
    spans: true,
    provide: true
  } satisfies { readonly [K in keyof Options<any, any, any, any>]-?: true }
)

/**
 * The service of the agent built with the middleware `Mws` (and structured
 * output `O`): the exact type `Agent.make` gives, for functions that take an
 * agent or a tag of your own.
 *
 * @example
 * ```ts
 * import { Agent, Middleware } from "@stepwise-agent/core"
 *
 * const middleware = [Middleware.make({ name: "logging" })] as const
 *
 * const ask = (agent: Agent.AgentOf<typeof middleware>) => agent.run("Hi", { threadId: "t1" })
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type AgentOf<Mws extends ReadonlyArray<Middleware.Any>, O = never> = Service<
  AgentState.Of<Mws>,
  Middleware.Error<Mws[number]>,
  O,
  Middleware.Waits<Mws[number]>
>

/**
 * The errors building an agent with the middleware `Mws` and a toolkit that
 * fails with `TE` may fail with: bad configuration, an unknown option, two
 * tools whose names read the same, a middleware naming tools the agent does
 * not have, and the errors of the middleware's setup and tools.
 *
 * @example
 * ```ts
 * import type { Agent, Middleware } from "@stepwise-agent/core"
 *
 * type Errors = Agent.BuildError<readonly [Middleware.Middleware]>
 * // AgentConfigError | InvalidOptions | ToolNameClash | UnknownTools
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type BuildError<Mws extends ReadonlyArray<Middleware.Any>, TE = never> =
  | AgentError.AgentConfigError
  | AgentError.InvalidOptions
  | AgentError.ToolNameClash
  | AgentError.UnknownTools
  | TE
  | Middleware.BuildError<Mws[number]>

/**
 * Builds an agent. It needs a `LanguageModel`, the toolkit's handlers and
 * whatever the middleware need; a `Checkpointer` when one is provided (else
 * threads live in memory). Bad configuration — two middleware with one name,
 * clashing state keys, `maxSteps`, `maxInputChars`, `maxInputMessages` or `maxInputParts` < 1, a timeout
 * that is not a positive duration or names no tool — fails with an
 * `AgentConfigError`. Two tools with one name, or with names that read the
 * same (`ToolName.fold`: `"read_file"` and `"Read_File"`, full-width
 * letters, a zero-width character, a decomposed accent), fail it with
 * `ToolNameClash`, naming both and where each came from: all of the agent's
 * tools are checked together, its toolkit's, every middleware's (an MCP
 * server's, `write_todos`, `read_offloaded`, …) and the structured output
 * tool. An unknown option (a typo such as `middlewares`, or a
 * LangChain option such as `tools`) fails with `InvalidOptions` (`module:
 * "Agent"`, `option`: the key), and so does an option of another kind (from
 * JavaScript: a `toolkit` that is not one, a `middleware` element that is
 * not a middleware, …). First, in list order, it runs the setup of
 * each middleware that has one (`Middleware.unwrap`): a built-in given bad
 * options fails here with its `InvalidOptions`. A middleware that names
 * tools the agent does not have (e.g. `RateLimit`'s `tools`) fails it with
 * `UnknownTools`; the tools of every middleware count.
 *
 * The agent keeps the services of the context it is built in for its whole
 * life, so they must live as long as it does: give their layer to the agent
 * (`provide`: built in the agent's own scope, released when it closes), or
 * provide them to the program that builds *and uses* the agent (or build it
 * with `Agent.layer` and `Layer.provide`), not with `Effect.provide` around
 * `Agent.make` alone, which releases a scoped layer (a provider's HTTP
 * client) as soon as `make` ends. Built in a `Scope`, the agent closes with it: then `run`, `stream`,
 * `resume`, `resumeStream`, `validateResume`, `validatePosted` and `send` fail with
 * `AgentClosed`; so they do once a run fails because an HTTP client the agent
 * kept was released (undici's `ClientDestroyedError`), the error naming that
 * cause.
 *
 * @example
 * ```ts
 * import { Agent, Middleware } from "@stepwise-agent/core"
 * import { Tool, Toolkit } from "@effect/ai"
 * import { Effect, Schema } from "effect"
 *
 * const Add = Tool.make("add", {
 *   parameters: { a: Schema.Number, b: Schema.Number },
 *   success: Schema.Number
 * })
 * const Tools = Toolkit.make(Add)
 * const ToolsLive = Tools.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({
 *     toolkit: Tools,
 *     systemPrompt: "You are a calculator.",
 *     middleware: [Middleware.make({ name: "logging" })]
 *   })
 *   return yield* agent.run("What is 2 + 3?", { threadId: "t1" })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <
  const Mws extends ReadonlyArray<Middleware.Any> = readonly [],
  TE = never,
  TR = never,
  O = never,
  LA = never,
  LE = never,
  LR = never
>(
  options: Options<Mws, TE, TR, O, LA, LE, LR> & { readonly middleware?: AgentState.CheckKeys<Mws> | undefined }
): Effect.Effect<
  AgentOf<Mws, O>,
  BuildError<Mws, TE> | LE,
  Requirements<Mws, TR, LA, LR>
> => {
  // (options that are not an object, or a `provide` that is not a layer, fail in build with InvalidOptions;
  // no options, from JavaScript, stand for `{}`)
  const provided = Predicate.isObject(options) ? options.provide : undefined
  if (provided === undefined || !Layer.isLayer(provided)) {
    return build(options === undefined ? {} : options) as Effect.Effect<AgentOf<Mws, O>, BuildError<Mws, TE>, any>
  }
  // built in the agent's scope: released when the agent closes, never under a live one
  return Effect.flatMap(
    Effect.flatMap(Effect.scope, (scope) => Layer.buildWithScope(provided, scope)),
    (services) => Effect.provide(build(options), services)
  ) as Effect.Effect<AgentOf<Mws, O>, BuildError<Mws, TE> | LE, any>
}

/**
 * What `Agent.make` needs: the model, the toolkit's and the middleware's
 * services, less what its `provide` layer gives (plus that layer's own
 * needs and a `Scope` to build it in).
 *
 * @example
 * ```ts
 * import type { Agent } from "@stepwise-agent/core"
 * import type { LanguageModel } from "@effect/ai"
 *
 * // an agent with no middleware and a layer providing the model: only a Scope is left
 * type Needs = Agent.Requirements<readonly [], never, LanguageModel.LanguageModel, never>
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements<Mws extends ReadonlyArray<Middleware.Any>, TR, LA = never, LR = never> =
  | Exclude<LanguageModel.LanguageModel | TR | Middleware.Requirements<Mws[number]>, LA>
  | LR
  | ([LA] extends [never] ? never : Scope.Scope)

/** The default of `maxReplyChars`: 16 Mi characters (a reply of ~4 million tokens). */
const defaultMaxReplyChars = 16_777_216

/** The agent of `options`, built in the context `make` runs in (with its `provide` layer's services). */
const build = (options: Options<ReadonlyArray<Middleware.Any>, any, any, any, any, any, any>) =>
  Effect.gen(function*() {
    const unknown = unknownKey("Agent", options, optionKeys) ?? wrongKind(options)
    if (unknown !== undefined) return yield* unknown
    const middleware: ReadonlyArray<Middleware.Any> = yield* Effect.forEach(
      options.middleware ?? [],
      (m: Middleware.Any) => Middleware.build(m)
    )
    const maxSteps = countOf("maxSteps", options.maxSteps, 50, 1)
    if (maxSteps instanceof AgentError.AgentConfigError) return yield* maxSteps
    const maxToolCallRepairs = countOf("maxToolCallRepairs", options.maxToolCallRepairs, 3, 0)
    if (maxToolCallRepairs instanceof AgentError.AgentConfigError) return yield* maxToolCallRepairs
    const toolConcurrency = options.toolConcurrency ?? 8
    if (toolConcurrency !== "unbounded" && (!Number.isInteger(toolConcurrency) || toolConcurrency < 1)) {
      return yield* new AgentError.AgentConfigError({
        reason: `toolConcurrency must be "unbounded" or a whole number of at least 1, got ${
          describeValue(toolConcurrency)
        }`
      })
    }
    const maxInputChars = countOf("maxInputChars", options.maxInputChars, defaultMaxInputChars, 1)
    if (maxInputChars instanceof AgentError.AgentConfigError) return yield* maxInputChars
    const maxInputMessages = countOf("maxInputMessages", options.maxInputMessages, defaultMaxInputMessages, 1)
    if (maxInputMessages instanceof AgentError.AgentConfigError) return yield* maxInputMessages
    const maxInputParts = countOf("maxInputParts", options.maxInputParts, defaultMaxInputParts, 1)
    if (maxInputParts instanceof AgentError.AgentConfigError) return yield* maxInputParts
    const maxReplyChars = countOf("maxReplyChars", options.maxReplyChars, defaultMaxReplyChars, 1)
    if (maxReplyChars instanceof AgentError.AgentConfigError) return yield* maxReplyChars
    const modelTimeout = durationOf("modelTimeout", options.modelTimeout)
    if (modelTimeout instanceof AgentError.AgentConfigError) return yield* modelTimeout
    const layout = yield* AgentState.layout(middleware)
    const context = yield* Effect.context<never>()
    const tools: Array<ToolEntry> = []
    // every tool name with where it came from, the structured output tool's too: checked together below
    const named: Array<readonly [name: string, source: string]> = []
    const toolkits: Array<readonly [string, Effect.Effect<Toolkit.WithHandler<any>, any, any>]> = []
    if (options.toolkit !== undefined) toolkits.push(["the toolkit", toolkitEffect(options.toolkit)])
    for (const m of middleware) if (m.tools !== undefined) toolkits.push([`middleware "${m.name}"`, m.tools])
    for (const [owner, toolkit] of toolkits) {
      for (const entry of entriesOf(yield* toolkit, context)) {
        named.push([entry.tool.name, owner])
        tools.push(entry)
      }
    }
    const output = options.responseFormat === undefined
      ? undefined
      : OutputTool.make(options.responseFormat, options.outputToolName ?? "final_answer")
    // the agent's tools by name: what `uses` and `toolTimeouts` may name (not the structured output tool)
    const owners = new Map(named)
    const clash = toolNameClashOf(
      output === undefined ? named : [...named, [output.tool.name, "the agent's structured output (outputToolName)"]]
    )
    if (clash !== undefined) return yield* clash
    const unknownTools = unknownToolsOf(middleware, owners)
    if (unknownTools !== undefined) return yield* unknownTools
    const timeouts = yield* toolTimeoutsOf(options, owners)
    for (let i = 0; i < tools.length; i++) {
      const timeout = timeouts(tools[i]!.tool.name)
      if (timeout !== undefined) tools[i] = withTimeout(tools[i]!, timeout)
    }
    yield* EffectAiPatch.warnIfUnpatched(tools.length)
    const checkpointer = yield* Effect.serviceOption(Checkpointer.Checkpointer).pipe(
      Effect.flatMap(Option.match({ onNone: () => Checkpointer.makeMemory, onSome: Effect.succeed }))
    )
    const model = yield* LanguageModel.LanguageModel
    // the agent lives in the scope it is built in; built outside any, in one that never closes
    const scope = yield* Effect.serviceOption(Scope.Scope).pipe(
      Effect.flatMap(Option.match({ onNone: () => Scope.make(), onSome: Effect.succeed }))
    )
    const service = yield* makeLoop({
      middleware,
      layout,
      tools,
      systemPrompt: options.systemPrompt ?? undefined,
      output,
      maxSteps,
      maxToolCallRepairs,
      toolConcurrency,
      inputLimits: { maxChars: maxInputChars, maxMessages: maxInputMessages, maxParts: maxInputParts },
      toolTimeout: timeouts,
      modelTimeout,
      maxReplyChars,
      spans: options.spans,
      model,
      checkpointer,
      context: Context.omit(LanguageModel.LanguageModel)(context) as Context.Context<never>
    }).pipe(Scope.extend(scope))
    return service
  })

/** The count option `option` (`fallback` when not given), or why it is not a whole number of at least `min`. */
const countOf = (
  option: string,
  value: number | undefined,
  fallback: number,
  min: number
): number | AgentError.AgentConfigError => {
  const count = value ?? fallback
  return Number.isInteger(count) && count >= min ? count : new AgentError.AgentConfigError({
    reason: `${option} must be a whole number of at least ${min}, got ${describeValue(count)}`
  })
}

/** What each option that is not a number must be, when given (`null` stands for not given where it always has). */
const optionKinds: ReadonlyArray<readonly [option: string, kind: string, is: (value: unknown) => boolean]> = [
  ["provide", "a Layer", Layer.isLayer],
  [
    "toolkit",
    "a Toolkit (an Effect of a toolkit with its handlers) or a handled toolkit",
    (u) => Effect.isEffect(u) || isHandledToolkit(u)
  ],
  ["responseFormat", "a Schema", Schema.isSchema],
  ["middleware", "an array of middleware", (u) => u === null || Array.isArray(u)],
  ["systemPrompt", "a string", (u) => u === null || Predicate.isString(u)],
  ["outputToolName", "a string", (u) => u === null || Predicate.isString(u)],
  ["spans", "a boolean", (u) => u === null || Predicate.isBoolean(u)]
]

/** The `InvalidOptions` of the first option (or middleware) of a wrong kind, from JavaScript. */
const wrongKind = (options: object): AgentError.InvalidOptions | undefined => {
  const given = options as Readonly<Record<string, unknown>>
  for (const [option, kind, is] of optionKinds) {
    const value = given[option]
    if (value !== undefined && !is(value)) {
      return new AgentError.InvalidOptions({
        module: "Agent",
        option,
        reason: `must be ${kind}, got ${describeValue(value)}`
      })
    }
  }
  const middleware = (given.middleware ?? []) as ReadonlyArray<unknown>
  const at = middleware.findIndex((m) => !Middleware.isMiddleware(m))
  return at === -1 ? undefined : new AgentError.InvalidOptions({
    module: "Agent",
    option: `middleware[${at}]`,
    reason: `must be a middleware (Middleware.make or a built-in), got ${describeValue(middleware[at])}`
  })
}

/**
 * The first tool, in list order, whose name cannot be a tool's
 * (`ToolName.problemOf`, an `AgentConfigError`) or reads as an earlier one's
 * does (`ToolName.keys`: the same fold or a folded skeleton): exact
 * duplicates, and names that differ in case, form, width or look-alike
 * letters.
 */
const toolNameClashOf = (
  tools: ReadonlyArray<readonly [name: string, source: string]>
): AgentError.ToolNameClash | AgentError.AgentConfigError | undefined => {
  const seen = new Map<string, readonly [name: string, source: string]>()
  for (const [name, source] of tools) {
    const problem = ToolName.problemOf(name)
    if (problem !== undefined) {
      return new AgentError.AgentConfigError({
        reason: `Tool ${ToolName.quote(name.slice(0, 80))}${name.length > 80 ? "…" : ""} of ${source} cannot be ` +
          `a tool's name: ${problem}`
      })
    }
    const keys = ToolName.keys(name)
    for (const key of keys) {
      const twin = seen.get(key)
      if (twin !== undefined) {
        return new AgentError.ToolNameClash({ tool: name, source, twin: twin[0], twinSource: twin[1] })
      }
    }
    for (const key of keys) seen.set(key, [name, source])
  }
  return undefined
}

/** The first middleware that names tools the agent does not have, as an `UnknownTools`. */
const unknownToolsOf = (
  middleware: ReadonlyArray<Middleware.Any>,
  owners: ReadonlyMap<string, string>
): AgentError.UnknownTools | undefined => {
  for (const m of middleware) {
    const names = [...new Set(m.uses.tools ?? [])].filter((name) => !owners.has(name))
    if (names.length > 0) {
      return new AgentError.UnknownTools({ middleware: m.name, names, available: [...owners.keys()] })
    }
  }
  return undefined
}

/** A timeout option as a finite positive duration (`undefined` for none), or the reason it is not one. */
const durationOf = (option: string, input: unknown): Duration.Duration | undefined | AgentError.AgentConfigError => {
  if (input === undefined) return undefined
  const duration = Duration.decodeUnknown(input)
  if (Option.isNone(duration) || !Duration.greaterThan(duration.value, Duration.zero)) {
    return new AgentError.AgentConfigError({
      reason: `${option} must be a duration above zero, got ${
        Predicate.isString(input) ? input.slice(0, 80) : describeValue(input)
      }`
    })
  }
  return Duration.isFinite(duration.value) ? duration.value : undefined
}

/** The timeout of each tool, from `toolTimeout` and `toolTimeouts`. */
const toolTimeoutsOf = (
  options: { readonly toolTimeout?: unknown; readonly toolTimeouts?: unknown },
  owners: ReadonlyMap<string, string>
): Effect.Effect<(name: string) => Duration.Duration | undefined, AgentError.AgentConfigError> =>
  Effect.suspend(() => {
    const fallback = durationOf("toolTimeout", options.toolTimeout)
    if (fallback instanceof AgentError.AgentConfigError) return Effect.fail(fallback)
    const byName = new Map<string, Duration.Duration | undefined>()
    const given = options.toolTimeouts
    if (given !== undefined) {
      if (typeof given !== "object" || given === null) {
        return Effect.fail(
          new AgentError.AgentConfigError({ reason: "toolTimeouts must be an object of durations by tool name" })
        )
      }
      for (const [name, input] of Object.entries(given)) {
        if (!owners.has(name)) {
          return Effect.fail(
            new AgentError.AgentConfigError({
              reason: `toolTimeouts names "${name}", which is not a tool of this agent`
            })
          )
        }
        const timeout = durationOf(`toolTimeouts["${name}"]`, input)
        if (timeout instanceof AgentError.AgentConfigError) return Effect.fail(timeout)
        byName.set(name, timeout)
      }
    }
    return Effect.succeed((name: string) => byName.has(name) ? byName.get(name) : fallback)
  })

/**
 * Provides the `Agent` service built by {@link make}. Runs its `send` starts
 * live in the layer's scope: releasing the layer interrupts them.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const AgentLive = Agent.layer({ systemPrompt: "Be brief." })
 * const program = Agent.run("hello", { threadId: "t1" })
 * // program.pipe(Effect.provide(AgentLive), Effect.provide(SomeLanguageModelLayer))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <
  const Mws extends ReadonlyArray<Middleware.Any> = readonly [],
  TE = never,
  TR = never,
  O = never,
  LA = never,
  LE = never,
  LR = never
>(
  options: Options<Mws, TE, TR, O, LA, LE, LR> & { readonly middleware?: AgentState.CheckKeys<Mws> | undefined }
): Layer.Layer<
  Agent,
  BuildError<Mws, TE> | LE,
  Exclude<Requirements<Mws, TR, LA, LR>, Scope.Scope>
> => Layer.scoped(Agent, make(options))

// -----------------------------------------------------------------------------
// accessors
// -----------------------------------------------------------------------------

/**
 * Runs the `Agent` of the context.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 *
 * const program = Agent.run("What is 2 + 2?", { threadId: "t1" })
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const run = (input: Prompt.RawInput, options: RunOptions) =>
  Effect.flatMap(Agent, (agent) => agent.run(input, options))

/**
 * Resumes a thread of the `Agent` of the context.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 *
 * // the value the interrupting middleware waits for (HumanInTheLoop: decisions built from its request)
 * const program = Agent.resume("t1", { answer: "yes" })
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const resume = (
  threadId: string,
  // `unknown`: the `Agent` of the context is any agent (its waits unknown); `agent.resume` of a typed agent is typed
  value: unknown
) => Effect.flatMap(Agent, (agent) => agent.resume(threadId, value))

/**
 * Sends a message to a thread of the `Agent` of the context (see
 * `Agent.Service.send`): it steers the running run, queues behind it, or
 * starts a run.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const program = Agent.send("t1", "Use metric units", { mode: "steer" }).pipe(
 *   Effect.flatMap((sent) => sent.result)
 * )
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const send = (threadId: string, message: Prompt.RawInput, options?: SendOptions) =>
  Effect.flatMap(Agent, (agent) => agent.send(threadId, message, options))
