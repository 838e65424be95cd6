/**
 * Persists each thread's state after every step, so a thread continues where
 * it stopped — in the same process or in a new one.
 *
 * `layerMemory` keeps checkpoints in the process; `layerFileSystem` and
 * `layerKeyValueStore` (on any `@effect/platform` `KeyValueStore`) store each
 * thread as an append-only log of encoded messages plus a small head, so a
 * step writes only its new messages (a crash mid-write leaves the last
 * committed checkpoint intact).
 *
 * A store of your own is built with `make` from `load`, `delete` and `save`
 * (a whole checkpoint) or `append` (a `DeferredCheckpoint`, whose whole
 * encoded thread is built only when asked for), or both.
 *
 * An agent's run saves conditionally ({@link SaveOptions}): a save lands only
 * on the thread the run loaded, so a run still going when its thread is
 * deleted (or deleted and made again) fails instead of writing the old thread
 * back. Every bundled store checks it atomically; a store of your own checks
 * it with {@link checkExpected}, or saves blindly.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as KeyValueStore from "@effect/platform/KeyValueStore"
import * as Path from "@effect/platform/Path"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { CheckpointError, describeParseError } from "./AgentError.js"
import * as DeferredSave from "./internal/deferredSave.js"
import { makeDirectories } from "./internal/directories.js"
import { Lru } from "./internal/fast/lru.js"
import * as FileLock from "./internal/fileLock.js"
import { describeValue, unknownKey } from "./internal/options.js"
import * as RegularFiles from "./internal/regularFiles.js"
import * as SaveCondition from "./internal/saveCondition.js"
import * as StoreLocks from "./internal/storeLocks.js"
import * as ThreadFiles from "./internal/threadFiles.js"
import * as ThreadLog from "./internal/threadLog.js"

/**
 * Where a run waits after a hook interrupted it: the hook to run again on
 * resume, with the value it interrupted with.
 *
 * @since 0.1.0
 * @category models
 */
export const PendingInterrupt = Schema.Struct({
  node: Schema.Literal("beforeAgent", "beforeModel", "afterModel", "afterAgent"),
  middleware: Schema.String,
  value: Schema.Unknown,
  /** The name of the wait, unique within its run (see `Middleware.HookResult.interruptKey`). */
  key: Schema.optional(Schema.String),
  /** Set when a durable journal made the wait: only a durable context may answer or discard it. */
  durable: Schema.optional(Schema.Boolean)
})

/**
 * @since 0.1.0
 * @category models
 */
export type PendingInterrupt = typeof PendingInterrupt.Type

/**
 * The stored form of a thread: JSON-compatible, versioned.
 *
 * @since 0.1.0
 * @category models
 */
export const Checkpoint = Schema.Struct({
  version: Schema.Literal(1),
  threadId: Schema.String,
  /** Encoded `Prompt.Message`s. */
  messages: Schema.Array(Schema.Unknown),
  /** Encoded middleware state slices, by middleware name. */
  slices: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  /**
   * The thread's incarnation: a random nonce made when the thread is first
   * saved, kept by every later save, and new when the thread is deleted and
   * made again (or forked). Waits bind their decisions to it, so a decision
   * for an earlier thread of the same id answers no wait of this one. A
   * checkpoint written before incarnations has none; it gets one at the
   * next run that does not resume a wait. A store must keep it as given.
   */
  incarnation: Schema.optional(Schema.String),
  /** Set while the thread waits for `resume`. */
  pending: Schema.optional(PendingInterrupt),
  /** Progress of the run that is waiting, so a resumed run keeps counting. */
  run: Schema.optional(Schema.Struct({
    step: Schema.Number,
    inputTokens: Schema.Number,
    outputTokens: Schema.Number,
    totalTokens: Schema.Number
  }))
})

/**
 * @since 0.1.0
 * @category models
 */
export type Checkpoint = typeof Checkpoint.Type

/**
 * @since 0.1.0
 * @category tags
 */
export class Checkpointer extends Context.Tag("@stepwise-agent/core/Checkpointer")<
  Checkpointer,
  Service
>() {}

/**
 * What a checkpointer does. `append` is optional: a store that has it
 * takes an agent's run's checkpoints through it, a store without it gets
 * each checkpoint whole through `save`. Build a service with {@link make},
 * which derives whichever of `save` and `append` you leave out.
 *
 * A wrapper that spreads a service and replaces `save` keeps its `append`
 * (the run keeps using it): wrap `append` too, or set it to `undefined` to
 * get every checkpoint whole through your `save`. A wrapper passes a save's
 * {@link SaveOptions} on: they keep a run from writing back a thread deleted
 * while it ran.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly load: (threadId: string) => Effect.Effect<Option.Option<Checkpoint>, CheckpointError>
  /**
   * Saves a checkpoint whole. With `options.expected`, only over the thread
   * expected ({@link SaveOptions}); a store that ignores `options` saves
   * blindly.
   */
  readonly save: (
    threadId: string,
    checkpoint: Checkpoint,
    options?: SaveOptions | undefined
  ) => Effect.Effect<void, CheckpointError>
  readonly delete: (threadId: string) => Effect.Effect<void, CheckpointError>
  /**
   * Saves a checkpoint given as a {@link DeferredCheckpoint}: the store
   * reads the messages it has not committed yet (`from(committed)`, when
   * the thread {@link DeferredCheckpoint.extends | extends} what it
   * committed), and builds the whole encoded thread only if it needs it.
   * `options` as for `save`.
   */
  readonly append?:
    | ((
      threadId: string,
      checkpoint: DeferredCheckpoint,
      options?: SaveOptions | undefined
    ) => Effect.Effect<void, CheckpointError>)
    | undefined
  /**
   * The ids of the stored threads, a page at a time, in the order of their
   * ids (optional: a store that cannot list leaves it out). Reads no thread.
   */
  readonly list?: ((options?: ListOptions | undefined) => Effect.Effect<ThreadPage, CheckpointError>) | undefined
}

