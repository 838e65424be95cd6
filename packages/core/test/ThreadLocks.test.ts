/**
 * The per-thread locks (`internal/fast/threadLocks.ts`): one holder of a
 * thread at a time, waiters served first come first served, and a waiter
 * interrupted while it waits, or as the lock is handed to it, leaves the lock
 * to the next one: the lock never stays taken by nobody.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, FastCheck, Fiber } from "effect"
import * as ThreadLocks from "../src/internal/fast/threadLocks.js"

/** Whether `effect` ends within a second (a lock left taken would make it wait for good). */
const endsSoon = <A>(effect: Effect.Effect<A>) =>
  Effect.map(Effect.timeout(effect, "1 second"), () => true).pipe(Effect.orElseSucceed(() => false))

describe("thread locks", () => {
  it.live(
    "hold a thread for one effect at a time, in the order they asked, and threads apart",
    () =>
      Effect.gen(function*() {
        const locked = ThreadLocks.make()
        let inside = 0
        let most = 0
        const order: Array<number> = []
        const holder = (i: number, threadId: string) =>
          locked(
            threadId,
            Effect.gen(function*() {
              inside++
              most = Math.max(most, inside)
              if (threadId === "a") order.push(i)
              yield* Effect.yieldNow()
              yield* Effect.sleep("1 millis")
              inside--
            })
          )
        const other = yield* Deferred.make<void>()
        // "b" is held until "a"'s holders are done: they run meanwhile, so threads do not wait on each other
        const fibers = yield* Effect.forEach(
          [0, 1, 2, 3, 4],
          (i) => Effect.fork(holder(i, "a")),
          { concurrency: "unbounded" }
        )
        const b = yield* Effect.fork(locked("b", Deferred.await(other)))
        yield* Fiber.joinAll(fibers)
        assert.deepStrictEqual(order, [0, 1, 2, 3, 4])
        assert.strictEqual(most, 1)
        yield* Deferred.succeed(other, undefined)
        yield* Fiber.join(b)
      }),
    20_000
  )

  it.live(
    "a waiter interrupted while it waits leaves its turn: the next waiter and a later run get the lock",
    () =>
      Effect.gen(function*() {
        const locked = ThreadLocks.make()
        const release = yield* Deferred.make<void>()
        const holding = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(
          locked("t", Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(release)))
        )
        yield* Deferred.await(holding)
        const ran: Array<string> = []
        const first = yield* Effect.fork(locked("t", Effect.sync(() => ran.push("first"))))
        const second = yield* Effect.fork(locked("t", Effect.sync(() => ran.push("second"))))
        yield* Effect.yieldNow()
        yield* Fiber.interrupt(first)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        assert.isTrue(yield* endsSoon(Fiber.join(second)))
        assert.deepStrictEqual(ran, ["second"])
        assert.isTrue(yield* endsSoon(locked("t", Effect.void)))
      }),
    20_000
  )

  it.live("a waiter interrupted as the lock is handed to it hands it on", () =>
    Effect.gen(function*() {
      const locked = ThreadLocks.make()
      const holding = yield* Deferred.make<void>()
      const go = yield* Deferred.make<void>()
      const waiting: { fiber?: Fiber.RuntimeFiber<void> } = {}
      const holder = yield* Effect.fork(
        locked(
          "t",
          Effect.gen(function*() {
            yield* Deferred.succeed(holding, undefined)
            yield* Deferred.await(go)
            // the interruption is sent as the holder gives the lock back, in the same step
            waiting.fiber?.unsafeInterruptAsFork(waiting.fiber.id())
          })
        )
      )
      yield* Deferred.await(holding)
      const waiter = yield* Effect.fork(locked("t", Effect.void))
      waiting.fiber = waiter
      const next = yield* Effect.fork(locked("t", Effect.void))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(go, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.await(waiter)
      assert.isTrue(yield* endsSoon(Fiber.join(next)))
      assert.isTrue(yield* endsSoon(locked("t", Effect.void)))
    }), 20_000)

  it.live(
    "whatever the holders and waiters interrupted, one holder at a time and the lock is free after (property)",
    () =>
      Effect.promise(() =>
        FastCheck.assert(
          FastCheck.asyncProperty(
            FastCheck.array(
              FastCheck.record({
                thread: FastCheck.constantFrom("a", "b"),
                startMillis: FastCheck.integer({ min: 0, max: 4 }),
                holdMillis: FastCheck.integer({ min: 0, max: 2 }),
                interruptAfterMillis: FastCheck.option(FastCheck.integer({ min: 0, max: 6 }), { nil: undefined })
              }),
              { minLength: 1, maxLength: 12 }
            ),
            (plan) =>
              Effect.runPromise(Effect.gen(function*() {
                const locked = ThreadLocks.make()
                const inside: Record<string, number> = { a: 0, b: 0 }
                let overlapped = false
                const fibers = yield* Effect.forEach(plan, ({ holdMillis, startMillis, thread }) =>
                  Effect.fork(Effect.delay(
                    locked(
                      thread,
                      Effect.gen(function*() {
                        if (++inside[thread] > 1) overlapped = true
                        yield* Effect.sleep(holdMillis)
                        inside[thread]--
                      }).pipe(Effect.onInterrupt(() => Effect.sync(() => inside[thread]--)))
                    ),
                    startMillis
                  )))
                yield* Effect.forEach(plan, ({ interruptAfterMillis }, i) =>
                  interruptAfterMillis === undefined
                    ? Effect.void
                    : Effect.fork(Effect.delay(Fiber.interrupt(fibers[i]!), interruptAfterMillis)), { discard: true })
                const allEnded = yield* endsSoon(Effect.forEach(fibers, Fiber.await, { discard: true }))
                const freeA = yield* endsSoon(locked("a", Effect.void))
                const freeB = yield* endsSoon(locked("b", Effect.void))
                return allEnded && freeA && freeB && !overlapped
              }))
          ),
          { numRuns: 60 }
        )
      ),
    60_000
  )
})
