/**
 * `internal/drain.ts`: the core's cheaper ways to run and build streams must
 * behave as Effect's own (`drain` as `Stream.runForEachChunk`; `forkedStream`
 * as `Stream.unwrapScoped` of a fork into a `Mailbox`, which it replaced).
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, Context, Deferred, Effect, ExecutionStrategy, Exit, Fiber, Schema, Scope, Stream } from "effect"
import { drain, forkedStream } from "../src/internal/drain.js"
import { PullScope } from "../src/internal/fast/pullScope.js"

describe("forkedStream", () => {
  it.effect.prop(
    "gives what its fiber emits, in order, and ends as the fiber ends",
    {
      length: Schema.Int.pipe(Schema.between(0, 6)),
      fail: Schema.UndefinedOr(Schema.Int.pipe(Schema.between(0, 6))),
      yields: Schema.Boolean
    },
    ({ fail, length, yields }) =>
      Effect.gen(function*() {
        const stream = forkedStream<number, never>((emit) =>
          Effect.forEach(Array.from({ length }, (_, i) => i), (i) =>
            i === fail
              ? Effect.fail(`failed at ${i}`)
              : Effect.zipRight(Effect.sync(() => emit(i)), yields ? Effect.yieldNow() : Effect.void))
        )
        const seen: Array<number> = []
        const exit = yield* Effect.exit(Stream.runForEach(stream, (i) => Effect.sync(() => seen.push(i))))
        const ends = fail !== undefined && fail < length ? fail : length
        assert.deepStrictEqual(seen, Array.from({ length: ends }, (_, i) => i))
        assert.deepStrictEqual(exit, ends < length ? Exit.fail(`failed at ${ends}`) : Exit.void)
      })
  )

  it.effect("runs its fiber at its own pace: the fiber ends while its consumer waits on it", () =>
    Effect.gen(function*() {
      const ended = yield* Deferred.make<void>()
      const stream = forkedStream<number, never>((emit) =>
        Effect.zipRight(Effect.sync(() => [1, 2, 3].forEach(emit)), Deferred.succeed(ended, void 0))
      )
      const seen: Array<number> = []
      yield* Stream.runForEach(stream, (i) =>
        Effect.zipRight(
          Effect.sync(() => seen.push(i)),
          // the first event is taken before the fiber ends only if it does not wait for its consumer
          i === 1 ? Deferred.await(ended) : Effect.void
        ))
      assert.deepStrictEqual(seen, [1, 2, 3])
    }))

  it.effect("interrupts its fiber, and ends once it has, when its consumer stops early", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const stream = forkedStream<number, never>((emit) =>
        Effect.onInterrupt(
          Effect.zipRight(Effect.sync(() => [1, 2].forEach(emit)), Effect.never),
          () => Effect.sync(() => log.push("interrupted"))
        )
      )
      const taken = yield* Stream.runCollect(Stream.take(stream, 2))
      assert.deepStrictEqual(Chunk.toArray(taken), [1, 2])
      assert.deepStrictEqual(log, ["interrupted"])
    }))

  it.effect("interrupts its fiber when the consuming fiber is interrupted", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const started = yield* Deferred.make<void>()
      const stream = forkedStream<number, never>(() =>
        Effect.onInterrupt(
          Effect.zipRight(Deferred.succeed(started, void 0), Effect.never),
          () => Effect.sync(() => log.push("interrupted"))
        )
      )
      const consumer = yield* Effect.fork(Stream.runDrain(stream))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(consumer)
      assert.deepStrictEqual(log, ["interrupted"])
    }))

  it.effect("gives its fiber the consumer's context", () =>
    Effect.gen(function*() {
      class Name extends Context.Tag("Name")<Name, string>() {}
      const stream = forkedStream<string, Name>((emit) => Effect.map(Name, emit))
      const seen = yield* Stream.runCollect(stream).pipe(Effect.provideService(Name, "consumer"))
      assert.deepStrictEqual(Chunk.toArray(seen), ["consumer"])
    }))

  it.effect("is drained in the calling fiber like any stream", () =>
    Effect.gen(function*() {
      const seen: Array<number> = []
      yield* drain(forkedStream<number, never>((emit) => Effect.sync(() => [0, 1, 2].forEach(emit))), (chunk) =>
        seen.push(...chunk))
      assert.deepStrictEqual(seen, [0, 1, 2])
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

  it.effect("stops an endless stream where onChunk gives an error, runs its finalizers, and fails with that error", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      let pulled = 0
      const stream = Stream.forever(Stream.make(1)).pipe(
        Stream.tap(() => Effect.sync(() => pulled++)),
        Stream.ensuringWith((exit) => Effect.sync(() => log.push(`outer ${exit._tag}`)))
      )
      let seen = 0
      const exit = yield* Effect.exit(drain(stream, (chunk) => {
        seen += Chunk.size(chunk)
      }, () => seen >= 3 ? "enough" : undefined))
      assert.deepStrictEqual(exit, Exit.fail("enough"))
      assert.strictEqual(pulled, 3)
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
