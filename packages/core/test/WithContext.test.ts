/**
 * `internal/fast/withContext.ts`: an effect run with its context replaced
 * must behave as `Effect.mapInputContext` followed by `Effect.matchEffect`:
 * the effect sees the new context, the fiber gets its own back however the
 * effect ends, and the handlers run with it back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Deferred, Effect, Exit, Fiber, FiberRef, Option, Scope } from "effect"
import { addService, locally, scoped, withContext } from "../src/internal/fast/withContext.js"

class Name extends Context.Tag("test/Name")<Name, string>() {}
class Extra extends Context.Tag("test/Extra")<Extra, number>() {}

/** What the fiber's context holds of the two services (`undefined`: not there). */
const seen = Effect.map(Effect.context<never>(), (context) => ({
  name: Option.getOrUndefined(Context.getOption(context, Name)),
  extra: Option.getOrUndefined(Context.getOption(context, Extra))
}))

const withExtra = <A, E>(effect: Effect.Effect<A, E, Name | Extra>): Effect.Effect<A, E, Name> =>
  withContext(effect, (input) => Context.add(input as Context.Context<Name>, Extra, 1), {
    onSuccess: Effect.succeed,
    onFailure: Effect.fail
  }) as Effect.Effect<A, E, Name>

const withExtraHandled = <A, E, B>(
  effect: Effect.Effect<A, E, Name | Extra>,
  handlers: {
    readonly onSuccess: (value: A) => Effect.Effect<B>
    readonly onFailure: (error: E) => Effect.Effect<B>
    readonly onDefect?: (defect: unknown) => Effect.Effect<B>
  }
): Effect.Effect<B, never, Name> =>
  withContext(effect, (input) => Context.add(input as Context.Context<Name>, Extra, 1), handlers) as Effect.Effect<
    B,
    never,
    Name
  >

