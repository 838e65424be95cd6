import { AiError, Prompt, Tokenizer } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import * as Arbitraries from "@stepwise-agent/testing/Arbitraries"
import { Arbitrary, Effect, FastCheck, Layer, Logger } from "effect"
import { getEncoding } from "js-tiktoken"
import * as Encodings from "../src/internal/fast/encodings.js"
import { jsonLength } from "../src/internal/fast/jsonLength.js"
import { Lru } from "../src/internal/fast/lru.js"
import { reprLength, toolCallReprLength } from "../src/internal/fast/pythonRepr.js"
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
      // ceil((characters + role) / 4) + 3 per message
      assert.strictEqual(yield* counter.countMessage(system("Be concise.")), Math.ceil((11 + 6) / 4) + 3)
      assert.strictEqual(yield* counter.countMessage(user("abcdefgh")), Math.ceil((8 + 4) / 4) + 3)
      const reasoning = Prompt.makePart("reasoning", { text: "abcdefghijkl" })
      assert.strictEqual(
        yield* counter.countMessage(Prompt.makeMessage("assistant", { content: [reasoning] })),
        Math.ceil((12 + 9) / 4) + 3
      )
      // [{'name': 'search', 'args': {'q': 'x'}, 'id': 'c1', 'type': 'tool_call'}]: 73 characters
      const calling = Prompt.makeMessage("assistant", { content: [call("c1", "search", { q: "x" })] })
      assert.strictEqual(yield* counter.countMessage(calling), Math.ceil((73 + 9) / 4) + 3)
      // "abcd" + "c1" + "tool" + "search"
      const answering = Prompt.makeMessage("tool", { content: [result("c1", "search", "abcd")] })
      assert.strictEqual(yield* counter.countMessage(answering), Math.ceil((4 + 2 + 4 + 6) / 4) + 3)
      const big = Prompt.makeMessage("tool", { content: [result("c1", "search", { rows: "x".repeat(4000) })] })
      assert.isAbove(yield* counter.countMessage(big), 1000)
      assert.strictEqual(
        yield* counter.count([system("Be concise."), user("abcdefgh"), calling, answering]),
        8 + 6 + 24 + 7
      )
      assert.strictEqual(counter.method, "approximate")
    }).pipe(Effect.provide(Approximate)))

  it.effect("counts a long payload the same again, whichever part holds it", () =>
    Effect.gen(function*() {
      const counter = yield* TokenCounter.TokenCounter
      const payload = { rows: Array.from({ length: 200 }, (_, i) => ({ id: i, name: `row ${i}` })) }
      const chars = JSON.stringify(payload).length
      assert.isAbove(chars, 1024)
      // a result's content is its JSON; + "c1" + "tool" + "search"
      const expected = Math.ceil((chars + 2 + 4 + 6) / 4) + 3
      const first = result("c1", "search", payload)
      const again = result("c2", "search", payload)
      assert.deepStrictEqual(yield* counter.measure([first, first, again]), [expected, expected, expected])
      // a call's arguments count as Python prints them: ", " and ": " where JSON has "," and ":"
      // (3 more per row, 199 between rows, 1 after "rows"), + 49 + 'search' + 'c3' + 2
      const withArgs = call("c3", "search", payload)
      const repr = chars + 3 * 200 + 199 + 1
      assert.deepStrictEqual(yield* counter.measure([withArgs, withArgs]), [
        Math.ceil((49 + 8 + repr + 4 + 2) / 4),
        Math.ceil((49 + 8 + repr + 4 + 2) / 4)
      ])
    }).pipe(Effect.provide(Approximate)))

  /**
   * Messages and what LangChain Python's `count_tokens_approximately`
   * (langchain-core, `chars_per_token=4.0`, `extra_tokens_per_message=3.0`,
   * `count_name=True`) gives for the same LangChain messages. Derived by hand
   * from its code: per message `ceil((len(content) + len(role) + len(name)
   * [+ len(repr(tool_calls)) for an AI message with string content]
   * [+ len(tool_call_id) for a tool message]) / 4) + 3`, then `ceil` of the
   * sum; the repr lengths were checked with Python's `repr`.
   */
  const parity: ReadonlyArray<readonly [string, ReadonlyArray<Prompt.Message>, number]> = [
    // SystemMessage("You are a helpful assistant."): ceil((28 + 6) / 4) + 3
    ["system", [system("You are a helpful assistant.")], 12],
    // HumanMessage("Hello, world!"): ceil((13 + 4) / 4) + 3
    ["human", [user("Hello, world!")], 8],
    // HumanMessage(""): ceil(4 / 4) + 3
    ["empty human", [user("")], 4],
    // AIMessage("The answer is 42."): ceil((17 + 9) / 4) + 3
    ["ai text", [Prompt.makeMessage("assistant", { content: [text("The answer is 42.")] })], 10],
    // AIMessage("", tool_calls=[get_weather(city="Paris", units="metric")]): repr of the list 113, ceil((113 + 9) / 4) + 3
    [
      "ai tool call",
      [Prompt.makeMessage("assistant", {
        content: [call("call_abc123", "get_weather", { city: "Paris", units: "metric" })]
      })],
      34
    ],
    // AIMessage("Let me check.", two calls): repr 175 ("it's" in double quotes, 1.5, True, None), ceil((13 + 175 + 9) / 4) + 3
    [
      "ai text and two calls",
      [Prompt.makeMessage("assistant", {
        content: [
          text("Let me check."),
          call("c1", "search", { q: "it's" }),
          call("c2", "search", { n: 1.5, ok: true, none: null })
        ]
      })],
      53
    ],
    // repr escapes: {'path': 'C:\\dir\n'}: list 82, ceil((82 + 9) / 4) + 3
    [
      "ai call with escapes",
      [Prompt.makeMessage("assistant", { content: [call("c3", "read", { path: "C:\\dir\n" })] })],
      26
    ],
    // floats and unicode: {'x': 1e-05, 'y': 1.5e-07, 'z': [1, 2, 3], 'w': 'naïve\u200b'}: list 120, ceil((120 + 9) / 4) + 3
    [
      "ai call with floats and unicode",
      [Prompt.makeMessage("assistant", {
        content: [call("c4", "f", { x: 0.00001, y: 1.5e-7, z: [1, 2, 3], w: "naïve\u200b" })]
      })],
      36
    ],
    // ToolMessage("Sunny, 22°C", tool_call_id="call_abc123", name="get_weather"): ceil((11 + 11 + 4 + 11) / 4) + 3
    [
      "tool",
      [Prompt.makeMessage("tool", { content: [result("call_abc123", "get_weather", "Sunny, 22°C")] })],
      13
    ],
    // ToolMessage('{"temp":22,"sky":"clear"}', tool_call_id="c2", name="weather"): ceil((25 + 2 + 4 + 7) / 4) + 3
    ["tool with a JSON result", [
      Prompt.makeMessage("tool", { content: [result("c2", "weather", { temp: 22, sky: "clear" })] })
    ], 13],
    // two ToolMessages
    [
      "two results",
      [Prompt.makeMessage("tool", {
        content: [
          result("call_abc123", "get_weather", "Sunny, 22°C"),
          result("c2", "weather", { temp: 22, sky: "clear" })
        ]
      })],
      26
    ],
    [
      "a conversation",
      [
        system("You are a helpful assistant."),
        user("Hello, world!"),
        Prompt.makeMessage("assistant", {
          content: [call("call_abc123", "get_weather", { city: "Paris", units: "metric" })]
        }),
        Prompt.makeMessage("tool", { content: [result("call_abc123", "get_weather", "Sunny, 22°C")] }),
        Prompt.makeMessage("assistant", { content: [text("The answer is 42.")] })
      ],
      12 + 8 + 34 + 13 + 10
    ]
  ]

  it.effect("gives LangChain Python's count_tokens_approximately counts for the same messages", () =>
    Effect.gen(function*() {
      const counter = yield* TokenCounter.TokenCounter
      for (const [name, messages, expected] of parity) {
        assert.strictEqual(yield* counter.count(messages), expected, name)
      }
    }).pipe(Effect.provide(Approximate)))

  it.effect("takes charsPerToken and tokensPerMessage", () =>
    Effect.gen(function*() {
      const counter = yield* TokenCounter.makeApproximate({ charsPerToken: 2, tokensPerMessage: 0 })
      // (8 + 4 for "user") / 2
      assert.strictEqual(yield* counter.countMessage(user("abcdefgh")), 6)
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

  /**
   * The approximate count as it was defined before the counter read each
   * field once (with a keyed read) and a tool message's parts without their
   * type: the oracle of the property below.
   */
  const approximateOracle = (charsPerToken: number, tokensPerMessage: number) => {
    const tokens = (chars: number) => Math.ceil(chars / charsPerToken)
    const roleChars = { system: 6, user: 4, assistant: 9, tool: 4 } as const
    const isTextFile = (part: Prompt.FilePart) =>
      typeof part.data === "string" && (part.mediaType.startsWith("text/") || part.mediaType === "application/json")
    const fixedTokensOf = (part: Prompt.Part) => part.type === "file" && !isTextFile(part) ? 85 : 0
    const countResult = (part: Prompt.ToolResultPart) =>
      tokens(
        (typeof part.result === "string" ? part.result.length : jsonLength(part.result)) + part.id.length + 4 +
          part.name.length
      ) + tokensPerMessage
    const charsOfPart = (part: Exclude<Prompt.Part, Prompt.ToolResultPart>): number => {
      switch (part.type) {
        case "text":
        case "reasoning":
          return part.text.length
        case "tool-call":
          return toolCallReprLength(part.name, reprLength(part.params), part.id) + 2
        case "file":
          return (part.fileName ?? "").length + part.mediaType.length +
            (isTextFile(part) ? (part.data as string).length : 0)
      }
    }
    const countPart = (part: Prompt.Part) =>
      part.type === "tool-result" ? countResult(part) : tokens(charsOfPart(part)) + fixedTokensOf(part)
    return (item: TokenCounter.Countable): number => {
      if (!Prompt.isMessage(item)) return countPart(item as Prompt.Part)
      if (item.role === "system") return tokens(item.content.length + roleChars.system) + tokensPerMessage
      if (item.role === "tool") {
        let raw = 0
        for (const part of item.content) raw += countPart(part)
        return raw
      }
      let chars: number = roleChars[item.role]
      let extra = tokensPerMessage
      for (const part of item.content) {
        if (part.type === "tool-result") extra += countResult(part)
        else {
          chars += charsOfPart(part)
          extra += fixedTokensOf(part)
        }
      }
      return tokens(chars) + extra
    }
  }

  /** The same message built again as `Prompt.makeMessage` and `Prompt.makePart` build one (an object spread each). */
  const rebuilt = (message: Prompt.Message): Prompt.Message =>
    message.role === "system"
      ? Prompt.makeMessage("system", { content: message.content })
      : Prompt.makeMessage(message.role as "assistant", {
        content: message.content.map((part) => Prompt.makePart(part.type, part as any) as Prompt.AssistantMessagePart)
      })

  it.effect.prop(
    "counts every message and part as the definition before the one-read pass did",
    {
      messages: FastCheck.array(Arbitrary.make(Prompt.Message), { maxLength: 6 }),
      charsPerToken: FastCheck.oneof(FastCheck.constant(4), FastCheck.double({ min: 0.5, max: 8, noNaN: true })),
      tokensPerMessage: FastCheck.nat({ max: 5 })
    },
    ({ charsPerToken, messages, tokensPerMessage }) =>
      Effect.gen(function*() {
        const counter = yield* TokenCounter.makeApproximate({ charsPerToken, tokensPerMessage })
        const oracle = approximateOracle(charsPerToken, tokensPerMessage)
        // decoded-like objects, the same built with spreads, and their parts on their own
        const items: ReadonlyArray<TokenCounter.Countable> = [
          ...messages,
          ...messages.map(rebuilt),
          ...messages.flatMap((message) => typeof message.content === "string" ? [] : message.content)
        ]
        assert.deepStrictEqual(yield* counter.measure(items), items.map(oracle))
      }),
    { timeout: 120_000 }
  )

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
      // a user message is rounded up as a whole: ceil((8 + 8 + 4) / 4) + 3
      assert.deepStrictEqual(yield* counter.measure([part, message, part]), [2, 5 + 3, 2])
    }).pipe(Effect.provide(Approximate)))
})

