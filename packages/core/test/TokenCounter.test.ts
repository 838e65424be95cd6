import { AiError, Prompt, Tokenizer } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import * as Arbitraries from "@stepwise-agent/testing/Arbitraries"
import { Effect, FastCheck, Layer, Logger } from "effect"
import { getEncoding } from "js-tiktoken"
import * as Encodings from "../src/internal/encodings.js"
import { jsonLength } from "../src/internal/jsonLength.js"
import { Lru } from "../src/internal/lru.js"
import * as TokenCounter from "../src/TokenCounter.js"

const text = (value: string) => Prompt.makePart("text", { text: value })
const user = (value: string) => Prompt.makeMessage("user", { content: [text(value)] })
const system = (value: string) => Prompt.makeMessage("system", { content: value })
const call = (id: string, name: string, params: unknown) =>
  Prompt.makePart("tool-call", { id, name, params, providerExecuted: false })
const result = (id: string, name: string, value: unknown) =>
  Prompt.makePart("tool-result", { id, name, result: value, isFailure: false, providerExecuted: false })

const Approximate = TokenCounter.layerApproximate()

describe("TokenCounter.approximate", () => {
  it.effect("counts text, reasoning, tool calls, tool results and the system message", () =>
    Effect.gen(function*() {
      const counter = yield* TokenCounter.TokenCounter
      // 3 per message + ceil(characters / 4)
      assert.strictEqual(yield* counter.countMessage(system("Be concise.")), 3 + 3)
      assert.strictEqual(yield* counter.countMessage(user("abcdefgh")), 3 + 2)
      const reasoning = Prompt.makePart("reasoning", { text: "abcdefghijkl" })
      assert.strictEqual(yield* counter.countMessage(Prompt.makeMessage("assistant", { content: [reasoning] })), 3 + 3)
      // "search" + {"q":"x"}: 6 + 9 characters
      const calling = Prompt.makeMessage("assistant", { content: [call("c1", "search", { q: "x" })] })
      assert.strictEqual(yield* counter.countMessage(calling), 3 + 4)
      // "search" + "abcd" as JSON ("\"abcd\""): 6 + 6 characters
      const answering = Prompt.makeMessage("tool", { content: [result("c1", "search", "abcd")] })
      assert.strictEqual(yield* counter.countMessage(answering), 3 + 3)
      const big = Prompt.makeMessage("tool", { content: [result("c1", "search", { rows: "x".repeat(4000) })] })
      assert.isAbove(yield* counter.countMessage(big), 1000)
      assert.strictEqual(
        yield* counter.count([system("Be concise."), user("abcdefgh"), calling, answering]),
        6 + 5 + 7 + 6
      )
      assert.strictEqual(counter.method, "approximate")
    }).pipe(Effect.provide(Approximate)))

  it.effect("counts a long JSON payload the same again, whichever part holds it", () =>
    Effect.gen(function*() {
      const counter = yield* TokenCounter.TokenCounter
      const payload = { rows: Array.from({ length: 200 }, (_, i) => ({ id: i, name: `row ${i}` })) }
      const chars = JSON.stringify(payload).length
      assert.isAbove(chars, 1024)
      // "search" + the payload's JSON
      const expected = Math.ceil((6 + chars) / 4)
      const first = result("c1", "search", payload)
      const again = result("c2", "search", payload)
      assert.deepStrictEqual(yield* counter.measure([first, first, again]), [expected, expected, expected])
      const withArgs = call("c3", "search", payload)
      assert.deepStrictEqual(yield* counter.measure([withArgs]), [expected])
    }).pipe(Effect.provide(Approximate)))

  it.effect("takes charsPerToken and tokensPerMessage", () =>
    Effect.gen(function*() {
      const counter = yield* TokenCounter.makeApproximate({ charsPerToken: 2, tokensPerMessage: 0 })
      assert.strictEqual(yield* counter.countMessage(user("abcdefgh")), 4)
      assert.strictEqual(yield* counter.countText("abcde"), 3)
    }))

  it.effect("rejects invalid options", () =>
    Effect.gen(function*() {
      const zero = yield* Effect.flip(TokenCounter.makeApproximate({ charsPerToken: 0 }))
      assert.deepStrictEqual([zero._tag, zero.module, zero.option], ["InvalidOptions", "TokenCounter", "charsPerToken"])
      const fraction = yield* Effect.flip(TokenCounter.makeApproximate({ tokensPerMessage: 1.5 }))
      assert.strictEqual(fraction.option, "tokensPerMessage")
      assert.include(fraction.message, "whole number")
      const encoding = yield* Effect.flip(TokenCounter.makeTiktoken({ encoding: "p50k_base" as any }))
      assert.deepStrictEqual([encoding._tag, encoding.option], ["InvalidOptions", "encoding"])
    }))

  it.effect("rejects an unknown option (a typo) with InvalidOptions naming it", () =>
    Effect.gen(function*() {
      const approximate = { charsPerToken: 3, tokenPerMessage: 0 }
      const typo = yield* Effect.flip(TokenCounter.makeApproximate(approximate))
      assert.deepStrictEqual([typo._tag, typo.module, typo.option], [
        "InvalidOptions",
        "TokenCounter",
        "tokenPerMessage"
      ])
      assert.include(typo.reason, `"tokensPerMessage"`)
      const tiktoken = { encoding: "o200k_base", model: "gpt-4o" } as const
      const extra = yield* Effect.flip(Layer.build(TokenCounter.layerTiktoken(tiktoken)).pipe(Effect.scoped))
      assert.deepStrictEqual([extra._tag, extra.option], ["InvalidOptions", "model"])
    }))

  it.effect.prop(
    "is additive: a list counts as the sum of its messages",
    { messages: Arbitraries.conversation(), split: FastCheck.nat() },
    ({ messages, split }) =>
      Effect.gen(function*() {
        const counter = yield* TokenCounter.TokenCounter
        const at = messages.length === 0 ? 0 : split % messages.length
        const total = yield* counter.count(messages)
        assert.strictEqual(
          total,
          (yield* counter.count(messages.slice(0, at))) + (yield* counter.count(messages.slice(at)))
        )
        let each = 0
        for (const message of messages) each += yield* counter.countMessage(message)
        assert.strictEqual(total, each)
        assert.deepStrictEqual(yield* counter.measure(messages), yield* Effect.forEach(messages, counter.countMessage))
      }).pipe(Effect.provide(Approximate))
  )
})

