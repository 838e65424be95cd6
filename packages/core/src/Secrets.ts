/**
 * Secrets: credentials scrubbed from errors before anything logs, emits,
 * traces or stores them.
 *
 * A provider error can carry the request that caused it. @effect/ai 0.37's
 * `HttpResponseError` for a body that does not decode (a 200 `{ not json`, a
 * gateway's HTML page labelled JSON) holds the whole request, its
 * `authorization: Bearer <key>` header included, in its `body` and so in its
 * `message`. The agent loop passes every model error through {@link scrubError}
 * where it leaves the model, so middleware, events, logs and stored failures
 * see `<redacted>` instead.
 *
 * Scrubbed: the values of headers and parameters named like credentials
 * (`authorization`, `proxy-authorization`, `x-api-key`, `api-key`, `cookie`,
 * `set-cookie`, `key`, `api_key`, `token`, `access_token`, `secret`,
 * `password`, …) in `name: value`, `"name": "value"` and `name=value` form,
 * and bearer tokens. Other text is left as it is.
 *
 * @since 0.1.0
 */
import * as Headers from "@effect/platform/Headers"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Inspectable from "effect/Inspectable"
import * as Layer from "effect/Layer"
import * as Predicate from "effect/Predicate"
import * as Stream from "effect/Stream"

/**
 * What a scrubbed credential is replaced with.
 *
 * @since 0.1.0
 * @category models
 */
export const redacted = "<redacted>"

const longName = "[a-z0-9_-]*(?:authorization|api[-_]?key|apikey|access[-_]?key|secret[-_]?key|private[-_]?key" +
  "|secret|token|password|passwd|cookie|session[-_]?id|signature)"

// `key`, `sig` and `auth` alone name credentials in query strings, and
// ordinary fields elsewhere (an error's `key` names a decision)
const credentialName = `(?:${longName}|key|sig|auth)`

const isLongName = new RegExp(`^${longName}$`, "i")
const isParameterName = new RegExp(`^${credentialName}$`, "i")

// A credential name (not inside a longer name), maybe in quotes (escaped any
// number of times, as in JSON inside JSON), a `:` or `=`, then its value:
// quoted, up to the closing quote; after `:`, the rest of the line; after
// `=`, up to the next separator of a query string.
const named = new RegExp(
  `(?<![a-z0-9_-])(${credentialName}(?:\\\\*["'\`])?\\s*)` +
    `(?:(:\\s*|=\\s*)(\\\\*["'\`])[^"'\`\\\\\\r\\n]*|(:[ \\t]*)[^"'\`\\\\\\r\\n]+|(=)[^\\s&"'\`\\\\,;#]+)`,
  "gi"
)

const bearer = /\b(bearer\s+)[a-z0-9._~+/=-]+/gi

/**
 * The text with every credential replaced by {@link redacted}; scrubbing
 * scrubbed text changes nothing.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 *
 * Secrets.scrubText(`"authorization": "Bearer sk-123"`) // `"authorization": "<redacted>"`
 * Secrets.scrubText("GET /v1/models?key=abc&alt=json") // "GET /v1/models?key=<redacted>&alt=json"
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const scrubText = (text: string): string =>
  text
    .replace(
      named,
      (_match, name: string, sep?: string, quote?: string, colon?: string, equals?: string) =>
        quote !== undefined
          ? `${name}${sep}${quote}${redacted}`
          : `${name}${colon ?? equals}${redacted}`
    )
    .replace(bearer, (_match, prefix: string) => `${prefix}${redacted}`)

const scrubEntry = (
  key: string,
  value: unknown,
  seen: WeakMap<object, unknown>,
  isCredential: RegExp = isLongName
): unknown => typeof value === "string" && isCredential.test(key) ? redacted : scrubValue(value, seen)

/** A copy of `self` (same prototype) with its own properties scrubbed, or `self` when none changed. */
const scrubObject = <A extends object>(self: A, seen: WeakMap<object, unknown>, proto: object | null): A => {
  const copy = Object.create(proto) as A
  seen.set(self, copy)
  let changed = false
  for (const key of Reflect.ownKeys(self)) {
    const descriptor = Object.getOwnPropertyDescriptor(self, key)!
    if ("value" in descriptor && typeof key === "string") {
      const value = scrubEntry(key, descriptor.value, seen)
      if (value !== descriptor.value) {
        changed = true
        descriptor.value = value
      }
    }
    Object.defineProperty(copy, key, descriptor)
  }
  // an error's stack repeats its message, and may not be an own value
  if (self instanceof Error && !Object.prototype.hasOwnProperty.call(copy, "stack")) {
    const stack = self.stack
    if (typeof stack === "string" && scrubText(stack) !== stack) {
      changed = true
      Object.defineProperty(copy, "stack", { value: scrubText(stack), writable: true, configurable: true })
    }
  }
  seen.set(self, changed ? copy : self)
  return changed ? copy : self
}

const isPlain = (u: object): boolean => {
  const proto = Object.getPrototypeOf(u)
  return proto === Object.prototype || proto === null
}

/**
 * The response, describing `request` in place of its own: its bodies are
 * read from it (their errors scrubbed, as they name the request it holds),
 * everything else it answers itself.
 */
