/**
 * Secrets: credentials scrubbed from errors, events, log lines, spans and
 * stored failures before anything writes them.
 *
 * A provider error can carry the request that caused it: @effect/platform's
 * `RequestError`/`ResponseError` hold the `HttpClientRequest`, @effect/ai's
 * `HttpRequestError`/`HttpResponseError` a description of it (`url`,
 * `urlParams: [["key", "…"]]`, `headers`) and, for a body that does not
 * decode, the whole request again in their `body` and so in their `message`.
 * The agent loop passes every model error through {@link scrubError} where it
 * leaves the model, and every tool result through {@link scrubToolResult}
 * where the tool step makes it, so middleware, events, logs, the thread and
 * stored failures see `<redacted>` instead. A credential is found two ways:
 *
 * - **By value.** The credentials a request sent are known: every header but
 *   a few that never hold one (`content-type`, `accept`, `user-agent`, …),
 *   every URL parameter but those obviously safe (`api-version=2024-02-01`,
 *   `alt=json`), every segment of the URL's path but the words of providers'
 *   endpoints (`v1`, `chat`, `completions`, `deployments`, versions, dates,
 *   models' names: a gateway's `/v1/<key>/chat/completions`), the URL's
 *   userinfo (`https://user:<password>@…`, `https://<token>@…`), its
 *   fragment's parameters and pieces (`#access_token=…`, `#<key>`), its host's
 *   labels shaped like a key (`https://<40 hex digits>.example.com`), the
 *   token of a `Bearer` value, the user and password of a `Basic` one, and
 *   every `Redacted` value in the error. They are redacted
 *   where they stand and replaced wherever else they occur in the error: its
 *   message, its cause chain, a gateway's body quoting the key, in any
 *   encoding (see below). Values made
 *   known with {@link register} or {@link layer} (an API key read from
 *   config), and those a client through {@link scrubHttpClient} sends, are
 *   replaced in every text this module scrubs.
 * - **By name.** The values of headers and parameters named like credentials,
 *   that is whose last word is key, token, secret, password, pass, auth,
 *   authorization, signature, credential, creds, cookie or session
 *   (`Ocp-Apim-Subscription-Key`, `x-functions-key`, `x-key`,
 *   `x-goog-api-key`, `access_token`, `sessionId`; see
 *   {@link isCredentialName}), in `name: value`, `"name": "value"`,
 *   `name=value`, `name => value`, `["name", "value"]`, `--name value` and
 *   `<name>value</name>` form, the quotes escaped, HTML-escaped or
 *   URL-encoded as they may be.
 * - **By form.** Bearer tokens, `Basic` credentials, in a URL in any text its
 *   userinfo, its host's labels shaped like a key and the values of its path,
 *   query and fragment that look like a key (in an `http`/`ws` URL: long,
 *   letters and digits, no endpoint's word) or are named like one, and
 *   tokens whose shape announces them
 *   (`sk-…`, `AIza…`, `ghp_…`, JSON web tokens, PEM private keys).
 *
 * A value known by value is found under layers of encoding, in any order
 * and mixed (a gateway that base64-encodes a percent-encoded query): the
 * text is decoded again and again, and wherever a decoding shows the value,
 * the whole encoded stretch that holds it is replaced. Each is matched:
 *
 * - percent-encoding to any depth (`%41`, `%2541`, `%252541`, …), upper or
 *   lower case hex, UTF-8 sequences, every byte escaped or only some, and a
 *   form's `+` for a space;
 * - HTML entities to any depth: named (`&amp;`, `&quot;`, `&lt;`, `&lsqb;`,
 *   …: every ASCII punctuation mark's), decimal (`&#115;`) and hex
 *   (`&#x73;`), with leading zeros or not, `&amp;amp;…`;
 * - string escapes, one level per decoding: `\u0073` (either case),
 *   `\u{73}`, `\x73`, `\"`, `\\`, `\/`, `\n`, as JSON in JSON writes them, and
 *   bytes as Python writes them (`\xc3\xa9`);
 * - base64, standard or URL-safe, with or without padding, the value alone or
 *   after any prefix (a `Basic` header's `user:key`), the run glued to other
 *   letters or not, when the bytes hold text (8 characters or more of
 *   printable ASCII or valid UTF-8), and a Latin-1 value's Latin-1 bytes.
 *
 * A value with accented letters is found composed or decomposed (NFC, NFD);
 * known values that overlap are both found where a text holds them joined.
 *
 * A text is decoded six times at most along any path (any number of
 * percent or HTML layers count as one), and the decoded texts of one text
 * cost at most a few times its length: a megabyte of `%25%25…` is scrubbed
 * in a fraction of a second. A value that holds escapes itself (`ab%41…`)
 * is matched as written and as decoded.
 *
 * What a sink writes of a scrubbed object is scrubbed too, not only its own
 * fields: its class's `toJSON` (as `JSON.stringify` calls it, nested ones
 * too), `toString`, `Symbol.toPrimitive` and custom inspect (`util.inspect`,
 * Node's loggers), getters that compute `message`, `name`, `cause` or
 * `_tag`, and own getters, read from the copy (or from the original, when a
 * private field holds what they read) and scrubbed; its `cause` chain, the
 * Effect `Cause`s it holds and its `Redacted` values (which write
 * `<redacted>`) too.
 *
 * Values shorter than {@link minimumLength} characters are not replaced by
 * value (a short value would shred ordinary text where it happens to occur);
 * they are still redacted where they stand in a credential's place. Other
 * text is left as it is.
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
import * as Either from "effect/Either"
import * as Encoding from "effect/Encoding"
import * as Exit from "effect/Exit"
import * as Inspectable from "effect/Inspectable"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import { decodedTexts, encodedMatches, type Literals, literalsOf } from "./internal/decodings.js"
import { denseLength, itemIndices } from "./internal/fast/quickDepth.js"
import * as JsonDepth from "./internal/jsonDepth.js"
import * as JsonValue from "./internal/jsonValue.js"
import { registry } from "./internal/knownCredentials.js"

/**
 * What a scrubbed credential is replaced with.
 *
 * @since 0.1.0
 * @category models
 */
export const redacted = "<redacted>"

/**
 * The length under which a known credential is not replaced wherever it
 * occurs (it would shred ordinary text); it is still redacted where it stands
 * as a header's, a parameter's or a credential-named field's value.
 *
 * @since 0.1.0
 * @category models
 */
export const minimumLength = 8

/**
 * A caller's value as an error message may show it: a number, a boolean or a
 * bigint as written, anything else by its kind. Never a string's text (a
 * string given where another value belongs may be a credential), and never
 * converted (a symbol or an object without a prototype throws when made a
 * string). For checks of options that come from JavaScript.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 *
 * Secrets.describeValue(42) // "42"
 * Secrets.describeValue("sk-live-0123456789") // "a string"
 * Secrets.describeValue(Object.create(null)) // "an object"
 * ```
 *
 * @since 0.1.0
 * @category getters
 */
export const describeValue = (value: unknown): string =>
  typeof value === "number" || typeof value === "boolean"
    ? String(value)
    : typeof value === "bigint"
    ? `${value}n`
    : value === null
    ? "null"
    : Array.isArray(value)
    ? "an array"
    : typeof value === "object"
    ? "an object"
    : typeof value === "undefined"
    ? "undefined"
    : `a ${typeof value}`

// ---------------------------------------------------------------------------
// names
// ---------------------------------------------------------------------------

const wordsOf = (name: string): Array<string> =>
  name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase().split(/[^a-z0-9]+/).filter((word) => word.length > 0)

const credentialWords = new Set([
  "key",
  "apikey",
  "token",
  "secret",
  "password",
  "passwd",
  "pwd",
  "passphrase",
  "auth",
  "authorization",
  "signature",
  "sig",
  "credential",
  "credentials",
  "cred",
  "creds",
  "pass",
  "cookie",
  "session",
  "jwt"
])

// words run together (`apikey`, `accesstoken`, `jsessionid`), but not any `…key` (`monkey`)
const credentialEnding =
  /(?:token|secret|password|passwd|passphrase|(?:api|access|secret|private|subscription)key|sessionid|cookie|signature|credentials?|authorization)$/

// keys that open nothing: `idempotency-key`, `cache_key`, `waitKey`
const ordinaryKeys = new Set([
  "idempotency",
  "cache",
  "wait",
  "interrupt",
  "partition",
  "sort",
  "dedupe",
  "group",
  "lookup",
  "primary",
  "foreign",
  "routing",
  "thread",
  "message",
  "tool",
  "item",
  "entry"
])

// what every credential name holds: most names are ruled out without splitting them into words
const mayNameCredential = /key|token|secret|pass|pwd|auth|sig|cred|cookie|session|jwt/i

// alone, these name ordinary fields of an object (an error's `key` names a decision)
const shortNames = new Set(["key", "sig", "auth", "session"])

/**
 * Whether a header, parameter or field name names a credential: its last
 * word (words split at `-`, `_`, `.` and camelCase humps) is key, token,
 * secret, password, pass, auth, authorization, signature, credential, creds,
 * cookie or session, or it ends in session id. Keys that open nothing
 * (`idempotency-key`, `cache_key`) and counts (`max_tokens`, `token_type`) are
 * not credentials.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 *
 * Secrets.isCredentialName("Ocp-Apim-Subscription-Key") // true
 * Secrets.isCredentialName("x-functions-key") // true
 * Secrets.isCredentialName("sessionId") // true
 * Secrets.isCredentialName("X-Stepwise-Creds") // true
 * Secrets.isCredentialName("max_output_tokens") // false
 * Secrets.isCredentialName("idempotency-key") // false
 * ```
 *
 * @since 0.1.0
 * @category predicates
 */
