/**
 * The messages sent to the threads of one agent (`send`) that no run has
 * taken in yet: per thread, the steer messages waiting for the next model
 * step of a run, the queued ones waiting for a run of their own, and how many
 * runs of the thread are going. A run holds a lease on its thread's inbox;
 * when it ends, every message it took in learns how. A thread's inbox lives
 * while a run holds it or a message waits in it.
 *
 * The inboxes live in the agent's scope: when it closes, what waits with no
 * run going (held for a thread that waits for a decision, or handed on by an
 * interrupted run) fails, as does what a run interrupted later hands on, since
 * no run of a closed agent would take it in.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import { ThreadStateError } from "../AgentError.js"
import type * as AgentResult from "../AgentResult.js"

/** How a sent message joins its thread. */
export type Mode = "steer" | "queue"

/** One `send`: its messages, and the outcome of the run that takes them in. */
export interface Entry {
  readonly mode: Mode
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly taken: Deferred.Deferred<AgentResult.AgentResult<any>, unknown>
}

/** The inbox of one thread. */
export interface ThreadInbox {
  /** Runs of the thread going now (at most one holds its lock). */
  active: number
  /** Steer messages, in send order, for the next model step of the running run. */
  readonly steered: Array<Entry>
  /** Queued messages, in send order, each for a run of its own. */
  readonly queued: Array<Entry>
  /**
   * Messages an interrupted run had taken in (a durable run suspends that
   * way while it waits): their senders wait for the next run of the thread.
   */
  readonly carried: Array<Entry>
}

/** One run's hold on its thread's inbox, and the messages it took in. */
export interface Lease {
  readonly threadId: string
  readonly box: ThreadInbox
  readonly taken: Array<Entry>
}

/**
 * Whether the end of a run lets the next run of its thread start: a result or
 * a failure does, unless the run ended waiting for a decision (`Interrupted`)
 * or was interrupted itself (a durable run suspends that way).
 */
export const letsNextStart = (exit: Exit.Exit<unknown, unknown>): boolean =>
  Exit.isSuccess(exit)
    ? !(typeof exit.value === "object" && exit.value !== null && "_tag" in exit.value &&
      exit.value._tag === "Interrupted")
    : !Exit.isInterrupted(exit)

/** Whether steer messages wait for the lease's run. */
export const hasSteered = (lease: Lease): boolean => lease.box.steered.length > 0

/** Takes the steer messages waiting for the lease's run, in send order. */
export const takeSteered = (lease: Lease): ReadonlyArray<Prompt.Message> => {
  const entries = lease.box.steered.splice(0)
  lease.taken.push(...entries)
  return entries.flatMap((entry) => entry.messages)
}

/** Why a message fails that waits in the inbox of a closed agent. */
const closedError = (threadId: string) =>
  new ThreadStateError({ threadId, reason: "the agent closed before a run of the thread answered this message" })

