import type { AiError, Prompt, Response } from "@effect/ai"
import { LanguageModel } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Either, FastCheck, Layer, Option, Stream } from "effect"
import * as LinearPattern from "../src/internal/linearPattern.js"
import * as Pii from "../src/Pii.js"

// Custom Pii patterns run on a linear-time engine: no text makes them backtrack.

const textOf = (message: Prompt.Message | undefined): string =>
  message === undefined || message.role === "system" || message.role === "tool"
    ? ""
    : message.content.map((part) => part.type === "text" ? part.text : "").join("")

/**
 * Patterns with catastrophic backtracking on JavaScript's engine, each with
 * an adversarial text of about 60 KB that ends in one value the pattern
 * finds, and that value.
 */
const catastrophic: ReadonlyArray<{ readonly pattern: RegExp; readonly text: string; readonly value: string }> = [
  { pattern: /(a+)+b/, text: `${"a".repeat(60_000)}! aab`, value: "aab" },
  { pattern: /(\w+-?)*$/, text: `${"a-".repeat(30_000)}! tail-end`, value: "tail-end" },
  { pattern: /(a|aa)*c/, text: `${"a".repeat(60_000)}! aac`, value: "aac" },
  { pattern: /([a-z0-9]+[a-z]*)+@x/, text: `${"ab1".repeat(20_000)}! ab@x`, value: "ab@x" },
  { pattern: /(\d+|\d+\.)+x/, text: `${"1.".repeat(30_000)}! 12.3x`, value: "12.3x" },
  { pattern: /^(([a-z])+\S)+[A-Z]([a-z])+$/m, text: `${"aaaa".repeat(15_000)}!\nabc.Def`, value: "abc.Def" }
]

/** The longest time between two ticks of a 10 ms timer while `effect` runs. */
const longestBlock = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    let tick = performance.now()
    let longest = 0
    const timer = setInterval(() => {
      const now = performance.now()
      longest = Math.max(longest, now - tick)
      tick = now
    }, 10)
    return effect.pipe(
      Effect.ensuring(Effect.sync(() => clearInterval(timer))),
      Effect.map((value) => ({ value, longest: Math.max(longest, performance.now() - tick) }))
    )
  })

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }

/** A model that streams `text` in `size`-character pieces. */
const streamingModel = (text: string, size: number) =>
  Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.die("not used"),
      streamText: () => {
        const parts: Array<Response.StreamPartEncoded> = [{ type: "text-start", id: "t0" }]
        for (let at = 0; at < text.length; at += size) {
          parts.push({ type: "text-delta", id: "t0", delta: text.slice(at, at + size) })
        }
        parts.push({ type: "text-end", id: "t0" }, { type: "finish", reason: "stop", usage })
        return Stream.fromIterable(parts) as Stream.Stream<Response.StreamPartEncoded, AiError.AiError>
      }
    })
  )

/**
 * What the stream redactor releases for `text` in 64-character chunks: a
 * pattern that crosses whitespace or reads `$` is seen in windows when
 * streamed (see the guide).
 */
const streamedRedaction = (pattern: RegExp, text: string): string => {
  const stream = Either.getOrThrow(Pii.streamRedactor({ types: [{ name: "custom", pattern }] }))
  let state = stream.initial
  let released = ""
  for (let at = 0; at < text.length; at += 64) {
    const step = stream.push(state, text.slice(at, at + 64))
    released += step.text
    state = step.state
  }
  return released + stream.flush(state).text
}

