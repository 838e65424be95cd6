/**
 * The journal of a run on the workflow engine: each step of the loop is an
 * activity named after its key (`RunJournal.stepName`), a checkpoint's save
 * waits for the next activity, and a wait for a decision is a
 * `DurableDeferred`, optionally raced against a durable clock.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Activity from "@effect/workflow/Activity"
import * as DurableClock from "@effect/workflow/DurableClock"
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as RunJournal from "@stepwise-agent/core/RunJournal"
import * as Secrets from "@stepwise-agent/core/Secrets"
import type * as Wait from "@stepwise-agent/core/Wait"
import * as Arr from "effect/Array"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
// the values of AgentWorkflow.ts are read only inside functions: it imports this module (a cycle)
import {
  AgentRunFailed,
  DecisionOf,
  type Options,
  OtherError,
  RunCancelled,
  RunError,
  RunFailure
} from "../AgentWorkflow.js"
import { withSharedExitSchema } from "./clusterStorage.js"
import { identityMemo } from "./fast/identityMemo.js"
import * as NamedSchemas from "./fast/namedSchemas.js"
import * as Ledger from "./ledger.js"

/** An error of another package as journaled: by its `_tag` (`Error` when it has none). */
const otherErrorOf = (error: unknown): OtherError =>
  new OtherError({ tag: Predicate.hasProperty(error, "_tag") && typeof error._tag === "string" ? error._tag : "Error" })

/**
 * A run's failure as journaled: a cancellation stays one, and any other
 * error becomes an `AgentRunFailed` that keeps it, scrubbed, when it is one
 * of the agent's own, and its tag otherwise.
 */
export const asRunFailure = (error: unknown): AgentRunFailed | RunCancelled => {
  if (error instanceof AgentRunFailed || error instanceof RunCancelled) return error
  const scrubbed = Secrets.scrubError(error)
  return new AgentRunFailed({
    error: Schema.is(RunError)(scrubbed) ? scrubbed : otherErrorOf(scrubbed),
    reason: Secrets.messageOf(scrubbed)
  })
}

/** A step's result journaled alone (encoded with its key's schema), as every step was before `stepWitnessed`. */
const alone = <A>(key: RunJournal.StepKey<A>): Ledger.JournaledAs<A, A> => ({
  schema: key.schema,
  of: identity,
  value: identity
})

/** The shape a result with something witnessed is journaled in. */
const Beside = <A>(schema: RunJournal.StepKey.ResultSchema<A>) =>
  Schema.Struct({ step: schema, witnessed: Schema.NonEmptyArray(RunJournal.Witnessed.value) })

/** {@link makeWitnessed} of each result schema, made once. */
const witnessedSchemas = identityMemo((schema: Schema.Schema.Any): Schema.Schema.Any =>
  makeWitnessed(schema as RunJournal.StepKey.ResultSchema<unknown>)
)

/**
 * The schema a step's result is journaled with beside what a recorder saw
 * inside it (`RunJournal.Witnessed`): as `{ step, witnessed }`; with nothing
 * witnessed, as the result alone, which is how every step was journaled
 * before and reads back with nothing witnessed. One per result schema
 * (`fast/identityMemo.ts`), so the activities of one kind of step share
 * their exit schema.
 */
export const withWitnessed = <A>(
  schema: RunJournal.StepKey.ResultSchema<A>
): RunJournal.StepKey.ResultSchema<readonly [A, RunJournal.Witnessed]> =>
  witnessedSchemas(schema) as RunJournal.StepKey.ResultSchema<readonly [A, RunJournal.Witnessed]>

/** The schema {@link withWitnessed} gives for `schema`. */
const makeWitnessed = <A>(
  schema: RunJournal.StepKey.ResultSchema<A>
): RunJournal.StepKey.ResultSchema<readonly [A, RunJournal.Witnessed]> => {
  const beside = Beside(schema)
  return Schema.transformOrFail(Schema.Unknown, Schema.typeSchema(Schema.Tuple(schema, RunJournal.Witnessed)), {
    strict: true,
    decode: (stored) =>
      Predicate.hasProperty(stored, "step") && Predicate.hasProperty(stored, "witnessed")
        ? ParseResult.map(
          ParseResult.decodeUnknown(beside)(stored),
          ({ step, witnessed }) => [step, witnessed] as const
        )
        : ParseResult.map(ParseResult.decodeUnknown(schema)(stored), (step) => [step, []] as const),
    encode: ([step, witnessed]) =>
      Arr.isNonEmptyReadonlyArray(witnessed)
        ? ParseResult.encodeUnknown(beside)({ step, witnessed })
        : ParseResult.encodeUnknown(schema)(step)
  })
}

