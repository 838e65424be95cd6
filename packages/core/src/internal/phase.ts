/**
 * What every phase of a run shares: it takes the run and its state and gives
 * the state it left and how it ended ({@link Stepped}); the phases that save
 * the thread take the agent's {@link Save}.
 */
import type * as Effect from "effect/Effect"
import type * as Checkpoint from "./checkpoint.js"
import type { Outcome } from "./machine.js"
import type { RunContext } from "./runContext.js"
import type { RunState } from "./runState.js"

/** How a phase ended, and the state it left. */
export interface Stepped {
  readonly state: RunState
  readonly outcome: Outcome
}

/**
 * A phase: it runs on the run's state and says where the run goes. A phase
 * with nothing to run (a hook node with no hook left, no steer message to
 * take in) gives its outcome as it is: no effect to run, no fiber operation.
 */
export type Step<P> = (run: RunContext, state: RunState, phase: P) => Stepped | Effect.Effect<Stepped, unknown, any>

/** Saves the run's thread; with a pending wait, the wait and the run's progress so far. */
export type Save = ReturnType<typeof Checkpoint.make>["save"]
