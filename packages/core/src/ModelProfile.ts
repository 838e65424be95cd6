/**
 * Model profiles: how many tokens a model takes in and gives out.
 *
 * A {@link Profile} holds a model's context window, the most input tokens it
 * accepts and the most output tokens it writes. The {@link ModelProfile}
 * service looks a model up by name; without a layer it answers from
 * {@link builtIn}, a table of common OpenAI and Anthropic models written on
 * {@link builtInDate}. {@link layer} replaces the table, {@link layerOverride}
 * adds or corrects entries of it.
 *
 * A name matches its entry exactly or as a dated snapshot or alias of it:
 * `gpt-4o-mini-2024-07-18` and `claude-sonnet-4-5-20250929` find the
 * `gpt-4o-mini` and `claude-sonnet-4-5` entries (the longest entry the name
 * starts with, followed by `-`). A provider prefix ending in `/`
 * (`openai/gpt-4o`) is ignored, and so is case.
 *
 * Middleware that size things as a fraction of the context (`Summarization`
 * with `{ fraction: 0.85 }`) need the name of the agent's model: provide it
 * with {@link layerModel}, or build the model's layer with {@link model} so
 * the name is written once.
 *
 * @since 0.1.0
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import { InvalidOptions } from "./AgentError.js"
import { describeValue } from "./internal/options.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * What a model takes in and gives out, in tokens.
 *
 * @since 0.1.0
 * @category models
 */
export interface Profile {
  /** The context window: input and output together. */
  readonly contextWindow: number
  /**
   * The most input tokens a request may hold (system prompt, messages and
   * tool definitions). Fractions of the context are taken of this number, as
   * LangChain takes them of `max_input_tokens`.
   */
  readonly maxInputTokens: number
  /** The most tokens the model writes in one reply. */
  readonly maxOutputTokens: number
}

/**
 * An entry of a profile table; `maxInputTokens` defaults to `contextWindow`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Entry {
  readonly contextWindow: number
  readonly maxOutputTokens: number
  readonly maxInputTokens?: number | undefined
}

/**
 * A profile table: model name (or name prefix) to entry.
 *
 * @since 0.1.0
 * @category models
 */
export type Table = Readonly<Record<string, Entry>>

/**
 * The date {@link builtIn} was written, from the providers' model pages as
 * the author knew them. Providers change their limits: correct an entry with
 * {@link layerOverride}.
 *
 * @since 0.1.0
 * @category models
 */
export const builtInDate = "2026-12-05"

/**
 * The built-in table: common OpenAI and Anthropic models (see
 * {@link builtInDate}). Anthropic's 1M-token beta windows are not assumed.
 *
 * @since 0.1.0
 * @category models
 */
export const builtIn: Table = {
  // OpenAI
  "gpt-3.5-turbo": { contextWindow: 16_385, maxOutputTokens: 4_096 },
  "gpt-4": { contextWindow: 8_192, maxOutputTokens: 8_192 },
  "gpt-4-32k": { contextWindow: 32_768, maxOutputTokens: 8_192 },
  "gpt-4-turbo": { contextWindow: 128_000, maxOutputTokens: 4_096 },
  "gpt-4o": { contextWindow: 128_000, maxOutputTokens: 16_384 },
  "gpt-4o-mini": { contextWindow: 128_000, maxOutputTokens: 16_384 },
  "gpt-4.1": { contextWindow: 1_047_576, maxOutputTokens: 32_768 },
  "gpt-4.1-mini": { contextWindow: 1_047_576, maxOutputTokens: 32_768 },
  "gpt-4.1-nano": { contextWindow: 1_047_576, maxOutputTokens: 32_768 },
  "o1": { contextWindow: 200_000, maxOutputTokens: 100_000 },
  "o1-mini": { contextWindow: 128_000, maxOutputTokens: 65_536 },
  "o1-preview": { contextWindow: 128_000, maxOutputTokens: 32_768 },
  "o3": { contextWindow: 200_000, maxOutputTokens: 100_000 },
  "o3-mini": { contextWindow: 200_000, maxOutputTokens: 100_000 },
  "o4-mini": { contextWindow: 200_000, maxOutputTokens: 100_000 },
  "gpt-5": { contextWindow: 400_000, maxInputTokens: 272_000, maxOutputTokens: 128_000 },
  "gpt-5-mini": { contextWindow: 400_000, maxInputTokens: 272_000, maxOutputTokens: 128_000 },
  "gpt-5-nano": { contextWindow: 400_000, maxInputTokens: 272_000, maxOutputTokens: 128_000 },
  "gpt-5-chat": { contextWindow: 128_000, maxOutputTokens: 16_384 },
  "gpt-5.1": { contextWindow: 400_000, maxInputTokens: 272_000, maxOutputTokens: 128_000 },
  // Anthropic
  "claude-3-haiku": { contextWindow: 200_000, maxOutputTokens: 4_096 },
  "claude-3-sonnet": { contextWindow: 200_000, maxOutputTokens: 4_096 },
  "claude-3-opus": { contextWindow: 200_000, maxOutputTokens: 4_096 },
  "claude-3-5-haiku": { contextWindow: 200_000, maxOutputTokens: 8_192 },
  "claude-3-5-sonnet": { contextWindow: 200_000, maxOutputTokens: 8_192 },
  "claude-3-7-sonnet": { contextWindow: 200_000, maxOutputTokens: 64_000 },
  "claude-sonnet-4": { contextWindow: 200_000, maxOutputTokens: 64_000 },
  "claude-opus-4": { contextWindow: 200_000, maxOutputTokens: 32_000 },
  "claude-opus-4-1": { contextWindow: 200_000, maxOutputTokens: 32_000 },
  "claude-sonnet-4-5": { contextWindow: 200_000, maxOutputTokens: 64_000 },
  "claude-haiku-4-5": { contextWindow: 200_000, maxOutputTokens: 64_000 },
  "claude-opus-4-5": { contextWindow: 200_000, maxOutputTokens: 64_000 }
}

