/**
 * ModelCallLimit: caps how many model calls a thread, and each run on it,
 * may make.
 *
 * The counts live in the middleware's state slice (`threadModelCallCount`,
 * `runModelCallCount`), so they survive a checkpoint. `beforeModel` checks
 * them before every model call, `afterModel` counts the call that was made,
 * and `beforeAgent` resets the run count at the start of every run, however
 * the previous run ended (also when it ended by this limit's own jump). A
 * resumed run (`Agent.resume`) is the same run and keeps its count.
 *
 * When a limit is reached, `exitBehavior` decides: `"end"` (the default)
 * appends an assistant message saying so and ends the run, which completes
 * normally; `"error"` fails the run with {@link ModelCallLimitExceeded}.
 * With `softLanding`, the last call a limit allows is made with tools
 * disabled, so the run ends on the model's answer.
 *
 * The model calls of the subagents a run starts (`SubAgents`, and theirs in
 * turn) count against its limits, whatever the order of the middleware: a
 * child makes only the calls the parent's limits have left (then it is
 * stopped and its call answered saying so), and the calls it made are added
 * to the parent's counts in the limit's next hook.
 *
 * @since 0.1.0
 */
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Allowance from "./internal/allowance.js"
import * as BudgetEnd from "./internal/budgetEnd.js"
import * as Check from "./internal/options.js"

/**
 * The state slice: model calls made on the thread, and in the current run.
 *
 * @since 0.1.0
 * @category models
 */
export const State = Schema.Struct({
  threadModelCallCount: Schema.NonNegativeInt,
  runModelCallCount: Schema.NonNegativeInt
})

/**
 * @since 0.1.0
 * @category models
 */
export type State = typeof State.Type

/**
 * What happens when a limit is reached.
 *
 * @since 0.1.0
 * @category models
 */
export type ExitBehavior = "end" | "error"

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The most model calls a thread may make over all its runs. */
  readonly threadLimit?: number | undefined
  /** The most model calls one run may make. */
  readonly runLimit?: number | undefined
  /** `"end"` (default): end the run with an assistant message; `"error"`: fail with `ModelCallLimitExceeded`. */
  readonly exitBehavior?: ExitBehavior | undefined
  /**
   * A soft landing (default `false`): the last call a limit allows is made
   * with tools disabled (`toolChoice: "none"`) and {@link lastCallPrompt} in
   * the system prompt, so the model writes its answer with what it has
   * instead of the run ending on a tool call it can never see the result of.
   */
  readonly softLanding?: boolean | undefined
  /** The middleware's name (default `"modelCallLimit"`). */
  readonly name?: string | undefined
}

/**
 * A run reached a model call limit with `exitBehavior: "error"`. Counts are
 * those before the call that was refused.
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelCallLimitExceeded extends Schema.TaggedError<ModelCallLimitExceeded>(
  "@stepwise-agent/middleware/ModelCallLimit/ModelCallLimitExceeded"
)("ModelCallLimitExceeded", {
  threadId: Schema.String,
  threadCount: Schema.Number,
  runCount: Schema.Number,
  threadLimit: Schema.optional(Schema.Number),
  runLimit: Schema.optional(Schema.Number)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Thread "${this.threadId}": ${describeExceeded(this, this)}`
  }
}

const exceeded = (
  limits: { readonly threadLimit?: number | undefined; readonly runLimit?: number | undefined },
  state: State
): { readonly thread: boolean; readonly run: boolean } => ({
  thread: limits.threadLimit !== undefined && state.threadModelCallCount >= limits.threadLimit,
  run: limits.runLimit !== undefined && state.runModelCallCount >= limits.runLimit
})

const describeExceeded = (
  limits: { readonly threadLimit?: number | undefined; readonly runLimit?: number | undefined },
  counts: { readonly threadCount: number; readonly runCount: number }
): string => {
  const reached: Array<string> = []
  if (limits.threadLimit !== undefined && counts.threadCount >= limits.threadLimit) {
    reached.push(`thread limit (${counts.threadCount}/${limits.threadLimit})`)
  }
  if (limits.runLimit !== undefined && counts.runCount >= limits.runLimit) {
    reached.push(`run limit (${counts.runCount}/${limits.runLimit})`)
  }
  return `model call limit reached: ${reached.join(", ")}`
}

const describeLimits = (
  limits: { readonly threadLimit?: number | undefined; readonly runLimit?: number | undefined }
) =>
  [
    ...(limits.threadLimit === undefined ? [] : [`thread limit ${limits.threadLimit}`]),
    ...(limits.runLimit === undefined ? [] : [`run limit ${limits.runLimit}`])
  ].join(", ")

/**
 * What the model is told on the last call a limit allows, with `softLanding`
 * (`ToolCallLimit` and `Budget` land with the same text).
 *
 * @since 0.1.0
 * @category constructors
 */
export const lastCallPrompt: string = BudgetEnd.lastCallPrompt

/** With `softLanding`: whether the call about to be made is the last a limit allows. */
const isLastAllowed = (
  limits: { readonly threadLimit?: number | undefined; readonly runLimit?: number | undefined },
  state: State
): boolean =>
  (limits.threadLimit !== undefined && state.threadModelCallCount + 1 === limits.threadLimit) ||
  (limits.runLimit !== undefined && state.runModelCallCount + 1 === limits.runLimit)

