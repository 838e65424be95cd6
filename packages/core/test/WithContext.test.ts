/**
 * `internal/fast/withContext.ts`: an effect run with its context replaced
 * must behave as `Effect.mapInputContext`: the effect sees the new context,
 * and the fiber gets its own back however the effect ends.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Option } from "effect"
import { withContext } from "../src/internal/fast/withContext.js"

class Name extends Context.Tag("test/Name")<Name, string>() {}
class Extra extends Context.Tag("test/Extra")<Extra, number>() {}

/** What the fiber's context holds of the two services (`undefined`: not there). */
const seen = Effect.map(Effect.context<never>(), (context) => ({
  name: Option.getOrUndefined(Context.getOption(context, Name)),
  extra: Option.getOrUndefined(Context.getOption(context, Extra))
}))

const withExtra = <A, E>(effect: Effect.Effect<A, E, Name | Extra>) =>
  withContext(effect, (input) => Context.add(input as Context.Context<Name>, Extra, 1))

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
})
