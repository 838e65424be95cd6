import type * as AiError from "@effect/ai/AiError"
import type { ModelReplyError } from "@stepwise-agent/core/AgentError"
import * as AiFailure from "@stepwise-agent/core/AiFailure"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { identity } from "effect/Function"
import * as Schedule from "effect/Schedule"
import * as ScheduleDecision from "effect/ScheduleDecision"
import * as Schema from "effect/Schema"
import * as Check from "./options.js"

/** The schemas of the options ModelRetry and ToolRetry share. */
export const optionFields = {
  maxRetries: Schema.optional(Check.Count),
  retryOn: Schema.optional(Check.AnyFunction),
  initialDelay: Schema.optional(Check.DurationInput),
  factor: Schema.optional(Schema.Number),
  maxDelay: Schema.optional(Check.DurationInput),
  jitter: Schema.optional(Schema.Boolean),
  schedule: Schema.optional(Check.ScheduleSchema),
  onFailure: Schema.optional(Schema.Literal("raise", "error", "continue")),
  name: Schema.optional(Check.NonEmpty)
}

/** The backoff options ModelRetry and ToolRetry share. */
export interface BackoffOptions<In> {
  readonly maxRetries?: number | undefined
  readonly initialDelay?: Duration.DurationInput | undefined
  readonly factor?: number | undefined
  readonly maxDelay?: Duration.DurationInput | undefined
  readonly jitter?: boolean | undefined
  readonly schedule?: Schedule.Schedule<unknown, In> | undefined
}

/** A resolved backoff: how many retries at most, and the delay before each. */
export interface Backoff<In> {
  readonly maxRetries: number
  readonly delays: Schedule.Schedule<Duration.Duration, In>
}

/** An invalid option: its name and why. */
export interface Invalid {
  readonly option: string
  readonly reason: string
}

const duration = (option: string, input: unknown): Either.Either<Duration.Duration, Invalid> => {
  const decoded = Duration.decodeUnknown(input)
  return decoded._tag === "Some" && Duration.isFinite(decoded.value)
    ? Either.right(decoded.value)
    : Either.left({ option, reason: `must be a finite duration, got ${String(input)}` })
}

/**
 * Checks the backoff options (already decoded by {@link optionFields}:
 * finite delays, `factor` at least 1, `maxDelay` at least `initialDelay`,
 * no backoff option beside `schedule`) and builds the schedule of delays: exponential
 * from `initialDelay` by `factor`, jittered (x0.8 to x1.2) unless `jitter` is
 * false, and capped at `maxDelay`; or the user's `schedule` as it is.
 */
export const resolveBackoff = <In>(
  options: BackoffOptions<In>,
  defaults: { readonly maxRetries: number }
): Either.Either<Backoff<In>, Invalid> =>
  Either.gen(function*() {
    const maxRetries = options.maxRetries ?? defaults.maxRetries
    if (options.schedule !== undefined) {
      for (
        const option of ["initialDelay", "factor", "maxDelay", "jitter"] as const
      ) {
        if (options[option] !== undefined) {
          return yield* Either.left({
            option,
            reason: "cannot be combined with schedule, which replaces the built-in backoff"
          })
        }
      }
      return { maxRetries, delays: Schedule.delays(options.schedule) }
    }
    const initialDelay = yield* duration("initialDelay", options.initialDelay ?? "1 second")
    const maxDelay = yield* duration("maxDelay", options.maxDelay ?? "60 seconds")
    const factor = options.factor ?? 2
    if (typeof factor !== "number" || !Number.isFinite(factor) || factor < 1) {
      return yield* Either.left({ option: "factor", reason: `must be a finite number of at least 1, got ${factor}` })
    }
    if (Duration.lessThan(maxDelay, initialDelay)) {
      return yield* Either.left({
        option: "maxDelay",
        reason: `must be at least initialDelay (${Duration.format(initialDelay)}), got ${Duration.format(maxDelay)}`
      })
    }
    const jitter = options.jitter ?? true
    const delays = Schedule.exponential(initialDelay, factor).pipe(
      jitter ? Schedule.jittered : identity,
      Schedule.modifyDelay((_, delay) => Duration.min(delay, maxDelay)),
      Schedule.delays
    )
    return { maxRetries, delays }
  })

/** The last failure of a retried effect, and how many attempts were made. */
export interface Exhausted<F> {
  readonly failure: F
  readonly attempts: number
}

/**
 * Runs `attempt` until it succeeds (`Right`), its failure (`Left`) is not to
 * be retried, `maxRetries` retries were made, or the schedule is done.
 * Before each retry it reports `retry <n> of <max> after <what failed>` and
 * sleeps the schedule's delay, or `minDelay` (a provider's retry-after) when
 * that is longer. Errors in `E`, defects and interruption are not retried.
 */
export const retrying = <A, F, E, R>(options: {
  readonly attempt: Effect.Effect<Either.Either<A, F>, E, R>
  readonly backoff: Backoff<F>
  readonly shouldRetry: (failure: F) => boolean
  readonly describe: (failure: F) => string
  readonly minDelay?: ((failure: F, now: number) => Duration.Duration | undefined) | undefined
}): Effect.Effect<Either.Either<A, Exhausted<F>>, E, R> =>
  Effect.gen(function*() {
    const { backoff } = options
    let state = backoff.delays.initial
    let retries = 0
    while (true) {
      const outcome = yield* options.attempt
      if (Either.isRight(outcome)) return Either.right(outcome.right)
      const failure = outcome.left
      if (retries >= backoff.maxRetries || !options.shouldRetry(failure)) {
        return Either.left({ failure, attempts: retries + 1 })
      }
      const now = yield* Clock.currentTimeMillis
      const [next, delay, decision] = yield* backoff.delays.step(now, failure, state)
      if (ScheduleDecision.isDone(decision)) return Either.left({ failure, attempts: retries + 1 })
      state = next
      const floor = options.minDelay?.(failure, now)
      // whole milliseconds, so that jittered delays read well in reports and logs
      const wait = Duration.millis(
        Math.round(Duration.toMillis(floor !== undefined && Duration.greaterThan(floor, delay) ? floor : delay))
      )
      retries++
      const what = options.describe(failure)
      yield* Middleware.report(
        `retry ${retries} of ${backoff.maxRetries} after ${what}, waiting ${Duration.format(wait)}`,
        {
          attempt: retries,
          maxRetries: backoff.maxRetries,
          failure: what,
          delayMillis: Duration.toMillis(wait),
          ...(floor === undefined ? {} : { retryAfterMillis: Duration.toMillis(floor) })
        }
      )
      yield* Effect.sleep(wait)
    }
  })

/** What was wrong with a model's reply, by `ModelReplyError.reason`, in a short name. */
const replyProblems: Record<ModelReplyError["reason"], string> = {
  Truncated: "truncated reply",
  NotAStream: "reply not a stream",
  Empty: "empty reply",
  TooLarge: "reply too large",
  TimedOut: "model call timed out"
}

/**
 * A short name for what went wrong in a model call: the status of a response
 * error (`429`), the reason of a request error (`Transport`), what was wrong
 * with a reply (`truncated reply`), else the tag.
 */
export const describeAiError = (error: AiError.AiError | ModelReplyError): string => {
  if (error._tag === "ModelReplyError") return replyProblems[error.reason]
  const failure = AiFailure.classify(error)
  switch (failure.kind) {
    case "status":
      return `${failure.status}`
    case "response":
      return `${failure.reason} (${failure.status})`
    case "transport":
    case "request":
      return failure.reason!
    default:
      return failure.tag
  }
}
