/**
 * Tool names as a person reads them. Two names that differ only in case,
 * Unicode form, width, invisible characters or spaces at either end look the
 * same to whoever approves a call: `Agent.make` refuses an agent whose tools
 * have two such names (`AgentError.ToolNameClash`), and `McpToolkit.make` a
 * server that lists two.
 *
 * @since 0.1.0
 */

/** The characters a name may hold that show nothing: zero-width spaces and joiners, soft hyphens, … */
const invisible = /\p{Default_Ignorable_Code_Point}/gu

/**
 * A tool name as a reader takes it: without invisible characters (Unicode's
 * default-ignorable code points: zero-width spaces and joiners, soft
 * hyphens, variation selectors), in NFKC form (a precomposed and a
 * decomposed accent, full-width and ASCII letters alike), case folded, and
 * without spaces at either end. Two names with the same fold read the same.
 * Letters of other scripts that only look alike (Cyrillic `е` and Latin `e`)
 * fold apart.
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
