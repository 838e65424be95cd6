/**
 * The wait phase: a hook asked to wait. The thread is saved waiting (the
 * wait, its key and the run's progress), then the run's journal is asked
 * for an answer: the in-process journal has none, so the run ends
 * `Interrupted`; a durable one suspends the run until a decision comes (an
 * interrupted wait is, to watchers, the end of the run), and with one (decoded
 * by the journal, checked here) the run goes on at the hook that waits, which
 * takes the answer.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as AgentEvent from "../AgentEvent.js"
import * as AgentResult from "../AgentResult.js"
import type * as AgentState from "../AgentState.js"
import type { Compiled } from "./config.js"
import { interruptKey, Resume, type Wait } from "./machine.js"
import * as Observer from "./observer.js"
import type { Save, Stepped, Then } from "./phase.js"
import { type RunContext, uniqueInterruptKey } from "./runContext.js"
import * as RunState from "./runState.js"
import * as Waits from "./waits.js"

/** The result of a run that ends waiting at `interrupt`. */
export const interrupted = (
  layout: AgentState.Layout,
  run: RunContext,
  state: RunState.RunState,
  interrupt: { readonly middleware: string; readonly value: unknown; readonly key: string }
): AgentResult.AgentResult<any> =>
  AgentResult.Interrupted({
    threadId: run.threadId,
    state: layout.flatten(state),
    interrupt,
    usage: RunState.usageOf(state),
    steps: state.step
  })

export const make = (config: Compiled, save: Save) =>
(
  run: RunContext,
  state: RunState.RunState,
  phase: { readonly node: "wait"; readonly wait: Wait },
  then: Then
): Effect.Effect<AgentResult.AgentResult<any>, unknown, any> =>
  Effect.flatMap(waited(config, save, run, state, phase.wait), (stepped) => then(phase, stepped))

/** The wait `wait` saved and asked of the run's journal: the run ends, or goes on at the hook that waits. */
const waited = (
  config: Compiled,
  save: Save,
  run: RunContext,
  state: RunState.RunState,
  wait: Wait
): Effect.Effect<Stepped, unknown, any> =>
  Effect.gen(function*() {
    const { index, middleware, node, request, value } = wait
    const key = uniqueInterruptKey(run, wait.key ?? interruptKey(node, middleware, state.step))
    const saved = yield* save(
      run,
      state,
      { node, middleware, value, key, ...(run.journal.durable ? { durable: true } : {}) }
    )
    const result = interrupted(config.layout, run, saved, { middleware, value: request, key })
    const hook = config.nodes[node][index]!
    const answer = run.journal.await({
      key,
      threadId: run.threadId,
      step: state.step,
      middleware,
      node,
      value: request,
      // a middleware that interrupts has a wait (`Waits.encodeRequest` refused the interrupt otherwise)
      request: hook.wait?.request ?? Schema.Unknown,
      decision: hook.wait?.decision ?? Schema.Unknown
    })
    const decided = yield* run.emit === undefined
      ? answer
      : Effect.onInterrupt(answer, () => Observer.report(run, () => AgentEvent.RunEnded({ result })))
    if (Option.isNone(decided)) return { state: saved, outcome: { _tag: "End", result } }
    // the journal delivers the decision decoded with the wait's decision schema: checked as `resume` does
    const decision = yield* Waits.checkDelivered(hook, run.threadId, value, decided.value)
    // the thread no longer waits: say so before the hook acts on the decision
    const resumed = yield* save(run, saved, undefined)
    return { state: RunState.withResume(resumed, Option.some(decision)), outcome: Resume }
  })