/**
 * The profile assumed for a model the table does not know (and for an agent
 * whose model is not named): a window of 128,000 tokens, the smallest of the
 * current OpenAI and Anthropic models'. Middleware that fall back to it log
 * one warning.
 *
 * @since 0.1.0
 * @category models
 */
export const fallback: Profile = { contextWindow: 128_000, maxInputTokens: 128_000, maxOutputTokens: 4_096 }

// -----------------------------------------------------------------------------
// tags
// -----------------------------------------------------------------------------

/**
 * Looks model profiles up by name. Without a layer it answers from
 * {@link builtIn}.
 *
 * @since 0.1.0
 * @category tags
 */
export class ModelProfile extends Context.Reference<ModelProfile>()("@stepwise-agent/core/ModelProfile", {
  defaultValue: (): ModelProfile.Service => builtInService
}) {}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace ModelProfile {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** The profile of a model, by name (see the module documentation for how names match). */
    readonly lookup: (model: string) => Option.Option<Profile>
  }
}

/**
 * The name of the agent's model, for middleware that look its profile up.
 * None until {@link layerModel} or {@link model} provides it.
 *
 * @since 0.1.0
 * @category tags
 */
export class CurrentModel extends Context.Reference<CurrentModel>()("@stepwise-agent/core/ModelProfile/CurrentModel", {
  defaultValue: (): Option.Option<string> => Option.none()
}) {}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

const normalize = (name: string): string => {
  const lower = name.trim().toLowerCase()
  return lower.slice(lower.lastIndexOf("/") + 1)
}

const isPositive = (n: unknown): n is number => typeof n === "number" && Number.isInteger(n) && n >= 1

/** The checked profiles of a table, keyed by normalized name. */
const check = (table: Table): Effect.Effect<ReadonlyMap<string, Profile>, InvalidOptions> =>
  Effect.suspend(() => {
    const profiles = new Map<string, Profile>()
    if (!Predicate.isObject(table)) {
      return Effect.fail(
        new InvalidOptions({
          module: "ModelProfile",
          option: "table",
          reason: `must be an object of profiles by model name, got ${describeValue(table)}`
        })
      )
    }
    for (const [name, entry] of Object.entries(table)) {
      const invalid = (field: string, reason: string) =>
        Effect.fail(new InvalidOptions({ module: "ModelProfile", option: `${JSON.stringify(name)}.${field}`, reason }))
      if (!Predicate.isObject(entry)) {
        return Effect.fail(
          new InvalidOptions({
            module: "ModelProfile",
            option: JSON.stringify(name),
            reason: `must be a profile (contextWindow, maxOutputTokens), got ${describeValue(entry)}`
          })
        )
      }
      for (const field of ["contextWindow", "maxOutputTokens"] as const) {
        if (!isPositive(entry[field])) {
          return invalid(field, `must be a whole number of at least 1, got ${describeValue(entry[field])}`)
        }
      }
      const maxInputTokens = entry.maxInputTokens ?? entry.contextWindow
      if (!isPositive(maxInputTokens) || maxInputTokens > entry.contextWindow) {
        return invalid(
          "maxInputTokens",
          `must be a whole number from 1 to contextWindow (${entry.contextWindow}), got ${
            describeValue(maxInputTokens)
          }`
        )
      }
      profiles.set(normalize(name), {
        contextWindow: entry.contextWindow,
        maxInputTokens,
        maxOutputTokens: entry.maxOutputTokens
      })
    }
    return Effect.succeed(profiles)
  })

/** The entry of `entries` (keyed by normalized names) that the normalized `name` matches. */
const matching = <A>(entries: ReadonlyMap<string, A>, name: string): Option.Option<A> => {
  const exact = entries.get(name)
  if (exact !== undefined) return Option.some(exact)
  // a dated snapshot or alias of an entry: the longest entry followed by "-"
  let best: string | undefined
  for (const key of entries.keys()) {
    if (name.startsWith(`${key}-`) && (best === undefined || key.length > best.length)) best = key
  }
  return best === undefined ? Option.none() : Option.some(entries.get(best)!)
}

