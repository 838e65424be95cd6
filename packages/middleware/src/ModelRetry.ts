/**
 * ModelRetry: retries a failed model call with backoff.
 *
 * `wrapModelCall` calls `next` again when it fails with an `AiError` or a
 * `ModelReplyError` that `retryOn` accepts (by default {@link isRetryable}:
 * transport failures, 429 and 5xx responses, a response body cut short, a
 * reply that was truncated or empty), at most `maxRetries` times, waiting between attempts
 * by an exponential backoff (`initialDelay`, `factor`, `maxDelay`, `jitter`)
 * or by the user's `schedule`. When the provider says how long to wait — a
 * `retry-after-ms` or `retry-after` header (seconds or an HTTP date) on an
 * `HttpResponseError` — the wait is at least that long, up to
 * `maxRetryAfter`. Each retry is reported (`Middleware.report`) as
 * `retry 1 of 3 after 429, waiting 2s`.
 *
 * Only these failures are considered: other errors of inner middleware pass
 * through untouched, and defects and interruption are never retried. When
 * the last attempt fails (or the error is not retryable), `onFailure`
 * decides: `"raise"` (the default; LangChain's `"error"` is the same) fails with the model's error;
 * `"continue"` answers with an assistant message explaining the failure
 * (finish reason `"error"`), so the run completes with it.
 *
 * Put it inside (after) `ModelFallback` in the middleware list to retry
 * each model before falling back.
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as AiFailure from "@stepwise-agent/core/AiFailure"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Check from "./internal/options.js"
import * as Retry from "./internal/retry.js"

/**
 * A failure of the model call that ModelRetry considers: the provider's
 * `AiError`, or the agent's `ModelReplyError` (a reply cut short or empty).
 *
 * @since 0.1.0
 * @category models
 */
export type Failure = AiError.AiError | AgentError.ModelReplyError

/**
 * What to do when the model still fails: `"raise"` its error (`"error"` is
 * LangChain's name for it, accepted as the same), or `"continue"` with an
 * assistant message explaining the failure.
 *
 * @since 0.1.0
 * @category models
 */
export type OnFailure = "raise" | "error" | "continue"

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Retries after the first attempt (default 2). */
  readonly maxRetries?: number | undefined
  /** Which errors to retry (default {@link isRetryable}). */
  readonly retryOn?: ((error: Failure) => boolean) | undefined
  /** The delay before the first retry (default 1 second). */
  readonly initialDelay?: Duration.DurationInput | undefined
  /** How much each delay grows over the previous one (default 2). */
  readonly factor?: number | undefined
  /** The longest delay of the backoff (default 60 seconds). */
  readonly maxDelay?: Duration.DurationInput | undefined
  /** Multiply each delay by a random factor between 0.8 and 1.2 (default true). */
  readonly jitter?: boolean | undefined
  /**
   * A schedule of delays in place of the built-in backoff (it receives the
   * error); it cannot be combined with `initialDelay`, `factor`, `maxDelay`
   * or `jitter`. `maxRetries` still applies.
   */
  readonly schedule?: Schedule.Schedule<unknown, Failure> | undefined
  /** Wait at least as long as the provider's retry-after header says (default true). */
  readonly respectRetryAfter?: boolean | undefined
  /** The longest retry-after honoured (default 60 seconds); a longer one is cut to this. */
  readonly maxRetryAfter?: Duration.DurationInput | undefined
  /** `"raise"` (default; `"error"` is the same) or `"continue"`. */
  readonly onFailure?: OnFailure | undefined
  /** The middleware's name (default `"modelRetry"`). */
  readonly name?: string | undefined
}

/**
 * The default `retryOn`: a transport failure (`HttpRequestError` with reason
 * `Transport`), a response with status 429 or 5xx (`HttpResponseError` with
 * reason `StatusCode`), a 2xx response whose body could not be read
 * (`HttpResponseError` with reason `Decode`: a connection dropped mid-stream
 * or a body cut short), and a `ModelReplyError` — a reply truncated, not a
 * stream, empty, or a call past the agent's `modelTimeout` — unless it is
 * empty because the model was stopped on purpose (finish reason `"length"` or
 * `"content-filter"`: the same request would stop the same way). Malformed
 * output, other 4xx responses, encoding errors and a reply past the agent's
 * `maxReplyChars` are not retried: they would fail the same way again, or at
 * the same cost.
 *
 * @example
 * ```ts
 * import { AiFailure } from "@stepwise-agent/core"
 * import * as ModelRetry from "@stepwise-agent/middleware/ModelRetry"
 *
 * // also retry when the model's output did not decode
 * const retryOn = ModelRetry.middleware({
 *   retryOn: (error) => ModelRetry.isRetryable(error) || AiFailure.classify(error).kind === "malformed-output"
 * })
 * ```
 *
 * @since 0.1.0
 * @category predicates
 */
export const isRetryable = (error: Failure): boolean => {
  if (error._tag === "ModelReplyError") {
    if (error.reason === "TooLarge") return false
    return error.reason !== "Empty" || (error.finishReason !== "length" && error.finishReason !== "content-filter")
  }
  const failure = AiFailure.classify(error)
  switch (failure.kind) {
    case "transport":
      return true
    case "status":
      return failure.status! === 429 || failure.status! >= 500
    case "response":
      return failure.reason === "Decode" && failure.status! >= 200 && failure.status! < 300
    default:
      return false
  }
}

const header = (headers: Readonly<Record<string, unknown>>, name: string): string | undefined => {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name && typeof value === "string") return value.trim()
  }
  return undefined
}

