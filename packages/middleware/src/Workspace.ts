/**
 * A workspace: the files an agent's file tools work on, behind one service
 * with two kinds of storage — an in-memory map of files ({@link makeMemory},
 * which the `Filesystem` middleware also uses over the agent's `files` state
 * slice) and a real directory jailed to a root ({@link makeDirectory}).
 *
 * Every failure is one {@link WorkspaceError} whose `reason` says what was
 * wrong. Every path is a virtual path rooted at "/" (the workspace's root): `..`
 * that climbs above it, and, for a directory, a symbolic link that leads out
 * of it, fail with `"OutsideRoot"`; a directory's FIFOs, sockets,
 * devices and hard-linked files fail with `"Unsupported"`, a
 * file that is not UTF-8 with `"NotUtf8"`, and one over its
 * `maxFileBytes` with `"TooLarge"`. Access rules
 * ({@link Rule}) make paths read-only: a write there (on a directory,
 * also through a link inside the root) fails with `"ReadOnly"`. `glob` matches in linear time (patterns up to
 * {@link maxGlobLength} characters) and yields as it searches, so a tool
 * timeout can end it. Every error has a message the model can read; the `Filesystem` tools answer with it instead of failing
 * the run.
 *
 * {@link composite} routes paths by prefix to other workspaces (deepagents'
 * `CompositeBackend`): `/memories/...` to a real directory, the rest to
 * memory, with `ls`, `glob` and `grep` merging across them, and access rules
 * of its own over every path.
 *
 * @since 0.1.0
 */
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Jail from "./internal/hostJail.js"
import * as Check from "./internal/options.js"
import * as Paths from "./internal/workspacePaths.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * An entry of a directory listing.
 *
 * @since 0.1.0
 * @category models
 */
export interface Entry {
  /** The entry's virtual path ("/notes/todo.md"). */
  readonly path: string
  readonly isDirectory: boolean
  /** Size in bytes of its UTF-8 text, as on a disk (files only; 0 for a directory). */
  readonly size: number
}

/**
 * A line that `grep` found.
 *
 * @since 0.1.0
 * @category models
 */
export interface GrepMatch {
  readonly path: string
  /** From 1. */
  readonly line: number
  readonly text: string
}

/**
 * What a path allows: reading only, or reading and writing.
 *
 * @since 0.1.0
 * @category models
 */
export type Access = "read-only" | "read-write"

/**
 * An access rule. `pattern` is a glob (`/docs/*.md`, `/vendor/**`) matched
 * against the whole virtual path, or, without glob syntax, a directory
 * prefix (`/docs` covers `/docs` and everything under it). The first rule
 * that matches a path decides its access.
 *
 * A glob is read as a path, each plain pattern its braces stand for alone:
 * rooted at "/" (`docs/*` is `/docs/*`), runs of "/" one, `.` segments and
 * a "/" at the end dropped, so `{/docs/**,/vendor/**}` and
 * `{/docs,/vendor}/**` hold as written out one by one, and a glob ending in
 * "/" as without it. A glob whose braces stand for more than 256 plain
 * patterns, nest more than 32 deep, or stand for patterns that add up to
 * more than 65,536 characters, or a glob with a `..` segment, is refused
 * (the error names the limit and shows the pattern cut to 80 characters): `makeDirectory` and
 * `composite` (and the `Filesystem` middleware) fail with
 * `AgentError.InvalidOptions` naming it; `makeMemory` and `fromStorage`,
 * which cannot fail, hold such a read-only rule over every path and such a
 * read-write rule over none.
 *
 * @since 0.1.0
 * @category models
 */
export interface Rule {
  readonly pattern: string
  readonly access: Access
}

/**
 * Options shared by the workspace constructors.
 *
 * @since 0.1.0
 * @category models
 */
export interface AccessOptions {
  /** Checked in order; the first that matches a path decides. */
  readonly rules?: ReadonlyArray<Rule> | undefined
  /** The access of a path no rule matches (default "read-write"). */
  readonly defaultAccess?: Access | undefined
}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * What a {@link WorkspaceError} refused, in one word (as `SystemError`'s
 * `reason` in `@effect/platform`):
 *
 * - `"OutsideRoot"`: the path leads out of the workspace (`..` above the
 *   root, a NUL byte or a lone surrogate — names no file system stores —, a
 *   symbolic link that points outside the root directory, or a link whose
 *   target does not exist: it cannot be checked, and a write would create it);
 * - `"ReadOnly"`: a write to a path whose rule makes it read-only;
 * - `"NotFound"`: no file (or, for a listing, no directory) at the path;
 * - `"EditStringEmpty"`: an edit's `oldString` is empty;
 * - `"EditStringNotFound"`: an edit's `oldString` is not in the file;
 * - `"EditNotUnique"`: an edit's `oldString` occurs `occurrences` times and
 *   `replaceAll` was not set;
 * - `"Unsupported"`: a file the workspace does not read, write or list by
 *   policy — a FIFO, socket or device, or a regular file with more than one
 *   hard link (which may be a file outside the root under a second name);
 *   `detail` says which;
 * - `"NotUtf8"`: a file that is not UTF-8 text (or a write whose text UTF-8
 *   cannot encode, a lone surrogate): refused rather than re-encoded, so the
 *   file stays as it is;
 * - `"TooLarge"`: a file of `size` bytes, over the `max` a directory
 *   workspace reads or writes (its `maxFileBytes`, {@link defaultMaxFileBytes}
 *   unless set): refused before it is read, so a huge file never fills the
 *   memory, or before it is written, so no file is written that the
 *   workspace would not read back;
 * - `"GlobTooLong"`: a glob pattern of `size` characters, over `max`
 *   ({@link maxGlobLength});
 * - `"Io"`: the storage failed (a directory workspace's file system error, or
 *   a write over a directory or under a file); `detail` says how.
 *
 * @since 0.1.0
 * @category errors
 */
