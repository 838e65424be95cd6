/**
 * Counts the operations Effect's fibers run: every step of a fiber's run
 * loop (a `flatMap`, a `sync`, a service read, …) in the fibers of the
 * effect counted and those they fork. A deterministic measure of a path's
 * CPU work where timings on a shared machine are not (fibers forked before,
 * such as a layer's daemons, are not counted).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as RuntimeFlagsPatch from "effect/RuntimeFlagsPatch"
import * as Supervisor from "effect/Supervisor"

let operations = 0

class Counter extends Supervisor.AbstractSupervisor<void> {
  get value() {
    return Effect.void
  }
  override onEffect() {
    operations++
  }
}

const counter = new Counter()

/**
 * Runs `effect` and counts the fiber operations it and the fibers it forks
 * run meanwhile.
 *
 * @since 0.1.0
 * @category constructors
 */
export const count = async <A, E>(
  effect: Effect.Effect<A, E>
): Promise<{ readonly result: A; readonly operations: number }> => {
  operations = 0
  const result = await Effect.runPromise(
    Effect.withRuntimeFlagsPatch(
      Effect.supervised(effect, counter),
      RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision)
    )
  )
  return { result, operations }
}
