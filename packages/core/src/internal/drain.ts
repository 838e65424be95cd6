/**
 * How the core runs and builds streams without Effect's costlier stream
 * stages: a model stream drained in the calling fiber, and a scoped stream
 * unwrapped without a stream of streams.
 */
import * as Cause from "effect/Cause"
import * as Channel from "effect/Channel"
import type * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { PullScope } from "./fast/pullScope.js"

/**
 * Runs `stream` to its end, handing each chunk to `onChunk` (synchronous),
 * in the calling fiber. `Stream.run*` in effect 3.22 runs its channel executor in a forked
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
export const drain = <A, E, R>(
  stream: Stream.Stream<A, E, R>,
  onChunk: (chunk: Chunk.Chunk<A>) => void
): Effect.Effect<void, E, R> =>
  Effect.uninterruptibleMask((restore) => {
    const scope = new PullScope()
    return Effect.flatMap(Channel.toPullIn(Stream.toChannel(stream), scope), (pull) => {
      const next: Effect.Effect<void, E, R> = Effect.flatMap(pull, (step) => {
        if (step._tag === "Left") return Effect.void
        onChunk(step.right)
        return next
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
  }) as Effect.Effect<void, E, R>

/**
 * `Stream.unwrapScoped(effect)` without its stream of streams: in effect 3.22
 * that is a `Stream.flatten`, a `ConcatAll` channel run by a child executor
 * (~90 KiB allocated per stream here). The scope is made and closed by the
 * channel itself: its finalizer is registered before the scope is made, and
 * the scope is made and extended with interruption masked, so it closes, with
 * the stream's exit, whatever ends the stream.
 */
export const unwrapScoped = <A, E, R, E2, R2>(
  effect: Effect.Effect<Stream.Stream<A, E, R>, E2, R2>
): Stream.Stream<A, E | E2, R | Exclude<R2, Scope.Scope>> =>
  Stream.fromChannel(Channel.suspend(() => {
    let scope: Scope.CloseableScope | undefined = undefined
    return Channel.ensuringWith(
      Channel.unwrap(Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Scope.make(), (made) => {
          scope = made
          return Effect.map(restore(Scope.extend(effect, made)), Stream.toChannel)
        })
      )),
      (exit) => scope === undefined ? Effect.void : Scope.close(scope, exit)
    )
  }))
