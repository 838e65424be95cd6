/**
 * What the limits of a run (`ModelCallLimit`, `ToolCallLimit`, `Budget`)
 * leave to the runs it starts (a `SubAgents` child and its own children), and
 * what those spent, so that a child counts against its parent's limits
 * whatever the order of the parent's middleware.
 *
 * The limits of a run post their {@link Allowance} on the run's
 * {@link Board} as their hooks run (`beforeModel` always runs before the
 * `afterModel` hook that starts children). `SubAgents` turns each allowance
 * into a {@link Pool} the children of one reply share: every model call and
 * tool call of a child (and of its children) is admitted against the pools
 * of every run above it, and counted in them. It then posts what the
 * children spent, which each limit adds to its own counts in its next hook.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import { globalValue } from "effect/GlobalValue"
import * as Schema from "effect/Schema"

/** The model calls a run's `ModelCallLimit` has left. */
const ModelCalls = Schema.TaggedStruct("ModelCalls", {
  left: Schema.Number,
  /** Why a call is refused once none is left ("model call limit (run limit 3)"). */
  reason: Schema.String
})

/** The tool calls a run's `ToolCallLimit` (of one tool or all) has left. */
const ToolCalls = Schema.TaggedStruct("ToolCalls", {
  toolName: Schema.optional(Schema.String),
  left: Schema.Number,
  /** The calls of the last reply the limit counted already (its `afterModel` ran). */
  counted: Schema.Array(Schema.String),
  /** Whether a call over the limit ends or fails the run (else it is answered with a failed result). */
  stops: Schema.Boolean,
  /** The failed result of a call over the limit. */
  blockedText: Schema.String,
  reason: Schema.String
})

/** What a run's `Budget` has left, per limit (tokens or cost, of the thread or the run). */
const Budget = Schema.TaggedStruct("Budget", {
  left: Schema.Array(Schema.Struct({
    budget: Schema.Literal("tokens", "cost"),
    label: Schema.String,
    left: Schema.Number
  })),
  price: Schema.optional(Schema.Struct({ inputPerMillion: Schema.Number, outputPerMillion: Schema.Number })),
  /** The run usage the budget had counted when it posted (the parent's call being answered may not be in it). */
  seen: Schema.Struct({ inputTokens: Schema.Number, outputTokens: Schema.Number, totalTokens: Schema.Number })
})

/** What one limit of a run leaves to the runs it starts. */
export const Allowance = Schema.Union(ModelCalls, ToolCalls, Budget)
export type Allowance = typeof Allowance.Type

/** What the runs started by a run spent, for one of its limits. */
export const Spent = Schema.Struct({
  modelCalls: Schema.Number,
  toolCalls: Schema.Number,
  inputTokens: Schema.Number,
  outputTokens: Schema.Number,
  totalTokens: Schema.Number,
  cost: Schema.Number
})
export type Spent = typeof Spent.Type

export const nothingSpent: Spent = {
  modelCalls: 0,
  toolCalls: 0,
  inputTokens: 0,
  outputTokens: 0,
  totalTokens: 0,
  cost: 0
}

const add = (a: Spent, b: Spent): Spent => ({
  modelCalls: a.modelCalls + b.modelCalls,
  toolCalls: a.toolCalls + b.toolCalls,
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens,
  totalTokens: a.totalTokens + b.totalTokens,
  cost: a.cost + b.cost
})

// -----------------------------------------------------------------------------
// the board of a run
// -----------------------------------------------------------------------------

interface ThreadBoard {
  /** The allowance each limit posted last, by the limit's middleware name. */
  readonly allowances: ReadonlyMap<string, Allowance>
  /** What children spent that the limit has not counted yet, by its name. */
  readonly spent: ReadonlyMap<string, Spent>
}

const emptyThread: ThreadBoard = { allowances: new Map(), spent: new Map() }

/** The boards of the runs of this fiber, by thread. A child run gets a board of its own. */
export const CurrentBoard: FiberRef.FiberRef<ReadonlyMap<string, ThreadBoard>> = globalValue(
  Symbol.for("@stepwise-agent/middleware/internal/allowance/CurrentBoard"),
  () => FiberRef.unsafeMake<ReadonlyMap<string, ThreadBoard>>(new Map())
)

const updateThread = (threadId: string, f: (board: ThreadBoard) => ThreadBoard) =>
  FiberRef.update(CurrentBoard, (boards) => new Map(boards).set(threadId, f(boards.get(threadId) ?? emptyThread)))