export const WorkspaceErrorReason = Schema.Literal(
  "OutsideRoot",
  "ReadOnly",
  "NotFound",
  "EditStringEmpty",
  "EditStringNotFound",
  "EditNotUnique",
  "Unsupported",
  "NotUtf8",
  "TooLarge",
  "GlobTooLong",
  "PathTooLong",
  "Io"
)

/**
 * @since 0.1.0
 * @category errors
 */
export type WorkspaceErrorReason = typeof WorkspaceErrorReason.Type

/**
 * Every refusal of a workspace: `reason` says what was wrong
 * ({@link WorkspaceErrorReason}), `path` where, and the message says both
 * in words the model can act on (the `Filesystem` tools answer with it).
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * const readOrEmpty = (workspace: Workspace.Service, path: string) =>
 *   workspace.read(path).pipe(
 *     Effect.catchTag("WorkspaceError", (error) =>
 *       error.reason === "NotFound" ? Effect.succeed("") : Effect.fail(error))
 *   )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class WorkspaceError extends Schema.TaggedError<WorkspaceError>(
  "@stepwise-agent/middleware/Workspace/WorkspaceError"
)("WorkspaceError", {
  reason: WorkspaceErrorReason,
  /** The virtual path refused (for `"GlobTooLong"`, the path searched). */
  path: Schema.String,
  /** `"Unsupported"`: the kind of file ("FIFO", "hard link"); `"Io"`: what failed. */
  detail: Schema.optional(Schema.String),
  /** `"EditNotUnique"`: how many times the string to replace occurs. */
  occurrences: Schema.optional(Schema.Number),
  /** `"TooLarge"`: the file's bytes; `"GlobTooLong"`, `"PathTooLong"`: the pattern's or path's characters. */
  size: Schema.optional(Schema.Number),
  /** The limit `size` exceeds (`"TooLarge"`, `"GlobTooLong"`, `"PathTooLong"`). */
  max: Schema.optional(Schema.Number)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    const path = this.path
    switch (this.reason) {
      case "OutsideRoot":
        return `The path "${path}" leads outside the workspace`
      case "ReadOnly":
        return `The path "${path}" is read-only`
      case "NotFound":
        return `No file or directory at "${path}"`
      case "EditStringEmpty":
        return `The string to replace in "${path}" is empty; give the exact text to replace`
      case "EditStringNotFound":
        return `The string to replace was not found in "${path}"; read the file and copy the text exactly`
      case "EditNotUnique":
        return `The string to replace occurs ${this.occurrences} times in "${path}"; set replace_all to replace ` +
          "every occurrence, or give a longer string that occurs once"
      case "Unsupported":
        return `"${path}" is a ${this.detail}; the workspace reads and writes only regular files with one link`
      case "NotUtf8":
        return `"${path}" is not UTF-8 text; the file tools read and change only text, and left it untouched`
      case "TooLarge":
        return `"${path}" is ${this.size} bytes; the workspace reads files of at most ${this.max} bytes`
      case "GlobTooLong":
        return `The glob pattern is ${this.size} characters long; give one of at most ${this.max}`
      case "PathTooLong":
        return `The path "${path}…" is ${this.size} characters long; give one of at most ${this.max}`
      case "Io":
        return `Could not access "${path}": ${this.detail}`
    }
  }
}

// -----------------------------------------------------------------------------
// tags
// -----------------------------------------------------------------------------

/**
 * The files an agent works on. Provide {@link layerMemory} or
 * {@link layerDirectory}; the `Filesystem` middleware in `"workspace"` mode
 * and `Offload.layerWorkspace` use it.
 *
 * @since 0.1.0
 * @category tags
 */
export class Workspace extends Context.Tag("@stepwise-agent/middleware/Workspace")<Workspace, Service>() {}

/**
 * What a `Workspace` does with its files.
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 *
 * const readme = (workspace: Workspace.Service) => workspace.read("/README.md")
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** The entries directly under a directory (a file path lists that file). */
  readonly ls: (path: string) => Effect.Effect<ReadonlyArray<Entry>, WorkspaceError>
  /** A file's whole content. */
  readonly read: (path: string) => Effect.Effect<string, WorkspaceError>
  /**
   * Creates or replaces a file (and the directories above it). `guard`,
   * when given, is asked too whether the place written may change, where
   * links lead (see {@link WriteGuard}).
   */
  readonly write: (
    path: string,
    content: string,
    guard?: WriteGuard | undefined
  ) => Effect.Effect<void, WorkspaceError>
  /**
   * Replaces `oldString` by `newString` in a file: the one occurrence, or
   * every one with `replaceAll`; gives how many it replaced. `guard` as
   * for `write`.
   */
  readonly edit: (
    path: string,
    oldString: string,
    newString: string,
    replaceAll: boolean,
    guard?: WriteGuard | undefined
  ) => Effect.Effect<number, WorkspaceError>
  /**
   * The files under `path` (default "/") whose path matches the glob,
   * sorted; a pattern longer than {@link maxGlobLength} fails with
   * `"GlobTooLong"`.
   */
  readonly glob: (pattern: string, path?: string | undefined) => Effect.Effect<ReadonlyArray<string>, WorkspaceError>
  /** The lines that contain `text` (literally), in files under `path` matching `glob`, by path then line. */
  readonly grep: (
    text: string,
    options?: { readonly path?: string | undefined; readonly glob?: string | undefined }
  ) => Effect.Effect<ReadonlyArray<GrepMatch>, WorkspaceError>
  /**
   * Deletes a file (never a directory: `"Io"`), under the same rules as a
   * write (`guard` as for `write`); a missing file fails with `"NotFound"`.
   * A link is deleted itself, never where it leads. The bundled workspaces
   * have it; one without it cannot delete (`Offload.layerWorkspace` then
   * keeps its texts).
   */
  readonly remove?: ((path: string, guard?: WriteGuard | undefined) => Effect.Effect<void, WorkspaceError>) | undefined
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/**
 * Whether a write may change the file or directory at a normalized virtual
 * path: the access rules, asked about the real place a write reaches (on a
 * directory, past every link inside the root), not only the path given.
 * A {@link composite} passes its rules down to the workspaces it routes to
 * as one.
 *
 * @example
 * ```ts
 * import type { Workspace } from "@stepwise-agent/middleware"
 *
 * const outsideDocs: Workspace.WriteGuard = (path) => !path.startsWith("/docs/")
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type WriteGuard = (path: string) => boolean

/**
 * What a storage provides; {@link fromStorage} adds paths, rules, edits,
 * glob and grep on top. Paths given to it are normalized virtual paths.
 *
 * @since 0.1.0
 * @category models
 */
