/**
 * A scope for one pull of a stream in the calling fiber (`drain.ts`): it
 * keeps the finalizers added to it in an array and runs them, last added
 * first, when its owner closes it, without `Scope.close`'s sequential
 * `forEach` and exit collection when it holds one finalizer (what
 * `Channel.toPullIn` adds: the executor's close). It is not a
 * `Scope.CloseableScope` handed to anybody else: only `drain` closes it.
 */
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { pipeArguments } from "effect/Pipeable"
import * as Scope from "effect/Scope"

/** A scope whose finalizers its owner runs with {@link PullScope.close}. */
export class PullScope implements Scope.Scope {
  readonly [Scope.ScopeTypeId]: Scope.ScopeTypeId = Scope.ScopeTypeId
  readonly strategy: ExecutionStrategy.ExecutionStrategy = ExecutionStrategy.sequential
  private finalizers: Array<Scope.Scope.Finalizer> = []
  private closedWith: Exit.Exit<unknown, unknown> | undefined = undefined

  /** A child scope, closed with this one. */
  fork(strategy: ExecutionStrategy.ExecutionStrategy): Effect.Effect<Scope.CloseableScope> {
    return Effect.flatMap(
      Scope.make(strategy),
      (child) => Effect.as(this.addFinalizer((exit) => Scope.close(child, exit)), child)
    )
  }

  /** Adds `finalizer` (run at once when the scope is closed already, as `Scope.addFinalizerExit` does). */
  addFinalizer(finalizer: Scope.Scope.Finalizer): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (this.closedWith !== undefined) return finalizer(this.closedWith)
      this.finalizers.push(finalizer)
      return Effect.void
    })
  }

  /**
   * Runs the finalizers with `exit`, last added first; every one runs even
   * when one before it fails, and the scope fails with the failures of all
   * (as `Scope.close` does). Closing again does nothing.
   */
  close(exit: Exit.Exit<unknown, unknown>): Effect.Effect<unknown> {
    if (this.closedWith !== undefined) return Effect.void
    this.closedWith = exit
    const finalizers = this.finalizers.reverse()
    this.finalizers = []
    if (finalizers.length === 0) return Effect.void
    if (finalizers.length === 1) return finalizers[0]!(exit)
    return Effect.flatMap(
      Effect.forEach(finalizers, (finalizer) => Effect.exit(finalizer(exit))),
      (exits) => Option.getOrElse(Exit.all(exits), () => Exit.void)
    )
  }

  pipe() {
    // eslint-disable-next-line prefer-rest-params
    return pipeArguments(this, arguments)
  }
}