/** A limit posts what it leaves to the children its run starts. */
export const post = (threadId: string, limit: string, allowance: Allowance): Effect.Effect<void> =>
  updateThread(threadId, (board) => ({ ...board, allowances: new Map(board.allowances).set(limit, allowance) }))

/** A limit takes what children spent since it last looked (to add to its counts); `undefined` when nothing. */
export const take = (threadId: string, limit: string): Effect.Effect<Spent | undefined> =>
  FiberRef.modify(CurrentBoard, (boards) => {
    const board = boards.get(threadId)
    const spent = board?.spent.get(limit)
    if (board === undefined || spent === undefined) return [undefined, boards]
    const rest = new Map(board.spent)
    rest.delete(limit)
    return [spent, new Map(boards).set(threadId, { ...board, spent: rest })]
  })

/**
 * A limit takes what children spent (as {@link take}) as its run ends, and
 * withdraws its allowance: a fiber that runs many threads keeps no board of
 * a thread whose run ended.
 */
export const takeLast = (threadId: string, limit: string): Effect.Effect<Spent | undefined> =>
  FiberRef.modify(CurrentBoard, (boards) => {
    const board = boards.get(threadId)
    if (board === undefined) return [undefined, boards]
    const spent = board.spent.get(limit)
    const allowances = new Map(board.allowances)
    allowances.delete(limit)
    const rest = new Map(board.spent)
    rest.delete(limit)
    const next = new Map(boards)
    if (allowances.size === 0 && rest.size === 0) next.delete(threadId)
    else next.set(threadId, { allowances, spent: rest })
    return [spent, next]
  })

/** The allowances the limits of a run posted. */
export const allowancesOf = (threadId: string): Effect.Effect<ReadonlyMap<string, Allowance>> =>
  Effect.map(FiberRef.get(CurrentBoard), (boards) => boards.get(threadId)?.allowances ?? new Map())

/** `SubAgents` posts what its children spent, for each limit to count. */
export const postSpent = (threadId: string, spent: ReadonlyMap<string, Spent>): Effect.Effect<void> =>
  spent.size === 0 ? Effect.void : updateThread(threadId, (board) => {
    const all = new Map(board.spent)
    for (const [limit, more] of spent) all.set(limit, add(all.get(limit) ?? nothingSpent, more))
    return { ...board, spent: all }
  })

/** A child run's limits post on a board of its own. */
export const ownBoard = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(effect, CurrentBoard, new Map())

// -----------------------------------------------------------------------------
// pools: an allowance shared by the children of one reply
// -----------------------------------------------------------------------------

/** Token counts, as `Response.Usage` or `Middleware.RunUsage` carry them. */
export interface UsageLike {
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
  readonly totalTokens?: number | undefined
}

/** An allowance being spent by children (mutable: the children of a reply run at once). */
export interface Pool {
  readonly limit: string
  readonly allowance: Allowance
  /** What is left: model or tool calls, or per budget limit. */
  left: Array<number>
  spent: Spent
}

/** A pool of `allowance`, with what the parent's own call being answered spent taken off a budget. */
export const poolOf = (limit: string, allowance: Allowance, usage?: UsageLike | undefined): Pool => {
  switch (allowance._tag) {
    case "ModelCalls":
    case "ToolCalls":
      return { limit, allowance, left: [allowance.left], spent: nothingSpent }
    case "Budget": {
      const input = Math.max(0, (usage?.inputTokens ?? 0) - allowance.seen.inputTokens)
      const output = Math.max(0, (usage?.outputTokens ?? 0) - allowance.seen.outputTokens)
      const tokens = Math.max(0, (usage?.totalTokens ?? 0) - allowance.seen.totalTokens)
      const cost = costOf(allowance, input, output)
      return {
        limit,
        allowance,
        left: allowance.left.map((entry) => entry.left - (entry.budget === "tokens" ? tokens : cost)),
        spent: nothingSpent
      }
    }
  }
}

const costOf = (allowance: Allowance, input: number, output: number): number =>
  allowance._tag === "Budget" && allowance.price !== undefined
    ? (input * allowance.price.inputPerMillion + output * allowance.price.outputPerMillion) / 1_000_000
    : 0

const spend = (pool: Pool, more: Partial<Spent>) => {
  pool.spent = add(pool.spent, { ...nothingSpent, ...more })
}

/** Whether a tool call counts against a `ToolCalls` allowance. */
const matches = (allowance: Allowance, call: Prompt.ToolCallPart) =>
  allowance._tag === "ToolCalls" && (allowance.toolName === undefined || allowance.toolName === call.name)

