/**
 * Streamed PII redaction throughput: `Pii.streamRedactor` with every
 * built-in type and `"redact"`, fed ~1 MB of text in 64-character chunks,
 * beside `redact` on the whole text. The text is one long token without
 * whitespace (base64, dotted names, timestamps, an email, a card and a URL
 * every ~150 characters, joined by `|`), and for comparison the same pieces
 * joined by spaces; then 512 KB of base64 (a model streaming a file) in
 * 4-character chunks; then the same with two custom patterns (they run on
 * the linear-time engine), and `/(a+)+b/` on 100 KB of `a`s; last, 4 MB of
 * `1 1 1 …` in 16 KB chunks, the slices the middleware redacts a long text
 * in. CPU time, best of a few passes.
 *
 * @since 0.1.0
 */
import * as Pii from "@stepwise-agent/middleware/Pii"
import { Either } from "effect"
import { cpuUs } from "./measure.js"

/**
 * One text, streamed and whole.
 *
 * @since 0.1.0
 * @category models
 */
export interface PiiRow {
  readonly what: string
  /** The text's length (ASCII, so bytes too). */
  readonly bytes: number
  /** The chunks' length. */
  readonly chunk: number
  /** MB/s (10^6 bytes of UTF-8, ASCII here) streamed in chunks of `chunk` characters. */
  readonly streamedMBps: number
  /** MB/s of `redact` on the whole text. */
  readonly wholeMBps: number
  /** Matches found in the text. */
  readonly matches: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface PiiResult {
  readonly bytes: number
  readonly chunk: number
  readonly rows: ReadonlyArray<PiiRow>
  readonly seconds: number
}

const pieces = [
  "QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
  "config.server.port.8080",
  "2024-06-01T12:00:00Z",
  "ada@example.com",
  "4111-1111-1111-1111",
  "https://example.com/a?b=1",
  "deadbeef00ff"
]

const textOf = (separator: string, bytes: number): string => {
  const unit = pieces.join(separator) + separator
  return unit.repeat(Math.ceil(bytes / unit.length))
}

const cpuMs = (): number => cpuUs() / 1000

const best = (passes: number, run: () => void): number => {
  let fastest = Infinity
  for (let i = 0; i < passes; i++) {
    const start = cpuMs()
    run()
    fastest = Math.min(fastest, cpuMs() - start)
  }
  return fastest
}

/**
 * Measures the two texts (about a second in all).
 *
 * @since 0.1.0
 * @category constructors
 */
export const measure = (options: { readonly quick: boolean; readonly log: (line: string) => void }): PiiResult => {
  const started = cpuMs()
  const redactor = Either.getOrThrow(Pii.redactor({ types: Pii.builtinTypes, strategy: "redact" }))
  const backtracking = Either.getOrThrow(Pii.redactor({ types: [{ name: "runs", pattern: /(a+)+b/ }] }))
  const bytes = 1_000_000
  const chunk = 64
  const passes = options.quick ? 1 : 3
  let seed = 7
  const base64 = Buffer.from(
    Uint8Array.from({ length: 384 * 1024 }, () => (seed = (seed * 1103515245 + 12345) % 2147483648) >> 23)
  ).toString("base64")
  // a custom pattern runs on the linear-time engine (re2js): its cost beside the built-ins', on the same texts
  const custom = Either.getOrThrow(Pii.redactor({
    types: [{ name: "ssn", pattern: /\b\d{3}-\d{2}-\d{4}\b/ }, { name: "ticket", pattern: /(?<![\w-])[A-Z]{2,5}-\d+/ }],
    strategy: "redact"
  }))
  const withSsn = textOf(" ", bytes / 2).replace(/deadbeef00ff/g, "123-45-6789 OPS-1234")
  const texts = [
    { what: "no whitespace", text: textOf("|", bytes), chunk, redactor },
    { what: "with spaces", text: textOf(" ", bytes), chunk, redactor },
    { what: "base64", text: base64, chunk: 4, redactor },
    { what: "with spaces, custom patterns", text: withSsn, chunk, redactor: custom },
    { what: "base64, custom patterns", text: base64.slice(0, bytes / 4), chunk: 4, redactor: custom },
    { what: "`a`s, custom pattern `/(a+)+b/`", text: "a".repeat(bytes / 10), chunk, redactor: backtracking },
    // a whole input or tool result this long goes through the middleware in 16 KB slices, a turn of the event loop between
    { what: "4 MB of `1 1 1 …` in slices", text: "1 ".repeat(2 * 1024 * 1024), chunk: 16_384, redactor }
  ]
  const rows = texts.map(({ chunk, redactor, text, what }): PiiRow => {
    const chunks: Array<string> = []
    for (let at = 0; at < text.length; at += chunk) chunks.push(text.slice(at, at + chunk))
    let matches = 0
    const streamedMs = best(passes, () => {
      let state = redactor.stream.initial
      matches = 0
      for (const piece of chunks) {
        const step = redactor.stream.push(state, piece)
        matches += step.matches.length
        state = step.state
      }
      matches += redactor.stream.flush(state).matches.length
    })
    const wholeMs = best(passes, () => redactor.redact(text))
    const row = {
      what,
      bytes: text.length,
      chunk,
      streamedMBps: text.length / 1000 / streamedMs,
      wholeMBps: text.length / 1000 / wholeMs,
      matches
    }
    options.log(
      `  ${what} (${chunk}-character chunks): streamed ${row.streamedMBps.toFixed(2)} MB/s, whole ${
        row.wholeMBps.toFixed(2)
      } MB/s, ` +
        `${matches} matches`
    )
    return row
  })
  return { bytes, chunk, rows, seconds: (cpuMs() - started) / 1000 }
}

/**
 * Renders the section.
 *
 * @since 0.1.0
 * @category constructors
 */
export const render = (result: PiiResult): string =>
  [
    `\`Pii.streamRedactor\` (every built-in type, \`"redact"\`) fed text in chunks, beside \`redact\` on the ` +
    "whole text. The first two texts repeat base64, dotted names, a timestamp, an email, a card, a URL and hex, " +
    "joined by `|` (one token without whitespace: the stream holds back at most a window of it) or by spaces; " +
    "the third is base64 without whitespace, as a model streaming a file in 4-character pieces sends it. The " +
    "last rows redact with custom patterns instead (`/\\b\\d{3}-\\d{2}-\\d{4}\\b/` and a lookbehind " +
    "`/(?<![\\w-])[A-Z]{2,5}-\\d+/`, on the linear-time engine), on text with spaces holding a match of " +
    "each every ~150 characters, on base64, and `/(a+)+b/` on 100 KB of `a`s (which JavaScript's own engine " +
    "never finishes). The last row is 4 MB of `1 1 1 …` (every digit may start a card) in 16 KB chunks: the " +
    "middleware redacts an input, a tool result or a stream chunk longer than 64 KB in such slices, with a turn " +
    "of the event loop between them. 1 MB/s is 1 ms per KB. CPU time, best of 3 passes; MB = 10^6 bytes.",
    "",
    "| text | size | chunks | streamed PII redaction | whole-text redaction | matches |",
    "|---|---|---|---|---|---|",
    ...result.rows.map((row) =>
      `| ${row.what} | ${(row.bytes / 1e3).toFixed(0)} KB | ${row.chunk} characters | ` +
      `${row.streamedMBps.toFixed(2)} MB/s | ${row.wholeMBps.toFixed(2)} MB/s | ${row.matches} |`
    ),
    "",
    `(This section took ${result.seconds.toFixed(1)} s.)`
  ].join("\n")
