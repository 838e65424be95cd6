/**
 * Streaming redaction for `Pii`: the incremental redactor, which holds back
 * only the text a match still in progress could reach (at most a window of
 * it), and its runs over a stream of text chunks and over the text parts of
 * a model's response stream.
 */
import * as Response from "@effect/ai/Response"
import * as EventLoop from "@stepwise-agent/core/EventLoop"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type * as Pii from "../Pii.js"
import * as WholeCharacters from "./wholeCharacters.js"

const WHITESPACE = /\s/
const isWhitespace = (char: string | undefined): boolean => char !== undefined && WHITESPACE.test(char)
const isDigit = (char: string | undefined): boolean => char !== undefined && char >= "0" && char <= "9"

/**
 * The most text the redactor holds back without a break: past it, the text
 * is released up to a cut no match crosses (see `make`).
 */
export const WINDOW = 8192

/** A cut without a break keeps at least this much text held back: a value this long or shorter is never split. */
export const MARGIN = 1024

/**
 * The most code units a match of a pattern that can hold whitespace may
 * span (twice its characters, as a character may be two code units): the
 * redactor holds back at least this much after a cut it makes at a break
 * (see `make`). A longer one could cross a cut the window forces.
 */
export const MAX_REACH = MARGIN

/**
 * For rules whose matches can hold whitespace (so can cross a break): the
 * most code units one of their matches spans, and a scan giving a text's
 * matches (as `detect` does) with every span those rules found in it,
 * whatever the others found.
 */
export interface Crossing {
  readonly reach: number
  readonly scan: (
    text: string
  ) => { readonly matches: ReadonlyArray<Pii.PiiMatch>; readonly crossing: ReadonlyArray<Pii.Span> }
}

/**
 * Whether no match can contain both `text[at - 1]` and `text[at]`: the first
 * is whitespace, the second is not, and they are not a space between digits.
 */
const isBreak = (text: string, at: number): boolean =>
  isWhitespace(text[at - 1]) && !isWhitespace(text[at]) &&
  !(text[at - 1] === " " && isDigit(text[at - 2]) && isDigit(text[at]))

/** What a run of pushes released, one after the other. */
const joined = (a: Pii.StreamStep, b: Pii.StreamStep): Pii.StreamStep =>
  a.text.length === 0 && a.matches.length === 0
    ? b
    : { text: a.text + b.text, matches: [...a.matches, ...b.matches], state: b.state }

/**
 * A character no built-in value except a URL contains (an email's local
 * part, a card number, an address stop at it). The text after it is read
 * by the detectors as it is in the whole input, given the two characters
 * before it.
 */
const SEPARATOR = /[^0-9A-Za-z._%+-]/

/**
 * Holds back the text from the last break on and redacts each segment
 * before a break once, when the break arrives. The work per chunk is
 * proportional to the chunk plus at most a window: a chunk is checked for
 * breaks with the two characters before it kept in the state, and the
 * held-back text is only appended to (a rope), never rescanned, until it is
 * released.
 *
 * Text without a break (base64, a long run of digits) is never held back
 * past {@link WINDOW} characters: it is released up to a cut at least
 * {@link MARGIN} characters before its end that no match crosses, right
 * after a {@link SEPARATOR} when one is near, so the releases stay what
 * redacting the whole text gives for every value shorter than the margin.
 * Cut inside a run of word characters, the rest is read as if it began the
 * text (a value it ends is still found; a piece of a longer number may be
 * taken for a card). A match that crosses the cut is cut before instead,
 * unless it starts more than half a window back (then it is longer than the
 * margin): it is replaced from its start up to the end of the held-back
 * text, and the text after it up to the next whitespace (where a match ends
 * at the latest) is dropped.
 *
 * Each release is read after the two characters before it (`before`), so a
 * detector's lookbehind sees what it sees in the whole input; a match
 * starting in them belongs to the text already released.
 *
 * With `crossing` rules (patterns whose matches can hold whitespace, so
 * cross a break), each push reads the held-back text and the chunk whole,
 * and a release ends at a break only when it is at least their longest
 * match before the end and none of their matches crosses it: a value they
 * match is never split. The held-back text is then read again at each
 * release, at most a window of it.
 */
