/**
 * Token counting for budgets and context edits.
 *
 * A `TokenCounter` counts the tokens of `Prompt` messages. Three layers:
 *
 * - {@link layerApproximate}: the counts of LangChain Python's
 *   `count_tokens_approximately` (characters of content, role, tool calls,
 *   ids and names over 4, rounded up per message, plus 3 per message);
 * - {@link layerTiktoken}: exact BPE counts (tiktoken's) of `cl100k_base` or
 *   `o200k_base`, with gpt-tokenizer (or js-tiktoken, its fallback), loaded
 *   once and lazily (on the first count, not when the layer is built or the
 *   module imported);
 * - {@link layerTokenizer}: a provider's `Tokenizer` from `@effect/ai`.
 *
 * Counts of messages are additive: a list counts the sum of its messages.
 * For the exact and tokenizer counters a message also counts a per-message
 * overhead plus the sum of its parts (the approximate counter rounds a user
 * or assistant message up as a whole, as LangChain does). The exact and
 * tokenizer counters keep the count of every part and message object in a
 * `WeakMap`, so counting a growing history again only counts the messages
 * that are new; the others cost one map lookup each. The approximate counter
 * keeps nothing per message: counting one again costs a few field reads, less
 * than a lookup would (it remembers only the length of long tool arguments
 * and results, per payload object).
 *
 * A counter can be calibrated against the input tokens a model reported
 * ({@link Service.calibrate}): the counts are then multiplied by
 * the ratio of reported to counted tokens.
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import * as Prompt from "@effect/ai/Prompt"
import * as Tokenizer from "@effect/ai/Tokenizer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { InvalidOptions } from "./AgentError.js"
import * as Encodings from "./internal/fast/encodings.js"
import * as Field from "./internal/fast/fieldRead.js"
import * as IdentityTable from "./internal/fast/identityTable.js"
import { jsonLength } from "./internal/fast/jsonLength.js"
import * as PythonRepr from "./internal/fast/pythonRepr.js"
import { describeValue, unknownKey } from "./internal/options.js"

/**
 * How a counter counts.
 *
 * @since 0.1.0
 * @category models
 */
export type Method = "approximate" | "tiktoken" | "tokenizer"

/**
 * Something a counter counts: a message, or one part of a message.
 *
 * @since 0.1.0
 * @category models
 */
export type Countable = Prompt.Message | Prompt.Part

/**
 * The encodings {@link layerTiktoken} supports.
 *
 * @example
 * ```ts
 * import type { TokenCounter } from "@stepwise-agent/core"
 *
 * const encoding: TokenCounter.Encoding = "o200k_base"
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Encoding = Encodings.Encoding

/**
 * The library {@link makeTiktoken} counts with. Both count exactly what
 * js-tiktoken's `encode(text, [], []).length` counts (special tokens as
 * text). OpenAI's own tiktoken (Rust) differs from both on two characters:
 * its pattern's `\s` is Unicode's White_Space, which has U+0085 and not
 * U+FEFF, while JavaScript's `\s` has U+FEFF and not U+0085, so a run of
 * spaces next to one of them splits differently (`" \ufeffx"`: 3 tokens
 * here, 2 in Rust tiktoken).
 *
 * - `"gpt-tokenizer"` (the default): faster, several MB/s on text never seen
 *   before. The counter reads gpt-tokenizer's split pattern and ranks and
 *   merges pieces itself (faster than gpt-tokenizer's own `countTokens`); if
 *   the installed version doesn't have those internals, or they count a
 *   probe text differently, it calls `countTokens` (which caches nothing
 *   here, and overcounts tokens that start with U+FEFF). If the module can't
 *   be loaded (an install or a bundle without it), the counter logs a warning
 *   and counts with js-tiktoken.
 * - `"js-tiktoken"`: js-tiktoken's ranks. Slower on new text.
 *
 * Except in the `countTokens` fallback, each counter keeps the count of each
 * piece of up to 256 characters it met (a piece is what tiktoken's pattern
 * splits a text into, a word or a run of spaces) in an LRU of its own, up to
 * 100,000 pieces.
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 *
 * const CounterLive = TokenCounter.layerTiktoken({ encoding: "cl100k_base", engine: "js-tiktoken" })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type TiktokenEngine = Encodings.Engine

/**
 * Counts tokens of messages.
 *
 * @since 0.1.0
 * @category tags
 */
export class TokenCounter extends Context.Tag("@stepwise-agent/core/TokenCounter")<
  TokenCounter,
  Service
>() {}

