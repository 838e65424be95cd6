/**
 * The record of a durable run (`RunRecord`), kept in the `RecordStore` of the
 * workflow's context as the run goes: the run's journal is wrapped in a
 * recording one, whose entries are written by their place in the run. The
 * body executes again after each wait and each crash and takes the same steps
 * in the same order, so an entry already stored is not written again (it
 * keeps the request and timing of the execution that ran the step); a wait's
 * entry is written again once it has its decision.
 */
import type * as AgentResult from "@stepwise-agent/core/AgentResult"
import type * as RunJournal from "@stepwise-agent/core/RunJournal"
import * as RunRecord from "@stepwise-agent/core/RunRecord"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as RecordStore from "../RecordStore.js"

/** Whether the stored line is a wait's entry that has its decision. */
const decided = (line: string): boolean => {
  try {
    const entry: unknown = JSON.parse(line)
    return Predicate.hasProperty(entry, "decision") && entry.decision !== undefined
  } catch {
    return false
  }
}

/** The start time a stored header holds, if it reads. */
const startOf = (header: string): number | undefined => {
  try {
    const parsed: unknown = JSON.parse(header)
    return Predicate.hasProperty(parsed, "startedAt") && typeof parsed.startedAt === "number"
      ? parsed.startedAt
      : undefined
  } catch {
    return undefined
  }
}

/**
 * The journal of the run `runId` of `threadId`, recording into the context's
 * `RecordStore` (`journal` itself when there is none, or when not `enabled`),
 * and `end`, which records how the run ended. A store that fails fails the
 * run (a defect): a record with a hole would replay wrong.
 */
export const recorder = (runId: string, threadId: string, journal: RunJournal.Service, enabled: boolean) =>
  Effect.gen(function*() {
    const found = enabled ? yield* Effect.serviceOption(RecordStore.RecordStore) : Option.none()
    if (Option.isNone(found)) {
      return { journal, end: (_: AgentResult.AgentResult<any>) => Effect.void }
    }
    const store = found.value
    const stored = yield* Effect.orDie(store.read(runId))
    const known = new Map(stored.entries)
    const startedAt = (stored.header === undefined ? undefined : startOf(stored.header)) ??
      (yield* Clock.currentTimeMillis)
    let header = stored.header
    const { add, journal: recording } = RunRecord.recording(journal, {
      put: (slot, entry) =>
        Effect.suspend(() => {
          const before = known.get(slot)
          const newer = entry._tag === "Wait" && entry.decision !== undefined
          if (before !== undefined && !(newer && !decided(before))) return Effect.void
          const line = JSON.stringify(entry)
          known.set(slot, line)
          return Effect.orDie(store.put(runId, slot, line))
        }),
      input: (input) =>
        Effect.suspend(() => {
          if (header !== undefined) return Effect.void
          header = JSON.stringify(RunRecord.Header.make({ version: RunRecord.version, threadId, startedAt, input }))
          return Effect.orDie(store.put(runId, -1, header))
        })
    })
    const end = (result: AgentResult.AgentResult<any>) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => add(RunRecord.endOf(result, now - startedAt)))
    return { journal: recording, end }
  })

/** The stored record of the run `runId`, read as a `RunRecord` (a line that does not read fails with `RunRecordError`). */
export const readRecord = (runId: string) =>
  Effect.gen(function*() {
    const stored = yield* (yield* RecordStore.RecordStore).read(runId)
    if (stored.header === undefined) return yield* new RecordStore.RecordNotFound({ runId })
    return yield* RunRecord.fromJsonl([stored.header, ...stored.entries.map(([, line]) => line)].join("\n"))
  })
