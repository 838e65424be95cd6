/**
 * Offload and truncation: keeps large tool results and long tool-call
 * arguments out of the model's context without losing them.
 *
 * In `wrapModelCall` (the view: the stored thread keeps every message
 * whole), {@link middleware} replaces each tool result longer than
 * `maxResultChars` by a short reference with a head and tail preview, and
 * writes the full text, byte-exact, to an {@link OffloadStore}. The model
 * reads it back in pages with the `read_offloaded` tool. It also cuts string
 * arguments longer than `maxArgChars` in tool calls older than the last
 * `keepCalls`, in the view only.
 *
 * A reference is a function of the thread (its id and incarnation) and the
 * content (a SHA-256 prefix over their exact UTF-16 code units), so the same
 * input gives the same reference in every process and on every replay of a
 * durable run, and threads sharing one store never share a reference: nor
 * does a thread deleted and made again with the same id, or a fork.
 * `read_offloaded` gives a text only to the thread it was offloaded from (it
 * checks the text it reads against the reference and the thread). Since the
 * stored thread holds the whole result, a reference the store has lost (a
 * new process with an in-memory store) is found again in the thread when
 * `read_offloaded` asks for it.
 *
 * The references a thread offloaded are kept in its state (the `offloads`
 * slice), and `deleteThread` removes their texts from the store.
 *
 * Only the text of parts changes, never which messages or parts there are:
 * every tool call keeps its result.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as KeyValueStore from "@effect/platform/KeyValueStore"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { identityMemo } from "./internal/fast/identityMemo.js"
import * as IdentityTable from "./internal/fast/identityTable.js"
import * as Marker from "./internal/marker.js"
import * as Check from "./internal/options.js"
import * as Reserved from "./internal/reservedPaths.js"
import { serviceOrOwn } from "./internal/serviceOrOwn.js"
import { sha256Utf16 } from "./internal/sha256.js"
import * as ThreadTexts from "./internal/threadTexts.js"
import * as WholeCharacters from "./internal/wholeCharacters.js"
import * as Workspace from "./Workspace.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * The name of the read-back tool.
 *
 * @since 0.1.0
 * @category models
 */
export const toolName = "read_offloaded"

/**
 * How many characters `read_offloaded` gives when the model sets no `limit`.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultPageChars = 10_000

/**
 * A page of an offloaded text: `text` is the characters `offset` to `end`
 * of `total`; `end === total` on the last page.
 *
 * @since 0.1.0
 * @category models
 */
export const Page = Schema.Struct({
  ref: Schema.String,
  offset: Schema.Number,
  end: Schema.Number,
  total: Schema.Number,
  text: Schema.String
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Page extends Schema.Schema.Type<typeof Page> {}

/**
 * The `read_offloaded` tool.
 *
 * @since 0.1.0
 * @category models
 */
export const ReadOffloaded = Tool.make(toolName, {
  description: "Read a tool result that was offloaded from the conversation because it was too large, by the " +
    "reference given in its place. It returns the characters offset to offset + limit and the total length; read " +
    "on from `end` until `end` equals `total`.",
  parameters: {
    // only a reference this module makes: anything else (a path such as "../x") never reaches the store
    ref: Schema.String.pipe(Schema.pattern(/^ofl_[0-9a-f]{16}$/)).annotations({
      description: "The reference, e.g. ofl_3f2a9c0d1e4b5a6c"
    }),
    offset: Schema.optional(Schema.Int.pipe(Schema.nonNegative())).annotations({
      description: "The first character to give, from 0 (default 0)"
    }),
    limit: Schema.optional(Schema.Int.pipe(Schema.positive())).annotations({
      description: `How many characters to give (default ${defaultPageChars})`
    })
  },
  success: Page,
  failure: Schema.Struct({ error: Schema.String }),
  failureMode: "return"
}).annotate(Tool.Readonly, true)

/**
 * A toolkit holding {@link ReadOffloaded}, for code that needs the tool's
 * definition (the middleware brings its own handled copy).
 *
 * @since 0.1.0
 * @category models
 */
export const toolkit = Toolkit.make(ReadOffloaded)

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** A tool result longer than this (in characters) is offloaded (default 80000, about 20000 tokens). */
  readonly maxResultChars?: number | undefined
  /**
   * A tool result over this many tokens, by the agent's `TokenCounter` (which the agent then needs),
   * is offloaded too.
   */
  readonly maxResultTokens?: number | undefined
  /** Characters of the head and of the tail shown in place of an offloaded result (default 500 each). */
  readonly previewChars?: number | undefined
  /** A string argument of an old tool call longer than this is cut in the view (default 2000). */
  readonly maxArgChars?: number | undefined
  /** The most recent tool calls whose arguments are never cut (default 3). */
  readonly keepCalls?: number | undefined
  /**
   * Tools whose results are never offloaded (`read_offloaded` never is).
   * `Agent.make` fails with `AgentError.UnknownTools` on a name that is not a tool of the agent.
   */
  readonly excludeTools?: ReadonlyArray<string> | undefined
}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * What an {@link OffloadError} is about: `"NotFound"`, no offloaded text under
 * the reference; `"StoreFailed"`, the store failed to read or write
 * (`detail` says how).
 *
 * @since 0.1.0
 * @category errors
 */
export const OffloadErrorReason = Schema.Literal("NotFound", "StoreFailed")

/**
 * @since 0.1.0
 * @category errors
 */
export type OffloadErrorReason = typeof OffloadErrorReason.Type

/**
 * A failure of the {@link OffloadStore} on one reference; `reason` says which
 * ({@link OffloadErrorReason}).
 *
 * @example
 * ```ts
 * import { Offload } from "@stepwise-agent/middleware"
 *
 * const missing = new Offload.OffloadError({ reason: "NotFound", ref: "t1-0f3a" })
 * missing.message // 'Nothing was offloaded under the reference "t1-0f3a"'
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class OffloadError extends Schema.TaggedError<OffloadError>(
  "@stepwise-agent/middleware/Offload/OffloadError"
)("OffloadError", {
  reason: OffloadErrorReason,
  ref: Schema.String,
  /** `"StoreFailed"`: what failed. */
  detail: Schema.optional(Schema.String)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.reason === "NotFound"
      ? `Nothing was offloaded under the reference "${this.ref}"`
      : `The offload store failed on "${this.ref}": ${this.detail}`
  }
}

