/**
 * The exact BPE engines behind `TokenCounter.makeTiktoken`, loaded lazily
 * (a dynamic `import` on the first count, once per process and engine).
 *
 * - `gpt-tokenizer` (the default): its split pattern and ranks, with our own
 *   merge ({@link fastGptTokenizer}) and, on ASCII text, a hand-written
 *   splitter (`asciiSplit.ts`); this module is the only one that reads
 *   gpt-tokenizer's internals, and when they are not there or count a probe
 *   text differently from its public `countTokens`, `countTokens` counts;
 * - `js-tiktoken` (the fallback, and what the `engine` option may pick):
 *   js-tiktoken's ranks and merge.
 *
 * Each counter (`TextEncoding.counter`) keeps the count of the pieces it
 * met in an LRU of its own.
 *
 * When gpt-tokenizer can't be loaded (a bundle that left it out, an install
 * without it), the counter logs a warning and counts with js-tiktoken: the
 * counts are the same, only slower.
 */
import * as Effect from "effect/Effect"
import { globalValue } from "effect/GlobalValue"
import type * as JsTiktoken from "js-tiktoken"
import { asciiSplitter } from "./asciiSplit.js"
import { Lru } from "./lru.js"

/** The encodings the counters support. */
export type Encoding = "cl100k_base" | "o200k_base"

/** The libraries that can count exactly. */
export type Engine = "gpt-tokenizer" | "js-tiktoken"

/**
 * Counts the tokens of a text, exactly as tiktoken's `encode(text).length`
 * with special tokens counted as text.
 */
export interface TextEncoding {
  /** The library that counts (the fallback's when the one asked for could not be loaded). */
  readonly engine: Engine
  /**
   * A new counting function with its own LRU memo of the count of each
   * pre-tokenized piece (one per counter: what one counter saw never warms
   * another).
   */
  readonly counter: () => (text: string) => number
}

