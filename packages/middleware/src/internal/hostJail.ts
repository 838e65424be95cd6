/**
 * The real directory behind `Workspace.makeDirectory`, jailed to its root.
 *
 * Every file and directory is opened first and checked after, on what was
 * opened: the descriptor's real path (the kernel's, through
 * `/proc/self/fd/N`) must be inside the root, so a link swapped in while an
 * operation runs is caught instead of followed out. Each step of a path is
 * opened relative to the directory descriptor already checked
 * (`/proc/self/fd/N/name`, as `openat` would), so a new file is created in
 * the checked directory and nowhere else.
 *
 * The root is the directory the jail was made on: held open for as long
 * as the jail lives, and every operation begins by opening the root's real
 * path (no link followed) and finding that directory there, or is refused.
 *
 * Where `/proc/self/fd` does not exist (macOS, Windows) Node has no way to
 * open a name relative to a descriptor, so the portable strategy opens real
 * paths and makes them safe otherwise: it follows no link itself (each step
 * is opened with `O_NOFOLLOW`, or checked by `lstat` and identity where that
 * flag is missing; a link is resolved by its real path and walked again from
 * the root), and it watches the directories a path goes through. A swap
 * changes the directory holding the swapped name, so the operation records
 * the status-change time (`ctime`) of each directory it looks a name up in,
 * once that directory has been quiet for {@link quietMillis} (so a later
 * change shows, whatever the clock's granularity), and checks them again
 * before it answers or writes a byte: a change anywhere on the way fails it
 * (tried again a few times, then an `Io` refusal) instead of answering from
 * outside the root. A file or directory is made between two such checks,
 * right before and right after the call (`makeIn`). What remains is the
 * instant between the first check and the call, which a swap must hit
 * exactly (Node has no `mkdirat` to close it): a new empty file or
 * directory may land where the swap led. The second check sees the swap;
 * the write fails, writes nothing into it, and removes what it made (also
 * when interrupted): found by its identity wherever its path leads again,
 * for as long as the directories on the way keep changing, renamed aside in
 * that directory and removed there (`unmake`). Only a swap that keeps the
 * path away for good (its link moved or removed, then quiet) can leave it.
 *
 * Only regular files and directories are read, written or listed: a FIFO,
 * socket or device is refused without waiting on it (opened non-blocking,
 * checked before a byte is read), and so is a regular file with more than
 * one hard link (it may be a file outside the root under a second name).
 * Text is UTF-8; a file that is not valid UTF-8 is refused, never re-encoded.
 * A read stops at a size limit instead of reading a huge file whole. A write
 * asks the caller's rules about the real place it changes (past every link
 * inside the root), so a link cannot carry it into a read-only directory.
 *
 * Node's `fs` is loaded on first use, so the package loads where there is none.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"

// -----------------------------------------------------------------------------
// the parts of node:fs used here
// -----------------------------------------------------------------------------

interface Stats {
  readonly dev: number
  readonly ino: number
  readonly nlink: number
  readonly size: number
  /** The last change of the file's status or, for a directory, of its entries (a rename in or out). */
  readonly ctimeMs: number
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
  read(buffer: Uint8Array, offset: number, length: number, position: number | null): Promise<{ bytesRead: number }>
  writeFile(data: Uint8Array): Promise<void>
  truncate(length: number): Promise<void>
  close(): Promise<void>
}

/** The parts of `node:fs` the jail uses. */
export interface NodeFs {
  readonly constants: Readonly<Record<string, number | undefined>>
  readonly promises: {
    open(path: string, flags: number, mode?: number): Promise<FileHandle>
    stat(path: string): Promise<Stats>
    lstat(path: string): Promise<Stats>
    readlink(path: string): Promise<string>
    realpath(path: string): Promise<string>
    mkdir(path: string): Promise<unknown>
    rename(from: string, to: string): Promise<void>
    unlink(path: string): Promise<void>
    rmdir(path: string): Promise<void>
    readdir(path: string, options: { readonly withFileTypes: true }): Promise<Array<Dirent>>
  }
}

// Not a literal on purpose: the package compiles without Node's types, and a bundler for the browser
// (esbuild's browser and neutral platforms) fails the whole build on a literal `import("node:fs")`;
// this one it leaves to run time, where only `makeDirectory` reaches it.
const nodeFsSpecifier: string = "node:fs"
let nodeFs: Promise<NodeFs> | undefined
const loadNodeFs = () => nodeFs ??= import(nodeFsSpecifier) as Promise<NodeFs>

/**
 * A test seam, not public API: whether the jail may name descriptors
 * through `/proc/self/fd` where it exists. Tests turn it off to run the
 * portable strategy of macOS and Windows on Linux; nothing else provides it.
 */
export class UseProcFd extends Context.Reference<UseProcFd>()(
  "@stepwise-agent/middleware/internal/hostJail/UseProcFd",
  { defaultValue: () => true }
) {}

/**
 * A test seam, not public API: wraps the `node:fs` the jail uses, so a test
 * can act in the middle of a call (swap a link in the instant before a
 * `mkdir`, or hold a call). Nothing else provides it.
 */
export class WrapNodeFs extends Context.Reference<WrapNodeFs>()(
  "@stepwise-agent/middleware/internal/hostJail/WrapNodeFs",
  { defaultValue: (): (fs: NodeFs) => NodeFs => (fs) => fs }
) {}

