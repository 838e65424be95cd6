/**
 * The model step of a run: the request built from the state, the
 * `wrapModelCall` chain around the call (generated, or streamed through the
 * `wrapModelStream` hooks when someone watches), the reply checked and made
 * the one the agent stores, journaled with the tools the call offered.
 */
import type * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { EmptyModelResponse, InvalidHookResult, MaxStepsExceeded, ModelReplyError } from "../AgentError.js"
import * as AgentEvent from "../AgentEvent.js"
import * as AgentResult from "../AgentResult.js"
import type * as Middleware from "../Middleware.js"
import * as RunJournal from "../RunJournal.js"
import * as Secrets from "../Secrets.js"
import type { Compiled } from "./config.js"
import { drain } from "./drain.js"
import { identityMemo } from "./fast/identityMemo.js"
import * as LayerGroups from "./fast/layerGroups.js"
import * as LiftedThreads from "./fast/liftedThreads.js"
import { paired } from "./fast/pairing.js"
import { PassedOn } from "./fast/passedOn.js"
import * as PrefixViews from "./fast/prefixViews.js"
import { assistantMessage, toolCallsOf } from "./fast/replyMessage.js"
import { modelResponseProblem } from "./hookResults.js"
import { Continue } from "./machine.js"
import * as Observer from "./observer.js"
import type { Then } from "./phase.js"
import { cutDeepArguments, invalidCallOf, repairsExhausted } from "./repairs.js"
import { journaled, type RunContext } from "./runContext.js"
import * as RunState from "./runState.js"
import { recoverUnknownToolCalls, recoverUnparsedArguments, wireToolkit } from "./tools.js"
import * as WrapUpdates from "./wrapUpdates.js"

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

/**
 * The finish of a reply cut short at a call the agent answers: a call of an
 * unknown tool (a stream stops there), or arguments that are not JSON.
 */
const cutShort = Response.makePart("finish", {
  reason: "unknown",
  usage: new Response.Usage({ inputTokens: undefined, outputTokens: undefined, totalTokens: undefined })
})

/**
 * What a streamed part counts toward `maxReplyChars`: the text, reasoning or
 * tool-call arguments it carries, and 64 for the event itself.
 */
const sizeOf = (part: Response.AnyPart): number => {
  switch (part.type) {
    case "text-delta":
    case "reasoning-delta":
    case "tool-params-delta":
      return 64 + part.delta.length
    case "text":
    case "reasoning":
      return 64 + part.text.length
    default:
      return 64
  }
}

/** `effect`, failing with `onTimeout()` (and interrupted) past `timeout`; as it is without one. */
const timedOutAfter = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  timeout: Duration.Duration | undefined,
  onTimeout: () => ModelReplyError
): Effect.Effect<A, E | ModelReplyError, R> =>
  timeout === undefined ? effect : Effect.timeoutFail(effect, { duration: timeout, onTimeout })