/** The inboxes of one agent, in its scope. */
export const make: Effect.Effect<Inboxes, never, Scope.Scope> = Effect.suspend(() => {
  const boxes = new Map<string, ThreadInbox>()
  let closed = false

  const open = (threadId: string): ThreadInbox => {
    let box = boxes.get(threadId)
    if (box === undefined) {
      box = { active: 0, steered: [], queued: [], carried: [] }
      boxes.set(threadId, box)
    }
    return box
  }

  const forget = (threadId: string, box: ThreadInbox) => {
    if (box.active === 0 && box.steered.length + box.queued.length + box.carried.length === 0) {
      boxes.delete(threadId)
    }
  }

  /**
   * `body` as a run of `threadId` holding a lease on its inbox. When it ends
   * each message it took in gets its exit (an interrupted run hands them on
   * to the next run of the thread; once the agent is closed, none will come,
   * and they fail), then `ended` runs (to start the next run of what is
   * left).
   */
  const leased = <A, E, R, R2>(
    threadId: string,
    body: (lease: Lease) => Effect.Effect<A, E, R>,
    ended: (lease: Lease, exit: Exit.Exit<A, E>) => Effect.Effect<void, never, R2>
  ): Effect.Effect<A, E, R | R2> =>
    Effect.suspend(() => {
      const box = open(threadId)
      box.active++
      const lease: Lease = { threadId, box, taken: box.carried.splice(0) }
      // (the cleanup is called once the body's exit is known, uninterruptibly: its bookkeeping needs no effect)
      return Effect.onExit(body(lease), (exit) => {
        box.active--
        if (Exit.isInterrupted(exit) && !closed) box.carried.push(...lease.taken)
        else if (Exit.isInterrupted(exit)) {
          for (const entry of lease.taken) Deferred.unsafeDone(entry.taken, Exit.fail(closedError(threadId)))
        } else {
          for (const entry of lease.taken) {
            Deferred.unsafeDone(entry.taken, exit as Exit.Exit<AgentResult.AgentResult<any>, unknown>)
          }
        }
        forget(threadId, box)
        return ended(lease, exit)
      })
    })

  /** Adds a sent message to its thread's inbox; whether a run of the thread is going. */
  const post = (threadId: string, entry: Entry): boolean => {
    const box = open(threadId)
    ;(entry.mode === "steer" ? box.steered : box.queued).push(entry)
    return box.active > 0
  }

  /**
   * The input of the next run of the thread, taken in by `lease`: every steer
   * message left (a run ended before it could take them in), else the first
   * queued message; `undefined` when there is none.
   */
  const takeNext = (
    lease: Lease
  ): { readonly mode: Mode; readonly messages: ReadonlyArray<Prompt.Message> } | undefined => {
    const box = lease.box
    const entries = box.steered.length > 0 ? box.steered.splice(0) : box.queued.splice(0, 1)
    if (entries.length === 0) return undefined
    lease.taken.push(...entries)
    return { mode: entries[0]!.mode, messages: entries.flatMap((entry) => entry.messages) }
  }

  /** Whether anything waits in the thread's inbox. */
  const hasWaiting = (threadId: string): boolean => {
    const box = boxes.get(threadId)
    return box !== undefined && (box.steered.length > 0 || box.queued.length > 0)
  }

  /**
   * Takes back a message `post` added, unless a run took it in meanwhile:
   * whether it was still waiting (the `send` that posted it failed, so it must not join a run).
   */
  const withdraw = (threadId: string, entry: Entry): boolean => {
    const box = boxes.get(threadId)
    if (box === undefined) return false
    const list = entry.mode === "steer" ? box.steered : box.queued
    const index = list.indexOf(entry)
    if (index < 0) return false
    list.splice(index, 1)
    forget(threadId, box)
    return true
  }

  /**
   * Fails every message waiting in the thread's inbox with `error` (no run can take them in; with
   * `carried`, those an interrupted run handed on too, as when the thread was deleted).
   */
  const fail = (threadId: string, error: unknown, carried: boolean) => {
    const box = boxes.get(threadId)
    if (box === undefined) return
    const failed = [...box.steered.splice(0), ...box.queued.splice(0), ...(carried ? box.carried.splice(0) : [])]
    for (const entry of failed) Deferred.unsafeDone(entry.taken, Exit.fail(error))
    forget(threadId, box)
  }

  /** Drops what waits in the thread's inbox (the thread was deleted): each sender learns it with `error`. */
  const drop = (threadId: string, error: unknown) => Effect.sync(() => fail(threadId, error, true))

  /** Fails what waits for a run of the thread (none could start): each sender learns it with `error`. */
  const failWaiting = (threadId: string, error: unknown) => fail(threadId, error, false)

  /** When the agent closes: what waits in the inbox of a thread no run holds fails. */
  const close = Effect.sync(() => {
    closed = true
    for (const [threadId, box] of boxes) if (box.active === 0) fail(threadId, closedError(threadId), true)
  })

  return Effect.as(Effect.addFinalizer(() => close), {
    leased,
    post,
    withdraw,
    takeNext,
    hasWaiting,
    drop,
    failWaiting
  })
})

/** The inboxes of one agent. */
export interface Inboxes {
  readonly leased: <A, E, R, R2>(
    threadId: string,
    body: (lease: Lease) => Effect.Effect<A, E, R>,
    ended: (lease: Lease, exit: Exit.Exit<A, E>) => Effect.Effect<void, never, R2>
  ) => Effect.Effect<A, E, R | R2>
  readonly post: (threadId: string, entry: Entry) => boolean
  readonly withdraw: (threadId: string, entry: Entry) => boolean
  readonly takeNext: (
    lease: Lease
  ) => { readonly mode: Mode; readonly messages: ReadonlyArray<Prompt.Message> } | undefined
  readonly hasWaiting: (threadId: string) => boolean
  readonly drop: (threadId: string, error: unknown) => Effect.Effect<void>
  readonly failWaiting: (threadId: string, error: unknown) => void
}
