/**
 * The effect ledger of a durable run. A call of a tool that is neither
 * read-only nor idempotent runs inside its own activity `<step>`, as every
 * call does, after marking itself started in the run store
 * (`RunStore.markStarted`, one row; an idempotent call runs again after a
 * crash, so it marks nothing). The activity records the call's result. An
 * activity that executes again finds its mark (rather than setting it): a
 * crash cut the call off between its start and its recorded result, so it is
 * answered with `ToolEffect.cutOffResult`, on which `ToolEffect.middleware`
 * asks what to do, and the tool does not run twice.
 */
import * as RunJournal from "@stepwise-agent/core/RunJournal"
import * as ToolEffect from "@stepwise-agent/core/ToolEffect"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"

/**
 * The points of a ledgered call a crash may cut it at: before its mark,
 * after its mark (the tool not begun), after its tool ran (its result not
 * recorded), after its recorded result.
 */
export type CrashPoint = "beforeStarted" | "afterMarked" | "afterStarted" | "afterResult"

/**
 * A fault-injection seam for tests: called at each point of each ledgered
 * call, in the run body's context (a test process kills itself there).
 * Nothing provides it outside tests.
 */
export class CrashSeam extends Context.Reference<CrashSeam>()("@stepwise-agent/workflow/internal/ledger/CrashSeam", {
  defaultValue: (): ((point: CrashPoint, entry: ToolEffect.LedgerEntry) => Effect.Effect<void>) | undefined => undefined
}) {}

/**
 * How a step is journaled (`J`): its result `A` alone, or with what a
 * recorder saw inside it; `of` is what a result given without running the
 * step (a cut-off call) is journaled as, `value` the result a journaled one holds.
 */
export interface JournaledAs<A, J> {
  readonly schema: RunJournal.StepKey.ResultSchema<J>
  readonly of: (value: A) => J
  readonly value: (journaled: J) => A
}

/**
 * The ledger of a run. `record(name, schema, effect)` runs `effect` as the
 * activity `name`, journaled with `schema`; `markStarted(name)` marks the
 * call `name` started, `true` the first time.
 */
export const make = <X, Y>(
  record: <A, E, R>(
    name: string,
    schema: RunJournal.StepKey.ResultSchema<A>,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, X, R | Y>,
  markStarted: (name: string) => Effect.Effect<boolean>
) =>
<A, J, E, R>(
  key: RunJournal.StepKey<A>,
  step: RunJournal.StepKey.Tool<A>,
  journaled: JournaledAs<A, J>,
  effect: Effect.Effect<J, E, R>
): Effect.Effect<J, X, R | Y> => {
  const entry = step.ledger
  const name = RunJournal.stepName(key)
  if (entry === undefined) return record(name, journaled.schema, effect)
  // the seam is read once per call; without one (outside tests) nothing runs between the call's parts
  return Effect.flatMap(CrashSeam, (crash) => {
    const before = <B, E1, R1>(point: CrashPoint, next: Effect.Effect<B, E1, R1>) =>
      crash === undefined ? next : Effect.zipRight(crash(point, entry), next)
    const after = <B, E1, R1>(point: CrashPoint, self: Effect.Effect<B, E1, R1>) =>
      crash === undefined ? self : Effect.zipLeft(self, crash(point, entry))
    const ran = after("afterStarted", effect)
    // an idempotent call runs again after a crash whatever happened before: it needs no mark
    const call = entry.effect === "Idempotent" ? ran : Effect.flatMap(
      markStarted(name),
      (first): Effect.Effect<J, E, R> =>
        first
          ? before("afterMarked", ran)
          : Effect.succeed(journaled.of(step.result.to(ToolEffect.cutOffResult(step.call, entry))))
    )
    return after("afterResult", record(name, journaled.schema, before("beforeStarted", call)))
  })
}
