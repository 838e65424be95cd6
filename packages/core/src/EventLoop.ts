/**
 * Handing the event loop back to timers and I/O from CPU-bound work.
 *
 * Effect yields to other fibers with microtasks, which let timers and I/O run
 * only every 2048th yield: a loop that takes many small pieces without
 * waiting on anything (a redactor holding text back, a reader of a large
 * record) keeps the event loop for as long as the whole loop takes, so a
 * `toolTimeout`, a socket or a server's other requests wait. Such work passes
 * through {@link turn} every so often.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"

/**
 * One turn of the event loop (a macrotask: `setImmediate` where the runtime
 * has it, `setTimeout(0)` otherwise): timers and I/O waiting meanwhile run
 * before the fiber goes on. Interrupting the fiber cancels the turn. It waits
 * on the runtime's loop, not on the Effect `Clock`, so it ends under a
 * `TestClock` too.
 *
 * @example
 * ```ts
 * import { EventLoop } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * // sums a large array, letting timers and I/O run every 100,000 items
 * const sum = (values: ReadonlyArray<number>) =>
 *   Effect.gen(function*() {
 *     let total = 0
 *     for (let i = 0; i < values.length; i++) {
 *       if (i > 0 && i % 100_000 === 0) yield* EventLoop.turn
 *       total += values[i]
 *     }
 *     return total
 *   })
 * ```
 *
 * @since 0.1.0
 */
export const turn: Effect.Effect<void> = Effect.async<void>((resume) => {
  const { clearImmediate, setImmediate } = globalThis
  if (setImmediate !== undefined && clearImmediate !== undefined) {
    const handle = setImmediate(() => resume(Effect.void))
    return Effect.sync(() => clearImmediate(handle))
  }
  const handle = setTimeout(() => resume(Effect.void), 0)
  return Effect.sync(() => clearTimeout(handle))
})
