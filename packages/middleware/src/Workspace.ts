/**
 * A workspace: the files an agent's file tools work on, behind one service
 * with two kinds of storage — an in-memory map of files ({@link makeMemory},
 * which the `Filesystem` middleware also uses over the agent's `files` state
 * slice) and a real directory jailed to a root ({@link makeDirectory}).
 *
 * Every path is a virtual path rooted at "/" (the workspace's root): `..`
 * that climbs above it, and, for a directory, a symbolic link that leads out
 * of it, fail with {@link PathOutsideRoot}. Access rules
 * ({@link Rule}) make paths read-only: a write there fails with
 * {@link ReadOnlyPath}. Every failure is a typed error with a message the
 * model can read; the `Filesystem` tools answer with it instead of failing
 * the run.
 *
 * {@link composite} routes paths by prefix to other workspaces (deepagents'
 * `CompositeBackend`): `/memories/...` to a real directory, the rest to
 * memory, with `ls`, `glob` and `grep` merging across them.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
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
  /** Length in characters (files only; 0 for a directory). */
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
 * The path leads out of the workspace (`..` above the root, a NUL byte, a
 * symbolic link that points outside the root directory, or a link whose
 * target does not exist: it cannot be checked, and a write would create it).
 *
 * @since 0.1.0
 * @category errors
 */
export class PathOutsideRoot extends Schema.TaggedError<PathOutsideRoot>(
  "@stepwise-agent/middleware/Workspace/PathOutsideRoot"
)("PathOutsideRoot", { path: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The path "${this.path}" leads outside the workspace`
  }
}

/**
 * A write to a path whose rule makes it read-only.
 *
 * @since 0.1.0
 * @category errors
 */
export class ReadOnlyPath extends Schema.TaggedError<ReadOnlyPath>(
  "@stepwise-agent/middleware/Workspace/ReadOnlyPath"
)("ReadOnlyPath", { path: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The path "${this.path}" is read-only`
  }
}

/**
 * No file (or, for a listing, no directory) at the path.
 *
 * @since 0.1.0
 * @category errors
 */
export class FileNotFound extends Schema.TaggedError<FileNotFound>(
  "@stepwise-agent/middleware/Workspace/FileNotFound"
)("FileNotFound", { path: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `No file or directory at "${this.path}"`
  }
}

/**
 * An edit's `oldString` is not in the file (or is empty).
 *
 * @since 0.1.0
 * @category errors
 */
export class EditStringNotFound extends Schema.TaggedError<EditStringNotFound>(
  "@stepwise-agent/middleware/Workspace/EditStringNotFound"
)("EditStringNotFound", { path: Schema.String, oldString: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.oldString === ""
      ? `The string to replace in "${this.path}" is empty; give the exact text to replace`
      : `The string to replace was not found in "${this.path}"; read the file and copy the text exactly`
  }
}

/**
 * An edit's `oldString` occurs more than once and `replaceAll` was not set.
 *
 * @since 0.1.0
 * @category errors
 */
