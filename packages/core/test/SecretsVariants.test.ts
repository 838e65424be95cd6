import { assert, describe, it } from "@effect/vitest"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Effect from "effect/Effect"
import { inspect } from "node:util"

// no provider's shape: only the name, the form or the registry can find it
const key = "Zq7vN3pL0xW9rT2kB5mY8cJ4"
const base64 = (text: string) => Buffer.from(text).toString("base64")

describe("Secrets: variants of where a key stands in text", () => {
  it.each([
    ["a custom header whose last word is creds", `X-Stepwise-Creds: ${key}`],
    ["a header whose last word is pass", `x-api-pass: ${key}`],
    ["a custom creds field in JSON", `{"X-Stepwise-Creds":"${key}"}`],
    ["a URL's userinfo password", `GET https://user:${key}@example.com/v1 failed`],
    ["a URL's userinfo token", `GET https://${key}@example.com/v1 failed`],
    ["Basic credentials outside a header", `sent Basic ${base64(`user:${key}`)} and failed`],
    ["HTML-escaped JSON (&quot;)", `{&quot;api_key&quot;:&quot;${key}&quot;}`],
    ["HTML-escaped JSON (&#34;)", `{&#34;api_key&#34;:&#34;${key}&#34;}`],
    ["URL-encoded JSON", encodeURIComponent(`{"api_key":"${key}"}`)],
    ["a URL-encoded query in a parameter", `next=${encodeURIComponent(`/cb?api_key=${key}`)}`],
    ["JSON with \\u0022 quotes", `{\\u0022api_key\\u0022:\\u0022${key}\\u0022}`],
    ["a value on the next, indented line", `api_key:\n  ${key}`],
    ["spaces around =", `api_key = ${key}`],
    ["a tuple", `('api_key', '${key}')`],
    ["a Map as Node prints it", `Map(1) { 'x-api-key' => '${key}' }`],
    ["a command line option", `--api-key ${key}`],
    ["an XML element", `<apiKey>${key}</apiKey>`],
    ["a Telegram bot token in a path", `POST https://api.telegram.org/bot123456:${key}/sendMessage`],
    ["a provider key by its prefix", `invalid sk-proj-${key}`],
    ["a JSON web token", `jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.${key}`]
  ])("%s", (_name, text) => {
    const scrubbed = Secrets.scrubText(text)
    assert.notInclude(scrubbed, key)
    assert.notInclude(scrubbed, base64(`user:${key}`))
    assert.strictEqual(Secrets.scrubText(scrubbed), scrubbed, "scrubbing scrubbed text changes nothing")
  })

  it.scoped("a registered key base64-encoded after any prefix (a Basic header's user:key) is replaced", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      for (const prefix of ["", "u:", "us:", "use:"]) {
        for (const encoded of [base64(`${prefix}${key}`), Buffer.from(`${prefix}${key}`).toString("base64url")]) {
          const scrubbed = Secrets.scrubText(`the proxy logged ${encoded}`)
          assert.notInclude(scrubbed, encoded.slice(4, -4), `${prefix}: ${scrubbed}`)
        }
      }
    }))

  it("ordinary words stay: basic usage, a plain URL, an option without a credential's name", () => {
    for (const text of ["the basic usage is simple", "see https://example.com/docs", "--model gpt-4o", "git@example"]) {
      assert.strictEqual(Secrets.scrubText(text), text)
    }
  })
})

describe("Secrets: variants of where a key stands in an error", () => {
  const shown = (error: unknown) => {
    const scrubbed = Secrets.scrubError(error)
    return `${inspect(scrubbed, { depth: 10, getters: true })} ${JSON.stringify(scrubbed)} ${String(scrubbed)}`
  }

  it("a cause that is an instance of a class with a credential-named field", () => {
    class Credentials {
      constructor(readonly apiKey: string, readonly note: string) {}
    }
    const scrubbed = shown(new Error("failed", { cause: new Credentials(key, `x-api-key: ${key}`) }))
    assert.notInclude(scrubbed, key)
  })

  it("a cause that is a Map or a Set", () => {
    assert.notInclude(shown(new Error("failed", { cause: new Map([["api_key", key]]) })), key)
    assert.notInclude(shown(new Error("failed", { cause: new Set([`token=${key}`]) })), key)
  })

  it("a cause whose class reads the key in a getter", () => {
    class Session {
      get token() {
        return key
      }
    }
    const scrubbed = Secrets.scrubError(new Error("failed", { cause: new Session() })) as Error & { cause: Session }
    assert.notStrictEqual(scrubbed.cause.token, key)
  })

  it("a cause whose own toJSON or toString answers the key", () => {
    const cause = { toJSON: () => ({ api_key: key }), toString: () => `token=${key}` }
    const scrubbed = Secrets.scrubError(new Error("failed", { cause })) as Error & { cause: typeof cause }
    assert.notInclude(JSON.stringify(scrubbed.cause), key)
    assert.notInclude(String(scrubbed.cause), key)
  })
})

describe("Secrets: no input blocks the process", () => {
  it("names followed by encoded quotes are read once (no rescan of the rest of the line for each)", () => {
    const text = "%22api_key%22%3A".repeat(25_000)
    const started = Date.now()
    const scrubbed = Secrets.scrubText(text)
    assert.isBelow(Date.now() - started, 5_000, "400 KB scrubbed in well under 5 s")
    assert.notInclude(scrubbed, "api_key%22%3A%22api_key")
  }, 60_000)

  it("long runs of word characters and dashes (sk-sk-sk-…, a.a.a.…) are read once, not once per word", () => {
    for (const unit of ["sk-", "xoxb-", "eyJaaaaaaaaaa.", "a."]) {
      const text = unit.repeat(Math.floor(400_000 / unit.length))
      const started = Date.now()
      Secrets.scrubText(text)
      assert.isBelow(Date.now() - started, 5_000, `${unit} × 400 KB scrubbed in well under 5 s`)
    }
  }, 120_000)
})
