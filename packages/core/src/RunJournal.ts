/**
 * The durable seam of a run. Every effect of a run that must not be
 * repeated is a named step of the `RunJournal` of the context: loading the
 * thread, each model call (with its `wrapModelCall` hooks), each tool call
 * (with its `wrapToolCall` hooks) and each checkpoint; a wait for a decision
 * after an interrupt is its one other operation, `await`.
 *
 * The loop names every step once ({@link StepKey}), the same way on every
 * replay; the key carries the schema of the step's result, and a journal
 * only records or replays. Without one in the context a run executes in process
 * ({@link inProcess}): each step runs as it is and an interrupt ends the run
 * as `Interrupted`. The durable journal of `@stepwise-agent/workflow` records
 * each step in a workflow activity (a checkpoint in the one that follows it)
 * and waits for decisions durably, so the same agent and middleware run
 * unchanged on `@effect/workflow`.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as AgentError from "./AgentError.js"
import * as Checkpointer from "./Checkpointer.js"
import * as Waits from "./internal/waits.js"
import type * as Middleware from "./Middleware.js"
import type * as ToolEffect from "./ToolEffect.js"

/**
 * The name of one step of a run, and what the step gives (`A`): the load of
 * its thread, its `index`-th checkpoint, its `index`-th look into the
 * thread's inbox (the steer messages `Agent.send` left for it, taken in
 * before a model step), the model call of step `step`, or the
 * `occurrence`-th call with the id of `call` (providers may repeat ids across
 * replies). A run names its steps the same way each time it is replayed.
 * `Nested` is a step of a run started inside another run's step or hook (a
 * subagent's), named under `path` in the outer run's journal ({@link nested}).
 *
 * Each key carries the `schema` a journal records its result with, and its
 * `result`: that `A` is the type a step of its kind gives, so a journal that
 * matches on `_tag` uses and gives the kind's values without a cast.
 *
 * @example
 * ```ts
 * import { RunJournal } from "@stepwise-agent/core"
 *
 * const key = RunJournal.StepKey.Model({ step: 2 })
 * RunJournal.stepName(key) // "model/2"
 * key.schema // RunJournal.ModelCall: what a model step gives
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type StepKey<A> =
  | StepKey.Load<A>
  | StepKey.Checkpoint<A>
  | StepKey.Inbox<A>
  | StepKey.Model<A>
  | StepKey.Tool<A>
  | StepKey.Nested<A>

/**
 * @since 0.1.0
 * @category models
 */
export declare namespace StepKey {
  /**
   * That `A` is `R`: both functions are the identity. A key's constructor,
   * where `A` is its kind's result `R`, gives it; a journal that narrowed a
   * key by `_tag` converts with it between the two names of one type.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Same<R, A> {
    readonly to: (result: R) => A
    readonly from: (value: A) => R
  }

  /**
   * The schema a step's result is journaled with. Its encoded form (plain
   * JSON) is the journal's to store as it is, so it is left unnamed: any
   * journal encodes and decodes with `Schema.encode(key.schema)` and
   * `Schema.decodeUnknown(key.schema)`.
   *
   * @since 0.1.0
   * @category models
   */
  export type ResultSchema<A> = Schema.Schema<A, any>