/**
 * How long a directory's entries must have stayed unchanged before the
 * portable strategy relies on its `ctime` to show a later change: more than
 * the coarsest clock a file system stamps times with (a kernel tick, 15.6 ms
 * on Windows), so a change after it cannot carry the same time.
 */
export const quietMillis = 50

// -----------------------------------------------------------------------------
// refusals
// -----------------------------------------------------------------------------

/** Why an operation was refused; `Workspace` turns it into its typed error for the virtual path. */
export type Refusal =
  | { readonly _tag: "Outside" }
  | { readonly _tag: "NotFound" }
  | { readonly _tag: "Unsupported"; readonly kind: string }
  | { readonly _tag: "NotUtf8" }
  | { readonly _tag: "ReadOnly" }
  | { readonly _tag: "TooLarge"; readonly size: number; readonly max: number }
  | { readonly _tag: "Io"; readonly reason: string }

const outside: Refusal = { _tag: "Outside" }
const notFound: Refusal = { _tag: "NotFound" }
const unsupported = (kind: string): Refusal => ({ _tag: "Unsupported", kind })
const io = (reason: string): Refusal => ({ _tag: "Io", reason })
const readOnly: Refusal = { _tag: "ReadOnly" }
const tooLarge = (size: number, max: number): Refusal => ({ _tag: "TooLarge", size, max })
/** A name longer than the file system takes, or a directory nested deeper than the kernel can name. */
const nameTooLong = io("the name or the path is too long for the file system")
/** A write whose directory above is a file (ENOTDIR while making the directories). */
const parentIsFile = io("a directory above it is a file")

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
    ? (error as { code: string }).code
    : undefined

/**
 * The root is no longer the directory the jail was made on: its path was
 * renamed away, replaced (by a link or another directory) or removed. Every
 * operation is refused with it, and nothing is made or deleted anywhere.
 */
const rootChanged = io("the workspace's root directory was moved, replaced or removed since the workspace was made")

/**
 * A directory on the way changed while an operation used it (portable
 * strategy): the operation is run again, and answers this when it keeps
 * changing.
 */
const changed = io("the directory changed while it was used; try again")

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
    case "ENAMETOOLONG":
      return nameTooLong
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
  /** A file's text; one of more than `maxBytes` bytes is refused without reading it whole. */
  readonly read: (segments: ReadonlyArray<string>, maxBytes: number) => Effect.Effect<string, Refusal>
  /**
   * Creates or replaces a file, and the directories above it. `writable`
   * is asked about the real place (segments under the root, past every
   * link) of the file, and of each directory to make, before it is changed.
   */
  readonly write: (
    segments: ReadonlyArray<string>,
    content: string,
    writable: (real: ReadonlyArray<string>) => boolean
  ) => Effect.Effect<void, Refusal>
  /**
   * The files under a path, recursively, as segments: what `read` would
   * accept, without following a link to a directory (in or out of the root).
   */
  readonly files: (segments: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ReadonlyArray<string>>, Refusal>
  /**
   * Deletes a file, in its checked directory: a link is deleted itself, never
   * where it leads; a directory is refused. `writable` is asked about its
   * place (segments under the root).
   */
  readonly remove: (
    segments: ReadonlyArray<string>,
    writable: (real: ReadonlyArray<string>) => boolean
  ) => Effect.Effect<void, Refusal>
}

/** An open file or directory, checked to be inside the root. */
interface Opened {
  readonly handle: FileHandle
  readonly stats: Stats
  /** Its real host path. */
  readonly real: string
  /** The operation that opened it. */
  readonly operation: Operation
  /** The directories from the root down to the one holding it (portable strategy: its path goes through them). */
  readonly above: ReadonlyArray<Opened>
}

/**
 * One operation of the portable strategy: the directories its path
 * lookups went through (by handle), each with the `ctime` it had when first
 * relied on, the opened directories found again at their path since,
 * whether a watched directory closed before the end had changed, and the
 * files and directories it made (removed again when it fails).
 */
interface Operation {
  readonly watched: Map<FileHandle, number>
  readonly confirmed: Set<Opened>
  changed: boolean
  readonly made: Array<Made>
}

/**
 * A file or directory an operation made, by the path it was made at (a
 * swap may have taken that path somewhere else).
 */
interface Made {
  readonly path: string
  readonly isDirectory: boolean
  /**
   * Its device and inode, when known for certain: a file's from its
   * descriptor, a directory's from a look at its path while no directory on
   * the way changed. `undefined`: a directory made while one changed.
   */
  readonly identity: { readonly dev: number; readonly ino: number } | undefined
  /** The wall clock just before it was made: what it made has a status change no older. */
  readonly since: number
  /** Whether it was made in the checked directory for certain (no directory on the way changed around it). */
  readonly inParent: boolean
  /** The directories its path goes through, from the root (a change in one may have the path lead elsewhere). */
  readonly through: ReadonlyArray<FileHandle>
  /** Whether the path leads to the checked directory now, as it did when it was checked. */
  readonly leadsToParent: Effect.Effect<boolean>
  /** Closes what the operation holds open of it (a new file), before it is removed. */
  readonly close: Effect.Effect<void>
}

/**
 * Closes the descriptor a jail holds on its root once the jail is gone (a
 * workspace has no scope to close it in).
 */
