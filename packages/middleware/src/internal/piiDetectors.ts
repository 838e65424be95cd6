/**
 * The detectors of `Pii`: where each built-in kind of personal data (or a
 * custom pattern) occurs in a text, validated beyond the pattern (Luhn for
 * cards, octet ranges for IPv4, hosts for URLs), and how the finds of
 * several types are settled into one list of non-overlapping matches.
 */
import type * as Pii from "../Pii.js"
import * as LinearPattern from "./linearPattern.js"

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

/** The spans of `text` one type finds. */
export type Detector = (text: string) => Array<Pii.Span>

const scan = (pattern: RegExp, text: string, accept: (value: string) => number | boolean): Array<Pii.Span> => {
  const found: Array<Pii.Span> = []
  for (const match of text.matchAll(pattern)) {
    const verdict = accept(match[0])
    if (verdict === false || match[0].length === 0) continue
    const length = verdict === true ? match[0].length : verdict
    if (length > 0) found.push({ start: match.index, end: match.index + length })
  }
  return found
}

/** The Luhn checksum of a card number (13 to 19 digits, other characters ignored). */
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
const findCards = (text: string): Array<Pii.Span> => {
  const found: Array<Pii.Span> = []
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
        // a single group may hold more than 19 digits: never a card, however its checksum falls
        if (digits[last + 1]! - digits[first]! <= 19 && luhn(digits[first]!, digits[last + 1]!)) {
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
const findEmails = (text: string): Array<Pii.Span> => {
  const found: Array<Pii.Span> = []
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

/** The detector of each built-in type. */
export const builtin: Record<Pii.BuiltinType, Detector> = {
  email: findEmails,
  credit_card: findCards,
  ip: (text) => scan(ipPattern, text, validIpv4),
  mac_address: (text) => scan(macPattern, text, () => true),
  // Overlaps between the two are settled with those of the other types
  // (leftmost, then longest): a bare URL inside a URL with a scheme loses,
  // and one is still found when another type took the scheme's characters.
  url: (text) => [...scan(schemeUrlPattern, text, acceptUrl(false)), ...scan(bareUrlPattern, text, acceptUrl(true))]
}

/**
 * The detector of a custom pattern, translated for the linear-time engine:
 * every non-empty match, whatever the pattern's `g`/`y` flags.
 */
export const fromPattern = (pattern: LinearPattern.Linear): Detector => LinearPattern.matcher(pattern)

/**
 * A type's name and its detector, as given in the options; `reach`, for a
 * pattern whose matches can hold whitespace, is the most code units one can
 * span.
 */
export interface Rule {
  readonly name: string
  readonly detect: Detector
  readonly reach?: number | undefined
}

/**
 * The matches of the rules in `text` (non-overlapping, in text order: the
 * leftmost wins, then the longest, then the first rule), and every span the
 * rules with a `reach` found, whatever the others found.
 */
export const scanWith =
  (rules: ReadonlyArray<Rule>) =>
  (text: string): { readonly matches: ReadonlyArray<Pii.PiiMatch>; readonly crossing: ReadonlyArray<Pii.Span> } => {
    const candidates: Array<{ readonly span: Pii.Span; readonly rank: number }> = []
    const crossing: Array<Pii.Span> = []
    for (let rank = 0; rank < rules.length; rank++) {
      const reaches = rules[rank]!.reach !== undefined
      for (const span of rules[rank]!.detect(text)) {
        candidates.push({ span, rank })
        if (reaches) crossing.push(span)
      }
    }
    if (candidates.length === 0) return { matches: [], crossing }
    candidates.sort((a, b) => a.span.start - b.span.start || b.span.end - a.span.end || a.rank - b.rank)
    const matches: Array<Pii.PiiMatch> = []
    let covered = 0
    for (const { rank, span } of candidates) {
      if (span.start < covered) continue
      matches.push({
        type: rules[rank]!.name,
        start: span.start,
        end: span.end,
        value: text.slice(span.start, span.end)
      })
      covered = span.end
    }
    return { matches, crossing }
  }

/** Non-overlapping matches of the rules, in text order (the leftmost wins, then the longest, then the first rule). */
export const detectWith = (rules: ReadonlyArray<Rule>) => {
  const scan = scanWith(rules)
  return (text: string): ReadonlyArray<Pii.PiiMatch> => scan(text).matches
}
