import type { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Either, FastCheck, Option, Stream } from "effect"
import * as PiiStream from "../src/internal/piiStream.js"
import * as Pii from "../src/Pii.js"

// A custom pattern may match across whitespace (a name, a phone number with
// spaces): a long text is redacted in slices and a stream as it comes, and
// no value such a pattern matches may be missed on a border. A pattern whose
// matches can hold whitespace and be unbounded is refused when it is built.

const textOf = (message: Prompt.Message | undefined): string =>
  message === undefined || message.role === "system" || message.role === "tool"
    ? ""
    : message.content.map((part) => part.type === "text" ? part.text : "").join("")

const crossing: ReadonlyArray<Pii.PiiType> = [
  { name: "person", pattern: /\bAda\s{1,3}Lovelace\b/ },
  { name: "iban", pattern: /\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}\b/ },
  { name: "phrase", pattern: "secret(?: [a-z]{1,8}){1,4} code" },
  { name: "address", pattern: /\d{1,5} [A-Z][a-z]{1,20} (?:Street|Road)/ }
]
const types: ReadonlyArray<Pii.PiiType> = [...crossing, "email", "credit_card", "url"]

const values = FastCheck.constantFrom(
  "Ada Lovelace",
  "Ada \n\tLovelace",
  "GB82 WEST 1234 5698 7654 32",
  "secret the big one code",
  "12 Baker Street",
  "ada@example.com",
  "4111 1111 1111 1111"
)
const fillers = FastCheck.constantFrom(
  " ",
  "  ",
  "\n",
  "word",
  "Ada",
  "secret",
  "1",
  "12 34",
  "WEST",
  ",",
  "联系",
  "🙂"
)

/** The stream redactor's push or flush, as a step of `PiiStream`. */
const stepOf = (redactor: Pii.Redactor): PiiStream.Step<never> => (state, chunk) =>
  Effect.sync(() => chunk === undefined ? redactor.stream.flush(state) : redactor.stream.push(state, chunk))

/** A text over `PiiStream.AT_ONCE` of words and spaces with `value` starting `shift` before a slice border. */
const longText = (value: string, border: number, shift: number): string => {
  const at = border * PiiStream.SLICE - shift
  const filler = "lorem ipsum dolor sit amet ".repeat(Math.ceil((PiiStream.AT_ONCE + 40_000) / 27))
  return `${filler.slice(0, at - 1)} ${value} ${filler.slice(at + value.length + 1)}`
}

