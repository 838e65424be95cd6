/**
 * Middleware: interceptors that control every step of an agent run.
 *
 * A middleware is a value built with {@link make}. It may own a slice of the
 * agent's state (declared with a `Schema`), contribute tools, and implement
 * any of these hooks:
 *
 * - node hooks `beforeAgent`, `beforeModel`, `afterModel`, `afterAgent` read
 *   the state, return an update and may jump to `"model"`, `"tools"` or
 *   `"end"` (only to the nodes listed in `canJumpTo`), or interrupt the run;
 * - wrap hooks `wrapModelCall` and `wrapToolCall` receive the request and the
 *   `next` handler, and may call it zero times (short-circuit), once, or many
 *   times (retry), changing the request on the way in and the response on the
 *   way out;
 * - `wrapModelStream` transforms the parts of a streamed model call as they
 *   arrive;
 * - `transformInput` rewrites the input of a run before it joins the stored
 *   thread, before any node hook and whatever the list order.
 *
 * `before*` hooks run in list order, `after*` hooks in reverse order, and
 * wrap hooks nest like an onion with the first middleware outermost. Every
 * hook runs in the run's `Scope`: a finalizer a hook adds runs when the run
 * ends, whether it completed, jumped to the end, failed, was interrupted or
 * was cut off by fiber interruption.
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import { Usage as ResponseUsage } from "@effect/ai/Response"
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { dual } from "effect/Function"
import * as Option from "effect/Option"
import { type Pipeable, pipeArguments } from "effect/Pipeable"
import * as Predicate from "effect/Predicate"
import type * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import type * as AgentError from "./AgentError.js"
import { InvalidOptions } from "./AgentError.js"
import type * as AgentEvent from "./AgentEvent.js"
import * as JsonDepth from "./internal/jsonDepth.js"
import * as observer from "./internal/observer.js"
import { describeValue, unknownKey } from "./internal/options.js"
import * as PersonAnswer from "./internal/personAnswer.js"
import * as RunSavesRef from "./internal/runSaves.js"
import { ToolCallGuards } from "./internal/toolCallGuards.js"
import { toolkitEffect } from "./internal/tools.js"
import type * as Wait from "./Wait.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@stepwise-agent/core/Middleware")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * Where a node hook may send the run next: `"model"` starts the next model
 * step (running `beforeModel` hooks again), `"tools"` runs the tool calls of
 * the last assistant message, `"end"` finishes the run (running `afterAgent`).
 *
 * @since 0.1.0
 * @category models
 */
export type Jump = "model" | "tools" | "end"

/**
 * A middleware's own slice of the agent state: its schema (the slice must
 * survive a checkpoint) and its value on a new thread.
 *
 * @since 0.1.0
 * @category models
 */
export interface StateSlice<S> {
  readonly schema: Schema.Schema<S, any>
  readonly initial: S
}

/**
 * Tokens summed over the model calls of a run, as plain numbers (what
 * {@link HookContext} carries; a run's result reports them as a `Usage`).
 *
 * @since 0.1.0
 * @category models
 */
export interface RunUsage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly totalTokens: number
}

/**
 * What a node hook sees.
 *
 * @since 0.1.0
 * @category models
 */
export interface HookContext<S, D = never> {
  /** The middleware's own state slice. */
  readonly state: S
  /** The stored conversation, without the system prompt. */
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly threadId: string
  /**
   * The thread's incarnation: a random nonce made with its first checkpoint,
   * new when the thread is deleted and made again (or forked). A wait binds
   * its decisions to it (in its key or request), so a decision given for an
   * earlier thread of the same id answers no wait of this one. `undefined`
   * while a thread stored before incarnations resumes its wait.
   */
  readonly incarnation?: string | undefined
  /** Model calls made so far in this run. */
  readonly step: number
  /**
   * Tokens the provider reported for the model calls of this run so far (a
   * resumed run keeps its count; a provider that reports none counts 0).
   */
  readonly usage: RunUsage
  /** Every tool the agent has (its toolkit and the middleware's tools). */
  readonly tools: ReadonlyArray<Tool.Any>
  /**
   * When this hook interrupted the run and the run is being resumed: the
   * decision passed to `Agent.resume`, decoded with the middleware's
   * `wait.decision` schema. The hook runs again with it.
   */
  readonly resume: Option.Option<D>
  /**
   * How many tool calls the agent runs at once (its `toolConcurrency`), for
   * a hook that runs calls itself.
   */
  readonly toolConcurrency?: number | "unbounded" | undefined
  /**
   * The timeout of a tool of the agent (its `toolTimeout`, or its entry in
   * `toolTimeouts`; `undefined` for none), for a hook that runs calls itself.
   */
  readonly toolTimeout?: ((toolName: string) => Duration.Duration | undefined) | undefined
}

/**
 * What a node hook may return: an update of its own slice, a new message list
 * (replacing the stored one), a jump, or an interrupt. An interrupt — a
 * request of the middleware's declared `wait` (`Q`; a middleware that
 * declares none cannot interrupt) — ends the run as `Interrupted` carrying
 * it; the same hook runs again, with `resume` set, when the thread is resumed.
 *
 * @since 0.1.0
 * @category models
 */