// -----------------------------------------------------------------------------
// tags
// -----------------------------------------------------------------------------

/**
 * Where offloaded texts are kept, by reference. Provide it (e.g.
 * {@link layerKeyValueStore} or {@link layerWorkspace}) where the agent is
 * built and run; without one, the middleware keeps its own in memory. One
 * store may serve many threads: a reference belongs to one thread
 * ({@link referenceOf}), and the middleware checks what it reads against the
 * reference and the reading thread. A store must give back exactly the
 * string it was given, lone surrogates included (the stores of this module
 * do). A store with `remove` (the stores of this module) loses a thread's
 * texts when the agent deletes the thread; one without it keeps them.
 *
 * @since 0.1.0
 * @category tags
 */
export class OffloadStore extends Context.Tag("@stepwise-agent/middleware/Offload/OffloadStore")<
  OffloadStore,
  OffloadStore.Service
>() {}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace OffloadStore {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** Keeps `content` under `ref` (writing the same pair again changes nothing). */
    readonly put: (ref: string, content: string) => Effect.Effect<void, OffloadError>
    /** The content kept under `ref`, exactly as it was put (a `"NotFound"` error when none is). */
    readonly get: (ref: string) => Effect.Effect<string, OffloadError>
    /**
     * Forgets the content kept under `ref` (nothing kept under it is not an
     * error). The middleware calls it for each text of a thread the agent
     * deletes; a store without it keeps those texts.
     */
    readonly remove?: ((ref: string) => Effect.Effect<void, OffloadError>) | undefined
  }
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/**
 * The thread a text is offloaded from: its id and its incarnation (the nonce
 * `Middleware.HookContext`, `ModelRequest` and `ToolCallRequest` carry; new
 * when the thread is deleted and made again, or forked). `undefined`: a
 * thread stored before incarnations.
 *
 * @example
 * ```ts
 * import type { Middleware } from "@stepwise-agent/core"
 * import type { Offload } from "@stepwise-agent/middleware"
 *
 * // a hook's request is one
 * const threadOf = (request: Middleware.ModelRequest): Offload.Thread => request
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Thread {
  readonly threadId: string
  readonly incarnation?: string | undefined
}

/**
 * The reference of a text offloaded from a thread: `ofl_` and the first 16
 * hex digits of the SHA-256 of the thread's id and incarnation and the text
 * (their exact UTF-16 code units, so a lone surrogate and U+FFFD give
 * different references). The same in every process; different for the same
 * text in another thread, and in the same thread once it is deleted and made
 * again. A thread without an incarnation (stored before them) gets the
 * references it had then.
 *
 * @example
 * ```ts
 * import { Offload } from "@stepwise-agent/middleware"
 *
 * const ref = Offload.referenceOf({ threadId: "thread-1", incarnation: "5f0c2a9e81d3b746" }, "hello")
 * // "ofl_" and 16 hex digits
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const referenceOf = (thread: Thread, content: string): string =>
  // lengths before each part, and a first character no earlier reference hashed ("i", not a digit): no other
  // (thread, incarnation, text) hashes the same string
  `ofl_${
    sha256Utf16(
      thread.incarnation === undefined
        ? `${thread.threadId.length}:${thread.threadId}:${content}`
        : `i${thread.incarnation.length}:${thread.incarnation}:${thread.threadId.length}:${thread.threadId}:${content}`
    ).slice(0, 16)
  }`

/** A lone surrogate (half of a UTF-16 pair): text with one does not survive a UTF-8 file. */
const loneSurrogate = /\p{Cs}/u

/** `content` as a JSON string: ASCII-safe escapes keep every UTF-16 code unit, lone surrogates included. */
const encodeExact = (content: string): string => JSON.stringify(content)

/** The text {@link encodeExact} wrote; `undefined` when `stored` is not a JSON string. */
const decodeExact = (stored: string): string | undefined => {
  try {
    const text: unknown = JSON.parse(stored)
    return typeof text === "string" ? text : undefined
  } catch {
    return undefined
  }
}

