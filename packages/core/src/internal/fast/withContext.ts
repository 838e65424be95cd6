/**
 * An effect run with the fiber's context replaced, the context it had put
 * back when the effect ends, whatever ends it: what `Effect.mapInputContext`
 * (and `Effect.provide` with a context) does, in half the fiber operations.
 * effect 3.22 builds those on `FiberRef.locally`, an `acquireUseRelease`
 * (about 20 operations and a dozen closures per call); here it is one masked
 * read-and-set of the context, the effect, and one set back in a single
 * success-or-failure continuation.
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"

/**
 * `effect` with the context `f` makes of the fiber's current one; the
 * current one is restored when `effect` succeeds, fails or is interrupted.
 */
export const withContext = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  f: (input: Context.Context<never>) => Context.Context<R>
): Effect.Effect<A, E> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(
      FiberRef.modify(FiberRef.currentContext, (input) => [input, f(input) as Context.Context<never>]),
      (input) =>
        Effect.matchCauseEffect(restore(effect), {
          onFailure: (cause) => Effect.zipRight(FiberRef.set(FiberRef.currentContext, input), Effect.failCause(cause)),
          onSuccess: (value) => Effect.as(FiberRef.set(FiberRef.currentContext, input), value)
        })
    )
  ) as Effect.Effect<A, E>
