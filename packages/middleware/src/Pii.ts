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
 *   redacted text. (LangChain rewrites the state in `before_model`.) What a
 *   person types to `HumanInTheLoop` (a `respond` answer, a `reject` reason)
 *   passes `transformInput` too: the agent hands it to the input's hooks
 *   right after the hook that wrote it, whatever the order of the list.
 * - `applyToOutput` (default `false`): the assistant reply's text is
 *   rewritten before it is shown or stored. A streamed model call
 *   (`Agent.stream`) is redacted as it arrives, in `wrapModelStream`: each
 *   text part (one {@link StreamRedactor} state per text id, carried on into
 *   the next text part when one follows at once, else flushed at its
 *   `text-end`) releases only text that no match still in progress can reach,
 *   so a value split across chunks or text parts is caught, and the
 *   `TextDelta` events, the stored reply and `ModelResponded` all carry the
 *   redacted text. `afterModel`
 *   then checks the whole reply (its text and reasoning parts; tool call
 *   arguments are left as the model wrote them) before it is stored: that is
 *   the path of a call that is not streamed (`Agent.run`), and it also
 *   covers a reply that did not come through the stream (a `wrapModelCall`
 *   that answered by itself or rewrote the response) and streamed reasoning.
 *   It leaves alone the text parts the stream already redacted, so each piece
 *   of output is redacted once and the stored reply is the text that was
 *   shown.
 * - `applyToToolResults` (default `false`): `wrapToolCall` rewrites every
 *   string inside a tool's result before it is stored and before the
 *   `ToolCallCompleted` event is emitted.
 *
 * No text keeps the process: a text longer than 64 KB (and a streamed chunk
 * that long) is redacted through the {@link StreamRedactor} in 16 KB slices,
 * with a turn of the event loop between them, so an interruption takes
 * effect between slices; the result is the whole-text redaction for every
 * type that streaming accepts.
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
import type * as Response from "@effect/ai/Response"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as EventLoop from "@stepwise-agent/core/EventLoop"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as LinearPattern from "./internal/linearPattern.js"
import * as Check from "./internal/options.js"
import * as Detectors from "./internal/piiDetectors.js"
import * as PiiStream from "./internal/piiStream.js"
import * as Sha256 from "./internal/sha256.js"

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
 * A kind of personal data to look for: a built-in one, a regular expression
 * (a `RegExp`, or its source as a string, as LangChain's `detector` takes
 * it), or a function returning the spans it found.
 *
 * A pattern runs on a linear-time engine (RE2, through re2js), never on
 * JavaScript's backtracking one, so no text can make it take exponential
 * time: `/(a+)+b/` on 100 KB of `a`s ends at once. It keeps JavaScript's
 * meaning (`\s`, `.`, `\b`, flags `i`, `m`, `s`, `u`; `g` and `y` do not
 * matter), reads whole characters as the `u` flag does, and groups do not
 * capture. A pattern RE2 cannot run (a backreference, a lookahead, a repeat
 * count above 1,000) or too large to scan fast (a source over 20,000
 * characters, a program over 10,000 instructions) is refused when the
 * middleware is built, with `AgentError.InvalidOptions` naming
 * `types[i].pattern`; lookbehinds run.
 *
 * A pattern whose matches can hold whitespace (`\s`, a space, `.`, `[^,]`)
 * must bound them: at most 512 characters (`\s{1,5}`, not `\s+`), else it is
 * refused the same way. Long texts are redacted in slices and streams as
 * they come, and the redactor holds back that much text after the point
 * where it releases, so such a value is never split there.
 *
 * For streaming (see {@link streamRedactor}) a custom type must not depend
 * on `^`/`$` anchors or look more than one character around a match, and a
 * `detect` function must never match across whitespace (except a single
 * space between two digits).
 *
 * @since 0.1.0
 * @category models
 */
