/**
 * What a run's saves stored: the state of its last save that the store
 * accepted, for the finalizers its hooks add to the run's `Scope`
 * (`Middleware.runSaves`). The run's checkpoint step sets it when a save
 * succeeds; the driver puts the run's cell in the run's context.
 */
import * as Context from "effect/Context"
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

/** The saves of the running run: a context reference the driver sets for the whole run (`undefined` outside one). */
export class Current extends Context.Reference<Current>()("@stepwise-agent/core/Middleware/RunSaves", {
  defaultValue: (): RunSaves | undefined => undefined
}) {}