  /**
   * What every key but `Nested` has: its kind, the schema its result is
   * journaled with and that `A` is the kind's result `R`.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Proto<Tag extends string, R, A> {
    readonly _tag: Tag
    readonly schema: ResultSchema<A>
    readonly result: Same<R, A>
  }

  /**
   * The load of the thread: its last checkpoint, if any.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Load<A = Option.Option<Checkpointer.Checkpoint>>
    extends Proto<"Load", Option.Option<Checkpointer.Checkpoint>, A>
  {}

  /**
   * The `index`-th checkpoint of the run: gives nothing.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Checkpoint<A = void> extends Proto<"Checkpoint", void, A> {
    readonly index: number
  }

  /**
   * The `index`-th look into the thread's inbox: the messages it took in.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Inbox<A = ReadonlyArray<Prompt.Message>> extends Proto<"Inbox", ReadonlyArray<Prompt.Message>, A> {
    readonly index: number
  }

  /**
   * The model call of step `step`: its {@link ModelCall}.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Model<A = ModelCall> extends Proto<"Model", ModelCall, A> {
    readonly step: number
  }

  /**
   * The `occurrence`-th call with the id of `call`: its {@link ToolCall}.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Tool<A = ToolCall> extends Proto<"Tool", ToolCall, A> {
    readonly call: Prompt.ToolCallPart
    readonly occurrence: number
    /**
     * The call's entry in the effect ledger (`ToolEffect.entry`): what its
     * tool declares it does. `undefined` for a read-only tool, or a call of
     * no tool of the agent: a journal may run such a call again freely.
     */
    readonly ledger?: ToolEffect.LedgerEntry | undefined
    /**
     * The undo of a compensatable tool (`ToolEffect.compensatable`): what
     * takes the call back, given its arguments and ledger entry. A durable
     * journal runs it as the call's compensation when the run fails.
     */
    readonly undo?: ToolEffect.Compensatable["undo"] | undefined
  }

  /**
   * A step of a run started inside another run's step, named under `path`:
   * it gives what `key` gives, journaled with its schema.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Nested<A> {
    readonly _tag: "Nested"
    readonly path: string
    readonly key: StepKey<A>
    readonly schema: ResultSchema<A>
  }

  /**
   * A key that is not `Nested`: the step itself.
   *
   * @since 0.1.0
   * @category models
   */
  export type Leaf<A> = Exclude<StepKey<A>, Nested<A>>

  /**
   * The kinds of keys.
   *
   * @since 0.1.0
   * @category models
   */
  export type Tag = StepKey<unknown>["_tag"]
}

/** A loaded thread as journaled. */
const Loaded = Schema.OptionFromNullOr(Checkpointer.Checkpoint)
/** The messages a look into the inbox took in, as journaled. */
const TakenIn = Schema.Array(Prompt.Message)

/** `A` is `A`: one object serves every key. */
const same = { to: <A>(value: A): A => value, from: <A>(value: A): A => value }

/**
 * Constructors and a refinement of {@link StepKey}: each constructor gives
 * the key its kind's schema.
 *
 * @example
 * ```ts
 * import { RunJournal } from "@stepwise-agent/core"
 *
 * const isModelCall = RunJournal.StepKey.$is("Model")
 * isModelCall(RunJournal.StepKey.Load()) // false
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const StepKey = {
  Load: (): StepKey.Load => ({ _tag: "Load", schema: Loaded, result: same }),
  Checkpoint: ({ index }: { readonly index: number }): StepKey.Checkpoint => ({
    _tag: "Checkpoint",
    index,
    schema: Schema.Void,
    result: same
  }),
  Inbox: ({ index }: { readonly index: number }): StepKey.Inbox => ({
    _tag: "Inbox",
    index,
    schema: TakenIn,
    result: same
  }),
  Model: ({ step }: { readonly step: number }): StepKey.Model => ({
    _tag: "Model",
    step,
    schema: ModelCall,
    result: same
  }),
  Tool: ({ call, ledger, occurrence, undo }: {
    readonly call: Prompt.ToolCallPart
    readonly occurrence: number
    readonly ledger?: ToolEffect.LedgerEntry | undefined
    readonly undo?: ToolEffect.Compensatable["undo"] | undefined
  }): StepKey.Tool => ({
    _tag: "Tool",
    call,
    occurrence,
    ...(ledger === undefined ? {} : { ledger }),
    ...(undo === undefined ? {} : { undo }),
    schema: ToolCall,
    result: same
  }),
  Nested: <A>({ key, path }: { readonly path: string; readonly key: StepKey<A> }): StepKey.Nested<A> => ({
    _tag: "Nested",
    path,
    key,
    schema: key.schema
  }),
  $is:
    <Tag extends StepKey.Tag>(tag: Tag) => <A>(key: StepKey<A>): key is Extract<StepKey<A>, { readonly _tag: Tag }> =>
      key._tag === tag
}

/**
 * A step's name as text, unique within a run: `load`, `checkpoint/<index>`,
 * `inbox/<index>`, `model/<step>`, `tool/<callId>` (then `tool/<callId>#<n>` for the n-th
 * call with that id), and `<path>/<name>` for a nested step. A journal that
 * stores steps by name uses this one.
 *
 * @example
 * ```ts
 * import type { Prompt } from "@effect/ai"
 * import { RunJournal } from "@stepwise-agent/core"
 *
 * declare const call: Prompt.ToolCallPart // with id "call_0"
 * RunJournal.stepName(RunJournal.StepKey.Tool({ call, occurrence: 2 })) // "tool/call_0#2"
 * ```
 *
 * @since 0.1.0
 * @category getters
 */
