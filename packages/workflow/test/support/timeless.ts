/**
 * `text` (JSON, or JSON quoted in JSON) with the values of its time fields
 * (`decidedAt`, `startedAt`, `durationMillis`, …) written `0`: a test that
 * looks for a card number's digits ("1111") must not find them in a clock's
 * reading (a random CI run's `decidedAt` held them).
 */
export const timeless = (text: string): string => text.replace(/(\\*"\w*(?:At|Millis)\\*"\s*:\s*)\d+(?:\.\d+)?/g, "$10")
