/**
 * The two places that read the shapes of `@effect/ai` values that change in
 * Effect 4: the token usage a provider reports ({@link readUsage}) and what
 * an `AiError` says went wrong ({@link classifyAiError}). Everything else,
 * in every package, reads the plain views these give (through `Usage.read`
 * and `AiFailure.classify`), so moving to Effect 4 changes these two
 * functions and nothing that uses them.
 */
import * as AiError from "@effect/ai/AiError"
import type * as Response from "@effect/ai/Response"
import type { ModelReplyError } from "../AgentError.js"

/** The token counts a provider reported for one model call; a count it did not report is `undefined`. */
export interface ReportedUsage {
  readonly inputTokens: number | undefined
  readonly outputTokens: number | undefined
  /** As the provider reported it: may differ from input + output (reasoning, overhead). */
  readonly totalTokens: number | undefined
  readonly reasoningTokens: number | undefined
  readonly cachedInputTokens: number | undefined
}

/** The token counts of a model call's reported usage (`Response.Usage` of @effect/ai 0.37). */
export const readUsage = (usage: Response.Usage): ReportedUsage => ({
  inputTokens: usage.inputTokens,
  outputTokens: usage.outputTokens,
  totalTokens: usage.totalTokens,
  reasoningTokens: usage.reasoningTokens,
  cachedInputTokens: usage.cachedInputTokens
})

/**
 * What kind of failure:
 * - `transport`: the request never got a response (a network failure);
 * - `request`: the request could not be built (its body did not encode, its URL is not valid);
 * - `status`: the provider answered with an error status;
 * - `response`: the provider's response could not be read (it did not decode, or was empty);
 * - `malformed-input` / `malformed-output`: what went to or came from the model (or a tool) did not
 *   match its schema;
 * - `unknown`: any other `AiError`;
 * - `reply`: a `ModelReplyError` (the reply was empty, truncated or not a stream).
 */
export type FailureKind =
  | "transport"
  | "request"
  | "status"
  | "response"
  | "malformed-input"
  | "malformed-output"
  | "unknown"
  | "reply"

/** A model call's failure, read. */
export interface ClassifiedFailure {
  readonly kind: FailureKind
  /** The error's tag (`HttpResponseError`, `ModelReplyError`, …), for messages. */
  readonly tag: string
  /** The finer reason an error gives (`Transport`, `StatusCode`, `Decode`, `empty`, …). */
  readonly reason: string | undefined
  /** The HTTP status of the provider's response, when there was one. */
  readonly status: number | undefined
  /** The headers of the provider's response (empty when there was none). */
  readonly headers: Readonly<Record<string, string>>
  /** The body of the provider's error response, when it was read. */
  readonly body: string | undefined
  readonly description: string | undefined
  /** The module and method that failed (`Toolkit`, `OpenAiClient`, …); `undefined` for a `ModelReplyError`. */
  readonly module: string | undefined
  readonly method: string | undefined
  readonly cause: unknown
}

const noHeaders: Readonly<Record<string, string>> = {}

/** Whether `u` is an `@effect/ai` `AiError`. */
export const isAiError = (u: unknown): u is AiError.AiError => AiError.isAiError(u)

/** What an `AiError` (or a `ModelReplyError`) says went wrong. */
export const classifyAiError = (error: AiError.AiError | ModelReplyError): ClassifiedFailure => {
  const base = {
    tag: error._tag,
    reason: undefined,
    status: undefined,
    headers: noHeaders,
    body: undefined,
    module: undefined,
    method: undefined,
    cause: undefined
  }
  switch (error._tag) {
    case "ModelReplyError":
      return { ...base, kind: "reply", reason: error.reason, description: error.message }
    case "HttpRequestError":
      return {
        ...base,
        kind: error.reason === "Transport" ? "transport" : "request",
        reason: error.reason,
        description: error.description,
        module: error.module,
        method: error.method,
        cause: error.cause
      }
    case "HttpResponseError":
      return {
        ...base,
        kind: error.reason === "StatusCode" ? "status" : "response",
        reason: error.reason,
        status: error.response.status,
        headers: error.response.headers,
        body: error.body,
        description: error.description,
        module: error.module,
        method: error.method
      }
    case "MalformedInput":
    case "MalformedOutput":
    case "UnknownError":
      return {
        ...base,
        kind: error._tag === "MalformedInput"
          ? "malformed-input"
          : error._tag === "MalformedOutput"
          ? "malformed-output"
          : "unknown",
        description: error.description,
        module: error.module,
        method: error.method,
        cause: error.cause
      }
  }
}