export interface HookResult<S, J extends Jump = Jump, Q = never> {
  readonly state?: Partial<S> | undefined
  readonly messages?: ReadonlyArray<Prompt.Message> | undefined
  readonly jumpTo?: J | undefined
  readonly interrupt?: Q | undefined
  /**
   * A name for the wait an `interrupt` starts, unique within the run (for
   * example built from the tool call ids it asks about). Durable runs name
   * the wait after it; without it the loop uses `node/middleware/step`.
   */
  readonly interruptKey?: string | undefined
}

/**
 * Runs after `deleteThread` removed a thread's checkpoint, to free what the
 * middleware keeps for that thread outside the checkpoint (a service's
 * per-thread entry, the threads it started for it). `state` is the
 * middleware's slice of the thread as it was stored: `None` when the thread
 * had no checkpoint, the middleware keeps no state, or the checkpoint did not
 * load (it is deleted all the same). It cannot fail: the thread is already
 * gone.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const seen = new Map<string, number>()
 * const counter = Middleware.make({
 *   name: "counter",
 *   onThreadDeleted: (threadId) => Effect.sync(() => void seen.delete(threadId))
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type OnThreadDeleted<R, S = unknown> = (
  threadId: string,
  state: Option.Option<S>
) => Effect.Effect<void, never, R>

/**
 * A node hook.
 *
 * @since 0.1.0
 * @category models
 */
export type NodeHook<S, J extends Jump, E, R, Q = never, D = never> = (
  context: HookContext<S, D>
) => Effect.Effect<HookResult<S, J, Q> | void, E, R>

/**
 * A model call as the wrap hooks see it. Change any field to change what the
 * model receives; the stored conversation is not affected.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelRequest {
  /** The conversation sent to the model, without the system prompt. */
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly systemPrompt: string | undefined
  /** The tools offered to the model on this call. */
  readonly tools: ReadonlyArray<Tool.Any>
  readonly toolChoice: LanguageModel.ToolChoice<string>
  /** A model to use in place of the agent's own. */
  readonly model: LanguageModel.Service | undefined
  /**
   * Services provided to the model call only, e.g. a provider's config
   * override (`OpenAiLanguageModel.Config`).
   */
  readonly context: Context.Context<never>
  /** The whole agent state (read only). */
  readonly state: Readonly<Record<string, unknown>>
  readonly threadId: string
  /** The thread's incarnation, as {@link HookContext} shows it (`undefined` for a thread stored before them). */
  readonly incarnation?: string | undefined
  /** Index of this model call in the run, from 0. */
  readonly step: number
}

/**
 * What a model call produced.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelResponse {
  /** The assistant message appended to the conversation. */
  readonly message: Prompt.AssistantMessage
  readonly toolCalls: ReadonlyArray<Prompt.ToolCallPart>
  readonly usage: Response.Usage
  readonly finishReason: Response.FinishReason
  /**
   * The names of the tools the model was offered on this call, as the agent's
   * model call sets them; a hook that answers without calling the model may
   * leave them out (every tool of the agent then counts as offered). A tool
   * call of a tool not offered is answered as unknown.
   */
  readonly offeredTools?: ReadonlyArray<string> | undefined
  /**
   * An update of the state slice of the middleware whose `wrapModelCall`
   * returns this response (its declared keys, as a node hook's `state`),
   * applied once the model call ends, before `afterModel` (LangChain's wrap
   * hooks return state updates with the response). The agent takes it off
   * the response before the hooks around see it; a durable run journals it,
   * so its values must be JSON.
   */
  readonly state?: Readonly<Record<string, unknown>> | undefined
}

/**
 * A tool call as `wrapToolCall` sees it. `tool` is undefined when the model
 * named a tool the agent does not have.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCallRequest {
  readonly call: Prompt.ToolCallPart
  readonly tool: Tool.Any | undefined
  readonly state: Readonly<Record<string, unknown>>
  readonly threadId: string
  /** The thread's incarnation, as {@link HookContext} shows it (`undefined` for a thread stored before them). */
  readonly incarnation?: string | undefined
  /** Index (from 0) of the model call that asked for this tool call. */
  readonly step: number
  /**
   * The names of the tools that model call was offered (`undefined` after a
   * resume: every tool of the agent). A call of a tool not offered is
   * answered as unknown.
   */
  readonly offeredTools?: ReadonlyArray<string> | undefined
}

/**
 * The continuation `wrapModelCall` calls: the inner middleware and the model.
 * It fails with the model's `AiError`, or `ModelReplyError` when the reply
 * was cut short or empty; errors of inner middleware pass through it
 * unchanged at run time.
 *
 * @since 0.1.0
 * @category models
 */
export type NextModelCall = (
  request: ModelRequest
) => Effect.Effect<ModelResponse, AiError.AiError | AgentError.ModelReplyError>

/**
 * The continuation `wrapToolCall` calls: the inner middleware and the tool.
 * A tool's typed failure and invalid arguments come back as a failed tool
 * result; it fails only when the tool died (`ToolDefect`) or ran past its
 * timeout (`ToolTimeout`).
 *
 * @since 0.1.0
 * @category models
 */
export type NextToolCall = (
  request: ToolCallRequest
) => Effect.Effect<Prompt.ToolResultPart, AgentError.ToolDefect | AgentError.ToolTimeout>

/**
 * A `wrapModelCall` hook.
 *
 * @since 0.1.0
 * @category models
 */
export type WrapModelCall<E, R> = (request: ModelRequest, next: NextModelCall) => Effect.Effect<ModelResponse, E, R>

