/**
 * Tool names as a person reads them. Two names that differ only in case,
 * Unicode form, width, invisible characters or spaces at either end, or in
 * letters that look alike (Cyrillic `е` for Latin `e`, capital `I` for `l`)
 * look the same to whoever approves a call: `Agent.make` refuses an agent
 * whose tools have two such names (`AgentError.ToolNameClash`), and
 * `McpToolkit.make` a server that lists two.
 *
 * @since 0.1.0
 */
import confusables from "unhomoglyph/data.json" with { type: "json" }

/** The characters a name may hold that show nothing: zero-width spaces and joiners, soft hyphens, the braille blank, … */
const invisible = /[\p{Default_Ignorable_Code_Point}\u2800]/gu

/**
 * The longest tool name, in UTF-16 code units, that a check reads: far past
 * what providers take (64 to 128 characters), short enough that normalizing
 * it (quadratic in runs of combining marks) stays instant.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxLength = 1024

/** Controls: C0 and C1, and the bidirectional marks, embeddings, overrides and isolates that reorder what is shown. */
const controls = /[\p{Cc}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u

/**
 * Why `name` cannot be a tool's name, or `undefined` when it can: longer than
 * {@link maxLength}, empty once invisible characters and spaces at either end
 * are left out, or holding a control character — among them the
 * bidirectional controls that show a name reordered (`"\u202eelif_daer"`
 * shows as `read_file`). Check a name with it before {@link keys}.
 *
 * @example
 * ```ts
 * import { ToolName } from "@stepwise-agent/core"
 *
 * ToolName.problemOf("read_file") // undefined
 * ToolName.problemOf("\u200b") // "it is empty once invisible characters and spaces are left out"
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const problemOf = (name: string): string | undefined => {
  if (name.length > maxLength) return `it is longer than ${maxLength} characters`
  if (controls.test(name)) return "it holds a control character (a bidirectional control reorders what is shown)"
  if (fold(name) === "") return "it is empty once invisible characters and spaces are left out"
  return undefined
}

/**
 * A tool name as a reader takes it: without invisible characters (Unicode's
 * default-ignorable code points: zero-width spaces and joiners, soft
 * hyphens, variation selectors), in NFKC form (a precomposed and a
 * decomposed accent, full-width and ASCII letters alike), case folded, and
 * without spaces at either end. Two names with the same fold read the same.
 * Letters that only look alike (Cyrillic `е` and Latin `e`) fold apart:
 * {@link skeleton} is what they share.
 *
 * @example
 * ```ts
 * import { ToolName } from "@stepwise-agent/core"
 *
 * ToolName.fold("Ｒｅａｄ_File\u200b ") // "read_file"
 * ToolName.fold("re\u0301sume\u0301") === ToolName.fold("résumé") // true
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const fold = (name: string): string =>
  // cased in its decomposed form (as Unicode's caseless matching does: an iota subscript that upper-cases to a
  // letter comes after the accents it carries, in any form of the name), lower, upper, lower ("ẞ" lowers to "ß",
  // which uppers to "SS": each case of a name folds alike), then composed
  name.replace(invisible, "").normalize("NFKD").toLowerCase().toUpperCase().toLowerCase().normalize("NFKC").trim()

/**
 * A name as a JSON string with every character outside printable ASCII
 * escaped (`\u200b`), so that two names with one fold look different in a
 * message.
 *
 * @example
 * ```ts
 * import { ToolName } from "@stepwise-agent/core"
 *
 * ToolName.quote("del\u200bete") // '"del\\u200bete"'
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const quote = (name: string): string =>
  JSON.stringify(name).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

/** Unicode's confusables (UTS #39), as the `unhomoglyph` package keeps them: a code point to its prototype. */
const prototypes: Readonly<Record<string, string>> = confusables

/**
 * A tool name as it looks: its skeleton (Unicode Technical Standard #39),
 * each character that can be mistaken for another replaced by their common
 * prototype (Unicode's confusables table: Cyrillic `е` and Latin `e`,
 * capital `I`, `l` and `1`, `m` and `rn`), after invisible characters are
 * left out, in NFD form, without spaces at either end. Two names with the
 * same skeleton look alike in some font. Case is kept: {@link keys} pairs it
 * with {@link fold}.
 *
 * @example
 * ```ts
 * import { ToolName } from "@stepwise-agent/core"
 *
 * ToolName.skeleton("r\u0435ad_file") === ToolName.skeleton("read_file") // true (Cyrillic е)
 * ToolName.skeleton("read_fiIe") === ToolName.skeleton("read_file") // true (capital I)
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const skeleton = (name: string): string => {
  let mapped = ""
  for (const character of name.replace(invisible, "").normalize("NFD")) {
    mapped += Object.hasOwn(prototypes, character) ? prototypes[character] : character
  }
  return mapped.normalize("NFD").trim()
}

/**
 * The keys under which a name is compared with others: two names read alike
 * when they share one: their {@link fold}, or the folded {@link skeleton} of
 * the name, of its capitals or of its small letters (so `"R\u0435ad_file"`,
 * a capital and a Cyrillic `е`, meets `"read_file"`). A check of many names
 * keeps one map of every key seen; check a name with {@link problemOf}
 * first (keys of a very long name are slow to compute).
 *
 * @example
 * ```ts
 * import { ToolName } from "@stepwise-agent/core"
 *
 * const seen = new Map<string, string>()
 * const twinOf = (name: string) => {
 *   const keys = ToolName.keys(name)
 *   const twin = keys.map((key) => seen.get(key)).find((found) => found !== undefined)
 *   for (const key of keys) seen.set(key, name)
 *   return twin
 * }
 * twinOf("read_file") // undefined
 * twinOf("Read_File") // "read_file"
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const keys = (name: string): ReadonlyArray<string> => {
  // the skeletons of the name as it is and of its capitals and small letters, folded: a name that changes case and
  // swaps a look-alike letter at once ("R\u0435ad_file", "DELETE_FlLE") meets the other's in one of them
  const looks = new Set(
    [skeleton(name), skeleton(name.toUpperCase()), skeleton(name.toLowerCase())].map((look) => `look:${fold(look)}`)
  )
  return [`fold:${fold(name)}`, ...looks]
}
