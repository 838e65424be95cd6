/**
 * What went wrong in a model call, read in one place: a plain view of an
 * `@effect/ai` `AiError` (or an `AgentError.ModelReplyError`), so middleware
 * and your own code classify failures without reading the error classes'
 * fields, whose shapes change in Effect 4.
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import type { ModelReplyError } from "./AgentError.js"
import * as AiSeams from "./internal/aiSeams.js"

/**
 * What kind of failure: `transport` (no response: a network failure),
 * `request` (the request could not be built), `status` (the provider
 * answered with an error status), `response` (its response could not be
 * read), `malformed-input` / `malformed-output` (what went to or came from
 * the model, or a tool, did not match its schema), `unknown` (any other
 * `AiError`), `reply` (a `ModelReplyError`: an empty, truncated or
 * non-stream reply).
 *
 * @since 0.1.0
 * @category models
 */
export type Kind = AiSeams.FailureKind

/**
 * A failure, read: its kind, the error's tag and reason, and the provider's
 * response (status, headers, body) when there was one.
 *
 * @since 0.1.0
 * @category models
 */
export interface AiFailure extends AiSeams.ClassifiedFailure {}

/**
 * Reads what an `AiError` or a `ModelReplyError` says went wrong.
 *
 * @example
 * ```ts
 * import { AiFailure } from "@stepwise-agent/core"
 * import { AiError } from "@effect/ai"
 * import { Option } from "effect"
 *
 * const failure = AiFailure.classify(new AiError.HttpResponseError({
 *   module: "OpenAiClient",
 *   method: "createResponse",
 *   reason: "StatusCode",
 *   request: { method: "POST", url: "https://api.openai.com/v1/responses", urlParams: [], hash: Option.none(), headers: {} },
 *   response: { status: 429, headers: { "retry-after": "2" } }
 * }))
 * failure.kind // "status"
 * failure.status // 429
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const classify: (error: AiError.AiError | ModelReplyError) => AiFailure = AiSeams.classifyAiError

/**
 * Whether a value is an `@effect/ai` `AiError`.
 *
 * @example
 * ```ts
 * import { AiFailure } from "@stepwise-agent/core"
 *
 * AiFailure.isAiError(new Error("no")) // false
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const isAiError: (u: unknown) => u is AiError.AiError = AiSeams.isAiError
