/**
 * The body of `AgentWorkflow.make`: the workflow, the layer that runs it
 * through the durable journal, and the operations on its runs.
 */
import * as IdGenerator from "@effect/ai/IdGenerator"
import * as Prompt from "@effect/ai/Prompt"
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Agent from "@stepwise-agent/core/Agent"
import * as AgentError from "@stepwise-agent/core/AgentError"
import { CheckpointError, describeParseError, InvalidInput, ThreadStateError } from "@stepwise-agent/core/AgentError"
import type * as AgentResult from "@stepwise-agent/core/AgentResult"
import * as RunJournal from "@stepwise-agent/core/RunJournal"
import type * as RunRecord from "@stepwise-agent/core/RunRecord"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
// the values of AgentWorkflow.ts are read only inside functions: it imports this module (a cycle)
import { describeValue } from "@stepwise-agent/core/Secrets"
import {
  AgentRunFailed,
  type AgentWorkflow,
  Decision,
  DecisionCorrupt,
  type ForkOptions,
  InvalidDecision,
  InvalidSend,
  JournalCorrupt,
  NotWaiting,
  type Options,
  OtherError,
  type Outcome,
  Payload,
  RunFailure,
  RunIdTaken,
  RunNotEnded,
  RunOutcome,
  type RunState,
  type RunStatus,
  type SendReceipt
} from "../AgentWorkflow.js"
import * as Authorizer from "../Authorizer.js"
import * as RecordStore from "../RecordStore.js"
import * as RunStore from "../RunStore.js"
import { clearJournal, executionExists } from "./clusterStorage.js"
import { forkedFrom, forkOf, startFork } from "./durableFork.js"
import { asRunFailure, inActivity, makeJournal } from "./durableJournal.js"
import { readRecord, recordCancelled, recorder } from "./durableRecord.js"
import { keysOf, sentence, unknownKey } from "./options.js"
import { checkSend, decodeStored } from "./send.js"
import { isParseError, stateOf } from "./status.js"

/**
 * The id of a run started without one: from the context's `IdGenerator` when
 * there is one (a test can make ids predictable), else a random UUID.
 */
const newRunId: Effect.Effect<string> = Effect.flatMap(
  Effect.serviceOption(IdGenerator.IdGenerator),
  Option.match({ onNone: () => Effect.sync(() => crypto.randomUUID()), onSome: (ids) => ids.generateId() })
)