describe("withContext", () => {
  it.effect("runs the effect with the context made of the fiber's own", () =>
    Effect.gen(function*() {
      const inside = yield* withExtra(seen)
      assert.deepStrictEqual(inside, { name: "outer", extra: 1 })
    }).pipe(Effect.provideService(Name, "outer")))

  for (
    const [outcome, effect] of [
      ["succeeds", Effect.void],
      ["fails", Effect.fail("failed")],
      ["dies", Effect.die("defect")]
    ] as const
  ) {
    it.effect(`gives the fiber its context back when the effect ${outcome}`, () =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(withExtra(effect))
        assert.strictEqual(Exit.isSuccess(exit), outcome === "succeeds")
        assert.deepStrictEqual(yield* seen, { name: "outer", extra: undefined })
      }).pipe(Effect.provideService(Name, "outer")))
  }

  it.effect("gives the fiber its context back when the effect is interrupted (what its finalizers see)", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const after: Array<number | undefined> = []
      const fiber = yield* Effect.fork(
        Effect.onExit(
          withExtra(Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)),
          () => Effect.map(seen, ({ extra }) => void after.push(extra))
        )
      )
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(after, [undefined])
    }).pipe(Effect.provideService(Name, "outer")))

  it.effect("runs the handlers with the fiber's context back: onSuccess with the value, onFailure with the error", () =>
    Effect.gen(function*() {
      const handlers = {
        onSuccess: (value: string) => Effect.map(seen, (context) => ({ outcome: `success ${value}`, context })),
        onFailure: (error: string) => Effect.map(seen, (context) => ({ outcome: `failure ${error}`, context }))
      }
      const extra = (input: Context.Context<never>) => Context.add(input, Extra, 1)
      const outer = { name: "outer", extra: undefined }
      assert.deepStrictEqual(yield* withContext(Effect.succeed("a"), extra, handlers), {
        outcome: "success a",
        context: outer
      })
      assert.deepStrictEqual(yield* withContext(Effect.fail("b"), extra, handlers), {
        outcome: "failure b",
        context: outer
      })
    }).pipe(Effect.provideService(Name, "outer")))

  it.effect("passes a defect through without the failure handler, and a handler that throws still leaves the context back", () =>
    Effect.gen(function*() {
      const extra = (input: Context.Context<never>) => Context.add(input, Extra, 1)
      const failed: Array<unknown> = []
      const died = yield* Effect.exit(withContext(Effect.die("defect"), extra, {
        onSuccess: Effect.succeed,
        onFailure: (error) => Effect.sync(() => failed.push(error))
      }))
      assert.isTrue(Exit.isFailure(died))
      assert.deepStrictEqual(failed, [])
      const threw = yield* Effect.exit(withContext(Effect.void, extra, {
        onSuccess: () => {
          throw new Error("handler")
        },
        onFailure: Effect.fail
      }))
      assert.isTrue(Exit.isFailure(threw))
      assert.deepStrictEqual(yield* seen, { name: "outer", extra: undefined })
    }).pipe(Effect.provideService(Name, "outer")))

  // a handler that fails and a finalizer that dies: one cause with a failure and a defect
  const failedThenDied = Effect.fail("typed").pipe(Effect.ensuring(Effect.die("finalizer")))

  it.effect("a cause with a failure and a defect passes on as Effect.matchEffect passes it: the defect kept, no handler", () =>
    Effect.gen(function*() {
      const extra = (input: Context.Context<never>) => Context.add(input, Extra, 1)
      const handled: Array<unknown> = []
      const handlers = {
        onSuccess: Effect.succeed,
        onFailure: (error: unknown) => Effect.sync(() => handled.push(error))
      }
      const ours = yield* Effect.exit(withContext(failedThenDied, extra, handlers))
      const effects = yield* Effect.exit(Effect.matchEffect(failedThenDied, handlers))
      assert.deepStrictEqual(handled, [])
      assert.isTrue(Exit.isFailure(ours) && Exit.isFailure(effects))
      if (Exit.isFailure(ours) && Exit.isFailure(effects)) {
        assert.deepStrictEqual([...Cause.defects(ours.cause)], [...Cause.defects(effects.cause)])
        assert.isTrue(Cause.isDie(ours.cause))
      }
    }))

  it.effect("handlers without onFailure pass the whole cause on, as Effect.provide does", () =>
    Effect.gen(function*() {
      const ours = yield* Effect.exit(
        locally(failedThenDied, [], { onSuccess: Effect.succeed })
      )
      assert.isTrue(Exit.isFailure(ours))
      if (Exit.isFailure(ours)) {
        assert.deepStrictEqual([...Cause.failures(ours.cause)], ["typed"])
        assert.deepStrictEqual([...Cause.defects(ours.cause)], ["finalizer"])
      }
    }))

  it.effect("onEnd runs once the context is back, however the effect ends (interrupted too)", () =>
    Effect.gen(function*() {
      const ends: Array<string | undefined> = []
      const onEnd = () => {
        ends.push(Option.getOrUndefined(Context.getOption(Effect.runSync(Effect.context<never>()), Extra))?.toString())
      }
      const ended = (effect: Effect.Effect<unknown, unknown, Extra>) =>
        Effect.exit(
          withContext(effect, (input) => Context.add(input, Extra, 1), { onSuccess: Effect.succeed, onEnd })
        )
      yield* ended(Effect.void)
      yield* ended(Effect.fail("failed"))
      const started = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(ended(Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(ends.length, 3)
      assert.deepStrictEqual((yield* seen).extra, undefined)
    }).pipe(Effect.provideService(Name, "outer")))

  it.effect("keeps what the effect set in another fiber ref, as Effect.mapInputContext does, and puts the context back", () =>
    Effect.gen(function*() {
      const other = FiberRef.unsafeMake(0)
      // set, and set then put back through a locally of its own (the fiber's table of refs changes either way)
      yield* withExtra(FiberRef.set(other, 1))
      assert.strictEqual(yield* FiberRef.get(other), 1)
      assert.deepStrictEqual(yield* seen, { name: "outer", extra: undefined })
      yield* withExtra(Effect.locally(FiberRef.set(other, 2), other, 3))
      assert.strictEqual(yield* FiberRef.get(other), 1)
      assert.deepStrictEqual(yield* seen, { name: "outer", extra: undefined })
      const ours = yield* Effect.exit(withExtra(Effect.zipRight(FiberRef.set(other, 4), Effect.fail("failed"))))
      assert.isTrue(Exit.isFailure(ours))
      assert.strictEqual(yield* FiberRef.get(other), 4)
      assert.deepStrictEqual(yield* seen, { name: "outer", extra: undefined })
    }).pipe(Effect.provideService(Name, "outer")))

  it.effect("leaves every other ref as it was when the effect set none (the fiber's own table of refs put back)", () =>
    Effect.gen(function*() {
      const other = FiberRef.unsafeMake("initial")
      yield* FiberRef.set(other, "outer")
      const before = yield* Effect.withFiberRuntime((fiber) => Effect.succeed(fiber.getFiberRef(other)))
      yield* withExtra(Effect.void)
      assert.strictEqual(yield* FiberRef.get(other), before)
      assert.deepStrictEqual(yield* seen, { name: "outer", extra: undefined })
      // a fiber forked and joined after it gives nothing back that was not its own
      const fiber = yield* Effect.fork(withExtra(Effect.void))
      yield* Fiber.join(fiber)
      assert.strictEqual(yield* FiberRef.get(other), "outer")
      assert.deepStrictEqual(yield* seen, { name: "outer", extra: undefined })
    }).pipe(Effect.provideService(Name, "outer")))

  it.effect("sets the refs as FiberRef.locallyWith does, in a fiber whose values are its parent's or its own", () =>
    Effect.gen(function*() {
      const inherited = FiberRef.unsafeMake("initial")
      const own = FiberRef.unsafeMake(0)
      const unset = FiberRef.unsafeMake<string | undefined>(undefined)
      yield* FiberRef.set(inherited, "parent")
      const stacksOf = Effect.map(Effect.getFiberRefs, (refs) =>
        [inherited, own, unset].map((ref) => {
          const stack = refs.locals.get(ref)
          return stack === undefined ? undefined : stack.map(([id, value]) => [id.id, value])
        }))
      const child = Effect.gen(function*() {
        // `inherited` holds the parent's value only, `own` the child's over the parent's, `unset` nothing
        yield* FiberRef.set(own, 1)
        const ours = yield* locally(
          stacksOf,
          [[inherited, (value: string) => `${value}, local`], [own, (value: number) => value + 1], [
            unset,
            () => "set"
          ]],
          { onSuccess: Effect.succeed }
        )
        const effects = yield* stacksOf.pipe(
          Effect.locallyWith(unset, () => "set"),
          Effect.locallyWith(own, (value) => value + 1),
          Effect.locallyWith(inherited, (value) => `${value}, local`)
        )
        assert.deepStrictEqual(ours, effects)
        assert.deepStrictEqual(
          [yield* FiberRef.get(inherited), yield* FiberRef.get(own), yield* FiberRef.get(unset)],
          ["parent", 1, undefined]
        )
        // a value the fiber already has is kept as it is
        yield* FiberRef.set(unset, "kept")
        const kept = yield* locally(Effect.getFiberRefs, [[unset, (value: string) => value]], {
          onSuccess: Effect.succeed
        })
        assert.strictEqual(kept.locals.get(unset)!.length, 1)
      })
      yield* Fiber.join(yield* Effect.fork(child))
      assert.deepStrictEqual([yield* FiberRef.get(inherited), yield* FiberRef.get(own)], ["parent", 1])
    }))

  it.effect("onDefect gets the defect Effect.catchAllDefect around the whole would get; other outcomes go on as before", () =>
    Effect.gen(function*() {
      const outcomes: ReadonlyArray<Effect.Effect<string, string>> = [
        Effect.die("defect"),
        Effect.fail("failed").pipe(Effect.ensuring(Effect.die("finalizer"))),
        Effect.die("first").pipe(Effect.ensuring(Effect.die("second"))),
        Effect.fail("failed"),
        Effect.succeed("done")
      ]
      const handlers = {
        onSuccess: (value: string) => Effect.succeed(`ok ${value}`),
        onFailure: (error: string) => Effect.succeed(`failed ${error}`)
      }
      for (const effect of outcomes) {
        const ours = yield* Effect.exit(
          withExtraHandled(effect, { ...handlers, onDefect: (defect) => Effect.succeed(`died ${defect}`) })
        )
        const effects = yield* Effect.exit(
          Effect.catchAllDefect(withExtraHandled(effect, handlers), (defect) => Effect.succeed(`died ${defect}`))
        )
        assert.deepStrictEqual(ours, effects)
      }
      // an interruption passes on
      const interrupted = yield* Effect.exit(
        withExtraHandled(Effect.interrupt, { ...handlers, onDefect: () => Effect.succeed("died") })
      )
      assert.isTrue(Exit.isInterrupted(interrupted))
    }).pipe(Effect.provideService(Name, "outer")))

  it("addService gives what Context.add gives: every service of the context, the new one last", () => {
    const input = Context.make(Name, "outer").pipe(Context.add(Extra, 1)) as Context.Context<never>
    const ours = addService(input, Extra, 2)
    const effects = Context.add(input, Extra, 2)
    assert.deepStrictEqual([...ours.unsafeMap], [...effects.unsafeMap])
    assert.deepStrictEqual([...addService(input, Name, "inner").unsafeMap], [
      ...Context.add(input, Name, "inner").unsafeMap
    ])
    assert.strictEqual(input.unsafeMap.get(Extra.key), 1)
  })

  it.effect("relies on the fiber's table of refs and its setter of a whole table, which effect 3's FiberRuntime has", () =>
    Effect.withFiberRuntime((fiber) => {
      const settable = fiber as unknown as { readonly _fiberRefs: unknown; readonly setFiberRefs: unknown }
      assert.isDefined(settable._fiberRefs)
      assert.strictEqual(typeof settable.setFiberRefs, "function")
      return Effect.void
    }))
})

