/**
 * The wait a thread is in, as the thread operations meet it: which hook of
 * the agent waits, who may answer or give it up, and a decision checked
 * against it before a run goes on with it.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { DurableThreadError, ThreadStateError } from "../AgentError.js"
import type * as Checkpointer from "../Checkpointer.js"
import type * as Middleware from "../Middleware.js"
import * as Secrets from "../Secrets.js"
import type * as Checkpoint from "./checkpoint.js"
import type { Compiled } from "./config.js"
import * as Input from "./input.js"
import * as Waits from "./waits.js"

/** The thread a wait is answered in: the wait, its middleware and the index of its hook. */
export interface Pending {
  readonly pending: Checkpointer.PendingInterrupt
  readonly middleware: Middleware.Any
  readonly index: number
}

/** A wait a durable journal made is answered only by a durable run, and given up only by its owner. */
export const checkOwner = (
  threadId: string,
  pending: Checkpointer.PendingInterrupt,
  durable: boolean,
  operation: DurableThreadError["operation"]
) =>
  pending.durable === true && !durable
    ? Effect.fail(new DurableThreadError({ threadId, operation }))
    : Effect.void

/** The checks of the waits of an agent's threads. */
export const make = (config: Compiled) => {
  const { nodes } = config

  /** The interrupt a thread waits on, and the index of its hook. */
  const pendingOf = (threadId: string, loaded: Checkpoint.Loaded): Effect.Effect<Pending, ThreadStateError> =>
    Effect.gen(function*() {
      if (Option.isNone(loaded.checkpoint)) {
        return yield* new ThreadStateError({
          threadId,
          reason: "does not exist (never run, or deleted); there is nothing to resume"
        })
      }
      const pending = loaded.checkpoint.value.pending
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

  /**
   * A decision checked against the wait of the middleware that waits: encoded and decoded. Its encoded form is
   * then held to `maxInputChars`, as an input is (what a person types in it: an answer, a reason, edited
   * arguments).
   */
  const checkValue = (threadId: string, { middleware, pending }: Pending, value: unknown, asPosted = false) =>
    Effect.tap(
      Effect.provide(Waits.checkDecision(middleware, threadId, pending.value, value, asPosted), config.context),
      (checked) => Input.checkDecisionSize(checked.encoded, config.inputLimits)
    )

  /**
   * `value` checked against the decision schema of the wait `at` names, not against a request (a fork's
   * decision, before the fork's hook asks again): what no wait of its kind takes.
   */
  const checkDecisionSchema = (threadId: string, at: Checkpointer.PendingInterrupt, value: unknown) =>
    Effect.gen(function*() {
      const middleware = nodes[at.node].find((m) => m.name === at.middleware)
      const unchecked = middleware?.wait === undefined ? middleware : {
        ...middleware,
        wait: { ...middleware.wait, check: undefined }
      }
      if (unchecked === undefined) {
        return yield* new ThreadStateError({
          threadId,
          reason: `waits for middleware "${at.middleware}", which this agent does not have`
        })
      }
      const checked = yield* Effect.provide(
        Waits.checkDecision(unchecked, threadId, at.value, value, true),
        config.context
      )
      yield* Input.checkDecisionSize(checked.encoded, config.inputLimits)
    }).pipe(Effect.mapErrorCause(Secrets.scrubCause))

  return { pendingOf, checkValue, checkDecisionSchema } as const
}