const OptionsSchema = Schema.Struct({
  threadLimit: Schema.optional(Check.Count),
  runLimit: Schema.optional(Check.Count),
  exitBehavior: Schema.optional(Schema.Literal("end", "error")),
  softLanding: Schema.optional(Schema.Boolean),
  name: Schema.optional(Check.NonEmpty)
})

/**
 * Builds the middleware. Bad options fail `Agent.make` with
 * `AgentError.InvalidOptions`: at least one of `threadLimit` and
 * `runLimit` is required, each a whole number of at least 0.
 *
 * Only one `ModelCallLimit` fits in an agent (its state keys are fixed); put
 * both limits in it.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 * import * as ModelCallLimit from "@stepwise-agent/middleware/ModelCallLimit"
 *
 * const program = Effect.gen(function*() {
 *   const limit = ModelCallLimit.middleware({ threadLimit: 20, runLimit: 5 })
 *   const agent = yield* Agent.make({ middleware: [limit] })
 *   return yield* agent.run("hello", { threadId: "t1" })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (options: Options): Middleware.Middleware<State, ModelCallLimitExceeded> =>
  Middleware.unwrap(setup(options), { name: Check.nameOf(options, "modelCallLimit") })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: (
  options: Options
) => Effect.Effect<Middleware.Middleware<State, ModelCallLimitExceeded>, AgentError.InvalidOptions> = Effect.fn(
  "ModelCallLimit.middleware"
)(function*(options: Options) {
  // (no options, from JavaScript, stand for `{}` here as in the check)
  options ??= {}
  yield* Check.validate("ModelCallLimit", OptionsSchema, options)
  if (options.threadLimit === undefined && options.runLimit === undefined) {
    return yield* Check.invalid("ModelCallLimit", "threadLimit", "give at least one of threadLimit and runLimit")
  }
  const exitBehavior = options.exitBehavior ?? "end"
  const limits = { threadLimit: options.threadLimit, runLimit: options.runLimit }
  const name = options.name ?? "modelCallLimit"
  /** The slice with the model calls subagents made since the last hook; undefined when they made none. */
  const withChildren = (threadId: string, state: State, last = false) =>
    Effect.map(
      (last ? Allowance.takeLast : Allowance.take)(threadId, name),
      (spent): State | undefined =>
        spent === undefined || spent.modelCalls === 0 ? undefined : {
          threadModelCallCount: state.threadModelCallCount + spent.modelCalls,
          runModelCallCount: state.runModelCallCount + spent.modelCalls
        }
    )
  /** Posts what is left to the subagents once `made` more calls were made. */
  const post = (threadId: string, state: State, made: number) =>
    Allowance.post(threadId, name, {
      _tag: "ModelCalls",
      left: Math.min(
        limits.threadLimit === undefined ? Infinity : limits.threadLimit - state.threadModelCallCount - made,
        limits.runLimit === undefined ? Infinity : limits.runLimit - state.runModelCallCount - made
      ),
      reason: `the model call limit of the parent run (${describeLimits(limits)}) was reached`
    })
  return Middleware.make({
    name,
    state: { schema: State, initial: { threadModelCallCount: 0, runModelCallCount: 0 } },
    canJumpTo: ["end"],
    beforeAgent: ({ state }) =>
      Effect.succeed(state.runModelCallCount === 0 ? undefined : { state: { runModelCallCount: 0 } }),
    beforeModel: Effect.fnUntraced(function*({ messages, state: stored, threadId }) {
      const update = yield* withChildren(threadId, stored)
      const state = update ?? stored
      const hit = exceeded(limits, state)
      if (!hit.thread && !hit.run) {
        // the call about to be made is the parent's: what is left after it goes to its subagents
        yield* post(threadId, state, 1)
        return update === undefined ? undefined : { state: update }
      }
      const counts = { threadCount: state.threadModelCallCount, runCount: state.runModelCallCount }
      if (exitBehavior === "error") {
        return yield* new ModelCallLimitExceeded({
          threadId,
          ...counts,
          ...(limits.threadLimit === undefined ? {} : { threadLimit: limits.threadLimit }),
          ...(limits.runLimit === undefined ? {} : { runLimit: limits.runLimit })
        })
      }
      const text = describeExceeded(limits, counts)
      yield* Middleware.report(`${text}; ending the run`, counts)
      return {
        ...(update === undefined ? {} : { state: update }),
        messages: [...messages, BudgetEnd.notice(text)],
        jumpTo: "end" as const
      }
    }),
    ...(options.softLanding === true
      ? {
        wrapModelCall: (request, next) => {
          const state = request.state as unknown as State
          if (!isLastAllowed(limits, state)) return next(request)
          return BudgetEnd.land(request, next, "last model call a limit allows: tools disabled", {
            threadCount: state.threadModelCallCount,
            runCount: state.runModelCallCount
          })
        }
      }
      : {}),
    afterModel: Effect.fnUntraced(function*({ state: stored, threadId }) {
      const base = (yield* withChildren(threadId, stored)) ?? stored
      const state = {
        threadModelCallCount: base.threadModelCallCount + 1,
        runModelCallCount: base.runModelCallCount + 1
      }
      yield* post(threadId, state, 0)
      return { state }
    }),
    // the run ends: the last of what its subagents spent, and the limit withdraws its allowance
    afterAgent: ({ state, threadId }) =>
      Effect.map(withChildren(threadId, state, true), (update) => update === undefined ? undefined : { state: update })
  })
})