/** What a gpt-tokenizer encoding module offers that the counter uses. */
export interface GptTokenizerApi {
  readonly countTokens: (text: string, options: { readonly disallowedSpecial: Set<string> }) => number
  /** The module's `GptEncoding` instance, whose internals {@link fastGptTokenizer} reads when they look as expected. */
  readonly default?: unknown
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

/**
 * A gpt-tokenizer encoding as a `TextEncoding`: {@link fastGptTokenizer}
 * over its internals when they pass the checks, else its public
 * `countTokens`.
 */
export const fromGptTokenizer = (api: GptTokenizerApi): TextEncoding => {
  let fast: ReturnType<typeof fastGptTokenizer>
  try {
    fast = fastGptTokenizer(api)
  } catch {
    // internals of another shape than checked, or a runtime without what the fast count uses
    fast = undefined
  }
  if (fast !== undefined) return { engine: "gpt-tokenizer", counter: () => fast(new Lru(maxCachedPieces)) }
  const count = (text: string) => api.countTokens(text, specialAsText)
  return { engine: "gpt-tokenizer", counter: () => count }
}

// ---------------------------------------------------------------------------
// counting over gpt-tokenizer's internals
// ---------------------------------------------------------------------------

/** The parts of gpt-tokenizer 4's `BytePairEncodingCore` that the fast count reads. */
interface GptTokenizerCore {
  /** The pre-tokenizer: the encoding's regular expression. */
  readonly tokenSplitRegex: RegExp
  /** The rank of each token whose bytes are valid UTF-8, keyed by its text. */
  readonly bytePairStringRankEncoder: Map<string, number>
  /** The other tokens (bytes that are not valid UTF-8 on their own), as `[bytes, rank]`. */
  readonly bytePairNonUtfSortedEncoder: ReadonlyArray<readonly [Uint8Array, number]>
}

const coreOf = (api: GptTokenizerApi): GptTokenizerCore | undefined => {
  const encoding = api.default as { readonly bytePairEncodingCoreProcessor?: Partial<GptTokenizerCore> } | undefined
  const core = encoding?.bytePairEncodingCoreProcessor
  if (
    core === undefined || !(core.tokenSplitRegex instanceof RegExp) ||
    !(core.bytePairStringRankEncoder instanceof Map) || !Array.isArray(core.bytePairNonUtfSortedEncoder)
  ) return undefined
  for (const entry of core.bytePairNonUtfSortedEncoder) {
    if (!Array.isArray(entry) || !(entry[0] instanceof Uint8Array) || typeof entry[1] !== "number") return undefined
  }
  return core as GptTokenizerCore
}

/**
 * Texts whose counts the fast path must reproduce (against the public
 * `countTokens`) before it is trusted: words, contractions, digit runs,
 * whitespace and newline runs, code, CJK, emoji, a lone surrogate, a special
 * token as text, and pieces that need merging inside multi-byte characters.
 */
const probes: ReadonlyArray<string> = [
  "Hello, world! It's we'll THEY'RE 1234567 x\n\n\n  y   \t\r\n z  ",
  "export const fooBar42 = (input: ReadonlyArray<string>) => input.map((s) => s.length) // ok\n",
  "日本語のテキスト、中文文本。한국어 Привет мир café naïve 🚀👍🏽👨‍👩‍👧🇫🇷 \ud800x <|endoftext|>",
  "supercalifragilisticexpialidocious-antidisestablishmentarianism_0xDEADBEEF 鷗鷺鸞 ☃︎"
]

/** Pieces longer than this are not memoized (they rarely repeat). */
const maxCachedPiece = 256
/** The most pieces a counter's memo keeps (least recently used first out). */
export const maxCachedPieces = 100_000

/** The count of `piece`: from `pieces`, else `count`'s, kept in `pieces` when the piece is short enough. */
const memoized = (pieces: Lru<string, number>, piece: string, count: (piece: string) => number): number => {
  let known = pieces.get(piece)
  if (known === undefined) {
    known = count(piece)
    if (piece.length <= maxCachedPiece) pieces.set(piece, known)
  }
  return known
}

/** Rank of no pair: larger than every rank, and a small integer (so the rank arrays stay integer arrays). */
const noRank = 0x3fffffff

/** Pieces of more bytes than this are merged with a heap (`mergeLong`): the scan's O(n²) would keep the process. */
const longPiece = 256

/**
 * The byte-pair merge of `n` bytes in O(n log n), where the scan of every
 * pair at each step is O(n²): the parts are a linked list by byte offset and
 * the pairs' ranks (`rankOf(start, end)`, {@link noRank} for none) a heap
 * ordered by rank, then offset, so each step merges the pair the scan would
 * (the lowest rank, the leftmost of equals). An entry whose pair has changed
 * since it was pushed is skipped. Gives the offsets where the parts start.
 */
const mergeWithHeap = (n: number, rankOf: (start: number, end: number) => number): Array<number> => {
  // part `s` (a byte offset) is bytes[s, next[s]); pairRank[s]: the rank of it merged with the part after
  const next = new Int32Array(n)
  const previous = new Int32Array(n)
  const pairRank = new Int32Array(n)
  const alive = new Uint8Array(n).fill(1)
  const heap = new MinHeap(n)
  for (let s = 0; s < n; s++) {
    next[s] = s + 1
    previous[s] = s - 1
    pairRank[s] = s + 2 <= n ? rankOf(s, s + 2) : noRank
    if (pairRank[s] !== noRank) heap.push(pairRank[s]!, s)
  }
  while (heap.size > 0) {
    const rank = heap.topRank()
    const s = heap.pop()
    if (alive[s] === 0 || pairRank[s] !== rank) continue
    // merge part `s` with the one after it
    const after = next[s]!
    alive[after] = 0
    next[s] = next[after]!
    if (next[s]! < n) previous[next[s]!] = s
    pairRank[s] = next[s]! < n ? rankOf(s, next[next[s]!]!) : noRank
    if (pairRank[s] !== noRank) heap.push(pairRank[s]!, s)
    const before = previous[s]!
    if (before >= 0) {
      pairRank[before] = rankOf(before, next[s]!)
      if (pairRank[before] !== noRank) heap.push(pairRank[before]!, before)
    }
  }
  const starts: Array<number> = []
  for (let s = 0; s < n; s = next[s]!) starts.push(s)
  return starts
}

/** A binary min-heap of (rank, offset) pairs, ordered by rank, then offset. */
class MinHeap {
  private readonly ranks: Int32Array
  private readonly offsets: Int32Array
  size = 0
  constructor(capacity: number) {
    // every merge pushes at most two entries after the first n
    this.ranks = new Int32Array(capacity * 3 + 1)
    this.offsets = new Int32Array(capacity * 3 + 1)
  }
  private less(i: number, j: number): boolean {
    return this.ranks[i]! < this.ranks[j]! || (this.ranks[i] === this.ranks[j] && this.offsets[i]! < this.offsets[j]!)
  }
  private swap(i: number, j: number): void {
    const rank = this.ranks[i]!
    const offset = this.offsets[i]!
    this.ranks[i] = this.ranks[j]!
    this.offsets[i] = this.offsets[j]!
    this.ranks[j] = rank
    this.offsets[j] = offset
  }
  push(rank: number, offset: number): void {
    let i = this.size++
    this.ranks[i] = rank
    this.offsets[i] = offset
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!this.less(i, parent)) break
      this.swap(i, parent)
      i = parent
    }
  }
  topRank(): number {
    return this.ranks[0]!
  }
  /** Removes the least entry; gives its offset. */
  pop(): number {
    const top = this.offsets[0]!
    this.size--
    if (this.size > 0) {
      this.ranks[0] = this.ranks[this.size]!
      this.offsets[0] = this.offsets[this.size]!
      let i = 0
      for (;;) {
        const left = 2 * i + 1
        const right = left + 1
        let least = i
        if (left < this.size && this.less(left, least)) least = left
        if (right < this.size && this.less(right, least)) least = right
        if (least === i) break
        this.swap(i, least)
        i = least
      }
    }
    return top
  }
}

