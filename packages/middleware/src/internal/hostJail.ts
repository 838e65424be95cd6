/**
 * The real directory behind `Workspace.makeDirectory`, jailed to its root.
 *
 * Every file and directory is opened first and checked after, on what was
 * opened: the descriptor's real path (the kernel's, through
 * `/proc/self/fd/N`) must be inside the root, so a link swapped in while an
 * operation runs is caught instead of followed out. Each step of a path is
 * opened relative to the directory descriptor already checked
 * (`/proc/self/fd/N/name`, as `openat` would), so a new file is created in
 * the checked directory and nowhere else. Where `/proc/self/fd` does not
 * exist (macOS, Windows) the same checks run on real paths and compare
 * device and inode numbers, which a concurrent swap can still race.
 *
 * Only regular files and directories are read, written or listed: a FIFO,
 * socket or device is refused without waiting on it (opened non-blocking,
 * checked before a byte is read), and so is a regular file with more than
 * one hard link (it may be a file outside the root under a second name).
 * Text is UTF-8; a file that is not valid UTF-8 is refused, never re-encoded.
 *
 * Node's `fs` is loaded on first use, so the package loads where there is none.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

// -----------------------------------------------------------------------------
// the parts of node:fs used here
// -----------------------------------------------------------------------------

interface Stats {
  readonly dev: number
  readonly ino: number
  readonly nlink: number
  readonly size: number
  isFile(): boolean
  isDirectory(): boolean
  isSymbolicLink(): boolean
  isFIFO(): boolean
  isSocket(): boolean
  isCharacterDevice(): boolean
  isBlockDevice(): boolean
}

interface Dirent {
  readonly name: string
  isDirectory(): boolean
  isSymbolicLink(): boolean
}

interface FileHandle {
  readonly fd: number
  stat(): Promise<Stats>
  readFile(): Promise<Uint8Array>
  writeFile(data: Uint8Array): Promise<void>
  truncate(length: number): Promise<void>
  close(): Promise<void>
}

interface NodeFs {
  readonly constants: Readonly<Record<string, number | undefined>>
  readonly promises: {
    open(path: string, flags: number, mode?: number): Promise<FileHandle>
    stat(path: string): Promise<Stats>
    lstat(path: string): Promise<Stats>
    readlink(path: string): Promise<string>
    realpath(path: string): Promise<string>
    mkdir(path: string): Promise<unknown>
    readdir(path: string, options: { readonly withFileTypes: true }): Promise<Array<Dirent>>
  }
}

// a specifier TypeScript does not resolve: the package compiles without Node's types
const nodeFsSpecifier: string = "node:fs"
let nodeFs: Promise<NodeFs> | undefined
const loadNodeFs = () => nodeFs ??= import(nodeFsSpecifier) as Promise<NodeFs>

// -----------------------------------------------------------------------------
// refusals
// -----------------------------------------------------------------------------

/** Why an operation was refused; `Workspace` turns it into its typed error for the virtual path. */
export type Refusal =
  | { readonly _tag: "Outside" }
  | { readonly _tag: "NotFound" }
  | { readonly _tag: "Unsupported"; readonly kind: string }
  | { readonly _tag: "NotUtf8" }
  | { readonly _tag: "Io"; readonly reason: string }

const outside: Refusal = { _tag: "Outside" }
const notFound: Refusal = { _tag: "NotFound" }
const unsupported = (kind: string): Refusal => ({ _tag: "Unsupported", kind })
const io = (reason: string): Refusal => ({ _tag: "Io", reason })

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
    ? (error as { code: string }).code
    : undefined

/** A failed system call's refusal; the message names no host path. */
const refusalOf = (error: unknown): Refusal => {
  switch (codeOf(error)) {
    case "ENOENT":
    case "ENOTDIR":
      return notFound
    case "ELOOP":
      return outside
    case "ENXIO":
      return unsupported("FIFO or socket")
    case "EISDIR":
      return io("it is a directory")
    case "EACCES":
    case "EPERM":
      return io("permission denied")
    case undefined:
      return io(error instanceof Error ? error.message : String(error))
    default:
      return io(codeOf(error)!)
  }
}

