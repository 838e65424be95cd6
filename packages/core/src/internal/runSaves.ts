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
  /** How many messages the last save held (the run may grow its messages array in place after a save). */
  private length = 0
  constructor(private readonly flatten: AgentState.Layout["flatten"]) {}

  /** A save of `state` succeeded. */
  saved(state: AgentState.Slices): void {
    this.last = state
    this.length = state.messages.length
  }

  /** The state of the run's last save, as the hooks see a state; none before its first save. */
  readonly state = (): Option.Option<Readonly<Record<string, unknown>>> => {
    const last = this.last
    if (last === undefined) return Option.none()
    // a copy: the run may still grow the array it saved
    return Option.some(this.flatten({ ...last, messages: last.messages.slice(0, this.length) }))
  }
}

/** The saves of the running run: a context reference the driver sets for the whole run (`undefined` outside one). */
export class Current extends Context.Reference<Current>()("@stepwise-agent/core/Middleware/RunSaves", {
  defaultValue: (): RunSaves | undefined => undefined
}) {}
