import { assert, describe, it } from "@effect/vitest"
import * as Secrets from "@stepwise-agent/core/Secrets"
import { Cause, Effect, FastCheck } from "effect"
import { inspect } from "node:util"

// the characters that encodings change: `+`, `/`, `=`, `%`, `&`, `\`, spaces, quotes, Latin-1, other scripts
const edge = FastCheck.constantFrom(..."aZ09+/=% ~!'-_.&\\\"<", "é", "ß", "€", "日", "🔑")
const plain = FastCheck.constantFrom(..."abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789".split(""))
/** A key of 8 to 32 characters, letters or digits at its ends, any of the edge characters inside. */
const anyKey = FastCheck.tuple(
  plain,
  FastCheck.array(FastCheck.oneof(plain, edge), { minLength: 6, maxLength: 30 }),
  plain
).map(([first, middle, last]) => `${first}${middle.join("")}${last}`)

const hex = (code: number, digits: number) => code.toString(16).padStart(digits, "0")
const utf8 = (text: string) => [...new TextEncoder().encode(text)]

/** The encodings a gateway, a log or a proxy may wrap a key in, any number of times, in any order. */
const encodings = {
  "percent": (text: string) => encodeURIComponent(text),
  "percent, lower case": (text: string) =>
    encodeURIComponent(text).replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase()),
  "percent, every byte": (text: string) => utf8(text).map((byte) => `%${hex(byte, 2).toUpperCase()}`).join(""),
  "form (+ for a space)": (text: string) => new URLSearchParams([["", text]]).toString().slice(1),
  "base64": (text: string) => Buffer.from(text).toString("base64"),
  "base64url, no padding": (text: string) => Buffer.from(text).toString("base64url"),
  "JSON string": (text: string) => JSON.stringify(text).slice(1, -1),
  // (each UTF-16 unit: a surrogate pair is two escapes)
  "JSON string, every character \\u": (text: string) =>
    text.split("").map((unit) => `\\u${hex(unit.charCodeAt(0), 4)}`).join(""),
  // (JSON's escapes kept, but `\"` as `\u0022`: escaping the quote alone left its backslash, a text that is no
  // JSON string of the key, `"` → `\\u0022`)
  "JSON string, \\u upper case": (text: string) =>
    JSON.stringify(text).slice(1, -1).replace(
      /\\.|[^A-Za-z0-9]/g,
      (match) =>
        match === "\\\"" ? "\\u0022" : match.length === 2 ? match : `\\u${hex(match.charCodeAt(0), 4).toUpperCase()}`
    ),
  "JavaScript \\u{…}": (text: string) => [...text].map((char) => `\\u{${char.codePointAt(0)!.toString(16)}}`).join(""),
  "HTML entities": (text: string) =>
    text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(
      /'/g,
      "&#39;"
    ),
  "HTML, every character numeric": (text: string) => [...text].map((char) => `&#${char.codePointAt(0)};`).join(""),
  "HTML, every character hex": (text: string) =>
    [...text].map((char) => `&#x${char.codePointAt(0)!.toString(16)};`).join("")
} as const
type Encoding = keyof typeof encodings
const anyEncoding = FastCheck.constantFrom(...Object.keys(encodings) as Array<Encoding>)

/** The key, then each encoding wrapped around the one before. */
const layered = (key: string, chain: ReadonlyArray<Encoding>): Array<string> =>
  chain.reduce((stages, name) => [...stages, encodings[name](stages[stages.length - 1]!)], [key])

/** Where a text quoting the key stands: as a log line, a JSON body, a query, an HTML page, a header, glued to words. */
const contexts = FastCheck.constantFrom(
  (quoted: string) => `upstream said: ${quoted} is not valid`,
  (quoted: string) => `{"error":{"message":"bad key","echo":"${quoted}"}} is not valid`,
  (quoted: string) => `GET /v1/models?q=${quoted}&alt=json is not valid`,
  (quoted: string) => `<p>${quoted}</p> is not valid`,
  (quoted: string) => `X-Echo: ${quoted}\r\nis not valid`,
  (quoted: string) => `abc${quoted}xyz is not valid`
)