/**
 * An {@link OffloadStore} in memory.
 *
 * @example
 * ```ts
 * import { Offload } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const store = yield* Offload.makeMemory
 *   yield* store.put("ofl_1", "a long text")
 *   return yield* store.get("ofl_1")
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<OffloadStore.Service> = Effect.sync(() => {
  const texts = new Map<string, string>()
  return OffloadStore.of({
    put: (ref, content) => Effect.sync(() => void texts.set(ref, content)),
    get: (ref) =>
      Effect.suspend(() => {
        const content = texts.get(ref)
        return content === undefined
          ? Effect.fail(new OffloadError({ reason: "NotFound", ref }))
          : Effect.succeed(content)
      }),
    remove: (ref) => Effect.sync(() => void texts.delete(ref))
  })
})

/**
 * Provides {@link makeMemory} as the {@link OffloadStore}: the texts live as
 * long as the layer, in this process (the middleware's default when no store
 * is provided).
 *
 * @example
 * ```ts
 * import { Offload } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const store = yield* Offload.OffloadStore
 *   yield* store.put("ofl_0123456789abcdef", "a long text")
 *   return yield* store.get("ofl_0123456789abcdef")
 * }).pipe(Effect.provide(Offload.layerMemory))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<OffloadStore> = Layer.effect(OffloadStore, makeMemory)

/**
 * A store given an option of another kind (from JavaScript): every use
 * fails with `"StoreFailed"` saying what the option got, as the store's
 * layer has no failure of its own.
 */
const refusingStore = (option: string, value: unknown): OffloadStore.Service => {
  const refuse = (ref: string) =>
    Effect.fail(
      new OffloadError({
        reason: "StoreFailed",
        ref,
        detail: `the store's ${option} option must be a string, got ${Check.describeValue(value)}`
      })
    )
  return OffloadStore.of({ put: refuse, get: refuse, remove: refuse })
}

/**
 * An {@link OffloadStore} on a `KeyValueStore` (e.g. `layerFileSystem` of
 * `@effect/platform-node`), under keys `<prefix><ref>` (default prefix
 * `"offload/"`). Each text is kept as a JSON string, so it reads back
 * exactly, lone surrogates included, from a store that keeps UTF-8.
 *
 * @example
 * ```ts
 * import { Offload } from "@stepwise-agent/middleware"
 * import { KeyValueStore } from "@effect/platform"
 * import { Layer } from "effect"
 *
 * const layer = Offload.layerKeyValueStore().pipe(Layer.provide(KeyValueStore.layerMemory))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerKeyValueStore = (
  options?: { readonly prefix?: string | undefined } | undefined
): Layer.Layer<OffloadStore, never, KeyValueStore.KeyValueStore> =>
  Layer.effect(
    OffloadStore,
    Effect.map(KeyValueStore.KeyValueStore, (kv) => {
      const prefix: unknown = options?.prefix ?? "offload/"
      if (typeof prefix !== "string") return refusingStore("prefix", prefix)
      const failed = (ref: string) => (error: { readonly message: string }) =>
        new OffloadError({ reason: "StoreFailed", ref, detail: error.message })
      return OffloadStore.of({
        put: (ref, content) => Effect.mapError(kv.set(prefix + ref, encodeExact(content)), failed(ref)),
        get: (ref) =>
          kv.get(prefix + ref).pipe(
            Effect.mapError(failed(ref)),
            Effect.flatMap(Option.match({
              onNone: () => Effect.fail(new OffloadError({ reason: "NotFound", ref })),
              onSome: (stored): Effect.Effect<string, OffloadError> => {
                const content = decodeExact(stored)
                return content === undefined
                  ? Effect.fail(
                    new OffloadError({ reason: "StoreFailed", ref, detail: "the stored value is not a JSON string" })
                  )
                  : Effect.succeed(content)
              }
            }))
          ),
        remove: (ref) =>
          kv.remove(prefix + ref).pipe(
            // a file system store fails on a key it does not have: nothing to forget
            Effect.catchIf((error) => error._tag === "SystemError" && error.reason === "NotFound", () => Effect.void),
            Effect.mapError(failed(ref))
          )
      })
    })
  )

/**
 * An {@link OffloadStore} on the `Workspace`: each text is the file
 * `<directory>/<ref>.txt` (default directory `"/offloaded"`). The directory
 * is reserved: the `Filesystem` tools, which every thread shares, neither
 * list nor read nor write it, so a thread reads its texts with
 * `read_offloaded` only, and never another thread's. A text with a lone
 * surrogate, which a UTF-8 file cannot hold, is the file `<ref>.json` instead,
 * a JSON string, so every text reads back exactly. Its `remove` deletes the
 * file, on a workspace that can (`Workspace.Service.remove`: the bundled
 * ones); on one that cannot, the store has no `remove` and keeps the texts.
 *
 * @example
 * ```ts
 * import { Offload, Workspace } from "@stepwise-agent/middleware"
 * import { Layer } from "effect"
 *
 * const layer = Offload.layerWorkspace().pipe(Layer.provide(Workspace.layerMemory()))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWorkspace = (
  options?: { readonly directory?: string | undefined } | undefined
): Layer.Layer<OffloadStore, never, Workspace.Workspace> =>
  Layer.effect(
    OffloadStore,
    Effect.map(Workspace.Workspace, (workspace) => {
      const directory: unknown = options?.directory ?? "/offloaded"
      if (typeof directory !== "string") return refusingStore("directory", directory)
      // the texts belong to the threads they came from: the Filesystem tools (of every thread) do not see them
      Reserved.reserve(workspace, directory)
      const pathOf = (ref: string, extension: "txt" | "json") => `${directory}/${ref}.${extension}`
      const failed = (ref: string) => (error: Workspace.WorkspaceError) =>
        new OffloadError(
          error.reason === "NotFound"
            ? { reason: "NotFound", ref }
            : { reason: "StoreFailed", ref, detail: error.message }
        )
      return OffloadStore.of({
        put: (ref, content) =>
          Effect.mapError(
            loneSurrogate.test(content)
              ? workspace.write(pathOf(ref, "json"), encodeExact(content))
              : workspace.write(pathOf(ref, "txt"), content),
            (error) => new OffloadError({ reason: "StoreFailed", ref, detail: error.message })
          ),
        get: (ref) =>
          Effect.mapError(workspace.read(pathOf(ref, "txt")), failed(ref)).pipe(
            Effect.catchIf((error) => error.reason === "NotFound", () =>
              Effect.flatMap(Effect.mapError(workspace.read(pathOf(ref, "json")), failed(ref)), (stored) => {
                const content = decodeExact(stored)
                return content === undefined
                  ? Effect.fail(
                    new OffloadError({ reason: "StoreFailed", ref, detail: "the stored file is not a JSON string" })
                  )
                  : Effect.succeed(content)
              }))
          ),
        remove: workspace.remove === undefined ? undefined : (ref) =>
          Effect.forEach(
            [pathOf(ref, "txt"), pathOf(ref, "json")],
            (path) =>
              workspace.remove!(path).pipe(
                Effect.catchIf((error) => error.reason === "NotFound", () => Effect.void),
                Effect.mapError((error) => new OffloadError({ reason: "StoreFailed", ref, detail: error.message }))
              ),
            { discard: true }
          )
      })
    })
  )

// -----------------------------------------------------------------------------
// the view
// -----------------------------------------------------------------------------

/**
 * The text of a tool result: itself when it is a string, else its JSON.
 *
 * @example
 * ```ts
 * import { Offload } from "@stepwise-agent/middleware"
 *
 * Offload.textOf({ hits: 3 }) // '{"hits":3}'
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const textOf = (result: unknown): string => typeof result === "string" ? result : JSON.stringify(result) ?? ""

/**
 * The reference the view put in place of a tool result, if it did.
 *
 * @example
 * ```ts
 * import { Offload } from "@stepwise-agent/middleware"
 * import { Prompt } from "@effect/ai"
 *
 * const part = Prompt.makePart("tool-result", {
 *   id: "c1", name: "search", result: "…", isFailure: false, providerExecuted: false,
 *   options: { stepwise: { offloaded: "ofl_2cf24dba5fb0a30e" } }
 * })
 * Offload.offloadedRef(part) // Option.some("ofl_2cf24dba5fb0a30e")
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const offloadedRef = (part: Prompt.ToolResultPart): Option.Option<string> => {
  const ref = part.options[Marker.markerKey]?.offloaded
  return typeof ref === "string" ? Option.some(ref) : Option.none()
}

/**
 * The text the model sees in place of an offloaded result: the reference,
 * how to read it, and its first and last `previewChars` characters.
 *
 * @example
 * ```ts
 * import { Offload } from "@stepwise-agent/middleware"
 *
 * const shown = Offload.referenceText("x".repeat(5000), "ofl_0123456789abcdef", 100)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const referenceText = (content: string, ref: string, previewChars: number): string =>
  `[Tool result offloaded: ${content.length} characters, reference "${ref}". Only its start and end are shown; ` +
  `read it whole in pages with ${toolName}({ "ref": "${ref}", "offset": 0 }).]\n` +
  `${WholeCharacters.head(content, previewChars)}\n` +
  `[... ${content.length - 2 * previewChars} characters omitted ...]\n` +
  WholeCharacters.tail(content, previewChars)

/** Cuts every string in `value` longer than `max`; the value itself when nothing is cut. */
const truncateStrings = (value: unknown, max: number): unknown => {
  if (typeof value === "string") {
    return value.length <= max ? value : `${WholeCharacters.head(value, max)}... [${value.length - max} characters cut]`
  }
  if (Array.isArray(value)) {
    let out: Array<unknown> | undefined
    value.forEach((item, i) => {
      const cut = truncateStrings(item, max)
      if (cut !== item) (out ??= [...value])[i] = cut
    })
    return out ?? value
  }
  if (typeof value === "object" && value !== null) {
    let out: Record<string, unknown> | undefined
    for (const [key, item] of Object.entries(value)) {
      const cut = truncateStrings(item, max)
      if (cut !== item) (out ??= { ...value })[key] = cut
    }
    return out ?? value
  }
  return value
}