export interface Storage {
  readonly ls: (path: string) => Effect.Effect<ReadonlyArray<Entry>, WorkspaceError>
  readonly read: (path: string) => Effect.Effect<string, WorkspaceError>
  /**
   * Creates or replaces a file. A storage whose paths can lead elsewhere
   * (links) asks `guard` about the place the write really changes, and
   * each directory it makes, failing with `"ReadOnly"` where it
   * says no.
   */
  readonly write: (path: string, content: string, guard: WriteGuard) => Effect.Effect<void, WorkspaceError>
  /** Every file under a directory (recursively), as virtual paths. */
  readonly files: (path: string) => Effect.Effect<ReadonlyArray<string>, WorkspaceError>
  /**
   * Deletes a file (a link itself, not where it leads), asking `guard`
   * about the place it changes; a storage without it cannot delete.
   */
  readonly remove?: ((path: string, guard: WriteGuard) => Effect.Effect<void, WorkspaceError>) | undefined
}

/**
 * The result of replacing `oldString` by `newString` in `content`, or the
 * reason it cannot be done: the text to replace is empty or absent, or
 * occurs more than once without `replaceAll`.
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 *
 * Workspace.replaceIn("/a.txt", "a b a", "a", "c", true) // { content: "c b c", occurrences: 2 }
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const replaceIn = (
  path: string,
  content: string,
  oldString: string,
  newString: string,
  replaceAll: boolean
): { readonly content: string; readonly occurrences: number } | WorkspaceError => {
  if (oldString === "") return new WorkspaceError({ reason: "EditStringEmpty", path })
  const parts = content.split(oldString)
  const occurrences = parts.length - 1
  if (occurrences === 0) return new WorkspaceError({ reason: "EditStringNotFound", path })
  if (occurrences > 1 && !replaceAll) return new WorkspaceError({ reason: "EditNotUnique", path, occurrences })
  return { content: parts.join(newString), occurrences }
}

/**
 * The access of the first rule matching `path` (by `matches`), else the
 * default. A rule whose pattern is refused (the constructors that can fail
 * refuse it) holds as safely as it can: read-only everywhere, or, read-write,
 * nowhere.
 */
const firstAccess = (
  options: AccessOptions,
  path: string,
  matches: (pattern: string, path: string) => boolean
): Access => {
  for (const rule of options.rules ?? []) {
    const refused = Paths.ruleProblem(rule.pattern) !== undefined
    if (refused ? rule.access === "read-only" : matches(rule.pattern, path)) return rule.access
  }
  return options.defaultAccess ?? "read-write"
}

/** The `InvalidOptions` of the first rule whose pattern is refused (see {@link Rule}). */
const badRules = (options: AccessOptions): AgentError.InvalidOptions | undefined => {
  for (const [index, rule] of (options.rules ?? []).entries()) {
    const problem = Paths.ruleProblem(rule.pattern)
    if (problem === undefined) continue
    return new AgentError.InvalidOptions({
      module: "Workspace",
      option: `rules[${index}].pattern`,
      reason: `${
        JSON.stringify(rule.pattern.length > 80 ? `${rule.pattern.slice(0, 77)}...` : rule.pattern)
      } is refused: ${problem}`
    })
  }
  return undefined
}

/**
 * The access of a normalized path: read-only when its rules say so, or say
 * so of its folded form (`/DOCS/a.md`, `/docs./a.md` for a read-only
 * `/docs`): macOS and Windows take such twins for one file.
 */
const accessOf = (options: AccessOptions, path: string): Access =>
  firstAccess(options, path, Paths.matchesRule) === "read-only" ||
    firstAccess(options, Paths.fold(path), (pattern, folded) => Paths.matchesRule(Paths.fold(pattern), folded)) ===
      "read-only"
    ? "read-only"
    : "read-write"

const splitLines = (content: string): ReadonlyArray<string> => content.split(/\r?\n/)

/**
 * The longest glob pattern `glob` and `grep` take, in characters (real patterns are far shorter; the bound keeps
 * a search over many long paths to a few hundred steps a character); a longer
 * one fails with `"GlobTooLong"`. Matching takes time linear in the
 * path, times the pattern's length at most, whatever the pattern.
 *
 * @since 0.1.0
 * @category models
 */
export const maxGlobLength = 256

