/**
 * The watchers of an agent's runs: each gets every event published while it
 * watches, in order, through a `Mailbox` of its own. Closing a watcher's
 * scope ends its stream once it has taken what was published before the
 * close, so a consumer that outlives the scope (an inspector flushing its
 * pages) loses no event; closing the agent's scope ends every watcher's
 * stream so.
 *
 * A `Mailbox` per watcher rather than a `PubSub`: a subscription to a
 * `PubSub` is shut down with its scope, dropping what it has not taken yet.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Mailbox from "effect/Mailbox"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"

export interface Watchers<A> {
  /** How many watch now: a run that starts while none does publishes nothing. */
  readonly size: () => number
  /** Hands `event` to every watcher. */
  readonly publish: (event: A) => void
  /** A stream of the events published while the scope (and the agent's) is open. */
  readonly watch: Effect.Effect<Stream.Stream<A>, never, Scope.Scope>
}

/** The watchers of one agent, ended when the agent's scope closes. */
export const make = <A>(): Effect.Effect<Watchers<A>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const all = new Set<Mailbox.Mailbox<A>>()
    let open = true
    const end = (mailbox: Mailbox.Mailbox<A>) => {
      all.delete(mailbox)
      mailbox.unsafeDone(Exit.void)
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        open = false
        all.forEach(end)
      })
    )
    const publish = (event: A) => {
      for (const mailbox of all) mailbox.unsafeOffer(event)
    }
    const watch = Effect.acquireRelease(
      Effect.map(Mailbox.make<A>(), (mailbox) => {
        if (open) all.add(mailbox)
        else mailbox.unsafeDone(Exit.void)
        return mailbox
      }),
      (mailbox) => Effect.sync(() => end(mailbox))
    ).pipe(Effect.map(Mailbox.toStream))
    return { size: () => all.size, publish, watch }
  })
