/**
 * The service of a tag where the middleware runs when the app provides one,
 * else the middleware's own, made on first use and kept: how `TodoList` and
 * `Offload` fall back to an in-memory service.
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/** The provided `tag`'s service, or one made once with `make` (per call of `serviceOrOwn`). */
export const serviceOrOwn = <I, S>(tag: Context.Tag<I, S>, make: Effect.Effect<S>): Effect.Effect<S> => {
  let own: S | undefined
  return Effect.flatMap(
    Effect.serviceOption(tag),
    Option.match({
      onSome: Effect.succeed,
      onNone: () => own === undefined ? Effect.map(make, (made) => own ??= made) : Effect.succeed(own)
    })
  )
}
