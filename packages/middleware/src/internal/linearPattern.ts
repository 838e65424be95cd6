/**
 * A user's regular expression run on a linear-time engine (re2js, a port of
 * RE2: no backtracking, so no pattern can take exponential time on any
 * text). The JavaScript `RegExp` is translated to RE2 syntax with
 * JavaScript's meaning kept: `\s` is JavaScript's whitespace, `.` stops at
 * `\r`, U+2028 and U+2029 too, `^` under `m` starts a line after any of
 * them, legacy escapes of patterns without `u` (`\1` as an octal escape,
 * `\k`, `\c`, `[\b]`, identity escapes) mean what they mean there, and
 * groups do not capture (only whole matches are read). What RE2 cannot run
 * (backreferences, lookahead, a repeat count above 1,000, the `v` flag's set
 * operations) is refused with the reason.
 *
 * Differences that remain, all documented in the Pii guide: the pattern
 * reads whole characters as the `u` flag does (`.` or `[^a]` never match
 * half of an emoji); with `i`, case folding is Unicode's (`s` also matches
 * `ſ`, `k` the Kelvin sign) whether or not `u` is given; under `m`, `$` ends
 * a line before `\n` only.
 */
import { RE2JS, RE2JSException } from "re2js"

/**
 * A pattern in RE2 syntax, whether it needs re2js's lookbehinds, and its
 * reach across whitespace (see {@link reachOf}).
 */
export interface Linear {
  readonly _tag: "Linear"
  readonly source: string
  readonly lookbehinds: boolean
  readonly reach: Reach
}

/**
 * Whether a match of a pattern can hold whitespace, and if so the most
 * UTF-16 code units a match can span (`Infinity` when its matches are
 * unbounded).
 */
export type Reach =
  | { readonly _tag: "NoWhitespace" }
  | { readonly _tag: "Whitespace"; readonly longest: number }

/** A pattern RE2 can run, or why not. */
export type Translation = Linear | { readonly _tag: "Unsupported"; readonly reason: string }

class Unsupported extends Error {}

// JavaScript's `\s`: WhiteSpace and LineTerminator of ECMA-262.
const whitespace: ReadonlyArray<readonly [number, number]> = [
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff]
]

const hex = (code: number) => `\\x{${code.toString(16)}}`
const rangeText = ([lo, hi]: readonly [number, number]) => lo === hi ? hex(lo) : `${hex(lo)}-${hex(hi)}`
const spaceItems = whitespace.map(rangeText).join("")
const notSpaceItems = whitespace
  .map(([lo], i) => [i === 0 ? 0 : whitespace[i - 1]![1] + 1, lo - 1] as const)
  .concat([[whitespace[whitespace.length - 1]![1] + 1, 0x10ffff]])
  .filter(([lo, hi]) => lo <= hi)
  .map(rangeText)
  .join("")
const lineBreaks = "\\n\\r\\x{2028}\\x{2029}"

/** A literal character in RE2 syntax. */
const literal = (code: number): string =>
  /[0-9A-Za-z]/.test(String.fromCharCode(code)) && code < 0x80
    ? String.fromCharCode(code)
    : code > 0x20 && code < 0x7f
    ? `\\${String.fromCharCode(code)}`
    : hex(code)

const generalCategories: Record<string, string> = {
  Letter: "L",
  Cased_Letter: "LC",
  Uppercase_Letter: "Lu",
  Lowercase_Letter: "Ll",
  Titlecase_Letter: "Lt",
  Modifier_Letter: "Lm",
  Other_Letter: "Lo",
  Mark: "M",
  Number: "N",
  Decimal_Number: "Nd",
  digit: "Nd",
  Letter_Number: "Nl",
  Other_Number: "No",
  Punctuation: "P",
  punct: "P",
  Symbol: "S",
  Separator: "Z",
  Space_Separator: "Zs",
  Other: "C",
  Control: "Cc",
  cntrl: "Cc"
}

