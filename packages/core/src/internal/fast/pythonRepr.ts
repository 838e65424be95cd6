import { lengthIn } from "./jsonLength.js"

/**
 * The length of Python's `repr` of a JSON-like value, measured without
 * building it: what LangChain Python's `count_tokens_approximately` counts
 * for the tool calls of an AI message (`len(repr(message.tool_calls))`), so
 * that the approximate counter gives the same counts.
 *
 * - a string: its code points between quotes (`'`, or `"` when it holds a
 *   `'` and no `"`), with a backslash before the quote and before `\`;
 *   `\t`, `\n`, `\r` count 2; other control characters and DEL count 4
 *   (`\x07`); a non-ASCII character that Python does not print (a control,
 *   format, surrogate, private-use, unassigned or separator character other
 *   than the space) counts 4, 6 or 10 (`\xa0`, `\u200b`, `\U000e0001`);
 * - a whole number: its digits (Python's `int`); any other number: Python's
 *   shortest `float` repr (`0.1`, `1e-05`, `1.5e+16`, `inf`, `nan`);
 * - `true` 4 (`True`), `false` 5, `null` and `undefined` 4 (`None`);
 * - an array: `[` items joined by `, ` `]`; an object: `{` `'key': value`
 *   joined by `, ` `}`, leaving out `undefined` and function properties (as
 *   JSON does); a `toJSON` method (a `Date`) is measured by what it returns;
 *   a value nested in itself counts 5 (`[...]`, `{...}`) where it repeats.
 */
export const reprLength: (value: unknown) => number = lengthIn({
  string: (text) => stringLength(text),
  number: (value) => numberLength(value),
  separator: 2,
  colon: 2,
  cycle: 5,
  other: 4
})

/**
 * The characters of Python's repr of one tool call, `{'name': …, 'args': …,
 * 'id': …, 'type': 'tool_call'}`, given the length of its arguments' repr.
 */
export const toolCallReprLength = (name: string, argsLength: number, id: string): number =>
  // {'name': , 'args': , 'id': , 'type': 'tool_call'} without the three values
  49 + stringLength(name) + argsLength + stringLength(id)

const plainAscii = /^[\x20-\x26\x28-\x5b\x5d-\x7e]*$/
const unprintable = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u

const stringLength = (text: string): number => {
  // the common case: printable ASCII with no quote and no backslash
  if (plainAscii.test(text)) return text.length + 2
  const single = text.includes("'")
  const double = text.includes("\"")
  const escapedQuote = single && double ? "'" : undefined
  let length = 2
  for (const character of text) {
    const code = character.codePointAt(0)!
    if (character === "\\" || character === escapedQuote) length += 2
    else if (code === 9 || code === 10 || code === 13) length += 2
    else if (code < 0x20 || code === 0x7f) length += 4
    else if (code < 0x7f) length += 1
    else if (!unprintable.test(character)) length += 1
    else length += code <= 0xff ? 4 : code <= 0xffff ? 6 : 10
  }
  return length
}

const floatLength = (value: number): number => {
  if (Number.isNaN(value)) return 3
  if (!Number.isFinite(value)) return value > 0 ? 3 : 4
  const sign = value < 0 || Object.is(value, -0) ? 1 : 0
  // JavaScript's and Python's shortest round-trip digits are the same; only the layout differs
  const [mantissa, exponentText] = Math.abs(value).toExponential().split("e") as [string, string]
  const digits = mantissa.replace(".", "").length
  const exponent = Number(exponentText)
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) return sign + 2 + (-exponent - 1) + digits // 0.000123
    return sign + (digits > exponent + 1 ? digits + 1 : exponent + 1 + 2) // 12.5, 120.0
  }
  // 1.5e+16, 1e-05: at least two digits of exponent
  return sign + digits + (digits > 1 ? 1 : 0) + 2 + Math.max(2, String(Math.abs(exponent)).length)
}

const numberLength = (value: number): number => {
  if (Number.isInteger(value)) {
    // Python's int prints every digit
    return Math.abs(value) < 1e21
      ? String(value).length
      : (value < 0 ? 1 : 0) + Math.floor(Math.log10(Math.abs(value))) + 1
  }
  return floatLength(value)
}
