import { assert, describe, it } from "@effect/vitest"
import { EventLoop } from "@stepwise-agent/core"
import { Effect, Fiber } from "effect"

describe("EventLoop.turn", () => {
  it.live("lets a timer due meanwhile run inside a loop that never waits on anything else", () =>
    Effect.gen(function*() {
      let fired = false
      setTimeout(() => {
        fired = true
      }, 0)
      // a busy loop of plain yields: the timer runs only once the loop hands the event loop back
      let turns = 0
      while (!fired && turns < 1_000) {
        const started = Date.now()
        while (Date.now() - started < 1) {
          // busy
        }
        yield* EventLoop.turn
        turns++
      }
      assert.isTrue(fired)
      assert.isBelow(turns, 1_000)
    }))

  it.effect("ends under a TestClock: it waits on the runtime's loop, not on the Clock", () =>
    Effect.gen(function*() {
      for (let i = 0; i < 3; i++) yield* EventLoop.turn
    }))

  it.live("interrupting a fiber waiting on a turn ends it", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(Effect.forever(EventLoop.turn))
      yield* EventLoop.turn
      yield* Fiber.interrupt(fiber)
      assert.isTrue((yield* Fiber.await(fiber))._tag === "Failure")
    }))
})