const fromProfiles = (profiles: ReadonlyMap<string, Profile>): ModelProfile.Service =>
  ModelProfile.of({ lookup: (model) => matching(profiles, normalize(model)) })

/**
 * A lookup by model name over any table keyed by model names (a price
 * list, say), matching names as profiles do (see the module documentation):
 * exactly, or as a dated snapshot or alias of an entry, ignoring case and a
 * provider prefix.
 *
 * @example
 * ```ts
 * import { ModelProfile } from "@stepwise-agent/core"
 *
 * const priceOf = ModelProfile.lookupIn({ "gpt-4o": 2.5, "gpt-4o-mini": 0.15 })
 * priceOf("openai/gpt-4o-mini-2024-07-18") // Some(0.15)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const lookupIn = <A>(table: Readonly<Record<string, A>>): (model: string) => Option.Option<A> => {
  const entries = new Map<string, A>()
  for (const [name, value] of Object.entries(table)) entries.set(normalize(name), value)
  return (model) => matching(entries, normalize(model))
}

const builtInService = fromProfiles(Effect.runSync(check(builtIn)))

/**
 * A profile service answering from `table` only. An entry that is not whole
 * positive numbers (or whose `maxInputTokens` exceeds its `contextWindow`)
 * fails with `InvalidOptions` naming it.
 *
 * @example
 * ```ts
 * import { ModelProfile } from "@stepwise-agent/core"
 * import { Effect, Option } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const profiles = yield* ModelProfile.make({ "my-model": { contextWindow: 32_000, maxOutputTokens: 4_096 } })
 *   return Option.map(profiles.lookup("my-model-v2"), (profile) => profile.maxInputTokens) // Some(32000)
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (table: Table): Effect.Effect<ModelProfile.Service, InvalidOptions> =>
  Effect.map(check(table), fromProfiles)

// -----------------------------------------------------------------------------
// layers
// -----------------------------------------------------------------------------

/**
 * Replaces the profile table with `table`.
 *
 * @example
 * ```ts
 * import { ModelProfile } from "@stepwise-agent/core"
 *
 * const ProfilesLive = ModelProfile.layer({ "my-model": { contextWindow: 32_000, maxOutputTokens: 4_096 } })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (table: Table): Layer.Layer<ModelProfile, InvalidOptions> =>
  Layer.effect(ModelProfile, make(table))

/**
 * The built-in table with `table`'s entries added or replacing the built-in
 * ones of the same name.
 *
 * @example
 * ```ts
 * import { ModelProfile } from "@stepwise-agent/core"
 *
 * // a deployment that caps gpt-4o at 64k input tokens, and a local model
 * const ProfilesLive = ModelProfile.layerOverride({
 *   "gpt-4o": { contextWindow: 64_000, maxOutputTokens: 16_384 },
 *   "llama-3.1-8b": { contextWindow: 131_072, maxOutputTokens: 8_192 }
 * })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerOverride = (table: Table): Layer.Layer<ModelProfile, InvalidOptions> =>
  layer({ ...builtIn, ...table })

/**
 * Names the agent's model ({@link CurrentModel}).
 *
 * @example
 * ```ts
 * import { ModelProfile } from "@stepwise-agent/core"
 *
 * const ModelNameLive = ModelProfile.layerModel("gpt-4o")
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerModel = (name: string): Layer.Layer<CurrentModel> => Layer.succeed(CurrentModel, Option.some(name))

/**
 * Builds a model's layer from its name and names it the agent's model
 * ({@link CurrentModel}), so the name is written once.
 *
 * @example
 * ```ts
 * import { ModelProfile } from "@stepwise-agent/core"
 * import type { LanguageModel } from "@effect/ai"
 * import type { Layer } from "effect"
 *
 * // e.g. OpenAiLanguageModel.layer from @effect/ai-openai
 * declare const openAi: (options: { readonly model: string }) => Layer.Layer<LanguageModel.LanguageModel>
 *
 * const ModelLive = ModelProfile.model("gpt-4o", (model) => openAi({ model }))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const model = <A extends LanguageModel.LanguageModel, E, R>(
  name: string,
  build: (name: string) => Layer.Layer<A, E, R>
): Layer.Layer<A | CurrentModel, E, R> => Layer.merge(build(name), layerModel(name))

// -----------------------------------------------------------------------------
// accessors
// -----------------------------------------------------------------------------

/**
 * The profile of a model by name, or of the agent's model
 * ({@link CurrentModel}) when no name is given: None when the model is not
 * named or the table does not know it.
 *
 * @example
 * ```ts
 * import { ModelProfile } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const window = ModelProfile.lookup("gpt-4o-2024-08-06").pipe(
 *   Effect.map((profile) => profile._tag === "Some" ? profile.value.maxInputTokens : undefined)
 * ) // 128000
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const lookup = (model?: string | undefined): Effect.Effect<Option.Option<Profile>> =>
  Effect.gen(function*() {
    const name = model === undefined ? yield* CurrentModel : Option.some(model)
    if (Option.isNone(name)) return Option.none()
    return (yield* ModelProfile).lookup(name.value)
  })