/**
 * What a conditional save expects the store to hold under the thread's id:
 * no thread (`"absent"`: the run's thread is new), or a thread of
 * `incarnation` (the one the run loaded; `undefined` for a thread stored
 * before incarnations).
 *
 * @since 0.1.0
 * @category models
 */
export type Expected = "absent" | { readonly incarnation: string | undefined }

/**
 * Options of a save ({@link Service.save}, {@link Service.append}).
 *
 * With `expected`, the save is conditional: it writes only when the stored
 * thread is the one expected, and otherwise writes nothing and fails with
 * `CheckpointError` whose `conflict` says why (`"ThreadDeleted"`: nothing is
 * stored; `"Superseded"`: another incarnation is). Besides what `expected`
 * names, a stored thread of the saved checkpoint's own incarnation is always
 * replaced (a retried save finds its own first attempt), and a thread stored
 * before incarnations (none) is replaced by a save expecting an incarnation.
 * The rule is {@link checkExpected}; the check and the write are one atomic
 * step in every bundled store (see each store for what that covers across
 * processes). An agent's run saves so; without `expected` a save is blind.
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 *
 * const options: Checkpointer.SaveOptions = { expected: { incarnation: "5f0c2a9e81d3b746" } }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface SaveOptions {
  readonly expected?: Expected | undefined
}

/**
 * The check of a conditional save ({@link SaveOptions}) for a store of your
 * own: succeeds when a save of `saved` may replace what the store holds under
 * `threadId` (`stored`: the stored thread's incarnation, or none when no thread
 * is stored), and otherwise fails with `CheckpointError` (`conflict` set; its
 * `reason` says what was not saved). Without `options.expected` it always
 * succeeds. Run it and the write as one atomic step (under the store's lock,
 * or in one transaction).
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 * import { Option } from "effect"
 *
 * const saved = Checkpointer.deferred({ version: 1, threadId: "t1", messages: [], slices: {}, incarnation: "a1" })
 * // fails: the thread was deleted (nothing is stored) since the run loaded it
 * const check = Checkpointer.checkExpected("t1", saved, Option.none(), { expected: { incarnation: "a1" } })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const checkExpected = (
  threadId: string,
  saved: Pick<DeferredCheckpoint, "checkpoint" | "length">,
  stored: Option.Option<{ readonly incarnation?: string | undefined }>,
  options?: SaveOptions | undefined
): Effect.Effect<void, CheckpointError> => {
  const refused = SaveCondition.conflictOf(threadId, saved, stored, options)
  return refused === undefined ? Effect.void : Effect.fail(refused)
}

/**
 * Which page of stored threads {@link Service.list} gives.
 *
 * @since 0.1.0
 * @category models
 */
export interface ListOptions {
  /** The `next` of the previous page; the first page without it. */
  readonly cursor?: string | undefined
  /** The most thread ids the page holds (default 100; at least 1). */
  readonly limit?: number | undefined
}

/**
 * A page of stored thread ids, from {@link Service.list}.
 *
 * @since 0.1.0
 * @category models
 */
export interface ThreadPage {
  readonly threadIds: ReadonlyArray<string>
  /** The cursor of the next page; `undefined` on the last one. */
  readonly next: string | undefined
}

/**
 * A page of `threadIds` (all the store has, in any order): those after the
 * cursor, in the order of their ids. What a store that can enumerate its
 * thread ids, but not page through them itself, gives as its `list`.
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 *
 * const page = Checkpointer.pageOf(["b", "a", "c"], { limit: 2 })
 * // { threadIds: ["a", "b"], next: "b" }
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const pageOf = (threadIds: Iterable<string>, options?: ListOptions | undefined): ThreadPage => {
  const given = options?.limit ?? 100
  // a limit that is no count gives the default page
  const limit = Number.isFinite(given) ? Math.max(1, Math.floor(given)) : 100
  const cursor = options?.cursor
  const after = cursor === undefined ? [...threadIds] : [...threadIds].filter((id) => id > cursor)
  const sorted = after.sort((a, b) => a < b ? -1 : a > b ? 1 : 0)
  const page = sorted.slice(0, limit)
  return { threadIds: page, next: sorted.length > page.length ? page.at(-1) : undefined }
}

/**
 * A checkpoint whose array of the whole encoded thread is built only when
 * asked for: how an agent's run hands its checkpoints to a checkpointer's
 * `append`, so that a step need not copy the whole thread. Its encoded
 * messages are the same objects, in the same order, whichever way they are
 * read.
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 *
 * const checkpoint = Checkpointer.deferred({ version: 1, threadId: "t1", messages: [], slices: {} })
 * checkpoint.length // 0
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface DeferredCheckpoint {
  /** The checkpoint without its messages. */
  readonly checkpoint: Omit<Checkpoint, "messages">
  /** How many messages the thread has. */
  readonly length: number
  /** The encoded messages from `index` on, without building the whole thread. */
  readonly from: (index: number) => ReadonlyArray<unknown>
  /** The whole encoded thread (built on the first call; the same array after). */
  readonly messages: () => ReadonlyArray<unknown>
  /**
   * Whether this thread keeps every message of `previous` (the same encoded
   * objects, in order) and may add more: when it does, a store that
   * committed `previous` need write only `from(previous.length)`. Told
   * without building either thread when both came from one run.
   */
  readonly extends: (previous: DeferredCheckpoint) => boolean
}

/**
 * A whole checkpoint as a {@link DeferredCheckpoint} (its messages are
 * already built): what the `append` derived by {@link make} is called with
 * when `save` is called.
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 *
 * const checkpoint = Checkpointer.deferred({ version: 1, threadId: "t1", messages: [], slices: {} })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const deferred = (checkpoint: Checkpoint): DeferredCheckpoint => DeferredSave.whole(checkpoint)

/**
 * The checkpoint of a {@link DeferredCheckpoint}, whole.
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 *
 * const checkpoint = Checkpointer.build(
 *   Checkpointer.deferred({ version: 1, threadId: "t1", messages: [], slices: {} })
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const build = (checkpoint: DeferredCheckpoint): Checkpoint => DeferredSave.build(checkpoint)

/**
 * What {@link make} needs: `load`, `delete`, and `save`, `append` or both.
 *
 * @since 0.1.0
 * @category models
 */
