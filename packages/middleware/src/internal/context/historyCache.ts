/**
 * The per-thread history cache of `ContextEditing` and `Summarization`: what
 * a middleware learnt about a history (the messages of a thread) on one
 * model call, kept so that the next call, whose messages start with the same
 * objects, measures only the messages added since.
 *
 * A session holds the messages seen, in order, the running sums of their
 * raw token counts, and what its user derives from them (`state`, which its
 * user keeps in step with `seen`, when it needs it). Sessions are kept per counter (counts of one counter say
 * nothing of another's) and per first message object (one per thread, in
 * practice). It is a cache: what a middleware computes is the same with or
 * without it. A session in use is busy: a concurrent call on the same
 * history works on a throwaway session, so no two calls ever share one.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/** What a cache knows about one history. */
export interface Session<S> {
  /** Whether a call is using it. */
  busy: boolean
  /** The messages seen, in order: the first ones of the history. */
  readonly seen: Array<Prompt.Message>
  /** `sums[i]`: raw tokens of `seen[0..i)`. */
  readonly sums: Array<number>
  /** What the cache's user derives from `seen` (its user brings it up to date). */
  readonly state: S
}

/** The state a cache's user keeps per session. */
export interface Options<S> {
  /** The state of a session that has seen no message. */
  readonly init: () => S
}

/** The sessions of one middleware instance. */
export interface HistoryCache<S> {
  /**
   * Runs `f` on the session of `messages` (non-empty) once it has seen all of
   * them: the remembered one when it holds a prefix of them, else a new one.
   * The session is `f`'s alone until `f` ends.
   */
  readonly use: <A, E, R>(
    counter: TokenCounter.Service,
    messages: ReadonlyArray<Prompt.Message>,
    f: (session: Session<S>) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  /**
   * Remembers, and returns, a session for a history (non-empty) whose raw
   * counts are known, `raw(i)` for `messages[i]` (a history rewritten from
   * one seen).
   */
  readonly seed: (
    counter: TokenCounter.Service,
    messages: ReadonlyArray<Prompt.Message>,
    raw: (index: number) => number
  ) => Session<S>
}

/** Whether `prefix` holds the first messages of `messages` (compared by identity, newest first). */
export const isPrefix = (prefix: ReadonlyArray<Prompt.Message>, messages: ReadonlyArray<Prompt.Message>): boolean => {
  if (prefix === messages) return true
  if (prefix.length > messages.length) return false
  for (let i = prefix.length - 1; i >= 0; i--) if (prefix[i] !== messages[i]) return false
  return true
}

/** A history cache whose sessions carry the state of `options`. */
export const make = <S>(options: Options<S>): HistoryCache<S> => {
  const { init } = options
  const sessions = new WeakMap<TokenCounter.Service, WeakMap<Prompt.Message, Session<S>>>()

  const makeSession = (busy: boolean): Session<S> => ({ busy, seen: [], sums: [0], state: init() })

  const sessionsOf = (counter: TokenCounter.Service) => {
    let byFirst = sessions.get(counter)
    if (byFirst === undefined) {
      byFirst = new WeakMap()
      sessions.set(counter, byFirst)
    }
    return byFirst
  }

  /** Adds `messages[seen.length..]`, whose raw counts are `raw[0]`, `raw[1]`, …. */
  const extend = (session: Session<S>, messages: ReadonlyArray<Prompt.Message>, raw: ReadonlyArray<number>) => {
    const { seen, sums } = session
    const from = seen.length
    const to = messages.length
    // grown once, to their new length (pushing one at a time copies them as they grow)
    seen.length = to
    sums.length = to + 1
    let total = sums[from]!
    for (let i = from; i < to; i++) {
      seen[i] = messages[i]!
      total += raw[i - from]!
      sums[i + 1] = total
    }
  }

  /** The session for these messages, holding a prefix of them; marked busy. */
  const acquire = (counter: TokenCounter.Service, messages: ReadonlyArray<Prompt.Message>) => {
    const byFirst = sessionsOf(counter)
    const first = messages[0]!
    let session = byFirst.get(first)
    if (session !== undefined && session.busy) return makeSession(true)
    if (session === undefined || !isPrefix(session.seen, messages)) {
      session = makeSession(false)
      byFirst.set(first, session)
    }
    session.busy = true
    return session
  }

  const use: HistoryCache<S>["use"] = (counter, messages, f) =>
    Effect.suspend(() => {
      const session = acquire(counter, messages)
      const from = session.seen.length
      const run = messages.length > from
        ? Effect.flatMap(counter.measure(from === 0 ? messages : messages.slice(from)), (counts) => {
          extend(session, messages, counts)
          return f(session)
        })
        : f(session)
      return Effect.ensuring(
        run,
        Effect.sync(() => {
          session.busy = false
        })
      )
    })

  const seed: HistoryCache<S>["seed"] = (counter, messages, raw) => {
    const session = makeSession(false)
    const counts = new Array<number>(messages.length)
    for (let i = 0; i < messages.length; i++) counts[i] = raw(i)
    extend(session, messages, counts)
    sessionsOf(counter).set(messages[0]!, session)
    return session
  }

  return { use, seed }
}

/** Tokens of a raw count under a counter's calibration `scale`. */
export const scaled = (raw: number, scale: number): number => scale === 1 ? raw : Math.round(raw * scale)

/**
 * An approximate counter (`TokenCounter.makeApproximate`), made on first use and
 * then reused: the counter of a middleware that is not given one.
 */
export const lazyApproximate = (): Effect.Effect<TokenCounter.Service> => {
  let approximate: TokenCounter.Service | undefined
  return Effect.suspend(() =>
    approximate !== undefined
      ? Effect.succeed(approximate)
      : Effect.map(Effect.orDie(TokenCounter.makeApproximate()), (made) => approximate = made)
  )
}

/**
 * The agent's `TokenCounter` when it has one, else an approximate counter
 * made on first use: the counter of a middleware that is not given one.
 */
export const agentCounterOrApproximate = (): Effect.Effect<TokenCounter.Service> => {
  const approximate = lazyApproximate()
  return Effect.flatMap(
    Effect.serviceOption(TokenCounter.TokenCounter),
    Option.match({ onSome: Effect.succeed, onNone: () => approximate })
  )
}
