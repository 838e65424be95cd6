import type { Response } from "@effect/ai"
import { AiError, LanguageModel, Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Either, FastCheck, Layer, Option, Schema, Stream } from "effect"
import { createHash } from "node:crypto"
import * as Guardrail from "../src/Guardrail.js"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as ModelCallLimit from "../src/ModelCallLimit.js"
import * as Pii from "../src/Pii.js"

/** The approval request a wait (as an untyped agent sees it) carries; `None` for another middleware's. */
const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

const compile = (options: Pii.RedactorOptions) => Either.getOrThrow(Pii.redactor(options))
const redact = (text: string, options: Pii.RedactorOptions) => compile(options).redact(text).text
const all: ReadonlyArray<Pii.PiiType> = Pii.builtinTypes

const Lookup = Tool.make("lookup", {
  description: "Looks a customer up",
  parameters: { name: Schema.String },
  success: Schema.Struct({ email: Schema.String, notes: Schema.Array(Schema.String), visits: Schema.Number })
})
const Tools = Toolkit.make(Lookup)
const ToolsLive = Tools.toLayer({
  lookup: ({ name }) =>
    Effect.succeed({ email: `${name}@example.com`, notes: ["paid with 4111-1111-1111-1111", "vip"], visits: 3 })
})

const Raw = Tool.make("raw", { description: "Returns raw JSON", parameters: {}, success: Schema.Unknown })
const RawTools = Toolkit.make(Raw)
const RawToolsLive = RawTools.toLayer({
  raw: () => Effect.succeed({ "ada@example.com": { card: 4111111111111111, visits: 3 } })
})

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), ToolsLive))

const textOf = (message: Prompt.Message | undefined): string =>
  message === undefined || message.role === "system" || message.role === "tool"
    ? ""
    : message.content.map((part) => part.type === "text" ? part.text : "").join("")

/** A Luhn-valid card number of 13 to 19 digits, in groups of 4 separated by a space, a hyphen or nothing. */
const validCard = FastCheck.tuple(
  FastCheck.array(FastCheck.integer({ min: 0, max: 9 }), { minLength: 12, maxLength: 18 }),
  FastCheck.constantFrom(" ", "-", "")
).map(([payload, separator]) => {
  const body = payload.join("")
  const digits = `${body}${[...Array(10).keys()].find((check) => Pii.passesLuhn(`${body}${check}`))}`
  return digits.length === 16 ? digits.match(/\d{4}/g)!.join(separator) : digits
})

const octet = FastCheck.integer({ min: 0, max: 255 })
const prefixes = FastCheck.oneof(
  FastCheck.tuple(octet, octet, octet, octet).map((octets) => ({ kind: "ip", text: octets.join(".") })),
  FastCheck.nat({ max: 99999 }).map((n) => ({ kind: "path", text: `https://shop.example.com/orders/${n}` })),
  FastCheck.nat({ max: 99999 }).map((n) => ({ kind: "path", text: `www.example.org/p/${n}` })),
  FastCheck.integer({ min: 1, max: 65535 }).map((port) => ({ kind: "port", text: `https://example.com:${port}` })),
  FastCheck.constantFrom("paid with", "card", "联系").map((text) => ({ kind: "text", text }))
)

const cardAfterPrefix = FastCheck.tuple(
  FastCheck.constantFrom("from ", "", "see: "),
  prefixes,
  FastCheck.constantFrom(" ", ", ", "\n", "; ", " - "),
  validCard,
  FastCheck.constantFrom("", " ", ".", " thanks")
).map(([lead, prefix, separator, card, tail]) => ({
  card,
  prefixed: prefix.kind,
  text: `${lead}${prefix.text}${separator}${card}${tail}`
}))