export const isCredentialName = (name: string): boolean => {
  if (!mayNameCredential.test(name)) return false
  const words = wordsOf(name)
  const last = words[words.length - 1]
  const before = words[words.length - 2]
  if (last === undefined) return false
  if (last === "id") return before === "session"
  if (last === "key" && before !== undefined && ordinaryKeys.has(before)) return false
  return credentialWords.has(last) || credentialEnding.test(last)
}

const isCredentialField = (name: string): boolean => !shortNames.has(name.toLowerCase()) && isCredentialName(name)

// headers a client sends that never hold a credential
const ordinaryHeaders = new Set([
  "accept",
  "accept-charset",
  "accept-encoding",
  "accept-language",
  "b3",
  "baggage",
  "cache-control",
  "connection",
  "content-encoding",
  "content-language",
  "content-length",
  "content-type",
  "date",
  "expect",
  "host",
  "keep-alive",
  "origin",
  "pragma",
  "referer",
  "te",
  "traceparent",
  "tracestate",
  "transfer-encoding",
  "upgrade",
  "user-agent",
  "idempotency-key",
  "x-amzn-trace-id",
  "x-client-request-id",
  "x-correlation-id",
  "x-request-id",
  "openai-beta",
  "anthropic-beta",
  "anthropic-version"
])

const isOrdinaryHeader = (name: string): boolean => {
  const lower = name.toLowerCase()
  return ordinaryHeaders.has(lower) || lower.startsWith("x-stainless-")
}

// URL parameters that never hold a credential, and values that are obviously none
const ordinaryParameters = new Set([
  "alt",
  "api-version",
  "api_version",
  "apiversion",
  "format",
  "include",
  "limit",
  "model",
  "order",
  "page",
  "page_size",
  "per_page",
  "stream",
  "version"
])
const ordinaryValue = /^(?:\d{1,6}|\d{4}-\d{2}-\d{2}(?:-[a-z]+)?|true|false|null|json|asc|desc|auto)$/i

const isSecretParameter = (name: string, value: string): boolean =>
  isCredentialName(name) || !(ordinaryParameters.has(name.toLowerCase()) || ordinaryValue.test(value))

// ---------------------------------------------------------------------------
// by value
// ---------------------------------------------------------------------------

const encoded = (text: string, encode: (text: string) => string): string | undefined => {
  try {
    return encode(text)
  } catch {
    return undefined // a lone surrogate has no URI encoding
  }
}

/**
 * The characters of the base64 of `secret` that it alone decides, wherever it
 * stands in what is encoded (`user:secret` in a Basic header): one form for
 * each of the three places it can start in a group of three bytes.
 */
