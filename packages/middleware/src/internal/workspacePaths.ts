/**
 * Paths of a workspace: every path the model gives is a virtual path rooted
 * at "/", normalized here (`.` and empty segments dropped, `..` resolved), so
 * the backends only ever see paths inside their root. Also how `glob`, `grep`
 * and the access rules match paths (with the linear-time matcher of `glob.ts`).
 */
import * as Effect from "effect/Effect"
import * as Glob from "./glob.js"

/** Whether `text` has a lone surrogate, which UTF-8 cannot encode (it would be written as U+FFFD). */
export const hasLoneSurrogate = (text: string): boolean =>
  /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text)

/**
 * The normalized form of `path` ("/a/b"), or `undefined` when `..` climbs
 * above the root, or it holds a NUL or a lone surrogate (names no file
 * system stores: a disk would store U+FFFD, so two names would be one file).
 */
export const normalize = (path: string): string | undefined => {
  if (path.includes("\0") || hasLoneSurrogate(path)) return undefined
  const out: Array<string> = []
  for (const segment of path.replace(/\\/g, "/").split("/")) {
    if (segment === "" || segment === ".") continue
    if (segment === "..") {
      if (out.length === 0) return undefined
      out.pop()
    } else {
      out.push(segment)
    }
  }
  return `/${out.join("/")}`
}

/** Code points a file system may ignore in a name (macOS HFS+; git's check of ".git" drops them too). */
const ignorable = /\p{Default_Ignorable_Code_Point}/gu

/**
 * `text` in capitals where a character has one capital (its simple upper
 * case): `ſ` (long s) is `S`, `ı` (dotless i) is `I`, as NTFS's table of
 * capitals and Unicode's case folding (APFS) take them, though neither lower
 * cases to `s` or `i`; `ß` stays (its capital is two letters).
 */
const simpleUpper = (text: string): string => {
  let out = ""
  for (const character of text) {
    const upper = character.toUpperCase()
    // one code point: one code unit, or a surrogate pair
    out += upper.length === 1 || (upper.length === 2 && upper.codePointAt(0)! > 0xffff) ? upper : character
  }
  return out
}

/**
 * The one name a file system that is insensitive to case or to Unicode
 * normalisation (macOS, Windows) may take `path` (normalized) for: NFC,
 * each character's capital in lower case (`ſ` and `ı` are `s` and `i`, as
 * those systems compare them), without the code points macOS ignores, and
 * each segment without what Windows drops or reads as a stream (trailing
 * dots and spaces, `:stream`). Two paths with the same folded form may be
 * one file.
 */
export const fold = (path: string): string =>
  simpleUpper(path.normalize("NFC")).toLowerCase().normalize("NFC").replace(ignorable, "").split("/").map((segment) => {
    const stem = segment.split(":")[0]!.replace(/[. ]+$/, "")
    return stem === "" ? segment : stem
  }).join("/")

/** Whether `path` is `directory` or inside it (both normalized). */
export const isWithin = (path: string, directory: string): boolean =>
  directory === "/" || path === directory || path.startsWith(`${directory}/`)

const globCache = new Map<string, Glob.Glob>()

