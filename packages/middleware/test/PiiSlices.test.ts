import type { AiError, Prompt, Response } from "@effect/ai"
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Either, FastCheck, Layer, Option, Schema, Stream } from "effect"
import * as PiiStream from "../src/internal/piiStream.js"
import * as Pii from "../src/Pii.js"

// No input may block the process: a long text is redacted in slices, with
// turns of the event loop between them, and a custom pattern's work is
// bounded before a scan starts.

const textOf = (message: Prompt.Message | undefined): string =>
  message === undefined || message.role === "system" || message.role === "tool"
    ? ""
    : message.content.map((part) => part.type === "text" ? part.text : "").join("")

/** The longest time between two ticks of a 10 ms timer while `effect` runs, and how long it ran. */
const longestBlock = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const started = performance.now()
    let tick = started
    let longest = 0
    const timer = setInterval(() => {
      const now = performance.now()
      longest = Math.max(longest, now - tick)
      tick = now
    }, 10)
    return effect.pipe(
      Effect.ensuring(Effect.sync(() => clearInterval(timer))),
      Effect.map((value) => ({
        value,
        longest: Math.max(longest, performance.now() - tick),
        total: performance.now() - started
      }))
    )
  })

/** The bound on one block of the event loop: a slice takes tens of milliseconds; a whole 4 MB text, seconds. */
const MAX_BLOCK_MS = 500

/**
 * Whether the longest block of a run that took `total` ms is one slice's, not the whole work's: below
 * `MAX_BLOCK_MS`, or a quarter of the run (a machine loaded enough to stretch a slice and its pauses past
 * `MAX_BLOCK_MS` stretches the run too; a whole text redacted at once is nearly all of it, on any machine).
 */
const assertSliced = (longest: number, total: number) =>
  assert.isBelow(
    longest,
    Math.max(MAX_BLOCK_MS, total / 4),
    `the event loop was kept for ${Math.round(longest)} ms of ${Math.round(total)}`
  )

const custom: ReadonlyArray<Pii.PiiType> = [
  { name: "ssn", pattern: /\b\d{3}-\d{2}-\d{4}\b/ },
  { name: "employee", pattern: "\\bEMP-\\d{6}\\b" }
]
const every: ReadonlyArray<Pii.PiiType> = [...Pii.builtinTypes, ...custom]

/** 4 MB of digits and spaces: whole, its redaction takes seconds (every digit starts a candidate card). */
const bigDigits = "1 ".repeat(2 * 1024 * 1024)

const values = FastCheck.oneof(
  FastCheck.constantFrom(
    "ada@example.com",
    "4111 1111 1111 1111",
    "4111-1111-1111-1111",
    "10.0.0.42",
    "00:1A:2B:3C:4D:5E",
    "https://shop.example.com/orders/42?x=1",
    "www.example.org/p/7",
    "123-45-6789",
    "EMP-004211"
  ),
  FastCheck.nat({ max: 1_000 }).map((n) => `https://example.com/${"p".repeat(n)}`)
)
const fillers = FastCheck.constantFrom("", " ", "  ", "\n", "word", "1", "12 34", "a.b", ",", "联系", "🙂", "-", ":")

/**
 * Texts with values of every type at random places among random fillers (whitespace or not between them), no run
 * without whitespace longer than `PiiStream.MARGIN`: slicing is exact for values up to that long (a longer one is
 * taken whole up to the next whitespace, so none of it is kept, but not as the whole-text redaction). Values glued together
 * by fillers without whitespace make one longer run: such texts are left out.
 */
const texts = FastCheck.array(FastCheck.oneof(values, fillers), { maxLength: 60 })
  .map((pieces) => pieces.join(""))
  .filter((text) => text.split(/\s/).every((run) => run.length <= PiiStream.MARGIN))

/** The stream redactor's push or flush, as a step of `PiiStream`. */
const stepOf = (redactor: Pii.Redactor): PiiStream.Step<never> => (state, chunk) =>
  Effect.sync(() => chunk === undefined ? redactor.stream.flush(state) : redactor.stream.push(state, chunk))

