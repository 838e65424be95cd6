import * as AiError from "@effect/ai/AiError"
import * as Headers from "@effect/platform/Headers"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { assert, describe, it } from "@effect/vitest"
import { Secrets } from "@stepwise-agent/core"
import { Cause, Effect, FastCheck, Option, Redacted } from "effect"

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

// ---------------------------------------------------------------------------
// credentials named by class, and known by value
// ---------------------------------------------------------------------------

/** An @effect/ai `HttpResponseError` as OpenAiClient builds it, around the request it describes. */
const responseError = (
  request: { readonly url?: string; readonly urlParams?: ReadonlyArray<[string, string]>; readonly headers?: object },
  body: string,
  description?: string
) =>
  new AiError.HttpResponseError({
    module: "OpenAiClient",
    method: "createResponse",
    reason: "StatusCode",
    request: {
      method: "POST",
      url: request.url ?? "https://gateway.example.com/v1/responses",
      urlParams: request.urlParams ?? [],
      hash: Option.none(),
      headers: (request.headers ?? { accept: "application/json" }) as Record<string, string>
    },
    response: { status: 401, headers: { "content-type": "application/json", "retry-after": "20" } },
    body,
    ...(description === undefined ? {} : { description })
  }, { disableValidation: true })

/** Every way a sink turns an error into text. */
const renderings = (error: unknown): ReadonlyArray<string> => [
  error instanceof Error ? error.message : String(error),
  String(error),
  JSON.stringify(error) ?? "",
  Cause.pretty(Cause.fail(error)),
  Cause.pretty(Cause.die(error))
]

describe("Secrets by class of name", () => {
  it("a header or parameter named like a credential, in any form, is redacted", () => {
    for (
      const name of [
        "Ocp-Apim-Subscription-Key",
        "x-functions-key",
        "x-key",
        "x-goog-api-key",
        "X-Amz-Security-Token",
        "client_secret",
        "sessionId",
        "x-auth-token",
        "refreshToken"
      ]
    ) {
      const key = "0f9e8d7c6b5a4321"
      for (
        const text of [
          `${name}: ${key}`,
          `{"${name}":"${key}","accept":"*/*"}`,
          `Headers { '${name}': '${key}' }`,
          `GET https://api.example.com/v1?alt=json&${name}=${key}`,
          `urlParams: [["${name}", "${key}"]]`,
          `"urlParams":[[\\"${name}\\",\\"${key}\\"]]`,
          `urlParams: [ [ '${name}', '${key}' ] ]`
        ]
      ) {
        const scrubbed = Secrets.scrubText(text)
        assert.notInclude(scrubbed, key, `${name} in ${text}`)
        assert.include(scrubbed, name)
        assert.strictEqual(Secrets.scrubText(scrubbed), scrubbed)
      }
    }
  })

  it("names of things that are no credentials are left alone", () => {
    for (
      const name of ["idempotency-key", "max_tokens", "token_type", "monkey", "keyboard", "cache_key", "x-request-id"]
    ) {
      assert.isFalse(Secrets.isCredentialName(name), name)
      const text = `${name}: 42 and ${name}=abcdefgh`
      assert.strictEqual(Secrets.scrubText(text), text)
    }
    assert.strictEqual(Secrets.scrubText(`[["alt", "json"], ["page", "2"]]`), `[["alt", "json"], ["page", "2"]]`)
  })

  it("a name that is no credential does not hide a credential later on its line", () => {
    assert.strictEqual(
      Secrets.scrubText("Response Body: x-functions-key: abcdef123456"),
      "Response Body: x-functions-key: <redacted>"
    )
  })
})

