/**
 * Builds an agent: a `LanguageModel`, a toolkit and a list of middleware,
 * run as a loop (model → tools → model … until the model answers without
 * tool calls) that every middleware can observe and steer.
 *
 * @since 0.1.0
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Schema from "effect/Schema"
import { AgentConfigError, type InvalidOptions } from "./AgentError.js"
import { AgentLoop } from "./AgentLoop.js"
import * as AgentState from "./AgentState.js"
import * as Checkpointer from "./Checkpointer.js"
import * as EffectAiPatch from "./internal/effectAiPatch.js"
import { makeLoop } from "./internal/loop.js"
import { unknownKey } from "./internal/options.js"
import * as OutputTool from "./internal/outputTool.js"
import { entriesOf, type ToolEntry, withTimeout } from "./internal/tools.js"
import type * as Middleware from "./Middleware.js"

/**
 * Options of {@link make} and {@link layer}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<Mws extends ReadonlyArray<Middleware.Any>, TE, TR, O = never> {
  /** The agent's tools: a `Toolkit` (which needs its handler layer) or a handled toolkit. */
  readonly toolkit?: Effect.Effect<Toolkit.WithHandler<any>, TE, TR> | undefined
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
  readonly outputToolName?: string | undefined
  /** The most model calls one run may make (default 50); more is a `MaxStepsExceeded` error. */
  readonly maxSteps?: number | undefined
  /** How many tool calls of one model response run at once (default 8). */
  readonly toolConcurrency?: number | "unbounded" | undefined
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
   * Give every hook, model call and tool call its own span (`Middleware.<hook>`,
   * `AgentLoop.modelCall`, `AgentLoop.toolCall`). By default they are made
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
    toolConcurrency: true,
    toolTimeout: true,
    toolTimeouts: true,
    spans: true
  } satisfies { readonly [K in keyof Options<any, any, any, any>]-?: true }
)

/**
 * The service of the agent built from these options.
 *
 * @since 0.1.0
 * @category utility types
 */
export type AgentOf<Mws extends ReadonlyArray<Middleware.Any>, O = never> = AgentLoop.Service<
  AgentState.Of<Mws>,
  Middleware.Error<Mws[number]>,
  O
>

