/**
 * Budget: caps the tokens (input + output), or the cost, that the model
 * calls of a thread, and of each run on it, may spend.
 *
 * The spending is what the provider reported for the agent's model calls
 * (the run's `usage`; a provider that reports none spends 0), summed in the
 * middleware's state slice, so it survives a checkpoint and a resume. The
 * cost of a call is its input and output tokens at the price of the agent's
 * model (`ModelProfile.CurrentModel`, named with `ModelProfile.layerModel` or
 * `ModelProfile.model`) in the price list you give, per million tokens, in
 * whatever currency the list is in. A model the list does not price fails the
 * run with {@link UnpricedModel} before any call is made.
 *
 * The budget is checked before every model call: once what was spent reaches
 * a limit, no further call is made. `exitBehavior` decides what then happens:
 * `"end"` (the default) appends an assistant message saying so and ends the
 * run, which completes normally; `"error"` fails the run with
 * {@link BudgetExceeded}. A call's cost is only known once it was made, so the
 * call that crosses the limit is made: a run can end over its budget by up to
 * one call.
 *
 * With `softLanding`, the run ends on the model's answer instead: when the
 * next call would likely go over a limit, it is made with tools disabled and
 * a prompt asking for the answer (`ModelCallLimit.lastCallPrompt`). "Likely"
 * is estimated from the last call: the next request carries everything the
 * last one did plus its reply, so the last call's spending is a lower bound
 * of the next one's (an estimate, not a guarantee: a long reply can still go
 * over).
 *
 * The agent's own model calls count (as the run's `usage` does), and those of
 * the subagents it starts (`SubAgents`, and theirs in turn), priced at the
 * agent's model: a child makes model calls only while the parent's budget
 * is not spent (then it is stopped and its call answered saying so), and
 * what it spent is added in the budget's next hook, whatever the order of
 * the middleware. A summarizer's or a classifier's calls on their own models
 * do not count. `beforeAgent`
 * resets the run's spending at the start of every run; a resumed run keeps
 * it. Only one `Budget` fits in an agent (its state keys are fixed): put the
 * token and the cost budget in it.
 *
 * @since 0.1.0
 */
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as ModelProfile from "@stepwise-agent/core/ModelProfile"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Allowance from "./internal/allowance.js"
import * as BudgetEnd from "./internal/budgetEnd.js"
import * as Check from "./internal/options.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * The state slice: what the thread and the current run spent, what the last
 * model call spent (the estimate of the next one), and the run's input and
 * output tokens already counted.
 *
 * @since 0.1.0
 * @category models
 */
export const State = Schema.Struct({
  budgetThreadTokens: Schema.NonNegative,
  budgetRunTokens: Schema.NonNegative,
  budgetThreadCost: Schema.NonNegative,
  budgetRunCost: Schema.NonNegative,
  budgetLastCallTokens: Schema.NonNegative,
  budgetLastCallCost: Schema.NonNegative,
  budgetRunInputTokens: Schema.NonNegative,
  budgetRunOutputTokens: Schema.NonNegative,
  /** The part of the run's tokens spent by its subagents (a slice stored without it reads as 0). */
  budgetRunDelegatedTokens: Schema.optionalWith(Schema.NonNegative, { default: () => 0 })
})

/**
 * @since 0.1.0
 * @category models
 */
export type State = typeof State.Type

/**
 * A limit per thread (over all its runs) and per run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Limits {
  /** The most a thread may spend over all its runs. */
  readonly threadLimit?: number | undefined
  /** The most one run may spend. */
  readonly runLimit?: number | undefined
}

/**
 * A model's price per million tokens, in the currency of the budget.
 *
 * @since 0.1.0
 * @category models
 */
export interface Price {
  readonly inputPerMillion: number
  readonly outputPerMillion: number
}

/**
 * A cost budget: its limits and the price of each model by name (matched
 * as `ModelProfile` matches names: exactly, or as a dated snapshot of an
 * entry, ignoring case and a provider prefix).
 *
 * @since 0.1.0
 * @category models
 */