export type MakeOptions =
  & Omit<Service, "save" | "append">
  & (
    | Pick<Service, "save" | "append">
    | {
      readonly save?: Service["save"] | undefined
      readonly append: NonNullable<Service["append"]>
    }
  )

/**
 * Builds a checkpointer from `load`, `delete` and one or both of `save` and
 * `append`, deriving the other: a derived `append` saves the checkpoint whole
 * through `save`; a derived `save` hands the whole checkpoint to `append`.
 * The result always has `append`, visibly. The derived one passes a save's
 * {@link SaveOptions} on: a store whose `save`/`append` ignores them saves
 * blindly, so a run still going when its thread is deleted writes it back
 * (check them with {@link checkExpected} to prevent it).
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 * import { Effect, Option } from "effect"
 *
 * const store = new Map<string, Checkpointer.Checkpoint>()
 * const checkpointer = Checkpointer.make({
 *   load: (threadId) => Effect.sync(() => Option.fromNullable(store.get(threadId))),
 *   save: (threadId, checkpoint) => Effect.sync(() => void store.set(threadId, checkpoint)),
 *   delete: (threadId) => Effect.sync(() => void store.delete(threadId))
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: MakeOptions
): Service & { readonly append: NonNullable<Service["append"]> } => {
  // the types rule out what follows `??`; from JavaScript, what is missing fails with a typed error when used
  const { append, delete: remove, list, load, save } = (Predicate.isObject(options) ? options : {}) as Partial<
    MakeOptions
  >
  const listing = list === undefined ? {} : { list }
  const missing = (what: string, operation: "load" | "save") => (threadId: unknown) =>
    Effect.fail(
      new CheckpointError({
        threadId: typeof threadId === "string" ? threadId : "",
        operation,
        reason: `the checkpointer was made with ${what} (Checkpointer.make)`
      })
    )
  const loading: Service["load"] = load ?? missing("no load", "load")
  const deleting: Service["delete"] = remove ?? missing("no delete", "save")
  if (append !== undefined) {
    return {
      ...listing,
      load: loading,
      delete: deleting,
      append,
      save: save ??
        ((threadId, checkpoint, saveOptions) => append(threadId, DeferredSave.whole(checkpoint), saveOptions))
    }
  }
  const whole: Service["save"] = save ?? missing("neither save nor append", "save")
  return {
    ...listing,
    load: loading,
    delete: deleting,
    save: whole,
    append: (threadId, checkpoint, saveOptions) =>
      Effect.suspend(() => whole(threadId, DeferredSave.build(checkpoint), saveOptions))
  }
}

/**
 * An in-memory checkpointer. Checkpoints are kept as encoded values, exactly
 * as a durable store would receive them, but are never serialized to text.
 * An agent's run saves into it without building the array of the whole
 * encoded thread at every step: that array is built when the thread is
 * loaded, or when the run ends (through its `append`: see
 * {@link Service}). A conditional save ({@link SaveOptions}) checks and
 * writes in one synchronous step.
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const checkpointer = Effect.runSync(Checkpointer.makeMemory)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Service> = Effect.sync(() => {
  // a run's checkpoint is kept deferred: its messages are built when the thread is loaded
  const store = new Map<string, DeferredCheckpoint>()
  return checked({
    load: (threadId) =>
      Effect.sync(() => {
        const stored = store.get(threadId)
        if (stored === undefined) return Option.none()
        const checkpoint = DeferredSave.build(stored)
        store.set(threadId, DeferredSave.whole(checkpoint))
        return Option.some(checkpoint)
      }),
    append: (threadId, checkpoint, saveOptions) =>
      Effect.suspend(() => {
        // the check and the write in one synchronous step: no other fiber runs between them
        const stored = Option.map(Option.fromNullable(store.get(threadId)), (thread) => thread.checkpoint)
        const refused = SaveCondition.conflictOf(threadId, checkpoint, stored, saveOptions)
        if (refused !== undefined) return Effect.fail(refused)
        store.set(threadId, checkpoint)
        return Effect.void
      }),
    delete: (threadId) => Effect.sync(() => void store.delete(threadId)),
    list: (options) => Effect.sync(() => pageOf(store.keys(), options))
  })
})

/**
 * The `CheckpointError` of a thread id that is not a string (from
 * JavaScript): reported, as the error's `threadId` cannot hold it, by its
 * kind under the empty id.
 */
const notAThreadId = (threadId: unknown, operation: "load" | "save"): CheckpointError =>
  new CheckpointError({
    threadId: "",
    operation,
    reason: `the thread id must be a string, got ${describeValue(threadId)}`
  })

/**
 * A built-in store made by {@link make}, its methods checking what a caller
 * from JavaScript gives first: a thread id that is not a string, or a
 * checkpoint to save that is not an object with a messages array, fails with
 * a `CheckpointError` saying so instead of breaking the store's own code.
 */
const checked = (options: MakeOptions): Service & { readonly append: NonNullable<Service["append"]> } => {
  const service = make(options)
  const refusedCheckpoint = (checkpoint: unknown): CheckpointError | undefined => {
    if (Predicate.hasProperty(checkpoint, "messages") && Array.isArray(checkpoint.messages)) return undefined
    return new CheckpointError({
      threadId: "",
      operation: "save",
      reason: `the checkpoint must be an object with a messages array, got ${describeValue(checkpoint)}`
    })
  }
  // (a thread id is checked with `typeof` before anything is built: `append` runs at every step)
  return {
    ...service,
    load: (threadId) =>
      typeof threadId === "string" ? service.load(threadId) : Effect.fail(notAThreadId(threadId, "load")),
    save: (threadId, checkpoint, saveOptions) => {
      const refused = typeof threadId === "string" ? refusedCheckpoint(checkpoint) : notAThreadId(threadId, "save")
      return refused === undefined ? service.save(threadId, checkpoint, saveOptions) : Effect.fail(refused)
    },
    append: (threadId, checkpoint, saveOptions) =>
      typeof threadId === "string"
        ? service.append(threadId, checkpoint, saveOptions)
        : Effect.fail(notAThreadId(threadId, "save")),
    delete: (threadId) =>
      typeof threadId === "string" ? service.delete(threadId) : Effect.fail(notAThreadId(threadId, "save"))
  }
}

