/**
 * `internal/drain.ts`: the core's cheaper ways to run and build streams must
 * behave as Effect's own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, Deferred, Effect, ExecutionStrategy, Exit, Fiber, Schema, Scope, Stream } from "effect"
import { drain, unwrapScoped } from "../src/internal/drain.js"
import { PullScope } from "../src/internal/fast/pullScope.js"

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

/**
 * A stream of `length` numbers in chunks of `chunk`, failing at `fail`, with
 * finalizers at every level (`Stream.ensuringWith` outside, a resource
 * acquired in a scope, a finalizer per element's stream), recorded in `log`
 * with their exit; `failing` makes the outermost finalizer die.
 */
const finalized = (length: number, chunk: number, fail: number | undefined, failing: boolean, log: Array<string>) =>
  Stream.range(0, length - 1).pipe(
    Stream.rechunk(chunk),
    Stream.flatMap((i) =>
      Stream.ensuring(
        i === fail ? Stream.fail(`failed at ${i}`) : Stream.succeed(i),
        Effect.sync(() => log.push(`element ${i}`))
      )
    ),
    (stream) =>
      Stream.unwrapScoped(Effect.as(
        Effect.acquireRelease(Effect.void, (_, exit) => Effect.sync(() => log.push(`resource ${exit._tag}`))),
        stream
      )),
    Stream.ensuringWith((exit) =>
      Effect.suspend(() => {
        log.push(`outer ${exit._tag}`)
        return failing ? Effect.dieMessage("outer finalizer") : Effect.void
      })
    )
  )

describe("drain", () => {
  it.effect.prop(
    "hands over the chunks Stream.runForEachChunk sees, ends as it ends, and runs the stream's finalizers as it does, before it returns",
    {
      length: Schema.Int.pipe(Schema.between(0, 6)),
      chunk: Schema.Int.pipe(Schema.between(1, 3)),
      fail: Schema.UndefinedOr(Schema.Int.pipe(Schema.between(0, 6))),
      failing: Schema.Boolean
    },
    ({ chunk, fail, failing, length }) =>
      Effect.gen(function*() {
        const run = (
          consume: (
            stream: Stream.Stream<number, string>,
            onChunk: (chunk: Chunk.Chunk<number>) => void
          ) => Effect.Effect<
            void,
            string
          >
        ) =>
          Effect.gen(function*() {
            const log: Array<string> = []
            const exit = yield* Effect.exit(
              consume(
                finalized(length, chunk, fail, failing, log),
                (chunk) => log.push(`chunk ${Chunk.join(Chunk.map(chunk, String), ",")}`)
              )
            )
            return { exit: Exit.mapBoth(exit, { onFailure: String, onSuccess: () => "done" }), log }
          })
        const ours = yield* run(drain)
        const effects = yield* run((stream, onChunk) =>
          Stream.runForEachChunk(stream, (chunk) => Effect.sync(() => onChunk(chunk)))
        )
        assert.deepStrictEqual(ours.log, effects.log)
        assert.deepStrictEqual(Exit.isSuccess(ours.exit), Exit.isSuccess(effects.exit))
        if (Exit.isFailure(ours.exit) && Exit.isFailure(effects.exit)) {
          assert.deepStrictEqual(Cause.failures(ours.exit.cause), Cause.failures(effects.exit.cause))
          assert.strictEqual(Cause.isDie(ours.exit.cause), Cause.isDie(effects.exit.cause))
        }
        // each finalizer ran once
        assert.strictEqual(ours.log.filter((line) => line.startsWith("outer")).length, 1)
        assert.strictEqual(ours.log.filter((line) => line.startsWith("resource")).length, 1)
      })
  )

  it.effect("runs the stream's finalizers, with the interruption, when the draining fiber is interrupted mid-stream", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const reached = yield* Deferred.make<void>()
      const stream = Stream.concat(
        Stream.make(1, 2),
        Stream.fromEffect(Effect.zipRight(Deferred.succeed(reached, void 0), Effect.never))
      ).pipe(
        Stream.ensuringWith((exit) => Effect.sync(() => log.push(`outer ${exit._tag} ${Exit.isInterrupted(exit)}`)))
      )
      const fiber = yield* Effect.fork(
        drain(stream, (chunk) => log.push(`chunk ${Chunk.join(Chunk.map(chunk, String), ",")}`))
      )
      yield* Deferred.await(reached)
      const exit = yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.isInterrupted(exit))
      assert.deepStrictEqual(log, ["chunk 1,2", "outer Failure true"])
    }))

  it.effect("runs the stream's finalizers when onChunk throws, and dies with what it threw", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const stream = Stream.make(1, 2, 3).pipe(
        Stream.ensuringWith((exit) => Effect.sync(() => log.push(`outer ${exit._tag}`)))
      )
      const exit = yield* Effect.exit(drain(stream, () => {
        throw new Error("onChunk")
      }))
      assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
      assert.deepStrictEqual(log, ["outer Failure"])
    }))
})

describe("PullScope", () => {
  it.effect("runs its finalizers last added first, every one even when one fails, and fails with what failed", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const scope = new PullScope()
      yield* scope.addFinalizer((exit) => Effect.sync(() => log.push(`first ${exit._tag}`)))
      yield* scope.addFinalizer(() =>
        Effect.zipRight(Effect.sync(() => log.push("second")), Effect.dieMessage("second"))
      )
      const child = yield* scope.fork(ExecutionStrategy.sequential)
      yield* Scope.addFinalizer(child, Effect.sync(() => log.push("child")))
      const exit = yield* Effect.exit(scope.close(Exit.void))
      assert.deepStrictEqual(log, ["child", "second", "first Success"])
      assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
      // closed once: closing again runs nothing, a finalizer added now runs at once with the exit it closed with
      yield* scope.close(Exit.void)
      yield* scope.addFinalizer((exit) => Effect.sync(() => log.push(`late ${exit._tag}`)))
      assert.deepStrictEqual(log, ["child", "second", "first Success", "late Success"])
    }))
})
