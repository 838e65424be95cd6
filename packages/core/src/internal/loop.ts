import type * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import type * as Tool from "@effect/ai/Tool"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import type * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import {
  DurableThreadError,
  EmptyModelResponse,
  InvalidHookResult,
  InvalidInput,
  InvalidJump,
  MaxStepsExceeded,
  ModelReplyError,
  StructuredOutputError,
  ThreadStateError,
  ToolTimeout
} from "../AgentError.js"
import * as AgentEvent from "../AgentEvent.js"
import type * as AgentLoop from "../AgentLoop.js"
import * as AgentResult from "../AgentResult.js"
import * as AgentState from "../AgentState.js"
import type * as Checkpointer from "../Checkpointer.js"
import type * as Middleware from "../Middleware.js"
import * as RunJournal from "../RunJournal.js"
import * as Secrets from "../Secrets.js"
import * as Usage from "../Usage.js"
import * as Checkpoint from "./checkpoint.js"
import { drain } from "./drain.js"
import {
  checked,
  hookEffect,
  inputProblem,
  modelResponseProblem,
  nodeResultProblem,
  toolResultProblem
} from "./hookResults.js"
import { Continue, type Facts, type HookNode, next, type NodeOutcome, type Phase } from "./machine.js"
import * as Observer from "./observer.js"
import type { Emit } from "./observer.js"
import type * as OutputTool from "./outputTool.js"
import { paired } from "./pairing.js"
import { StepKeys } from "./stepKeys.js"
import {
  lastAssistantCallsTools,
  recoverUnknownToolCalls,
  timedOutResult,
  type ToolChoice,
  type ToolEntry,
  unknownToolResult,
  wireToolkit
} from "./tools.js"
import * as Watchers from "./watchers.js"

const continued: Effect.Effect<NodeOutcome> = Effect.succeed(Continue)

/** The mutable progress of one run, owned by the run's fiber. */
interface Run {
  readonly threadId: string
  messages: ReadonlyArray<Prompt.Message>
  slices: Record<string, object>
  step: number
  /** Token usage so far, summed in place; a `Usage` is made when a result is. */
  readonly usage: { inputTokens: number; outputTokens: number; totalTokens: number }
  output: Option.Option<unknown>
  /** Whether hooks and calls get their own spans (see `LoopConfig.spans`). */
  readonly traced: boolean
  /** Names of the tools the model call whose reply runs now offered (unknown after a resume). */
  offered: ReadonlyArray<string> | undefined
  readonly emit: Emit | undefined
  readonly journal: RunJournal.RunJournal.Service
  /** The names of the run's steps in its journal. */
  readonly keys: StepKeys
  /** The clock of the run, for timing hooks. */
  readonly clock: Clock.Clock
  /** The interrupt keys used so far in this run (a key names one wait). */
  readonly interruptKeys: Set<string>
  /** The `wrapToolCall` chain of this run, built on its first tool call. */
  toolChain: ((request: Middleware.ToolCallRequest) => Effect.Effect<Prompt.ToolResultPart, any, any>) | undefined
  /** The thread as last encoded for a checkpoint, reused for its unchanged prefix. */
  readonly encoder: Checkpoint.ThreadEncoder
}

/** Everything the loop needs, resolved when the agent is built. */
export interface LoopConfig {
  readonly middleware: ReadonlyArray<Middleware.Any>
  readonly layout: AgentState.Layout
  readonly tools: ReadonlyArray<ToolEntry>
  readonly systemPrompt: string | undefined
  readonly output: OutputTool.OutputTool | undefined
  readonly maxSteps: number
  readonly toolConcurrency: number | "unbounded"
  readonly model: LanguageModel.Service
  readonly checkpointer: Checkpointer.Checkpointer.Service
  /**
   * Spans per hook, model call and tool call: always, never, or (undefined)
   * only when a tracer other than Effect's built-in one is installed — the
   * built-in tracer exports nothing, and a span costs microseconds.
   */
  readonly spans: boolean | undefined
  /** Services the middleware hooks need, captured when the agent was built. */
  readonly context: Context.Context<never>
}

/** Adds a model call's reported usage (a provider that reports none counts 0). */
const addUsage = (total: Run["usage"], usage: Response.Usage) => {
  const input = usage.inputTokens ?? 0
  const output = usage.outputTokens ?? 0
  total.inputTokens += input
  total.outputTokens += output
  total.totalTokens += usage.totalTokens ?? input + output
}

/**
 * Whether an assistant message answers: it has non-blank text, a file or a
 * tool call for the agent to run. Providers reject an assistant message
 * without one on the next call, so the agent never stores it.
 */
const answers = (message: Prompt.AssistantMessage): boolean => {
  for (const part of message.content) {
    switch (part.type) {
      case "text": {
        if (part.text.trim() !== "") return true
        break
      }
      case "file":
        return true
      case "tool-call": {
        if (!part.providerExecuted) return true
        break
      }
    }
  }
  return false
}

/**
 * The parts with every streamed text and reasoning block opened and closed:
 * `Prompt.fromResponseParts` keeps only blocks it saw start and end, so a
 * stream that stopped mid-block (or a provider that skips a start or an end)
 * would lose text that was streamed.
 */
