/**
 * The agents of the benchmark: a configuration, and the agent that runs it on
 * the workload of `fakes.ts`.
 *
 * @since 0.1.0
 */
import type { Prompt } from "@effect/ai"
import { LanguageModel, type Toolkit } from "@effect/ai"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import type { Chunk, Context } from "effect"
import { Channel, Effect, Layer, Scope, Stream } from "effect"
import {
  callParams,
  encodedModel,
  makeToolkit,
  type Mode,
  type ModelKind,
  rawModel,
  type Script,
  userInput
} from "./fakes.js"

/**
 * A middleware that implements every node hook by returning no update and
 * every wrap hook by calling `next` once with the request unchanged: it
 * changes nothing about a run, and measures the cost of the middleware path.
 */
export const passThrough = (name: string): Middleware.Middleware<{}, never, never, never> =>
  Middleware.make({
    name,
    beforeAgent: () => Effect.void,
    beforeModel: () => Effect.void,
    afterModel: () => Effect.void,
    afterAgent: () => Effect.void,
    wrapModelCall: (request, next) => next(request),
    wrapToolCall: (request, next) => next(request)
  })

/**
 * A configuration of the benchmark.
 *
 * @since 0.1.0
 * @category models
 */
export interface Config {
  readonly model: ModelKind
  readonly mode: Mode
  readonly middleware: number
  readonly tools: number
  /** Model steps that call a tool; the run makes one more model call (the final answer). */
  readonly steps: number
  /** The agent's system prompt (none unless given). */
  readonly systemPrompt?: string | undefined
}

/**
 * An agent ready to run a configuration.
 *
 * @since 0.1.0
 * @category models
 */
export interface Bench {
  readonly agent: Agent.AgentOf<ReadonlyArray<Middleware.Middleware>>
  readonly checkpointer: Checkpointer.Service
  readonly script: Script
  /** One whole run on a fresh thread (the thread is deleted afterwards). */
  readonly runOnce: Effect.Effect<void, unknown>
  /** One run, returning what the benchmark checks: model steps, tool results, final text. */
  readonly check: Effect.Effect<
    { readonly steps: number; readonly toolResults: number; readonly text: string },
    unknown
  >
}

const countToolResults = (messages: ReadonlyArray<Prompt.Message>) => {
  let n = 0
  for (const message of messages) {
    if (message.role === "tool") n += message.content.length
  }
  return n
}

/**
 * Builds the agent of a configuration (on a memory checkpointer unless
 * `checkpointerOf` gives another).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeBench = (
  config: Config,
  make: typeof LanguageModel.make = LanguageModel.make,
  checkpointerOf: Effect.Effect<Checkpointer.Service, unknown> = Checkpointer.makeMemory
): Effect.Effect<Bench, unknown> =>
  Effect.gen(function*() {
    const script: Script = { toolSteps: config.steps, call: 0 }
    const model = config.model === "encoded" ? yield* encodedModel(script, make) : rawModel(script)
    const checkpointer = yield* checkpointerOf
    const { kit, layer } = makeToolkit(config.tools)
    const middleware = Array.from({ length: config.middleware }, (_, i) => passThrough(`pass_${i}`))
    const toolkit = kit as unknown as Effect.Effect<Toolkit.WithHandler<any>>
    const agent = yield* Agent.make({
      toolkit,
      middleware,
      maxSteps: config.steps + 1,
      ...(config.systemPrompt === undefined ? {} : { systemPrompt: config.systemPrompt })
    }).pipe(
      Effect.provide(layer),
      Effect.provideService(LanguageModel.LanguageModel, model),
      Effect.provideService(Checkpointer.Checkpointer, checkpointer)
    )
    const threadId = "bench"
    const input = userInput
    const once = config.mode === "generate"
      ? agent.run(input, { threadId })
      : Stream.runLast(agent.stream(input, { threadId })).pipe(
        Effect.flatMap((last) =>
          last._tag === "Some" && last.value._tag === "RunEnded"
            ? Effect.succeed(last.value.result)
            : Effect.dieMessage("the stream did not end with RunEnded")
        )
      )
    const fresh = <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.suspend(() => {
        script.call = 0
        return effect
      }).pipe(Effect.ensuring(checkpointer.delete(threadId).pipe(Effect.orDie)))
    const runOnce = config.mode === "generate"
      ? fresh(agent.run(input, { threadId }))
      : fresh(Stream.runDrain(agent.stream(input, { threadId })))
    const check = fresh(once).pipe(
      Effect.map((result) => {
        if (result._tag !== "Completed") throw new Error(`run ended as ${result._tag}`)
        return {
          steps: result.steps,
          toolResults: countToolResults(result.state.messages),
          text: result.text
        }
      })
    )
    return { agent, checkpointer, script, runOnce: Effect.asVoid(runOnce), check }
  })

/**
 * Drains `stream` in the calling fiber, pulling its channel in a scope of its
 * own, as the agent loop drains a model's stream (`internal/drain.ts` in the
 * core, which the package does not export): `Stream.runDrain` would run the
 * channel in a forked fiber, a cost the loop does not pay. `onChunk`, when
 * given, sees each chunk.
 *
 * @since 0.1.0
 * @category constructors
 */
