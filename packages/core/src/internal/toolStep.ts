/**
 * The tools phase of a run: each pending call through the `wrapToolCall`
 * chain, journaled as the run's step with the state updates its hooks
 * returned, with bounded concurrency; the updates applied in call order, the
 * results stored and saved. A call of a tool the model call did not offer, or that
 * the agent does not have, or whose arguments are invalid, is answered with a
 * failed result the model can read; a call that timed out too.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { InvalidHookResult, MaxStepsExceeded, ToolTimeout } from "../AgentError.js"
import type * as AgentResult from "../AgentResult.js"
import * as AgentState from "../AgentState.js"
import type * as Middleware from "../Middleware.js"
import * as RunJournal from "../RunJournal.js"
import type { Compiled } from "./config.js"
import { identityMemo } from "./fast/identityMemo.js"
import * as LayerGroups from "./fast/layerGroups.js"
import { PassedOn } from "./fast/passedOn.js"
import * as PrefixViews from "./fast/prefixViews.js"
import { toolResultProblem } from "./hookResults.js"
import { Continue } from "./machine.js"
import * as Observer from "./observer.js"
import * as PersonAnswer from "./personAnswer.js"
import type { Save, Stepped, Then } from "./phase.js"
import { inputOf } from "./receive.js"
import { journaled, type RunContext } from "./runContext.js"
import * as RunState from "./runState.js"
import { ToolCallGuards } from "./toolCallGuards.js"
import * as ToolResult from "./toolResult.js"
import { timedOutResult, unknownToolResult } from "./tools.js"
import * as WrapUpdates from "./wrapUpdates.js"

const isToolTimeout = (error: unknown): error is ToolTimeout => error instanceof ToolTimeout

/**
 * What the tool step gives: a result per call, in call order, the state
 * updates the calls' `wrapToolCall` hooks returned, in call order (each
 * call's innermost first), and the structured output if a call gave it.
 */
export interface ToolStepResult {
  readonly results: ReadonlyArray<Prompt.ToolResultPart>
  readonly updates: ReadonlyArray<WrapUpdates.Update>
  readonly output: Option.Option<unknown>
}

/**
 * The tool result a `wrapToolCall` hook returned, checked; its state update
 * goes to `updates` (dropped without: the hook's middleware declares no
 * state), and the hooks around get the result without it.
 */
const answered = (
  middleware: string,
  call: Prompt.ToolCallPart,
  updates: Array<WrapUpdates.Update> | undefined
) =>
(response: Middleware.ToolCallResponse): Effect.Effect<Prompt.ToolResultPart, InvalidHookResult> => {
  const problem = toolResultProblem(response, call)
  if (problem !== undefined) {
    return Effect.fail(new InvalidHookResult({ middleware, hook: "wrapToolCall", reason: problem }))
  }
  // a hook's own result (a failure quoting a defect, a value too deep to store) is kept as a tool's is
  if (!("state" in response)) return Effect.succeed(ToolResult.keep(response))
  const { state, ...result } = response
  if (state !== undefined && updates !== undefined) updates.push({ middleware, state })
  return Effect.succeed(ToolResult.keep(result))
}

/** The result as the journal keeps it: with the call's state updates, if there are some. */
const withUpdates = (
  result: Prompt.ToolResultPart,
  updates: ReadonlyArray<WrapUpdates.Update>
): RunJournal.ToolCall => updates.length === 0 ? result : { ...result, updates }

/**
 * Runs a tool call through the guards the chain installed for it
 * (`Middleware.guardToolCall`, outermost first): the first answer wins, else
 * `run` runs, with no guard left for the tool calls made inside it.
 */
const runGuarded = <E, R>(
  requestOf: () => Middleware.ToolCallRequest,
  run: Effect.Effect<Prompt.ToolResultPart, E, R>
): Effect.Effect<Prompt.ToolResultPart, E, R> =>
  Effect.withFiberRuntime((fiber) => {
    const guards = Context.get(fiber.currentContext, ToolCallGuards)
    if (guards.length === 0) return run
    const request = requestOf()
    const unguarded = Effect.provideService(run, ToolCallGuards, [])
    const check = (index: number): Effect.Effect<Prompt.ToolResultPart, E, R> =>
      index === guards.length ? unguarded : Effect.flatMap(
        guards[index]!(request),
        Option.match({
          onNone: () => check(index + 1),
          onSome: (answer) => Effect.succeed(ToolResult.keep(answer))
        })
      )
    return check(0)
  })