/** What a program's finalizers saw and the exit it ended with, run through `scope` (`scoped` or `Effect.scoped`). */
const finalized = (
  scope: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, Exclude<R, Scope.Scope>>,
  body: Effect.Effect<unknown, unknown, never>
) =>
  Effect.gen(function*() {
    const log: Array<string> = []
    const started = yield* Deferred.make<void>()
    const program = scope(Effect.gen(function*() {
      const own = yield* Scope.Scope
      // one finalizer added to the scope itself (it runs in the context the scope closes in), one through the
      // fiber (it runs in the context it was added in)
      yield* Scope.addFinalizerExit(own, (exit) =>
        Effect.map(Effect.zip(seen, Effect.serviceOption(Scope.Scope)), ([{ name }, scope]) => {
          const outcome = Exit.isSuccess(exit) ? "success" : Exit.isInterrupted(exit) ? "interrupted" : "failure"
          log.push(`scope: ${outcome} ${name} ${Option.isSome(scope) ? "with" : "without"} the scope`)
        }))
      yield* Effect.addFinalizer(() =>
        Effect.map(Effect.serviceOption(Scope.Scope), (scope) => {
          log.push(`fiber: ${Option.isSome(scope) ? "with" : "without"} the scope`)
        })
      )
      yield* Deferred.succeed(started, undefined)
      return yield* body
    }))
    const fiber = yield* Effect.fork(Effect.provideService(program, Name, "outer"))
    yield* Deferred.await(started)
    if (body === Effect.never) {
      yield* Fiber.interrupt(fiber)
    }
    const exit = yield* Fiber.await(fiber)
    const after = yield* Effect.serviceOption(Scope.Scope)
    return { log, exit: Exit.isSuccess(exit) ? exit.value : Cause.pretty(exit.cause), after: Option.isSome(after) }
  })

