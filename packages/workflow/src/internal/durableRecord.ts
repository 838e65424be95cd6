/**
 * The record of a durable run (`RunRecord`), kept in the `RecordStore` of the
 * workflow's context as the run goes: the run's journal is wrapped in a
 * recording one, whose entries are written by their place in the run. The
 * body executes again after each wait and each crash and takes the same steps
 * in the same order, so an entry already stored is not written again (it
 * keeps the request and timing of the execution that ran the step); a wait's
 * entry is written again once it has its decision.
 *
 * A middleware decision is reported again by each execution that runs its
 * hook. One reported inside a model or tool call (a `wrapModelCall` or
 * `wrapToolCall` hook), and a hook that completed there, only by the
 * execution that ran the call: the durable journal keeps them with the
 * call's result (`RunJournal.Witnessed`) and gives them back to the
 * executions that replay it, so each execution has them, whether it ran the
 * call or replayed it after a wait or a crash (a call journaled by an older
 * version gives none back: those it had were stored by the execution that
 * ran it). The entries that are no decision or hook (steps, waits, the end)
 * take every `stride`-th slot, whatever the decisions before them, and the
 * decisions and hooks after an entry the slots up to the next one: those of
 * the hooks every execution runs come first there, and those of a step last,
 * before its entry.
 *
 * A record stored by the previous version numbered its entries 0, 1, 2, … in
 * the run's order and kept no decisions or hooks (slot 0, which this
 * numbering never takes, tells it apart): a run of it that goes on after an
 * upgrade goes on in that numbering, without them, so no step is stored twice.
 */
import type * as AgentResult from "@stepwise-agent/core/AgentResult"
import type * as RunJournal from "@stepwise-agent/core/RunJournal"
import * as RunRecord from "@stepwise-agent/core/RunRecord"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
// the values of AgentWorkflow.ts are read only inside functions: it imports this module (a cycle)
import { AgentRunFailed, OtherError, RunCancelled } from "../AgentWorkflow.js"
import * as RecordStore from "../RecordStore.js"

/**
 * The slots of the store from one entry that is no decision or hook to the
 * next: the decisions and hooks between them take the slots between (past
 * `stride - 1` of them, the last slot keeps the first that took it). Small
 * enough for a 32-bit slot column to hold two million entries.
 */
const stride = 1024

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

const decodeEntry = Schema.decodeUnknownOption(Schema.parseJson(RunRecord.Entry))

/** Whether a stored record is in the previous numbering (0, 1, 2, …): it has slot 0, which this one never takes. */
const isLegacy = (stored: RecordStore.Stored): boolean => stored.entries.some(([slot]) => slot === 0)

/** The stored lines that read as entries, in slot order. */
const entriesOf = (lines: Iterable<readonly [number, string]>): ReadonlyArray<RunRecord.Entry> =>
  [...lines].sort(([a], [b]) => a - b).flatMap(([, line]) => Option.toArray(decodeEntry(line)))

/** What a run failed with, for its record: the error a journaled failure (`AgentRunFailed`) keeps. */
const failureOf = (error: unknown): unknown => {
  if (!(error instanceof AgentRunFailed)) return error
  const kept: unknown = error.error
  const tag = kept instanceof OtherError
    ? kept.tag
    : Predicate.hasProperty(kept, "_tag") && typeof kept._tag === "string"
    ? kept._tag
    : error._tag
  return { _tag: tag, message: error.reason }
}

/**
 * The journal of the run `runId` of `threadId`, recording into the context's
 * `RecordStore` (`journal` itself when there is none), with `end`, which
 * records how the run ended, and `stopped`, which records its failure (a
 * cancel that stopped it working, as cancelled). A store that fails fails the
 * run (a defect): a record with a hole would replay wrong. A durable fork's
 * record says what it forked (`forkedFrom`): its first entries are the steps
 * it served from that record.
 */
