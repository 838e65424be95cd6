/**
 * Streaming redaction for `Pii`: the incremental redactor, which holds back
 * only the text a match still in progress could reach, and its runs over a
 * stream of text chunks and over the text parts of a model's response stream.
 */
import * as Response from "@effect/ai/Response"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type * as Pii from "../Pii.js"

const WHITESPACE = /\s/
const isWhitespace = (char: string | undefined): boolean => char !== undefined && WHITESPACE.test(char)
const isDigit = (char: string | undefined): boolean => char !== undefined && char >= "0" && char <= "9"

/**
 * Whether no match can contain both `text[at - 1]` and `text[at]`: the first
 * is whitespace, the second is not, and they are not a space between digits.
 */
const isBreak = (text: string, at: number): boolean =>
  isWhitespace(text[at - 1]) && !isWhitespace(text[at]) &&
  !(text[at - 1] === " " && isDigit(text[at - 2]) && isDigit(text[at]))

/**
 * Holds back the text from the last break on and redacts each segment
 * before a break once, when the break arrives. The work per chunk is
 * proportional to the chunk (plus the segment it releases): a chunk is
 * checked for breaks with the two characters before it kept in the state,
 * and the held-back text is only appended to (a rope), never rescanned.
 */
export const make = (redact: (text: string) => Pii.Redaction): Pii.StreamRedactor => {
  const release = (state: Pii.StreamState, text: string, cut: number): Pii.StreamStep => {
    const segment = redact(text.slice(0, cut))
    return {
      text: segment.text,
      matches: segment.matches.map((match) => ({
        ...match,
        start: match.start + state.offset,
        end: match.end + state.offset
      })),
      state: { pending: text.slice(cut), offset: state.offset + cut, last: text.slice(Math.max(cut, text.length - 2)) }
    }
  }
  return {
    initial: { pending: "", offset: 0, last: "" },
    push: (state, chunk) => {
      // `window` is the end of the held-back text followed by the chunk; its
      // index `at` is `shift + at` in the whole held-back text plus chunk.
      const window = state.last + chunk
      const shift = state.pending.length - state.last.length
      // Positions before the old end were checked when they arrived (a break
      // needs the character after it), so only the new ones are scanned.
      const from = Math.max(1 - shift, state.last.length)
      for (let at = WHITESPACE.test(window) ? window.length - 1 : -1; at >= from; at--) {
        if (isBreak(window, at)) return release(state, state.pending + chunk, shift + at)
      }
      return {
        text: "",
        matches: [],
        state: { pending: state.pending + chunk, offset: state.offset, last: window.slice(-2) }
      }
    },
    flush: (state) => release(state, state.pending, state.pending.length)
  }
}

/** One step of a redactor: `push` a chunk, or `flush` when it is `undefined`. */
export type Step<E> = (state: Pii.StreamState, chunk: string | undefined) => Effect.Effect<Pii.StreamStep, E>

/** The releases of `step` over the chunks of `self` and a final flush; empty releases are dropped. */
export const chunks = <E, R, E2>(
  self: Stream.Stream<string, E, R>,
  initial: Pii.StreamState,
  step: Step<E2>
): Stream.Stream<string, E | E2, R> =>
  Stream.concat(
    self.pipe(Stream.map((chunk): string | undefined => chunk)),
    Stream.make(undefined)
  ).pipe(
    Stream.mapAccumEffect(initial, (state, chunk) =>
      Effect.map(step(state, chunk), (result) => [result.state, result.text] as const)),
    Stream.filter((text) =>
      text.length > 0
    )
  )

