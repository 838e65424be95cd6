/**
 * Pii: find personal data (emails, credit card numbers, IP and MAC
 * addresses, URLs, or types of your own) in what the agent reads and writes,
 * and redact, mask, hash or block it.
 *
 * Semantics follow LangChain v1's `PIIMiddleware`:
 *
 * - `applyToInput` (default `true`): `transformInput` rewrites the user
 *   messages of each run's input before they join the stored conversation
 *   and before any node hook runs, whatever the order of the middleware
 *   list: a middleware that ends or interrupts the run at once
 *   (`ModelCallLimit`, a `Guardrail` with `onBlock: "end"`) cannot save the
 *   raw input, the model never sees it and other middleware read the
 *   redacted text. (LangChain rewrites the state in `before_model`.)
 * - `applyToOutput` (default `false`): the assistant reply's text is
 *   rewritten before it is shown or stored. A streamed model call
 *   (`AgentLoop.stream`) is redacted as it arrives, in `wrapModelStream`: each
 *   text part (one {@link StreamRedactor} state per text id, carried on into
 *   the next text part when one follows at once, else flushed at its
 *   `text-end`) releases only text that no match still in progress can reach,
 *   so a value split across chunks or text parts is caught, and the
 *   `TextDelta` events, the stored reply and `ModelResponded` all carry the
 *   redacted text. `afterModel`
 *   then checks the whole reply (its text and reasoning parts; tool call
 *   arguments are left as the model wrote them) before it is stored: that is
 *   the path of a call that is not streamed (`AgentLoop.run`), and it also
 *   covers a reply that did not come through the stream (a `wrapModelCall`
 *   that answered by itself or rewrote the response) and streamed reasoning.
 *   It leaves alone the text parts the stream already redacted, so each piece
 *   of output is redacted once and the stored reply is the text that was
 *   shown.
 * - `applyToToolResults` (default `false`): `wrapToolCall` rewrites every
 *   string inside a tool's result before it is stored and before the
 *   `ToolCallCompleted` event is emitted.
 *
 * Strategies: `"redact"` replaces a match with `[REDACTED_EMAIL]`; `"mask"`
 * keeps the tail (`****-****-****-1111`, `*.*.*.42`, `john@****.com`,
 * `****abcd` for custom types); `"hash"` replaces it with a stable tag
 * `<email_hash:1a2b3c4d>` (the first 8 hex digits of its SHA-256), so equal
 * values stay linkable; `"block"` fails the run with {@link PiiDetected},
 * which names the type and where it was found but never the value.
 *
 * Consecutive text (or reasoning) parts of one message are checked as one
 * text, so a value split across two parts is found; it is replaced in the
 * part where it starts.
 *
 * Detectors validate what their patterns find: card numbers pass the Luhn
 * check (13 to 19 digits in whole groups separated by single spaces or
 * hyphens, so `4111111111111111 192` still finds the card), IPv4
 * octets are 0–255 without leading zeros, MAC addresses use one separator,
 * URLs with a scheme have a host, bare URLs need `www.` or a path and a host
 * whose last label is alphabetic.
 *
 * Streaming: {@link streamRedactor} is the pure incremental redactor behind
 * the streamed path, and {@link redactStream} applies it to any stream of
 * text chunks. With `"block"`, a streamed call fails with
 * {@link PiiDetected} (`location: "stream"`) before the text holding the
 * match is shown.
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Check from "./internal/options.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * The built-in kinds of personal data.
 *
 * @since 0.1.0
 * @category models
 */
export type BuiltinType = "email" | "credit_card" | "ip" | "mac_address" | "url"

/**
 * The built-in kinds, in the order they are listed here.
 *
 * @since 0.1.0
 * @category models
 */
export const builtinTypes: ReadonlyArray<BuiltinType> = ["email", "credit_card", "ip", "mac_address", "url"]

/**
 * A span `[start, end)` of text a custom detector found.
 *
 * @since 0.1.0
 * @category models
 */
export interface Span {
  readonly start: number
  readonly end: number
}

/**
 * A kind of personal data to look for: a built-in one, a regular expression,
 * or a function returning the spans it found.
 *
 * For streaming (see {@link streamRedactor}) a custom type must, like the
 * built-ins, never match across whitespace (except a single space between two
 * digits) and must not depend on `^`/`$` anchors or look more than one
 * character around a match.
 *
 * @since 0.1.0
 * @category models
 */
export type PiiType =
  | BuiltinType
  | { readonly name: string; readonly pattern: RegExp }
  | { readonly name: string; readonly detect: (text: string) => ReadonlyArray<Span> }

/**
 * What to do with what was found.
 *
 * @since 0.1.0
 * @category models
 */
export type Strategy = "redact" | "mask" | "hash" | "block"

/**
 * One match: the type's name, where it is, and the matched text.
 *
 * @since 0.1.0
 * @category models
 */
export interface PiiMatch {
  readonly type: string
  readonly start: number
  readonly end: number
  readonly value: string
}

/**
 * Where personal data was found.
 *
 * @since 0.1.0
 * @category models
 */
export type Location = "input" | "output" | "tool_result" | "stream"

/**
 * The options of a {@link Redactor}.
 *
 * @since 0.1.0
 * @category models
 */
export interface RedactorOptions {
  readonly types: ReadonlyArray<PiiType>
  readonly strategy: Strategy
}

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends RedactorOptions {
  /** Redact the last user message before each model call (default `true`). */
  readonly applyToInput?: boolean | undefined
  /** Redact the assistant reply, as it streams and before it is stored (default `false`). */
  readonly applyToOutput?: boolean | undefined
  /** Redact tool results as they come back (default `false`). */
  readonly applyToToolResults?: boolean | undefined
  /** The middleware's name (default `"pii"`); give two `Pii` middleware different names. */
  readonly name?: string | undefined
}

/**
 * Text after a strategy was applied, and the matches it was applied to. With
 * `"block"` the text is returned unchanged: the caller must refuse it when
 * `matches` is not empty.
 *
 * @since 0.1.0
 * @category models
 */
export interface Redaction {
  readonly text: string
  readonly matches: ReadonlyArray<PiiMatch>
}

