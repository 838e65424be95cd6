/**
 * How the core runs and builds streams without Effect's costlier stream
 * stages: a model stream drained in the calling fiber, and a run's events as
 * a stream without a stream of streams or a scope.
 */
import * as Cause from "effect/Cause"
import * as Channel from "effect/Channel"
import type * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Mailbox from "effect/Mailbox"
import * as Stream from "effect/Stream"
import { PullScope } from "./fast/pullScope.js"

/**
 * Runs `stream` to its end, handing each chunk to `onChunk` (synchronous),
 * in the calling fiber; `stop`, asked after each chunk, may end it early
 * with an error, which `drain` fails with once the stream's finalizers ran.
 * `Stream.run*` in effect 3.22 runs its channel executor in a forked
 * fiber and copies the fiber refs back (~250 µs per run here, more the more
 * fiber refs are set); pulling from the channel in a scope of our own does
 * not. The stream's finalizers run when it ends, fails or is interrupted,
 * before `drain` does; a failure of theirs follows the stream's.
 *
 * The scope is a `PullScope` (`fast/pullScope.ts`), closed in the one
 * uninterruptible region that pulls: no `Scope.make` / `Scope.close` and no
 * `acquireUseRelease` around the pull (19 of the 155 Effect operations of a
 * drained one-chunk stream).
 */
export const drain = <A, E, R, E2 = never>(
  stream: Stream.Stream<A, E, R>,
  onChunk: (chunk: Chunk.Chunk<A>) => void,
  stop?: () => E2 | undefined
): Effect.Effect<void, E | E2, R> =>
  Effect.uninterruptibleMask((restore) => {
    const scope = new PullScope()
    return Effect.flatMap(Channel.toPullIn(Stream.toChannel(stream), scope), (pull) => {
      const next: Effect.Effect<void, E | E2, R> = Effect.flatMap(pull, (step) => {
        if (step._tag === "Left") return Effect.void
        onChunk(step.right)
        const stopped = stop?.()
        return stopped === undefined ? next : Effect.fail(stopped)
      })
      return Effect.matchCauseEffect(restore(next), {
        onFailure: (cause) =>
          Effect.matchCauseEffect(scope.close(Exit.failCause(cause)), {
            onFailure: (closing) => Effect.failCause(Cause.sequential(cause, closing)),
            onSuccess: () => Effect.failCause(cause)
          }),
        onSuccess: () => scope.close(Exit.void)
      })
    })
  }) as Effect.Effect<void, E | E2, R>

/**
 * The stream of what `start` emits while it runs in a fiber of its own
 * (forked when the stream is first pulled): it ends when `start` ends, fails
 * with its failure, and takes no part in its pace (the events wait in an
 * unbounded `Mailbox`). When the stream ends first (its consumer stops or is
 * interrupted), the fiber is interrupted and the stream ends once it has.
 *
 * Without `Stream.unwrapScoped` and `Effect.forkScoped`: no scope is made,
 * extended into the context and closed; the fiber is remembered in the
 * channel and interrupted by its `ensuringWith` (~28 fewer Effect operations
 * per stream than with `unwrapScoped` of a fork in its scope).
 */
export const forkedStream = <A, R>(
  start: (emit: (value: A) => void) => Effect.Effect<unknown, unknown, R>
): Stream.Stream<A, unknown, R> =>
  Stream.fromChannel(Channel.suspend(() => {
    let fiber: Fiber.RuntimeFiber<boolean> | undefined = undefined
    return Channel.ensuringWith(
      // the fork and its record in one masked step: whatever ends the stream finds the fiber to interrupt
      Channel.unwrap(Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Mailbox.make<A, unknown>(), (mailbox) => {
          const emit = (value: A) => {
            mailbox.unsafeOffer(value)
          }
          return Effect.map(Effect.forkDaemon(restore(Mailbox.into(start(emit), mailbox))), (forked) => {
            fiber = forked
            return Mailbox.toChannel(mailbox)
          })
        })
      )),
      () => fiber === undefined ? Effect.void : Fiber.interrupt(fiber)
    )
  }))
