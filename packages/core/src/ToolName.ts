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

/** The characters a name may hold that show nothing: zero-width spaces and joiners, soft hyphens, … */
const invisible = /\p{Default_Ignorable_Code_Point}/gu

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
  // lower, upper, lower: "ẞ" lowers to "ß", which uppers to "SS": each case of a name folds alike
  name.replace(invisible, "").normalize("NFKC").toLowerCase().toUpperCase().toLowerCase().normalize("NFKC").trim()

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
 * when they share one, their {@link fold} or their {@link skeleton}. A
 * check of many names keeps one map of every key seen.
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
export const keys = (name: string): readonly [fold: string, skeleton: string] => [
  `fold:${fold(name)}`,
  `skeleton:${skeleton(name)}`
]