/** A step's result journaled beside what a recorder saw inside it ({@link withWitnessed}). */
const witnessedAs = <A>(key: RunJournal.StepKey<A>): Ledger.JournaledAs<A, readonly [A, RunJournal.Witnessed]> => ({
  schema: withWitnessed(key.schema),
  of: (value) => [value, []],
  value: ([value]) => value
})

/**
 * Runs `effect` as an activity named `name`, with the services of its
 * caller (an engine may execute the activity on another fiber).
 */
export const inActivity = <S extends Schema.Schema.AnyNoContext, E, R>(
  name: string,
  success: S,
  effect: Effect.Effect<Schema.Schema.Type<S>, E, R>
) =>
  Effect.gen(function*() {
    const context = Context.omit(WorkflowEngine.WorkflowInstance)(yield* Effect.context<R>())
    const activity = Activity.make({
      name,
      success: NamedSchemas.stepResult(success),
      error: NamedSchemas.runFailure(RunFailure),
      execute: effect.pipe(
        // defects are journaled as they are: scrubbed first, as failures are by `asRunFailure`
        Effect.mapErrorCause(Secrets.scrubCause),
        Effect.mapError(asRunFailure),
        Effect.provide(context)
      )
    })
    return yield* withSharedExitSchema(activity)
  })

/**
 * An activity as the step of the loop it journals. The loop's journal
 * contract (`RunJournal.Service`) gives a step the errors and requirements of
 * the loop's own effect; an activity fails with the journal's record of a
 * failure (`RunFailure`), which the loop passes on as the run's failure for
 * the run body to read back (`asRunFailure`), and needs the workflow's
 * engine, instance and scope (for compensations), which every run body has.
 * This is the one place the two contracts meet.
 */
const asLoopStep = <A, E, R>(
  activity: Effect.Effect<
    A,
    AgentRunFailed | RunCancelled,
    R | WorkflowEngine.WorkflowEngine | WorkflowEngine.WorkflowInstance | Scope.Scope
  >
): Effect.Effect<A, E, R> => activity as Effect.Effect<A, never, R>

/**
 * The decision a wait's `decisionTimeout` gives when its time is up, checked
 * against the wait's decision schema before it is journaled: a value the
 * schema cannot encode fails the run with `InvalidResume`.
 */
const timedOut = <Request, Decision>(
  interrupt: RunJournal.Interrupt<Request, Decision>,
  decide: (interrupt: Wait.Interrupt) => unknown
) =>
  Effect.gen(function*() {
    const given = decide({ middleware: interrupt.middleware, value: interrupt.value, key: interrupt.key })
    // `decide` is typed by the workflow's waits, not by this one's: the decision is the one it encodes to
    const value = yield* Schema.encodeUnknown(interrupt.decision)(given).pipe(
      Effect.flatMap(Schema.decodeUnknown(interrupt.decision)),
      Effect.mapError((error) =>
        new AgentError.InvalidResume({
          threadId: interrupt.threadId,
          middleware: interrupt.middleware,
          reason: `the decisionTimeout's decision does not encode with the wait's decision schema: ${
            Secrets.scrubText(AgentError.describeParseError(error))
          }`
        })
      )
    )
    return { value, by: "timeout", decidedAt: yield* Clock.currentTimeMillis }
  })

/*
 * `cancel` records its request in the `RunStore` (`requestCancel`, a record of
 * its own, apart from the decisions of waits) before it interrupts a run. The
 * engines apply a cancel only when a run suspends (or, in memory, ends): a
 * run that is working would otherwise go on to its end (on the cluster engine
 * the signal even waits behind the running execution). So a working run
 * reads the request before each model call it makes, and fails with
 * {@link RunCancelled} instead; `status` reads that as `Cancelled`.
 */

