import { Prompt, Tokenizer, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware, ModelProfile } from "@stepwise-agent/core"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import { ScriptedModel, SpanRecorder } from "@stepwise-agent/testing"
import * as Arbitraries from "@stepwise-agent/testing/Arbitraries"
import { Chunk, Effect, FastCheck, Layer, Option, Schema, Stream } from "effect"
import * as ContextEditing from "../src/ContextEditing.js"

// ---------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------

const Approximate = TokenCounter.layerApproximate()

const edit = (options?: ContextEditing.ClearToolUsesOptions) => ContextEditing.clearToolUses(options)

/** What building a `ContextEditing` middleware with the edit of `options` fails with (`None`: it builds). */
const optionsError = (options?: ContextEditing.ClearToolUsesOptions) =>
  Middleware.build(ContextEditing.middleware({ edits: [ContextEditing.clearToolUses(options)] })).pipe(
    Effect.flip,
    Effect.option,
    Effect.runSync
  )

/** Tokens of the system prompt and the messages, as an edit counts them. */
const tokensOf = (messages: ReadonlyArray<Prompt.Message>, systemPrompt?: string | undefined) =>
  TokenCounter.count(
    systemPrompt === undefined ? messages : [Prompt.makeMessage("system", { content: systemPrompt }), ...messages]
  )

const call = (id: string, name: string, params: unknown = { q: id }) =>
  Prompt.makePart("tool-call", { id, name, params, providerExecuted: false })
const result = (id: string, name: string, value: unknown) =>
  Prompt.makePart("tool-result", { id, name, result: value, isFailure: false, providerExecuted: false })
const user = (text: string) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })

/** user → (assistant call → tool result) × n, results of `size` characters. */
const history = (
  n: number,
  size: number,
  name: (i: number) => string = () => "search"
): Array<Prompt.Message> => {
  const messages: Array<Prompt.Message> = [user("go")]
  for (let i = 0; i < n; i++) {
    messages.push(Prompt.makeMessage("assistant", { content: [call(`c${i}`, name(i))] }))
    messages.push(Prompt.makeMessage("tool", { content: [result(`c${i}`, name(i), "x".repeat(size))] }))
  }
  return messages
}

const resultsOf = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.flatMap((message) => message.role === "tool" ? message.content : [])

const callsOf = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.flatMap((message) =>
    message.role === "assistant" ? message.content.filter((part) => part.type === "tool-call") : []
  )

// ---------------------------------------------------------------------------
// arbitraries
// ---------------------------------------------------------------------------

const toolNames = ["search", "read_file", "run_code", "todos"]

/** Options whose trigger and keep are numbers (most properties compute with them). */
interface NumericOptions extends ContextEditing.ClearToolUsesOptions {
  readonly trigger: number
  readonly clearAtLeast: number
  readonly keep: number
  readonly clearToolInputs: boolean
  readonly excludeTools: ReadonlyArray<string>
  readonly placeholder: string
}

const optionsArbitrary: FastCheck.Arbitrary<NumericOptions> = FastCheck.record({
  trigger: FastCheck.nat({ max: 1500 }),
  clearAtLeast: FastCheck.oneof(FastCheck.constant(0), FastCheck.nat({ max: 600 })),
  keep: FastCheck.nat({ max: 5 }),
  clearToolInputs: FastCheck.boolean(),
  excludeTools: FastCheck.subarray(toolNames, { maxLength: 2 }),
  placeholder: FastCheck.constantFrom("[cleared]", "", "[this tool result was cleared to save context]")
})

const properties = {
  messages: Arbitraries.conversation({ toolNames, maxTurns: 4, maxResultSize: 600 }),
  options: optionsArbitrary,
  systemPrompt: FastCheck.option(FastCheck.string({ maxLength: 400 }), { nil: undefined })
}

const propertyOptions = { fastCheck: { numRuns: 60 } }

// ---------------------------------------------------------------------------
// properties
// ---------------------------------------------------------------------------

