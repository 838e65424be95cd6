import * as AiError from "@effect/ai/AiError"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { assert, describe, it } from "@effect/vitest"
import { Secrets } from "@stepwise-agent/core"
import { SpanRecorder } from "@stepwise-agent/testing"
import { Cause, Effect, FastCheck, Option, Redacted } from "effect"

/** An @effect/ai `HttpRequestError` (its message names the URL) for a request to `url`. */
const requestError = (url: string) =>
  new AiError.HttpRequestError({
    module: "OpenAiClient",
    method: "createResponse",
    reason: "Transport",
    request: { method: "POST", url, urlParams: [], hash: Option.none(), headers: {} }
  })

const renderings = (error: unknown): string =>
  [
    error instanceof Error ? error.message : "",
    String(error),
    JSON.stringify(error),
    Cause.pretty(Cause.fail(error)),
    Cause.pretty(Cause.die(error))
  ].join("\n")

/**
 * Keys no name or shape announces: hex, base64url, letters and digits, a UUID. Each holds a run of 10 letters or
 * digits, so none reads as a model's name (a family, then parts of at most 9: `o0-A_AA-a0-…` does, and stays as
 * documented; see the fixed case below).
 */
const pathKey = FastCheck.oneof(
  FastCheck.stringMatching(/^[0-9a-f]{24,40}$/),
  FastCheck.stringMatching(/^[A-Za-z0-9_-]{20,40}$/),
  FastCheck.uuid()
).filter((key) => /\d/.test(key) && /[a-z]/i.test(key) && /[A-Za-z0-9]{10}/.test(key))

const gateways: ReadonlyArray<(key: string) => string> = [
  (key) => `https://gw.example.com/v1/${key}/chat/completions`,
  (key) => `https://gw.example.com/${key}/v1/responses?api-version=2024-02-01`,
  (key) => `https://x.openai.azure.com/openai/deployments/${key}/chat/completions`,
  (key) => `https://gateway.ai.example.net/v1/${key}/acme/openai/responses`,
  (key) => `http://127.0.0.1:8080/proxy/${encodeURIComponent(key)}`
]

describe("Secrets: a key in a URL's path", () => {
  it.prop(
    "a path segment that is no endpoint's word is redacted in the request's url, its message and wherever the error quotes it",
    { key: pathKey, gateway: FastCheck.nat({ max: gateways.length - 1 }) },
    ({ gateway, key }) => {
      const url = gateways[gateway]!(key)
      const inner = requestError(url)
      // a cause chain whose outer error and a gateway's body quote the key alone
      const outer = new Error(`the gateway answered: invalid key ${key}`, { cause: inner })
      const scrubbed = Secrets.scrubError(outer)
      assert.notInclude(renderings(scrubbed), key)
      assert.notInclude(renderings(scrubbed.cause), key)
      const request = (scrubbed.cause as AiError.HttpRequestError).request
      assert.include(request.url, Secrets.redacted)
      assert.strictEqual(new URL(request.url.replace(Secrets.redacted, "x")).origin, new URL(url).origin)
    }
  )

  it("an endpoint's words, versions, dates and models' names stay", () => {
    for (
      const url of [
        "https://api.openai.com/v1/chat/completions",
        "https://api.openai.com/v1/responses",
        "https://x.openai.azure.com/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-02-01",
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-1.5-pro:streamGenerateContent",
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-sonnet-20241022-v2:0/converse",
        "https://api.anthropic.com/v1/messages",
        "http://127.0.0.1:4000/v1/responses"
      ]
    ) {
      const error = requestError(url)
      assert.strictEqual(Secrets.scrubError(error), error, url)
    }
  })

  it.scoped("a key shaped like a model's name stays in a URL's path (a random run's case); registered, it is redacted", () =>
    Effect.gen(function*() {
      // `o0` is a family (as `o1`, `o3`), then parts of at most 9 letters or digits: a model's name, kept as documented
      const key = "o0-A_AA-a0-a_aaa0a0A_A"
      const url = `https://gw.example.com/v1/${key}/chat/completions`
      assert.strictEqual(Secrets.scrubError(requestError(url)).request.url, url)
      yield* Secrets.register(key)
      const scrubbed = Secrets.scrubError(
        new Error(`the gateway answered: invalid key ${key}`, { cause: requestError(url) })
      )
      assert.notInclude(renderings(scrubbed), key)
      assert.notInclude(renderings(scrubbed.cause), key)
    }))

  it("the platform's RequestError: its request, message and stack", () => {
    const key = "9c1d7e2f4a6b8c0d1e3f5a7b"
    const error = new HttpClientError.RequestError({
      request: HttpClientRequest.post(`https://gw.example.com/v1/${key}/responses`),
      reason: "Transport",
      description: `connect ECONNREFUSED for ${key}`
    })
    assert.include(error.message, key)
    const scrubbed = Secrets.scrubError(error)
    assert.notInclude(renderings(scrubbed), key)
    assert.notInclude(String(scrubbed.stack), key)
    assert.strictEqual(scrubbed.request.url, `https://gw.example.com/v1/${Secrets.redacted}/responses`)
  })

  it.scoped("a registered base URL makes the key in its path known alone, in any text", () =>
    Effect.gen(function*() {
      const key = "k3yW1thNoShape0fAnyK1nd"
      yield* Secrets.register(Redacted.make(`https://gw.example.com/v1/${key}`))
      assert.strictEqual(Secrets.scrubText(`a tool said: ${key} is wrong`), `a tool said: ${Secrets.redacted} is wrong`)
      assert.strictEqual(Secrets.scrubText("see https://gw.example.com/v1/docs"), "see https://gw.example.com/v1/docs")
    }))

  it("an http.client span's url.full and url.path record the path scrubbed", () => {
    const key = "0a9b8c7d6e5f4a3b2c1d"
    const { spans, tracer } = SpanRecorder.make()
    const scrubbing = Secrets.scrubTracer(tracer)
    Effect.runSync(
      Effect.annotateCurrentSpan({
        "url.full": `https://gw.example.com/v1/${key}/responses`,
        "url.path": `/v1/${key}/responses`
      }).pipe(
        Effect.withSpan("http.client POST"),
        Effect.withTracer(scrubbing)
      )
    )
    const attributes = JSON.stringify([...spans[0]!.attributes])
    assert.notInclude(attributes, key)
    assert.include(attributes, `/v1/${Secrets.redacted}/responses`)
  })
})
