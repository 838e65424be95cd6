/**
 * The agent service: the driver that runs a run one phase after another
 * (hook nodes, model step, tool step, end), each phase a module of its own,
 * the state a value it passes along; and the plumbing of run, resume, stream,
 * watch and the thread operations.
 */
import * as IdGenerator from "@effect/ai/IdGenerator"
import * as Prompt from "@effect/ai/Prompt"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import type * as Agent from "../Agent.js"
import {
  DurableThreadError,
  InvalidOptions,
  MaxStepsExceeded,
  StructuredOutputError,
  ThreadStateError
} from "../AgentError.js"
import * as AgentEvent from "../AgentEvent.js"
import * as AgentResult from "../AgentResult.js"
import * as AgentState from "../AgentState.js"
import type * as Checkpointer from "../Checkpointer.js"
import type * as Middleware from "../Middleware.js"
import * as RunJournal from "../RunJournal.js"
import * as Secrets from "../Secrets.js"
import * as Checkpoint from "./checkpoint.js"
import { compile, type LoopConfig } from "./config.js"
import { unwrapScoped } from "./drain.js"
import { checked, hookEffect, inputProblem } from "./hookResults.js"
import * as Inbox from "./inbox.js"
import { checkInput, checkThreadId, isThreadId } from "./input.js"
import { closeOnRelease, ensureOpen } from "./lifetime.js"
import * as Lineage from "./lineage.js"
import { Continue, next, type Phase } from "./machine.js"
import * as ModelStep from "./modelStep.js"
import * as Nodes from "./nodes.js"
import * as Observer from "./observer.js"
import type { Emit } from "./observer.js"
import { journaled as journaledStep, type RunContext, uniqueInterruptKey } from "./runContext.js"
import * as RunState from "./runState.js"
import { StepKeys } from "./stepKeys.js"
import * as ThreadLocks from "./threadLocks.js"
import * as ToolStep from "./toolStep.js"
import * as Watchers from "./watchers.js"

export type { LoopConfig } from "./config.js"

/**
 * The id of a watched run: from the context's `IdGenerator` when there is one
 * (a test can make ids predictable), else a random UUID.
 */
const newRunId: Effect.Effect<string> = Effect.flatMap(
  Effect.serviceOption(IdGenerator.IdGenerator),
  Option.match({ onNone: () => Effect.sync(() => crypto.randomUUID()), onSome: (ids) => ids.generateId() })
)

/** Effect's built-in tracer, which keeps spans in memory and exports nothing. */
const builtInTracer = Effect.runSync(Effect.tracer)

/** Where a run's steps go: the journal of the context, and the names it gives them. */
interface Journaled {
  readonly journal: RunJournal.RunJournal.Service
  readonly keys: StepKeys
}

