/**
 * The effect ledger of a durable run: before a call of a tool that is neither
 * read-only nor idempotent runs, an activity `<step>/started` records its
 * ledger entry (one write more for such a call; an idempotent call runs again
 * after a crash, so it needs none); the
 * call's own activity `<step>` records its result after. A call whose
 * activity executes in a body execution that replayed its `started` entry
 * (rather than recording it) was cut off by a crash between the two: it runs
 * again only when its tool is idempotent, and is otherwise answered with
 * `ToolEffect.cutOffResult`, on which `ToolEffect.middleware` asks what to do.
 */
import * as RunJournal from "@stepwise-agent/core/RunJournal"
import * as ToolEffect from "@stepwise-agent/core/ToolEffect"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"

/** The points of a ledgered call a crash may cut it at. */
export type CrashPoint = "beforeStarted" | "afterStarted" | "afterResult"

/**
 * A fault-injection seam for tests: called at each point of each ledgered
 * call, in the run body's context (a test process kills itself there).
 * Nothing provides it outside tests.
 */
export class CrashSeam extends Context.Reference<CrashSeam>()("@stepwise-agent/workflow/internal/ledger/CrashSeam", {
  defaultValue: (): ((point: CrashPoint, entry: ToolEffect.LedgerEntry) => Effect.Effect<void>) | undefined => undefined
}) {}

/**
 * The ledger of one execution of a run body. `record(name, schema, effect)`
 * runs `effect` as the activity `name`, journaled with `schema`.
 */
export const make = <X, Y>(
  record: <A, E, R>(
    name: string,
    schema: RunJournal.StepKey.ResultSchema<A>,
    effect: Effect.Effect<A, E, R>,
    flush: boolean
  ) => Effect.Effect<A, X, R | Y>
) => {
  /** The steps whose `started` entry this execution recorded (rather than replayed). */
  const startedHere = new Set<string>()
  const crashAt = (point: CrashPoint, entry: ToolEffect.LedgerEntry) =>
    Effect.flatMap(CrashSeam, (crash) => crash === undefined ? Effect.void : crash(point, entry))
  return <A, E, R>(
    key: RunJournal.StepKey<A>,
    step: RunJournal.StepKey.Tool<A>,
    effect: Effect.Effect<A, E, R>
  ): Effect.Effect<A, X, R | Y> => {
    const entry = step.ledger
    const name = RunJournal.stepName(key)
    if (entry === undefined) return record(name, key.schema, effect, true)
    // an idempotent call runs again after a crash whatever its entry says: it needs none written first
    const started = entry.effect === "Idempotent" ? Effect.void : record(
      `${name}/started`,
      ToolEffect.LedgerEntry,
      Effect.sync(() => {
        startedHere.add(name)
        return entry
      }),
      false
    )
    const call = Effect.suspend(() =>
      startedHere.has(name) || entry.effect === "Idempotent"
        ? effect
        : Effect.succeed(step.result.to(ToolEffect.cutOffResult(step.call, entry)))
    )
    return crashAt("beforeStarted", entry).pipe(
      Effect.zipRight(started),
      Effect.zipRight(record(name, key.schema, Effect.zipLeft(call, crashAt("afterStarted", entry)), true)),
      Effect.tap(() => crashAt("afterResult", entry))
    )
  }
}
