/**
 * Token counting for budgets and context edits.
 *
 * A `TokenCounter` counts the tokens of `Prompt` messages. Three layers:
 *
 * - {@link layerApproximate}: characters per token (default 4), counting
 *   text, reasoning, tool-call names and arguments, tool results and the
 *   system message, plus a small overhead per message;
 * - {@link layerTiktoken}: exact BPE counts with js-tiktoken's
 *   `cl100k_base` or `o200k_base` ranks, loaded once and lazily (on the first
 *   count, not when the layer is built);
 * - {@link layerModel}: a provider's `Tokenizer` from `@effect/ai`.
 *
 * Counts are additive and cached by identity: a message counts as a
 * per-message overhead plus the sum of its parts, and the count of every
 * part and message object is kept in a `WeakMap`. Counting a growing history
 * again only counts the messages that are new; the others cost one map
 * lookup each.
 *
 * A counter can be calibrated against the input tokens a model reported
 * ({@link TokenCounter.Service.calibrate}): the counts are then multiplied by
 * the ratio of reported to counted tokens.
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import * as Prompt from "@effect/ai/Prompt"
import * as Tokenizer from "@effect/ai/Tokenizer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { globalValue } from "effect/GlobalValue"
import * as Layer from "effect/Layer"
import type * as JsTiktoken from "js-tiktoken"
import { InvalidOptions } from "./AgentError.js"
import { unknownKey } from "./internal/options.js"

/**
 * How a counter counts.
 *
 * @since 0.1.0
 * @category models
 */
export type Method = "approximate" | "tiktoken" | "model"

/**
 * Something a counter counts: a message, or one part of a message.
 *
 * @since 0.1.0
 * @category models
 */
export type Countable = Prompt.Message | Prompt.Part

/**
 * The js-tiktoken encodings {@link layerTiktoken} supports.
 *
 * @since 0.1.0
 * @category models
 */
export type Encoding = "cl100k_base" | "o200k_base"

/**
 * Counts tokens of messages.
 *
 * @since 0.1.0
 * @category tags
 */
export class TokenCounter extends Context.Tag("@stepwise-agent/core/TokenCounter")<
  TokenCounter,
  TokenCounter.Service
>() {}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace TokenCounter {
  /**
   * A token counter.
   *
   * "Raw" counts are the counter's own, uncalibrated ones. They are additive:
   * the raw count of a message is a per-message overhead plus the raw counts
   * of its parts (a system message: the overhead plus its text), and the raw
   * count of messages is the sum of theirs. `count` and `countMessage` apply
   * the calibration scale (1 until {@link Service.calibrate} is called) and
   * round.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    readonly method: Method
    /** Tokens of the messages: the scale times the sum of their raw counts, rounded. */
    readonly count: (messages: ReadonlyArray<Prompt.Message>) => Effect.Effect<number>
    /** Tokens of one message: the scale times its raw count, rounded. */
    readonly countMessage: (message: Prompt.Message) => Effect.Effect<number>
    /** Raw tokens of a text (not cached by identity). */
    readonly countText: (text: string) => Effect.Effect<number>
    /**
     * Raw tokens of each message or part, in order, in one effect. Every
     * result is cached by object identity. This is the building block of
     * context edits: they measure the parts they would replace and the parts
     * they would put in their place.
     */
    readonly measure: (items: ReadonlyArray<Countable>) => Effect.Effect<ReadonlyArray<number>>
    /** The calibration scale applied by `count` and `countMessage`. */
    readonly scale: Effect.Effect<number>
    /**
     * Calibrates the counter against the input tokens a model reported for
     * `messages` (pass exactly what the model received, system message
     * included). The scale becomes the sum of all reported input tokens over
     * the sum of the raw counts of the calibrated requests, a cumulative ratio
     * that steadies as observations add up. It absorbs what the counter does
     * not see (the provider's message framing, tool definitions). A report
     * that is not a positive finite number, or messages that count 0, change
     * nothing. Returns the new scale.
     */
    readonly calibrate: (reportedInputTokens: number, messages: ReadonlyArray<Prompt.Message>) => Effect.Effect<number>
  }
}