describe("detectors", () => {
  it.prop(
    "emails are exactly the matches of the pattern they are specified by",
    [
      FastCheck.array(FastCheck.constantFrom("a", "B", "7", "_", ".", "-", "+", "%", "@", " ", "联", "co", "x.io"), {
        maxLength: 40
      }).map((parts) => parts.join(""))
    ],
    ([text]) => {
      const pattern = /(?<![0-9A-Za-z_])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}(?![0-9A-Za-z_])/g
      assert.deepStrictEqual(
        compile({ types: ["email"], strategy: "redact" }).detect(text).map((m) => [m.start, m.value]),
        [...text.matchAll(pattern)].map((m) => [m.index, m[0]])
      )
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it("finds emails, also against non-ASCII text", () => {
    const found = compile({ types: ["email"], strategy: "redact" }).detect(
      "联系alice@example.com 或 bob.s+x@mail.co.uk"
    )
    assert.deepStrictEqual(found.map((m) => m.value), ["alice@example.com", "bob.s+x@mail.co.uk"])
    assert.deepStrictEqual(found[0], { type: "email", start: 2, end: 19, value: "alice@example.com" })
  })

  it("finds card numbers only when they pass the Luhn check", () => {
    const text = "a 4111 1111 1111 1111, b 4111-1111-1111-1112, c 378282246310005, d 12345, e 41111111111111111111111" +
      ", f 4111111111111111 192.1, g 4111 1111 1111 1111 5555-5555-5555-4444, h 4111 1111 1111 1111x"
    const found = compile({ types: ["credit_card"], strategy: "redact" }).detect(text)
    assert.deepStrictEqual(found.map((m) => m.value), [
      "4111 1111 1111 1111",
      "378282246310005",
      "4111111111111111",
      "4111 1111 1111 1111",
      "5555-5555-5555-4444"
    ])
    assert.isTrue(Pii.passesLuhn("5555-5555-5555-4444"))
    assert.isFalse(Pii.passesLuhn("5555-5555-5555-4445"))
    assert.isFalse(Pii.passesLuhn("0000 0000 0"))
  })

  it("finds a card right after an IPv4 address or a URL ending in digits, and block counts it", () => {
    const text = "from 10.0.0.42 4111 1111 1111 1111, see https://x.io/orders/42 5555-5555-5555-4444, " +
      "at https://x.io:8080 378282246310005"
    assert.strictEqual(
      redact(text, { types: all, strategy: "redact" }),
      "from [REDACTED_IP] [REDACTED_CREDIT_CARD], see [REDACTED_URL] [REDACTED_CREDIT_CARD], " +
        "at [REDACTED_URL] [REDACTED_CREDIT_CARD]"
    )
    // with cards alone, the IP's last octet or the path's last segment is not taken into the card
    assert.strictEqual(
      redact(text, { types: ["credit_card"], strategy: "redact" }),
      "from 10.0.0.42 [REDACTED_CREDIT_CARD], see https://x.io/orders/42 [REDACTED_CREDIT_CARD], " +
        "at https://x.io:8080 [REDACTED_CREDIT_CARD]"
    )
    const blocked = compile({ types: all, strategy: "block" }).redact(text).matches
    assert.deepStrictEqual(blocked.map((m) => [m.type, m.value]), [
      ["ip", "10.0.0.42"],
      ["credit_card", "4111 1111 1111 1111"],
      ["url", "https://x.io/orders/42"],
      ["credit_card", "5555-5555-5555-4444"],
      ["url", "https://x.io:8080"],
      ["credit_card", "378282246310005"]
    ])
  })

  it.prop(
    "a valid card after an IPv4 address, a URL or text and a separator is always found",
    [cardAfterPrefix],
    ([{ card, prefixed, text }]) => {
      const value = (types: ReadonlyArray<Pii.PiiType>) =>
        compile({ types, strategy: "block" }).detect(text).filter((m) => m.type === "credit_card").map((m) => m.value)
      assert.deepStrictEqual(value(all), [card])
      // alone, cards never take in an IP's last octet or a path's last segment
      if (prefixed !== "port") assert.deepStrictEqual(value(["credit_card"]), [card])
    },
    { fastCheck: { numRuns: 300 } }
  )

  it("finds IPv4 addresses with octets in range and no leading zeros", () => {
    const found = compile({ types: ["ip"], strategy: "redact" }).detect(
      "ok 192.168.1.42 and 10.0.0.1; not 256.1.1.1, 1.2.3.999, 01.2.3.4 or 1.2.3"
    )
    assert.deepStrictEqual(found.map((m) => m.value), ["192.168.1.42", "10.0.0.1"])
  })

  it("finds MAC addresses with one separator", () => {
    const found = compile({ types: ["mac_address"], strategy: "redact" }).detect(
      "00:1A:2b:3C:4d:5E 00-1a-2b-3c-4d-5e 00:1a-2b:3c:4d:5e 00:1a:2b:3c:4d"
    )
    assert.deepStrictEqual(found.map((m) => m.value), ["00:1A:2b:3C:4d:5E", "00-1a-2b-3c-4d-5e"])
  })

  it("finds URLs with a scheme, or with www. or a path, dropping trailing punctuation", () => {
    const found = compile({ types: ["url"], strategy: "redact" }).detect(
      "See https://example.com/a?b=1. Or www.example.org, docs.example.com/guide! Not example.com, 1.5/2 or e.g. this"
    )
    assert.deepStrictEqual(found.map((m) => m.value), [
      "https://example.com/a?b=1",
      "www.example.org",
      "docs.example.com/guide"
    ])
  })

  it("custom types: a pattern (any flags) and a detector", () => {
    const compiled = compile({
      types: [
        { name: "ssn", pattern: /\b\d{3}-\d{2}-\d{4}\b/ },
        {
          name: "ticket",
          detect: (text) => [...text.matchAll(/TCK\d+/g)].map((m) => ({ start: m.index, end: m.index + m[0].length }))
        }
      ],
      strategy: "redact"
    })
    assert.strictEqual(
      compiled.redact("ssn 123-45-6789 and 987-65-4321, TCK42").text,
      "ssn [REDACTED_SSN] and [REDACTED_SSN], [REDACTED_TICKET]"
    )
  })

  it("overlapping matches: the leftmost wins, then the longest, then the first type listed", () => {
    const compiled = compile({ types: ["email", "url", "ip"], strategy: "redact" })
    assert.strictEqual(
      compiled.redact("https://a.example.com/u?to=bob@example.com and http://10.0.0.1/x and bob@example.com").text,
      "[REDACTED_URL] and [REDACTED_URL] and [REDACTED_EMAIL]"
    )
    // a URL whose scheme another type took is still found
    assert.strictEqual(
      compiled.redact("ada@example.comhttps://example.com/a?b=1.").text,
      "[REDACTED_EMAIL]://[REDACTED_URL]."
    )
    const twice = compile({ types: [{ name: "a", pattern: /abc/ }, { name: "b", pattern: /abc/ }], strategy: "redact" })
    assert.strictEqual(twice.redact("abc").text, "[REDACTED_A]")
  })
})

describe("strategies", () => {
  const text = "ada@example.com 4111 1111 1111 1111 4111111111111111 192.168.1.42 00:1a:2b:3c:4d:5e https://x.io/p"

  it("redact replaces each match with [REDACTED_TYPE]", () => {
    assert.strictEqual(
      redact(text, { types: all, strategy: "redact" }),
      "[REDACTED_EMAIL] [REDACTED_CREDIT_CARD] [REDACTED_CREDIT_CARD] [REDACTED_IP] [REDACTED_MAC_ADDRESS] [REDACTED_URL]"
    )
  })

  it("mask keeps the tail", () => {
    assert.strictEqual(
      redact(text, { types: all, strategy: "mask" }),
      "ada@****.com **** **** **** 1111 ************1111 *.*.*.42 **:**:**:**:**:5e [MASKED_URL]"
    )
    assert.strictEqual(
      redact("id AB-12345 and X9", { types: [{ name: "id", pattern: /AB-\d+|X9/ }], strategy: "mask" }),
      "id ****2345 and ****"
    )
  })

  it("hash replaces a match with a stable tag: the first 8 hex digits of its SHA-256", () => {
    const hashed = redact("ada@example.com, again ada@example.com", { types: ["email"], strategy: "hash" })
    const digest = createHash("sha256").update("ada@example.com").digest("hex").slice(0, 8)
    assert.strictEqual(hashed, `<email_hash:${digest}>, again <email_hash:${digest}>`)
  })

  it("block leaves the text and reports the matches", () => {
    const result = compile({ types: ["email"], strategy: "block" }).redact("mail ada@example.com")
    assert.strictEqual(result.text, "mail ada@example.com")
    assert.deepStrictEqual(result.matches.map((m) => m.type), ["email"])
  })

  it("redacting its own output changes nothing", () => {
    for (const strategy of ["redact", "mask", "hash"] as const) {
      const once = redact(text, { types: all, strategy })
      assert.strictEqual(redact(once, { types: all, strategy }), once, strategy)
    }
  })
})

describe("options", () => {
  const invalid = (options: Pii.RedactorOptions & Partial<Pii.Options>) =>
    Effect.flip(Middleware.build(Pii.middleware(options as Pii.Options)))

  it.effect("bad options fail with InvalidOptions naming the option", () =>
    Effect.gen(function*() {
      const cases: Array<[Pii.Options, string, string]> = [
        [{ types: [], strategy: "redact" }, "types", "at least one"],
        [{ types: ["phone" as any], strategy: "redact" }, "types[0]", "unknown PII type \"phone\""],
        [{ types: ["email", "email"], strategy: "redact" }, "types[1]", "listed twice"],
        [{ types: [{ name: "my id", pattern: /x/ }], strategy: "redact" }, "types[0].name", "not a valid name"],
        [{ types: [{ name: "id" } as any], strategy: "redact" }, "types[0].pattern", "is missing"],
        [
          { types: [{ name: "id", pattern: /x/, flags: "g" } as any], strategy: "redact" },
          "types[0].flags",
          "is unknown"
        ],
        [{ types: [42 as any], strategy: "redact" }, "types[0]", "actual 42"],
        [
          { types: ["email"], strategy: "erase" as any },
          "strategy",
          "Expected \"redact\" | \"mask\" | \"hash\" | \"block\", actual \"erase\""
        ],
        [{ types: ["email"], strategy: "redact", applyToInput: false }, "applyToInput", "nothing to check"]
      ]
      for (const [options, option, reason] of cases) {
        const error = yield* invalid(options)
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.strictEqual(error.option, option)
        assert.include(error.message, reason)
      }
    }))

  it("the pure constructors return the same errors", () => {
    const result = Pii.streamRedactor({ types: [], strategy: "redact" })
    assert.isTrue(Either.isLeft(result) && result.left._tag === "InvalidOptions")
  })
})

describe("middleware", () => {
  it.effect("applyToInput rewrites the stored user message before the model sees it", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email", "credit_card"], strategy: "redact" })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii] })
      const result = yield* agent.run("I am ada@example.com, card 4111 1111 1111 1111", { threadId: "t" })
      const expected = "I am [REDACTED_EMAIL], card [REDACTED_CREDIT_CARD]"
      assert.strictEqual(textOf(result.state.messages[0]), expected)
      const [request] = yield* ScriptedModel.requests
      assert.strictEqual(textOf(request!.prompt.content[0]), expected)
      // the output is left alone unless applyToOutput
      assert.strictEqual(textOf(result.state.messages[1]), "Noted: ada@example.com")
    }).pipe(provide([ScriptedModel.text("Noted: ada@example.com")])))

  it.effect("without a strategy it redacts, as LangChain's default", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email"] })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii] })
      const result = yield* agent.run("I am ada@example.com", { threadId: "t" })
      assert.strictEqual(textOf(result.state.messages[0]), "I am [REDACTED_EMAIL]")
      assert.strictEqual(compile({ types: ["email"] }).strategy, "redact")
    }).pipe(provide([ScriptedModel.text("Noted")])))

  it.effect("applyToInput rewrites every user message of the run's input, not earlier turns' replies", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["ip"], strategy: "mask" })
      const agent = yield* Agent.make({ middleware: [pii] })
      yield* agent.run([{ role: "user", content: "from 10.0.0.1" }, { role: "user", content: "to 10.0.0.2" }], {
        threadId: "t"
      })
      const result = yield* agent.run("and 10.0.0.3", { threadId: "t" })
      assert.deepStrictEqual(result.state.messages.map(textOf), [
        "from *.*.*.1",
        "to *.*.*.2",
        "seen 10.0.0.9",
        "and *.*.*.3",
        "ok"
      ])
      const requests = yield* ScriptedModel.requests
      assert.deepStrictEqual(requests[1]!.prompt.content.map(textOf), [
        "from *.*.*.1",
        "to *.*.*.2",
        "seen 10.0.0.9",
        "and *.*.*.3"
      ])
    }).pipe(provide([ScriptedModel.text("seen 10.0.0.9"), ScriptedModel.text("ok")])))

  it.effect("applyToOutput rewrites the reply's text but not its tool call arguments", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({
        types: ["email"],
        strategy: "mask",
        applyToInput: false,
        applyToOutput: true
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii] })
      const result = yield* agent.run("find ada", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      const call = result.state.messages[1]!
      assert.strictEqual(textOf(call), "Looking up ada@****.com")
      const part = call.role === "assistant" ? call.content.find((p) => p.type === "tool-call") : undefined
      assert.deepStrictEqual(part?.type === "tool-call" ? part.params : undefined, { name: "ada@example.com" })
      assert.strictEqual(result.text, "Her address is ada@****.com.")
      assert.strictEqual(textOf(result.state.messages[0]), "find ada")
    }).pipe(provide([
      ScriptedModel.toolCalls([{ name: "lookup", params: { name: "ada@example.com" } }], {
        text: "Looking up ada@example.com"
      }),
      ScriptedModel.text("Her address is ada@example.com.")
    ])))

  it.effect("applyToToolResults rewrites every string in a tool's result before it is stored and sent", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({
        types: ["email", "credit_card"],
        strategy: "redact",
        applyToInput: false,
        applyToToolResults: true
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii] })
      const events = yield* agent.stream("find ada", { threadId: "t" }).pipe(
        Stream.runCollect,
        Effect.map(Chunk.toArray)
      )
      const completed = events.find(AgentEvent.$is("ToolCallCompleted"))!
      const expected = { email: "[REDACTED_EMAIL]", notes: ["paid with [REDACTED_CREDIT_CARD]", "vip"], visits: 3 }
      assert.deepStrictEqual(completed.result.result, expected)
      const decision = events.find(AgentEvent.$is("MiddlewareDecision"))!
      assert.strictEqual(decision.decision, "redacted 1 email, 1 credit_card in the result of lookup")
      assert.deepStrictEqual(decision.data, { email: 1, credit_card: 1 })
      const requests = yield* ScriptedModel.requests
      const tool = requests[1]!.prompt.content.find((m) => m.role === "tool")!
      const result = tool.role === "tool" ? tool.content[0]!.result : undefined
      assert.deepStrictEqual(result, expected)
    }).pipe(provide([
      ScriptedModel.toolCalls([{ name: "lookup", params: { name: "ada" } }]),
      ScriptedModel.text("done")
    ])))

  it.effect("applyToToolResults redacts object keys and numbers holding PII in a tool's result", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({
        types: ["email", "credit_card"],
        strategy: "redact",
        applyToInput: false,
        applyToToolResults: true
      })
      const agent = yield* Agent.make({ toolkit: RawTools, middleware: [pii] })
      const events = yield* agent.stream("raw", { threadId: "t" }).pipe(Stream.runCollect, Effect.map(Chunk.toArray))
      const completed = events.find(AgentEvent.$is("ToolCallCompleted"))!
      assert.deepStrictEqual(completed.result.result, {
        "[REDACTED_EMAIL]": { card: "[REDACTED_CREDIT_CARD]", visits: 3 }
      })
    }).pipe(Effect.provide(Layer.merge(
      ScriptedModel.layer([ScriptedModel.toolCalls([{ name: "raw", params: {} }]), ScriptedModel.text("done")]),
      RawToolsLive
    ))))

  it.effect("block fails the run with PiiDetected before the model is called, without the value", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email", "ip"], strategy: "block" })
      const agent = yield* Agent.make({ middleware: [pii] })
      const error = yield* Effect.flip(agent.run("from ada@example.com at 10.0.0.1", { threadId: "t" }))
      assert.strictEqual(error._tag, "PiiDetected")
      if (error._tag !== "PiiDetected") return
      assert.deepStrictEqual(
        { piiType: error.piiType, types: error.types, count: error.count, location: error.location },
        { piiType: "email", types: ["email", "ip"], count: 2, location: "input" }
      )
      assert.strictEqual(error.message, "Detected 2 instance(s) of email, ip in the user input")
      assert.notInclude(error.message, "ada@")
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(provide([ScriptedModel.text("never")])))

  it.effect("block on tool results names the tool", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({
        types: ["email"],
        strategy: "block",
        applyToInput: false,
        applyToToolResults: true
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii] })
      const error = yield* Effect.flip(agent.run("find ada", { threadId: "t" }))
      assert.strictEqual(error._tag, "PiiDetected")
      if (error._tag !== "PiiDetected") return
      assert.strictEqual(error.location, "tool_result")
      assert.strictEqual(error.toolName, "lookup")
      assert.strictEqual((yield* ScriptedModel.requests).length, 1)
    }).pipe(provide([ScriptedModel.toolCalls([{ name: "lookup", params: { name: "ada" } }])])))

  it.effect("a custom detector returning a bad span fails the run with PiiDetectorFailed", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({
        types: [{ name: "broken", detect: (text) => [{ start: 0, end: text.length + 5 }] }],
        strategy: "redact"
      })
      const agent = yield* Agent.make({ middleware: [pii] })
      const error = yield* Effect.flip(agent.run("hello", { threadId: "t" }))
      assert.strictEqual(error._tag, "PiiDetectorFailed")
      assert.include(error.message, "\"broken\"")
      assert.include(error.message, "length 5")
    }).pipe(provide([ScriptedModel.text("never")])))

  it.effect("a custom detector that throws fails the run with PiiDetectorFailed", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({
        types: [{
          name: "throws",
          detect: () => {
            throw new Error("boom")
          }
        }],
        strategy: "redact"
      })
      const agent = yield* Agent.make({ middleware: [pii] })
      const error = yield* Effect.flip(agent.run("hello", { threadId: "t" }))
      assert.strictEqual(error._tag, "PiiDetectorFailed")
      assert.include(error.message, "boom")
    }).pipe(provide([ScriptedModel.text("never")])))

  it.effect("two Pii middleware with different names and strategies compose", () =>
    Effect.gen(function*() {
      const emails = Pii.middleware({ types: ["email"], strategy: "hash", name: "emails" })
      const cards = Pii.middleware({ types: ["credit_card"], strategy: "mask", name: "cards" })
      const agent = yield* Agent.make({ middleware: [emails, cards] })
      const result = yield* agent.run("ada@example.com 4111111111111111", { threadId: "t" })
      const digest = createHash("sha256").update("ada@example.com").digest("hex").slice(0, 8)
      assert.strictEqual(textOf(result.state.messages[0]), `<email_hash:${digest}> ************1111`)
    }).pipe(provide([ScriptedModel.text("ok")])))
})

