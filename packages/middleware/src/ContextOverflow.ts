/**
 * Context overflow: recognising a provider's "request too long" error, and
 * recovering from it by compacting the request and retrying once.
 *
 * {@link classify} reads an `AiError` as a context overflow when the
 * provider answered
 *
 * - OpenAI: HTTP 400 with `error.code: "context_length_exceeded"` ("This
 *   model's maximum context length is 128000 tokens. However, your messages
 *   resulted in 130000 tokens…");
 * - Anthropic: HTTP 400 `invalid_request_error` "prompt is too long: 208310
 *   tokens > 200000 maximum";
 * - any provider or gateway: HTTP 413 (request too large).
 *
 * and takes the sizes the message states, when it states them.
 *
 * {@link recover} builds a `wrapModelCall` hook: when the model call fails
 * with an overflow, it compacts the request with a policy (Summarization's
 * `onOverflow` forces a summary of the older messages), retries once, and
 * when the retry overflows too (or the policy had nothing to compact) fails
 * with {@link ContextOverflow}, which carries the sizes measured and
 * reported. The provider's error itself is not kept: only its message,
 * scrubbed of secrets.
 *
 * {@link middleware} is a ready recovery for agents without `Summarization`:
 * with `policy: "clearToolUses"`, a rejected request has its old tool
 * results cleared (`ContextEditing.ClearToolUses` with its trigger ignored:
 * every result outside `keep` is cleared) and is retried once.
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as AgentState from "@stepwise-agent/core/AgentState"
import * as AiFailure from "@stepwise-agent/core/AiFailure"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as ModelProfile from "@stepwise-agent/core/ModelProfile"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as ContextEditing from "./ContextEditing.js"
import * as FailedEdits from "./internal/failedEdits.js"
import * as HistoryCache from "./internal/fast/historyCache.js"
import * as Check from "./internal/options.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * A provider's "request too long" answer, as {@link classify} read it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Overflow {
  /** The HTTP status (400 or 413). */
  readonly status: number
  /** The tokens the provider counted in the request, when its message says. */
  readonly reportedTokens: number | undefined
  /** The provider's limit in tokens, when its message says. */
  readonly limit: number | undefined
  /** The provider's error message, scrubbed of secrets. */
  readonly message: string
}

/**
 * Options of {@link recover}.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecoverOptions<E, R> {
  /**
   * Compacts a request the provider rejected as too long; None when there is
   * nothing to compact (the call then fails with {@link ContextOverflow}
   * without a retry).
   */
  readonly compact: (
    request: Middleware.ModelRequest,
    overflow: Overflow
  ) => Effect.Effect<Option.Option<Middleware.ModelRequest>, E, R>
  /** The model's name, for the error (default `ModelProfile.CurrentModel`). */
  readonly model?: string | undefined
}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * The request did not fit in the model's context, even after compaction.
 *
 * @since 0.1.0
 * @category errors
 */
export class ContextOverflow extends Schema.TaggedError<ContextOverflow>(
  "@stepwise-agent/middleware/ContextOverflow/ContextOverflow"
)("ContextOverflow", {
  /** The agent's model, when named. */
  model: Schema.optional(Schema.String),
  /**
   * Tokens of the last request sent (system prompt, messages and tool
   * definitions), by the agent's `TokenCounter` (approximate without one).
   */
  measuredTokens: Schema.Number,
  /** Messages of the last request sent. */
  messages: Schema.Number,
  /** The tokens the provider counted in the last request, when it said. */
  reportedTokens: Schema.optional(Schema.Number),
  /** The provider's limit when it said, else the model profile's `maxInputTokens` when known. */
  limit: Schema.optional(Schema.Number),
  /** Whether the request was compacted and retried before this. */
  compacted: Schema.Boolean,
  /** The HTTP status of the last rejection. */
  status: Schema.Number,
  /** The provider's message, scrubbed of secrets. */
  providerMessage: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    const model = this.model === undefined ? "the model" : this.model
    const reported = this.reportedTokens === undefined ? "" : ` (the provider counted ${this.reportedTokens})`
    const limit = this.limit === undefined ? "" : ` over a limit of ${this.limit}`
    return `The request does not fit in the context of ${model}${
      this.compacted ? " even after compaction" : " and there was nothing to compact"
    }: ${this.measuredTokens} tokens measured${reported}${limit}, ${this.messages} messages`
  }
}

// -----------------------------------------------------------------------------
// classification
// -----------------------------------------------------------------------------