/**
 * What a `wrapToolCall` returns: the tool result, with an optional `state`,
 * an update of the state slice of the middleware whose hook returns it (its
 * declared keys, as a node hook's `state`; LangChain's wrap hooks return
 * state updates with the response). The agent applies it once the tool calls
 * of the step end, in the order of the calls in the model's reply (not the
 * order they finish in), before the results are stored; it takes it off the
 * result before the hooks around see it. A durable run journals it with the
 * call, so its values must be JSON. A tool result alone is one.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Effect, Schema } from "effect"
 *
 * // counts the tool calls of the thread in its own slice
 * const counter = Middleware.make({
 *   name: "toolCounter",
 *   state: { schema: Schema.Struct({ toolCalls: Schema.Number }), initial: { toolCalls: 0 } },
 *   wrapToolCall: (request, next) =>
 *     Effect.map(next(request), (result) => ({ ...result, state: { toolCalls: Number(request.state.toolCalls) + 1 } }))
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCallResponse extends Prompt.ToolResultPart {
  readonly state?: Readonly<Record<string, unknown>> | undefined
}

/**
 * A `wrapToolCall` hook: it returns the tool result, with an optional update
 * of its middleware's state ({@link ToolCallResponse}).
 *
 * @since 0.1.0
 * @category models
 */
export type WrapToolCall<E, R> = (
  request: ToolCallRequest,
  next: NextToolCall
) => Effect.Effect<ToolCallResponse, E, R>

/**
 * A `wrapModelStream` hook: transforms the parts of a streamed model call as
 * they arrive, before the agent emits them as `TextDelta` events and
 * assembles the reply — e.g. to redact text that must never be shown. It
 * runs on each streamed attempt (a retry gets a fresh stream); a call made
 * with `run` is not streamed and does not pass through it. The first
 * middleware's transform sees the stream last (outermost).
 *
 * @since 0.1.0
 * @category models
 */
export type WrapModelStream<E, R> = (
  request: ModelRequest,
  parts: Stream.Stream<Response.AnyPart, AiError.AiError>
) => Stream.Stream<Response.AnyPart, E | AiError.AiError, R>

/**
 * A `transformInput` hook: rewrites the input of a run (the messages given
 * to `run` or `stream`) before it joins the stored thread — before any node
 * hook runs and whatever the order of the middleware list, so an earlier
 * middleware that ends or interrupts the run at once cannot save the input
 * unchanged (e.g. to redact personal data). The hooks of the list run in
 * order, each on the previous one's output. A failure fails the run with
 * nothing stored. A resumed run has no new input and runs none.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 * import { Effect } from "effect"
 *
 * // Stores every user text of the input trimmed.
 * const trim = Middleware.make({
 *   name: "trim",
 *   transformInput: ({ messages }) =>
 *     Effect.succeed(messages.map((message) =>
 *       message.role !== "user" ? message : Prompt.makeMessage("user", {
 *         content: message.content.map((part) =>
 *           part.type === "text" ? Prompt.makePart("text", { text: part.text.trim() }) : part
 *         )
 *       })
 *     ))
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type TransformInput<E, R> = (input: {
  /** The messages of the input (after earlier `transformInput` hooks). */
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly threadId: string
}) => Effect.Effect<ReadonlyArray<Prompt.Message>, E, R>

/**
 * A middleware. `S` is its state slice, `E` the errors its hooks may fail a
 * run with and `R` the services its setup, hooks and tools need; `B` the
 * errors building it may fail `Agent.make` with (by default the
 * `InvalidOptions` of a constructor given bad options). All flow into the
 * agent's type.
 *
 * @since 0.1.0
 * @category models
 */
export interface Middleware<S = {}, E = never, R = never, B = AgentError.InvalidOptions, W extends Wait.Any = never>
  extends Pipeable
{
  readonly [TypeId]: {
    readonly _S: (_: S) => S
    readonly _E: (_: never) => E
    readonly _R: (_: never) => R
    readonly _B: (_: never) => B
    readonly _W: (_: never) => W
  }
  readonly name: string
  readonly state: StateSlice<S> | undefined
  readonly canJumpTo: ReadonlyArray<Jump>
  readonly tools: Effect.Effect<Toolkit.WithHandler<any>, any, any> | undefined
  /** The names of the agent's tools this middleware refers to: `Agent.make` checks the agent has them. */
  readonly uses: Uses
  /**
   * Set on a middleware built by {@link unwrap}: `Agent.make` runs it, once,
   * before anything else, and uses the middleware it gives in place of this
   * one (whose other fields are then unset, and `name` is the one given to
   * `unwrap` or {@link withName}, else `"unwrap"`).
   */
  readonly setup: Effect.Effect<Middleware<S, E, R, B, W>, B, R> | undefined
  /** What the middleware waits for when it interrupts (see {@link Wait.Wait}); `undefined`: it never waits. */
  readonly wait: Wait.Wait<any, any, E, R> | undefined
  readonly beforeAgent: NodeHook<S, Jump, E, R | Scope.Scope, unknown, unknown> | undefined
  readonly beforeModel: NodeHook<S, Jump, E, R | Scope.Scope, unknown, unknown> | undefined
  readonly afterModel: NodeHook<S, Jump, E, R | Scope.Scope, unknown, unknown> | undefined
  readonly afterAgent: NodeHook<S, Jump, E, R | Scope.Scope, unknown, unknown> | undefined
  readonly wrapModelCall: WrapModelCall<E, R | Scope.Scope> | undefined
  readonly wrapToolCall: WrapToolCall<E, R | Scope.Scope> | undefined
  readonly wrapModelStream: WrapModelStream<E, R> | undefined
  readonly transformInput: TransformInput<E, R> | undefined
  readonly onThreadDeleted: OnThreadDeleted<R, S> | undefined
}

