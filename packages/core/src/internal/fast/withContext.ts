/**
 * Fiber refs set for an effect and put back when it ends, whatever ends it,
 * the effect's outcome handed to one of two handlers: what
 * `Effect.mapInputContext` / `Effect.provide` / `Effect.annotateSpans`
 * followed by `Effect.matchEffect` do, in a fraction of the fiber
 * operations. effect 3.22 builds each of those on `FiberRef.locally`, an
 * `acquireUseRelease` (about 12 operations and a dozen closures per call,
 * per ref); here it is one masked set of every ref on the fiber itself (see
 * `SettableFiber`), the effect, and one success-or-failure continuation that
 * puts them back and goes on with the handler. A run's scope is set the same
 * way (`scoped`, for `Effect.scoped`, which provides it through
 * `Effect.mapInputContext`).
 */
import type * as Arr from "effect/Array"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Equal from "effect/Equal"
import * as Exit from "effect/Exit"
import type * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"

/** A fiber ref and how to make its value for the effect of the one the fiber has. */
export type Local = readonly [FiberRef.FiberRef<any>, (current: any) => unknown]

/**
 * What becomes of the effect's outcome once the refs are put back. Without
 * `onFailure` a failure passes on with its whole cause, as `Effect.provide`
 * passes it; with it, as `Effect.matchEffect` does: a cause with a defect
 * passes on with its failures made defects too, else `onFailure` gets its
 * first failure.
 */
export interface Handlers<A, E, B, E2, R2> {
  readonly onSuccess: (value: A) => Effect.Effect<B, E2, R2>
  readonly onFailure?: ((error: E) => Effect.Effect<B, E2, R2>) | undefined
  /**
   * With `onFailure`: gets the first defect of an effect that died (its
   * failures made defects too, as `Effect.matchEffect` passes them on) where
   * its cause would pass on: what `Effect.catchAllDefect` around the whole
   * does with the effect's defects, without its operation (a handler's own
   * defects are the handler's to catch).
   */
  readonly onDefect?: ((defect: unknown) => Effect.Effect<B, E2, R2>) | undefined
  /**
   * Runs once the refs are put back, however the effect ended (interrupted
   * too), before either handler: what `Effect.ensuring` of an `Effect.sync`
   * does, without its operations. Keep it short and synchronous.
   */
  readonly onEnd?: (() => void) | undefined
  /**
   * Runs with the effect's exit once the refs are put back (after `onEnd`),
   * before either handler: what `Effect.onExit` does (its failure follows
   * the effect's in the cause).
   */
  readonly release?: ((exit: Exit.Exit<A, E>) => Effect.Effect<void>) | undefined
}

/**
 * `effect` with each ref of `locals` set to what its function makes of the
 * fiber's value, then `onSuccess` with its value or `onFailure` with its
 * error (a defect or an interruption passes through). The fiber's values are
 * put back before either handler runs, and when `effect` is interrupted. The
 * handlers run uninterruptibly: keep them short (an encoding, a result to
 * build).
 */
export const locally = <A, E, R, B, E2, R2>(
  effect: Effect.Effect<A, E, R>,
  locals: ReadonlyArray<Local>,
  handlers: Handlers<A, E, B, E2, R2>
): Effect.Effect<B, E2, R | R2> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.withFiberRuntime((fiber) => {
      const settable = fiber as unknown as SettableFiber
      const saved = settable._fiberRefs
      const before = locals.map(([ref]) => fiber.getFiberRef(ref))
      settable.setFiberRefs(withValues(saved, fiber.id(), locals, before))
      const set = settable._fiberRefs
      const putBack = () => {
        // refs nothing changed since they were set: the fiber's own refs back as they were, without a copy of
        // its refs per ref put back (each `setFiberRef` copies the map of every ref the fiber has)
        if (settable._fiberRefs === set) settable.setFiberRefs(saved)
        else for (let i = 0; i < locals.length; i++) settable.setFiberRef(locals[i]![0], before[i])
        handlers.onEnd?.()
      }
      const failed = (cause: Cause.Cause<E>): Effect.Effect<B, E2, R2> => {
        // without `onFailure` the outcome goes on as it is, the whole cause (typed as handlers without it type it)
        if (handlers.onFailure === undefined) return Effect.failCause(cause as Cause.Cause<E2>)
        if (!Chunk.isEmpty(Cause.defects(cause))) {
          const died = Cause.flatMap(cause, Cause.die)
          if (handlers.onDefect === undefined) return Effect.failCause(died)
          // the defect `Effect.catchAllDefect` gives: the first one found
          return handlers.onDefect(Option.getOrThrow(Cause.find(died, dieDefect)))
        }
        const failures = Cause.failures(cause)
        return Chunk.isEmpty(failures)
          ? Effect.failCause(cause as Cause.Cause<never>)
          : handlers.onFailure(Chunk.unsafeHead(failures))
      }
      const { release } = handlers
      return Effect.matchCauseEffect(restore(effect), {
        onFailure: (cause) => {
          putBack()
          return release === undefined ? failed(cause) : Effect.matchCauseEffect(release(Exit.failCause(cause)), {
            // (typed as `failed` types a cause it passes on as it is)
            onFailure: (second) => Effect.failCause(Cause.sequential(cause, second) as Cause.Cause<E2>),
            onSuccess: () => failed(cause)
          })
        },
        onSuccess: (value) => {
          putBack()
          return release === undefined
            ? handlers.onSuccess(value)
            : Effect.flatMap(release(Exit.succeed(value)), () => handlers.onSuccess(value))
        }
      })
    })
  )

