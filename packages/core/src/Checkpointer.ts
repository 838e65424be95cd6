/**
 * Persists each thread's state after every step, so a thread continues where
 * it stopped — in the same process or in a new one.
 *
 * `layerMemory` keeps checkpoints in the process; `layerFileSystem` writes
 * one JSON file per thread (atomically: a crash mid-write leaves the previous
 * checkpoint intact); `layerKeyValueStore` uses any `@effect/platform`
 * `KeyValueStore`.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as KeyValueStore from "@effect/platform/KeyValueStore"
import * as Path from "@effect/platform/Path"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { CheckpointError } from "./AgentError.js"

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
  Checkpointer.Service
>() {}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace Checkpointer {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    readonly load: (threadId: string) => Effect.Effect<Option.Option<Checkpoint>, CheckpointError>
    readonly save: (threadId: string, checkpoint: Checkpoint) => Effect.Effect<void, CheckpointError>
    readonly delete: (threadId: string) => Effect.Effect<void, CheckpointError>
  }
}

/**
 * An in-memory checkpointer. Checkpoints are kept as encoded values, exactly
 * as a durable store would receive them, but are never serialized to text.
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
export const makeMemory: Effect.Effect<Checkpointer.Service> = Effect.sync(() => {
  const store = new Map<string, Checkpoint>()
  return Checkpointer.of({
    load: (threadId) => Effect.sync(() => Option.fromNullable(store.get(threadId))),
    save: (threadId, checkpoint) => Effect.sync(() => void store.set(threadId, checkpoint)),
    delete: (threadId) => Effect.sync(() => void store.delete(threadId))
  })
})

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
    description: `the stored checkpoint is not valid: ${ParseResult.TreeFormatter.formatErrorSync(error)}`
  })

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
  Effect.mapError(Schema.encode(CheckpointJson)(checkpoint), parseFailure(threadId, "save"))

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
  Effect.mapError(Schema.decode(CheckpointJson)(text), parseFailure(threadId, "load"))

const ioFailure = (threadId: string, operation: "load" | "save") => (cause: unknown) =>
  new CheckpointError({ threadId, operation, description: String(cause), cause })

/**
 * A checkpointer on a `KeyValueStore`: one JSON value per thread under
 * `prefix + threadId`.
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
  options?: { readonly prefix?: string | undefined }
): Effect.Effect<Checkpointer.Service, never, KeyValueStore.KeyValueStore> =>
  Effect.map(KeyValueStore.KeyValueStore, (store) => {
    const key = (threadId: string) => `${options?.prefix ?? "thread:"}${threadId}`
    return Checkpointer.of({
      load: (threadId) =>
        store.get(key(threadId)).pipe(
          Effect.mapError(ioFailure(threadId, "load")),
          Effect.flatMap(Option.match({
            onNone: () => Effect.succeedNone,
            onSome: (json) => Effect.asSome(fromJson(threadId, json))
          }))
        ),
      save: (threadId, checkpoint) =>
        toJson(threadId, checkpoint).pipe(
          Effect.flatMap((json) => store.set(key(threadId), json)),
          Effect.mapError((error) => error._tag === "CheckpointError" ? error : ioFailure(threadId, "save")(error))
        ),
      delete: (threadId) => store.remove(key(threadId)).pipe(Effect.mapError(ioFailure(threadId, "save")))
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layerKeyValueStore = (
  options?: { readonly prefix?: string | undefined }
): Layer.Layer<Checkpointer, never, KeyValueStore.KeyValueStore> =>
  Layer.effect(Checkpointer, makeKeyValueStore(options))

/**
 * A checkpointer writing one JSON file per thread in `directory` (created if
 * missing). Each save writes a temporary file of its own and renames it over
 * the old one, so neither a crash during a save nor concurrent saves (several
 * instances or processes on one folder) ever leave a torn checkpoint: the
 * last rename wins.
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
  directory: string
): Effect.Effect<Checkpointer.Service, CheckpointError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    yield* fs.makeDirectory(directory, { recursive: true }).pipe(
      Effect.mapError(ioFailure(directory, "save"))
    )
    const file = (threadId: string) => path.join(directory, `${encodeURIComponent(threadId)}.json`)
    return Checkpointer.of({
      load: (threadId) =>
        fs.exists(file(threadId)).pipe(
          Effect.flatMap((exists) => exists ? Effect.asSome(fs.readFileString(file(threadId))) : Effect.succeedNone),
          Effect.mapError(ioFailure(threadId, "load")),
          Effect.flatMap(Option.match({
            onNone: () => Effect.succeedNone,
            onSome: (json) => Effect.asSome(fromJson(threadId, json))
          }))
        ),
      save: (threadId, checkpoint) =>
        Effect.gen(function*() {
          const json = yield* toJson(threadId, checkpoint)
          const target = file(threadId)
          // unique per save, so concurrent saves (from any instance or process) never share a file
          const temporary = `${target}.${crypto.randomUUID()}.tmp`
          yield* fs.writeFileString(temporary, json).pipe(
            Effect.zipRight(fs.rename(temporary, target)),
            Effect.mapError(ioFailure(threadId, "save"))
          )
        }),
      delete: (threadId) =>
        fs.remove(file(threadId), { force: true }).pipe(Effect.mapError(ioFailure(threadId, "save")))
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layerFileSystem = (
  directory: string
): Layer.Layer<Checkpointer, CheckpointError, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(Checkpointer, makeFileSystem(directory))
