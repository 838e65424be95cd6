/**
 * The inspector's memory: a numbered, bounded log of what the page shows
 * (agent events, thread summaries), and its tails as server-sent events.
 * Each page reads the log from where it is (the start, or the
 * `Last-Event-ID` of a reconnect) and then follows it live, so a page opened
 * late sees the whole run and a reconnecting page misses nothing.
 */
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { stringify } from "./wire.js"

export interface EventLog {
  /** Appends an entry (numbered `seq`); the oldest entry goes when the log is full. */
  readonly append: (entry: Record<string, unknown>) => Effect.Effect<void>
  /**
   * The log after entry `after`, then each new entry, as server-sent event
   * frames: `hello` (with `reset` when entries the page had seen or missed
   * are gone), batches of entries (`id` = the last `seq`), and `closed` when
   * the inspector stops.
   */
  readonly frames: (after: number) => Stream.Stream<string>
  /** Ends every tail once it has sent what the log holds; waits for them up to `timeout`. */
  readonly close: (timeout: Duration.DurationInput) => Effect.Effect<void>
}

const batchSize = 500

export const make = (maxEntries: number): Effect.Effect<EventLog> =>
  Effect.sync(() => {
    let entries: Array<string> = []
    let start = 0
    // seq of entries[start]; the log holds seq first .. latest
    let first = 1
    let latest = 0
    let wake = Deferred.unsafeMake<void>(FiberId.none)
    let closed = false
    let active = 0
    const idle = Deferred.unsafeMake<void>(FiberId.none)

    const notify = () => {
      const woken = wake
      wake = Deferred.unsafeMake<void>(FiberId.none)
      Deferred.unsafeDone(woken, Exit.void)
    }

    const append = (entry: Record<string, unknown>) =>
      Effect.sync(() => {
        latest++
        entries.push(stringify({ seq: latest, ...entry }))
        if (entries.length - start > maxEntries) {
          start++
          first++
          if (start >= 1024 && start * 2 >= entries.length) {
            entries = entries.slice(start)
            start = 0
          }
        }
        notify()
      })

    const frames = (after: number): Stream.Stream<string> =>
      Stream.suspend(() => {
        active++
        // A cursor from another inspector (a restart) or before what the log still holds starts over.
        const reset = after > latest || (after > 0 && after < first - 1)
        let cursor = reset ? first - 1 : Math.max(after, first - 1)
        let ended = false
        const pull: Effect.Effect<string, Option.Option<never>> = Effect.suspend(() => {
          if (ended) return Effect.fail(Option.none())
          if (cursor < first - 1) {
            cursor = first - 1
            return Effect.succeed(`event: reset\ndata: {}\n\n`)
          }
          if (cursor < latest) {
            const from = start + (cursor - first + 1)
            const batch = entries.slice(from, Math.min(from + batchSize, entries.length))
            cursor += batch.length
            return Effect.succeed(`id: ${cursor}\ndata: [${batch.join(",")}]\n\n`)
          }
          if (closed) {
            ended = true
            return Effect.succeed(`event: closed\ndata: {}\n\n`)
          }
          return Effect.zipRight(Deferred.await(wake), pull)
        })
        return Stream.concat(
          Stream.succeed(`retry: 1000\nevent: hello\ndata: ${stringify({ reset, latest })}\n\n`),
          Stream.repeatEffectOption(pull)
        ).pipe(
          Stream.ensuring(Effect.sync(() => {
            active--
            if (closed && active === 0) Deferred.unsafeDone(idle, Exit.void)
          }))
        )
      })

    const close = (timeout: Duration.DurationInput) =>
      Effect.suspend(() => {
        closed = true
        notify()
        return active === 0 ? Effect.void : Effect.asVoid(Effect.timeoutOption(Deferred.await(idle), timeout))
      })

    return { append, frames, close }
  })
