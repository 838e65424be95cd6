/**
 * What a run made outside its thread (a text in a store, a child's thread)
 * whose record no save of the run holds, undone when the run ends: the run
 * failed or was interrupted after making it and before a save held it, or a
 * save found its thread deleted or made again (then nothing it made stays:
 * the thread it was made for is gone). Read from `Middleware.runSaves`.
 */
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"

/** Whether `exit` is a run's failure at a save that found its thread `threadId` deleted, or made again. */
const lostThread = (exit: Exit.Exit<unknown, unknown>, threadId: string): boolean => {
  if (Exit.isSuccess(exit)) return false
  for (const error of Cause.failures(exit.cause)) {
    if (
      error instanceof AgentError.CheckpointError && error.operation === "save" && error.conflict !== undefined &&
      error.threadId === threadId
    ) return true
  }
  return false
}

/**
 * Undoes with `undo`, when the current run of thread `threadId` ends, those
 * of `made` (made by this run, new to its state) that the state of the run's
 * last save does not record (`recorded` reads what a saved state records),
 * and all of them when a save found the thread deleted or made again.
 * Outside a run (a hook called on its own) it does nothing.
 */
export const undoUnsavedAtRunEnd = <R>(
  threadId: string,
  made: ReadonlyArray<string>,
  recorded: (saved: Readonly<Record<string, unknown>>) => ReadonlyArray<string>,
  undo: (made: ReadonlyArray<string>) => Effect.Effect<void, never, R>
): Effect.Effect<void, never, Scope.Scope | R> =>
  made.length === 0 ?
    Effect.void :
    Effect.flatMap(Middleware.runSaves, (saves) =>
      Option.isNone(saves) ? Effect.void : Effect.addFinalizer((exit) => {
        if (lostThread(exit, threadId)) return undo(made)
        const saved = saves.value.state()
        const kept = new Set(Option.isSome(saved) ? recorded(saved.value) : [])
        return undo(made.filter((item) => !kept.has(item)))
      }))