export const drainInFiber = <A, E>(
  stream: Stream.Stream<A, E>,
  onChunk?: (chunk: Chunk.Chunk<A>) => void
): Effect.Effect<void, E> =>
  Effect.acquireUseRelease(
    Scope.make(),
    (scope) =>
      Effect.flatMap(Channel.toPullIn(Stream.toChannel(stream), scope), (pull) => {
        const next: Effect.Effect<void, E> = Effect.flatMap(pull, (step) => {
          if (step._tag === "Left") return Effect.void
          onChunk?.(step.right)
          return next
        })
        return next
      }),
    (scope, exit) => Scope.close(scope, exit)
  )

/**
 * A bare `LanguageModel.generateText` (or a drained `streamText`) with a
 * toolkit of `tools` tools and `disableToolCallResolution: true`, on the
 * encoded fake; `tools = 0` sends no toolkit. The model answers with one
 * call of `tool_0`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeBareCall = (
  tools: number,
  mode: Mode,
  make: typeof LanguageModel.make = LanguageModel.make
): Effect.Effect<Effect.Effect<void, unknown>, unknown> =>
  Effect.gen(function*() {
    // with no toolkit a tool call would not decode: answer with text
    const script: Script = { toolSteps: tools === 0 ? 0 : Number.POSITIVE_INFINITY, call: 0 }
    const model = yield* encodedModel(script, make)
    const { kit, layer } = makeToolkit(tools)
    const handled = yield* (kit as unknown as Effect.Effect<Toolkit.WithHandler<any>>).pipe(Effect.provide(layer))
    const options: any = tools === 0
      ? { prompt: userInput }
      : { prompt: userInput, toolkit: handled, disableToolCallResolution: true }
    return mode === "generate"
      ? Effect.asVoid(model.generateText(options) as Effect.Effect<unknown, unknown>)
      : drainInFiber(model.streamText(options) as Stream.Stream<unknown, unknown>)
  })

/**
 * One `Toolkit.handle` of `tool_0` (decode params, run the handler, check
 * and encode the result) in a toolkit of `tools` tools.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeHandleCall = (tools: number): Effect.Effect<Effect.Effect<void, unknown>, unknown> =>
  Effect.gen(function*() {
    const { kit, layer } = makeToolkit(tools)
    const context = yield* Layer.build(layer).pipe(Effect.scoped)
    const handled = yield* (kit as unknown as Effect.Effect<Toolkit.WithHandler<any>>).pipe(Effect.provide(context))
    const handle = handled.handle as unknown as (name: string, params: unknown) => Effect.Effect<unknown, unknown>
    return Effect.asVoid(handle("tool_0", callParams)).pipe(
      Effect.provide(context as Context.Context<never>)
    ) as Effect.Effect<void, unknown>
  })
