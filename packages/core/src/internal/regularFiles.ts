/**
 * Files opened only when they are regular files. Opening a FIFO for reading
 * waits for a writer, holding one of libuv's four threads (four such waits
 * stop every file operation of the process); a device (`/dev/zero`,
 * `/dev/urandom`, `/dev/tty`) may never end or never answer. So a file is
 * `stat`ed (links followed) before it is opened and again once open, and
 * anything but a regular file fails with a `BadResource` `SystemError`
 * naming what it is. A text is read up to the size its open file has, and
 * one over {@link maxTextBytes} fails the same way before anything is read.
 */
import * as PlatformError from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/** The most bytes a text is read from: as many UTF-16 units as the longest string V8 makes. */
export const maxTextBytes = 2 ** 29 - 24

/** A `BadResource` failure of `method` on `file`. */
export const badResource = (file: string, method: string, description: string) =>
  new PlatformError.SystemError({
    reason: "BadResource",
    module: "FileSystem",
    method,
    pathOrDescriptor: file,
    description
  })

const checked = (file: string, method: string, info: FileSystem.File.Info) =>
  info.type === "File"
    ? Effect.succeed(info)
    : Effect.fail(badResource(file, method, `a ${info.type} where a regular file belongs`))

/** An open regular file and its size when opened. */
export interface Opened {
  readonly handle: FileSystem.File
  readonly size: number
}

/**
 * Opens `file` (`"r"` or `"r+"`) in the scope, failing with `BadResource` (and without opening it, unless it
 * changed in between) when it is not a regular file.
 */
export const open = (
  fs: FileSystem.FileSystem,
  file: string,
  flag: "r" | "r+"
): Effect.Effect<Opened, PlatformError.PlatformError, Scope.Scope> =>
  Effect.gen(function*() {
    yield* Effect.flatMap(fs.stat(file), (info) => checked(file, "open", info))
    const handle = yield* fs.open(file, { flag })
    const info = yield* Effect.flatMap(handle.stat, (info) => checked(file, "open", info))
    return { handle, size: Number(info.size) }
  })

const decoder = new TextDecoder()

/** The text of the regular file `file` (UTF-8, as `readFileString` reads it), at most {@link maxTextBytes}. */
export const readText = (
  fs: FileSystem.FileSystem,
  file: string
): Effect.Effect<string, PlatformError.PlatformError> =>
  Effect.scoped(Effect.gen(function*() {
    const { handle, size } = yield* open(fs, file, "r")
    if (size > maxTextBytes) {
      return yield* badResource(file, "readFile", `${size} bytes, over the ${maxTextBytes} a text is read from`)
    }
    const buffer = new Uint8Array(size)
    return decoder.decode(buffer.subarray(0, yield* readInto(handle, buffer)))
  }))

/** Fills `buffer` from `handle`'s position on; gives how many bytes it read (fewer at the file's end). */
export const readInto = (
  handle: FileSystem.File,
  buffer: Uint8Array
): Effect.Effect<number, PlatformError.PlatformError> =>
  Effect.gen(function*() {
    let filled = 0
    while (filled < buffer.length) {
      const read = Number(yield* handle.read(buffer.subarray(filled)))
      if (read === 0) break
      filled += read
    }
    return filled
  })