describe("custom patterns with catastrophic backtracking", () => {
  for (const { pattern, text, value } of catastrophic) {
    const redacted = text.slice(0, text.length - value.length) + "[REDACTED_CUSTOM]"

    it.effect(
      `${pattern} on ${text.length} adversarial characters of input ends at once (agent.run)`,
      () =>
        Effect.gen(function*() {
          const agent = yield* Agent.make({ middleware: [Pii.middleware({ types: [{ name: "custom", pattern }] })] })
          const { longest } = yield* longestBlock(agent.run(text, { threadId: "t" }))
          assert.isBelow(longest, 2_000, `the event loop was kept for ${Math.round(longest)} ms`)
          const thread = Option.getOrThrow(yield* agent.thread("t"))
          assert.strictEqual(textOf(thread.state.messages[0]), redacted)
        }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")]))),
      60_000
    )

    it.effect(
      `${pattern} on ${text.length} adversarial characters of streamed output ends at once (agent.stream)`,
      () =>
        Effect.gen(function*() {
          const pii = Pii.middleware({ types: [{ name: "custom", pattern }], applyToInput: false, applyToOutput: true })
          const agent = yield* Agent.make({ middleware: [pii] })
          const { longest, value: events } = yield* longestBlock(
            Effect.map(Stream.runCollect(agent.stream("hi", { threadId: "t" })), Chunk.toArray)
          )
          assert.isBelow(longest, 2_000, `the event loop was kept for ${Math.round(longest)} ms`)
          const shown = events.filter(AgentEvent.$is("TextDelta")).map((event) => event.delta).join("")
          assert.strictEqual(shown, streamedRedaction(pattern, text))
          assert.notInclude(shown, value)
        }).pipe(Effect.provide(streamingModel(text, 64))),
      60_000
    )
  }

  it("a pattern that rescans the text at every match fails the detection instead of keeping the process", () => {
    // `\d+-\d+` runs to the end of the digits before `\d` may match: each match rescans the rest of the text
    const compiled = Either.getOrThrow(Pii.redactor({ types: [{ name: "dashed", pattern: /\d+-\d+|\d/ }] }))
    const started = performance.now()
    assert.throws(() => compiled.detect("1".repeat(100_000)), /dashed" failed: its pattern took more than/)
    assert.isBelow(performance.now() - started, 10_000)
    // a short text is still read in full
    assert.deepStrictEqual(compiled.detect("12-34 5").map((match) => match.value), ["12-34", "5"])
  }, 60_000)
})

describe("patterns the linear-time engine cannot run", () => {
  const refused: ReadonlyArray<readonly [RegExp | string, string]> = [
    [/(a)\1/, "backreference"],
    [/(?<n>a)\k<n>/, "backreference"],
    [/\d+(?=px)/, "lookahead"],
    [/\d+(?!px)/, "lookahead"],
    [/a{1001}/, "repeat count"],
    [new RegExp("[\\w--\\d]", "v"), "set operations"],
    [new RegExp("[[a-z]&&[aeiou]]", "v"), "set operations"],
    ["(\\w)\\1", "backreference"],
    ["a(?=b)", "lookahead"]
  ]
  for (const [pattern, what] of refused) {
    it(`${String(pattern)} is refused at construction with InvalidOptions naming the pattern and the ${what}`, () => {
      const result = Pii.redactor({ types: ["email", { name: "custom", pattern }] })
      assert.isTrue(Either.isLeft(result))
      const error = (result as Either.Left<any, any>).left
      assert.strictEqual(error._tag, "InvalidOptions")
      assert.strictEqual(error.option, "types[1].pattern")
      assert.include(error.reason, typeof pattern === "string" ? pattern : pattern.source)
      assert.include(error.reason, what)
    })
  }

  it.effect("Agent.make fails with InvalidOptions for such a pattern", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.make({
        middleware: [Pii.middleware({ types: [{ name: "price", pattern: /\d+(?=€)/ }] })]
      }))
      assert.strictEqual(error._tag, "InvalidOptions")
      assert.include((error as any).option, "types[0].pattern")
    }).pipe(Effect.provide(ScriptedModel.layer([]))))

  it("a long pattern is cut in the error, and a string that is no regular expression is refused", () => {
    const long = Pii.redactor({ types: [{ name: "long", pattern: new RegExp(`(x)${"y".repeat(300)}\\1`) }] })
    assert.isTrue(Either.isLeft(long))
    const reason = (long as Either.Left<any, any>).left.reason as string
    assert.isBelow(reason.length, 250)
    assert.include(reason, "...")
    const broken = Pii.redactor({ types: [{ name: "broken", pattern: "((" }] })
    assert.isTrue(Either.isLeft(broken))
    assert.strictEqual((broken as Either.Left<any, any>).left.option, "types[0].pattern")
  })

  it("lookbehinds run, and a pattern may be given as its source string (as LangChain's detector)", () => {
    const compiled = Either.getOrThrow(Pii.redactor({
      types: [
        { name: "employee", pattern: /(?<![\w-])E-\d{4}\b/ },
        { name: "ssn", pattern: "\\b\\d{3}-\\d{2}-\\d{4}\\b" }
      ]
    }))
    assert.strictEqual(
      compiled.redact("E-1234 and XE-5678, ssn 123-45-6789").text,
      "[REDACTED_EMPLOYEE] and XE-5678, ssn [REDACTED_SSN]"
    )
  })
})

