/**
 * A credential anywhere in a URL: its userinfo (`https://user:<key>@…`,
 * `https://<key>@…`), its fragment (`#key=…`, `#access_token=…`, `#<key>`),
 * a host's label shaped like a key (`https://<key>.example.com`), its path
 * and its query, for keys of every shape, wherever the URL stands: an error's
 * request and message, a cause chain quoting the key, a span's attributes,
 * any text, a registered base URL.
 */
import * as AiError from "@effect/ai/AiError"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { assert, describe, it } from "@effect/vitest"
import { Secrets } from "@stepwise-agent/core"
import { SpanRecorder } from "@stepwise-agent/testing"
import { Cause, Effect, FastCheck, Option, Redacted } from "effect"

const bytes = FastCheck.noBias(FastCheck.uint8Array({ minLength: 16, maxLength: 30 }))

/** Keys no name or prefix announces: hex, base64url, a UUID, letters and digits. */
const key = FastCheck.oneof(
  bytes.map((b) => Buffer.from(b).toString("hex")),
  bytes.map((b) => Buffer.from(b).toString("base64url")),
  FastCheck.uuid(),
  FastCheck.noBias(FastCheck.stringMatching(/^[A-Za-z0-9]{24,40}$/))
).filter((key) => /\d/.test(key) && /[a-z]/i.test(key))

/** Where a URL holds the key. */
const urlParts: Record<string, (key: string) => string> = {
  "the userinfo's password": (key) => `https://user:${key}@gw.example.com/v1/responses`,
  "the userinfo, a token alone": (key) => `https://${key}@gw.example.com/v1/responses`,
  "the userinfo's user, with a word for password": (key) => `https://${key}:x-oauth-basic@gw.example.com/v1/responses`,
  "the fragment, #key=": (key) => `https://gw.example.com/v1/responses#key=${key}`,
  "the fragment, #access_token=": (key) => `https://gw.example.com/v1/cb#access_token=${key}&token_type=bearer`,
  "the fragment, bare": (key) => `https://gw.example.com/v1/responses#${key}`,
  "a host's label": (key) => `https://${key}.gw.example.com/v1/responses`,
  "the path": (key) => `https://gw.example.com/v1/${key}/responses`,
  "the query": (key) => `https://gw.example.com/v1/responses?key=${key}`
}
const names = Object.keys(urlParts)
const part = FastCheck.constantFrom(...names)

const renderings = (error: unknown): string =>
  [
    error instanceof Error ? error.message : "",
    error instanceof Error ? String(error.stack) : "",
    String(error),
    JSON.stringify(error),
    Cause.pretty(Cause.fail(error)),
    Cause.pretty(Cause.die(error))
  ].join("\n")

/** The key and its forms a URL parser gives it (a host lower-cased). */
const assertNoKey = (text: string, key: string, where: string) => {
  assert.notInclude(text, key, where)
  assert.notInclude(text, key.toLowerCase(), where)
}

const aiRequestError = (url: string, hash: Option.Option<string> = Option.none()) =>
  new AiError.HttpRequestError({
    module: "OpenAiClient",
    method: "createResponse",
    reason: "Transport",
    request: { method: "POST", url, urlParams: [], hash, headers: {} }
  })

