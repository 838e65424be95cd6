/**
 * A folder and its missing parents, made one at a time. A recursive
 * `mkdir` (Node's, and the platform's through it) never ends where `mkdir`
 * answers ENOENT under a folder that exists (`/proc/x`, `/sys/x`): it makes
 * the parent, finds it there, and tries the child again, forever.
 */
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"

/** Makes `directory` and its missing parents; fails with the first folder that cannot be made. */
export const makeDirectories = (
  fs: FileSystem.FileSystem,
  path: Path.Path,
  directory: string
): Effect.Effect<void, PlatformError> =>
  Effect.gen(function*() {
    const missing: Array<string> = []
    for (let current = path.resolve(directory); !(yield* fs.exists(current));) {
      missing.push(current)
      const parent = path.dirname(current)
      if (parent === current) break
      current = parent
    }
    for (const folder of missing.reverse()) {
      // (made at the same moment by another process or instance: there it is)
      yield* fs.makeDirectory(folder).pipe(
        Effect.catchIf((error) => error._tag === "SystemError" && error.reason === "AlreadyExists", () => Effect.void)
      )
    }
  })