export const make = (config: Compiled, save: Save) => {
  const { output, outputToolName, toolNames, toolsByName, wrapTool } = config
  const transformInput = inputOf(config)

  /**
   * The tool call at the end of the `wrapToolCall` chain: `call`, offered
   * `offered`, of the request `requestOf` makes (made only for guards to read).
   */
  const callTool = (
    threadId: string,
    call: Prompt.ToolCallPart,
    offered: ReadonlyArray<string> | undefined,
    requestOf: () => Middleware.ToolCallRequest
  ): Effect.Effect<Prompt.ToolResultPart, any> => {
    if (call.name === outputToolName) return Effect.succeed(output!.answer(call))
    const entry = toolsByName.get(call.name)
    if (entry === undefined) return Effect.succeed(unknownToolResult(call, offered ?? toolNames))
    if (offered !== undefined && !offered.includes(call.name)) return Effect.succeed(unknownToolResult(call, offered))
    // the guards the chain installed check the call as it runs (Middleware.guardToolCall)
    return runGuarded(requestOf, entry.run(call, threadId))
  }

  /** The names of the `wrapToolCall` middleware, and of each run of them (made once per pair). */
  const wrapNames = new LayerGroups.LayerNames(wrapTool.map((m) => m.name))

  /**
   * The `wrapToolCall` chain of a tool call; the state updates its hooks
   * return go to `updates` (without: nothing is collected, and the chain
   * serves every call of the run). In a watched, untraced run a layer that
   * passes on the effect of layers inside that passed theirs on is observed
   * with them (`fast/layerGroups.ts`).
   */
  const toolChain = (run: RunContext, updates: Array<WrapUpdates.Update> | undefined) => {
    const observe = LayerGroups.make(run, "wrapToolCall", wrapNames)
    return wrapTool.reduceRight<
      (request: Middleware.ToolCallRequest) => Effect.Effect<Prompt.ToolResultPart, any, any>
    >(
      (next, m, index) => {
        const into = updates !== undefined && WrapUpdates.canUpdate(config, m.name) ? updates : undefined
        const layer = new PassedOn(next as Middleware.NextToolCall)
        return (request) => {
          const returned = layer.call(m.wrapToolCall!, request)
          const passedOn = layer.passedOn(returned)?.call.id === request.call.id
          const hooked = observe(index, passedOn, returned)
          // a hook that returned what `next` gave for this call passes on a result already checked inside
          return passedOn ? hooked : Effect.flatMap(hooked, answered(m.name, request.call, into))
        }
      },
      (request) => callTool(run.threadId, request.call, request.offeredTools, () => request)
    )
  }

  /**
   * `chain`, whose result, when a `wrapToolCall` hook gave a person's answer, has its texts through the
   * `transformInput` hooks before anything journals, stores or sees it (the outermost hook gave the result).
   */
  const personAnswerChecked = (run: RunContext, chain: Effect.Effect<Prompt.ToolResultPart, any, any>) =>
    config.inputHooks.length === 0 || wrapTool.length === 0
      ? chain
      : Effect.flatMap(
        chain,
        (result) =>
          PersonAnswer.checkResult(
            result,
            wrapTool[0]!.name,
            "wrapToolCall",
            (messages) => transformInput(run, messages)
          )
      )

  /** Whether a `wrapToolCall` hook can update state: then each call collects its own updates. */
  const collects = wrapTool.some((m) => WrapUpdates.canUpdate(config, m.name))

  /** The chain of a run whose `wrapToolCall` hooks cannot update state: one for all its calls. */
  const runChain = identityMemo((run: RunContext) => toolChain(run, undefined))

  /**
   * The journal's step of `call`, with its ledger entry when its tool is not
   * read-only (ToolEffect); only a journal or a watcher reads the entry, so
   * an unwatched run in process does not hash the arguments for it.
   */
  const keyOf = (run: RunContext, call: Prompt.ToolCallPart): RunJournal.StepKey.Tool => {
    const ledgered = run.journal !== RunJournal.inProcess || run.emit !== undefined
    return run.keys.tool(call, ledgered ? toolsByName.get(call.name)?.tool : undefined, run.threadId)
  }

  /** Runs `calls`, the pending calls of `state`, then `then` with what they gave. */
  const runCalls = <A>(
    run: RunContext,
    state: RunState.RunState,
    calls: ReadonlyArray<Prompt.ToolCallPart>,
    then: (ran: ToolStepResult) => Effect.Effect<A, unknown, any>
  ): Effect.Effect<A, unknown, any> => {
    /** The state updates of each call, by its place in the reply: applied in that order, whatever finished first. */
    const updatesOf: Array<ReadonlyArray<WrapUpdates.Update> | undefined> = []
    let flat: (AgentState.AgentState & Readonly<Record<string, unknown>>) | undefined
    const requestOf = (call: Prompt.ToolCallPart): Middleware.ToolCallRequest => ({
      call,
      tool: toolsByName.get(call.name)?.tool ?? (call.name === outputToolName ? output!.tool : undefined),
      // with no `wrapToolCall` hook only a guard set around the run reads it, while the run may still grow its
      // messages array in place: it gets a view of the array's length now (`fast/prefixViews.ts`)
      state: flat ??= state.unseen === state.messages
        ? PrefixViews.state(config.layout.flatten(state), state.messages, state.messages.length)
        : config.layout.flatten(state),
      threadId: run.threadId,
      incarnation: run.incarnation,
      step: state.step - 1,
      offeredTools: state.offered
    })
    // several calls of the output tool in one reply: each is answered as refused, and the model asked again
    let outputCalls = 0
    if (outputToolName !== undefined) { for (const call of calls) if (call.name === outputToolName) outputCalls++ }
    const one = (call: Prompt.ToolCallPart, index: number) => {
      if (outputCalls > 1 && call.name === outputToolName) {
        return Observer.toolCall(run, call, Effect.succeed(output!.once(call, outputCalls)))
      }
      /**
       * `chain` traced as the call, a timeout answered with a failed result; a call that cannot time out (no
       * hook around it, a tool without a timeout: nothing else fails with `ToolTimeout`) has no catch.
       */
      const executed = (chain: Effect.Effect<Prompt.ToolResultPart, any, any>) => {
        const caught = wrapTool.length > 0 || toolsByName.get(call.name)?.timesOut === true
          ? Effect.catchIf(
            personAnswerChecked(run, chain),
            isToolTimeout,
            (error) => Effect.succeed(timedOutResult(call, error))
          )
          : chain
        return run.traced
          ? Observer.traced(run, "Agent.toolCall", { tool: call.name, callId: call.id }, caught)
          : caught
      }
      if (!collects) {
        // with no hook, the request is made only if a guard reads it
        const chain = executed(
          wrapTool.length === 0
            ? callTool(run.threadId, call, state.offered, () => requestOf(call))
            : runChain(run)(requestOf(call))
        )
        // only a journal or a watcher reads the call's step (its name, its ledger entry): an unwatched run in
        // process names no step
        if (run.journal === RunJournal.inProcess && run.emit === undefined) return chain
        const key = keyOf(run, call)
        return Observer.toolCall(run, call, journaled(run, key, chain), key.ledger)
      }
      const key = keyOf(run, call)
      // journaled with its updates: a replayed call gives the ones the first execution returned
      const updates: Array<WrapUpdates.Update> = []
      const called = journaled(
        run,
        key,
        Effect.map(executed(toolChain(run, updates)(requestOf(call))), (result) => withUpdates(result, updates))
      )
      return Observer.toolCall(
        run,
        call,
        Effect.map(called, (journaledCall): Prompt.ToolResultPart => {
          if (journaledCall.updates === undefined) return journaledCall
          // the agent applies the updates and stores the result without them
          const { updates: returned, ...result } = journaledCall
          updatesOf[index] = returned
          return result
        }),
        key.ledger
      )
    }
    const ended = (results: ReadonlyArray<Prompt.ToolResultPart>): ToolStepResult => {
      let value = Option.none<unknown>()
      if (output !== undefined) {
        for (let i = 0; i < calls.length; i++) {
          const given = output.value(calls[i]!, results[i]!)
          if (Option.isSome(given)) value = given
        }
      }
      return {
        results,
        updates: updatesOf.length === 0 ? [] : updatesOf.flatMap((updates) => updates ?? []),
        output: value
      }
    }
    return calls.length === 1
      ? Effect.flatMap(one(calls[0]!, 0), (result) => then(ended([result])))
      : Effect.flatMap(
        Effect.forEach(calls, one, { concurrency: config.toolConcurrency }),
        (results) => then(ended(results))
      )
  }

  /**
   * The results stored in `state`, then the rest of the run; a run that got
   * its structured output ends, any other saves them first.
   */
  const store = (
    run: RunContext,
    ran: ToolStepResult,
    state: RunState.RunState,
    then: (stepped: Stepped) => Effect.Effect<AgentResult.AgentResult<any>, unknown, any>
  ): Effect.Effect<AgentResult.AgentResult<any>, unknown, any> => {
    const stored = RunState.appendToolResults(state, ran.results, ran.output)
    return Option.isNone(stored.output)
      ? Effect.flatMap(save(run, stored, undefined), (saved) => then({ state: saved, outcome: Continue }))
      : then({ state: stored, outcome: Continue })
  }

  /**
   * The tools phase: the pending calls run, the state updates their
   * `wrapToolCall` hooks returned are applied in call order, and their
   * results are stored; a run that got its structured output ends, any other
   * saves its results first. A jump to the tools with nothing to run counts toward `maxSteps`
   * like a model call (a hook that keeps jumping there would loop without one).
   */
  return (
    run: RunContext,
    initial: RunState.RunState,
    phase: { readonly node: "tools" },
    then: Then
  ): Effect.Effect<AgentResult.AgentResult<any>, unknown, any> => {
    const calls = AgentState.pendingToolCalls(initial.messages)?.calls ?? []
    let state = initial
    if (calls.length === 0) {
      state = RunState.countIdleToolRound(state)
      if (state.step + state.idleToolRounds > config.maxSteps) {
        return Effect.fail(new MaxStepsExceeded({ threadId: run.threadId, maxSteps: config.maxSteps }))
      }
    }
    // `wrapToolCall` hooks see the state, messages included: nothing is appended in place
    if (wrapTool.length > 0) state = RunState.seen(state)
    const stepped = (next: Stepped) => then(phase, next)
    return runCalls(run, state, calls, (ran) =>
      ran.updates.length === 0
        ? store(run, ran, state, stepped)
        : Effect.flatMap(WrapUpdates.apply(config, run, "wrapToolCall", state, ran.updates), (updated) =>
          store(run, ran, updated, stepped)))
  }
}