// -----------------------------------------------------------------------------
// order: the stored input is redacted whatever the middleware list order
// -----------------------------------------------------------------------------

const rawInput = "I am ada@example.com, card 4111 1111 1111 1111"

/** The stored thread holds neither raw value (and the input was stored, redacted). */
const assertStoredRedacted = (
  stored: Option.Option<{ readonly state: { readonly messages: ReadonlyArray<Prompt.Message> } }>
) => {
  const messages = Option.getOrThrow(stored).state.messages
  const json = JSON.stringify(messages)
  assert.notInclude(json, "ada@example.com")
  assert.notInclude(json, "4111 1111")
  assert.strictEqual(textOf(messages[0]), "I am [REDACTED_EMAIL], card [REDACTED_CREDIT_CARD]")
}

/** Middleware that end or interrupt the run before the model is called. */
const earlyEnders = {
  modelCallLimit: ModelCallLimit.middleware({ runLimit: 0 }),
  guardrail: Guardrail.middleware({ input: () => Effect.succeed(Guardrail.block("no")), onBlock: "end" }),
  interrupt: Middleware.make({
    name: "ask",
    wait: { request: Schema.String, decision: Schema.String },
    beforeAgent: ({ resume }) => Effect.succeed(Option.isSome(resume) ? undefined : { interrupt: "go on?" })
  })
} as const