export const recorder = (
  runId: string,
  threadId: string,
  journal: RunJournal.Service,
  forkedFrom: RunRecord.Header["forkedFrom"]
) =>
  Effect.gen(function*() {
    const found = yield* Effect.serviceOption(RecordStore.RecordStore)
    if (Option.isNone(found)) {
      return {
        journal,
        end: (_: AgentResult.AgentResult<any>) => Effect.void,
        stopped: (_: Cause.Cause<unknown>) => Effect.void
      }
    }
    const store = found.value
    const stored = yield* Effect.orDie(store.read(runId))
    const known = new Map(stored.entries)
    const startedAt = (stored.header === undefined ? undefined : startOf(stored.header)) ??
      (yield* Clock.currentTimeMillis)
    let header = stored.header
    const legacy = isLegacy(stored)
    // the store's slot of each of this execution's entries, by the recorder's slot
    const slots = new Map<number, number>()
    let entries = 0
    let decisionsSince = 0
    /** Where `entry` goes in the store; none for a decision or hook of a record in the previous numbering. */
    const slotOf = (slot: number, entry: RunRecord.Entry): number | undefined => {
      const given = slots.get(slot)
      if (given !== undefined) return given
      const between = entry._tag === "Decision" || entry._tag === "Hook"
      if (legacy) {
        if (between) return undefined
        slots.set(slot, entries)
        return entries++
      }
      if (between) {
        decisionsSince = Math.min(decisionsSince + 1, stride - 1)
      } else {
        entries++
        decisionsSince = 0
      }
      const at = entries * stride + decisionsSince
      slots.set(slot, at)
      return at
    }
    const { add, journal: recording } = RunRecord.recording(journal, {
      put: (slot, entry) =>
        Effect.suspend(() => {
          const at = slotOf(slot, entry)
          if (at === undefined) return Effect.void
          const before = known.get(at)
          const newer = entry._tag === "Wait" && entry.decision !== undefined
          if (before !== undefined && !(newer && !decided(before))) return Effect.void
          const line = JSON.stringify(entry)
          known.set(at, line)
          return Effect.orDie(store.put(runId, at, line))
        }),
      input: (input) =>
        Effect.suspend(() => {
          if (header !== undefined) return Effect.void
          header = JSON.stringify(
            RunRecord.Header.make({
              version: RunRecord.version,
              threadId,
              startedAt,
              input,
              ...(forkedFrom === undefined ? {} : { forkedFrom })
            })
          )
          return Effect.orDie(store.put(runId, -1, header))
        })
    })
    const duration = Effect.map(Clock.currentTimeMillis, (now) => now - startedAt)
    const end = (result: AgentResult.AgentResult<any>) =>
      Effect.flatMap(duration, (millis) => add(RunRecord.endOf(result, millis)))
    const stopped = (cause: Cause.Cause<unknown>) => {
      // a run that suspends to wait, or is interrupted (a cancel while it waits: `cancel` records that), goes on
      if (Cause.isInterruptedOnly(cause)) return Effect.void
      const error = Cause.squash(cause)
      return Effect.flatMap(duration, (millis) =>
        add(RunRecord.stoppedEnd(
          entriesOf(known),
          error instanceof RunCancelled ? { outcome: "Cancelled" } : { outcome: "Failed", error: failureOf(error) },
          millis
        )))
    }
    return { journal: recording, end, stopped }
  })

/**
 * Records that the run `runId` was cancelled, once it has stopped: its
 * record (when it has one, and no end yet) ends `Cancelled`.
 */
export const recordCancelled = (runId: string) =>
  Effect.gen(function*() {
    const found = yield* Effect.serviceOption(RecordStore.RecordStore)
    if (Option.isNone(found)) return
    const stored = yield* Effect.orDie(found.value.read(runId))
    if (stored.header === undefined) return
    const entries = entriesOf(stored.entries)
    if (entries.some((entry) => entry._tag === "End")) return
    const last = stored.entries.reduce((max, [slot]) => Math.max(max, slot), 0)
    const now = yield* Clock.currentTimeMillis
    const end = RunRecord.stoppedEnd(entries, { outcome: "Cancelled" }, now - (startOf(stored.header) ?? now))
    const slot = isLegacy(stored) ? last + 1 : (Math.floor(last / stride) + 1) * stride
    yield* Effect.orDie(found.value.put(runId, slot, JSON.stringify(end)))
  })

/** The stored record of the run `runId`, read as a `RunRecord` (a line that does not read fails with `RunRecordError`). */
export const readRecord = (runId: string) =>
  Effect.gen(function*() {
    const stored = yield* (yield* RecordStore.RecordStore).read(runId)
    if (stored.header === undefined) return yield* new RecordStore.RecordNotFound({ runId })
    return yield* RunRecord.fromJsonl([stored.header, ...stored.entries.map(([, line]) => line)].join("\n"))
  })