const toNumber = (digits: string | undefined): number | undefined =>
  digits === undefined ? undefined : Number(digits.replace(/,/g, ""))

/** The `error.message` and `error.code` of a provider's JSON error body. */
const readBody = (body: string | undefined): { readonly message: string; readonly code: unknown } => {
  if (body === undefined) return { message: "", code: undefined }
  try {
    const parsed: unknown = JSON.parse(body)
    const error = Predicate.hasProperty(parsed, "error") ? parsed.error : undefined
    if (Predicate.hasProperty(error, "message") && typeof error.message === "string") {
      return { message: error.message, code: Predicate.hasProperty(error, "code") ? error.code : undefined }
    }
  } catch {
    // not JSON: the body is the message
  }
  return { message: body, code: undefined }
}

const tooLong = /prompt is too long|maximum context length|context_length_exceeded|exceeds the context window/i

/**
 * Reads a model call's failure as a context overflow (see the module
 * documentation); None for any other failure.
 *
 * @example
 * ```ts
 * import * as ContextOverflow from "@stepwise-agent/middleware/ContextOverflow"
 * import { AiError } from "@effect/ai"
 * import { Option } from "effect"
 *
 * const error = new AiError.HttpResponseError({
 *   module: "OpenAiClient",
 *   method: "createResponse",
 *   reason: "StatusCode",
 *   request: { method: "POST", url: "https://api.openai.com/v1/responses", urlParams: [], hash: Option.none(), headers: {} },
 *   response: { status: 400, headers: {} },
 *   body: JSON.stringify({ error: { message: "prompt is too long: 208310 tokens > 200000 maximum", type: "invalid_request_error" } })
 * })
 * ContextOverflow.classify(error) // Some({ status: 400, reportedTokens: 208310, limit: 200000, ... })
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const classify = (error: AiError.AiError | AgentError.ModelReplyError): Option.Option<Overflow> => {
  const failure = AiFailure.classify(error)
  const status = failure.status
  if (status !== 400 && status !== 413) return Option.none()
  const { code, message } = readBody(failure.body)
  if (status === 400 && code !== "context_length_exceeded" && !tooLong.test(message)) return Option.none()
  const anthropic = /prompt is too long:\s*([\d,]+)\s*tokens\s*>\s*([\d,]+)/i.exec(message)
  const limit = anthropic?.[2] ?? /maximum context length is\s*([\d,]+)/i.exec(message)?.[1]
  const reported = anthropic?.[1] ?? /resulted in\s*([\d,]+)\s*tokens/i.exec(message)?.[1]
  return Option.some({
    status,
    reportedTokens: toNumber(reported),
    limit: toNumber(limit),
    message: Secrets.scrubText(message.length > 0 ? message : `HTTP ${status}`)
  })
}

/**
 * Whether a model call's failure is a context overflow ({@link classify}).
 *
 * @example
 * ```ts
 * import * as ContextOverflow from "@stepwise-agent/middleware/ContextOverflow"
 * import { AiError } from "@effect/ai"
 *
 * declare const error: AiError.AiError
 * if (ContextOverflow.isOverflow(error)) console.log("too long")
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const isOverflow = (error: AiError.AiError | AgentError.ModelReplyError): boolean =>
  Option.isSome(classify(error))

// -----------------------------------------------------------------------------
// recovery
// -----------------------------------------------------------------------------

const counterOf = HistoryCache.agentCounterOrApproximate()

/** The messages a request sends: its messages paired (orphans dropped), as the agent sends them. */
const sentOf = (request: Middleware.ModelRequest): ReadonlyArray<Prompt.Message> => AgentState.paired(request.messages)

/** Tokens of what a request sends: system prompt, messages (paired) and tool definitions. */
const measure = (request: Middleware.ModelRequest): Effect.Effect<number> =>
  Effect.gen(function*() {
    const counter = yield* counterOf
    // (`concat`, not a spread: V8 fills a spread element by element, a long thread at every call)
    const messages = request.systemPrompt === undefined
      ? sentOf(request)
      : Array.of<Prompt.Message>(Prompt.makeMessage("system", { content: request.systemPrompt })).concat(
        sentOf(request)
      )
    const tokens = yield* counter.count(messages)
    if (request.tools.length === 0) return tokens
    const definitions = JSON.stringify(request.tools.map((tool) => ({
      name: tool.name,
      description: Tool.getDescription(tool as any),
      parameters: Tool.getJsonSchema(tool as any)
    })))
    const scale = yield* counter.scale
    return tokens + Math.round((yield* counter.countText(definitions)) * scale)
  })

