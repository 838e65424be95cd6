/**
 * A thread stored as an append-only log of encoded messages plus a small
 * head, behind the file-system and KeyValueStore checkpointers: a step writes
 * only its new messages and the head, and a load this checkpointer already
 * holds reads only the head (and the messages appended since).
 *
 * The head (the thread's slices, pending wait and progress, and where its
 * log ends) is written last and atomically: it is the commit point, so
 * whatever a log holds past the committed end (a torn append) is never read,
 * and the next append writes over it.
 *
 * Each log is a generation, appended to only by the checkpointer instance
 * that created it (its writer). A save that cannot append (a history hook
 * replaced earlier messages, the thread shrank, or the head names another
 * writer: another instance or process saved the thread) writes the whole
 * thread to a new generation. Its writer deletes a generation of its own as
 * soon as the head no longer names it; another writer's generation is only
 * retired (listed in the head), and deleted by a save at least
 * `retiredGraceMillis` later, so that a save of that writer still under way
 * never commits a head naming a deleted log.
 *
 * Saves and deletes of a thread run under its locks: `Options.locks`, shared
 * by the instances of this process on the store, and the backend's
 * `exclusive` (the file system's lock file), which other processes take too.
 * So a conditional save's check and its head write are one atomic step as far
 * as those locks reach: no delete of the thread runs between them. Loads take
 * only `Options.locks`.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { CheckpointError } from "../AgentError.js"
import type * as Checkpointer from "../Checkpointer.js"
import * as DeferredSave from "./deferredSave.js"
import * as SaveCondition from "./saveCondition.js"
import type * as StoreLocks from "./storeLocks.js"

/** Where a head's log is and how much of it is committed. */
export const LogRef = Schema.Struct({
  /** The log's name, unique per thread (a random UUID). */
  generation: Schema.String,
  /** The checkpointer instance that created the log and alone appends to it. */
  writer: Schema.String,
  /** Committed messages. */
  messages: Schema.NonNegativeInt,
  /** Where the committed log ends, as the backend counts (a byte offset, a chunk slot). */
  end: Schema.NonNegativeInt
})

/** @internal */
export type LogRef = typeof LogRef.Type

/** A log another writer created, replaced at `at` (epoch ms), deleted once `retiredGraceMillis` passed. */
export const Retired = Schema.Struct({
  generation: Schema.String,
  messages: Schema.NonNegativeInt,
  at: Schema.Number
})

/** @internal */
export type Retired = typeof Retired.Type

/** How long a log replaced by another writer is kept before a save deletes it. */
export const retiredGraceMillis = 60_000

/** The stored head: a checkpoint without its messages, with its log. */
export interface Head extends Omit<Checkpointer.Checkpoint, "version" | "messages"> {
  readonly version: 2
  readonly log: LogRef
  readonly retired?: ReadonlyArray<Retired> | undefined
}

/** What a thread's head slot holds: a head, or a whole checkpoint of the previous (single-value) format. */
export type Stored =
  | { readonly _tag: "Head"; readonly head: Head }
  | { readonly _tag: "Legacy"; readonly checkpoint: Checkpointer.Checkpoint }

/**
 * A thread's encoded messages as a save gives them to a backend: how many,
 * and those from an index on (a deferred save encodes only those, without
 * building the array of the whole thread).
 */
export interface Messages {
  readonly length: number
  from(index: number): ReadonlyArray<unknown>
}