export class EditNotUnique extends Schema.TaggedError<EditNotUnique>(
  "@stepwise-agent/middleware/Workspace/EditNotUnique"
)("EditNotUnique", { path: Schema.String, occurrences: Schema.Number }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The string to replace occurs ${this.occurrences} times in "${this.path}"; set replace_all to replace ` +
      "every occurrence, or give a longer string that occurs once"
  }
}

/**
 * The storage failed (a directory workspace's file system error).
 *
 * @since 0.1.0
 * @category errors
 */
export class WorkspaceIoError extends Schema.TaggedError<WorkspaceIoError>(
  "@stepwise-agent/middleware/Workspace/WorkspaceIoError"
)("WorkspaceIoError", { path: Schema.String, reason: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Could not access "${this.path}": ${this.reason}`
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export type WorkspaceError =
  | PathOutsideRoot
  | ReadOnlyPath
  | FileNotFound
  | EditStringNotFound
  | EditNotUnique
  | WorkspaceIoError

/**
 * @since 0.1.0
 * @category errors
 */
export const WorkspaceError = Schema.Union(
  PathOutsideRoot,
  ReadOnlyPath,
  FileNotFound,
  EditStringNotFound,
  EditNotUnique,
  WorkspaceIoError
)

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
export class Workspace extends Context.Tag("@stepwise-agent/middleware/Workspace")<Workspace, Workspace.Service>() {}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace Workspace {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** The entries directly under a directory (a file path lists that file). */
    readonly ls: (path: string) => Effect.Effect<ReadonlyArray<Entry>, WorkspaceError>
    /** A file's whole content. */
    readonly read: (path: string) => Effect.Effect<string, WorkspaceError>
    /** Creates or replaces a file (and the directories above it). */
    readonly write: (path: string, content: string) => Effect.Effect<void, WorkspaceError>
    /**
     * Replaces `oldString` by `newString` in a file: the one occurrence, or
     * every one with `replaceAll`; gives how many it replaced.
     */
    readonly edit: (
      path: string,
      oldString: string,
      newString: string,
      replaceAll: boolean
    ) => Effect.Effect<number, WorkspaceError>
    /** The files under `path` (default "/") whose path matches the glob, sorted. */
    readonly glob: (pattern: string, path?: string | undefined) => Effect.Effect<ReadonlyArray<string>, WorkspaceError>
    /** The lines that contain `text` (literally), in files under `path` matching `glob`, by path then line. */
    readonly grep: (
      text: string,
      options?: { readonly path?: string | undefined; readonly glob?: string | undefined }
    ) => Effect.Effect<ReadonlyArray<GrepMatch>, WorkspaceError>
  }
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

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
  readonly write: (path: string, content: string) => Effect.Effect<void, WorkspaceError>
  /** Every file under a directory (recursively), as virtual paths. */
  readonly files: (path: string) => Effect.Effect<ReadonlyArray<string>, WorkspaceError>
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
): { readonly content: string; readonly occurrences: number } | EditStringNotFound | EditNotUnique => {
  if (oldString === "") return new EditStringNotFound({ path, oldString })
  const parts = content.split(oldString)
  const occurrences = parts.length - 1
  if (occurrences === 0) return new EditStringNotFound({ path, oldString })
  if (occurrences > 1 && !replaceAll) return new EditNotUnique({ path, occurrences })
  return { content: parts.join(newString), occurrences }
}

const accessOf = (options: AccessOptions, path: string): Access => {
  for (const rule of options.rules ?? []) if (Paths.matchesRule(rule.pattern, path)) return rule.access
  return options.defaultAccess ?? "read-write"
}

const splitLines = (content: string): ReadonlyArray<string> => content.split(/\r?\n/)