describe("TokenCounter caching", () => {
  const countingTokenizer = (calls: { value: number }) =>
    Layer.succeed(
      Tokenizer.Tokenizer,
      Tokenizer.make({
        tokenize: (prompt) =>
          Effect.sync(() => {
            calls.value++
            // one token per message, plus one per whitespace-separated word of the JSON
            const words = prompt.content.map((message) => JSON.stringify(message.content).split(/\s+|,/).length)
            return Array.from({ length: prompt.content.length + words.reduce((a, b) => a + b, 0) }, (_, i) => i)
          })
      })
    )

  it.effect("counts a growing history in proportion to the new messages", () =>
    Effect.gen(function*() {
      const calls = { value: 0 }
      const counter = yield* TokenCounter.makeTokenizer.pipe(Effect.provide(countingTokenizer(calls)))
      const history = [system("You are helpful."), user("one two three"), user("four five")]
      const first = yield* counter.count(history)
      // 4 empty messages (one per role) for the overheads, then the system text and one part per user message
      assert.strictEqual(calls.value, 4 + 3)
      assert.strictEqual(yield* counter.count(history), first)
      assert.strictEqual(calls.value, 7)
      const grown = [...history, user("six")]
      const second = yield* counter.count(grown)
      assert.strictEqual(calls.value, 8)
      assert.strictEqual(second, first + (yield* counter.countMessage(grown[3]!)))
      // identity, not content: an equal but new message is counted again
      yield* counter.count([user("six")])
      assert.strictEqual(calls.value, 9)
      // a new message made of counted parts costs no tokenizer call
      const part = text("seven eight")
      yield* counter.measure([part])
      assert.strictEqual(calls.value, 10)
      yield* counter.count([Prompt.makeMessage("user", { content: [part] })])
      assert.strictEqual(calls.value, 10)
      assert.strictEqual(counter.method, "tokenizer")
    }))

  it.effect("falls back to approximate counts when the tokenizer fails", () =>
    Effect.gen(function*() {
      const failing = Tokenizer.make({
        tokenize: () => Effect.fail(new AiError.UnknownError({ module: "Test", method: "tokenize" }))
      })
      const counter = yield* TokenCounter.makeTokenizer.pipe(Effect.provideService(Tokenizer.Tokenizer, failing))
      // 3 per message (fallback overhead) + ceil(8 / 4)
      assert.strictEqual(yield* counter.count([user("abcdefgh")]), 5)
    }))

  it.effect("measures parts and messages, caching both", () =>
    Effect.gen(function*() {
      const counter = yield* TokenCounter.TokenCounter
      const part = text("abcdefgh")
      const message = Prompt.makeMessage("user", { content: [part, part] })
      assert.deepStrictEqual(yield* counter.measure([part, message, part]), [2, 3 + 2 + 2, 2])
    }).pipe(Effect.provide(Approximate)))
})

