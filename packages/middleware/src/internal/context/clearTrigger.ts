/**
 * When `ContextEditing.ClearToolUses` fires: its trigger conditions, `keep`
 * and `clearTo` with fractions taken of the input window, and the check
 * itself. The check measures what the model call is sent (`sent.ts`): the
 * system prompt and the paired messages, not orphans the agent drops.
 */
import * as Effect from "effect/Effect"
import { type ClearToolUsesConfig, type Condition, defaultKeep, type KeepConfig } from "./clearOptions.js"
import * as ContextLimit from "./contextLimit.js"

/** A trigger condition with its fraction taken of the input window. */
export interface Resolved {
  readonly tokens: number | undefined
  readonly messages: number | undefined
}

/** `keep` with its fraction taken of the input window. */
export type ResolvedKeep = { readonly _tag: "messages" | "tokens"; readonly value: number }

/** The sizes of one run of the edit, every fraction taken of the input window. */
export interface Sizes {
  readonly triggers: ReadonlyArray<Resolved>
  readonly keep: ResolvedKeep
  /** The low watermark in tokens, if any. */
  readonly clearTo: number | undefined
}

const resolveTriggers = (triggers: ReadonlyArray<Condition>, inputTokens: number): ReadonlyArray<Resolved> =>
  triggers.flatMap((condition): ReadonlyArray<Resolved> => {
    if (condition.fraction === undefined) return [condition]
    // LangChain skips a condition whose fraction comes to no token.
    const fromFraction = Math.floor(condition.fraction * inputTokens)
    return fromFraction <= 0 ? [] : [{
      tokens: Math.max(condition.tokens ?? 0, fromFraction),
      messages: condition.messages
    }]
  })

const resolveKeep = (keep: KeepConfig, inputTokens: number): ResolvedKeep => {
  if (keep._tag !== "fraction") return keep
  const tokens = Math.floor(keep.value * inputTokens)
  return tokens > 0 ? { _tag: "tokens", value: tokens } : { _tag: "messages", value: defaultKeep }
}

/**
 * The sizes of an edit: fixed, or, when a fraction was left for the model's
 * profile, taken of the agent's model's input window each time it runs.
 */
export const sizesOf = (config: ClearToolUsesConfig): Effect.Effect<Sizes> => {
  if (!config.usesProfile) {
    return Effect.succeed({
      triggers: config.triggers,
      keep: config.keep as ResolvedKeep,
      clearTo: config.clearTo?.value
    })
  }
  const limit = ContextLimit.make({ module: "ClearToolUses", model: undefined })
  return Effect.map(limit, ({ inputTokens }) => ({
    triggers: resolveTriggers(config.triggers, inputTokens),
    keep: resolveKeep(config.keep, inputTokens),
    clearTo: config.clearTo === undefined
      ? undefined
      : config.clearTo._tag === "tokens"
      ? config.clearTo.value
      : Math.floor(config.clearTo.value * inputTokens)
  }))
}

/** The lowest token count that fires a condition, reported as the edit's trigger. */
export const lowestTokens = (triggers: ReadonlyArray<Resolved>): number | undefined => {
  let lowest: number | undefined
  for (const condition of triggers) {
    if (condition.tokens !== undefined) lowest = Math.min(lowest ?? condition.tokens, condition.tokens)
  }
  return lowest
}

/**
 * Whether a request fires the edit: any condition whose every limit is
 * reached by what the model call is sent, `tokens` (system prompt included)
 * in `messages` messages.
 */
export const fires = (triggers: ReadonlyArray<Resolved>, tokens: number, messages: number): boolean =>
  triggers.some((condition) =>
    (condition.tokens === undefined || tokens >= condition.tokens) &&
    (condition.messages === undefined || messages >= condition.messages)
  )
