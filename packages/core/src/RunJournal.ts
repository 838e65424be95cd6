/**
 * The durable seam of a run. Every effect of a run that must not be
 * repeated is a named step of the `RunJournal` of the context: loading the
 * thread, each model call (with its `wrapModelCall` hooks), each tool call
 * (with its `wrapToolCall` hooks) and each checkpoint; a wait for a decision
 * after an interrupt is its one other operation, `await`.
 *
 * The loop names every step once ({@link StepKey}), the same way on every
 * replay, and gives the schema of its result; a journal only records or
 * replays. Without one in the context a run executes in process
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
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Checkpointer from "./Checkpointer.js"

/**
 * The name of one step of a run: the load of its thread, its `index`-th
 * checkpoint, its `index`-th look into the thread's inbox (the steer messages
 * `Agent.send` left for it, taken in before a model step), the model call of
 * step `step`, or the `occurrence`-th call
 * with the id of `call` (providers may repeat ids across replies). A run
 * names its steps the same way each time it is replayed. `Nested` is a step
 * of a run started inside another run's step or hook (a subagent's), named
 * under `path` in the outer run's journal ({@link nested}).
 *
 * @example
 * ```ts
 * import { RunJournal } from "@stepwise-agent/core"
 *
 * const key = RunJournal.StepKey.Model({ step: 2 })
 * RunJournal.stepName(key) // "model/2"
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type StepKey = Data.TaggedEnum<{
  Load: {}
  Checkpoint: { readonly index: number }
  Inbox: { readonly index: number }
  Model: { readonly step: number }
  Tool: { readonly call: Prompt.ToolCallPart; readonly occurrence: number }
  Nested: { readonly path: string; readonly key: StepKey }
}>

/**
 * Constructors and matchers of {@link StepKey}.
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
export const StepKey = Data.taggedEnum<StepKey>()

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
export const stepName = (key: StepKey): string => {
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
export const innermost = (key: StepKey): Exclude<StepKey, { readonly _tag: "Nested" }> =>
  key._tag === "Nested" ? innermost(key.key) : key

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
  updates: Schema.optional(Schema.Array(Schema.Struct({
    middleware: Schema.String,
    state: Schema.Record({ key: Schema.String, value: Schema.Unknown })
  })))
})

/**
 * @since 0.1.0
 * @category models
 */
export type ModelCall = typeof ModelCall.Type

/**
 * A hook interrupted the run and waits for a value.
 *
 * @example
 * ```ts
 * import type { RunJournal } from "@stepwise-agent/core"
 *
 * const describe = (interrupt: RunJournal.Interrupt) =>
 *   `${interrupt.middleware} waits (${interrupt.key}) at step ${interrupt.step}`
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Interrupt {
  /** Unique within the run; a durable journal names its wait after it. */
  readonly key: string
  readonly threadId: string
  readonly step: number
  readonly middleware: string
  readonly node: Checkpointer.PendingInterrupt["node"]
  /** What the hook asked (for example `HumanInTheLoop.ApprovalRequest`). */
  readonly value: unknown
}

/**
 * `step` receives a step the loop would run and returns the effect to run
 * instead: the same one (in process), or one that records its result
 * (encoded with `schema`) the first time and replays it after.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly step: <A, I, E, R>(
    key: StepKey,
    schema: Schema.Schema<A, I>,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  /**
   * Called after the loop saved the interrupted state. `None` ends the run
   * as `Interrupted` (to be resumed with `Agent.resume`); `Some(value)`
   * runs the interrupting hook again at once with `value`.
   */
  readonly await: (interrupt: Interrupt) => Effect.Effect<Option.Option<unknown>>
  /**
   * Whether the journal waits for decisions durably itself (a workflow).
   * A thread such a journal interrupted is marked durable in its
   * checkpoint: `Agent.resume`, `resumeStream` and `discardPending`
   * refuse it (`DurableThreadError`) unless run with a durable journal.
   */
  readonly durable: boolean
}

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
 *   step: (key, _schema, effect) =>
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
  step: (_key, _schema, effect) => effect,
  await: () => Effect.succeedNone,
  durable: false
})

/**
 * The journal of a run started inside a step or hook of another run (a
 * subagent's run inside its parent's hook): each step goes through
 * `journal` named under `path` (`<path>/model/0`), so a durable parent
 * records the child's model calls, tool calls, checkpoints and inbox looks as its own
 * steps and replays them; the child's waits end it `Interrupted` (the
 * parent surfaces them and waits in its own journal). `path` must be the
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
export const nested = (journal: Service, path: string): Service =>
  journal === inProcess ? inProcess : RunJournal.of({
    step: (key, schema, effect) => journal.step(StepKey.Nested({ path, key }), schema, effect),
    await: () => Effect.succeedNone,
    durable: false
  })
