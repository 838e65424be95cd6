/**
 * Token counts summed over model calls, as plain numbers: what a run adds up
 * step by step, and what `Usage.add` builds its `Usage` from.
 */
import type * as Response from "@effect/ai/Response"

/** Tokens in, out and in total. */
export interface Tokens {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly totalTokens: number
}

/** `self` plus a model call's reported usage; a provider that reports no total counts in + out. */
export const add = (self: Tokens, usage: Response.Usage): Tokens => ({
  inputTokens: self.inputTokens + (usage.inputTokens ?? 0),
  outputTokens: self.outputTokens + (usage.outputTokens ?? 0),
  totalTokens: self.totalTokens + (usage.totalTokens ?? ((usage.inputTokens ?? 0) + (usage.outputTokens ?? 0)))
})
