import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import * as Glob from "../src/internal/glob.js"
import * as Paths from "../src/internal/workspacePaths.js"

/**
 * The reference: the glob written as a regular expression, token by token.
 * It backtracks, so it is only run on short patterns and paths.
 */
const oracle = (pattern: string): RegExp => {
  let source = ""
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!
    if (pattern.startsWith("**/", i)) {
      source += "(?:.*/)?"
      i += 2
    } else if (pattern.startsWith("**", i)) {
      source += ".*"
      i += 1
    } else if (c === "*") source += "[^/]*"
    else if (c === "?") source += "[^/]"
    else if (c === "[") {
      const end = pattern.indexOf("]", i + 1)
      const body = pattern.slice(i + 1, end)
      source += body.startsWith("!") ? `[^/${body.slice(1)}]` : `[${body}]`
      i = end
    } else if (c === "{") source += "(?:"
    else if (c === ",") source += "|"
    else if (c === "}") source += ")"
    else source += c.replace(/[.+^$()|\\]/g, "\\$&")
  }
  return new RegExp(`^${source}$`)
}

const atom = FastCheck.constantFrom("a", "b", ".", "/", "*", "**", "**/", "?", "[ab]", "[!a]", "[a-b]")
const piece: FastCheck.Arbitrary<string> = FastCheck.letrec<{ piece: string }>((tie) => ({
  piece: FastCheck.oneof(
    { depthSize: "small", withCrossShrink: true },
    atom,
    FastCheck.tuple(
      FastCheck.array(tie("piece"), { maxLength: 3 }),
      FastCheck.array(tie("piece"), { maxLength: 3 })
    ).map(([a, b]) => `{${a.join("")},${b.join("")}}`)
  )
})).piece
const pattern = FastCheck.array(piece, { maxLength: 6 }).map((pieces) => pieces.join(""))
const subject = FastCheck.array(FastCheck.constantFrom("a", "b", ".", "/"), { maxLength: 8 }).map((cs) => cs.join(""))

describe("glob matcher", () => {
  it.prop(
    "agrees with a regular-expression reference on short patterns and paths",
    [pattern, subject],
    ([glob, text]) => {
      assert.strictEqual(Glob.matches(Glob.compile(glob), text), oracle(glob).test(text), `${glob} on ${text}`)
    },
    { fastCheck: { numRuns: 2000 } }
  )

  it.prop(
    "a run fed in pieces decides as a whole match does",
    [pattern, subject, FastCheck.array(FastCheck.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 8 })],
    ([glob, text, pieces]) => {
      const compiled = Glob.compile(glob)
      const run = Glob.begin(compiled)
      for (let at = 0, k = 0; at < text.length; k++) {
        at = Glob.feed(compiled, run, text, at, at + pieces[k % pieces.length]!)
      }
      assert.strictEqual(Glob.accepted(compiled, run), Glob.matches(compiled, text))
    },
    { fastCheck: { numRuns: 500 } }
  )

  it("ends on patterns that make a backtracking matcher run for hours", () => {
    const as = "a".repeat(60)
    const deep = Array.from({ length: 60 }, () => "a").join("/")
    const cases: ReadonlyArray<readonly [string, string, boolean]> = [
      ["*a".repeat(14) + "b", as, false],
      ["**a".repeat(14) + "b", as, false],
      ["a*".repeat(30) + "b", as, false],
      ["?*".repeat(30) + "b", as, false],
      ["[a]*".repeat(20) + "b", as, false],
      ["{a,aa}".repeat(30) + "b", as, false],
      ["{*a,a*}".repeat(12) + "b", as, false],
      ["*{a,*}".repeat(15) + "b", as, false],
      ["{*,**}a".repeat(14) + "b", as, false],
      ["**/*a".repeat(14) + "b", deep, false],
      ["**/".repeat(30) + "b", deep, false],
      ["*/".repeat(30) + "*", deep, false],
      ["*a".repeat(14), as, true],
      ["{".repeat(300) + "a" + "}".repeat(300), "a", true],
      ["{".repeat(1000), "{".repeat(1000), true],
      ["[".repeat(1000), "[".repeat(1000), true]
    ]
    for (const [glob, text, expected] of cases) {
      assert.strictEqual(Glob.matches(Glob.compile(glob), text), expected, glob)
    }
  })

  it("braces are not expanded: the automaton grows with the pattern, not with its alternatives", () => {
    const glob = Glob.compile("{a,b}".repeat(200))
    assert.isBelow(glob.size, 2000)
    assert.isTrue(Glob.matches(glob, "ab".repeat(100)))
  })

  it("classes never match \"/\", and one written backwards or left open is text", () => {
    assert.isFalse(Glob.matches(Glob.compile("a[!b]c"), "a/c"))
    assert.isFalse(Glob.matches(Glob.compile("a[/]c"), "a/c"))
    assert.isTrue(Glob.matches(Glob.compile("[z-a]"), "[z-a]"))
    assert.isTrue(Glob.matches(Glob.compile("[ab"), "[ab"))
    assert.isTrue(Glob.matches(Glob.compile("[]a]"), "]"))
    assert.isTrue(Glob.matches(Glob.compile("a}b,c"), "a}b,c"))
    assert.isTrue(Glob.matches(Glob.compile("😀?"), "😀😀"))
  })
})