describe("TokenCounter.calibrate", () => {
  it.effect("scales counts by the cumulative ratio of reported to counted tokens", () =>
    Effect.gen(function*() {
      const messages = [user("abcdefgh"), user("abcdefgh")] // 5 + 5 raw
      assert.strictEqual(yield* TokenCounter.count(messages), 10)
      assert.strictEqual(yield* TokenCounter.calibrate(20, messages), 2)
      assert.strictEqual(yield* TokenCounter.count(messages), 20)
      const counter = yield* TokenCounter.TokenCounter
      assert.strictEqual(yield* counter.countMessage(messages[0]!), 10)
      // (20 + 40) / (10 + 10)
      assert.strictEqual(yield* TokenCounter.calibrate(40, messages), 3)
      assert.strictEqual(yield* TokenCounter.count(messages), 30)
      // reports that are not positive, or empty requests, change nothing
      assert.strictEqual(yield* TokenCounter.calibrate(0, messages), 3)
      assert.strictEqual(yield* TokenCounter.calibrate(Number.NaN, messages), 3)
      assert.strictEqual(yield* TokenCounter.calibrate(100, []), 3)
      assert.strictEqual(yield* counter.scale, 3)
      // raw measures are not scaled
      assert.deepStrictEqual(yield* counter.measure(messages), [5, 5])
    }).pipe(Effect.provide(Approximate)))
})