const checkGlob = (pattern: string, path: string): Effect.Effect<void, WorkspaceError> =>
  typeof pattern !== "string"
    ? Effect.fail(notText(typeof path === "string" ? path : "", "the glob pattern", pattern))
    : pattern.length > maxGlobLength
    ? Effect.fail(new WorkspaceError({ reason: "GlobTooLong", path, size: pattern.length, max: maxGlobLength }))
    : Effect.void

/** `content` for a write to `path`, or a `"NotUtf8"` error when UTF-8 cannot encode it: every storage stores text alike. */
const encodable = (path: string, content: string): Effect.Effect<string, WorkspaceError> =>
  typeof content !== "string"
    ? Effect.fail(notText(path, "the content", content))
    : Paths.hasLoneSurrogate(content)
    ? Effect.fail(new WorkspaceError({ reason: "NotUtf8", path }))
    : Effect.succeed(content)

/** From JavaScript, a path or a content that is not a string: an `"Io"` error saying what it got. */
const notText = (path: string, what: string, value: unknown): WorkspaceError =>
  new WorkspaceError({ reason: "Io", path, detail: `${what} must be a string, got ${Check.describeValue(value)}` })

/** The access `options` give a normalized path, checked for a write: a `"ReadOnly"` error when read-only. */
const checkWritable = (options: AccessOptions, path: string): Effect.Effect<string, WorkspaceError> =>
  accessOf(options, path) === "read-only"
    ? Effect.fail(new WorkspaceError({ reason: "ReadOnly", path }))
    : Effect.succeed(path)

/**
 * The longest path a workspace takes, in characters: a file system's own
 * limit (`PATH_MAX`, 4,096 bytes on Linux). A longer one fails with
 * `"PathTooLong"` before it is read (normalizing a long run of combining marks
 * takes time that grows with the square of its length).
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 *
 * Workspace.maxPathLength // 4096
 * ```
 *
 * @since 0.1.0
 * @category constants
 */
export const maxPathLength = 4096

/** The normalized `path`, or an `"OutsideRoot"` (or `"PathTooLong"`) error. */
const resolve = (path: string): Effect.Effect<string, WorkspaceError> => {
  if (typeof path !== "string") return Effect.fail(notText("", "the path", path))
  if (path.length > maxPathLength) {
    return Effect.fail(
      new WorkspaceError({ reason: "PathTooLong", path: path.slice(0, 80), size: path.length, max: maxPathLength })
    )
  }
  const normal = Paths.normalize(path)
  return normal === undefined
    ? Effect.fail(new WorkspaceError({ reason: "OutsideRoot", path }))
    : Effect.succeed(normal)
}

/**
 * A workspace over a {@link Storage}: normalizes paths (failing with
 * `"OutsideRoot"`), applies the access rules to writes and edits,
 * and builds `edit`, `glob` and `grep` from the storage's primitives.
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * const files = new Map<string, string>()
 * const workspace = Workspace.fromStorage(Workspace.memoryStorage(files), {
 *   rules: [{ pattern: "/docs", access: "read-only" }]
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromStorage = (storage: Storage, options: AccessOptions = {}): Service => {
  const writable = (path: string) => Effect.flatMap(resolve(path), (normalized) => checkWritable(options, normalized))
  /** These rules, and the ones a caller (a composite) adds, over the real place a write reaches. */
  const guardWith = (added: WriteGuard | undefined): WriteGuard => (path) =>
    accessOf(options, path) !== "read-only" && (added === undefined || added(path))
  const glob = (pattern: string, path?: string | undefined) =>
    Effect.gen(function*() {
      yield* checkGlob(pattern, path ?? "/")
      const base = yield* resolve(path ?? "/")
      return (yield* Paths.filterMatching(pattern, base, yield* storage.files(base))).sort()
    })
  return Workspace.of({
    ls: (path) => Effect.flatMap(resolve(path), storage.ls),
    read: (path) => Effect.flatMap(resolve(path), storage.read),
    write: (path, content, guard) =>
      Effect.flatMap(
        writable(path),
        (normalized) =>
          Effect.flatMap(encodable(normalized, content), (text) => storage.write(normalized, text, guardWith(guard)))
      ),
    edit: (path, oldString, newString, replaceAll, guard) =>
      Effect.gen(function*() {
        const normalized = yield* writable(path)
        const replaced = replaceIn(normalized, yield* storage.read(normalized), oldString, newString, replaceAll)
        if (replaced instanceof WorkspaceError) return yield* replaced
        yield* storage.write(normalized, yield* encodable(normalized, replaced.content), guardWith(guard))
        return replaced.occurrences
      }),
    glob,
    grep: (text, grepOptions) =>
      Effect.gen(function*() {
        if (typeof text !== "string") return yield* notText("", "the text to find", text)
        const base = yield* resolve(grepOptions?.path ?? "/")
        const files = grepOptions?.glob === undefined ?
          [...(yield* storage.files(base))].sort() :
          yield* glob(grepOptions.glob, base)
        const matches: Array<GrepMatch> = []
        for (const file of files) {
          // a file that cannot be read (a link out of the root) is left out, not fatal to the search
          const content = yield* Effect.option(storage.read(file))
          if (content._tag === "None" || !content.value.includes(text)) continue
          splitLines(content.value).forEach((line, index) => {
            if (line.includes(text)) matches.push({ path: file, line: index + 1, text: line })
          })
        }
        return matches
      }),
    remove: storage.remove === undefined ?
      undefined :
      (path, guard) => Effect.flatMap(writable(path), (normalized) => storage.remove!(normalized, guardWith(guard)))
  })
}

