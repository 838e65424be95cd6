/**
 * What every phase of a run shares: it takes the run and its state and gives
 * the state it left and how it ended ({@link Stepped}); the phases that save
 * the thread take the agent's {@link Save}.
 */
import type * as Effect from "effect/Effect"
import type * as AgentResult from "../AgentResult.js"
import type * as Checkpoint from "./checkpoint.js"
import type { Outcome, Phase } from "./machine.js"
import type { RunContext } from "./runContext.js"
import type { RunState } from "./runState.js"

/** How a phase ended, and the state it left. */
export interface Stepped {
  readonly state: RunState
  readonly outcome: Outcome
}

/** The rest of a run once phase `from` ended as `stepped` (given by the driver). */
export type Then = (
  from: Phase,
  stepped: Stepped
) => Effect.Effect<AgentResult.AgentResult<any>, unknown, any>

/**
 * A phase: it runs on the run's state and says where the run goes. A phase
 * with nothing to run (a hook node with no hook left, no steer message to
 * take in) gives its outcome as it is: no effect to run, no fiber operation.
 * A phase that runs an effect goes on with the rest of the run, `then`, in
 * that effect's last continuation: no continuation of the driver's, no
 * success of its own to pass on.
 */
export type Step<P extends Phase> = (
  run: RunContext,
  state: RunState,
  phase: P,
  then: Then
) => Stepped | Effect.Effect<AgentResult.AgentResult<any>, unknown, any>

/** Saves the run's thread; with a pending wait, the wait and the run's progress so far. */
export type Save = ReturnType<typeof Checkpoint.make>["save"]