/**
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<Checkpointer> = Layer.effect(Checkpointer, makeMemory)

const CheckpointJson = Schema.parseJson(Checkpoint)

const parseFailure = (threadId: string, operation: "load" | "save") => (error: ParseResult.ParseError) =>
  new CheckpointError({
    threadId,
    operation,
    reason: `the stored checkpoint is not valid: ${describeParseError(error)}`
  })

/**
 * A checkpoint (or head) `value` that failed to encode: when JSON cannot write it, why (never the text of the
 * error a getter or Proxy threw); else what the schema found.
 */
const saveFailure = (threadId: string, value: unknown) => (error: ParseResult.ParseError) => {
  try {
    JSON.stringify(value)
  } catch (thrown) {
    return new CheckpointError({
      threadId,
      operation: "save",
      reason: `the checkpoint cannot be written as JSON: ${ThreadLog.unwritable(thrown)}`
    })
  }
  return parseFailure(threadId, "save")(error)
}

/**
 * A checkpoint as JSON text, for stores of your own; a checkpoint that does
 * not encode fails with `CheckpointError` (`operation: "save"`).
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 *
 * const text = Checkpointer.toJson("t1", { version: 1, threadId: "t1", messages: [], slices: {} })
 * ```
 *
 * @since 0.1.0
 * @category encoding
 */
export const toJson = (threadId: string, checkpoint: Checkpoint): Effect.Effect<string, CheckpointError> =>
  Effect.suspend(() => {
    return typeof threadId === "string"
      ? Effect.mapError(Schema.encode(CheckpointJson)(checkpoint), saveFailure(threadId, checkpoint))
      : Effect.fail(notAThreadId(threadId, "save"))
  })

/**
 * Reads a checkpoint from JSON text written by {@link toJson}; text that is
 * not a valid checkpoint fails with `CheckpointError` (`operation: "load"`).
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 *
 * const checkpoint = Checkpointer.fromJson("t1", '{"version":1,"threadId":"t1","messages":[],"slices":{}}')
 * ```
 *
 * @since 0.1.0
 * @category encoding
 */
export const fromJson = (threadId: string, text: string): Effect.Effect<Checkpoint, CheckpointError> =>
  Effect.suspend(() => {
    return typeof threadId === "string"
      ? Effect.mapError(Schema.decode(CheckpointJson)(text), parseFailure(threadId, "load"))
      : Effect.fail(notAThreadId(threadId, "load"))
  })

/** A thread's head: its checkpoint without the messages, and where its log of messages ends. */
const Head = Schema.Struct({
  ...Checkpoint.omit("version", "messages").fields,
  version: Schema.Literal(2),
  log: ThreadLog.LogRef,
  retired: Schema.optional(Schema.Array(ThreadLog.Retired))
})

const HeadJson = Schema.parseJson(Head)

/** What a head slot holds: a head, or a checkpoint of the previous format (the whole thread in one value). */
const StoredJson = Schema.parseJson(Schema.Union(Head, Checkpoint))

const decodeStored = (threadId: string, text: string, operation: "load" | "save") =>
  Schema.decode(StoredJson)(text).pipe(
    Effect.map((stored): ThreadLog.Stored =>
      stored.version === 2 ? { _tag: "Head", head: stored } : { _tag: "Legacy", checkpoint: stored }
    ),
    Effect.mapError(parseFailure(threadId, operation))
  )

const encodeHead = (threadId: string, head: ThreadLog.Head) =>
  Effect.mapError(Schema.encode(HeadJson)(head), saveFailure(threadId, head))

/**
 * Options of the log-structured checkpointers ({@link makeKeyValueStore},
 * {@link makeFileSystem}).
 *
 * @since 0.1.0
 * @category models
 */
export interface LogOptions {
  /**
   * How many threads keep their last checkpoint in memory (default 64, the
   * threads used last): the next save of such a thread writes only its new
   * messages, and its next load reads only the head (and the messages
   * another instance appended since). A thread not kept is read whole, and
   * its next save rewrites it.
   */
  readonly cachedThreads?: number | undefined
}

const defaultCachedThreads = 64

/** Messages per chunk value of the KeyValueStore log. */
const chunkSize = 64

/**
 * The partial last chunk of a log as this instance wrote it last: the JSON text of each message from
 * message `start` on, and those texts joined by commas.
 */
interface Tail {
  readonly generation: string
  readonly start: number
  readonly texts: ReadonlyArray<string>
  readonly joined: string
}

/**
 * The whole chunks of a thread's log this instance read or wrote last: the encoded message objects of each,
 * by chunk number. A whole chunk of a committed log is never written again, so a new generation whose chunk
 * holds the same objects copies that chunk's stored text instead of turning its messages into JSON again.
 */
interface KnownChunks {
  readonly generation: string
  readonly chunks: Map<number, ReadonlyArray<unknown>>
}

/** Whether `messages` from `start` on are the objects of `chunk`, one for one. */
const holdsChunk = (messages: ReadonlyArray<unknown>, start: number, chunk: ReadonlyArray<unknown>): boolean => {
  if (messages.length < start + chunk.length) return false
  for (let i = 0; i < chunk.length; i++) if (messages[start + i] !== chunk[i]) return false
  return true
}

const parseChunk = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    throw new ThreadLog.Corrupt("a chunk of the thread's log is not valid JSON")
  }
}

/**
 * What is wrong with a store's options, from JavaScript, if anything: an
 * option of another kind would break the store at its first use.
 */