describe("stored input, whatever the middleware order", () => {
  it.effect("ModelCallLimit already reached before Pii: the checkpoint holds the redacted input", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email", "credit_card"], strategy: "redact" })
      const limit = ModelCallLimit.middleware({ threadLimit: 1 })
      const agent = yield* Agent.make({ middleware: [limit, pii] })
      yield* agent.run("hello", { threadId: "t" })
      const result = yield* agent.run(rawInput, { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual((yield* ScriptedModel.requests).length, 1)
      const messages = Option.getOrThrow(yield* agent.thread("t")).state.messages
      assert.notInclude(JSON.stringify(messages), "ada@example.com")
      assert.strictEqual(textOf(messages[2]), "I am [REDACTED_EMAIL], card [REDACTED_CREDIT_CARD]")
    }).pipe(provide([ScriptedModel.text("hi")])))

  it.effect("ModelCallLimit 0 before Pii: the checkpoint holds the redacted input", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email", "credit_card"], strategy: "redact" })
      const agent = yield* Agent.make({ middleware: [earlyEnders.modelCallLimit, pii] })
      yield* agent.run(rawInput, { threadId: "t" })
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
      assertStoredRedacted(yield* agent.thread("t"))
    }).pipe(provide([])))

  it.effect("a Guardrail with onBlock \"end\" before Pii: the checkpoint holds the redacted input", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email", "credit_card"], strategy: "redact" })
      const agent = yield* Agent.make({ middleware: [earlyEnders.guardrail, pii] })
      yield* agent.run(rawInput, { threadId: "t" })
      assertStoredRedacted(yield* agent.thread("t"))
    }).pipe(provide([])))

  it.effect("HumanInTheLoop before Pii: the checkpoint of the interrupt holds the redacted input", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email", "credit_card"], strategy: "redact" })
      const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { lookup: true } })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [hitl, pii] })
      const result = yield* agent.run(rawInput, { threadId: "t" })
      assert.strictEqual(result._tag, "Interrupted")
      assertStoredRedacted(yield* agent.thread("t"))
    }).pipe(provide([ScriptedModel.toolCalls([{ name: "lookup", params: { name: "ada" } }])])))

  it.effect("an interrupt in beforeAgent before Pii: the checkpoint of the interrupt holds the redacted input", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email", "credit_card"], strategy: "redact" })
      const agent = yield* Agent.make({ middleware: [earlyEnders.interrupt, pii] })
      const result = yield* agent.run(rawInput, { threadId: "t" })
      assert.strictEqual(result._tag, "Interrupted")
      assertStoredRedacted(yield* agent.thread("t"))
    }).pipe(provide([])))

  it.effect("the input's redaction is reported by the transformInput hook, before any node hook", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email"], strategy: "redact" })
      const agent = yield* Agent.make({ middleware: [pii] })
      const events = yield* collect(agent.stream("I am ada@example.com", { threadId: "t" }))
      assert.deepStrictEqual(
        events.filter(AgentEvent.$is("MiddlewareDecision")).map(({ data, decision, hook, middleware }) => ({
          middleware,
          hook,
          decision,
          data
        })),
        [{
          middleware: "pii",
          hook: "transformInput",
          decision: "redacted 1 email in the user input",
          data: { email: 1 }
        }]
      )
    }).pipe(provide([ScriptedModel.text("ok")])))

  it.effect.prop(
    "for any order of Pii and a middleware that ends or interrupts the run at once, no raw input is stored",
    [FastCheck.constantFrom(...Object.keys(earlyEnders) as Array<keyof typeof earlyEnders>), FastCheck.boolean()],
    ([which, piiFirst]) =>
      Effect.gen(function*() {
        const pii = Pii.middleware({ types: ["email", "credit_card"], strategy: "redact" })
        const other: Middleware.Any = earlyEnders[which]
        const agent = yield* Agent.make({ middleware: piiFirst ? [pii, other] : [other, pii] })
        yield* agent.run(rawInput, { threadId: "t" })
        assertStoredRedacted(yield* agent.thread("t"))
      }).pipe(provide([])),
    { fastCheck: { numRuns: 12 } }
  )
})

// -----------------------------------------------------------------------------
// streaming
// -----------------------------------------------------------------------------

const fragments = FastCheck.constantFrom(
  "ada@example.com",
  "bob.smith+x@mail.co.uk",
  "4111 1111 1111 1111",
  "4111-1111-1111-1111",
  "4111111111111111",
  "4111 1111 1111 1112",
  "378282246310005",
  "192.168.1.42",
  "256.1.1.1",
  "00:1a:2b:3c:4d:5e",
  "https://example.com/a?b=1.",
  "www.example.org",
  "docs.example.com/guide",
  "SSN 123-45-6789",
  "1234",
  "5678",
  "12",
  "hello",
  "world,",
  "@",
  ".",
  "-",
  "联系",
  " ",
  " ",
  "  ",
  "\n",
  "\t"
)

const texts = FastCheck.array(fragments, { maxLength: 30 }).map((parts) => parts.join(""))
const withCutsOf = (texts: FastCheck.Arbitrary<string>) =>
  texts.chain((text) =>
    FastCheck.uniqueArray(FastCheck.nat({ max: text.length }), { maxLength: 12 }).map((cuts) => {
      const sorted = [0, ...cuts.sort((a, b) => a - b), text.length]
      const chunks: Array<string> = []
      for (let i = 1; i < sorted.length; i++) chunks.push(text.slice(sorted[i - 1], sorted[i]))
      return { text, chunks }
    })
  )
const withCuts = withCutsOf(texts)
/** A reply the model may send: not blank (a blank reply fails with ModelReplyError). */
const replyWithCuts = withCutsOf(texts.filter((text) => text.trim().length > 0))

/** Pieces of one long token: no whitespace anywhere. */
const tokenFragments = FastCheck.constantFrom(
  "ada@example.com",
  "4111111111111111",
  "4111-1111-1111-1111",
  "192.168.1.42",
  "00:1a:2b:3c:4d:5e",
  "https://example.com/a?b=1.",
  "www.example.org",
  "a.",
  "1-",
  "@",
  ".",
  "/",
  "x",
  "联系"
)

const streamTypes: ReadonlyArray<Pii.PiiType> = [...Pii.builtinTypes, { name: "ssn", pattern: /\b\d{3}-\d{2}-\d{4}\b/ }]

const runChunks = (compiled: Pii.Redactor, chunks: ReadonlyArray<string>) => {
  let state = compiled.stream.initial
  const released: Array<string> = []
  const matches: Array<Pii.PiiMatch> = []
  for (const chunk of chunks) {
    const step = compiled.stream.push(state, chunk)
    released.push(step.text)
    matches.push(...step.matches)
    state = step.state
  }
  const last = compiled.stream.flush(state)
  released.push(last.text)
  matches.push(...last.matches)
  return { released, matches }
}

describe("credit card numbers", () => {
  it("a number of more than 19 digits is never a card, whatever its checksum; a card beside it still is", () => {
    const compiled = compile({ types: ["credit_card"], strategy: "redact" })
    for (const length of [20, 21, 22, 100, 480]) {
      // a run of 1s passes the Luhn check when its length is a multiple of 20 (every pair sums to 3)…
      const ones = "1".repeat(length)
      assert.deepStrictEqual(compiled.redact(`id ${ones} end`).matches, [], `${length} digits`)
    }
    const found = compiled.redact(`${"1".repeat(480)} 4111 1111 1111 1111`).matches.map((m) => m.value)
    assert.deepStrictEqual(found, ["4111 1111 1111 1111"])
  })
})