describe("TokenCounter.tiktoken", () => {
  const encoders = {
    cl100k_base: getEncoding("cl100k_base"),
    o200k_base: getEncoding("o200k_base")
  }
  const expected = (encoding: TokenCounter.Encoding, value: string) => encoders[encoding].encode(value, [], []).length
  const words = [
    "hello",
    " world",
    "  ",
    "\n",
    "don't",
    "I'm",
    "123456",
    "3.14",
    "naïve",
    "日本語",
    "🚀",
    "<|endoftext|>"
  ]
  const joined = (parts: FastCheck.Arbitrary<string>, maxLength: number) =>
    FastCheck.array(parts, { maxLength }).map((chosen) => chosen.join(""))
  const code = joined(
    FastCheck.constantFrom(
      "const ",
      "x",
      " = ",
      "(a, b) => ",
      "{ ",
      " }",
      "\n  ",
      "return ",
      "yield* ",
      "Effect.gen(function*() {",
      "\"str\"",
      "// comment",
      "\t",
      "0x1F",
      ";"
    ),
    40
  )
  const cjk = FastCheck.string({
    unit: FastCheck.oneof(
      FastCheck.integer({ min: 0x4e00, max: 0x9fff }).map((c) => String.fromCodePoint(c)),
      FastCheck.integer({ min: 0x3040, max: 0x30ff }).map((c) => String.fromCodePoint(c)),
      FastCheck.integer({ min: 0xac00, max: 0xd7a3 }).map((c) => String.fromCodePoint(c)),
      FastCheck.constantFrom("。", "、", " ", "\n")
    ),
    maxLength: 80
  })
  const emoji = joined(FastCheck.constantFrom("🚀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "❤️", " ", "a", "\u200d"), 30)
  const runs = joined(
    FastCheck.tuple(FastCheck.constantFrom(" ", "\n", "\t", "0", "7", "\r\n", "a"), FastCheck.nat({ max: 300 }))
      .map(([unit, times]) => unit.repeat(times)),
    6
  )
  const texts = FastCheck.oneof(
    FastCheck.string({ maxLength: 60 }),
    FastCheck.string({ unit: "grapheme", maxLength: 40 }),
    FastCheck.fullUnicodeString({ maxLength: 40 }),
    FastCheck.string({ unit: "binary", maxLength: 40 }),
    joined(FastCheck.constantFrom(...words), 30),
    FastCheck.json().map((json) => json.repeat(2)),
    code,
    cjk,
    emoji,
    runs,
    FastCheck.stringOf(FastCheck.constantFrom("a", "b", "ab", " ", "1", "\n"), { maxLength: 300 })
  )

  for (const encoding of ["cl100k_base", "o200k_base"] as const) {
    for (const engine of ["gpt-tokenizer", "js-tiktoken"] as const) {
      it.effect.prop(
        `${encoding}, ${engine}: the count equals js-tiktoken's encode(text).length`,
        { texts: FastCheck.array(texts, { minLength: 1, maxLength: 5 }) },
        ({ texts }) =>
          Effect.gen(function*() {
            const counter = yield* TokenCounter.makeTiktoken({ encoding, engine })
            for (const value of texts) {
              const tokens = expected(encoding, value)
              assert.strictEqual(yield* counter.countText(value), tokens, JSON.stringify(value))
              // again (the js-tiktoken engine: now from the memo of pieces)
              assert.strictEqual(yield* counter.countText(value), tokens)
              assert.strictEqual(yield* counter.countMessage(user(value)), 3 + tokens)
            }
          }),
        { fastCheck: { numRuns: 200 } }
      )
    }
  }

  it.effect("counts tool calls and results exactly and shares the encoding between counters", () =>
    Effect.gen(function*() {
      const counter = yield* TokenCounter.TokenCounter
      const encode = (value: string) => expected("cl100k_base", value)
      const params = { query: "weather in Paris", days: 3 }
      const payload = { forecast: ["sunny", "rain"], note: "<|endoftext|> is text here" }
      const message = Prompt.makeMessage("assistant", {
        content: [call("c1", "forecast", params), result("c1", "forecast", payload)]
      })
      assert.strictEqual(
        yield* counter.countMessage(message),
        3 + encode("forecast") + encode(JSON.stringify(params)) + encode("forecast") + encode(JSON.stringify(payload))
      )
      assert.strictEqual(yield* counter.countMessage(system("Be concise.")), 3 + encode("Be concise."))
      assert.strictEqual(counter.method, "tiktoken")
      const other = yield* TokenCounter.makeTiktoken({ encoding: "cl100k_base" })
      assert.strictEqual(yield* other.countText("Be concise."), encode("Be concise."))
    }).pipe(Effect.provide(TokenCounter.layerTiktoken({ encoding: "cl100k_base" }))))

  it.effect("rejects an unknown engine", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(TokenCounter.makeTiktoken({ encoding: "cl100k_base", engine: "wasm" as any }))
      assert.deepStrictEqual([error._tag, error.option], ["InvalidOptions", "engine"])
    }))

  it.effect("falls back to js-tiktoken, with a warning, when gpt-tokenizer can't be loaded", () =>
    Effect.gen(function*() {
      const logs: Array<string> = []
      const logger = Logger.make(({ message }) => logs.push(String(message)))
      const missing: Encodings.Sources = {
        ...Encodings.sources,
        gptTokenizer: () => Promise.reject(new Error("Cannot find package 'gpt-tokenizer'"))
      }
      const encoding = yield* Encodings.load("o200k_base", "gpt-tokenizer", missing).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
      assert.strictEqual(encoding.engine, "js-tiktoken")
      assert.strictEqual(encoding.count("naïve 日本語 🚀"), expected("o200k_base", "naïve 日本語 🚀"))
      assert.strictEqual(logs.length, 1)
      assert.include(logs[0]!, "gpt-tokenizer could not be loaded")
      const loaded = yield* Encodings.load("o200k_base", "gpt-tokenizer", Encodings.sources)
      assert.strictEqual(loaded.engine, "gpt-tokenizer")
    }))

  it("the js-tiktoken memo counts exactly with a memo smaller than the text's pieces", () => {
    const small = Encodings.fromJsTiktoken(encoders.cl100k_base, 4)
    const value = "one two three four five six seven one two three 日本語 🚀 one"
    for (let i = 0; i < 3; i++) assert.strictEqual(small.count(value), expected("cl100k_base", value))
  })
})