interface Config {
  readonly maxResultChars: number
  readonly maxResultTokens: number | undefined
  readonly previewChars: number
  readonly maxArgChars: number
  readonly keepCalls: number
  readonly excluded: ReadonlySet<string>
}

/** A texts to offload, by reference, that a view put aside. */
type Offloaded = Map<string, string>

/** A tool result's raw tokens, as the middleware measured them (none without `maxResultTokens`). */
type TokensOf = (part: Prompt.ToolResultPart) => number

const noTokens: TokensOf = () => 0

/** Whether `a` and `b` are one thread: the same id and incarnation. */
const sameThread = (a: Thread, b: Thread): boolean => a.threadId === b.threadId && a.incarnation === b.incarnation

/**
 * The view of `messages` of a thread: results over the size offloaded (added
 * to `offloaded`, under references of that thread), string arguments of
 * calls older than the last `keepCalls` cut. The input array itself when
 * nothing changes. Parts and messages are memoized by identity (and thread:
 * the same message objects in two threads, or two incarnations of one, get
 * each one's references), so a model call only works on the new messages
 * (`fast/identityMemo.ts`, `fast/identityTable.ts`).
 */
const makeView = (config: Config) => {
  /** The view of a result in a thread: its shown part, reference and content, or null when it stays whole. */
  interface ResultView {
    readonly thread: Thread
    readonly offloaded: readonly [Prompt.ToolResultPart, string, string] | null
  }
  const results = IdentityTable.make<Prompt.ToolResultPart, ResultView>()

  const resultView = (
    thread: Thread,
    part: Prompt.ToolResultPart,
    offloaded: Offloaded,
    tokensOf: TokensOf
  ): Prompt.ToolResultPart => {
    let entry = results.get(part)
    if (entry === undefined || !sameThread(entry.thread, thread)) {
      let cached: ResultView["offloaded"] = null
      if (!config.excluded.has(part.name) && Option.isNone(offloadedRef(part))) {
        const content = textOf(part.result)
        if (
          content.length > config.maxResultChars ||
          (config.maxResultTokens !== undefined && tokensOf(part) > config.maxResultTokens)
        ) {
          const ref = referenceOf(thread, content)
          const shown = Prompt.makePart("tool-result", {
            id: part.id,
            name: part.name,
            // a result offloaded for its tokens may be shorter than two previews
            result: referenceText(content, ref, Math.min(config.previewChars, Math.floor((content.length - 1) / 2))),
            isFailure: part.isFailure,
            providerExecuted: part.providerExecuted,
            options: { ...part.options, [Marker.markerKey]: { ...part.options[Marker.markerKey], offloaded: ref } }
          })
          cached = [shown, ref, content]
        }
      }
      entry = { thread, offloaded: cached }
      results.set(part, entry)
    }
    const cached = entry.offloaded
    if (cached === null) return part
    offloaded.set(cached[1], cached[2])
    return cached[0]
  }

  const callView = identityMemo((part: Prompt.ToolCallPart): Prompt.ToolCallPart => {
    // a call this view already cut stays as it is, so the view of a view is itself
    const params = part.options[Marker.markerKey]?.truncated === true
      ? part.params
      : truncateStrings(part.params, config.maxArgChars)
    return params === part.params ? part : Prompt.makePart("tool-call", {
      id: part.id,
      name: part.name,
      params,
      providerExecuted: part.providerExecuted,
      options: { ...part.options, [Marker.markerKey]: { ...part.options[Marker.markerKey], truncated: true } }
    })
  })

  /** The view of one message; its first `keepAt` calls are cut, the rest stay whole. */
  const messageView = (
    thread: Thread,
    message: Prompt.Message,
    keepAt: number,
    offloaded: Offloaded,
    tokensOf: TokensOf
  ): Prompt.Message => {
    let content: Array<Prompt.Part> | undefined
    if (message.role === "tool") {
      message.content.forEach((part, j) => {
        const shown = resultView(thread, part, offloaded, tokensOf)
        if (shown !== part) (content ??= [...message.content])[j] = shown
      })
    } else if (message.role === "assistant") {
      let index = 0
      message.content.forEach((part, j) => {
        if (part.type !== "tool-call" || index++ >= keepAt) return
        const shown = callView(part)
        if (shown !== part) (content ??= [...message.content])[j] = shown
      })
    }
    return content === undefined ? message : Prompt.makeMessage(message.role as "tool", {
      content: content as Array<Prompt.ToolMessagePart>,
      options: message.options
    })
  }

  // The views of the messages whose view does not depend on what follows them, by identity (and thread): a
  // message is viewed (and its texts offloaded) once, when first seen.
  const views = IdentityTable.make<Prompt.Message, { readonly thread: Thread; readonly shown: Prompt.Message }>()

  /**
   * The previous call's input and view, by first message (one per thread, in practice): a call whose
   * messages start with the same objects copies the view of that prefix, up to `firstMoving`, the first
   * message whose view depended on what followed it (an assistant message with calls kept whole).
   */
  interface Previous {
    readonly thread: Thread
    readonly input: ReadonlyArray<Prompt.Message>
    readonly output: ReadonlyArray<Prompt.Message>
    readonly firstMoving: number
    /** The first message whose view is not the message itself (`Infinity`: none). */
    readonly firstChanged: number
  }
  const previous = IdentityTable.make<Prompt.Message, Previous>()

  const isPrefix = (prefix: ReadonlyArray<Prompt.Message>, messages: ReadonlyArray<Prompt.Message>): boolean => {
    if (prefix.length > messages.length) return false
    for (let i = prefix.length - 1; i >= 0; i--) if (prefix[i] !== messages[i]) return false
    return true
  }

  return (
    thread: Thread,
    messages: ReadonlyArray<Prompt.Message>,
    offloaded: Offloaded,
    tokensOf: TokensOf = noTokens
  ): ReadonlyArray<Prompt.Message> => {
    if (messages.length === 0) return messages
    // the calls whose arguments stay whole: the last keepCalls
    let whole = config.keepCalls
    let firstMoving = messages.length
    const keepFrom = new Map<Prompt.Message, number>()
    for (let i = messages.length - 1; i >= 0 && whole > 0; i--) {
      const message = messages[i]!
      if (message.role !== "assistant") continue
      let n = 0
      for (const part of message.content) if (part.type === "tool-call") n++
      keepFrom.set(message, Math.max(0, n - whole))
      whole -= Math.min(n, whole)
      firstMoving = i
    }
    const before = previous.get(messages[0]!)
    const start = before !== undefined && sameThread(before.thread, thread) && isPrefix(before.input, messages)
      ? before.firstMoving
      : 0
    const out = start === 0 ? new Array<Prompt.Message>(messages.length) : before!.output.slice(0, start)
    out.length = messages.length
    let firstChanged = start === 0 ? Infinity : before!.firstChanged
    for (let i = start; i < messages.length; i++) {
      const message = messages[i]!
      const keepAt = message.role === "assistant" ? keepFrom.get(message) : undefined
      // a tool message, or an assistant message with no call kept whole, has one view whatever comes after it
      const known = keepAt === undefined ? views.get(message) : undefined
      let shown = known !== undefined && sameThread(known.thread, thread) ? known.shown : undefined
      if (shown === undefined) {
        shown = messageView(thread, message, keepAt ?? Infinity, offloaded, tokensOf)
        if (keepAt === undefined) views.set(message, { thread, shown })
      }
      out[i] = shown
      if (shown !== message && i < firstChanged) firstChanged = i
    }
    previous.set(messages[0]!, { thread, input: messages, output: out, firstMoving, firstChanged })
    return firstChanged < messages.length ? out : messages
  }
}