const logOptionsProblem = (options: unknown, known: ReadonlyArray<string>): string | undefined => {
  if (options === undefined) return undefined
  if (!Predicate.isObject(options)) return `the store's options must be an object, got ${describeValue(options)}`
  const unknown = unknownKey("Checkpointer", options, known)
  if (unknown !== undefined) return unknown.message
  const { cachedThreads, prefix } = options as { readonly cachedThreads?: unknown; readonly prefix?: unknown }
  // (null stands for the default, as it always has)
  if (cachedThreads !== undefined && cachedThreads !== null && typeof cachedThreads !== "number") {
    return `cachedThreads must be a number, got ${describeValue(cachedThreads)}`
  }
  if (prefix !== undefined && prefix !== null && typeof prefix !== "string") {
    return `prefix must be a string, got ${describeValue(prefix)}`
  }
  return undefined
}

/** A store that refuses every operation with `reason` (its options were of no kind it takes). */
const refusingAll = (reason: string): Service => {
  const refuse = (operation: "load" | "save" | "list") =>
    Effect.fail(new CheckpointError({ threadId: "", operation, reason }))
  return make({
    load: () => refuse("load"),
    save: () => refuse("save"),
    delete: () => refuse("save"),
    list: () => refuse("list")
  })
}

/**
 * A checkpointer on a `KeyValueStore`, storing each thread as a small head
 * under `prefix + threadId` and its messages in chunks of 64 under
 * `prefix + threadId + "#log/" + generation + "/" + n` (the last, partial
 * chunk in one of two slots, `…/tail0` and `…/tail1`, alternately). A step
 * writes the partial chunk with its new messages into the slot the head does
 * not name, then the head, which commits it: the committed messages are never
 * written over, so with a store whose `set` is atomic (the memory store; not
 * the file-system store, which writes in place) a crash at any point leaves the
 * last committed checkpoint. A history rewrite (a hook replacing earlier
 * messages), or a thread another instance saved last, is written whole under
 * a new generation.
 *
 * An agent's run saves into it without building the array of the whole
 * encoded thread at a step, through its `append`: the step encodes only its
 * new messages. The partial
 * chunk is written again whole at each step, but from the JSON text of the
 * messages it already held (kept for the threads this instance wrote last,
 * `cachedThreads` of them): only the new messages are turned into JSON. A
 * thread written whole under a new generation (the first save of a thread
 * another instance wrote, a history rewrite) copies the stored text of the
 * leading whole chunks this instance read or wrote with the same messages,
 * and turns only the rest into JSON.
 *
 * A save (its check of {@link SaveOptions} and its writes) and a delete of a
 * thread run one at a time across every instance of this process made on the
 * same `KeyValueStore` service object (as every instance built on one layer
 * of it is), so a thread deleted while a save runs stays deleted. A generic
 * `KeyValueStore` has no compare-and-set, so instances in two processes on
 * one external store (or on two store objects over one storage, such as two
 * layers of one file-system store) are not excluded: a delete landing
 * between a save's read of the head and its write of it is not seen, and the
 * thread is written back (or left as a head whose chunks are gone, whose
 * loads fail with `CheckpointError` until it is deleted again). Across
 * processes, delete a thread only where no run of it is going, or use the
 * file-system or a SQL checkpointer.
 *
 * A value of the previous format (the whole checkpoint as JSON under
 * `prefix + threadId`) still loads; the next save replaces it with a head.
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 * import { KeyValueStore } from "@effect/platform"
 * import { Layer } from "effect"
 *
 * const CheckpointerLive = Checkpointer.layerKeyValueStore().pipe(Layer.provide(KeyValueStore.layerMemory))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeKeyValueStore = (
  options?: LogOptions & { readonly prefix?: string | undefined }
): Effect.Effect<Service, never, KeyValueStore.KeyValueStore> =>
  Effect.map(KeyValueStore.KeyValueStore, (store) => {
    const refused = logOptionsProblem(options, ["cachedThreads", "prefix"])
    if (refused !== undefined) return refusingAll(refused)
    const prefix = options?.prefix ?? "thread:"
    const head = (threadId: string) => `${prefix}${threadId}`
    const chunk = (threadId: string, generation: string, name: string) =>
      `${prefix}${threadId}#log/${generation}/${name}`
    /**
     * The JSON text of each message of the partial last chunk this instance wrote last, per thread: a step
     * encodes only its new messages, not the up to 63 the tail already held (see `writeChunks`).
     */
    const tails = new Lru<string, Tail>(options?.cachedThreads ?? defaultCachedThreads)
    /** The whole chunks each thread's log held when this instance last read or wrote it (see {@link KnownChunks}). */
    const knownChunks = new Lru<string, KnownChunks>(options?.cachedThreads ?? defaultCachedThreads)
    /** Remembers the objects of whole chunk `index` of `generation`, read or written. */
    const rememberChunk = (threadId: string, generation: string, index: number, chunk: ReadonlyArray<unknown>) => {
      let known = knownChunks.get(threadId)
      if (known === undefined || known.generation !== generation) {
        known = { generation, chunks: new Map() }
        knownChunks.set(threadId, known)
      }
      known.chunks.set(index, chunk)
    }
    /**
     * Writes the chunks of `messages` past its first `committed` (those of the committed log, written before),
     * starting with the chunk that holds message `committed`, the partial last one into tail `slot`. The texts of
     * the committed messages of that chunk come from `tails` when this instance wrote them, else are encoded again;
     * either way each value is the `JSON.stringify` of its chunk (or of `{ start, messages }` for the tail). A new
     * generation (`committed` 0) first copies, as text, the leading whole chunks another generation of the thread
     * holds with the same messages (see {@link KnownChunks}): a rewrite, or the first save of a thread another
     * instance wrote, turns only the rest into JSON.
     */
    const writeChunks = (
      threadId: string,
      generation: string,
      messages: ThreadLog.Messages,
      committed: number,
      slot: number
    ) =>
      Effect.gen(function*() {
        const full = Math.floor(messages.length / chunkSize)
        let copied = 0
        const previous = committed === 0 ? knownChunks.get(threadId) : undefined
        if (previous !== undefined && previous.generation !== generation && full > 0) {
          const all = messages.from(0)
          while (copied < full) {
            const objects = previous.chunks.get(copied)
            if (objects === undefined || !holdsChunk(all, copied * chunkSize, objects)) break
            const text = yield* store.get(chunk(threadId, previous.generation, String(copied)))
            if (Option.isNone(text)) break
            yield* store.set(chunk(threadId, generation, String(copied)), text.value)
            rememberChunk(threadId, generation, copied, objects)
            copied++
          }
        }
        const from = Math.max(committed, copied * chunkSize)
        const first = Math.floor(from / chunkSize)
        const offset = first * chunkSize
        const kept = from - offset
        const known = tails.get(threadId)
        // the texts of messages `offset` on: the committed ones of this log as written (they are the same messages:
        // a log is appended to only by a thread that keeps every committed message), then the new ones
        const reused = known !== undefined && known.generation === generation && known.start === offset &&
          known.texts.length >= kept
        const texts = reused ? known.texts.slice(0, kept) : []
        // when the tail keeps all it held, its joined text is extended (`+` makes no copy of what it held)
        let joined = reused && kept === known.texts.length ? known.joined : undefined
        // the messages to turn into JSON (the objects a whole array holds), message `at` on
        const at = reused ? from : offset
        const objects = messages.from(at)
        for (let i = 0; i < objects.length; i++) {
          const text = ThreadLog.messageText(objects[i], at + i)
          if (text instanceof ThreadLog.Corrupt) return yield* Effect.fail(text)
          if (joined !== undefined) joined = texts.length === 0 ? text : `${joined},${text}`
          texts.push(text)
        }
        for (let i = first; i < full; i++) {
          const textAt = (i - first) * chunkSize
          yield* store.set(
            chunk(threadId, generation, String(i)),
            `[${texts.slice(textAt, textAt + chunkSize).join(",")}]`
          )
          // (the first chunk of an append starts with committed messages, which `objects` does not hold)
          const chunkAt = i * chunkSize
          rememberChunk(
            threadId,
            generation,
            i,
            chunkAt >= at
              ? objects.slice(chunkAt - at, chunkAt - at + chunkSize)
              : messages.from(chunkAt).slice(0, chunkSize)
          )
        }
        const start = full * chunkSize
        const tailTexts = start === offset ? texts : texts.slice(start - offset)
        const tail: Tail = {
          generation,
          start,
          texts: tailTexts,
          joined: start === offset && joined !== undefined ? joined : tailTexts.join(",")
        }
        tails.set(threadId, tail)
        if (messages.length > start) {
          yield* store.set(chunk(threadId, generation, `tail${slot}`), `{"start":${start},"messages":[${tail.joined}]}`)
        }
      })
    const readChunk = (key: string) =>
      Effect.flatMap(
        store.get(key),
        Option.match({
          onNone: () => Effect.succeedNone,
          onSome: (text) => Effect.asSome(Effect.try({ try: () => parseChunk(text), catch: (error) => error }))
        })
      )
    const removeLog = (threadId: string, log: { readonly generation: string; readonly messages: number }) =>
      Effect.forEach(
        [
          ...Array.from({ length: Math.floor(log.messages / chunkSize) + 1 }, (_, i) => String(i)),
          "tail0",
          "tail1"
        ],
        (name) => store.remove(chunk(threadId, log.generation, name)),
        { discard: true }
      )
    const backend: ThreadLog.Backend = {
      readHead: (threadId) => store.get(head(threadId)),
      writeHead: (threadId, text) => store.set(head(threadId), text),
      create: (threadId, generation, messages) => Effect.as(writeChunks(threadId, generation, messages, 0, 0), 0),
      append: (threadId, log, messages) => {
        const slot = 1 - log.end
        return Effect.as(writeChunks(threadId, log.generation, messages, log.messages, slot), Option.some(slot))
      },
      read: (threadId, log, from) =>
        Effect.gen(function*() {
          const first = Math.floor((from?.messages ?? 0) / chunkSize)
          const full = Math.floor(log.messages / chunkSize)
          const out: Array<unknown> = []
          for (let i = first; i < full; i++) {
            const value = yield* readChunk(chunk(threadId, log.generation, String(i)))
            if (Option.isNone(value)) return Option.none()
            if (!Array.isArray(value.value) || value.value.length !== chunkSize) {
              return yield* Effect.fail(new ThreadLog.Corrupt(`chunk ${i} of the thread's log is not a whole chunk`))
            }
            for (const message of value.value) out.push(message)
            rememberChunk(threadId, log.generation, i, value.value)
          }
          if (log.messages > full * chunkSize) {
            const value = yield* readChunk(chunk(threadId, log.generation, `tail${log.end}`))
            if (Option.isNone(value)) return Option.none()
            const tail = value.value as { readonly start?: unknown; readonly messages?: unknown }
            // the slot was written again since the head was read: read the head again
            if (
              tail.start !== full * chunkSize || !Array.isArray(tail.messages) ||
              tail.messages.length < log.messages - full * chunkSize
            ) return Option.none()
            for (let i = 0; i < log.messages - full * chunkSize; i++) out.push(tail.messages[i])
          }
          return Option.some(out.slice((from?.messages ?? 0) - first * chunkSize))
        }),
      removeLog,
      removeThread: (threadId, known) =>
        Effect.zipRight(
          Effect.zipRight(
            Effect.sync(() => {
              tails.delete(threadId)
              knownChunks.delete(threadId)
            }),
            store.remove(head(threadId))
          ),
          Effect.forEach(known, (log) => removeLog(threadId, log), { discard: true })
        )
    }
    const shared = StoreLocks.ofStore(store)
    return checked(ThreadLog.make({
      backend,
      decode: decodeStored,
      encode: encodeHead,
      cachedThreads: options?.cachedThreads ?? defaultCachedThreads,
      locks: (threadId, effect) => shared(head(threadId), effect)
    }))
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layerKeyValueStore = (
  options?: LogOptions & { readonly prefix?: string | undefined }
): Layer.Layer<Checkpointer, never, KeyValueStore.KeyValueStore> =>
  Layer.effect(Checkpointer, makeKeyValueStore(options))

