/**
 * An agent's threads, as a session that lives in the agent's scope: one run
 * of a thread at a time (its lock), the inbox where `send` leaves messages,
 * the background runs that take them in (a `FiberSet`: interrupted when the
 * scope closes), the watchers of every run (ended when it closes) and the
 * agent's lifetime (closed first, so nothing new starts while the rest is
 * released). Every run of a thread, for a new input or for the answer to a
 * wait, starts here.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import type * as Agent from "../Agent.js"
import { InvalidOptions, ThreadStateError } from "../AgentError.js"
import * as AgentEvent from "../AgentEvent.js"
import type * as AgentResult from "../AgentResult.js"
import type * as Checkpointer from "../Checkpointer.js"
import * as RunJournal from "../RunJournal.js"
import * as Secrets from "../Secrets.js"
import * as Checkpoint from "./checkpoint.js"
import type { Compiled } from "./config.js"
import * as Lineage from "./fast/lineage.js"
import * as ThreadLocks from "./fast/threadLocks.js"
import * as Inbox from "./inbox.js"
import { checkDecisionSize, checkInput, checkThreadId, invalidThreadId, isThreadId } from "./input.js"
import * as Lifetime from "./lifetime.js"
import type { Phase } from "./machine.js"
import * as Observer from "./observer.js"
import type { Emit } from "./observer.js"
import { unknownKey } from "./options.js"
import * as Pending from "./pending.js"
import * as Receive from "./receive.js"
import { type RunContext, witnessInput } from "./runContext.js"
import * as RunStart from "./runStart.js"
import * as RunState from "./runState.js"
import * as Waits from "./waits.js"
import * as Watchers from "./watchers.js"

/** Runs a run from a phase to its end (the driver). */
export type Execute = (
  run: RunContext,
  state: RunState.RunState,
  start: Phase
) => Effect.Effect<AgentResult.AgentResult<any>, unknown, any>

/** `send`'s check of its options (an object of known keys, if given) and its mode. */
const modeOf = (options: Agent.SendOptions | undefined): Effect.Effect<Inbox.Mode, InvalidOptions> => {
  const unknown = unknownKey("Agent", options, ["mode"], "send")
  if (unknown !== undefined) return Effect.fail(unknown)
  const mode: unknown = options?.mode ?? "steer"
  return mode === "steer" || mode === "queue" ? Effect.succeed(mode) : Effect.fail(
    new InvalidOptions({
      module: "Agent",
      option: "send.mode",
      reason: `must be "steer" or "queue", got ${typeof mode === "string" ? JSON.stringify(mode) : typeof mode}`
    })
  )
}

export const make = (
  config: Compiled,
  checkpoints: ReturnType<typeof Checkpoint.make>,
  execute: Execute
): Effect.Effect<Threads, never, Scope.Scope> =>
  Effect.gen(function*() {
    // released in the reverse order: the lifetime closes first, then the background runs are interrupted,
    // then what waits in the inboxes fails, then the watchers' streams end (after the runs' last events)
    const watchers = yield* Watchers.make<Agent.RunEvent<any>>()
    const inboxes = yield* Inbox.make
    const runs = yield* FiberSet.make<void>()
    const lifetime = yield* Lifetime.make
    return session(config, checkpoints, execute, { watchers, inboxes, runs, lifetime })
  })

/** What the threads of an agent hold in its scope. */
interface Resources {
  readonly watchers: Watchers.Watchers<Agent.RunEvent<any>>
  readonly inboxes: Inbox.Inboxes
  /** The runs `send` starts in the background. */
  readonly runs: FiberSet.FiberSet<void>
  readonly lifetime: Lifetime.Lifetime
}

/** The operations on the threads of an agent. */
export type Threads = ReturnType<typeof session>