/**
 * A workspace over a {@link Storage}: normalizes paths (failing with
 * {@link PathOutsideRoot}), applies the access rules to writes and edits,
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
export const fromStorage = (storage: Storage, options: AccessOptions = {}): Workspace.Service => {
  const resolve = (path: string) => {
    const normalized = Paths.normalize(path)
    return normalized === undefined ? Effect.fail(new PathOutsideRoot({ path })) : Effect.succeed(normalized)
  }
  const writable = (path: string) =>
    Effect.flatMap(
      resolve(path),
      (normalized) =>
        accessOf(options, normalized) === "read-only"
          ? Effect.fail(new ReadOnlyPath({ path: normalized }))
          : Effect.succeed(normalized)
    )
  const glob = (pattern: string, path?: string | undefined) =>
    Effect.flatMap(resolve(path ?? "/"), (base) =>
      Effect.map(
        storage.files(base),
        (files) => files.filter((file) => Paths.matchesGlob(pattern, base, file)).sort()
      ))
  return Workspace.of({
    ls: (path) => Effect.flatMap(resolve(path), storage.ls),
    read: (path) => Effect.flatMap(resolve(path), storage.read),
    write: (path, content) => Effect.flatMap(writable(path), (normalized) => storage.write(normalized, content)),
    edit: (path, oldString, newString, replaceAll) =>
      Effect.gen(function*() {
        const normalized = yield* writable(path)
        const replaced = replaceIn(normalized, yield* storage.read(normalized), oldString, newString, replaceAll)
        if (replaced instanceof EditStringNotFound || replaced instanceof EditNotUnique) return yield* replaced
        yield* storage.write(normalized, replaced.content)
        return replaced.occurrences
      }),
    glob,
    grep: (text, grepOptions) =>
      Effect.gen(function*() {
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
      })
  })
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
      if (file !== undefined) return Effect.succeed([{ path, isDirectory: false, size: file.length }])
      const entries = new Map<string, Entry>()
      const prefix = path === "/" ? "/" : `${path}/`
      for (const [name, content] of files) {
        if (!name.startsWith(prefix)) continue
        const rest = name.slice(prefix.length)
        const slash = rest.indexOf("/")
        const child = prefix + (slash === -1 ? rest : rest.slice(0, slash))
        if (!entries.has(child)) {
          entries.set(child, { path: child, isDirectory: slash !== -1, size: slash === -1 ? content.length : 0 })
        }
      }
      if (entries.size === 0 && path !== "/") return Effect.fail(new FileNotFound({ path }))
      return Effect.succeed([...entries.values()].sort((a, b) => a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    }),
  read: (path) =>
    Effect.suspend(() => {
      const content = files.get(path)
      return content === undefined ? Effect.fail(new FileNotFound({ path })) : Effect.succeed(content)
    }),
  write: (path, content) =>
    Effect.sync(() => {
      files.set(path, content)
      onWrite?.(path, content)
    }),
  files: (path) => Effect.sync(() => [...files.keys()].filter((name) => Paths.isWithin(name, path)))
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
): Effect.Effect<Workspace.Service> =>
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
}

/**
 * A workspace over a real directory, jailed to `root`: the virtual path
 * "/a/b" is `<root>/a/b`, `..` cannot climb above the root, and a path that
 * a symbolic link leads out of the root fails with {@link PathOutsideRoot}.
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 * import { NodeContext } from "@effect/platform-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const workspace = yield* Workspace.makeDirectory({
 *     root: "/srv/project",
 *     rules: [{ pattern: "/.git", access: "read-only" }]
 *   })
 *   return yield* workspace.glob("*.ts", "/src")
 * }).pipe(Effect.provide(NodeContext.layer))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeDirectory = (
  options: DirectoryOptions
): Effect.Effect<Workspace.Service, WorkspaceIoError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = yield* fs.realPath(options.root).pipe(
      Effect.mapError((error) => new WorkspaceIoError({ path: options.root, reason: error.message }))
    )
    const hostOf = (virtual: string) => virtual === "/" ? root : path.join(root, virtual.slice(1))
    const virtualOf = (host: string) => `/${path.relative(root, host).split(path.sep).join("/")}`
    const inside = (real: string) => real === root || real.startsWith(root.endsWith(path.sep) ? root : root + path.sep)
    const ioError = (virtual: string) => (error: { readonly message: string }) =>
      new WorkspaceIoError({ path: virtual, reason: error.message })
    const isNotFound = (error: unknown) =>
      typeof error === "object" && error !== null && (error as { reason?: unknown }).reason === "NotFound"

    /** The host path of `virtual`, after checking that no symbolic link on it leads out of the root. */
    const jailed = (virtual: string): Effect.Effect<string, WorkspaceError> =>
      Effect.gen(function*() {
        const host = hostOf(virtual)
        // the real path of the nearest existing ancestor (the path itself when it exists)
        let existing = host
        for (;;) {
          const real = yield* Effect.either(fs.realPath(existing))
          if (real._tag === "Right") {
            if (!inside(real.right)) return yield* new PathOutsideRoot({ path: virtual })
            return host
          }
          if (!isNotFound(real.left)) return yield* ioError(virtual)(real.left)
          // a link whose target does not exist yet: writing through it would create its target, wherever it is
          const link = yield* Effect.either(fs.readLink(existing))
          if (link._tag === "Right") return yield* new PathOutsideRoot({ path: virtual })
          const parent = path.dirname(existing)
          if (parent === existing) return host
          existing = parent
        }
      })

    const statOf = (virtual: string, host: string) =>
      fs.stat(host).pipe(
        Effect.mapError((error) => isNotFound(error) ? new FileNotFound({ path: virtual }) : ioError(virtual)(error))
      )

    const storage: Storage = {
      ls: (virtual) =>
        Effect.gen(function*() {
          const host = yield* jailed(virtual)
          const info = yield* statOf(virtual, host)
          if (info.type !== "Directory") return [{ path: virtual, isDirectory: false, size: Number(info.size) }]
          const names = yield* fs.readDirectory(host).pipe(Effect.mapError(ioError(virtual)))
          const entries = yield* Effect.forEach(names.sort(), (name) =>
            Effect.map(
              Effect.either(fs.stat(path.join(host, name))),
              (stat): Entry => ({
                path: virtual === "/" ? `/${name}` : `${virtual}/${name}`,
                isDirectory: stat._tag === "Right" && stat.right.type === "Directory",
                size: stat._tag === "Right" && stat.right.type !== "Directory" ? Number(stat.right.size) : 0
              })
            ))
          return entries
        }),
      read: (virtual) =>
        Effect.gen(function*() {
          const host = yield* jailed(virtual)
          const info = yield* statOf(virtual, host)
          if (info.type === "Directory") return yield* new FileNotFound({ path: virtual })
          return yield* fs.readFileString(host).pipe(Effect.mapError(ioError(virtual)))
        }),
      write: (virtual, content) =>
        Effect.gen(function*() {
          if (virtual === "/") return yield* new FileNotFound({ path: virtual })
          const host = yield* jailed(virtual)
          yield* fs.makeDirectory(path.dirname(host), { recursive: true }).pipe(Effect.mapError(ioError(virtual)))
          // the directories just made cannot be links; check the file itself once more
          yield* jailed(virtual)
          yield* fs.writeFileString(host, content).pipe(Effect.mapError(ioError(virtual)))
        }),
      files: (virtual) =>
        Effect.gen(function*() {
          const host = yield* jailed(virtual)
          const info = yield* Effect.either(statOf(virtual, host))
          if (info._tag === "Left") return info.left._tag === "FileNotFound" ? [] : yield* info.left
          if (info.right.type !== "Directory") return [virtual]
          const names = yield* fs.readDirectory(host, { recursive: true }).pipe(Effect.mapError(ioError(virtual)))
          const files = yield* Effect.filter(names, (name) =>
            Effect.map(
              Effect.either(fs.stat(path.join(host, name))),
              (stat) => stat._tag === "Right" && stat.right.type === "File"
            ))
          return files.map((name) => virtualOf(path.join(host, name)))
        })
    }
    return fromStorage(storage, options)
  })

