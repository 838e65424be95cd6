/**
 * Both builds of @effect/ai 0.37 side by side: the one installed, and the
 * other one — "as published" when the installed copy carries the repository's
 * patch (`packages/core/assets/patches/@effect+ai+*.patch`, which builds the reply schema once per
 * toolkit instead of on every call), "patched" when it does not. The other
 * build is a copy of `node_modules/@effect/ai` in a temporary directory with
 * the patch reversed (or applied) by `patch`, whose bare imports resolve to
 * the repository's packages (`effect` and the rest are the same module
 * instances). Only its `LanguageModel.make` is used, to build a fake model;
 * nothing in the repository is changed.
 *
 * @since 0.1.0
 */
import type { LanguageModel } from "@effect/ai"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

/**
 * `LanguageModel.make` of some build of @effect/ai.
 *
 * @since 0.1.0
 * @category models
 */
export type MakeModel = typeof LanguageModel.make

/**
 * @since 0.1.0
 * @category models
 */
export interface Builds {
  /** What the installed copy is. */
  readonly installed: "patched" | "as published" | "unknown"
  readonly patchFile: string | undefined
  /** The other build, when it could be made. */
  readonly other: { readonly label: "patched" | "as published"; readonly make: MakeModel } | undefined
  /** Why there is no other build, when there is none. */
  readonly note: string | undefined
  readonly cleanup: () => void
}

const runPatch = (dir: string, patchFile: string, reverse: boolean, dryRun: boolean) =>
  spawnSync("patch", [
    "-p1",
    "--batch",
    "--silent",
    ...(reverse ? ["-R"] : []),
    ...(dryRun ? ["--dry-run"] : []),
    "-d",
    dir,
    "-i",
    patchFile
  ], { encoding: "utf8" }).status === 0

/**
 * Finds the patch, tells which build is installed and loads the other one.
 *
 * @since 0.1.0
 * @category constructors
 */
export const prepare = async (root: string): Promise<Builds> => {
  const patchesDir = path.join(root, "packages", "core", "assets", "patches")
  const patchName = fs.existsSync(patchesDir)
    ? fs.readdirSync(patchesDir).find((f) => f.startsWith("@effect+ai+") && f.endsWith(".patch"))
    : undefined
  const none = (note: string, installed: Builds["installed"] = "unknown"): Builds => ({
    installed,
    patchFile: patchName === undefined ? undefined : path.join("packages", "core", "assets", "patches", patchName),
    other: undefined,
    note,
    cleanup: () => {}
  })
  if (patchName === undefined) {
    return none("no `packages/core/assets/patches/@effect+ai+*.patch` in the repository", "as published")
  }
  const patchFile = path.join(patchesDir, patchName)
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-effect-ai-"))
  const cleanup = () => fs.rmSync(tmp, { recursive: true, force: true })
  try {
    // node_modules of links to the repository's packages, except a real copy of @effect/ai
    const modules = path.join(root, "node_modules")
    const scoped = path.join(modules, "@effect")
    fs.mkdirSync(path.join(tmp, "node_modules", "@effect"), { recursive: true })
    for (const entry of fs.readdirSync(modules)) {
      if (entry !== "@effect") fs.symlinkSync(path.join(modules, entry), path.join(tmp, "node_modules", entry))
    }
    for (const entry of fs.readdirSync(scoped)) {
      if (entry !== "ai") fs.symlinkSync(path.join(scoped, entry), path.join(tmp, "node_modules", "@effect", entry))
    }
    fs.cpSync(path.join(scoped, "ai"), path.join(tmp, "node_modules", "@effect", "ai"), { recursive: true })
    let installed: Builds["installed"]
    let label: "patched" | "as published"
    if (runPatch(tmp, patchFile, true, true)) {
      installed = "patched"
      label = "as published"
      runPatch(tmp, patchFile, true, false)
    } else if (runPatch(tmp, patchFile, false, true)) {
      installed = "as published"
      label = "patched"
      runPatch(tmp, patchFile, false, false)
    } else {
      cleanup()
      return none(
        `\`${path.join("packages", "core", "assets", "patches", patchName)}\` applies to the installed copy neither way`
      )
    }
    const module = await import(
      pathToFileURL(path.join(tmp, "node_modules", "@effect", "ai", "dist", "esm", "LanguageModel.js")).href
    ) as { readonly make: MakeModel }
    return {
      installed,
      patchFile: path.join("packages", "core", "assets", "patches", patchName),
      other: { label, make: module.make },
      note: undefined,
      cleanup
    }
  } catch (error) {
    cleanup()
    return none(`the other build could not be loaded: ${String(error)}`)
  }
}