const session = (
  config: Compiled,
  checkpoints: ReturnType<typeof Checkpoint.make>,
  execute: Execute,
  { inboxes, lifetime, runs, watchers }: Resources
) => {
  const { nodes } = config
  const { load } = checkpoints
  const transformInput = Receive.inputOf(config)
  const withThreadLock = ThreadLocks.make()
  const { begin, contextOf } = RunStart.make(config, lifetime, watchers)
  const { checkDecisionSchema, checkValue, pendingOf } = Pending.make(config)

  /**
   * Fails with `AgentClosed` once the agent is closed. Every operation that runs the agent (`run`, `stream`,
   * `resume`, `resumeStream`, `validateResume`, `send`) starts with it; reading and deleting threads do not.
   */
  const open = Lifetime.ensureOpen(lifetime)

  /**
   * `startNext(threadId)` in the background, among the agent's runs, logging a failure. Interrupted (the
   * agent's scope closed, even before it began), it fails what waits for a run of the thread: no run would
   * take it in, so its senders learn it instead of waiting for good. The fiber's observer sees that exit
   * even when the fiber never ran.
   */
  const background = (threadId: string) =>
    startNext(threadId).pipe(
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.void
          : Effect.logError("Agent: a run started by send failed", Secrets.scrubCause(cause))
      ),
      Effect.provideService(RunJournal.RunJournal, RunJournal.inProcess),
      Effect.withSpan("Agent.sendRun", { root: true, captureStackTrace: false }),
      FiberSet.run(runs),
      Effect.map((fiber) =>
        fiber.addObserver((exit) => {
          if (Exit.isInterrupted(exit)) {
            inboxes.failWaiting(
              threadId,
              new ThreadStateError({
                threadId,
                reason: "the run that was to take this message in was interrupted before it took it in " +
                  "(the scope the agent was built in is closed?)"
              })
            )
          }
        })
      )
    )

  /**
   * The next run of what waits in the thread's inbox, once the thread is free: every steer message left
   * over, else the first queued one. A thread waiting for a decision keeps them for its resumed run. When
   * its checkpoint cannot be loaded no run can start: what waits fails with that error.
   */
  const startNext = (threadId: string): Effect.Effect<void, unknown, any> =>
    withThreadLock(
      threadId,
      Effect.gen(function*() {
        if (!inboxes.hasWaiting(threadId)) return
        const loaded = yield* Effect.tapError(load(threadId), (error) =>
          Effect.sync(() => inboxes.failWaiting(threadId, error)))
        if (Option.isSome(loaded.checkpoint) && loaded.checkpoint.value.pending !== undefined) {
          return
        }
        yield* inboxes.leased(threadId, (lease) => {
          const next = inboxes.takeNext(lease)
          return next === undefined
            ? Effect.succeed(undefined)
            : runThread(threadId, next.messages, undefined, lease, next.mode)
        }, afterRun)
      })
    )

  /** After a run of a thread: what waits in its inbox starts the next run, unless the thread now waits. */
  const afterRun = (lease: Inbox.Lease, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void, never, any> =>
    Inbox.letsNextStart(exit) && inboxes.hasWaiting(lease.threadId)
      ? background(lease.threadId)
      : Effect.void

  /** A new run of `threadId` with `input`, holding `lease`; `received` when `send` gave the input. */
  const runThread = (
    threadId: string,
    input: ReadonlyArray<Prompt.Message>,
    own: Emit | undefined,
    lease: Inbox.Lease,
    received: Inbox.Mode | undefined
  ) =>
    begin(threadId, false, own, (emit, journaled) =>
      Effect.flatMap(load(threadId, journaled), (loaded) => {
        if (Option.isSome(loaded.checkpoint) && loaded.checkpoint.value.pending !== undefined) {
          return Effect.fail(
            new ThreadStateError({
              threadId,
              reason: `is waiting for a decision for middleware "${loaded.checkpoint.value.pending.middleware}"; ` +
                `call resume(threadId, value) instead of run`
            })
          )
        }
        const run = contextOf(threadId, emit, journaled, loaded, lease)
        const started = (transformed: ReadonlyArray<Prompt.Message>) => {
          const ran = execute(
            run,
            RunState.make(
              Lineage.append(loaded.messages, transformed),
              loaded.slices,
              undefined,
              Checkpoint.expectedOf(loaded)
            ),
            { node: "beforeAgent", index: 0 }
          )
          return received === undefined ? ran : Effect.zipRight(
            Observer.report(run, () => AgentEvent.MessageReceived({ mode: received, step: 0, messages: transformed })),
            ran
          )
        }
        // (with no transformInput hook and no witness the input goes on as it is, without a continuation)
        return Observer.observed(
          run,
          config.inputHooks.length === 0 && run.journal.witness === undefined
            ? started(input)
            : Effect.flatMap(witnessInput(run, transformInput(run, input)), started)
        )
      }))

  /** A run of `input` (`run` and `stream`), once its thread is free. */
  const start = (input: Prompt.RawInput, options: Agent.RunOptions, own: Emit | undefined) =>
    // (the checks of `open` and of the thread id in the step that starts the run)
    Effect.suspend(() => {
      const closed = Lifetime.closedError(lifetime)
      if (closed !== undefined) return Effect.fail(closed)
      // (options that are not an object are answered below, as a missing thread id)
      const unknown = Predicate.isObject(options)
        ? unknownKey("Agent", options, ["threadId"], own === undefined ? "run" : "stream")
        : undefined
      if (unknown !== undefined) return Effect.fail(unknown)
      const threadId: unknown = options?.threadId
      return isThreadId(threadId)
        ? Effect.flatMap(checkInput(input, "conversation", config.inputLimits), (messages) =>
          withThreadLock(
            threadId,
            inboxes.leased(threadId, (lease) => runThread(threadId, messages, own, lease, undefined), afterRun)
          ))
        : Effect.fail(invalidThreadId(threadId))
    })

  /** A run of `threadId` with no new input (a fork goes on so), once its thread is free. */
  const proceed = (threadId: string) =>
    Effect.zipRight(
      open,
      withThreadLock(
        threadId,
        inboxes.leased(threadId, (lease) => runThread(threadId, [], undefined, lease, undefined), afterRun)
      )
    )

  /**
   * A run of `threadId` (a fork) that enters the hook `at` names, without a decision: the hook asks again, for
   * this thread, so a wait it makes is the thread's own. `progress`: the run's counts so far.
   */
  const reenter = (threadId: string, at: Checkpointer.PendingInterrupt, progress: Checkpointer.Checkpoint["run"]) =>
    Effect.zipRight(
      open,
      withThreadLock(
        threadId,
        inboxes.leased(
          threadId,
          (lease) =>
            begin(threadId, false, undefined, (emit, journaled) =>
              Effect.gen(function*() {
                const loaded = yield* load(threadId, journaled)
                const index = nodes[at.node].findIndex((m) => m.name === at.middleware)
                if (index < 0) {
                  return yield* new ThreadStateError({
                    threadId,
                    reason: `was forked at a wait of middleware "${at.middleware}", which this agent does not have`
                  })
                }
                const run = contextOf(threadId, emit, journaled, loaded, lease)
                const phase: Phase = at.node === "beforeModel" && index === 0
                  ? { node: "receive" }
                  : { node: at.node, index }
                const state = RunState.make(loaded.messages, loaded.slices, progress, Checkpoint.expectedOf(loaded))
                return yield* Observer.observed(run, execute(run, state, phase))
              })),
          afterRun
        )
      )
    )

  /**
   * The run of a waiting thread that goes on with `value`, at the hook that waits (`resume`, `resumeStream`).
   * `encoded`: `value` is the decision as the thread stores it (a record's: encoded by the wait's decision schema,
   * what a person typed in it redacted already), decoded and checked as a durable run's is.
   */
  const resume = (id: string, value: unknown, own: Emit | undefined, encoded = false) =>
    Effect.flatMap(Effect.zipRight(open, checkThreadId(id)), (threadId) =>
      withThreadLock(
        threadId,
        inboxes.leased(threadId, (lease) =>
          begin(threadId, true, own, (emit, journaled) =>
            Effect.gen(function*() {
              const loaded = yield* load(threadId, journaled)
              const waiting = yield* pendingOf(threadId, loaded)
              const { index, pending } = waiting
              yield* Pending.checkOwner(threadId, pending, journaled.journal.durable, "resume")
              // what a person typed passes the input's hooks before the hook (or a child it forwards the decision
              // to) takes it, as `validateResume` gives a durable run's decision
              const inputHooks = (messages: ReadonlyArray<Prompt.Message>) =>
                Effect.provide(Receive.hooksOf(config, threadId, messages), config.context)
              // a journal that witnesses the decision (a recorder, a replayer) sees it as the thread stores it:
              // checked as posted, its person's texts through the input hooks once
              const witnessed = journaled.journal.witness?.resumed
              let decision: unknown
              if (encoded) {
                decision = yield* Effect.provide(
                  Waits.decodeDecision(waiting.middleware, threadId, pending.value, value),
                  config.context
                )
                if (witnessed !== undefined) yield* witnessed(value)
              } else if (witnessed === undefined) {
                decision = yield* Waits.resumedDecision(
                  waiting.middleware,
                  yield* checkValue(threadId, waiting, value),
                  inputHooks
                )
              } else {
                const posted = yield* Waits.postedWithPersonTexts(
                  waiting.middleware,
                  threadId,
                  yield* checkValue(threadId, waiting, value, true),
                  inputHooks
                )
                yield* witnessed(posted.encoded)
                decision = posted.decision
              }
              const run = contextOf(threadId, emit, journaled, loaded, lease)
              const state = RunState.withResume(
                RunState.make(
                  loaded.messages,
                  loaded.slices,
                  Option.getOrThrow(loaded.checkpoint).run,
                  Checkpoint.expectedOf(loaded)
                ),
                Option.some(decision)
              )
              // a run that waits at the first hook of beforeModel takes in steer messages before it, as it did
              const phase: Phase = pending.node === "beforeModel" && index === 0
                ? { node: "receive" }
                : { node: pending.node, index }
              return yield* Observer.observed(run, execute(run, state, phase))
            })), afterRun)
      ))

  /**
   * `validateResume`: the wait of the thread and the decision encoded as JSON keeps it (what a durable journal
   * posts), once that copy is checked as a durable run will. Its failures leave scrubbed, as a run's do: a
   * refused value is quoted in them.
   */
  const validateResume = (id: string, value: unknown) =>
    Effect.gen(function*() {
      yield* open
      const threadId = yield* checkThreadId(id)
      const waiting = yield* pendingOf(threadId, yield* load(threadId))
      const checked = yield* checkValue(threadId, waiting, value, true)
      // what a person typed is stored as the input's hooks give it back (a durable journal stores the decision)
      const encoded = yield* Waits.withPersonTexts(waiting.middleware, threadId, checked, (messages) =>
        Effect.provide(Receive.hooksOf(config, threadId, messages), config.context))
      return { ...waiting.pending, encodedDecision: encoded }
    }).pipe(Effect.mapErrorCause(Secrets.scrubCause))

  /**
   * `validatePosted`: a decision as a durable journal posts it (encoded), decoded with the wait of the thread and
   * checked, as the run will when it gets it. Its failures leave scrubbed, as `validateResume`'s do.
   */
  const validatePosted = (id: string, encoded: unknown) =>
    Effect.gen(function*() {
      yield* open
      const threadId = yield* checkThreadId(id)
      const { middleware, pending } = yield* pendingOf(threadId, yield* load(threadId))
      const decision = yield* Effect.provide(
        Waits.decodeDecision(middleware, threadId, pending.value, encoded),
        config.context
      )
      yield* checkDecisionSize(encoded, config.inputLimits)
      return decision
    }).pipe(Effect.mapErrorCause(Secrets.scrubCause))

  const send = (threadId: string, message: Prompt.RawInput, options?: Agent.SendOptions) =>
    Effect.gen(function*() {
      // a closed agent would start no run: its senders learn it here, not from `result`
      yield* open
      const id = yield* checkThreadId(threadId)
      const mode = yield* modeOf(options)
      const messages = yield* checkInput(message, "user", config.inputLimits)
      const taken = yield* Deferred.make<AgentResult.AgentResult<any>, unknown>()
      const entry: Inbox.Entry = { mode, messages, taken }
      let delivery: Agent.Sent["delivery"] = mode === "steer" ? "steered" : "queued"
      if (!inboxes.post(id, entry)) {
        // a send that fails (or is interrupted) takes its message back, unless a run took it in meanwhile:
        // a failed send delivered nothing, so a retry does not deliver it twice
        const loaded = yield* load(id).pipe(
          Effect.onInterrupt(() => Effect.sync(() => inboxes.withdraw(id, entry))),
          Effect.map(Option.some),
          Effect.catchAll((error) =>
            Effect.suspend(() => inboxes.withdraw(id, entry) ? Effect.fail(error) : Effect.succeedNone)
          )
        )
        // (None: a run took it in while the load failed; it was delivered as its mode says)
        if (Option.isSome(loaded)) {
          const checkpoint = loaded.value.checkpoint
          if (Option.isSome(checkpoint) && checkpoint.value.pending !== undefined) delivery = "held"
          else {
            delivery = "started"
            yield* background(id)
          }
        }
      }
      const result = Deferred.await(taken) as Agent.Sent["result"]
      return { threadId: id, mode, delivery, result } satisfies Agent.Sent
    })

  /** After a thread stopped waiting outside a run (its wait discarded): messages held for it start a run. */
  const released = (threadId: string) => inboxes.hasWaiting(threadId) ? background(threadId) : Effect.void

  return {
    start,
    proceed,
    reenter,
    checkDecisionSchema,
    resume,
    validateResume,
    validatePosted,
    send,
    watch: watchers.watch,
    withThreadLock,
    released,
    /** Drops what waits in a deleted thread's inbox: each sender learns it with `error`. */
    drop: inboxes.drop
  } as const
}