/**
 * What a middleware refers to by name, that `Agent.make` checks the agent
 * has: a name in `tools` that is not one of the agent's tools (its toolkit's
 * or another middleware's) fails `Agent.make` with `UnknownTools`.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 *
 * const uses: Middleware.Uses = { tools: ["send_email"] }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Uses {
  readonly tools?: ReadonlyArray<string> | undefined
}

/**
 * Any middleware.
 *
 * @since 0.1.0
 * @category utility types
 */
export type Any = Middleware<any, any, any, any, any>

/**
 * The state slice of a middleware.
 *
 * @since 0.1.0
 * @category utility types
 */
export type State<M> = M extends Middleware<infer S, infer _E, infer _R, infer _B, infer _W> ? S : never

/**
 * The errors a middleware's hooks may fail with.
 *
 * @since 0.1.0
 * @category utility types
 */
export type Error<M> = M extends Middleware<infer _S, infer E, infer _R, infer _B, infer _W> ? E : never

/**
 * The services a middleware's setup, hooks and tools need.
 *
 * @since 0.1.0
 * @category utility types
 */
export type Requirements<M> = M extends Middleware<infer _S, infer _E, infer R, infer _B, infer _W> ? R : never

/**
 * The errors building a middleware may fail `Agent.make` with (its setup's
 * and its tools').
 *
 * @example
 * ```ts
 * import type { AgentError, Middleware } from "@stepwise-agent/core"
 *
 * type Build = Middleware.BuildError<Middleware.Middleware> // AgentError.InvalidOptions
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type BuildError<M> = M extends Middleware<infer _S, infer _E, infer _R, infer B, infer _W> ? B : never

/**
 * The wait a middleware declares (`never` for one that never waits): an
 * agent's waits are the union of its middleware's.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Schema } from "effect"
 *
 * const confirm = Middleware.make({
 *   name: "confirm",
 *   wait: { request: Schema.String, decision: Schema.Boolean }
 * })
 * type Confirm = Middleware.Waits<typeof confirm> // Wait.Declared<"confirm", string, boolean>
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type Waits<M> = M extends Middleware<infer _S, infer _E, infer _R, infer _B, infer W> ? W : never

type ErrorOf<H> = H extends (...args: ReadonlyArray<any>) => Effect.Effect<infer _A, infer E, infer _R> ? E : never
type ContextOf<H> = H extends (...args: ReadonlyArray<any>) => Effect.Effect<infer _A, infer _E, infer R> ? R : never
type StreamErrorOf<H> = H extends (...args: ReadonlyArray<any>) => Stream.Stream<infer _A, infer E, infer _R> ? E
  : never
type StreamContextOf<H> = H extends (...args: ReadonlyArray<any>) => Stream.Stream<infer _A, infer _E, infer R> ? R
  : never

/** The keys the updates of a node hook set that the slice `S` does not declare. */
type StrayKeys<S, H> = H extends (...args: ReadonlyArray<any>) => Effect.Effect<infer A, infer _E, infer _R> ?
  A extends { readonly state?: infer U } ? Exclude<keyof NonNullable<U>, keyof S> & string : never
  : never

/**
 * `unknown` when every update of the hook `H` sets only keys of the slice
 * `S`, else a message naming the stray key: {@link make} intersects it with
 * the hook, so that the hook does not compile.
 *
 * @example
 * ```ts
 * import type { Middleware } from "@stepwise-agent/core"
 * import type { Effect } from "effect"
 *
 * type Hook = () => Effect.Effect<{ state: { cals: number } }>
 * type Check = Middleware.CheckUpdate<{ readonly calls: number }, Hook>
 * // `state key "cals" is not declared by this middleware's state`
 * ```
 *
 * @since 0.1.0
 * @category utility types
 */
export type CheckUpdate<S, H> = [StrayKeys<S, H>] extends [never] ? unknown
  : `state key "${StrayKeys<S, H>}" is not declared by this middleware's state`

/**
 * Options of {@link make}.
 *
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions<S, J extends Jump, TE, TR, N extends string = string> {
  /** Unique within an agent; shown in spans, events and errors. */
  readonly name: N
  /** The middleware's own state slice. */
  readonly state?: StateSlice<S> | undefined
  /** The nodes the node hooks may jump to; any other jump is an `InvalidJump` error. */
  readonly canJumpTo?: ReadonlyArray<J> | undefined
  /**
   * Tools this middleware adds to the agent (a `Toolkit`, which needs its
   * handlers, an Effect of a handled toolkit such as `McpToolkit.make`, or a
   * handled toolkit itself). `Agent.make` builds them; a failure fails it.
   */
  readonly tools?: Effect.Effect<Toolkit.WithHandler<any>, TE, TR> | Toolkit.WithHandler<any> | undefined
  /** The names of the agent's tools this middleware refers to, checked by `Agent.make` (see {@link Uses}). */
  readonly uses?: Uses | undefined
}