export const stepName = <A>(key: StepKey<A>): string => {
  switch (key._tag) {
    case "Load":
      return "load"
    case "Checkpoint":
      return `checkpoint/${key.index}`
    case "Inbox":
      return `inbox/${key.index}`
    case "Model":
      return `model/${key.step}`
    case "Tool":
      return key.occurrence === 1 ? `tool/${key.call.id}` : `tool/${key.call.id}#${key.occurrence}`
    case "Nested":
      return `${key.path}/${stepName(key.key)}`
  }
}

/**
 * The step a key names, whatever run it belongs to: `key` itself, or the
 * innermost key of a `Nested` one. A journal that treats kinds of steps
 * differently (checkpoints, tool calls) asks this.
 *
 * @example
 * ```ts
 * import { RunJournal } from "@stepwise-agent/core"
 *
 * const key = RunJournal.StepKey.Nested({ path: "task/call_1/1", key: RunJournal.StepKey.Model({ step: 0 }) })
 * RunJournal.innermost(key)._tag // "Model"
 * ```
 *
 * @since 0.1.0
 * @category getters
 */
export const innermost = <A>(key: StepKey<A>): StepKey.Leaf<A> => key._tag === "Nested" ? innermost(key.key) : key

/** The state updates the wrap hooks of one call returned, by middleware, innermost first. */
const StateUpdates = Schema.Array(Schema.Struct({
  middleware: Schema.String,
  state: Schema.Record({ key: Schema.String, value: Schema.Unknown })
}))

/**
 * The outcome of one model call as the loop stores it: the reply, its usage
 * and finish reason, the names of the tools the call offered (after the
 * `wrapModelCall` hooks changed the request; a replayed run refuses calls of
 * the others as this one did), and the state updates its `wrapModelCall`
 * hooks returned, by middleware, innermost first (a replay applies them as
 * the first execution did; their values must be JSON for a durable journal).
 *
 * @example
 * ```ts
 * import { RunJournal } from "@stepwise-agent/core"
 * import { Schema } from "effect"
 *
 * const decode = Schema.decodeUnknownEither(RunJournal.ModelCall)
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const ModelCall = Schema.Struct({
  message: Prompt.AssistantMessage,
  usage: Response.Usage,
  finishReason: Response.FinishReason,
  offered: Schema.Array(Schema.String),
  updates: Schema.optional(StateUpdates)
})

/**
 * @since 0.1.0
 * @category models
 */
export type ModelCall = typeof ModelCall.Type

/**
 * The outcome of one tool call as the loop stores it: the tool result, and
 * the state updates its `wrapToolCall` hooks returned, by middleware,
 * innermost first (a replay applies them as the first execution did, without
 * running the tool again; their values must be JSON for a durable journal).
 * The agent takes `updates` off before it stores the result.
 *
 * @example
 * ```ts
 * import type { RunJournal } from "@stepwise-agent/core"
 *
 * const updated = (call: RunJournal.ToolCall) => (call.updates ?? []).map((update) => update.middleware)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCall extends Prompt.ToolResultPart {
  readonly updates?: typeof StateUpdates.Type | undefined
}

/** A tool call with updates, as journaled: the result beside them. */
const ToolCallWithUpdates = Schema.Struct({ result: Prompt.ToolResultPart, updates: StateUpdates })