/** Builds the service of an agent. */
export const makeLoop = (loopConfig: LoopConfig): Agent.Agent.Service<any, any> => {
  const config = compile(loopConfig)
  const { checkpointer, layout, lifetime, maxSteps, nodes } = config
  const isTraced: Effect.Effect<boolean> = config.spans === undefined
    ? Effect.map(Effect.tracer, (tracer) => tracer !== builtInTracer)
    : Effect.succeed(config.spans)
  const runNode = Nodes.make(config)
  const modelStep = ModelStep.make(config)
  const toolStep = ToolStep.make(config)
  const checkpoints = Checkpoint.make(layout, checkpointer)
  const save = checkpoints.save
  const load = checkpoints.load

  /** The result of a run that ends waiting at `interrupt`. */
  const interruptedResult = (
    run: RunContext,
    state: RunState.RunState,
    interrupt: { readonly middleware: string; readonly value: unknown; readonly key: string }
  ) =>
    AgentResult.Interrupted({
      threadId: run.threadId,
      state: layout.flatten(state),
      interrupt,
      usage: RunState.usageOf(state),
      steps: state.step
    })

  /** Runs `run` from phase `start` to its end or its first wait nobody answers at once. */
  const execute = (
    run: RunContext,
    initial: RunState.RunState,
    start: Phase,
    resume: Option.Option<unknown>
  ): Effect.Effect<AgentResult.AgentResult<any>, any, any> =>
    Effect.gen(function*() {
      let state = initial
      let phase = start
      let resumeValue = resume
      let idleToolRounds = 0
      // the array the last model step appended its reply to, while only the loop has seen it: the tool step
      // appends its results to it in place (one copy of the thread per step instead of two)
      let unseen: ReadonlyArray<Prompt.Message> | undefined
      // the reply of the last model step, reported once the afterModel hooks stored it
      let responded:
        | {
          readonly index: number
          readonly step: number
          readonly reply: RunJournal.ModelCall
          readonly durationMillis: number
        }
        | undefined
      while (true) {
        switch (phase.node) {
          case "beforeAgent":
          case "beforeModel":
          case "afterModel":
          case "afterAgent": {
            const node = phase.node
            // Steer messages join the thread as the run enters beforeModel, so its hooks see them; a run
            // nobody sends to pays one length check here. A run with a journal that records its steps (durable,
            // or nested in one as a subagent's) always looks: its look is journaled, so a replay, to which
            // nobody sends, takes in the same messages at the same step.
            if (
              node === "beforeModel" && phase.index === 0 &&
              (run.inbox.box.steered.length > 0 || run.journal !== RunJournal.inProcess)
            ) {
              state = yield* receive(run, state)
            }
            // a node without hooks (from this index on) just continues: no effect to run
            if (phase.index < nodes[node].length) unseen = undefined
            const ended = phase.index >= nodes[node].length
              ? { state, outcome: Continue }
              : yield* runNode(run, state, node, phase.index, resumeValue)
            const outcome = ended.outcome
            state = ended.state
            resumeValue = Option.none()
            if (node === "afterModel" && responded !== undefined && run.emit !== undefined) {
              // Reported after the afterModel hooks, so the event carries the reply as
              // stored (a hook may have redacted or rewritten it), never the raw one.
              const stored = state.messages[responded.index]
              run.emit(AgentEvent.ModelResponded({
                step: responded.step,
                message: stored !== undefined && stored.role === "assistant"
                  ? stored
                  : Prompt.makeMessage("assistant", { content: [] }),
                usage: responded.reply.usage,
                finishReason: responded.reply.finishReason,
                durationMillis: responded.durationMillis
              }))
              responded = undefined
            }
            if (outcome._tag === "Interrupt") {
              const key = uniqueInterruptKey(run, outcome.key ?? `${node}/${outcome.middleware}/${state.step}`)
              yield* save(run, state, {
                node,
                middleware: outcome.middleware,
                value: outcome.value,
                key,
                ...(run.journal.durable ? { durable: true } : {})
              })
              const interrupted = interruptedResult(run, state, {
                middleware: outcome.middleware,
                value: outcome.value,
                key
              })
              const wait = run.journal.await({
                key,
                threadId: run.threadId,
                step: state.step,
                middleware: outcome.middleware,
                node,
                value: outcome.value
              })
              // A journal that suspends the run while it waits (durable runs) ends it
              // here as far as watchers can tell: the same event an in-process run ends with.
              const decided = yield* run.emit === undefined
                ? wait
                : Effect.onInterrupt(
                  wait,
                  () => Observer.report(run, () => AgentEvent.RunEnded({ result: interrupted }))
                )
              if (Option.isSome(decided)) {
                // The thread no longer waits: say so before the hook acts on the decision.
                yield* save(run, state, undefined)
                resumeValue = decided
                phase = { node, index: outcome.index }
                break
              }
              return interrupted
            }
            if (outcome._tag === "Jump" && outcome.to === "end") {
              // Never leave a tool call without its result: providers reject such a thread.
              state = RunState.answerPending(state, "the agent ended the run before this call ran")
            }
            phase = next(node, outcome._tag === "Jump" ? outcome.to : "continue", RunState.factsOf(state))
            break
          }
          case "model": {
            if (state.step >= maxSteps) {
              return yield* new MaxStepsExceeded({ threadId: run.threadId, maxSteps })
            }
            const started = run.emit === undefined ? 0 : run.clock.unsafeCurrentTimeMillis()
            const reply = yield* modelStep(run, state)
            const invalid = toolStep.invalidCall(reply)
            state = RunState.countRepair(state, invalid !== undefined)
            if (invalid !== undefined && state.repairRounds > config.maxToolCallRepairs) {
              return yield* ToolStep.repairsExhausted(run.threadId, invalid, state.repairRounds)
            }
            state = RunState.appendReply(state, reply)
            unseen = state.messages
            if (run.emit !== undefined) {
              const durationMillis = run.clock.unsafeCurrentTimeMillis() - started
              responded = { index: state.messages.length - 1, step: state.step - 1, reply, durationMillis }
            }
            phase = next("model", "continue", RunState.factsOf(state))
            break
          }
          case "tools": {
            const calls = AgentState.pendingToolCalls(state.messages)?.calls ?? []
            // A hook that keeps jumping to "tools" with nothing to run would loop without a model
            // call; such idle rounds count toward maxSteps like model calls.
            if (calls.length === 0 && state.step + ++idleToolRounds > maxSteps) {
              return yield* new MaxStepsExceeded({ threadId: run.threadId, maxSteps })
            }
            // `wrapToolCall` hooks see the state, messages included
            if (config.wrapTool.length > 0) unseen = undefined
            const ran = yield* toolStep.run(run, state, calls)
            state = state.messages === unseen
              ? RunState.appendToolResultsToUnseen(state, ran.results, ran.output)
              : RunState.appendToolResults(state, ran.results, ran.output)
            unseen = undefined
            // a run that got its structured output ends; any other saves its tool results first
            if (Option.isNone(state.output)) yield* save(run, state, undefined)
            phase = next("tools", "continue", RunState.factsOf(state))
            break
          }
          case "done": {
            yield* save(run, state, undefined)
            if (config.output !== undefined && Option.isNone(state.output)) {
              return yield* new StructuredOutputError({
                description:
                  `The run ended without the model calling "${config.outputToolName}" with the structured output`
              })
            }
            return AgentResult.Completed({
              threadId: run.threadId,
              state: layout.flatten(state),
              text: AgentResult.lastText(state.messages),
              output: state.output,
              usage: RunState.usageOf(state),
              steps: state.step
            })
          }
        }
      }
    }).pipe(
      Effect.ensuring(Effect.sync(() => run.encoder.settle())),
      Effect.scoped,
      Effect.provide(config.context),
      Effect.annotateSpans({ threadId: run.threadId })
    )

  const withThreadLock = ThreadLocks.make()

  /**
   * Fails with `AgentClosed` once the agent is closed. Every operation that runs the agent (`run`, `stream`,
   * `resume`, `resumeStream`, `validateResume`, `send`) starts with it; reading and deleting threads do not.
   */
  const open = ensureOpen(lifetime)

  // Every run's events go to the watchers of `watch` while there are any.
  const watchers = Watchers.make<Agent.RunEvent<any>>()

  /**
   * Runs `body` as one run of `threadId`: picks the journal of the context,
   * reports the run to its own stream (`own`) and to the watchers.
   */
  const begin = (
    threadId: string,
    resumed: boolean,
    own: Emit | undefined,
    body: (
      emit: Emit | undefined,
      journaled: Journaled
    ) => Effect.Effect<AgentResult.AgentResult<any>, unknown, any>
  ) =>
    Effect.gen(function*() {
      const journal = Option.getOrElse(yield* Effect.serviceOption(RunJournal.RunJournal), () => RunJournal.inProcess)
      const journaled = { journal, keys: new StepKeys() }
      const runId = watchers.size() === 0 ? undefined : yield* newRunId
      const publish: Emit | undefined = runId === undefined
        ? undefined
        : (event) => watchers.publish({ runId, threadId, event })
      let ended = false
      const both: Emit | undefined = publish === undefined
        ? own
        : own === undefined
        ? publish
        : (event) => {
          own(event)
          publish(event)
        }
      // every failure of a run, whoever raised it, leaves with its credentials scrubbed; one caused by a
      // released service closes the agent
      const run = (emit: Emit | undefined) =>
        Effect.mapErrorCause(body(emit, journaled), (cause) => closeOnRelease(lifetime, Secrets.scrubCause(cause)))
      if (both === undefined) return yield* run(undefined)
      const emit: Emit = (event) => {
        if (event._tag === "RunEnded") ended = true
        both(event)
      }
      emit(AgentEvent.RunStarted({ threadId, resumed }))
      const result = yield* run(emit).pipe(
        Effect.tapErrorCause((cause) => {
          if (publish === undefined || ended) return Effect.void
          const error = Cause.squash(cause)
          publish(AgentEvent.RunFailed({
            error: Cause.isInterruptedOnly(cause)
              ? "Interrupted"
              : typeof error === "object" && error !== null && "_tag" in error
              ? String(error._tag)
              : "Defect",
            message: error instanceof Error ? error.message : String(error)
          }))
          return Effect.void
        })
      )
      if (!ended) emit(AgentEvent.RunEnded({ result }))
      return result
    })

  /** What stays fixed during a run of `threadId`, loaded as `loaded`. */
  const contextOf = (
    threadId: string,
    emit: Emit | undefined,
    journaled: Journaled,
    loaded: Checkpoint.Loaded,
    inbox: Inbox.Lease
  ) =>
    Effect.gen(function*(): Effect.fn.Return<RunContext> {
      return {
        threadId,
        traced: yield* isTraced,
        emit,
        clock: yield* Effect.clock,
        journal: journaled.journal,
        keys: journaled.keys,
        interruptKeys: new Set(),
        encoder: new Checkpoint.ThreadEncoder(loaded),
        inbox
      }
    })

  /** The input of a run after every `transformInput` hook, in list order; nothing is stored yet. */
  const inputOf = (run: RunContext, input: ReadonlyArray<Prompt.Message>) =>
    config.inputHooks.length === 0 ? Effect.succeed(input) : Effect.provide(
      Effect.reduce(config.inputHooks, input, (messages, m) =>
        Observer.inHook(
          run,
          m.name,
          "transformInput",
          hookEffect(m.name, "transformInput", m.transformInput!({ messages, threadId: run.threadId }))
        ).pipe(Effect.flatMap(checked<ReadonlyArray<Prompt.Message>>(m.name, "transformInput", inputProblem)))),
      config.context
    )

  /**
   * The steer messages waiting in the run's inbox, through the `transformInput` hooks, appended to the
   * thread: at the start of `beforeModel`, never while a tool call of the last reply waits for its result.
   * The look is a journal step: a replay takes in what the first execution took, at the same point.
   * A look that took anything in saves the thread at once: a model call that then fails, or a cancel
   * checked before it, must not lose a message its sender was told a run took (a durable journal writes
   * the save before its next activity). A replayed look takes in the same messages, so it saves at the
   * same point; a look that took nothing costs no save.
   */
  const receive = (run: RunContext, state: RunState.RunState) =>
    (AgentState.pendingToolCalls(state.messages)?.calls.length ?? 0) > 0
      ? Effect.succeed(state)
      : Effect.gen(function*() {
        const sent = yield* journaledStep(
          run,
          run.keys.inbox(),
          Effect.sync(() => inboxes.takeSteered(run.inbox))
        )
        if (sent.length === 0) return state
        const input = yield* inputOf(run, sent)
        yield* Observer.report(
          run,
          () => AgentEvent.MessageReceived({ mode: "steer", step: state.step, messages: input })
        )
        const received = RunState.withMessages(state, Lineage.append(state.messages, input))
        yield* save(run, received, undefined)
        return received
      })

  const inboxes = Inbox.make()

  /**
   * `startNext(threadId)` in the background of the agent's scope (daemon without one), logging a failure.
   * Interrupted (the scope closed, even before it began), it fails what waits for a run of the thread:
   * no run would take it in, so its senders learn it instead of waiting for good. The fiber's observer
   * sees that exit even when the fiber never ran.
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
      (run) => Option.isSome(config.scope) ? Effect.forkIn(run, config.scope.value) : Effect.forkDaemon(run),
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
      Effect.gen(function*() {
        const loaded = yield* load(threadId, journaled)
        if (Option.isSome(loaded.checkpoint) && loaded.checkpoint.value.pending !== undefined) {
          return yield* new ThreadStateError({
            threadId,
            reason: `is waiting for a decision for middleware "${loaded.checkpoint.value.pending.middleware}"; ` +
              `call resume(threadId, value) instead of run`
          })
        }
        const run = yield* contextOf(threadId, emit, journaled, loaded, lease)
        return yield* Observer.observed(
          run,
          Effect.flatMap(inputOf(run, input), (transformed) =>
            Effect.zipRight(
              received === undefined ?
                Effect.void :
                Observer.report(run, () =>
                  AgentEvent.MessageReceived({ mode: received, step: 0, messages: transformed })),
              execute(
                run,
                RunState.make(Lineage.append(loaded.messages, transformed), loaded.slices, undefined),
                { node: "beforeAgent", index: 0 },
                Option.none()
              )
            ))
        )
      }))

  const startRun = (input: Prompt.RawInput, options: Agent.RunOptions, own: Emit | undefined) =>
    Effect.flatMap(
      Effect.zipRight(
        open,
        Effect.zip(checkThreadId(options?.threadId), checkInput(input, "conversation", config.maxInputChars))
      ),
      ([threadId, messages]) =>
        withThreadLock(
          threadId,
          inboxes.leased(threadId, (lease) => runThread(threadId, messages, own, lease, undefined), afterRun)
        )
    )

  /** `send`'s check of its mode. */
  const modeOf = (options: Agent.SendOptions | undefined): Effect.Effect<Inbox.Mode, InvalidOptions> => {
    const mode: unknown = options?.mode ?? "steer"
    return mode === "steer" || mode === "queue" ? Effect.succeed(mode) : Effect.fail(
      new InvalidOptions({
        module: "Agent",
        option: "send.mode",
        reason: `must be "steer" or "queue", got ${typeof mode === "string" ? JSON.stringify(mode) : typeof mode}`
      })
    )
  }

  const send = (threadId: string, message: Prompt.RawInput, options?: Agent.SendOptions) =>
    Effect.gen(function*() {
      // a closed agent would start no run: its senders learn it here, not from `result`
      yield* open
      const id = yield* checkThreadId(threadId)
      const mode = yield* modeOf(options)
      const messages = yield* checkInput(message, "user", config.maxInputChars)
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

  /** The interrupt a thread waits on, and the index of its hook. */
  const pendingOf = (threadId: string, loaded: Checkpoint.Loaded) =>
    Effect.gen(function*() {
      const pending = Option.isSome(loaded.checkpoint) ? loaded.checkpoint.value.pending : undefined
      if (pending === undefined) {
        return yield* new ThreadStateError({
          threadId,
          reason: "is not waiting for a decision; there is nothing to resume"
        })
      }
      const index = nodes[pending.node].findIndex((m) => m.name === pending.middleware)
      if (index < 0) {
        return yield* new ThreadStateError({
          threadId,
          reason: `waits for middleware "${pending.middleware}", which this agent does not have`
        })
      }
      return { pending, middleware: nodes[pending.node][index]!, index }
    })

  /** A wait a durable journal made is answered only by a durable run, and given up only by its owner. */
  const checkOwner = (
    threadId: string,
    pending: Checkpointer.PendingInterrupt,
    durable: boolean,
    operation: DurableThreadError["operation"]
  ) =>
    pending.durable === true && !durable
      ? Effect.fail(new DurableThreadError({ threadId, operation }))
      : Effect.void

  const validateValue = (
    threadId: string,
    middleware: Middleware.Any,
    pending: Checkpointer.PendingInterrupt,
    value: unknown
  ) =>
    middleware.validateResume === undefined
      ? Effect.void
      : Effect.provide(middleware.validateResume({ threadId, interrupt: pending.value, value }), config.context)

  const startResume = (id: string, value: unknown, own: Emit | undefined) =>
    Effect.flatMap(Effect.zipRight(open, checkThreadId(id)), (threadId) =>
      withThreadLock(
        threadId,
        inboxes.leased(threadId, (lease) =>
          begin(threadId, true, own, (emit, journaled) =>
            Effect.gen(function*() {
              const loaded = yield* load(threadId, journaled)
              const { index, middleware, pending } = yield* pendingOf(threadId, loaded)
              yield* checkOwner(threadId, pending, journaled.journal.durable, "resume")
              yield* validateValue(threadId, middleware, pending, value)
              const run = yield* contextOf(threadId, emit, journaled, loaded, lease)
              const state = RunState.make(loaded.messages, loaded.slices, Option.getOrThrow(loaded.checkpoint).run)
              return yield* Observer.observed(
                run,
                execute(run, state, { node: pending.node, index }, Option.some(value))
              )
            })), afterRun)
      ))

  const streamOf = (start: (emit: Emit) => Effect.Effect<AgentResult.AgentResult<any>, unknown, any>) =>
    unwrapScoped(Effect.gen(function*() {
      const mailbox = yield* Mailbox.make<AgentEvent.AgentEvent<any>, unknown>()
      const emit: Emit = (event) => {
        mailbox.unsafeOffer(event)
      }
      yield* start(emit).pipe(Effect.asVoid, Mailbox.into(mailbox), Effect.forkScoped)
      return Mailbox.toStream(mailbox)
    }))

  return {
    run: Effect.fn("Agent.run")((input: Prompt.RawInput, options: Agent.RunOptions) =>
      startRun(input, options, undefined)
    ),
    stream: (input, options) =>
      streamOf((emit) =>
        startRun(input, options, emit).pipe(Effect.withSpan("Agent.stream", { captureStackTrace: false }))
      ),
    resume: Effect.fn("Agent.resume")((threadId: string, value: unknown) => startResume(threadId, value, undefined)),
    resumeStream: (threadId, value) =>
      streamOf((emit) =>
        startResume(threadId, value, emit).pipe(Effect.withSpan("Agent.resumeStream", { captureStackTrace: false }))
      ),
    validateResume: Effect.fn("Agent.validateResume")(function*(id: string, value: unknown) {
      yield* open
      const threadId = yield* checkThreadId(id)
      const { middleware, pending } = yield* pendingOf(threadId, yield* load(threadId))
      yield* validateValue(threadId, middleware, pending, value)
      return pending
    }),
    send,
    watch: watchers.watch,
    discardPending: (threadId, reason) =>
      (isThreadId(threadId) ?
        withThreadLock(
          threadId,
          Effect.gen(function*() {
            const loaded = yield* load(threadId)
            if (Option.isNone(loaded.checkpoint) || loaded.checkpoint.value.pending === undefined) return false
            const owner = yield* Effect.serviceOption(RunJournal.DurableOwner)
            yield* checkOwner(threadId, loaded.checkpoint.value.pending, Option.isSome(owner), "discardPending")
            const messages = AgentState.answerPending(loaded.messages, reason)
            const { pending: _pending, run: _run, ...kept } = loaded.checkpoint.value
            yield* checkpointer.save(threadId, { ...kept, messages: AgentState.encodeMessages(messages) })
            return true
          })
        ).pipe(
          // messages sent while the thread waited now start the run they were held for
          Effect.tap((discarded) => discarded && inboxes.hasWaiting(threadId) ? background(threadId) : Effect.void)
        ) :
        Effect.succeed(false)).pipe(Effect.withSpan("Agent.discardPending")),
    deleteThread: (threadId) =>
      (isThreadId(threadId) ?
        withThreadLock(
          threadId,
          Effect.gen(function*() {
            // the slices as stored (the messages are not decoded), for the hooks; a checkpoint that does not
            // load is deleted all the same
            const slices: Option.Option<Record<string, object>> = config.onThreadDeleted.length === 0
              ? Option.none()
              : yield* checkpointer.load(threadId).pipe(
                Effect.flatMap(Option.match({
                  onNone: () => Effect.succeedNone,
                  onSome: (checkpoint) => Effect.asSome(layout.decodeSlices(checkpoint.slices))
                })),
                Effect.orElseSucceed(() => Option.none())
              )
            yield* checkpointer.delete(threadId)
            yield* Effect.forEach(
              config.onThreadDeleted,
              (m) =>
                Effect.provide(
                  m.onThreadDeleted!(threadId, Option.flatMap(slices, (all) => Option.fromNullable(all[m.name]))),
                  config.context
                ),
              { discard: true }
            )
          }).pipe(Effect.zipRight(inboxes.drop(
            threadId,
            new ThreadStateError({ threadId, reason: "was deleted before this message joined it" })
          )))
        ) :
        Effect.void).pipe(Effect.withSpan("Agent.deleteThread")),
    thread: (id) =>
      Effect.flatMap(
        checkThreadId(id),
        (threadId) =>
          load(threadId).pipe(Effect.map((loaded) =>
            Option.map(loaded.checkpoint, (checkpoint) => ({
              threadId,
              state: layout.flatten(loaded),
              pending: Option.fromNullable(checkpoint.pending).pipe(
                Option.map((pending) => ({
                  middleware: pending.middleware,
                  value: pending.value,
                  key: pending.key ?? `${pending.node}/${pending.middleware}`
                }))
              )
            }))
          ))
      )
  } as Agent.Agent.Service<any, any>
}