export const make = (options: Options): AgentWorkflow => {
  const refused = optionsProblem(options)
  // a constructor of a value, not of an effect: bad options (from JavaScript) are thrown, as the typed error
  if (refused !== undefined) throw refused
  /** A decision as stored with its claim. */
  const DecisionJson = Schema.parseJson(Decision)
  const encodeDecision = Schema.encode(DecisionJson)
  const decodeDecision = Schema.decode(DecisionJson)
  const name = `${options.name}/v${options.version}`
  const workflow = Workflow.make({
    name,
    payload: Payload,
    success: RunOutcome,
    error: RunFailure,
    idempotencyKey: (payload) => payload.runId
  })

  const steering = options.steering === true

  /** Registers and executes the run `runId` of `threadId` with the stored messages as its input (idempotent). */
  const launch = (threadId: string, runId: string, messages: ReadonlyArray<RunStore.SentMessage>) =>
    Effect.gen(function*() {
      const payload = { runId, threadId, input: yield* decodeStored(messages) }
      const executionId = yield* workflow.executionId(payload)
      yield* (yield* RunStore.RunStore).register({ runId, threadId, executionId, workflow: name })
      // never a child of the run whose end starts it (an activity runs in its instance): its cancel must not reach this one
      yield* workflow.execute(payload, { discard: true }).pipe(
        Effect.mapInputContext((context: Context.Context<WorkflowEngine.WorkflowEngine>) =>
          Context.omit(WorkflowEngine.WorkflowInstance)(context) as Context.Context<WorkflowEngine.WorkflowEngine>
        )
      )
    })

  /**
   * Starts the run of what waits for the thread once `owner`, the run that
   * owned its messages, has ended (with no `owner`: when none owns them).
   * Idempotent per owner: the claim names the run, whose id and input stay
   * the same, and starting it again starts nothing.
   */
  const startNext = (threadId: string, owner: string | undefined) =>
    Effect.gen(function*() {
      const next = yield* (yield* RunStore.RunStore).claimNext(threadId, owner)
      if (Option.isNone(next)) return Option.none<string>()
      yield* launch(threadId, next.value.runId, next.value.messages)
      return Option.some(next.value.runId)
    })

  const layer = workflow.toLayer((payload) =>
    Effect.gen(function*() {
      const loop = yield* Agent.Agent
      const store = yield* RunStore.RunStore
      const { flush, journal } = makeJournal(options, payload.runId, {
        cancelled: Effect.orDie(store.isCancelRequested(payload.runId)),
        claimSteered: (look) =>
          Effect.flatMap(Effect.orDie(store.claimSteered(payload.threadId, payload.runId, look)), decodeStored),
        markStarted: (step) => Effect.orDie(store.markStarted(payload.runId, step))
      })
      // a fork's record holds the steps it serves from its source's record, then its own
      const recorded = yield* recorder(payload.runId, payload.threadId, journal, forkedFrom(payload.fork))
      const run: Effect.Effect<AgentResult.AgentResult<any, any, any>, unknown> = payload.fork === undefined
        ? loop.run(Prompt.fromMessages(payload.input), { threadId: payload.threadId })
        : Effect.flatMap(forkOf(payload.fork, payload.threadId), (fork) => loop.fork(fork.record, fork.options))
      const exit = yield* run.pipe(
        Effect.tap(recorded.end),
        Effect.tapErrorCause(recorded.stopped),
        Effect.provideService(RunJournal.RunJournal, recorded.journal),
        // the checkpoints saved after the last activity are written before the run ends, failing or not
        Effect.zipLeft(flush),
        Effect.tapErrorCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.void : flush),
        Effect.mapError(asRunFailure),
        Effect.exit
      )
      // A run that ended or failed (not one suspending to wait) starts the run of what was sent and not taken in.
      if (steering && !(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause))) {
        yield* inActivity(
          "next",
          Schema.Option(Schema.String),
          Effect.orDie(startNext(payload.threadId, payload.runId))
        )
      }
      const result = yield* exit
      if (result._tag === "Interrupted") {
        return yield* new AgentRunFailed({
          error: new OtherError({ tag: "Interrupted" }),
          reason: "the run ended waiting in process"
        })
      }
      // the structured output is journaled as the agent's responseFormat encodes it (JSON), like its other steps
      const outcome = { text: result.text, steps: result.steps, usage: result.usage }
      return Option.isNone(result.output)
        ? outcome
        : { ...outcome, output: yield* Effect.mapError(loop.encodeOutput(result.output.value), asRunFailure) }
    })
  )

  const start: AgentWorkflow["start"] = Effect.fn("AgentWorkflow.start")(function*(request) {
    const store = yield* RunStore.RunStore
    const refused = startRequestProblem(request)
    if (refused !== undefined) return yield* new InvalidInput({ reason: refused })
    const runId = request.runId ?? (yield* newRunId)
    const input = yield* Effect.try({
      try: () => Prompt.make(request.input).content,
      catch: (error) =>
        new InvalidInput({
          reason: `the input does not decode: ${
            ParseResult.isParseError(error) ? describeParseError(error) : "it is not a conversation"
          }`
        })
    })
    const payload = { runId, threadId: request.threadId, input }
    const unstorable = Either.getLeft(Schema.encodeEither(Payload)(payload))
    if (Option.isSome(unstorable)) {
      return yield* new InvalidInput({ reason: `the input cannot be stored: ${describeParseError(unstorable.value)}` })
    }
    const executionId = yield* workflow.executionId(payload)
    // the thread's messages are this run's to take in, and to hand on when it ends; a retried start of a run
    // registered before (perhaps ended) takes nothing back
    const record = yield* store.register({
      runId,
      threadId: request.threadId,
      executionId,
      workflow: name,
      ownsThread: steering
    })
    if (record.threadId !== request.threadId) return yield* new RunIdTaken({ runId, threadId: record.threadId })
    yield* workflow.execute(payload, { discard: true })
    return runId
  })

  const send: AgentWorkflow["send"] = Effect.fn("AgentWorkflow.send")(function*(threadId, message, sendOptions) {
    const unknown = unknownKey("AgentWorkflow", sendOptions, ["mode", "idempotencyKey"])
    if (unknown !== undefined) {
      return yield* new InvalidSend({
        threadId: typeof threadId === "string" ? threadId : describeValue(threadId),
        field: "options",
        reason: unknown.option === "options"
          ? unknown.reason
          : `key ${JSON.stringify(unknown.option)} ${unknown.reason}`
      })
    }
    const checked = yield* checkSend(threadId, message, sendOptions?.mode, sendOptions?.idempotencyKey)
    if (!steering) {
      return yield* new InvalidSend({
        threadId: checked.threadId,
        field: "workflow",
        reason: `"${name}" was made without \`steering: true\`: its runs never take sent messages in`
      })
    }
    const store = yield* RunStore.RunStore
    // The message and, when no run owns the thread, the claim of the run that takes it in are one
    // transaction: a message is never stored without a run to take it in. From there to the run executing,
    // nothing interrupts the send; a launch that fails is done by the next send (`ensureTaken`).
    return yield* Effect.uninterruptible(Effect.gen(function*() {
      const posted = yield* store.postMessage({ ...checked, claim: true })
      if (
        Option.isSome(posted.earlier) &&
        (posted.earlier.value.mode !== checked.mode || posted.earlier.value.messages !== checked.messages)
      ) {
        return yield* new InvalidSend({
          threadId: checked.threadId,
          field: "idempotencyKey",
          reason: `was given to another message of this thread (sequence ${posted.sequence})`
        })
      }
      // a duplicate goes on as a message already stored: its run, if a crash kept it from executing, executes now
      const receipt = {
        threadId: checked.threadId,
        mode: checked.mode,
        sequence: posted.sequence,
        duplicate: Option.isSome(posted.earlier)
      }
      if (Option.isSome(posted.started)) {
        yield* launch(checked.threadId, posted.started.value.runId, posted.started.value.messages)
        return { ...receipt, delivery: "started", runId: Option.some(posted.started.value.runId) } satisfies SendReceipt
      }
      const next = Option.isSome(posted.running)
        ? yield* ensureTaken(checked.threadId, posted.running.value)
        : Option.none<string>()
      return Option.isSome(next)
        ? { ...receipt, delivery: "started", runId: next } satisfies SendReceipt
        : { ...receipt, delivery: "stored", runId: posted.running } satisfies SendReceipt
    }))
  })

  /**
   * Makes sure `runId`, the run that owns the thread's messages, will take
   * them in or hand them on, deciding from what is stored only (never from
   * what this process runs). A run a `send` started, whose sender died
   * before executing it, is executed (its input is stored: idempotent). A
   * run `start` registered whose execution is not stored yet keeps them:
   * its `start` may be between registering and executing it, in any
   * process, and the run takes them in when it starts (a `start` that died
   * there leaves them to `cancel`, `prune` or a retried `start`). A run that
   * has ended without handing them on (its `next` died, or a process died
   * between its end and `cancel`'s hand-on), or that is not registered (it
   * was pruned), hands them on now (`startNext`, idempotent per owner): the
   * run started, if any.
   */
  const ensureTaken = (threadId: string, runId: string) =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const input = yield* store.inputOf(runId)
      const stored = yield* Effect.option(store.get(runId))
      const executionId = Option.isSome(stored)
        ? stored.value.executionId
        : input.length === 0
        ? undefined
        : yield* workflow.executionId({ runId, threadId, input: yield* decodeStored(input) })
      const executed = executionId !== undefined && (yield* Effect.orDie(executionExists(workflow, executionId)))
      if (!executed && input.length > 0) {
        yield* Effect.orDie(launch(threadId, runId, input))
        return Option.none<string>()
      }
      if (!executed && Option.isSome(stored)) return Option.none<string>()
      const ended = !executed || (yield* workflow.poll(executionId!))?._tag === "Complete"
      return ended ? yield* Effect.orDie(startNext(threadId, runId)) : Option.none<string>()
    })

  const status: AgentWorkflow["status"] = Effect.fn("AgentWorkflow.status")(function*(runId) {
    const store = yield* RunStore.RunStore
    const record = yield* store.get(runId)
    const loop = yield* Agent.Agent
    // the thread id of a stored run was checked when the run started
    const snapshot = yield* Effect.catchTag(loop.thread(record.threadId), "InvalidInput", Effect.die)
    // a stored reply that no longer decodes is a corrupt journal; other defects (storage down) stay defects
    const polled = yield* Effect.catchAllDefect(
      workflow.poll(record.executionId),
      (defect) =>
        isParseError(defect)
          ? new JournalCorrupt({ runId, reason: Secrets.messageOf(defect) })
          : Effect.die(defect)
    )
    const pending = Option.flatMap(snapshot, (thread) => thread.pending)
    const claim = polled !== undefined && polled._tag !== "Complete" && Option.isSome(pending)
      ? yield* store.decisionOf(runId, pending.value.key)
      : Option.none()
    if (Option.isSome(claim) && !claim.value.delivered) {
      yield* undeliverable(record, claim.value)
      yield* deliverClaimed(record, claim.value)
    }
    const { failure, outcome, state } = stateOf(runId, polled, pending, claim)
    return {
      runId,
      threadId: record.threadId,
      executionId: record.executionId,
      state,
      pending: state === "Waiting" ? pending : Option.none(),
      messages: Option.match(snapshot, { onNone: () => [], onSome: (thread) => thread.state.messages }),
      threadState: Option.map(snapshot, (thread) => thread.state),
      outcome: yield* Effect.transposeMapOption(outcome, (stored) => outcomeOf(loop, runId, stored)),
      failure
    }
  })

  /** A completed run's outcome as journaled, its structured output decoded with the agent's `responseFormat`. */
  const outcomeOf = (loop: Agent.Service<any, any>, runId: string, stored: RunOutcome) =>
    Effect.map(
      stored.output === undefined
        ? Effect.succeedNone
        : loop.decodeOutput(stored.output).pipe(
          Effect.map(Option.some),
          Effect.mapError((error) =>
            new JournalCorrupt({
              runId,
              reason: `the structured output no longer decodes with the agent's responseFormat: ${
                describeParseError(error)
              }`
            })
          )
        ),
      (output): Outcome => ({ text: stored.text, steps: stored.steps, usage: stored.usage, output })
    )

  /** Completes the wait `key` of a run with `decision` (the engine keeps the first) and records the delivery. */
  const deliver = (record: RunStore.RunRecord, key: string, decision: Decision) =>
    Effect.gen(function*() {
      const deferred = DurableDeferred.make(key, { success: Decision })
      const token = DurableDeferred.tokenFromExecutionId(deferred, { workflow, executionId: record.executionId })
      yield* DurableDeferred.succeed(deferred, { token, value: decision })
      yield* (yield* RunStore.RunStore).markDelivered(record.runId, key)
    })

  /**
   * Fails with `DecisionCorrupt` when a claim that has not reached the run never can: it was stored without its
   * decision, or the decision does not decode, or its value does not decode with the wait's decision schema (or
   * pass its check), as the run would decode it. A thread that no longer waits cannot tell: it is delivered (the
   * engine keeps the first decision).
   */
  const undeliverable = (record: RunStore.RunRecord, claim: RunStore.ClaimedDecision) =>
    Effect.gen(function*() {
      if (claim.delivered) return
      const corrupt = (reason: string) => new DecisionCorrupt({ runId: record.runId, key: claim.key, reason })
      if (claim.decision === undefined) return yield* corrupt("it was stored without the decision")
      const decision = yield* decodeDecision(claim.decision).pipe(
        Effect.mapError((error) => corrupt(describeParseError(error)))
      )
      yield* (yield* Agent.Agent).validatePosted(record.threadId, decision.value).pipe(
        Effect.asVoid,
        Effect.catchAll((error: unknown): Effect.Effect<void, DecisionCorrupt | CheckpointError> =>
          error instanceof CheckpointError
            ? Effect.fail(error)
            : error instanceof ThreadStateError
            ? Effect.void
            : Effect.fail(corrupt(`its value is refused by the wait: ${Secrets.messageOf(error)}`))
        )
      )
    })

  /**
   * Delivers a decision whose claimer died before delivering it. Best effort:
   * a failure is logged and the next `status` or `resume` tries again. A
   * claim stored without a decision cannot be delivered.
   */
  const deliverClaimed = (record: RunStore.RunRecord, claim: RunStore.ClaimedDecision) =>
    claim.delivered || claim.decision === undefined ? Effect.void : decodeDecision(claim.decision).pipe(
      Effect.flatMap((decision) => deliver(record, claim.key, decision)),
      Effect.catchAllCause((cause) =>
        Effect.logWarning(`could not deliver the claimed decision "${claim.key}" of run "${record.runId}"`, cause)
      )
    )

  const resume: AgentWorkflow["resume"] = Effect.fn("AgentWorkflow.resume")(function*(runId, value, options) {
    // from JavaScript, options that name no principal as a string, or more: no one is authorized to decide
    const unknown = Predicate.isObject(options)
      ? unknownKey("AgentWorkflow", options, ["principal"], "resume")
      : undefined
    if (unknown !== undefined) {
      return yield* new Authorizer.Unauthorized({ runId, principal: "", reason: `the option ${sentence(unknown)}` })
    }
    const principal: unknown = Predicate.hasProperty(options, "principal") ? options.principal : undefined
    if (typeof principal !== "string") {
      return yield* new Authorizer.Unauthorized({
        runId,
        principal: "",
        reason: `the principal must be a string, got ${describeValue(principal)}`
      })
    }
    const store = yield* RunStore.RunStore
    const record = yield* store.get(runId)
    const polled = yield* workflow.poll(record.executionId)
    if (polled !== undefined && polled._tag === "Complete") {
      return yield* new NotWaiting({ runId, reason: "the run has finished" })
    }
    const loop = yield* Agent.Agent
    // who may decide is asked first: the checks below tell what the run waits for
    const thread = yield* Effect.catchTag(loop.thread(record.threadId), "InvalidInput", Effect.die)
    if (Option.isNone(thread)) {
      return yield* new NotWaiting({
        runId,
        reason: `its thread "${record.threadId}" is not stored (it was deleted): nothing waits for a decision`
      })
    }
    const waiting = thread.value.pending
    if (Option.isNone(waiting)) {
      return yield* new NotWaiting({ runId, reason: "it waits for no decision (any it waited for was given)" })
    }
    const { key, middleware } = waiting.value
    yield* (yield* Authorizer.Authorizer).authorize({
      runId,
      threadId: record.threadId,
      principal,
      pending: { key, middleware, value: waiting.value.value },
      value
    })
    const pending = yield* loop.validateResume(record.threadId, value).pipe(
      Effect.mapError((error: unknown): NotWaiting | InvalidDecision | CheckpointError =>
        error instanceof ThreadStateError
          ? new NotWaiting({ runId, reason: Secrets.messageOf(error) })
          : error instanceof CheckpointError
          ? error
          : new InvalidDecision({ runId, error, reason: Secrets.messageOf(error) })
      )
    )
    if (pending.key !== undefined && pending.key !== key) {
      return yield* new NotWaiting({ runId, reason: "the decision it waited for changed while this one was checked" })
    }
    // the run gets the decision encoded by its wait's schema, as stored (JSON), here or after a restart: the
    // run decodes it for the hook
    const encoded = yield* encodeDecision({
      value: pending.encodedDecision,
      by: principal,
      decidedAt: yield* Clock.currentTimeMillis
    }).pipe(Effect.mapError((error) => new InvalidDecision({ runId, error, reason: error.message })))
    const decision = yield* Effect.orDie(decodeDecision(encoded))
    yield* store.claimDecision(runId, key, encoded).pipe(
      // the claim that won may not have reached the run (its claimer died): deliver it, and still refuse this
      // one; a claim that can never reach it says so instead
      Effect.tapErrorTag("AlreadyDecided", () =>
        Effect.flatMap(
          store.decisionOf(runId, key),
          Option.match({
            onNone: () => Effect.void,
            onSome: (claim) => Effect.zipRight(undeliverable(record, claim), deliverClaimed(record, claim))
          })
        ))
    )
    yield* deliver(record, key, decision)
  })

  const discardDecision: AgentWorkflow["discardDecision"] = Effect.fn("AgentWorkflow.discardDecision")(
    function*(runId) {
      const store = yield* RunStore.RunStore
      const record = yield* store.get(runId)
      const waiting = Option.flatMap(
        yield* Effect.catchTag((yield* Agent.Agent).thread(record.threadId), "InvalidInput", Effect.die),
        (t) => t.pending
      )
      if (Option.isNone(waiting)) return false
      const claim = yield* store.decisionOf(runId, waiting.value.key)
      if (Option.isNone(claim) || claim.value.delivered) return false
      const corrupt = yield* undeliverable(record, claim.value).pipe(
        Effect.as(false),
        Effect.catchTag("DecisionCorrupt", () => Effect.succeed(true))
      )
      if (corrupt) return yield* store.releaseDecision(runId, waiting.value.key)
      yield* deliverClaimed(record, claim.value)
      return false
    }
  )

  const cancel: AgentWorkflow["cancel"] = Effect.fn("AgentWorkflow.cancel")(function*(runId) {
    const store = yield* RunStore.RunStore
    const record = yield* store.get(runId)
    // a working run reads this before its next call and stops there; a run not executed yet, before its first
    yield* store.requestCancel(runId)
    // a run whose execution is not stored (its `start` died, or has not executed it yet) has nothing to stop
    // now, and hands on what was sent
    if (!(yield* executionExists(workflow, record.executionId))) {
      if (steering) yield* Effect.orDie(startNext(record.threadId, runId))
      return
    }
    yield* workflow.interrupt(record.executionId)
    // An engine may apply the interrupt later (on its next storage poll): the run
    // must have stopped before its wait is given up, or it could wait again.
    yield* workflow.poll(record.executionId).pipe(
      Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (polled) => polled?._tag === "Complete" })
    )
    yield* recordCancelled(runId)
    // the run that owned the wait has ended: give it up as its owner
    yield* (yield* Agent.Agent).discardPending(record.threadId, "the run was cancelled").pipe(
      Effect.provideService(RunJournal.DurableOwner, true),
      Effect.catchTag("DurableThreadError", Effect.die)
    )
    // what was sent to the thread and not taken in starts its run (a run cancelled at its wait ran no `next`)
    if (steering) yield* Effect.orDie(startNext(record.threadId, runId))
  })

  /** Where a run is, for pruning: an execution the engine never got counts as ended. */
  const settledState = (record: RunStore.RunRecord) =>
    status(record.runId).pipe(
      Effect.map((current) => current.state),
      // a journal that no longer reads is what pruning is for: it counts as ended
      Effect.catchTag("JournalCorrupt", () => Effect.succeed<RunState>("Failed")),
      // a decision that cannot reach the run leaves it waiting
      Effect.catchTag("DecisionCorrupt", () => Effect.succeed<RunState>("Waiting")),
      Effect.flatMap((state) =>
        state === "Running"
          ? Effect.map(
            executionExists(workflow, record.executionId),
            (exists): RunState => exists ? "Running" : "Cancelled"
          )
          : Effect.succeed(state)
      )
    )

  const prune: AgentWorkflow["prune"] = Effect.fn("AgentWorkflow.prune")(function*(runId, pruneOptions) {
    const unknown = unknownKey("AgentWorkflow", pruneOptions, ["deleteThread"], "prune")
    if (unknown !== undefined) return yield* unknown
    const store = yield* RunStore.RunStore
    const record = yield* store.get(runId)
    const state = yield* settledState(record)
    if (state === "Running" || state === "Waiting") return yield* new RunNotEnded({ runId, state })
    const deleteThread = pruneOptions?.deleteThread === true
    if (deleteThread) {
      // another run of the thread still going would lose the thread under it
      for (const other of yield* store.list({ threadId: record.threadId })) {
        if (other.runId === runId) continue
        const otherState = yield* settledState(other)
        if (otherState === "Running" || otherState === "Waiting") {
          return yield* new RunNotEnded({ runId: other.runId, state: otherState })
        }
      }
    }
    // the journal goes first: a prune cut off after it finds the run ended (no execution) and finishes
    yield* clearJournal(workflow, record.executionId)
    yield* Effect.serviceOption(RecordStore.RecordStore).pipe(
      Effect.flatMap(
        Option.match({ onNone: () => Effect.void, onSome: (records) => Effect.orDie(records.delete(runId)) })
      )
    )
    yield* store.delete(runId)
    if (deleteThread) yield* (yield* Agent.Agent).deleteThread(record.threadId)
  })

  const await_: AgentWorkflow["await"] = Effect.fn("AgentWorkflow.await")(function*(runId, awaitOptions) {
    const unknown = unknownKey("AgentWorkflow", awaitOptions, ["untilWaiting", "pollEvery"], "await")
    if (unknown !== undefined) return yield* unknown
    const untilWaiting = awaitOptions?.untilWaiting === true
    return yield* status(runId).pipe(Effect.repeat({
      // the passthrough makes the last status the result
      schedule: Schedule.passthrough(Schedule.spaced(awaitOptions?.pollEvery ?? "100 millis")) as Schedule.Schedule<
        RunStatus,
        RunStatus
      >,
      until: (current) => current.state !== "Running" && (current.state !== "Waiting" || untilWaiting)
    }))
  })

  const watch: AgentWorkflow["watch"] = (runId) =>
    Stream.unwrapScoped(Effect.gen(function*() {
      const record = yield* (yield* RunStore.RunStore).get(runId)
      const events = yield* (yield* Agent.Agent).watch
      // the durable truth ends the stream too: a run elsewhere, or already settled, reports nothing here
      const settled = status(runId).pipe(
        Effect.repeat({ schedule: Schedule.spaced("200 millis"), while: (current) => current.state === "Running" })
      )
      return events.pipe(
        Stream.filter((event) => event.threadId === record.threadId),
        Stream.takeUntil((event) => event.event._tag === "RunEnded" || event.event._tag === "RunFailed"),
        Stream.interruptWhen(settled)
      )
    }))

  const record: AgentWorkflow["record"] = Effect.fn("AgentWorkflow.record")(function*(runId) {
    yield* (yield* RunStore.RunStore).get(runId)
    return yield* readRecord(runId)
  })

  const fork = Effect.fn("AgentWorkflow.fork")(
    function*(source: string | RunRecord.RunRecord, forkOptions: ForkOptions) {
      if (typeof source !== "string" && !Predicate.isObject(source)) return yield* notARunId(source)
      const unknown = forkOptionsProblem(forkOptions)
      if (unknown !== undefined) return yield* new InvalidInput({ reason: `the fork's option ${sentence(unknown)}` })
      const from = typeof source === "string" ? yield* record(source) : source
      return yield* startFork(workflow, name, steering, {
        record: from,
        options: forkOptions,
        runId: (Predicate.isObject(forkOptions) ? forkOptions.runId : undefined) ?? (yield* newRunId),
        sourceRunId: typeof source === "string" ? source : undefined
      })
    }
  ) as AgentWorkflow["fork"]

  return {
    name,
    workflow,
    layer,
    start,
    status: ofRunId(status),
    resume: ofRunId(resume),
    discardDecision: ofRunId(discardDecision),
    cancel: ofRunId(cancel),
    prune: ofRunId(prune),
    await: ofRunId(await_),
    watch: (runId) => typeof runId === "string" ? watch(runId) : Stream.fail(notARunId(runId)),
    send,
    record: ofRunId(record),
    fork
  }
}

