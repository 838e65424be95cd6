/**
 * The input-token limit that fractions of the context are taken of when a
 * middleware was given no window: the profile of the agent's model
 * (`ModelProfile`), else `ModelProfile.fallback`, with one warning per
 * middleware instance and model name. Never "no limit".
 */
import * as ModelProfile from "@stepwise-agent/core/ModelProfile"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/** A resolved limit and the model it belongs to (when named). */
export interface Limit {
  readonly inputTokens: number
  readonly model: string | undefined
}

/** The limit of one middleware instance: the profile of `model` (default: `ModelProfile.CurrentModel`). */
export const make = (options: {
  readonly module: string
  readonly model: string | undefined
}): Effect.Effect<Limit> => {
  const warned = new Set<string>()
  return Effect.gen(function*() {
    const name = options.model !== undefined ? Option.some(options.model) : yield* ModelProfile.CurrentModel
    const model = Option.getOrUndefined(name)
    const profile = yield* ModelProfile.lookup(model)
    if (Option.isSome(profile)) return { inputTokens: profile.value.maxInputTokens, model }
    const key = model ?? ""
    if (!warned.has(key)) {
      warned.add(key)
      yield* Effect.logWarning(
        `${options.module}: ${
          model === undefined ? "the agent's model is not named" : `no model profile for "${model}"`
        }; fractions are taken of a default window of ${ModelProfile.fallback.maxInputTokens} tokens. ` +
          "Name the model with ModelProfile.layerModel or ModelProfile.model, add its profile with " +
          "ModelProfile.layerOverride, or give the middleware a contextWindow."
      )
    }
    return { inputTokens: ModelProfile.fallback.maxInputTokens, model }
  })
}