describe("Secrets by value", () => {
  const key = "AcmeKey-7f3a9c2e41"

  it("a header the request sent is redacted, and so is its value quoted in a gateway's body", () => {
    const error = responseError(
      { headers: { "x-acme-pass": key, "content-type": "application/json" } },
      JSON.stringify({ error: { message: `Access denied for ${key}.` } }),
      `{"error":{"message":"Access denied for ${key}."}}`
    )
    const scrubbed = Secrets.scrubError(error)
    for (const text of renderings(scrubbed)) assert.notInclude(text, key)
    assert.deepStrictEqual(scrubbed.request.headers, {
      "x-acme-pass": "<redacted>",
      "content-type": "application/json"
    })
    assert.include(scrubbed.message, "Access denied for <redacted>.")
    assert.strictEqual(scrubbed.response.headers["retry-after"], "20", "response headers are the server's")
  })

  it("a URL parameter the request sent is redacted in urlParams, in the url and wherever it is quoted", () => {
    const error = responseError(
      {
        url: `https://gateway.example.com/v1/responses?code=${encodeURIComponent(key)}&api-version=2024-02-01`,
        urlParams: [["subscription", key], ["api-version", "2024-02-01"]]
      },
      `invalid subscription ${key}`
    )
    const scrubbed = Secrets.scrubError(error)
    for (const text of renderings(scrubbed)) assert.notInclude(text, key)
    assert.deepStrictEqual(scrubbed.request.urlParams, [["subscription", "<redacted>"], ["api-version", "2024-02-01"]])
    assert.include(scrubbed.request.url, "api-version=2024-02-01")
  })

  it("a Redacted value the error holds is replaced wherever the error quotes it", () => {
    const error = responseError(
      { headers: { authorization: Redacted.make(`Bearer ${key}`) } },
      `{"error":"the token ${key} expired"}`
    )
    for (const text of renderings(Secrets.scrubError(error))) assert.notInclude(text, key)
  })

  it("a key inside a cause chain: the outer error's text quoting the request's key is scrubbed", () => {
    const request = HttpClientRequest.get("https://gateway.example.com/v1/models").pipe(
      HttpClientRequest.setHeader("x-acme-pass", key),
      HttpClientRequest.setUrlParam("sig", `${key}-sig`)
    )
    const inner = new HttpClientError.RequestError({ request, reason: "Transport", description: "socket hang up" })
    const middle = new Error(`the gateway refused ${key}-sig`, { cause: inner })
    const outer = new Error(`lookup failed: ${key}`, { cause: middle })
    const scrubbed = Secrets.scrubError(outer)
    for (const text of renderings(scrubbed)) assert.notInclude(text, key)
    for (const text of renderings(scrubbed.cause)) assert.notInclude(text, key)
    // and across the failures of a cause
    const cause = Secrets.scrubCause(Cause.parallel(Cause.fail(new Error(`saw ${key}`)), Cause.die(inner)))
    assert.notInclude(Cause.pretty(cause), key)
  })

  it("a key inside a Cause an error holds is found and scrubbed", () => {
    const request = HttpClientRequest.get("https://gateway.example.com/v1").pipe(
      HttpClientRequest.setHeader("x-functions-key", key)
    )
    const inner = Cause.fail(new HttpClientError.RequestError({ request, reason: "Transport" }))
    const error = Object.assign(new Error(`the call with ${key} failed`), { cause: inner })
    const scrubbed = Secrets.scrubError(error)
    assert.notInclude(scrubbed.message, key)
    assert.notInclude(Cause.pretty(scrubbed.cause as Cause.Cause<unknown>), key)
    assert.notInclude(JSON.stringify(scrubbed.cause), key)
  })

  it.scoped("a registered value is scrubbed from any text while its scope is open", () =>
    Effect.gen(function*() {
      const known = "registered-0123456789"
      const text = `the tool said: ${known} / ${JSON.stringify(JSON.stringify(known))}`
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Secrets.register(Redacted.make(`Bearer ${known}`))
        assert.notInclude(Secrets.scrubText(text), known)
        assert.notInclude(Secrets.scrubText(encodeURIComponent(`a=${known}`)), known)
        assert.notInclude(Secrets.messageOf(new Error(text)), known)
      }))
      assert.strictEqual(Secrets.scrubText(text), text, "forgotten when the scope closes")
    }))

  it("a value under minimumLength is redacted where it stands but not replaced elsewhere", () => {
    const short = "abc12"
    const error = responseError({ headers: { "x-acme-pass": short } }, `abc12 appears in abc123 too`)
    const scrubbed = Secrets.scrubError(error)
    assert.deepStrictEqual(scrubbed.request.headers, { "x-acme-pass": "<redacted>" })
    assert.strictEqual(scrubbed.body, "abc12 appears in abc123 too")
  })
})

// ---------------------------------------------------------------------------
// the property: a known credential, wherever it is, never comes out
// ---------------------------------------------------------------------------

/** How the credential is known: what the error shows it sent, or a registration. */
const knownAs = FastCheck.constantFrom("header", "redactedHeader", "urlParam", "url", "platformRequest", "registered")
/** Where the error quotes it. */
const quotedIn = FastCheck.constantFrom(
  "body",
  "description",
  "outerMessage",
  "nestedCause",
  "field",
  "array",
  "defect"
)
const anyHeaderName = FastCheck.stringMatching(/^x-[a-z]{1,10}$/)
const anySecret = FastCheck.string({ unit: "binary", minLength: Secrets.minimumLength, maxLength: 40 })

