/**
 * The options of `ContextEditing.ClearToolUses`, checked and normalized: the
 * trigger conditions, `keep`, `clearTo` and the rest, with fractions turned
 * into tokens when a `contextWindow` is given (else left for the model's
 * profile, see `clearTrigger.ts`).
 */
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { ClearToolUsesOptions, TriggerCondition } from "../../ContextEditing.js"
import * as Check from "../options.js"

/** A trigger condition; `fraction` is left when no `contextWindow` was given, for the model's profile. */
export interface Condition {
  readonly tokens: number | undefined
  readonly messages: number | undefined
  readonly fraction: number | undefined
}

export type KeepConfig =
  | { readonly _tag: "messages"; readonly value: number }
  | { readonly _tag: "tokens"; readonly value: number }
  | { readonly _tag: "fraction"; readonly value: number }

export interface ClearToolUsesConfig {
  readonly triggers: ReadonlyArray<Condition>
  readonly clearAtLeast: number
  /** The low watermark in tokens, or a fraction left for the model's profile. */
  readonly clearTo: { readonly _tag: "tokens" | "fraction"; readonly value: number } | undefined
  readonly keep: KeepConfig
  readonly clearToolInputs: boolean
  readonly excludeTools: ReadonlySet<string>
  readonly placeholder: string
  /** Whether a fraction is left to take of the model's profile when the edit runs. */
  readonly usesProfile: boolean
}

/** LangChain's default `keep`, and what a `keep` fraction that comes to 0 tokens keeps. */
export const defaultKeep = 3

const Fraction = Schema.Number.pipe(
  Schema.filter((f) => f > 0 && f <= 1, { description: "a number greater than 0 and at most 1" })
)

const PositiveTokens = Schema.Number.pipe(
  Schema.filter((n) => Number.isFinite(n) && n > 0, { description: "a number greater than 0" })
)

const ConditionSchema = Schema.Struct({
  tokens: Schema.optional(PositiveTokens),
  messages: Schema.optional(Check.AtLeastOne),
  fraction: Schema.optional(Fraction)
}).pipe(
  Schema.filter((condition) =>
    condition.tokens !== undefined || condition.messages !== undefined || condition.fraction !== undefined ||
    "needs at least one of tokens, messages, fraction"
  )
)

const KeepSchema = Schema.Union(
  Check.Count,
  Schema.Struct({ messages: Check.Count }),
  Schema.Struct({
    tokens: Schema.Number.pipe(
      Schema.filter((n) => Number.isFinite(n) && n >= 0, { description: "a number of at least 0" })
    )
  }),
  Schema.Struct({
    fraction: Schema.Number.pipe(Schema.filter((f) => f >= 0 && f <= 1, { description: "a number from 0 to 1" }))
  })
)

const ClearToolUsesSchema = Schema.Struct({
  trigger: Schema.optional(Schema.Union(Check.Count, ConditionSchema, Schema.Array(ConditionSchema))),
  clearAtLeast: Schema.optional(Check.Count),
  clearTo: Schema.optional(Schema.Union(
    PositiveTokens,
    Schema.Struct({ tokens: PositiveTokens }),
    Schema.Struct({ fraction: Fraction })
  )),
  keep: Schema.optional(KeepSchema),
  clearToolInputs: Schema.optional(Schema.Boolean),
  excludeTools: Schema.optional(Schema.Array(Schema.String)),
  placeholder: Schema.optional(Schema.String),
  contextWindow: Schema.optional(Check.AtLeastOne),
  triggerTokens: Schema.optional(PositiveTokens),
  keepMessages: Schema.optional(Check.Count)
})

export const validate = (
  options: ClearToolUsesOptions | undefined
): Either.Either<ClearToolUsesConfig, AgentError.InvalidOptions> =>
  Either.gen(function*() {
    const checked = yield* Check.validateEither("ClearToolUses", ClearToolUsesSchema, options)
    const { contextWindow } = checked
    const trigger = checked.trigger ??
      (checked.triggerTokens === undefined ? 100_000 : { tokens: checked.triggerTokens })
    const listed = Array.isArray(trigger)
    const given: ReadonlyArray<TriggerCondition> = typeof trigger === "number"
      ? [{ tokens: trigger }]
      : listed
      ? trigger as ReadonlyArray<TriggerCondition>
      : [trigger as TriggerCondition]
    if (given.length === 0) {
      return yield* Either.left(Check.invalid("ClearToolUses", "trigger", "is an empty list: nothing would trigger"))
    }
    const triggers: Array<Condition> = []
    for (const [index, condition] of given.entries()) {
      let { fraction, tokens } = condition
      if (fraction !== undefined && contextWindow !== undefined) {
        // With a window given, a fraction is a number of tokens: the stricter of the two when both are.
        const fromFraction = Math.floor(fraction * contextWindow)
        if (fromFraction < 1) {
          return yield* Either.left(Check.invalid(
            "ClearToolUses",
            `${listed ? `trigger[${index}]` : "trigger"}.fraction`,
            `${fraction} of a context window of ${contextWindow} is ${fromFraction} tokens; need at least 1`
          ))
        }
        tokens = Math.max(tokens ?? 0, fromFraction)
        fraction = undefined
      }
      triggers.push({ tokens, messages: condition.messages, fraction })
    }
    const keepOption = checked.keep ?? checked.keepMessages ?? defaultKeep
    let keep: KeepConfig = typeof keepOption === "number"
      ? { _tag: "messages", value: keepOption }
      : "messages" in keepOption
      ? { _tag: "messages", value: keepOption.messages }
      : "tokens" in keepOption
      ? { _tag: "tokens", value: keepOption.tokens }
      : { _tag: "fraction", value: keepOption.fraction }
    if (keep._tag === "fraction" && contextWindow !== undefined) {
      const tokens = Math.floor(keep.value * contextWindow)
      keep = tokens > 0 ? { _tag: "tokens", value: tokens } : { _tag: "messages", value: defaultKeep }
    }
    const clearToOption = checked.clearTo
    let clearTo: ClearToolUsesConfig["clearTo"] = clearToOption === undefined
      ? undefined
      : typeof clearToOption === "number"
      ? { _tag: "tokens", value: clearToOption }
      : "tokens" in clearToOption
      ? { _tag: "tokens", value: clearToOption.tokens }
      : { _tag: "fraction", value: clearToOption.fraction }
    if (clearTo?._tag === "fraction" && contextWindow !== undefined) {
      clearTo = { _tag: "tokens", value: Math.floor(clearTo.value * contextWindow) }
    }
    if (clearTo?._tag === "tokens" && triggers.every((condition) => condition.tokens !== undefined)) {
      const lowest = Math.min(...triggers.map((condition) => condition.tokens!))
      if (clearTo.value >= lowest) {
        return yield* Either.left(Check.invalid(
          "ClearToolUses",
          "clearTo",
          `is ${clearTo.value} tokens, not below the trigger (${lowest} tokens): a watermark must be lower`
        ))
      }
    }
    return {
      triggers,
      clearAtLeast: checked.clearAtLeast ?? 0,
      clearTo,
      keep,
      clearToolInputs: checked.clearToolInputs ?? false,
      excludeTools: new Set(checked.excludeTools ?? []),
      placeholder: checked.placeholder ?? "[cleared]",
      usesProfile: keep._tag === "fraction" || clearTo?._tag === "fraction" ||
        triggers.some((condition) => condition.fraction !== undefined)
    }
  })