export interface CostLimits extends Limits {
  readonly prices: Readonly<Record<string, Price>>
}

/**
 * What happens when a budget is spent.
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
  /** A budget of input + output tokens. */
  readonly tokens?: Limits | undefined
  /** A budget of cost, from the tokens and the price of the agent's model. */
  readonly cost?: CostLimits | undefined
  /** `"end"` (default): end the run with an assistant message; `"error"`: fail with {@link BudgetExceeded}. */
  readonly exitBehavior?: ExitBehavior | undefined
  /**
   * A soft landing (default `false`): the call that would likely go over a
   * limit is made with tools disabled and a prompt asking for the answer.
   */
  readonly softLanding?: boolean | undefined
  /** The middleware's name (default `"budget"`). */
  readonly name?: string | undefined
}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * One limit that was reached: which budget, over what, what was spent and
 * the limit.
 *
 * @since 0.1.0
 * @category models
 */
export const Reached = Schema.Struct({
  budget: Schema.Literal("tokens", "cost"),
  scope: Schema.Literal("thread", "run"),
  spent: Schema.Number,
  limit: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export type Reached = typeof Reached.Type

/**
 * A run spent its budget with `exitBehavior: "error"`: the limits reached
 * before the model call that was refused.
 *
 * @since 0.1.0
 * @category errors
 */
export class BudgetExceeded extends Schema.TaggedError<BudgetExceeded>(
  "@stepwise-agent/middleware/Budget/BudgetExceeded"
)("BudgetExceeded", {
  threadId: Schema.String,
  reached: Schema.Array(Reached)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Thread "${this.threadId}": ${describeReached(this.reached)}`
  }
}

/**
 * A cost budget could not price the agent's model: the model is not named
 * (`model` undefined) or the price list has no entry for it.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnpricedModel extends Schema.TaggedError<UnpricedModel>(
  "@stepwise-agent/middleware/Budget/UnpricedModel"
)("UnpricedModel", {
  model: Schema.optional(Schema.String),
  priced: Schema.Array(Schema.String)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    const priced = `priced: ${this.priced.map((name) => JSON.stringify(name)).join(", ")}`
    return this.model === undefined
      ? `Budget: the agent's model is not named, so its cost is unknown (name it with ModelProfile.layerModel or ModelProfile.model; ${priced})`
      : `Budget: no price for the model "${this.model}" in cost.prices (${priced})`
  }
}

/**
 * The errors a `Budget` fails a run with.
 *
 * @since 0.1.0
 * @category errors
 */
export type BudgetError = BudgetExceeded | UnpricedModel

/**
 * @since 0.1.0
 * @category errors
 */
export const BudgetError: Schema.Union<[typeof BudgetExceeded, typeof UnpricedModel]> = Schema.Union(
  BudgetExceeded,
  UnpricedModel
)

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

const formatAmount = (budget: Reached["budget"], amount: number): string =>
  budget === "tokens" ? `${amount}` : `${Number(amount.toFixed(6))}`

const describeReached = (reached: ReadonlyArray<Reached>): string =>
  `budget reached: ${
    reached.map((r) =>
      `${r.scope} ${r.budget === "tokens" ? "tokens" : "cost"} (${formatAmount(r.budget, r.spent)}/${
        formatAmount(r.budget, r.limit)
      })`
    ).join(", ")
  }`

const LimitsFields = {
  threadLimit: Schema.optional(Schema.NonNegative),
  runLimit: Schema.optional(Schema.NonNegative)
}

const OptionsSchema = Schema.Struct({
  tokens: Schema.optional(Schema.Struct(LimitsFields)),
  cost: Schema.optional(Schema.Struct({
    ...LimitsFields,
    prices: Schema.Record({
      key: Check.NonEmpty,
      value: Schema.Struct({ inputPerMillion: Schema.NonNegative, outputPerMillion: Schema.NonNegative })
    })
  })),
  exitBehavior: Schema.optional(Schema.Literal("end", "error")),
  softLanding: Schema.optional(Schema.Boolean),
  name: Schema.optional(Check.NonEmpty)
})

const initial: State = {
  budgetThreadTokens: 0,
  budgetRunTokens: 0,
  budgetThreadCost: 0,
  budgetRunCost: 0,
  budgetLastCallTokens: 0,
  budgetLastCallCost: 0,
  budgetRunInputTokens: 0,
  budgetRunOutputTokens: 0,
  budgetRunDelegatedTokens: 0
}

const runReset = {
  budgetRunTokens: 0,
  budgetRunCost: 0,
  budgetRunInputTokens: 0,
  budgetRunOutputTokens: 0,
  budgetRunDelegatedTokens: 0
} as const

/**
 * The slice with the run's usage counted: what the run reported since the
 * slice last saw it is added to the thread and the run, and becomes the last
 * call's spending. A run usage below what the slice saw is a new run whose
 * `beforeAgent` did not run (an earlier hook ended it): all of it is new.
 * Undefined when nothing changed.
 */
const counted = (state: State, usage: Middleware.RunUsage, price: Price | undefined): State | undefined => {
  const base = usage.totalTokens < ownRunTokens(state) || usage.inputTokens < state.budgetRunInputTokens ||
      usage.outputTokens < state.budgetRunOutputTokens
    ? { ...state, ...runReset }
    : state
  const input = usage.inputTokens - base.budgetRunInputTokens
  const output = usage.outputTokens - base.budgetRunOutputTokens
  const tokens = usage.totalTokens - ownRunTokens(base)
  if (input === 0 && output === 0 && tokens === 0 && base === state) return undefined
  const cost = price === undefined ? 0 : (input * price.inputPerMillion + output * price.outputPerMillion) / 1_000_000
  return {
    budgetThreadTokens: base.budgetThreadTokens + tokens,
    budgetRunTokens: base.budgetRunTokens + tokens,
    budgetThreadCost: base.budgetThreadCost + cost,
    budgetRunCost: base.budgetRunCost + cost,
    budgetLastCallTokens: tokens === 0 && cost === 0 ? base.budgetLastCallTokens : tokens,
    budgetLastCallCost: tokens === 0 && cost === 0 ? base.budgetLastCallCost : cost,
    budgetRunInputTokens: usage.inputTokens,
    budgetRunOutputTokens: usage.outputTokens,
    budgetRunDelegatedTokens: base.budgetRunDelegatedTokens
  }
}

/** The run's tokens spent by the agent's own model calls (what the run's usage reports). */
const ownRunTokens = (state: State): number => state.budgetRunTokens - state.budgetRunDelegatedTokens

/** The slice with what subagents spent added to the thread's and the run's spending. */
const withDelegated = (state: State, spent: Allowance.Spent): State => ({
  ...state,
  budgetThreadTokens: state.budgetThreadTokens + spent.totalTokens,
  budgetRunTokens: state.budgetRunTokens + spent.totalTokens,
  budgetThreadCost: state.budgetThreadCost + spent.cost,
  budgetRunCost: state.budgetRunCost + spent.cost,
  budgetRunDelegatedTokens: state.budgetRunDelegatedTokens + spent.totalTokens
})

interface Check {
  readonly budget: Reached["budget"]
  readonly scope: Reached["scope"]
  readonly limit: number
  readonly spent: (state: State) => number
  readonly lastCall: (state: State) => number
}

const checksOf = (options: Options): ReadonlyArray<Check> => {
  const checks: Array<Check> = []
  const add = (
    budget: Reached["budget"],
    limits: Limits | undefined,
    thread: (state: State) => number,
    run: (state: State) => number,
    lastCall: (state: State) => number
  ) => {
    if (limits?.threadLimit !== undefined) {
      checks.push({ budget, scope: "thread", limit: limits.threadLimit, spent: thread, lastCall })
    }
    if (limits?.runLimit !== undefined) {
      checks.push({ budget, scope: "run", limit: limits.runLimit, spent: run, lastCall })
    }
  }
  add(
    "tokens",
    options.tokens,
    (s) => s.budgetThreadTokens,
    (s) => s.budgetRunTokens,
    (s) => s.budgetLastCallTokens
  )
  add("cost", options.cost, (s) => s.budgetThreadCost, (s) => s.budgetRunCost, (s) => s.budgetLastCallCost)
  return checks
}

/**
 * Builds the middleware. Bad options fail `Agent.make` with `AgentError.InvalidOptions`:
 * at least one limit is required (`tokens` or `cost`, each with a
 * `threadLimit` or a `runLimit`, numbers of at least 0), `runLimit` may not
 * exceed `threadLimit`, a cost budget needs a non-empty price list of
 * prices of at least 0.
 *
 * Decisions it reports: the landing call (`"the next call would likely go
 * over …: tools disabled"`) and the end of a run (`"budget reached: …;
 * ending the run"`).
 *
 * @example
 * ```ts
 * import { Agent, ModelProfile } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 * import * as Budget from "@stepwise-agent/middleware/Budget"
 *
 * const program = Effect.gen(function*() {
 *   const budget = Budget.middleware({
 *     tokens: { runLimit: 200_000 },
 *     cost: { threadLimit: 5, prices: { "gpt-4o": { inputPerMillion: 2.5, outputPerMillion: 10 } } },
 *     softLanding: true
 *   })
 *   const agent = yield* Agent.make({ middleware: [budget] })
 *   return yield* agent.run("hello", { threadId: "t1" })
 * }).pipe(Effect.provide(ModelProfile.layerModel("gpt-4o")))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (options: Options): Middleware.Middleware<State, BudgetError> =>
  Middleware.unwrap(setup(options), { name: Check.nameOf(options, "budget") })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: (
  options: Options
) => Effect.Effect<Middleware.Middleware<State, BudgetError>, AgentError.InvalidOptions> = Effect.fn(
  "Budget.middleware"
)(function*(options: Options) {
  // (no options, from JavaScript, stand for `{}` here as in the check)
  options ??= {}
  yield* Check.validate("Budget", OptionsSchema, options)
  for (const budget of ["tokens", "cost"] as const) {
    const limits = options[budget]
    if (limits === undefined) continue
    if (limits.threadLimit === undefined && limits.runLimit === undefined) {
      return yield* Check.invalid("Budget", `${budget}.threadLimit`, "give at least one of threadLimit and runLimit")
    }
    if (limits.threadLimit !== undefined && limits.runLimit !== undefined && limits.runLimit > limits.threadLimit) {
      return yield* Check.invalid(
        "Budget",
        `${budget}.runLimit`,
        `may not exceed threadLimit (${limits.threadLimit}), got ${limits.runLimit}`
      )
    }
  }
  if (options.tokens === undefined && options.cost === undefined) {
    return yield* Check.invalid("Budget", "tokens", "give a token budget, a cost budget or both")
  }
  const prices = options.cost?.prices
  if (prices !== undefined && Object.keys(prices).length === 0) {
    return yield* Check.invalid("Budget", "cost.prices", "must price at least one model")
  }
  const exitBehavior = options.exitBehavior ?? "end"
  const checks = checksOf(options)
  const priceOf = prices === undefined ? undefined : ModelProfile.lookupIn(prices)
  const priced = prices === undefined ? [] : Object.keys(prices)

  /** The price of the agent's model; undefined without a cost budget. */
  const currentPrice: Effect.Effect<Price | undefined, UnpricedModel> = priceOf === undefined
    ? Effect.succeed(undefined)
    : Effect.flatMap(ModelProfile.CurrentModel, (model) =>
      Option.match(Option.flatMap(model, priceOf), {
        onNone: () =>
          Effect.fail(new UnpricedModel({ ...(Option.isSome(model) ? { model: model.value } : {}), priced })),
        onSome: Effect.succeed
      }))

  /**
   * The slice with the run's usage counted (see {@link counted}), or
   * undefined when nothing changed. The price is looked up only for usage
   * to count, so a run that made no call never fails on it after the fact.
   */
  const countOwn = (state: State, usage: Middleware.RunUsage) =>
    usage.inputTokens === state.budgetRunInputTokens && usage.outputTokens === state.budgetRunOutputTokens &&
      usage.totalTokens === ownRunTokens(state)
      ? Effect.succeed(undefined)
      : Effect.map(currentPrice, (price) => counted(state, usage, price))
  const name = options.name ?? "budget"

  /**
   * {@link countOwn}, with what subagents spent since the last hook added;
   * posts what is left to the subagents the run starts next (unless the
   * run ends: `last`).
   */
  const count = (threadId: string, stored: State, usage: Middleware.RunUsage, last = false) =>
    Effect.gen(function*() {
      const own = yield* countOwn(stored, usage)
      const children = yield* (last ? Allowance.takeLast : Allowance.take)(threadId, name)
      const update = children === undefined ? own : withDelegated(own ?? stored, children)
      if (last) return update
      const state = update ?? stored
      // (an unpriced model fails the run in beforeModel, not here)
      const price = yield* Effect.orElseSucceed(currentPrice, () => undefined)
      yield* Allowance.post(threadId, name, {
        _tag: "Budget",
        left: checks.map((check) => ({
          budget: check.budget,
          label: `${check.scope} ${check.budget === "tokens" ? "token" : "cost"} budget (${
            formatAmount(check.budget, check.limit)
          }) of the parent run`,
          left: check.limit - check.spent(state)
        })),
        ...(price === undefined ? {} : { price }),
        seen: {
          inputTokens: state.budgetRunInputTokens,
          outputTokens: state.budgetRunOutputTokens,
          totalTokens: ownRunTokens(state)
        }
      })
      return update
    })

  return Middleware.make({
    name,
    state: { schema: State, initial },
    canJumpTo: ["end"],
    beforeAgent: ({ state }) =>
      Effect.succeed(
        state.budgetRunTokens === 0 && state.budgetRunCost === 0 && state.budgetRunInputTokens === 0 &&
          state.budgetRunOutputTokens === 0
          ? undefined
          : { state: runReset }
      ),
    beforeModel: Effect.fnUntraced(function*({ messages, state: stored, threadId, usage }) {
      // an unpriced model fails the run before its first call
      yield* currentPrice
      const update = yield* count(threadId, stored, usage)
      const state = update ?? stored
      const reached = checks.filter((check) => check.spent(state) >= check.limit).map((check): Reached => ({
        budget: check.budget,
        scope: check.scope,
        spent: check.spent(state),
        limit: check.limit
      }))
      if (reached.length === 0) return update === undefined ? undefined : { state: update }
      if (exitBehavior === "error") return yield* new BudgetExceeded({ threadId, reached })
      const text = describeReached(reached)
      yield* Middleware.report(`${text}; ending the run`, reached)
      return {
        ...(update === undefined ? {} : { state: update }),
        messages: [...messages, BudgetEnd.notice(text)],
        jumpTo: "end"
      }
    }),
    afterModel: ({ state, threadId, usage }) =>
      Effect.map(count(threadId, state, usage), (update) => update === undefined ? undefined : { state: update }),
    afterAgent: ({ state, threadId, usage }) =>
      Effect.map(
        count(threadId, state, usage, true),
        (update) => update === undefined ? undefined : { state: update }
      ),
    ...(options.softLanding === true
      ? {
        wrapModelCall: (request, next) => {
          const state = request.state as unknown as State
          const over = checks.find((check) => {
            const lastCall = check.lastCall(state)
            return lastCall > 0 && check.spent(state) + lastCall > check.limit
          })
          if (over === undefined) return next(request)
          const spent = formatAmount(over.budget, over.spent(state))
          const lastCall = formatAmount(over.budget, over.lastCall(state))
          return BudgetEnd.land(
            request,
            next,
            `the next call would likely go over the ${over.scope} ${over.budget} budget (${spent} spent of ${
              formatAmount(over.budget, over.limit)
            }, the last call took ${lastCall}): tools disabled`,
            { budget: over.budget, scope: over.scope, spent: over.spent(state), limit: over.limit }
          )
        }
      }
      : {})
  })
})