const optionKeys = keysOf<Options>({ name: true, version: true, decisionTimeout: true, undo: true, steering: true })

/** The keys of each kind of fork edit. */
const editKeys: Record<string, ReadonlyArray<string>> = {
  Message: ["_tag", "message"],
  ToolResult: ["_tag", "callId", "result", "isFailure"],
  Decision: ["_tag", "decision"]
}

/** The options of `fork` (those of `agent.fork` and `runId`) and their edit: an object of known keys. */
const forkOptionsProblem = (options: unknown) => {
  if (!Predicate.isObject(options)) return undefined
  const unknown = unknownKey(
    "AgentWorkflow",
    options,
    keysOf<ForkOptions>({ to: true, at: true, edit: true, runId: true }),
    "fork"
  )
  if (unknown !== undefined) return unknown
  const edit: unknown = Predicate.hasProperty(options, "edit") ? options.edit : undefined
  const known =
    Predicate.hasProperty(edit, "_tag") && typeof edit._tag === "string" && Object.hasOwn(editKeys, edit._tag)
      ? editKeys[edit._tag]
      : undefined
  return known === undefined ? undefined : unknownKey("AgentWorkflow", edit, known, "fork.edit")
}

/** The `InvalidOptions` of `make`'s options from JavaScript: a name that is not a non-empty string, a version not a number. */
const optionsProblem = (options: unknown): AgentError.InvalidOptions | undefined => {
  const invalid = (option: string, reason: string) =>
    new AgentError.InvalidOptions({ module: "AgentWorkflow", option, reason })
  if (!Predicate.isObject(options)) return invalid("options", `must be an object, got ${describeValue(options)}`)
  const unknown = unknownKey("AgentWorkflow", options, optionKeys) ??
    (Predicate.hasProperty(options, "decisionTimeout")
      ? unknownKey("AgentWorkflow", options.decisionTimeout, ["after", "decide"], "decisionTimeout")
      : undefined)
  if (unknown !== undefined) return unknown
  const { name, version } = options as { readonly name?: unknown; readonly version?: unknown }
  if (typeof name !== "string" || name.length === 0) {
    return invalid(
      "name",
      `must be a non-empty string, got ${typeof name === "string" ? "an empty string" : describeValue(name)}`
    )
  }
  if (typeof version !== "number" || !Number.isFinite(version)) {
    return invalid("version", `must be a number, got ${describeValue(version)}`)
  }
  return undefined
}