describe("streamRedactor", () => {
  it("holds back what a match in progress could reach", () => {
    const stream = Either.getOrThrow(Pii.streamRedactor({ types: ["email", "credit_card"], strategy: "redact" }))
    const a = stream.push(stream.initial, "mail ada@exa")
    assert.strictEqual(a.text, "mail ")
    const b = stream.push(a.state, "mple.com, card 4111 ")
    assert.strictEqual(b.text, "[REDACTED_EMAIL], card ")
    const c = stream.push(b.state, "1111 1111 1111 thanks")
    assert.strictEqual(c.text, "[REDACTED_CREDIT_CARD] ")
    assert.deepStrictEqual(c.matches, [{ type: "credit_card", start: 27, end: 46, value: "4111 1111 1111 1111" }])
    const d = stream.flush(c.state)
    assert.strictEqual(d.text, "thanks")
    assert.deepStrictEqual(d.state, { pending: "", offset: 53, last: "ks", before: "ks", dropping: false })
  })

  it("a 1 MB text without whitespace, streamed in chunks, releases what redacting it whole gives", () => {
    const compiled = compile({ types: streamTypes, strategy: "redact" })
    const text = [
      "a.".repeat(262144),
      "ada@example.com",
      "1-".repeat(131072),
      "4111111111111111",
      "QWxhZGRpbjpvcGVuIHNlc2FtZQ==".repeat(9362)
    ].join(",")
    assert.isAbove(text.length, 1_000_000)
    const whole = compiled.redact(text)
    assert.deepStrictEqual(whole.matches.map((m) => m.value), ["ada@example.com", "4111111111111111"])
    for (const size of [3, 64, 4096]) {
      const chunks: Array<string> = []
      for (let at = 0; at < text.length; at += size) chunks.push(text.slice(at, at + size))
      const { matches, released } = runChunks(compiled, chunks)
      assert.strictEqual(released.join(""), whole.text, `chunks of ${size}`)
      assert.deepStrictEqual(matches, [...whole.matches])
    }
  })

  // Text without whitespace longer than the window the redactor may hold back (8,192 characters)
  const longRuns = FastCheck.constantFrom("x", "1", "a.", "Q+/", "1-", "0f").chain((unit) =>
    FastCheck.integer({ min: 1, max: 3000 }).map((n) => unit.repeat(n))
  )
  const longTokens = FastCheck.array(
    FastCheck.oneof(
      longRuns,
      FastCheck.constantFrom("ada@example.com", "4111111111111111", "4111-1111-1111-1111", "192.168.1.42", "@", ".")
    ),
    { minLength: 5, maxLength: 40 }
  ).map((parts) => parts.join(","))
  const pieces = (text: string, size: number) => {
    const chunks: Array<string> = []
    for (let at = 0; at < text.length; at += size) chunks.push(text.slice(at, at + size))
    return chunks
  }

  it.prop(
    "any chunking of a long text without whitespace releases exactly what redacting it whole gives",
    [longTokens.chain((text) =>
      FastCheck.oneof(
        withCutsOf(FastCheck.constant(text)).map(({ chunks }) => chunks),
        FastCheck.integer({ min: 1, max: 8 }).map((size) => pieces(text, size))
      ).map((chunks) => ({ text, chunks }))
    )],
    ([{ chunks, text }]) => {
      const compiled = compile({ types: streamTypes, strategy: "mask" })
      const whole = compiled.redact(text)
      const { matches, released } = runChunks(compiled, chunks)
      assert.strictEqual(released.join(""), whole.text)
      assert.deepStrictEqual(matches, [...whole.matches])
    },
    { fastCheck: { numRuns: 60 } }
  )

  it("never holds back more than a window, whatever the text: base64, digits, email-like or URL-like runs", () => {
    const compiled = compile({ types: streamTypes, strategy: "redact" })
    const base64 = Buffer.from(Array.from({ length: 96 * 1024 }, (_, i) => (i * 7919 + (i >> 5)) % 256)).toString(
      "base64"
    )
    const shapes: Record<string, string> = {
      base64,
      digits: "1234567890".repeat(13_000),
      "digit groups": "4111 ".repeat(26_000),
      "email-like": "a.b_c%+-".repeat(16_000),
      "domain-like": "ada@" + "example.".repeat(16_000) + "com",
      "one URL": "https://example.com/" + "a/b?c=d&".repeat(16_000),
      mixed: "QWxh|ada@example.com|4111-1111-1111-1111|192.168.1.42|".repeat(2_500)
    }
    for (const [shape, text] of Object.entries(shapes)) {
      for (const size of [1, 4]) {
        let state = compiled.stream.initial
        let held = 0
        for (const chunk of pieces(text, size)) {
          state = compiled.stream.push(state, chunk).state
          held = Math.max(held, state.pending.length)
        }
        assert.isAtMost(held, 8192 + size, `${shape} in chunks of ${size}`)
      }
    }
  })

  it("a short match across the cut of a long text is released whole, and the text after it too", () => {
    const compiled = compile({ types: streamTypes, strategy: "redact" })
    // when 8,193 characters are held back, the cut falls right after the "@" (the last separator), inside the email
    const text = `${"q".repeat(8193 - 3081)},abcdefghij@example.com%${"z".repeat(4000)} end`
    for (const size of [1, 4]) {
      const { released } = runChunks(compiled, pieces(text, size))
      assert.strictEqual(released.join(""), compiled.redact(text).text, `chunks of ${size}`)
    }
  })

  it("a match longer than the window is replaced whole, up to the next whitespace", () => {
    for (const strategy of ["redact", "mask"] as const) {
      const compiled = compile({ types: streamTypes, strategy })
      const text = `see https://example.com/${"a1/".repeat(10_000)} or mail ada@example.com now`
      const { released } = runChunks(compiled, pieces(text, 4))
      assert.strictEqual(released.join(""), compiled.redact(text).text, strategy)
    }
  })

  it.prop(
    "any chunking of a text without whitespace releases exactly what redacting it whole gives",
    [withCutsOf(FastCheck.array(tokenFragments, { maxLength: 40 }).map((parts) => parts.join("")))],
    ([{ chunks, text }]) => {
      const compiled = compile({ types: streamTypes, strategy: "mask" })
      const whole = compiled.redact(text)
      const { matches, released } = runChunks(compiled, chunks)
      assert.strictEqual(released.join(""), whole.text)
      assert.deepStrictEqual(matches, [...whole.matches])
    },
    { fastCheck: { numRuns: 300 } }
  )

  for (const strategy of ["redact", "mask", "hash", "block"] as const) {
    it.prop(
      `any chunking releases exactly what redacting the whole text gives (${strategy})`,
      [withCuts],
      ([{ chunks, text }]) => {
        const compiled = compile({ types: streamTypes, strategy })
        const whole = compiled.redact(text)
        const { matches, released } = runChunks(compiled, chunks)
        assert.strictEqual(released.join(""), whole.text)
        assert.deepStrictEqual(matches, [...whole.matches])
      },
      { fastCheck: { numRuns: 300 } }
    )
  }

  it.prop(
    "text is released no later than the next break after it",
    [withCuts],
    ([{ chunks }]) => {
      const compiled = compile({ types: streamTypes, strategy: "redact" })
      let state = compiled.stream.initial
      for (const chunk of chunks) {
        state = compiled.stream.push(state, chunk).state
        // what is held back never contains a whitespace followed by a letter
        assert.isFalse(/\s[A-Za-z]/.test(state.pending), JSON.stringify(state.pending))
      }
    },
    { fastCheck: { numRuns: 200 } }
  )

  it.effect.prop(
    "redactStream fails on block before releasing the match, and releases the same text otherwise",
    [withCuts],
    ([{ chunks, text }]) =>
      Effect.gen(function*() {
        const blocking = compile({ types: streamTypes, strategy: "block" })
        const out = yield* Stream.fromIterable(chunks).pipe(
          Pii.redactStream(blocking),
          Stream.runCollect,
          Effect.map((chunk) => Chunk.toArray(chunk).join("")),
          Effect.either
        )
        const found = blocking.detect(text)
        if (found.length === 0) {
          assert.deepStrictEqual(out, Either.right(text))
        } else {
          assert.isTrue(Either.isLeft(out) && out.left._tag === "PiiDetected")
        }
        const redacting = compile({ types: streamTypes, strategy: "redact" })
        const redacted = yield* Stream.fromIterable(chunks).pipe(
          Pii.redactStream(redacting),
          Stream.runCollect,
          Effect.map((chunk) => Chunk.toArray(chunk).join(""))
        )
        assert.strictEqual(redacted, redacting.redact(text).text)
      }),
    { fastCheck: { numRuns: 40 } }
  )
})

// -----------------------------------------------------------------------------
// streamed runs (wrapModelStream)
// -----------------------------------------------------------------------------

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
const finish: Response.StreamPartEncoded = { type: "finish", reason: "stop", usage }

const textChunks = (id: string, chunks: ReadonlyArray<string>): Array<Response.StreamPartEncoded> => [
  { type: "text-start", id },
  ...chunks.map((delta): Response.StreamPartEncoded => ({ type: "text-delta", id, delta })),
  { type: "text-end", id }
]

/** A model that streams each attempt exactly as given (one stream per model call, in order). */
const chunkedModel = (attempts: ReadonlyArray<Stream.Stream<Response.StreamPartEncoded, AiError.AiError>>) =>
  Layer.effect(
    LanguageModel.LanguageModel,
    Effect.suspend(() => {
      let next = 0
      return LanguageModel.make({
        generateText: () => Effect.dieMessage("this model only streams"),
        streamText: () => Stream.suspend(() => attempts[next++] ?? Stream.dieMessage("no more attempts"))
      })
    })
  )

const streamed = (attempts: ReadonlyArray<ReadonlyArray<Response.StreamPartEncoded>>) =>
  Effect.provide(Layer.merge(chunkedModel(attempts.map((parts) => Stream.fromIterable(parts))), ToolsLive))

const collect = <A, E, R>(stream: Stream.Stream<A, E, R>) => Effect.map(Stream.runCollect(stream), Chunk.toArray)

