/**
 * Whether the installed `@effect/ai` carries the response schema cache patch,
 * and the one warning an agent with many tools logs when it does not. The
 * patch adds the `responseSchemaCached` export to `LanguageModel`, so an
 * unpatched build is told by its absence.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Effect from "effect/Effect"

/** Whether `LanguageModel` builds its response schema once per tool set. */
export const isPatched: boolean = (LanguageModel as Record<string, unknown>)["responseSchemaCached"] === true

/** Up to this many tools the per-call schema rebuild costs a few milliseconds at most: no warning. */
export const toolsWithoutWarning = 3

/** Where the patch and the steps to apply it are (shipped inside the core package). */
const instructions = "node_modules/@stepwise-agent/core/assets/patches/README.md"

let warned = false

/**
 * Logs, once per process, that an unpatched `@effect/ai` rebuilds the
 * response schema on every model call, what that costs with `tools` tools,
 * and how to apply the patch. Does nothing when patched or with few tools.
 */
export const warnIfUnpatched = (tools: number, patched: boolean = isPatched): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (patched || warned || tools <= toolsWithoutWarning) return Effect.void
    warned = true
    return Effect.logWarning(
      `@effect/ai 0.37.0 is not patched: every model call rebuilds its response schema, about 1 ms of CPU per ` +
        `tool (${tools} tools: ~${tools} ms per call). The patch caches it; see ${instructions} to apply it.`
    )
  })
