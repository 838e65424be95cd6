/**
 * A recording journal (`RunRecord.recording`) keeps the steps of the
 * journal under it. A replay (`agent.replay`, `agent.fork` of a record) run
 * under one serves most of its steps itself, never asking the journal under
 * it: so it asks the recorder to record its own journal instead (`over`),
 * and sends its live steps to the journal under the recorder (`under`). The
 * record then holds every step the replay took, served or live.
 */
import type * as RunJournal from "../RunJournal.js"

const Layers: unique symbol = Symbol.for("@stepwise-agent/core/RunRecord/Layers")

/** A recording journal, with the journal it records and how it records another. */
interface LayeredJournal extends RunJournal.Service {
  readonly [Layers]: Layers
}

/** The journal a recorder records (`under`), and the recorder of another journal sharing its record (`over`). */
export interface Layers {
  readonly under: RunJournal.Service
  readonly over: (journal: RunJournal.Service) => RunJournal.Service
}

/** `recorder`, marked as recording `under`, able to record another journal (`over`) into the same record. */
export const layer = (
  recorder: RunJournal.Service,
  under: RunJournal.Service,
  over: Layers["over"]
): RunJournal.Service => Object.assign(recorder, { [Layers]: { under, over } }) satisfies LayeredJournal

/** The layers of a recording journal; `undefined` for any other journal. */
export const layersOf = (journal: RunJournal.Service): Layers | undefined =>
  Layers in journal ? (journal as LayeredJournal)[Layers] : undefined
