/**
 * The exact BPE engines behind `TokenCounter.makeTiktoken`, loaded lazily
 * (a dynamic `import` on the first count, once per process and engine).
 *
 * - `gpt-tokenizer` (the default): its `countTokens`, which counts without
 *   building the token array and keeps its own bounded merge cache;
 * - `js-tiktoken` (the fallback, and what the `engine` option may pick):
 *   js-tiktoken's ranks with a memo of the count of every pre-tokenized
 *   piece, held in an LRU.
 *
 * When gpt-tokenizer can't be loaded (a bundle that left it out, an install
 * without it), the counter logs a warning and counts with js-tiktoken: the
 * counts are the same, only slower.
 */
import * as Effect from "effect/Effect"
import { globalValue } from "effect/GlobalValue"
import type * as JsTiktoken from "js-tiktoken"
import { Lru } from "./lru.js"

/** The encodings the counters support. */
export type Encoding = "cl100k_base" | "o200k_base"

/** The libraries that can count exactly. */
export type Engine = "gpt-tokenizer" | "js-tiktoken"

/** Counts the tokens of a text, exactly as tiktoken's `encode(text).length` with special tokens counted as text. */
export interface TextEncoding {
  /** The library that counts (the fallback's when the one asked for could not be loaded). */
  readonly engine: Engine
  readonly count: (text: string) => number
}

/** What a gpt-tokenizer encoding module offers that the counter uses. */
export interface GptTokenizerApi {
  readonly countTokens: (text: string, options: { readonly disallowedSpecial: Set<string> }) => number
}

/** Where the engines come from (tests replace them to exercise the fallback). */
export interface Sources {
  readonly gptTokenizer: (encoding: Encoding) => Promise<GptTokenizerApi>
  readonly jsTiktoken: () => Promise<Pick<typeof JsTiktoken, "getEncoding">>
}

/** The real modules; the import paths are literals so that bundlers see them. */
export const sources: Sources = {
  gptTokenizer: (encoding) =>
    encoding === "cl100k_base"
      ? import("gpt-tokenizer/encoding/cl100k_base")
      : import("gpt-tokenizer/encoding/o200k_base"),
  jsTiktoken: () => import("js-tiktoken")
}

/** No special token is disallowed, so `<|endoftext|>` counts as ordinary text, as with js-tiktoken's `encode(text, [], [])`. */
const specialAsText = { disallowedSpecial: new Set<string>() }

/** A gpt-tokenizer encoding as a `TextEncoding`. */
export const fromGptTokenizer = (api: GptTokenizerApi): TextEncoding => ({
  engine: "gpt-tokenizer",
  count: (text) => api.countTokens(text, specialAsText)
})

/** Pieces longer than this are not memoized (they rarely repeat). */
const maxCachedPiece = 256
/** The most pieces the js-tiktoken memo keeps (least recently used first out). */
export const maxCachedPieces = 100_000

/**
 * Wraps a js-tiktoken encoding with an LRU memo of the token count of every
 * pre-tokenized piece. tiktoken first splits a text with its regular
 * expression and then byte-pair-encodes each piece on its own, so the count
 * of a text is the sum of the counts of its pieces, and a piece's count can
 * be remembered. The BPE merge below is js-tiktoken's own (`bytePairMerge`,
 * over its rank map keyed by comma-joined bytes), which the property tests
 * check against `encode(text).length`. If a future js-tiktoken hides the
 * rank map or the pattern, this falls back to `encode`.
 */
export const fromJsTiktoken = (tiktoken: JsTiktoken.Tiktoken, capacity: number = maxCachedPieces): TextEncoding => {
  const internals = tiktoken as unknown as { readonly patStr?: unknown; readonly rankMap?: unknown }
  if (typeof internals.patStr !== "string" || !(internals.rankMap instanceof Map)) {
    return { engine: "js-tiktoken", count: (text) => tiktoken.encode(text, [], []).length }
  }
  const ranks = internals.rankMap as Map<string, number>
  const pattern = new RegExp(internals.patStr, "gu")
  const utf8 = new TextEncoder()
  const pieces = new Lru<string, number>(capacity)
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
    if (piece.length <= maxCachedPiece) pieces.set(piece, count)
    return count
  }

  return {
    engine: "js-tiktoken",
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

/**
 * Loads `encoding` with `engine`; gpt-tokenizer falls back to js-tiktoken,
 * with a warning, when its module can't be loaded.
 */
export const load = (encoding: Encoding, engine: Engine, from: Sources): Effect.Effect<TextEncoding> => {
  const jsTiktoken = Effect.promise(() => from.jsTiktoken()).pipe(
    Effect.map((module) => fromJsTiktoken(module.getEncoding(encoding)))
  )
  if (engine === "js-tiktoken") return jsTiktoken
  return Effect.tryPromise(() => from.gptTokenizer(encoding)).pipe(
    Effect.map(fromGptTokenizer),
    Effect.catchAll((error) =>
      Effect.zipRight(
        Effect.logWarning("TokenCounter: gpt-tokenizer could not be loaded; counting with js-tiktoken").pipe(
          Effect.annotateLogs("error", String(error.cause))
        ),
        jsTiktoken
      )
    )
  )
}

/** Encodings load once per process and engine, the first time a count needs them (concurrent first counts wait for the one load). */
const loading = globalValue(
  Symbol.for("@stepwise-agent/core/TokenCounter/encodings"),
  () => new Map<string, Effect.Effect<TextEncoding>>()
)

/**
 * The encodings loaded so far: once an encoding is here, a count gets it with
 * one map lookup (going through the cached load again costs tens of µs per
 * count).
 */
const loaded = globalValue(
  Symbol.for("@stepwise-agent/core/TokenCounter/loadedEncodings"),
  () => new Map<string, TextEncoding>()
)

/** The encoding, loaded on the first run and shared by every counter after it. */
export const get = (encoding: Encoding, engine: Engine): Effect.Effect<TextEncoding> =>
  Effect.suspend(() => {
    const key = `${engine}/${encoding}`
    const ready = loaded.get(key)
    if (ready !== undefined) return Effect.succeed(ready)
    let pending = loading.get(key)
    if (pending === undefined) {
      pending = Effect.runSync(Effect.cached(
        Effect.tap(load(encoding, engine, sources), (text) =>
          Effect.sync(() => {
            loaded.set(key, text)
          }))
      ))
      loading.set(key, pending)
    }
    return pending
  })