/** The `RunNotFound` of a run id that is not a string (from JavaScript): no run is registered under it. */
const notARunId = (runId: unknown): RunStore.RunNotFound =>
  new RunStore.RunNotFound({ runId: "", reason: `a run id is a string, got ${describeValue(runId)}` })

/** `f`, failing with {@link notARunId} when its run id is not a string (from JavaScript). */
const ofRunId = <Rest extends ReadonlyArray<unknown>, A, E, R>(
  f: (runId: string, ...rest: Rest) => Effect.Effect<A, E, R>
) =>
(runId: string, ...rest: Rest): Effect.Effect<A, E | RunStore.RunNotFound, R> =>
  typeof runId === "string" ? f(runId, ...rest) : Effect.fail(notARunId(runId))

/** What is wrong with a `start` request from JavaScript, if anything (its input is checked when it is made a prompt). */
const startRequestProblem = (request: unknown): string | undefined => {
  if (!Predicate.isObject(request)) return `the start request must be an object, got ${describeValue(request)}`
  const unknown = unknownKey("AgentWorkflow", request, ["threadId", "input", "runId"], "start")
  if (unknown !== undefined) return `the start request's option ${sentence(unknown)}`
  const { runId, threadId } = request as { readonly runId?: unknown; readonly threadId?: unknown }
  if (typeof threadId !== "string" || threadId.length === 0) {
    return `the thread id must be a non-empty string, got ${
      typeof threadId === "string" ? "an empty string" : describeValue(threadId)
    }`
  }
  if (runId !== undefined && (typeof runId !== "string" || runId.length === 0)) {
    return `the run id must be a non-empty string, got ${
      typeof runId === "string" ? "an empty string" : describeValue(runId)
    }`
  }
  return undefined
}