// ---------------------------------------------------------------------------
// what a part says
// ---------------------------------------------------------------------------

/** The tokens a file that is not text counts as (OpenAI's base cost of a low-detail image). */
const fileTokens = 85

const stringify = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value)
  try {
    const json = JSON.stringify(value)
    return json === undefined ? String(value) : json
  } catch {
    return String(value)
  }
}

const isTextFile = (part: Prompt.FilePart): part is Prompt.FilePart & { readonly data: string } =>
  typeof part.data === "string" &&
  (part.mediaType.startsWith("text/") || part.mediaType === "application/json")

/** The strings a part puts in front of the model. */
const textsOf = (part: Prompt.Part): ReadonlyArray<string> => {
  switch (part.type) {
    case "text":
    case "reasoning":
      return [part.text]
    case "tool-call":
      return [part.name, stringify(part.params)]
    case "tool-result":
      return [part.name, stringify(part.result)]
    case "file":
      return isTextFile(part)
        ? [part.fileName ?? "", part.mediaType, part.data]
        : [part.fileName ?? "", part.mediaType]
  }
}

const fixedTokensOf = (part: Prompt.Part): number => part.type === "file" && !isTextFile(part) ? fileTokens : 0

// ---------------------------------------------------------------------------
// the shared machinery: caching, additivity, calibration
// ---------------------------------------------------------------------------

type Role = Prompt.Message["role"]

/** How one method counts what is not cached yet. */
interface Engine {
  readonly method: Method
  /** Raw tokens of each part, or of a system message's text given as a string. */
  readonly count: (items: ReadonlyArray<Prompt.Part | string>) => Effect.Effect<ReadonlyArray<number>>
  /** The raw tokens a message adds beyond its parts. */
  readonly overhead: Effect.Effect<(role: Role) => number>
}

const sum = (counts: ReadonlyArray<number>): number => {
  let total = 0
  for (let i = 0; i < counts.length; i++) total += counts[i]!
  return total
}

const fromEngine = (engine: Engine): TokenCounter.Service => {
  const cache = new WeakMap<object, number>()
  let scale = 1
  let reportedTotal = 0
  let rawTotal = 0

  const measure = (items: ReadonlyArray<Countable>): Effect.Effect<ReadonlyArray<number>> =>
    Effect.suspend(() => {
      const out = new Array<number>(items.length)
      let missing: Array<number> | undefined
      for (let i = 0; i < items.length; i++) {
        const cached = cache.get(items[i]!)
        if (cached === undefined) (missing ??= []).push(i)
        else out[i] = cached
      }
      if (missing === undefined) return Effect.succeed(out)
      // Collect the parts (and system texts) that nobody counted yet.
      const todo: Array<Prompt.Part | string> = []
      const seen = new Set<Prompt.Part>()
      const systemAt = new Map<number, number>()
      for (const i of missing) {
        const item = items[i]!
        if (Prompt.isMessage(item)) {
          if (item.role === "system") {
            systemAt.set(i, todo.length)
            todo.push(item.content)
          } else {
            for (const part of item.content) {
              if (!cache.has(part) && !seen.has(part)) {
                seen.add(part)
                todo.push(part)
              }
            }
          }
        } else if (!seen.has(item)) {
          seen.add(item)
          todo.push(item)
        }
      }
      const counted = todo.length === 0 ? Effect.succeed<ReadonlyArray<number>>([]) : engine.count(todo)
      return Effect.zipWith(counted, engine.overhead, (counts, overhead) => {
        for (let j = 0; j < todo.length; j++) {
          const item = todo[j]!
          if (typeof item !== "string") cache.set(item, counts[j]!)
        }
        for (const i of missing) {
          const item = items[i]!
          let raw: number
          if (Prompt.isMessage(item)) {
            if (item.role === "system") {
              raw = overhead("system") + counts[systemAt.get(i)!]!
            } else {
              raw = overhead(item.role)
              for (const part of item.content) raw += cache.get(part)!
            }
          } else {
            raw = cache.get(item)!
          }
          cache.set(item, raw)
          out[i] = raw
        }
        return out
      })
    })

  const scaled = (raw: number): number => scale === 1 ? raw : Math.round(raw * scale)

  return TokenCounter.of({
    method: engine.method,
    count: (messages) => Effect.map(measure(messages), (counts) => scaled(sum(counts))),
    countMessage: (message) => Effect.map(measure([message]), (counts) => scaled(counts[0]!)),
    countText: (text) => Effect.map(engine.count([text]), (counts) => counts[0]!),
    measure,
    scale: Effect.sync(() => scale),
    calibrate: (reportedInputTokens, messages) =>
      Effect.map(measure(messages), (counts) => {
        const raw = sum(counts)
        if (Number.isFinite(reportedInputTokens) && reportedInputTokens > 0 && raw > 0) {
          reportedTotal += reportedInputTokens
          rawTotal += raw
          scale = reportedTotal / rawTotal
        }
        return scale
      })
  })
}