const Proto = {
  pipe() {
    // eslint-disable-next-line prefer-rest-params
    return pipeArguments(this, arguments)
  }
}

/**
 * Builds a middleware.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * // Ends the run when the last user message says "stop".
 * const stopWord = Middleware.make({
 *   name: "stopWord",
 *   canJumpTo: ["end"],
 *   beforeModel: ({ messages }) => {
 *     const last = messages.at(-1)
 *     const said = last?.role === "user" && last.content.some((part) => part.type === "text" && part.text === "stop")
 *     return Effect.succeed(said ? { jumpTo: "end" as const } : undefined)
 *   }
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <
  S extends object = {},
  const J extends Jump = never,
  TE = never,
  TR = never,
  const N extends string = string,
  Q = never,
  D = never,
  BA extends NodeHook<S, J, any, any, Q, D> = NodeHook<S, J, never, never, Q, D>,
  BM extends NodeHook<S, J, any, any, Q, D> = NodeHook<S, J, never, never, Q, D>,
  AM extends NodeHook<S, J, any, any, Q, D> = NodeHook<S, J, never, never, Q, D>,
  AA extends NodeHook<S, J, any, any, Q, D> = NodeHook<S, J, never, never, Q, D>,
  WM extends WrapModelCall<any, any> = WrapModelCall<never, never>,
  WT extends WrapToolCall<any, any> = WrapToolCall<never, never>,
  WS extends WrapModelStream<any, any> = WrapModelStream<never, never>,
  TI extends TransformInput<any, any> = TransformInput<never, never>,
  WC extends WaitCheck<Q, D, any, any> = WaitCheck<Q, D, never, never>,
  TD extends OnThreadDeleted<any, S> = OnThreadDeleted<never, S>
>(
  options: MakeOptions<S, J, TE, TR, N> & {
    /**
     * What the node hooks may wait for: the schemas of the request they
     * interrupt with and of the decision `Agent.resume` answers with (see
     * {@link Wait.Wait}). A middleware without one cannot interrupt.
     */
    readonly wait?: {
      readonly request: Schema.Schema<Q, any>
      readonly decision: Schema.Schema<D, any>
      readonly check?: WC | undefined
      /** The texts a person typed in a decision, replaced (see {@link Wait.Wait}). */
      readonly personTexts?:
        | ((decision: NoInfer<D>, replace: (text: string) => string, request: NoInfer<Q> | undefined) => NoInfer<D>)
        | undefined
    } | undefined
    readonly beforeAgent?: (BA & CheckUpdate<S, BA>) | undefined
    readonly beforeModel?: (BM & CheckUpdate<S, BM>) | undefined
    readonly afterModel?: (AM & CheckUpdate<S, AM>) | undefined
    readonly afterAgent?: (AA & CheckUpdate<S, AA>) | undefined
    readonly wrapModelCall?: WM | undefined
    readonly wrapToolCall?: WT | undefined
    readonly wrapModelStream?: WS | undefined
    /** Rewrites the run's input before it is stored, before any node hook (see {@link TransformInput}). */
    readonly transformInput?: TI | undefined
    /** Frees this middleware's per-thread data outside the checkpoint when the thread is deleted. */
    readonly onThreadDeleted?: TD | undefined
  }
): Middleware<
  S,
  Exclude<
    ErrorOf<BA | BM | AM | AA | WM | WT | TI | WC> | StreamErrorOf<WS>,
    AiError.AiError | AgentError.ToolDefect | AgentError.ToolTimeout | AgentError.ModelReplyError
  >,
  // NoInfer: inside `Agent.make({ middleware: [Middleware.make({ tools })] })` the list's `Middleware.Any` would
  // otherwise give the toolkit's `TE` and `TR` as `any` (tools of no error and no service give no candidate)
  NoInfer<TR> | Exclude<ContextOf<BA | BM | AM | AA | WM | WT | TI | WC | TD> | StreamContextOf<WS>, Scope.Scope>,
  NoInfer<TE>,
  [Q] extends [never] ? never : Wait.Declared<N, Q, D>
> => {
  const invalid = !Predicate.isObject(options)
    ? new InvalidOptions({
      module: "Middleware",
      option: "options",
      reason: `must be an object, got ${describeValue(options)}`
    })
    : unknownKey("Middleware", options, makeKeys) ?? nameProblem(options) ?? hookNotAFunction(options)
  if (invalid !== undefined) {
    // refused when the agent is built, as a built-in's bad options are
    return unwrap(Effect.fail(invalid), {
      name: Predicate.hasProperty(options, "name") && typeof options.name === "string" && options.name.length > 0
        ? options.name
        : undefined
    }) as Middleware<any, any, any, any, any>
  }
  return Object.assign(Object.create(Proto), {
    [TypeId]: TypeId,
    name: options.name,
    state: options.state,
    canJumpTo: options.canJumpTo ?? [],
    tools: options.tools === undefined ? undefined : toolkitEffect(options.tools),
    uses: { tools: options.uses?.tools ?? [] },
    setup: undefined,
    wait: options.wait,
    beforeAgent: options.beforeAgent,
    beforeModel: options.beforeModel,
    afterModel: options.afterModel,
    afterAgent: options.afterAgent,
    wrapModelCall: options.wrapModelCall,
    wrapToolCall: options.wrapToolCall,
    wrapModelStream: options.wrapModelStream,
    transformInput: options.transformInput,
    onThreadDeleted: options.onThreadDeleted
  })
}