describe("scoped", () => {
  for (
    const [outcome, body] of [
      ["succeeds", Effect.succeed("value")],
      ["fails", Effect.fail("failed")],
      ["dies", Effect.die("defect")],
      ["is interrupted", Effect.never]
    ] as const
  ) {
    it.effect(`closes the scope with the exit as Effect.scoped does, when the effect ${outcome}`, () =>
      Effect.gen(function*() {
        const ours = yield* finalized(scoped, body)
        const effects = yield* finalized(Effect.scoped, body)
        assert.deepStrictEqual(ours, effects)
        assert.strictEqual(ours.log.length, 2)
      }))
  }

  it.effect("a finalizer that fails fails the effect after its own outcome, as Effect.scoped's does", () =>
    Effect.gen(function*() {
      const program = (scope: typeof scoped) =>
        Effect.exit(scope(Effect.zipRight(Effect.addFinalizer(() => Effect.die("finalizer")), Effect.fail("typed"))))
      const ours = yield* program(scoped)
      const effects = yield* program(Effect.scoped)
      assert.isTrue(Exit.isFailure(ours) && Exit.isFailure(effects))
      if (Exit.isFailure(ours) && Exit.isFailure(effects)) {
        assert.deepStrictEqual([...Cause.failures(ours.cause)], [...Cause.failures(effects.cause)])
        assert.deepStrictEqual([...Cause.defects(ours.cause)], [...Cause.defects(effects.cause)])
      }
    }))
})