describe("a pattern that matches across whitespace", () => {
  it.effect(
    "a value across a slice border of a text over 64 KB is redacted (agent.run)",
    () =>
      Effect.gen(function*() {
        // the border falls after "Ada Lov": the slice ended with no break after the one inside the value
        const input = longText("Ada Lovelace", 2, 7)
        assert.isAbove(input.length, PiiStream.AT_ONCE)
        const agent = yield* Agent.make({ middleware: [Pii.middleware({ types })] })
        yield* agent.run(input, { threadId: "t" })
        const stored = textOf(Option.getOrThrow(yield* agent.thread("t")).state.messages[0])
        assert.notInclude(stored, "Lovelace")
        assert.isTrue(stored === Either.getOrThrow(Pii.redactor({ types })).redact(input).text)
      }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")]))),
    60_000
  )

  it.effect.prop(
    "redacting a long text in slices gives the whole-text redaction, wherever a value sits around a border",
    [
      values,
      FastCheck.integer({ min: 1, max: 4 }),
      FastCheck.integer({ min: -8, max: 40 }),
      FastCheck.constantFrom<Pii.Strategy>("redact", "mask", "hash")
    ],
    ([value, border, shift, strategy]) =>
      Effect.gen(function*() {
        const redactor = Either.getOrThrow(Pii.redactor({ types, strategy }))
        const text = longText(value, border, shift)
        const sliced = yield* PiiStream.redactSlices(stepOf(redactor), redactor.stream.initial, text, {
          size: PiiStream.SLICE,
          apply: () => assert.fail("no value here is too long to hold back")
        })
        const whole = redactor.redact(text)
        assert.isTrue(sliced.text === whole.text, `${JSON.stringify(value)} at ${shift} before border ${border}`)
        assert.deepStrictEqual(sliced.matches, whole.matches)
      }),
    { fastCheck: { numRuns: 40 }, timeout: 120_000 }
  )

  it.effect.prop(
    "a streamed text in chunks of any sizes gives the whole-text redaction",
    [
      FastCheck.array(FastCheck.oneof(values, fillers), { maxLength: 40 }).map((pieces) => pieces.join("")),
      FastCheck.array(FastCheck.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 20 }),
      FastCheck.constantFrom<Pii.Strategy>("redact", "mask", "hash")
    ],
    ([text, sizes, strategy]) =>
      Effect.gen(function*() {
        const redactor = Either.getOrThrow(Pii.redactor({ types, strategy }))
        const chunks: Array<string> = []
        for (let at = 0, k = 0; at < text.length; k++) {
          const size = sizes[k % sizes.length]!
          chunks.push(text.slice(at, at + size))
          at += size
        }
        const streamed = yield* Stream.fromIterable(chunks).pipe(Pii.redactStream(redactor), Stream.runCollect)
        assert.strictEqual(Chunk.join(streamed, ""), redactor.redact(text).text, JSON.stringify(chunks))
      }),
    { fastCheck: { numRuns: 300 }, timeout: 120_000 }
  )

  it.effect(
    "60 KB dense with values across whitespace, streamed 5 characters at a time, gives the whole-text redaction",
    () =>
      Effect.gen(function*() {
        const redactor = Either.getOrThrow(Pii.redactor({ types }))
        const text = "Ada Lovelace secret a b c code 12 Baker Street GB82 WEST 1234 5698 ".repeat(900)
        const chunks = Array.from({ length: Math.ceil(text.length / 5) }, (_, i) => text.slice(i * 5, i * 5 + 5))
        const started = performance.now()
        const streamed = yield* Stream.fromIterable(chunks).pipe(Pii.redactStream(redactor), Stream.runCollect)
        assert.isBelow(performance.now() - started, 20_000)
        assert.isTrue(Chunk.join(streamed, "") === redactor.redact(text).text)
      }),
    60_000
  )

  it.effect(
    "a value across the border of two chunks of a streamed reply over 64 KB is redacted (redactStream)",
    () =>
      Effect.gen(function*() {
        const redactor = Either.getOrThrow(Pii.redactor({ types }))
        const text = longText("secret the big one code", 3, 12)
        const streamed = yield* Stream.make(text.slice(0, 70_000), text.slice(70_000)).pipe(
          Pii.redactStream(redactor),
          Stream.runCollect
        )
        const shown = Chunk.join(streamed, "")
        assert.notInclude(shown, "big one")
        assert.isTrue(shown === redactor.redact(text).text)
      }),
    60_000
  )
})

describe("a pattern whose matches can hold whitespace and be unbounded", () => {
  const refused: ReadonlyArray<readonly [RegExp | string, string]> = [
    [/Ada\s+Lovelace/, "of any length"],
    [/password: .*/, "of any length"],
    ["key=[^,]+", "of any length"],
    [/x[\s\S]{0,600}y/, "602 characters long"],
    [/(?:\w+ ){1,300}end/, "of any length"]
  ]
  for (const [pattern, what] of refused) {
    it(`${String(pattern)} is refused at construction with InvalidOptions naming the pattern`, () => {
      const result = Pii.redactor({ types: ["email", { name: "custom", pattern }] })
      assert.isTrue(Either.isLeft(result))
      const error = (result as Either.Left<AgentError.InvalidOptions, Pii.Redactor>).left
      assert.strictEqual(error._tag, "InvalidOptions")
      assert.strictEqual(error.option, "types[1].pattern")
      assert.include(error.reason, `its matches can be ${what}`)
      assert.include(error.reason, "at most 512 characters")
    })
  }

  it.effect("Agent.make fails with InvalidOptions for such a pattern", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Agent.make({ middleware: [Pii.middleware({ types: [{ name: "name", pattern: /John\s+Smith/ }] })] })
      )
      assert.isTrue(error instanceof AgentError.InvalidOptions)
      assert.strictEqual((error as AgentError.InvalidOptions).option, "types[0].pattern")
    }).pipe(Effect.provide(ScriptedModel.layer([]))))

  it("bounded ones, and unbounded ones that never match whitespace, are accepted", () => {
    for (
      const pattern of [/Ada\s{1,5}Lovelace/, /x[\s\S]{0,500}y/, /tok_[A-Za-z0-9]{8,}/, /[^\s,]+@corp/, /\S+/]
    ) {
      assert.isTrue(Either.isRight(Pii.redactor({ types: [{ name: "custom", pattern }] })), String(pattern))
    }
  })
})