/** Translates `source` (with `flags`) to RE2 syntax; throws {@link Unsupported}. */
const translateSource = (source: string, flags: string): { source: string; lookbehinds: boolean } => {
  const unicode = flags.includes("u") || flags.includes("v")
  const sets = flags.includes("v")
  let lookbehinds = false
  let at = 0
  const peek = (offset = 0) => source[at + offset]
  const fail = (reason: string): never => {
    throw new Unsupported(reason)
  }

  // capturing groups and names, to tell a backreference from a legacy octal escape or `\k`
  let captures = 0
  let named = false
  for (let i = 0, inClass = false; i < source.length; i++) {
    const char = source[i]
    if (char === "\\") i++
    else if (char === "[") inClass = true
    else if (char === "]") inClass = false
    else if (char === "(" && !inClass) {
      if (source[i + 1] !== "?") captures++
      else if (source[i + 2] === "<" && source[i + 3] !== "=" && source[i + 3] !== "!") {
        captures++
        named = true
      }
    }
  }

  const codePoint = (): number => {
    const code = source.codePointAt(at)!
    at += code > 0xffff ? 2 : 1
    return code
  }
  const hexDigits = (count: number): number | undefined => {
    const digits = source.slice(at, at + count)
    if (digits.length !== count || !/^[0-9A-Fa-f]+$/.test(digits)) return undefined
    at += count
    return parseInt(digits, 16)
  }
  const legacyOctal = (): number => {
    let digits = ""
    while (digits.length < 3 && /[0-7]/.test(peek() ?? "") && parseInt(digits + peek(), 8) <= 0o377) {
      digits += source[at++]
    }
    return parseInt(digits, 8)
  }
  /** `\u…` after the `u`: a code point, or undefined (then it is the letter u). */
  const unicodeEscape = (): number | undefined => {
    if (unicode && peek() === "{") {
      const close = source.indexOf("}", at)
      const value = parseInt(source.slice(at + 1, close), 16)
      at = close + 1
      return value
    }
    const unit = hexDigits(4)
    if (unit === undefined) return undefined
    if (unit >= 0xd800 && unit <= 0xdbff && source.startsWith("\\u", at)) {
      const low = parseInt(source.slice(at + 2, at + 6), 16)
      if (/^[0-9A-Fa-f]{4}$/.test(source.slice(at + 2, at + 6)) && low >= 0xdc00 && low <= 0xdfff) {
        at += 6
        return (unit - 0xd800) * 0x400 + low - 0xdc00 + 0x10000
      }
    }
    return unit
  }
  const property = (negated: boolean): string => {
    const close = source.indexOf("}", at)
    const body = source.slice(at + 1, close)
    at = close + 1
    const [name, value] = body.includes("=") ? body.split("=") as [string, string] : [undefined, body]
    if (name === "Script_Extensions" || name === "scx") fail(`the Unicode property \\p{${body}} (script extensions)`)
    const table = name === undefined || name === "General_Category" || name === "gc"
      ? generalCategories[value] ?? value
      : value
    return `\\${negated ? "P" : "p"}{${table}}`
  }
  /**
   * The escape after a backslash: a literal code point, or RE2 text (a
   * class, an assertion). `inClass` reads it as inside a character class.
   */
  const escape = (inClass: boolean): number | { readonly text: string } => {
    const char = source[at++]
    switch (char) {
      case undefined:
        return 0x5c
      case "d":
      case "D":
      case "w":
      case "W":
        return { text: `\\${char}` }
      case "s":
        return { text: inClass ? spaceItems : `[${spaceItems}]` }
      case "S":
        return { text: inClass ? notSpaceItems : `[${notSpaceItems}]` }
      case "b":
        return inClass ? 0x08 : { text: "\\b" }
      case "B":
        return inClass ? 0x42 : { text: "\\B" }
      case "t":
        return 0x09
      case "n":
        return 0x0a
      case "v":
        return 0x0b
      case "f":
        return 0x0c
      case "r":
        return 0x0d
      case "0":
        if (!/[0-9]/.test(peek() ?? "")) return 0
        at--
        return legacyOctal()
      case "x": {
        const value = hexDigits(2)
        return value ?? 0x78
      }
      case "u":
        return unicodeEscape() ?? 0x75
      case "c": {
        const letter = peek() ?? ""
        if (/[A-Za-z]/.test(letter) || (inClass && !unicode && /[0-9_]/.test(letter))) {
          at++
          return letter.charCodeAt(0) % 32
        }
        at--
        return 0x5c
      }
      case "k":
        if (unicode || named) return fail("a backreference (\\k<name>)")
        return 0x6b
      case "p":
      case "P":
        if (unicode && peek() === "{") return { text: property(char === "P") }
        return char.charCodeAt(0)
      case "q":
        if (sets) return fail("the v flag's string literals (\\q{…})")
        return 0x71
      default: {
        if (/[1-9]/.test(char)) {
          let digits = char
          while (/[0-9]/.test(peek() ?? "")) digits += source[at++]
          if (Number(digits) <= captures && !inClass) return fail(`a backreference (\\${digits})`)
          at -= digits.length
          if (char !== "8" && char !== "9") return legacyOctal()
          at++
          return char.charCodeAt(0)
        }
        at--
        return codePoint()
      }
    }
  }

  const characterClass = (): string => {
    let negated = false
    if (peek() === "^") {
      negated = true
      at++
    }
    const items: Array<string> = []
    const atom = (): number | { readonly text: string } => {
      if (sets && (peek() === "[" || source.startsWith("--", at) || source.startsWith("&&", at))) {
        return fail("the v flag's set operations and nested classes")
      }
      if (peek() === "\\") {
        at++
        return peek() === "-" ? (at++, 0x2d) : escape(true)
      }
      return codePoint()
    }
    while (at < source.length && peek() !== "]") {
      const first = atom()
      if (sets && (source.startsWith("--", at) || source.startsWith("&&", at))) {
        return fail("the v flag's set operations and nested classes")
      }
      if (peek() === "-" && source[at + 1] !== "]" && at + 1 < source.length) {
        at++
        const second = atom()
        if (typeof first === "number" && typeof second === "number") {
          items.push(`${hex(first)}-${hex(second)}`)
          continue
        }
        items.push(typeof first === "number" ? hex(first) : first.text, hex(0x2d))
        items.push(typeof second === "number" ? hex(second) : second.text)
        continue
      }
      items.push(typeof first === "number" ? hex(first) : first.text)
    }
    at++ // the closing bracket
    if (items.length === 0) return negated ? `[\\x{0}-\\x{10ffff}]` : `[^\\x{0}-\\x{10ffff}]`
    return `[${negated ? "^" : ""}${items.join("")}]`
  }

  interface Mode {
    readonly multiline: boolean
    readonly dotAll: boolean
  }
  const stack: Array<Mode> = []
  let mode: Mode = { multiline: flags.includes("m"), dotAll: flags.includes("s") }
  let out = flags.includes("i") ? "(?i)" : ""
  while (at < source.length) {
    const char = source[at]!
    switch (char) {
      case "\\": {
        at++
        const escaped = escape(false)
        out += typeof escaped === "number" ? literal(escaped) : escaped.text
        break
      }
      case "[":
        at++
        out += characterClass()
        break
      case "(": {
        at++
        stack.push(mode)
        if (peek() !== "?") {
          out += "(?:"
          break
        }
        const rest = source.slice(at + 1, at + 3)
        if (rest.startsWith("=") || rest.startsWith("!")) return fail("a lookahead ((?= or (?!)")
        if (rest === "<=" || rest === "<!") {
          lookbehinds = true
          out += `(?${rest}`
          at += 3
          break
        }
        if (rest.startsWith("<")) {
          at = source.indexOf(">", at) + 1
          out += "(?:"
          break
        }
        const modifiers = /^\?([ims]*)(?:-([ims]*))?:/.exec(source.slice(at))
        if (modifiers === null) return fail(`the group ${source.slice(at - 1, at + 3)}`)
        const [whole, on = "", off = ""] = modifiers
        at += whole.length
        mode = {
          multiline: on.includes("m") ? true : off.includes("m") ? false : mode.multiline,
          dotAll: on.includes("s") ? true : off.includes("s") ? false : mode.dotAll
        }
        out += on.includes("i") ? "(?i:" : off.includes("i") ? "(?-i:" : "(?:"
        break
      }
      case ")":
        at++
        mode = stack.pop() ?? mode
        out += ")"
        break
      case ".":
        at++
        out += mode.dotAll ? "(?s:.)" : `[^${lineBreaks}]`
        break
      case "^":
        at++
        if (mode.multiline) {
          lookbehinds = true
          out += "(?:(?m:^)|(?<=[\\r\\x{2028}\\x{2029}]))"
        } else {
          out += "^"
        }
        break
      case "$":
        at++
        out += mode.multiline ? "(?m:$)" : "$"
        break
      case "{": {
        const quantifier = /^\{(\d+)(,(\d*))?\}/.exec(source.slice(at))
        if (quantifier === null) {
          at++
          out += "\\{"
          break
        }
        const [whole, min, , max] = quantifier
        if (Number(min) > 1000 || (max !== undefined && max !== "" && Number(max) > 1000)) {
          return fail(`the repeat count ${whole} (RE2 allows at most 1000)`)
        }
        at += whole.length
        out += whole
        break
      }
      case "*":
      case "+":
      case "?":
      case "|":
        at++
        out += char
        break
      default:
        out += literal(codePoint())
    }
  }
  return { source: out, lookbehinds }
}