/** The hooks {@link make} takes; each, when given, is a function. */
const hookKeys = [
  "beforeAgent",
  "beforeModel",
  "afterModel",
  "afterAgent",
  "wrapModelCall",
  "wrapToolCall",
  "wrapModelStream",
  "transformInput",
  "onThreadDeleted"
] as const

/** Every key {@link make}'s options may have: a typo (`wrapModelcall`) is refused, never a hook quietly unset. */
const makeKeys: ReadonlyArray<string> = ["name", "state", "canJumpTo", "tools", "uses", "wait", ...hookKeys]

const nameProblem = (options: object): AgentError.InvalidOptions | undefined => {
  const name: unknown = (options as { readonly name?: unknown }).name
  return typeof name === "string" && name.length > 0 ? undefined : new InvalidOptions({
    module: "Middleware",
    option: "name",
    reason: `must be a non-empty string, got ${describeValue(name)}`
  })
}

const hookNotAFunction = (options: object): AgentError.InvalidOptions | undefined => {
  for (const key of hookKeys) {
    const hook: unknown = (options as Record<string, unknown>)[key]
    if (hook !== undefined && typeof hook !== "function") {
      return new InvalidOptions({
        module: "Middleware",
        option: key,
        reason: `must be a function, got ${describeValue(hook)}`
      })
    }
  }
  return undefined
}

/** The check of a wait's decision against its request (see {@link Wait.Wait}). */
type WaitCheck<Q, D, E, R> = (answer: Wait.Answer<Q, D>) => Effect.Effect<void, E, R>

/**
 * A middleware built by an effect, which `Agent.make` runs once, in list
 * order, before it checks anything else: for a constructor that must decode
 * its options (a failure is an `InvalidOptions`), build something (a model)
 * or read a service to build the middleware. The effect's errors fail
 * `Agent.make` (they are the middleware's `B`), its services join the
 * middleware's `R`. The value itself is a placeholder until then: its hooks
 * are unset, and its `name` is `options.name` (the middleware it builds is
 * given that name), else `"unwrap"`.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Context, Effect } from "effect"
 *
 * class Greeting extends Context.Tag("app/Greeting")<Greeting, string>() {}
 *
 * // reads the greeting once, when the agent is built
 * const greet = Middleware.unwrap(Effect.gen(function*() {
 *   const greeting = yield* Greeting
 *   return Middleware.make({
 *     name: "greet",
 *     wrapModelCall: (request, next) => next({ ...request, systemPrompt: `${greeting} ${request.systemPrompt ?? ""}` })
 *   })
 * }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const unwrap = <S, E, R, B, W extends Wait.Any, B2, R2>(
  setup: Effect.Effect<Middleware<S, E, R, B, W>, B2, R2>,
  options?: {
    /** The name of the middleware it builds, known before it is built (see {@link withName}). */
    readonly name?: string | undefined
  }
): Middleware<S, E, R | R2, B | B2, W> => {
  const unwrapped: Middleware<S, E, R | R2, B | B2, W> = Object.assign(Object.create(Proto), {
    [TypeId]: TypeId,
    name: "unwrap",
    state: undefined,
    canJumpTo: [],
    tools: undefined,
    uses: {},
    setup,
    wait: undefined,
    beforeAgent: undefined,
    beforeModel: undefined,
    afterModel: undefined,
    afterAgent: undefined,
    wrapModelCall: undefined,
    wrapToolCall: undefined,
    wrapModelStream: undefined,
    transformInput: undefined,
    onThreadDeleted: undefined
  })
  return options?.name === undefined ? unwrapped : rename(unwrapped, options.name)
}

/**
 * Runs the setup of a middleware built by {@link unwrap} (and of what it
 * gives, in turn), as `Agent.make` does, and gives the middleware it builds;
 * a middleware without a setup as it is. To test a middleware's hooks
 * without an agent, or its options.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const built = yield* Middleware.build(Middleware.unwrap(Effect.succeed(Middleware.make({ name: "inner" }))))
 *   return built.name // "inner"
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const build = <S, E, R, B, W extends Wait.Any>(
  self: Middleware<S, E, R, B, W>
): Effect.Effect<Middleware<S, E, R, B, W>, B, R> =>
  self.setup === undefined ? Effect.succeed(self) : Effect.flatMap(self.setup, build)

/**
 * The same middleware under another name: to use a middleware twice in one
 * agent (names must be unique), or to tell two apart in reports. Its state
 * slices keep their keys, so a middleware with state cannot be used twice.
 * A middleware built by {@link unwrap} gets the name once it is built.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 *
 * const audit = Middleware.make({ name: "audit" })
 * const twice = [audit, audit.pipe(Middleware.withName("audit-inner"))]
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const withName: {
  <const N extends string>(name: N): <M extends Any>(self: M) => WithName<M, N>
  <M extends Any, const N extends string>(self: M, name: N): WithName<M, N>
} = dual(2, <M extends Any, N extends string>(self: M, name: N): WithName<M, N> =>
  // only the name changes: the wait's type is relabelled with it
  rename(self, name) as Any as WithName<M, N>)

/** `self` under the name `name` (its setup's middleware too, once built). */
const rename = <M extends Any>(self: M, name: string): M =>
  Object.assign(
    Object.create(Proto),
    self,
    self.setup === undefined ? { name } : { name, setup: Effect.map(self.setup, (built) => rename(built, name)) }
  )