const deltasOf = (events: ReadonlyArray<AgentEvent.AgentEvent<any>>) =>
  events.filter(AgentEvent.$is("TextDelta")).map((event) => event.delta)

describe("streamed output", () => {
  it.effect("an email and a card split across chunks never show in any event or in the stored thread", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({
        types: ["email", "credit_card"],
        strategy: "redact",
        applyToInput: false,
        applyToOutput: true
      })
      const agent = yield* Agent.make({ middleware: [pii] })
      const events = yield* collect(agent.stream("hi", { threadId: "t" }))
      const expected = "Write to [REDACTED_EMAIL], card [REDACTED_CREDIT_CARD] today"
      const deltas = deltasOf(events)
      assert.strictEqual(deltas.join(""), expected)
      assert.deepStrictEqual(deltas, ["Write to ", "[REDACTED_EMAIL], card ", "[REDACTED_CREDIT_CARD] ", "today"])
      for (const event of events) {
        const shown = JSON.stringify(event)
        for (const raw of ["ada@", "example", "4111", "1111", "exa"]) assert.notInclude(shown, raw, event._tag)
      }
      const responded = events.find(AgentEvent.$is("ModelResponded"))!
      assert.strictEqual(textOf(responded.message), expected)
      const decisions = events.filter(AgentEvent.$is("MiddlewareDecision"))
      assert.deepStrictEqual(
        decisions.map(({ data, decision, hook, middleware }) => ({ middleware, hook, decision, data })),
        [{
          middleware: "pii",
          hook: "wrapModelStream",
          decision: "redacted 1 email, 1 credit_card in the streamed model output",
          data: { email: 1, credit_card: 1 }
        }]
      )
      const tags = events.map((event) => event._tag)
      assert.isTrue(tags.indexOf("MiddlewareDecision") < tags.indexOf("ModelResponded"))
      const thread = yield* agent.thread("t")
      assert.isTrue(Option.isSome(thread))
      const stored = Option.getOrThrow(thread).state.messages
      assert.deepStrictEqual(stored.map(textOf), ["hi", expected])
      assert.notInclude(JSON.stringify(stored), "ada@")
      assert.notInclude(JSON.stringify(stored), "4111")
    }).pipe(streamed([[
      ...textChunks("t0", ["Write to ada@exa", "mple.com, card 4111 11", "11 1111 1111 to", "day"]),
      finish
    ]])))

  it.effect("a model streaming 512 KB of base64 in 4-character pieces never blocks the event loop for long", () => {
    let seed = 7
    const bytes = Uint8Array.from({ length: 384 * 1024 }, () => (seed = (seed * 1103515245 + 12345) % 2147483648) >> 23)
    const base64 = Buffer.from(bytes).toString("base64")
    const pieces: Array<string> = []
    for (let at = 0; at < base64.length; at += 4) pieces.push(base64.slice(at, at + 4))
    return Effect.gen(function*() {
      const pii = Pii.middleware({ types: all, applyToInput: false, applyToOutput: true })
      const agent = yield* Agent.make({ middleware: [pii] })
      // the ticks of a 10 ms timer while the run streams, and the longest time between two
      let tick = performance.now()
      let ticks = 0
      let longest = 0
      const timer = setInterval(() => {
        const now = performance.now()
        longest = Math.max(longest, now - tick)
        tick = now
        ticks++
      }, 10)
      const started = performance.now()
      const events = yield* collect(agent.stream("hi", { threadId: "t" })).pipe(
        Effect.ensuring(Effect.sync(() => clearInterval(timer)))
      )
      const total = performance.now() - started
      longest = Math.max(longest, performance.now() - tick)
      // (before, the timer did not tick from the first part to the last: the run kept the event loop throughout)
      assert.isAtLeast(ticks, 20, `the timer ticked ${ticks} times in ${Math.round(total)} ms`)
      assert.isBelow(longest, Math.max(1000, total / 4), `the event loop was kept for ${Math.round(longest)} ms`)
      const deltas = deltasOf(events)
      assert.strictEqual(deltas.join(""), base64)
      assert.isAbove(deltas.length, 1, "the text is shown as it comes, not all at the end")
    }).pipe(streamed([[...textChunks("t0", pieces), finish]]))
  }, 120_000)

  it.effect("tool calls pass through the stream; streamed reasoning is redacted before it is stored", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({
        types: ["email"],
        strategy: "mask",
        applyToInput: false,
        applyToOutput: true
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii] })
      const events = yield* collect(agent.stream("find ada", { threadId: "t" }))
      assert.strictEqual(deltasOf(events).join(""), "Looking up ada@****.comDone")
      const started = events.find(AgentEvent.$is("ToolCallStarted"))!
      assert.deepStrictEqual(started.call.params, { name: "ada@example.com" })
      const responded = events.filter(AgentEvent.$is("ModelResponded"))
      const first = responded[0]!.message
      assert.deepStrictEqual(
        first.content.map((part) =>
          part.type === "text" || part.type === "reasoning" ? [part.type, part.text] : [part.type]
        ),
        [["reasoning", "ask about bob@****.org"], ["text", "Looking up ada@****.com"], ["tool-call"]]
      )
      const decisions = events.filter(AgentEvent.$is("MiddlewareDecision")).map((event) => [event.hook, event.decision])
      assert.deepStrictEqual(decisions, [
        ["wrapModelStream", "masked 1 email in the streamed model output"],
        ["afterModel", "masked 1 email in the model output"]
      ])
    }).pipe(streamed([
      [
        { type: "reasoning-start", id: "r0" },
        { type: "reasoning-delta", id: "r0", delta: "ask about bob@exam" },
        { type: "reasoning-delta", id: "r0", delta: "ple.org" },
        { type: "reasoning-end", id: "r0" },
        ...textChunks("t0", ["Looking up ada", "@example.com"]),
        { type: "tool-call", id: "call_1", name: "lookup", params: { name: "ada@example.com" } },
        { type: "finish", reason: "tool-calls", usage }
      ],
      [...textChunks("t1", ["Done"]), finish]
    ])))

  it.effect("a text the provider never ends is flushed, redacted, when the stream ends", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email"], strategy: "redact", applyToOutput: true })
      const agent = yield* Agent.make({ middleware: [pii] })
      const events = yield* collect(agent.stream("hi", { threadId: "t" }))
      assert.deepStrictEqual(deltasOf(events), ["to ", "[REDACTED_EMAIL]"])
    }).pipe(streamed([[
      { type: "text-delta", id: "t0", delta: "to ada@" },
      { type: "text-delta", id: "t0", delta: "example.com" },
      finish
    ]])))

  it.effect("afterModel still checks text a wrap hook put in the reply after the stream", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email"], strategy: "redact", applyToOutput: true })
      const signature = Middleware.make({
        name: "signature",
        wrapModelCall: (request, next) =>
          Effect.map(next(request), (response) => ({
            ...response,
            message: Prompt.makeMessage("assistant", {
              content: [...response.message.content, Prompt.makePart("text", { text: " (from bob@example.org)" })]
            })
          }))
      })
      const agent = yield* Agent.make({ middleware: [signature, pii] })
      const events = yield* collect(agent.stream("hi", { threadId: "t" }))
      assert.deepStrictEqual(deltasOf(events), ["to ", "[REDACTED_EMAIL]"])
      const responded = events.find(AgentEvent.$is("ModelResponded"))!
      assert.strictEqual(textOf(responded.message), "to [REDACTED_EMAIL] (from [REDACTED_EMAIL])")
      assert.deepStrictEqual(events.filter(AgentEvent.$is("MiddlewareDecision")).map((event) => event.decision), [
        "redacted 1 email in the streamed model output",
        "redacted 1 email in the model output"
      ])
    }).pipe(streamed([[...textChunks("t0", ["to ada@", "example.com"]), finish]])))

  it.effect("a failed attempt never shows its held-back text, and the retry starts afresh", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email"], strategy: "redact", applyToOutput: true })
      const retryOnce = Middleware.make({
        name: "retryOnce",
        wrapModelCall: (request, next) => Effect.catchAll(next(request), () => next(request))
      })
      const agent = yield* Agent.make({ middleware: [retryOnce, pii] })
      const events = yield* collect(agent.stream("hi", { threadId: "t" }))
      assert.deepStrictEqual(
        events.flatMap((event) =>
          event._tag === "TextDelta" ? [event.delta] : event._tag === "ModelAttemptFailed" ? [event._tag] : []
        ),
        ["mail ", "ModelAttemptFailed", "mail ", "[REDACTED_EMAIL] ", "now"]
      )
      const result = events.flatMap((event) => event._tag === "RunEnded" ? [event.result] : [])[0]
      assert.strictEqual(result?._tag === "Completed" ? result.text : undefined, "mail [REDACTED_EMAIL] now")
    }).pipe(Effect.provide(chunkedModel([
      Stream.concat(
        Stream.fromIterable(textChunks("t0", ["mail ada@exa"]).slice(0, 2)),
        Stream.fail(new AiError.UnknownError({ module: "Test", method: "streamText", description: "cut" }))
      ),
      Stream.fromIterable([...textChunks("t0", ["mail ada@exa", "mple.com now"]), finish])
    ]))))

  it.effect("block fails a streamed run with PiiDetected before the value is shown, and stores nothing", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({
        types: ["email", "credit_card"],
        strategy: "block",
        applyToInput: false,
        applyToOutput: true
      })
      const agent = yield* Agent.make({ middleware: [pii] })
      const shown: Array<AgentEvent.AgentEvent<any>> = []
      const error = yield* agent.stream("hi", { threadId: "t" }).pipe(
        Stream.runForEach((event) => Effect.sync(() => shown.push(event))),
        Effect.flip
      )
      assert.strictEqual(error._tag, "PiiDetected")
      if (error._tag !== "PiiDetected") return
      assert.deepStrictEqual(
        { piiType: error.piiType, types: error.types, count: error.count, location: error.location },
        { piiType: "email", types: ["email"], count: 1, location: "stream" }
      )
      assert.strictEqual(error.message, "Detected 1 instance(s) of email in the streamed model output")
      assert.deepStrictEqual(deltasOf(shown), ["Write to "])
      const failed = shown.find(AgentEvent.$is("ModelAttemptFailed"))!
      assert.strictEqual(failed.error, "PiiDetected")
      assert.notInclude(JSON.stringify(shown), "ada@")
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
    }).pipe(streamed([[
      ...textChunks("t0", ["Write to ada@exa", "mple.com, card 4111 11", "11 1111 1111 to", "day"]),
      finish
    ]])))

  for (const strategy of ["redact", "mask", "hash"] as const) {
    it.effect.prop(
      `whatever the chunking, the shown and the stored reply are the redacted text (${strategy})`,
      [replyWithCuts],
      ([{ chunks, text }]) =>
        Effect.gen(function*() {
          const pii = Pii.middleware({ types: streamTypes, strategy, applyToInput: false, applyToOutput: true })
          const agent = yield* Agent.make({ middleware: [pii] })
          const events = yield* collect(agent.stream("hi", { threadId: "t" }))
          const expected = compile({ types: streamTypes, strategy }).redact(text).text
          assert.strictEqual(deltasOf(events).join(""), expected)
          const responded = events.find(AgentEvent.$is("ModelResponded"))!
          assert.strictEqual(textOf(responded.message), expected)
        }).pipe(streamed([[...textChunks("t0", chunks), finish]])),
      { fastCheck: { numRuns: 40 } }
    )
  }
})