const validateCount = (
  option: string,
  value: number,
  check: (value: number) => boolean,
  expected: string
): Effect.Effect<void, InvalidOptions> =>
  check(value)
    ? Effect.void
    : Effect.fail(new InvalidOptions({ module: "TokenCounter", option, reason: `must be ${expected}, got ${value}` }))

// ---------------------------------------------------------------------------
// approximate
// ---------------------------------------------------------------------------

/**
 * Options of {@link makeApproximate} and {@link layerApproximate}.
 *
 * @since 0.1.0
 * @category models
 */
export interface ApproximateOptions {
  /** Characters per token (default 4); a positive number. */
  readonly charsPerToken?: number | undefined
  /** Tokens added per message for the provider's framing (default 3); a whole number ≥ 0. */
  readonly tokensPerMessage?: number | undefined
}

/**
 * A counter that divides characters by `charsPerToken` (rounding up, per
 * part): the text of text and reasoning parts, a tool call's name and the JSON
 * of its arguments, a tool result's name and the JSON of its result, a system
 * message's text, a file's name and media type (and its content when it is
 * text; other files count 85 tokens). Each message adds `tokensPerMessage`.
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const counter = yield* TokenCounter.makeApproximate({ charsPerToken: 4 })
 *   // 3 for the message + ceil(11 characters / 4) = 6
 *   return yield* counter.count([Prompt.makeMessage("system", { content: "Be concise." })])
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeApproximate = (
  options?: ApproximateOptions
): Effect.Effect<TokenCounter.Service, InvalidOptions> =>
  Effect.gen(function*() {
    const unknown = unknownKey("TokenCounter", options, ["charsPerToken", "tokensPerMessage"])
    if (unknown !== undefined) return yield* unknown
    const charsPerToken = options?.charsPerToken ?? 4
    const tokensPerMessage = options?.tokensPerMessage ?? 3
    yield* validateCount(
      "charsPerToken",
      charsPerToken,
      (n) => Number.isFinite(n) && n > 0,
      "a positive number"
    )
    yield* validateCount(
      "tokensPerMessage",
      tokensPerMessage,
      (n) => Number.isInteger(n) && n >= 0,
      "a whole number ≥ 0"
    )
    const countString = (text: string) => Math.ceil(text.length / charsPerToken)
    const countPart = (part: Prompt.Part) => {
      const texts = textsOf(part)
      let chars = 0
      for (let i = 0; i < texts.length; i++) chars += texts[i]!.length
      return Math.ceil(chars / charsPerToken) + fixedTokensOf(part)
    }
    const overhead = Effect.succeed((_: Role) => tokensPerMessage)
    return fromEngine({
      method: "approximate",
      count: (items) =>
        Effect.sync(() => items.map((item) => typeof item === "string" ? countString(item) : countPart(item))),
      overhead
    })
  })

/**
 * Provides the approximate counter ({@link makeApproximate}).
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 * import { Effect } from "effect"
 *
 * const program = TokenCounter.count([Prompt.makeMessage("system", { content: "Be concise." })]).pipe(
 *   Effect.provide(TokenCounter.layerApproximate())
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerApproximate = (
  options?: ApproximateOptions
): Layer.Layer<TokenCounter, InvalidOptions> => Layer.effect(TokenCounter, makeApproximate(options))

// ---------------------------------------------------------------------------
// tiktoken
// ---------------------------------------------------------------------------

/** Counts the tokens of a text, exactly as `encode(text, [], []).length` (special tokens count as text). */
interface TextEncoding {
  readonly count: (text: string) => number
}

