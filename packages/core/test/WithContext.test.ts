/**
 * `internal/fast/withContext.ts`: an effect run with its context replaced
 * must behave as `Effect.mapInputContext` followed by `Effect.matchEffect`:
 * the effect sees the new context, the fiber gets its own back however the
 * effect ends, and the handlers run with it back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Deferred, Effect, Exit, Fiber, Option } from "effect"
import { asIs, locally, withContext } from "../src/internal/fast/withContext.js"

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

  it.effect("asIs passes the whole cause on, as Effect.provide does", () =>
    Effect.gen(function*() {
      const ours = yield* Effect.exit(
        locally(failedThenDied, [], asIs)
      )
      assert.isTrue(Exit.isFailure(ours))
      if (Exit.isFailure(ours)) {
        assert.deepStrictEqual([...Cause.failures(ours.cause)], ["typed"])
        assert.deepStrictEqual([...Cause.defects(ours.cause)], ["finalizer"])
      }
    }))
})
