/**
 * Token usage summed over the model calls of a run.
 *
 * @since 0.1.0
 */
import type * as Response from "@effect/ai/Response"
import * as Schema from "effect/Schema"
import * as AiSeams from "./internal/aiSeams.js"
import * as Tokens from "./internal/tokens.js"

/**
 * Tokens in, out and in total. A provider that reports no usage counts 0.
 *
 * @since 0.1.0
 * @category models
 */
export class Usage extends Schema.Class<Usage>("@stepwise-agent/core/Usage")({
  inputTokens: Schema.Number,
  outputTokens: Schema.Number,
  totalTokens: Schema.Number
}) {}

/**
 * No usage.
 *
 * @since 0.1.0
 * @category constructors
 */
export const empty: Usage = new Usage({ inputTokens: 0, outputTokens: 0, totalTokens: 0 })

/**
 * Adds a model call's reported usage.
 *
 * @example
 * ```ts
 * import { Usage } from "@stepwise-agent/core"
 * import { Response } from "@effect/ai"
 *
 * const total = Usage.add(
 *   Usage.empty,
 *   new Response.Usage({ inputTokens: 10, outputTokens: 2, totalTokens: 12 })
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const add = (self: Usage, usage: Response.Usage): Usage => new Usage(Tokens.add(self, usage), true) // sums of numbers: nothing to validate

/**
 * The token counts a provider reported for one model call, read from
 * `@effect/ai`'s `Response.Usage` in one place (its shape changes in Effect
 * 4): a count the provider did not report is `undefined`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Reported extends AiSeams.ReportedUsage {}

/**
 * Reads a model call's reported usage (a `ModelResponse`'s `usage`).
 *
 * @example
 * ```ts
 * import { Usage } from "@stepwise-agent/core"
 * import { Response } from "@effect/ai"
 *
 * const reported = Usage.read(new Response.Usage({ inputTokens: 10, outputTokens: 2, totalTokens: 12 }))
 * reported.inputTokens // 10
 * reported.cachedInputTokens // undefined
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const read: (usage: Response.Usage) => Reported = AiSeams.readUsage