const closeBlocks = (parts: ReadonlyArray<Response.AnyPart>): ReadonlyArray<Response.AnyPart> => {
  let open: Map<string, "text" | "reasoning"> | undefined
  let fixed: Array<Response.AnyPart> | undefined
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    switch (part.type) {
      case "text-start":
      case "reasoning-start": {
        ;(open ??= new Map()).set(part.id, part.type === "text-start" ? "text" : "reasoning")
        break
      }
      case "text-delta":
      case "reasoning-delta": {
        if (open?.has(part.id) !== true) {
          const kind = part.type === "text-delta" ? "text" : "reasoning"
          ;(open ??= new Map()).set(part.id, kind)
          fixed ??= parts.slice(0, i)
          fixed.push(Response.makePart(kind === "text" ? "text-start" : "reasoning-start", { id: part.id }))
        }
        break
      }
      case "text-end":
      case "reasoning-end": {
        open?.delete(part.id)
        break
      }
    }
    fixed?.push(part)
  }
  if (open === undefined || open.size === 0) return fixed ?? parts
  fixed ??= parts.slice()
  for (const [id, kind] of open) fixed.push(Response.makePart(kind === "text" ? "text-end" : "reasoning-end", { id }))
  return fixed
}

/** The finish of a reply whose stream stopped early at a call of an unknown tool, which the agent answers. */
const cutShort = Response.makePart("finish", {
  reason: "unknown",
  usage: new Response.Usage({ inputTokens: undefined, outputTokens: undefined, totalTokens: undefined })
})

const formatParseError = (error: ParseResult.ParseError) => ParseResult.TreeFormatter.formatErrorSync(error)

const describeValue = (u: unknown): string =>
  u === null ? "null" : Array.isArray(u) ? "an array" : typeof u === "string" ? JSON.stringify(u) : typeof u

/** A lone surrogate (half of a UTF-16 pair): such a string does not encode as UTF-8. */
const loneSurrogate = /\p{Cs}/u

/** Whether a thread id is a non-empty, well-formed string (no thread is ever stored under another one). */
const isThreadId = (threadId: unknown): threadId is string =>
  typeof threadId === "string" && threadId.length > 0 && !loneSurrogate.test(threadId)

/** The thread id, or `InvalidInput` when it is not a non-empty, well-formed string. */
const checkThreadId = (threadId: unknown): Effect.Effect<string, InvalidInput> =>
  isThreadId(threadId)
    ? Effect.succeed(threadId)
    : Effect.fail(
      new InvalidInput({
        description: `the thread id must be a non-empty string without lone surrogates, got ${
          typeof threadId === "string" && threadId.length > 0
            ? "a string with a lone surrogate"
            : describeValue(threadId)
        }`
      })
    )

/** The input of a run as a prompt: a string, an array of messages or a `Prompt`; anything else is `InvalidInput`. */
const promptOf = (input: Prompt.RawInput): Effect.Effect<Prompt.Prompt, InvalidInput> => {
  if (typeof input === "string" || Prompt.isPrompt(input)) return Effect.succeed(Prompt.make(input))
  if (!Array.isArray(input)) {
    return Effect.fail(
      new InvalidInput({
        description: `the input must be a string, an array of messages or a Prompt, got ${describeValue(input)}`
      })
    )
  }
  return Effect.try({
    try: () => Prompt.make(input),
    catch: (error) =>
      new InvalidInput({
        description: `the input messages do not decode: ${
          ParseResult.isParseError(error) ? formatParseError(error) : String(error)
        }`
      })
  })
}

const isToolTimeout = (error: unknown): error is ToolTimeout => error instanceof ToolTimeout

/** Effect's built-in tracer, which keeps spans in memory and exports nothing. */
const builtInTracer = Effect.runSync(Effect.tracer)