/** Pieces longer than this are not memoized (they rarely repeat). */
const maxCachedPiece = 256
/** The piece memo is emptied when it reaches this size. */
const maxCachedPieces = 100_000

/**
 * Wraps a js-tiktoken encoding with a memo of the token count of every
 * pre-tokenized piece. tiktoken first splits a text with its regular
 * expression and then byte-pair-encodes each piece on its own, so the count
 * of a text is the sum of the counts of its pieces, and a piece's count can
 * be remembered. Prose and JSON repeat their pieces a lot: the memo makes
 * counting several times faster, and the result is identical to `encode`.
 * The BPE merge below is js-tiktoken's own (`bytePairMerge`), which the
 * property tests check against `encode(text).length`. If a future
 * js-tiktoken hides the rank map or the pattern, this falls back to `encode`.
 */
const memoized = (tiktoken: JsTiktoken.Tiktoken): TextEncoding => {
  const internals = tiktoken as unknown as { readonly patStr?: unknown; readonly rankMap?: unknown }
  if (typeof internals.patStr !== "string" || !(internals.rankMap instanceof Map)) {
    return { count: (text) => tiktoken.encode(text, [], []).length }
  }
  const ranks = internals.rankMap as Map<string, number>
  const pattern = new RegExp(internals.patStr, "gu")
  const utf8 = new TextEncoder()
  const pieces = new Map<string, number>()
  const key = (bytes: Uint8Array, start: number, end: number) => bytes.subarray(start, end).join(",")

  const bytePairCount = (bytes: Uint8Array): number => {
    // Boundaries of the current parts: part i is bytes[bounds[i], bounds[i + 1]).
    const bounds: Array<number> = []
    for (let i = 0; i <= bytes.length; i++) bounds.push(i)
    while (bounds.length > 2) {
      let minRank = -1
      let at = -1
      for (let i = 0; i < bounds.length - 2; i++) {
        const rank = ranks.get(key(bytes, bounds[i]!, bounds[i + 2]!))
        if (rank !== undefined && (minRank === -1 || rank < minRank)) {
          minRank = rank
          at = i
        }
      }
      if (at === -1) break
      bounds.splice(at + 1, 1)
    }
    let count = 0
    for (let i = 0; i < bounds.length - 1; i++) {
      if (ranks.has(key(bytes, bounds[i]!, bounds[i + 1]!))) count++
    }
    return count
  }

  const countPiece = (piece: string): number => {
    const known = pieces.get(piece)
    if (known !== undefined) return known
    const bytes = utf8.encode(piece)
    const count = bytes.length === 0
      ? 0
      : bytes.length === 1 || ranks.has(key(bytes, 0, bytes.length))
      ? 1
      : bytePairCount(bytes)
    if (piece.length <= maxCachedPiece) {
      if (pieces.size >= maxCachedPieces) pieces.clear()
      pieces.set(piece, count)
    }
    return count
  }

  return {
    count: (text) => {
      let total = 0
      pattern.lastIndex = 0
      let match: RegExpExecArray | null
      while ((match = pattern.exec(text)) !== null) {
        const piece = match[0]
        if (piece.length === 0) {
          pattern.lastIndex++
          continue
        }
        total += countPiece(piece)
      }
      return total
    }
  }
}

/** Encodings load once per process, the first time a count needs them. */
const encodings = globalValue(Symbol.for("@stepwise-agent/core/TokenCounter/encodings"), () => ({
  loaded: new Map<Encoding, TextEncoding>(),
  loading: new Map<Encoding, Promise<TextEncoding>>()
}))

const loadEncoding = (encoding: Encoding): Effect.Effect<TextEncoding> =>
  Effect.suspend(() => {
    const loaded = encodings.loaded.get(encoding)
    if (loaded !== undefined) return Effect.succeed(loaded)
    const loading = encodings.loading.get(encoding) ?? import("js-tiktoken").then((module) => {
      const result = memoized(module.getEncoding(encoding))
      encodings.loaded.set(encoding, result)
      return result
    })
    encodings.loading.set(encoding, loading)
    return Effect.promise(() => loading)
  })