describe("TokenCounter.calibrate", () => {
  it.effect("scales counts by the cumulative ratio of reported to counted tokens", () =>
    Effect.gen(function*() {
      const messages = [user("abcd"), user("abcd")] // 5 + 5 raw: ceil((4 + 4) / 4) + 3
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
  // The exactness fuzz is sized for a busy CI machine (each case encodes with both engines and the oracle); run it
  // long with `STEPWISE_FUZZ_RUNS=100000 npx vitest run packages/core/test/TokenCounter.test.ts`
  const fuzz = (runs: number) => ({
    timeout: 120_000,
    fastCheck: { numRuns: Number(process.env["STEPWISE_FUZZ_RUNS"] ?? runs) }
  })
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
  const loneSurrogates = FastCheck.string({
    unit: FastCheck.oneof(
      FastCheck.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)),
      FastCheck.constantFrom("a", " ", "é", "日", "🚀", "1", "'s")
    ),
    maxLength: 20
  })
  // rare words: pieces that are not one token, merged byte by byte (inside multi-byte characters too)
  const rare = FastCheck.string({
    unit: FastCheck.constantFrom(..."qxzjkvwéüßøжщ日語한🚀\ufeff"),
    minLength: 2,
    maxLength: 60
  })
  const specials = joined(
    FastCheck.constantFrom("<|endoftext|>", "<|fim_prefix|>", "<|im_start|>", "<|", "|>", " x"),
    8
  )
  const mixed = joined(FastCheck.oneof(code, cjk, emoji, rare, FastCheck.fullUnicodeString({ maxLength: 8 })), 6)
  const texts = FastCheck.oneof(
    FastCheck.string({ maxLength: 60 }),
    loneSurrogates,
    rare,
    specials,
    mixed,
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
        fuzz(40)
      )
    }
    it.effect.prop(
      `${encoding}: the count over gpt-tokenizer's internals (not its countTokens) equals js-tiktoken's`,
      { texts: FastCheck.array(texts, { minLength: 1, maxLength: 5 }) },
      ({ texts }) =>
        Effect.gen(function*() {
          const fast = Encodings.fastGptTokenizer(yield* Effect.promise(() => Encodings.sources.gptTokenizer(encoding)))
          assert.isDefined(fast)
          const count = fast!(new Lru(Encodings.maxCachedPieces))
          for (const value of texts) {
            const tokens = expected(encoding, value)
            assert.strictEqual(count(value), tokens, JSON.stringify(value))
            assert.strictEqual(count(value), tokens) // from the memo of pieces
          }
        }),
      fuzz(60)
    )
  }

  // gpt-tokenizer 4.0.0 files the tokens that start with a byte-order mark (U+FEFF) among the ranks that are
  // not UTF-8 (its decoder drops the mark), so its countTokens counts 10 here where tiktoken counts 7
  it.effect("counts text with byte-order marks as tiktoken does (a C# file, a header comment)", () =>
    Effect.gen(function*() {
      const text = "\ufeffusing System;\n\ufeff// header\n\ufeff"
      for (const encoding of ["cl100k_base", "o200k_base"] as const) {
        for (const engine of ["gpt-tokenizer", "js-tiktoken"] as const) {
          const counter = yield* TokenCounter.makeTiktoken({ encoding, engine })
          assert.strictEqual(yield* counter.countText(text), expected(encoding, text), `${encoding}, ${engine}`)
        }
      }
    }))

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
      assert.strictEqual(encoding.counter()("naïve 日本語 🚀"), expected("o200k_base", "naïve 日本語 🚀"))
      assert.strictEqual(logs.length, 1)
      assert.include(logs[0]!, "gpt-tokenizer could not be loaded")
      const loaded = yield* Encodings.load("o200k_base", "gpt-tokenizer", Encodings.sources)
      assert.strictEqual(loaded.engine, "gpt-tokenizer")
    }))

  it.effect("counts over gpt-tokenizer's internals only when they count as its countTokens does", () =>
    Effect.gen(function*() {
      const api = yield* Effect.promise(() => Encodings.sources.gptTokenizer("cl100k_base"))
      assert.isDefined(Encodings.fastGptTokenizer(api))
      const value = "Hello, world! 日本語"
      // another version's shape: no internals, so the public countTokens counts
      const bare = { countTokens: api.countTokens }
      assert.isUndefined(Encodings.fastGptTokenizer(bare))
      assert.strictEqual(Encodings.fromGptTokenizer(bare).counter()(value), expected("cl100k_base", value))
      // internals of the expected shape that would miscount (a token missing): the probes catch it
      const core =
        (api.default as { bytePairEncodingCoreProcessor: { bytePairStringRankEncoder: Map<string, number> } })
          .bytePairEncodingCoreProcessor
      const ranks = new Map(core.bytePairStringRankEncoder)
      ranks.delete(" world")
      const tampered = {
        countTokens: api.countTokens,
        default: { bytePairEncodingCoreProcessor: { ...core, bytePairStringRankEncoder: ranks } }
      }
      assert.isUndefined(Encodings.fastGptTokenizer(tampered))
      assert.strictEqual(Encodings.fromGptTokenizer(tampered).counter()(value), expected("cl100k_base", value))
      // internals whose use throws (a split pattern that is not a pattern at all): countTokens counts
      const broken = {
        countTokens: api.countTokens,
        default: { bytePairEncodingCoreProcessor: { ...core, tokenSplitRegex: Object.create(RegExp.prototype) } }
      }
      assert.strictEqual(Encodings.fromGptTokenizer(broken).counter()(value), expected("cl100k_base", value))
    }))

  it("each counter has its own memo of pieces, bounded, and counts exactly past its capacity", async () => {
    const api = await Encodings.sources.gptTokenizer("o200k_base")
    const fast = Encodings.fastGptTokenizer(api)!
    const memo = new Lru<string, number>(3)
    const count = fast(memo)
    const value = "qxzj wvkq zzqx jjxq qxzj 日語한🚀 wvkq"
    for (let i = 0; i < 3; i++) assert.strictEqual(count(value), expected("o200k_base", value))
    assert.strictEqual(memo.size, 3)
    // another counter fills its own memo ("nothing" and " rare"), not the first one's
    const other = new Lru<string, number>(10)
    fast(other)("nothing rare")
    assert.deepStrictEqual([other.size, memo.size], [2, 3])
  })

  it("the js-tiktoken memo counts exactly with a memo smaller than the text's pieces", () => {
    const small = Encodings.fromJsTiktoken(encoders.cl100k_base, 4).counter()
    const value = "one two three four five six seven one two three 日本語 🚀 one"
    for (let i = 0; i < 3; i++) assert.strictEqual(small(value), expected("cl100k_base", value))
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

  it("keeps nothing with a capacity of 0", () => {
    const lru = new Lru<string, number>(0)
    lru.set("a", 1)
    lru.set("b", 2)
    assert.strictEqual(lru.size, 0)
    assert.strictEqual(lru.get("a"), undefined)
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

  it.prop(
    "answers every get, set and delete as a list ordered by use does",
    {
      capacity: FastCheck.integer({ min: 1, max: 8 }),
      operations: FastCheck.array(
        FastCheck.tuple(
          FastCheck.constantFrom("get", "set", "delete"),
          FastCheck.nat({ max: 12 }),
          FastCheck.nat({ max: 99 })
        ),
        { maxLength: 200 }
      )
    },
    ({ capacity, operations }) => {
      const lru = new Lru<number, number>(capacity)
      // the model: entries from the least to the most recently used
      let model: Array<readonly [number, number]> = []
      for (const [operation, key, value] of operations) {
        const at = model.findIndex(([k]) => k === key)
        const entry = at === -1 ? undefined : model[at]!
        if (at !== -1) model.splice(at, 1)
        if (operation === "delete") {
          lru.delete(key)
        } else if (operation === "set") {
          lru.set(key, value)
          model.push([key, value])
          if (model.length > capacity) model = model.slice(1)
        } else {
          assert.strictEqual(lru.get(key), entry?.[1])
          if (entry !== undefined) model.push(entry)
        }
        assert.strictEqual(lru.size, model.length)
      }
      for (const [key, value] of [...model].reverse()) assert.strictEqual(lru.get(key), value)
    },
    { fastCheck: { numRuns: 1000 } }
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

  it.prop(
    "counts an object met twice (not nested in itself) twice, and a cycle at any depth as null",
    { value: plain, depth: FastCheck.integer({ min: 1, max: 6 }) },
    ({ depth, value }) => {
      // `depth` levels of { value, next }, the innermost next being `bottom`
      const nest = (bottom: unknown) => {
        const root: Record<string, unknown> = { value }
        let level = root
        for (let i = 1; i < depth; i++) level = (level.next = { value }) as Record<string, unknown>
        level.next = bottom
        return { root, level }
      }
      const shared = { twice: [value, value], again: { value } }
      assert.strictEqual(jsonLength(shared), JSON.stringify(shared).length)
      const { level, root } = nest(null)
      const expected = JSON.stringify(root).length
      level.next = root
      assert.strictEqual(jsonLength(root), expected)
    }
  )

  it("leaves out what JSON leaves out, follows toJSON, and counts a cycle as null", () => {
    assert.strictEqual(jsonLength({ a: undefined, b: () => 1, c: 1 }), `{"c":1}`.length)
    assert.strictEqual(jsonLength([undefined, 1]), `[null,1]`.length)
    assert.strictEqual(jsonLength(new Date(0)), JSON.stringify(new Date(0)).length)
    const cyclic: Record<string, unknown> = { name: "x" }
    cyclic.self = cyclic
    assert.strictEqual(jsonLength(cyclic), `{"name":"x","self":null}`.length)
  })
})

describe("reprLength", () => {
  it("is the length of Python's repr of the value (the lengths were checked with Python 3's repr)", () => {
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      ["it's", `"it's"`],
      ["a'b\"c", `'a\\'b"c'`],
      ["\u00a0", `'\\xa0'`],
      ["é", `'é'`],
      ["\x07", `'\\x07'`],
      ["🚀", `'🚀'`],
      ["tab\there", `'tab\\there'`],
      ["\u200b", `'\\u200b'`],
      [0.1, "0.1"],
      [1e-5, "1e-05"],
      [0.0001, "0.0001"],
      [123.456, "123.456"],
      [-0.5, "-0.5"],
      [2.5e-7, "2.5e-07"],
      [1234567.125, "1234567.125"],
      [[1, [2, 3], {}], "[1, [2, 3], {}]"],
      [{ a: undefined, b: null }, "{'b': None}"],
      [true, "True"],
      [false, "False"]
    ]
    for (const [value, repr] of cases) {
      // count code points, as Python's len does
      assert.strictEqual(reprLength(value), Array.from(repr).length, repr)
    }
    const cyclic: Array<unknown> = [1]
    cyclic.push(cyclic)
    assert.strictEqual(reprLength(cyclic), "[1, [...]]".length)
  })
})

describe("TokenCounter: what a counter keeps per object is never stale", () => {
  // a long payload (the approximate counter remembers the length of those), or a short text
  const payload = FastCheck.oneof(
    FastCheck.string({ maxLength: 20 }),
    FastCheck.tuple(FastCheck.string({ minLength: 1, maxLength: 4 }), FastCheck.integer({ min: 300, max: 600 }))
      .map(([unit, times]) => unit.repeat(times))
  )
  const messageOf = (kind: number, value: string, id: string): Prompt.Message =>
    kind === 0
      ? user(value)
      : kind === 1
      ? Prompt.makeMessage("assistant", { content: [call(id, "tool", { value: { nested: value } })] })
      : Prompt.makeMessage("tool", { content: [result(id, "tool", { value })] })
  const counters = [
    { name: "approximate", make: TokenCounter.makeApproximate() },
    { name: "tiktoken", make: TokenCounter.makeTiktoken({ encoding: "cl100k_base" }) }
  ] as const

  for (const { make, name } of counters) {
    it.effect.prop(
      `${name}: a thread whose messages are replaced by edited copies counts as a fresh counter counts it`,
      {
        thread: FastCheck.array(FastCheck.tuple(FastCheck.nat({ max: 2 }), payload), { minLength: 1, maxLength: 6 }),
        edits: FastCheck.array(FastCheck.tuple(FastCheck.nat(), payload), { minLength: 1, maxLength: 6 })
      },
      ({ edits, thread }) =>
        Effect.gen(function*() {
          const kept = yield* make
          let messages = thread.map(([kind, value], i) => messageOf(kind, value, `call_${i}`))
          yield* kept.measure(messages)
          for (const [at, value] of edits) {
            // an edit makes a new message (and new parts, a new payload), as every edit of a thread does
            const i = at % messages.length
            messages = messages.map((message, j) => j === i ? messageOf(thread[i]![0], value, `call_${i}`) : message)
            const fresh = yield* make
            assert.deepStrictEqual(yield* kept.measure(messages), yield* fresh.measure(messages))
          }
        }),
      { fastCheck: { numRuns: 40 } }
    )
  }
})
