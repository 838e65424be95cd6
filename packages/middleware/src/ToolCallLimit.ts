/**
 * ToolCallLimit: caps how many tool calls (of one tool, or of all tools) a
 * thread, and each run on it, may make.
 *
 * `afterModel` looks at the tool calls the model just asked for, in order,
 * and lets each through while both counts stay within their limits; a call
 * that would go over is blocked. The counts (calls let through) live in the
 * middleware's state slice, so they survive a checkpoint; `beforeAgent`
 * resets the run count at the start of every run, however the previous run
 * ended (also when it ended by this limit's own jump). What happens to
 * blocked calls depends on `exitBehavior`, as in LangChain:
 *
 * - `"continue"` (default): each blocked call gets a failed tool result
 *   telling the model the limit was reached; the calls let through, and
 *   calls of other tools, run as usual, and the run goes on.
 * - `"end"`: the run ends after this model turn. Every tool call of the turn
 *   that has no result gets a failed one (blocked calls say the limit was
 *   reached, the others that they were not run because the run ended), so
 *   no call is left without a result, and an assistant message saying why
 *   ends the conversation.
 * - `"error"`: the run fails with {@link ToolCallLimitExceeded}.
 *
 * With `softLanding`, a run does not end on a tool call. The allowance is
 * spent when a count reaches its limit: from then on a limit on all tools
 * makes the model calls with tools disabled and a prompt asking for the answer
 * (`ModelCallLimit.lastCallPrompt`), so the run ends on that answer; a limit
 * on one tool stops offering that tool (and says so in the system prompt). One reply can ask for several calls:
 * the calls within the allowance run, those over it get failed results as
 * with `"continue"` (whatever `exitBehavior` says), and the next call is the
 * soft landing. `exitBehavior` applies only when the model still asks for
 * tools after the allowance was spent (e.g. a model that ignores
 * `toolChoice: "none"`).
 *
 * The tool calls of the subagents a run starts (`SubAgents`, and theirs in
 * turn) count against its limits, whatever the order of the middleware: the
 * `task` calls of a reply are counted with its other calls, in order, and a
 * `task` call over the limit starts no child (with `exitBehavior: "end"` or
 * `"error"` no child of that reply runs, and the limit ends or fails the
 * run); a child's own calls take from what is left, a call over it is
 * answered with a failed result, and they are added to the parent's counts
 * in the limit's next hook.
 *
 * The slice's keys derive from `toolName`, so limits on different tools fit
 * in one agent: `threadToolCallCount` / `runToolCallCount` for all tools,
 * `threadToolCallCount:<toolName>` / `runToolCallCount:<toolName>` for one.
 * Calls another hook already answered (another limit, an approval) are not
 * counted; since `afterModel` hooks run in reverse list order, list a limit
 * on all tools before the per-tool ones so that it counts only the calls
 * they let through.
 *
 * @since 0.1.0
 */
import type * as Prompt from "@effect/ai/Prompt"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as AgentState from "@stepwise-agent/core/AgentState"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Allowance from "./internal/allowance.js"
import * as BudgetEnd from "./internal/budgetEnd.js"
import * as Check from "./internal/options.js"

/**
 * What happens to tool calls over the limit.
 *
 * @since 0.1.0
 * @category models
 */
export type ExitBehavior = "continue" | "error" | "end"

/**
 * The state slice of a limit on `Name` (`undefined`: all tools).
 *
 * @since 0.1.0
 * @category models
 */