/**
 * Options of {@link makeFileSystem}.
 *
 * @since 0.1.0
 * @category models
 */
export interface FileSystemOptions extends LogOptions {
  /**
   * How old a thread's lock file (`<thread>.lock`) must be, by its mtime, to
   * be taken as left by a crashed process and taken over (default 10 seconds;
   * at least 1 second; what is not a finite duration counts as the default).
   * Its holder touches it every half of this while it holds it, so only a
   * process stalled this long (no event-loop turn) loses a lock it holds. A
   * lock file whose mtime is ahead of the clock (clock skew, a clock stepped
   * back) is taken over once a waiter saw it unchanged for this long; the
   * clocks of processes sharing the folder should agree within half of it.
   */
  readonly staleLockAfter?: Duration.DurationInput | undefined
}

const defaultStaleLockMillis = 10_000

/** The stale limit of the lock files: at least a second, and finite (a crashed holder's lock is taken over). */
const staleLockMillis = (input: Duration.DurationInput | undefined): number => {
  const millis = Option.match(Duration.decodeUnknown(input ?? defaultStaleLockMillis), {
    onNone: () => defaultStaleLockMillis,
    onSome: Duration.toMillis
  })
  return Number.isFinite(millis) ? Math.max(1000, millis) : defaultStaleLockMillis
}