describe("the linear-time engine finds what JavaScript's RegExp finds", () => {
  // texts: ASCII, a line break, an accented letter and emoji (astral: two UTF-16 code units)
  const alphabet = ["a", "b", "c", "A", "1", "2", "-", " ", "\n", "é", "😀", "👍🏽"]
  const text = FastCheck.array(FastCheck.constantFrom(...alphabet), { maxLength: 24 }).map((chars) => chars.join(""))

  const atom: FastCheck.Arbitrary<string> = FastCheck.constantFrom(
    "a",
    "b",
    "A",
    "1",
    "-",
    " ",
    "é",
    "😀",
    "[ab]",
    "[^a]",
    "[a-c]",
    "[\\d-]",
    "\\d",
    "\\w",
    "\\W",
    "\\s",
    "\\S",
    ".",
    "\\b",
    "^",
    "$"
  )
  const quantified = FastCheck.tuple(
    atom,
    FastCheck.constantFrom("", "", "?", "*", "+", "{1,2}", "{2}", "{0,3}"),
    FastCheck.constantFrom("", "", "?")
  ).map(([base, quantifier, lazy]) =>
    quantifier === "" || base === "\\b" || base === "^" || base === "$" ? base : `${base}${quantifier}${lazy}`
  )
  const pattern: FastCheck.Arbitrary<string> = FastCheck.letrec<{ pattern: string; term: string }>((tie) => ({
    term: FastCheck.oneof(
      { depthSize: "small", withCrossShrink: true },
      quantified,
      FastCheck.tuple(tie("pattern"), FastCheck.constantFrom("(", "(?:"), FastCheck.constantFrom("", "*", "+", "?"))
        // the engines differ on a repeated group that can match empty (see the guide): repeat only groups that cannot
        .map(([inner, open, quantifier]) => `${open}${inner})${/[?*^$]|\{0|\\b/.test(inner) ? "" : quantifier}`)
    ),
    pattern: FastCheck.oneof(
      { depthSize: "small" },
      FastCheck.array(tie("term"), { minLength: 1, maxLength: 4 }).map((terms) => terms.join("")),
      FastCheck.tuple(tie("term"), tie("term")).map(([left, right]) => `${left}|${right}`)
    )
  })).pattern
  const flags = FastCheck.subarray(["i", "m", "s"]).map((chosen) => chosen.join(""))

  it.prop(
    "for random patterns and texts, the spans are JavaScript's non-empty matches (read as whole characters)",
    [pattern, flags, text],
    ([source, chosen, input]) => {
      // the engine reads whole characters: compare with JavaScript's `u` mode, which does too
      const expected = [...input.matchAll(new RegExp(source, `${chosen}gu`))]
        .filter((match) => match[0].length > 0)
        .map((match) => [match.index, match.index + match[0].length, match[0]])
      // (read with the engine itself: `Pii` refuses a pattern whose matches can hold whitespace and be unbounded)
      const translation = LinearPattern.translate(new RegExp(source, chosen))
      assert.strictEqual(translation._tag, "Linear")
      const found = LinearPattern.matcher(translation as LinearPattern.Linear)(input)
        .map((span) => [span.start, span.end, input.slice(span.start, span.end)])
      assert.deepStrictEqual(found, expected, `/${source}/${chosen} on ${JSON.stringify(input)}`)
      // what it reaches is what the matches show: none longer, none with whitespace when it says so
      const reach = (translation as LinearPattern.Linear).reach
      for (const [, , value] of found as Array<[number, number, string]>) {
        if (reach._tag === "NoWhitespace") assert.notMatch(value, /\s/, `/${source}/${chosen}`)
        else assert.isAtMost(value.length, reach.longest, `/${source}/${chosen}`)
      }
      const built = Pii.redactor({ types: [{ name: "x", pattern: new RegExp(source, chosen) }] })
      const refused = reach._tag === "Whitespace" && reach.longest > 1024
      assert.strictEqual(Either.isLeft(built), refused, `/${source}/${chosen}`)
    },
    // 600 random patterns in a few seconds; the timeout is for a loaded machine (1,500 took 24 s under load)
    { fastCheck: { numRuns: 600 }, timeout: 120_000 }
  )

  it.prop(
    "matches between emoji are found at their UTF-16 indices, and streaming releases the whole-text redaction",
    [
      FastCheck.array(
        FastCheck.oneof(
          FastCheck.constantFrom("😀", "👍🏽", "🇫🇷", "x", " ", "\u{1F600}-"),
          FastCheck.tuple(FastCheck.nat(999), FastCheck.nat(99)).map(([a, b]) =>
            `${String(a).padStart(3, "0")}-${String(b).padStart(2, "0")}`
          )
        ),
        { maxLength: 12 }
      ).map((pieces) => pieces.join("")),
      FastCheck.array(FastCheck.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 8 })
    ],
    ([input, sizes]) => {
      const options = { types: [{ name: "code", pattern: /\d{3}-\d{2}/ }] }
      const compiled = Either.getOrThrow(Pii.redactor(options))
      const expected = [...input.matchAll(/\d{3}-\d{2}/g)].map((match) => [match.index, match[0]])
      assert.deepStrictEqual(compiled.detect(input).map((match) => [match.start, match.value]), expected)
      const stream = Either.getOrThrow(Pii.streamRedactor(options))
      let state = stream.initial
      let released = ""
      for (let at = 0, k = 0; at < input.length; k++) {
        const size = sizes[k % sizes.length]!
        const step = stream.push(state, input.slice(at, at + size))
        at += size
        released += step.text
        state = step.state
      }
      released += stream.flush(state).text
      assert.strictEqual(released, compiled.redact(input).text)
    }
  )
})
