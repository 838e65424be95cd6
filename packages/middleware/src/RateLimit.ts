/**
 * RateLimit: space out model calls and tool calls with Effect's
 * `RateLimiter`, per model and per tool.
 *
 * A rate limit must outlive a run: a bucket made in the run's scope would be
 * dropped when the run ends, and every new run would start with a full one.
 * `effect/RateLimiter` needs a `Scope` (it forks the fiber that refills the
 * bucket), so the limiters live in a {@link RateLimiters} service that a
 * scoped Layer provides ({@link layer}). The middleware makes its limiters
 * there lazily, on first use, and reuses them: they last as long as the
 * layer. This keeps the state where the design puts middleware state (a
 * Layer-provided service), lets several agents share the layer (and so the
 * buckets, as calls on one API key should), and lets an application swap in
 * another implementation, e.g. one backed by a store shared between
 * processes.
 *
 * Buckets are keyed by the middleware's name, the target (`model`, a tool's
 * name, or `*`) and the limit itself, so two agents using the same
 * `RateLimit` options on one layer share their buckets.
 *
 * @since 0.1.0
 */
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as RateLimiter from "effect/RateLimiter"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as SynchronizedRef from "effect/SynchronizedRef"
import * as Check from "./internal/options.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * At most `limit` calls per `interval`. With `"token-bucket"` (the default)
 * the calls are spread over the interval (a limit of 10 per second lets one
 * call through every 100 ms once the bucket is empty); with `"fixed-window"`
 * up to `limit` calls go through in each interval.
 *
 * @since 0.1.0
 * @category models
 */
export interface Limit {
  readonly limit: number
  readonly interval: Duration.DurationInput
  readonly algorithm?: "token-bucket" | "fixed-window" | undefined
}

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The limit on model calls. */
  readonly model?: Limit | undefined
  /**
   * Limits on tool calls by tool name. A tool without its own entry takes
   * from the `"*"` bucket, when there is one, which all such tools share.
   * `Agent.make` fails with `AgentError.UnknownTools` on a name (other than
   * `"*"`) that is not a tool of the agent.
   */
  readonly tools?: Readonly<Record<string, Limit>> | undefined
  /** The middleware's name (default `"rateLimit"`). */
  readonly name?: string | undefined
}

/**
 * A checked limit.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResolvedLimit {
  readonly limit: number
  readonly interval: Duration.Duration
  readonly algorithm: "token-bucket" | "fixed-window"
}

// -----------------------------------------------------------------------------
// tags
// -----------------------------------------------------------------------------

/**
 * Where the rate limiters live: made on first use of a key, kept until the
 * layer that provides this service is released.
 *
 * @since 0.1.0
 * @category tags
 */
export class RateLimiters extends Context.Tag("@stepwise-agent/middleware/RateLimit/RateLimiters")<
  RateLimiters,
  RateLimiters.Service