/**
 * The middleware `M` named `N`: its wait, if it declares one, is now
 * `N`'s (see {@link withName}).
 *
 * @since 0.1.0
 * @category utility types
 */
export type WithName<M extends Any, N extends string> = M extends
  Middleware<infer S, infer E, infer R, infer B, infer W> ? Middleware<S, E, R, B, Wait.Renamed<W, N>> : never

/**
 * Checks whether a value is a middleware.
 *
 * @since 0.1.0
 * @category guards
 */
export const isMiddleware = (u: unknown): u is Any => Predicate.hasProperty(u, TypeId)

/**
 * Builds the result of a tool call, for a `wrapToolCall` that answers without
 * running the tool (a cache, an emulator, a refusal), or a hook that answers
 * a call itself. With `fromPerson`, the result holds what a person typed (an
 * approval's answer or reason): before any other hook sees it, the agent
 * passes each text in it through the `transformInput` hooks, as it does the
 * user's input (so `Pii` redacts it, whatever the order of the middleware).
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const refuseDeletes = Middleware.make({
 *   name: "refuseDeletes",
 *   wrapToolCall: (request, next) =>
 *     request.call.name === "delete_file"
 *       ? Effect.succeed(Middleware.toolResult(request.call, "Deleting files is not allowed", { isFailure: true }))
 *       : next(request)
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolResult = (
  call: Prompt.ToolCallPart,
  result: unknown,
  options?: { readonly isFailure?: boolean | undefined; readonly fromPerson?: boolean | undefined }
): Prompt.ToolResultPart =>
  Prompt.makePart("tool-result", {
    id: call.id,
    name: call.name,
    result,
    isFailure: options?.isFailure ?? false,
    providerExecuted: false,
    ...(options?.fromPerson === true ? { options: PersonAnswer.unchecked } : {})
  })

/**
 * Builds a model response, for a `wrapModelCall` that answers without
 * calling the model (a cache, a canned refusal, a limit).
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const closed = Middleware.make({
 *   name: "closed",
 *   wrapModelCall: () => Effect.succeed(Middleware.modelResponse("We are closed today."))
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const modelResponse = (
  text: string,
  options?: {
    readonly toolCalls?: ReadonlyArray<Prompt.ToolCallPart> | undefined
    readonly usage?: Response.Usage | undefined
    readonly finishReason?: Response.FinishReason | undefined
  }
): ModelResponse => {
  const toolCalls = options?.toolCalls ?? []
  const content: Array<Prompt.AssistantMessagePart> = text === "" ? [] : [Prompt.makePart("text", { text })]
  return {
    message: Prompt.makeMessage("assistant", { content: [...content, ...toolCalls] }),
    toolCalls,
    usage: options?.usage ?? new ResponseUsage({ inputTokens: 0, outputTokens: 0, totalTokens: 0 }),
    finishReason: options?.finishReason ?? (toolCalls.length > 0 ? "tool-calls" : "stop")
  }
}

/**
 * A decision a middleware reports: it becomes an `AgentEvent` of the run and
 * an event on the current span.
 *
 * @since 0.1.0
 * @category models
 */
export interface Decision {
  readonly middleware: string
  readonly hook: string
  readonly decision: string
  readonly data?: unknown
}

/**
 * Where the events of the current run go while someone streams or watches it
 * (`undefined` otherwise). A middleware that runs another agent inside a
 * hook (`SubAgents`) forwards that run's events here, wrapped in
 * `AgentEvent.SubAgentEvent`, and runs the child silently when there is no
 * sink.
 *
 * @example
 * ```ts
 * import { AgentEvent, Middleware } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const forward = (event: AgentEvent.AgentEvent<any, any>) =>
 *   Effect.flatMap(Middleware.eventSink, (sink) =>
 *     Effect.sync(() => sink?.(AgentEvent.SubAgentEvent({ callId: "call_1", agent: "researcher", threadId: "t/task/call_1/1", event }))))
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const eventSink: Effect.Effect<((event: AgentEvent.AgentEvent<any, any>) => void) | undefined> =
  observer.EventSink

/**
 * What a run saved: the agent state (as the hooks see it) of its last save
 * the store accepted, `None` before its first. A finalizer a hook adds to the
 * run's `Scope` reads it when the run ends, to tell what of the run's work the
 * stored thread holds: a text the hook wrote outside the thread whose
 * reference that state does not record was never saved (the run failed, or
 * was interrupted, before a save held it; a save that found the thread
 * deleted or made again fails the run with a `CheckpointError` whose
 * `conflict` is set, and then no save of the run stands).
 *
 * @since 0.1.0
 * @category models
 */
export interface RunSaves {
  /** The state of the run's last accepted save, as `ModelRequest.state` shows one; `None` before its first. */
  readonly state: () => Option.Option<Readonly<Record<string, unknown>>>
}