/**
 * The state of a {@link StreamRedactor}: the text held back, how many
 * characters were released before it, and its last two characters (all a
 * new chunk needs to find a break, so the held-back text is never read
 * again until it is released).
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamState {
  readonly pending: string
  readonly offset: number
  readonly last: string
}

/**
 * What one chunk released: the redacted text that is safe to show now, the
 * matches in it (offsets counted in the whole input), and the next state.
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamStep extends Redaction {
  readonly state: StreamState
}

/**
 * A pure incremental redactor. Feed chunks with `push` and the rest with
 * `flush`: whatever the chunking, the concatenated releases are exactly
 * `redactor.redact(wholeText).text`. It holds back the text after the last
 * break (whitespace followed by a non-whitespace character, not counting a
 * single space between two digits), since a match can never cross one.
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamRedactor {
  readonly initial: StreamState
  readonly push: (state: StreamState, chunk: string) => StreamStep
  readonly flush: (state: StreamState) => StreamStep
}

/**
 * Compiled detection and redaction rules.
 *
 * @since 0.1.0
 * @category models
 */
export interface Redactor {
  /** The type names, in the order given. */
  readonly types: ReadonlyArray<string>
  readonly strategy: Strategy
  /** Non-overlapping matches, in text order (the leftmost wins, then the longest, then the first type listed). */
  readonly detect: (text: string) => ReadonlyArray<PiiMatch>
  /** Applies the strategy to every match. */
  readonly redact: (text: string) => Redaction
  /** The incremental form of `redact`. */
  readonly stream: StreamRedactor
}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * Personal data was found with the `"block"` strategy. It names the type
 * (the first one found), how many matches of all types there were and where,
 * never the values.
 *
 * @since 0.1.0
 * @category errors
 */
export class PiiDetected extends Schema.TaggedError<PiiDetected>(
  "@stepwise-agent/middleware/Pii/PiiDetected"
)("PiiDetected", {
  piiType: Schema.String,
  types: Schema.Array(Schema.String),
  count: Schema.Number,
  location: Schema.Literal("input", "output", "tool_result", "stream"),
  toolName: Schema.optional(Schema.String)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    const where = this.location === "input"
      ? "the user input"
      : this.location === "output"
      ? "the model output"
      : this.location === "stream"
      ? "the streamed model output"
      : `the result of tool "${this.toolName ?? "unknown"}"`
    return `Detected ${this.count} instance(s) of ${this.types.join(", ")} in ${where}`
  }
}

/**
 * A custom detector threw, or returned a span outside the text.
 *
 * @since 0.1.0
 * @category errors
 */