const build = (
  secret: string,
  known: string,
  quoted: string,
  header: string,
  before: string,
  after: string
): Cause.Cause<unknown> => {
  const text = `${before}${secret}${after}`
  const request = {
    headers: known === "header" ? { [header]: secret } : known === "redactedHeader"
      ? { [header]: Redacted.make(secret) }
      : { accept: "application/json" },
    urlParams: known === "urlParam" ? [["key", secret]] as Array<[string, string]> : [],
    url: known === "url"
      ? `https://gateway.example.com/v1?token=${encodeURIComponent(secret)}`
      : "https://gateway.example.com/v1"
  }
  const platform = new HttpClientError.RequestError({
    request: HttpClientRequest.get("https://gateway.example.com/v1").pipe(
      known === "platformRequest" ? HttpClientRequest.setHeader(header, secret) : (r) => r
    ),
    reason: "Transport"
  })
  const error = responseError(
    request,
    quoted === "body" ? text : "{}",
    quoted === "description" ? text : undefined
  )
  const withCause = (message: string, cause: unknown) => Object.assign(new Error(message, { cause }), { extra: {} })
  const holder = withCause("the call failed", known === "platformRequest" ? platform : error)
  switch (quoted) {
    case "outerMessage":
      return Cause.fail(withCause(text, holder))
    case "nestedCause":
      return Cause.fail(withCause("outer", withCause("middle", new Error(text, { cause: holder }))))
    case "field":
      return Cause.fail(Object.assign(holder, { extra: { deep: { reason: text } } }))
    case "array":
      return Cause.fail(Object.assign(holder, { extra: { lines: ["a", text, "b"] } }))
    case "defect":
      return Cause.sequential(Cause.fail(holder), Cause.die(new Error(text)))
    default:
      return Cause.fail(holder)
  }
}

const renderCause = (cause: Cause.Cause<unknown>): string =>
  [
    Cause.pretty(cause),
    ...[...Cause.failures(cause), ...Cause.defects(cause)].flatMap((error) => {
      const chain: Array<unknown> = []
      for (let current: unknown = error; current instanceof Error; current = current.cause) chain.push(current)
      return chain.flatMap(renderings)
    })
  ].join("\n")

describe("Secrets property", () => {
  it.effect.prop(
    "a credential the error shows it sent, or a registered one, never comes out of a scrubbed cause or error",
    {
      secret: anySecret,
      known: knownAs,
      quoted: quotedIn,
      header: anyHeaderName,
      around: FastCheck.tuple(FastCheck.string({ maxLength: 8 }), FastCheck.string({ maxLength: 8 }))
    },
    ({ around: [before, after], header, known, quoted, secret }) =>
      Effect.gen(function*() {
        const placeholder = "PLACEHOLDER-VALUE-0"
        // the secret must not be text the renderers write themselves
        const boilerplate = renderCause(build(placeholder, known, quoted, header, before, after))
        FastCheck.pre(!boilerplate.includes(secret) && !Secrets.redacted.includes(secret) && secret.trim() === secret)
        if (known === "registered") yield* Secrets.register(secret)
        const cause = build(secret, known, quoted, header, before, after)
        const scrubbed = renderCause(Secrets.scrubCause(cause))
        assert.notInclude(scrubbed, secret)
        assert.notInclude(scrubbed, JSON.stringify(secret).slice(1, -1))
        const error = [...Cause.failures(cause)][0]
        if (error !== undefined && quoted !== "defect") {
          assert.notInclude(renderings(Secrets.scrubError(error)).join("\n"), secret)
        }
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 150 }, timeout: 120_000 }
  )
})

describe("Secrets on large text", () => {
  it(
    "scrubbing a megabyte of name: value, name=value and [ shapes reads each character a bounded number of times",
    () => {
      const texts = [
        "a:".repeat(500_000),
        "lorem ipsum: dolor=sit amet, ".repeat(35_000),
        "key:".repeat(250_000),
        "x-key=".repeat(170_000),
        `["x", `.repeat(170_000),
        `["key", "`.repeat(100_000)
      ]
      const start = Date.now()
      for (const text of texts) Secrets.scrubText(text)
      // a quadratic scan of one of these takes minutes; linear ones take well under a second each
      assert.isBelow(Date.now() - start, 20_000)
    },
    60_000
  )
})
