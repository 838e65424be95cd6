/**
 * The whole-checkpoint form of `Checkpointer.DeferredCheckpoint`: what a
 * `save` derived by `Checkpointer.make` hands to `append`, and what builds a
 * deferred checkpoint back into a whole one. The deferred form an agent's run
 * makes, which never builds the whole thread at a step, is in `checkpoint.ts`.
 */
import type * as Checkpointer from "../Checkpointer.js"
import * as Lineage from "./fast/lineage.js"

/** A checkpoint whose messages are already built, as a deferred checkpoint. */
export class WholeThread implements Checkpointer.DeferredCheckpoint {
  readonly checkpoint: Omit<Checkpointer.Checkpoint, "messages">
  constructor(readonly whole: Checkpointer.Checkpoint) {
    const { messages: _, ...checkpoint } = whole
    this.checkpoint = checkpoint
  }

  get length(): number {
    return this.whole.messages.length
  }

  from(index: number): ReadonlyArray<unknown> {
    return index === 0 ? this.whole.messages : this.whole.messages.slice(index)
  }

  messages(): ReadonlyArray<unknown> {
    return this.whole.messages
  }

  extends(previous: Checkpointer.DeferredCheckpoint): boolean {
    return extendsByReference(previous.messages(), this.whole.messages)
  }
}

/** `checkpoint` as a deferred checkpoint. */
export const whole = (checkpoint: Checkpointer.Checkpoint): Checkpointer.DeferredCheckpoint =>
  new WholeThread(checkpoint)

/** The checkpoint whole (the one it was made of, for a whole one). */
export const build = (deferred: Checkpointer.DeferredCheckpoint): Checkpointer.Checkpoint =>
  deferred instanceof WholeThread ? deferred.whole : { ...deferred.checkpoint, messages: deferred.messages() }

/** `after` keeps every message of `before` (the same objects, in order). */
export const extendsByReference = (before: ReadonlyArray<unknown>, after: ReadonlyArray<unknown>): boolean =>
  after.length >= before.length && Lineage.sharedPrefix(before, after) === before.length