export type PiiType =
  | BuiltinType
  | { readonly name: string; readonly pattern: RegExp | string }
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
  /** What to do with a match (default `"redact"`, as in LangChain). */
  readonly strategy?: Strategy | undefined
}

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends RedactorOptions {
  /** Redact the user messages of each run's input, and what a person answers to `HumanInTheLoop` (default `true`). */
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
 * characters were released before it, the last two characters of the input
 * (all a new chunk needs to find a break, so the held-back text is never
 * read again until it is released), the two characters just before the
 * held-back text (a detector may look behind a match), and whether the input
 * up to the next whitespace is the rest of a match too long to hold back,
 * already replaced, and is dropped.
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamState {
  readonly pending: string
  readonly offset: number
  readonly last: string
  readonly before: string
  readonly dropping: boolean
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
 * single space between two digits), since a built-in match can never cross
 * one; with a pattern whose matches can hold whitespace, the last break at
 * least its longest match before the end that none of its matches crosses.
 *
 * It never holds back more than 8,192 characters plus one chunk, so each
 * `push` costs time in proportion to its chunk plus at most that window,
 * whatever the input. Past the window, text without a break (base64, a long
 * run of digits) is released up to a cut at least 1,024 characters before
 * its end that no match crosses; the releases stay exactly the whole-text
 * redaction unless a value longer than 1,024 characters crosses the cut. A
 * longer match that crosses it (a URL with a long path, say) is replaced as
 * far as it was seen, and the text after it up to the next
 * whitespace is dropped with it (with `"hash"` and `"mask"`, the replacement
 * is of the part seen).
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
 * A custom detector threw, or returned a span outside the text; or a custom
 * pattern's scan of one text overran its time budget (a second plus 20 µs
 * per character: a pattern that rescans the text at every match), or could
 * (its instructions × the text's length, checked before it runs).
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
export const passesLuhn: (cardNumber: string) => boolean = Detectors.passesLuhn

const isBuiltin = (u: unknown): u is BuiltinType =>
  typeof u === "string" && (builtinTypes as ReadonlyArray<string>).includes(u)

const NAME = /^[A-Za-z][A-Za-z0-9_]*$/

/** A custom `detect` whose spans are checked: a broken one throws a {@link PiiDetectorFailed}. */
const customDetect = (name: string, detect: (text: string) => ReadonlyArray<Span>): Detectors.Detector => (text) => {
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

/** A pattern's source as an error message shows it: at most 60 characters. */
const shortSource = (source: string): string => source.length > 60 ? `${source.slice(0, 57)}...` : source

/**
 * A custom pattern (a `RegExp`, or a source compiled as `new RegExp` would)
 * in the form the linear-time engine runs, or the `InvalidOptions` naming
 * `option` and saying what the engine does not support.
 */
const linearPattern = (
  pattern: RegExp | string,
  option: string
): Either.Either<LinearPattern.Linear, AgentError.InvalidOptions> => {
  let regexp: RegExp
  try {
    regexp = typeof pattern === "string" ? new RegExp(pattern) : pattern
  } catch (error) {
    return Either.left(invalid({
      option,
      reason: `/${shortSource(String(pattern))}/ is not a regular expression: ${(error as Error).message}`
    }))
  }
  const translation = LinearPattern.translate(regexp)
  if (translation._tag === "Linear") return Either.right(translation)
  return Either.left(invalid({
    option,
    reason: `/${shortSource(regexp.source)}/ cannot run on the linear-time engine (RE2): it does not support ` +
      `${translation.reason}. Rewrite the pattern without it, or give a detect function`
  }))
}

/** Why a pattern whose matches can hold whitespace and run longer than `PiiStream.MAX_REACH` is refused. */
const unboundedAcrossWhitespace = (pattern: LinearPattern.Linear): string => {
  const longest = pattern.reach._tag === "Whitespace" ? pattern.reach.longest : 0
  return `/${shortSource(pattern.source)}/ can match whitespace, and its matches can be ${
    longest === Infinity ? "of any length" : `${longest / 2} characters long`
  }: a long text is redacted in slices and a stream as it comes, and such a match could cross their borders. ` +
    `Bound the repeats that can take whitespace (\\s{1,5} for \\s+, .{0,100} for .*, [^,]{1,50} for [^,]+) ` +
    `so that a match is at most ${PiiStream.MAX_REACH / 2} characters long, or keep whitespace out of the pattern`
}

/** A pattern's detector whose scan overran its time budget fails as a {@link PiiDetectorFailed}. */
const withinBudget = (name: string, detect: Detectors.Detector): Detectors.Detector => (text) => {
  try {
    return detect(text)
  } catch (error) {
    if (error instanceof LinearPattern.Overran) {
      throw new PiiDetectorFailed({ piiType: name, reason: `its pattern ${error.message}` })
    }
    throw error
  }
}

const RegExpSchema = Schema.declare((u: unknown): u is RegExp => u instanceof RegExp, { identifier: "a RegExp" })

const redactorFields = {
  types: Schema.Array(Schema.Union(
    Schema.String,
    Schema.Struct({ name: Schema.String, pattern: Schema.Union(RegExpSchema, Schema.String) }),
    Schema.Struct({ name: Schema.String, detect: Check.AnyFunction })
  )),
  strategy: Schema.optional(Schema.Literal("redact", "mask", "hash", "block"))
}

/** The rule of each type listed, or the first problem with the list. */
const compileRules = (
  types: ReadonlyArray<PiiType>
): Either.Either<ReadonlyArray<Detectors.Rule>, AgentError.InvalidOptions> => {
  if (!Array.isArray(types) || types.length === 0) {
    return Either.left(invalid({ option: "types", reason: "give at least one PII type" }))
  }
  const rules: Array<Detectors.Rule> = []
  const seen = new Set<string>()
  for (const [index, type] of types.entries()) {
    const option = `types[${index}]`
    let rule: Detectors.Rule
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
      rule = { name: type, detect: Detectors.builtin[type] }
    } else if (type !== null && typeof type === "object" && typeof type.name === "string") {
      if (!NAME.test(type.name)) {
        return Either.left(
          invalid({
            option: `${option}.name`,
            reason: `"${type.name}" is not a valid name (a letter, then letters, digits or _)`
          })
        )
      }
      if ("pattern" in type && (type.pattern instanceof RegExp || typeof type.pattern === "string")) {
        const linear = linearPattern(type.pattern, `${option}.pattern`)
        if (Either.isLeft(linear)) return Either.left(linear.left)
        const reach = linear.right.reach
        if (reach._tag === "Whitespace" && reach.longest > PiiStream.MAX_REACH) {
          return Either.left(invalid({ option: `${option}.pattern`, reason: unboundedAcrossWhitespace(linear.right) }))
        }
        rule = {
          name: type.name,
          detect: withinBudget(type.name, Detectors.fromPattern(linear.right)),
          reach: reach._tag === "Whitespace" ? reach.longest : undefined
        }
      } else if ("detect" in type && typeof type.detect === "function") {
        rule = { name: type.name, detect: customDetect(type.name, type.detect) }
      } else {
        return Either.left(
          invalid({
            option,
            reason: `custom type "${type.name}" needs a pattern (a RegExp or its source) or a detect function`
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

// -----------------------------------------------------------------------------
// strategies
// -----------------------------------------------------------------------------

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
      return `<${match.type}_hash:${Sha256.sha256(match.value).slice(0, 8)}>`
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
  const strategy = options.strategy ?? "redact"
  return Either.map(compileRules(options.types), (rules) => {
    const detect = Detectors.detectWith(rules)
    const apply = (text: string, matches: ReadonlyArray<PiiMatch>) => applyStrategy(strategy, text, matches)
    const redact = (text: string): Redaction => {
      const matches = detect(text)
      return { text: apply(text, matches), matches }
    }
    const reaches = rules.flatMap((rule) => rule.reach === undefined ? [] : [rule.reach])
    return {
      types: rules.map((rule) => rule.name),
      strategy,
      detect,
      redact,
      stream: PiiStream.make(
        detect,
        apply,
        reaches.length === 0 ? undefined : { reach: Math.max(...reaches), scan: Detectors.scanWith(rules) }
      )
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

/**
 * The characters redacted since the last turn of the event loop, over the
 * many small texts of one input or tool result.
 */
interface Pace {
  chars: number
}

const newPace = (): Pace => ({ chars: 0 })

/** `effect`, which redacts `length` characters, after a turn of the event loop if `pace` adds up to a slice. */
const paced = <A, E>(pace: Pace, length: number, effect: Effect.Effect<A, E>): Effect.Effect<A, E> => {
  pace.chars += length
  if (pace.chars < PiiStream.SLICE) return effect
  pace.chars = 0
  return Effect.zipRight(EventLoop.turn, effect)
}

/** The stream redactor's `push`, or `flush` when `chunk` is undefined, failing as {@link PiiDetectorFailed}. */
const pushOnce = (compiled: Redactor): PiiStream.Step<PiiDetectorFailed> => (state, chunk) =>
  Effect.try({
    try: () => chunk === undefined ? compiled.stream.flush(state) : compiled.stream.push(state, chunk),
    catch: detectorFailure
  })

/**
 * Redacts `text`: at once when it is short, with a turn of the event loop
 * first when the texts redacted since the last turn add up to a slice
 * (`PiiStream.SLICE`); in slices when it is longer than `PiiStream.AT_ONCE`, so other runs
 * go on and an interruption (a tool timeout, a run's interrupt) takes
 * effect between slices.
 */
const redactSafely = (compiled: Redactor, text: string, pace: Pace): Effect.Effect<Redaction, PiiDetectorFailed> =>
  Effect.suspend(() => {
    if (text.length > PiiStream.AT_ONCE) {
      return PiiStream.redactSlices(pushOnce(compiled), compiled.stream.initial, text, {
        size: PiiStream.SLICE,
        apply: (whole, matches) => applyStrategy(compiled.strategy, whole, matches)
      })
    }
    return paced(pace, text.length, Effect.try({ try: () => compiled.redact(text), catch: detectorFailure }))
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
 * A step of the redactor's stream: with `"block"`, a match fails it with a
 * {@link PiiDetected}; otherwise the matches are added to `found`. A chunk
 * longer than `PiiStream.AT_ONCE` is pushed in slices, and the event loop
 * gets a turn whenever the chunks pushed since the last add up to a slice.
 */
const streamStep = (
  compiled: Redactor,
  found?: Array<PiiMatch> | undefined
): PiiStream.Step<PiiDetected | PiiDetectorFailed> => {
  const pace = newPace()
  return (state, chunk) =>
    Effect.flatMap(
      chunk !== undefined && chunk.length > PiiStream.AT_ONCE
        ? PiiStream.pushSlices(pushOnce(compiled), state, chunk, PiiStream.SLICE)
        : paced(pace, chunk?.length ?? state.pending.length, pushOnce(compiled)(state, chunk)),
      (step) => {
        if (step.matches.length === 0) return Effect.succeed(step)
        if (compiled.strategy === "block") return Effect.fail(detected(step.matches, "stream"))
        found?.push(...step.matches)
        return Effect.succeed(step)
      }
    )
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
): Stream.Stream<string, E | PiiDetected | PiiDetectorFailed, R> =>
  PiiStream.chunks(self, compiled.stream.initial, streamStep(compiled))

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
  pace: Pace,
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
      const result = yield* redactSafely(compiled, texts.join(""), pace)
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
  Effect.map(redactParts(compiled, message.content, newPace(), skip), ({ matches, parts }) => ({
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
  matches: Array<PiiMatch>,
  pace: Pace
): Effect.Effect<unknown, PiiDetectorFailed> => {
  if (typeof value === "string") {
    return Effect.map(redactSafely(compiled, value, pace), (result) => {
      matches.push(...result.matches)
      return result.text
    })
  }
  if (typeof value === "number" || typeof value === "bigint") {
    // A number holding a match (a card as a JSON number) becomes the redacted string; others stay numbers.
    return Effect.map(redactSafely(compiled, String(value), pace), (result) => {
      matches.push(...result.matches)
      return result.matches.length > 0 ? result.text : value
    })
  }
  if (Array.isArray(value)) return Effect.forEach(value, (item) => redactValue(compiled, item, matches, pace))
  if (value !== null && typeof value === "object") {
    return Effect.map(
      Effect.forEach(
        Object.entries(value),
        ([key, item]) =>
          Effect.zip(redactValue(compiled, key, matches, pace), redactValue(compiled, item, matches, pace))
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

/** The tool-result part with its result replaced (the other fields as they were). */
const withResult = (part: Prompt.ToolResultPart, result: unknown): Prompt.ToolResultPart =>
  Prompt.makePart("tool-result", {
    id: part.id,
    name: part.name,
    result,
    isFailure: part.isFailure,
    providerExecuted: part.providerExecuted,
    options: part.options
  })

/**
 * Builds the middleware (see the module documentation for what each option
 * rewrites and when). Bad options fail `Agent.make` with `AgentError.InvalidOptions`; during
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
 *   const pii = Pii.middleware({
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
export const middleware = (options: Options): Middleware.Middleware<{}, PiiDetected | PiiDetectorFailed> =>
  Middleware.unwrap(setup(options), { name: Check.nameOf(options, "pii") })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: (
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
      const pace = newPace()
      for (const message of messages) {
        if (message.role !== "user") {
          out.push(message)
          continue
        }
        const result = yield* redactParts(compiled, message.content, pace)
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

  /** Redacts the last assistant message (the model's reply), leaving alone the text parts the stream redacted. */
  const redactReply = Effect.fnUntraced(function*(
    messages: ReadonlyArray<Prompt.Message>,
    step: number,
    threadId: string
  ) {
    let index = messages.length - 1
    while (index >= 0 && messages[index]!.role !== "assistant") index--
    const record = streamed.get(threadId)
    streamed.delete(threadId)
    if (index < 0) return messages
    const skip = record !== undefined && record.step === step - 1 ? record.texts : undefined
    const result = yield* redactAssistant(compiled, messages[index] as Prompt.AssistantMessage, skip)
    if (result.matches.length === 0) return messages
    if (strategy === "block") return yield* detected(result.matches, "output")
    yield* Middleware.report(describe(result.matches, strategy, "the model output"), countByType(result.matches))
    return [...messages.slice(0, index), result.message, ...messages.slice(index + 1)]
  })

  const afterModel = Effect.fnUntraced(function*({ messages, step, threadId }: Middleware.HookContext<{}>) {
    const replied = yield* redactReply(messages, step, threadId)
    return replied === messages ? undefined : { messages: replied }
  })

  const name = options.name ?? "pii"

  /**
   * Redacts the text parts of a streamed reply as they arrive (see
   * `PiiStream.textParts`), records the text parts it released for
   * `afterModel`, and reports what it found once the stream is over. Each
   * attempt (each run of the stream) starts afresh.
   */
  const wrapModelStream = (
    request: Middleware.ModelRequest,
    parts: Stream.Stream<Response.AnyPart, AiError.AiError>
  ): Stream.Stream<Response.AnyPart, AiError.AiError | PiiDetected | PiiDetectorFailed> =>
    Stream.suspend(() => {
      const found: Array<PiiMatch> = []
      const record = { step: request.step, texts: [] as Array<string> }
      streamed.delete(request.threadId)
      if (streamed.size >= maxStreamed) streamed.delete(streamed.keys().next().value!)
      streamed.set(request.threadId, record)
      const reported = Effect.suspend(() =>
        found.length === 0 ? Effect.void : Middleware.report(
          describe(found, strategy, "the streamed model output"),
          countByType(found)
        ).pipe(Middleware.reportingAs({ middleware: name, hook: "wrapModelStream" }))
      )
      return PiiStream.textParts(parts, {
        initial: compiled.stream.initial,
        step: streamStep(compiled, found),
        onClose: (text) => record.texts.push(text)
      }).pipe(Stream.concat(Stream.execute(reported)))
    })

  const wrapToolCall = (request: Middleware.ToolCallRequest, next: Middleware.NextToolCall) =>
    Effect.gen(function*() {
      const part = yield* next(request)
      const matches: Array<PiiMatch> = []
      const result = yield* redactValue(compiled, part.result, matches, newPace())
      if (matches.length === 0) return part
      if (strategy === "block") return yield* detected(matches, "tool_result", part.name)
      yield* Middleware.report(
        describe(matches, strategy, `the result of ${part.name}`),
        countByType(matches)
      )
      return withResult(part, result)
    })

  return Middleware.make({
    name,
    transformInput: applyToInput ? transformInput : undefined,
    afterModel: applyToOutput ? afterModel : undefined,
    wrapModelStream: applyToOutput ? wrapModelStream : undefined,
    wrapToolCall: applyToToolResults ? wrapToolCall : undefined
  })
})
