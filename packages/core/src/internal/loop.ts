/**
 * The agent service: the driver of runs (`driver.ts`) and the agent's
 * threads (`threads.ts`) composed into `Agent.Service`, with the thread
 * operations that need no run (discard a wait, delete, read).
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as Agent from "../Agent.js"
import { ThreadStateError } from "../AgentError.js"
import type * as AgentEvent from "../AgentEvent.js"
import type * as AgentResult from "../AgentResult.js"
import * as AgentState from "../AgentState.js"
import type * as Fork from "../Fork.js"
import * as RunJournal from "../RunJournal.js"
import type * as RunRecord from "../RunRecord.js"
import * as Checkpoint from "./checkpoint.js"
import { compile, type LoopConfig } from "./config.js"
import { forkedStream } from "./drain.js"
import * as Driver from "./driver.js"
import * as Forks from "./fork.js"
import { checkInput, checkThreadId, isThreadId } from "./input.js"
import { interruptKey } from "./machine.js"
import type { Emit } from "./observer.js"
import { unknownKey } from "./options.js"
import * as Pending from "./pending.js"
import * as Replay from "./replay.js"
import * as Threads from "./threads.js"
import * as Waits from "./waits.js"

export type { LoopConfig } from "./config.js"

/** A run's events as a stream, while `start` runs it. */
const streamOf = (start: (emit: Emit) => Effect.Effect<AgentResult.AgentResult<any>, unknown, any>) =>
  forkedStream<AgentEvent.AgentEvent<any>, any>(start)

/** `use` with the decision of `replay`'s options, once they are checked: an object of known keys, if given. */
const withReplayOptions = <A>(
  method: string,
  options: Agent.ReplayOptions | undefined,
  use: (decision: unknown) => Effect.Effect<A, unknown, any>
): Effect.Effect<A, unknown, any> => {
  const unknown = unknownKey("Agent", options, ["decision"], method)
  return unknown === undefined ? use(options?.decision) : Effect.fail(unknown)
}

/**
 * Builds the service of an agent: the driver of its runs and its threads, which live in the scope (the
 * agent's) until it closes.
 */