/**
 * The schema a tool call is journaled with ({@link ToolCall}). A call
 * without updates is stored as its result alone, as before updates existed,
 * so every stored tool step decodes; one with updates as `{ result, updates }`.
 *
 * @example
 * ```ts
 * import { Prompt } from "@effect/ai"
 * import { RunJournal } from "@stepwise-agent/core"
 * import { Schema } from "effect"
 *
 * const result = Prompt.makePart("tool-result", {
 *   id: "call_1", name: "echo", result: "hi", isFailure: false, providerExecuted: false
 * })
 * Schema.encodeSync(RunJournal.ToolCall)({ ...result, updates: [{ middleware: "counter", state: { calls: 1 } }] })
 * // { result: { type: "tool-result", id: "call_1", … }, updates: [{ middleware: "counter", state: { calls: 1 } }] }
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolCall: Schema.Schema<
  ToolCall,
  Schema.Schema.Encoded<typeof Prompt.ToolResultPart> | Schema.Schema.Encoded<typeof ToolCallWithUpdates>
> = Schema.transform(
  Schema.Union(Prompt.ToolResultPart, ToolCallWithUpdates),
  Schema.declare((u): u is ToolCall => Prompt.isPart(u) && u.type === "tool-result", { identifier: "ToolCall" }),
  {
    strict: true,
    decode: (stored): ToolCall => Prompt.isPart(stored) ? stored : { ...stored.result, updates: stored.updates },
    encode: (call) => {
      if (call.updates === undefined) return call
      const { updates, ...result } = call
      return { result: result as Prompt.ToolResultPart, updates }
    }
  }
)

/**
 * A model request as the model got it, at the end of the `wrapModelCall`
 * chain: the step, the system prompt, the messages (paired, files lifted),
 * the tools offered (name, description, JSON schema of the parameters) and
 * the tool choice. What a {@link Witness} sees and a `RunRecord` keeps.
 *
 * @example
 * ```ts
 * import { RunJournal } from "@stepwise-agent/core"
 * import { Schema } from "effect"
 *
 * const encode = Schema.encodeSync(RunJournal.SentRequest)
 * encode({ step: 0, messages: [], tools: [], toolChoice: "auto" })
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const SentRequest = Schema.Struct({
  step: Schema.Number,
  systemPrompt: Schema.optional(Schema.String),
  messages: Schema.Array(Prompt.Message),
  tools: Schema.Array(Schema.Struct({
    name: Schema.String,
    description: Schema.optional(Schema.String),
    parameters: Schema.Unknown
  })),
  toolChoice: Schema.Unknown
})

/**
 * @since 0.1.0
 * @category models
 */
export type SentRequest = typeof SentRequest.Type

/**
 * What a journal that records or replays a run sees besides its steps: the
 * run's input after the `transformInput` hooks, each call of the model
 * at the end of the `wrapModelCall` chain, with the request as sent (`call`
 * is the real call: a recorder runs it, a replayer answers instead), and,
 * when it has `decision`, each middleware decision (`Middleware.report`) as
 * it is reported, in the run's order, whether or not anybody streams the run.
 *
 * @example
 * ```ts
 * import { RunJournal } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const sent: Array<RunJournal.SentRequest> = []
 * const witness: RunJournal.Witness = {
 *   input: () => Effect.void,
 *   model: (request, call) => Effect.zipRight(Effect.sync(() => sent.push(request)), call)
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Witness {
  /** Sees the input; a replayer fails when it differs from the recorded one. */
  readonly input: (messages: ReadonlyArray<Prompt.Message>) => Effect.Effect<void, unknown>
  /** Runs or answers the model call; a replayer fails when the request differs from the recorded one. */
  readonly model: <A extends ModelReply, E, R>(
    request: SentRequest,
    call: Effect.Effect<A, E, R>
  ) => Effect.Effect<A | ModelReply, unknown, R>
  /**
   * Optional: sees each middleware decision the run reports (a recorder keeps
   * it); `run` names the run started inside this one that made it (a
   * subagent's: its {@link nested} path), none for the run's own.
   */
  readonly decision?: ((decision: Middleware.Decision, run?: string) => Effect.Effect<void>) | undefined
  /**
   * Optional: sees the decision a resumed run goes on with, before its hook
   * takes it: encoded by its wait's decision schema as JSON keeps it, the
   * texts a person typed in it redacted (as the thread stores it). A
   * recorder keeps it; a replayer fails when it differs from the recorded one.
   */
  readonly resumed?: ((decision: unknown) => Effect.Effect<void, unknown>) | undefined
  /**
   * Optional: sees each middleware hook that completes (a `HookCompleted`
   * event), whether or not anybody streams the run: a recorder keeps those
   * of the steps a replay serves (a tool call's `wrapToolCall` hooks), whose
   * hooks do not run again.
   */
  readonly hookCompleted?: ((completed: HookCompleted, run?: string) => Effect.Effect<void>) | undefined
}

