/**
 * Directories of a workspace that a store of the agent keeps for itself:
 * `Offload.layerWorkspace` reserves the one it keeps offloaded tool results
 * in, and the `Filesystem` tools see the workspace through {@link hiding},
 * which hides them. An offloaded text belongs to one thread (only
 * `read_offloaded` gives it, to that thread); the file tools of every thread
 * share the workspace and do not ask whose a file is.
 */
import * as Effect from "effect/Effect"
import type * as Workspace from "../Workspace.js"
import { WorkspaceError } from "../Workspace.js"
import * as Paths from "./workspacePaths.js"

/**
 * The reserved directories of each workspace, normalized. Not a speed trick: the stores and the file tools
 * are built separately and share only the workspace service (the app's), so the table is keyed by it.
 */
const reserved = new WeakMap<Workspace.Service, Array<string>>()

/** Reserves `directory` of `workspace` (for as long as the workspace lives). */
export const reserve = (workspace: Workspace.Service, directory: string): void => {
  const normalized = Paths.normalize(directory)
  if (normalized === undefined) return
  const directories = reserved.get(workspace)
  if (directories === undefined) reserved.set(workspace, [normalized])
  else if (!directories.includes(normalized)) directories.push(normalized)
}

/**
 * Whether `path` is in a reserved directory of `workspace`, or is a twin of
 * such a path that a file system insensitive to case or Unicode form may
 * take for it (`/Offloaded/…`).
 */
const isReserved = (workspace: Workspace.Service, path: string): boolean => {
  const directories = reserved.get(workspace)
  if (directories === undefined) return false
  const normalized = Paths.normalize(path)
  if (normalized === undefined) return false
  const folded = Paths.fold(normalized)
  return directories.some((directory) =>
    Paths.isWithin(normalized, directory) || Paths.isWithin(folded, Paths.fold(directory))
  )
}

/**
 * `workspace` without its reserved directories: a path in one is not found
 * (`read`, `ls`, and `glob` or `grep` under it) and cannot be written
 * (`write`, `edit`, `remove` fail with `"ReadOnly"`); `ls`, `glob` and
 * `grep` leave their files out. The reservations are read at each call, so
 * a store built after the tools still hides its directory.
 */
export const hiding = (workspace: Workspace.Service): Workspace.Service => {
  const hidden = (path: string | undefined) => path !== undefined && isReserved(workspace, path)
  const notFound = (path: string) => Effect.fail(new WorkspaceError({ reason: "NotFound", path }))
  const readOnly = (path: string) => Effect.fail(new WorkspaceError({ reason: "ReadOnly", path }))
  return {
    ...workspace,
    ls: (path) =>
      hidden(path)
        ? notFound(path)
        : Effect.map(workspace.ls(path), (entries) => entries.filter((entry) => !hidden(entry.path))),
    read: (path) => hidden(path) ? notFound(path) : workspace.read(path),
    write: (path, content, guard) => hidden(path) ? readOnly(path) : workspace.write(path, content, guard),
    edit: (path, oldString, newString, replaceAll, guard) =>
      hidden(path) ? readOnly(path) : workspace.edit(path, oldString, newString, replaceAll, guard),
    glob: (pattern, path) =>
      hidden(path)
        ? notFound(path!)
        : Effect.map(workspace.glob(pattern, path), (files) => files.filter((file) => !hidden(file))),
    grep: (pattern, options) =>
      hidden(options?.path)
        ? notFound(options!.path!)
        : Effect.map(workspace.grep(pattern, options), (matches) => matches.filter((match) => !hidden(match.path))),
    remove: workspace.remove === undefined
      ? undefined
      : (path, guard) => hidden(path) ? readOnly(path) : workspace.remove!(path, guard)
  }
}