/** The length of `text` in UTF-8 bytes, without encoding it. */
const utf8Length = (text: string): number => {
  let bytes = 0
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    // a surrogate pair is 4 bytes: 2 per half
    bytes += unit < 0x80 ? 1 : unit < 0x800 ? 2 : unit >= 0xd800 && unit <= 0xdfff ? 2 : 3
  }
  return bytes
}

/**
 * A {@link Storage} over a map from virtual paths to contents, changed in
 * place: directories are implied by the paths of their files. `onWrite` is
 * told of each write (the `Filesystem` middleware records what a tool call
 * changed with it).
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 *
 * const storage = Workspace.memoryStorage(new Map([["/a.txt", "hello"]]))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const memoryStorage = (
  files: Map<string, string>,
  onWrite?: ((path: string, content: string) => void) | undefined
): Storage => ({
  ls: (path) =>
    Effect.suspend(() => {
      const file = files.get(path)
      if (file !== undefined) return Effect.succeed([{ path, isDirectory: false, size: utf8Length(file) }])
      const entries = new Map<string, Entry>()
      const prefix = path === "/" ? "/" : `${path}/`
      for (const [name, content] of files) {
        if (!name.startsWith(prefix)) continue
        const rest = name.slice(prefix.length)
        const slash = rest.indexOf("/")
        const child = prefix + (slash === -1 ? rest : rest.slice(0, slash))
        if (!entries.has(child)) {
          entries.set(child, { path: child, isDirectory: slash !== -1, size: slash === -1 ? utf8Length(content) : 0 })
        }
      }
      if (entries.size === 0 && path !== "/") return Effect.fail(new WorkspaceError({ reason: "NotFound", path }))
      return Effect.succeed([...entries.values()].sort((a, b) => a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    }),
  read: (path) =>
    Effect.suspend(() => {
      const content = files.get(path)
      return content === undefined
        ? Effect.fail(new WorkspaceError({ reason: "NotFound", path }))
        : Effect.succeed(content)
    }),
  write: (path, content) =>
    Effect.suspend(() => {
      // as on a disk: a file is not written over a directory, nor under a file
      if (path === "/" || [...files.keys()].some((name) => name.startsWith(`${path}/`))) {
        return Effect.fail(new WorkspaceError({ reason: "Io", path, detail: "it is a directory" }))
      }
      for (let slash = path.lastIndexOf("/"); slash > 0; slash = path.lastIndexOf("/", slash - 1)) {
        if (files.has(path.slice(0, slash))) {
          return Effect.fail(new WorkspaceError({ reason: "Io", path, detail: "a directory above it is a file" }))
        }
      }
      files.set(path, content)
      onWrite?.(path, content)
      return Effect.void
    }),
  files: (path) => Effect.sync(() => [...files.keys()].filter((name) => Paths.isWithin(name, path))),
  remove: (path) =>
    Effect.suspend(() => {
      if (files.delete(path)) return Effect.void
      return [...files.keys()].some((name) => Paths.isWithin(name, path))
        ? Effect.fail(new WorkspaceError({ reason: "Io", path, detail: "it is a directory" }))
        : Effect.fail(new WorkspaceError({ reason: "NotFound", path }))
    })
})

/**
 * A workspace held in memory, optionally seeded with files.
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const workspace = yield* Workspace.makeMemory({ files: { "/README.md": "# Hello" } })
 *   yield* workspace.edit("/README.md", "Hello", "World", false)
 *   return yield* workspace.read("/README.md") // "# World"
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory = (
  options?: AccessOptions & { readonly files?: Readonly<Record<string, string>> | undefined } | undefined
): Effect.Effect<Service> =>
  Effect.sync(() => {
    const files = new Map<string, string>()
    for (const [path, content] of Object.entries(options?.files ?? {})) {
      const normalized = Paths.normalize(path)
      if (normalized !== undefined) files.set(normalized, content)
    }
    return fromStorage(memoryStorage(files), options)
  })

/**
 * Options of {@link makeDirectory}.
 *
 * @since 0.1.0
 * @category models
 */
export interface DirectoryOptions extends AccessOptions {
  /** The host directory that "/" stands for; it must exist. */
  readonly root: string
  /**
   * The largest file read (and so edited or searched) or written, in bytes
   * (default {@link defaultMaxFileBytes}); a larger one fails with
   * `"TooLarge"` (a write before anything is made) and `grep` leaves it out.
   */
  readonly maxFileBytes?: number | undefined
}