describe("redaction in slices", () => {
  it.effect.prop(
    "redacting a text in slices of any size gives the whole-text redaction, for values of every type anywhere",
    [
      texts,
      FastCheck.integer({ min: 16, max: 300 }),
      FastCheck.constantFrom<Pii.Strategy>("redact", "mask", "hash", "block")
    ],
    ([text, size, strategy]) =>
      Effect.gen(function*() {
        const redactor = Either.getOrThrow(Pii.redactor({ types: every, strategy }))
        const whole = redactor.redact(text)
        const sliced = yield* PiiStream.redactSlices(stepOf(redactor), redactor.stream.initial, text, {
          size,
          apply: () => assert.fail("no value here is too long to hold back")
        })
        assert.deepStrictEqual(sliced, whole)
      }),
    { fastCheck: { numRuns: 100 } }
  )

  it.effect(
    "a 4 MB input is redacted as a whole redaction would, without keeping the event loop",
    () =>
      Effect.gen(function*() {
        const values = "mail ada@example.com, card 4111 1111 1111 1111, host 10.0.0.42, id EMP-004211 "
        // values on both sides of each 64 KB border, and a 3 KB URL across one
        const pieces: Array<string> = []
        for (let at = 0; at < 4_000_000; at += PiiStream.SLICE) {
          pieces.push(bigDigits.slice(at, at + PiiStream.SLICE - 40), values)
        }
        pieces.splice(3, 0, `https://example.com/${"q".repeat(3_000)} `)
        const input = pieces.join("")
        const agent = yield* Agent.make({ middleware: [Pii.middleware({ types: every })] })
        const { longest, total } = yield* longestBlock(agent.run(input, { threadId: "t" }))
        assertSliced(longest, total)
        const stored = textOf(Option.getOrThrow(yield* agent.thread("t")).state.messages[0])
        const expected = Either.getOrThrow(Pii.redactor({ types: every })).redact(input).text
        assert.isTrue(stored === expected, "the stored input is the whole-text redaction")
        assert.notInclude(stored, "ada@example.com")
      }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")]))),
    120_000
  )

  const Big = Tool.make("big", { parameters: {}, success: Schema.String })
  const Many = Tool.make("many", { parameters: {}, success: Schema.Array(Schema.String) })
  const BigTools = Toolkit.make(Big, Many)
  const BigToolsLive = BigTools.toLayer({
    big: () => Effect.succeed(`${bigDigits} ada@example.com`),
    // 8 MB in 2,000 strings, each short enough to be redacted at once
    many: () => Effect.succeed([...Array.from({ length: 2_000 }, () => bigDigits.slice(0, 4_096)), "ada@example.com"])
  })
  const withBigTool = (name: "big" | "many") =>
    Effect.provide(Layer.merge(
      ScriptedModel.layer([ScriptedModel.toolCalls([{ name, params: {}, id: "b1" }]), ScriptedModel.text("ok")]),
      BigToolsLive
    ))

  for (const [name, what] of [["big", "a 4 MB string"], ["many", "8 MB in 2,000 strings"]] as const) {
    it.effect(`a tool result of ${what} is redacted without keeping the event loop`, () =>
      Effect.gen(function*() {
        const pii = Pii.middleware({ types: every, applyToInput: false, applyToToolResults: true })
        const agent = yield* Agent.make({ toolkit: BigTools, middleware: [pii] })
        const { longest, total, value: result } = yield* longestBlock(agent.run("go", { threadId: "t" }))
        assertSliced(longest, total)
        assert.strictEqual(result._tag, "Completed")
        assert.notInclude(JSON.stringify(Option.getOrThrow(yield* agent.thread("t")).state.messages), "ada@")
      }).pipe(withBigTool(name)), 120_000)
  }

  it.live(
    "a run whose tool result takes seconds to redact ends at its timeout, between two slices",
    () =>
      Effect.gen(function*() {
        const pii = Pii.middleware({ types: every, applyToInput: false, applyToToolResults: true })
        const agent = yield* Agent.make({ toolkit: BigTools, middleware: [pii] })
        const started = performance.now()
        const result = yield* agent.run("go", { threadId: "t" }).pipe(Effect.timeout("300 millis"), Effect.either)
        const took = performance.now() - started
        assert.isTrue(Either.isLeft(result) && result.left._tag === "TimeoutException")
        // (before, the timeout fired only when the whole 4 MB had been redacted, seconds later)
        assert.isBelow(took, 300 + MAX_BLOCK_MS * 2, `the run ended after ${Math.round(took)} ms`)
      }).pipe(withBigTool("big")),
    120_000
  )

  for (const size of [4 * 1024 * 1024, 60_000]) {
    it.effect(
      `a streamed reply of 4 MB in chunks of ${size} characters is redacted without keeping the event loop`,
      () => {
        const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
        const reply = `${bigDigits}mail ada@example.com`
        const model = Layer.effect(
          LanguageModel.LanguageModel,
          LanguageModel.make({
            generateText: () => Effect.die("not used"),
            streamText: () => {
              const parts: Array<Response.StreamPartEncoded> = [{ type: "text-start", id: "t0" }]
              for (let at = 0; at < reply.length; at += size) {
                parts.push({ type: "text-delta", id: "t0", delta: reply.slice(at, at + size) })
              }
              parts.push({ type: "text-end", id: "t0" }, { type: "finish", reason: "stop", usage })
              return Stream.fromIterable(parts) as Stream.Stream<Response.StreamPartEncoded, AiError.AiError>
            }
          })
        )
        return Effect.gen(function*() {
          const pii = Pii.middleware({ types: every, applyToInput: false, applyToOutput: true })
          const agent = yield* Agent.make({ middleware: [pii] })
          const { longest, total, value: events } = yield* longestBlock(
            Effect.map(Stream.runCollect(agent.stream("hi", { threadId: "t" })), Chunk.toArray)
          )
          assertSliced(longest, total)
          const shown = events.filter(AgentEvent.$is("TextDelta")).map((event) => event.delta).join("")
          assert.isTrue(shown === `${bigDigits}mail [REDACTED_EMAIL]`, "the whole reply is shown, redacted")
        }).pipe(Effect.provide(model))
      },
      120_000
    )
  }
})

describe("the work of a custom pattern is bounded before it runs", () => {
  const refused: ReadonlyArray<readonly [string, string, RegExp]> = [
    [
      "a?".repeat(16_000) + "a".repeat(16_000),
      "48,000 characters (46 s on 16 KB before)",
      /a pattern of 48000 characters \(at most 20,000\)/
    ],
    ["a?".repeat(4_000) + "a".repeat(4_000), "12,000 instructions", /compiles to 12002 instructions \(at most 10,000/],
    ["(?:x|y)".repeat(20_000), "a 140 KB source", /a pattern of 140000 characters \(at most 20,000\)/],
    ["[a-z]{1000}".repeat(20), "repeats that multiply", /compiles to \d+ instructions/]
  ]
  for (const [pattern, what, reason] of refused) {
    it(`a pattern of ${what} is refused at construction with InvalidOptions naming the limit`, () => {
      const started = performance.now()
      const result = Pii.redactor({ types: [{ name: "x", pattern }] })
      // tens of milliseconds alone, 0.9 s seen at load 18 on 2 cores: room for a loaded machine
      assert.isBelow(performance.now() - started, 5_000)
      assert.isTrue(Either.isLeft(result))
      const error = Either.getLeft(result).pipe(Option.getOrThrow)
      assert.strictEqual(error._tag, "InvalidOptions")
      assert.strictEqual(error.option, "types[0].pattern")
      assert.match(error.reason, reason)
    }, 30_000)
  }

  it("a scan whose worst case overruns its budget fails at once with PiiDetectorFailed, without running", () => {
    // 1,502 instructions: each character of a 64 KB text may cost all of them (seconds before); few enough that the
    // short text's scan below (~0.8 M steps) stays far within its budget on a loaded machine (with 4,502, its
    // ~7 M steps overran the budget's second under load: 'took more than 1030 ms')
    const compiled = Either.getOrThrow(
      Pii.redactor({ types: [{ name: "x", pattern: "a?".repeat(500) + "a".repeat(500) }] })
    )
    const started = performance.now()
    assert.throws(
      () => compiled.redact("a".repeat(64_000)),
      /"x" failed: its pattern could take \d+ ms .* it was not run/
    )
    assert.isBelow(performance.now() - started, 2_000)
    // a short text is still read
    assert.strictEqual(compiled.redact(`b ${"a".repeat(500)} b`).matches.length, 1)
  }, 30_000)

  it.effect("the middleware fails such a scan as PiiDetectorFailed", () =>
    Effect.gen(function*() {
      const pattern = "a?".repeat(1_500) + "a".repeat(1_500)
      const agent = yield* Agent.make({ middleware: [Pii.middleware({ types: [{ name: "x", pattern }] })] })
      const started = performance.now()
      const error = yield* Effect.flip(agent.run("a".repeat(60_000), { threadId: "t" }))
      // 0.7 s seen at load 14 on 2 cores; the scan it stops would take over 6 s on a quiet one
      assert.isBelow(performance.now() - started, 4_000)
      assert.strictEqual(error._tag, "PiiDetectorFailed")
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")]))), 30_000)

  it.effect(
    "realistic patterns (a phone number, an IBAN, an ID, a dictionary of 200 words) run on a 1 MB input",
    () =>
      Effect.gen(function*() {
        const words = Array.from({ length: 200 }, (_, i) => `secret${i.toString(36)}${"xyzabc".slice(0, i % 6)}`)
        const types: ReadonlyArray<Pii.PiiType> = [
          { name: "phone", pattern: /\+?\d{1,3}[ -]?\(?\d{3}\)?[ -]?\d{3}[ -]?\d{4}\b/ },
          { name: "iban", pattern: /\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b/ },
          { name: "ticket", pattern: /\bTCK-[A-Z]{3}-\d{5}\b/ },
          { name: "word", pattern: new RegExp(`\\b(?:${words.join("|")})\\b`, "i") }
        ]
        const line = `call +1 415-555-0100, pay DE89 3704 0044 0532 0130 00, ticket TCK-ABC-12345, ${words[137]} ok\n`
        const input = line.repeat(Math.ceil(1024 * 1024 / line.length))
        const agent = yield* Agent.make({ middleware: [Pii.middleware({ types })] })
        const { longest, total } = yield* longestBlock(agent.run(input, { threadId: "t" }))
        assertSliced(longest, total)
        const stored = textOf(Option.getOrThrow(yield* agent.thread("t")).state.messages[0])
        assert.isTrue(
          stored === `call [REDACTED_PHONE], pay [REDACTED_IBAN], ticket [REDACTED_TICKET], [REDACTED_WORD] ok\n`
            .repeat(Math.ceil(1024 * 1024 / line.length)),
          stored.slice(0, 200)
        )
      }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")]))),
    120_000
  )
})
