import * as AiError from "@effect/ai/AiError"
import * as Headers from "@effect/platform/Headers"
import { assert, describe, it } from "@effect/vitest"
import { Secrets } from "@stepwise-agent/core"
import { Cause, FastCheck, Option } from "effect"

const keyChars = FastCheck.constantFrom(
  ..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.".split("")
)
const secret = FastCheck.string({ unit: keyChars, minLength: 6, maxLength: 40 }).map((s) => `sk-${s}`)

const headerName = FastCheck.constantFrom(
  "authorization",
  "Authorization",
  "proxy-authorization",
  "x-api-key",
  "api-key",
  "cookie",
  "set-cookie",
  "x-goog-api-key"
)
const parameterName = FastCheck.constantFrom("key", "api_key", "apiKey", "token", "access_token", "sig")

/** The shapes a credential takes in an error's text. */
const shapes: ReadonlyArray<(name: string, parameter: string, key: string) => string> = [
  (name, _, key) => `${name}: Bearer ${key}`,
  (name, _, key) => `${name}: ${key}`,
  (name, _, key) => `{"${name}":"Bearer ${key}","accept":"application/json"}`,
  (name, _, key) => `{\n  "${name}": "${key}",\n  "accept": "application/json"\n}`,
  (name, _, key) => JSON.stringify(JSON.stringify({ headers: { [name]: `Bearer ${key}` } })),
  (name, _, key) => JSON.stringify({ body: JSON.stringify({ [name]: `Bearer ${key}` }, null, 2) }),
  (name, _, key) => `Headers { '${name}': 'Bearer ${key}' }`,
  (_, parameter, key) => `POST https://api.example.com/v1/responses?${parameter}=${key}&alt=json`,
  (_, parameter, key) => `https://api.example.com/v1?x=1&${parameter}=${key}`,
  (_, __, key) => `the gateway said: Bearer ${key} is not valid`
]

const surroundings = FastCheck.tuple(
  FastCheck.constantFrom("", "Decode: An HTTP response error occurred.\n\n", "<html>502</html> "),
  FastCheck.constantFrom("", "\n\nResponse Body: { not json", " (200 POST http://127.0.0.1:1/v1/responses)")
)

describe("Secrets", () => {
  it.prop(
    "a scrubbed text never holds the key, and scrubbing it again changes nothing",
    {
      key: secret,
      name: headerName,
      parameter: parameterName,
      shape: FastCheck.nat({ max: shapes.length - 1 }),
      around: surroundings
    },
    ({ around: [before, after], key, name, parameter, shape }) => {
      const text = `${before}${shapes[shape]!(name, parameter, key)}${after}`
      const scrubbed = Secrets.scrubText(text)
      assert.notInclude(scrubbed, key)
      assert.include(scrubbed, Secrets.redacted)
      assert.strictEqual(Secrets.scrubText(scrubbed), scrubbed)
    }
  )

  it.prop(
    "text without credentials is left as it is",
    {
      text: FastCheck.constantFrom(
        "What is 6 times 7? The answer is 42.",
        `{"input_tokens":20,"output_tokens":10,"total_tokens":30,"max_output_tokens":null}`,
        `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
        "Decode: An HTTP response error occurred. (200 POST http://127.0.0.1:4000/v1/responses)",
        `the monkey: sat on the keyboard, token_type=bearer`
      )
    },
    ({ text }) => assert.strictEqual(Secrets.scrubText(text), text)
  )

  it("keeps the rest of a header list and of a query string", () => {
    assert.strictEqual(
      Secrets.scrubText(`{"content-type":"application/json","authorization":"Bearer sk-1234567","accept":"*/*"}`),
      `{"content-type":"application/json","authorization":"<redacted>","accept":"*/*"}`
    )
    assert.strictEqual(
      Secrets.scrubText("GET /v1/models?alt=json&key=AIza123&page=2"),
      "GET /v1/models?alt=json&key=<redacted>&page=2"
    )
  })

  it("scrubs an HttpResponseError's request, body and message and keeps its class and fields", () => {
    const key = "sk-test-SECRET123"
    const error = new AiError.HttpResponseError({
      module: "OpenAiClient",
      method: "createResponse",
      reason: "Decode",
      request: {
        method: "POST",
        url: `https://api.example.com/v1/responses?key=${key}`,
        urlParams: [["api_key", key], ["alt", "json"]],
        hash: Option.none(),
        headers: Headers.fromInput({ authorization: `Bearer ${key}`, accept: "application/json" })
      },
      response: { status: 200, headers: { "set-cookie": `session=${key}` } },
      body: JSON.stringify({ request: { headers: { authorization: `Bearer ${key}` } } }, null, 2)
    }, { disableValidation: true }) // as @effect/ai builds it, keeping the request's Headers
    assert.include(error.message, key)

    const scrubbed = Secrets.scrubError(error)
    assert.instanceOf(scrubbed, AiError.HttpResponseError)
    assert.strictEqual(scrubbed._tag, "HttpResponseError")
    assert.strictEqual(scrubbed.reason, "Decode")
    assert.strictEqual(scrubbed.response.status, 200)
    assert.isTrue(Headers.isHeaders(scrubbed.request.headers))
    assert.strictEqual(scrubbed.request.headers.accept, "application/json")
    assert.deepStrictEqual(scrubbed.request.urlParams, [["api_key", "<redacted>"], ["alt", "json"]])
    for (
      const text of [scrubbed.message, JSON.stringify(scrubbed), String(scrubbed), Cause.pretty(Cause.fail(scrubbed))]
    ) {
      assert.notInclude(text, key)
    }
    assert.include(error.message, key, "the original is not changed")
  })

  it("returns an error with nothing to scrub as it is, and scrubs causes and defects", () => {
    const plain = new AiError.MalformedOutput({ module: "m", method: "x", description: "bad output" })
    assert.strictEqual(Secrets.scrubError(plain), plain)
    const cause = Cause.sequential(Cause.fail(plain), Cause.die(new Error("cookie: session=abc123")))
    const scrubbed = Secrets.scrubCause(cause)
    assert.notInclude(Cause.pretty(scrubbed), "abc123")
    assert.strictEqual(Option.getOrThrow(Cause.failureOption(scrubbed)), plain)
    const clean = Cause.fail(plain)
    assert.strictEqual(Secrets.scrubCause(clean), clean)
  })

  it("scrubs an error's nested cause and survives cycles", () => {
    const inner: any = new Error("x-api-key: abcdef123456")
    inner.self = inner
    const outer = new Error("the call failed", { cause: inner })
    const scrubbed = Secrets.scrubError(outer)
    assert.notInclude((scrubbed.cause as Error).message, "abcdef123456")
    assert.strictEqual((scrubbed.cause as any).self, scrubbed.cause)
  })
})