/** Every way a sink writes a text or an object that holds it. */
const sinks = (value: unknown): Array<string> => {
  const scrubbed = Secrets.scrubError(value)
  return [
    Secrets.messageOf(value),
    JSON.stringify(scrubbed) ?? "",
    inspect(scrubbed, { depth: 8 }),
    Cause.pretty(Secrets.scrubCause(Cause.fail(value))),
    Cause.pretty(Secrets.scrubCause(Cause.die(value)))
  ]
}

/**
 * Registers `key`, quotes it under `chain` in `context`, and checks that no stage of it (the key, each encoding)
 * comes out of any scrubber or sink; what they wrote.
 */
const noStageComesOut = (
  { chain, context, key }: { key: string; chain: ReadonlyArray<Encoding>; context: (quoted: string) => string }
) =>
  Effect.gen(function*() {
    yield* Secrets.register(key)
    const stages = layered(key, chain)
    const text = context(stages[stages.length - 1]!)
    const outputs = [
      Secrets.scrubText(text),
      Secrets.scrubToolResult({ result: { output: text }, isFailure: false }).result.output,
      ...sinks(new Error(text)),
      ...sinks({ body: text })
    ]
    for (const output of outputs) {
      for (const stage of stages) assert.notInclude(output, stage, `${JSON.stringify(key)}: ${chain.join(" → ")}`)
    }
    return outputs
  })

describe("Secrets: a known key under layers of encoding", () => {
  it.effect.prop(
    "a registered key wrapped in up to four encodings, in any order, comes out of no sink, nor any of its encodings",
    {
      key: anyKey,
      chain: FastCheck.array(anyEncoding, { minLength: 1, maxLength: 4 }),
      context: contexts
    },
    (quoted) =>
      Effect.gen(function*() {
        const outputs = yield* noStageComesOut(quoted)
        const { chain } = quoted
        // what is around the key stays
        for (const output of outputs.slice(0, 3)) assert.include(output, "is not valid", chain.join(" → "))
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 200 }, timeout: 120_000 }
  )

  it.scoped("each encoding, and compositions the simple forms missed, are replaced whole", () =>
    Effect.gen(function*() {
      const key = "Zx9q+Wv3/LmN7 pRt2=YbK5s%é"
      yield* Secrets.register(key)
      const chains: Array<Array<Encoding>> = [
        ...Object.keys(encodings).map((name) => [name as Encoding]),
        ["percent", "percent", "percent"],
        ["percent", "percent", "percent", "percent", "percent", "percent", "percent", "percent"],
        ["percent, lower case", "percent", "percent, lower case"],
        ["base64", "percent"],
        ["percent", "base64"],
        ["base64", "base64"],
        ["base64url, no padding", "percent, every byte", "base64"],
        ["JSON string, every character \\u", "HTML entities"],
        ["HTML entities", "HTML entities", "HTML entities"],
        ["form (+ for a space)", "form (+ for a space)"],
        ["HTML, every character hex", "JSON string", "percent", "base64"]
      ]
      for (const chain of chains) {
        const stages = layered(key, chain)
        const scrubbed = Secrets.scrubText(`the proxy logged [${stages[stages.length - 1]}] here`)
        assert.strictEqual(scrubbed, `the proxy logged [${Secrets.redacted}] here`, chain.join(" → "))
        assert.strictEqual(Secrets.scrubText(scrubbed), scrubbed, chain.join(" → "))
      }
    }))

  it.scoped("a key with a quote, as a JSON string of \\u escapes, percent-encoded (a random CI-like run's case)", () =>
    Effect.gen(function*() {
      const key = "aaaaa\"\\a"
      // the encoding gives a JSON string of the key (it gave `aaaaa\\u0022\\a`: a backslash too many)
      assert.strictEqual(JSON.parse(`"${encodings["JSON string, \\u upper case"](key)}"`), key)
      yield* Secrets.register(key)
      const stages = layered(key, ["JSON string, \\u upper case", "percent"])
      const scrubbed = Secrets.scrubText(`upstream said: ${stages[stages.length - 1]} is not valid`)
      assert.strictEqual(scrubbed, `upstream said: ${Secrets.redacted} is not valid`)
    }))

  it.scoped("a key that holds escapes itself (%41, &amp;, \\u0041) is found however many times it is encoded", () =>
    Effect.gen(function*() {
      for (const key of ["ab%41cd%2Fef%zz", "tok&amp;en&lt;1234", "k\\u0041y\\\\value99"]) {
        yield* Secrets.register(key)
        for (const chain of [["percent"], ["percent", "percent", "percent"], ["base64", "percent"]] as const) {
          const stages = layered(key, chain)
          const scrubbed = Secrets.scrubText(`echo ${stages[stages.length - 1]} here`)
          for (const stage of stages) assert.notInclude(scrubbed, stage, `${key}: ${chain.join(" → ")}`)
        }
      }
    }))

  it.scoped("a key with a backslash and a quote, HTML-escaped twice, then percent-encoded (a CI run's case)", () =>
    Effect.gen(function*() {
      // the one pass that reads every kind of escape read the key's own `\\a` as an escape of `a`
      const key = "aa\\aaa\"a"
      yield* Secrets.register(key)
      const stages = layered(key, ["HTML entities", "HTML entities", "percent"])
      const scrubbed = Secrets.scrubText(`upstream said: ${stages[stages.length - 1]} is not valid`)
      assert.strictEqual(scrubbed, `upstream said: ${Secrets.redacted} is not valid`)
    }))

  it.effect.prop(
    "a key that holds escape-like text itself (\\a, %41, &quot;, \\u0041), under up to four encodings, comes out of no sink",
    {
      key: FastCheck.tuple(
        plain,
        FastCheck.array(
          FastCheck.oneof(
            plain,
            FastCheck.constantFrom(
              "\\",
              "\\a",
              "\\n",
              "\\u0041",
              "%41",
              "%2541",
              "%zz",
              "&quot;",
              "&amp;",
              "&#65;",
              "\"",
              "&"
            )
          ),
          { minLength: 3, maxLength: 12 }
        ),
        plain
      ).map(([first, middle, last]) => `${first}${middle.join("")}${last}`).filter((key) => key.length >= 8),
      chain: FastCheck.array(anyEncoding, { minLength: 1, maxLength: 4 }),
      context: contexts
    },
    (quoted) => Effect.scoped(Effect.asVoid(noStageComesOut(quoted))),
    { fastCheck: { numRuns: 200 }, timeout: 120_000 }
  )

  it.scoped("text without a known key is left as it is, escapes and base64 included", () =>
    Effect.gen(function*() {
      yield* Secrets.register("Zx9qWv3LmN7pRt2YbK5s")
      for (
        const text of [
          "GET /search?q=caf%C3%A9%20cr%C3%A8me&page=2",
          "&lt;b&gt;bold&lt;/b&gt; \\u00e9t\\u00e9 %252F",
          `data: ${Buffer.from("a perfectly ordinary sentence").toString("base64")}`,
          "international-standardization internationalisation"
        ]
      ) assert.strictEqual(Secrets.scrubText(text), text)
    }))
})