/**
 * Options of {@link makeTiktoken} and {@link layerTiktoken}.
 *
 * @since 0.1.0
 * @category models
 */
export interface TiktokenOptions {
  /** `cl100k_base` (GPT-4, GPT-3.5) or `o200k_base` (GPT-4o, o-series, GPT-4.1, GPT-5). */
  readonly encoding: Encoding
}

const supportedEncodings: ReadonlyArray<string> = ["cl100k_base", "o200k_base"]

/**
 * A counter with exact BPE counts from js-tiktoken. Every string a part puts
 * in front of the model (see {@link makeApproximate}) is encoded on its own;
 * special tokens such as `<|endoftext|>` count as ordinary text; each message
 * adds 3 tokens (OpenAI's framing per message); files that are not text count
 * 85 tokens. The ranks (1–3 s to build) load once per process, on the first
 * count, not when the counter is made. Counts are memoized per
 * pre-tokenized piece, which keeps them exact and makes them several times
 * faster than `encode`.
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const counter = yield* TokenCounter.makeTiktoken({ encoding: "o200k_base" })
 *   return yield* counter.countText("hello world")
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeTiktoken = (
  options: TiktokenOptions
): Effect.Effect<TokenCounter.Service, InvalidOptions> =>
  Effect.suspend(() => {
    const unknown = unknownKey("TokenCounter", options, ["encoding"])
    if (unknown !== undefined) return Effect.fail(unknown)
    if (!supportedEncodings.includes(options?.encoding)) {
      return Effect.fail(
        new InvalidOptions({
          module: "TokenCounter",
          option: "encoding",
          reason: `must be one of ${supportedEncodings.join(", ")}, got ${String(options?.encoding)}`
        })
      )
    }
    const encoding = loadEncoding(options.encoding)
    const overhead = Effect.succeed((_: Role) => 3)
    return Effect.succeed(fromEngine({
      method: "tiktoken",
      count: (items) =>
        Effect.map(encoding, (encoder) =>
          items.map((item) => {
            if (typeof item === "string") return encoder.count(item)
            const texts = textsOf(item)
            let tokens = fixedTokensOf(item)
            for (let i = 0; i < texts.length; i++) tokens += encoder.count(texts[i]!)
            return tokens
          })),
      overhead
    }))
  })

/**
 * Provides the js-tiktoken counter ({@link makeTiktoken}).
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 *
 * const CounterLive = TokenCounter.layerTiktoken({ encoding: "cl100k_base" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerTiktoken = (options: TiktokenOptions): Layer.Layer<TokenCounter, InvalidOptions> =>
  Layer.effect(TokenCounter, makeTiktoken(options))

// ---------------------------------------------------------------------------
// a provider's tokenizer
// ---------------------------------------------------------------------------

const roles: ReadonlyArray<Role> = ["system", "user", "assistant", "tool"]

const roleOf = (part: Prompt.Part): Role => {
  switch (part.type) {
    case "text":
    case "file":
      return "user"
    case "reasoning":
    case "tool-call":
      return "assistant"
    case "tool-result":
      return "tool"
  }
}

const emptyMessage = (role: Role): Prompt.Message =>
  role === "system" ? Prompt.makeMessage("system", { content: "" }) : Prompt.makeMessage(role, { content: [] })

/**
 * A counter that asks a provider's `Tokenizer` (for example
 * `OpenAiTokenizer.layer({ model })` from `@effect/ai-openai`). Each part is
 * tokenized as a message of its own; the tokens of an empty message of the
 * same role are its overhead, so counts stay additive. When the tokenizer
 * fails, the counter logs a warning and counts those parts approximately
 * (4 characters per token) rather than failing the model call.
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 * import { Tokenizer } from "@effect/ai"
 * import { Effect } from "effect"
 *
 * const words = Tokenizer.make({
 *   tokenize: (prompt) => Effect.succeed(JSON.stringify(prompt.content).split(/\s+/).map((_, i) => i))
 * })
 * const program = Effect.flatMap(TokenCounter.makeModel, (counter) => counter.countText("a b c")).pipe(
 *   Effect.provideService(Tokenizer.Tokenizer, words)
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeModel: Effect.Effect<TokenCounter.Service, never, Tokenizer.Tokenizer> = Effect.gen(function*() {
  const tokenizer = yield* Tokenizer.Tokenizer
  const fallback = (item: Prompt.Part | string) => {
    if (typeof item === "string") return Math.ceil(item.length / 4)
    let chars = 0
    for (const text of textsOf(item)) chars += text.length
    return Math.ceil(chars / 4) + fixedTokensOf(item)
  }
  const warn = (error: AiError.AiError) =>
    Effect.logWarning("TokenCounter: the model's tokenizer failed; counting approximately").pipe(
      Effect.annotateLogs("error", error.message)
    )
  const tokens = (message: Prompt.Message) =>
    Effect.map(tokenizer.tokenize(Prompt.fromMessages([message])), (ids) => ids.length)
  let overheads: Record<Role, number> | undefined
  const overhead = Effect.suspend(() => {
    if (overheads !== undefined) return Effect.succeed(overheads)
    return Effect.forEach(roles, (role) => tokens(emptyMessage(role))).pipe(
      Effect.map(([system, user, assistant, tool]) => ({
        system: system!,
        user: user!,
        assistant: assistant!,
        tool: tool!
      })),
      Effect.catchAll((error) => Effect.as(warn(error), { system: 3, user: 3, assistant: 3, tool: 3 })),
      Effect.tap((value) =>
        Effect.sync(() => {
          overheads = value
        })
      )
    )
  }).pipe(Effect.map((table) => (role: Role) => table[role]))
  return fromEngine({
    method: "model",
    count: (items) =>
      Effect.flatMap(overhead, (overheadOf) =>
        Effect.forEach(items, (item) => {
          const role = typeof item === "string" ? "system" : roleOf(item)
          const message = typeof item === "string"
            ? Prompt.makeMessage("system", { content: item })
            : Prompt.makeMessage(role as "user", { content: [item as Prompt.UserMessagePart] })
          return tokens(message).pipe(
            Effect.map((n) => Math.max(0, n - overheadOf(role))),
            Effect.catchAll((error) => Effect.as(warn(error), fallback(item)))
          )
        })),
    overhead
  })
})

/**
 * Provides the counter of the `Tokenizer` in context ({@link makeModel}).
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 * import { Tokenizer } from "@effect/ai"
 * import { Effect, Layer } from "effect"
 *
 * const TokenizerLive = Layer.succeed(
 *   Tokenizer.Tokenizer,
 *   Tokenizer.make({ tokenize: (prompt) => Effect.succeed(Array.from(JSON.stringify(prompt.content), (_, i) => i)) })
 * )
 * const CounterLive = TokenCounter.layerModel.pipe(Layer.provide(TokenizerLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerModel: Layer.Layer<TokenCounter, never, Tokenizer.Tokenizer> = Layer.effect(TokenCounter, makeModel)

// ---------------------------------------------------------------------------
// accessors
// ---------------------------------------------------------------------------

/**
 * Counts the tokens of messages with the `TokenCounter` in context.
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 *
 * const tokens = TokenCounter.count([Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "hi" })] })])
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const count = (messages: ReadonlyArray<Prompt.Message>): Effect.Effect<number, never, TokenCounter> =>
  Effect.flatMap(TokenCounter, (counter) => counter.count(messages))

/**
 * Calibrates the `TokenCounter` in context against a model's reported input
 * tokens (see {@link TokenCounter.Service.calibrate}).
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 *
 * const messages = [Prompt.makeMessage("system", { content: "Be concise." })]
 * const scale = TokenCounter.calibrate(12, messages)
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const calibrate = (
  reportedInputTokens: number,
  messages: ReadonlyArray<Prompt.Message>
): Effect.Effect<number, never, TokenCounter> =>
  Effect.flatMap(TokenCounter, (counter) => counter.calibrate(reportedInputTokens, messages))