// -----------------------------------------------------------------------------
// a value split across text parts of one message
// -----------------------------------------------------------------------------

const textParts = (message: Prompt.Message | undefined): Array<string> =>
  message === undefined || message.role === "system" || message.role === "tool"
    ? []
    : message.content.flatMap((part) => part.type === "text" ? [part.text] : [])

const splitInput = (texts: ReadonlyArray<string>): Prompt.RawInput => [{
  role: "user",
  content: texts.map((text) => ({ type: "text", text }))
}]

/** Splits a text at the given cut points (sorted, deduplicated, 0 and the length left out). */
const splitAt = (text: string, cuts: ReadonlyArray<number>): Array<string> => {
  const points = [...new Set(cuts.filter((cut) => cut > 0 && cut < text.length))].sort((a, b) => a - b)
  return [0, ...points].map((from, i) => text.slice(from, points[i] ?? text.length))
}

describe("a value split across text parts of one message", () => {
  it.effect("in the input, an email and a card split across parts are redacted in the part where they start", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email", "credit_card"], strategy: "redact" })
      const agent = yield* Agent.make({ middleware: [pii] })
      yield* agent.run(splitInput(["mail ada@exa", "mple.com, card 4111 1111 ", "1111 1111 ok"]), { threadId: "t" })
      const stored = Option.getOrThrow(yield* agent.thread("t")).state.messages
      assert.deepStrictEqual(textParts(stored[0]), ["mail [REDACTED_EMAIL]", ", card [REDACTED_CREDIT_CARD]", " ok"])
      const [request] = yield* ScriptedModel.requests
      assert.deepStrictEqual(textParts(request!.prompt.content[0]), textParts(stored[0]))
      assert.notInclude(JSON.stringify(stored), "mple.com")
      assert.notInclude(JSON.stringify(stored), "1111 1111")
    }).pipe(provide([ScriptedModel.text("ok")])))

  it.effect("a part a match covers whole is dropped; parts with no match keep their text", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email"], strategy: "mask" })
      const agent = yield* Agent.make({ middleware: [pii] })
      const result = yield* agent.run(splitInput(["hi ", "ada@", "example", ".com", " bye"]), { threadId: "t" })
      assert.deepStrictEqual(textParts(result.state.messages[0]), ["hi ", "ada@****.com", " bye"])
    }).pipe(provide([ScriptedModel.text("ok")])))

  it.effect("block finds a value split across input parts", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email"], strategy: "block" })
      const agent = yield* Agent.make({ middleware: [pii] })
      const error = yield* Effect.flip(agent.run(splitInput(["mail ada@exa", "mple.com"]), { threadId: "t" }))
      assert.strictEqual(error._tag, "PiiDetected")
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(provide([ScriptedModel.text("ok")])))

  it.effect("in a model reply (not streamed), an email and a card split across text parts are redacted", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({
        types: ["email", "credit_card"],
        strategy: "redact",
        applyToInput: false,
        applyToOutput: true
      })
      const agent = yield* Agent.make({ middleware: [pii] })
      const result = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const reply = result.state.messages[1]
      assert.deepStrictEqual(textParts(reply), ["Write to [REDACTED_EMAIL]", ", card [REDACTED_CREDIT_CARD]", " today"])
      assert.notInclude(JSON.stringify(result.state.messages), "mple.com")
      assert.notInclude(JSON.stringify(result.state.messages), "1111 1111")
    }).pipe(provide([[
      { type: "text", text: "Write to ada@exa" },
      { type: "text", text: "mple.com, card 4111 11" },
      { type: "text", text: "11 1111 1111 today" },
      { type: "finish", reason: "stop", usage: ScriptedModel.defaultUsage }
    ]])))

  for (const strategy of ["redact", "mask", "hash"] as const) {
    it.effect.prop(
      `for any split of the input into text parts, the stored parts join to the redacted whole text (${strategy})`,
      [
        texts.filter((text) => text.trim().length > 0).chain((text) =>
          FastCheck.array(FastCheck.nat({ max: text.length }), { maxLength: 6 }).map((cuts) => splitAt(text, cuts))
        )
      ],
      ([texts]) =>
        Effect.gen(function*() {
          const pii = Pii.middleware({ types: streamTypes, strategy })
          const agent = yield* Agent.make({ middleware: [pii] })
          const result = yield* agent.run(splitInput(texts), { threadId: "t" })
          const stored = textParts(result.state.messages[0])
          assert.strictEqual(stored.join(""), compile({ types: streamTypes, strategy }).redact(texts.join("")).text)
          assert.isAtMost(stored.length, texts.length)
        }).pipe(provide([ScriptedModel.text("ok")])),
      { fastCheck: { numRuns: 40 } }
    )
  }
})