describe("Secrets: no encoded input blocks the process", () => {
  it.scoped("a megabyte of nested escapes or base64 takes linear time", () =>
    Effect.gen(function*() {
      const key = "Zx9qWv3LmN7pRt2YbK5s"
      yield* Secrets.register(key)
      let nested = `${key} hello`
      for (let i = 0; i < 12; i++) nested = Buffer.from(nested).toString("base64")
      const inputs = {
        "%25%25%25…": "%25".repeat(350_000),
        "%252525…41": `%${"25".repeat(500_000)}41`,
        "&amp;amp;…": `&${"amp;".repeat(250_000)}lt;`,
        "\\\\\\\\…": "\\".repeat(1_000_000),
        "\\u0025…": "\\u0025".repeat(170_000),
        "%41&#65;\\u0041…": "%41&#65;\\u0041".repeat(70_000),
        "base64 of a megabyte": Buffer.from("a".repeat(750_000)).toString("base64"),
        "base64, twelve times": nested,
        "alternating %2 and 5": "%2%5".repeat(250_000),
        "a key at the end": `${"%25".repeat(300_000)}${encodeURIComponent(encodeURIComponent(key))}`
      }
      for (const [name, text] of Object.entries(inputs)) {
        const started = performance.now()
        const scrubbed = Secrets.scrubText(text)
        const elapsed = performance.now() - started
        assert.isBelow(elapsed, 5_000, name)
        assert.notInclude(scrubbed, key, name)
      }
    }), 120_000)
})
