import { assert, describe, it } from "@effect/vitest"
import * as Secrets from "@stepwise-agent/core/Secrets"
import { Cause, Effect, FastCheck } from "effect"
import { inspect } from "node:util"

const plain = FastCheck.constantFrom(..."abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789".split(""))
const word = (min: number, max: number) =>
  FastCheck.array(plain, { minLength: min, maxLength: max }).map((chars) => chars.join(""))
const hex = (code: number, digits: number) => code.toString(16).padStart(digits, "0")
const utf8 = (text: string) => [...new TextEncoder().encode(text)]

/** The encodings a gateway, a log or a proxy may wrap a key in. */
const encodings: Record<string, (text: string) => string> = {
  "as is": (text) => text,
  "percent, every byte": (text) => utf8(text).map((byte) => `%${hex(byte, 2).toUpperCase()}`).join(""),
  "percent twice": (text) => encodeURIComponent(encodeURIComponent(text)),
  "JSON in JSON": (text) => JSON.stringify(JSON.stringify(text)).slice(1, -1),
  "JSON, every character \\u": (text) => text.split("").map((unit) => `\\u${hex(unit.charCodeAt(0), 4)}`).join(""),
  "HTML, every character hex": (text) => [...text].map((char) => `&#x${char.codePointAt(0)!.toString(16)};`).join(""),
  "base64": (text) => Buffer.from(text).toString("base64"),
  "base64url after a prefix, glued": (text) => `QUJD${Buffer.from(`user:${text}`).toString("base64url")}xyz`,
  "base64 of its percent-encoding": (text) => Buffer.from(encodeURIComponent(text)).toString("base64")
}
const anyEncoding = FastCheck.constantFrom(...Object.keys(encodings))

/** Every way a sink writes a text or an object that holds it. */
const sinks = (text: string): Array<string> => {
  const error = new Error(text)
  const scrubbed = Secrets.scrubError(error)
  return [
    Secrets.scrubText(text),
    Secrets.messageOf(error),
    JSON.stringify(Secrets.scrubError({ body: text })),
    inspect(scrubbed, { depth: 8 }),
    Cause.pretty(Secrets.scrubCause(Cause.fail(error))),
    JSON.stringify(Secrets.scrubToolResult({ result: { output: text }, isFailure: false }).result)
  ]
}

/** Keys enough that their forms are more than one pattern holds (the known credentials are found another way). */
const manyKeys = (count: number, tag: string) =>
  Array.from({ length: count }, (_, i) => `${tag}-${i.toString(36)}-Qm7vX2pL+/é${i}`)

