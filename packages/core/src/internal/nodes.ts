/**
 * The hook-node phases of a run: the node's hooks in run order, each given
 * the state and its own slice; each result checked and applied, until one
 * jumps (`canJumpTo` checked) or asks to wait. The first hook run takes the
 * answer to a wait the state carries. When `afterModel` ends, the model's
 * reply is reported as the hooks stored it.
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { InvalidHookResult, InvalidJump } from "../AgentError.js"
import * as AgentEvent from "../AgentEvent.js"
import type * as AgentResult from "../AgentResult.js"
import type * as Middleware from "../Middleware.js"
import type { Compiled } from "./config.js"
import { emptySlice, reusable } from "./fast/hookRequests.js"
import { hookEffect, nodeResultProblem } from "./hookResults.js"
import { Continue, type HookNode } from "./machine.js"
import * as Observer from "./observer.js"
import * as PersonAnswer from "./personAnswer.js"
import type { Stepped, Then } from "./phase.js"
import { inputOf } from "./receive.js"
import type { RunContext } from "./runContext.js"
import * as RunState from "./runState.js"
import * as Waits from "./waits.js"

/**
 * Runs the hooks of a node from the `start`-th on; the first gets the answer
 * the state carries. A node with no hook left just continues.
 */
export const make = (config: Compiled) => {
  const transformInput = inputOf(config)
  const runHooks = (
    run: RunContext,
    initial: RunState.RunState,
    node: HookNode,
    start: number
  ): Effect.Effect<Stepped, unknown, any> => {
    const hooks = config.nodes[node]
    const resume = initial.resume
    /**
     * The hooks from the `index`-th on. A hook whose effect is already an
     * `Exit` (`Effect.void`, `Effect.succeed(…)`) is read at once, as a
     * generator's `yield*` reads it: no fiber operation; any other leads on
     * in its continuation.
     */
    const from = (index: number, state: RunState.RunState): Effect.Effect<Stepped, unknown, any> => {
      // the request of the hook before, which the next hook gets too when it would get the same fields
      let request: Middleware.HookContext<object, unknown> | undefined
      for (; index < hooks.length; index++) {
        const m = hooks[index]!
        const slice = state.slices[m.name] ?? emptySlice
        const resumed = index === start ? resume : Option.none()
        if (!reusable(request, slice, resumed)) {
          request = {
            state: slice,
            messages: state.messages,
            threadId: run.threadId,
            incarnation: run.incarnation,
            step: state.step,
            usage: state.usage,
            tools: config.toolList,
            toolConcurrency: config.toolConcurrency,
            toolTimeout: config.toolTimeout,
            resume: resumed
          }
        }
        const ran = Observer.inHookNow(run, m.name, node, hookEffect(m.name, node, m[node]!(request)))
        // (in a function of its own: a function made in the loop would cost each turn a scope of its own)
        if (!Exit.isExit(ran)) return later(ran, m, index, state)
        const ended = ran as Exit.Exit<Middleware.HookResult<object, Middleware.Jump, unknown> | undefined, unknown>
        if (Exit.isFailure(ended)) return Effect.failCause(ended.cause)
        if (ended.value !== undefined) return afterResult(m, index, state, ended.value)
      }
      return Effect.succeed({ state, outcome: Continue })
    }
    /** The hooks after hook `m` (the `index`-th) once its effect `ran` ended, or its result applied first. */
    const later = (
      ran: Effect.Effect<void | Middleware.HookResult<any, Middleware.Jump, unknown>, unknown, any>,
      m: Middleware.Any,
      index: number,
      state: RunState.RunState
    ): Effect.Effect<Stepped, unknown, any> =>
      Effect.flatMap(
        ran,
        (result) => result === undefined ? from(index + 1, state) : afterResult(m, index, state, result)
      )
    /** The result of hook `m` checked and applied; then the hooks after it, unless it waits or jumps. */
    const afterResult = (
      m: Middleware.Any,
      index: number,
      before: RunState.RunState,
      result: Middleware.HookResult<object, Middleware.Jump, unknown>
    ): Effect.Effect<Stepped, unknown, any> =>
      Effect.gen(function*() {
        let state = before
        const problem = nodeResultProblem(result, state.messages)
        if (problem !== undefined) {
          return yield* new InvalidHookResult({ middleware: m.name, hook: node, reason: problem })
        }
        const applied = RunState.applyHookResult(state, m.name, config.declaredKeys.get(m.name), result)
        state = applied.state
        if (result.messages !== undefined && config.inputHooks.length > 0) {
          // what a person typed passes the input's hooks before any other hook sees it
          state = RunState.withMessages(
            state,
            yield* PersonAnswer.check(state.messages, m.name, node, (messages) => transformInput(run, messages))
          )
        }
        if (applied.keys.length > 0 || result.messages !== undefined) {
          yield* Observer.report(run, () =>
            AgentEvent.StateUpdated({
              middleware: m.name,
              hook: node,
              keys: applied.keys,
              messagesReplaced: result.messages !== undefined
            }))
        }
        if (result.interrupt !== undefined) {
          const value = yield* Waits.encodeRequest(m, node, result.interrupt)
          return {
            state,
            outcome: {
              _tag: "Interrupt",
              wait: { node, index, middleware: m.name, request: result.interrupt, value, key: result.interruptKey }
            }
          }
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
          yield* Observer.report(run, () =>
            AgentEvent.MiddlewareDecision({
              middleware: m.name,
              hook: node,
              decision: `jump to ${result.jumpTo}`,
              data: undefined
            }))
          // never leave a tool call without its result: providers reject such a thread
          if (result.jumpTo === "end") {
            state = RunState.answerPending(state, "the agent ended the run before this call ran")
          }
          return { state, outcome: { _tag: "Jump", to: result.jumpTo } }
        }
        return yield* from(index + 1, state)
      })
    // a hook may hold the messages array from here on: nothing is appended to it in place
    return from(start, RunState.resumeTaken(RunState.seen(initial)))
  }

  /**
   * The model's reply as the `afterModel` hooks stored it (a hook may have
   * redacted or rewritten it), never the raw one, reported once they ended.
   */
  const reportReplied = (run: RunContext, state: RunState.RunState): RunState.RunState => {
    const replied = state.replied
    if (replied === undefined) return state
    const stored = state.messages[replied.index]
    run.emit!(AgentEvent.ModelResponded({
      step: replied.step,
      message: stored !== undefined && stored.role === "assistant"
        ? stored
        : Prompt.makeMessage("assistant", { content: [] }),
      usage: replied.reply.usage,
      finishReason: replied.reply.finishReason,
      durationMillis: replied.durationMillis
    }))
    return RunState.withReplied(state, undefined)
  }

  /** The phase of hook node `node` from its `index`-th hook on. */
  return (
    run: RunContext,
    state: RunState.RunState,
    phase: { readonly node: HookNode; readonly index: number },
    then: Then
  ): Stepped | Effect.Effect<AgentResult.AgentResult<any>, unknown, any> => {
    // (a reply to report is kept only while someone watches)
    const reports = phase.node === "afterModel" && run.emit !== undefined
    if (phase.index >= config.nodes[phase.node].length) {
      return { state: reports ? reportReplied(run, state) : state, outcome: Continue }
    }
    const ran = runHooks(run, state, phase.node, phase.index)
    const reported = (stepped: Stepped): Stepped =>
      reports ? { ...stepped, state: reportReplied(run, stepped.state) } : stepped
    // hooks that all ended at once (read as a generator's `yield*` reads them): reported now, as the phase
    // with no hook left is
    if (Exit.isExit(ran)) {
      const ended = ran as Exit.Exit<Stepped, unknown>
      return Exit.isSuccess(ended) ? reported(ended.value) : Effect.failCause(ended.cause)
    }
    return Effect.flatMap(ran, (stepped) => then(phase, reported(stepped)))
  }
}
