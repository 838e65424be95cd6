/**
 * The pre-tokenizer of `cl100k_base` and `o200k_base` (the regular
 * expressions that split a text into the pieces BPE encodes one by one),
 * written out by hand for ASCII text. {@link asciiSplitter} gives, for a
 * position, the end of the piece that the regular expression would match
 * there, or -1 when deciding it needs a character that is not ASCII (a
 * letter, digit or space class beyond ASCII, so the caller runs the regular
 * expression for that piece). Only the two patterns below are recognized: a
 * pattern with any other source gets no splitter.
 *
 * How the patterns read on ASCII (letters `[A-Za-z]`, digits `[0-9]`,
 * spaces `[\t\n\v\f\r ]`, everything else "other"), at a position `i`:
 *
 * - cl100k only: `'` and `s`, `d`, `m`, `t`, `ll`, `ve`, `re` (either case)
 *   is a contraction;
 * - a letter, or a space/other character (not `\r`, `\n`) before a letter:
 *   the letters after it (o200k: uppercase letters, then lowercase ones,
 *   then an optional contraction);
 * - a digit: up to 3 digits;
 * - other characters (after an optional space ` `), then `\r`/`\n` (o200k:
 *   and `/`);
 * - spaces: the run to the end of the text (cl100k: `\s+$`), else up to the
 *   last `\r`/`\n` of the run, else the run but its last space (which joins
 *   the next piece) when it has two or more, else one space.
 */

/** gpt-tokenizer 4's sources of the two patterns (its `CL100K_TOKEN_SPLIT_PATTERN` and `O200K_TOKEN_SPLIT_PATTERN`). */
const contraction = String.raw`'(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE])`
const cl100k = String
  .raw`${contraction}|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s+$|\s*[\r\n]|\s+(?!\S)|\s`
const o200k =
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:${contraction})?|` +
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:${contraction})?|` +
  String.raw`\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

/** The patterns the splitters reproduce, as `RegExp` sources. */
export const patterns = { cl100k_base: cl100k, o200k_base: o200k } as const

// ASCII character classes
const other = 0
const lower = 1
const upper = 2
const digit = 3
/** `\t`, `\v`, `\f` and ` `. */
const space = 4
/** `\r` and `\n`. */
const newline = 5

const classes = new Uint8Array(128)
for (let c = 0; c < 128; c++) {
  classes[c] = c >= 97 && c <= 122
    ? lower
    : c >= 65 && c <= 90
    ? upper
    : c >= 48 && c <= 57
    ? digit
    : c === 10 || c === 13
    ? newline
    : c === 9 || c === 11 || c === 12 || c === 32
    ? space
    : other
}

/** The end of a contraction (`'s`, `'ll`, …) at `i`, or `i` when there is none. */
const contractionEnd = (text: string, i: number): number => {
  if (text.charCodeAt(i) !== 39) return i
  const a = text.charCodeAt(i + 1) | 0x20 // lowercase (NaN past the end becomes 0x20)
  if (a === 115 || a === 100 || a === 109 || a === 116) return i + 2 // s d m t
  const b = text.charCodeAt(i + 2) | 0x20
  return (a === 108 && b === 108) || (a === 118 && b === 101) || (a === 114 && b === 101) ? i + 3 : i // ll ve re
}

/** The end of the run of characters from `i` whose class is in `classSet` (bits `1 << class`); -1 if the run stops at a non-ASCII character. */
const runEnd = (text: string, i: number, classSet: number): number => {
  while (i < text.length) {
    const c = text.charCodeAt(i)
    if (c >= 128) return -1
    if (((1 << classes[c]!) & classSet) === 0) return i
    i++
  }
  return i
}

const letters = (1 << lower) | (1 << upper)
const lowers = 1 << lower
const uppers = 1 << upper
const others = 1 << other
const spaces = (1 << space) | (1 << newline)

/** The end of the piece of spaces at `i` (`endOfText`: whether a run to the end is one piece whatever it holds). */
const spacesEnd = (text: string, i: number, runToEndIsOnePiece: boolean): number => {
  const end = runEnd(text, i, spaces)
  if (end < 0) return -1
  if (end === text.length && runToEndIsOnePiece) return end
  let lastNewline = end - 1
  while (lastNewline >= i && classes[text.charCodeAt(lastNewline)] !== newline) lastNewline--
  if (lastNewline >= i) return lastNewline + 1
  if (end === text.length) return end
  return end - i >= 2 ? end - 1 : i + 1
}

/** The end of a run of other characters at `i`, then of carriage returns and line feeds (and `/` when `slash`). */
const othersEnd = (text: string, i: number, slash: boolean): number => {
  let end = runEnd(text, i, others)
  if (end < 0) return -1
  for (;;) {
    const c = text.charCodeAt(end)
    if (c === 10 || c === 13 || (slash && c === 47)) end++
    else return end
  }
}

/** cl100k_base's letters from `i`: the run of letters. */
const cl100kWord = (text: string, i: number): number => runEnd(text, i, letters)

/** o200k_base's letters from `i`: uppercase letters, lowercase letters, an optional contraction. */
const o200kWord = (text: string, i: number): number => {
  const upperEnd = runEnd(text, i, uppers)
  if (upperEnd < 0) return -1
  const lowerEnd = runEnd(text, upperEnd, lowers)
  return lowerEnd < 0 ? -1 : contractionEnd(text, lowerEnd)
}

const splitter =
  (word: (text: string, i: number) => number, isCl100k: boolean) => (text: string, i: number): number => {
    const c = text.charCodeAt(i)
    if (c >= 128) return -1
    const cls = classes[c]!
    if (cls === lower || cls === upper) return word(text, i)
    if (cls === digit) {
      let end = i + 1
      while (end < i + 3 && end < text.length) {
        const d = text.charCodeAt(end)
        if (d >= 128) return -1
        if (classes[d] !== digit) break
        end++
      }
      return end
    }
    if (isCl100k && c === 39) {
      const end = contractionEnd(text, i)
      if (end > i) return end
    }
    const next = i + 1 < text.length ? text.charCodeAt(i + 1) : -1
    if (next >= 128) return -1
    const nextCls = next < 0 ? -1 : classes[next]!
    if (cls !== newline && (nextCls === lower || nextCls === upper)) {
      const end = word(text, i + 1)
      return end
    }
    if (cls === other) return othersEnd(text, i, !isCl100k)
    if (c === 32 && nextCls === other) return othersEnd(text, i + 1, !isCl100k)
    return spacesEnd(text, i, isCl100k)
  }

/**
 * The hand-written splitter of the pattern whose source is `source`, or
 * `undefined` when it is not one of {@link patterns}.
 */
export const asciiSplitter = (source: string): ((text: string, at: number) => number) | undefined =>
  source === cl100k ? splitter(cl100kWord, true) : source === o200k ? splitter(o200kWord, false) : undefined