interface WellFormed {
  readonly isWellFormed: () => boolean
  readonly toWellFormed: () => string
}

/**
 * A count over gpt-tokenizer's own pre-tokenizer and ranks, with a merge
 * loop that looks ranks up without decoding bytes: a byte range that starts
 * and ends on character boundaries is a slice of the piece (a key of the
 * text ranks), any other is a partial character (a key, one char per byte,
 * of the few ranks that are not valid UTF-8). The merge is tiktoken's (the
 * pair of lowest rank first, the leftmost on a tie), and a piece that is one
 * token counts 1 without merging, as in tiktoken. Lone surrogates become
 * U+FFFD before splitting, as UTF-8 encoding makes them (neither is a
 * letter, digit or space, so the split is the same).
 *
 * Returns `undefined`, so that the public `countTokens` counts, when the
 * module does not have these internals (another gpt-tokenizer version) or
 * when the count they give differs from `countTokens` on the probes.
 */
export const fastGptTokenizer = (
  api: GptTokenizerApi
): ((pieces: Lru<string, number>) => (text: string) => number) | undefined => {
  const core = coreOf(api)
  if (core === undefined) return undefined
  const textRanks = core.bytePairStringRankEncoder
  const byteRanks = new Map<string, number>()
  // Tokens of whole characters that gpt-tokenizer files with the ranks that are not valid UTF-8: those that
  // start with U+FEFF, which its decoder drops as a byte-order mark (its own `countTokens` miscounts them).
  const wholeText = new Map<string, number>()
  const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })
  for (const [bytes, rank] of core.bytePairNonUtfSortedEncoder) {
    byteRanks.set(String.fromCharCode(...bytes), rank)
    try {
      wholeText.set(utf8.decode(bytes), rank)
    } catch {
      // a partial character: only `byteRanks` has it
    }
  }
  /** The rank of a token of whole characters. */
  const textRank = (text: string): number | undefined => textRanks.get(text) ?? wholeText.get(text)

  // Scratch space of the merge, grown as needed: the piece's UTF-8 bytes and,
  // at each byte offset, the index of the character starting there (-1 inside one).
  let bytes = new Uint8Array(256)
  let charAt = new Int32Array(257)
  const starts: Array<number> = []
  const ranks: Array<number> = []

  const rankOf = (piece: string, start: number, end: number): number => {
    const from = charAt[start]!
    const to = charAt[end]!
    let rank: number | undefined
    if (from >= 0 && to >= 0) {
      rank = textRank(piece.slice(from, to))
    } else {
      let key = ""
      for (let i = start; i < end; i++) key += String.fromCharCode(bytes[i]!)
      rank = byteRanks.get(key)
    }
    return rank === undefined ? noRank : rank
  }

  /** The tokens of a piece that is not one token (well-formed UTF-16). */
  const merge = (piece: string): number => {
    if (bytes.length < piece.length * 3) {
      bytes = new Uint8Array(piece.length * 3)
      charAt = new Int32Array(piece.length * 3 + 1)
    }
    let n = 0
    for (let i = 0; i < piece.length; i++) {
      let c = piece.charCodeAt(i)
      charAt[n] = i
      if (c < 0x80) {
        bytes[n++] = c
        continue
      }
      if (c < 0x800) {
        bytes[n++] = 0xc0 | (c >> 6)
      } else if (c >= 0xd800 && c < 0xdc00) {
        c = 0x10000 + ((c - 0xd800) << 10) + (piece.charCodeAt(++i) - 0xdc00)
        bytes[n++] = 0xf0 | (c >> 18)
        charAt[n] = -1
        bytes[n++] = 0x80 | ((c >> 12) & 0x3f)
        charAt[n] = -1
        bytes[n++] = 0x80 | ((c >> 6) & 0x3f)
      } else {
        bytes[n++] = 0xe0 | (c >> 12)
        charAt[n] = -1
        bytes[n++] = 0x80 | ((c >> 6) & 0x3f)
      }
      charAt[n] = -1
      bytes[n++] = 0x80 | (c & 0x3f)
    }
    charAt[n] = piece.length
    if (n > longPiece) return mergeLong(piece, n)
    // Part i is bytes[starts[i], starts[i + 1]); ranks[i] is the rank of parts i and i + 1 merged.
    starts.length = 0
    ranks.length = 0
    for (let i = 0; i <= n; i++) {
      starts.push(i)
      ranks.push(i + 2 <= n ? rankOf(piece, i, i + 2) : noRank)
    }
    while (starts.length > 2) {
      let lowest = noRank
      let at = -1
      for (let i = 0; i < ranks.length - 2; i++) {
        if (ranks[i]! < lowest) {
          lowest = ranks[i]!
          at = i
        }
      }
      if (at === -1) break
      starts.splice(at + 1, 1)
      ranks.splice(at + 1, 1)
      ranks[at] = at + 2 < starts.length ? rankOf(piece, starts[at]!, starts[at + 2]!) : noRank
      if (at > 0) ranks[at - 1] = rankOf(piece, starts[at - 1]!, starts[at + 1]!)
    }
    return starts.length - 1
  }

  /** The merge of {@link merge} for a piece of more than {@link longPiece} bytes (see {@link mergeWithHeap}). */
  const mergeLong = (piece: string, n: number): number =>
    mergeWithHeap(n, (start, end) => rankOf(piece, start, end)).length

  const countPiece = (piece: string): number => textRank(piece) !== undefined ? 1 : merge(piece)
  const split = new RegExp(core.tokenSplitRegex.source, "gu")
  const scan = asciiSplitter(core.tokenSplitRegex.source) ?? (() => -1)
  const counter = (pieces: Lru<string, number>) => (input: string): number => {
    const text = (input as unknown as WellFormed).isWellFormed()
      ? input
      : (input as unknown as WellFormed).toWellFormed()
    let total = 0
    let at = 0
    while (at < text.length) {
      // the piece at `at`: from the hand-written splitter, else from the regular expression
      let end = scan(text, at)
      let piece: string
      if (end >= 0) {
        piece = text.slice(at, end)
      } else {
        split.lastIndex = at
        const match = split.exec(text)
        if (match === null) break
        piece = match[0]
        end = split.lastIndex
        if (piece.length === 0) {
          at = end + 1
          continue
        }
      }
      at = end
      total += memoized(pieces, piece, countPiece)
    }
    return total
  }

  const probe = counter(new Lru(probes.length * 64))
  for (const text of probes) {
    if (probe(text) !== api.countTokens(text, specialAsText)) return undefined
  }
  return counter
}