/** The kind of a file that is neither a regular file nor a directory, or undefined for those two. */
const specialKind = (stats: Stats): string | undefined =>
  stats.isFile() || stats.isDirectory()
    ? undefined
    : stats.isFIFO()
    ? "FIFO"
    : stats.isSocket()
    ? "socket"
    : stats.isCharacterDevice() || stats.isBlockDevice()
    ? "device"
    : "special file"

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })
const encoder = new TextEncoder()

/** Whether `text` has a lone surrogate, which UTF-8 cannot encode (it would be written as U+FFFD). */
const hasLoneSurrogate = (text: string): boolean =>
  /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text)

// -----------------------------------------------------------------------------
// the jail
// -----------------------------------------------------------------------------

/** What a listing holds: the entries reading would accept (regular files, directories), by name. */
export interface Listed {
  readonly name: string
  readonly isDirectory: boolean
  readonly size: number
}

/** The operations on a directory jailed to its root, by path segments under the root. */
export interface Jail {
  /** The entries of a directory; a file's own entry (name "") when the path is a file. */
  readonly list: (segments: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<Listed>, Refusal>
  readonly read: (segments: ReadonlyArray<string>) => Effect.Effect<string, Refusal>
  /** Creates or replaces a file, and the directories above it. */
  readonly write: (segments: ReadonlyArray<string>, content: string) => Effect.Effect<void, Refusal>
  /**
   * The files under a path, recursively, as segments: what `read` would
   * accept, without following a link to a directory (in or out of the root).
   */
  readonly files: (segments: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ReadonlyArray<string>>, Refusal>
}

/** An open file or directory, checked to be inside the root. */
interface Opened {
  readonly handle: FileHandle
  readonly stats: Stats
  /** Its real host path. */
  readonly real: string
}

/** The jail over the directory `root` (which must exist); fails with its real path's error. */
export const make = (root: string): Effect.Effect<Jail, Refusal> =>
  Effect.gen(function*() {
    const fs = yield* Effect.tryPromise({ try: loadNodeFs, catch: (error) => io(String(error)) })
    const call = <A>(f: () => Promise<A>) => Effect.tryPromise({ try: f, catch: refusalOf })
    const flag = (name: string) => fs.constants[name] ?? 0
    const readFlags = flag("O_RDONLY") | flag("O_NONBLOCK") | flag("O_NOCTTY")
    const writeFlags = flag("O_WRONLY") | flag("O_NONBLOCK") | flag("O_NOCTTY")
    const createFlags = writeFlags | flag("O_CREAT") | flag("O_EXCL") | flag("O_NOFOLLOW")
    const directoryFlags = readFlags | flag("O_DIRECTORY")
    const close = (handle: FileHandle) => Effect.promise(() => handle.close().catch(() => undefined))
    const rootReal = yield* call(() => fs.promises.realpath(root))
    const separator = rootReal.includes("\\") && !rootReal.includes("/") ? "\\" : "/"
    const prefix = rootReal.endsWith(separator) ? rootReal : rootReal + separator
    const inside = (real: string) => real === rootReal || real.startsWith(prefix)

    // whether the kernel names an open descriptor's file (Linux): open the root and ask
    const viaProc = yield* Effect.scoped(Effect.flatMap(
      Effect.acquireRelease(call(() => fs.promises.open(rootReal, directoryFlags)), close),
      (handle) =>
        Effect.map(
          Effect.either(call(() => fs.promises.readlink(`/proc/self/fd/${handle.fd}`))),
          (named) => named._tag === "Right" && named.right === rootReal
        )
    ))
    /** The path that names `name` in the opened directory `parent`. */
    const child = (parent: Opened | undefined, name: string) =>
      parent === undefined
        ? rootReal
        : viaProc
        ? `/proc/self/fd/${parent.handle.fd}/${name}`
        : parent.real + separator + name

    /** The real path of what `handle` is, or a refusal when it is not inside the root. */
    const check = (handle: FileHandle, stats: Stats, path: string) =>
      Effect.gen(function*() {
        if (viaProc) {
          const real = yield* call(() => fs.promises.readlink(`/proc/self/fd/${handle.fd}`))
          return inside(real) ? real : yield* Effect.fail(outside)
        }
        const real = yield* call(() => fs.promises.realpath(path))
        const now = yield* call(() => fs.promises.stat(real))
        if (!inside(real)) return yield* Effect.fail(outside)
        return now.dev === stats.dev && now.ino === stats.ino ? real : yield* Effect.fail(io("it changed while opened"))
      })

    /**
     * Opens `name` in `parent` with `flags` (following a link, which the
     * check after opening confines), and checks what was opened; closed with
     * the scope. A special file is refused before opening when it can be
     * seen as one, and after in any case.
     */
    const open = (
      parent: Opened | undefined,
      name: string,
      flags: number,
      mode?: number
    ): Effect.Effect<Opened, Refusal, Scope.Scope> =>
      Effect.gen(function*() {
        const path = child(parent, name)
        const handle = yield* Effect.acquireRelease(
          Effect.catchAll(
            call(() => fs.promises.open(path, flags, mode)),
            (refusal): Effect.Effect<never, Refusal> =>
              // a link whose target is missing cannot be checked (and a write would create its target)
              refusal._tag === "NotFound"
                ? Effect.flatMap(Effect.either(call(() => fs.promises.lstat(path))), (link) =>
                  Effect.fail(link._tag === "Right" && link.right.isSymbolicLink() ? outside : refusal))
                : Effect.fail(refusal)
          ),
          close
        )
        const stats = yield* call(() =>
          handle.stat()
        )
        const real = yield* check(handle, stats, path)
        return { handle, stats, real }
      })

    /**
     * Refuses, before opening it, a file that is already a FIFO, socket or
     * device (opening one may wait, or do something); through a link out of
     * the root it is a path outside.
     */
    const refuseSpecial = (parent: Opened | undefined, name: string) =>
      Effect.flatMap(Effect.either(call(() => fs.promises.stat(child(parent, name)))), (stats) => {
        const kind = stats._tag === "Left" ? undefined : specialKind(stats.right)
        if (kind === undefined) return Effect.void
        return Effect.flatMap(
          Effect.either(call(() => fs.promises.realpath(child(parent, name)))),
          (real) => Effect.fail(real._tag === "Right" && inside(real.right) ? unsupported(kind) : outside)
        )
      })

    /** The directory at `segments`, each step opened in the one before; made when `create`. */
    const directory = (
      segments: ReadonlyArray<string>,
      create: boolean
    ): Effect.Effect<Opened, Refusal, Scope.Scope> =>
      Effect.gen(function*() {
        let current = yield* open(undefined, "", directoryFlags)
        for (const name of segments) {
          if (create) {
            yield* Effect.catchAll(
              call(() => fs.promises.mkdir(child(current, name))),
              (refusal) => refusal._tag === "Io" && refusal.reason === "EEXIST" ? Effect.void : Effect.fail(refusal)
            )
          }
          current = yield* open(current, name, directoryFlags)
        }
        return current
      })

    /** A regular file with one link, or the refusal of what it is instead. */
    const regular = (opened: Opened): Effect.Effect<Opened, Refusal> => {
      const kind = specialKind(opened.stats)
      if (kind !== undefined) return Effect.fail(unsupported(kind))
      if (opened.stats.isDirectory()) return Effect.fail(notFound)
      return opened.stats.nlink > 1 ? Effect.fail(unsupported("hard link")) : Effect.succeed(opened)
    }

    /** `segments` opened for reading: a directory, or a regular file. */
    const openPath = (segments: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        if (segments.length === 0) return yield* directory([], false)
        const parent = yield* directory(segments.slice(0, -1), false)
        const name = segments[segments.length - 1]!
        yield* refuseSpecial(parent, name)
        const opened = yield* open(parent, name, readFlags)
        return opened.stats.isDirectory() ? opened : yield* regular(opened)
      })

    /** The entries of the directory `opened` that reading accepts; a link to a directory is listed, not walked. */
    const entries = (opened: Opened) =>
      Effect.gen(function*() {
        const names = yield* call(() => fs.promises.readdir(child(opened, ""), { withFileTypes: true }))
        names.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
        const out: Array<Listed & { readonly isLink: boolean }> = []
        for (const dirent of names) {
          if (dirent.isDirectory()) {
            out.push({ name: dirent.name, isDirectory: true, size: 0, isLink: false })
            continue
          }
          // a file, link or special file: listed only when reading it would be accepted
          const stats = yield* Effect.either(call(() => fs.promises.lstat(child(opened, dirent.name))))
          if (stats._tag === "Left") continue
          if (!stats.right.isSymbolicLink()) {
            // not a link: lstat, relative to the checked directory, sees the entry itself
            if (stats.right.isDirectory()) out.push({ name: dirent.name, isDirectory: true, size: 0, isLink: false })
            else if (stats.right.isFile() && stats.right.nlink === 1) {
              out.push({ name: dirent.name, isDirectory: false, size: stats.right.size, isLink: false })
            }
            continue
          }
          const target = yield* Effect.either(Effect.scoped(Effect.gen(function*() {
            yield* refuseSpecial(opened, dirent.name)
            const entry = yield* open(opened, dirent.name, readFlags)
            return entry.stats.isDirectory() ? entry.stats : (yield* regular(entry)).stats
          })))
          if (target._tag === "Left") continue
          const isDirectory = target.right.isDirectory()
          out.push({ name: dirent.name, isDirectory, size: isDirectory ? 0 : target.right.size, isLink: true })
        }
        return out
      })

    const jail: Jail = {
      list: (segments) =>
        Effect.scoped(Effect.gen(function*() {
          const opened = yield* openPath(segments)
          if (!opened.stats.isDirectory()) return [{ name: "", isDirectory: false, size: opened.stats.size }]
          return (yield* entries(opened)).map(({ isDirectory, name, size }) => ({ name, isDirectory, size }))
        })),
      read: (segments) =>
        Effect.scoped(Effect.gen(function*() {
          const opened = yield* openPath(segments)
          if (opened.stats.isDirectory()) return yield* Effect.fail(notFound)
          const bytes = yield* call(() => opened.handle.readFile())
          return yield* Effect.try({ try: () => utf8.decode(bytes), catch: (): Refusal => ({ _tag: "NotUtf8" }) })
        })),
      write: (segments, content) =>
        Effect.scoped(Effect.gen(function*() {
          if (segments.length === 0) return yield* Effect.fail(io("it is a directory"))
          if (hasLoneSurrogate(content)) return yield* Effect.fail<Refusal>({ _tag: "NotUtf8" })
          const parent = yield* directory(segments.slice(0, -1), true)
          const name = segments[segments.length - 1]!
          // a new file is made in the checked directory, never through a link (O_EXCL, O_NOFOLLOW)
          const created = yield* Effect.either(open(parent, name, createFlags, 0o666))
          let target: Opened
          if (created._tag === "Right") target = created.right
          else if (created.left._tag === "Io" && created.left.reason === "EEXIST") {
            yield* refuseSpecial(parent, name)
            target = yield* Effect.flatMap(open(parent, name, writeFlags), regular)
          } else {
            return yield* Effect.fail(created.left)
          }
          yield* call(() => target.handle.truncate(0))
          yield* call(() => target.handle.writeFile(encoder.encode(content)))
        })),
      files: (segments) =>
        Effect.scoped(Effect.gen(function*() {
          const opened = yield* openPath(segments)
          if (!opened.stats.isDirectory()) return [segments]
          const out: Array<ReadonlyArray<string>> = []
          const walk = (directory: Opened, at: ReadonlyArray<string>): Effect.Effect<void, Refusal, Scope.Scope> =>
            Effect.gen(function*() {
              for (const entry of yield* entries(directory)) {
                const path = [...at, entry.name]
                if (!entry.isDirectory) out.push(path)
                else if (!entry.isLink) {
                  // a directory swapped for a link since it was listed is not entered (O_NOFOLLOW)
                  const sub = yield* Effect.either(
                    Effect.scoped(Effect.flatMap(
                      open(directory, entry.name, directoryFlags | flag("O_NOFOLLOW")),
                      (opened) => walk(opened, path)
                    ))
                  )
                  if (sub._tag === "Left" && sub.left._tag === "Io") return yield* Effect.fail(sub.left)
                }
              }
            })
          yield* walk(opened, segments)
          return out
        }))
    }
    return jail
  })