/**
 * The saves of the current run (`None` outside a run), for a hook that
 * writes outside the thread (a file, a store) and keeps the reference in its
 * state slice: a finalizer it adds to the run's `Scope` removes, when the run
 * ends, what no save of the run recorded.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Effect, Option } from "effect"
 *
 * const written = new Set<string>()
 * const notes = Middleware.make({
 *   name: "notes",
 *   beforeModel: ({ step }) =>
 *     Effect.gen(function*() {
 *       const note = `note-${step}`
 *       written.add(note)
 *       const saves = yield* Middleware.runSaves
 *       if (Option.isSome(saves)) {
 *         // the run ended: a note its last save does not record is dropped
 *         yield* Effect.addFinalizer(() =>
 *           Effect.sync(() => {
 *             const saved = Option.getOrUndefined(saves.value.state())
 *             if (saved === undefined || !(saved.notes as ReadonlyArray<string>).includes(note)) written.delete(note)
 *           })
 *         )
 *       }
 *     })
 * })
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const runSaves: Effect.Effect<Option.Option<RunSaves>> = Effect.map(RunSavesRef.Current, Option.fromNullable)

/**
 * Runs `self` with the decisions it reports ({@link report}) filed under
 * hook `hook` of middleware `middleware`: for work of a hook that runs
 * outside it, such as a guard at the end of the `wrapToolCall` chain
 * ({@link guardToolCall}) or a stream read after `wrapModelStream` returned.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 *
 * const reported = Middleware.report("stream redacted").pipe(
 *   Middleware.reportingAs({ middleware: "pii", hook: "wrapModelStream" })
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const reportingAs: {
  (location: { readonly middleware: string; readonly hook: string }): <A, E, R>(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    location: { readonly middleware: string; readonly hook: string }
  ): Effect.Effect<A, E, R>
} = dual(
  2,
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    location: { readonly middleware: string; readonly hook: string }
  ): Effect.Effect<A, E, R> =>
    Effect.locally(self, observer.currentHook, { middleware: location.middleware, hook: location.hook })
)

/**
 * A check of a tool call at the very end of the `wrapToolCall` chain, on the
 * call exactly as the tool will get it, after every `wrapToolCall` (listed
 * before or after the one that installed it) had its say: `None` lets the
 * tool run, `Some(result)` answers the call instead. Installed around `next`
 * with {@link guardToolCall}; it does not reach tool calls made inside the
 * tool (a subagent's).
 *
 * @since 0.1.0
 * @category models
 */
export type ToolCallGuard = (request: ToolCallRequest) => Effect.Effect<Option.Option<Prompt.ToolResultPart>>

/**
 * Runs `self` (a `wrapToolCall`'s call of `next`) with `guard` checking the
 * tool call where the chain ends, just before the tool runs: what the guard
 * sees is what runs, whatever the inner `wrapToolCall` hooks changed. For a
 * check that must hold of the call that actually runs (an approval of these
 * arguments), where a check in the hook itself would see the call before the
 * hooks inside it changed it.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Effect, Option } from "effect"
 *
 * // never runs a call whose arguments name production, whoever changed them
 * const noProduction = Middleware.make({
 *   name: "noProduction",
 *   wrapToolCall: (request, next) =>
 *     next(request).pipe(Middleware.guardToolCall((final) =>
 *       Effect.succeed(
 *         JSON.stringify(final.call.params).includes("production")
 *           ? Option.some(Middleware.toolResult(final.call, { error: "not in production" }, { isFailure: true }))
 *           : Option.none()
 *       )
 *     ))
 * })
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const guardToolCall: {
  (guard: ToolCallGuard): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, guard: ToolCallGuard): Effect.Effect<A, E, R>
} = dual(
  2,
  <A, E, R>(self: Effect.Effect<A, E, R>, guard: ToolCallGuard): Effect.Effect<A, E, R> =>
    Effect.flatMap(ToolCallGuards, (guards) => Effect.provideService(self, ToolCallGuards, [...guards, guard]))
)

/** Effect's built-in tracer, whose spans are exported nowhere. */
const builtInTracer = Effect.runSync(Effect.tracer)

/**
 * Reports what the running middleware decided ("cleared 12 tool results",
 * "retry 2 of 3 after 429"). The decision is recorded on the current span
 * (as its `decision` attribute, when a tracer other than Effect's built-in
 * one is installed: the built-in one exports nothing) and streamed as a
 * `MiddlewareDecision` event.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const audit = Middleware.make({
 *   name: "audit",
 *   wrapToolCall: (request, next) =>
 *     Middleware.report(`running ${request.call.name}`).pipe(Effect.zipRight(next(request)))
 * })
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const report = (decision: string, data?: unknown): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => {
    const current = fiber.getFiberRef(observer.currentHook)
    const filed = { middleware: current.middleware, hook: current.hook, decision, data }
    const context = fiber.currentContext
    // (with no span at all, `annotateCurrentSpan` fails with an error, stack trace and all, that it then ignores;
    // the built-in tracer's spans are exported nowhere, as the agent's hooks get none of them by default)
    return fiber.currentTracer === builtInTracer || Context.getOption(context, Tracer.ParentSpan)._tag === "None"
      ? observer.decideIn(context, filed)
      : Effect.zipRight(Effect.annotateCurrentSpan("decision", decision), observer.decided(filed))
  })

/**
 * Whether a tool call's arguments nest arrays and objects more than 128
 * levels deep: the agent answers such a call with a failed result for the
 * model to repair, before any schema sees the arguments, so a middleware
 * that decides about calls that can run (an approval gate) leaves it alone.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 *
 * Middleware.argumentsTooDeep({ path: "/tmp/a" }) // false
 * Middleware.argumentsTooDeep(JSON.parse("[".repeat(200) + "]".repeat(200))) // true
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const argumentsTooDeep = (params: unknown): boolean => JsonDepth.exceeds(params)
