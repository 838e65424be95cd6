/**
 * A save whose messages are built only when the thread is read back, for the
 * memory checkpointer: it keeps a checkpoint without looking at its messages,
 * so the array of the whole encoded thread (one copy of the thread per step)
 * need not be built at every step, only when the thread is loaded.
 *
 * The capability is a property of the `save` function itself: a checkpointer
 * whose `save` is replaced (a wrapper that logs, say) has none, and gets every
 * checkpoint whole, as before.
 */
import type * as Effect from "effect/Effect"
import type * as Checkpointer from "../Checkpointer.js"

/** A checkpoint without its messages, and what builds them (once: it gives the same array each time). */
export interface Deferred {
  readonly checkpoint: Omit<Checkpointer.Checkpoint, "messages">
  readonly messages: () => ReadonlyArray<unknown>
}

type SaveDeferred = (threadId: string, deferred: Deferred) => Effect.Effect<void>

const key = Symbol.for("@stepwise-agent/core/internal/deferredSave")

/** `save`, which also takes deferred checkpoints through `saveDeferred`. */
export const withDeferred = <S extends Checkpointer.Checkpointer.Service["save"]>(
  save: S,
  saveDeferred: SaveDeferred
): S => Object.assign(save, { [key]: saveDeferred })

/** How `save` takes a deferred checkpoint, if it does. */
export const deferredOf = (save: Checkpointer.Checkpointer.Service["save"]): SaveDeferred | undefined =>
  (save as { readonly [key]?: SaveDeferred })[key]

/** The checkpoint whole. */
export const build = (deferred: Deferred): Checkpointer.Checkpoint => ({
  ...deferred.checkpoint,
  messages: deferred.messages()
})