/** Builds the service of an agent. */
export const makeLoop = (config: LoopConfig): AgentLoop.AgentLoop.Service<any, any> => {
  const { checkpointer, layout, maxSteps, middleware } = config
  const nodes: Record<HookNode, ReadonlyArray<Middleware.Any>> = {
    beforeAgent: middleware.filter((m) => m.beforeAgent !== undefined),
    beforeModel: middleware.filter((m) => m.beforeModel !== undefined),
    afterModel: middleware.filter((m) => m.afterModel !== undefined).reverse(),
    afterAgent: middleware.filter((m) => m.afterAgent !== undefined).reverse()
  }
  const wrapModel = middleware.filter((m) => m.wrapModelCall !== undefined)
  const wrapTool = middleware.filter((m) => m.wrapToolCall !== undefined)
  const wrapStream = middleware.filter((m) => m.wrapModelStream !== undefined).reverse()
  const onThreadDeleted = middleware.filter((m) => m.onThreadDeleted !== undefined)
  const inputHooks = middleware.filter((m) => m.transformInput !== undefined)
  const isTraced: Effect.Effect<boolean> = config.spans === undefined
    ? Effect.map(Effect.tracer, (tracer) => tracer !== builtInTracer)
    : Effect.succeed(config.spans)
  const toolsByName = new Map<string, ToolEntry>()
  for (const entry of config.tools) toolsByName.set(entry.tool.name, entry)
  const toolList: ReadonlyArray<Tool.Any> = config.output === undefined
    ? config.tools.map((entry) => entry.tool)
    : [...config.tools.map((entry) => entry.tool), config.output.tool]
  const toolNames = toolList.map((tool) => tool.name)
  const toolChoice: ToolChoice = config.output !== undefined ? "required" : "auto"
  const outputToolName = config.output?.name
  // The system message of the last call, reused while the prompt text stays the same.
  let lastSystem: { readonly text: string; readonly message: Prompt.Message } | undefined
  const systemMessageOf = (text: string): Prompt.Message => {
    if (lastSystem === undefined || lastSystem.text !== text) {
      lastSystem = { text, message: Prompt.makeMessage("system", { content: text }) }
    }
    return lastSystem.message
  }

  // -------------------------------------------------------------------------
  // hooks
  // -------------------------------------------------------------------------

  const applyResult = (
    run: Run,
    m: Middleware.Any,
    hook: HookNode,
    result: Middleware.HookResult<object>
  ): Effect.Effect<void> => {
    const keys = result.state === undefined ? [] : Object.keys(result.state)
    if (keys.length > 0) run.slices = { ...run.slices, [m.name]: { ...run.slices[m.name], ...result.state } }
    if (result.messages !== undefined) run.messages = result.messages
    if (run.emit === undefined || (keys.length === 0 && result.messages === undefined)) return Effect.void
    return run.emit(
      AgentEvent.StateUpdated({ middleware: m.name, hook, keys, messagesReplaced: result.messages !== undefined })
    )
  }

  const runNode = (
    run: Run,
    node: HookNode,
    start: number,
    resume: Option.Option<unknown>
  ): Effect.Effect<NodeOutcome, unknown, any> =>
    start >= nodes[node].length ? continued : Effect.gen(function*() {
      const hooks = nodes[node]
      for (let index = start; index < hooks.length; index++) {
        const m = hooks[index]!
        const result = yield* Observer.inHook(
          run,
          m.name,
          node,
          hookEffect(
            m.name,
            node,
            m[node]!({
              state: run.slices[m.name] ?? {},
              messages: run.messages,
              threadId: run.threadId,
              step: run.step,
              tools: toolList,
              resume: index === start ? resume : Option.none()
            })
          )
        )
        if (result === undefined) continue
        const problem = nodeResultProblem(result, run.messages)
        if (problem !== undefined) {
          return yield* new InvalidHookResult({ middleware: m.name, hook: node, reason: problem })
        }
        yield* applyResult(run, m, node, result)
        if (result.interrupt !== undefined) {
          return {
            _tag: "Interrupt",
            middleware: m.name,
            index,
            value: result.interrupt,
            key: result.interruptKey
          } as const
        }
        if (result.jumpTo !== undefined) {
          if (!m.canJumpTo.includes(result.jumpTo)) {
            return yield* new InvalidJump({
              middleware: m.name,
              hook: node,
              jumpTo: result.jumpTo,
              allowed: m.canJumpTo
            })
          }
          if (run.emit !== undefined) {
            yield* run.emit(
              AgentEvent.MiddlewareDecision({
                middleware: m.name,
                hook: node,
                decision: `jump to ${result.jumpTo}`,
                data: undefined
              })
            )
          }
          return { _tag: "Jump", to: result.jumpTo } as const
        }
      }
      return Continue
    })

  // -------------------------------------------------------------------------
  // model calls
  // -------------------------------------------------------------------------

  /**
   * The reply as the agent stores it, or why it cannot be one (see
   * `ModelReplyError`): without a finish part it was cut short; with no
   * answer in it, it is empty. Generated and streamed replies are judged alike.
   */
  const toModelResponse = (
    received: ReadonlyArray<Response.AnyPart>,
    step: number,
    streamed: boolean
  ): Effect.Effect<Middleware.ModelResponse, ModelReplyError> => {
    const parts = closeBlocks(received)
    let finish: Response.FinishPart | undefined
    let errorEvent: Response.ErrorPart | undefined
    for (const part of parts) {
      if (part.type === "finish") finish = part
      else if (part.type === "error") errorEvent = part
    }
    const first = Prompt.fromResponseParts(parts).content[0]
    const message = first !== undefined && first.role === "assistant"
      ? first
      : Prompt.makeMessage("assistant", { content: [] })
    if (finish === undefined || !answers(message)) {
      return Effect.fail(
        new ModelReplyError({
          reason: finish !== undefined || (!streamed && received.length === 0)
            ? "empty"
            : received.length === 0
            ? "not-a-stream"
            : "truncated",
          step,
          streamed,
          text: AgentResult.lastText([message]),
          finishReason: finish?.reason,
          received: Array.from(new Set(received.map((part) => part.type))),
          errorEvent: errorEvent?.error
        })
      )
    }
    const toolCalls: Array<Prompt.ToolCallPart> = []
    for (const part of message.content) if (part.type === "tool-call" && !part.providerExecuted) toolCalls.push(part)
    return Effect.succeed({ message, toolCalls, usage: finish.usage, finishReason: finish.reason })
  }

  /**
   * The response of middleware `m`, or `InvalidHookResult` when it is not a
   * `ModelResponse`, or `EmptyModelResponse` when its message is empty.
   */
  const checkedResponse = (
    m: Middleware.Any,
    request: Middleware.ModelRequest,
    response: Effect.Effect<Middleware.ModelResponse, any, any>
  ): Effect.Effect<Middleware.ModelResponse, any, any> =>
    Effect.flatMap(response, (response): Effect.Effect<Middleware.ModelResponse, any> => {
      const problem = modelResponseProblem(response)
      return problem !== undefined
        ? Effect.fail(new InvalidHookResult({ middleware: m.name, hook: "wrapModelCall", reason: problem }))
        : answers(response.message)
        ? Effect.succeed(response)
        : Effect.fail(new EmptyModelResponse({ middleware: m.name, step: request.step }))
    })

  /** The model call at the end of the `wrapModelCall` chain; it writes the tools it offers to `offered`. */
  const callModel = (run: Run, offered: { names: ReadonlyArray<string> }) =>
  (
    request: Middleware.ModelRequest
  ): Effect.Effect<Middleware.ModelResponse, any> => {
    const model = request.model ?? config.model
    offered.names = request.tools.map((tool) => tool.name)
    // the model never sees a tool result without its call, or a call without its result
    const messages = paired(request.messages)
    const prompt = Prompt.fromMessages(
      request.systemPrompt === undefined ? messages : [systemMessageOf(request.systemPrompt), ...messages]
    )
    const toolkit = wireToolkit(request.tools)
    const options: any = toolkit === undefined
      ? { prompt }
      : { prompt, toolkit, toolChoice: request.toolChoice, disableToolCallResolution: true }
    const emit = run.emit
    const recover = (error: AiError.AiError, before: ReadonlyArray<Response.AnyPart>) => {
      const recovered = recoverUnknownToolCalls(error, toolkit, before.length > 0 || emit !== undefined)
      return recovered === undefined
        ? Effect.fail(error)
        : Effect.map(Effect.orElseFail(recovered, () => error), (parts) =>
          // a stream stops at the part that did not decode: its finish part never comes
          parts.some((part) => part.type === "finish") ? [...before, ...parts] : [...before, ...parts, cutShort])
    }
    const response: Effect.Effect<Middleware.ModelResponse, AiError.AiError | ModelReplyError> = emit === undefined
      ? (model.generateText(options) as Effect.Effect<LanguageModel.GenerateTextResponse<any>, AiError.AiError>).pipe(
        Effect.mapErrorCause(Secrets.scrubCause),
        Effect.map((response) => response.content),
        Effect.catchAll((error) => recover(error, [])),
        Effect.flatMap((parts) => toModelResponse(parts, request.step, false))
      )
      : Effect.suspend(() => {
        const collected: Array<Response.AnyPart> = []
        let parts = Stream.mapErrorCause(
          model.streamText(options) as Stream.Stream<Response.AnyPart, AiError.AiError>,
          Secrets.scrubCause
        )
        for (const m of wrapStream) {
          const transformed = m.wrapModelStream!(request, parts)
          parts = (run.traced
            ? Stream.withSpan(transformed, "Middleware.wrapModelStream", {
              attributes: { middleware: m.name },
              captureStackTrace: false
            })
            : transformed) as Stream.Stream<Response.AnyPart, AiError.AiError>
        }
        return drain(parts, (chunk) => {
          let emits: Effect.Effect<void> = Effect.void
          for (const part of chunk) {
            collected.push(part)
            if (part.type === "text-delta") {
              emits = Effect.zipRight(emits, emit(AgentEvent.TextDelta({ step: request.step, delta: part.delta })))
            }
          }
          return emits
        }).pipe(
          Effect.as(collected),
          Effect.catchAll((error) => recover(error, collected)),
          Effect.flatMap((parts) => toModelResponse(parts, request.step, true)),
          Effect.tapError((error) =>
            emit(AgentEvent.ModelAttemptFailed({
              step: request.step,
              error: error._tag,
              message: error.message,
              discardedText: collected.some((part) => part.type === "text-delta")
            }))
          )
        )
      })
    return Context.isContext(request.context) && request.context.unsafeMap.size > 0
      ? Effect.provide(response, request.context)
      : response
  }

  /** The `wrapModelCall` chain of one model step, which reports the tools the call offered to `offered`. */
  const modelChain = (run: Run, offered: { names: ReadonlyArray<string> }) =>
    wrapModel.reduceRight<(request: Middleware.ModelRequest) => Effect.Effect<Middleware.ModelResponse, any, any>>(
      (next, m) => (request) =>
        checkedResponse(
          m,
          request,
          Observer.inHook(
            run,
            m.name,
            "wrapModelCall",
            hookEffect(m.name, "wrapModelCall", m.wrapModelCall!(request, next as any))
          )
        ),
      callModel(run, offered)
    )

  // -------------------------------------------------------------------------
  // tool calls
  // -------------------------------------------------------------------------

  const callTool = (run: Run) => (request: Middleware.ToolCallRequest): Effect.Effect<Prompt.ToolResultPart, any> => {
    const call = request.call
    if (call.name === outputToolName) return Effect.succeed(config.output!.answer(call))
    const entry = toolsByName.get(call.name)
    if (entry === undefined) return Effect.succeed(unknownToolResult(call, run.offered ?? toolNames))
    if (run.offered !== undefined && !run.offered.includes(call.name)) {
      return Effect.succeed(unknownToolResult(call, run.offered))
    }
    return entry.run(call, run.threadId)
  }

  const toolChain = (run: Run) =>
    wrapTool.reduceRight<(request: Middleware.ToolCallRequest) => Effect.Effect<Prompt.ToolResultPart, any, any>>(
      (next, m) => (request) =>
        Effect.flatMap(
          Observer.inHook(
            run,
            m.name,
            "wrapToolCall",
            hookEffect(m.name, "wrapToolCall", m.wrapToolCall!(request, next as any))
          ),
          checked(m.name, "wrapToolCall", (result) => toolResultProblem(result, request.call))
        ),
      callTool(run)
    )

  const runTools = (run: Run, calls: ReadonlyArray<Prompt.ToolCallPart>) => {
    const chain = run.toolChain ??= toolChain(run)
    const state = layout.flatten(run)
    const emit = run.emit
    const one = (call: Prompt.ToolCallPart) => {
      const request: Middleware.ToolCallRequest = {
        call,
        tool: toolsByName.get(call.name)?.tool ?? (call.name === outputToolName ? config.output!.tool : undefined),
        state: state as any,
        threadId: run.threadId,
        step: run.step - 1
      }
      const execute = journaled(
        run,
        run.keys.tool(call),
        Prompt.ToolResultPart,
        Observer.traced(
          run,
          "AgentLoop.toolCall",
          { tool: call.name, callId: call.id },
          Effect.catchIf(chain(request), isToolTimeout, (error) => Effect.succeed(timedOutResult(call, error)))
        )
      )
      if (emit === undefined) return execute
      return Effect.gen(function*() {
        yield* emit(AgentEvent.ToolCallStarted({ call }))
        const started = yield* Clock.currentTimeMillis
        const result = yield* execute
        const ended = yield* Clock.currentTimeMillis
        yield* emit(AgentEvent.ToolCallCompleted({ result, durationMillis: ended - started }))
        return result
      })
    }
    const results: Effect.Effect<ReadonlyArray<Prompt.ToolResultPart>, unknown, any> = calls.length === 1
      ? Effect.map(one(calls[0]!), (result) => [result])
      : Effect.forEach(calls, one, { concurrency: config.toolConcurrency })
    return Effect.map(results, (results) => {
      run.messages = AgentState.appendToolResults(run.messages, results)
      const output = config.output
      if (output !== undefined) {
        for (let i = 0; i < calls.length; i++) {
          const value = output.value(calls[i]!, results[i]!)
          if (Option.isSome(value)) run.output = value
        }
      }
    })
  }

  /** `effect` as the step `key` of the run's journal (carrying the hook reporting to a journal that runs it elsewhere). */
  const journaled = <A, I, E, R>(
    run: Run,
    key: RunJournal.StepKey,
    schema: Schema.Schema<A, I>,
    effect: Effect.Effect<A, E, R>
  ): Effect.Effect<A, E, R> =>
    run.journal === RunJournal.inProcess
      ? effect
      : Effect.flatMap(Observer.carried(effect), (carried) => run.journal.step(key, schema, carried))

  const checkpoints = Checkpoint.make(layout, checkpointer)
  const save = checkpoints.save
  const load = checkpoints.load

  // -------------------------------------------------------------------------
  // the loop
  // -------------------------------------------------------------------------

  const uniqueKey = (run: Run, key: string): string => {
    let unique = key
    for (let n = 2; run.interruptKeys.has(unique); n++) unique = `${key}#${n}`
    run.interruptKeys.add(unique)
    return unique
  }

  const factsOf = (run: Run): Facts => ({
    callsTools: lastAssistantCallsTools(run.messages),
    hasOutput: Option.isSome(run.output)
  })

  const execute = (
    run: Run,
    start: Phase,
    resume: Option.Option<unknown>
  ): Effect.Effect<AgentResult.AgentResult<any>, any, any> =>
    Effect.gen(function*() {
      let responded: {
        readonly index: number
        readonly step: number
        readonly usage: Response.Usage
        readonly finishReason: Response.FinishReason
        readonly durationMillis: number
      } | undefined
      let phase = start
      let resumeValue = resume
      let idleToolRounds = 0
      while (true) {
        switch (phase.node) {
          case "beforeAgent":
          case "beforeModel":
          case "afterModel":
          case "afterAgent": {
            const node = phase.node
            const outcome = yield* runNode(run, node, phase.index, resumeValue)
            resumeValue = Option.none()
            if (node === "afterModel" && responded !== undefined && run.emit !== undefined) {
              // Reported after the afterModel hooks, so the event carries the reply as
              // stored (a hook may have redacted or rewritten it), never the raw one.
              const stored = run.messages[responded.index]
              yield* run.emit(AgentEvent.ModelResponded({
                step: responded.step,
                message: stored !== undefined && stored.role === "assistant"
                  ? stored
                  : Prompt.makeMessage("assistant", { content: [] }),
                usage: responded.usage,
                finishReason: responded.finishReason,
                durationMillis: responded.durationMillis
              }))
              responded = undefined
            }
            if (outcome._tag === "Interrupt") {
              const key = uniqueKey(run, outcome.key ?? `${node}/${outcome.middleware}/${run.step}`)
              yield* save(run, {
                node,
                middleware: outcome.middleware,
                value: outcome.value,
                key,
                ...(run.journal.durable ? { durable: true } : {})
              })
              const interrupted = AgentResult.Interrupted({
                threadId: run.threadId,
                state: layout.flatten(run),
                interrupt: { middleware: outcome.middleware, value: outcome.value, key },
                usage: new Usage.Usage(run.usage, true),
                steps: run.step
              })
              const wait = run.journal.await({
                key,
                threadId: run.threadId,
                step: run.step,
                middleware: outcome.middleware,
                node,
                value: outcome.value
              })
              const emit = run.emit
              // A journal that suspends the run while it waits (durable runs) ends it
              // here as far as watchers can tell: the same event an in-process run ends with.
              const decided = yield* emit === undefined
                ? wait
                : Effect.onInterrupt(wait, () => emit(AgentEvent.RunEnded({ result: interrupted })))
              if (Option.isSome(decided)) {
                // The thread no longer waits: say so before the hook acts on the decision.
                yield* save(run, undefined)
                resumeValue = decided
                phase = { node, index: outcome.index }
                break
              }
              return interrupted
            }
            if (outcome._tag === "Jump" && outcome.to === "end") {
              // Never leave a tool call without its result: providers reject such a thread.
              run.messages = AgentState.answerPending(run.messages, "the agent ended the run before this call ran")
            }
            phase = next(node, outcome._tag === "Jump" ? outcome.to : "continue", factsOf(run))
            break
          }
          case "model": {
            if (run.step >= maxSteps) {
              return yield* new MaxStepsExceeded({ threadId: run.threadId, maxSteps })
            }
            const request: Middleware.ModelRequest = {
              messages: run.messages,
              systemPrompt: config.systemPrompt,
              tools: toolList,
              toolChoice,
              model: undefined,
              context: Context.empty(),
              state: layout.flatten(run) as any,
              threadId: run.threadId,
              step: run.step
            }
            const emit = run.emit
            const started = emit === undefined ? 0 : yield* Clock.currentTimeMillis
            if (emit !== undefined) {
              yield* emit(AgentEvent.ModelCallStarted({
                step: run.step,
                messageCount: run.messages.length,
                toolNames
              }))
            }
            const offered = { names: toolNames }
            const response = yield* journaled(
              run,
              run.keys.model(run.step),
              RunJournal.ModelCall,
              Observer.traced(
                run,
                "AgentLoop.modelCall",
                { step: run.step },
                Effect.map(modelChain(run, offered)(request), (response): RunJournal.ModelCall => ({
                  message: response.message,
                  usage: response.usage,
                  finishReason: response.finishReason,
                  offered: offered.names
                }))
              )
            )
            run.offered = response.offered
            run.messages = [...run.messages, response.message]
            addUsage(run.usage, response.usage)
            if (emit !== undefined) {
              const ended = yield* Clock.currentTimeMillis
              responded = {
                index: run.messages.length - 1,
                step: run.step,
                usage: response.usage,
                finishReason: response.finishReason,
                durationMillis: ended - started
              }
            }
            run.step++
            phase = next("model", "continue", factsOf(run))
            break
          }
          case "tools": {
            const calls = AgentState.pendingToolCalls(run.messages)?.calls ?? []
            // A hook that keeps jumping to "tools" with nothing to run would loop without a model
            // call; such idle rounds count toward maxSteps like model calls.
            if (calls.length === 0 && run.step + ++idleToolRounds > maxSteps) {
              return yield* new MaxStepsExceeded({ threadId: run.threadId, maxSteps })
            }
            yield* runTools(run, calls)
            // a run that got its structured output ends; any other saves its tool results first
            if (Option.isNone(run.output)) yield* save(run, undefined)
            phase = next("tools", "continue", factsOf(run))
            break
          }
          case "done": {
            if (config.output !== undefined && Option.isNone(run.output)) {
              yield* save(run, undefined)
              return yield* new StructuredOutputError({
                description: `The run ended without the model calling "${outputToolName}" with the structured output`
              })
            }
            yield* save(run, undefined)
            return AgentResult.Completed({
              threadId: run.threadId,
              state: layout.flatten(run),
              text: AgentResult.lastText(run.messages),
              output: run.output,
              usage: new Usage.Usage(run.usage, true),
              steps: run.step
            })
          }
        }
      }
    }).pipe(
      Effect.scoped,
      Effect.provide(config.context),
      Effect.annotateSpans({ threadId: run.threadId })
    )

  // One run at a time per thread in this process: a second run waits, so
  // it starts from the first one's final checkpoint instead of overwriting it.
  const threadLocks = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>()
  const withThreadLock = <A, E, R>(threadId: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      let lock = threadLocks.get(threadId)
      if (lock === undefined) {
        lock = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
        threadLocks.set(threadId, lock)
      }
      const held = lock
      held.users++
      return held.semaphore.withPermits(1)(effect).pipe(
        Effect.ensuring(Effect.sync(() => {
          if (--held.users === 0) threadLocks.delete(threadId)
        }))
      )
    })

  // Every run's events go to the watchers of `watch` while there are any.
  const watchers = Watchers.make<AgentLoop.RunEvent<any>>()

  /**
   * Runs `body` as one run of `threadId`: picks the journal of the context,
   * reports the run to its own stream (`own`) and to the watchers.
   */
  const begin = (
    threadId: string,
    resumed: boolean,
    own: Emit | undefined,
    body: (
      emit: Emit | undefined,
      journaled: { readonly journal: RunJournal.RunJournal.Service; readonly keys: StepKeys }
    ) => Effect.Effect<AgentResult.AgentResult<any>, unknown, any>
  ) =>
    Effect.gen(function*() {
      const journal = Option.getOrElse(yield* Effect.serviceOption(RunJournal.RunJournal), () => RunJournal.inProcess)
      const journaled = { journal, keys: new StepKeys() }
      const runId = watchers.size() === 0 ? undefined : crypto.randomUUID()
      const publish: Emit | undefined = runId === undefined
        ? undefined
        : (event) => Effect.sync(() => watchers.publish({ runId, threadId, event }))
      let ended = false
      const both: Emit | undefined = publish === undefined
        ? own
        : own === undefined
        ? publish
        : (event) => Effect.zipRight(own(event), publish(event))
      // every failure of a run, whoever raised it, leaves with its credentials scrubbed
      const run = (emit: Emit | undefined) => Effect.mapErrorCause(body(emit, journaled), Secrets.scrubCause)
      if (both === undefined) return yield* run(undefined)
      const emit: Emit = (event) => {
        if (event._tag === "RunEnded") ended = true
        return both(event)
      }
      yield* emit(AgentEvent.RunStarted({ threadId, resumed }))
      const result = yield* run(emit).pipe(
        Effect.tapErrorCause((cause) => {
          if (publish === undefined || ended) return Effect.void
          const error = Cause.squash(cause)
          return publish(AgentEvent.RunFailed({
            error: Cause.isInterruptedOnly(cause)
              ? "Interrupted"
              : typeof error === "object" && error !== null && "_tag" in error
              ? String(error._tag)
              : "Defect",
            message: error instanceof Error ? error.message : String(error)
          }))
        })
      )
      if (!ended) yield* emit(AgentEvent.RunEnded({ result }))
      return result
    })

  /** The state of a run starting on a thread (with the progress of the run it resumes, if any). */
  const makeRun = (
    threadId: string,
    messages: ReadonlyArray<Prompt.Message>,
    slices: Record<string, object>,
    options: {
      readonly progress: Checkpointer.Checkpoint["run"]
      readonly traced: boolean
      readonly emit: Emit | undefined
      readonly journaled: { readonly journal: RunJournal.RunJournal.Service; readonly keys: StepKeys }
      readonly clock: Clock.Clock
    }
  ): Run => ({
    threadId,
    messages,
    slices,
    step: options.progress?.step ?? 0,
    usage: {
      inputTokens: options.progress?.inputTokens ?? 0,
      outputTokens: options.progress?.outputTokens ?? 0,
      totalTokens: options.progress?.totalTokens ?? 0
    },
    output: Option.none(),
    offered: undefined,
    traced: options.traced,
    emit: options.emit,
    journal: options.journaled.journal,
    keys: options.journaled.keys,
    clock: options.clock,
    interruptKeys: new Set(),
    toolChain: undefined,
    encoder: new Checkpoint.ThreadEncoder()
  })

  /** The input of a run after every `transformInput` hook, in list order; nothing is stored yet. */
  const inputOf = (run: Run, input: ReadonlyArray<Prompt.Message>) =>
    inputHooks.length === 0 ? Effect.succeed(input) : Effect.provide(
      Effect.reduce(inputHooks, input, (messages, m) =>
        Observer.inHook(
          run,
          m.name,
          "transformInput",
          hookEffect(m.name, "transformInput", m.transformInput!({ messages, threadId: run.threadId }))
        ).pipe(Effect.flatMap(checked<ReadonlyArray<Prompt.Message>>(m.name, "transformInput", inputProblem)))),
      config.context
    )

  const startRun = (input: Prompt.RawInput, options: AgentLoop.RunOptions, own: Emit | undefined) =>
    Effect.flatMap(
      Effect.zip(checkThreadId(options?.threadId), promptOf(input)),
      ([threadId, prompt]) =>
        withThreadLock(
          threadId,
          begin(threadId, false, own, (emit, journaled) =>
            Effect.gen(function*() {
              const loaded = yield* load(threadId, journaled)
              if (Option.isSome(loaded.checkpoint) && loaded.checkpoint.value.pending !== undefined) {
                return yield* new ThreadStateError({
                  threadId,
                  reason: `is waiting for a decision for middleware "${loaded.checkpoint.value.pending.middleware}"; ` +
                    `call resume(threadId, value) instead of run`
                })
              }
              const run = makeRun(threadId, loaded.messages, loaded.slices, {
                progress: undefined,
                traced: yield* isTraced,
                emit,
                journaled,
                clock: yield* Effect.clock
              })
              return yield* Observer.observed(
                run,
                Effect.flatMap(inputOf(run, prompt.content), (input) => {
                  run.messages = [...loaded.messages, ...input]
                  return execute(run, { node: "beforeAgent", index: 0 }, Option.none())
                })
              )
            }))
        )
    )

  /** The interrupt a thread waits on, and the index of its hook. */
  const pendingOf = (threadId: string, loaded: Checkpoint.Loaded) =>
    Effect.gen(function*() {
      const pending = Option.isSome(loaded.checkpoint) ? loaded.checkpoint.value.pending : undefined
      if (pending === undefined) {
        return yield* new ThreadStateError({
          threadId,
          reason: "is not waiting for a decision; there is nothing to resume"
        })
      }
      const index = nodes[pending.node].findIndex((m) => m.name === pending.middleware)
      if (index < 0) {
        return yield* new ThreadStateError({
          threadId,
          reason: `waits for middleware "${pending.middleware}", which this agent does not have`
        })
      }
      return { pending, middleware: nodes[pending.node][index]!, index }
    })

  /** A wait a durable journal made is answered or given up only with a durable journal. */
  const checkOwner = (
    threadId: string,
    pending: Checkpointer.PendingInterrupt,
    journal: RunJournal.RunJournal.Service,
    operation: DurableThreadError["operation"]
  ) =>
    pending.durable === true && !journal.durable
      ? Effect.fail(new DurableThreadError({ threadId, operation }))
      : Effect.void

  const validateValue = (
    threadId: string,
    middleware: Middleware.Any,
    pending: Checkpointer.PendingInterrupt,
    value: unknown
  ) =>
    middleware.validateResume === undefined
      ? Effect.void
      : Effect.provide(middleware.validateResume({ threadId, interrupt: pending.value, value }), config.context)

  const startResume = (id: string, value: unknown, own: Emit | undefined) =>
    Effect.flatMap(checkThreadId(id), (threadId) =>
      withThreadLock(
        threadId,
        begin(threadId, true, own, (emit, journaled) =>
          Effect.gen(function*() {
            const loaded = yield* load(threadId, journaled)
            const { index, middleware, pending } = yield* pendingOf(threadId, loaded)
            yield* checkOwner(threadId, pending, journaled.journal, "resume")
            yield* validateValue(threadId, middleware, pending, value)
            const run = makeRun(threadId, loaded.messages, loaded.slices, {
              progress: Option.getOrThrow(loaded.checkpoint).run,
              traced: yield* isTraced,
              emit,
              journaled,
              clock: yield* Effect.clock
            })
            return yield* Observer.observed(run, execute(run, { node: pending.node, index }, Option.some(value)))
          }))
      ))

  const streamOf = (start: (emit: Emit) => Effect.Effect<AgentResult.AgentResult<any>, unknown, any>) =>
    Stream.unwrapScoped(Effect.gen(function*() {
      const mailbox = yield* Mailbox.make<AgentEvent.AgentEvent<any>, unknown>()
      const emit = (event: AgentEvent.AgentEvent<any>) => Effect.asVoid(mailbox.offer(event))
      yield* start(emit).pipe(Effect.asVoid, Mailbox.into(mailbox), Effect.forkScoped)
      return Mailbox.toStream(mailbox)
    }))

  return {
    run: Effect.fn("AgentLoop.run")((input: Prompt.RawInput, options: AgentLoop.RunOptions) =>
      startRun(input, options, undefined)
    ),
    stream: (input, options) =>
      streamOf((emit) => startRun(input, options, emit).pipe(Effect.withSpan("AgentLoop.stream"))),
    resume: Effect.fn("AgentLoop.resume")((threadId: string, value: unknown) =>
      startResume(threadId, value, undefined)
    ),
    resumeStream: (threadId, value) =>
      streamOf((emit) => startResume(threadId, value, emit).pipe(Effect.withSpan("AgentLoop.resumeStream"))),
    validateResume: Effect.fn("AgentLoop.validateResume")(function*(id: string, value: unknown) {
      const threadId = yield* checkThreadId(id)
      const { middleware, pending } = yield* pendingOf(threadId, yield* load(threadId))
      yield* validateValue(threadId, middleware, pending, value)
      return pending
    }),
    watch: watchers.watch,
    discardPending: (threadId, reason) =>
      (isThreadId(threadId) ?
        withThreadLock(
          threadId,
          Effect.gen(function*() {
            const loaded = yield* load(threadId)
            if (Option.isNone(loaded.checkpoint) || loaded.checkpoint.value.pending === undefined) return false
            const journal = yield* Effect.serviceOption(RunJournal.RunJournal)
            yield* checkOwner(
              threadId,
              loaded.checkpoint.value.pending,
              Option.getOrElse(journal, () => RunJournal.inProcess),
              "discardPending"
            )
            const messages = AgentState.answerPending(loaded.messages, reason)
            const { pending: _pending, run: _run, ...kept } = loaded.checkpoint.value
            yield* checkpointer.save(threadId, { ...kept, messages: AgentState.encodeMessages(messages) })
            return true
          })
        ) :
        Effect.succeed(false)).pipe(Effect.withSpan("AgentLoop.discardPending")),
    deleteThread: (threadId) =>
      (isThreadId(threadId) ?
        withThreadLock(
          threadId,
          Effect.zipRight(
            checkpointer.delete(threadId),
            Effect.forEach(onThreadDeleted, (m) => Effect.provide(m.onThreadDeleted!(threadId), config.context), {
              discard: true
            })
          )
        ) :
        Effect.void).pipe(Effect.withSpan("AgentLoop.deleteThread")),
    thread: (id) =>
      Effect.flatMap(
        checkThreadId(id),
        (threadId) =>
          load(threadId).pipe(Effect.map((loaded) =>
            Option.map(loaded.checkpoint, (checkpoint) => ({
              threadId,
              state: layout.flatten(loaded),
              pending: Option.fromNullable(checkpoint.pending).pipe(
                Option.map((pending) => ({
                  middleware: pending.middleware,
                  value: pending.value,
                  key: pending.key ?? `${pending.node}/${pending.middleware}`
                }))
              )
            }))
          ))
      )
  } as AgentLoop.AgentLoop.Service<any, any>
}