describe("Secrets: adversarial keys", () => {
  it.effect.prop(
    "a key with accented letters, registered composed (NFC) or decomposed (NFD), is found written the other way",
    {
      head: word(4, 8),
      accents: FastCheck.array(FastCheck.constantFrom("é", "ü", "ñ", "å", "ç", "ễ", "Å"), {
        minLength: 1,
        maxLength: 4
      }),
      tail: word(4, 8),
      registered: FastCheck.constantFrom("NFC", "NFD"),
      encoding: anyEncoding
    },
    ({ accents, encoding, head, registered, tail }) =>
      Effect.gen(function*() {
        const key = `${head}${accents.join("")}${tail}`
        const shown = key.normalize(registered === "NFC" ? "NFD" : "NFC")
        yield* Secrets.register(key.normalize(registered))
        const quoted = encodings[encoding]!(shown)
        for (const output of sinks(`gateway said: ${quoted} is not valid`)) {
          assert.notInclude(output.normalize("NFC"), key.normalize("NFC"), `${registered}, ${encoding}`)
          assert.notInclude(output, quoted, `${registered}, ${encoding}`)
          assert.include(output, "is not valid")
        }
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 40 }, timeout: 60_000 }
  )

  it.effect.prop(
    "two known keys that overlap (one's end is the other's start), written joined, leave no part of either",
    {
      first: word(4, 10),
      shared: word(1, 10),
      last: word(4, 10),
      encoding: anyEncoding,
      many: FastCheck.boolean()
    },
    ({ encoding, first, last, many, shared }) =>
      Effect.gen(function*() {
        const one = `${first}${shared}`.padEnd(8, "1")
        const other = `${shared}${last}`.padStart(8, "2")
        if (many) yield* Secrets.register(...manyKeys(60, "other"))
        yield* Secrets.register(one, other)
        // the text holds both, joined where they overlap: `first shared last`
        const joined = one.endsWith(shared) && other.startsWith(shared)
          ? `${one}${other.slice(shared.length)}`
          : `${one}${other}`
        const text = `a proxy logged [${encodings[encoding]!(joined)}] here`
        for (const output of sinks(text)) {
          assert.notInclude(output, one, encoding)
          assert.notInclude(output, other, encoding)
          assert.include(output, "] here")
        }
        // nothing of either is left (before, the second's rest past the first was: `<redacted>zyxw`); base64 glued to
        // letters takes some of them along
        if (!encoding.includes("glued")) {
          assert.strictEqual(
            Secrets.scrubText(text).replace(/\\*"/g, ""),
            `a proxy logged [${Secrets.redacted}] here`,
            encoding
          )
        }
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 40 }, timeout: 60_000 }
  )

  it.scoped("a key registered decomposed (8 characters) is found composed (7 characters)", () =>
    Effect.gen(function*() {
      const key = "abcde\u0301fg"
      yield* Secrets.register(key)
      assert.strictEqual(Secrets.scrubText(`x ${key.normalize("NFC")} y`), `x ${Secrets.redacted} y`)
      assert.strictEqual(
        Secrets.scrubText(`x ${encodeURIComponent(key.normalize("NFC"))} y`),
        `x ${Secrets.redacted} y`
      )
    }))

  it.scoped("a key that ends where another starts: the second's rest is not left behind (fixed case)", () =>
    Effect.gen(function*() {
      yield* Secrets.register("abcdefgh12345678", "12345678zyxwvuts")
      assert.strictEqual(Secrets.scrubText("x abcdefgh12345678zyxwvuts y"), `x ${Secrets.redacted} y`)
      assert.strictEqual(Secrets.scrubText("x %2561bcdefgh12345678zyxwvuts y"), `x ${Secrets.redacted} y`)
    }))

  it.effect.prop(
    "with many keys registered (more forms than one pattern holds), any of them, encoded, comes out of no sink",
    {
      index: FastCheck.integer({ min: 0, max: 59 }),
      encoding: anyEncoding,
      accented: FastCheck.boolean()
    },
    ({ accented, encoding, index }) =>
      Effect.gen(function*() {
        const keys = manyKeys(60, "tenant")
        yield* Secrets.register(...keys)
        const key = accented ? keys[index]!.normalize("NFD") : keys[index]!
        const quoted = encodings[encoding]!(key)
        for (const output of sinks(`upstream said: ${quoted} is not valid`)) {
          assert.notInclude(output.normalize("NFC"), keys[index]!, encoding)
          assert.notInclude(output, quoted, encoding)
          assert.include(output, "is not valid")
        }
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 40 }, timeout: 60_000 }
  )

  it.scoped(
    "ten thousand keys registered at once: the first scrubbing does not block (it took 30 s and more)",
    () =>
      Effect.gen(function*() {
        const keys = manyKeys(10_000, "bulk")
        yield* Secrets.register(...keys)
        const start = performance.now()
        const scrubbed = Secrets.scrubText(`a ${keys[9_999]} b ${encodeURIComponent(keys[0]!)} c`)
        const elapsed = performance.now() - start
        assert.strictEqual(scrubbed, `a ${Secrets.redacted} b ${Secrets.redacted} c`)
        assert.isBelow(elapsed, 15_000)
      }),
    120_000
  )

  it.scoped(
    "with many keys known, text that follows a long key at every place is read in linear time",
    () =>
      Effect.gen(function*() {
        yield* Secrets.register(...manyKeys(60, "tenant"), `${"a".repeat(1_000)}b`, "ab".repeat(100))
        for (const text of ["a".repeat(1 << 20), "ab".repeat(1 << 19)]) {
          const start = performance.now()
          const scrubbed = Secrets.scrubText(text)
          assert.isBelow(performance.now() - start, 10_000)
          assert.notInclude(scrubbed, "ab".repeat(100))
        }
      }),
    120_000
  )

  it.scoped("text without a known key is left as it is, with many keys known", () =>
    Effect.gen(function*() {
      yield* Secrets.register(...manyKeys(60, "tenant"), "Zx9qWv3LmN7pRt2YbK5s")
      for (
        const text of [
          "The quick brown fox jumps over the lazy dog.",
          "GET /search?q=caf%C3%A9%20cr%C3%A8me&page=2 &amp; &lt;b&gt; &lsqb;1&rsqb; \\x41\\xc3\\xa9 \\u{0041}",
          "SGVsbG8gd29ybGQsIHRoaXMgaXMgYmFzZTY0IHRleHQ= résumé café naïve 日本語 🔑",
          "tenant-1-Qm7vX2pL tenant Qm7vX2pL+/"
        ]
      ) {
        assert.strictEqual(Secrets.scrubText(text), text)
      }
    }))
})

describe("Secrets: more escapes a key is written in", () => {
  it.scoped("a key with non-ASCII letters written as Python writes bytes (\\xc3\\xa9) is found", () =>
    Effect.gen(function*() {
      const key = "clé-sécrète-ünï"
      yield* Secrets.register(key)
      const bytes = utf8(key).map((byte) => `\\x${hex(byte, 2)}`).join("")
      const upper = utf8(key).map((byte) => `\\x${hex(byte, 2).toUpperCase()}`).join("")
      assert.strictEqual(Secrets.scrubText(`b'${bytes}'`), `b'${Secrets.redacted}'`)
      assert.strictEqual(Secrets.scrubText(`error: "${upper}"`), `error: "${Secrets.redacted}"`)
      // one byte that is no UTF-8 sequence still reads as the character of its code, as JavaScript writes it
      yield* Secrets.register("pässwörd-0123")
      assert.strictEqual(Secrets.scrubText("x p\\xe4ssw\\xf6rd-0123 y"), `x ${Secrets.redacted} y`)
    }))

  it.scoped("an astral key written as entities or escapes of its UTF-16 units (&#55357;&#56593;, \\u{d83d}) is found", () =>
    Effect.gen(function*() {
      const key = "🔑key🔑secret🔑"
      yield* Secrets.register(key)
      const units = (write: (unit: number) => string) =>
        [...key].map((char) => char.length === 2 ? write(char.charCodeAt(0)) + write(char.charCodeAt(1)) : char)
          .join("")
      for (
        const text of [
          units((unit) => `&#${unit};`),
          units((unit) => `&#x${unit.toString(16).toUpperCase()};`),
          units((unit) => `\\u{${unit.toString(16)}}`),
          encodeURIComponent(units((unit) => `&#${unit};`))
        ]
      ) {
        assert.strictEqual(Secrets.scrubText(`<p>${text}</p>`), `<p>${Secrets.redacted}</p>`, text)
      }
    }))

  it.scoped("a key registered with a line break or spaces around it (read from a file) is found without them", () =>
    Effect.gen(function*() {
      yield* Secrets.register("Zq81mN0pLk3Jh7Gf5Dx\n", "  Wv3LmN7pRt2YbK5s9Q\r\n")
      assert.strictEqual(
        Secrets.scrubText("401 for Zq81mN0pLk3Jh7Gf5Dx and Wv3LmN7pRt2YbK5s9Q."),
        `401 for ${Secrets.redacted} and ${Secrets.redacted}.`
      )
      assert.strictEqual(
        Secrets.scrubText(`{"key":"${encodeURIComponent("Zq81mN0pLk3Jh7Gf5Dx")}"}`).includes("Zq81"),
        false
      )
    }))

  it.scoped("a Latin-1 key in base64 of its Latin-1 bytes (as btoa writes it) is found", () =>
    Effect.gen(function*() {
      const key = "pässwörd-ÿþ-0123"
      yield* Secrets.register(key)
      const latin1 = Buffer.from(key, "latin1")
      for (
        const quoted of [
          latin1.toString("base64"),
          latin1.toString("base64url"),
          Buffer.concat([Buffer.from("user:"), latin1]).toString("base64")
        ]
      ) {
        const scrubbed = Secrets.scrubText(`Authorization failed for ${quoted}.`)
        assert.notInclude(scrubbed, quoted.slice(8, -4))
      }
    }))

  it.scoped("HTML's names for punctuation (&lsqb;, &verbar;, &Hat;, &UnderBar;, …) and zero-padded numbers are read", () =>
    Effect.gen(function*() {
      const key = "a*b[c]d{e}f|g^h_i`j"
      yield* Secrets.register(key)
      const named: Record<string, string> = {
        "*": "&midast;",
        "[": "&lsqb;",
        "]": "&rbrack;",
        "{": "&lcub;",
        "}": "&rbrace;",
        "|": "&verbar;",
        "^": "&Hat;",
        "_": "&UnderBar;",
        "`": "&DiacriticalGrave;"
      }
      const texts = [
        [...key].map((char) => named[char] ?? char).join(""),
        [...key].map((char) => `&#0000000${char.charCodeAt(0)};`).join(""),
        [...key].map((char) => `&#x00000000${char.charCodeAt(0).toString(16)};`).join(""),
        [...key].map((char) => `\\u{00000${char.charCodeAt(0).toString(16)}}`).join(""),
        encodeURIComponent([...key].map((char) => named[char] ?? char).join(""))
      ]
      for (const text of texts) {
        assert.strictEqual(Secrets.scrubText(`<p>${text}</p>`), `<p>${Secrets.redacted}</p>`, text)
      }
    }))
})