/**
 * The view {@link middleware} gives the model of a thread (its id and
 * incarnation), as a pure function: the messages with results over
 * `maxResultChars` replaced by references (of that thread,
 * {@link referenceOf}) and long arguments of old calls cut, and the
 * texts it offloaded by reference. For tests and tools that need to see what
 * the model sees. With `maxResultTokens`, `tokensOf` gives a result's tokens
 * (the middleware measures them with the agent's `TokenCounter`).
 *
 * @example
 * ```ts
 * import { Offload } from "@stepwise-agent/middleware"
 *
 * const shown = Offload.view({ threadId: "thread-1", incarnation: "5f0c2a9e81d3b746" }, [], { maxResultChars: 1000 })
 * // { messages: [], offloaded: Map(0) }
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const view = (
  thread: Thread,
  messages: ReadonlyArray<Prompt.Message>,
  options?: Options | undefined,
  tokensOf?: ((part: Prompt.ToolResultPart) => number) | undefined
): { readonly messages: ReadonlyArray<Prompt.Message>; readonly offloaded: ReadonlyMap<string, string> } => {
  const offloaded: Offloaded = new Map()
  return { messages: makeView(configOf(options ?? {}))(thread, messages, offloaded, tokensOf), offloaded }
}

const configOf = (options: Options): Config => {
  const previewChars = options.previewChars ?? 500
  return {
    maxResultChars: Math.max(options.maxResultChars ?? 80_000, 2 * previewChars),
    maxResultTokens: options.maxResultTokens,
    previewChars,
    maxArgChars: options.maxArgChars ?? 2000,
    keepCalls: options.keepCalls ?? 3,
    excluded: new Set([toolName, ...(options.excludeTools ?? [])])
  }
}

// -----------------------------------------------------------------------------
// the middleware
// -----------------------------------------------------------------------------

const OptionsSchema = Schema.Struct({
  maxResultChars: Schema.optional(Schema.Int.pipe(Schema.positive())),
  maxResultTokens: Schema.optional(Schema.Int.pipe(Schema.positive())),
  previewChars: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  maxArgChars: Schema.optional(Schema.Int.pipe(Schema.positive())),
  keepCalls: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  excludeTools: Schema.optional(Schema.Array(Schema.String))
})

/**
 * The page of an offloaded text that `read_offloaded` gives for `offset` and
 * `limit` (in UTF-16 characters, a page never splitting a surrogate pair):
 * reading on from each page's `end` until it equals `total` gives the text
 * back exactly.
 *
 * @example
 * ```ts
 * import { Offload } from "@stepwise-agent/middleware"
 *
 * Offload.page("ofl_0123456789abcdef", "abcdef", 4, 10) // { ..., offset: 4, end: 6, total: 6, text: "ef" }
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const page = (ref: string, content: string, offset: number, limit: number): Page => {
  let start = Math.min(offset, content.length)
  // an offset inside a surrogate pair starts at the pair: a page never begins with half a character
  if (
    start > 0 && WholeCharacters.isLowSurrogate(content.charCodeAt(start)) &&
    WholeCharacters.isHighSurrogate(content.charCodeAt(start - 1))
  ) start--
  let end = Math.min(content.length, start + limit)
  // never cut a surrogate pair in two: each page is well-formed text
  if (end < content.length && WholeCharacters.isHighSurrogate(content.charCodeAt(end - 1))) {
    end += end - 1 > start
      ? -1
      : 1
  }
  return { ref, offset: start, end, total: content.length, text: content.slice(start, end) }
}

/**
 * The text offloaded under `ref` from `thread`, found again in its messages: a
 * tool result whose reference it is (`legacy`: its reference from before
 * incarnations, which the thread may still name).
 */
