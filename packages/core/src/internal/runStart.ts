/**
 * How a run of a thread begins: the journal of the context it runs in, who
 * watches it (its own stream and the agent's watchers, told when it starts,
 * ends or fails), and what stays fixed while it runs (its `RunContext`).
 */
import * as IdGenerator from "@effect/ai/IdGenerator"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import type * as Agent from "../Agent.js"
import * as AgentEvent from "../AgentEvent.js"
import type * as AgentResult from "../AgentResult.js"
import * as RunJournal from "../RunJournal.js"
import * as Secrets from "../Secrets.js"
import * as Checkpoint from "./checkpoint.js"
import type { Compiled } from "./config.js"
import type * as Inbox from "./inbox.js"
import { closeOnRelease, type Lifetime } from "./lifetime.js"
import type { Emit } from "./observer.js"
import type { RunContext } from "./runContext.js"
import { RunSaves } from "./runSaves.js"
import { StepKeys } from "./stepKeys.js"
import type { Watchers } from "./watchers.js"

/**
 * Where a run's steps go (the journal of the context, and the names it gives them), and what else the run takes
 * from the fiber that starts it: whether it is traced, and its clock.
 */
export interface Journaled {
  readonly journal: RunJournal.Service
  readonly keys: StepKeys
  readonly traced: boolean
  readonly clock: Clock.Clock
}

/**
 * The id of a watched run: from the context's `IdGenerator` when there is one
 * (a test can make ids predictable), else a random UUID.
 */
const newRunId: Effect.Effect<string> = Effect.flatMap(
  Effect.serviceOption(IdGenerator.IdGenerator),
  Option.match({ onNone: () => Effect.sync(() => crypto.randomUUID()), onSome: (ids) => ids.generateId() })
)

/**
 * Effect's built-in tracer, which keeps spans in memory and exports nothing: what `Effect.tracer` gives
 * in a fiber with the default services (Effect exports no other handle on it).
 */
const builtInTracer = Effect.runSync(Effect.tracer)

export const make = (
  config: Compiled,
  lifetime: Lifetime,
  watchers: Watchers<Agent.RunEvent<any>>
) => {
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
  ): Effect.Effect<AgentResult.AgentResult<any>, unknown, any> =>
    // what the run reads from its fiber (its journal, tracer and clock), in one operation
    Effect.withFiberRuntime((fiber) => {
      const services = fiber.currentDefaultServices
      const journaled: Journaled = {
        journal: Option.getOrElse(Context.getOption(fiber.currentContext, RunJournal.RunJournal), () =>
          RunJournal.inProcess),
        keys: new StepKeys(),
        traced: config.spans ?? Context.get(services, Tracer.Tracer) !== builtInTracer,
        clock: Context.get(services, Clock.Clock)
      }
      // every failure of a run, whoever raised it, leaves with its credentials scrubbed; one caused by a
      // released service closes the agent
      const run = (emit: Emit | undefined) =>
        Effect.mapErrorCause(body(emit, journaled), (cause) =>
          closeOnRelease(lifetime, Secrets.scrubCause(cause)))
      if (own === undefined && watchers.size() === 0) return run(undefined)
      return Effect.flatMap(watchers.size() === 0 ? Effect.succeed(undefined) : newRunId, (runId) => {
        const publish: Emit | undefined = runId === undefined
          ? undefined
          : (event) => watchers.publish({ runId, threadId, event })
        let ended = false
        // (`own` is given when nobody watches: a run with neither returned above)
        const both: Emit = publish === undefined
          ? own!
          : own === undefined
          ? publish
          : (event) => {
            own(event)
            publish(event)
          }
        const emit: Emit = (event) => {
          if (event._tag === "RunEnded") ended = true
          both(event)
        }
        emit(AgentEvent.RunStarted({ threadId, resumed }))
        // the watchers learn how a run failed, also when its fiber was interrupted (the agent's scope closed)
        const ran = publish === undefined ? run(emit) : Effect.onExit(run(emit), (exit) => {
          if (Exit.isSuccess(exit) || ended) return Effect.void
          const cause = exit.cause
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
        return Effect.map(ran, (result) => {
          if (!ended) emit(AgentEvent.RunEnded({ result }))
          return result
        })
      })
    })

  /** What stays fixed during a run of `threadId`, loaded as `loaded`. */
  const contextOf = (
    threadId: string,
    emit: Emit | undefined,
    journaled: Journaled,
    loaded: Checkpoint.Loaded,
    inbox: Inbox.Lease
  ): RunContext => ({
    threadId,
    incarnation: loaded.incarnation,
    traced: journaled.traced,
    emit,
    clock: journaled.clock,
    decisions: journaled.journal.witness?.decision,
    hooks: journaled.journal.witness?.hookCompleted,
    journal: journaled.journal,
    keys: journaled.keys,
    interruptKeys: new Set(),
    encoder: new Checkpoint.ThreadEncoder(loaded),
    inbox,
    saves: new RunSaves(config.layout.flatten)
  })

  return { begin, contextOf } as const
}
