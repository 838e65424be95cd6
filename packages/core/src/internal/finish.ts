/**
 * The last phase of a run: the thread saved, and the result; an agent with a
 * structured output fails the run when the model never gave it.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { StructuredOutputError } from "../AgentError.js"
import * as AgentResult from "../AgentResult.js"
import type { Compiled } from "./config.js"
import type { Save, Then } from "./phase.js"
import type { RunContext } from "./runContext.js"
import * as RunState from "./runState.js"

export const make = (config: Compiled, save: Save) =>
(
  run: RunContext,
  state: RunState.RunState,
  phase: { readonly node: "done" },
  then: Then
): Effect.Effect<AgentResult.AgentResult<any>, unknown, any> =>
  Effect.flatMap(
    save(run, state, undefined),
    (state) =>
      config.output !== undefined && Option.isNone(state.output)
        ? Effect.fail(
          new StructuredOutputError({
            reason: `The run ended without the model calling "${config.outputToolName}" with the structured output`
          })
        )
        : then(phase, {
          state,
          outcome: {
            _tag: "End",
            result: AgentResult.Completed({
              threadId: run.threadId,
              state: config.layout.flatten(state),
              text: AgentResult.lastText(state.messages),
              output: state.output,
              usage: RunState.usageOf(state),
              steps: state.step
            })
          }
        })
  )