const findInThread = (
  thread: Thread,
  messages: ReadonlyArray<Prompt.Message>,
  ref: string
): Option.Option<{ readonly content: string; readonly legacy: boolean }> => {
  const legacy: Thread = { threadId: thread.threadId }
  for (const message of messages) {
    if (message.role !== "tool") continue
    for (const part of message.content) {
      const content = textOf(part.result)
      if (referenceOf(thread, content) === ref) return Option.some({ content, legacy: false })
      if (thread.incarnation !== undefined && referenceOf(legacy, content) === ref) {
        return Option.some({ content, legacy: true })
      }
    }
  }
  return Option.none()
}

/**
 * Whether a summary of the thread names `ref` (`Summarization`'s `offload`
 * puts the messages it evicts in the store, and names their reference in the
 * summary message, kept in the messages or, in view mode, in the state).
 */
const namedBySummary = (
  messages: ReadonlyArray<Prompt.Message>,
  state: Readonly<Record<string, unknown>>,
  ref: string
): boolean => {
  const view = state.summaryView as { readonly text?: unknown } | null | undefined
  if (typeof view?.text === "string" && view.text.includes(ref)) return true
  return messages.some((message) =>
    message.role === "user" && message.options[Marker.markerKey]?.summarization === "summary" &&
    message.content.some((part) => part.type === "text" && part.text.includes(ref))
  )
}

