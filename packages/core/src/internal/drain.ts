import * as Channel from "effect/Channel"
import type * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

/**
 * Runs `stream` to its end, handing each chunk to `onChunk` (synchronous),
 * in the calling fiber. `Stream.run*` in effect 3.22 runs its channel executor in a forked
 * fiber and copies the fiber refs back (~250 µs per run here, more the more
 * fiber refs are set); pulling from the channel in a scope of our own does
 * not. The stream's finalizers run when it ends, fails or is interrupted.
 */
export const drain = <A, E, R>(
  stream: Stream.Stream<A, E, R>,
  onChunk: (chunk: Chunk.Chunk<A>) => void
): Effect.Effect<void, E, R> =>
  Effect.acquireUseRelease(
    Scope.make(),
    (scope) =>
      Effect.flatMap(Channel.toPullIn(Stream.toChannel(stream), scope), (pull) => {
        const next: Effect.Effect<void, E, R> = Effect.flatMap(pull, (step) => {
          if (step._tag === "Left") return Effect.void
          onChunk(step.right)
          return next
        })
        return next
      }),
    (scope, exit) => Scope.close(scope, exit)
  )