const hasGlobSyntax = (pattern: string): boolean => /[*?[{]/.test(pattern)

/**
 * A glob pattern with its path syntax tidied as paths are: `\` made "/",
 * `.` segments dropped and runs of "/" made one, so `docs\*.md`,
 * `./docs/*.md` and `/docs//*.md` match what `docs/*.md` and `/docs/*.md`
 * do (paths never hold them).
 */
const tidy = (pattern: string): string =>
  pattern.replace(/\\/g, "/").replace(/\/{2,}/g, "/").split("/").filter((segment, index, all) =>
    segment !== "." || all.length === 1
  ).join(
    "/"
  )

/** The compiled glob of `pattern`, from a bounded cache. */
const compiled = (pattern: string): Glob.Glob => {
  let cached = globCache.get(pattern)
  if (cached !== undefined) return cached
  cached = Glob.compile(pattern)
  if (globCache.size > 200) globCache.clear()
  globCache.set(pattern, cached)
  return cached
}

/**
 * The most plain patterns a rule's braces may stand for
 * (`{/docs,/vendor}/*.{md,txt}` stands for 4); a rule with more is refused.
 */
export const maxRuleAlternatives = 256

/** The deepest a rule's braces may nest (`{a,{b,{c,d}}}` nests 3 deep); a rule nesting deeper is refused. */
export const maxRuleNesting = 32

/**
 * The most characters a rule's plain patterns may add up to (each as long
 * as it is written out, so a pattern's length times the plain patterns its
 * braces stand for, at most); a rule over it is refused.
 */
export const maxRuleSize = 65_536

const isChar = (token: Glob.Token | undefined, char: string): boolean =>
  token?.kind === "char" && token.code === char.charCodeAt(0)

/**
 * A plain pattern written as the path it matches is: rooted at "/", each
 * "/" one, without `.` segments or a "/" at the end, so `docs//a/./*.md/`
 * matches what `/docs/a/*.md` does. `undefined` for a `..` segment, which
 * no normalized path holds.
 */
const asPath = (plain: ReadonlyArray<Glob.Token>): Array<Glob.Token> | undefined => {
  const out: Array<Glob.Token> = []
  let segment: Array<Glob.Token> = []
  const slash: Glob.Token = { kind: "char", code: 47 }
  for (const token of [...plain, slash]) {
    if (!isChar(token, "/")) {
      segment.push(token)
      continue
    }
    const dot = segment.length === 1 && isChar(segment[0], ".")
    if (segment.length === 2 && isChar(segment[0], ".") && isChar(segment[1], ".")) return undefined
    if (segment.length > 0 && !dot) out.push(slash, ...segment)
    segment = []
  }
  return out.length === 0 ? [slash] : out
}

const ruleCache = new Map<string, Glob.Glob | string>()

/** The glob of a rule pattern (see {@link compiledRule}), or why it is refused. */
const ruleOf = (pattern: string): Glob.Glob | string => {
  const expansion = Glob.expand(pattern.replace(/\\/g, "/"), {
    alternatives: maxRuleAlternatives,
    nesting: maxRuleNesting,
    size: maxRuleSize
  })
  switch (expansion._tag) {
    case "TooMany":
      return `its braces stand for more than ${maxRuleAlternatives} patterns (maxRuleAlternatives)`
    case "TooDeep":
      return `its braces nest more than ${maxRuleNesting} deep (maxRuleNesting)`
    case "TooLarge":
      return `it is longer than, or the patterns its braces stand for add up to more than, ${
        maxRuleSize.toLocaleString("en-US")
      } characters (maxRuleSize)`
  }
  const paths: Array<Array<Glob.Token>> = []
  for (const plain of expansion.plains) {
    const path = asPath(plain)
    if (path === undefined) return "it has a \"..\" segment, which no path has"
    paths.push(path)
  }
  return Glob.compileAny(paths)
}

/**
 * The glob of a rule's pattern with glob syntax: every plain pattern its
 * braces stand for, each written as a path ({@link asPath}), so an
 * alternative that begins with "/" (`{/docs/**,/vendor/**}`), ends with one,
 * or holds `./` matches as it would written out alone. A string: why the
 * pattern is refused.
 */
const compiledRule = (pattern: string): Glob.Glob | string => {
  let cached = ruleCache.get(pattern)
  if (cached !== undefined) return cached
  cached = ruleOf(pattern)
  if (ruleCache.size > 200) ruleCache.clear()
  ruleCache.set(pattern, cached)
  return cached
}

/**
 * Why a rule's pattern is refused (its braces stand for more than
 * {@link maxRuleAlternatives} patterns, nest deeper than
 * {@link maxRuleNesting} or stand for more than {@link maxRuleSize}
 * characters, or a glob has a `..` segment), or `undefined` when it applies.
 */
export const ruleProblem = (pattern: string): string | undefined => {
  if (!hasGlobSyntax(pattern)) return undefined
  const rule = compiledRule(pattern)
  return typeof rule === "string" ? rule : undefined
}

/**
 * Whether the normalized `path` matches a rule's pattern: a glob when it has
 * glob syntax (matched against the whole path, see {@link compiledRule}),
 * else a directory prefix. A refused pattern ({@link ruleProblem}) matches
 * nothing.
 */
export const matchesRule = (pattern: string, path: string): boolean => {
  if (hasGlobSyntax(pattern)) {
    const rule = compiledRule(pattern)
    return typeof rule !== "string" && Glob.matches(rule, path)
  }
  const prefix = normalize(pattern)
  return prefix !== undefined && isWithin(path, prefix)
}

/** The text a glob given relative to `base` (or absolute, starting with "/") is matched against. */
const globSubject = (pattern: string, base: string, path: string): string =>
  pattern.startsWith("/") ? path : base === "/" ? path.slice(1) : path.slice(base.length + 1)

/** A few milliseconds of matching: the work done between two yields of a long search. */
const stepsBetweenYields = 50_000

/**
 * The paths among `files` (normalized, under `base`) that match `pattern`.
 * It yields to the other fibers after each stretch of work, so a long
 * search neither blocks the process nor outlives an interruption (a tool
 * timeout).
 */
export const filterMatching = (
  given: string,
  base: string,
  files: Iterable<string>
): Effect.Effect<Array<string>> =>
  Effect.gen(function*() {
    const pattern = tidy(given)
    const glob = compiled(pattern)
    const out: Array<string> = []
    let steps = 0
    for (const file of files) {
      const subject = globSubject(pattern, base, file)
      const cost = Glob.cost(glob, subject)
      if (cost > stepsBetweenYields) {
        // a long path: matched in pieces, yielding between them
        const run = Glob.begin(glob)
        const piece = Math.max(1, Math.floor(stepsBetweenYields / glob.size))
        for (let at = 0; at < subject.length;) {
          yield* Effect.yieldNow()
          at = Glob.feed(glob, run, subject, at, at + piece)
        }
        if (Glob.accepted(glob, run)) out.push(file)
        continue
      }
      steps += cost
      if (steps > stepsBetweenYields) {
        steps = 0
        yield* Effect.yieldNow()
      }
      if (Glob.matches(glob, subject)) out.push(file)
    }
    return out
  })