/**
 * The most characters a pattern's source may have: compiling is linear in
 * it, and a longer one is refused before it is compiled.
 */
export const MAX_SOURCE = 20_000

/**
 * The most instructions a compiled pattern may have. A search costs up to
 * its program size per character (the engine runs every instruction that is
 * live at a character), so this bounds the work per character; a dictionary
 * of 200 words compiles to about 900.
 */
export const MAX_PROGRAM = 10_000

/** The RE2 form of `pattern` (its `g`, `y` and `d` flags do not matter: every match is read). */
export const translate = (pattern: RegExp): Translation => {
  if (pattern.source.length > MAX_SOURCE) {
    return {
      _tag: "Unsupported",
      reason: `a pattern of ${pattern.source.length} characters (at most ${MAX_SOURCE.toLocaleString("en-US")})`
    }
  }
  try {
    const { lookbehinds, source } = translateSource(pattern.source, pattern.flags)
    const compiled = RE2JS.compile(source, lookbehinds ? RE2JS.LOOKBEHINDS : 0)
    const size = compiled.programSize()
    if (size > MAX_PROGRAM) {
      return {
        _tag: "Unsupported",
        reason: `a pattern that compiles to ${size} instructions (at most ${
          MAX_PROGRAM.toLocaleString("en-US")
        }: repeats and alternatives multiply them)`
      }
    }
    return { _tag: "Linear", source, lookbehinds, reach: reachOf(compiled.re2Input.prog) }
  } catch (error) {
    if (error instanceof Unsupported) return { _tag: "Unsupported", reason: error.message }
    if (error instanceof RE2JSException) {
      return { _tag: "Unsupported", reason: error.message.replace(/^error parsing regexp: /, "") }
    }
    // the engine could not take it at all (a nesting deeper than its stack, say)
    return { _tag: "Unsupported", reason: `a pattern of this shape (${String(error)})` }
  }
}