describe("Secrets: a key in any part of a URL", () => {
  it.prop(
    "an error's request, its message and a cause chain quoting the key show no key",
    { key, part },
    ({ key, part }) => {
      const url = urlParts[part]!(key)
      for (
        const inner of [
          aiRequestError(url),
          new HttpClientError.RequestError({ request: HttpClientRequest.post(url), reason: "Transport" })
        ]
      ) {
        const outer = new Error(`the gateway answered: unknown key ${key}`, { cause: inner })
        const scrubbed = Secrets.scrubError(outer)
        assertNoKey(renderings(scrubbed), key, `${part}: the error`)
        assertNoKey(renderings(scrubbed.cause), key, `${part}: its cause`)
      }
    }
  )

  it.prop(
    "a fragment the request keeps apart (HttpClientRequest.setHash, @effect/ai's hash) shows no key",
    { key, named: FastCheck.boolean() },
    ({ key, named }) => {
      const fragment = named ? `access_token=${key}` : key
      const platform = HttpClientRequest.setHash(
        HttpClientRequest.post("https://gw.example.com/v1/responses"),
        fragment
      )
      for (
        const error of [
          aiRequestError("https://gw.example.com/v1/responses", Option.some(fragment)),
          new HttpClientError.RequestError({ request: platform, reason: "Transport", description: `sent ${key}` })
        ]
      ) {
        assertNoKey(renderings(Secrets.scrubError(error)), key, "the hash")
      }
    }
  )

  it.prop("a span's URL attributes and headers show no key", { key, part }, ({ key, part }) => {
    // a URL parser lower-cases the host: a key there is known by its shape only as the lower case keeps it
    // (hex, a UUID, `_`, letters and digits mixed in a run), not as base64url's dashed runs of letters (a random
    // run found `DBufDzJJUZulZklr-2Ra0A`); registered, it is known in any case (the last property)
    FastCheck.pre(part !== "a host's label" || !/-/.test(key) || /_/.test(key) || /^[0-9a-f-]+$/i.test(key))
    const url = urlParts[part]!(key)
    const parsed = new URL(url)
    const { spans, tracer } = SpanRecorder.make()
    Effect.runSync(
      Effect.annotateCurrentSpan({
        "url.full": parsed.toString(),
        "server.address": parsed.origin,
        "url.fragment": parsed.hash.slice(1),
        "http.request.header.referer": url,
        "http.response.header.location": url
      }).pipe(Effect.withSpan("http.client POST"), Effect.withTracer(Secrets.scrubTracer(tracer)))
    )
    assertNoKey(JSON.stringify([...spans[0]!.attributes]), key, part)
  })

  it.prop(
    "a URL in any text shows no key in any of its parts; scrubbing it again changes nothing",
    { key, part },
    ({ key, part }) => {
      const scrubbed = Secrets.scrubText(`POST ${urlParts[part]!(key)} failed: 401`)
      assertNoKey(scrubbed, key, part)
      assert.strictEqual(Secrets.scrubText(scrubbed), scrubbed)
    }
  )

  it.effect("a registered base URL with a dashed base64url key as a host's label: a span's lower-cased URL shows no key", () =>
    Effect.gen(function*() {
      const key = "DBufDzJJUZulZklr-2Ra0A"
      const url = urlParts["a host's label"]!(key)
      yield* Secrets.register(Redacted.make(url))
      const parsed = new URL(url)
      const { spans, tracer } = SpanRecorder.make()
      yield* Effect.annotateCurrentSpan({ "url.full": parsed.toString(), "server.address": parsed.origin }).pipe(
        Effect.withSpan("http.client POST"),
        Effect.withTracer(Secrets.scrubTracer(tracer))
      )
      assertNoKey(JSON.stringify([...spans[0]!.attributes]), key, "the host")
    }).pipe(Effect.scoped))

  it.effect.prop(
    "a registered base URL makes the key in any of its parts known alone",
    { key, part },
    ({ key, part }) =>
      Effect.gen(function*() {
        yield* Secrets.register(Redacted.make(urlParts[part]!(key)))
        assertNoKey(Secrets.scrubText(`a tool said: ${key} is wrong`), key, part)
      }).pipe(Effect.scoped)
  )

  it("a host's label that is a token in one case, split by a dash, shows in no span attribute or text", () => {
    // found by the span property under load (seed 1379443326): no lowercase, the digit in a 6-letter run
    for (const key of ["AC0AAM-AAAAAAAAAAAAAAAA", "qz7xkd-pamvhtrewqlkjhg", "B4TQZX-KLMNOPQRSTUVWXY9"]) {
      const url = urlParts["a host's label"]!(key)
      const { spans, tracer } = SpanRecorder.make()
      Effect.runSync(
        Effect.annotateCurrentSpan({ "url.full": new URL(url).toString(), "http.request.header.referer": url }).pipe(
          Effect.withSpan("http.client POST"),
          Effect.withTracer(Secrets.scrubTracer(tracer))
        )
      )
      assertNoKey(JSON.stringify([...spans[0]!.attributes]), key, key)
      assertNoKey(Secrets.scrubText(`POST ${url} failed: 401`), key, key)
    }
  })

  it("providers' URLs, hosts and plain user names stay as they are", () => {
    for (
      const url of [
        "https://my-resource-eastus2.openai.azure.com/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-02-01",
        "https://us-central1-aiplatform.googleapis.com/v1/models/gemini-1.5-pro:generateContent",
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-1.5-pro:streamGenerateContent?alt=json",
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-sonnet-20241022-v2:0/converse",
        "https://api.openai.com/v1/responses#stream"
      ]
    ) {
      const error = aiRequestError(url)
      assert.strictEqual(Secrets.scrubError(error), error, url)
    }
    for (
      const text of [
        "see https://docs.example.com/guide#configuration",
        "POST https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-sonnet-20241022-v2:0/converse",
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-1.5-pro-002:generateContent?alt=json",
        "clone ssh://git@github.com/acme/repo.git",
        "https://alice@example.com/inbox",
        "https://deploy:<redacted>@github.com/acme/repo"
      ]
    ) {
      assert.strictEqual(Secrets.scrubText(text), text)
    }
  })
})

describe("Secrets: no URL-shaped text blocks the process", () => {
  it("long runs of schemes, authorities, labels, pieces and fragments are read once", () => {
    for (
      const unit of [
        "https://",
        "a://a",
        "https://a.",
        "https://u:p@",
        "https://h/a0b1c2d3e4f5a6b7c8/",
        "#a=b&",
        "https://h#"
      ]
    ) {
      const text = unit.repeat(Math.floor(400_000 / unit.length))
      const started = Date.now()
      Secrets.scrubText(text)
      assert.isBelow(Date.now() - started, 5_000, `${unit} × 400 KB scrubbed in well under 5 s`)
    }
  }, 120_000)
})