/**
 * Redacts the text parts of a model's response stream as they arrive: one
 * redactor state per text id, released into redacted `text-delta` parts. A
 * part's `text-start` is sent with its first release, so a part that
 * releases nothing is dropped. At a `text-end` the held-back tail may be the
 * start of a value the next part goes on with: the end is held until the
 * next part comes. If it is a `text-start`, the tail and its state move into
 * that part; otherwise (and at the end of the stream) the tail is flushed
 * into its own part, then the end is sent. A text the provider never ended
 * is flushed at the end of the stream. Other parts pass through. `onClose`
 * gets the text each sent part released, when it is closed. Each run of the
 * stream starts afresh.
 */
export const textParts = <E, R, E2>(
  parts: Stream.Stream<Response.AnyPart, E, R>,
  options: {
    readonly initial: Pii.StreamState
    readonly step: Step<E2>
    readonly onClose: (text: string) => void
  }
): Stream.Stream<Response.AnyPart, E | E2, R> =>
  Stream.suspend(() => {
    const { initial, onClose, step } = options
    const states = new Map<string, Pii.StreamState>()
    const released = new Map<string, string>()
    const unsent = new Map<string, Response.TextStartPart>()
    let ended: Response.TextEndPart | undefined
    type Parts = Effect.Effect<ReadonlyArray<Response.AnyPart>, E2>
    /** Pushes a chunk (or flushes, when `undefined`) and sends what it releases. */
    const release = (id: string, chunk: string | undefined, metadata: Response.TextDeltaPart["metadata"]): Parts =>
      Effect.flatMap(step(states.get(id) ?? initial, chunk), (result) => {
        states.set(id, result.state)
        if (result.text.length === 0) return Effect.succeed([])
        const start = unsent.get(id)
        unsent.delete(id)
        released.set(id, (released.get(id) ?? "") + result.text)
        const delta = Response.makePart("text-delta", { id, delta: result.text, metadata })
        return Effect.succeed(start === undefined ? [delta] : [start, delta])
      })
    /** Closes a text whose releases are over: it goes to `onClose` and is ended, or dropped if it released nothing. */
    const close = (id: string, end: Response.TextEndPart | undefined): ReadonlyArray<Response.AnyPart> => {
      const text = released.get(id)
      const dropped = unsent.has(id)
      states.delete(id)
      released.delete(id)
      unsent.delete(id)
      if (dropped) return []
      onClose(text ?? "")
      return end === undefined ? [] : [end]
    }
    /** Flushes the tail of the text that ended last into its own part, and ends it. */
    const flushEnded: Parts = Effect.suspend(() => {
      const end = ended
      ended = undefined
      return end === undefined
        ? Effect.succeed([])
        : Effect.map(release(end.id, undefined, {}), (tail) => [...tail, ...close(end.id, end)])
    })
    const onPart = (part: Response.AnyPart): Parts =>
      Effect.suspend(() => {
        switch (part.type) {
          case "text-start": {
            const end = ended
            ended = undefined
            const state = end === undefined ? undefined : states.get(end.id)
            const closed = end === undefined ? [] : close(end.id, end)
            states.set(part.id, state ?? initial)
            released.delete(part.id)
            unsent.set(part.id, part)
            return Effect.succeed(closed)
          }
          case "text-delta":
            return Effect.zipWith(flushEnded, release(part.id, part.delta, part.metadata), (a, b) => [...a, ...b])
          case "text-end": {
            if (!states.has(part.id)) return Effect.map(flushEnded, (before) => [...before, part])
            return Effect.map(flushEnded, (before) => {
              ended = part
              return before
            })
          }
          default:
            return Effect.map(flushEnded, (before) => [...before, part])
        }
      })
    const unfinished: Parts = Effect.zipWith(
      flushEnded,
      Effect.suspend(() =>
        Effect.forEach([...states.keys()], (id) =>
          Effect.map(release(id, undefined, {}), (tail) => [...tail, ...close(id, undefined)]))
      ),
      (before, tails) => [...before, ...tails.flat()]
    )
    return parts.pipe(
      Stream.mapEffect(onPart),
      Stream.concat(Stream.fromEffect(unfinished)),
      Stream.flattenIterables
    )
  })