// -----------------------------------------------------------------------------
// the thread's offloaded texts
// -----------------------------------------------------------------------------

/**
 * The texts a thread offloaded, as its state keeps them for `deleteThread`:
 * the thread they belong to (a fork starts with a copy of its parent's
 * slice, which is not its own) and their references, in the order they
 * were offloaded.
 *
 * @example
 * ```ts
 * import { Offload } from "@stepwise-agent/middleware"
 * import { Schema } from "effect"
 *
 * const offloads = Schema.decodeUnknownSync(Offload.Offloads)({ threadId: "t1", refs: ["ofl_2cf24dba5fb0a30e"] })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const Offloads = Schema.Struct({
  threadId: Schema.String,
  refs: Schema.Array(Schema.String)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Offloads extends Schema.Schema.Type<typeof Offloads> {}

/**
 * The state slice of {@link middleware}: the texts the thread offloaded
 * (`null` until it offloads one).
 *
 * @example
 * ```ts
 * import type { Offload } from "@stepwise-agent/middleware"
 *
 * // the references a thread's result state records, from the agent's state
 * const refsOf = (state: Offload.State): ReadonlyArray<string> => state.offloads?.refs ?? []
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const State = Schema.Struct({ offloads: Schema.NullOr(Offloads) })

/**
 * @since 0.1.0
 * @category models
 */
export interface State extends Schema.Schema.Type<typeof State> {}

/** The key of the slice of {@link State}. */
const sliceKey = "offloads" as const

/**
 * Offloads tool results longer than `maxResultChars` from what the model
 * sees to the {@link OffloadStore} (byte-exact, under a reference derived
 * from the content), shows a reference with a head and tail preview in
 * their place, and adds the `read_offloaded` tool to read them back in
 * pages. String arguments longer than `maxArgChars` of tool calls older than
 * the last `keepCalls` are cut in the view. With `maxResultTokens`, a
 * result over that many tokens by the agent's `TokenCounter` is offloaded
 * too, and the middleware needs a `TokenCounter`. The stored thread is never
 * changed. Without an `OffloadStore` where the agent runs, the middleware
 * keeps its own in memory. Bad options make `Agent.make` fail with
 * `AgentError.InvalidOptions`.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Offload, Workspace } from "@stepwise-agent/middleware"
 * import { Effect, Layer } from "effect"
 *
 * const program = Agent.make({
 *   middleware: [Offload.middleware({ maxResultChars: 20_000, keepCalls: 5 })]
 * }).pipe(Effect.provide(Offload.layerWorkspace().pipe(Layer.provide(Workspace.layerMemory()))))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware: {
  (
    options: Options & { readonly maxResultTokens: number }
  ): Middleware.Middleware<State, never, TokenCounter.TokenCounter>
  (options?: Options | undefined): Middleware.Middleware<State>
} = (options?: Options | undefined): any => Check.middlewareOf("Offload", OptionsSchema, options, build)

/** The thread of a request, as a value of its own (a memoized view keeps it, not the request). */
const threadOf = (request: Thread): Thread =>
  request.incarnation === undefined
    ? { threadId: request.threadId }
    : { threadId: request.threadId, incarnation: request.incarnation }