/**
 * Builds an agent. It needs a `LanguageModel`, the toolkit's handlers and
 * whatever the middleware need; a `Checkpointer` when one is provided (else
 * threads live in memory). Bad configuration — two middleware with one name,
 * clashing state keys, two tools with one name, `maxSteps` < 1, a timeout
 * that is not a positive duration or names no tool — fails with an
 * `AgentConfigError`. An unknown option (a typo such as `middlewares`, or a
 * LangChain option such as `tools`) fails with `InvalidOptions` (`module:
 * "Agent"`, `option`: the key), and a middleware built with bad options (by
 * a constructor that returns it directly, e.g. `Logging.middleware`) with
 * that middleware's `InvalidOptions`.
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
 *     middleware: [Middleware.passThrough("logging")]
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
  O = never
>(
  options: Options<Mws, TE, TR, O> & { readonly middleware?: AgentState.CheckKeys<Mws> | undefined }
): Effect.Effect<
  AgentOf<Mws, O>,
  AgentConfigError | InvalidOptions | TE,
  LanguageModel.LanguageModel | TR | Middleware.Requirements<Mws[number]>
> =>
  Effect.gen(function*() {
    const unknown = unknownKey("Agent", options, optionKeys)
    if (unknown !== undefined) return yield* unknown
    const middleware: ReadonlyArray<Middleware.Any> = options.middleware ?? []
    for (const m of middleware) if (m.invalidOptions !== undefined) return yield* m.invalidOptions
    const maxSteps = options.maxSteps ?? 50
    if (!Number.isInteger(maxSteps) || maxSteps < 1) {
      return yield* new AgentConfigError({ reason: `maxSteps must be a whole number of at least 1, got ${maxSteps}` })
    }
    const toolConcurrency = options.toolConcurrency ?? 8
    if (toolConcurrency !== "unbounded" && (!Number.isInteger(toolConcurrency) || toolConcurrency < 1)) {
      return yield* new AgentConfigError({
        reason: `toolConcurrency must be "unbounded" or a whole number of at least 1, got ${toolConcurrency}`
      })
    }
    const layout = yield* AgentState.layout(middleware)
    const context = yield* Effect.context<never>()
    const tools: Array<ToolEntry> = []
    const owners = new Map<string, string>()
    const addToolkit = (owner: string, toolkit: Toolkit.WithHandler<Record<string, Tool.Any>>) => {
      for (const entry of entriesOf(toolkit, context)) {
        const previous = owners.get(entry.tool.name)
        if (previous !== undefined) {
          return new AgentConfigError({
            reason: `Tool "${entry.tool.name}" of ${owner} has the same name as a tool of ${previous}`
          })
        }
        owners.set(entry.tool.name, owner)
        tools.push(entry)
      }
      return undefined
    }
    const toolkits: Array<readonly [string, Effect.Effect<Toolkit.WithHandler<any>, any, any>]> = []
    if (options.toolkit !== undefined) toolkits.push(["the toolkit", options.toolkit])
    for (const m of middleware) if (m.tools !== undefined) toolkits.push([`middleware "${m.name}"`, m.tools])
    for (const [owner, toolkit] of toolkits) {
      const handled = yield* (toolkit as Effect.Effect<Toolkit.WithHandler<any>, TE>)
      const clash = addToolkit(owner, handled)
      if (clash !== undefined) return yield* clash
    }
    const timeouts = yield* toolTimeoutsOf(options, owners)
    for (let i = 0; i < tools.length; i++) {
      const timeout = timeouts(tools[i]!.tool.name)
      if (timeout !== undefined) tools[i] = withTimeout(tools[i]!, timeout)
    }
    yield* EffectAiPatch.warnIfUnpatched(tools.length)
    let output: OutputTool.OutputTool | undefined
    if (options.responseFormat !== undefined) {
      const name = options.outputToolName ?? "final_answer"
      const previous = owners.get(name)
      if (previous !== undefined) {
        return yield* new AgentConfigError({
          reason: `The structured output tool "${name}" has the same name as a tool of ${previous}; set outputToolName`
        })
      }
      output = OutputTool.make(options.responseFormat, name)
    }
    const checkpointer = yield* Effect.serviceOption(Checkpointer.Checkpointer).pipe(
      Effect.flatMap(Option.match({ onNone: () => Checkpointer.makeMemory, onSome: Effect.succeed }))
    )
    const model = yield* LanguageModel.LanguageModel
    return makeLoop({
      middleware,
      layout,
      tools,
      systemPrompt: options.systemPrompt,
      output,
      maxSteps,
      toolConcurrency,
      spans: options.spans,
      model,
      checkpointer,
      context: Context.omit(LanguageModel.LanguageModel)(context) as Context.Context<never>
    }) as AgentOf<Mws, O>
  }) as any

/** A timeout option as a finite positive duration (`undefined` for none), or the reason it is not one. */
const durationOf = (option: string, input: unknown): Duration.Duration | undefined | AgentConfigError => {
  if (input === undefined) return undefined
  const duration = Duration.decodeUnknown(input)
  if (Option.isNone(duration) || !Duration.greaterThan(duration.value, Duration.zero)) {
    return new AgentConfigError({ reason: `${option} must be a duration above zero, got ${String(input)}` })
  }
  return Duration.isFinite(duration.value) ? duration.value : undefined
}

/** The timeout of each tool, from `toolTimeout` and `toolTimeouts`. */
const toolTimeoutsOf = (
  options: { readonly toolTimeout?: unknown; readonly toolTimeouts?: unknown },
  owners: ReadonlyMap<string, string>
): Effect.Effect<(name: string) => Duration.Duration | undefined, AgentConfigError> =>
  Effect.suspend(() => {
    const fallback = durationOf("toolTimeout", options.toolTimeout)
    if (fallback instanceof AgentConfigError) return Effect.fail(fallback)
    const byName = new Map<string, Duration.Duration | undefined>()
    const given = options.toolTimeouts
    if (given !== undefined) {
      if (typeof given !== "object" || given === null) {
        return Effect.fail(new AgentConfigError({ reason: "toolTimeouts must be an object of durations by tool name" }))
      }
      for (const [name, input] of Object.entries(given)) {
        if (!owners.has(name)) {
          return Effect.fail(
            new AgentConfigError({ reason: `toolTimeouts names "${name}", which is not a tool of this agent` })
          )
        }
        const timeout = durationOf(`toolTimeouts["${name}"]`, input)
        if (timeout instanceof AgentConfigError) return Effect.fail(timeout)
        byName.set(name, timeout)
      }
    }
    return Effect.succeed((name: string) => byName.has(name) ? byName.get(name) : fallback)
  })

/**
 * Provides the `AgentLoop` service built by {@link make}.
 *
 * @example
 * ```ts
 * import { Agent, AgentLoop } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const AgentLive = Agent.layer({ systemPrompt: "Be brief." })
 * const program = AgentLoop.run("hello", { threadId: "t1" })
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
  O = never
>(
  options: Options<Mws, TE, TR, O> & { readonly middleware?: AgentState.CheckKeys<Mws> | undefined }
): Layer.Layer<
  AgentLoop,
  AgentConfigError | InvalidOptions | TE,
  LanguageModel.LanguageModel | TR | Middleware.Requirements<Mws[number]>
> => Layer.effect(AgentLoop, make(options))