export const make = (
  detect: (text: string) => ReadonlyArray<Pii.PiiMatch>,
  apply: (text: string, matches: ReadonlyArray<Pii.PiiMatch>) => string,
  crossing?: Crossing | undefined
): Pii.StreamRedactor => {
  /** The matches of `text` read after `before`, in the coordinates of `text`. */
  const detectAfter = (before: string, text: string): Array<Pii.PiiMatch> => {
    const found: Array<Pii.PiiMatch> = []
    for (const match of detect(before + text)) {
      if (match.start < before.length) continue
      found.push({ ...match, start: match.start - before.length, end: match.end - before.length })
    }
    return found
  }
  /**
   * Releases `text` (the held-back text and the chunk) up to `cut`,
   * redacted with `given` matches (found if not given). The rest is read
   * after the two characters before it, or from scratch when not `inContext`.
   */
  const release = (
    state: Pii.StreamState,
    text: string,
    cut: number,
    last: string,
    given?: ReadonlyArray<Pii.PiiMatch>,
    inContext = true
  ): Pii.StreamStep => {
    const segment = text.slice(0, cut)
    const matches = given === undefined ? detectAfter(state.before, segment) : given.filter((m) => m.end <= cut)
    return {
      text: apply(segment, matches),
      matches: matches.map((match) => ({ ...match, start: match.start + state.offset, end: match.end + state.offset })),
      state: {
        pending: text.slice(cut),
        offset: state.offset + cut,
        last,
        before: !inContext ? "" : cut >= 2 ? text.slice(cut - 2, cut) : (state.before + segment).slice(-2),
        dropping: false
      }
    }
  }
  /** Releases a held-back text longer than the window (see `make`). */
  const cutWindow = (state: Pii.StreamState): Pii.StreamStep => {
    const text = state.pending
    const matches = detectAfter(state.before, text)
    const latest = text.length - MARGIN
    let cut = latest
    while (
      cut > latest - WINDOW / 4 &&
      !(SEPARATOR.test(text[cut - 1]!) && !WholeCharacters.isHighSurrogate(text.charCodeAt(cut - 1)))
    ) cut--
    const separated = cut > latest - WINDOW / 4
    // never between the two halves of a character: each release is whole text
    if (!separated) cut = WholeCharacters.isHighSurrogate(text.charCodeAt(latest - 1)) ? latest - 1 : latest
    const crossing = matches.find((match) => match.start < cut && cut < match.end)
    if (crossing === undefined) return release(state, text, cut, state.last, matches, separated)
    if (crossing.start >= text.length - WINDOW / 2) return release(state, text, crossing.start, state.last, matches)
    const long = { ...crossing, end: text.length, value: text.slice(crossing.start) }
    const step = release(state, text, text.length, state.last, [...matches.filter((m) => m.end <= long.start), long])
    return { ...step, state: { ...step.state, dropping: true } }
  }
  /** Drops the chunk up to its first whitespace (the rest of a long match), then pushes the rest. */
  const drop = (state: Pii.StreamState, chunk: string): Pii.StreamStep => {
    const end = chunk.search(WHITESPACE)
    const dropped = end < 0 ? chunk : chunk.slice(0, end)
    const last = (state.last + dropped).slice(-2)
    const next: Pii.StreamState = {
      pending: "",
      offset: state.offset + dropped.length,
      last,
      before: last,
      dropping: end < 0
    }
    return end < 0 ? { text: "", matches: [], state: next } : push(next, chunk.slice(end))
  }
  /**
   * `push` when some rules can match across a break (see `make`): the
   * held-back text and the chunk are read whole, and released up to the
   * last break that is at least `crossing.reach` before their end (so every
   * match that starts before it is seen whole, and the character after it)
   * and that none of those rules' matches crosses. Each rule's matches are
   * read from where the last release ended, where none of its matches in the
   * whole text was in progress, so they are its matches in the whole text.
   */
  const pushCrossing = (state: Pii.StreamState, chunk: string, crossing: Crossing): Pii.StreamStep => {
    const text = state.pending + chunk
    const last = (state.last + chunk).slice(-2)
    // `read` is `text` after the two characters before it; `at` counts in `read`
    const read = state.before + text
    const shift = state.before.length
    let step: Pii.StreamStep | undefined
    const latest = text.length - crossing.reach
    // released once at least `reach` more than the least it keeps is held, so the text read again at each
    // release is paid for by as much released: small chunks cost in proportion to their length
    if (latest >= crossing.reach && WHITESPACE.test(text)) {
      let scanned: ReturnType<Crossing["scan"]> | undefined
      // crossed[at]: a span of those rules holds both read[at - 1] and read[at] (their spans of one rule do
      // not overlap, so marking them costs at most the text's length a rule)
      let crossed: Uint8Array | undefined
      for (let at = shift + latest; at > shift && step === undefined; at--) {
        if (!isBreak(read, at)) continue
        if (scanned === undefined || crossed === undefined) {
          scanned = crossing.scan(read)
          crossed = new Uint8Array(read.length + 1)
          for (const span of scanned.crossing) if (span.start >= shift) crossed.fill(1, span.start + 1, span.end)
        }
        if (crossed[at] === 1) continue
        // the matches in the coordinates of `text` (one starting in `before` belongs to the text released)
        const matches: Array<Pii.PiiMatch> = []
        for (const match of scanned.matches) {
          if (match.start >= shift) matches.push({ ...match, start: match.start - shift, end: match.end - shift })
        }
        step = release(state, text, at - shift, last, matches)
      }
    }
    step ??= { text: "", matches: [], state: { ...state, pending: text, last } }
    return step.state.pending.length > WINDOW ? joined(step, cutWindow(step.state)) : step
  }
  const push = (state: Pii.StreamState, chunk: string): Pii.StreamStep => {
    if (state.dropping) return drop(state, chunk)
    if (crossing !== undefined) return pushCrossing(state, chunk, crossing)
    // `window` is the end of the held-back text followed by the chunk; its
    // index `at` is `shift + at` in the whole held-back text plus chunk.
    const window = state.last + chunk
    const shift = state.pending.length - state.last.length
    const last = window.slice(-2)
    // Positions before the old end were checked when they arrived (a break
    // needs the character after it), so only the new ones are scanned.
    const from = Math.max(1 - shift, state.last.length)
    let step: Pii.StreamStep | undefined
    for (let at = WHITESPACE.test(window) ? window.length - 1 : -1; at >= from && step === undefined; at--) {
      if (isBreak(window, at)) step = release(state, state.pending + chunk, shift + at, last)
    }
    step ??= { text: "", matches: [], state: { ...state, pending: state.pending + chunk, last } }
    return step.state.pending.length > WINDOW ? joined(step, cutWindow(step.state)) : step
  }
  return {
    initial: { pending: "", offset: 0, last: "", before: "", dropping: false },
    push,
    flush: (state) => release(state, state.pending, state.pending.length, state.last)
  }
}