/** An instruction of re2js's compiled program (the fields read here). */
interface Instruction {
  readonly op: number
  readonly out: number
  readonly arg: number
  readonly matchRune: (rune: number) => boolean
}

// re2js's instruction codes (`Inst` in its source)
const ALT = 1
const ALT_MATCH = 2
const FAIL = 5
const MATCH = 6
const RUNE = 8
const RUNE_ANY_NOT_NL = 11

/** Every character JavaScript's `\s` matches. */
const whitespaceRunes: ReadonlyArray<number> = whitespace.flatMap(([lo, hi]) =>
  Array.from({ length: hi - lo + 1 }, (_, i) => lo + i)
)

/**
 * The reach of a compiled program (re2js's, from its `start`; a
 * lookbehind's own program is apart and reads text before the match): the
 * longest path to its match, counting each instruction that consumes a
 * character as two code units (a character may be outside the BMP), and
 * whether any of those can consume whitespace. A loop makes it unbounded
 * (conservatively: a loop that consumes nothing too); a program of another shape than expected
 * is taken as unbounded, holding whitespace.
 */
const reachOf = (program: { readonly inst?: unknown; readonly start?: unknown } | undefined): Reach => {
  const inst = program?.inst
  const start = program?.start
  const unknown: Reach = { _tag: "Whitespace", longest: Infinity }
  if (!Array.isArray(inst) || typeof start !== "number") return unknown
  const instructions: ReadonlyArray<Instruction> = inst
  const consumes = (op: number) => op >= RUNE && op <= RUNE_ANY_NOT_NL
  const nextOf = (i: Instruction): ReadonlyArray<number> =>
    i.op === ALT || i.op === ALT_MATCH ? [i.out, i.arg] : i.op === MATCH || i.op === FAIL ? [] : [i.out]
  // longest[pc]: the most consuming instructions from pc to a match (-1: no match reachable); an iterative
  // depth-first walk, so no program makes it recurse
  const longest = new Float64Array(instructions.length).fill(Number.NaN)
  const onPath = new Uint8Array(instructions.length)
  let whitespace = false
  let loops = false
  const stack: Array<{ readonly pc: number; next: number }> = [{ pc: start, next: 0 }]
  onPath[start] = 1
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!
    const i = instructions[frame.pc]
    if (i === undefined) return unknown
    const outs = nextOf(i)
    if (frame.next < outs.length) {
      const pc = outs[frame.next++]!
      if (onPath[pc] === 1) loops = true
      else if (Number.isNaN(longest[pc]!)) {
        onPath[pc] = 1
        stack.push({ pc, next: 0 })
      }
      continue
    }
    stack.pop()
    onPath[frame.pc] = 0
    let best = i.op === MATCH ? 0 : -1
    for (const pc of outs) if (!Number.isNaN(longest[pc]!)) best = Math.max(best, longest[pc]!)
    if (consumes(i.op)) {
      if (best >= 0) best += 1
      if (!whitespace && (i.op > RUNE + 1 || whitespaceRunes.some((rune) => i.matchRune(rune)))) whitespace = true
    }
    longest[frame.pc] = best
  }
  if (!whitespace) return { _tag: "NoWhitespace" }
  return { _tag: "Whitespace", longest: loops ? Infinity : 2 * Math.max(0, longest[start]!) }
}

