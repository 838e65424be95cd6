/**
 * Token counts summed over model calls, as plain numbers: what a run adds up
 * step by step, and what `Usage.add` builds its `Usage` from.
 */
import type * as Response from "@effect/ai/Response"
import { readUsage } from "./aiSeams.js"

/** Tokens in, out and in total. */
export interface Tokens {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly totalTokens: number
}

/** `self` plus a model call's reported usage; a provider that reports no total counts in + out. */
export const add = (self: Tokens, usage: Response.Usage): Tokens => {
  const { inputTokens = 0, outputTokens = 0, totalTokens = inputTokens + outputTokens } = readUsage(usage)
  return {
    inputTokens: self.inputTokens + inputTokens,
    outputTokens: self.outputTokens + outputTokens,
    totalTokens: self.totalTokens + totalTokens
  }
}
