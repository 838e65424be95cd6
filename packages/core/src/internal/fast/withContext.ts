/**
 * An effect run with the fiber's context replaced, the context it had put
 * back when the effect ends, whatever ends it, and the effect's outcome
 * handed to one of two handlers: what `Effect.mapInputContext` (and
 * `Effect.provide` with a context) followed by `Effect.matchEffect` does, in
 * a third of the fiber operations. effect 3.22 builds the first on
 * `FiberRef.locally`, an `acquireUseRelease` (about 20 operations and a
 * dozen closures per call); here it is one masked read-and-set of the
 * context (on the fiber itself, see `SettableFiber`), the effect, and one
 * success-or-failure continuation that sets it back and goes on with the
 * handler.
 */
import * as Cause from "effect/Cause"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberRef from "effect/FiberRef"

/**
 * `effect` with the context `f` makes of the fiber's current one, then
 * `onSuccess` with its value or `onFailure` with its error (a defect or an
 * interruption passes through). The current context is restored before
 * either handler runs, and when `effect` is interrupted. The handlers run
 * uninterruptibly: keep them short (an encoding, a result to build).
 */
export const withContext = <A, E, R, B, E2, R2>(
  effect: Effect.Effect<A, E, R>,
  f: (input: Context.Context<never>) => Context.Context<R>,
  handlers: {
    readonly onSuccess: (value: A) => Effect.Effect<B, E2, R2>
    readonly onFailure: (error: E) => Effect.Effect<B, E2, R2>
  }
): Effect.Effect<B, E2, R2> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.withFiberRuntime((fiber) => {
      const settable = fiber as unknown as SettableFiber
      const input = fiber.currentContext
      settable.setFiberRef(FiberRef.currentContext, f(input) as Context.Context<never>)
      const putBack = () => settable.setFiberRef(FiberRef.currentContext, input)
      return Effect.matchCauseEffect(restore(effect), {
        onFailure: (cause) => {
          putBack()
          const failure = Cause.failureOrCause(cause)
          return Either.isLeft(failure) ? handlers.onFailure(failure.left) : Effect.failCause(failure.right)
        },
        onSuccess: (value) => {
          putBack()
          return handlers.onSuccess(value)
        }
      })
    })
  ) as Effect.Effect<B, E2, R2>

/**
 * The running fiber as effect 3 implements it (`FiberRuntime`): `FiberRef.set`
 * is this method run as a fiber operation of its own. A continuation runs on
 * the fiber that pushed it, so calling it there sets the same ref without one.
 * Not in effect's public `RuntimeFiber` type: `test/WithContext.test.ts` fails
 * if an effect release drops it.
 */
interface SettableFiber {
  setFiberRef<A>(fiberRef: FiberRef.FiberRef<A>, value: A): void
}