const base64Forms = (secret: string): Array<string> => {
  const forms: Array<string> = []
  // its UTF-8 bytes, and, when every character is one byte of Latin-1 (`é`), those (as `btoa` writes them)
  const latin1Only = /[\u0080-\u00ff]/.test(secret) && !/[^\x20-\xff]/.test(secret)
  const encodings = [new TextEncoder().encode(secret)]
  if (latin1Only) encodings.push(Uint8Array.from(secret, (char) => char.charCodeAt(0)))
  for (const bytes of encodings) {
    for (const offset of [0, 1, 2]) {
      const padded = new Uint8Array(offset + bytes.length)
      padded.set(bytes, offset)
      const base64 = Encoding.encodeBase64(padded)
      const form = base64.slice(Math.ceil((offset * 8) / 6), Math.floor((padded.length * 8) / 6))
      forms.push(form, form.replace(/\+/g, "-").replace(/\//g, "_"))
    }
  }
  return forms
}

/** JSON's escapes of what is not ASCII (`\u00e9`), in lower or upper case hex digits, as many encoders write them. */
const asciiJson = (json: string, hex: (digits: string) => string): string =>
  json.replace(/[\u0080-\uffff]/g, (char) => `\\u${hex(char.charCodeAt(0).toString(16).padStart(4, "0"))}`)

const htmlEntities: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" }

/**
 * The ways a value is written in an error or a result, as the text stands:
 * as is; escaped in JSON (once or twice, with `\/` for `/`, with `\u…` for
 * what is not ASCII); URI-encoded (as a component or a URI, in upper or lower
 * case hex digits, once or twice); form-encoded (`+` for a space), or
 * form-decoded (its `+` read as spaces); HTML-escaped; in base64 (standard or
 * URL-safe, alone or after any prefix, with or without padding). Deeper
 * layers are decoded (`internal/decodings.ts`) and their texts matched
 * against these forms.
 */
const formsOf = (secret: string): ReadonlyArray<string | undefined> => {
  const json = JSON.stringify(secret).slice(1, -1)
  const component = encoded(secret, encodeURIComponent)
  return [
    secret,
    json,
    JSON.stringify(json).slice(1, -1),
    json.replace(/\//g, "\\/"),
    asciiJson(json, (digits) => digits),
    asciiJson(json, (digits) => digits.toUpperCase()),
    component,
    component?.replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase()),
    component === undefined ? undefined : encodeURIComponent(component),
    component?.replace(/%20/g, "+"),
    encoded(secret, encodeURI),
    // as a form encodes it (URLSearchParams): `!'()~` escaped too
    component?.replace(/[!'()~]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`).replace(/%20/g, "+"),
    secret.replace(/\+/g, " "),
    // its spaces as a form writes them, the rest as it is (or as decoding gave it back: `a+b` of `a%20b`)
    secret.includes(" ") ? secret.replace(/ /g, "+") : undefined,
    secret.replace(/[&<>"']/g, (char) => htmlEntities[char]!),
    ...base64Forms(secret)
  ]
}

/**
 * One pattern for every form of every value long enough (longest first), or
 * `undefined`. A value with accented letters has the forms of its composed
 * and decomposed writings (NFC, NFD) as well, a value with spaces or line
 * breaks around it those of the value without them. A value that holds escapes
 * itself (`ab%41cd…`, `&amp;`, `\u0041`) has the forms of what it decodes to
 * as well: decoding a text that quotes it (percent-encoded three times)
 * decodes them too.
 */
const patternOf = (secrets: Iterable<string>): Literals | undefined => {
  const forms = new Set<string>()
  for (const secret of secrets) {
    if (secret.length < minimumLength || redacted.includes(secret)) continue
    // its letters composed and decomposed (`é` as one character or as `e` and an accent), as a gateway may normalise
    // them, however long that makes it; without the spaces or line break around it (a key read from a file)
    const trimmed = secret.trim()
    const written = trimmed.length >= minimumLength && trimmed !== secret ? [secret, trimmed] : [secret]
    const values = new Set(written.flatMap((value) => [value, value.normalize("NFC"), value.normalize("NFD")]))
    if (/[%&\\]/.test(secret)) {
      for (const text of decodedTexts(secret)) if (text.length >= minimumLength) values.add(text)
    }
    for (const value of values) {
      for (const form of formsOf(value)) if (form !== undefined && !redacted.includes(form)) forms.add(form)
    }
  }
  return literalsOf(forms)
}

/**
 * The text with every match of the patterns replaced, as the text stands
 * or under layers of encoding (see `internal/decodings.ts`): the whole
 * encoded stretch that holds a match is replaced.
 */
const replaceValues = (text: string, ...patterns: ReadonlyArray<Literals | undefined>): string => {
  const defined = patterns.filter((pattern) => pattern !== undefined)
  if (defined.length === 0) return text
  // a replacement can join the text around it into another occurrence
  for (let round = 0; round < 4; round++) {
    const ranges = encodedMatches(text, defined)
    if (ranges.length === 0) return text
    let next = ""
    let last = 0
    for (const [start, end] of ranges) {
      next += text.slice(last, start) + redacted
      last = end
    }
    next += text.slice(last)
    if (next === text) return text
    text = next
  }
  return text
}

// how many credentials clients sent are kept known (a client that rotates its token forgets the oldest)
const sentKept = 256

const knownPattern = (): Literals | undefined => {
  if (registry.stale) {
    registry.pattern = patternOf([...registry.holders.keys(), ...registry.sent])
    registry.stale = false
  }
  return registry.pattern
}

const remember = (secret: string) => {
  if (secret.length < minimumLength) return
  if (registry.sent.delete(secret)) return void registry.sent.add(secret) // the most recent last
  registry.sent.add(secret)
  registry.generation++
  if (registry.sent.size > sentKept) registry.sent.delete(registry.sent.values().next().value!)
  registry.stale = true
}

const hold = (secret: string) => {
  const holders = registry.holders.get(secret) ?? 0
  if (holders === 0) registry.generation++
  registry.holders.set(secret, holders + 1)
  registry.stale = true
}

const release = (secret: string) => {
  const holders = (registry.holders.get(secret) ?? 1) - 1
  if (holders > 0) registry.holders.set(secret, holders)
  else registry.holders.delete(secret)
  registry.stale = true
}

const reveal = (secret: string | Redacted.Redacted<string>): string | undefined => {
  if (!Redacted.isRedacted(secret)) return secret
  try {
    const value = Redacted.value(secret)
    return typeof value === "string" ? value : undefined
  } catch {
    return undefined // wiped
  }
}

/** Bytes read as Latin-1, one character each (`TextDecoder`'s "latin1" is windows-1252). */
const latin1 = (bytes: Uint8Array): string => {
  let text = ""
  for (const byte of bytes) text += String.fromCharCode(byte)
  return text
}
const utf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * The user and the password a `Basic` credential holds (the base64 of
 * `user:password`), read as UTF-8 and as Latin-1 (`btoa` writes that): the
 * password, and the user when there is no password (a key sent as the user,
 * Stripe's way) or when it is no plain user name.
 */
const basicCredentials = (token: string): Array<string> => {
  const bytes = Either.orElse(Encoding.decodeBase64(token), () => Encoding.decodeBase64Url(token))
  if (Either.isLeft(bytes)) return []
  const texts = [latin1(bytes.right)]
  try {
    texts.push(utf8.decode(bytes.right))
  } catch {
    // not UTF-8: the Latin-1 reading is the one
  }
  return texts.flatMap((text) => {
    const colon = text.indexOf(":")
    if (colon < 0) return []
    const user = text.slice(0, colon)
    const password = text.slice(colon + 1)
    return password === "" ? [user] : isUserName(user) ? [password] : [user, password]
  })
}

/**
 * Adds a sent credential, and the token of a `Scheme token` value
 * (`Bearer sk-…`): of a `Basic` one, the user and password it encodes too.
 */
const addCredential = (found: Set<string>, value: unknown) => {
  const text = Redacted.isRedacted(value) ? reveal(value as Redacted.Redacted<string>) : value
  if (typeof text !== "string") return
  found.add(text)
  const scheme = /^([A-Za-z][A-Za-z0-9-]*) +(\S.*)$/.exec(text)
  if (scheme === null) return
  found.add(scheme[2]!)
  if (scheme[1]!.toLowerCase() === "basic") basicCredentials(scheme[2]!).forEach((part) => found.add(part))
}

/**
 * Makes values known credentials while the scope is open: every text and
 * error this module scrubs, wherever it is written, has them replaced by
 * {@link redacted}. A value under {@link minimumLength} characters is not
 * replaced by value. Give it the credentials a client layer sets (an API key
 * read from config, a gateway's base URL with the key in its path: the
 * credentials a URL holds, its path segments that are no endpoint's words,
 * its query's and fragment's parameters, its userinfo and its host's labels
 * shaped like a key, are known alone as well).
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 * import * as Effect from "effect/Effect"
 * import * as Redacted from "effect/Redacted"
 *
 * const program = Effect.gen(function*() {
 *   yield* Secrets.register(Redacted.make("sk-live-0123456789"))
 *   return Secrets.scrubText("the gateway refused sk-live-0123456789") // "the gateway refused <redacted>"
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const register = (
  ...secrets: ReadonlyArray<string | Redacted.Redacted<string>>
): Effect.Effect<void, never, Scope.Scope> => {
  const found = new Set<string>()
  for (const secret of secrets) {
    addCredential(found, secret)
    // a secret URL (a gateway's base URL with the key in its path): the credentials it holds are known alone too
    const text = reveal(secret)
    if (text !== undefined && /^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
      sentCredentials({ url: text, headers: {} }, found, true)
    }
  }
  const values = [...found]
  return Effect.acquireRelease(
    Effect.sync(() => values.forEach(hold)),
    () => Effect.sync(() => values.forEach(release))
  )
}

/**
 * A layer that makes values known credentials while it lives (see
 * {@link register}).
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 * import * as Config from "effect/Config"
 * import * as Effect from "effect/Effect"
 * import * as Layer from "effect/Layer"
 *
 * const KnownKey = Layer.unwrapEffect(Effect.map(Config.redacted("OPENAI_API_KEY"), (key) => Secrets.layer(key)))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (...secrets: ReadonlyArray<string | Redacted.Redacted<string>>): Layer.Layer<never> =>
  Layer.scopedDiscard(register(...secrets))

// ---------------------------------------------------------------------------
// by name
// ---------------------------------------------------------------------------

const nameChars = "A-Za-z0-9_.-"

// A quote as an error writes it: as is, escaped any number of times (JSON in
// JSON), as a `\u0022` escape, an HTML entity or URL-encoded (once or more).
const quote = `(?:\\\\*["'\`]|\\\\+u002[27]|&quot;|&apos;|&#0*3[49];|&#x0*2[27];|%(?:25)*2[27])`
// the characters of a quoted value: up to the closing quote, in any of those forms
const quotedChars = `(?:[^"'\`\\\\\\r\\n&%]|&(?!quot;|apos;|#)|%(?!(?:25)*2[27]))*`

// A name (not inside a longer name), maybe in quotes, then `:`, `=` or `=>`
// (maybe encoded). The name decides whether the value that follows is
// redacted: quoted, up to the closing quote; after `:` or `=>`, the rest of
// the line; after `=`, up to the next separator of a query string. Only a
// credential's value is read, so each character is read a bounded number of
// times.
const named = new RegExp(
  `(?<![${nameChars}])([${nameChars}]+)((?:${quote})?\\s*)(=>|[:=]|%(?:25)*3[AaDd]|&#0*5[89];|&#0*61;)`,
  "g"
)
const quotedValue = new RegExp(`(\\s*)(${quote})${quotedChars}`, "y")
// the rest of the line, or the next line when this one ends at the name and the next is indented
const lineValue = /([ \t]*(?:\r?\n[ \t]+)?)[^"'`\\\r\n]+/y
const parameterValue = /([ \t]*)(?:[^\s&"'`\\,;#%]|%(?!(?:25)*2[267]))+/y
const isEquals = (separator: string) => /^(?:=|%(?:25)*3[Dd]|&#0*61;)$/.test(separator)

// A name and its value as a pair in an array or tuple: `["key", "v"]`, `( 'key', 'v' )`, `[\"key\",\"v\"]`.
const pair = new RegExp(`([[(]\\s*(${quote})([${nameChars}]+)\\2\\s*,\\s*(${quote}))${quotedChars}`, "g")

// A name as an XML or HTML element: `<apiKey>v</apiKey>`.
const element = /<([A-Za-z][\w.-]*)((?:\s[^<>]*)?>)([^<]*)(<\/\1>)/g

// A command line's option and its value: `--api-key sk-…`. An option starts a run of name characters (not
// after a `.` either), so each character is read by one try at most: a text of `-a.-a.-a.` is linear, not quadratic.
const option = /(?<![\w.-])(--?[A-Za-z][\w.-]*)([ \t]+)(?!-)[^\s"'`]+/g

const bearer = /\b(bearer\s+)[a-z0-9._~+/=-]+/gi

// `Basic` and the base64 of `user:password`
const basic = /\b(basic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])/gi
const isBasicCredential = (encoded: string): boolean =>
  Either.match(Encoding.decodeBase64String(encoded), { onLeft: () => false, onRight: (text) => text.includes(":") })

// A URL in text: its scheme, its authority (`user:password@host:port`), its path and query, its fragment (a
// character of each, or a `<redacted>` already there)
const urlChar = (excluded: string) => `(?:[^\\s${excluded}"'\`<>\\\\]|${redacted})`
const textUrl = new RegExp(
  `\\b([a-z][a-z0-9+.-]{0,31}:\\/\\/)(${urlChar("/?#")}*)(${urlChar("#")}*)(?:#(${urlChar("")}*))?`,
  "gi"
)

/**
 * A URL in text with its userinfo, its host's credential-like labels, and
 * the credentials of its path, query and fragment (named like one, or
 * looking like one: a path segment no endpoint's word, long, letters and
 * digits) redacted.
 */
const scrubTextUrl = (_whole: string, scheme: string, authority: string, rest: string, fragment?: string): string => {
  const parts = partsOf(rest)
  // a file's URL (a stack trace's) holds no key; a network URL's key is letters, digits, `-` and `_`
  const network = /^(?:https?|wss?):/i.test(scheme)
  const keyLike = (value: string) => network && /^[\w-]+$/.test(value) && looksSecret(value)
  const secret = (name: string, value: string) => isCredentialName(name) || keyLike(value)
  const path = parts.path.split("/").map((raw) =>
    raw !== redacted && !isEndpointSegment(decoded(raw)) && keyLike(decoded(raw)) ? redacted : raw
  ).join("/")
  return `${scheme}${scrubAuthority(authority)}${path}${
    parts.query === undefined ? "" : `?${scrubParameterText(parts.query, secret, keyLike)}`
  }${fragment === undefined ? "" : `#${scrubParameterText(fragment, secret, keyLike)}`}`
}

// Credentials whose form announces them: provider keys, JSON web tokens, private keys.
const announced = new RegExp(
  [
    /\bsk-[A-Za-z0-9_-]{16,}/,
    /\bAIza[0-9A-Za-z_-]{20,}/,
    /\b(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}/,
    /\bglpat-[A-Za-z0-9_-]{20,}/,
    /\bxox[abposr]-[A-Za-z0-9-]{10,}/,
    /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/,
    /\bhf_[A-Za-z0-9]{20,}/,
    /\bbot\d{6,}:[A-Za-z0-9_-]{20,}/,
    // (a token starts a run of its characters, or follows its one leading `-`: a start deeper inside a run would
    // read the rest of it again for each `eyJ` in it, quadratic on `eyJ-eyJ-…`)
    /(?<![A-Za-z0-9_])(?<![A-Za-z0-9_-]-)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*/,
    /-----BEGIN [A-Z ]*PRIVATE KEY-----[A-Za-z0-9+/=\s]*(?:-----END [A-Z ]*PRIVATE KEY-----)?/
  ].map((pattern) => pattern.source).join("|"),
  "g"
)

const valueAt = (pattern: RegExp, text: string, at: number): RegExpExecArray | null => {
  pattern.lastIndex = at
  return pattern.exec(text)
}

const scrubNamed = (text: string): string => {
  let out = ""
  let last = 0
  named.lastIndex = 0
  for (let match = named.exec(text); match !== null; match = named.exec(text)) {
    if (!isCredentialName(match[1]!)) continue
    const at = named.lastIndex
    // the unquoted value only when no quoted one follows: reading the rest of the line for each name is quadratic
    const value = valueAt(quotedValue, text, at) ?? valueAt(isEquals(match[3]!) ? parameterValue : lineValue, text, at)
    if (value === null) continue
    // keep the spaces and the opening quote
    out += text.slice(last, at) + value[1] + (value[2] ?? "") + redacted
    last = at + value[0].length
    named.lastIndex = last
  }
  return out + text.slice(last)
}

/**
 * The user and password of the `Basic` credentials a text quotes (`Authorization: Basic …`), or `undefined`: a
 * gateway's error that shows the header may quote the key it decoded too.
 */
const quotedBasic = (text: string): Literals | undefined => {
  if (!/basic/i.test(text)) return undefined
  const found = new Set<string>()
  for (const match of text.matchAll(basic)) {
    if (isBasicCredential(match[2]!)) basicCredentials(match[2]!).forEach((part) => found.add(part))
  }
  return found.size === 0 ? undefined : patternOf(found)
}

const scrubTextWith = (text: string, values: Literals | undefined): string =>
  scrubNamed(replaceValues(text, values, knownPattern(), quotedBasic(text)))
    .replace(
      pair,
      (whole, prefix: string, _quote: string, name: string) => isCredentialName(name) ? `${prefix}${redacted}` : whole
    )
    .replace(
      element,
      (whole, name: string, open: string, value: string, close: string) =>
        isCredentialName(name) && value.trim().length > 0 ? `<${name}${open}${redacted}${close}` : whole
    )
    .replace(
      option,
      (whole, name: string, spaces: string) => isCredentialName(name) ? `${name}${spaces}${redacted}` : whole
    )
    .replace(bearer, (_match, prefix: string) => `${prefix}${redacted}`)
    .replace(
      basic,
      (whole, prefix: string, encoded: string) => isBasicCredential(encoded) ? `${prefix}${redacted}` : whole
    )
    .replace(textUrl, scrubTextUrl)
    .replace(announced, redacted)

/**
 * The text with every credential replaced by {@link redacted}: the values of
 * credential-named headers and parameters, bearer tokens and the values made
 * known with {@link register}. Scrubbing scrubbed text changes nothing.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 *
 * Secrets.scrubText(`"authorization": "Bearer sk-123"`) // `"authorization": "<redacted>"`
 * Secrets.scrubText("GET /v1/models?key=abc&alt=json") // "GET /v1/models?key=<redacted>&alt=json"
 * Secrets.scrubText(`Ocp-Apim-Subscription-Key: 0123abcd`) // "Ocp-Apim-Subscription-Key: <redacted>"
 * Secrets.scrubText(`urlParams: [["key", "AIza123"]]`) // `urlParams: [["key", "<redacted>"]]`
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const scrubText = (text: string): string => scrubTextWith(text, undefined)

// ---------------------------------------------------------------------------
// errors
// ---------------------------------------------------------------------------

const isPlain = (u: object): boolean => {
  const proto = Object.getPrototypeOf(u)
  return proto === Object.prototype || proto === null
}

/** An object that holds its data in its own properties: a plain one, an instance of a class (not a `Date`, a `Promise`, …). */
const isRecord = (u: object): boolean =>
  typeof u !== "function" && Object.prototype.toString.call(u) === "[object Object]"

/** An `HttpClientRequest`, or a description of one as @effect/ai's errors hold it. */
interface RequestLike {
  readonly url: string
  readonly urlParams?: unknown
  /** The fragment (the platform's `Option` of it). */
  readonly hash?: unknown
  readonly headers: object
}

const isRequest = (u: object): u is RequestLike =>
  Predicate.hasProperty(u, HttpClientRequest.TypeId) ||
  (isPlain(u) && Predicate.hasProperty(u, "method") && Predicate.hasProperty(u, "url") &&
    typeof u.url === "string" && Predicate.hasProperty(u, "headers") && Predicate.isObject(u.headers))

const decoded = (text: string): string => {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "))
  } catch {
    return text
  }
}

// ---------------------------------------------------------------------------
// URLs
// ---------------------------------------------------------------------------

// The words providers' endpoints are made of. A path segment made of them (or of a version, a date, a short number
// or a model's name) is no credential; any other segment may be one (a gateway's `/v1/<key>/…`, an Azure deployment,
// an account id) and is redacted in a URL an error or span records.
const endpointWords = new Set(
  [
    "api",
    "apis",
    "ai",
    "openai",
    "anthropic",
    "google",
    "azure",
    "bedrock",
    "runtime",
    "chat",
    "completions",
    "completion",
    "responses",
    "response",
    "embeddings",
    "embed",
    "models",
    "model",
    "deployments",
    "engines",
    "messages",
    "images",
    "generations",
    "edits",
    "variations",
    "audio",
    "speech",
    "transcriptions",
    "translations",
    "moderations",
    "files",
    "uploads",
    "batches",
    "assistants",
    "threads",
    "runs",
    "inference",
    "projects",
    "locations",
    "publishers",
    "endpoints",
    "count_tokens",
    "tokens",
    "generateContent",
    "streamGenerateContent",
    "countTokens",
    "embedContent",
    "batchEmbedContents",
    "predict",
    "rawPredict",
    "streamRawPredict",
    "invoke",
    "invoke-with-response-stream",
    "converse",
    "converse-stream",
    "stream",
    "input",
    "items",
    "cancel",
    "content",
    "health",
    "status",
    "mcp",
    "sse",
    "rpc",
    "v",
    "latest",
    "default",
    "global",
    "us-central1",
    "europe-west4"
  ].map((word) => word.toLowerCase())
)
const versionSegment =
  /^(?:v\d{1,2}(?:\.\d{1,2})?(?:(?:alpha|beta|preview)\d{0,2})?|\d{1,4}|\d{4}-\d{2}-\d{2}(?:-preview)?)$/i
// a model's name: a family, then short parts (`gpt-4o-mini`, `claude-3-5-sonnet-20241022`, `gemini-1.5-pro-002`)
const modelName =
  /^(?:[a-z]+\.)?(?:gpt|o\d|chatgpt|text|gemini|gemma|claude|mistral|mixtral|codestral|llama\d?|command|deepseek|qwen\d?|phi|grok|titan|nova|dall|whisper|tts)(?:[-.@_][a-z0-9]{1,9})*(?::\d{1,2})?$/i

const isEndpointPart = (part: string): boolean =>
  part === "" || part === redacted || endpointWords.has(part.toLowerCase()) || versionSegment.test(part) ||
  modelName.test(part)

/** Whether a (decoded) path segment is provably no credential: words of an endpoint, maybe `model:method`. */
const isEndpointSegment = (segment: string): boolean =>
  isEndpointPart(segment) || segment.split(":").every(isEndpointPart)

// a URL: its scheme, authority (userinfo, host and port), path, query and fragment
const urlParts = /^(?:([a-z][a-z0-9+.-]*:\/\/)([^/?#]*))?([^?#]*)(\?[^#]*)?(#[\s\S]*)?$/i

interface UrlParts {
  readonly scheme: string
  readonly authority: string
  readonly path: string
  /** The query, without its `?`. */
  readonly query: string | undefined
  /** The fragment, without its `#`. */
  readonly fragment: string | undefined
}

const partsOf = (url: string): UrlParts => {
  const [, scheme = "", authority = "", path = "", query, fragment] = urlParts.exec(url)!
  return { scheme, authority, path, query: query?.slice(1), fragment: fragment?.slice(1) }
}

const withParts = (parts: UrlParts): string =>
  `${parts.scheme}${parts.authority}${parts.path}${parts.query === undefined ? "" : `?${parts.query}`}${
    parts.fragment === undefined ? "" : `#${parts.fragment}`
  }`

/** Whether a value looks like a credential: long, letters and digits, no spaces. */
const looksSecret = (value: string): boolean =>
  value.length >= 16 && /[a-z]/i.test(value) && /\d/.test(value) && !/\s/.test(value)

/** A user name of a URL's userinfo that is no credential: a word (`git`, `x-access-token`), no digits. */
const isUserName = (user: string): boolean => user === redacted || /^[A-Za-z][A-Za-z._-]{0,31}$/.test(user)

/**
 * A URL's userinfo (`user:password`, `token`) with the password redacted, and
 * the user too unless it is a plain user name.
 */
const scrubUserInfo = (info: string): string => {
  const colon = info.indexOf(":")
  const user = colon < 0 ? info : info.slice(0, colon)
  const kept = isUserName(decoded(user)) ? user : redacted
  return colon < 0 ? kept : `${kept}:${redacted}`
}

/**
 * Whether a host's label may be a credential or a secret id (a gateway's
 * `https://<key>.example.com`): 16 characters or more, and hexadecimal (maybe
 * dashed: a UUID), or holding `_`, or upper and lower case, or 25 letters and
 * more, or a run of more than 10 letters and digits mixed, or a run of 6 or
 * more with a digit before a letter (`ac0aam-…`: a token, where a name ends
 * in its digits). Providers' labels (`us-central1-aiplatform`,
 * `generativelanguage`, `bedrock-runtime`, `my-resource-eastus2`) are none.
 * A URL parser lower-cases a host: a base64url key there may lose its shape
 * (`dbufdzjjuzulzklr-2ra0a`), so a gateway URL with a key in its host is
 * registered (`register`), which makes the key known in either case.
 */
const isSecretLabel = (label: string): boolean =>
  label.length >= 16 && label !== redacted &&
  (/^[0-9a-f]+$/i.test(label.replace(/-/g, "")) || label.includes("_") ||
    (/[a-z]/.test(label) && /[A-Z]/.test(label)) || /^[a-z]{25,}$/i.test(label) ||
    label.split("-").some((part) =>
      /[a-z]/i.test(part) && /\d/.test(part) &&
      (part.length > 10 || (part.length >= 6 && /\d[a-z0-9]*[a-z]/i.test(part)))
    ))

/** The labels of an authority's host (without the port) that may be credentials. */
const hostSecrets = (authority: string): Array<string> => {
  const host = authority.slice(authority.lastIndexOf("@") + 1).replace(/:\d*$/, "")
  return host.startsWith("[") ? [] : host.split(".").filter(isSecretLabel)
}

/** An authority (`userinfo@host:port`) with its userinfo and the host's credential-like labels redacted. */
const scrubAuthority = (authority: string): string => {
  const at = authority.lastIndexOf("@")
  const hostPort = authority.slice(at + 1)
  const port = /:\d*$/.exec(hostPort)?.[0] ?? ""
  const host = hostPort.slice(0, hostPort.length - port.length)
  const labels = host.startsWith("[") ? host : host.split(".").map((label) => isSecretLabel(label) ? redacted : label)
    .join(".")
  return `${at < 0 ? "" : `${scrubUserInfo(authority.slice(0, at))}@`}${labels}${port}`
}

/** Whether a piece of a URL's query or fragment that is no `name=value` is provably no credential. */
const isUrlWord = (piece: string): boolean => isEndpointSegment(piece) || /^[A-Za-z][A-Za-z_-]{0,31}$/.test(piece)

/**
 * A URL's query or fragment (`a=1&b=2`, `access_token=…`, `/route`): each
 * `name=value` redacted as `secret(name, value)` says, each other piece
 * (split at `/`) as `secretPiece` says.
 */
const scrubParameterText = (
  text: string,
  secret: (name: string, value: string) => boolean,
  secretPiece: (piece: string) => boolean
): string =>
  text.split("&").map((part) => {
    const equals = part.indexOf("=")
    if (equals > 0) {
      return part.slice(equals + 1) !== redacted &&
          secret(decoded(part.slice(0, equals)), decoded(part.slice(equals + 1)))
        ? `${part.slice(0, equals)}=${redacted}`
        : part
    }
    return part.split("/").map((piece) => piece !== redacted && secretPiece(decoded(piece)) ? redacted : piece)
      .join("/")
  }).join("&")

/** A request's query or fragment, scrubbed: every parameter but the obviously safe ones, every piece but words. */
const scrubRequestParameters = (text: string): string =>
  scrubParameterText(text, isSecretParameter, (piece) => !isUrlWord(piece))

/** The `name=value` parameters and other pieces of a query or fragment: the name, the value as written and decoded. */
type Parameter = readonly [name: string | undefined, raw: string, value: string]
const parametersOf = (text: string | undefined): Array<Parameter> =>
  text === undefined ? [] : text.split("&").flatMap((part): Array<Parameter> => {
    const equals = part.indexOf("=")
    return equals > 0
      ? [[decoded(part.slice(0, equals)), part.slice(equals + 1), decoded(part.slice(equals + 1))]]
      : part.split("/").map((piece) => [undefined, piece, decoded(piece)])
  })

/** The segments of a URL's path, as written and decoded, that may be credentials. */
const pathSecrets = (path: string): Array<readonly [raw: string, value: string]> =>
  path.split("/").flatMap((raw) => {
    const value = decoded(raw)
    return isEndpointSegment(value) ? [] : [[raw, value] as const]
  })

/**
 * The URL with every path segment that is not provably an endpoint's word
 * redacted: the origin, the words of the endpoint, the query and the
 * fragment (scrubbed on their own) stay. A key is a path segment behind many
 * gateways (`/v1/<key>/…`), Azure names a deployment there, a proxy an
 * account: none of these has a name that says it is a credential, and the
 * shape of a key (hex, base64, words run together) is not one a rule can rule
 * out, so only words known to providers' endpoints, versions, dates, short
 * numbers and models' names stay.
 */
const scrubPath = (url: string): string => {
  const parts = partsOf(url)
  const path = parts.path.split("/").map((raw) => isEndpointSegment(decoded(raw)) ? raw : redacted).join("/")
  return path === parts.path ? url : withParts({ ...parts, path })
}

/**
 * A URL a request was sent to, every part of it scrubbed: the userinfo, the
 * host's credential-like labels, the path's segments that are no endpoint's
 * words, the query's and the fragment's parameters but the obviously safe
 * ones, and the values the error shows it sent wherever they occur.
 */
const scrubUrl = (url: string, scrubbing: Scrubbing): string => {
  const parts = partsOf(scrubPath(url))
  return scrubTextWith(
    withParts({
      ...parts,
      authority: parts.scheme === "" ? parts.authority : scrubAuthority(parts.authority),
      query: parts.query === undefined ? undefined : scrubRequestParameters(parts.query),
      fragment: parts.fragment === undefined ? undefined : scrubRequestParameters(parts.fragment)
    }),
    scrubbing.values
  )
}

/**
 * The credentials a request sent. `all`: every header and parameter value
 * but the ordinary ones, every part of its URL that may be one; else only
 * those named like credentials or looking like one (long, letters and
 * digits, no spaces).
 */
const sentCredentials = (request: RequestLike, found: Set<string>, all: boolean) => {
  for (const [name, value] of Object.entries(request.headers)) {
    if (isOrdinaryHeader(name)) continue
    if (
      all || isCredentialName(name) || Redacted.isRedacted(value) || (typeof value === "string" && looksSecret(value))
    ) {
      addCredential(found, value)
    }
  }
  const parameters: Array<readonly [string | undefined, string]> = []
  if (Array.isArray(request.urlParams)) {
    for (const entry of request.urlParams) {
      if (Array.isArray(entry) && typeof entry[0] === "string" && typeof entry[1] === "string") {
        parameters.push([entry[0], entry[1]])
      }
    }
  }
  const url = partsOf(request.url)
  const hash = fragmentOf(request.hash)
  for (const text of [url.query, url.fragment, hash]) {
    for (const [name, raw, value] of parametersOf(text)) parameters.push([name, value], [name, raw])
  }
  for (const [name, value] of parameters) {
    const secret = name === undefined ? !isUrlWord(value) : isSecretParameter(name, value)
    if (secret && (all || (name !== undefined && isCredentialName(name)) || looksSecret(value))) found.add(value)
  }
  for (const [raw, value] of pathSecrets(url.path)) {
    if (all || looksSecret(value)) found.add(value).add(raw)
  }
  for (const label of hostSecrets(url.authority)) found.add(label).add(label.toLowerCase())
  const at = url.authority.lastIndexOf("@")
  if (at >= 0) {
    const info = url.authority.slice(0, at)
    const colon = info.indexOf(":")
    const user = colon < 0 ? info : info.slice(0, colon)
    if (!isUserName(decoded(user))) found.add(user).add(decoded(user))
    if (colon >= 0 && colon < info.length - 1) found.add(info.slice(colon + 1)).add(decoded(info.slice(colon + 1)))
  }
}

/** A request's `hash` (an `Option` of the fragment, as the platform keeps it, or the fragment itself). */
const fragmentOf = (hash: unknown): string | undefined =>
  typeof hash === "string"
    ? hash.replace(/^#/, "")
    : Option.isOption(hash) && Option.isSome(hash) && typeof hash.value === "string"
    ? hash.value.replace(/^#/, "")
    : undefined

/** Every credential the value shows it sent: its requests' headers and parameters, its `Redacted` values. */
const collect = (value: unknown, found: Set<string>, seen: Set<object>): void => {
  if (typeof value !== "object" || value === null || seen.has(value)) return
  seen.add(value)
  if (Redacted.isRedacted(value)) return addCredential(found, value)
  if (Cause.isCause(value)) return collect([...Cause.failures(value), ...Cause.defects(value)], found, seen)
  if (Predicate.hasProperty(value, HttpClientResponse.TypeId)) {
    return collect((value as unknown as HttpClientResponse.HttpClientResponse).request, found, seen)
  }
  if (Array.isArray(value)) return forEachItem(value, (item) => collect(item, found, seen))
  const request = isRequest(value)
  if (request) sentCredentials(value, found, true)
  if (value instanceof Map || value instanceof Set) {
    return value.forEach((item, key) => collect([key, item], found, seen))
  }
  if (request || value instanceof Error || isRecord(value)) {
    for (const key of Reflect.ownKeys(value)) {
      const descriptor = Object.getOwnPropertyDescriptor(value, key)!
      if ("value" in descriptor) collect(descriptor.value, found, seen)
    }
  }
}

interface Scrubbing {
  /** The copy made of each object met (a visited map of this one scrubbing, for shared and cyclic objects). */
  readonly seen: WeakMap<object, unknown>
  /** The values the error shows it sent. */
  readonly values: Literals | undefined
  /** How many more of its objects' own ways of writing themselves (`toJSON`, …) may be called. */
  readonly calls: { left: number }
  /** The texts scrubbed so far, and what they became (the ways an object writes itself repeat its fields). */
  readonly texts?: Map<string, string> | undefined
}

/**
 * How sinks have an object write itself beyond its own data: `JSON.stringify`
 * calls `toJSON`, `String()` and template literals `Symbol.toPrimitive` or
 * `toString`, `util.inspect` (Node's loggers, `console`) its custom inspect.
 */
const serialisers: ReadonlyArray<PropertyKey> = [
  "toJSON",
  "toString",
  Symbol.toPrimitive,
  Inspectable.NodeInspectSymbol
]

/** The fields of an error sinks read that a class may compute (`Error.prototype.toString`, `Cause.pretty`, loggers). */
const computedFields: ReadonlyArray<string> = ["message", "name", "cause", "_tag"]

// the built-in ways, which read nothing but the object's own fields
const builtIn = new Set<unknown>([
  Object.prototype.toString,
  Error.prototype.toString,
  Array.prototype.toString,
  Date.prototype.toJSON,
  Date.prototype.toString,
  RegExp.prototype.toString
])

/** A hook the object has (own or inherited) that is not built in, or `undefined`. */
const hookOf = (self: object, key: PropertyKey): ((...args: Array<unknown>) => unknown) | undefined => {
  try {
    const method: unknown = Reflect.get(self, key)
    return typeof method === "function" && !builtIn.has(method)
      ? method as (...args: Array<unknown>) => unknown
      : undefined
  } catch {
    return undefined // a getter that throws: the sink's read throws too
  }
}

const scrub = (scrubbing: Scrubbing) => (value: unknown): unknown => scrubValue(value, scrubbing)

/** Whether the object writes itself some way of its own (a `toJSON` of its class, …). */
const writesItself = (self: object): boolean => serialisers.some((key) => hookOf(self, key) !== undefined)

/** The getter of `key` on the prototypes of `self` (not `Object`'s or `Error`'s), or `undefined`. */
const inheritedGetter = (self: object, key: string): (() => unknown) | undefined => {
  for (
    let proto = Object.getPrototypeOf(self);
    proto !== null && proto !== Object.prototype && proto !== Error.prototype;
    proto = Object.getPrototypeOf(proto)
  ) {
    const descriptor = Object.getOwnPropertyDescriptor(proto, key)
    if (descriptor !== undefined) return descriptor.get
  }
  return undefined
}

/**
 * Whether what `read` gives of `self` changes when scrubbed by `scrub` (a
 * read that throws changes nothing: the sink's read throws too, and one that
 * gives `self` back has the sink write `self`). Once the scrubbing's calls
 * are spent (a `toJSON` that answers a new object with a `toJSON`, on and
 * on), every read counts as changed: the copy reads through, scrubbed.
 */
const changesWhenScrubbed = (
  self: object,
  read: () => unknown,
  scrub: (value: unknown) => unknown,
  scrubbing: Scrubbing
): boolean => {
  if (scrubbing.calls.left-- <= 0) return true
  try {
    const raw = read()
    return raw !== self && scrub(raw) !== raw
  } catch {
    return false
  }
}

/**
 * A read for the copy, scrubbed as its fields were: of the copy, whose fields
 * are scrubbed, or of the original when the copy cannot answer it (a private
 * field).
 */
const readThrough = (
  copy: object,
  self: object,
  scrub: (value: unknown) => unknown,
  read: (self: object) => unknown
) => {
  let raw: unknown
  try {
    raw = read(copy)
  } catch {
    raw = read(self)
  }
  return raw === self || raw === copy ? copy : scrub(raw)
}

/** A copy of `self` (same prototype) with its own properties scrubbed by `entry`, or `self` when none changed. */
const scrubObject = <A extends object>(
  self: A,
  scrubbing: Scrubbing,
  entry: (key: string, value: unknown) => unknown
): A => {
  const copy = Object.create(Object.getPrototypeOf(self)) as A
  scrubbing.seen.set(self, copy)
  let changed = false
  // what a sink writes through the object's own ways of writing itself (a method may read what no field holds: a
  // closure, a private field) is scrubbed: the copy answers the same way, scrubbed
  const hooks: Array<readonly [PropertyKey, PropertyDescriptor]> = []
  for (const key of serialisers) {
    const method = hookOf(self, key)
    if (method === undefined) continue
    const argument = key === Symbol.toPrimitive ? "string" : ""
    changed = changesWhenScrubbed(self, () => method.call(self, argument), scrub(scrubbing), scrubbing) || changed
    const own = Object.getOwnPropertyDescriptor(self, key)
    hooks.push([key, {
      // each time a sink calls it, with calls of its own
      value: (...args: Array<unknown>) =>
        readThrough(
          copy,
          self,
          scrub({ ...scrubbing, calls: { left: maximumCalls } }),
          (self) => method.apply(self, args)
        ),
      enumerable: own?.enumerable ?? false,
      writable: true,
      configurable: true
    }])
  }
  for (const key of Reflect.ownKeys(self)) {
    const descriptor = Object.getOwnPropertyDescriptor(self, key)!
    if (hooks.some(([hook]) => hook === key)) continue
    const name = typeof key === "string" ? key : key.description ?? ""
    // symbol-keyed values too: a `Data.Error` keeps its constructor's arguments under a symbol, and its
    // `toJSON` (so `JSON.stringify` of the error) writes them
    if ("value" in descriptor) {
      const value = entry(name, descriptor.value)
      if (value !== descriptor.value) {
        changed = true
        descriptor.value = value
      }
    } else if (descriptor.get !== undefined) {
      // an own getter computes what it reads: the copy reads it through, scrubbed
      const get = descriptor.get
      const field = (value: unknown) => entry(name, value)
      changed = changesWhenScrubbed(self, () => get.call(self), field, scrubbing) || changed
      Object.defineProperty(copy, key, {
        get: () => readThrough(copy, self, field, (self) => get.call(self)),
        enumerable: descriptor.enumerable ?? false,
        configurable: true
      })
      continue
    }
    Object.defineProperty(copy, key, descriptor)
  }
  // the fields an error's sinks read that its class computes (a `message` getter)
  for (const key of computedFields) {
    if (Object.prototype.hasOwnProperty.call(copy, key)) continue
    const get = inheritedGetter(self, key)
    if (get === undefined) continue
    const field = (value: unknown) => entry(key, value)
    changed = changesWhenScrubbed(self, () => get.call(self), field, scrubbing) || changed
    hooks.push([key, {
      get: () => readThrough(copy, self, field, (self) => get.call(self)),
      enumerable: false,
      configurable: true
    }])
  }
  for (const [key, descriptor] of hooks) Object.defineProperty(copy, key, descriptor)
  // a getter a class defines under a credential's name reads what no copy can scrub: the copy hides it
  for (
    let proto = Object.getPrototypeOf(self);
    proto !== null && proto !== Object.prototype && proto !== Error.prototype;
    proto = Object.getPrototypeOf(proto)
  ) {
    for (const key of Object.getOwnPropertyNames(proto)) {
      const getter = Object.getOwnPropertyDescriptor(proto, key)!.get
      if (getter !== undefined && isCredentialField(key) && !Object.prototype.hasOwnProperty.call(copy, key)) {
        Object.defineProperty(copy, key, { value: redacted, enumerable: true, configurable: true })
        changed = true
      }
    }
  }
  // an error's stack repeats its message, and may not be an own value
  if (self instanceof Error && !Object.prototype.hasOwnProperty.call(copy, "stack")) {
    const stack = self.stack
    const scrubbed = typeof stack === "string" ? scrubTextWith(stack, scrubbing.values) : stack
    if (scrubbed !== stack) {
      changed = true
      Object.defineProperty(copy, "stack", { value: scrubbed, writable: true, configurable: true })
    }
  }
  scrubbing.seen.set(self, changed ? copy : self)
  return changed ? copy : self
}

/** A field of an object: redacted when named like a credential; `headers` are headers. */
const scrubField = (scrubbing: Scrubbing) => (key: string, value: unknown): unknown =>
  typeof value === "string" && isCredentialField(key)
    ? redacted
    : key.toLowerCase().endsWith("headers") && Predicate.isObject(value) && !Array.isArray(value)
    ? scrubHeaders(value, scrubbing, false)
    : scrubValue(value, scrubbing)

/** Headers: those a request sent are all credentials but the ordinary ones; others, when named like one. */
const scrubHeaders = (headers: object, scrubbing: Scrubbing, sent: boolean): unknown => {
  if (scrubbing.seen.has(headers)) return scrubbing.seen.get(headers)
  return scrubObject(
    headers,
    scrubbing,
    (name, value) =>
      typeof value === "string" && (sent ? !isOrdinaryHeader(name) : isCredentialName(name))
        ? redacted
        : scrubValue(value, scrubbing)
  )
}

const scrubParameters = (parameters: unknown, scrubbing: Scrubbing): unknown => {
  if (!Array.isArray(parameters)) return scrubValue(parameters, scrubbing)
  const scrubbed = parameters.map((entry) =>
    Array.isArray(entry) && entry.length === 2 && typeof entry[0] === "string" && typeof entry[1] === "string"
      ? isSecretParameter(entry[0], entry[1])
        ? [entry[0], redacted]
        : entry
      : scrubValue(entry, scrubbing)
  )
  return scrubbed.some((entry, index) => entry !== parameters[index]) ? scrubbed : parameters
}

const scrubRequest = (request: object, scrubbing: Scrubbing): object =>
  scrubObject(request, scrubbing, (key, value) =>
    key === "headers" && Predicate.isObject(value)
      ? scrubHeaders(value, scrubbing, true)
      : key === "urlParams"
      ? scrubParameters(value, scrubbing)
      : key === "url" && typeof value === "string"
      ? scrubUrl(value, scrubbing)
      : key === "hash" && fragmentOf(value) !== undefined
      ? scrubHash(value, scrubbing)
      : scrubField(scrubbing)(key, value))

/** A request's `hash` (a fragment, maybe in an `Option`) scrubbed as a URL's fragment is. */
const scrubHash = (hash: unknown, scrubbing: Scrubbing): unknown => {
  const fragment = fragmentOf(hash)!
  const scrubbed = scrubTextWith(scrubRequestParameters(fragment), scrubbing.values)
  return scrubbed === fragment
    ? hash
    : typeof hash === "string"
    ? `${hash.startsWith("#") ? "#" : ""}${scrubbed}`
    : Option.some(scrubbed)
}

/** `f` of each item of `array` (a long one's by `itemIndices`). */
const forEachItem = <A>(array: ReadonlyArray<A>, f: (item: A) => void): void => {
  if (array.length <= denseLength) { for (let i = 0; i < array.length; i++) f(array[i]!) }
  else for (const index of itemIndices(array)) f(array[index]!)
}

/** `array.map(f)` (a long array's by `itemIndices`, its holes kept), or `array` itself when no item changed. */
const mapItems = <A>(array: ReadonlyArray<A>, f: (item: A) => unknown): ReadonlyArray<unknown> => {
  if (array.length <= denseLength) {
    let out: Array<unknown> | undefined
    for (let i = 0; i < array.length; i++) {
      const item = array[i]!
      const mapped = f(item)
      if (mapped !== item) out ??= array.slice()
      if (out !== undefined) out[i] = mapped
    }
    return out ?? array
  }
  const indices = itemIndices(array)
  let out: Array<unknown> | undefined
  for (let k = 0; k < indices.length; k++) {
    const item = array[indices[k]!]!
    const mapped = f(item)
    if (mapped !== item && out === undefined) {
      out = new Array(array.length)
      for (let j = 0; j < k; j++) out[indices[j]!] = array[indices[j]!]
    }
    if (out !== undefined) out[indices[k]!] = mapped
  }
  return out ?? array
}

/** A body read as JSON or text with the known values replaced in its strings (and nothing else changed). */
const replaceKnown = (body: unknown, values: Literals | undefined): unknown => {
  if (typeof body === "string") return replaceValues(body, values, knownPattern())
  if (Array.isArray(body)) return mapItems(body, (item) => replaceKnown(item, values))
  if (Predicate.isObject(body) && isPlain(body)) {
    return Object.fromEntries(Object.entries(body).map(([key, value]) => [key, replaceKnown(value, values)]))
  }
  return body
}

/**
 * The response, describing `request` in place of its own: its bodies are
 * read from it (their errors scrubbed, as they name the request it holds),
 * everything else it answers itself.
 */
const scrubResponse = (
  response: HttpClientResponse.HttpClientResponse,
  request: HttpClientRequest.HttpClientRequest,
  values: Literals | undefined
): HttpClientResponse.HttpClientResponse => {
  const body = <A>(read: () => Effect.Effect<A, HttpClientError.ResponseError>) => ({
    get: () => Effect.mapError(read(), scrubError)
  })
  // a gateway's body can quote what it was sent: the request's credentials are replaced in it
  const read = <A>(read: () => Effect.Effect<A, HttpClientError.ResponseError>) => ({
    get: () => Effect.mapBoth(read(), { onFailure: scrubError, onSuccess: (body) => replaceKnown(body, values) as A })
  })
  const json = () => scrubError(response.toJSON())
  return Object.create(response, {
    request: { value: request, enumerable: true },
    json: read(() => response.json),
    text: read(() => response.text),
    formData: body(() => response.formData),
    urlParamsBody: body(() => response.urlParamsBody),
    arrayBuffer: body(() => response.arrayBuffer),
    stream: { get: () => Stream.mapError(response.stream, scrubError) },
    toJSON: { value: json },
    [Inspectable.NodeInspectSymbol]: { value: json }
  })
}

/** A map's entries scrubbed (a string under a credential's name redacted), or the map itself when none changed. */
const scrubMap = (map: Map<unknown, unknown>, scrubbing: Scrubbing): unknown => {
  if (scrubbing.seen.has(map)) return scrubbing.seen.get(map)
  scrubbing.seen.set(map, map)
  let changed = false
  const entries = [...map].map(([key, value]): [unknown, unknown] => {
    const entry: [unknown, unknown] = [
      scrubValue(key, scrubbing),
      typeof key === "string" && typeof value === "string" && isCredentialName(key)
        ? redacted
        : scrubValue(value, scrubbing)
    ]
    changed ||= entry[0] !== key || entry[1] !== value
    return entry
  })
  const scrubbed = changed ? new Map(entries) : map
  scrubbing.seen.set(map, scrubbed)
  return scrubbed
}

/** A set's items scrubbed, or the set itself when none changed. */
const scrubSet = (set: Set<unknown>, scrubbing: Scrubbing): unknown => {
  if (scrubbing.seen.has(set)) return scrubbing.seen.get(set)
  scrubbing.seen.set(set, set)
  const before = [...set]
  const items = before.map((item) => scrubValue(item, scrubbing))
  const scrubbed = items.some((item, index) => item !== before[index]) ? new Set(items) : set
  scrubbing.seen.set(set, scrubbed)
  return scrubbed
}

const scrubValue = (value: unknown, scrubbing: Scrubbing): unknown => {
  if (typeof value === "string") {
    const known = scrubbing.texts?.get(value)
    if (known !== undefined) return known
    const scrubbed = scrubTextWith(value, scrubbing.values)
    scrubbing.texts?.set(value, scrubbed)
    return scrubbed
  }
  if (typeof value !== "object" || value === null) return value
  if (scrubbing.seen.has(value)) return scrubbing.seen.get(value)
  if (Array.isArray(value)) {
    scrubbing.seen.set(value, value)
    const pair = value.length === 2 && typeof value[0] === "string"
    const items = pair
      ? [
        value[0],
        typeof value[1] === "string" && isCredentialName(value[0]) ? redacted : scrubValue(value[1], scrubbing)
      ]
      : mapItems(value, (item) => scrubValue(item, scrubbing))
    const changed = pair ? items[1] !== value[1] : items !== value
    scrubbing.seen.set(value, changed ? items : value)
    return changed ? items : value
  }
  if (Predicate.hasProperty(value, HttpClientResponse.TypeId)) {
    const response = value as unknown as HttpClientResponse.HttpClientResponse
    const request = scrubValue(response.request, scrubbing)
    if (request === response.request) return value
    const scrubbed = scrubResponse(response, request as HttpClientRequest.HttpClientRequest, scrubbing.values)
    scrubbing.seen.set(value, scrubbed)
    return scrubbed
  }
  if (Cause.isCause(value)) {
    const scrubbed = scrubCauseWith(value, scrubbing)
    scrubbing.seen.set(value, scrubbed)
    return scrubbed
  }
  if (isRequest(value)) return scrubRequest(value, scrubbing)
  if (Headers.isHeaders(value)) return scrubHeaders(value, scrubbing, false)
  if (value instanceof Map) return scrubMap(value, scrubbing)
  if (value instanceof Set) return scrubSet(value, scrubbing)
  if (Redacted.isRedacted(value)) return value
  if (value instanceof Error || isRecord(value) || (!ArrayBuffer.isView(value) && writesItself(value))) {
    return scrubObject(value, scrubbing, scrubField(scrubbing))
  }
  return value
}

// how many of its objects' own ways of writing themselves one scrubbing calls at most
const maximumCalls = 256

const scrubbingOf = (values: ReadonlyArray<unknown>): Scrubbing => {
  const found = new Set<string>()
  const seen = new Set<object>()
  for (const value of values) collect(value, found, seen)
  return { seen: new WeakMap(), values: patternOf(found), calls: { left: maximumCalls }, texts: new Map() }
}

/**
 * The error with every credential scrubbed from it. The credentials the
 * requests it describes sent (headers but the ordinary ones, URL parameters
 * but the obviously safe ones, `Redacted` values) are redacted there and
 * replaced wherever else they occur: its `message`, a response `body`, a
 * `description`, its `cause` chain. Credential-named fields, headers and
 * parameters are redacted too. The copy keeps the error's class and `_tag`;
 * an error with nothing to scrub is returned as it is.
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
export const scrubError = <E>(error: E): E => scrubValue(error, scrubbingOf([error])) as E

/**
 * The error's message (or the value as text) with every credential scrubbed
 * from it, as {@link scrubError} scrubs it: what a log line, an event or a
 * stored failure should say of an error.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 *
 * Secrets.messageOf(new Error("x-functions-key: abcdef0123")) // "x-functions-key: <redacted>"
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const messageOf = (error: unknown): string => {
  const scrubbed = scrubError(error)
  return scrubbed instanceof Error
    ? scrubbed.message
    : Predicate.hasProperty(scrubbed, "message") && typeof scrubbed.message === "string"
    ? scrubbed.message
    : scrubText(String(scrubbed))
}

const scrubCauseWith = <E>(cause: Cause.Cause<E>, scrubbing: Scrubbing): Cause.Cause<E> => {
  switch (cause._tag) {
    case "Empty":
    case "Interrupt":
      return cause
    case "Fail": {
      const error = scrubValue(cause.error, scrubbing) as E
      return error === cause.error ? cause : Cause.fail(error)
    }
    case "Die": {
      const defect = scrubValue(cause.defect, scrubbing)
      return defect === cause.defect ? cause : Cause.die(defect)
    }
    case "Sequential":
    case "Parallel": {
      const left = scrubCauseWith(cause.left, scrubbing)
      const right = scrubCauseWith(cause.right, scrubbing)
      return left === cause.left && right === cause.right
        ? cause
        : cause._tag === "Sequential"
        ? Cause.sequential(left, right)
        : Cause.parallel(left, right)
    }
  }
}

/**
 * The cause with {@link scrubError} applied to each failure and defect; the
 * credentials any of them shows are replaced in all of them.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 * import * as Effect from "effect/Effect"
 *
 * const call = (effect: Effect.Effect<string, Error>) => Effect.mapErrorCause(effect, Secrets.scrubCause)
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const scrubCause = <E>(cause: Cause.Cause<E>): Cause.Cause<E> =>
  scrubCauseWith(cause, scrubbingOf([...Cause.failures(cause), ...Cause.defects(cause)]))

/** What {@link replaceKnownIn} gives for a value nested past `JsonDepth.maxDepth` (it walks no deeper). */
const tooDeep: unique symbol = Symbol("tooDeep")

/**
 * A JSON value with the known credentials' values replaced in its strings
 * and keys; the value itself when none is; {@link tooDeep} when it nests
 * past `JsonDepth.maxDepth` (the recursion stops there, far from the stack's end).
 */
const replaceKnownIn = (value: unknown, pattern: Literals, seen: Map<object, unknown>, depth: number): unknown => {
  if (typeof value === "string") return replaceValues(value, pattern)
  if (typeof value !== "object" || value === null) return value
  // a value met again is its scrubbed copy (met inside itself, the value as it is)
  if (seen.has(value)) return seen.get(value)
  if (depth > JsonDepth.maxDepth) return tooDeep
  seen.set(value, value)
  const scrubbed = replaceKnownInObject(value, pattern, seen, depth)
  seen.set(value, scrubbed)
  return scrubbed
}

const replaceKnownInObject = (value: object, pattern: Literals, seen: Map<object, unknown>, depth: number): unknown => {
  if (Array.isArray(value)) {
    let deep = false
    const items = mapItems(value, (item) => {
      const replaced = deep ? item : replaceKnownIn(item, pattern, seen, depth + 1)
      if (replaced === tooDeep) deep = true
      return replaced
    })
    return deep ? tooDeep : items
  }
  if (!isPlain(value)) return value
  let changed = false
  const entries: Array<readonly [string, unknown]> = []
  for (const [key, item] of Object.entries(value)) {
    const entry = [replaceValues(key, pattern), replaceKnownIn(item, pattern, seen, depth + 1)] as const
    if (entry[1] === tooDeep) return tooDeep
    changed ||= entry[0] !== key || entry[1] !== item
    entries.push(entry)
  }
  return changed ? Object.fromEntries(entries) : value
}

/** The part of a result the scrub cannot walk (too deep, or throwing as it is read): a failure saying so, none of the result kept. */
const unscrubbable = <Part extends { readonly result: unknown; readonly isFailure: boolean }>(
  part: Part,
  problem: JsonValue.Problem
): Part => ({ ...part, result: { error: JsonValue.describe(problem, "the result") }, isFailure: true })

/**
 * A tool's result as the model, the run's events and the stored thread read
 * it. A failed result is an error's text: it is scrubbed as
 * {@link scrubError} scrubs an error (known values, credential-named fields,
 * credentials by their form). A successful one is data the model works on:
 * only the values of known credentials (registered, or sent by a scrubbing
 * client) are replaced in its strings, in any of their encodings, and
 * nothing else changes (a search result's long ids and URLs stay). A result
 * with nothing to scrub is returned as it is. A result the scrub would walk
 * past 128 levels of nesting (or, failed, that throws as it is read) is not
 * kept: the part becomes a failure saying so (the scrub never walks far
 * enough to overflow the stack).
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 * import * as Effect from "effect/Effect"
 *
 * const program = Effect.gen(function*() {
 *   yield* Secrets.register("Zx9qWv3LmN7pRt2YbK5s")
 *   const part = { result: "could not auth with Zx9qWv3LmN7pRt2YbK5s", isFailure: true }
 *   return Secrets.scrubToolResult(part).result // "could not auth with <redacted>"
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const scrubToolResult = <Part extends { readonly result: unknown; readonly isFailure: boolean }>(
  part: Part
): Part => {
  if (part.isFailure) {
    // an error's scrub copies every field, map and set, recursively: within the limit, it stays far from the stack's end
    const problem = JsonValue.problemOf(part.result, { everyProperty: true })
    if (problem === "TooDeep" || problem === "Unreadable") return unscrubbable(part, problem)
    const result = scrubError(part.result)
    return result === part.result ? part : { ...part, result }
  }
  const pattern = knownPattern()
  if (pattern === undefined) return part
  const result = replaceKnownIn(part.result, pattern, new Map(), 1)
  return result === tooDeep ? unscrubbable(part, "TooDeep") : result === part.result ? part : { ...part, result }
}

// ---------------------------------------------------------------------------
// clients
// ---------------------------------------------------------------------------

// the scrubbing of a URL alone (a string: its `seen` stays empty)
const untracked: Scrubbing = { seen: new WeakMap(), values: undefined, calls: { left: 0 } }

const isAbsoluteUrl = (value: string): boolean => /^[a-z][a-z0-9+.-]*:\/\//i.test(value)

/** A value that may be a URL: its parts scrubbed as a URL's, then what any text would hide (a token-shaped label). */
const scrubUrlText = (value: string): string =>
  isAbsoluteUrl(value) ? scrubText(scrubUrl(value, untracked)) : scrubText(value)

// the attributes and headers that hold the URL of a request or of where it leads
const urlAttribute = /^(?:url\.full|url\.original|http\.url|http\.target)$|\.url$/
const urlHeaders = new Set(["referer", "origin", "location", "content-location"])

/**
 * A span attribute as the platform's `http.client` span records the request
 * as sent, scrubbed: a URL wherever it stands (`url.full`, `server.address`,
 * a `Referer` or `Location` header) in every part, a host in its labels.
 */
const scrubAttribute = (key: string, value: unknown): unknown => {
  // an object an exporter writes as it writes it (its `toJSON`, its `toString`) is scrubbed as an error is
  if (typeof value === "object" && value !== null) return scrubError(value)
  if (typeof value !== "string") return value
  if (key.startsWith("http.request.header.")) {
    const name = key.slice(20)
    return !isOrdinaryHeader(name)
      ? redacted
      : name === "host"
      ? scrubAuthority(value)
      : urlHeaders.has(name)
      ? scrubUrlText(value)
      : scrubText(value)
  }
  if (key.startsWith("http.response.header.")) {
    const name = key.slice(21)
    return isCredentialName(name) ? redacted : urlHeaders.has(name) ? scrubUrlText(value) : scrubText(value)
  }
  if (key === "url.path") return scrubTextWith(scrubPath(value), undefined)
  if (key === "url.query") return scrubUrl(`?${value}`, untracked).slice(1)
  if (key === "url.fragment") return scrubUrl(`#${value}`, untracked).slice(1)
  if (urlAttribute.test(key)) return scrubUrlText(value)
  if (/(?:^|\.)(?:address|host|host\.name|peer\.name)$/.test(key)) {
    return isAbsoluteUrl(value) ? scrubUrl(value, untracked) : scrubAuthority(value)
  }
  return scrubText(value)
}

/**
 * The tracer with what its spans record scrubbed: their attributes, their
 * events (a log line a span records) and the failure they end with. Wrap an
 * exporting tracer with it so no credential an error or a log line holds
 * leaves the process in a span.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 * import * as Effect from "effect/Effect"
 *
 * const traced = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
 *   Effect.tracerWith((tracer) => Effect.withTracer(effect, Secrets.scrubTracer(tracer)))
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const scrubTracer = (tracer: Tracer.Tracer): Tracer.Tracer =>
  Tracer.make({
    span: (name, parent, context, links, startTime, kind, options) =>
      new Proxy(tracer.span(name, parent, context, links, startTime, kind, options), {
        get: (span, property) => {
          if (property === "attribute") {
            return (key: string, value: unknown) => span.attribute(key, scrubAttribute(key, value))
          }
          if (property === "event") {
            return (name: string, startTime: bigint, attributes?: Record<string, unknown>) =>
              span.event(
                scrubText(name),
                startTime,
                attributes === undefined
                  ? undefined
                  : Object.fromEntries(
                    Object.entries(attributes).map(([key, value]) => [key, scrubAttribute(key, value)])
                  )
              )
          }
          if (property === "end") {
            return (endTime: bigint, exit: Exit.Exit<unknown, unknown>) =>
              span.end(endTime, Exit.isFailure(exit) ? Exit.failCause(scrubCause(exit.cause)) : exit)
          }
          const value: unknown = Reflect.get(span, property, span)
          return typeof value === "function" ? value.bind(span) : value
        }
      }),
    context: (f, fiber) => tracer.context(f, fiber)
  })

/**
 * An `HttpClient` whose responses and errors describe their request with its
 * credentials scrubbed (the request is sent as it was), whose response bodies
 * have the request's credentials replaced (a gateway quoting the key), and
 * whose `http.client` span records the URL and headers scrubbed. The
 * credentials it sends (headers and URL parameters named like credentials or
 * that look like one; the 256 most recent) become known to the process, so
 * any text that quotes them later is scrubbed too. Give it to a provider
 * client (`OpenAiClient.layer({ transformClient: Secrets.scrubHttpClient })`)
 * and the provider's own errors, and so @effect/ai's `LanguageModel` spans,
 * hold no credentials either. A streamed body is passed as it is.
 *
 * @example
 * ```ts
 * import * as Secrets from "@stepwise-agent/core/Secrets"
 * import * as HttpClient from "@effect/platform/HttpClient"
 * import * as Effect from "effect/Effect"
 *
 * const client = Effect.map(HttpClient.HttpClient, Secrets.scrubHttpClient)
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const scrubHttpClient = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  HttpClient.transformResponse(
    HttpClient.tapRequest(client, (request) =>
      Effect.sync(() => {
        const found = new Set<string>()
        sentCredentials(request, found, false)
        found.forEach(remember)
      })),
    (response) =>
      Effect.tracerWith((tracer) =>
        response.pipe(
          Effect.withTracer(scrubTracer(tracer)),
          Effect.mapBoth({
            onFailure: (error) => HttpClientError.isHttpClientError(error) ? scrubError(error) : error,
            onSuccess: (response) => scrubError(response)
          })
        )
      )
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