/** Admits a model call of a child against `pools` (counting it), or says why it may not be made. */
export const admitModelCall = (pools: ReadonlyArray<Pool>): string | undefined => {
  for (const pool of pools) {
    const { allowance } = pool
    if (allowance._tag === "ModelCalls" && pool.left[0]! <= 0) return allowance.reason
    if (allowance._tag === "Budget") {
      const spentOut = allowance.left.findIndex((_, i) => pool.left[i]! <= 0)
      if (spentOut >= 0) return `the ${allowance.left[spentOut]!.label} budget was reached`
    }
  }
  for (const pool of pools) {
    if (pool.allowance._tag === "ModelCalls") {
      pool.left[0]!--
      spend(pool, { modelCalls: 1 })
    }
  }
  return undefined
}

/** Counts what a child's model call spent in the budgets of `pools`. */
export const countUsage = (pools: ReadonlyArray<Pool>, usage: UsageLike): void => {
  const input = usage.inputTokens ?? 0
  const output = usage.outputTokens ?? 0
  const tokens = usage.totalTokens ?? input + output
  for (const pool of pools) {
    const { allowance } = pool
    if (allowance._tag !== "Budget") continue
    const cost = costOf(allowance, input, output)
    pool.left = pool.left.map((left, i) => left - (allowance.left[i]!.budget === "tokens" ? tokens : cost))
    spend(pool, { inputTokens: input, outputTokens: output, totalTokens: tokens, cost })
  }
}

/** Admits a tool call of a child against `pools` (counting it), or gives the failed result's text. */
export const admitToolCall = (pools: ReadonlyArray<Pool>, call: Prompt.ToolCallPart): string | undefined => {
  for (const pool of pools) {
    if (matches(pool.allowance, call) && pool.left[0]! <= 0) {
      return (pool.allowance as typeof ToolCalls.Type).blockedText
    }
  }
  for (const pool of pools) {
    if (matches(pool.allowance, call)) {
      pool.left[0]!--
      spend(pool, { toolCalls: 1 })
    }
  }
  return undefined
}

/** How the calls of a reply fare against the tool call limits of the run that made it. */
export interface ReplyDecision {
  /** Task calls over a limit that answers such a call with a failed result: the result's text. */
  readonly blocked: ReadonlyMap<string, string>
  /** Whether a task call is over a limit that ends or fails the run: no child runs, the limit decides. */
  readonly stops: boolean
}

/**
 * Walks the calls of a reply in order against the tool call limits in
 * `pools`, as `ToolCallLimit` does: each call the limit has not counted yet
 * takes one from what is left while something is. The calls of other tools
 * only reserve their share (their limit counts them itself); a task call
 * (`isTask`) is counted as spent by the children.
 */
export const decideReply = (
  pools: ReadonlyArray<Pool>,
  calls: ReadonlyArray<Prompt.ToolCallPart>,
  isTask: (call: Prompt.ToolCallPart) => boolean
): ReplyDecision => {
  const blocked = new Map<string, string>()
  let stops = false
  for (const pool of pools) {
    const { allowance } = pool
    if (allowance._tag !== "ToolCalls") continue
    const counted = new Set(allowance.counted)
    for (const call of calls) {
      if (!matches(allowance, call) || counted.has(call.id)) continue
      if (pool.left[0]! > 0) {
        pool.left[0]!--
        if (isTask(call)) spend(pool, { toolCalls: 1 })
      } else if (isTask(call)) {
        if (allowance.stops) stops = true
        if (!blocked.has(call.id)) blocked.set(call.id, allowance.blockedText)
      }
    }
  }
  return { blocked, stops }
}

/** What the children spent, by limit. */
export const spentOf = (pools: ReadonlyArray<Pool>): ReadonlyMap<string, Spent> =>
  new Map(pools.map((pool) => [pool.limit, pool.spent]))

/** A pool as a waiting parent stores it, to go on spending it when resumed. */
export const StoredPool = Schema.Struct({
  limit: Schema.String,
  allowance: Allowance,
  left: Schema.Array(Schema.Number),
  spent: Spent
})
export type StoredPool = typeof StoredPool.Type

export const restore = (stored: StoredPool): Pool => ({ ...stored, left: [...stored.left] })

export const store = (pool: Pool): StoredPool => ({ ...pool, left: [...pool.left] })

/** The pools of the runs above the running one: a child's calls count against each. */
export const CurrentPools: FiberRef.FiberRef<ReadonlyArray<Pool>> = globalValue(
  Symbol.for("@stepwise-agent/middleware/internal/allowance/CurrentPools"),
  () => FiberRef.unsafeMake<ReadonlyArray<Pool>>([])
)
