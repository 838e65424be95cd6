import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import { asciiSplitter, patterns } from "../src/internal/fast/asciiSplit.js"

type Encoding = keyof typeof patterns

/** The pieces of `text`: the splitter's where it answers, the regular expression's where it gives up (-1). */
const split = (encoding: Encoding, text: string): { readonly pieces: Array<string>; readonly fallbacks: number } => {
  const regex = new RegExp(patterns[encoding], "gu")
  const scan = asciiSplitter(patterns[encoding])!
  const pieces: Array<string> = []
  let fallbacks = 0
  let at = 0
  while (at < text.length) {
    const end = scan(text, at)
    if (end >= 0) {
      assert.isAbove(end, at)
      pieces.push(text.slice(at, end))
      at = end
      continue
    }
    fallbacks++
    regex.lastIndex = at
    const match = regex.exec(text)
    if (match === null) break
    pieces.push(match[0])
    at = regex.lastIndex
  }
  return { pieces, fallbacks }
}

const regexSplit = (encoding: Encoding, text: string) => text.match(new RegExp(patterns[encoding], "gu")) ?? []

const asciiUnits = FastCheck.oneof(
  FastCheck.integer({ min: 0, max: 127 }).map((c) => String.fromCharCode(c)),
  FastCheck.constantFrom(
    "a",
    "Z",
    "s",
    "S",
    "t",
    "l",
    "L",
    "v",
    "e",
    "E",
    "r",
    "d",
    "m",
    "M",
    "'",
    "'s",
    "'ll",
    "'VE",
    "'Re",
    "7",
    "42",
    "1234",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\n\n",
    "\v",
    "\f",
    "/",
    "//",
    ".",
    "_",
    "(",
    "\u0000",
    "\u007f"
  )
)
/** Characters past ASCII of every class the patterns name: letters (Lu, Ll, Lt, Lm, Lo), marks, digits, spaces, others. */
const nonAsciiUnits = FastCheck.constantFrom(
  "é",
  "É",
  "ǅ",
  "ʰ",
  "中",
  "\u0301",
  "٣",
  "½",
  "\u00a0",
  "\u2028",
  "\u3000",
  "\ufeff",
  "\u0085",
  "🚀",
  "\ud800",
  "’",
  "—"
)
const ascii = FastCheck.array(asciiUnits, { maxLength: 60 }).map((units) => units.join(""))
const mixed = FastCheck.array(FastCheck.oneof(asciiUnits, asciiUnits, nonAsciiUnits), { maxLength: 60 })
  .map((units) => units.join(""))

describe("asciiSplitter", () => {
  for (const encoding of ["cl100k_base", "o200k_base"] as const) {
    it.prop(
      `${encoding}: splits ASCII text as the regular expression does, without falling back`,
      { text: ascii },
      ({ text }) => {
        const { fallbacks, pieces } = split(encoding, text)
        assert.deepStrictEqual(pieces, regexSplit(encoding, text))
        assert.strictEqual(fallbacks, 0)
      },
      { fastCheck: { numRuns: 2000 } }
    )

    it.prop(
      `${encoding}: splits any text as the regular expression does, falling back on characters past ASCII`,
      {
        text: FastCheck.oneof(
          mixed,
          FastCheck.fullUnicodeString({ maxLength: 40 }),
          FastCheck.string({ unit: "binary" })
        )
      },
      ({ text }) => {
        assert.deepStrictEqual(split(encoding, text).pieces, regexSplit(encoding, text))
      },
      { fastCheck: { numRuns: 2000 } }
    )
  }

  it("answers only for the two patterns it reproduces", () => {
    assert.isDefined(asciiSplitter(patterns.cl100k_base))
    assert.isDefined(asciiSplitter(patterns.o200k_base))
    assert.isUndefined(asciiSplitter(patterns.cl100k_base.replace("{1,3}", "{1,4}")))
  })

  it("reads the rules of each pattern", () => {
    const cases: ReadonlyArray<readonly [Encoding, string, ReadonlyArray<string>]> = [
      ["cl100k_base", "don't I'LL  go\n\n 1234567 x//\n", [
        "don",
        "'t",
        " I",
        "'LL",
        " ",
        " go",
        "\n\n",
        " ",
        "123",
        "456",
        "7",
        " x",
        "//\n"
      ]],
      ["o200k_base", "don't HTMLParser fooBar  x//\n \n", [
        "don't",
        " HTMLParser",
        " foo",
        "Bar",
        " ",
        " x",
        "//\n",
        " \n"
      ]],
      ["cl100k_base", "end  \n  ", ["end", "  \n  "]],
      ["o200k_base", "end  \n  ", ["end", "  \n", "  "]]
    ]
    for (const [encoding, text, pieces] of cases) {
      assert.deepStrictEqual(split(encoding, text).pieces, pieces, `${encoding} ${JSON.stringify(text)}`)
      assert.deepStrictEqual(regexSplit(encoding, text), pieces)
    }
  })
})