export const make = (config: Compiled) => {
  const { toolNames, wrapModel, wrapStream } = config
  const invalidCall = invalidCallOf(config)
  // The system message of the last call, reused while the prompt text stays the same.
  let lastSystem: { readonly text: string; readonly message: Prompt.Message } | undefined
  const systemMessageOf = (text: string): Prompt.Message => {
    if (lastSystem === undefined || lastSystem.text !== text) {
      lastSystem = { text, message: Prompt.makeMessage("system", { content: text }) }
    }
    return lastSystem.message
  }

  /** The assistant message of a reply's parts (`Prompt.fromResponseParts`); an empty one for a reply without. */
  const streamedMessage = (parts: ReadonlyArray<Response.AnyPart>): Prompt.AssistantMessage => {
    const first = Prompt.fromResponseParts(parts).content[0]
    return first !== undefined && first.role === "assistant" ? first : Prompt.makeMessage("assistant", { content: [] })
  }

  /**
   * The reply as the agent stores it, or why it cannot be one (see
   * `ModelReplyError`): without a finish part it was cut short; with no
   * answer in it, it is empty. Generated and streamed replies are judged alike.
   */
  const judge = (
    received: ReadonlyArray<Response.AnyPart>,
    step: number,
    streamed: boolean,
    offeredTools: ReadonlyArray<string>
  ): Middleware.ModelResponse | ModelReplyError => {
    const parts = closeBlocks(received)
    let finish: Response.FinishPart | undefined
    let errorEvent: Response.ErrorPart | undefined
    for (const part of parts) {
      if (part.type === "finish") finish = part
      else if (part.type === "error") errorEvent = part
    }
    const message = messageOf(parts)
    if (finish === undefined || !answers(message)) {
      return failure(
        finish !== undefined || (!streamed && received.length === 0)
          ? "Empty"
          : received.length === 0
          ? "NotAStream"
          : "Truncated",
        message,
        received,
        step,
        streamed,
        finish,
        errorEvent
      )
    }
    return { message, toolCalls: toolCallsOf(message), usage: finish.usage, finishReason: finish.reason, offeredTools }
  }

  /** The assistant message of a reply's parts (its blocks closed), with arguments too deep cut. */
  const messageOf = (parts: ReadonlyArray<Response.AnyPart>): Prompt.AssistantMessage =>
    cutDeepArguments(assistantMessage(parts) ?? streamedMessage(parts))

  /** Why a reply cannot be used: `reason`, the text of its message and the kinds of parts it received. */
  const failure = (
    reason: ModelReplyError["reason"],
    message: Prompt.AssistantMessage,
    received: ReadonlyArray<Response.AnyPart>,
    step: number,
    streamed: boolean,
    finish?: Response.FinishPart,
    errorEvent?: Response.ErrorPart
  ): ModelReplyError =>
    new ModelReplyError({
      reason,
      step,
      streamed,
      text: AgentResult.lastText([message]),
      finishReason: finish?.reason,
      received: Array.from(new Set(received.map((part) => part.type))),
      errorEvent: errorEvent?.error
    })

  /**
   * The failure of a reply cut off for `reason` (past `maxReplyChars`, or
   * `modelTimeout`), with the text it had received and the kinds of its parts.
   */
  const cutOff = (
    reason: "TooLarge" | "TimedOut",
    received: ReadonlyArray<Response.AnyPart>,
    step: number,
    streamed: boolean
  ): ModelReplyError => failure(reason, messageOf(closeBlocks(received)), received, step, streamed)

  /** {@link judge} as an `Either`. */
  const toModelResponse = (
    received: ReadonlyArray<Response.AnyPart>,
    step: number,
    streamed: boolean,
    offeredTools: ReadonlyArray<string>
  ): Either.Either<Middleware.ModelResponse, ModelReplyError> => {
    const judgement = judge(received, step, streamed, offeredTools)
    return judgement instanceof ModelReplyError ? Either.left(judgement) : Either.right(judgement)
  }

  /** {@link judge} of a generated reply as an effect (run as one, an `Either` takes two fiber operations). */
  const generatedReply = (
    received: ReadonlyArray<Response.AnyPart>,
    step: number,
    offeredTools: ReadonlyArray<string>
  ): Effect.Effect<Middleware.ModelResponse, ModelReplyError> => {
    const judgement = judge(received, step, false, offeredTools)
    return judgement instanceof ModelReplyError ? Effect.fail(judgement) : Effect.succeed(judgement)
  }

  /**
   * The response of middleware `m`, or `InvalidHookResult` when it is not a
   * `ModelResponse`, or `EmptyModelResponse` when its message is empty.
   */
  const checkedResponse = (
    m: Middleware.Any,
    request: Middleware.ModelRequest,
    response: Effect.Effect<Middleware.ModelResponse, any, any>,
    updates: Array<WrapUpdates.Update> | undefined
  ): Effect.Effect<Middleware.ModelResponse, any, any> =>
    Effect.flatMap(response, (response): Effect.Effect<Middleware.ModelResponse, any> => {
      const problem = modelResponseProblem(response)
      if (problem !== undefined) {
        return Effect.fail(new InvalidHookResult({ middleware: m.name, hook: "wrapModelCall", reason: problem }))
      }
      if (!answers(response.message)) {
        return Effect.fail(new EmptyModelResponse({ middleware: m.name, step: request.step }))
      }
      if (response.state === undefined) return Effect.succeed(response)
      // the hook's state update is the agent's to apply (when its middleware declares state): the hooks
      // around never see it
      const { state, ...rest } = response
      if (updates !== undefined) updates.push({ middleware: m.name, state })
      return Effect.succeed(rest)
    })

  /** The model call at the end of the `wrapModelCall` chain; its response names the tools it offered. */
  const callModel = (run: RunContext) => (request: Middleware.ModelRequest) => respond(run, request, undefined)

  /**
   * The model call of `request`. `growable`: the run's messages array while
   * only the run holds it (`RunState.unseen`), which the run may grow in
   * place after the call: the prompt and the state a watcher is sent are
   * views of its length now (`fast/prefixViews.ts`), not the array.
   */
  const respond = (
    run: RunContext,
    request: Middleware.ModelRequest,
    growable: ReadonlyArray<Prompt.Message> | undefined
  ): Effect.Effect<Middleware.ModelResponse, any> => {
    const model = request.model ?? config.model
    const offeredTools = request.tools === config.toolList ? toolNames : request.tools.map((tool) => tool.name)
    // the model never sees a tool result without its call, or a call without its result; files of tool
    // results go as file parts
    const messages = LiftedThreads.lift(paired(request.messages))
    const system = request.systemPrompt === undefined ? undefined : systemMessageOf(request.systemPrompt)
    const prompt = messages === growable
      ? PrefixViews.prompt(messages, messages.length, system)
      // (`concat`, not a spread: V8 copies an array into a literal element by element, ~14 times slower)
      : Prompt.fromMessages(system === undefined ? messages : [system].concat(messages))
    const toolkit = wireToolkit(request.tools)
    const options: any = toolkit === undefined
      ? { prompt }
      : { prompt, toolkit, toolChoice: request.toolChoice, disableToolCallResolution: true }
    const emit = run.emit
    /**
     * The reply, recovered from a failure that a call of an unknown tool or arguments that are not JSON
     * caused, for the agent to answer; any other failure stays one. `before`: the parts streamed so far.
     */
    const recover = (error: AiError.AiError, before: ReadonlyArray<Response.AnyPart>) => {
      const recovered = Option.orElse(
        Option.fromNullable(recoverUnknownToolCalls(error, toolkit, before.length > 0 || emit !== undefined)).pipe(
          Option.map(Effect.map((parts) => [...before, ...parts]))
        ),
        () => Option.fromNullable(recoverUnparsedArguments(error, before))
      )
      return Option.isNone(recovered)
        ? Effect.fail(error)
        : Effect.map(Effect.orElseFail(recovered.value, () => error), (parts) =>
          // a stream stops at the part that failed: its finish part never comes
          parts.some((part) => part.type === "finish") ? parts : [...parts, cutShort])
    }
    const timeout = config.modelTimeout
    const response: Effect.Effect<Middleware.ModelResponse, AiError.AiError | ModelReplyError> = emit === undefined
      ? Effect.matchCauseEffect(
        timedOutAfter(
          model.generateText(options) as Effect.Effect<LanguageModel.GenerateTextResponse<any>, AiError.AiError>,
          timeout,
          () => cutOff("TimedOut", [], request.step, false)
        ),
        {
          // one handler for both outcomes, rather than a chain of four combinators: fewer fiber
          // operations per step. Credentials never leave in a failure.
          onFailure: (cause) => {
            const failure = Cause.failureOrCause(Secrets.scrubCause(cause))
            return Either.isLeft(failure)
              ? failure.left instanceof ModelReplyError
                ? Effect.fail(failure.left)
                : Effect.flatMap(
                  recover(failure.left, []),
                  (parts) => generatedReply(parts, request.step, offeredTools)
                )
              : Effect.failCause(failure.right)
          },
          onSuccess: (response) => generatedReply(response.content, request.step, offeredTools)
        }
      )
      : Effect.suspend(() => {
        emit(AgentEvent.ModelRequestSent({
          step: request.step,
          prompt,
          toolNames: offeredTools,
          toolChoice: request.toolChoice,
          // (the state's messages are the run's array, whatever pairing and lifting gave the prompt)
          state: growable === undefined ? request.state : PrefixViews.state(request.state, growable, growable.length)
        }))
        const collected: Array<Response.AnyPart> = []
        let parts = model.streamText(options) as Stream.Stream<Response.AnyPart, AiError.AiError>
        // a `wrapModelStream` hook sees failures with their credentials scrubbed; without one, the
        // drained stream's failure is scrubbed below (a stream stage costs more than an effect's)
        if (wrapStream.length > 0) parts = Stream.mapErrorCause(parts, Secrets.scrubCause)
        for (const m of wrapStream) {
          const transformed = m.wrapModelStream!(request, parts)
          parts = (run.traced
            ? Stream.withSpan(transformed, "Middleware.wrapModelStream", {
              attributes: { middleware: m.name },
              captureStackTrace: false
            })
            : transformed) as Stream.Stream<Response.AnyPart, AiError.AiError>
        }
        /** The attempt's failure, reported (the text streamed so far is discarded) before the run sees it. */
        const attemptFailed = (error: AiError.AiError | ModelReplyError) => {
          emit(AgentEvent.ModelAttemptFailed({
            step: request.step,
            error: error._tag,
            message: error.message,
            discardedText: collected.some((part) => part.type === "text-delta")
          }))
          return Effect.fail(error)
        }
        /** The reply of the parts received, or its failure reported. */
        const judged = (received: ReadonlyArray<Response.AnyPart>) => {
          const judgement = toModelResponse(received, request.step, true, offeredTools)
          return Either.isLeft(judgement) ? attemptFailed(judgement.left) : Effect.succeed(judgement.right)
        }
        // how much the reply holds so far, bounded by `maxReplyChars`
        let size = 0
        // one handler for both outcomes, as for a generated reply: fewer fiber operations per step
        return Effect.matchCauseEffect(
          timedOutAfter(
            drain(
              parts,
              (chunk) => {
                for (const part of chunk) {
                  collected.push(part)
                  size += sizeOf(part)
                  if (part.type === "text-delta") emit(AgentEvent.TextDelta({ step: request.step, delta: part.delta }))
                }
              },
              () => size > config.maxReplyChars ? cutOff("TooLarge", collected, request.step, true) : undefined
            ),
            timeout,
            () => cutOff("TimedOut", collected, request.step, true)
          ),
          {
            // credentials never leave in a failure
            onFailure: (cause) => {
              const failure = Cause.failureOrCause(Secrets.scrubCause(cause))
              return Either.isLeft(failure)
                ? failure.left instanceof ModelReplyError
                  ? attemptFailed(failure.left)
                  : Effect.matchEffect(recover(failure.left, collected), {
                    onFailure: attemptFailed,
                    onSuccess: judged
                  })
                : Effect.failCause(failure.right)
            },
            onSuccess: () => judged(collected)
          }
        )
      })
    const witness = run.journal.witness
    const witnessed = witness === undefined ? response : Effect.suspend(() =>
      witness.model({
        step: request.step,
        systemPrompt: request.systemPrompt,
        messages,
        tools: request.tools.map((tool) => ({
          name: tool.name,
          description: tool.description,
          parameters: Tool.getJsonSchema(tool as Tool.Tool<string, any>)
        })),
        toolChoice: request.toolChoice
      }, response)
    )
    return Context.isContext(request.context) && request.context.unsafeMap.size > 0
      ? Effect.provide(witnessed, request.context)
      : witnessed
  }

  /** The names of the `wrapModelCall` middleware, and of each run of them (made once per pair). */
  const wrapNames = new LayerGroups.LayerNames(wrapModel.map((m) => m.name))

  /**
   * The `wrapModelCall` chain of a model call; the state updates its hooks
   * return go to `updates` (without: nothing is collected, and the chain
   * serves every model call of the run). In a watched, untraced run a layer
   * that passes on the effect of layers inside that passed theirs on is
   * observed with them (`fast/layerGroups.ts`).
   */
  const modelChain = (run: RunContext, updates: Array<WrapUpdates.Update> | undefined) => {
    const observe = LayerGroups.make(run, "wrapModelCall", wrapNames)
    return wrapModel.reduceRight<
      (request: Middleware.ModelRequest) => Effect.Effect<Middleware.ModelResponse, any, any>
    >(
      (next, m, index) => {
        const into = updates !== undefined && WrapUpdates.canUpdate(config, m.name) ? updates : undefined
        const layer = new PassedOn(next as Middleware.NextModelCall)
        // what the model call gives is a checked reply, unless a journal's witness answered it
        const innerChecked = index < wrapModel.length - 1 || run.journal.witness === undefined
        return (request) => {
          const returned = layer.call(m.wrapModelCall!, request)
          const passedOn = layer.passedOn(returned) !== undefined && innerChecked
          const hooked = observe(index, passedOn, returned)
          // a hook that returned what `next` gave passes on a reply already checked inside
          return passedOn ? hooked : checkedResponse(m, request, hooked, into)
        }
      },
      callModel(run)
    )
  }

  /**
   * Whether a model call hands the request's messages array to someone who
   * may keep it: a `wrapModelCall` or `wrapModelStream` hook, or a journal
   * (recording, replaying, durable). Else the run may grow it in place after
   * the call (`RunState.appendReply`).
   */
  const handsOver = (run: RunContext): boolean =>
    wrapModel.length > 0 || wrapStream.length > 0 || run.journal !== RunJournal.inProcess

  /** Whether a `wrapModelCall` hook can update state: then each model call collects its own updates. */
  const collects = wrapModel.some((m) => WrapUpdates.canUpdate(config, m.name))

  /** The chain of a run whose `wrapModelCall` hooks cannot update state: one for all its model calls. */
  const runChain = identityMemo((run: RunContext) => modelChain(run, undefined))

  /** The reply of a model call as the journal keeps it, with the state updates its wrap hooks returned. */
  const toModelCall = (
    response: Middleware.ModelResponse,
    updates: ReadonlyArray<WrapUpdates.Update> | undefined
  ): RunJournal.ModelCall =>
    updates === undefined || updates.length === 0
      ? {
        message: response.message,
        usage: response.usage,
        finishReason: response.finishReason,
        // a hook that answered without calling the model names no tools: all the agent's count as offered
        offered: response.offeredTools ?? toolNames
      }
      : {
        message: response.message,
        usage: response.usage,
        finishReason: response.finishReason,
        offered: response.offeredTools ?? toolNames,
        updates
      }

  /**
   * The model call of `state` (its request through the chain, journaled as
   * the run's step), and `then` with its reply. In a run journaled in
   * process the reply is made in `then`'s continuation, and the step gets no
   * name: nobody reads it.
   */
  const modelCall = <A>(
    run: RunContext,
    state: RunState.RunState,
    then: (reply: RunJournal.ModelCall) => Effect.Effect<A, unknown, any>
  ): Effect.Effect<A, unknown, any> => {
    const request: Middleware.ModelRequest = {
      messages: state.messages,
      systemPrompt: config.systemPrompt,
      tools: config.toolList,
      toolChoice: config.toolChoice,
      model: undefined,
      context: Context.empty(),
      state: config.layout.flatten(state),
      threadId: run.threadId,
      incarnation: run.incarnation,
      step: state.step
    }
    // the state updates of this call's wrap hooks (none to collect when no hook can update state)
    const updates = collects ? [] : undefined
    // built once the step starts (after ModelCallStarted): building it calls the wrap hooks
    const call = () => {
      const responding = handsOver(run)
        ? (updates === undefined ? runChain(run) : modelChain(run, updates))(request)
        : respond(run, request, state.unseen === state.messages ? state.messages : undefined)
      const responded = Observer.traced(run, "Agent.modelCall", { step: state.step }, responding)
      return run.journal === RunJournal.inProcess
        ? Effect.flatMap(responded, (response) => then(toModelCall(response, updates)))
        : Effect.flatMap(
          journaled(
            run,
            run.keys.model(state.step),
            Effect.map(responded, (response) => toModelCall(response, updates))
          ),
          then
        )
    }
    return Observer.modelCall(
      run,
      () => AgentEvent.ModelCallStarted({ step: state.step, messageCount: state.messages.length, toolNames }),
      call
    )
  }

  /**
   * The model phase: past `maxSteps` the run fails; else the reply is
   * counted toward `maxToolCallRepairs` (the run fails past it) and appended
   * to the thread, and kept for `ModelResponded` while someone watches.
   */
  return (
    run: RunContext,
    initial: RunState.RunState,
    phase: { readonly node: "model" },
    then: Then
  ): Effect.Effect<AgentResult.AgentResult<any>, unknown, any> => {
    if (initial.step >= config.maxSteps) {
      return Effect.fail(new MaxStepsExceeded({ threadId: run.threadId, maxSteps: config.maxSteps }))
    }
    // (the driver runs a phase as the run reaches it: no suspend of its own)
    const started = run.emit === undefined ? 0 : run.clock.unsafeCurrentTimeMillis()
    return modelCall(run, initial, (reply) => {
      const invalid = invalidCall(reply)
      let state = RunState.countRepair(initial, invalid !== undefined)
      if (invalid !== undefined && state.repairRounds > config.maxToolCallRepairs) {
        return Effect.fail(repairsExhausted(run.threadId, invalid, state.repairRounds))
      }
      state = RunState.appendReply(state, reply, !handsOver(run))
      if (run.emit !== undefined) {
        const durationMillis = run.clock.unsafeCurrentTimeMillis() - started
        state = RunState.withReplied(state, {
          index: state.messages.length - 1,
          step: state.step - 1,
          reply,
          durationMillis
        })
      }
      return reply.updates === undefined
        ? then(phase, { state, outcome: Continue })
        : Effect.flatMap(
          WrapUpdates.apply(config, run, "wrapModelCall", state, reply.updates),
          (updated) => then(phase, { state: updated, outcome: Continue })
        )
    })
  }
}
