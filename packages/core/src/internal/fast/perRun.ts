/**
 * What stays the same for every step of a run (a wrap chain), built on its
 * first use and kept until the run is dropped: a `WeakMap` keyed by the run.
 * See the README of this folder for the bench row and the fallback.
 */
import type { RunContext } from "../runContext.js"

/**
 * `build` memoized per run: what stays the same for every step of a run (a
 * wrap chain) is built on its first use and kept until the run is dropped.
 */
export const perRun = <A>(build: (run: RunContext) => A): (run: RunContext) => A => {
  const built = new WeakMap<RunContext, A>()
  return (run) => {
    let value = built.get(run)
    if (value === undefined) {
      value = build(run)
      built.set(run, value)
    }
    return value
  }
}