/** `error` with its path, a path of the workspace mounted at `prefix`, made a path of the composite. */
const relocated = (error: WorkspaceError, outer: (inner: string) => string): WorkspaceError => {
  switch (error._tag) {
    case "PathOutsideRoot":
      return new PathOutsideRoot({ path: outer(error.path) })
    case "ReadOnlyPath":
      return new ReadOnlyPath({ path: outer(error.path) })
    case "FileNotFound":
      return new FileNotFound({ path: outer(error.path) })
    case "EditStringNotFound":
      return new EditStringNotFound({ path: outer(error.path), oldString: error.oldString })
    case "EditNotUnique":
      return new EditNotUnique({ path: outer(error.path), occurrences: error.occurrences })
    case "WorkspaceIoError":
      return new WorkspaceIoError({ path: outer(error.path), reason: error.reason })
  }
}

interface Route {
  /** The normalized prefix ("/memories"). */
  readonly prefix: string
  readonly workspace: Workspace.Service
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
 * `..` above the root fails with {@link PathOutsideRoot}. A prefix matches
 * whole segments (`/mem` does not route `/memories`). `ls` of a directory
 * that holds a prefix lists it as a directory; `glob` and `grep` search
 * every workspace under the path asked, and leave out the fallback's files
 * that a route hides.
 *
 * A prefix that is not a path inside the root ("/" or one with `..` above
 * it), or two that normalize to one, give a `Left` of
 * `AgentError.InvalidOptions` (module `"Workspace"`); an `Either` can be
 * `yield*`ed in `Effect.gen`.
 *
 * @example
 * ```ts
 * import { Workspace } from "@stepwise-agent/middleware"
 * import { NodeContext } from "@effect/platform-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const memories = yield* Workspace.makeDirectory({ root: "/srv/agent-memories" })
 *   const scratch = yield* Workspace.makeMemory()
 *   const workspace = yield* Workspace.composite(scratch, { "/memories": memories })
 *   yield* workspace.write("/memories/user.md", "Prefers short answers.") // /srv/agent-memories/user.md
 *   yield* workspace.write("/draft.md", "...") // in memory
 *   return yield* workspace.ls("/") // /draft.md, /memories/
 * }).pipe(Effect.provide(NodeContext.layer))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const composite = (
  fallback: Workspace.Service,
  routes: Readonly<Record<string, Workspace.Service>>
): Either.Either<Workspace.Service, AgentError.InvalidOptions> => {
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
  const resolve = (path: string) => {
    const normalized = Paths.normalize(path)
    return normalized === undefined ? Effect.fail(new PathOutsideRoot({ path })) : Effect.succeed(normalized)
  }
  /** Runs `f` on the workspace `path` routes to, with the path it has there; errors name the composite's path. */
  const routed = <A>(
    path: string,
    f: (workspace: Workspace.Service, path: string, route: Route | undefined) => Effect.Effect<A, WorkspaceError>
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
    Effect.map(
      Effect.mapError(route.workspace.glob("**", innerBase), (error) => relocated(error, route.outer)),
      (files) => files.map(route.outer).filter((file) => Paths.matchesGlob(pattern, base, file))
    )
  const glob = (pattern: string, path?: string | undefined) =>
    Effect.flatMap(resolve(path ?? "/"), (base) => {
      const route = routeOf(base)
      if (route !== undefined) {
        return Effect.map(globIn(route, pattern, base, route.inner(base)), (files) => files.sort())
      }
      return Effect.map(
        Effect.all([
          Effect.map(fallback.glob(pattern, base), (files) => files.filter((file) => routeOf(file) === undefined)),
          ...under(base).map((route) => globIn(route, pattern, base, "/"))
        ]),
        (lists) => lists.flat().sort()
      )
    })
  return Either.right(Workspace.of({
    ls: (path) =>
      Effect.flatMap(resolve(path), (base) => {
        const route = routeOf(base)
        if (route !== undefined) {
          return Effect.mapBoth(route.workspace.ls(route.inner(base)), {
            onFailure: (error) => relocated(error, route.outer),
            onSuccess: (entries) => entries.map((entry) => ({ ...entry, path: route.outer(entry.path) }))
          })
        }
        // the directories on the way to each route under the path, one level down
        const mounts = new Map<string, Entry>()
        for (const { prefix } of under(base)) {
          const rest = prefix.slice(base === "/" ? 1 : base.length + 1)
          const child = `${base === "/" ? "" : base}/${rest.split("/")[0]}`
          mounts.set(child, { path: child, isDirectory: true, size: 0 })
        }
        return Effect.flatMap(Effect.either(fallback.ls(base)), (listed) => {
          if (listed._tag === "Left") {
            return listed.left._tag === "FileNotFound" && mounts.size > 0
              ? Effect.succeed([...mounts.values()].sort(byPath))
              : Effect.fail(listed.left)
          }
          const entries = listed.right.filter((entry) => routeOf(entry.path) === undefined && !mounts.has(entry.path))
          return Effect.succeed([...entries, ...mounts.values()].sort(byPath))
        })
      }),
    read: (path) => routed(path, (workspace, inner) => workspace.read(inner)),
    write: (path, content) => routed(path, (workspace, inner) => workspace.write(inner, content)),
    edit: (path, oldString, newString, replaceAll) =>
      routed(path, (workspace, inner) => workspace.edit(inner, oldString, newString, replaceAll)),
    glob,
    grep: (text, options) =>
      Effect.flatMap(resolve(options?.path ?? "/"), (base) => {
        const inRoute = (route: Route, innerBase: string) =>
          Effect.mapBoth(route.workspace.grep(text, { path: innerBase }), {
            onFailure: (error) => relocated(error, route.outer),
            onSuccess: (matches) =>
              matches.map((match) => ({ ...match, path: route.outer(match.path) })).filter((match) =>
                options?.glob === undefined || Paths.matchesGlob(options.glob, base, match.path)
              )
          })
        const route = routeOf(base)
        if (route !== undefined) return inRoute(route, route.inner(base))
        return Effect.map(
          Effect.all([
            Effect.map(
              fallback.grep(text, { path: base, glob: options?.glob }),
              (matches) => matches.filter((match) => routeOf(match.path) === undefined)
            ),
            ...under(base).map((route) => inRoute(route, "/"))
          ]),
          (lists) => lists.flat().sort((a, b) => byPath(a, b) || a.line - b.line)
        )
      })
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
 * import { NodeContext } from "@effect/platform-node"
 * import { Layer } from "effect"
 *
 * const layer = Workspace.layerDirectory({ root: "/srv/project" }).pipe(Layer.provide(NodeContext.layer))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerDirectory = (
  options: DirectoryOptions
): Layer.Layer<Workspace, WorkspaceIoError, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(Workspace, makeDirectory(options))
