/**
 * What stays fixed during one run: its thread, who watches it, the journal
 * its steps go through and the names they get there, the interrupt keys it
 * used and the encoder of its checkpoints.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as RunJournal from "../RunJournal.js"
import type { ThreadEncoder } from "./checkpoint.js"
import type { Lease } from "./inbox.js"
import * as Observer from "./observer.js"
import type { RunSaves } from "./runSaves.js"
import type { StepKeys } from "./stepKeys.js"

export interface RunContext extends Observer.Observer {
  readonly threadId: string
  /** The thread's incarnation (see `Checkpointer.Checkpoint`): stored by every save, shown to the hooks. */
  readonly incarnation: string | undefined
  readonly journal: RunJournal.Service
  readonly keys: StepKeys
  /** The interrupt keys used so far in this run (a key names one wait). */
  readonly interruptKeys: Set<string>
  /** The thread as last encoded for a checkpoint, reused for its unchanged prefix. */
  readonly encoder: ThreadEncoder
  /** The run's hold on its thread's inbox: where steer messages wait for its next model step. */
  readonly inbox: Lease
  /** What the run's saves stored, for the finalizers of its hooks (`Middleware.runSaves`). */
  readonly saves: RunSaves
}

/** `effect` as the step `key` of the run's journal (carrying the hook reporting to a journal that runs it elsewhere). */
export const journaled = <A, E, R>(
  run: RunContext,
  key: RunJournal.StepKey<A>,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  run.journal === RunJournal.inProcess
    ? effect
    : Effect.flatMap(Observer.carried(effect), (carried) => run.journal.step(key, carried))

/** `key`, or `key#2`, `key#3`, … when the run already used it: an interrupt key names one wait. */
export const uniqueInterruptKey = (run: RunContext, key: string): string => {
  let unique = key
  for (let n = 2; run.interruptKeys.has(unique); n++) unique = `${key}#${n}`
  run.interruptKeys.add(unique)
  return unique
}

/** The run's input after the `transformInput` hooks, shown to the journal's witness (a recorder or a replayer). */
export const witnessInput = <E, R>(
  run: RunContext,
  transformed: Effect.Effect<ReadonlyArray<Prompt.Message>, E, R>
): Effect.Effect<ReadonlyArray<Prompt.Message>, E | unknown, R> => {
  const witness = run.journal.witness
  return witness === undefined ? transformed : Effect.tap(transformed, witness.input)
}
