/**
 * A save whose array of the whole encoded thread is built only when the
 * thread is read back, for the checkpointers of this package: the memory
 * checkpointer keeps the checkpoint without looking at its messages, the
 * thread log takes only the encoded messages past what it committed. So the
 * array of the whole encoded thread (one copy of the thread per step) need
 * not be built at every step, only when the thread is loaded.
 *
 * The capability is a property of the `save` function itself: a checkpointer
 * whose `save` is replaced (a wrapper that logs, say) has none, and gets every
 * checkpoint whole, as before.
 */
import type * as Effect from "effect/Effect"
import type { CheckpointError } from "../AgentError.js"
import type * as Checkpointer from "../Checkpointer.js"

/** A checkpoint without its messages, and what builds them (once: it gives the same array each time). */
export interface Deferred {
  readonly checkpoint: Omit<Checkpointer.Checkpoint, "messages">
  readonly messages: () => ReadonlyArray<unknown>
  /** How many messages the thread has. */
  readonly length: number
  /** Its encoded messages from `index` on (the same objects `messages()` holds there), without building the whole. */
  readonly from: (index: number) => ReadonlyArray<unknown>
  /**
   * Whether the thread keeps every message of `previous` (an encoded thread,
   * or an earlier deferred save) and may add more, when that can be told
   * without building either array; `undefined` when it cannot.
   */
  readonly extends: (previous: ReadonlyArray<unknown> | Deferred) => boolean | undefined
}

/** A save as a checkpointer takes it: whole, or deferred. */
export type Saved = ReadonlyArray<unknown> | Deferred

/** Whether `saved` is a deferred save (not an encoded array). */
export const isDeferred = (saved: Saved): saved is Deferred => !Array.isArray(saved)

/** The whole encoded thread of `saved` (built, for a deferred save). */
export const messagesOf = (saved: Saved): ReadonlyArray<unknown> => isDeferred(saved) ? saved.messages() : saved

/** How a checkpointer takes a deferred save. */
export type SaveDeferred = (threadId: string, deferred: Deferred) => Effect.Effect<void, CheckpointError>

const key = Symbol.for("@stepwise-agent/core/internal/deferredSave")

/** `save`, which also takes deferred checkpoints through `saveDeferred`. */
export const withDeferred = <S extends Checkpointer.Service["save"]>(
  save: S,
  saveDeferred: SaveDeferred
): S => Object.assign(save, { [key]: saveDeferred })

/** How `save` takes a deferred checkpoint, if it does. */
export const deferredOf = (save: Checkpointer.Service["save"]): SaveDeferred | undefined =>
  (save as { readonly [key]?: SaveDeferred })[key]

/** The checkpoint whole. */
export const build = (deferred: Deferred): Checkpointer.Checkpoint => ({
  ...deferred.checkpoint,
  messages: deferred.messages()
})
