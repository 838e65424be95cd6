import * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { assert, describe, it } from "@effect/vitest"
import * as Secrets from "@stepwise-agent/core/Secrets"
import { Effect, FastCheck } from "effect"
import { inspect } from "node:util"

// the characters that encodings change: `+`, `/`, `=`, `%`, spaces, quotes of a URL's form, Latin-1, other scripts
const edge = FastCheck.constantFrom(..."aZ09+/=% ~!'-_.", "é", "ß", "€", "日", "🔑")
const plain = FastCheck.constantFrom(..."abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789".split(""))
/** A key of 8 to 32 characters, letters or digits at its ends, any of the edge characters inside. */
const anyKey = FastCheck.tuple(
  plain,
  FastCheck.array(FastCheck.oneof(plain, edge), { minLength: 6, maxLength: 30 }),
  plain
).map(([first, middle, last]) => `${first}${middle.join("")}${last}`)

const base64 = (text: string) => Buffer.from(text).toString("base64")
const url = "https://api.example.com/v1/charges"

/** `Authorization: Basic …` as the platform writes it (`btoa`: Latin-1), or as UTF-8 when `btoa` cannot. */
const basic = (user: string, password: string) => (request: HttpClientRequest.HttpClientRequest) => {
  try {
    return HttpClientRequest.basicAuth(request, user, password)
  } catch {
    return HttpClientRequest.setHeader(request, "Authorization", `Basic ${base64(`${user}:${password}`)}`)
  }
}

/** How the key was sent (or made known), each a request the error describes. */
const sentAs = {
  "basic password": (key: string) => HttpClientRequest.get(url).pipe(basic("api", key)),
  "basic user, no password (Stripe)": (key: string) => HttpClientRequest.get(url).pipe(basic(key, "")),
  "Basic header by hand": (key: string) =>
    HttpClientRequest.get(url).pipe(HttpClientRequest.setHeader("Authorization", `Basic ${base64(`apikey:${key}`)}`)),
  "bearer": (key: string) => HttpClientRequest.get(url).pipe(HttpClientRequest.bearerToken(key)),
  "header": (key: string) => HttpClientRequest.get(url).pipe(HttpClientRequest.setHeader("x-api-key", key)),
  "URL parameter": (key: string) => HttpClientRequest.get(url).pipe(HttpClientRequest.setUrlParam("key", key)),
  "registered": (_key: string) => HttpClientRequest.get(url)
} as const

/** How a gateway quotes the key back. */
const quotedAs = {
  "raw": (key: string) => key,
  "percent-encoded": (key: string) => encodeURIComponent(key),
  "percent-encoded, lower case": (key: string) =>
    encodeURIComponent(key).replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase()),
  "form-encoded": (key: string) => new URLSearchParams([["", key]]).toString().slice(1),
  "form-decoded (+ read as a space)": (key: string) => key.replace(/\+/g, " "),
  "base64": (key: string) => base64(key),
  "base64 without padding": (key: string) => base64(key).replace(/=+$/, ""),
  "base64url": (key: string) => Buffer.from(key).toString("base64url"),
  "base64 of user:key": (key: string) => base64(`user:${key}`),
  "JSON-escaped": (key: string) => JSON.stringify(key).slice(1, -1),
  "JSON-escaped twice": (key: string) => JSON.stringify(JSON.stringify(key)).slice(1, -1),
  "JSON-escaped, ASCII only": (key: string) =>
    JSON.stringify(key).slice(1, -1).replace(
      /[\u0080-\uffff]/g,
      (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`
    ),
  "JSON-escaped with \\/": (key: string) => JSON.stringify(key).slice(1, -1).replace(/\//g, "\\/"),
  "HTML-escaped": (key: string) => key.replace(/&/g, "&amp;").replace(/'/g, "&#39;")
} as const

/** What a log line, an event and a stored failure write of the error, scrubbed. */
const renderings = (error: unknown): string => {
  const scrubbed = Secrets.scrubError(error)
  return [Secrets.messageOf(scrubbed), JSON.stringify(scrubbed), inspect(scrubbed, { depth: 8 })].join("\n")
}

describe("Secrets: every encoding of a known key", () => {
  it.effect.prop(
    "a key sent by any means and quoted back in any encoding never comes out of a scrubbed error",
    {
      key: anyKey,
      sent: FastCheck.constantFrom(...Object.keys(sentAs) as Array<keyof typeof sentAs>),
      quoted: FastCheck.constantFrom(...Object.keys(quotedAs) as Array<keyof typeof quotedAs>)
    },
    ({ key, quoted, sent }) =>
      Effect.gen(function*() {
        if (sent === "registered") yield* Secrets.register(key)
        const echo = quotedAs[quoted](key)
        const error = new HttpClientError.RequestError({
          request: sentAs[sent](key),
          reason: "Transport",
          description: `401: the key ${echo} is not valid`,
          cause: new Error(`upstream said {"key":"${echo}"}`)
        })
        const text = renderings(error)
        assert.notInclude(text, echo, `${sent} / ${quoted}`)
        assert.notInclude(text, key, `${sent} / ${quoted}`)
        assert.include(text, "is not valid")
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 200 }, timeout: 120_000 }
  )

  it.scoped("a registered key's encodings are replaced in any text, and scrubbing again changes nothing", () =>
    Effect.gen(function*() {
      const key = "k3y+with/slash=and%percent é"
      yield* Secrets.register(key)
      for (const [name, quote] of Object.entries(quotedAs)) {
        const scrubbed = Secrets.scrubText(`the proxy logged ${quote(key)} here`)
        assert.notInclude(scrubbed, quote(key), name)
        assert.include(scrubbed, "here", name)
        assert.strictEqual(Secrets.scrubText(scrubbed), scrubbed, name)
      }
    }))

  it("a Basic credential a text quotes: the key it encodes is replaced wherever the text quotes it", () => {
    const key = "Zx9qWv3LmN7pRt2YbK5sHj8dFg4"
    for (const [user, password] of [["api", key], [key, ""]]) {
      const text = `Authorization: Basic ${base64(`${user}:${password}`)}\n401: the server said ${key} is invalid`
      const scrubbed = Secrets.scrubText(text)
      assert.notInclude(scrubbed, key)
      assert.include(scrubbed, "is invalid")
    }
    for (const text of ["the basic functionality works", "basic auth with Basic Zm9vYmFy is fine"]) {
      assert.strictEqual(Secrets.scrubText(text), text)
    }
  })

  it("the user and password of a Basic credential are known by value (Latin-1 as btoa writes it, or UTF-8)", () => {
    for (
      const [user, password, known] of [
        ["api", "Zx9qWv3LmN7pRt2YbK5sHj8dFg4", "Zx9qWv3LmN7pRt2YbK5sHj8dFg4"],
        ["rk_live_51HqLyjWDarjtT1zdp7dcXy", "", "rk_live_51HqLyjWDarjtT1zdp7dcXy"],
        ["AC0123456789abcdef0123456789abcdef", "authtoken0123456789", "AC0123456789abcdef0123456789abcdef"],
        ["api", "clé-secrète-àçü-12345", "clé-secrète-àçü-12345"]
      ]
    ) {
      const error = new HttpClientError.RequestError({
        request: HttpClientRequest.get(url).pipe(HttpClientRequest.basicAuth(user, password)),
        reason: "Transport",
        description: `refused ${known}`
      })
      assert.strictEqual(
        Secrets.messageOf(error),
        `Transport: refused ${Secrets.redacted} (GET ${url.replace("charges", Secrets.redacted)})`
      )
    }
  })
})