describe("ClearToolUses properties", () => {
  it.effect.prop(
    "never leaves a tool call without its result, nor a result without its call",
    properties,
    ({ messages, options, systemPrompt }) =>
      Effect.gen(function*() {
        const out = yield* edit(options).apply(messages, { systemPrompt })
        assert.deepStrictEqual(Arbitraries.problems(out.messages), [])
        // same messages, roles, parts and ids, in the same order
        assert.deepStrictEqual(
          out.messages.map((m) => [m.role, m.role === "system" ? [] : m.content.map((p) => [p.type, (p as any).id])]),
          messages.map((m) => [m.role, m.role === "system" ? [] : m.content.map((p) => [p.type, (p as any).id])])
        )
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )

  it.effect.prop(
    "never touches the system message, the keep newest results, excluded tools, or anything but results and inputs",
    properties,
    ({ messages, options, systemPrompt }) =>
      Effect.gen(function*() {
        const out = yield* edit(options).apply(messages, { systemPrompt })
        const before = resultsOf(messages)
        const after = resultsOf(out.messages)
        const keep = options.keep
        for (let i = Math.max(0, before.length - keep); i < before.length; i++) assert.strictEqual(after[i], before[i])
        before.forEach((part, i) => {
          if (options.excludeTools.includes(part.name)) assert.strictEqual(after[i], part)
          if (after[i] !== part) {
            assert.isTrue(ContextEditing.isCleared(after[i]!))
            assert.strictEqual(after[i]!.result, options.placeholder)
            assert.include(out.cleared, part.id)
          }
        })
        assert.strictEqual(out.cleared.length, after.filter((part, i) => part !== before[i]).length)
        messages.forEach((message, index) => {
          const edited = out.messages[index]!
          if (message.role === "system" || message.role === "user") assert.strictEqual(edited, message)
          if (message.role === "assistant") {
            message.content.forEach((part, p) => {
              const now = (edited as Prompt.AssistantMessage).content[p]!
              if (part.type !== "tool-call") return assert.strictEqual(now, part)
              if (now === part) return
              assert.isTrue(options.clearToolInputs)
              assert.include(out.cleared, part.id)
              assert.deepStrictEqual((now as Prompt.ToolCallPart).params, {})
            })
          }
        })
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )

  it.effect.prop(
    "is idempotent with clearAtLeast 0, or once its output is under the trigger: applied to its own output it changes nothing",
    properties,
    ({ messages, options, systemPrompt }) =>
      Effect.gen(function*() {
        const clear = edit(options)
        const once = yield* clear.apply(messages, { systemPrompt })
        // with clearAtLeast, an output still over the trigger gets the next results cleared
        if (options.clearAtLeast > 0 && once.tokensAfter >= options.trigger) return
        const twice = yield* clear.apply(once.messages, { systemPrompt })
        assert.strictEqual(twice.messages, once.messages)
        assert.deepStrictEqual(twice.cleared, [])
        assert.strictEqual(twice.reclaimed, 0)
        assert.strictEqual(twice.tokensBefore, once.tokensAfter)
        // a fresh edit with the same options agrees (the memo is not state)
        const fresh = yield* edit(options).apply(once.messages, { systemPrompt })
        assert.deepStrictEqual(fresh.cleared, [])
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )

  it.effect.prop(
    "once fired, clears the oldest results until clearAtLeast is reclaimed, or all of them when it can't be",
    properties,
    ({ messages, options, systemPrompt }) =>
      Effect.gen(function*() {
        const out = yield* edit(options).apply(messages, { systemPrompt })
        if (!out.triggered) return
        const all = yield* edit({ ...options, clearAtLeast: 0 }).apply(messages, { systemPrompt })
        // the oldest first: a prefix of what clearing everything clears
        assert.deepStrictEqual(out.cleared, all.cleared.slice(0, out.cleared.length))
        if (out.reclaimed < options.clearAtLeast) assert.deepStrictEqual(out.cleared, all.cleared)
        if (out.cleared.length > 0 && out.cleared.length < all.cleared.length) {
          // it stopped because enough was reclaimed, and not one result later
          assert.isAtLeast(out.reclaimed, options.clearAtLeast)
          const fewer = yield* reference(
            messages,
            { ...options, clearAtLeast: 0 },
            systemPrompt,
            out.cleared.length - 1
          )
          assert.isBelow(
            (yield* tokensOf(messages, systemPrompt)) - (yield* tokensOf(fewer.messages, systemPrompt)),
            options.clearAtLeast
          )
        }
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )

  it.effect.prop(
    "with clearAtLeast 0, clears every eligible result outside keep once the trigger fires",
    properties,
    ({ messages, options, systemPrompt }) =>
      Effect.gen(function*() {
        const out = yield* edit({ ...options, clearAtLeast: 0 }).apply(messages, { systemPrompt })
        if (!out.triggered) return
        // eligible: answers a call made before it, not excluded, not cleared, older than the keep newest answers
        const called = new Map<string, string>()
        const answers: Array<Prompt.ToolResultPart> = []
        for (const message of messages) {
          if (message.role === "assistant") {
            for (const part of message.content) {
              if (part.type === "tool-call" && !part.providerExecuted) called.set(part.id, part.name)
            }
          }
          if (message.role === "tool") {
            for (const part of message.content) if (called.has(part.id)) answers.push(part)
          }
        }
        const excluded = new Set(options.excludeTools)
        const eligible = answers.slice(0, Math.max(0, answers.length - options.keep)).filter((part) =>
          !ContextEditing.isCleared(part) && !excluded.has(part.name) && !excluded.has(called.get(part.id)!)
        )
        assert.deepStrictEqual(out.cleared, eligible.map((part) => part.id))
        const after = resultsOf(out.messages)
        resultsOf(messages).forEach((part, i) => {
          if (eligible.includes(part)) assert.isTrue(ContextEditing.isCleared(after[i]!))
        })
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )

  it.effect.prop(
    "the counts before and after are what the counter says",
    properties,
    ({ messages, options, systemPrompt }) =>
      Effect.gen(function*() {
        const out = yield* edit(options).apply(messages, { systemPrompt })
        assert.strictEqual(out.reclaimed, out.tokensBefore - out.tokensAfter)
        assert.strictEqual(out.tokensBefore, yield* tokensOf(messages, systemPrompt))
        assert.strictEqual(out.tokensAfter, yield* tokensOf(out.messages, systemPrompt))
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )

  it.effect.prop(
    "passes messages below the trigger unchanged",
    properties,
    ({ messages, options, systemPrompt }) =>
      Effect.gen(function*() {
        const tokens = yield* tokensOf(messages, systemPrompt)
        const out = yield* edit({ ...options, trigger: tokens + 1 + (options.trigger % 2) }).apply(messages, {
          systemPrompt
        })
        assert.strictEqual(out.messages, messages)
        assert.isFalse(out.triggered)
        assert.deepStrictEqual(out.cleared, [])
        assert.strictEqual(out.tokensAfter, tokens)
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )

  it.effect.prop(
    "holds its invariants with a calibrated counter",
    { ...properties, reported: FastCheck.integer({ min: 1, max: 20_000 }) },
    ({ messages, options, reported, systemPrompt }) =>
      Effect.gen(function*() {
        yield* TokenCounter.calibrate(reported, messages)
        const clear = edit(options)
        const once = yield* clear.apply(messages, { systemPrompt })
        assert.strictEqual(once.tokensAfter, yield* tokensOf(once.messages, systemPrompt))
        assert.isTrue(Arbitraries.wellFormed(once.messages))
        if (options.clearAtLeast > 0 && once.tokensAfter >= options.trigger) return
        const twice = yield* clear.apply(once.messages, { systemPrompt })
        assert.strictEqual(twice.messages, once.messages)
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )
})

/**
 * LangChain's algorithm, written plainly: fire when a condition is reached,
 * keep the newest results (by number, or by tokens counting back until one
 * does not fit), then clear candidates oldest first, counting the whole
 * request after each clearing, until `clearAtLeast` is reclaimed (Python's
 * meaning). At most `limit` results are cleared.
 */
const reference = (
  messages: ReadonlyArray<Prompt.Message>,
  options: ContextEditing.ClearToolUsesOptions,
  systemPrompt: string | undefined,
  limit = Number.POSITIVE_INFINITY
) =>
  Effect.gen(function*() {
    const trigger = options.trigger ?? 100_000
    const conditions: ReadonlyArray<ContextEditing.TriggerCondition> = typeof trigger === "number"
      ? [{ tokens: trigger }]
      : Array.isArray(trigger)
      ? trigger
      : [trigger as ContextEditing.TriggerCondition]
    const clearAtLeast = options.clearAtLeast ?? 0
    const keep = options.keep ?? 3
    const excluded = new Set(options.excludeTools ?? [])
    const placeholder = options.placeholder ?? "[cleared]"
    const mark = (part: Prompt.ToolResultPart | Prompt.ToolCallPart) => ({
      ...part.options,
      "stepwise": { ...part.options["stepwise"], contextEditing: "cleared" }
    })
    const replace = (message: Prompt.Message, index: number, part: Prompt.Part) =>
      Prompt.makeMessage(message.role as "tool", {
        content: (message as Prompt.ToolMessage).content.map((p, i) => i === index ? part : p) as any,
        options: message.options
      })
    const count = (list: ReadonlyArray<Prompt.Message>) => tokensOf(list, systemPrompt)
    const before = yield* count(messages)
    const fires = conditions.some((condition) =>
      (condition.tokens === undefined || before >= condition.tokens) &&
      (condition.messages === undefined || messages.length >= condition.messages)
    )
    if (!fires) return { messages, cleared: [] as Array<string> }
    const callOf = (m: number, id: string) => {
      let callAt: readonly [number, number] | undefined
      for (let a = 0; a < m; a++) {
        const message = messages[a]!
        if (message.role !== "assistant") continue
        message.content.forEach((part, p) => {
          if (part.type === "tool-call" && part.id === id && !part.providerExecuted) callAt = [a, p]
        })
      }
      return callAt
    }
    // the results that answer a call (LangChain drops the others first)
    const positions: Array<readonly [number, number]> = []
    messages.forEach((message, m) => {
      if (message.role === "tool") {
        message.content.forEach((part, i) => {
          if (callOf(m, part.id) !== undefined) positions.push([m, i])
        })
      }
    })
    let kept = 0
    if (typeof keep === "number") kept = keep
    else if ("messages" in keep) kept = keep.messages
    else if ("tokens" in keep) {
      let total = 0
      for (let j = positions.length - 1; j >= 0; j--) {
        const [m, i] = positions[j]!
        const part = (messages[m] as Prompt.ToolMessage).content[i]!
        total += yield* TokenCounter.count([Prompt.makeMessage("tool", { content: [part] })])
        if (total > keep.tokens) break
        kept++
      }
    }
    let current = messages.slice()
    const cleared: Array<string> = []
    for (const [m, i] of positions.slice(0, Math.max(0, positions.length - kept))) {
      if (cleared.length >= limit) break
      const result = (messages[m] as Prompt.ToolMessage).content[i]!
      if (ContextEditing.isCleared(result) || excluded.has(result.name)) continue
      const callAt = callOf(m, result.id)!
      const call = (messages[callAt[0]] as Prompt.AssistantMessage).content[callAt[1]] as Prompt.ToolCallPart
      if (excluded.has(call.name)) continue
      const next = current.slice()
      next[m] = replace(
        next[m]!,
        i,
        Prompt.makePart("tool-result", { ...result, result: placeholder, options: mark(result) })
      )
      if (options.clearToolInputs && !ContextEditing.isCleared(call)) {
        next[callAt[0]] = replace(
          next[callAt[0]]!,
          callAt[1],
          Prompt.makePart("tool-call", { ...call, params: {}, options: mark(call) })
        )
      }
      current = next
      cleared.push(result.id)
      if (clearAtLeast > 0 && before - (yield* count(current)) >= clearAtLeast) break
    }
    return { messages: current, cleared }
  })

const conditionArbitrary: FastCheck.Arbitrary<ContextEditing.TriggerCondition> = FastCheck.record({
  tokens: FastCheck.integer({ min: 1, max: 1500 }),
  messages: FastCheck.integer({ min: 1, max: 12 })
}, { requiredKeys: [] }).filter((condition) => condition.tokens !== undefined || condition.messages !== undefined)

/** Options with trigger conditions and every kind of `keep` but fractions. */
const richOptions = {
  ...properties,
  options: FastCheck.tuple(
    optionsArbitrary,
    FastCheck.oneof(
      FastCheck.nat({ max: 1500 }),
      conditionArbitrary,
      FastCheck.array(conditionArbitrary, { minLength: 1, maxLength: 2 })
    ),
    FastCheck.oneof(
      FastCheck.nat({ max: 5 }),
      FastCheck.record({ messages: FastCheck.nat({ max: 5 }) }),
      FastCheck.record({ tokens: FastCheck.nat({ max: 500 }) })
    )
  ).map(([options, trigger, keep]): ContextEditing.ClearToolUsesOptions => ({ ...options, trigger, keep }))
}

describe("ClearToolUses clearTo", () => {
  it.effect.prop(
    "once fired, clears the fewest oldest results that bring the request to clearTo, or all it may clear",
    {
      ...properties,
      watermark: FastCheck.double({ min: 0.05, max: 0.95, noNaN: true })
    },
    ({ messages, options, systemPrompt, watermark }) =>
      Effect.gen(function*() {
        const trigger = Math.max(2, options.trigger)
        const clearTo = Math.max(1, Math.floor(trigger * watermark))
        const base = { ...options, trigger, clearAtLeast: 0 }
        const out = yield* edit({ ...base, clearTo }).apply(messages, { systemPrompt })
        const all = yield* edit(base).apply(messages, { systemPrompt })
        if (!out.triggered) return
        // the cleared ones are the oldest of those clearing everything would clear
        assert.deepStrictEqual(out.cleared, all.cleared.slice(0, out.cleared.length))
        if (out.cleared.length < all.cleared.length) {
          // stopped early: the request came down to the watermark
          assert.isAtMost(out.tokensAfter, clearTo)
        }
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )

  it.effect("clears down to the watermark, not every result, and fails to build at or above the trigger", () =>
    Effect.gen(function*() {
      const messages = history(10, 400)
      const tokens = yield* tokensOf(messages)
      const all = yield* edit({ trigger: 1000, keep: 0 }).apply(messages)
      const some = yield* edit({ trigger: 1000, keep: 0, clearTo: Math.floor(tokens / 2) }).apply(messages)
      assert.strictEqual(all.cleared.length, 10)
      assert.isBelow(some.cleared.length, 10)
      assert.isAbove(some.cleared.length, 0)
      assert.isAtMost(some.tokensAfter, Math.floor(tokens / 2))
      // one fewer result cleared would leave the request above the watermark
      const before = yield* tokensOf(
        messages.map((message) =>
          message.role === "tool" && some.cleared.slice(0, -1).includes(message.content[0]!.id)
            ? some.messages[messages.indexOf(message)]!
            : message
        )
      )
      assert.isAbove(before, Math.floor(tokens / 2))
      const invalid = optionsError({ trigger: [{ tokens: 800 }, { tokens: 1000 }], clearTo: 900 })
      assert.isTrue(Option.isSome(invalid))
    }).pipe(Effect.provide(Approximate)))
})

describe("ClearToolUses against a plain implementation", () => {
  it.effect.prop(
    "clears the same results as LangChain's algorithm, counting the whole request each time",
    richOptions,
    ({ messages, options, systemPrompt }) =>
      Effect.gen(function*() {
        const out = yield* edit(options).apply(messages, { systemPrompt })
        const expected = yield* reference(messages, options, systemPrompt)
        assert.deepStrictEqual(out.cleared, expected.cleared)
        assert.deepStrictEqual(out.messages, expected.messages)
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )

  it.effect.prop(
    "with clearAtLeast 0 it is idempotent for any trigger conditions and keep",
    richOptions,
    ({ messages, options, systemPrompt }) =>
      Effect.gen(function*() {
        const clear = edit({ ...options, clearAtLeast: 0 })
        const once = yield* clear.apply(messages, { systemPrompt })
        const twice = yield* clear.apply(once.messages, { systemPrompt })
        assert.strictEqual(twice.messages, once.messages)
        assert.deepStrictEqual(twice.cleared, [])
        assert.isTrue(Arbitraries.wellFormed(once.messages))
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )

  it.effect.prop(
    "an edit that remembers a thread's history gives the results of a fresh one",
    { ...richOptions, cuts: FastCheck.array(FastCheck.nat(), { maxLength: 6 }) },
    ({ cuts, messages, options, systemPrompt }) =>
      Effect.gen(function*() {
        const remembering = edit(options)
        const lengths = cuts.map((cut) => cut % (messages.length + 1))
        // growing, then in any order (shorter histories start over), then a history that diverges
        const histories = [
          ...[...lengths].sort((a, b) => a - b).map((n) => messages.slice(0, n)),
          ...lengths.map((n) => messages.slice(0, n)),
          messages,
          messages.length === 0 ? [] : [...messages.slice(0, -1), { ...messages.at(-1)! }],
          messages
        ]
        for (const history of histories) {
          const remembered = yield* remembering.apply(history, { systemPrompt })
          const fresh = yield* edit(options).apply(history, { systemPrompt })
          assert.deepStrictEqual(remembered, fresh)
        }
      }).pipe(Effect.provide(Approximate)),
    propertyOptions
  )

  it.effect("concurrent applications to one thread do not disturb each other", () =>
    Effect.gen(function*() {
      const yielding = Tokenizer.make({
        tokenize: (prompt) =>
          Effect.yieldNow().pipe(Effect.as(Array.from(JSON.stringify(prompt.content).slice(0, 400), (_, i) => i)))
      })
      const counter = yield* TokenCounter.makeTokenizer.pipe(Effect.provideService(Tokenizer.Tokenizer, yielding))
      const messages = history(12, 300)
      const shared = edit({ trigger: 50, keep: 2, clearAtLeast: 80 })
      const lengths = [5, 25, 13, 9, 25, 17]
      const concurrent = yield* Effect.forEach(lengths, (n) => shared.apply(messages.slice(0, n)), {
        concurrency: "unbounded"
      }).pipe(Effect.provideService(TokenCounter.TokenCounter, counter))
      const sequential = yield* Effect.forEach(lengths, (n) =>
        edit({ trigger: 50, keep: 2, clearAtLeast: 80 }).apply(messages.slice(0, n))).pipe(
          Effect.provideService(TokenCounter.TokenCounter, counter)
        )
      assert.deepStrictEqual(concurrent, sequential)
      assert.isAbove(sequential[1]!.cleared.length, 0)
    }))
})

// ---------------------------------------------------------------------------
// examples
// ---------------------------------------------------------------------------

describe("ClearToolUses", () => {
  it.effect("clears all but the keep newest results, oldest first, marking them", () =>
    Effect.gen(function*() {
      const messages = history(5, 400)
      const out = yield* edit({ trigger: 100, keep: 2 }).apply(messages)
      assert.deepStrictEqual(out.cleared, ["c0", "c1", "c2"])
      assert.isTrue(out.triggered)
      const results = resultsOf(out.messages)
      assert.deepStrictEqual(results.map((part) => part.result), [
        "[cleared]",
        "[cleared]",
        "[cleared]",
        "x".repeat(400),
        "x".repeat(400)
      ])
      assert.deepStrictEqual(results.map(ContextEditing.isCleared), [true, true, true, false, false])
      assert.deepStrictEqual(results[0]!.options, { "stepwise": { contextEditing: "cleared" } })
      // the calls keep their arguments unless clearToolInputs
      assert.deepStrictEqual(callsOf(out.messages).map((part) => part.params), callsOf(messages).map((p) => p.params))
      // the input is not mutated
      assert.deepStrictEqual(resultsOf(messages).map((part) => part.result), Array(5).fill("x".repeat(400)))
      // as tool messages of their own: ceil(("x" × 400 + "c0" + "tool" + "search") / 4) + 3
      // less ceil(("[cleared]" + "c0" + "tool" + "search") / 4) + 3 = 106 - 9 per result
      assert.strictEqual(out.reclaimed, 3 * 97)
    }).pipe(Effect.provide(Approximate)))

  it.effect("fires when the request reaches the trigger, which counts the system prompt", () =>
    Effect.gen(function*() {
      const messages = history(4, 400)
      const tokens = yield* tokensOf(messages)
      const below = yield* edit({ trigger: tokens + 1, keep: 0 }).apply(messages)
      assert.strictEqual(below.messages, messages)
      assert.isFalse(below.triggered)
      // reached, as LangChain's `tokens >= trigger`
      const at = yield* edit({ trigger: { tokens }, keep: 0 }).apply(messages)
      assert.isTrue(at.triggered)
      assert.deepStrictEqual(at.cleared, ["c0", "c1", "c2", "c3"])
      const withPrompt = yield* edit({ trigger: tokens + 1, keep: 0 }).apply(messages, { systemPrompt: "Be brief." })
      assert.isTrue(withPrompt.triggered)
      assert.deepStrictEqual(withPrompt.cleared, ["c0", "c1", "c2", "c3"])
      // ceil(("Be brief." + "system") / 4) + 3
      assert.strictEqual(withPrompt.tokensBefore, tokens + 4 + 3)
    }).pipe(Effect.provide(Approximate)))

  it.effect("fires on a number of messages, on all the limits of a condition, on any condition of a list", () =>
    Effect.gen(function*() {
      const messages = history(3, 400) // 7 messages
      const tokens = yield* tokensOf(messages)
      const fired = (trigger: ContextEditing.ClearToolUsesOptions["trigger"]) =>
        Effect.map(edit({ trigger, keep: 1 }).apply(messages), (out) => out.triggered)
      assert.isTrue(yield* fired({ messages: 7 }))
      assert.isFalse(yield* fired({ messages: 8 }))
      assert.isTrue(yield* fired({ messages: 7, tokens }))
      assert.isFalse(yield* fired({ messages: 7, tokens: tokens + 1 }))
      assert.isFalse(yield* fired({ messages: 8, tokens }))
      assert.isTrue(yield* fired([{ messages: 8 }, { tokens }]))
      assert.isTrue(yield* fired([{ tokens: tokens + 1 }, { messages: 2 }]))
      assert.isFalse(yield* fired([{ tokens: tokens + 1 }, { messages: 8, tokens: 1 }]))
      const out = yield* edit({ trigger: { messages: 7 }, keep: 1 }).apply(messages)
      assert.deepStrictEqual(out.cleared, ["c0", "c1"])
      // a condition without tokens reports no trigger count
      assert.isUndefined(out.trigger)
      assert.strictEqual(
        (yield* edit({ trigger: [{ messages: 7 }, { tokens: 900 }, { tokens: 800 }] }).apply(messages)).trigger,
        800
      )
    }).pipe(Effect.provide(Approximate)))

  it.effect("with clearAtLeast, stops once enough is reclaimed, even when the request is still over the trigger", () =>
    Effect.gen(function*() {
      const messages = history(6, 400) // 97 tokens reclaimed per result
      const tokens = yield* tokensOf(messages)
      const enough = yield* edit({ trigger: tokens - 1, clearAtLeast: 150, keep: 0 }).apply(messages)
      assert.deepStrictEqual(enough.cleared, ["c0", "c1"])
      assert.strictEqual(enough.reclaimed, 194)
      // clearing until under the trigger would clear three (291 tokens); clearAtLeast stops at two
      const over = yield* edit({ trigger: tokens - 250, clearAtLeast: 150, keep: 0 }).apply(messages)
      assert.deepStrictEqual(over.cleared, ["c0", "c1"])
      assert.isAtLeast(over.tokensAfter, tokens - 250)
      // with 0, every result that may be cleared is, far past the trigger
      const all = yield* edit({ trigger: tokens - 1, keep: 0 }).apply(messages)
      assert.deepStrictEqual(all.cleared, ["c0", "c1", "c2", "c3", "c4", "c5"])
      // when not enough can be reclaimed, everything that may be cleared is
      const short = yield* edit({ trigger: 0, clearAtLeast: 10_000, keep: 4 }).apply(messages)
      assert.deepStrictEqual(short.cleared, ["c0", "c1"])
    }).pipe(Effect.provide(Approximate)))

  it.effect("keep: { tokens } keeps the newest results that fit, counting back until one does not", () =>
    Effect.gen(function*() {
      const messages = history(4, 400) // 106 tokens per result as a tool message
      const cleared = (keep: ContextEditing.Keep) =>
        Effect.map(edit({ trigger: 0, keep }).apply(messages), (out) => out.cleared)
      assert.deepStrictEqual(yield* cleared({ tokens: 212 }), ["c0", "c1"])
      assert.deepStrictEqual(yield* cleared({ tokens: 211 }), ["c0", "c1", "c2"])
      assert.deepStrictEqual(yield* cleared({ tokens: 105 }), ["c0", "c1", "c2", "c3"])
      assert.deepStrictEqual(yield* cleared({ tokens: 10_000 }), [])
      assert.deepStrictEqual(yield* cleared({ messages: 1 }), ["c0", "c1", "c2"])
      // the walk stops at the first result that does not fit, even if an older one would
      const mixed = [
        ...history(1, 10),
        Prompt.makeMessage("assistant", { content: [call("big", "search")] }),
        Prompt.makeMessage("tool", { content: [result("big", "search", "y".repeat(2000))] }),
        Prompt.makeMessage("assistant", { content: [call("last", "search")] }),
        Prompt.makeMessage("tool", { content: [result("last", "search", "z".repeat(40))] })
      ]
      const out = yield* edit({ trigger: 0, keep: { tokens: 100 } }).apply(mixed)
      assert.deepStrictEqual(out.cleared, ["c0", "big"])
    }).pipe(Effect.provide(Approximate)))

  it.effect("accepts LangChain JS's deprecated triggerTokens and keepMessages, which trigger and keep override", () =>
    Effect.gen(function*() {
      const messages = history(4, 400)
      const tokens = yield* tokensOf(messages)
      const aliased = yield* edit({ triggerTokens: tokens, keepMessages: 1 }).apply(messages)
      assert.deepStrictEqual(aliased.cleared, ["c0", "c1", "c2"])
      assert.isFalse((yield* edit({ triggerTokens: tokens + 1 }).apply(messages)).triggered)
      const overridden = yield* edit({ triggerTokens: tokens + 1, trigger: tokens, keepMessages: 1, keep: 2 }).apply(
        messages
      )
      assert.deepStrictEqual(overridden.cleared, ["c0", "c1"])
    }).pipe(Effect.provide(Approximate)))

  it.effect("takes fractions of contextWindow, or of the model's profile when the edit runs", () =>
    Effect.gen(function*() {
      const messages = history(4, 400)
      const tokens = yield* tokensOf(messages)
      const fired = (options: ContextEditing.ClearToolUsesOptions) =>
        Effect.map(edit(options).apply(messages), (out) => out.triggered)
      assert.isTrue(yield* fired({ trigger: { fraction: 0.5 }, contextWindow: 2 * tokens }))
      assert.isFalse(yield* fired({ trigger: { fraction: 0.5 }, contextWindow: 2 * tokens + 2 }))
      // keep a quarter of 848 tokens: 212, two results
      const kept = yield* edit({ trigger: 0, keep: { fraction: 0.25 }, contextWindow: 848 }).apply(messages)
      assert.deepStrictEqual(kept.cleared, ["c0", "c1"])
      // a keep fraction that comes to 0 tokens keeps LangChain's default, 3 results
      const none = yield* edit({ trigger: 0, keep: { fraction: 0 }, contextWindow: 848 }).apply(messages)
      assert.deepStrictEqual(none.cleared, ["c0"])

      // without contextWindow: the profile of the agent's model, looked up each time
      const profiled = edit({ trigger: { fraction: 0.5 }, keep: { fraction: 0.25 } })
      const Profiles = ModelProfile.layerOverride({
        "tiny-a": { contextWindow: 4 * tokens, maxOutputTokens: 100, maxInputTokens: 2 * tokens },
        "tiny-b": { contextWindow: 4 * tokens, maxOutputTokens: 100, maxInputTokens: 848 }
      })
      const onModel = (model: string) =>
        profiled.apply(messages).pipe(Effect.provide(Layer.merge(Profiles, ModelProfile.layerModel(model))))
      const small = yield* onModel("tiny-a")
      assert.isTrue(small.triggered)
      assert.strictEqual(small.trigger, tokens)
      // keep floor(0.25 × 2 × 525) = 262 tokens: two results of 106
      assert.strictEqual(tokens, 5 + 4 * (24 + 106))
      assert.deepStrictEqual(small.cleared, ["c0", "c1"])
      const smaller = yield* onModel("tiny-b")
      assert.strictEqual(smaller.trigger, 424)
      assert.deepStrictEqual(smaller.cleared, ["c0", "c1"])
      // no profile: ModelProfile.fallback's 128000 input tokens
      const unknown = yield* onModel("unknown-model")
      assert.isFalse(unknown.triggered)
      assert.strictEqual(unknown.trigger, 64_000)
    }).pipe(Effect.provide(Approximate)))

  it.effect("clears the inputs of cleared calls with clearToolInputs", () =>
    Effect.gen(function*() {
      const messages = history(3, 400)
      const out = yield* edit({ trigger: 0, keep: 1, clearToolInputs: true }).apply(messages)
      assert.deepStrictEqual(callsOf(out.messages).map((part) => part.params), [{}, {}, { q: "c2" }])
      assert.deepStrictEqual(callsOf(out.messages).map(ContextEditing.isCleared), [true, true, false])
      const plain = yield* edit({ trigger: 0, keep: 1 }).apply(messages)
      assert.isAbove(out.reclaimed, plain.reclaimed)
    }).pipe(Effect.provide(Approximate)))

  it.effect("never clears excluded tools, which still count towards keep", () =>
    Effect.gen(function*() {
      const messages = history(5, 400, (i) => i % 2 === 0 ? "todos" : "search")
      const out = yield* edit({ trigger: 0, keep: 1, excludeTools: ["todos"] }).apply(messages)
      // c0, c2, c4 are todos; c4 is also the newest
      assert.deepStrictEqual(out.cleared, ["c1", "c3"])
    }).pipe(Effect.provide(Approximate)))

  it.effect("clears short results too, as LangChain does, and leaves results that answer no call", () =>
    Effect.gen(function*() {
      const messages = [
        user("go"),
        Prompt.makeMessage("assistant", { content: [call("a", "search"), call("b", "search")] }),
        Prompt.makeMessage("tool", { content: [result("a", "search", "ok"), result("b", "search", "y".repeat(300))] }),
        Prompt.makeMessage("tool", { content: [result("orphan", "search", "z".repeat(300))] })
      ]
      const out = yield* edit({ trigger: 0, keep: 0 }).apply(messages)
      assert.deepStrictEqual(out.cleared, ["a", "b"])
      const tool = out.messages[2] as Prompt.ToolMessage
      assert.deepStrictEqual(tool.content.map((part) => part.result), ["[cleared]", "[cleared]"])
      assert.strictEqual(out.messages[3], messages[3])
      // a placeholder longer than a result makes the request larger
      const longer = yield* edit({ trigger: 0, keep: 1, placeholder: "[this result was cleared]" }).apply(messages)
      assert.deepStrictEqual(longer.cleared, ["a"])
      assert.isBelow(longer.reclaimed, 0)
    }).pipe(Effect.provide(Approximate)))

  it.effect("an orphan result (no call before it) takes no keep slot: the newest real result is kept", () =>
    Effect.gen(function*() {
      const messages = [
        ...history(3, 400),
        Prompt.makeMessage("tool", { content: [result("orphan", "search", "z".repeat(400))] })
      ]
      const out = yield* edit({ trigger: 0, keep: 1 }).apply(messages)
      assert.deepStrictEqual(out.cleared, ["c0", "c1"])
      assert.deepStrictEqual(resultsOf(out.messages).map(ContextEditing.isCleared), [true, true, false, false])
    }).pipe(Effect.provide(Approximate)))

  it.effect("returns the same edited objects for the same input, so their counts stay cached", () =>
    Effect.gen(function*() {
      const clear = edit({ trigger: 0, keep: 1 })
      const messages = history(3, 400)
      const first = yield* clear.apply(messages)
      const second = yield* clear.apply([...messages, user("more")])
      assert.strictEqual(second.messages[2], first.messages[2])
      assert.strictEqual(second.messages[4], first.messages[4])
    }).pipe(Effect.provide(Approximate)))

  it.effect("tokenizes only new messages when the history grows", () =>
    Effect.gen(function*() {
      let calls = 0
      const tokenizer = Tokenizer.make({
        tokenize: (prompt) =>
          Effect.sync(() => {
            calls++
            return Array.from(JSON.stringify(prompt.content), (_, i) => i).slice(
              0,
              1 + JSON.stringify(prompt).length / 4
            )
          })
      })
      const counter = yield* TokenCounter.makeTokenizer.pipe(Effect.provideService(Tokenizer.Tokenizer, tokenizer))
      const clear = edit({ trigger: 0, keep: 2 })
      const apply = (messages: ReadonlyArray<Prompt.Message>) =>
        clear.apply(messages, { systemPrompt: "Be brief." }).pipe(
          Effect.provideService(TokenCounter.TokenCounter, counter)
        )
      const messages = history(50, 200)
      const first = yield* apply(messages)
      assert.strictEqual(first.cleared.length, 48)
      const afterFirst = calls
      assert.strictEqual((yield* apply(messages)).reclaimed, first.reclaimed)
      assert.strictEqual(calls, afterFirst)
      // one more call and result: the new parts, and the newly cleared result and its placeholder
      const grown = [
        ...messages,
        Prompt.makeMessage("assistant", { content: [call("c50", "search")] }),
        Prompt.makeMessage("tool", { content: [result("c50", "search", "x".repeat(200))] })
      ]
      const second = yield* apply(grown)
      assert.strictEqual(second.cleared.length, 49)
      assert.strictEqual(calls - afterFirst, 2 + 1)
    }))

  it("rejects negative and fractional counts and unknown keys at construction with InvalidOptions", () => {
    const invalid = [
      [{ trigger: -1 }, "trigger"],
      [{ trigger: 1.5 }, "trigger"],
      [{ clearAtLeast: -5 }, "clearAtLeast"],
      [{ keep: -1 }, "keep"],
      [{ keep: 0.5 }, "keep"],
      [{ keep: Number.NaN }, "keep"],
      [{ trigger: Number.POSITIVE_INFINITY }, "trigger"],
      [{ excludeTools: [1 as any] }, "excludeTools[0]"],
      [{ clearToolInputs: "yes" as any }, "clearToolInputs"],
      [{ exclude_tools: ["search"] } as any, "exclude_tools"],
      [{ trigger: { tokens: 0 } }, "trigger.tokens"],
      [{ trigger: { messages: 1.5 } }, "trigger.messages"],
      [{ trigger: { fraction: 1.5 } }, "trigger.fraction"],
      [{ trigger: { fraction: 0 } }, "trigger.fraction"],
      [{ trigger: [{ tokens: 10 }, { messages: 0 }] }, "trigger[1].messages"],
      [{ trigger: [] }, "trigger"],
      [{ trigger: {} }, "trigger"],
      [{ keep: { tokens: -1 } }, "keep.tokens"],
      [{ keep: { fraction: 2 } }, "keep.fraction"],
      [{ keep: { messages: 1, tokens: 5 } as any }, "keep"],
      [{ contextWindow: 0 }, "contextWindow"],
      [{ trigger: { fraction: 0.001 }, contextWindow: 500 }, "trigger.fraction"]
    ] as const
    for (const [options, option] of invalid) {
      const error = optionsError(options as ContextEditing.ClearToolUsesOptions)
      assert.isTrue(Option.isSome(error), option)
      const value = Option.getOrThrow(error)
      assert.strictEqual(value._tag, "InvalidOptions")
      assert.isTrue(value.option.startsWith(option), `${value.option} for ${option}`)
      assert.strictEqual(value.module, "ClearToolUses")
    }
    const keep = optionsError({ keep: -1 }).pipe(Option.getOrThrow)
    assert.include(keep.message, "Invalid ClearToolUses option \"keep\": Expected a whole number of at least 0")
    assert.include(keep.message, "actual -1")
    const empty = optionsError({ trigger: [] }).pipe(Option.getOrThrow)
    assert.strictEqual(empty.reason, "is an empty list: nothing would trigger")
    assert.isTrue(Option.isNone(optionsError()))
    assert.isTrue(Option.isNone(optionsError({ trigger: 0, clearAtLeast: 0, keep: 0 })))
    assert.isTrue(Option.isNone(optionsError({
      trigger: [{ tokens: 0.5 }, { messages: 3, fraction: 1 }],
      keep: { fraction: 0 },
      contextWindow: 1
    })))
  })

  it.effect("an edit built from bad options is a value that fails Agent.make with its InvalidOptions", () =>
    Effect.gen(function*() {
      const bad = ContextEditing.clearToolUses({ clearAtLeast: -1 })
      assert.strictEqual(bad.name, "ClearToolUses")
      const error = yield* Effect.flip(Agent.make({ middleware: [ContextEditing.middleware({ edits: [bad] })] }))
      assert.strictEqual(error._tag, "InvalidOptions")
      assert.strictEqual(error._tag === "InvalidOptions" && error.module, "ClearToolUses")
      assert.strictEqual(error._tag === "InvalidOptions" && error.option, "clearAtLeast")
      // applied by hand, outside a middleware, it dies with the same error
      const died = yield* Effect.exit(ContextEditing.applyEdits([bad], [user("hi")]))
      assert.isTrue(died._tag === "Failure" && died.cause._tag === "Die")
    }).pipe(Effect.provide(ScriptedModel.layer([])), Effect.provide(Approximate)))

  it.effect("applyEdits chains edits and sums what they did", () =>
    Effect.gen(function*() {
      const messages = history(4, 400, (i) => i < 2 ? "search" : "read_file")
      const out = yield* ContextEditing.applyEdits([
        edit({ trigger: 0, keep: 0, excludeTools: ["read_file"] }),
        edit({ trigger: 0, keep: 1, excludeTools: ["search"] })
      ], messages)
      assert.deepStrictEqual(out.cleared, ["c0", "c1", "c2"])
      assert.strictEqual(out.tokensBefore, yield* tokensOf(messages))
      assert.strictEqual(out.tokensAfter, yield* tokensOf(out.messages))
      const none = yield* ContextEditing.applyEdits([], messages, { systemPrompt: "hi" })
      assert.strictEqual(none.messages, messages)
      assert.strictEqual(none.tokensBefore, yield* tokensOf(messages, "hi"))
    }).pipe(Effect.provide(Approximate)))
})

// ---------------------------------------------------------------------------
// middleware
// ---------------------------------------------------------------------------

const Lookup = Tool.make("lookup", { parameters: { key: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Lookup)
const ToolsLive = Tools.toLayer({ lookup: ({ key }) => Effect.succeed(`${key}:` + "v".repeat(400)) })

const threeLookups = [
  ScriptedModel.toolCalls([{ name: "lookup", params: { key: "a" }, id: "a" }]),
  ScriptedModel.toolCalls([{ name: "lookup", params: { key: "b" }, id: "b" }]),
  ScriptedModel.toolCalls([{ name: "lookup", params: { key: "c" }, id: "c" }]),
  ScriptedModel.text("done")
]

const resultTexts = (messages: ReadonlyArray<Prompt.Message>) =>
  resultsOf(messages).map((part) => [part.id, String(part.result).slice(0, 9)])

describe("ContextEditing.middleware", () => {
  it.effect("clears old tool results in the model's request only; the thread keeps the originals", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        systemPrompt: "You look things up.",
        middleware: [ContextEditing.middleware({ edits: [edit({ trigger: 200, keep: 1 })] })]
      })
      const events = yield* agent.stream("find a, b and c", { threadId: "t" }).pipe(
        Stream.runCollect,
        Effect.map(Chunk.toArray)
      )
      const requests = yield* ScriptedModel.requests
      assert.strictEqual(requests.length, 4)
      // the first request with two results is over the trigger: only the newest is kept
      assert.deepStrictEqual(resultTexts(requests[1]!.prompt.content), [["a", "a:vvvvvvv"]])
      assert.deepStrictEqual(resultTexts(requests[2]!.prompt.content), [["a", "[cleared]"], ["b", "b:vvvvvvv"]])
      assert.deepStrictEqual(resultTexts(requests[3]!.prompt.content), [
        ["a", "[cleared]"],
        ["b", "[cleared]"],
        ["c", "c:vvvvvvv"]
      ])
      // the system prompt is sent, untouched
      assert.deepStrictEqual(
        requests[3]!.prompt.content[0],
        Prompt.makeMessage("system", { content: "You look things up." })
      )
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      assert.deepStrictEqual(resultTexts(thread.state.messages), [
        ["a", "a:vvvvvvv"],
        ["b", "b:vvvvvvv"],
        ["c", "c:vvvvvvv"]
      ])
      const decisions = events.filter(AgentEvent.$is("MiddlewareDecision")).filter((e) =>
        e.middleware === "contextEditing"
      )
      // every call reports its count against the trigger; the calls over it report what they cleared
      assert.deepStrictEqual(decisions.map((e) => e.decision.replace(/\d+ tokens/, "N tokens")), [
        "N tokens (trigger 200)",
        "N tokens (trigger 200)",
        "cleared 1 tool results, N tokens reclaimed",
        "cleared 2 tool results, N tokens reclaimed"
      ])
      const data = decisions.map((e) =>
        e.data as { tokensBefore: number; trigger: number; cleared?: ReadonlyArray<string> }
      )
      assert.deepStrictEqual(data.map((d) => d.trigger), [200, 200, 200, 200])
      assert.isTrue(data[0]!.tokensBefore <= 200 && data[2]!.tokensBefore > 200)
      assert.deepStrictEqual(data[3]!.cleared, ["a", "b"])
      assert.strictEqual(decisions[0]!.hook, "wrapModelCall")
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(threeLookups), ToolsLive))))

  it.effect("uses LangChain's defaults: nothing is cleared under 100000 tokens", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [ContextEditing.middleware()] })
      yield* agent.run("find a, b and c", { threadId: "t" })
      const last = (yield* ScriptedModel.requests)[3]!
      assert.deepStrictEqual(resultTexts(last.prompt.content).map(([, text]) => text), [
        "a:vvvvvvv",
        "b:vvvvvvv",
        "c:vvvvvvv"
      ])
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(threeLookups), ToolsLive))))

  it.effect("with tokenCountMethod \"model\", counts with the TokenCounter the agent is given", () =>
    Effect.gen(function*() {
      const middleware = ContextEditing.middleware({
        name: "edits",
        edits: [edit({ trigger: 200, keep: 1 })],
        tokenCountMethod: "model"
      })
      // 10000 characters per token: the request never reaches the trigger
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] }).pipe(
        Effect.provide(TokenCounter.layerApproximate({ charsPerToken: 10_000, tokensPerMessage: 0 }))
      )
      yield* agent.run("find a, b and c", { threadId: "t" })
      const last = (yield* ScriptedModel.requests)[3]!
      assert.deepStrictEqual(resultTexts(last.prompt.content).map(([, text]) => text), [
        "a:vvvvvvv",
        "b:vvvvvvv",
        "c:vvvvvvv"
      ])
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(threeLookups), ToolsLive))))

  it.effect("counts the system prompt towards the trigger", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        systemPrompt: "s".repeat(4000),
        middleware: [ContextEditing.middleware({ edits: [edit({ trigger: 1000, keep: 0 })] })]
      })
      yield* agent.run("find a, b and c", { threadId: "t" })
      const requests = yield* ScriptedModel.requests
      assert.deepStrictEqual(resultTexts(requests[1]!.prompt.content), [["a", "[cleared]"]])
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(threeLookups), ToolsLive))))

  it.effect("with a tracer installed, each model call's ClearToolUses gets its span, in request and view mode", () =>
    Effect.gen(function*() {
      for (const mode of ["request", "view"] as const) {
        const { spans, tracer } = SpanRecorder.make()
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [ContextEditing.middleware({ mode, edits: [edit({ trigger: 1000, keep: 0 })] })]
        })
        yield* agent.run("find a, b and c", { threadId: `t-${mode}` }).pipe(Effect.withTracer(tracer))
        const edits = spans.filter((span) => span.name === "ContextEditing.ClearToolUses")
        assert.strictEqual(edits.length, 4, mode)
        for (const span of edits) assert.strictEqual(span.status._tag, "Ended")
      }
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([...threeLookups, ...threeLookups]), ToolsLive))))

  it.effect("runs custom edits, whose typed errors fail the run", () =>
    Effect.gen(function*() {
      const refuse: ContextEditing.ContextEdit<ContextEditing.ContextEditError> = {
        name: "refuse",
        apply: (messages) =>
          messages.length > 2
            ? Effect.fail(new ContextEditing.ContextEditError({ edit: "refuse", reason: "too long" }))
            : Effect.map(TokenCounter.count(messages), (tokens) => ({
              messages,
              triggered: false,
              cleared: [],
              tokensBefore: tokens,
              tokensAfter: tokens,
              reclaimed: 0
            }))
      }
      const middleware: Middleware.Middleware<{}, ContextEditing.ContextEditError, never> = ContextEditing.middleware({
        edits: [refuse]
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [middleware] })
      const error = yield* Effect.flip(agent.run("find a, b and c", { threadId: "t" }))
      assert.strictEqual(error._tag, "ContextEditError")
      assert.strictEqual(error.message, "Context edit refuse failed: too long")
      assert.strictEqual((yield* ScriptedModel.requests).length, 1)
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(threeLookups), ToolsLive))))

  it("types: the approximate method needs no service, the model method needs a TokenCounter", () => {
    const approximate: Middleware.Middleware<{}, never, never> = ContextEditing.middleware()
    const model: Middleware.Middleware<{}, never, TokenCounter.TokenCounter> = ContextEditing.middleware({
      tokenCountMethod: "model"
    })
    // @ts-expect-error the model method needs a TokenCounter
    const wrong: Middleware.Middleware<{}, never, never> = ContextEditing.middleware({ tokenCountMethod: "model" })
    assert.deepStrictEqual([approximate.name, model.name, wrong.name], [
      "contextEditing",
      "contextEditing",
      "contextEditing"
    ])
    assert.isDefined(approximate.wrapModelCall)
    assert.isUndefined(approximate.beforeModel)
  })
})