/** The time one scan may take: generous for a linear scan, a stop for the rare quadratic one. */
const budgetMs = (length: number) => 1_000 + length * 0.02

/**
 * The most a step of the engine (one instruction at one character) is
 * taken to cost, in milliseconds: measured near 22 ns on the worst patterns,
 * with margin for a loaded machine.
 */
const STEP_MS = 30e-6

/** Thrown when a scan overran its time budget, or would be able to (see {@link matcher}). */
export class Overran extends Error {}

/**
 * The non-empty matches of a translated pattern in `text`, leftmost first,
 * as `[start, end)` in UTF-16 code units. A search costs at most the
 * program size per character, so a scan whose worst case (program size ×
 * text length × {@link STEP_MS}) exceeds its time budget (a second, plus
 * 20 µs per character) throws {@link Overran} before it starts. A pattern
 * whose preferred branch runs far past each match (`\d+-\d+|\d` on a long
 * run of digits) rescans the text at every match: a scan that overruns the
 * budget between two matches throws {@link Overran} too, rather than keep
 * the process busy.
 */
export const matcher = (translation: Linear) => {
  const compiled = RE2JS.compile(translation.source, translation.lookbehinds ? RE2JS.LOOKBEHINDS : 0)
  const size = compiled.programSize()
  return (text: string): Array<{ readonly start: number; readonly end: number }> => {
    const found: Array<{ readonly start: number; readonly end: number }> = []
    const budget = budgetMs(text.length)
    const worst = size * text.length * STEP_MS
    if (worst > budget) {
      throw new Overran(
        `could take ${Math.round(worst)} ms on a text of ${text.length} characters (${size} instructions × ` +
          `${text.length} characters), more than its budget of ${Math.round(budget)} ms; it was not run`
      )
    }
    const deadline = Date.now() + budget
    const search = compiled.matcher(text)
    while (search.find()) {
      const start = search.start()
      const end = search.end()
      if (end > start) found.push({ start, end })
      if (Date.now() > deadline) {
        throw new Overran(`took more than ${Math.round(budget)} ms on a text of ${text.length} characters`)
      }
    }
    return found
  }
}
