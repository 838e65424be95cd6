/**
 * `internal/drain.ts`: the core's cheaper ways to run and build streams must
 * behave as Effect's own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Exit, Schema, type Scope, Stream } from "effect"
import { drain, unwrapScoped } from "../src/internal/drain.js"

/** A stream of `length` numbers failing at `fail`, built in a scope whose close is recorded in `closed`. */
const scopedStream = (length: number, fail: number | undefined, closed: Array<string>) =>
  Effect.gen(function*() {
    yield* Effect.addFinalizer((exit) => Effect.sync(() => closed.push(exit._tag)))
    return Stream.mapEffect(
      Stream.range(0, length - 1),
      (i) => i === fail ? Effect.fail(`failed at ${i}`) : Effect.succeed(i)
    )
  })

describe("unwrapScoped", () => {
  it.effect.prop(
    "gives what Stream.unwrapScoped gives, and closes its scope once with the same exit",
    {
      length: Schema.Int.pipe(Schema.between(0, 6)),
      fail: Schema.UndefinedOr(Schema.Int.pipe(Schema.between(0, 6))),
      take: Schema.UndefinedOr(Schema.Int.pipe(Schema.between(0, 7)))
    },
    ({ fail, length, take }) =>
      Effect.gen(function*() {
        const run = (
          unwrap: (
            effect: Effect.Effect<Stream.Stream<number, string>, never, Scope.Scope>
          ) => Stream.Stream<number, string>
        ) =>
          Effect.gen(function*() {
            const closed: Array<string> = []
            const stream = unwrap(scopedStream(length, fail, closed))
            const exit = yield* Effect.exit(Stream.runCollect(take === undefined ? stream : Stream.take(stream, take)))
            return { exit: Exit.map(exit, Chunk.toArray), closed }
          })
        const ours = yield* run(unwrapScoped)
        const effects = yield* run(Stream.unwrapScoped)
        assert.deepStrictEqual(ours, effects)
        // a scope is made and closed exactly once, unless the stream never runs (`Stream.take(0)`)
        assert.strictEqual(ours.closed.length, take === 0 ? 0 : 1)
      })
  )

  it.effect("closes its scope when the effect building the stream fails", () =>
    Effect.gen(function*() {
      const closed: Array<string> = []
      const noStream: Effect.Effect<Stream.Stream<number>, string> = Effect.fail("no stream")
      const exit = yield* Effect.exit(Stream.runDrain(unwrapScoped(
        Effect.zipRight(Effect.addFinalizer((exit) => Effect.sync(() => closed.push(exit._tag))), noStream)
      )))
      assert.deepStrictEqual(exit, Exit.fail("no stream"))
      assert.deepStrictEqual(closed, ["Failure"])
    }))

  it.effect("closes its scope when drained in the calling fiber", () =>
    Effect.gen(function*() {
      const closed: Array<string> = []
      const seen: Array<number> = []
      yield* drain(unwrapScoped(scopedStream(3, undefined, closed)), (chunk) => seen.push(...chunk))
      assert.deepStrictEqual(seen, [0, 1, 2])
      assert.deepStrictEqual(closed, ["Success"])
    }))
})
