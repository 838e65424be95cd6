/**
 * The texts a middleware wrote to the `Offload.OffloadStore` for a thread
 * (Offload's tool results, Summarization's evicted messages), kept as their
 * references in a state slice of its own (`Offload.Offloads` under `key`), so
 * that `deleteThread` removes them. A fork starts with a copy of its source's
 * slice, which names the source: only the thread a slice names owns its
 * references. What a run wrote whose reference no save of the run holds is
 * removed when the run ends ({@link removeUnsavedAtRunEnd}).
 */
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Offload from "../Offload.js"
import * as IdentityTable from "./fast/identityTable.js"
import { undoUnsavedAtRunEnd } from "./unsavedAtRunEnd.js"

/** The references the thread `threadId` wrote, by the slice under `key` of its state (none when it is a source's). */
export const ownRefs = (state: object, key: string, threadId: string): ReadonlyArray<string> => {
  const slice = (state as Readonly<Record<string, unknown>>)[key] as Offload.Offloads | null | undefined
  return slice != null && slice.threadId === threadId ? slice.refs : []
}

/**
 * Where each reference is in a recorded list of a thread's references, shared
 * by the lists that extend it (each new list is the last one and the new
 * references), so that looking one up does not scan the list; `length`: the
 * longest list it indexes (`fast/identityTable.ts`).
 */
interface RefIndex {
  readonly at: Map<string, number>
  length: number
}
const refIndexes = IdentityTable.make<ReadonlyArray<string>, RefIndex>()

const refIndexOf = (refs: ReadonlyArray<string>): RefIndex => {
  let index = refIndexes.get(refs)
  if (index === undefined) {
    index = { at: new Map(refs.map((ref, i) => [ref, i])), length: refs.length }
    refIndexes.set(refs, index)
  }
  return index
}

/**
 * The update of the slice under `key` that records `refs` (distinct
 * references) as written by the thread `threadId`, and those of them it did
 * not have; `undefined` when it had them all. Only the new ones are
 * appended: the list is never copied per step.
 */
export const recording = <K extends string>(
  state: object,
  key: K,
  threadId: string,
  refs: ReadonlyArray<string>
): { readonly state: { readonly [k in K]: Offload.Offloads }; readonly fresh: ReadonlyArray<string> } | undefined => {
  const known = ownRefs(state, key, threadId)
  const index = refIndexOf(known)
  const has = (ref: string) => {
    const at = index.at.get(ref)
    return at !== undefined && at < known.length && known[at] === ref
  }
  let fresh: Array<string> | undefined
  for (const ref of refs) if (!has(ref)) (fresh ??= []).push(ref)
  if (fresh === undefined) return undefined
  const next = known.concat(fresh)
  // the list this one extends is the longest the index knows: the index goes on with the new one
  if (index.length === known.length) {
    fresh.forEach((ref, i) => index.at.set(ref, known.length + i))
    index.length = next.length
    refIndexes.set(next, index)
  }
  const slice: Offload.Offloads = { threadId, refs: next }
  return { state: { [key]: slice } as { readonly [k in K]: Offload.Offloads }, fresh }
}

/**
 * Removes texts from a store, for the middleware named `module`. It cannot
 * fail: a failed removal is logged (the reference and the store's reason,
 * scrubbed) and the other texts are still removed. A store without `remove`
 * keeps them: that is logged once per middleware (no reference, no text).
 */
export const remover = (module: string) => {
  let warned = false
  return (service: Offload.OffloadStore.Service, refs: ReadonlyArray<string>): Effect.Effect<void> => {
    if (refs.length === 0) return Effect.void
    if (service.remove === undefined) {
      if (warned) return Effect.void
      warned = true
      return Effect.logWarning(
        `${module}: the offload store has no remove, so the texts of deleted threads stay in it ` +
          `(logged once)`
      )
    }
    const remove = service.remove
    return Effect.forEach(refs, (ref) =>
      Effect.suspend(() => remove(ref)).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logWarning(
            `${module}: the text offloaded under "${ref}" was not removed from the store: ${
              Secrets.scrubText(Secrets.messageOf(Cause.squash(cause)))
            }`
          )
        )
      ), { discard: true })
  }
}

/**
 * Removes with `forget`, when the current run ends, those of `refs` (texts
 * this run wrote for the thread `threadId`, new to its state) that the run's
 * last save does not record under `key`: the run failed or was interrupted
 * after writing them and before a save held them, or it saved none. When a
 * save found the thread deleted or made again (a `CheckpointError` with a
 * `conflict`) none of them stays: the thread they were written for is gone.
 * Outside a run (a hook called on its own) it does nothing.
 */
export const removeUnsavedAtRunEnd = <R>(
  key: string,
  threadId: string,
  refs: ReadonlyArray<string>,
  forget: (refs: ReadonlyArray<string>) => Effect.Effect<void, never, R>
): Effect.Effect<void, never, Scope.Scope | R> =>
  undoUnsavedAtRunEnd(threadId, refs, (saved) => ownRefs(saved, key, threadId), forget)