describe("Lru", () => {
  it("stays bounded and evicts the least recently used entry", () => {
    const lru = new Lru<string, number>(3)
    lru.set("a", 1)
    lru.set("b", 2)
    lru.set("c", 3)
    assert.strictEqual(lru.get("a"), 1) // a is now the most recently used
    lru.set("d", 4) // evicts b, the least recently used
    assert.strictEqual(lru.size, 3)
    assert.strictEqual(lru.get("b"), undefined)
    assert.deepStrictEqual([lru.get("a"), lru.get("c"), lru.get("d")], [1, 3, 4])
    lru.set("c", 30) // overwriting does not grow it
    assert.strictEqual(lru.size, 3)
    assert.strictEqual(lru.get("c"), 30)
  })

  it.prop(
    "never holds more than its capacity and keeps the entries used last",
    { capacity: FastCheck.integer({ min: 1, max: 20 }), keys: FastCheck.array(FastCheck.nat({ max: 40 })) },
    ({ capacity, keys }) => {
      const lru = new Lru<number, number>(capacity)
      for (const key of keys) {
        if (lru.get(key) === undefined) lru.set(key, key)
        assert.isAtMost(lru.size, capacity)
      }
      // the last `capacity` distinct keys used are all still there
      const recent = [...new Set([...keys].reverse())].slice(0, capacity)
      for (const key of recent) assert.strictEqual(lru.get(key), key)
    }
  )
})

describe("jsonLength", () => {
  const plain = FastCheck.letrec((tie) => ({
    value: FastCheck.oneof(
      { depthSize: "small" },
      FastCheck.string({ unit: FastCheck.constantFrom("a", "b", " ", "é", "日") }),
      FastCheck.double(),
      FastCheck.integer(),
      FastCheck.boolean(),
      FastCheck.constant(null),
      FastCheck.array(tie("value")),
      FastCheck.dictionary(FastCheck.string({ unit: FastCheck.constantFrom("k", "e", "y") }), tie("value"))
    )
  })).value

  it.prop("is the length of JSON.stringify when nothing needs escaping", { value: plain }, ({ value }) => {
    assert.strictEqual(jsonLength(value), JSON.stringify(value).length)
  })

  it.prop("is at most the length of JSON.stringify", { value: FastCheck.jsonValue() }, ({ value }) => {
    assert.isAtMost(jsonLength(value), JSON.stringify(value).length)
  })

  it("leaves out what JSON leaves out, follows toJSON, and counts a cycle as null", () => {
    assert.strictEqual(jsonLength({ a: undefined, b: () => 1, c: 1 }), `{"c":1}`.length)
    assert.strictEqual(jsonLength([undefined, 1]), `[null,1]`.length)
    assert.strictEqual(jsonLength(new Date(0)), JSON.stringify(new Date(0)).length)
    const cyclic: Record<string, unknown> = { name: "x" }
    cyclic.self = cyclic
    assert.strictEqual(jsonLength(cyclic), `{"name":"x","self":null}`.length)
  })
})