const closeWhenCollected = new FinalizationRegistry<FileHandle>((handle) => void handle.close().catch(() => undefined))

/**
 * The jail over the directory `root` (which must exist); fails with its real
 * path's error. The root is the directory `root` names now: a descriptor is
 * held on it for as long as the jail lives (so its identity, device and
 * inode, is never another's), and an operation begins only when the root's
 * real path still names that directory and no link.
 */
export const make = (root: string): Effect.Effect<Jail, Refusal> =>
  Effect.gen(function*() {
    const fs = (yield* WrapNodeFs)(yield* Effect.tryPromise({ try: loadNodeFs, catch: (error) => io(String(error)) }))
    const call = <A>(f: () => Promise<A>) => Effect.tryPromise({ try: f, catch: refusalOf })
    const flag = (name: string) => fs.constants[name] ?? 0
    const readFlags = flag("O_RDONLY") | flag("O_NONBLOCK") | flag("O_NOCTTY")
    const writeFlags = flag("O_WRONLY") | flag("O_NONBLOCK") | flag("O_NOCTTY")
    const noFollow = flag("O_NOFOLLOW")
    const createFlags = writeFlags | flag("O_CREAT") | flag("O_EXCL") | noFollow
    const directoryFlags = readFlags | flag("O_DIRECTORY")
    const close = (handle: FileHandle) => Effect.promise(() => handle.close().catch(() => undefined))
    const rootReal = yield* call(() => fs.promises.realpath(root))
    const separator = rootReal.includes("\\") && !rootReal.includes("/") ? "\\" : "/"
    const prefix = rootReal.endsWith(separator) ? rootReal : rootReal + separator
    const inside = (real: string) => real === rootReal || real.startsWith(prefix)
    /** The segments under the root of a real path inside it. */
    const segmentsOf = (real: string): ReadonlyArray<string> =>
      real === rootReal ? [] : real.slice(prefix.length).split(separator)

    const held = yield* call(() => fs.promises.open(rootReal, directoryFlags | noFollow))
    const rootStats = yield* Effect.tapError(call(() => held.stat()), () => close(held))
    /** Whether `stats` are the root's, the directory the jail was made on. */
    const isRoot = (stats: Stats) => stats.dev === rootStats.dev && stats.ino === rootStats.ino

    // whether the kernel names an open descriptor's file (Linux): ask about the root's
    const viaProc = (yield* UseProcFd) && (yield* Effect.map(
      Effect.either(call(() => fs.promises.readlink(`/proc/self/fd/${held.fd}`))),
      (named) => named._tag === "Right" && named.right === rootReal
    ))

    /** Whether the root's real path names the root still: that directory, not a link (portable strategy). */
    const rootHolds = Effect.match(call(() => fs.promises.lstat(rootReal)), {
      onFailure: () => false,
      onSuccess: (stats) => !stats.isSymbolicLink() && isRoot(stats)
    })

    // -------------------------------------------------------------------------
    // the portable strategy's watch over the directories a path goes through
    // -------------------------------------------------------------------------

    const pause = (millis: number) =>
      Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, Math.max(1, Math.ceil(millis)))))

    /**
     * Records `directory`'s `ctime` once it has been quiet for
     * {@link quietMillis} (waiting a little for it), so any later change of
     * its entries shows. The wall clock is the file system's, not the
     * Effect `Clock`; a time far in the future is a clock of another
     * machine (a network file system): used as it is.
     */
    const watch = (directory: Opened) =>
      Effect.gen(function*() {
        const { watched } = directory.operation
        if (watched.has(directory.handle)) return
        for (let attempt = 0; attempt < 2; attempt++) {
          const { ctimeMs } = yield* call(() => directory.handle.stat())
          const age = Date.now() - ctimeMs
          if (age >= quietMillis || age < -1000) return void watched.set(directory.handle, ctimeMs)
          yield* pause(quietMillis - age)
        }
        return yield* Effect.fail(changed)
      })

    /** Finds `opened` again at its path, not a link: its name in the (watched) directory above still names it. */
    const confirm = (opened: Opened) =>
      Effect.gen(function*() {
        const { confirmed } = opened.operation
        if (opened.above.length === 0 || confirmed.has(opened)) return
        const now = yield* Effect.mapError(
          call(() => fs.promises.lstat(opened.real)),
          (refusal) => refusal._tag === "NotFound" ? changed : refusal
        )
        if (now.isSymbolicLink() || now.dev !== opened.stats.dev || now.ino !== opened.stats.ino) {
          return yield* Effect.fail(changed)
        }
        confirmed.add(opened)
      })

    /**
     * Makes the lookups of a name in `directory` by its real path sound:
     * each directory from the root down to the one above it is watched, and
     * each step found again at its path after the one above was.
     */
    const through = (directory: Opened) =>
      Effect.gen(function*() {
        const chain = [...directory.above, directory]
        for (let i = 1; i < chain.length; i++) {
          yield* watch(chain[i - 1]!)
          yield* confirm(chain[i]!)
        }
      })

    /** Whether the watched directory open as `handle` is unchanged since it was first relied on. */
    const unchanged = (operation: Operation, handle: FileHandle) => {
      const ctimeMs = operation.watched.get(handle)
      return ctimeMs === undefined ? Effect.succeed(true) : Effect.match(call(() => handle.stat()), {
        onFailure: () => false,
        onSuccess: (now) => now.ctimeMs === ctimeMs
      })
    }

    /**
     * Fails with `changed` when a directory the operation went through
     * changed since it was relied on, and with `rootChanged` when the root's
     * path no longer names the root.
     */
    const settle = (operation: Operation) =>
      Effect.gen(function*() {
        if (!(yield* rootHolds)) return yield* Effect.fail(rootChanged)
        for (const handle of operation.watched.keys()) {
          if (!(yield* unchanged(operation, handle))) operation.changed = true
        }
        if (operation.changed) return yield* Effect.fail(changed)
      })

    /** Closes a handle of `operation`; a watched directory is checked first, as it is no longer there at the end. */
    const release = (operation: Operation) => (handle: FileHandle) =>
      Effect.flatMap(unchanged(operation, handle), (same) => {
        if (!same) operation.changed = true
        operation.watched.delete(handle)
        return close(handle)
      })

    /**
     * Whether the root's path names the root and every directory from the
     * root down to the one above `parent` is unchanged since it was watched,
     * so `parent`'s path leads to it now. Checked right before and right
     * after a file or directory is made.
     */
    const holds = (parent: Opened) =>
      Effect.reduce(
        parent.above,
        true,
        (all, directory) => all ? unchanged(parent.operation, directory.handle) : Effect.succeed(false)
      ).pipe(Effect.flatMap((all) => all ? rootHolds : Effect.succeed(false)))

    /**
     * Makes a file or directory in `parent` (portable strategy) by its path,
     * between two checks that no directory on the way changed: `make` runs
     * only when the first holds, and what it made is recorded (to be removed
     * when the operation fails) as made in `parent` for certain only when the
     * second holds too (`inParent`; when it does not, the caller fails the
     * operation as changed). A swap can still land in the instant between
     * the first check and `make` (Node has no `mkdirat`); then what was made
     * is found and removed by {@link unmake}. Not interrupted once begun:
     * what a call made is always recorded.
     */
    const makeIn = <A>(
      parent: Opened,
      path: string,
      make: Effect.Effect<A, Refusal>,
      options: {
        readonly isDirectory: boolean
        readonly identityOf: (made: A) => Effect.Effect<Made["identity"]>
        readonly close: (made: A) => Effect.Effect<void>
      }
    ): Effect.Effect<{ readonly made: A; readonly inParent: boolean }, Refusal> =>
      Effect.uninterruptible(Effect.gen(function*() {
        const { isDirectory } = options
        if (!(yield* holds(parent))) return yield* Effect.fail(changed)
        const since = Date.now()
        const made = yield* make
        const identity = yield* options.identityOf(made)
        const inParent = yield* holds(parent)
        parent.operation.made.push({
          path,
          isDirectory,
          // a directory looked at while a swap may have led the path elsewhere may be another one
          identity: inParent || !isDirectory ? identity : undefined,
          since,
          inParent,
          through: parent.above.map((directory) => directory.handle),
          leadsToParent: holds(parent),
          close: options.close(made)
        })
        return { made, inParent }
      }))

    /**
     * How long the search for what a failed operation made goes on after
     * the directories on its path last changed, and how many of their
     * changes it looks through: the search follows the swaps, not a clock.
     */
    const searchQuietMillis = 40 * quietMillis
    const searchChanges = 200

    /**
     * Watches the directories `through`: `tick` notes a change of any of
     * them and answers whether a search should go on (fewer than
     * {@link searchChanges} changes, the last less than
     * {@link searchQuietMillis} ago).
     */
    const changesOf = (through: ReadonlyArray<FileHandle>) =>
      Effect.gen(function*() {
        const seen = new Map<FileHandle, number>()
        let changes = 0
        let lastChange = Date.now()
        const look = Effect.gen(function*() {
          let moved = false
          for (const handle of through) {
            const now = yield* Effect.option(call(() => handle.stat()))
            if (Option.isNone(now)) continue
            if (seen.has(handle) && seen.get(handle) !== now.value.ctimeMs) moved = true
            seen.set(handle, now.value.ctimeMs)
          }
          if (moved) {
            changes++
            lastChange = Date.now()
          }
        })
        yield* look
        return {
          tick: Effect.gen(function*() {
            yield* look
            return changes < searchChanges && Date.now() - lastChange <= searchQuietMillis
          })
        }
      })

    /**
     * A search while the directories `through` keep changing: `persist`
     * runs an attempt until it gives a value, or answers `undefined` when
     * the search ends (see {@link changesOf}).
     */
    const searchThrough = (through: ReadonlyArray<FileHandle>) =>
      Effect.map(changesOf(through), (changes) => ({
        tick: changes.tick,
        persist: <A>(attempt: Effect.Effect<A | undefined>) =>
          Effect.gen(function*() {
            while (true) {
              const found = yield* attempt
              if (found !== undefined || !(yield* changes.tick)) return found
              yield* pause(1)
            }
          })
      }))

    const lstatOf = (path: string) =>
      Effect.map(Effect.option(call(() => fs.promises.lstat(path))), Option.getOrUndefined)

    /** A new name beside `path`, in the same directory, that nothing else has. */
    const asideOf = (path: string, what: string) =>
      `${path.slice(0, path.lastIndexOf(separator) + 1)}.stepwise-${what}-${Math.random().toString(36).slice(2)}`

    /** Whether `stats` are of the file or directory `identity` names. */
    const isSame = (identity: { readonly dev: number; readonly ino: number }, stats: Stats) =>
      identity.dev === stats.dev && identity.ino === stats.ino

    /**
     * Whether `stats` are of what `made` made: the same identity, or, for a
     * directory of unknown identity, a directory whose status changed since
     * it was made (a coarse file system clock may stamp a little earlier).
     */
    const isMade = (made: Made, stats: Stats) =>
      made.isDirectory === stats.isDirectory() && !stats.isSymbolicLink() &&
      (made.identity === undefined
        ? stats.ctimeMs >= made.since - quietMillis
        : isSame(made.identity, stats))

    /**
     * Removes what a failed operation of the portable strategy made, wherever
     * a swap took its path (inside the root or out): only that file or
     * directory, found by its identity, and a directory only while empty.
     * The path is looked at until it leads there; it is then renamed aside to
     * a new name in the same directory (one call: the directory cannot
     * change in between), found again by that name, which nothing else has,
     * and removed; anything else moved aside is put back. The looking goes
     * on while the directories on the way keep changing (see
     * {@link changesOf}): on a busy machine as long as on a quiet one. What
     * was made in its directory for certain and is no longer there when the
     * path leads there is gone already. Failures are not reported: the
     * operation fails anyway.
     */
    const unmake = (made: Made) =>
      Effect.gen(function*() {
        yield* made.close
        const { persist, tick } = yield* searchThrough(made.through)
        const aside = asideOf(made.path, "unmade")
        while (true) {
          const there = yield* persist(Effect.gen(function*() {
            const stats = yield* lstatOf(made.path)
            if (stats !== undefined && isMade(made, stats)) return true
            // made in its directory, which the path leads to, and not there: removed already
            if (made.inParent && (yield* made.leadsToParent)) return false
            return undefined
          }))
          if (there !== true) return
          if (Option.isNone(yield* Effect.option(call(() => fs.promises.rename(made.path, aside))))) {
            // gone or swapped since the look, or not to be moved: looked for again while the search goes on
            if (!(yield* tick)) return
            yield* pause(1)
            continue
          }
          const moved = yield* persist(lstatOf(aside))
          if (moved === undefined) return
          if (isMade(made, moved)) {
            // not found by that name: the path leads elsewhere for now; a directory not empty is kept
            const removed = yield* persist(Effect.match(
              call(() => made.isDirectory ? fs.promises.rmdir(aside) : fs.promises.unlink(aside)),
              { onFailure: (refusal) => refusal === notFound ? undefined : false, onSuccess: () => true }
            ))
            if (removed !== false) return
          }
          // another file the swap led to, or a directory not empty: it gets its name back
          yield* persist(Effect.match(call(() => fs.promises.rename(aside, made.path)), {
            onFailure: () => undefined,
            onSuccess: () => true
          }))
          if (isMade(made, moved)) return
        }
      })

    /**
     * Deletes the entry `looked` at `path` in `parent` (portable strategy):
     * it is moved aside in its directory, under a name nothing else has,
     * between two checks that no directory on the way changed, and deleted
     * by that name only when it is that entry, moved within `parent`. A swap
     * in the instant before the rename moves what the swap led to instead
     * (Node has no `unlinkat`): that is put back, never deleted, found by its
     * new name as {@link unmake} looks, and the removal fails as changed.
     */
    const removeAside = (parent: Opened, path: string, looked: Stats) =>
      Effect.gen(function*() {
        if (!(yield* holds(parent))) return yield* Effect.fail(changed)
        const aside = asideOf(path, "removed")
        const renamed = yield* Effect.either(call(() => fs.promises.rename(path, aside)))
        if (Either.isLeft(renamed)) return yield* Effect.fail((yield* holds(parent)) ? renamed.left : changed)
        const moved = yield* lstatOf(aside)
        if (moved !== undefined && isSame(looked, moved) && (yield* holds(parent))) {
          // in the checked directory under a name only this call knows: a swap now leads that name nowhere
          if (Either.isRight(yield* Effect.either(call(() => fs.promises.unlink(aside))))) return
        }
        const { persist } = yield* searchThrough(parent.above.map((directory) => directory.handle))
        yield* persist(Effect.match(call(() => fs.promises.rename(aside, path)), {
          onFailure: () => undefined,
          onSuccess: () => true
        }))
        return yield* Effect.fail(changed)
      }).pipe(Effect.uninterruptible)

    // -------------------------------------------------------------------------
    // opening
    // -------------------------------------------------------------------------

    /** The path that names `name` in the opened directory `parent` (`""`: the directory itself). */
    const pathIn = (parent: Opened, name: string): Effect.Effect<string, Refusal> =>
      viaProc
        ? Effect.succeed(`/proc/self/fd/${parent.handle.fd}/${name}`)
        : Effect.as(through(parent), name === "" ? parent.real : parent.real + separator + name)

    /**
     * The root, opened for `operation` by its real path (no link followed),
     * and refused unless it is the directory the jail was made on: a root
     * renamed away, replaced or removed is never used. By descriptor, every
     * later step is opened in this one, so a swap of the root's path since
     * cannot lead elsewhere; the portable strategy checks the path again
     * before it answers or changes anything (`settle`, `holds`).
     */
    const openRoot = (operation: Operation): Effect.Effect<Opened, Refusal, Scope.Scope> =>
      Effect.gen(function*() {
        const handle = yield* Effect.acquireRelease(
          Effect.mapError(
            call(() => fs.promises.open(rootReal, directoryFlags | noFollow)),
            (refusal) => refusal._tag === "Io" && refusal.reason === "permission denied" ? refusal : rootChanged
          ),
          release(operation)
        )
        const stats = yield* call(() => handle.stat())
        if (!isRoot(stats)) return yield* Effect.fail(rootChanged)
        return { handle, stats, real: rootReal, operation, above: [] }
      })

    /** The real path of what `handle` is (through `/proc/self/fd`), or a refusal when it is not inside the root. */
    const checkByDescriptor = (handle: FileHandle) =>
      Effect.flatMap(
        call(() => fs.promises.readlink(`/proc/self/fd/${handle.fd}`)),
        (real) => inside(real) ? Effect.succeed(real) : Effect.fail(outside)
      )

    /**
     * Opens `name` in `parent` with `flags`, following a link (`follow`)
     * only when it stays inside the root, and checks what was opened; closed
     * with the scope. A special file is refused before opening when it can
     * be seen as one, and after in any case.
     */
    const open = (
      parent: Opened,
      name: string,
      flags: number,
      options?: { readonly mode?: number | undefined; readonly follow?: boolean | undefined }
    ): Effect.Effect<Opened, Refusal, Scope.Scope> =>
      viaProc ? openByDescriptor(parent, name, flags, options) : openPortable(parent, name, flags, options, 0)

    const openByDescriptor = (
      parent: Opened,
      name: string,
      flags: number,
      options?: { readonly mode?: number | undefined; readonly follow?: boolean | undefined }
    ): Effect.Effect<Opened, Refusal, Scope.Scope> =>
      Effect.gen(function*() {
        const path = yield* pathIn(parent, name)
        const handle = yield* Effect.acquireRelease(
          Effect.catchAll(
            call(() => fs.promises.open(path, flags | (options?.follow === false ? noFollow : 0), options?.mode)),
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
        const real = yield* checkByDescriptor(handle)
        return { handle, stats, real, operation: parent.operation, above: [] }
      })

    /** The most links one lookup follows, as the kernel's limit (past it: ELOOP, a path outside). */
    const maxLinks = 40

    /**
     * The portable open: the name is looked at first (`lstat`, no link
     * followed), a link is resolved by its real path and walked again from
     * the root, and the file is opened with `O_NOFOLLOW` and must be the one
     * looked at.
     */
    const openPortable = (
      parent: Opened,
      name: string,
      flags: number,
      options: { readonly mode?: number | undefined; readonly follow?: boolean | undefined } | undefined,
      links: number
    ): Effect.Effect<Opened, Refusal, Scope.Scope> =>
      Effect.gen(function*() {
        const path = yield* pathIn(parent, name)
        const seen = yield* Effect.either(call(() => fs.promises.lstat(path)))
        const creating = (flags & flag("O_CREAT")) !== 0
        if (seen._tag === "Left") {
          if (seen.left._tag !== "NotFound" || !creating) return yield* Effect.fail(seen.left)
        } else if (seen.right.isSymbolicLink()) {
          if (options?.follow === false || links >= maxLinks) return yield* Effect.fail(outside)
          return yield* followLink(parent, path, flags, options, links + 1)
        } else if (creating && (flags & flag("O_EXCL")) !== 0) {
          return yield* Effect.fail(io("EEXIST"))
        } else {
          const kind = specialKind(seen.right)
          if (kind !== undefined) return yield* Effect.fail(unsupported(kind))
        }
        const opening = Effect.tryPromise({
          try: () => fs.promises.open(path, flags | noFollow, options?.mode),
          // a link swapped in since it was looked at
          catch: (error) => codeOf(error) === "ELOOP" || codeOf(error) === "EMLINK" ? changed : refusalOf(error)
        })
        // a new file is made between two checks of the directories on the way (known by its descriptor)
        const { inParent, made: handle } = yield* Effect.acquireRelease(
          seen._tag === "Left"
            ? makeIn(parent, path, opening, {
              isDirectory: false,
              identityOf: (handle) => Effect.map(Effect.option(call(() => handle.stat())), Option.getOrUndefined),
              close
            })
            : Effect.map(opening, (made) => ({ made, inParent: true })),
          ({ made }) => release(parent.operation)(made)
        )
        if (!inParent) return yield* Effect.fail(changed)
        const stats = yield* call(() => handle.stat())
        if (seen._tag === "Right" && (seen.right.dev !== stats.dev || seen.right.ino !== stats.ino)) {
          return yield* Effect.fail(changed)
        }
        return { handle, stats, real: path, operation: parent.operation, above: [...parent.above, parent] }
      })

    /** What the link at `path` leads to, opened by walking its real path from the root; outside it is refused. */
    const followLink = (
      parent: Opened,
      path: string,
      flags: number,
      options: { readonly mode?: number | undefined } | undefined,
      links: number
    ): Effect.Effect<Opened, Refusal, Scope.Scope> =>
      Effect.gen(function*() {
        // a link whose target is missing cannot be checked (and a write would create its target)
        const real = yield* Effect.mapError(
          call(() => fs.promises.realpath(path)),
          (refusal) => refusal._tag === "NotFound" ? outside : refusal
        )
        if (!inside(real)) return yield* Effect.fail(outside)
        const segments = segmentsOf(real)
        let at = parent.above[0] ?? parent
        if (segments.length === 0) return at
        for (const segment of segments.slice(0, -1)) {
          at = yield* openPortable(at, segment, directoryFlags, undefined, links)
        }
        return yield* openPortable(at, segments[segments.length - 1]!, flags, options, links)
      })

    /**
     * Refuses, before opening it, a file that is already a FIFO, socket or
     * device (opening one may wait, or do something); through a link out of
     * the root it is a path outside. (The portable open looks before it
     * opens anyway.)
     */
    const refuseSpecial = (parent: Opened, name: string) =>
      !viaProc ? Effect.void : Effect.gen(function*() {
        const path = yield* pathIn(parent, name)
        const stats = yield* Effect.either(call(() => fs.promises.stat(path)))
        const kind = stats._tag === "Left" ? undefined : specialKind(stats.right)
        if (kind === undefined) return
        const real = yield* Effect.either(call(() => fs.promises.realpath(path)))
        return yield* Effect.fail(real._tag === "Right" && inside(real.right) ? unsupported(kind) : outside)
      })

    /**
     * The directory at `segments` under the root, each step opened in the
     * one before; a missing step is made when `writable` is given and allows
     * its real place.
     */
    const directory = (
      root: Opened,
      segments: ReadonlyArray<string>,
      writable?: (real: ReadonlyArray<string>) => boolean
    ): Effect.Effect<Opened, Refusal, Scope.Scope> =>
      Effect.gen(function*() {
        let current = root
        for (const name of segments) {
          const parent: Opened = current
          const opened = yield* Effect.either(open(parent, name, directoryFlags))
          if (opened._tag === "Right") {
            current = opened.right
            continue
          }
          if (writable === undefined || opened.left._tag !== "NotFound") return yield* Effect.fail(opened.left)
          if (!writable([...segmentsOf(parent.real), name])) return yield* Effect.fail(readOnly)
          const path = yield* pathIn(parent, name)
          const mkdir = call(() => fs.promises.mkdir(path))
          const { inParent } = yield* Effect.catchIf(
            viaProc ? Effect.as(mkdir, { inParent: true }) : makeIn(parent, path, mkdir, {
              isDirectory: true,
              identityOf: () => Effect.map(Effect.option(call(() => fs.promises.lstat(path))), Option.getOrUndefined),
              close: () => Effect.void
            }),
            // made by another write since it was looked for
            (refusal) => refusal._tag === "Io" && refusal.reason === "EEXIST",
            () => Effect.succeed({ inParent: true })
          )
          if (!inParent) return yield* Effect.fail(changed)
          current = yield* open(parent, name, directoryFlags)
        }
        return current
      })

    /** The bytes of the regular file `opened`, read in pieces; more than `maxBytes` is refused. */
    const readBounded = (opened: Opened, maxBytes: number) =>
      Effect.gen(function*() {
        if (opened.stats.size > maxBytes) return yield* Effect.fail(tooLarge(opened.stats.size, maxBytes))
        // room for one byte more than its size: a file that grew since is read on (to one byte past the limit)
        let buffer = new Uint8Array(Math.min(maxBytes, opened.stats.size) + 1)
        let length = 0
        while (true) {
          if (length === buffer.length) {
            if (length > maxBytes) return yield* Effect.fail(tooLarge(Math.max(opened.stats.size, length), maxBytes))
            const grown = new Uint8Array(Math.min(maxBytes + 1, buffer.length * 2))
            grown.set(buffer)
            buffer = grown
          }
          const { bytesRead } = yield* call(() =>
            opened.handle.read(buffer, length, Math.min(buffer.length - length, 1 << 20), length)
          )
          if (bytesRead === 0) return buffer.subarray(0, length)
          length += bytesRead
        }
      })

    /** A regular file with one link, or the refusal of what it is instead. */
    const regular = (opened: Opened): Effect.Effect<Opened, Refusal> => {
      const kind = specialKind(opened.stats)
      if (kind !== undefined) return Effect.fail(unsupported(kind))
      if (opened.stats.isDirectory()) return Effect.fail(notFound)
      return opened.stats.nlink > 1 ? Effect.fail(unsupported("hard link")) : Effect.succeed(opened)
    }

    /** `segments` opened for reading: a directory, or a regular file. */
    const openPath = (root: Opened, segments: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        if (segments.length === 0) return root
        const parent = yield* directory(root, segments.slice(0, -1))
        const name = segments[segments.length - 1]!
        yield* refuseSpecial(parent, name)
        const opened = yield* open(parent, name, readFlags)
        return opened.stats.isDirectory() ? opened : yield* regular(opened)
      })

    /** The entries of the directory `opened` that reading accepts; a link to a directory is listed, not walked. */
    const entries = (opened: Opened) =>
      Effect.gen(function*() {
        const listed = yield* pathIn(opened, "")
        const names = yield* call(() => fs.promises.readdir(listed, { withFileTypes: true }))
        names.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
        const out: Array<Listed & { readonly isLink: boolean }> = []
        for (const dirent of names) {
          if (dirent.isDirectory()) {
            out.push({ name: dirent.name, isDirectory: true, size: 0, isLink: false })
            continue
          }
          // a file, link or special file: listed only when reading it would be accepted
          const path = yield* pathIn(opened, dirent.name)
          const stats = yield* Effect.either(call(() => fs.promises.lstat(path)))
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
          // a directory on the way that changed is not a file to leave out: the whole listing is done again
          if (target._tag === "Left" && target.left === changed) return yield* Effect.fail(changed)
          if (target._tag === "Left") continue
          const isDirectory = target.right.isDirectory()
          out.push({ name: dirent.name, isDirectory, size: isDirectory ? 0 : target.right.size, isLink: true })
        }
        return out
      })

    /**
     * Runs one operation from the root. The portable strategy checks, before
     * the answer, that no directory it went through changed (`settle`), and
     * runs it again a few times when one did.
     */
    const runOperation = <A>(
      body: (root: Opened, settle: Effect.Effect<void, Refusal>) => Effect.Effect<A, Refusal, Scope.Scope>
    ): Effect.Effect<A, Refusal> => {
      const once = Effect.suspend(() => {
        const started: Operation = { watched: new Map(), confirmed: new Set(), changed: false, made: [] }
        const checked = viaProc ? Effect.void : settle(started)
        return Effect.scoped(Effect.gen(function*() {
          const root = yield* openRoot(started)
          return yield* Effect.onError(
            Effect.zipLeft(body(root, checked), checked),
            // a failed or interrupted operation may have made a file or directory where a swap led: it is
            // removed again, while the directories on the way are still open to be watched
            () => Effect.forEach([...started.made].reverse(), unmake, { discard: true })
          )
        }))
      })
      return viaProc ? once : Effect.retry(once, { while: (refusal) => refusal === changed, times: 2 })
    }

    const jail: Jail = {
      list: (segments) =>
        runOperation((root) =>
          Effect.gen(function*() {
            const opened = yield* openPath(root, segments)
            if (!opened.stats.isDirectory()) return [{ name: "", isDirectory: false, size: opened.stats.size }]
            return (yield* entries(opened)).map(({ isDirectory, name, size }) => ({ name, isDirectory, size }))
          })
        ),
      read: (segments, maxBytes) =>
        runOperation((root) =>
          Effect.gen(function*() {
            const opened = yield* openPath(root, segments)
            if (opened.stats.isDirectory()) return yield* Effect.fail(notFound)
            const bytes = yield* readBounded(opened, maxBytes)
            return yield* Effect.try({ try: () => utf8.decode(bytes), catch: (): Refusal => ({ _tag: "NotUtf8" }) })
          })
        ),
      write: (segments, content, writable) =>
        runOperation((root, settled) =>
          Effect.gen(function*() {
            if (segments.length === 0) return yield* Effect.fail(io("it is a directory"))
            const parent = yield* directory(root, segments.slice(0, -1), writable).pipe(
              Effect.catchAll((refusal) => Effect.fail(refusal._tag === "NotFound" ? parentIsFile : refusal))
            )
            const name = segments[segments.length - 1]!
            if (!writable([...segmentsOf(parent.real), name])) return yield* Effect.fail(readOnly)
            // a new file is made in the checked directory, never through a link (O_EXCL, O_NOFOLLOW)
            const created = yield* Effect.either(open(parent, name, createFlags, { mode: 0o666 }))
            let target: Opened
            if (created._tag === "Right") target = created.right
            else if (created.left._tag === "Io" && created.left.reason === "EEXIST") {
              yield* refuseSpecial(parent, name)
              target = yield* Effect.flatMap(open(parent, name, writeFlags), regular)
              // a link inside the root: the rules of the place it leads to apply
              if (!writable(segmentsOf(target.real))) return yield* Effect.fail(readOnly)
            } else {
              return yield* Effect.fail(created.left)
            }
            // nothing is written before every directory on the way is known unchanged
            yield* settled
            yield* call(() => target.handle.truncate(0))
            yield* call(() => target.handle.writeFile(encoder.encode(content)))
          })
        ),
      files: (segments) =>
        runOperation((root) =>
          Effect.gen(function*() {
            const opened = yield* openPath(root, segments)
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
                        open(directory, entry.name, directoryFlags, { follow: false }),
                        (opened) => walk(opened, path)
                      ))
                    )
                    // a directory nested too deep to be named is left out, as reading it would be refused
                    if (sub._tag === "Left" && sub.left._tag === "Io" && sub.left !== nameTooLong) {
                      return yield* Effect.fail(sub.left)
                    }
                  }
                }
              })
            yield* walk(opened, segments)
            return out
          })
        ),
      remove: (segments, writable) =>
        runOperation((root, settled) =>
          Effect.gen(function*() {
            if (segments.length === 0) return yield* Effect.fail(io("it is a directory"))
            const parent = yield* directory(root, segments.slice(0, -1))
            const name = segments[segments.length - 1]!
            if (!writable([...segmentsOf(parent.real), name])) return yield* Effect.fail(readOnly)
            // the name in the checked directory, as it is: a link is not followed
            const path = yield* pathIn(parent, name)
            const stats = yield* call(() => fs.promises.lstat(path))
            if (stats.isDirectory()) return yield* Effect.fail(io("it is a directory"))
            // nothing is deleted before every directory on the way is known unchanged
            yield* settled
            yield* viaProc ? call(() => fs.promises.unlink(path)) : removeAside(parent, path, stats)
          })
        )
    }
    closeWhenCollected.register(jail, held)
    return jail
  })