/**
 * The plain patterns `pattern`'s braces stand for (every brace of these patterns pairs up), written out as text;
 * `undefined` past `max` (the count only grows as the pattern is read).
 */
const expandText = (pattern: string, max: number): Array<string> | undefined => {
  const tooMany = new Error("too many")
  let at = 0
  const sequence = (): Array<string> => {
    let out = [""]
    while (at < pattern.length && pattern[at] !== "," && pattern[at] !== "}") {
      if (pattern[at] !== "{") {
        out = out.map((head) => head + pattern[at])
        at++
        continue
      }
      at++
      const alternatives: Array<string> = []
      while (true) {
        alternatives.push(...sequence())
        if (pattern[at++] === "}") break
      }
      out = out.flatMap((head) => alternatives.map((tail) => head + tail))
      if (out.length > max) throw tooMany
    }
    return out
  }
  try {
    return sequence()
  } catch {
    return undefined
  }
}

/** The reference of a rule: each plain pattern written as its path (rooted, one "/" each, no `.` segment), matched alone. */
const ruleReference = (pattern: string, path: string): boolean =>
  expandText(pattern, Infinity)!.some((plain) =>
    Glob.matches(Glob.compile(`/${plain.split("/").filter((s) => s !== "" && s !== ".").join("/")}`), path)
  )

const ruleAtom = FastCheck.constantFrom("docs", "vendor", "a", "x.md", "/", "//", ".", "./", "/.", "*", "**", "?", "")
const rulePiece: FastCheck.Arbitrary<string> = FastCheck.letrec<{ piece: string }>((tie) => ({
  piece: FastCheck.oneof(
    { depthSize: "small", withCrossShrink: true },
    ruleAtom,
    FastCheck.array(FastCheck.array(tie("piece"), { maxLength: 2 }), { minLength: 1, maxLength: 3 })
      .map((alternatives) => `{${alternatives.map((pieces) => pieces.join("")).join(",")}}`)
  )
})).piece
/** A rule pattern with a brace group at the top, so it is read as a glob. */
const rulePattern = FastCheck.tuple(
  FastCheck.array(rulePiece, { maxLength: 3 }),
  FastCheck.array(FastCheck.array(rulePiece, { maxLength: 3 }), { minLength: 1, maxLength: 3 }),
  FastCheck.array(rulePiece, { maxLength: 3 })
).map(([before, group, after]) => `${before.join("")}{${group.map((p) => p.join("")).join(",")}}${after.join("")}`)
const rulePath = FastCheck.array(FastCheck.constantFrom("docs", "vendor", "a", "x.md", "b"), { maxLength: 4 })
  .map((segments) => `/${segments.join("/")}`)

describe("rule patterns", () => {
  it.prop(
    "a rule decides as its braces written out, each read as a path, would",
    [rulePattern, rulePath],
    ([pattern, path]) => {
      // refused: a ".." segment (a brace may make one), which no normalized path has, or too many plain patterns
      const plains = expandText(pattern, Paths.maxRuleAlternatives)
      const refused = plains === undefined || plains.some((plain) => plain.split("/").includes(".."))
      assert.strictEqual(Paths.ruleProblem(pattern) !== undefined, refused, pattern)
      if (refused) return
      assert.strictEqual(Paths.matchesRule(pattern, path), ruleReference(pattern, path), `${pattern} on ${path}`)
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it("alternatives that begin or end with a slash, ./ and // hold as written out", () => {
    for (
      const pattern of [
        "{/docs/**,/vendor/**}",
        "{/docs,/vendor}/**",
        "/{docs,vendor}/**",
        "{docs,vendor}/**",
        "{./docs,vendor/}/**",
        "{/docs/,//vendor//}**/",
        "/{,/}{docs/,vendor}{,/}**{,/}",
        "{/a,/{docs,vendor}/{**,x}}"
      ]
    ) {
      assert.isTrue(Paths.matchesRule(pattern, "/docs/a.md"), pattern)
      assert.isTrue(Paths.matchesRule(pattern, "/vendor/x"), pattern)
      assert.isFalse(Paths.matchesRule(pattern, "/other/a.md"), pattern)
    }
    assert.isTrue(Paths.matchesRule("/docs/**/", "/docs/a.md"))
    assert.isTrue(Paths.matchesRule("{/a,/memories/{x,y}}", "/memories/x"))
    assert.isTrue(Paths.matchesRule("/docs/{a,}/x.md", "/docs/x.md"))
    assert.isTrue(Paths.matchesRule("/docs/{a,}/x.md", "/docs/a/x.md"))
    // a star a brace makes reads as the run written out: ** crosses directories
    assert.isTrue(Paths.matchesRule("/docs/*{*,}", "/docs/a/b"))
  })

  it("a glob with a .. segment, or braces standing for too many patterns, is refused", () => {
    assert.include(Paths.ruleProblem("/docs/../vendor/*"), "..")
    assert.include(Paths.ruleProblem("{/a,/b/..}/*"), "..")
    assert.include(Paths.ruleProblem("{a,b}".repeat(9)), String(Paths.maxRuleAlternatives))
    assert.strictEqual(Paths.ruleProblem("{a,b}".repeat(8)), undefined)
    assert.strictEqual(Paths.ruleProblem("/docs/.."), undefined)
  })
})