/**
 * The largest file a directory workspace reads unless its `maxFileBytes`
 * says otherwise: 10 MiB.
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 *
 * Workspace.defaultMaxFileBytes // 10485760
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const defaultMaxFileBytes = 10 * 1024 * 1024

/**
 * A workspace over a real directory, jailed to `root`: the virtual path
 * "/a/b" is `<root>/a/b`, and nothing outside the root is read, written or
 * listed, also while another process swaps links in it.
 *
 * - `..` cannot climb above the root, and a symbolic link that leads out of
 *   it (or whose target is missing) fails with `"OutsideRoot"`. A link
 *   that stays inside the root is followed. Each file is checked after it is
 *   opened (by the descriptor's real path, `/proc/self/fd` on Linux), so a
 *   link swapped in meanwhile is caught, and a new file is created only in a
 *   directory so checked. (Where `/proc/self/fd` is missing, on macOS and
 *   Windows, a swap can still hit the instant before a file or directory is
 *   made; the write then fails and removes it: see the filesystem guide.)
 * - The root is the directory `root` names when the workspace is made (a
 *   link resolved then). When its path no longer names that directory
 *   (renamed away, replaced by a link or another directory, removed),
 *   every operation fails with `"Io"`, and nothing is read, made or
 *   deleted where the path leads now.
 * - The access rules also hold where a link inside the root leads: with
 *   `/docs` read-only, a write through a link to it fails with
 *   `"ReadOnly"`.
 * - A file over `maxFileBytes` (default {@link defaultMaxFileBytes}) fails
 *   with `"TooLarge"` before it is read, and a write (or an edit) whose
 *   content is over it fails before anything is made: a file the workspace
 *   would not read back is not written. `grep` leaves such a file out. A
 *   `maxFileBytes` that is not a whole number of bytes fails with
 *   `AgentError.InvalidOptions`.
 * - Only regular files and directories are used: a FIFO, socket or device,
 *   and a file with more than one hard link (it may be a file outside the
 *   root under a second name), fail with `"Unsupported"`, without
 *   waiting on the file.
 * - Files are UTF-8 text: reading or editing one that is not fails with
 *   `"NotUtf8"` and leaves it as it is.
 * - `ls`, `glob` and `grep` list only what `read` accepts, and do not walk
 *   into a linked directory.
 *
 * It needs Node's `fs` (Node, Bun, Deno).
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const workspace = yield* Workspace.makeDirectory({
 *     root: "/srv/project",
 *     rules: [{ pattern: "/.git", access: "read-only" }]
 *   })
 *   return yield* workspace.glob("*.ts", "/src")
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeDirectory = (
  options: DirectoryOptions
): Effect.Effect<Service, WorkspaceError | AgentError.InvalidOptions> =>
  Effect.gen(function*() {
    // from JavaScript: options, or a root, of another kind (the root cannot be named by a WorkspaceError's path)
    if (!Predicate.isObject(options)) {
      return yield* Check.invalid("Workspace", "options", `must be an object, got ${Check.describeValue(options)}`)
    }
    if (typeof options.root !== "string" || options.root.length === 0) {
      return yield* Check.invalid(
        "Workspace",
        "root",
        `must be a non-empty path, got ${
          typeof options.root === "string" ? "an empty string" : Check.describeValue(options.root)
        }`
      )
    }
    const maxFileBytes = options.maxFileBytes ?? defaultMaxFileBytes
    if (!Number.isSafeInteger(maxFileBytes) || maxFileBytes < 0) {
      return yield* new AgentError.InvalidOptions({
        module: "Workspace",
        option: "maxFileBytes",
        reason: `must be a whole number of bytes, 0 or more (got ${Check.describeValue(maxFileBytes)})`
      })
    }
    const invalidRules = badRules(options)
    if (invalidRules !== undefined) return yield* invalidRules
    const jail = yield* Jail.make(options.root).pipe(
      Effect.mapError((refusal) => new WorkspaceError({ reason: "Io", path: options.root, detail: detailOf(refusal) }))
    )
    const segmentsOf = (virtual: string) => virtual === "/" ? [] : virtual.slice(1).split("/")
    const virtualOf = (segments: ReadonlyArray<string>) => `/${segments.join("/")}`
    const refused = (virtual: string) => (refusal: Jail.Refusal): WorkspaceError => {
      switch (refusal._tag) {
        case "Outside":
          return new WorkspaceError({ reason: "OutsideRoot", path: virtual })
        case "Unsupported":
          return new WorkspaceError({ reason: "Unsupported", path: virtual, detail: refusal.kind })
        case "TooLarge":
          return new WorkspaceError({ reason: "TooLarge", path: virtual, size: refusal.size, max: refusal.max })
        case "Io":
          return new WorkspaceError({ reason: "Io", path: virtual, detail: refusal.reason })
        default:
          return new WorkspaceError({ reason: refusal._tag, path: virtual })
      }
    }
    const storage: Storage = {
      ls: (virtual) =>
        Effect.mapBoth(jail.list(segmentsOf(virtual)), {
          onFailure: refused(virtual),
          onSuccess: (entries) =>
            entries.map(({ isDirectory, name, size }): Entry => ({
              path: name === "" ? virtual : virtual === "/" ? `/${name}` : `${virtual}/${name}`,
              isDirectory,
              size
            }))
        }),
      read: (virtual) => Effect.mapError(jail.read(segmentsOf(virtual), maxFileBytes), refused(virtual)),
      // the rules also hold where a link inside the root leads: "/link/x" is checked as "/docs/x" too
      // a file the workspace would not read back is not written (checked before anything is made)
      write: (virtual, content, guard) => {
        const size = utf8Length(content)
        return size > maxFileBytes
          ? Effect.fail(new WorkspaceError({ reason: "TooLarge", path: virtual, size, max: maxFileBytes }))
          : Effect.mapError(
            jail.write(segmentsOf(virtual), content, (real) => guard(virtualOf(real))),
            refused(virtual)
          )
      },
      files: (virtual) =>
        Effect.mapBoth(jail.files(segmentsOf(virtual)), {
          onFailure: refused(virtual),
          onSuccess: (files) => files.map(virtualOf)
        }).pipe(Effect.catchIf((error) => error.reason === "NotFound", () => Effect.succeed([]))),
      remove: (virtual, guard) =>
        Effect.mapError(jail.remove(segmentsOf(virtual), (real) => guard(virtualOf(real))), refused(virtual))
    }
    return fromStorage(storage, options)
  })

const detailOf = (refusal: Jail.Refusal): string =>
  refusal._tag === "Io" ? refusal.reason : refusal._tag === "NotFound" ? "no such directory" : refusal._tag

/** `error` with its path, a path of the workspace mounted at `prefix`, made a path of the composite. */
const relocated = (error: WorkspaceError, outer: (inner: string) => string): WorkspaceError =>
  new WorkspaceError({ ...error, path: outer(error.path) })

