/**
 * The per-thread history cache of `ContextEditing` and `Summarization`: what
 * a middleware learnt about a history (the messages of a thread) on one
 * model call, kept so that the next call, whose messages start with the same
 * objects, measures only the messages added since.
 *
 * A session holds the last history seen (the array and how many of its
 * messages were seen: an array the agent made may grow in place), the
 * running sums of their raw token counts, and what its user derives from
 * them (`state`, which its user keeps in step with the session). Sessions
 * are kept per counter (counts of one counter say nothing of another's) and
 * per first message object (one per thread, in practice). A call finds how
 * many messages its history shares with the session's
 * (`AgentState.sharedPrefix`: read from the agent's records of which thread
 * it made from which, so a step of the loop, or a run continuing a stored
 * thread, looks at no message it has seen), keeps what the session knows of
 * those and measures the rest: a run that forks a thread (its input after
 * the stored messages, where the last run had its own) measures only its new
 * messages. It is a cache: what a middleware computes is the same with or
 * without it. A session in use is busy: a concurrent call on the same
 * history works on a throwaway session, so no two calls ever share one.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as AgentState from "@stepwise-agent/core/AgentState"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/** What a cache knows about one history. */
export interface Session<S> {
  /** Whether a call is using it. */
  busy: boolean
  /** The last history seen: its first {@link length} messages are the ones seen. */
  last: ReadonlyArray<Prompt.Message>
  /** How many messages were seen. */
  length: number
  /** `sums[i]`: raw tokens of the first `i` messages seen (`length + 1` entries). */
  readonly sums: Array<number>
  /** What the cache's user derives from the messages seen (its user brings it up to date). */
  readonly state: S
}

/** The state a cache's user keeps per session. */
export interface Options<S> {
  /** The state of a session that has seen no message. */
  readonly init: () => S
  /**
   * Makes `state` hold only what it derived from the first `length` messages
   * seen: `messages`, the history of the call, shares only those with the
   * last one (`sums`, the session's running sums, are kept up to them).
   */
  readonly truncate: (
    state: S,
    length: number,
    messages: ReadonlyArray<Prompt.Message>,
    sums: ReadonlyArray<number>
  ) => void
  /**
   * Called on `messages[from..to)` right after they are measured, in order:
   * a history with many new messages is measured in chunks of
   * {@link chunk}, so a pass its user makes over the new messages can be
   * made here, while they are still in the processor's cache.
   */
  readonly measured?:
    | ((state: S, messages: ReadonlyArray<Prompt.Message>, from: number, to: number) => void)
    | undefined
  /** The size of those chunks ({@link chunk} unless given; at least 1). */
  readonly chunk?: number | undefined
}

/** The sessions of one middleware instance. */
export interface HistoryCache<S> {
  /**
   * Runs `f` on the session of `messages` (non-empty) once it has seen all of
   * them: the remembered one, kept up to the messages it shares with them,
   * else a new one. The session is `f`'s alone until `f` ends.
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

/** How many of the first `length` messages of `last` start `messages` too (the same objects). */
export const shared = (
  last: ReadonlyArray<Prompt.Message>,
  length: number,
  messages: ReadonlyArray<Prompt.Message>
): number =>
  // the loop passes the same array again, or a longer one made from it (read from its records)
  last === messages ? Math.min(length, messages.length) : Math.min(length, AgentState.sharedPrefix(last, messages))

/** Whether `prefix` holds the first messages of `messages` (the same objects). */
export const isPrefix = (prefix: ReadonlyArray<Prompt.Message>, messages: ReadonlyArray<Prompt.Message>): boolean =>
  prefix.length <= messages.length && shared(prefix, prefix.length, messages) === prefix.length

/**
 * How many messages a history cache whose user passes over the new messages
 * (`Options.measured`) measures at a time: a few hundred messages of a
 * thread fit in a processor's cache, and each chunk costs a `measure` call
 * and a copy of its part of the array.
 */
export const chunk = 512

/** A history cache whose sessions carry the state of `options`. */
export const make = <S>(options: Options<S>): HistoryCache<S> => {
  const { init, measured, truncate } = options
  const size = Math.max(1, options.chunk ?? chunk)
  const sessions = new WeakMap<TokenCounter.Service, WeakMap<Prompt.Message, Session<S>>>()

  const makeSession = (busy: boolean): Session<S> => ({ busy, last: [], length: 0, sums: [0], state: init() })

  const sessionsOf = (counter: TokenCounter.Service) => {
    let byFirst = sessions.get(counter)
    if (byFirst === undefined) {
      byFirst = new WeakMap()
      sessions.set(counter, byFirst)
    }
    return byFirst
  }

  /** Adds `messages[session.length..session.length + raw.length)`, whose raw counts are `raw[0]`, `raw[1]`, …. */
  const extend = (session: Session<S>, messages: ReadonlyArray<Prompt.Message>, raw: ReadonlyArray<number>) => {
    const { sums } = session
    let total = sums[session.length]!
    for (let i = 0; i < raw.length; i++) {
      total += raw[i]!
      sums.push(total)
    }
    session.last = messages
    session.length += raw.length
  }

  /** Measures `messages[session.length..]` into the session: at once, or in chunks with `measured` after each. */
  const measureRest = (
    counter: TokenCounter.Service,
    session: Session<S>,
    messages: ReadonlyArray<Prompt.Message>
  ): Effect.Effect<void> => {
    const from = session.length
    const to = measured === undefined ? messages.length : Math.min(messages.length, from + size)
    return Effect.flatMap(
      counter.measure(from === 0 && to === messages.length ? messages : messages.slice(from, to)),
      (counts) => {
        extend(session, messages, counts)
        measured?.(session.state, messages, from, to)
        return to < messages.length ? measureRest(counter, session, messages) : Effect.void
      }
    )
  }

  /** The session for these messages, holding a prefix of them; marked busy. */
  const acquire = (counter: TokenCounter.Service, messages: ReadonlyArray<Prompt.Message>) => {
    const byFirst = sessionsOf(counter)
    const first = messages[0]!
    let session = byFirst.get(first)
    if (session !== undefined && session.busy) return makeSession(true)
    if (session === undefined) {
      session = makeSession(false)
      byFirst.set(first, session)
    } else {
      const kept = shared(session.last, session.length, messages)
      if (kept < session.length) {
        // keep what the session knows of the messages both histories share (at least the first)
        session.sums.length = kept + 1
        session.length = kept
        truncate(session.state, kept, messages, session.sums)
      }
      // (the messages seen are the first `kept` of both: the new history stands for them)
      session.last = messages
    }
    session.busy = true
    return session
  }

  const use: HistoryCache<S>["use"] = (counter, messages, f) =>
    Effect.suspend(() => {
      const session = acquire(counter, messages)
      const run = messages.length > session.length
        ? Effect.flatMap(measureRest(counter, session, messages), () => f(session))
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