export type State<Name extends string | undefined = undefined> = [Name] extends [string] ? {
    readonly [K in `threadToolCallCount:${Name}` | `runToolCallCount:${Name}`]: number
  }
  : { readonly threadToolCallCount: number; readonly runToolCallCount: number }

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<Name extends string | undefined = undefined> {
  /**
   * The tool to limit; all tool calls count when omitted.
   * `Agent.make` fails with `AgentError.UnknownTools` on a name that is not a tool of the agent.
   */
  readonly toolName?: Name
  /** The most calls a thread may make over all its runs. */
  readonly threadLimit?: number | undefined
  /** The most calls one run may make. */
  readonly runLimit?: number | undefined
  /** `"continue"` (default), `"end"` or `"error"`; see the module documentation. */
  readonly exitBehavior?: ExitBehavior | undefined
  /**
   * A soft landing (default `false`): once the allowance is spent, the model
   * is called without tools (a limit on all tools, with a prompt asking for
   * the answer) or without the limited tool; see the module documentation.
   */
  readonly softLanding?: boolean | undefined
  /** The middleware's name (default `"toolCallLimit"`, or `"toolCallLimit:<toolName>"`). */
  readonly name?: string | undefined
}

/**
 * The model asked for more tool calls than a limit with
 * `exitBehavior: "error"` allows. The counts include the calls of the
 * offending turn (those that would have run and those over the limit).
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolCallLimitExceeded extends Schema.TaggedError<ToolCallLimitExceeded>(
  "@stepwise-agent/middleware/ToolCallLimit/ToolCallLimitExceeded"
)("ToolCallLimitExceeded", {
  threadId: Schema.String,
  toolName: Schema.optional(Schema.String),
  threadCount: Schema.Number,
  runCount: Schema.Number,
  threadLimit: Schema.optional(Schema.Number),
  runLimit: Schema.optional(Schema.Number)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Thread "${this.threadId}": ${describe(this.toolName, this, this)}`
  }
}

interface Limits {
  readonly threadLimit?: number | undefined
  readonly runLimit?: number | undefined
}

const describe = (
  toolName: string | undefined,
  limits: Limits,
  counts: { readonly threadCount: number; readonly runCount: number }
): string => {
  const reached: Array<string> = []
  if (limits.threadLimit !== undefined && counts.threadCount > limits.threadLimit) {
    reached.push(`thread limit (${counts.threadCount}/${limits.threadLimit})`)
  }
  if (limits.runLimit !== undefined && counts.runCount > limits.runLimit) {
    reached.push(`run limit (${counts.runCount}/${limits.runLimit})`)
  }
  return `${toolName === undefined ? "tool call" : `"${toolName}" tool call`} limit exceeded: ${reached.join(", ")}`
}

const OptionsSchema = Schema.Struct({
  toolName: Schema.optional(Check.NonEmpty),
  threadLimit: Schema.optional(Check.Count),
  runLimit: Schema.optional(Check.Count),
  exitBehavior: Schema.optional(Schema.Literal("continue", "end", "error")),
  softLanding: Schema.optional(Schema.Boolean),
  name: Schema.optional(Check.NonEmpty)
})

/**
 * Builds the middleware. Bad options fail `Agent.make` with
 * `AgentError.InvalidOptions`: at least one of `threadLimit` and
 * `runLimit` is required, each a whole number of at least 0, and `runLimit`
 * may not exceed `threadLimit`.
 *
 * Several limits fit in one agent when they limit different tools (or one
 * limits all tools); two limits on the same tool clash on their state keys
 * (an `AgentConfigError` when the agent is built): give one both limits.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 * import * as ToolCallLimit from "@stepwise-agent/middleware/ToolCallLimit"
 *
 * const program = Effect.gen(function*() {
 *   const searches = ToolCallLimit.middleware({ toolName: "search", runLimit: 3 })
 *   const all = ToolCallLimit.middleware({ threadLimit: 50, exitBehavior: "end" })
 *   // the limit on all tools first: its afterModel runs last, counting only what the others let through
 *   return yield* Agent.make({ middleware: [all, searches] })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = <const Name extends string | undefined = undefined>(
  options: Options<Name>
): Middleware.Middleware<State<Name>, ToolCallLimitExceeded> =>
  Middleware.unwrap(setup(options), {
    name: Check.nameOf(
      options,
      typeof options?.toolName === "string" ? `toolCallLimit:${options.toolName}` : "toolCallLimit"
    )
  })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: <const Name extends string | undefined = undefined>(
  options: Options<Name>
) => Effect.Effect<Middleware.Middleware<State<Name>, ToolCallLimitExceeded>, AgentError.InvalidOptions> = Effect
  .fn("ToolCallLimit.middleware")(function*(options: Options<string | undefined>) {
    // (no options, from JavaScript, stand for `{}` here as in the check)
    options ??= {}
    yield* Check.validate("ToolCallLimit", OptionsSchema, options)
    const { runLimit, threadLimit, toolName } = options
    if (threadLimit === undefined && runLimit === undefined) {
      return yield* Check.invalid("ToolCallLimit", "threadLimit", "give at least one of threadLimit and runLimit")
    }
    if (threadLimit !== undefined && runLimit !== undefined && runLimit > threadLimit) {
      return yield* Check.invalid(
        "ToolCallLimit",
        "runLimit",
        `may not exceed threadLimit (${threadLimit}), got ${runLimit}`
      )
    }
    const exitBehavior = options.exitBehavior ?? "continue"
    const threadKey = toolName === undefined ? "threadToolCallCount" : `threadToolCallCount:${toolName}`
    const runKey = toolName === undefined ? "runToolCallCount" : `runToolCallCount:${toolName}`
    const schema = Schema.Struct({ [threadKey]: Schema.NonNegativeInt, [runKey]: Schema.NonNegativeInt })
    const limits: Limits = { threadLimit, runLimit }
    const subject = toolName === undefined ? "tool calls" : `calls of "${toolName}"`
    const blockedText = toolName === undefined
      ? "Tool call limit reached. Do not make any more tool calls."
      : `Tool call limit for "${toolName}" reached. Do not call "${toolName}" again.`
    type Slice = Record<string, number>
    const softLanding = options.softLanding === true
    /** Whether no call is left: a count reached its limit. */
    const spent = (state: Readonly<Record<string, unknown>>): boolean =>
      (threadLimit !== undefined && (state[threadKey] as number ?? 0) >= threadLimit) ||
      (runLimit !== undefined && (state[runKey] as number ?? 0) >= runLimit)
    const landingText = toolName === undefined
      ? "tool call limit spent: the model answers without tools"
      : `"${toolName}" tool call limit spent: "${toolName}" is no longer offered`

    const name = options.name ?? (toolName === undefined ? "toolCallLimit" : `toolCallLimit:${toolName}`)
    /** The slice with the calls subagents made since the last hook added; undefined when they made none. */
    const withChildren = (threadId: string, state: Slice, last = false) =>
      Effect.map(
        (last ? Allowance.takeLast : Allowance.take)(threadId, name),
        (spent): Slice | undefined =>
          spent === undefined || spent.toolCalls === 0 ? undefined : {
            [threadKey]: (state[threadKey] ?? 0) + spent.toolCalls,
            [runKey]: (state[runKey] ?? 0) + spent.toolCalls
          }
      )
    /** Posts what is left to the subagents, and the calls of the last reply already counted. */
    const post = (threadId: string, state: Slice, counted: ReadonlyArray<string>) =>
      Allowance.post(threadId, name, {
        _tag: "ToolCalls",
        ...(toolName === undefined ? {} : { toolName }),
        left: Math.min(
          threadLimit === undefined ? Infinity : threadLimit - (state[threadKey] ?? 0),
          runLimit === undefined ? Infinity : runLimit - (state[runKey] ?? 0)
        ),
        counted,
        stops: exitBehavior !== "continue" && !(softLanding && !spent(state)),
        blockedText,
        reason: `the limit on ${subject} of the parent run was reached`
      })

    const make = Middleware.make({
      name,
      uses: { tools: toolName === undefined ? [] : [toolName] },
      state: { schema: schema as unknown as Schema.Schema<Slice>, initial: { [threadKey]: 0, [runKey]: 0 } as Slice },
      canJumpTo: ["end"],
      beforeAgent: ({ state }) => Effect.succeed(state[runKey] === 0 ? undefined : { state: { [runKey]: 0 } }),
      beforeModel: Effect.fnUntraced(function*({ state: stored, threadId }) {
        const update = yield* withChildren(threadId, stored)
        yield* post(threadId, update ?? stored, [])
        return update === undefined ? undefined : { state: update }
      }),
      afterModel: Effect.fnUntraced(function*({ messages, state: stored, threadId }) {
        const update = yield* withChildren(threadId, stored)
        const state = update ?? stored
        const calls = AgentState.pendingToolCalls(messages)?.calls ?? []
        if (calls.length === 0) {
          yield* post(threadId, state, [])
          return update === undefined ? undefined : { state: update }
        }
        let threadCount = state[threadKey] ?? 0
        let runCount = state[runKey] ?? 0
        const blocked = new Set<string>()
        let allowed = 0
        for (const call of calls) {
          if (toolName !== undefined && call.name !== toolName) continue
          const over = (threadLimit !== undefined && threadCount + 1 > threadLimit) ||
            (runLimit !== undefined && runCount + 1 > runLimit)
          if (over) {
            blocked.add(call.id)
          } else {
            threadCount++
            runCount++
            allowed++
          }
        }
        const counts = { [threadKey]: threadCount, [runKey]: runCount }
        yield* post(threadId, counts, calls.map((call) => call.id))
        if (blocked.size === 0) return allowed === 0 && update === undefined ? undefined : { state: counts }
        const attempted = { threadCount: threadCount + blocked.size, runCount: runCount + blocked.size }
        // with a soft landing, the turn that spends the allowance goes on to the landing call
        const behavior = softLanding && !spent(state) ? "continue" : exitBehavior
        if (behavior === "error") {
          return yield* new ToolCallLimitExceeded({
            threadId,
            ...(toolName === undefined ? {} : { toolName }),
            ...attempted,
            ...(threadLimit === undefined ? {} : { threadLimit }),
            ...(runLimit === undefined ? {} : { runLimit })
          })
        }
        const text = describe(toolName, limits, attempted)
        const results: Array<Prompt.ToolResultPart> = []
        for (const call of calls) {
          if (blocked.has(call.id)) {
            results.push(Middleware.toolResult(call, { error: blockedText }, { isFailure: true }))
          } else if (behavior === "end") {
            results.push(
              Middleware.toolResult(call, {
                error: `Not run: the run was ended because the limit on ${subject} was reached.`
              }, { isFailure: true })
            )
          }
        }
        const withResults = AgentState.appendToolResults(messages, results)
        if (behavior === "end") {
          yield* Middleware.report(`${text}; blocked ${blocked.size} call(s), ending the run`, attempted)
          // The calls that were within the limit were not run either, so they do not count.
          const unchanged = { [threadKey]: state[threadKey] ?? 0, [runKey]: state[runKey] ?? 0 }
          return { state: unchanged, messages: [...withResults, BudgetEnd.notice(text)], jumpTo: "end" as const }
        }
        yield* Middleware.report(`${text}; blocked ${blocked.size} call(s)`, attempted)
        return { state: counts, messages: withResults }
      }),
      // the run ends: the last of what its subagents spent, and the limit withdraws its allowance
      afterAgent: ({ state, threadId }) =>
        Effect.map(
          withChildren(threadId, state, true),
          (update) => update === undefined ? undefined : { state: update }
        ),
      ...(softLanding
        ? {
          wrapModelCall: (request, next) =>
            !spent(request.state)
              ? next(request)
              : toolName === undefined
              ? BudgetEnd.land(request, next, landingText)
              : BudgetEnd.withoutTool(request, next, toolName, landingText)
        }
        : {})
    })
    return make as Middleware.Middleware<any, ToolCallLimitExceeded>
  })
