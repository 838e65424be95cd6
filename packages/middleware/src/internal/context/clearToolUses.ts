/**
 * `ContextEditing.ClearToolUses`, put together: its trigger
 * (`clearTrigger.ts`) checked on what the model call is sent (`sent.ts`),
 * its selection of the results to clear (`clearSelection.ts`) and how they
 * look cleared (`clearLook.ts`).
 *
 * Cost per model call: the edit remembers, per thread (the history
 * starting with the same first message object), the running token sums of
 * its messages, its tool calls and results (indexed once a call reaches
 * the trigger) and the previous output, so a model call counts and reads
 * only the messages added since the last one (see `sent.ts` for what is
 * sent of them).
 */
import * as Prompt from "@effect/ai/Prompt"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Effect from "effect/Effect"
import type { ContextEdit, EditContext, EditResult } from "../../ContextEditing.js"
import * as CounterEdits from "../fast/counterEdits.js"
import * as HistoryCache from "../fast/historyCache.js"
import { withSpanWhenTraced } from "../fast/tracedSpan.js"
import * as Look from "./clearLook.js"
import type { ClearToolUsesConfig } from "./clearOptions.js"
import * as Selection from "./clearSelection.js"
import * as Trigger from "./clearTrigger.js"
import * as Sent from "./sent.js"

/** The edit of a checked configuration. */
export const make = (config: ClearToolUsesConfig): ContextEdit => {
  const { clearAtLeast, clearToolInputs, placeholder } = config
  const look = Look.make(placeholder)
  const sizes = Trigger.sizesOf(config)
  // Sessions, per counter and per first message (one per thread, in practice)
  const cache = HistoryCache.make({ init: Selection.make, truncate: Selection.truncate })
  let lastSystem: Prompt.SystemMessage | undefined
  const systemMessage = (text: string): Prompt.SystemMessage => {
    if (lastSystem === undefined || lastSystem.content !== text) {
      lastSystem = Prompt.makeMessage("system", { content: text })
    }
    return lastSystem
  }

  const run = (
    counter: TokenCounter.Service,
    clearing: Selection.Clearing,
    messages: ReadonlyArray<Prompt.Message>,
    /** What the model call is sent of the messages. */
    sent: Sent.Sent,
    /** Raw tokens of the system prompt. */
    systemRaw: number,
    scale: number,
    { clearTo, keep, triggers }: Trigger.Sizes
  ): Effect.Effect<EditResult> =>
    Effect.gen(function*() {
      const tokensOf = (raw: number) => HistoryCache.scaled(raw, scale)
      const raw = systemRaw + sent.raw
      const tokensBefore = tokensOf(raw)
      const trigger = Trigger.lowestTokens(triggers)
      const unchanged = (triggered: boolean): EditResult => ({
        messages,
        triggered,
        cleared: [],
        tokensBefore,
        tokensAfter: tokensBefore,
        reclaimed: 0,
        trigger
      })
      if (!Trigger.fires(triggers, tokensBefore, sent.length)) return unchanged(false)
      Selection.index(clearing, config, messages)
      const candidates = yield* Selection.candidates(counter, look, clearing, keep, scale)
      if (candidates === 0) return unchanged(true)
      yield* Selection.measureUpTo(counter, look, clearing, messages, candidates)
      const k = Selection.count(clearing, candidates, { raw, tokensOf, clearAtLeast, clearTo })
      const tokensAfter = tokensOf(raw - clearing.reclaim[k]!)
      const cleared = new Array<string>(k)
      for (let j = 0; j < k; j++) cleared[j] = clearing.eligible[j]!.result.part.id
      clearing.output = look.build(messages, clearing.eligible, k, clearing.output)
      return {
        messages: clearing.output.messages,
        triggered: true,
        cleared,
        tokensBefore,
        tokensAfter,
        reclaimed: tokensBefore - tokensAfter,
        trigger,
        placeholder,
        clearedInputs: clearToolInputs
      }
    })

  const applyWith: CounterEdits.ApplyWith = (counter, messages, context) =>
    Effect.gen(function*() {
      const scale = yield* counter.scale
      const systemRaw = context?.systemPrompt === undefined
        ? 0
        : (yield* counter.measure([systemMessage(context.systemPrompt)]))[0]!
      const resolved = yield* sizes
      if (messages.length === 0) {
        const tokens = HistoryCache.scaled(systemRaw, scale)
        return {
          messages,
          triggered: false,
          cleared: [],
          tokensBefore: tokens,
          tokensAfter: tokens,
          reclaimed: 0,
          trigger: Trigger.lowestTokens(resolved.triggers)
        }
      }
      return yield* cache.use(counter, messages, ({ state: clearing, sums }) => {
        const stored = Sent.ifStored(messages, sums, clearing.sent)
        return stored !== undefined
          ? run(counter, clearing, messages, stored, systemRaw, scale, resolved)
          : Effect.flatMap(
            Sent.measure(counter, messages, sums, clearing.sent),
            (sent) => run(counter, clearing, messages, sent, systemRaw, scale, resolved)
          )
      })
    }).pipe(withSpanWhenTraced("ContextEditing.ClearToolUses"))

  const apply = (
    messages: ReadonlyArray<Prompt.Message>,
    context?: EditContext | undefined
  ): Effect.Effect<EditResult, never, TokenCounter.TokenCounter> =>
    Effect.flatMap(TokenCounter.TokenCounter, (counter) => applyWith(counter, messages, context))

  return CounterEdits.register({ name: "ClearToolUses", apply }, applyWith)
}
