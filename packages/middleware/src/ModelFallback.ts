/**
 * ModelFallback: when a model call fails, tries the next model.
 *
 * `wrapModelCall` calls `next` with the request as it is (the agent's model,
 * or the one an outer middleware chose); when that fails (see below), it
 * calls `next` again with `request.model` set to the first fallback, then
 * the second, and so on. The first success wins. When every model failed,
 * the call fails with {@link ModelFallbackExhausted}, which records each
 * attempt's model and error in order (the last error is `lastError`). Every
 * model call starts again from the primary model.
 *
 * A fallback is a `LanguageModel.Service`, an `Effect` producing one (such as
 * `OpenAiLanguageModel.make({ model })`), or a `Layer` providing
 * `LanguageModel` (such as `OpenAiLanguageModel.model("gpt-4o-mini")`). An
 * Effect or Layer is built on first use, at most once per run, in the run's
 * scope; what it needs joins the middleware's requirements and its errors
 * fail the run.
 *
 * `AiError` failures fall back, and so does a `ModelReplyError` (a reply cut
 * short, not a stream, or empty) unless its text was already streamed: a
 * streamed reply that failed after sending text deltas fails the call with
 * that `ModelReplyError` (its `text` holds what was sent), so the user never
 * sees one model's reply spliced onto another's. Errors of inner middleware
 * pass through, and defects and interruption are not caught. Put
 * `ModelRetry` after this middleware in the list to retry each model before
 * falling back.
 *
 * @since 0.1.0
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as AiFailure from "@stepwise-agent/core/AiFailure"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Check from "./internal/options.js"
import { describeAiError } from "./internal/retry.js"

/**
 * A fallback model: a service, an Effect producing one, or a Layer
 * providing `LanguageModel`.
 *
 * @since 0.1.0
 * @category models
 */
export type ModelSource =
  | LanguageModel.Service
  | Effect.Effect<LanguageModel.Service, any, any>
  | Layer.Layer<LanguageModel.LanguageModel, any, any>

/**
 * The errors building a source may fail with.
 *
 * @since 0.1.0
 * @category utility types
 */
export type SourceError<M> = M extends Layer.Layer<infer _A, infer E, infer _R> ? E
  : M extends Effect.Effect<infer _A, infer E, infer _R> ? E
  : never

/**
 * The services building a source needs.
 *
 * @since 0.1.0
 * @category utility types
 */
export type SourceContext<M> = M extends Layer.Layer<infer _A, infer _E, infer R> ? R
  : M extends Effect.Effect<infer _A, infer _E, infer R> ? R
  : never

/**
 * One failed attempt: which model (`"primary"`, `"fallback 1"`, …) and its
 * error: the provider's `AiError` or the agent's `ModelReplyError`.
 *
 * @since 0.1.0
 * @category models
 */
export const Attempt = Schema.Struct({
  model: Schema.String,
  error: Schema.Union(AiError.AiError, AgentError.ModelReplyError)
})

/**
 * @since 0.1.0
 * @category models
 */
export type Attempt = typeof Attempt.Type

/**
 * Every model failed. `attempts` lists each model tried, in order, with its
 * error.
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelFallbackExhausted extends Schema.TaggedError<ModelFallbackExhausted>(
  "@stepwise-agent/middleware/ModelFallback/ModelFallbackExhausted"
)("ModelFallbackExhausted", {
  attempts: Schema.NonEmptyArray(Attempt)
}) {
  /**
   * The error of the last model tried.
   *
   * @since 0.1.0
   */
  get lastError(): AiError.AiError | AgentError.ModelReplyError {
    return this.attempts[this.attempts.length - 1]!.error
  }

  /**
   * @since 0.1.0
   */
  override get message(): string {
    const tried = this.attempts.map(({ error, model }) => `${model}: ${error._tag} ${describeAiError(error)}`)
    return `All ${this.attempts.length} models failed (${tried.join("; ")})`
  }
}

/** An error to fall back on: not a reply whose text the user has already seen. */
const fallsBack = (error: unknown): boolean =>
  AiFailure.isAiError(error) ||
  (error instanceof AgentError.ModelReplyError && !(error.streamed && error.received.includes("text-delta")))

const isService = (u: unknown): u is LanguageModel.Service =>
  Predicate.hasProperty(u, "generateText") && Predicate.isFunction(u.generateText) &&
  Predicate.hasProperty(u, "streamText") && Predicate.isFunction(u.streamText)

type Resolve = Effect.Effect<LanguageModel.Service, unknown, Scope.Scope>

const toResolve = (source: ModelSource): Resolve | LanguageModel.Service => {
  if (Layer.isLayer(source)) {
    return Effect.map(
      Layer.build(source as Layer.Layer<LanguageModel.LanguageModel>),
      Context.get(LanguageModel.LanguageModel)
    )
  }
  return Effect.isEffect(source) ? source as Effect.Effect<LanguageModel.Service> : source as LanguageModel.Service
}