const scrubResponse = (
  response: HttpClientResponse.HttpClientResponse,
  request: HttpClientRequest.HttpClientRequest
): HttpClientResponse.HttpClientResponse => {
  const body = <A>(read: () => Effect.Effect<A, HttpClientError.ResponseError>) => ({
    get: () => Effect.mapError(read(), scrubError)
  })
  const json = () => scrubError(response.toJSON())
  return Object.create(response, {
    request: { value: request, enumerable: true },
    json: body(() => response.json),
    text: body(() => response.text),
    formData: body(() => response.formData),
    urlParamsBody: body(() => response.urlParamsBody),
    arrayBuffer: body(() => response.arrayBuffer),
    stream: { get: () => Stream.mapError(response.stream, scrubError) },
    toJSON: { value: json },
    [Inspectable.NodeInspectSymbol]: { value: json }
  })
}

const scrubValue = (value: unknown, seen: WeakMap<object, unknown>): unknown => {
  if (typeof value === "string") return scrubText(value)
  if (typeof value !== "object" || value === null) return value
  if (seen.has(value)) return seen.get(value)
  if (Array.isArray(value)) {
    seen.set(value, value)
    const items = value.length === 2 && typeof value[0] === "string"
      ? [value[0], scrubEntry(value[0], value[1], seen, isParameterName)]
      : value.map((item) => scrubValue(item, seen))
    const changed = items.some((item, index) => item !== value[index])
    seen.set(value, changed ? items : value)
    return changed ? items : value
  }
  if (Predicate.hasProperty(value, HttpClientResponse.TypeId)) {
    const response = value as unknown as HttpClientResponse.HttpClientResponse
    const request = scrubValue(response.request, seen)
    if (request === response.request) return value
    const scrubbed = scrubResponse(response, request as HttpClientRequest.HttpClientRequest)
    seen.set(value, scrubbed)
    return scrubbed
  }
  if (
    value instanceof Error || isPlain(value) || Headers.isHeaders(value) ||
    Predicate.hasProperty(value, HttpClientRequest.TypeId)
  ) {
    return scrubObject(value, seen, Object.getPrototypeOf(value))
  }
  return value
}

/**
 * The error with every credential scrubbed from it: its strings (`message`,
 * a response `body`, a `description`), the values of credential-named fields
 * and headers, the requests and responses it describes and its `cause`. The
 * copy keeps the error's class and `_tag`; an error with nothing to scrub is
 * returned as it is.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 *
 * const error = new Error(`401 {"authorization":"Bearer sk-123"}`)
 * Secrets.scrubError(error).message // `401 {"authorization":"<redacted>"}`
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const scrubError = <E>(error: E): E => scrubValue(error, new WeakMap()) as E

/**
 * The cause with {@link scrubError} applied to each failure and defect.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 * import * as Effect from "effect/Effect"
import * as Inspectable from "effect/Inspectable"
 *
 * const call = (effect: Effect.Effect<string, Error>) => Effect.mapErrorCause(effect, Secrets.scrubCause)
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const scrubCause = <E>(cause: Cause.Cause<E>): Cause.Cause<E> => {
  switch (cause._tag) {
    case "Empty":
    case "Interrupt":
      return cause
    case "Fail": {
      const error = scrubError(cause.error)
      return error === cause.error ? cause : Cause.fail(error)
    }
    case "Die": {
      const defect = scrubError(cause.defect)
      return defect === cause.defect ? cause : Cause.die(defect)
    }
    case "Sequential":
    case "Parallel": {
      const left = scrubCause(cause.left)
      const right = scrubCause(cause.right)
      return left === cause.left && right === cause.right
        ? cause
        : cause._tag === "Sequential"
        ? Cause.sequential(left, right)
        : Cause.parallel(left, right)
    }
  }
}

/**
 * An `HttpClient` whose responses and errors describe their request with its
 * credentials scrubbed (the request is sent as it was). Give it to a
 * provider client (`OpenAiClient.layer({ transformClient: Secrets.scrubHttpClient })`)
 * and the provider's own errors, and so @effect/ai's `LanguageModel` spans,
 * hold no credentials either.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 * import * as HttpClient from "@effect/platform/HttpClient"
 * import * as Effect from "effect/Effect"
import * as Inspectable from "effect/Inspectable"
 *
 * const client = Effect.map(HttpClient.HttpClient, Secrets.scrubHttpClient)
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const scrubHttpClient = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  HttpClient.transformResponse(
    client,
    (response) =>
      Effect.mapBoth(response, {
        onFailure: (error) => HttpClientError.isHttpClientError(error) ? scrubError(error) : error,
        onSuccess: (response) => scrubError(response)
      })
  )

/**
 * The `HttpClient` of the context through {@link scrubHttpClient}; provide
 * it between a provider's layer and the platform's client.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 * import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
 * import * as Layer from "effect/Layer"
 *
 * const http = Secrets.layerHttpClient.pipe(Layer.provide(NodeHttpClient.layerUndici))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHttpClient: Layer.Layer<HttpClient.HttpClient, never, HttpClient.HttpClient> = Layer.effect(
  HttpClient.HttpClient,
  Effect.map(HttpClient.HttpClient, scrubHttpClient)
)