/**
 * A `wrapModelCall` hook that recovers from a context overflow: it compacts
 * the request with `compact` and retries once; when the retry overflows too,
 * or `compact` has nothing to compact, it fails with {@link ContextOverflow}.
 * Other failures pass through (the agent's run already fails with them, so
 * a middleware using it need not declare them). It reports the decision
 * `"the provider rejected the request as too long (HTTP 400); compacted it
 * from B to A tokens (N → M messages), retrying once"`.
 *
 * @example
 * ```ts
 * import { Middleware } from "@stepwise-agent/core"
 * import * as ContextOverflow from "@stepwise-agent/middleware/ContextOverflow"
 * import { Effect, Option } from "effect"
 *
 * // keeps only the newest ten messages when the provider says the request is too long
 * const lastTen = Middleware.make({
 *   name: "lastTen",
 *   wrapModelCall: ContextOverflow.recover({
 *     compact: (request) =>
 *       Effect.succeed(
 *         request.messages.length <= 10 ? Option.none() : Option.some({ ...request, messages: request.messages.slice(-10) })
 *       )
 *   })
 * })
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const recover = <E, R>(
  options: RecoverOptions<E, R>
): Middleware.WrapModelCall<E | ContextOverflow | AiError.AiError | AgentError.ModelReplyError, R> => {
  const fail = (request: Middleware.ModelRequest, overflow: Overflow, compacted: boolean) =>
    Effect.gen(function*() {
      const model = options.model ?? Option.getOrUndefined(yield* ModelProfile.CurrentModel)
      const profile = yield* ModelProfile.lookup(model)
      const limit = overflow.limit ?? Option.getOrUndefined(Option.map(profile, (p) => p.maxInputTokens))
      return yield* new ContextOverflow({
        ...(model === undefined ? {} : { model }),
        measuredTokens: yield* measure(request),
        messages: sentOf(request).length,
        ...(overflow.reportedTokens === undefined ? {} : { reportedTokens: overflow.reportedTokens }),
        ...(limit === undefined ? {} : { limit }),
        compacted,
        status: overflow.status,
        providerMessage: overflow.message
      })
    })
  return (request, next) =>
    Effect.catchIf(next(request), isOverflow, (error) =>
      Effect.gen(function*() {
        const overflow = Option.getOrThrow(classify(error))
        const compacted = yield* options.compact(request, overflow)
        if (Option.isNone(compacted)) return yield* fail(request, overflow, false)
        const retry = compacted.value
        const [before, after] = yield* Effect.all([measure(request), measure(retry)])
        yield* Middleware.report(
          `the provider rejected the request as too long (HTTP ${overflow.status}); compacted it from ${before} to ` +
            `${after} tokens (${sentOf(request).length} → ${sentOf(retry).length} messages), retrying once`,
          {
            status: overflow.status,
            reportedTokens: overflow.reportedTokens,
            limit: overflow.limit,
            tokensBefore: before,
            tokensAfter: after,
            messagesBefore: sentOf(request).length,
            messagesAfter: sentOf(retry).length
          }
        )
        return yield* Effect.catchIf(
          next(retry),
          isOverflow,
          (again) => fail(retry, Option.getOrThrow(classify(again)), true)
        )
      }))
}

// -----------------------------------------------------------------------------
// middleware
// -----------------------------------------------------------------------------

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface MiddlewareOptions {
  /**
   * How a rejected request is compacted. `"clearToolUses"`: old tool
   * results are cleared as `ContextEditing.ClearToolUses` clears them, its
   * trigger ignored (every result outside `keep` that may be cleared is).
   */
  readonly policy: "clearToolUses"
  /** The newest tool results never cleared (default 3 results); see `ContextEditing.Keep`. */
  readonly keep?: ContextEditing.Keep | undefined
  /** Also replace the arguments of the cleared results' calls with `{}` (default false). */
  readonly clearToolInputs?: boolean | undefined
  /**
   * Tools whose results are never cleared (default none).
   * `Agent.make` fails with `AgentError.UnknownTools` on a name that is not a tool of the agent.
   */
  readonly excludeTools?: ReadonlyArray<string> | undefined
  /** What a cleared result says (default `"[cleared]"`). */
  readonly placeholder?: string | undefined
  /** The window a `keep` fraction is taken of (default: the agent's model's profile). */
  readonly contextWindow?: number | undefined
  /** The model's name, for the error (default `ModelProfile.CurrentModel`). */
  readonly model?: string | undefined
  /** The middleware's name (default `"contextOverflow"`). */
  readonly name?: string | undefined
}