/**
 * What a recorder saw inside one step, in the run's order: each middleware
 * decision reported there (`Decision`, its data as JSON) and each hook
 * that completed there (`Hook`); `run` names the run started inside this one
 * that made it (a subagent's: its {@link nested} path), none for the run's
 * own. A journal that replays steps without running them keeps it with the
 * step ({@link Service}'s `stepWitnessed`), so a record holds it whether the
 * step ran or was replayed.
 *
 * @example
 * ```ts
 * import { RunJournal } from "@stepwise-agent/core"
 * import { Schema } from "effect"
 *
 * Schema.encodeSync(RunJournal.Witnessed)([
 *   { _tag: "Hook", middleware: "audit", hook: "wrapToolCall", durationMillis: 2 }
 * ])
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const Witnessed = Schema.Array(Schema.Union(
  Schema.TaggedStruct("Decision", {
    middleware: Schema.String,
    hook: Schema.String,
    decision: Schema.String,
    data: Schema.Unknown,
    run: Schema.optional(Schema.String)
  }),
  Schema.TaggedStruct("Hook", {
    middleware: Schema.String,
    hook: Schema.String,
    durationMillis: Schema.Number,
    run: Schema.optional(Schema.String)
  })
))

/**
 * @since 0.1.0
 * @category models
 */
export type Witnessed = typeof Witnessed.Type

/**
 * A middleware hook that completed, after `durationMillis` (what a
 * `HookCompleted` event reports).
 *
 * @since 0.1.0
 * @category models
 */
export interface HookCompleted {
  readonly middleware: string
  readonly hook: string
  readonly durationMillis: number
}

/**
 * A model's reply as the end of the `wrapModelCall` chain gives it: a
 * `Middleware.ModelResponse` without the state updates of the hooks around.
 *
 * @since 0.1.0
 * @category models
 */
export type ModelReply = Omit<Middleware.ModelResponse, "state">

/**
 * A hook interrupted the run and waits for a decision: what it asked
 * (`value`, a `Request`) and the schemas of its middleware's wait, which a
 * journal types its wait with (`request`, `decision`). `await` answers with
 * a `Decision`, decoded with `decision`.
 *
 * @example
 * ```ts
 * import type { RunJournal } from "@stepwise-agent/core"
 *
 * const describe = (interrupt: RunJournal.Interrupt<{ readonly question: string }, boolean>) =>
 *   `${interrupt.middleware} asks "${interrupt.value.question}" (${interrupt.key}) at step ${interrupt.step}`
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Interrupt<Request = unknown, Decision = unknown> {
  /** Unique within the run; a durable journal names its wait after it. */
  readonly key: string
  readonly threadId: string
  readonly step: number
  readonly middleware: string
  readonly node: Checkpointer.PendingInterrupt["node"]
  /**
   * What the hook asked (for example `HumanInTheLoop.ApprovalRequest`), as it
   * gave it (decoded; the thread stores it encoded with `request`).
   */
  readonly value: Request
  /** The waiting middleware's `wait.request` schema: what the hook asks, and how a journal keeps it. */
  readonly request: Schema.Schema<Request, any>
  /**
   * The waiting middleware's `wait.decision` schema: what answers the wait.
   * A journal that stores decisions stores them encoded with it and gives
   * them back decoded with it (`decodeDecision`).
   */
  readonly decision: Schema.Schema<Decision, any>
}

