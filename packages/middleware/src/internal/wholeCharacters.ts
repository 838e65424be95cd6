/**
 * Cuts of a text at a length in UTF-16 code units that never split a
 * surrogate pair: a cut falling between its two halves moves so that the
 * pair stays whole on the side away from the cut (the piece may be one code
 * unit shorter than asked). Texts cut this way are well-formed whenever the
 * text is, so a provider that refuses lone surrogates takes them.
 */

/** Whether a UTF-16 code unit is the first half of a surrogate pair. */
export const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff

/** Whether a UTF-16 code unit is the second half of a surrogate pair. */
export const isLowSurrogate = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff

/** Whether a cut at `at` would separate the two halves of a surrogate pair. */
const splitsPair = (text: string, at: number): boolean =>
  at > 0 && at < text.length && isHighSurrogate(text.charCodeAt(at - 1)) && isLowSurrogate(text.charCodeAt(at))

/** The first `length` code units of `text`, one fewer when the last would be half a character. */
export const head = (text: string, length: number): string =>
  text.slice(0, splitsPair(text, length) ? length - 1 : length)

/** The last `length` code units of `text`, one fewer when the first would be half a character. */
export const tail = (text: string, length: number): string => {
  const start = Math.max(0, text.length - length)
  return text.slice(splitsPair(text, start) ? start + 1 : start)
}