/**
 * A token counter.
 *
 * "Raw" counts are the counter's own, uncalibrated ones. The raw count of
 * messages is the sum of theirs. For the exact and tokenizer counters, the
 * raw count of a message is a per-message overhead plus the raw counts of
 * its parts (a system message: the overhead plus its text); the
 * approximate counter rounds a user or assistant message up as a whole
 * (see {@link makeApproximate}), and a tool message counts the sum of its
 * results. `count` and `countMessage` apply
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
   * Raw tokens of each message or part, in order, in one effect (the exact
   * and tokenizer counters cache every result by object identity). This is
   * the building block of context edits: they measure the parts they would
   * replace and the parts they would put in their place.
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

/**
 * The tokens of the strings a part puts in front of the model, each counted
 * with `count` (what the exact counters encode), plus its fixed tokens.
 */
const encodedTokensOf = (part: Prompt.Part, count: (text: string) => number): number => {
  switch (part.type) {
    case "text":
    case "reasoning":
      return count(part.text)
    case "tool-call":
      return count(part.name) + count(stringify(part.params))
    case "tool-result":
      return count(part.name) + count(stringify(part.result))
    case "file":
      return count(part.fileName ?? "") + count(part.mediaType) +
        (isTextFile(part) ? count(part.data) : fileTokens)
  }
}

/**
 * The characters of the strings of {@link encodedTokensOf}, measured without building
 * them: a tool call's arguments and a tool result count the length of their
 * JSON as if no character needed escaping (`json`, {@link jsonLength} unless
 * the counter remembers long payloads).
 */