/**
 * @since 0.1.0
 * @category models
 */
export declare namespace Interrupt {
  /**
   * Any interrupt, whatever its request and decision (an interrupt's
   * schemas make `Interrupt` invariant in both): what a list of them holds.
   *
   * @since 0.1.0
   * @category models
   */
  export type Any = Interrupt<any, any>
}

/**
 * `step` receives a step the loop would run and returns the effect to run
 * instead: the same one (in process), or one that records its result
 * (encoded with `key.schema`) the first time and replays it after.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly step: <A, E, R>(key: StepKey<A>, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * Called after the loop saved the interrupted state. `None` ends the run
   * as `Interrupted` (to be resumed with `Agent.resume`); `Some(decision)`
   * runs the interrupting hook again at once with `decision`, decoded with
   * the interrupt's `decision` schema (a journal that keeps decisions
   * encoded decodes them with {@link decodeDecision}; one that does not
   * decode fails the wait with `InvalidResume`). The agent checks it (its
   * type, the wait's `check`) before the hook takes it.
   */
  readonly await: <Request, Decision>(
    interrupt: Interrupt<Request, Decision>
  ) => Effect.Effect<Option.Option<Decision>, AgentError.InvalidResume>
  /**
   * Whether the journal waits for decisions durably itself (a workflow).
   * A thread such a journal interrupted is marked durable in its
   * checkpoint: `Agent.resume` and `resumeStream` refuse it
   * (`DurableThreadError`) unless run with a durable journal, and
   * `discardPending` unless its caller holds {@link DurableOwner}.
   */
  readonly durable: boolean
  /** Optional: a journal that records or replays a run sees its input and model requests ({@link Witness}). */
  readonly witness?: Witness | undefined
  /**
   * Optional: {@link Service.step} for a recorder, which keeps what it saw
   * inside the step ({@link Witnessed}) beside the result: `effect` gives
   * both. A journal that replays steps without running them (a durable one)
   * journals the two together and gives both back when it replays the step
   * (an empty `Witnessed` for a step journaled without it), so the record of
   * a run comes out the same whether a step ran or was replayed.
   */
  readonly stepWitnessed?:
    | (<A, E, R>(
      key: StepKey<A>,
      effect: Effect.Effect<readonly [A, Witnessed], E, R>
    ) => Effect.Effect<readonly [A, Witnessed], E, R>)
    | undefined
  /**
   * Optional: `true` for a journal whose load step gives a thread the store
   * does not hold — a replayed fork's, which starts a new thread from a
   * recorded one. The run's first save then expects no thread stored.
   */
  readonly forksThread?: boolean | undefined
}