/**
 * `table` with each ref of `locals` set by fiber `id` to what its function
 * makes of its value in `current`, in one copy of the table's map: what a
 * `setFiberRef` per ref gives (`FiberRefs.updateAs`), which copies the map
 * once per ref through its iterator (an array per entry), and compares each
 * new value with the old one by `Equal` (a context's hash is cached in a
 * `WeakMap`). A value identical to the fiber's own is kept as it is; an equal
 * one is set.
 */
const withValues = (
  table: FiberRefs.FiberRefs,
  id: FiberId.Single,
  locals: ReadonlyArray<Local>,
  current: ReadonlyArray<unknown>
): FiberRefs.FiberRefs => {
  const map: Map<FiberRef.FiberRef<any>, Arr.NonEmptyReadonlyArray<readonly [FiberId.Single, any]>> = new Map()
  table.locals.forEach((stack, ref) => map.set(ref, stack))
  for (let i = 0; i < locals.length; i++) {
    const [ref, make] = locals[i]!
    const value = make(current[i])
    const stack = map.get(ref)
    if (stack === undefined) {
      map.set(ref, [[id, value]])
      continue
    }
    const [[ownerId, owned]] = stack
    // the fiber's own value replaced, another fiber's (inherited) kept under it, as `updateAs` does
    const mine = ownerId === id || ownerId[Equal.symbol](id)
    if (mine && owned === value) continue
    const next: [readonly [FiberId.Single, any], ...Array<readonly [FiberId.Single, any]>] = [[id, value]]
    for (let j = mine ? 1 : 0; j < stack.length; j++) next.push(stack[j]!)
    map.set(ref, next)
  }
  return FiberRefs.unsafeMake(map)
}

/** The defect of a `Die` cause (what `Effect.catchAllDefect` looks for). */
const dieDefect = (cause: Cause.Cause<unknown>): Option.Option<unknown> =>
  Cause.isDieType(cause) ? Option.some(cause.defect) : Option.none()

/**
 * `effect` with a new scope in its context, closed with its exit once the
 * context is put back: what `Effect.scoped` does, in a fraction of the
 * operations (`Effect.scoped` provides the scope through
 * `Effect.mapInputContext`, an `acquireUseRelease`).
 */
export const scoped = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, Scope.Scope>> =>
  Effect.flatMap(Scope.make(), (scope) =>
    locally(
      effect,
      [[FiberRef.currentContext, (input: Context.Context<never>) => Context.add(input, Scope.Scope, scope)]],
      { onSuccess: Effect.succeed, release: (exit) => Scope.close(scope, exit) }
    ) as Effect.Effect<A, E, Exclude<R, Scope.Scope>>)

/**
 * `input` with every service of `context` and `service` under `tag`, in one
 * copy of its map: what `Context.add(Context.merge(input, context), tag,
 * service)` gives, which copies it twice.
 */
export const mergeAndAdd = <I, S>(
  input: Context.Context<never>,
  context: Context.Context<never>,
  tag: Context.Tag<I, S>,
  service: S
): Context.Context<I> => {
  const map = new Map<string, any>()
  input.unsafeMap.forEach((value, key) => map.set(key, value))
  context.unsafeMap.forEach((value, key) => map.set(key, value))
  map.set(tag.key, service)
  return Context.unsafeMake(map)
}

/**
 * `input` with `service` under `tag`: what `Context.add` gives, its map copied
 * entry by entry (`new Map(map)`, which `Context.add` runs, goes through the
 * map's iterator: an array per entry).
 */
export const addService = <I, S>(
  input: Context.Context<never>,
  tag: Context.Tag<I, S>,
  service: S
): Context.Context<I> => {
  const map = new Map<string, any>()
  input.unsafeMap.forEach((value, key) => map.set(key, value))
  map.set(tag.key, service)
  return Context.unsafeMake(map)
}

/**
 * `effect` with the context `f` makes of the fiber's current one, then the
 * handlers ({@link locally} with the context alone).
 */
export const withContext = <A, E, R, B, E2, R2>(
  effect: Effect.Effect<A, E, R>,
  f: (input: Context.Context<never>) => Context.Context<R>,
  handlers: Handlers<A, E, B, E2, R2>
): Effect.Effect<B, E2, R2> => locally(effect, [[FiberRef.currentContext, f]], handlers) as Effect.Effect<B, E2, R2>

/**
 * The running fiber as effect 3 implements it (`FiberRuntime`): `FiberRef.set`
 * is `setFiberRef` run as a fiber operation of its own. A continuation runs on
 * the fiber that pushed it, so calling it there sets the same ref without one.
 * `_fiberRefs` is the fiber's immutable table of refs (each `setFiberRef`
 * makes a new one), `setFiberRefs` puts a whole table back (what
 * `Effect.setFiberRefs` runs). Not in effect's public `RuntimeFiber` type:
 * `test/WithContext.test.ts` fails if an effect release drops them.
 */
interface SettableFiber {
  readonly _fiberRefs: FiberRefs.FiberRefs
  setFiberRef<A>(fiberRef: FiberRef.FiberRef<A>, value: A): void
  setFiberRefs(fiberRefs: FiberRefs.FiberRefs): void
}