/** The storage a thread log is kept in. Every operation may fail with the store's own error. */
export interface Backend {
  /** The head slot's text, if any. */
  readonly readHead: (threadId: string) => Effect.Effect<Option.Option<string>, unknown>
  /** Replaces the head slot's text, atomically as far as the store allows. */
  readonly writeHead: (threadId: string, text: string) => Effect.Effect<void, unknown>
  /** Writes `messages` as a new log; where it ends. */
  readonly create: (
    threadId: string,
    generation: string,
    messages: Messages
  ) => Effect.Effect<number, unknown>
  /**
   * Writes `messages` past `log.messages` after the committed end of `log`
   * (`messages` starts with the committed ones); where the log now ends, or
   * none when the log is gone.
   */
  readonly append: (
    threadId: string,
    log: LogRef,
    messages: Messages
  ) => Effect.Effect<Option.Option<number>, unknown>
  /**
   * The committed messages of `log` after the first `from.messages` (all
   * with no `from`); none when the log is gone or holds less than committed
   * (a concurrent rewrite may have deleted it: the caller reads the head again).
   */
  readonly read: (
    threadId: string,
    log: LogRef,
    from: LogRef | undefined
  ) => Effect.Effect<Option.Option<ReadonlyArray<unknown>>, unknown>
  /** Deletes a log (nothing when it is gone). */
  readonly removeLog: (
    threadId: string,
    log: { readonly generation: string; readonly messages: number }
  ) => Effect.Effect<
    void,
    unknown
  >
  /** Deletes the head slot, then every log of the thread it can find (`known`, and more if it can list them). */
  readonly removeThread: (
    threadId: string,
    known: ReadonlyArray<{ readonly generation: string; readonly messages: number }>
  ) => Effect.Effect<void, unknown>
  /**
   * Runs a save or a delete of `threadId` holding a lock of the thread that other processes on the store take too
   * (a store without one leaves it out: its saves and deletes exclude only the instances sharing `Options.locks`).
   */
  readonly exclusive?: <A, E, R>(threadId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, unknown, R>
}

/** A failure to tell apart from the store's own: the stored thread is not what the head says. */
export class Corrupt {
  readonly _tag = "Corrupt"
  constructor(readonly description: string) {}
}

/** A store's failure (or a {@link Corrupt} thread) as the `CheckpointError` of an operation on `threadId`. */
export const ioFailure = (threadId: string, operation: "load" | "save") => (cause: unknown) =>
  cause instanceof CheckpointError
    ? cause
    : cause instanceof Corrupt
    ? new CheckpointError({ threadId, operation, reason: cause.description })
    : new CheckpointError({ threadId, operation, reason: String(cause), cause })

const sameLog = (a: LogRef, b: LogRef) =>
  a.generation === b.generation && a.writer === b.writer && a.messages === b.messages && a.end === b.end

/** The last thread this checkpointer saved or loaded, per thread, for the `capacity` threads used last. */
class LastSeen {
  private readonly entries = new Map<
    string,
    { readonly log: LogRef; readonly saved: Checkpointer.DeferredCheckpoint }
  >()
  constructor(private readonly capacity: number) {}
  get(threadId: string) {
    return this.entries.get(threadId)
  }
  set(threadId: string, log: LogRef, saved: Checkpointer.DeferredCheckpoint) {
    this.entries.delete(threadId)
    this.entries.set(threadId, { log, saved })
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!)
  }
  delete(threadId: string) {
    this.entries.delete(threadId)
  }
}

/** Reads after a concurrent rewrite deleted the log the head named, before giving up. */
const loadAttempts = 5

/**
 * Whether thread `stored`, found in the files of thread `threadId`, is another thread whose id differs only in case:
 * on a case-insensitive file system (macOS, Windows) their files are one.
 */
const sharesFilesByCase = (stored: string, threadId: string) =>
  stored !== threadId && stored.toLowerCase() === threadId.toLowerCase()

/** Options of {@link make}. */
export interface Options {
  readonly backend: Backend
  /** Reads a head slot's text (a head or a legacy checkpoint). */
  readonly decode: (
    threadId: string,
    text: string,
    operation: "load" | "save"
  ) => Effect.Effect<Stored, CheckpointError>
  /** Writes a head as text. */
  readonly encode: (threadId: string, head: Head) => Effect.Effect<string, CheckpointError>
  /** Threads whose last checkpoint stays in memory, so their next save appends and their next load reads the head only. */
  readonly cachedThreads: number
  /**
   * The per-thread locks of every instance of this process on the store (`storeLocks.ts`): one save, load or
   * delete of a thread at a time among them, so a conditional save's check and write and a delete never interleave.
   */
  readonly locks: StoreLocks.Locks
}