/** What the journal of a run reads and writes in the `RunStore`, for that run. */
export interface RunStoreOfRun {
  /** Whether the run was asked to stop. */
  readonly cancelled: Effect.Effect<boolean>
  /** The thread's stored steer messages the look `look` takes in. */
  readonly claimSteered: (look: string) => Effect.Effect<ReadonlyArray<Prompt.Message>>
  /** Marks a ledgered call started: `true` the first time (`RunStore.markStarted`). */
  readonly markStarted: (step: string) => Effect.Effect<boolean>
}

/**
 * The journal of one run on the workflow engine, and `flush`, which writes
 * the checkpoints it still holds.
 *
 * A checkpoint is not an activity of its own: its save waits for the next
 * activity that executes and runs inside it, first (one round trip through
 * the engine's storage less per step). An activity that executes runs after
 * every save before it, so it writes those it took; one that replays from
 * the journal executed earlier with the same saves before it, so they were
 * written then and are dropped, and a replay never writes an older
 * checkpoint over a newer one. Before a wait and when the run ends there is
 * no next activity: `flush` writes what is left as one activity, named
 * after the last of those checkpoints.
 */
export const makeJournal = (options: Options, runId: string, store: RunStoreOfRun) => {
  const { cancelled, claimSteered } = store
  // A look into the inbox takes in the messages sent in this process, then those stored for the thread.
  // The stored ones are claimed first: a store that fails ends the look before it took any message out of
  // the inbox, so none is lost.
  const withStored = <A, E, R>(
    held: Effect.Effect<A, E, R>,
    messages: RunJournal.StepKey.Same<ReadonlyArray<Prompt.Message>, A>,
    look: string
  ) =>
    Effect.flatMap(
      claimSteered(look),
      (stored) => Effect.map(held, (inProcess) => messages.to([...messages.from(inProcess), ...stored]))
    )
  // A model call about to run (a replayed one is read from the journal and never gets here) checks
  // for a cancel first and ends the run instead: the tool calls before it all have their results.
  const unlessCancelled = <A, E, R>(call: Effect.Effect<A, E, R>): Effect.Effect<A, E | RunCancelled, R> =>
    Effect.flatMap(
      cancelled,
      (yes): Effect.Effect<A, E | RunCancelled, R> => yes ? Effect.fail(new RunCancelled({ runId })) : call
    )
  // a tool call whose tool has an undo gets it as its compensation: when the run fails, unless the call failed.
  // The workflow's `undo` for the tool, else the tool's own (`ToolEffect.compensatable`), whose failure is logged:
  // a compensation runs as the run fails, and the other calls are still undone
  const undoOf = <A>(step: RunJournal.StepKey.Tool<A>) => {
    const declared = step.undo
    const entry = step.ledger
    return options.undo?.[step.call.name] ?? (declared === undefined || entry === undefined
      ? undefined
      : (call: Prompt.ToolCallPart) =>
        declared(call.params, entry).pipe(
          Effect.catchAllCause((cause) =>
            Effect.logError(`the undo of "${call.name}" (${entry.step}) failed`, Secrets.scrubCause(cause))
          )
        ))
  }
  const compensated = <A, J, E, R>(
    step: RunJournal.StepKey.Tool<A>,
    journaled: Ledger.JournaledAs<A, J>,
    activity: Effect.Effect<J, E, R>
  ) => {
    const undo = undoOf(step)
    return undo === undefined ? activity : Workflow.withCompensation(activity, (value) => {
      const result = step.result.from(journaled.value(value))
      return result.isFailure ? Effect.void : undo(step.call, result)
    })
  }
  /** The checkpoints saved since the last activity began, in order, not yet written. */
  const unwritten: Array<{ readonly name: string; readonly save: Effect.Effect<unknown, unknown> }> = []
  /** `call`, after the writes of the checkpoints taken (all there are, as the activity starts). */
  const afterUnwritten = <A, E, R>(call: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R> => {
    const saves = unwritten.splice(0)
    return saves.length === 0 ? call : Effect.zipRight(Effect.forEach(saves, (s) => s.save, { discard: true }), call)
  }
  const flush = Effect.suspend(() => {
    const last = unwritten.at(-1)
    return last === undefined
      ? Effect.void
      : inActivity(last.name, Schema.Void, afterUnwritten(Effect.void))
  })
  // a call of a tool that is not read-only marks itself started before it runs (see ledger.ts)
  const ledgered = Ledger.make<
    AgentRunFailed | RunCancelled,
    WorkflowEngine.WorkflowEngine | WorkflowEngine.WorkflowInstance
  >(<A, E, R>(
    name: string,
    schema: RunJournal.StepKey.ResultSchema<A>,
    call: Effect.Effect<A, E, R>
  ) => inActivity(name, schema as Schema.Schema<A, any, never>, afterUnwritten(call)), store.markStarted)
  /** The call of a model or a tool `key` names, journaled as `journaled`. */
  const callStep = <A, J, E, R>(
    key: RunJournal.StepKey<A>,
    step: RunJournal.StepKey.Model<A> | RunJournal.StepKey.Tool<A>,
    journaled: Ledger.JournaledAs<A, J>,
    effect: Effect.Effect<J, E, R>
  ): Effect.Effect<J, E, R> =>
    step._tag === "Model"
      ? Effect.suspend(() =>
        asLoopStep(inActivity(RunJournal.stepName(key), journaled.schema, afterUnwritten(unlessCancelled(effect))))
      )
      : Effect.suspend(() => asLoopStep(compensated(step, journaled, ledgered(key, step, journaled, effect))))
  const journaledStep = <A, E, R>(
    key: RunJournal.StepKey<A>,
    effect: Effect.Effect<A, E, R>
  ): Effect.Effect<A, E, R> => {
    // a subagent's step (`Nested`) is treated as the step it names: its checkpoints wait, its tool calls compensate
    const step = RunJournal.innermost(key)
    const recorded = (call: Effect.Effect<A, unknown, R>) =>
      inActivity(RunJournal.stepName(key), key.schema, afterUnwritten(call))
    switch (step._tag) {
      case "Checkpoint":
        // its save is written by the next activity, before it runs (with the services it was given)
        return Effect.map(Effect.context<R>(), (context) => {
          const save = Effect.provide(effect, context)
          unwritten.push({ name: RunJournal.stepName(key), save })
          return step.result.to(undefined)
        })
      case "Inbox":
        return options.steering !== true
          // without steering a run never takes messages in: nothing to journal
          ? Effect.succeed(step.result.to([]))
          // the run's own look also claims the thread's stored messages; a subagent's looks only its inbox
          : Effect.suspend(() =>
            asLoopStep(recorded(key === step ? withStored(effect, step.result, RunJournal.stepName(key)) : effect))
          )
      case "Model":
      case "Tool":
        return callStep(key, step, alone(key), effect)
      case "Load":
        return Effect.suspend(() => asLoopStep(recorded(effect)))
    }
  }
  const journal = RunJournal.RunJournal.of({
    durable: true,
    step: journaledStep,
    // a recorder's step: a model or tool call is journaled with what the recorder saw inside it, and gives it
    // back when it replays; no hook runs in a load, a checkpoint or a look into the inbox, journaled as before
    stepWitnessed: (key, effect) => {
      const leaf = RunJournal.innermost(key)
      return leaf._tag === "Model" || leaf._tag === "Tool"
        ? callStep(key, leaf, witnessedAs(key), effect)
        : Effect.map(journaledStep(key, Effect.map(effect, ([value]) => value)), (value) => [value, []] as const)
    },
    await: <Request, Decision>(interrupt: RunJournal.Interrupt<Request, Decision>) => {
      // the wait is typed by the waiting middleware's decision schema: the stored decision (the value encoded by
      // it, as `resume` posts it) is decoded with it
      const decision = DecisionOf(interrupt.decision)
      const deferred = DurableDeferred.make(interrupt.key, { success: decision })
      const timeout = options.decisionTimeout
      const decided = timeout === undefined
        ? DurableDeferred.await(deferred)
        : DurableDeferred.raceAll({
          name: interrupt.key,
          success: decision,
          error: AgentError.InvalidResume,
          effects: [
            DurableDeferred.await(deferred),
            DurableClock.sleep({ name: `timeout/${interrupt.key}`, duration: timeout.after }).pipe(
              Effect.zipRight(timedOut(interrupt, timeout.decide))
            )
          ]
        })
      // the agent takes the decision decoded, and checks it for the hook; the thread as it waits (the interrupt
      // in its checkpoint) is stored before the run suspends
      return asLoopStep<Option.Option<Decision>, AgentError.InvalidResume, never>(Effect.zipRight(
        flush,
        decided.pipe(
          Effect.map((taken) => Option.some(taken.value)),
          Effect.mapError(asRunFailure)
        )
      ))
    }
  })
  return { journal, flush }
}