const build = (options: Options): Middleware.Middleware<State, never, TokenCounter.TokenCounter> => {
  const config = configOf(options)
  // Raw token counts of the tool results, measured before a view when maxResultTokens is set.
  const tokens = IdentityTable.make<Prompt.ToolResultPart, number>()
  const viewOf = makeView(config)

  /**
   * The raw tokens of the tool results of `messages`: those the table knows, and the others measured now
   * (the counter caches by identity too).
   */
  const measure = (
    messages: ReadonlyArray<Prompt.Message>
  ): Effect.Effect<TokensOf, never, TokenCounter.TokenCounter> =>
    Effect.gen(function*() {
      const parts: Array<Prompt.ToolResultPart> = []
      for (const message of messages) {
        if (message.role !== "tool") continue
        for (const part of message.content) {
          if (tokens.get(part) === undefined && !config.excluded.has(part.name)) parts.push(part)
        }
      }
      if (parts.length === 0) return (part: Prompt.ToolResultPart) => tokens.get(part) ?? 0
      const counts = yield* Effect.flatMap(TokenCounter.TokenCounter, (counter) => counter.measure(parts))
      const measured = new Map<Prompt.ToolResultPart, number>()
      parts.forEach((part, i) => {
        tokens.set(part, counts[i]!)
        measured.set(part, counts[i]!)
      })
      return (part: Prompt.ToolResultPart) => measured.get(part) ?? tokens.get(part) ?? 0
    })
  // The app's store when the agent runs with one, else this middleware's own.
  const store = serviceOrOwn(OffloadStore, makeMemory)

  /** Removes the texts under `refs` from the store (it cannot fail; one without `remove` keeps them). */
  const remove = ThreadTexts.remover("Offload")
  const forget = (refs: ReadonlyArray<string>) => Effect.flatMap(store, (service) => remove(service, refs))

  /**
   * A page of the text offloaded under `ref` from `thread`, and whether it was put in the store again: what
   * the store holds when it is that thread's text under that reference (a text another thread, or an earlier
   * incarnation of this one, offloaded, or one the store did not keep exactly, is not), else the result in the
   * thread's messages (also when the store fails to give the text back). A reference from before incarnations is the thread's when its messages hold the text,
   * or a summary of it names it.
   */
  const read = (
    thread: Thread,
    ref: string,
    offset: number,
    limit: number,
    messages: ReadonlyArray<Prompt.Message>,
    state: Readonly<Record<string, unknown>>
  ) =>
    Effect.gen(function*() {
      const service = yield* store
      const stored = yield* Effect.either(service.get(ref))
      if (
        stored._tag === "Right" && (referenceOf(thread, stored.right) === ref || (
          thread.incarnation !== undefined && referenceOf({ threadId: thread.threadId }, stored.right) === ref &&
          namedBySummary(messages, state, ref)
        ))
      ) {
        return { page: page(ref, stored.right, offset, limit), put: false }
      }
      // the store does not have it (a new process, or it was removed), or cannot give it back (a file over the
      // workspace's size limit, a store that fails): the thread still holds the whole result
      const found = findInThread(thread, messages, ref)
      const failed = stored._tag === "Left" && stored.left.reason === "StoreFailed" ? stored.left : undefined
      if (Option.isNone(found)) return yield* (failed ?? new OffloadError({ reason: "NotFound", ref }))
      const { content, legacy } = found.value
      // an earlier reference is read from the thread only: the store keeps texts under the current ones;
      // a store that failed to give the text back is not given it again, and one that refuses it (a text over
      // a directory workspace's size limit) fails nothing: the thread holds it
      const put = !legacy && failed === undefined &&
        (yield* Effect.match(service.put(ref, content), { onFailure: () => false, onSuccess: () => true }))
      return { page: page(ref, content, offset, limit), put }
    })

  // The handler serves the calls the wrapToolCall below leaves to it: those with invalid arguments, which it
  // answers with a failed result the model can repair. A call that reaches it otherwise cannot tell the
  // thread's incarnation, so it finds nothing.
  const tools = Effect.flatMap(
    toolkit.toContext({
      read_offloaded: ({ ref }) => Effect.fail({ error: new OffloadError({ reason: "NotFound", ref }).message })
    }),
    (context) => Effect.provide(toolkit, context)
  )

  return Middleware.make({
    name: "offload",
    state: { schema: State, initial: { offloads: null } },
    tools,
    uses: { tools: options.excludeTools },
    wrapModelCall: (request, next) =>
      Effect.gen(function*() {
        const tokensOf = config.maxResultTokens === undefined ? noTokens : yield* measure(request.messages)
        const offloaded: Offloaded = new Map()
        const messages = viewOf(threadOf(request), request.messages, offloaded, tokensOf)
        const sent = messages === request.messages ? request : { ...request, messages }
        if (offloaded.size === 0) return yield* next(sent)
        const service = yield* store
        // A failed write loses nothing (the thread holds the whole result, where read_offloaded finds it):
        // it is reported and the call goes on.
        yield* Effect.forEach(offloaded, ([ref, content]) =>
          service.put(ref, content).pipe(
            Effect.catchAll((error) => Middleware.report(`offload store failed: ${error.message}`, { ref }))
          ), { discard: true })
        const refs = [...offloaded.keys()]
        yield* Middleware.report(`offloaded ${offloaded.size} tool result(s)`, { refs })
        // the thread's state records the new references once the call ends; when it fails, their texts go,
        // and so do they when the run ends before a save holds them
        const recorded = ThreadTexts.recording(request.state, sliceKey, request.threadId, refs)
        if (recorded === undefined) return yield* next(sent)
        const response = yield* Effect.onError(next(sent), () => forget(recorded.fresh))
        yield* ThreadTexts.removeUnsavedAtRunEnd(sliceKey, request.threadId, recorded.fresh, forget)
        return { ...response, state: recorded.state }
      }),
    // Answers read_offloaded here, where the thread's messages are at hand for a reference the store lost.
    wrapToolCall: (request, next) => {
      if (request.call.name !== toolName) return next(request)
      const params = Schema.decodeUnknownOption(ReadOffloaded.parametersSchema)(request.call.params)
      if (Option.isNone(params)) return next(request)
      const { limit, offset, ref } = params.value
      const messages = (request.state as { readonly messages?: ReadonlyArray<Prompt.Message> }).messages ?? []
      return read(threadOf(request), ref, offset ?? 0, limit ?? defaultPageChars, messages, request.state).pipe(
        Effect.matchEffect({
          onFailure: (error) =>
            Effect.succeed<Middleware.ToolCallResponse>(
              Middleware.toolResult(request.call, { error: error.message }, { isFailure: true })
            ),
          onSuccess: ({ page, put }) => {
            const result = Middleware.toolResult(request.call, page)
            // a text put in the store again is the thread's to remove with it (or when the run ends unsaved)
            const recorded = put ? ThreadTexts.recording(request.state, sliceKey, request.threadId, [ref]) : undefined
            return recorded === undefined
              ? Effect.succeed<Middleware.ToolCallResponse>(result)
              : Effect.as(
                ThreadTexts.removeUnsavedAtRunEnd(sliceKey, request.threadId, recorded.fresh, forget),
                { ...result, state: recorded.state }
              )
          }
        })
      )
    },
    onThreadDeleted: (threadId, state) =>
      Option.match(state, {
        onNone: () => Effect.void,
        onSome: (slice) => forget(ThreadTexts.ownRefs(slice, sliceKey, threadId))
      })
  })
}