export const makeLoop = (loopConfig: LoopConfig): Effect.Effect<Agent.Service<any, any>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const config = compile(loopConfig)
    const { checkpointer, layout } = config
    const checkpoints = Checkpoint.make(layout, checkpointer)
    const { load } = checkpoints
    const execute = Driver.make(config, Driver.steps(config, checkpoints.save))
    const threads = yield* Threads.make(config, checkpoints, execute)
    const { withThreadLock } = threads
    /** How a replay runs the agent; its events go to `emit` (a replay stream's). */
    const replayRuns = (emit: Emit | undefined): Replay.Runs => ({
      start: (input, threadId) => threads.start(input, { threadId }, emit),
      resume: (threadId, decision, encoded) => threads.resume(threadId, decision, emit, encoded)
    })
    // (the effects below need the context the agent captured, which the driver provides: `any` until then)
    return {
      run: Effect.fn("Agent.run")((input: Prompt.RawInput, options: Agent.RunOptions) =>
        threads.start(input, options, undefined)
      ),
      stream: (input, options) =>
        streamOf((emit) =>
          threads.start(input, options, emit).pipe(Effect.withSpan("Agent.stream", { captureStackTrace: false }))
        ),
      resume: Effect.fn("Agent.resume")((threadId: string, value: unknown) =>
        threads.resume(threadId, value, undefined)
      ),
      resumeStream: (threadId, value) =>
        streamOf((emit) =>
          threads.resume(threadId, value, emit).pipe(
            Effect.withSpan("Agent.resumeStream", { captureStackTrace: false })
          )
        ),
      validateResume: Effect.fn("Agent.validateResume")((threadId: string, value: unknown) =>
        threads.validateResume(threadId, value)
      ),
      personTexts: (interrupt, value, replace) =>
        Waits.personTextsOf(
          config.middleware.find((m) => m.name === interrupt.middleware),
          interrupt.value,
          value,
          replace
        ),
      encodeOutput: (output: unknown) =>
        config.output === undefined ? Effect.succeed(output) : config.output.encode(output),
      decodeOutput: (encoded: unknown) =>
        config.output === undefined ? Effect.succeed(encoded) : config.output.decode(encoded),
      validatePosted: Effect.fn("Agent.validatePosted")((threadId: string, encoded: unknown) =>
        threads.validatePosted(threadId, encoded)
      ),
      replay: Effect.fn("Agent.replay")((record: RunRecord.RunRecord, options?: Agent.ReplayOptions) =>
        withReplayOptions(
          "replay",
          options,
          (decision) => Replay.replay(record, replayRuns(undefined), undefined, decision)
        )
      ),
      replayStream: (record, options) =>
        streamOf((emit) =>
          withReplayOptions(
            "replayStream",
            options,
            (decision) => Replay.replay(record, replayRuns(emit), undefined, decision)
          ).pipe(
            Effect.withSpan("Agent.replayStream", { captureStackTrace: false })
          )
        ),
      fork: Effect.fn("Agent.fork")((source: string | RunRecord.RunRecord, options: Fork.Options) =>
        Forks.fork(
          {
            checkpointer,
            checkMessage: (input) => checkInput(input, "conversation", config.inputLimits),
            replay: (record, live) => Replay.replay(record, replayRuns(undefined), live),
            load,
            start: (input, to) => threads.start(input, { threadId: to }, undefined),
            resume: (to, decision) => threads.resume(to, decision, undefined),
            validateResume: threads.validateResume,
            proceed: threads.proceed,
            reenter: threads.reenter,
            checkDecisionSchema: threads.checkDecisionSchema,
            locked: withThreadLock
          },
          source,
          options
        )
      ),
      send: threads.send,
      watch: threads.watch,
      discardPending: (threadId, reason) =>
        (isThreadId(threadId) ?
          withThreadLock(
            threadId,
            Effect.gen(function*() {
              const loaded = yield* load(threadId)
              if (Option.isNone(loaded.checkpoint) || loaded.checkpoint.value.pending === undefined) return false
              const owner = yield* Effect.serviceOption(RunJournal.DurableOwner)
              yield* Pending.checkOwner(
                threadId,
                loaded.checkpoint.value.pending,
                Option.isSome(owner),
                "discardPending"
              )
              const messages = AgentState.answerPending(loaded.messages, reason)
              const { pending: _pending, run: _run, ...kept } = loaded.checkpoint.value
              // over the thread loaded only: one deleted (or made again) since by another process stays so
              yield* checkpointer.save(
                threadId,
                { ...kept, messages: AgentState.encodeMessages(messages) },
                { expected: { incarnation: loaded.incarnation } }
              )
              return true
            })
          ).pipe(
            // messages sent while the thread waited now start the run they were held for
            Effect.tap((discarded) => discarded ? threads.released(threadId) : Effect.void)
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
            }).pipe(Effect.zipRight(threads.drop(
              threadId,
              new ThreadStateError({ threadId, reason: "was deleted before this message joined it" })
            )))
          ) :
          Effect.void).pipe(Effect.withSpan("Agent.deleteThread")),
      thread: (id) =>
        Effect.flatMap(
          checkThreadId(id),
          (threadId) =>
            load(threadId).pipe(Effect.flatMap((loaded) =>
              Effect.transposeMapOption(loaded.checkpoint, (checkpoint) =>
                Effect.map(
                  Effect.transposeMapOption(Option.fromNullable(checkpoint.pending), (pending) =>
                    Effect.map(
                      Waits.decodeStoredRequest(
                        config.nodes[pending.node].find((m) => m.name === pending.middleware),
                        threadId,
                        pending.value
                      ),
                      (value) => ({
                        middleware: pending.middleware,
                        value,
                        key: pending.key ?? interruptKey(pending.node, pending.middleware)
                      })
                    )),
                  (pending) => ({ threadId, state: layout.flatten(loaded), pending })
                ))
            ))
        )
    } as Agent.Service<any, any>
  })
