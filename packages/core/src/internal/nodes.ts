/**
 * A hook node of a run: the node's hooks in run order, each given the state
 * and its own slice; each result checked and applied, until one jumps
 * (`canJumpTo` checked) or asks to wait.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { InvalidHookResult, InvalidJump } from "../AgentError.js"
import * as AgentEvent from "../AgentEvent.js"
import type { Compiled } from "./config.js"
import { hookEffect, nodeResultProblem } from "./hookResults.js"
import { Continue, type HookNode, type NodeOutcome } from "./machine.js"
import * as Observer from "./observer.js"
import type { RunContext } from "./runContext.js"
import * as RunState from "./runState.js"

/** How a node ended, and the state it left. */
export interface NodeResult {
  readonly state: RunState.RunState
  readonly outcome: NodeOutcome
}

/** Runs the hooks of a node from the `start`-th on (the driver skips a node with none left); the first gets `resume`. */
export const make = (config: Compiled) =>
(
  run: RunContext,
  initial: RunState.RunState,
  node: HookNode,
  start: number,
  resume: Option.Option<unknown>
): Effect.Effect<NodeResult, unknown, any> => {
  const hooks = config.nodes[node]
  return Effect.gen(function*() {
    let state = initial
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
            state: state.slices[m.name] ?? {},
            messages: state.messages,
            threadId: run.threadId,
            step: state.step,
            usage: state.usage,
            tools: config.toolList,
            toolConcurrency: config.toolConcurrency,
            toolTimeout: config.toolTimeout,
            resume: index === start ? resume : Option.none()
          })
        )
      )
      if (result === undefined) continue
      const problem = nodeResultProblem(result, state.messages)
      if (problem !== undefined) {
        return yield* new InvalidHookResult({ middleware: m.name, hook: node, reason: problem })
      }
      const applied = RunState.applyHookResult(state, m.name, config.declaredKeys.get(m.name), result)
      state = applied.state
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
        return {
          state,
          outcome: { _tag: "Interrupt", middleware: m.name, index, value: result.interrupt, key: result.interruptKey }
        }
      }
      if (result.jumpTo !== undefined) {
        if (!m.canJumpTo.includes(result.jumpTo)) {
          return yield* new InvalidJump({ middleware: m.name, hook: node, jumpTo: result.jumpTo, allowed: m.canJumpTo })
        }
        yield* Observer.report(run, () =>
          AgentEvent.MiddlewareDecision({
            middleware: m.name,
            hook: node,
            decision: `jump to ${result.jumpTo}`,
            data: undefined
          }))
        return { state, outcome: { _tag: "Jump", to: result.jumpTo } }
      }
    }
    return { state, outcome: Continue }
  })
}