interface Route {
  /** The normalized prefix ("/memories"). */
  readonly prefix: string
  readonly workspace: Service
  /** The path of the composite for a path of the routed workspace. */
  readonly outer: (inner: string) => string
  /** The path of the routed workspace for a path of the composite under the prefix. */
  readonly inner: (path: string) => string
}

const byPath = <A extends { readonly path: string }>(a: A, b: A) => a.path < b.path ? -1 : a.path > b.path ? 1 : 0

/**
 * A workspace that routes each path to the workspace mounted at its longest
 * prefix, and the others to `fallback` (deepagents' `CompositeBackend`).
 * A routed workspace sees paths relative to its prefix: with
 * `{ "/memories": directory }`, `/memories/notes.md` is the directory's
 * `/notes.md`, so each workspace keeps its own root, jail and access rules,
 * and paths in answers and errors are given back under the prefix. Paths are
 * normalized before routing: `/memories/../x` is the fallback's `/x`, and
 * `..` above the root fails with `"OutsideRoot"`. A prefix matches
 * whole segments (`/mem` does not route `/memories`). `ls` of a directory
 * that holds a prefix lists it as a directory; `glob` and `grep` search
 * every workspace under the path asked, and leave out the files a route
 * hides (the fallback's, or those of a route another is mounted in, as
 * `/a/b` in `/a`).
 *
 * `options` are access rules of the composite itself, over its own paths:
 * a write or edit must pass them, then the rules of the workspace it is
 * routed to (a `/memories` read-only rule keeps a routed `/memories`
 * directory read-only). They are passed down as a {@link WriteGuard}, so
 * they also hold where a link inside a routed directory leads.
 *
 * A prefix that is not a path inside the root ("/" or one with `..` above
 * it), or two that normalize to one, give a `Left` of
 * `AgentError.InvalidOptions` (module `"Workspace"`); an `Either` can be
 * `yield*`ed in `Effect.gen`.
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const memories = yield* Workspace.makeDirectory({ root: "/srv/agent-memories" })
 *   const scratch = yield* Workspace.makeMemory()
 *   const workspace = yield* Workspace.composite(scratch, { "/memories": memories })
 *   yield* workspace.write("/memories/user.md", "Prefers short answers.") // /srv/agent-memories/user.md
 *   yield* workspace.write("/draft.md", "...") // in memory
 *   return yield* workspace.ls("/") // /draft.md, /memories/
 * })
 *
 * // the composite's own rules cover routed paths too
 * const guarded = Workspace.composite(Workspace.fromStorage(Workspace.memoryStorage(new Map())), {}, {
 *   rules: [{ pattern: "/memories", access: "read-only" }]
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const composite = (
  fallback: Service,
  routes: Readonly<Record<string, Service>>,
  options: AccessOptions = {}
): Either.Either<Service, AgentError.InvalidOptions> => {
  const invalidRules = badRules(options)
  if (invalidRules !== undefined) return Either.left(invalidRules)
  const mounted: Array<Route> = []
  for (const [given, workspace] of Object.entries(routes)) {
    const invalid = (reason: string) =>
      Either.left(
        new AgentError.InvalidOptions({ module: "Workspace", option: `routes[${JSON.stringify(given)}]`, reason })
      )
    const prefix = Paths.normalize(given)
    if (prefix === undefined || prefix === "/") {
      return invalid("must be a directory inside the root, such as \"/memories\"")
    }
    if (mounted.some((route) => route.prefix === prefix)) return invalid(`routes ${prefix} a second time`)
    mounted.push({
      prefix,
      workspace,
      outer: (inner) => inner === "/" ? prefix : `${prefix}${inner}`,
      inner: (path) => path === prefix ? "/" : path.slice(prefix.length)
    })
  }
  // longest first: the first route a path is within is its longest prefix
  mounted.sort((a, b) => b.prefix.length - a.prefix.length)
  const routeOf = (path: string): Route | undefined => mounted.find((route) => Paths.isWithin(path, route.prefix))
  /** Runs `f` on the workspace `path` routes to, with the path it has there; errors name the composite's path. */
  const routed = <A>(
    path: string,
    f: (workspace: Service, path: string, route: Route | undefined) => Effect.Effect<A, WorkspaceError>
  ): Effect.Effect<A, WorkspaceError> =>
    Effect.flatMap(resolve(path), (normalized) => {
      const route = routeOf(normalized)
      return route === undefined
        ? f(fallback, normalized, undefined)
        : Effect.mapError(
          f(route.workspace, route.inner(normalized), route),
          (error) => relocated(error, route.outer)
        )
    })
  /** The routes mounted strictly under `base` (a path the fallback holds). */
  const under = (base: string) => mounted.filter((route) => route.prefix !== base && Paths.isWithin(route.prefix, base))
  /** A routed workspace's files whose composite path matches `pattern` relative to `base`. */
  const globIn = (route: Route, pattern: string, base: string, innerBase: string) =>
    Effect.flatMap(
      Effect.mapError(route.workspace.glob("**", innerBase), (error) => relocated(error, route.outer)),
      (files) => Paths.filterMatching(pattern, base, files.map(route.outer))
    )
  /** The composite's own rules, checked before a write reaches any workspace. */
  const writable = (path: string) => Effect.flatMap(resolve(path), (normalized) => checkWritable(options, normalized))
  /** The composite's rules (and a caller's), passed down: asked about the real place, as a composite path. */
  const guardIn = (route: Route | undefined, added: WriteGuard | undefined): WriteGuard => (inner) => {
    const path = route === undefined ? inner : route.outer(inner)
    return accessOf(options, path) !== "read-only" && (added === undefined || added(path))
  }
  /** Whether `path` is one `owner` (a route, or the fallback: undefined) holds: no route nested in it hides it. */
  const ownedBy = (owner: Route | undefined) => (path: string) => routeOf(path) === owner
  const glob = (pattern: string, path?: string | undefined) =>
    Effect.flatMap(Effect.zipRight(checkGlob(pattern, path ?? "/"), resolve(path ?? "/")), (base) => {
      // the workspace holding the base, then the routes mounted under it (nested in a route too)
      const owner = routeOf(base)
      return Effect.map(
        Effect.all([
          Effect.map(
            owner === undefined ? fallback.glob(pattern, base) : globIn(owner, pattern, base, owner.inner(base)),
            (files) => files.filter(ownedBy(owner))
          ),
          ...under(base).map((route) =>
            Effect.map(globIn(route, pattern, base, "/"), (files) => files.filter(ownedBy(route)))
          )
        ]),
        (lists) => lists.flat().sort()
      )
    })
  return Either.right(Workspace.of({
    ls: (path) =>
      Effect.flatMap(resolve(path), (base) => {
        const owner = routeOf(base)
        const listed = owner === undefined ? fallback.ls(base) : Effect.mapBoth(owner.workspace.ls(owner.inner(base)), {
          onFailure: (error) => relocated(error, owner.outer),
          onSuccess: (entries) => entries.map((entry) => ({ ...entry, path: owner.outer(entry.path) }))
        })
        // the directories on the way to each route under the path (nested in a route too), one level down
        const mounts = new Map<string, Entry>()
        for (const { prefix } of under(base)) {
          const rest = prefix.slice(base === "/" ? 1 : base.length + 1)
          const child = `${base === "/" ? "" : base}/${rest.split("/")[0]}`
          mounts.set(child, { path: child, isDirectory: true, size: 0 })
        }
        return Effect.flatMap(Effect.either(listed), (listed) => {
          if (listed._tag === "Left") {
            return listed.left.reason === "NotFound" && mounts.size > 0
              ? Effect.succeed([...mounts.values()].sort(byPath))
              : Effect.fail(listed.left)
          }
          const entries = listed.right.filter((entry) => ownedBy(owner)(entry.path) && !mounts.has(entry.path))
          return Effect.succeed([...entries, ...mounts.values()].sort(byPath))
        })
      }),
    read: (path) => routed(path, (workspace, inner) => workspace.read(inner)),
    write: (path, content, guard) =>
      Effect.zipRight(
        writable(path),
        routed(path, (workspace, inner, route) => workspace.write(inner, content, guardIn(route, guard)))
      ),
    edit: (path, oldString, newString, replaceAll, guard) =>
      Effect.zipRight(
        writable(path),
        routed(path, (workspace, inner, route) =>
          workspace.edit(inner, oldString, newString, replaceAll, guardIn(route, guard)))
      ),
    glob,
    remove: (path, guard) =>
      Effect.zipRight(
        writable(path),
        routed(path, (workspace, inner, route) =>
          workspace.remove === undefined
            ? Effect.fail(new WorkspaceError({ reason: "Unsupported", path: inner, detail: "deleting a file" }))
            : workspace.remove(inner, guardIn(route, guard)))
      ),
    grep: (text, grepOptions) =>
      Effect.flatMap(
        Effect.zipRight(
          typeof text !== "string"
            ? Effect.fail(notText("", "the text to find", text))
            : checkGlob(grepOptions?.glob ?? "", grepOptions?.path ?? "/"),
          resolve(grepOptions?.path ?? "/")
        ),
        (base) => {
          const inRoute = (route: Route, innerBase: string) =>
            Effect.flatMap(
              Effect.mapError(
                route.workspace.grep(text, { path: innerBase }),
                (error) => relocated(error, route.outer)
              ),
              (found) => {
                const matches = found.map((match) => ({ ...match, path: route.outer(match.path) }))
                if (grepOptions?.glob === undefined) return Effect.succeed(matches)
                return Effect.map(
                  Paths.filterMatching(grepOptions.glob, base, new Set(matches.map((match) => match.path))),
                  (paths) => {
                    const kept = new Set(paths)
                    return matches.filter((match) => kept.has(match.path))
                  }
                )
              }
            )
          const owner = routeOf(base)
          const owned = (route: Route | undefined) => (matches: ReadonlyArray<GrepMatch>) =>
            matches.filter((match) => ownedBy(route)(match.path))
          return Effect.map(
            Effect.all([
              Effect.map(
                owner === undefined
                  ? fallback.grep(text, { path: base, glob: grepOptions?.glob })
                  : inRoute(owner, owner.inner(base)),
                owned(owner)
              ),
              ...under(base).map((route) => Effect.map(inRoute(route, "/"), owned(route)))
            ]),
            (lists) => lists.flat().sort((a, b) => byPath(a, b) || a.line - b.line)
          )
        }
      )
  }))
}

// -----------------------------------------------------------------------------
// layers
// -----------------------------------------------------------------------------

/**
 * A {@link Workspace} in memory (see {@link makeMemory}).
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 *
 * const layer = Workspace.layerMemory({ files: { "/README.md": "# Hello" } })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = (
  options?: AccessOptions & { readonly files?: Readonly<Record<string, string>> | undefined } | undefined
): Layer.Layer<Workspace> => Layer.effect(Workspace, makeMemory(options))

/**
 * A {@link Workspace} over a real directory (see {@link makeDirectory}).
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 *
 * const layer = Workspace.layerDirectory({ root: "/srv/project" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerDirectory = (
  options: DirectoryOptions
): Layer.Layer<Workspace, WorkspaceError | AgentError.InvalidOptions> => Layer.effect(Workspace, makeDirectory(options))