const isNotFound = (error: unknown) =>
  typeof error === "object" && error !== null && (error as { readonly reason?: unknown }).reason === "NotFound"

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder("utf-8", { fatal: true })

/**
 * A checkpointer writing each thread in `directory` (created if missing) as
 * two files: a small head, `<thread>.json` (the slices, the pending wait, and
 * how many messages and bytes of the log are committed), and an append-only
 * log, `<thread>.<generation>.log`, of encoded messages, one JSON text per
 * line (`<thread>` is the thread id, URI-encoded; an id too long for a file
 * name, over 209 characters so encoded, gets `<its first 64>#<its SHA-256>`
 * and its id in `<thread>.id`, so every id is saved, listed and deleted).
 *
 * A step appends its new messages to the log, then writes the head to a
 * temporary file of its own and renames it over the old one: the rename
 * commits the step. A crash at any point leaves the last committed
 * checkpoint — bytes past the committed end of the log (a torn append) are
 * never read, and the next append writes over them. Several checkpointers on
 * one folder (in one process or in several) may save the same thread at
 * once: a log is appended to only by the instance that created it, another
 * instance writes the thread whole to a new log, and the last rename wins;
 * every load reads one whole committed checkpoint. (Renames protect against
 * a crashed process, not a lost power supply: nothing is `fsync`ed.)
 *
 * A save (its check of {@link SaveOptions} and its writes) and a delete of a
 * thread run one at a time across every instance on the folder, in this
 * process or in another: instances of one process share a lock per folder
 * path and thread (another path to the folder, such as a symlink, is
 * excluded by the lock file alone), and each also holds the thread's lock file,
 * `<thread>.lock`, created atomically and removed when done (also on failure
 * and interruption). So a thread deleted while a save runs stays deleted: the
 * delete waits for the save, and a conditional save after it fails with
 * `CheckpointError` (`conflict: "ThreadDeleted"`). A waiter polls the lock
 * file (from 2 to 100 ms apart) and can be interrupted. Its holder touches its
 * mtime while it holds it; a lock file older than `staleLockAfter` (default
 * 10 seconds), left by a crashed process, is taken over, so a thread whose
 * writer crashed mid-save waits that long for its next save. So is one whose
 * mtime is ahead of the clock (clock skew, a clock stepped back) once a waiter
 * saw it unchanged that long. A lock file that is a directory, or has no valid
 * mtime, fails the save or delete with `CheckpointError` naming it. A save costs
 * the creation and removal of the lock file. Loads take no lock file.
 *
 * A thread's file is opened only when it is a regular file: a FIFO (which
 * would wait for a writer), a socket, a directory or a device (a link to
 * `/dev/zero`) where a head, a log or an id belongs fails the load, save or
 * list with `CheckpointError` naming the file and what it is. So does a head
 * committing more of its log than one text holds (536,870,888 bytes), or
 * more than the log file holds, before anything of it is read.
 *
 * An agent's run saves into it without building the array of the whole
 * encoded thread at a step, through its `append`: the step encodes and
 * writes only its new messages.
 *
 * A file of the previous format (the whole checkpoint in `<thread>.json`)
 * still loads; the next save replaces it with a head.
 *
 * @example
 * ```ts
 * import { Checkpointer } from "@stepwise-agent/core"
 * import { NodeContext } from "@effect/platform-node"
 * import { Layer } from "effect"
 *
 * const CheckpointerLive = Checkpointer.layerFileSystem(".agent-threads").pipe(Layer.provide(NodeContext.layer))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeFileSystem = (
  directory: string,
  options?: FileSystemOptions
): Effect.Effect<Service, CheckpointError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const refused = logOptionsProblem(options, ["cachedThreads", "staleLockAfter"])
    if (refused !== undefined) return yield* new CheckpointError({ threadId: "", operation: "save", reason: refused })
    if (typeof directory !== "string" || directory.length === 0) {
      return yield* new CheckpointError({
        threadId: "",
        operation: "save",
        reason: `the checkpoint directory must be a non-empty path, not ${
          typeof directory === "string"
            ? "an empty string"
            : directory === null || directory === undefined
            ? String(directory)
            : typeof directory === "object"
            ? "an object"
            : `a ${typeof directory}`
        }`
      })
    }
    yield* makeDirectories(fs, path, directory).pipe(
      Effect.mapError((cause) =>
        new CheckpointError({
          threadId: "",
          operation: "save",
          reason: `cannot create the checkpoint directory "${directory}": ${String(cause)}`,
          cause
        })
      )
    )
    const lock = FileLock.make(fs, { staleMillis: staleLockMillis(options?.staleLockAfter) })
    const file = (name: string, suffix: string) => path.join(directory, `${name}${suffix}`)
    /** `use` run with the name of the files of `threadId` (see `internal/threadFiles.ts`). */
    const named = <A, E, R>(threadId: string, use: (name: string) => Effect.Effect<A, E, R>) =>
      Effect.flatMap(ThreadFiles.nameOf(threadId), ({ name }) => use(name))
    /** Writes `text` to `target` through a temporary file of its own, renamed over it (atomic). */
    const writeAtomically = (target: string, text: string) => {
      // unique per write, so concurrent writes (from any instance or process) never share a file
      const temporary = `${target}.${crypto.randomUUID()}.tmp`
      return Effect.zipRight(fs.writeFileString(temporary, text), fs.rename(temporary, target))
    }
    const removeLog = (threadId: string, log: { readonly generation: string }) =>
      named(threadId, (name) => fs.remove(file(name, `.${log.generation}.log`), { force: true }))
    const backend: ThreadLog.Backend = {
      readHead: (threadId) =>
        named(threadId, (name) => RegularFiles.readText(fs, file(name, ".json"))).pipe(
          Effect.asSome,
          Effect.catchIf(isNotFound, () => Effect.succeedNone)
        ),
      writeHead: (threadId, text) => named(threadId, (name) => writeAtomically(file(name, ".json"), text)),
      // every head is written after a `create` since the thread was last deleted: the `.id` of a hashed name is
      // there before the head that lists it
      create: (threadId, generation, messages) =>
        Effect.flatMap(ThreadFiles.nameOf(threadId), ({ hashed, name }): Effect.Effect<number, unknown> => {
          const lines = ThreadLog.encodeLines(messages.from(0), 0)
          if (lines instanceof ThreadLog.Corrupt) return Effect.fail(lines)
          const bytes = textEncoder.encode(lines)
          return Effect.zipRight(
            hashed ? writeAtomically(file(name, ".id"), threadId) : Effect.void,
            Effect.as(fs.writeFile(file(name, `.${generation}.log`), bytes, { flag: "wx" }), bytes.length)
          )
        }),
      append: (threadId, log, messages) => {
        const lines = ThreadLog.encodeLines(messages.from(log.messages), log.messages)
        if (lines instanceof ThreadLog.Corrupt) return Effect.fail(lines)
        const bytes = textEncoder.encode(lines)
        return named(threadId, (name) =>
          Effect.scoped(Effect.gen(function*() {
            const { handle } = yield* RegularFiles.open(fs, file(name, `.${log.generation}.log`), "r+")
            yield* handle.seek(log.end, "start")
            yield* handle.writeAll(bytes)
            // a torn append of an earlier attempt may have left more
            yield* handle.truncate(log.end + bytes.length)
            return Option.some(log.end + bytes.length)
          }))).pipe(Effect.catchIf(isNotFound, () => Effect.succeedNone))
      },
      read: (threadId, log, from) =>
        named(threadId, (name) =>
          Effect.scoped(Effect.gen(function*() {
            const { handle, size } = yield* RegularFiles.open(fs, file(name, `.${log.generation}.log`), "r")
            const start = from?.end ?? 0
            // (a log shorter than its head commits is as one that is gone)
            if (size < log.end) return Option.none()
            const length = log.end - start
            if (length > RegularFiles.maxTextBytes) {
              return yield* Effect.fail(
                new ThreadLog.Corrupt(
                  `the log's committed part is ${length} bytes, over the ${RegularFiles.maxTextBytes} read at once`
                )
              )
            }
            const buffer = new Uint8Array(length)
            yield* handle.seek(start, "start")
            if ((yield* RegularFiles.readInto(handle, buffer)) < buffer.length) return Option.none()
            return Option.some(
              yield* Effect.try({
                try: () => ThreadLog.decodeLines(textDecoder.decode(buffer), log.messages - (from?.messages ?? 0)),
                catch: (error) =>
                  error instanceof ThreadLog.Corrupt ? error : new ThreadLog.Corrupt("the log is not valid UTF-8")
              })
            )
          }))).pipe(Effect.catchIf(isNotFound, () => Effect.succeedNone)),
      removeLog,
      exclusive: (threadId, effect) => named(threadId, (name) => lock(file(name, ".lock"), effect)),
      removeThread: (threadId) =>
        named(threadId, (name) =>
          Effect.gen(function*() {
            yield* fs.remove(file(name, ".json"), { force: true })
            const prefix = `${name}.`
            const files = yield* fs.readDirectory(directory)
            yield* Effect.forEach(
              files.filter((found) =>
                found.startsWith(prefix) && ThreadFiles.isRemovedAfterHead(found.slice(prefix.length))
              ),
              (found) => fs.remove(path.join(directory, found), { force: true }),
              { discard: true }
            )
          }))
    }
    /** The id in `<name>.id`, or none when it is gone. */
    const readId = (name: string) =>
      RegularFiles.readText(fs, file(name, ".id")).pipe(
        Effect.asSome,
        Effect.catchIf(isNotFound, () => Effect.succeedNone)
      )
    // a thread is its head, `<thread>.json` (a log or a temporary file ends otherwise)
    const list: NonNullable<Service["list"]> = (listOptions) =>
      fs.readDirectory(directory).pipe(
        Effect.flatMap((files) =>
          Effect.forEach(
            files.filter((found) => found.endsWith(".json")),
            (found) => {
              const name = found.slice(0, -".json".length)
              return ThreadFiles.threadIdOf(name, readId(name))
            },
            { concurrency: 16 }
          )
        ),
        Effect.map((ids) => pageOf(ids.flatMap(Option.toArray), listOptions)),
        Effect.mapError((cause) =>
          new CheckpointError({ threadId: "", operation: "list", reason: `cannot read ${directory}`, cause })
        )
      )
    return checked({
      ...ThreadLog.make({
        backend,
        decode: decodeStored,
        encode: encodeHead,
        cachedThreads: options?.cachedThreads ?? defaultCachedThreads,
        locks: StoreLocks.ofDirectory(path.resolve(directory))
      }),
      list
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layerFileSystem = (
  directory: string,
  options?: FileSystemOptions
): Layer.Layer<Checkpointer, CheckpointError, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(Checkpointer, makeFileSystem(directory, options))