/**
 * The longest text (or stream chunk) redacted at once: a longer one is
 * pushed through the redactor in slices of {@link SLICE}, with a turn of the
 * event loop between them.
 */
export const AT_ONCE = 65_536

/** The size of the slices a text longer than {@link AT_ONCE} is redacted in. */
export const SLICE = 16_384

/**
 * Pushes `chunk` through `step` in slices of at most `size` characters
 * (never between the two halves of a character), with a turn of the event
 * loop before each slice after the first, so other fibers and timers run and
 * an interruption takes effect between slices. The releases are those of
 * pushing `chunk` at once. `long` gets each match too long to hold back,
 * whose rest up to the next whitespace the redactor drops.
 */
export const pushSlices = <E>(
  step: Step<E>,
  state: Pii.StreamState,
  chunk: string,
  size: number,
  long: Array<Pii.PiiMatch> = []
): Effect.Effect<Pii.StreamStep, E> =>
  Effect.gen(function*() {
    let current = state
    let text = ""
    const matches: Array<Pii.PiiMatch> = []
    for (let at = 0; at < chunk.length;) {
      let end = Math.min(chunk.length, at + size)
      if (end < chunk.length && end - at > 1 && WholeCharacters.isHighSurrogate(chunk.charCodeAt(end - 1))) end--
      if (at > 0) yield* EventLoop.turn
      const released = yield* step(current, chunk.slice(at, end))
      const last = released.matches[released.matches.length - 1]
      // a match up to the end of the released text, with its rest being dropped
      if (released.state.dropping && last !== undefined && last.end === released.state.offset) long.push(last)
      text += released.text
      matches.push(...released.matches)
      current = released.state
      at = end
    }
    return { text, matches, state: current }
  })