/**
 * How long the provider asked to wait before retrying, read from an
 * `HttpResponseError`'s response headers: `retry-after-ms` (milliseconds,
 * sent by OpenAI), else `retry-after` (seconds, or an HTTP date compared with
 * `now`, in epoch milliseconds). `None` when the error carries neither (only
 * `HttpResponseError` has response headers in @effect/ai 0.37; provider
 * specific headers such as `x-ratelimit-reset-requests` are not read).
 *
 * @example
 * ```ts
 * import * as ModelRetry from "@stepwise-agent/middleware/ModelRetry"
 * import { AiError } from "@effect/ai"
 * import { Option } from "effect"
 *
 * const error = new AiError.HttpResponseError({
 *   module: "OpenAi",
 *   method: "generateText",
 *   reason: "StatusCode",
 *   request: { method: "POST", url: "https://api.example/v1", urlParams: [], hash: Option.none(), headers: {} },
 *   response: { status: 429, headers: { "retry-after": "20" } }
 * })
 * ModelRetry.retryAfter(error, Date.now()) // Option.some(Duration.seconds(20))
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const retryAfter = (error: AiError.AiError, now: number): Option.Option<Duration.Duration> => {
  const headers: Readonly<Record<string, unknown>> = AiFailure.classify(error).headers
  const millis = header(headers, "retry-after-ms")
  if (millis !== undefined && millis !== "") {
    const value = Number(millis)
    if (Number.isFinite(value) && value >= 0) return Option.some(Duration.millis(value))
  }
  const after = header(headers, "retry-after")
  if (after === undefined || after === "") return Option.none()
  const seconds = Number(after)
  if (Number.isFinite(seconds)) return seconds >= 0 ? Option.some(Duration.seconds(seconds)) : Option.none()
  const date = Date.parse(after)
  return Number.isNaN(date) ? Option.none() : Option.some(Duration.millis(Math.max(0, date - now)))
}

const isFailure = (error: unknown): error is Failure =>
  AiFailure.isAiError(error) || error instanceof AgentError.ModelReplyError

const failureMessage = (error: Failure, attempts: number): Middleware.ModelResponse => {
  const description = AiFailure.classify(error).description
  const detail = description === undefined ? "" : `: ${description}`
  const text = `The model call failed after ${attempts} attempt${attempts === 1 ? "" : "s"} ` +
    `(${error._tag} ${Retry.describeAiError(error)}${detail}).`
  return {
    message: Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text })] }),
    toolCalls: [],
    usage: new Response.Usage({ inputTokens: undefined, outputTokens: undefined, totalTokens: undefined }),
    finishReason: "error"
  }
}

const OptionsSchema = Schema.Struct({
  ...Retry.optionFields,
  respectRetryAfter: Schema.optional(Schema.Boolean),
  maxRetryAfter: Schema.optional(Check.DurationInput)
})

/**
 * Builds the middleware. Bad options fail `Agent.make` with
 * `AgentError.InvalidOptions` (naming the option; an unknown option is an error too): `maxRetries` must be a whole number of
 * at least 0, delays finite durations with `maxDelay` at least
 * `initialDelay`, `factor` at least 1, and `schedule` cannot be combined with
 * the backoff options.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 * import * as ModelRetry from "@stepwise-agent/middleware/ModelRetry"
 *
 * const program = Effect.gen(function*() {
 *   const retry = ModelRetry.middleware({ maxRetries: 3, initialDelay: "500 millis", maxDelay: "10 seconds" })
 *   return yield* Agent.make({ middleware: [retry] })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (options?: Options | undefined): Middleware.Middleware =>
  Middleware.unwrap(setup(options), { name: Check.nameOf(options, "modelRetry") })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: (
  options?: Options | undefined
) => Effect.Effect<Middleware.Middleware, AgentError.InvalidOptions> = Effect.fn("ModelRetry.middleware")(
  function*(options: Options | undefined) {
    yield* Check.validate("ModelRetry", OptionsSchema, options)
    const opts = options ?? {}
    const backoff = Retry.resolveBackoff<Failure>(opts, { maxRetries: 2 })
    if (Either.isLeft(backoff)) return yield* Check.invalid("ModelRetry", backoff.left.option, backoff.left.reason)
    const onFailure = opts.onFailure ?? "raise"
    const maxRetryAfter = Duration.decode(opts.maxRetryAfter ?? "60 seconds")
    if (!Duration.isFinite(maxRetryAfter)) {
      return yield* Check.invalid("ModelRetry", "maxRetryAfter", "must be a finite duration")
    }
    const cap = maxRetryAfter
    const retryOn = opts.retryOn ?? isRetryable
    const minDelay = opts.respectRetryAfter === false ?
      undefined :
      (error: Failure, now: number) =>
        error._tag === "ModelReplyError"
          ? undefined
          : Option.getOrUndefined(Option.map(retryAfter(error, now), (wait) => Duration.min(wait, cap)))
    return Middleware.make({
      name: opts.name ?? "modelRetry",
      wrapModelCall: (request, next) =>
        Retry.retrying({
          attempt: next(request).pipe(
            Effect.map(Either.right),
            Effect.catchIf(isFailure, (error) => Effect.succeed(Either.left(error)))
          ),
          backoff: backoff.right,
          shouldRetry: retryOn,
          describe: Retry.describeAiError,
          minDelay
        }).pipe(
          Effect.flatMap(Either.match({
            onRight: Effect.succeed,
            onLeft: ({ attempts, failure }) =>
              onFailure === "continue"
                ? Effect.as(
                  Middleware.report(`giving up after ${attempts} attempt(s): ${Retry.describeAiError(failure)}`),
                  failureMessage(failure, attempts)
                )
                : Effect.fail(failure)
          }))
        )
    })
  }
)