/** A checkpointer on a thread-log backend, for `Checkpointer.make`. */
export const make = (options: Options): Checkpointer.MakeOptions => {
  const { backend } = options
  const writer = crypto.randomUUID()
  const lastSeen = new LastSeen(options.cachedThreads)
  const { locks } = options
  const exclusive = <A, R>(threadId: string, effect: Effect.Effect<A, CheckpointError, R>) =>
    locks(
      threadId,
      backend.exclusive === undefined
        ? effect
        : Effect.mapError(backend.exclusive(threadId, effect), ioFailure(threadId, "save"))
    )

  const readStored = (threadId: string, operation: "load" | "save") =>
    backend.readHead(threadId).pipe(
      Effect.mapError(ioFailure(threadId, operation)),
      Effect.flatMap(Option.match({
        onNone: () => Effect.succeedNone,
        onSome: (text) =>
          Effect.flatMap(options.decode(threadId, text, operation), (found) => {
            const holds = found._tag === "Legacy" ? found.checkpoint.threadId : found.head.threadId
            // (a checkpoint may name another thread than the one it is saved as: only a name shared by case is refused)
            return !sharesFilesByCase(holds, threadId) ? Effect.succeedSome(found) : Effect.fail(
              new CheckpointError({
                threadId,
                operation,
                reason: `the thread's files hold thread ${JSON.stringify(holds)}: ids that differ only in case share ` +
                  "files on a case-insensitive file system (macOS, Windows); use ids that differ otherwise"
              })
            )
          })
      }))
    )

  const toCheckpoint = (head: Head, messages: ReadonlyArray<unknown>): Checkpointer.Checkpoint => ({
    version: 1,
    threadId: head.threadId,
    messages,
    slices: head.slices,
    ...(head.incarnation === undefined ? {} : { incarnation: head.incarnation }),
    ...(head.pending === undefined ? {} : { pending: head.pending }),
    ...(head.run === undefined ? {} : { run: head.run })
  })

  const readMessages = (threadId: string, log: LogRef) => {
    const known = lastSeen.get(threadId)
    if (known !== undefined && known.log.generation === log.generation && known.log.messages <= log.messages) {
      const messages = known.saved.messages()
      if (known.log.messages === log.messages) return Effect.succeedSome(messages)
      return Effect.map(backend.read(threadId, log, known.log), Option.map((more) => messages.concat(more)))
    }
    return backend.read(threadId, log, undefined)
  }

  const load = (
    threadId: string,
    attempt: number
  ): Effect.Effect<Option.Option<Checkpointer.Checkpoint>, CheckpointError> =>
    Effect.flatMap(readStored(threadId, "load"), (stored) => {
      if (Option.isNone(stored)) return Effect.succeedNone
      if (stored.value._tag === "Legacy") return Effect.succeedSome(stored.value.checkpoint)
      const head = stored.value.head
      return readMessages(threadId, head.log).pipe(
        Effect.mapError(ioFailure(threadId, "load")),
        Effect.flatMap(Option.match({
          onNone: () =>
            attempt + 1 < loadAttempts
              ? load(threadId, attempt + 1)
              : Effect.fail(
                new CheckpointError({
                  threadId,
                  operation: "load",
                  reason:
                    `the log "${head.log.generation}" its head names is missing or holds fewer than its ${head.log.messages} committed messages`
                })
              ),
          onSome: (messages) => {
            const checkpoint = toCheckpoint(head, messages)
            lastSeen.set(threadId, head.log, DeferredSave.whole(checkpoint))
            return Effect.succeedSome(checkpoint)
          }
        }))
      )
    })

  /**
   * Saves `saved`, writing only the messages past the committed log when the thread extends it. A conditional
   * save checks the head it reads first; the check and the write are atomic as far as the thread's locks reach
   * (`exclusive`): no delete of the thread runs between them.
   */
  const append = (
    threadId: string,
    saved: Checkpointer.DeferredCheckpoint,
    saveOptions: Checkpointer.SaveOptions | undefined
  ) =>
    Effect.gen(function*() {
      const stored = yield* readStored(threadId, "save")
      const refused = SaveCondition.conflictOf(
        threadId,
        saved,
        Option.map(stored, (found) => found._tag === "Head" ? found.head : found.checkpoint),
        saveOptions
      )
      if (refused !== undefined) return yield* refused
      const previous = Option.isSome(stored) && stored.value._tag === "Head" ? stored.value.head : undefined
      const known = lastSeen.get(threadId)
      const now = yield* Clock.currentTimeMillis
      const checkpoint = saved.checkpoint
      const messages = saved
      const appended = previous !== undefined && known !== undefined && previous.log.writer === writer &&
          sameLog(previous.log, known.log) && saved.extends(known.saved)
        ? messages.length === previous.log.messages
          ? Option.some(previous.log.end)
          : yield* backend.append(threadId, previous.log, messages)
        : Option.none()
      const obsolete: Array<{ readonly generation: string; readonly messages: number }> = []
      let retired = previous?.retired ?? []
      let log: LogRef
      if (Option.isSome(appended)) {
        log = { ...previous!.log, messages: messages.length, end: appended.value }
      } else {
        const generation = crypto.randomUUID()
        log = {
          generation,
          writer,
          messages: messages.length,
          end: yield* backend.create(threadId, generation, messages)
        }
        if (previous !== undefined) {
          if (previous.log.writer === writer) obsolete.push(previous.log)
          else retired = [...retired, { generation: previous.log.generation, messages: previous.log.messages, at: now }]
        }
      }
      // a log of ours that another writer's head replaced since our last save
      if (
        known !== undefined && known.log.writer === writer && known.log.generation !== previous?.log.generation &&
        known.log.generation !== log.generation
      ) obsolete.push(known.log)
      obsolete.push(...retired.filter((entry) => entry.at + retiredGraceMillis <= now))
      retired = retired.filter((entry) => entry.at + retiredGraceMillis > now)
      const head: Head = {
        version: 2,
        threadId: checkpoint.threadId,
        log,
        ...(retired.length === 0 ? {} : { retired }),
        slices: checkpoint.slices,
        ...(checkpoint.incarnation === undefined ? {} : { incarnation: checkpoint.incarnation }),
        ...(checkpoint.pending === undefined ? {} : { pending: checkpoint.pending }),
        ...(checkpoint.run === undefined ? {} : { run: checkpoint.run })
      }
      yield* backend.writeHead(threadId, yield* options.encode(threadId, head))
      lastSeen.set(threadId, log, saved)
      // committed: what is left is tidying, and a failure of it loses nothing
      yield* Effect.forEach(obsolete, (old) => Effect.ignore(backend.removeLog(threadId, old)), { discard: true })
    }).pipe(Effect.mapError(ioFailure(threadId, "save")))

  const remove = (threadId: string) =>
    Effect.gen(function*() {
      const stored = yield* Effect.option(readStored(threadId, "save"))
      const head = Option.isSome(stored) && Option.isSome(stored.value) && stored.value.value._tag === "Head"
        ? stored.value.value.head
        : undefined
      lastSeen.delete(threadId)
      yield* backend.removeThread(threadId, head === undefined ? [] : [head.log, ...(head.retired ?? [])])
    }).pipe(Effect.mapError(ioFailure(threadId, "save")))

  return {
    load: (threadId) => locks(threadId, load(threadId, 0)),
    append: (threadId, checkpoint, saveOptions) => exclusive(threadId, append(threadId, checkpoint, saveOptions)),
    delete: (threadId) => exclusive(threadId, remove(threadId))
  }
}