// ---------------------------------------------------------------------------
// js-tiktoken
// ---------------------------------------------------------------------------

/**
 * Wraps a js-tiktoken encoding with an LRU memo of the token count of every
 * pre-tokenized piece (a new memo for each `counter()`, of `capacity`
 * pieces). tiktoken first splits a text with its regular
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
    const count = (text: string) => tiktoken.encode(text, [], []).length
    return { engine: "js-tiktoken", counter: () => count }
  }
  const ranks = internals.rankMap as Map<string, number>
  const pattern = new RegExp(internals.patStr, "gu")
  const utf8 = new TextEncoder()
  const key = (bytes: Uint8Array, start: number, end: number) => bytes.subarray(start, end).join(",")

  const bytePairCount = (bytes: Uint8Array): number => {
    if (bytes.length > longPiece) {
      const starts = mergeWithHeap(bytes.length, (start, end) => ranks.get(key(bytes, start, end)) ?? noRank)
      let count = 0
      for (let i = 0; i < starts.length; i++) {
        if (ranks.has(key(bytes, starts[i]!, starts[i + 1] ?? bytes.length))) count++
      }
      return count
    }
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
    const bytes = utf8.encode(piece)
    return bytes.length === 0
      ? 0
      : bytes.length === 1 || ranks.has(key(bytes, 0, bytes.length))
      ? 1
      : bytePairCount(bytes)
  }

  return {
    engine: "js-tiktoken",
    counter: () => {
      const pieces = new Lru<string, number>(capacity)
      return (text) => {
        let total = 0
        pattern.lastIndex = 0
        let match: RegExpExecArray | null
        while ((match = pattern.exec(text)) !== null) {
          const piece = match[0]
          if (piece.length === 0) {
            pattern.lastIndex++
            continue
          }
          total += memoized(pieces, piece, countPiece)
        }
        return total
      }
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
