/**
 * The driver of a run: the phase table (one step per phase of the machine,
 * each in its own module) and the loop that runs a run from a phase to its
 * end, one phase after another, the state a value it passes along.
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import type * as AgentResult from "../AgentResult.js"
import type { Compiled } from "./config.js"
import { locally, mergeAndAdd, scoped } from "./fast/withContext.js"
import * as Finish from "./finish.js"
import { next, type Phase, type PhaseName } from "./machine.js"
import * as ModelStep from "./modelStep.js"
import * as Nodes from "./nodes.js"
import type { Save, Step, Then } from "./phase.js"
import * as Receive from "./receive.js"
import type { RunContext } from "./runContext.js"
import * as RunSaves from "./runSaves.js"
import * as RunState from "./runState.js"
import * as ToolStep from "./toolStep.js"
import * as Wait from "./wait.js"

/** One step for every phase of the machine: the type leaves none out. */
export type Steps = { readonly [N in PhaseName]: Step<Extract<Phase, { readonly node: N }>> }

/** The step of each phase of an agent's runs. */
export const steps = (config: Compiled, save: Save): Steps => {
  const hooks = Nodes.make(config)
  return {
    receive: Receive.make(config, save),
    beforeAgent: hooks,
    beforeModel: hooks,
    model: ModelStep.make(config),
    afterModel: hooks,
    tools: ToolStep.make(config, save),
    afterAgent: hooks,
    wait: Wait.make(config, save),
    done: Finish.make(config, save)
  }
}

/**
 * Runs `run` from phase `start` until a phase ends it (its result, or a wait
 * nobody answers at once). A phase that gives its outcome as it is leads to
 * the next one in the same loop; one that runs an effect goes on in that
 * effect's last continuation (no generator, no continuation of the driver's).
 */
export const make = (config: Compiled, table: Steps) =>
(
  run: RunContext,
  initial: RunState.RunState,
  start: Phase
): Effect.Effect<AgentResult.AgentResult<any>, unknown, any> => {
  const from = (state: RunState.RunState, phase: Phase): Effect.Effect<AgentResult.AgentResult<any>, unknown, any> => {
    while (true) {
      const ran = (table[phase.node] as Step<Phase>)(run, state, phase, then)
      if (Effect.isEffect(ran)) return ran
      if (ran.outcome._tag === "End") return Effect.succeed(ran.outcome.result)
      state = ran.state
      phase = next(phase, ran.outcome, RunState.factsOf(state))
    }
  }
  const then: Then = (at, stepped) =>
    stepped.outcome._tag === "End"
      ? Effect.succeed(stepped.outcome.result)
      : from(stepped.state, next(at, stepped.outcome, RunState.factsOf(stepped.state)))
  // the agent's context (and the run's saves) provided and the thread annotated on spans, as `Effect.provide` and
  // `Effect.annotateSpans` do, in one setting of the two refs, and the last save settled when the run ends; the
  // run's scope as `Effect.scoped` gives it (`internal/fast/withContext.ts`)
  return locally(
    scoped(Effect.suspend(() => from(initial, start))),
    [
      [
        FiberRef.currentContext,
        (input: Context.Context<never>) => mergeAndAdd(input, config.context, RunSaves.Current, run.saves)
      ],
      [FiberRef.currentTracerSpanAnnotations, HashMap.set("threadId", run.threadId)]
    ],
    { onSuccess: Effect.succeed, onEnd: () => run.encoder.settle() }
  )
}
