/**
 * The observation of a wrap chain's layers (`wrapModelCall`, `wrapToolCall`)
 * in a watched, untraced run: a layer whose hook passes on the effect of the
 * layers inside it, which passed theirs on, is observed together with them
 * (`Observer.inHooks`: one observation for the group, the same events), not
 * one each. Any other run, or layer, is observed alone (`Observer.inHook`).
 */
import type * as Effect from "effect/Effect"
import { hookEffect } from "../hookResults.js"
import * as Observer from "../observer.js"

/** The names of a chain's middleware, and of each run of them from `from` to `to`, made once per pair. */
export class LayerNames {
  private readonly runs: Array<Array<ReadonlyArray<string>>> = []

  constructor(readonly names: ReadonlyArray<string>) {}

  between(from: number, to: number): ReadonlyArray<string> {
    return (this.runs[from] ??= [])[to] ??= this.names.slice(from, to + 1)
  }
}

/**
 * The observer of one chain, built for a run (the layers are built inside
 * out, in one synchronous call: the layer outside reads what the one inside
 * left). `observe` gives the effect a layer's hook returned, observed.
 */
export const make = (observer: Observer.Observer, hook: "wrapModelCall" | "wrapToolCall", names: LayerNames) => {
  const merges = !observer.traced && observer.hooks === undefined &&
    (observer.emit !== undefined || observer.decisions !== undefined)
  // the effect the layer last built gave when it passed on (`to`: the innermost layer it observes; `inner`: the
  // effect they pass on); a hook that calls `next` later only leaves a layer observed alone
  let observed: { effect: unknown; readonly to: number; readonly inner: Effect.Effect<any, any, any> } | undefined
  /** `returned`, the effect the hook of layer `index` returned (`passedOn`: what `next` gave), observed. */
  const observe = <A, E, R>(index: number, passedOn: boolean, returned: Effect.Effect<A, E, R>) => {
    const name = names.names[index]!
    if (!merges) return Observer.inHook(observer, name, hook, hookEffect(name, hook, returned))
    if (passedOn && observed !== undefined && observed.effect === returned) {
      const { inner, to } = observed
      const hooked = Observer.inHooks(observer, names.between(index, to), hook, inner) as Effect.Effect<A, E, R>
      // (the outermost layer keeps nothing: no call's request stays alive with the run's chain)
      observed = index === 0 ? undefined : { effect: hooked, to, inner }
      return hooked
    }
    const effect = hookEffect(name, hook, returned)
    const hooked = Observer.inHook(observer, name, hook, effect)
    observed = passedOn && index > 0 ? { effect: hooked, to: index, inner: effect } : undefined
    return hooked
  }
  return observe
}