/**
 * A decision as a journal stores it (`posted`: encoded with the interrupt's
 * `decision` schema, as JSON keeps it), decoded with that schema: what
 * `await` answers with. One the schema refuses (or whose reading throws)
 * fails with `InvalidResume`, naming the middleware and what was wrong.
 *
 * @example
 * ```ts
 * import { RunJournal } from "@stepwise-agent/core"
 * import { Effect, Option } from "effect"
 *
 * // answers every wait with the decision a person posted, as JSON
 * const posted: Record<string, unknown> = { "beforeModel/confirm/0": true }
 * const answering = RunJournal.RunJournal.of({
 *   ...RunJournal.inProcess,
 *   await: (interrupt) =>
 *     interrupt.key in posted
 *       ? Effect.map(RunJournal.decodeDecision(interrupt, posted[interrupt.key]), Option.some)
 *       : Effect.succeedNone
 * })
 * ```
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodeDecision = <Request, Decision>(
  interrupt: Interrupt<Request, Decision>,
  posted: unknown
): Effect.Effect<Decision, AgentError.InvalidResume> =>
  Waits.decodePosted(interrupt.decision, posted, (reason) =>
    new AgentError.InvalidResume({
      threadId: interrupt.threadId,
      middleware: interrupt.middleware,
      reason: `the decision does not decode with the wait's decision schema: ${reason}`
    }))

/**
 * Where a run's steps are recorded. Provide one around `Agent.run` (or
 * `resume`) to change how that run executes.
 *
 * @example
 * ```ts
 * import { Agent, RunJournal } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * // Counts model calls, otherwise in process.
 * let calls = 0
 * const counting = RunJournal.RunJournal.of({
 *   ...RunJournal.inProcess,
 *   step: (key, effect) =>
 *     RunJournal.StepKey.$is("Model")(key) ? Effect.tap(effect, () => Effect.sync(() => calls++)) : effect
 * })
 * const program = Agent.run("hi", { threadId: "t1" }).pipe(
 *   Effect.provideService(RunJournal.RunJournal, counting)
 * )
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class RunJournal extends Context.Tag("@stepwise-agent/core/RunJournal")<
  RunJournal,
  Service
>() {}

/**
 * The capability to give up a wait a durable journal made: `Agent.discardPending`
 * refuses a thread waiting for a durable run (`DurableThreadError`) unless
 * this is in its context. The durable runner provides it once the run that
 * owned the wait has ended (`AgentWorkflow.cancel` does); nothing else should.
 *
 * @example
 * ```ts
 * import { Agent, RunJournal } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * // the durable run that waited on "t1" has ended: its owner gives the wait up
 * const giveUp = Agent.Agent.pipe(
 *   Effect.flatMap((agent) => agent.discardPending("t1", "the run was cancelled")),
 *   Effect.provideService(RunJournal.DurableOwner, true)
 * )
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class DurableOwner extends Context.Tag("@stepwise-agent/core/RunJournal/DurableOwner")<DurableOwner, true>() {}

/**
 * The default journal: every step runs as it is, and an interrupt ends the
 * run (the thread waits in its checkpoint for `Agent.resume`).
 *
 * @example
 * ```ts
 * import { RunJournal } from "@stepwise-agent/core"
 *
 * const journal = RunJournal.inProcess
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const inProcess: Service = RunJournal.of({
  step: (_key, effect) => effect,
  await: () => Effect.succeedNone,
  durable: false
})

/**
 * The journal of a run started inside a step or hook of another run (a
 * subagent's run inside its parent's hook): each step goes through
 * `journal` named under `path` (`<path>/model/0`), so a durable parent
 * records the child's model calls, tool calls, checkpoints and inbox looks as its own
 * steps and replays them; the child's waits end it `Interrupted` (the
 * parent surfaces them and waits in its own journal); its middleware
 * decisions and completed hooks reach the outer journal's witness (a
 * recorder) named by `path`. `path` must be the
 * same on every replay and unique within the outer run. The in-process
 * journal nests as itself.
 *
 * @example
 * ```ts
 * import { Agent, RunJournal } from "@stepwise-agent/core"
 * import { Effect, Option } from "effect"
 *
 * const runChild = (child: Agent.Service<any, any>, path: string) =>
 *   Effect.gen(function*() {
 *     const outer = Option.getOrElse(yield* Effect.serviceOption(RunJournal.RunJournal), () => RunJournal.inProcess)
 *     return yield* child.run("Summarize the report", { threadId: `parent/${path}` }).pipe(
 *       Effect.provideService(RunJournal.RunJournal, RunJournal.nested(outer, path))
 *     )
 *   })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const nested = (journal: Service, path: string): Service => {
  if (journal === inProcess) return inProcess
  const witness = journal.witness
  const under = (run: string | undefined) => run === undefined ? path : `${path}/${run}`
  // the inner run's decisions and completed hooks reach the outer journal's witness (a recorder), named by its path
  const decision = witness?.decision
  const hookCompleted = witness?.hookCompleted
  return RunJournal.of({
    step: (key, effect) => journal.step(StepKey.Nested({ path, key }), effect),
    await: () => Effect.succeedNone,
    durable: false,
    ...(decision === undefined && hookCompleted === undefined ? {} : {
      witness: {
        input: () => Effect.void,
        model: (_request, call) => call,
        ...(decision === undefined ? {} : { decision: (made, run) => decision(made, under(run)) }),
        ...(hookCompleted === undefined ? {} : {
          hookCompleted: (completed, run) => hookCompleted(completed, under(run))
        })
      }
    })
  })
}