/**
 * The JSON text of message `n` (counted from 0) of a save, or the {@link Corrupt} saying why it has none: a
 * cycle, nesting too deep for the stack, or a getter, `toJSON` or Proxy that threw (its error is not shown: it
 * may hold anything). An array's JSON writes `null` for what has no JSON text of its own (`undefined`).
 */
export const messageText = (message: unknown, n: number): string | Corrupt => {
  try {
    return JSON.stringify(message) ?? "null"
  } catch (error) {
    return new Corrupt(`message ${n + 1} of the thread cannot be written as JSON: ${unwritable(error)}`)
  }
}

/** Why `JSON.stringify` threw `error`, without its text (a getter's or Proxy's error may hold anything). */
export const unwritable = (error: unknown): string =>
  error instanceof RangeError
    ? "it is nested too deep"
    : error instanceof TypeError && /circular/i.test(error.message)
    ? "it holds a cycle"
    : error instanceof TypeError && /bigint/i.test(error.message)
    ? "it holds a bigint"
    : "reading it threw"

/** The lines of `messages` (message `from` on): one JSON text per message, each ending in a newline. */
export const encodeLines = (messages: ReadonlyArray<unknown>, from: number): string | Corrupt => {
  let text = ""
  for (let i = 0; i < messages.length; i++) {
    const line = messageText(messages[i], from + i)
    if (line instanceof Corrupt) return line
    text += line + "\n"
  }
  return text
}

/** Parses `count` lines written by {@link encodeLines}; anything else is corrupt. */
export const decodeLines = (text: string, count: number): ReadonlyArray<unknown> => {
  const out: Array<unknown> = []
  let start = 0
  while (start < text.length) {
    const newline = text.indexOf("\n", start)
    if (newline < 0) throw new Corrupt(`the log's message ${out.length + 1} is not terminated`)
    try {
      out.push(JSON.parse(text.slice(start, newline)))
    } catch {
      throw new Corrupt(`the log's message ${out.length + 1} is not valid JSON`)
    }
    start = newline + 1
  }
  if (out.length !== count) throw new Corrupt(`the log holds ${out.length} messages where its head commits ${count}`)
  return out
}