const WHITESPACE_AFTER = /\s/g

/**
 * Redacts a whole text through `step` (a stream redactor) in slices of
 * `size` (see {@link pushSlices}): the same as redacting it at once for every
 * value up to {@link MARGIN} characters long. A longer value the redactor
 * could not hold back is taken whole, up to the next whitespace, and the
 * text is then rewritten by `apply` with the matches, so none of it is kept.
 */
export const redactSlices = <E>(
  step: Step<E>,
  initial: Pii.StreamState,
  text: string,
  options: {
    readonly size: number
    readonly apply: (text: string, matches: ReadonlyArray<Pii.PiiMatch>) => string
  }
): Effect.Effect<Pii.Redaction, E> =>
  Effect.gen(function*() {
    const long: Array<Pii.PiiMatch> = []
    const pushed = yield* pushSlices(step, initial, text, options.size, long)
    yield* EventLoop.turn
    const flushed = yield* step(pushed.state, undefined)
    const matches = [...pushed.matches, ...flushed.matches]
    if (long.length === 0) return { text: pushed.text + flushed.text, matches }
    const whole = matches.map((match) => {
      if (!long.includes(match)) return match
      WHITESPACE_AFTER.lastIndex = match.end
      const end = WHITESPACE_AFTER.test(text) ? WHITESPACE_AFTER.lastIndex - 1 : text.length
      return { ...match, end, value: text.slice(match.start, end) }
    })
    return { text: options.apply(text, whole), matches: whole }
  })

/** How many elements a redacting stage takes between turns of the event loop. */
const ELEMENTS_PER_TURN = 256

/** `f` over the elements of `self`, one by one, with a turn of the event loop every {@link ELEMENTS_PER_TURN} elements. */
const mapWithTurns = <A, E, R, B, E2>(
  self: Stream.Stream<A, E, R>,
  f: (a: A) => Effect.Effect<B, E2>
): Stream.Stream<B, E | E2, R> =>
  Stream.suspend(() => {
    let count = 0
    return Stream.mapEffect(
      self,
      (a) => ++count % ELEMENTS_PER_TURN === 0 ? Effect.zipRight(EventLoop.turn, f(a)) : f(a)
    )
  })

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
    (chunks) =>
      Stream.suspend(() => {
        let state = initial
        return mapWithTurns(chunks, (chunk) =>
          Effect.map(step(state, chunk), (result) => {
            state = result.state
            return result.text
          }))
      }),
    Stream.filter((text) => text.length > 0)
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
    return mapWithTurns(parts, onPart).pipe(
      Stream.concat(Stream.fromEffect(unfinished)),
      Stream.flattenIterables
    )
  })
