/**
 * A span made only when a tracer other than Effect's built-in one is
 * installed (an OpenTelemetry exporter, say), as the agent makes the spans
 * of its hooks by default: the built-in tracer exports nothing, and a span
 * costs ~35 Effect operations (its own context, fiber refs and exit
 * handling) at every model call of a policy that otherwise does a few.
 */
import * as Effect from "effect/Effect"
import type * as Tracer from "effect/Tracer"

const builtInTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/** `effect` in a span named `name` when the installed tracer is not the built-in one. */
export const withSpanWhenTraced = (name: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.tracerWith((tracer) =>
    tracer === builtInTracer ? effect : Effect.withSpan(effect, name, { captureStackTrace: false })
  )