>() {}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace RateLimiters {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** The limiter of `key`, made with `limit` the first time the key is asked for. */
    readonly get: (key: string, limit: ResolvedLimit) => Effect.Effect<RateLimiter.RateLimiter>
  }
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/**
 * Makes the limiter store. Limiters are made in the scope of this effect and
 * live until it closes.
 *
 * @example
 * ```ts
 * import * as RateLimit from "@stepwise-agent/middleware/RateLimit"
 * import { Duration, Effect } from "effect"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const limiters = yield* RateLimit.make
 *   const limiter = yield* limiters.get("model", { limit: 10, interval: Duration.minutes(1), algorithm: "token-bucket" })
 *   return yield* limiter(Effect.succeed("called"))
 * }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<RateLimiters.Service, never, Scope.Scope> = Effect.gen(function*() {
  const scope = yield* Effect.scope
  const store = yield* SynchronizedRef.make(new Map<string, RateLimiter.RateLimiter>())
  return RateLimiters.of({
    get: (key, limit) =>
      SynchronizedRef.modifyEffect(store, (limiters) => {
        const existing = limiters.get(key)
        if (existing !== undefined) return Effect.succeed([existing, limiters] as const)
        return RateLimiter.make({ limit: limit.limit, interval: limit.interval, algorithm: limit.algorithm }).pipe(
          Scope.extend(scope),
          Effect.map((limiter) => [limiter, new Map(limiters).set(key, limiter)] as const)
        )
      })
  })
})

/**
 * Provides {@link RateLimiters}; the limiters last as long as this layer.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import * as RateLimit from "@stepwise-agent/middleware/RateLimit"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const rateLimit = RateLimit.middleware({ model: { limit: 60, interval: "1 minute" } })
 *   const agent = yield* Agent.make({ middleware: [rateLimit] })
 *   return yield* agent.run("hello", { threadId: "t1" })
 * }).pipe(Effect.provide(RateLimit.layer))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<RateLimiters> = Layer.scoped(RateLimiters, make)

const LimitSchema = Schema.Struct({
  limit: Check.AtLeastOne,
  interval: Check.DurationInput.pipe(Schema.filter((input) => {
    const interval = Duration.decode(input)
    return Duration.isFinite(interval) && Duration.toMillis(interval) > 0
  }, { description: "a positive finite duration" })),
  algorithm: Schema.optional(Schema.Literal("token-bucket", "fixed-window"))
}).annotations({ identifier: "a limit { limit, interval, algorithm? }" })

const OptionsSchema = Schema.Struct({
  model: Schema.optional(LimitSchema),
  tools: Schema.optional(Schema.Record({ key: Check.NonEmpty, value: LimitSchema })),
  name: Schema.optional(Check.NonEmpty)
})

const resolve = (limit: Limit): ResolvedLimit => ({
  limit: limit.limit,
  interval: Duration.decode(limit.interval),
  algorithm: limit.algorithm ?? "token-bucket"
})

const keyOf = (name: string, target: string, limit: ResolvedLimit) =>
  `${name}/${target}/${limit.limit} per ${Duration.toMillis(limit.interval)}ms/${limit.algorithm}`

const describeLimit = (limit: ResolvedLimit) => `${limit.limit} per ${Duration.format(limit.interval)}`

/**
 * Builds the middleware: `wrapModelCall` waits for the model's limiter and
 * `wrapToolCall` for the tool's (its own, or `"*"`), then calls `next`. A
 * call that had to wait reports how long. It needs {@link RateLimiters}
 * (provide {@link layer}). Bad options fail `Agent.make` with
 * `AgentError.InvalidOptions`, and so does a tool named in `tools` that the
 * agent does not have, with `AgentError.UnknownTools`.
 *
 * @example
 * ```ts
 * import * as RateLimit from "@stepwise-agent/middleware/RateLimit"
 *
 * const rateLimit = RateLimit.middleware({
 *   model: { limit: 60, interval: "1 minute" },
 *   tools: { web_search: { limit: 1, interval: "1 second" }, "*": { limit: 20, interval: "1 second" } }
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (options: Options): Middleware.Middleware<{}, never, RateLimiters> =>
  Middleware.unwrap(setup(options), { name: Check.nameOf(options, "rateLimit") })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: (
  options: Options
) => Effect.Effect<Middleware.Middleware<{}, never, RateLimiters>, AgentError.InvalidOptions> = Effect
  .fn(
    "RateLimit.middleware"
  )(function*(options: Options) {
    // (no options, from JavaScript, stand for `{}` here as in the check)
    options ??= {}
    yield* Check.validate("RateLimit", OptionsSchema, options)
    const name = options.name ?? "rateLimit"
    const model = options.model === undefined ? undefined : resolve(options.model)
    const tools = new Map<string, ResolvedLimit>()
    for (const [tool, limit] of Object.entries(options.tools ?? {})) tools.set(tool, resolve(limit))
    if (model === undefined && tools.size === 0) {
      return yield* Check.invalid("RateLimit", "model", "give a model limit, tool limits or both")
    }

    const limited = <A, E, R>(
      target: string,
      what: string,
      limit: ResolvedLimit,
      effect: Effect.Effect<A, E, R>
    ): Effect.Effect<A, E, R | RateLimiters> =>
      Effect.gen(function*() {
        const limiters = yield* RateLimiters
        const limiter = yield* limiters.get(keyOf(name, target, limit), limit)
        const asked = yield* Clock.currentTimeMillis
        return yield* limiter(Effect.gen(function*() {
          const waited = (yield* Clock.currentTimeMillis) - asked
          if (waited > 0) {
            yield* Middleware.report(`waited ${waited}ms for the ${what} rate limit (${describeLimit(limit)})`, {
              target,
              waitedMillis: waited
            })
          }
          return yield* effect
        }))
      })

    const fallback = tools.get("*")
    const named = [...tools.keys()].filter((tool) => tool !== "*")
    return Middleware.make({
      name,
      uses: { tools: named },
      wrapModelCall: model === undefined
        ? undefined
        : (request, next) => limited("model", "model", model, next(request)),
      wrapToolCall: tools.size === 0 ? undefined : (request, next) => {
        const own = tools.get(request.call.name)
        if (own !== undefined) {
          return limited(`tool:${request.call.name}`, `"${request.call.name}" tool`, own, next(request))
        }
        if (fallback !== undefined) return limited("tool:*", "tools' shared", fallback, next(request))
        return next(request)
      }
    })
  })