const charsOf = (part: Prompt.Part, json: (value: unknown) => number = jsonLength): number => {
  switch (part.type) {
    case "text":
    case "reasoning":
      return part.text.length
    case "tool-call":
      return part.name.length + json(part.params)
    case "tool-result":
      return part.name.length + json(part.result)
    case "file":
      return (part.fileName ?? "").length + part.mediaType.length + (isTextFile(part) ? part.data.length : 0)
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

/**
 * A counter over its `measure` (raw counts, in order): the totals, the
 * calibration scale and its update.
 */
const fromMeasure = (
  method: Method,
  measure: Service["measure"],
  countText: Service["countText"]
): Service => {
  let scale = 1
  let reportedTotal = 0
  let rawTotal = 0
  const scaled = (raw: number): number => scale === 1 ? raw : Math.round(raw * scale)
  return TokenCounter.of({
    method,
    count: (messages) => Effect.map(measure(messages), (counts) => scaled(sum(counts))),
    countMessage: (message) => Effect.map(measure([message]), (counts) => scaled(counts[0]!)),
    countText,
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

/**
 * A counter that keeps the count of every part and message object it counted with `engine`
 * (`fast/identityTable.ts`).
 */
const fromEngine = (engine: Engine): Service => {
  const cache = IdentityTable.make<object, number>()

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
              if (cache.get(part) === undefined && !seen.has(part)) {
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
        // the parts counted now (the cache may not keep them)
        const fresh = new Map<object, number>()
        for (let j = 0; j < todo.length; j++) {
          const item = todo[j]!
          if (typeof item !== "string") {
            fresh.set(item, counts[j]!)
            cache.set(item, counts[j]!)
          }
        }
        const countOf = (item: object) => fresh.get(item) ?? cache.get(item)!
        for (const i of missing) {
          const item = items[i]!
          let raw: number
          if (Prompt.isMessage(item)) {
            if (item.role === "system") {
              raw = overhead("system") + counts[systemAt.get(i)!]!
            } else {
              raw = overhead(item.role)
              for (const part of item.content) raw += countOf(part)
            }
          } else {
            raw = countOf(item)
          }
          cache.set(item, raw)
          out[i] = raw
        }
        return out
      })
    })

  return fromMeasure(engine.method, measure, (text) => Effect.map(engine.count([text]), (counts) => counts[0]!))
}

const validateCount = (
  option: string,
  value: number,
  check: (value: number) => boolean,
  expected: string
): Effect.Effect<void, InvalidOptions> =>
  check(value)
    ? Effect.void
    : Effect.fail(
      new InvalidOptions({ module: "TokenCounter", option, reason: `must be ${expected}, got ${describeValue(value)}` })
    )

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
 * A counter that gives the counts of LangChain Python's
 * `count_tokens_approximately` (langchain-core, `chars_per_token` 4.0 and
 * `extra_tokens_per_message` 3.0 by default), so a trigger ported from
 * LangChain fires at the same point. Per LangChain message: its characters
 * divided by `charsPerToken`, rounded up, plus `tokensPerMessage`. The
 * characters of a message are its content, its role (`system` 6, `user` 4,
 * `assistant` 9, `tool` 4) and:
 *
 * - an assistant message: its tool calls as Python prints the list of
 *   LangChain tool calls (`[{'name': 'search', 'args': {'q': 'x'}, 'id':
 *   'c1', 'type': 'tool_call'}]`), when it has some;
 * - a tool result: the call's id and the tool's name. Each tool result counts
 *   as a message of its own (a LangChain `ToolMessage`), so a tool message
 *   with two results counts two messages.
 *
 * The content of a message is the text of its text and reasoning parts (one
 * string, as LangChain's string content), and a tool result's value when it is
 * a string, else the length of its JSON (as if no character needed escaping).
 * Files, which LangChain's function does not count, add their name and media
 * type, and their content when it is text; other files count 85 tokens.
 *
 * User and assistant messages are rounded up once, as a whole, so their
 * count is not the sum of the counts `measure` gives their parts (a text or
 * tool-call part alone: its characters over `charsPerToken`, rounded up); a
 * tool message's is (each result is a message of its own).
 *
 * @example
 * ```ts
 * import { TokenCounter } from "@stepwise-agent/core"
 * import { Prompt } from "@effect/ai"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const counter = yield* TokenCounter.makeApproximate({ charsPerToken: 4 })
 *   // ceil((11 characters + 6 for "system") / 4) + 3 = 8
 *   return yield* counter.count([Prompt.makeMessage("system", { content: "Be concise." })])
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeApproximate = (
  options?: ApproximateOptions
): Effect.Effect<Service, InvalidOptions> =>
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
    return approximate(charsPerToken, tokensPerMessage)
  })

/**
 * Payloads (a tool call's arguments, a tool result) whose JSON or repr is at
 * least this long have their length remembered by the approximate counter; a
 * shorter one costs less to measure again than to look up.
 */
const rememberedPayload = 1024

/** The characters LangChain counts for a message's role. */
const roleChars = { system: 6, user: 4, assistant: 9, tool: 4 } as const

/**
 * The approximate counter. Counting a part costs a few field reads (and a
 * walk of its payload), less than keeping its count by identity would, so it
 * keeps only the length of long payloads, per payload object
 * (`fast/identityTable.ts`). It reads each
 * field it needs once, as a keyed read with a read site per field (`Field`:
 * `@effect/ai`'s messages may each have a hidden class of their own), and a tool message's
 * parts without their type (a tool message holds only tool results).
 */
const approximate = (charsPerToken: number, tokensPerMessage: number): Service => {
  const remember = (measure: (value: unknown) => number) => {
    const lengths = IdentityTable.make<object, number>()
    return (value: unknown): number => {
      if (typeof value !== "object" || value === null) return measure(value)
      const known = lengths.get(value)
      if (known !== undefined) return known
      const chars = measure(value)
      if (chars >= rememberedPayload) lengths.set(value, chars)
      return chars
    }
  }
  const jsonChars = remember(jsonLength)
  const reprChars = remember(PythonRepr.reprLength)
  const tokens = (chars: number) => Math.ceil(chars / charsPerToken)
  /** A tool result as a LangChain `ToolMessage`: content, id, role and name. */
  const countResult = (part: Prompt.ToolResultPart): number => {
    const result = Field.result(part)
    const content = typeof result === "string" ? result.length : jsonChars(result)
    return tokens(content + Field.id(part).length + roleChars.tool + Field.name(part).length) +
      tokensPerMessage
  }
  /**
   * What a part other than a tool result adds to the characters of its user or assistant message (a tool
   * call: its repr and `, `), given its type.
   */
  const charsOfPart = (part: Prompt.Part, type: Exclude<Prompt.Part["type"], "tool-result">): number => {
    switch (type) {
      case "text":
      case "reasoning":
        return Field.text(part as Prompt.TextPart | Prompt.ReasoningPart).length
      case "tool-call": {
        const call = part as Prompt.ToolCallPart
        return PythonRepr.toolCallReprLength(Field.name(call), reprChars(Field.params(call)), Field.id(call)) +
          2
      }
      case "file":
        return charsOf(part, jsonChars)
    }
  }
  const countPart = (part: Prompt.Part): number => {
    const type = Field.type(part)
    return type === "tool-result"
      ? countResult(part as Prompt.ToolResultPart)
      : tokens(charsOfPart(part, type)) + (type === "file" ? fixedTokensOf(part) : 0)
  }
  const countItem = (item: Countable): number => {
    // A message has a role and a part has none.
    const role: Role | undefined = Field.role(item as Partial<Prompt.Message>)
    if (role === undefined) return countPart(item as Prompt.Part)
    const content = Field.content(item as Prompt.Message)
    if (role === "system") return tokens((content as string).length + roleChars.system) + tokensPerMessage
    const parts = content as ReadonlyArray<Prompt.Part>
    if (role === "tool") {
      let raw = 0
      for (let i = 0; i < parts.length; i++) raw += countResult(parts[i] as Prompt.ToolResultPart)
      return raw
    }
    // One LangChain message; its tool calls count `[`, `]` and a `, ` between each two: 2 per call.
    let chars: number = roleChars[role]
    let extra = tokensPerMessage
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!
      const type = Field.type(part)
      if (type === "tool-result") {
        extra += countResult(part as Prompt.ToolResultPart)
      } else {
        chars += charsOfPart(part, type)
        if (type === "file") extra += fixedTokensOf(part)
      }
    }
    return tokens(chars) + extra
  }
  return fromMeasure(
    "approximate",
    (items) =>
      Effect.sync(() => {
        const out = new Array<number>(items.length)
        for (let i = 0; i < items.length; i++) out[i] = countItem(items[i]!)
        return out
      }),
    (text) => Effect.sync(() => tokens(text.length))
  )
}

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

/**
 * Options of {@link makeTiktoken} and {@link layerTiktoken}.
 *
 * @since 0.1.0
 * @category models
 */
export interface TiktokenOptions {
  /** `cl100k_base` (GPT-4, GPT-3.5) or `o200k_base` (GPT-4o, o-series, GPT-4.1, GPT-5). */
  readonly encoding: Encoding
  /** The library that counts (default `"gpt-tokenizer"`); see {@link TiktokenEngine}. */
  readonly engine?: TiktokenEngine | undefined
}

const supportedEncodings: ReadonlyArray<string> = ["cl100k_base", "o200k_base"]
const supportedEngines: ReadonlyArray<string> = ["gpt-tokenizer", "js-tiktoken"]

const oneOf = (option: string, supported: ReadonlyArray<string>, value: unknown): InvalidOptions | undefined =>
  supported.includes(value as string) ? undefined : new InvalidOptions({
    module: "TokenCounter",
    option,
    reason: `must be one of ${supported.join(", ")}, got ${
      typeof value === "string" ? value.slice(0, 80) : describeValue(value)
    }`
  })

/**
 * A counter with exact BPE counts, the same as js-tiktoken's
 * `encode(text, [], []).length` (see {@link TiktokenEngine} for the two
 * characters on which OpenAI's Rust tiktoken differs). Every string a part puts in front of the model (see
 * {@link makeApproximate}; a tool call's arguments and a tool result as JSON)
 * is encoded on its own; special tokens such as `<|endoftext|>` count as
 * ordinary text; each message adds 3 tokens (OpenAI's framing per message);
 * files that are not text count 85 tokens. The library that counts is
 * gpt-tokenizer unless `engine` says `"js-tiktoken"` (see
 * {@link TiktokenEngine}); it loads once per process with a dynamic `import`,
 * on the first count, not when the counter is made, so a program that never
 * counts exactly never loads it.
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
): Effect.Effect<Service, InvalidOptions> =>
  Effect.suspend(() => {
    const invalid = unknownKey("TokenCounter", options, ["encoding", "engine"]) ??
      oneOf("encoding", supportedEncodings, options?.encoding) ??
      oneOf("engine", supportedEngines, options?.engine ?? "gpt-tokenizer")
    if (invalid !== undefined) return Effect.fail(invalid)
    const encoding = Encodings.get(options.encoding, options.engine ?? "gpt-tokenizer")
    const overhead = Effect.succeed((_: Role) => 3)
    // This counter's own counting function (and memo of pieces), made on the first count.
    let count: ((text: string) => number) | undefined
    const counting = Effect.suspend(() =>
      count !== undefined ? Effect.succeed(count) : Effect.map(encoding, (text) => (count ??= text.counter()))
    )
    return Effect.succeed(fromEngine({
      method: "tiktoken",
      count: (items) =>
        Effect.map(counting, (count) => {
          const counts = new Array<number>(items.length)
          for (let i = 0; i < items.length; i++) {
            const item = items[i]!
            counts[i] = typeof item === "string" ? count(item) : encodedTokensOf(item, count)
          }
          return counts
        }),
      overhead
    }))
  })

/**
 * Provides the exact counter ({@link makeTiktoken}).
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
 * const program = Effect.flatMap(TokenCounter.makeTokenizer, (counter) => counter.countText("a b c")).pipe(
 *   Effect.provideService(Tokenizer.Tokenizer, words)
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeTokenizer: Effect.Effect<Service, never, Tokenizer.Tokenizer> = Effect.gen(function*() {
  const tokenizer = yield* Tokenizer.Tokenizer
  const fallback = (item: Prompt.Part | string) => {
    if (typeof item === "string") return Math.ceil(item.length / 4)
    return Math.ceil(charsOf(item) / 4) + fixedTokensOf(item)
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
    method: "tokenizer",
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
 * Provides the counter of the `Tokenizer` in context ({@link makeTokenizer}).
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
 * const CounterLive = TokenCounter.layerTokenizer.pipe(Layer.provide(TokenizerLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerTokenizer: Layer.Layer<TokenCounter, never, Tokenizer.Tokenizer> = Layer.effect(
  TokenCounter,
  makeTokenizer
)

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
 * tokens (see {@link Service.calibrate}).
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