describe("a value split across streamed text parts of one reply", () => {
  const piiOut = (strategy: Pii.Strategy) =>
    Pii.middleware({ types: ["email", "credit_card"], strategy, applyToInput: false, applyToOutput: true })

  it.effect("an email split across two text parts is redacted, in no event and not stored raw", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [piiOut("redact")] })
      const events = yield* collect(agent.stream("hi", { threadId: "t" }))
      assert.deepStrictEqual(deltasOf(events), ["Write to ", "[REDACTED_EMAIL] ", "today"])
      for (const event of events) assert.notInclude(JSON.stringify(event), "exa", event._tag)
      const stored = Option.getOrThrow(yield* agent.thread("t")).state.messages
      // the held-back start of the address moves into the next part, which goes on with it
      assert.deepStrictEqual(textParts(stored[1]), ["Write to ", "[REDACTED_EMAIL] today"])
      assert.notInclude(JSON.stringify(stored), "exa")
    }).pipe(streamed([[...textChunks("t0", ["Write to ada@exa"]), ...textChunks("t1", ["mple.com today"]), finish]])))

  it.effect("a part wholly held back and carried on is dropped, not stored empty", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [piiOut("mask")] })
      const events = yield* collect(agent.stream("hi", { threadId: "t" }))
      assert.deepStrictEqual(deltasOf(events), ["ada@****.com"])
      const stored = Option.getOrThrow(yield* agent.thread("t")).state.messages
      assert.deepStrictEqual(textParts(stored[1]), ["ada@****.com"])
    }).pipe(streamed([
      [...textChunks("t0", ["ada@"]), ...textChunks("t1", ["example"]), ...textChunks("t2", [".com"]), finish]
    ])))

  it.effect("a held-back tail before a tool call is flushed into the part it belongs to", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [piiOut("redact")] })
      const events = yield* collect(agent.stream("find ada", { threadId: "t" }))
      const first = events.filter(AgentEvent.$is("ModelResponded"))[0]!.message
      assert.deepStrictEqual(first.content.map((part) => part.type === "text" ? part.text : part.type), [
        "see [REDACTED_EMAIL]",
        "tool-call"
      ])
    }).pipe(streamed([
      [
        ...textChunks("t0", ["see ada@exa", "mple.com"]),
        { type: "tool-call", id: "call_1", name: "lookup", params: { name: "ada" } },
        { type: "finish", reason: "tool-calls", usage }
      ],
      [...textChunks("t1", ["Done"]), finish]
    ])))

  it.effect("block fails when the value is split across two text parts, before any of it is shown", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [piiOut("block")] })
      const shown: Array<AgentEvent.AgentEvent<any>> = []
      const error = yield* agent.stream("hi", { threadId: "t" }).pipe(
        Stream.runForEach((event) => Effect.sync(() => shown.push(event))),
        Effect.flip
      )
      assert.strictEqual(error._tag, "PiiDetected")
      assert.deepStrictEqual(deltasOf(shown), ["Write to "])
    }).pipe(streamed([[...textChunks("t0", ["Write to ada@exa"]), ...textChunks("t1", ["mple.com today"]), finish]])))

  /** A reply's chunks, grouped into consecutive text parts at random. */
  const replyWithParts = replyWithCuts.chain(({ chunks, text }) =>
    FastCheck.array(FastCheck.boolean(), { minLength: chunks.length, maxLength: chunks.length }).map((newPart) => {
      const parts: Array<Array<string>> = []
      chunks.forEach((chunk, i) => {
        if (i === 0 || newPart[i]) parts.push([])
        parts[parts.length - 1]!.push(chunk)
      })
      return { parts, text }
    })
  )

  for (const strategy of ["redact", "mask", "hash"] as const) {
    it.effect.prop(
      `for any chunking and any split into text parts, shown and stored replies are the redacted whole (${strategy})`,
      [replyWithParts],
      ([{ parts, text }]) =>
        Effect.gen(function*() {
          const pii = Pii.middleware({ types: streamTypes, strategy, applyToInput: false, applyToOutput: true })
          const agent = yield* Agent.make({ middleware: [pii] })
          const events = yield* collect(agent.stream("hi", { threadId: "t" }))
          const expected = compile({ types: streamTypes, strategy }).redact(text).text
          assert.strictEqual(deltasOf(events).join(""), expected)
          const stored = textParts(Option.getOrThrow(yield* agent.thread("t")).state.messages[1])
          assert.strictEqual(stored.join(""), expected)
          assert.isAtMost(stored.length, parts.length)
          assert.notInclude(stored, "")
        }).pipe(streamed([[...parts.flatMap((chunks, i) => textChunks(`t${i}`, chunks)), finish]])),
      { fastCheck: { numRuns: 40 } }
    )
  }
})

// -----------------------------------------------------------------------------
// what a person types (HumanInTheLoop)
// -----------------------------------------------------------------------------

describe("a person's answers to HumanInTheLoop", () => {
  const typed = "call me on ada@example.com, card 4111 1111 1111 1111"

  /** Resumes `t` with the decisions `decide` builds from the actions of the request it waits on. */
  const decideWith = <S, E, O>(
    agent: Agent.Service<S, E, O>,
    decide: (action: HumanInTheLoop.ActionRequest) => HumanInTheLoop.Decision
  ) =>
    Effect.gen(function*() {
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      const request = Option.getOrThrow(Option.flatMap(thread.pending, approvalOf))
      return yield* agent.resume("t", request.actionRequests.map(decide))
    })

  const cases = [
    ["respond", (action: HumanInTheLoop.ActionRequest) => HumanInTheLoop.respond(action, typed)],
    ["reject", (action: HumanInTheLoop.ActionRequest) => HumanInTheLoop.reject(action, typed)]
  ] as const

  /** A middleware that keeps every text its afterModel hook sees, to check no hook sees a person's raw answer. */
  const spy = (seen: Array<string>) =>
    Middleware.make({
      name: "spy",
      afterModel: ({ messages }) => Effect.sync(() => void seen.push(JSON.stringify(messages)))
    })

  for (const [kind, decide] of cases) {
    for (const applyToToolResults of [false, true]) {
      for (const order of ["pii first", "pii last"] as const) {
        it.effect(
          `${kind}: neither the stored thread nor any later hook holds the card or the email a person typed ` +
            `(applyToToolResults: ${applyToToolResults}, ${order})`,
          () =>
            Effect.gen(function*() {
              const pii = Pii.middleware({ types: ["email", "credit_card"], applyToToolResults })
              const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { lookup: true } })
              const seen: Array<string> = []
              const agent = yield* Agent.make({
                toolkit: Tools,
                middleware: order === "pii first" ? [spy(seen), pii, hitl] : [spy(seen), hitl, pii]
              })
              assert.strictEqual((yield* agent.run("look ada up", { threadId: "t" }))._tag, "Interrupted")
              const result = yield* decideWith(agent, decide)
              assert.strictEqual(result._tag, "Completed")
              const stored = JSON.stringify(Option.getOrThrow(yield* agent.thread("t")).state.messages)
              assert.notInclude(stored, "ada@example.com")
              assert.notInclude(stored, "4111")
              assert.include(stored, "[REDACTED_EMAIL]")
              assert.include(stored, "[REDACTED_CREDIT_CARD]")
              for (const view of seen) {
                assert.notInclude(view, "ada@example.com")
                assert.notInclude(view, "4111")
              }
            }).pipe(
              provide([
                ScriptedModel.toolCalls([{ name: "lookup", params: { name: "ada" } }]),
                ScriptedModel.text("ok")
              ])
            )
        )
      }
    }
  }

  it.effect("an answer from an Approvals service is redacted too", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email", "credit_card"] })
      const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { lookup: true } })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii, hitl] })
      const result = yield* agent.run("look ada up", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const stored = JSON.stringify(Option.getOrThrow(yield* agent.thread("t")).state.messages)
      assert.notInclude(stored, "ada@example.com")
      assert.include(stored, "[REDACTED_CREDIT_CARD]")
    }).pipe(
      provide([ScriptedModel.toolCalls([{ name: "lookup", params: { name: "ada" } }]), ScriptedModel.text("ok")]),
      Effect.provide(
        HumanInTheLoop.layerApprovals((request) =>
          Effect.succeed(request.actionRequests.map((action) => HumanInTheLoop.respond(action, typed)))
        )
      )
    ))

  it.effect("with \"block\", a person's answer holding an email fails the resume with PiiDetected (input)", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email", "credit_card"], strategy: "block" })
      const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { lookup: true } })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii, hitl] })
      assert.strictEqual((yield* agent.run("look someone up", { threadId: "t" }))._tag, "Interrupted")
      const error = yield* Effect.flip(decideWith(agent, (action) => HumanInTheLoop.respond(action, typed)))
      assert.strictEqual(error._tag, "PiiDetected")
      assert.strictEqual((error as Pii.PiiDetected).location, "input")
    }).pipe(
      provide([ScriptedModel.toolCalls([{ name: "lookup", params: { name: "ada" } }]), ScriptedModel.text("ok")])
    ))
})
