/**
 * What a run's saves stored: the state of its last save that the store
 * accepted, for the finalizers its hooks add to the run's `Scope`
 * (`Middleware.runSaves`). The run's checkpoint step sets it when a save
 * succeeds; the driver gives the run's cell to its fiber.
 */
import * as FiberRef from "effect/FiberRef"
import { globalValue } from "effect/GlobalValue"
import * as Option from "effect/Option"
import type * as AgentState from "../AgentState.js"

/** The last state a run saved (none yet), flattened as the hooks see it when asked. */
export class RunSaves {
  private last: AgentState.Slices | undefined = undefined
  constructor(private readonly flatten: AgentState.Layout["flatten"]) {}

  /** A save of `state` succeeded. */
  saved(state: AgentState.Slices): void {
    this.last = state
  }

  /** The state of the run's last save, as the hooks see a state; none before its first save. */
  readonly state = (): Option.Option<Readonly<Record<string, unknown>>> =>
    this.last === undefined ? Option.none() : Option.some(this.flatten(this.last))
}

/** The saves of the run the fiber runs (`undefined` outside a run). */
export const current: FiberRef.FiberRef<RunSaves | undefined> = globalValue(
  Symbol.for("@stepwise-agent/core/Middleware/RunSaves"),
  () => FiberRef.unsafeMake<RunSaves | undefined>(undefined)
)
