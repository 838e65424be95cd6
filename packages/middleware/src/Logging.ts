/**
 * Logging: a structured Effect log line for every step of a run.
 *
 * Each line has a short message and annotations (read them with any Effect
 * `Logger`, e.g. `Logger.json` or `Logger.logfmt`):
 *
 * | message | when | annotations |
 * |---|---|---|
 * | `agent run started` | `beforeAgent` | `threadId`, `messageCount` |
 * | `model call` | after each model call | `threadId`, `step`, `messageCount`, `tools`, `toolCalls`, `finishReason`, `inputTokens`, `outputTokens`, `totalTokens`, `durationMillis` |
 * | `model call failed` | a model call failed | `threadId`, `step`, `messageCount`, `tools`, `error`, `errorMessage`, `durationMillis` |
 * | `tool call` | after each tool call | `threadId`, `step`, `tool`, `callId`, `isFailure`, `durationMillis` |
 * | `tool call failed` | a tool died | `threadId`, `step`, `tool`, `callId`, `error`, `errorMessage`, `durationMillis` |
 * | `agent run ended` | `afterAgent` | `threadId`, `step`, `messageCount` |
 *
 * Every line also carries `middleware` (this middleware's name) and `hook`.
 * Lines are logged at `level` (default `Info`), failures at `failureLevel`
 * (default `Warning`); the logger's minimum level still applies. Failures are
 * logged and passed on unchanged; an interrupted call is not logged.
 *
 * Put it first in the middleware list to time the whole call (the other
 * middleware included), last to time the model or tool alone.
 *
 * @since 0.1.0
 */
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Usage from "@stepwise-agent/core/Usage"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Check from "./internal/options.js"

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The level of ordinary lines (default `Info`). */
  readonly level?: LogLevel.LogLevel | LogLevel.Literal | undefined
  /** The level of failures (default `Warning`). */
  readonly failureLevel?: LogLevel.LogLevel | LogLevel.Literal | undefined
  /** The middleware's name (default `"logging"`). */
  readonly name?: string | undefined
}

const Level = Schema.Union(
  Schema.Literal("All", "Fatal", "Error", "Warning", "Info", "Debug", "Trace", "None"),
  Schema.declare((u: unknown): u is LogLevel.LogLevel => LogLevel.allLevels.includes(u as LogLevel.LogLevel), {
    identifier: "a LogLevel"
  })
)

const OptionsSchema = Schema.Struct({
  level: Schema.optional(Level),
  failureLevel: Schema.optional(Level),
  name: Schema.optional(Check.NonEmpty)
})

const toLevel = (level: LogLevel.LogLevel | LogLevel.Literal): LogLevel.LogLevel =>
  typeof level === "string" ? LogLevel.fromLiteral(level) : level

const describeFailure = (cause: Cause.Cause<unknown>) => {
  const error = Cause.squash(Secrets.scrubCause(cause))
  const tag = Predicate.hasProperty(error, "_tag") && typeof error._tag === "string"
    ? error._tag
    : Cause.isDie(cause)
    ? "Defect"
    : "Error"
  const message = Predicate.hasProperty(error, "message") && typeof error.message === "string"
    ? error.message
    : String(error)
  return { error: tag, errorMessage: Secrets.scrubText(message) }
}

/**
 * Builds the middleware. Bad options (an unknown key too) make `Agent.make`
 * fail with `AgentError.InvalidOptions` naming the option.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Effect, Logger, LogLevel } from "effect"
 * import * as Logging from "@stepwise-agent/middleware/Logging"
 *
 * const program = Agent.make({ middleware: [Logging.middleware({ level: "Debug" })] }).pipe(
 *   Effect.flatMap((agent) => agent.run("hello", { threadId: "t1" })),
 *   Effect.provide(Logger.json),
 *   Logger.withMinimumLogLevel(LogLevel.Debug)
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (options?: Options | undefined): Middleware.Middleware =>
  Check.middlewareOf("Logging", OptionsSchema, options, make)

const make = (options: Options): Middleware.Middleware => {
  const name = options.name ?? "logging"
  const level = toLevel(options.level ?? LogLevel.Info)
  const failureLevel = toLevel(options.failureLevel ?? LogLevel.Warning)
  const log = (
    logLevel: LogLevel.LogLevel,
    hook: string,
    message: string,
    annotations: Record<string, unknown>
  ) => Effect.annotateLogs(Effect.logWithLevel(logLevel, message), { middleware: name, hook, ...annotations })

  /** Runs `effect`, then logs its outcome with how long it took. */
  const timed = <A, E, R>(
    effect: Effect.Effect<A, E, R>,
    onSuccess: (value: A, durationMillis: number) => Effect.Effect<void>,
    onFailure: (cause: Cause.Cause<E>, durationMillis: number) => Effect.Effect<void>
  ): Effect.Effect<A, E, R> =>
    Effect.flatMap(Clock.currentTimeMillis, (started) => {
      const elapsed = Effect.map(Clock.currentTimeMillis, (now) => now - started)
      return effect.pipe(
        Effect.tap((value) => Effect.flatMap(elapsed, (duration) => onSuccess(value, duration))),
        Effect.tapErrorCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.void
            : Effect.flatMap(elapsed, (duration) => onFailure(cause, duration))
        )
      )
    })

  return Middleware.make({
    name,
    beforeAgent: ({ messages, threadId }) =>
      log(level, "beforeAgent", "agent run started", { threadId, messageCount: messages.length }),
    afterAgent: ({ messages, step, threadId }) =>
      log(level, "afterAgent", "agent run ended", { threadId, step, messageCount: messages.length }),
    wrapModelCall: (request, next) => {
      const about = {
        threadId: request.threadId,
        step: request.step,
        messageCount: request.messages.length,
        tools: request.tools.map((tool) => tool.name)
      }
      return timed(
        next(request),
        (response, durationMillis) => {
          const { inputTokens, outputTokens, totalTokens } = Usage.read(response.usage)
          return log(level, "wrapModelCall", "model call", {
            ...about,
            toolCalls: response.toolCalls.map((call) => call.name),
            finishReason: response.finishReason,
            inputTokens,
            outputTokens,
            totalTokens,
            durationMillis
          })
        },
        (cause, durationMillis) =>
          log(failureLevel, "wrapModelCall", "model call failed", {
            ...about,
            ...describeFailure(cause),
            durationMillis
          })
      )
    },
    wrapToolCall: (request, next) => {
      const about = {
        threadId: request.threadId,
        step: request.step,
        tool: request.call.name,
        callId: request.call.id
      }
      return timed(
        next(request),
        (result, durationMillis) =>
          log(level, "wrapToolCall", "tool call", { ...about, isFailure: result.isFailure, durationMillis }),
        (cause, durationMillis) =>
          log(failureLevel, "wrapToolCall", "tool call failed", { ...about, ...describeFailure(cause), durationMillis })
      )
    }
  })
}