export class PiiDetectorFailed extends Schema.TaggedError<PiiDetectorFailed>(
  "@stepwise-agent/middleware/Pii/PiiDetectorFailed"
)("PiiDetectorFailed", {
  piiType: Schema.String,
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The detector of PII type "${this.piiType}" failed: ${this.reason}`
  }
}

// -----------------------------------------------------------------------------
// detectors
// -----------------------------------------------------------------------------

// `\b` would not fire between an ASCII value and adjacent non-ASCII letters
// ("联系alice@example.com"); these lookarounds treat any non-ASCII character
// as a separator and read one character only.
const START = "(?<![0-9A-Za-z_])"
const END = "(?![0-9A-Za-z_])"

const emailDomainPattern = new RegExp(`[A-Za-z0-9.-]+\\.[A-Za-z]{2,}${END}`, "y")
// A card's first group is not the tail of a dotted or slashed token (an IP
// address, a version, a domain, a path): "10.0.0.42 4111 …" starts at 4111.
const digitRunPattern = new RegExp(`(?<![0-9A-Za-z_]|[0-9A-Za-z_][./])\\d+(?:[ -]\\d+)*${END}`, "g")
const ipPattern = new RegExp(`${START}(?:\\d{1,3}\\.){3}\\d{1,3}${END}`, "g")
const macPattern = new RegExp(`${START}[0-9A-Fa-f]{2}([:-])(?:[0-9A-Fa-f]{2}\\1){4}[0-9A-Fa-f]{2}${END}`, "g")
const schemeUrlPattern = /https?:\/\/[^\s<>"{}|\\^`[\]]+/g
const bareUrlPattern =
  /\b(?:www\.)?[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+(?:\/[^\s]*)?/g

type Found = Array<Span>

const scan = (pattern: RegExp, text: string, accept: (value: string) => number | boolean): Found => {
  const found: Found = []
  for (const match of text.matchAll(pattern)) {
    const verdict = accept(match[0])
    if (verdict === false || match[0].length === 0) continue
    const length = verdict === true ? match[0].length : verdict
    if (length > 0) found.push({ start: match.index, end: match.index + length })
  }
  return found
}

/**
 * Checks a card number with the Luhn checksum (13 to 19 digits, other
 * characters ignored).
 *
 * @example
 * ```ts
 * import * as Pii from "@stepwise-agent/middleware/Pii"
 *
 * Pii.passesLuhn("4111 1111 1111 1111") // true
 * Pii.passesLuhn("4111 1111 1111 1112") // false
 * ```
 *
 * @since 0.1.0
 * @category detectors
 */
export const passesLuhn = (cardNumber: string): boolean => {
  const digits: Array<number> = []
  for (const char of cardNumber) if (char >= "0" && char <= "9") digits.push(char.charCodeAt(0) - 48)
  if (digits.length < 13 || digits.length > 19) return false
  let sum = 0
  for (let i = 0; i < digits.length; i++) {
    let digit = digits[digits.length - 1 - i]!
    if (i % 2 === 1) {
      digit *= 2
      if (digit > 9) digit -= 9
    }
    sum += digit
  }
  return sum % 10 === 0
}

const validIpv4 = (value: string): boolean =>
  value.split(".").every((octet) => (octet.length === 1 || octet[0] !== "0") && Number(octet) <= 255)

const TRAILING_PUNCTUATION = /[.,;:!?'")]+$/

const hostOf = (url: string): string => {
  const withoutScheme = url.replace(/^https?:\/\//, "")
  const host = withoutScheme.split(/[/?#]/)[0]!
  return host.replace(/^[^@]*@/, "").replace(/:\d*$/, "")
}

const validHost = (host: string): boolean => {
  const labels = host.split(".")
  const last = labels[labels.length - 1]!
  return labels.length >= 2 && labels.every((label) => label.length > 0) && /^[A-Za-z]{2,}$/.test(last)
}

/**
 * The length to keep of a URL candidate (trailing punctuation dropped), or
 * `false`. A URL with a scheme needs a host; a bare one needs `www.` or a
 * path, and a host whose last label is alphabetic.
 */
const acceptUrl = (bare: boolean) => (candidate: string): number | false => {
  const trimmed = candidate.replace(TRAILING_PUNCTUATION, "")
  if (!bare) return hostOf(trimmed).length > 0 ? trimmed.length : false
  if (!trimmed.includes("/") && !trimmed.startsWith("www.")) return false
  return validHost(hostOf(trimmed)) ? trimmed.length : false
}

/**
 * Card numbers in a run of digit groups separated by single spaces or
 * hyphens: from each group, the longest sequence of whole groups with 13 to
 * 19 digits that passes the Luhn check (so a card next to another number is
 * still found, and a longer number is never cut into a card). Every group
 * starts a candidate, even one inside an earlier candidate: overlaps are
 * settled with those of the other types, so a card right after a number
 * another type took is still found. The Luhn sums come from prefix sums, so
 * a run costs time linear in its length.
 */
const findCards = (text: string): Found => {
  const found: Found = []
  for (const run of text.matchAll(digitRunPattern)) {
    // the groups' bounds, and `digits[g]`: the digits before group g
    const starts: Array<number> = []
    const ends: Array<number> = []
    const digits: Array<number> = [0]
    // sums[p][k]: the digits at even (p = 0) or odd (p = 1) indexes among the first k, as they are and doubled
    const plain: [Array<number>, Array<number>] = [[0], [0]]
    const doubled: [Array<number>, Array<number>] = [[0], [0]]
    const runEnd = run.index + run[0].length
    for (let at = run.index; at < runEnd; at++) {
      starts.push(at)
      for (let code = text.charCodeAt(at); at < runEnd && code !== 32 && code !== 45; code = text.charCodeAt(++at)) {
        const digit = code - 48
        const k = plain[0].length - 1
        const parity = k % 2
        plain[parity].push(plain[parity][k]! + digit)
        plain[1 - parity].push(plain[1 - parity][k]!)
        doubled[parity].push(doubled[parity][k]! + (digit > 4 ? digit * 2 - 9 : digit * 2))
        doubled[1 - parity].push(doubled[1 - parity][k]!)
      }
      ends.push(at)
      digits.push(plain[0].length - 1)
    }
    // digit indexes [a, b): from the right, the second, fourth, … digits are doubled
    const luhn = (a: number, b: number): boolean => {
      const odd = b % 2
      return (doubled[odd][b]! - doubled[odd][a]! + plain[1 - odd][b]! - plain[1 - odd][a]!) % 10 === 0
    }
    for (let first = 0; first < starts.length; first++) {
      let last = first
      while (last + 1 < starts.length && digits[last + 2]! - digits[first]! <= 19) last++
      for (; last >= first && digits[last + 1]! - digits[first]! >= 13; last--) {
        if (luhn(digits[first]!, digits[last + 1]!)) {
          found.push({ start: starts[first]!, end: ends[last]! })
          break
        }
      }
    }
  }
  return found
}

const LOCAL_CHAR = /[A-Za-z0-9._%+-]/
const WORD_CHAR = /[0-9A-Za-z_]/

/**
 * The matches of `START[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}END`, in
 * linear time (that pattern, tried at every position, is quadratic on a long
 * run of local-part characters such as `a.a.a.…`). For each `@`: the local
 * part starts where the run of its characters before the `@` starts (not
 * before the last match's end, and not right after a letter, digit or `_`),
 * and the domain is matched from the `@` on.
 */
const findEmails = (text: string): Found => {
  const found: Found = []
  let end = 0
  for (let at = text.indexOf("@"); at >= 0; at = text.indexOf("@", at + 1)) {
    let start = at
    while (start > end && LOCAL_CHAR.test(text[start - 1]!)) start--
    while (start < at && start > 0 && WORD_CHAR.test(text[start - 1]!)) start++
    if (start === at) continue
    emailDomainPattern.lastIndex = at + 1
    if (emailDomainPattern.exec(text) === null) continue
    end = emailDomainPattern.lastIndex
    found.push({ start, end })
  }
  return found
}

const builtinDetectors: Record<BuiltinType, (text: string) => Found> = {
  email: findEmails,
  credit_card: findCards,
  ip: (text) => scan(ipPattern, text, validIpv4),
  mac_address: (text) => scan(macPattern, text, () => true),
  // Overlaps between the two are settled with those of the other types
  // (leftmost, then longest): a bare URL inside a URL with a scheme loses,
  // and one is still found when another type took the scheme's characters.
  url: (text) => [...scan(schemeUrlPattern, text, acceptUrl(false)), ...scan(bareUrlPattern, text, acceptUrl(true))]
}

interface Rule {
  readonly name: string
  readonly builtin: boolean
  readonly detect: (text: string) => Found
}

const isBuiltin = (u: unknown): u is BuiltinType =>
  typeof u === "string" && (builtinTypes as ReadonlyArray<string>).includes(u)

const NAME = /^[A-Za-z][A-Za-z0-9_]*$/

const customDetect = (name: string, detect: (text: string) => ReadonlyArray<Span>) => (text: string): Found => {
  const spans = detect(text)
  if (!Array.isArray(spans)) {
    throw new PiiDetectorFailed({ piiType: name, reason: "it did not return an array of spans" })
  }
  return spans.map((span: Span) => {
    const valid = span !== null && typeof span === "object" && Number.isInteger(span.start) &&
      Number.isInteger(span.end) && span.start >= 0 && span.start < span.end && span.end <= text.length
    if (!valid) {
      throw new PiiDetectorFailed({
        piiType: name,
        reason: `it returned the span ${JSON.stringify(span)}, which is not a non-empty span of a text of ` +
          `length ${text.length}`
      })
    }
    return { start: span.start, end: span.end }
  })
}

const invalid = (fields: { readonly option: string; readonly reason: string }) =>
  Check.invalid("Pii", fields.option, fields.reason)

const RegExpSchema = Schema.declare((u: unknown): u is RegExp => u instanceof RegExp, { identifier: "a RegExp" })

const redactorFields = {
  types: Schema.Array(Schema.Union(
    Schema.String,
    Schema.Struct({ name: Schema.String, pattern: RegExpSchema }),
    Schema.Struct({ name: Schema.String, detect: Check.AnyFunction })
  )),
  strategy: Schema.Literal("redact", "mask", "hash", "block")
}

const compileRules = (types: ReadonlyArray<PiiType>): Either.Either<ReadonlyArray<Rule>, AgentError.InvalidOptions> => {
  if (!Array.isArray(types) || types.length === 0) {
    return Either.left(invalid({ option: "types", reason: "give at least one PII type" }))
  }
  const rules: Array<Rule> = []
  const seen = new Set<string>()
  for (const [index, type] of types.entries()) {
    const option = `types[${index}]`
    let rule: Rule
    if (typeof type === "string") {
      if (!isBuiltin(type)) {
        return Either.left(
          invalid({
            option,
            reason: `unknown PII type "${type}"; use one of ${builtinTypes.join(", ")} or a custom type ` +
              `{ name, pattern } or { name, detect }`
          })
        )
      }
      rule = { name: type, builtin: true, detect: builtinDetectors[type] }
    } else if (type !== null && typeof type === "object" && typeof type.name === "string") {
      if (!NAME.test(type.name)) {
        return Either.left(
          invalid({
            option: `${option}.name`,
            reason: `"${type.name}" is not a valid name (a letter, then letters, digits or _)`
          })
        )
      }
      if ("pattern" in type && type.pattern instanceof RegExp) {
        const flags = type.pattern.flags.replace(/[gy]/g, "")
        const pattern = new RegExp(type.pattern.source, `${flags}g`)
        rule = { name: type.name, builtin: false, detect: (text) => scan(pattern, text, () => true) }
      } else if ("detect" in type && typeof type.detect === "function") {
        rule = { name: type.name, builtin: false, detect: customDetect(type.name, type.detect) }
      } else {
        return Either.left(
          invalid({
            option,
            reason: `custom type "${type.name}" needs a RegExp pattern or a detect function`
          })
        )
      }
    } else {
      return Either.left(
        invalid({
          option,
          reason: "a PII type is a built-in name or an object { name, pattern } or { name, detect }"
        })
      )
    }
    if (seen.has(rule.name)) {
      return Either.left(invalid({ option, reason: `the type "${rule.name}" is listed twice` }))
    }
    seen.add(rule.name)
    rules.push(rule)
  }
  return Either.right(rules)
}

const detectWith = (rules: ReadonlyArray<Rule>) => (text: string): ReadonlyArray<PiiMatch> => {
  const candidates: Array<{ readonly span: Span; readonly rank: number }> = []
  for (let rank = 0; rank < rules.length; rank++) {
    for (const span of rules[rank]!.detect(text)) candidates.push({ span, rank })
  }
  if (candidates.length === 0) return []
  candidates.sort((a, b) => a.span.start - b.span.start || b.span.end - a.span.end || a.rank - b.rank)
  const matches: Array<PiiMatch> = []
  let covered = 0
  for (const { rank, span } of candidates) {
    if (span.start < covered) continue
    matches.push({ type: rules[rank]!.name, start: span.start, end: span.end, value: text.slice(span.start, span.end) })
    covered = span.end
  }
  return matches
}

// -----------------------------------------------------------------------------
// strategies
// -----------------------------------------------------------------------------

const K = [
  0x428a2f98,
  0x71374491,
  0xb5c0fbcf,
  0xe9b5dba5,
  0x3956c25b,
  0x59f111f1,
  0x923f82a4,
  0xab1c5ed5,
  0xd807aa98,
  0x12835b01,
  0x243185be,
  0x550c7dc3,
  0x72be5d74,
  0x80deb1fe,
  0x9bdc06a7,
  0xc19bf174,
  0xe49b69c1,
  0xefbe4786,
  0x0fc19dc6,
  0x240ca1cc,
  0x2de92c6f,
  0x4a7484aa,
  0x5cb0a9dc,
  0x76f988da,
  0x983e5152,
  0xa831c66d,
  0xb00327c8,
  0xbf597fc7,
  0xc6e00bf3,
  0xd5a79147,
  0x06ca6351,
  0x14292967,
  0x27b70a85,
  0x2e1b2138,
  0x4d2c6dfc,
  0x53380d13,
  0x650a7354,
  0x766a0abb,
  0x81c2c92e,
  0x92722c85,
  0xa2bfe8a1,
  0xa81a664b,
  0xc24b8b70,
  0xc76c51a3,
  0xd192e819,
  0xd6990624,
  0xf40e3585,
  0x106aa070,
  0x19a4c116,
  0x1e376c08,
  0x2748774c,
  0x34b0bcb5,
  0x391c0cb3,
  0x4ed8aa4a,
  0x5b9cca4f,
  0x682e6ff3,
  0x748f82ee,
  0x78a5636f,
  0x84c87814,
  0x8cc70208,
  0x90befffa,
  0xa4506ceb,
  0xbef9a3f7,
  0xc67178f2
]

/**
 * The SHA-256 digest of a string's UTF-8 bytes, in hex (pure, synchronous,
 * the same on every platform).
 *
 * @example
 * ```ts
 * import * as Pii from "@stepwise-agent/middleware/Pii"
 *
 * Pii.sha256("abc") // "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
 * ```
 *
 * @since 0.1.0
 * @category strategies
 */
export const sha256 = (text: string): string => {
  const bytes = new TextEncoder().encode(text)
  const bitLength = bytes.length * 8
  const padded = new Uint8Array(Math.ceil((bytes.length + 9) / 64) * 64)
  padded.set(bytes)
  padded[bytes.length] = 0x80
  const view = new DataView(padded.buffer)
  view.setUint32(padded.length - 8, Math.floor(bitLength / 0x100000000))
  view.setUint32(padded.length - 4, bitLength >>> 0)
  const h = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
  const w = new Uint32Array(64)
  const rotr = (x: number, n: number) => (x >>> n) | (x << (32 - n))
  for (let block = 0; block < padded.length; block += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(block + i * 4)
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(w[i - 15]!, 7) ^ rotr(w[i - 15]!, 18) ^ (w[i - 15]! >>> 3)
      const s1 = rotr(w[i - 2]!, 17) ^ rotr(w[i - 2]!, 19) ^ (w[i - 2]! >>> 10)
      w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) >>> 0
    }
    let [a, b, c, d, e, f, g, hh] = h as [number, number, number, number, number, number, number, number]
    for (let i = 0; i < 64; i++) {
      const s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
      const t1 = (hh + s1 + ((e & f) ^ (~e & g)) + K[i]! + w[i]!) >>> 0
      const s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
      const t2 = (s0 + ((a & b) ^ (a & c) ^ (b & c))) >>> 0
      hh = g
      g = f
      f = e
      e = (d + t1) >>> 0
      d = c
      c = b
      b = a
      a = (t1 + t2) >>> 0
    }
    h[0] = (h[0]! + a) >>> 0
    h[1] = (h[1]! + b) >>> 0
    h[2] = (h[2]! + c) >>> 0
    h[3] = (h[3]! + d) >>> 0
    h[4] = (h[4]! + e) >>> 0
    h[5] = (h[5]! + f) >>> 0
    h[6] = (h[6]! + g) >>> 0
    h[7] = (h[7]! + hh) >>> 0
  }
  return h.map((word) => word.toString(16).padStart(8, "0")).join("")
}

const mask = (match: PiiMatch): string => {
  const value = match.value
  switch (match.type) {
    case "email": {
      const [local, domain] = value.split("@") as [string, string]
      const labels = domain.split(".")
      return `${local}@****.${labels[labels.length - 1]}`
    }
    case "credit_card": {
      const digits = value.replace(/\D/g, "")
      const separator = value.includes("-") ? "-" : value.includes(" ") ? " " : ""
      return separator === ""
        ? `************${digits.slice(-4)}`
        : `****${separator}****${separator}****${separator}${digits.slice(-4)}`
    }
    case "ip":
      return `*.*.*.${value.split(".")[3]}`
    case "mac_address": {
      const separator = value.includes(":") ? ":" : "-"
      return `${Array(5).fill("**").join(separator)}${separator}${value.slice(-2)}`
    }
    case "url":
      return "[MASKED_URL]"
    default:
      return value.length > 4 ? `****${value.slice(-4)}` : "****"
  }
}

const replacement = (strategy: Exclude<Strategy, "block">, match: PiiMatch): string => {
  switch (strategy) {
    case "redact":
      return `[REDACTED_${match.type.toUpperCase()}]`
    case "mask":
      return mask(match)
    case "hash":
      return `<${match.type}_hash:${sha256(match.value).slice(0, 8)}>`
  }
}

const applyStrategy = (strategy: Strategy, text: string, matches: ReadonlyArray<PiiMatch>): string => {
  if (strategy === "block" || matches.length === 0) return text
  let out = ""
  let at = 0
  for (const match of matches) {
    out += text.slice(at, match.start) + replacement(strategy, match)
    at = match.end
  }
  return out + text.slice(at)
}

// -----------------------------------------------------------------------------
// streaming
// -----------------------------------------------------------------------------

const WHITESPACE = /\s/
const isWhitespace = (char: string | undefined): boolean => char !== undefined && WHITESPACE.test(char)
const isDigit = (char: string | undefined): boolean => char !== undefined && char >= "0" && char <= "9"

/**
 * Whether no match can contain both `text[at - 1]` and `text[at]`: the first
 * is whitespace, the second is not, and they are not a space between digits.
 */
const isBreak = (text: string, at: number): boolean =>
  isWhitespace(text[at - 1]) && !isWhitespace(text[at]) &&
  !(text[at - 1] === " " && isDigit(text[at - 2]) && isDigit(text[at]))

/**
 * Holds back the text from the last break on and redacts each segment
 * before a break once, when the break arrives. The work per chunk is
 * proportional to the chunk (plus the segment it releases): a chunk is
 * checked for breaks with the two characters before it kept in the state,
 * and the held-back text is only appended to (a rope), never rescanned.
 */
const makeStream = (redact: (text: string) => Redaction): StreamRedactor => {
  const release = (state: StreamState, text: string, cut: number): StreamStep => {
    const segment = redact(text.slice(0, cut))
    return {
      text: segment.text,
      matches: segment.matches.map((match) => ({
        ...match,
        start: match.start + state.offset,
        end: match.end + state.offset
      })),
      state: { pending: text.slice(cut), offset: state.offset + cut, last: text.slice(Math.max(cut, text.length - 2)) }
    }
  }
  return {
    initial: { pending: "", offset: 0, last: "" },
    push: (state, chunk) => {
      // `window` is the end of the held-back text followed by the chunk; its
      // index `at` is `shift + at` in the whole held-back text plus chunk.
      const window = state.last + chunk
      const shift = state.pending.length - state.last.length
      // Positions before the old end were checked when they arrived (a break
      // needs the character after it), so only the new ones are scanned.
      const from = Math.max(1 - shift, state.last.length)
      for (let at = WHITESPACE.test(window) ? window.length - 1 : -1; at >= from; at--) {
        if (isBreak(window, at)) return release(state, state.pending + chunk, shift + at)
      }
      return {
        text: "",
        matches: [],
        state: { pending: state.pending + chunk, offset: state.offset, last: window.slice(-2) }
      }
    },
    flush: (state) => release(state, state.pending, state.pending.length)
  }
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/**
 * Compiles detection and redaction rules, checking the options.
 *
 * A custom `detect` that throws or returns a span outside the text makes
 * `detect`/`redact` throw a {@link PiiDetectorFailed} (the middleware turns
 * it into a typed failure).
 *
 * @example
 * ```ts
 * import * as Pii from "@stepwise-agent/middleware/Pii"
 * import { Either } from "effect"
 *
 * const redactor = Either.getOrThrow(Pii.redactor({ types: ["email"], strategy: "redact" }))
 * redactor.redact("write to ada@example.com").text // "write to [REDACTED_EMAIL]"
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const redactor = (options: RedactorOptions): Either.Either<Redactor, AgentError.InvalidOptions> =>
  Either.flatMap(Check.validateEither("Pii", Schema.Struct(redactorFields), options), () => compile(options))

const compile = (options: RedactorOptions): Either.Either<Redactor, AgentError.InvalidOptions> => {
  return Either.map(compileRules(options.types), (rules) => {
    const detect = detectWith(rules)
    const redact = (text: string): Redaction => {
      const matches = detect(text)
      return { text: applyStrategy(options.strategy, text, matches), matches }
    }
    return {
      types: rules.map((rule) => rule.name),
      strategy: options.strategy,
      detect,
      redact,
      stream: makeStream(redact)
    }
  })
}

/**
 * The incremental redactor of these options (see {@link StreamRedactor}).
 *
 * @example
 * ```ts
 * import * as Pii from "@stepwise-agent/middleware/Pii"
 * import { Either } from "effect"
 *
 * const stream = Either.getOrThrow(Pii.streamRedactor({ types: ["email"], strategy: "redact" }))
 * const a = stream.push(stream.initial, "mail ada@exa") // a.text === "mail " (the address may go on)
 * const b = stream.push(a.state, "mple.com now") // b.text === "[REDACTED_EMAIL] "
 * const c = stream.flush(b.state) // c.text === "now"
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const streamRedactor = (options: RedactorOptions): Either.Either<StreamRedactor, AgentError.InvalidOptions> =>
  Either.map(redactor(options), (compiled) => compiled.stream)

const detectorFailure = (error: unknown): PiiDetectorFailed =>
  error instanceof PiiDetectorFailed
    ? error
    : new PiiDetectorFailed({ piiType: "custom", reason: `it threw: ${String(error)}` })

const redactSafely = (compiled: Redactor, text: string): Effect.Effect<Redaction, PiiDetectorFailed> =>
  Effect.try({ try: () => compiled.redact(text), catch: detectorFailure })

const pushSafely = (
  compiled: Redactor,
  state: StreamState,
  chunk: string | undefined
): Effect.Effect<StreamStep, PiiDetectorFailed> =>
  Effect.try({
    try: () => chunk === undefined ? compiled.stream.flush(state) : compiled.stream.push(state, chunk),
    catch: detectorFailure
  })

const detected = (
  matches: ReadonlyArray<PiiMatch>,
  location: Location,
  toolName?: string | undefined
): PiiDetected => {
  const types: Array<string> = []
  for (const match of matches) if (!types.includes(match.type)) types.push(match.type)
  return new PiiDetected({
    piiType: matches[0]!.type,
    types,
    count: matches.length,
    location,
    ...(toolName === undefined ? {} : { toolName })
  })
}

/**
 * Redacts a stream of text chunks as they come, holding back only what a
 * match still in progress could reach; with `"block"` it fails with
 * {@link PiiDetected} before releasing the text containing the match.
 *
 * @example
 * ```ts
 * import * as Pii from "@stepwise-agent/middleware/Pii"
 * import { Either, Stream } from "effect"
 *
 * const redactor = Either.getOrThrow(Pii.redactor({ types: ["credit_card"], strategy: "mask" }))
 * const safe = Stream.make("card 4111 1111 ", "1111 1111 ok").pipe(Pii.redactStream(redactor))
 * // emits "card ", then "**** **** **** 1111 ", then "ok"
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const redactStream = (compiled: Redactor) =>
<E, R>(
  self: Stream.Stream<string, E, R>
): Stream.Stream<string, E | PiiDetected | PiiDetectorFailed, R> => {
  const step = (result: StreamStep): Effect.Effect<StreamStep, PiiDetected> =>
    compiled.strategy === "block" && result.matches.length > 0
      ? Effect.fail(detected(result.matches, "stream"))
      : Effect.succeed(result)
  return Stream.concat(
    self.pipe(Stream.map((chunk): string | undefined => chunk)),
    Stream.make(undefined)
  ).pipe(
    Stream.mapAccumEffect(compiled.stream.initial, (state, chunk) =>
      pushSafely(compiled, state, chunk).pipe(
        Effect.flatMap(step),
        Effect.map((result) => [result.state, result.text] as const)
      )),
    Stream.filter((text) => text.length > 0)
  )
}

/**
 * The redacted text of each of `texts`, given the matches found in their
 * concatenation: a match is replaced in the text where it starts, and the
 * texts it runs on into lose the rest of it.
 */
const redactPieces = (
  strategy: Strategy,
  texts: ReadonlyArray<string>,
  matches: ReadonlyArray<PiiMatch>
): ReadonlyArray<string> => {
  if (strategy === "block" || matches.length === 0) return texts
  if (texts.length === 1) return [applyStrategy(strategy, texts[0]!, matches)]
  const starts: Array<number> = []
  let length = 0
  for (const text of texts) {
    starts.push(length)
    length += text.length
  }
  const pieces = texts.map(() => "")
  /** Appends the unmatched text between `from` and `to` to the pieces it belongs to. */
  const keep = (from: number, to: number) => {
    for (let k = 0; k < texts.length; k++) {
      const lo = Math.max(from, starts[k]!)
      const hi = Math.min(to, starts[k]! + texts[k]!.length)
      if (lo < hi) pieces[k] += texts[k]!.slice(lo - starts[k]!, hi - starts[k]!)
    }
  }
  let at = 0
  for (const match of matches) {
    keep(at, match.start)
    let k = texts.length - 1
    while (k > 0 && starts[k]! > match.start) k--
    pieces[k] += replacement(strategy, match)
    at = match.end
  }
  keep(at, length)
  return pieces
}

/**
 * Redacts the text and reasoning parts. Consecutive parts of one kind are
 * checked as one text, so a value split across two parts is found (see
 * `redactPieces`); a part a match empties is dropped. A text part whose
 * text is in `skip` (already redacted; each entry skips one part) is left
 * as it is.
 */
const redactParts = <P extends Prompt.Part>(
  compiled: Redactor,
  parts: ReadonlyArray<P>,
  skip: Array<string> = []
): Effect.Effect<{ readonly parts: ReadonlyArray<P>; readonly matches: ReadonlyArray<PiiMatch> }, PiiDetectorFailed> =>
  Effect.gen(function*() {
    const matches: Array<PiiMatch> = []
    let changed = false
    const out: Array<P> = []
    const isText = (part: P | undefined, type: string): part is P & Prompt.TextPart =>
      part !== undefined && part.type === type && (type !== "text" || !skip.includes((part as Prompt.TextPart).text))
    for (let i = 0; i < parts.length;) {
      const part = parts[i]!
      if (part.type !== "text" && part.type !== "reasoning") {
        out.push(part)
        i++
        continue
      }
      if (!isText(part, part.type)) {
        skip.splice(skip.indexOf((part as Prompt.TextPart).text), 1)
        out.push(part)
        i++
        continue
      }
      const group: Array<P & Prompt.TextPart> = []
      for (; isText(parts[i], part.type); i++) group.push(parts[i] as P & Prompt.TextPart)
      const texts = group.map((member) => member.text)
      const result = yield* redactSafely(compiled, texts.join(""))
      matches.push(...result.matches)
      const pieces = redactPieces(compiled.strategy, texts, result.matches)
      group.forEach((member, k) => {
        if (pieces[k] === member.text) return out.push(member)
        changed = true
        if (pieces[k] !== "") out.push(Prompt.makePart(part.type, { text: pieces[k]!, options: member.options }) as P)
      })
    }
    return { parts: changed ? out : parts, matches }
  })

const redactAssistant = (
  compiled: Redactor,
  message: Prompt.AssistantMessage,
  skip?: Array<string> | undefined
): Effect.Effect<
  { readonly message: Prompt.AssistantMessage; readonly matches: ReadonlyArray<PiiMatch> },
  PiiDetectorFailed
> =>
  Effect.map(redactParts(compiled, message.content, skip), ({ matches, parts }) => ({
    matches,
    message: parts === message.content
      ? message
      : Prompt.makeMessage("assistant", { content: parts, options: message.options })
  }))

// -----------------------------------------------------------------------------
// middleware
// -----------------------------------------------------------------------------

const countByType = (matches: ReadonlyArray<PiiMatch>): Record<string, number> => {
  const counts: Record<string, number> = {}
  for (const match of matches) counts[match.type] = (counts[match.type] ?? 0) + 1
  return counts
}

const describe = (matches: ReadonlyArray<PiiMatch>, strategy: Strategy, where: string): string =>
  `${strategy === "redact" ? "redacted" : strategy === "mask" ? "masked" : "hashed"} ${
    Object.entries(countByType(matches)).map(([type, count]) => `${count} ${type}`).join(", ")
  } in ${where}`

const redactValue = (
  compiled: Redactor,
  value: unknown,
  matches: Array<PiiMatch>
): Effect.Effect<unknown, PiiDetectorFailed> => {
  if (typeof value === "string") {
    return Effect.map(redactSafely(compiled, value), (result) => {
      matches.push(...result.matches)
      return result.text
    })
  }
  if (typeof value === "number" || typeof value === "bigint") {
    // A number holding a match (a card as a JSON number) becomes the redacted string; others stay numbers.
    return Effect.map(redactSafely(compiled, String(value)), (result) => {
      matches.push(...result.matches)
      return result.matches.length > 0 ? result.text : value
    })
  }
  if (Array.isArray(value)) return Effect.forEach(value, (item) => redactValue(compiled, item, matches))
  if (value !== null && typeof value === "object") {
    return Effect.map(
      Effect.forEach(
        Object.entries(value),
        ([key, item]) => Effect.zip(redactValue(compiled, key, matches), redactValue(compiled, item, matches))
      ),
      Object.fromEntries
    )
  }
  return Effect.succeed(value)
}

const OptionsSchema = Schema.Struct({
  ...redactorFields,
  applyToInput: Schema.optional(Schema.Boolean),
  applyToOutput: Schema.optional(Schema.Boolean),
  applyToToolResults: Schema.optional(Schema.Boolean),
  name: Schema.optional(Check.NonEmpty)
})

/**
 * Builds the middleware (see the module documentation for what each option
 * rewrites and when). Bad options fail with `AgentError.InvalidOptions`; during
 * a run, `"block"` fails with {@link PiiDetected} and a broken custom
 * detector with {@link PiiDetectorFailed}. Each rewrite is reported as a
 * decision with the counts per type (never the values).
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import * as Pii from "@stepwise-agent/middleware/Pii"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const pii = yield* Pii.middleware({
 *     types: ["email", "credit_card", { name: "ssn", pattern: /\b\d{3}-\d{2}-\d{4}\b/ }],
 *     strategy: "redact",
 *     applyToOutput: true
 *   })
 *   const agent = yield* Agent.make({ middleware: [pii] })
 *   return yield* agent.run("My card is 4111 1111 1111 1111", { threadId: "t1" })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware: (
  options: Options
) => Effect.Effect<Middleware.Middleware<{}, PiiDetected | PiiDetectorFailed>, AgentError.InvalidOptions> = Effect.fn(
  "Pii.middleware"
)(function*(options: Options) {
  yield* Check.validate("Pii", OptionsSchema, options)
  const compiled = yield* compile(options)
  const applyToInput = options.applyToInput ?? true
  const applyToOutput = options.applyToOutput ?? false
  const applyToToolResults = options.applyToToolResults ?? false
  if (!applyToInput && !applyToOutput && !applyToToolResults) {
    return yield* invalid({
      option: "applyToInput",
      reason: "applyToInput, applyToOutput and applyToToolResults are all false: there is nothing to check"
    })
  }
  const strategy = compiled.strategy

  /** Rewrites the user messages of a run's input before they are stored. */
  const transformInput = Effect.fnUntraced(
    function*({ messages }: { readonly messages: ReadonlyArray<Prompt.Message> }) {
      const matches: Array<PiiMatch> = []
      const out: Array<Prompt.Message> = []
      for (const message of messages) {
        if (message.role !== "user") {
          out.push(message)
          continue
        }
        const result = yield* redactParts(compiled, message.content)
        matches.push(...result.matches)
        out.push(
          result.parts === message.content
            ? message
            : Prompt.makeMessage("user", { content: result.parts, options: message.options })
        )
      }
      if (matches.length === 0) return messages
      if (strategy === "block") return yield* detected(matches, "input")
      yield* Middleware.report(describe(matches, strategy, "the user input"), countByType(matches))
      return out
    }
  )

  /**
   * Per thread, the text parts the stream hook released for a model call
   * (the `step` of its request). `afterModel` leaves exactly those alone, so
   * each piece of output is redacted once and the stored reply is the text
   * that was shown (redacting twice is not always a no-op, e.g. a mask whose
   * output a custom pattern matches again). Entries are taken by the
   * `afterModel` of the same call; the few a failed run leaves behind are
   * evicted oldest first, which only means that text is checked again.
   */
  const streamed = new Map<string, { readonly step: number; readonly texts: Array<string> }>()
  const maxStreamed = 1024

  const afterModel = Effect.fnUntraced(function*({ messages, step, threadId }: Middleware.HookContext<{}>) {
    let index = messages.length - 1
    while (index >= 0 && messages[index]!.role !== "assistant") index--
    const record = streamed.get(threadId)
    streamed.delete(threadId)
    if (index < 0) return undefined
    const skip = record !== undefined && record.step === step - 1 ? record.texts : undefined
    const result = yield* redactAssistant(compiled, messages[index] as Prompt.AssistantMessage, skip)
    if (result.matches.length === 0) return undefined
    if (strategy === "block") return yield* detected(result.matches, "output")
    yield* Middleware.report(describe(result.matches, strategy, "the model output"), countByType(result.matches))
    return { messages: [...messages.slice(0, index), result.message, ...messages.slice(index + 1)] }
  })

  const name = options.name ?? "pii"

  /**
   * Redacts the text parts of a streamed reply as they arrive: one
   * incremental redactor state per text id, released into redacted
   * `text-delta` parts. A part's `text-start` is sent with its first
   * release, so a part that releases nothing is dropped. At a `text-end` the
   * held-back tail may be the start of a value the next part goes on with:
   * the end is held until the next part comes. If it is a `text-start`, the
   * tail and its state move into that part; otherwise (and at the end of the
   * stream) the tail is flushed into its own part, then the end is sent. A
   * text the provider never ended is flushed at the end of the stream. Other
   * parts pass through. Each attempt (each run of the stream) starts afresh.
   */
  const wrapModelStream = (
    request: Middleware.ModelRequest,
    parts: Stream.Stream<Response.AnyPart, AiError.AiError>
  ): Stream.Stream<Response.AnyPart, AiError.AiError | PiiDetected | PiiDetectorFailed> =>
    Stream.suspend(() => {
      const states = new Map<string, StreamState>()
      const released = new Map<string, string>()
      const unsent = new Map<string, Response.TextStartPart>()
      let ended: Response.TextEndPart | undefined
      const found: Array<PiiMatch> = []
      const record = { step: request.step, texts: [] as Array<string> }
      streamed.delete(request.threadId)
      if (streamed.size >= maxStreamed) streamed.delete(streamed.keys().next().value!)
      streamed.set(request.threadId, record)
      type Parts = Effect.Effect<ReadonlyArray<Response.AnyPart>, PiiDetected | PiiDetectorFailed>
      /** Pushes a chunk (or flushes, when `undefined`) and sends what it releases. */
      const release = (id: string, chunk: string | undefined, metadata: Response.TextDeltaPart["metadata"]): Parts =>
        Effect.flatMap(pushSafely(compiled, states.get(id) ?? compiled.stream.initial, chunk), (step) => {
          if (step.matches.length > 0) {
            if (strategy === "block") return Effect.fail(detected(step.matches, "stream"))
            found.push(...step.matches)
          }
          states.set(id, step.state)
          if (step.text.length === 0) return Effect.succeed([])
          const start = unsent.get(id)
          unsent.delete(id)
          released.set(id, (released.get(id) ?? "") + step.text)
          const delta = Response.makePart("text-delta", { id, delta: step.text, metadata })
          return Effect.succeed(start === undefined ? [delta] : [start, delta])
        })
      /** Closes a text whose releases are over: it is recorded and ended, or dropped if it released nothing. */
      const close = (id: string, end: Response.TextEndPart | undefined): ReadonlyArray<Response.AnyPart> => {
        const text = released.get(id)
        const dropped = unsent.has(id)
        states.delete(id)
        released.delete(id)
        unsent.delete(id)
        if (dropped) return []
        record.texts.push(text ?? "")
        return end === undefined ? [] : [end]
      }
      /** Flushes the tail of the text that ended last into its own part, and ends it. */
      const flushEnded: Parts = Effect.suspend(() => {
        const end = ended
        ended = undefined
        return end === undefined
          ? Effect.succeed([])
          : Effect.map(release(end.id, undefined, {}), (tail) => [...tail, ...close(end.id, end)])
      })
      const onPart = (part: Response.AnyPart): Parts =>
        Effect.suspend(() => {
          switch (part.type) {
            case "text-start": {
              const end = ended
              ended = undefined
              const state = end === undefined ? undefined : states.get(end.id)
              const closed = end === undefined ? [] : close(end.id, end)
              states.set(part.id, state ?? compiled.stream.initial)
              released.delete(part.id)
              unsent.set(part.id, part)
              return Effect.succeed(closed)
            }
            case "text-delta":
              return Effect.zipWith(flushEnded, release(part.id, part.delta, part.metadata), (a, b) => [...a, ...b])
            case "text-end": {
              if (!states.has(part.id)) return Effect.map(flushEnded, (before) => [...before, part])
              return Effect.map(flushEnded, (before) => {
                ended = part
                return before
              })
            }
            default:
              return Effect.map(flushEnded, (before) => [...before, part])
          }
        })
      const unfinished: Parts = Effect.zipWith(
        flushEnded,
        Effect.suspend(() =>
          Effect.forEach([...states.keys()], (id) =>
            Effect.map(release(id, undefined, {}), (tail) => [...tail, ...close(id, undefined)]))
        ),
        (before, tails) => [...before, ...tails.flat()]
      )
      const reported = Effect.suspend(() =>
        found.length === 0 ? Effect.void : Middleware.report(
          describe(found, strategy, "the streamed model output"),
          countByType(found)
        ).pipe(Effect.locally(Middleware.CurrentHook, { middleware: name, hook: "wrapModelStream" }))
      )
      return parts.pipe(
        Stream.mapEffect(onPart),
        Stream.concat(Stream.fromEffect(unfinished)),
        Stream.flattenIterables,
        Stream.concat(Stream.execute(reported))
      )
    })

  const wrapToolCall = (request: Middleware.ToolCallRequest, next: Middleware.NextToolCall) =>
    Effect.gen(function*() {
      const part = yield* next(request)
      const matches: Array<PiiMatch> = []
      const result = yield* redactValue(compiled, part.result, matches)
      if (matches.length === 0) return part
      if (strategy === "block") return yield* detected(matches, "tool_result", part.name)
      yield* Middleware.report(
        describe(matches, strategy, `the result of ${part.name}`),
        countByType(matches)
      )
      return Prompt.makePart("tool-result", {
        id: part.id,
        name: part.name,
        result,
        isFailure: part.isFailure,
        providerExecuted: part.providerExecuted,
        options: part.options
      })
    })

  return Middleware.make({
    name,
    transformInput: applyToInput ? transformInput : undefined,
    afterModel: applyToOutput ? afterModel : undefined,
    wrapModelStream: applyToOutput ? wrapModelStream : undefined,
    wrapToolCall: applyToToolResults ? wrapToolCall : undefined
  })
})