const MiddlewareOptionsSchema = Schema.Struct({
  policy: Schema.Literal("clearToolUses"),
  // checked by ContextEditing.ClearToolUses
  keep: Schema.optional(Schema.Unknown),
  clearToolInputs: Schema.optional(Schema.Unknown),
  excludeTools: Schema.optional(Schema.Unknown),
  placeholder: Schema.optional(Schema.Unknown),
  contextWindow: Schema.optional(Schema.Unknown),
  model: Schema.optional(Check.NonEmpty),
  name: Schema.optional(Check.NonEmpty)
})

/**
 * A middleware that recovers from a context overflow by clearing old tool
 * results (`policy: "clearToolUses"`) and retrying once, failing with
 * {@link ContextOverflow} when the retry is rejected too or there was no
 * result to clear. Only the request changes: the stored thread keeps every
 * result. A thread that overflowed once stays long, so from then on its
 * calls are cleared before they are sent (reported as `"cleared N tool
 * results before the call: the thread overflowed before"`), instead of each
 * being rejected first; which threads overflowed is kept in memory, per
 * middleware, and forgotten when a thread is deleted. Bad options fail `Agent.make` with
 * `AgentError.InvalidOptions` (module `"ContextOverflow"`, the option named
 * as `ClearToolUses` names it).
 *
 * List it after `ModelFallback` (as `Summarization`), so it sees the
 * provider's rejection before a fallback model is tried.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import * as ContextOverflow from "@stepwise-agent/middleware/ContextOverflow"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const overflow = ContextOverflow.middleware({ policy: "clearToolUses", keep: 2 })
 *   return yield* Agent.make({ middleware: [overflow] })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (options: MiddlewareOptions): Middleware.Middleware<{}, ContextOverflow> =>
  Middleware.unwrap(setup(options), { name: Check.nameOf(options, "contextOverflow") })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: (
  options: MiddlewareOptions
) => Effect.Effect<Middleware.Middleware<{}, ContextOverflow>, AgentError.InvalidOptions> = Effect.fn(
  "ContextOverflow.middleware"
)(function*(options: MiddlewareOptions) {
  yield* Check.validate("ContextOverflow", MiddlewareOptionsSchema, options)
  const { model, name, policy: _, ...clearOptions } = options
  // a trigger of one message: the edit always fires, clearing every result outside keep
  const edit = ContextEditing.clearToolUses({ ...clearOptions, trigger: { messages: 1 } })
  const failed = FailedEdits.failureOf([edit])
  if (failed !== undefined) {
    return yield* new AgentError.InvalidOptions({
      module: "ContextOverflow",
      option: failed.option,
      reason: failed.reason
    })
  }
  const overflowed = new Set<string>()

  /** The request with old tool results cleared; None when there was none to clear. */
  const clear = (request: Middleware.ModelRequest) =>
    Effect.gen(function*() {
      const counter = yield* counterOf
      const result = yield* edit.apply(request.messages, { systemPrompt: request.systemPrompt }).pipe(
        Effect.provideService(TokenCounter.TokenCounter, counter)
      )
      return result.cleared.length === 0
        ? Option.none()
        : Option.some({ request: { ...request, messages: result.messages }, cleared: result.cleared.length })
    })

  const recovering = recover({
    model,
    compact: (request) =>
      Effect.map(clear(request), (cleared) => {
        if (Option.isSome(cleared)) overflowed.add(request.threadId)
        return Option.map(cleared, (c) => c.request)
      })
  })

  const wrapModelCall: Middleware.WrapModelCall<any, never> = (request, next) =>
    !overflowed.has(request.threadId) ? recovering(request, next) : Effect.gen(function*() {
      const cleared = yield* clear(request)
      if (Option.isNone(cleared)) return yield* recovering(request, next)
      yield* Middleware.report(
        `cleared ${cleared.value.cleared} tool results before the call: the thread overflowed before`,
        { cleared: cleared.value.cleared }
      )
      return yield* recovering(cleared.value.request, next)
    })

  // the provider's errors it lets through are already the agent's
  return Middleware.make({
    name: name ?? "contextOverflow",
    uses: { tools: clearOptions.excludeTools },
    wrapModelCall,
    onThreadDeleted: (threadId) => Effect.sync(() => void overflowed.delete(threadId))
  }) as Middleware.Middleware<{}, ContextOverflow>
})