/**
 * Builds the middleware from one or more fallback models, tried in order
 * after the primary one, when `Agent.make` runs its setup. `Agent.make` fails
 * with `AgentError.InvalidOptions` when it is given no model or a value that
 * is not a model source, and with the errors of building a model.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { LanguageModel } from "@effect/ai"
 * import { Effect } from "effect"
 * import * as ModelFallback from "@stepwise-agent/middleware/ModelFallback"
 *
 * declare const backup: LanguageModel.Service
 *
 * const program = Effect.gen(function*() {
 *   const fallback = ModelFallback.middleware(backup)
 *   return yield* Agent.make({ middleware: [fallback] })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = <const Models extends ReadonlyArray<ModelSource>>(
  ...models: Models
): Middleware.Middleware<
  {},
  ModelFallbackExhausted | SourceError<Models[number]>,
  SourceContext<Models[number]>
> => Middleware.unwrap(setup(...models), { name: "modelFallback" })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: <const Models extends ReadonlyArray<ModelSource>>(
  ...models: Models
) => Effect.Effect<
  Middleware.Middleware<{}, ModelFallbackExhausted | SourceError<Models[number]>, SourceContext<Models[number]>>,
  AgentError.InvalidOptions
> = Effect.fn("ModelFallback.middleware")(function*(...models: ReadonlyArray<ModelSource>) {
  if (models.length === 0) {
    return yield* Check.invalid("ModelFallback", "models", "give at least one fallback model")
  }
  const resolvers: Array<Resolve | LanguageModel.Service> = []
  for (let i = 0; i < models.length; i++) {
    const source: unknown = models[i]
    if (!Layer.isLayer(source) && !Effect.isEffect(source) && !isService(source)) {
      return yield* Check.invalid(
        "ModelFallback",
        `models[${i}]`,
        "must be a LanguageModel service, an Effect producing one, or a Layer providing LanguageModel"
      )
    }
    resolvers.push(toResolve(source as ModelSource))
  }
  // built models, per run: a run's scope lives as long as the run (not a speed trick: a model built from a Layer
  // or an Effect holds its resources in that scope, so a run builds each once; the scope is the only value of
  // the run a model call sees)
  const built = new WeakMap<Scope.Scope, Array<LanguageModel.Service | undefined>>()
  const resolve = (index: number): Effect.Effect<LanguageModel.Service, unknown, Scope.Scope> => {
    const resolver = resolvers[index]!
    if (!Effect.isEffect(resolver)) return Effect.succeed(resolver)
    return Effect.flatMap(Effect.scope, (scope) => {
      let cache = built.get(scope)
      if (cache === undefined) {
        cache = []
        built.set(scope, cache)
      }
      const cached = cache[index]
      if (cached !== undefined) return Effect.succeed(cached)
      const slots = cache
      return Effect.tap(resolver, (service) => {
        slots[index] = service
      })
    })
  }
  const label = (index: number) => index === 0 ? "primary" : `fallback ${index}`
  const attempt = (
    index: number,
    effect: Effect.Effect<Middleware.ModelResponse, AiError.AiError | AgentError.ModelReplyError>
  ) =>
    effect.pipe(
      Effect.map(Either.right),
      Effect.catchIf(fallsBack, (error) => Effect.succeed(Either.left(error))),
      Effect.tapError((error) =>
        error instanceof AgentError.ModelReplyError
          ? Middleware.report(
            `${label(index)} failed (${describeAiError(error)}) after streaming text; not falling back`,
            { failed: label(index), error: error._tag }
          )
          : Effect.void
      )
    )
  const make = Middleware.make({
    name: "modelFallback",
    wrapModelCall: Effect.fnUntraced(function*(request, next) {
      const first = yield* attempt(0, next(request))
      if (Either.isRight(first)) return first.right
      const attempts: Array<Attempt> = [{ model: label(0), error: first.left }]
      for (let index = 0; index < resolvers.length; index++) {
        const previous = attempts[attempts.length - 1]!
        yield* Middleware.report(
          `${previous.model} failed (${describeAiError(previous.error)}); trying ${label(index + 1)}`,
          { failed: previous.model, error: previous.error._tag, next: label(index + 1) }
        )
        const model = yield* resolve(index)
        const outcome = yield* attempt(index + 1, next({ ...request, model }))
        if (Either.isRight(outcome)) return outcome.right
        attempts.push({ model: label(index + 1), error: outcome.left })
      }
      return yield* new ModelFallbackExhausted({ attempts: attempts as [Attempt, ...Array<Attempt>] })
    })
  })
  return make as Middleware.Middleware<{}, any, any>
})
