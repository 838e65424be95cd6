// A package's `prepack`: builds what the tarball ships from the sources as they are, whatever the
// build folders hold. `tsc -b` alone trusts its build info: with `dist` removed (or a file of it) it
// builds nothing, and the output of a source deleted since stays in `dist` and ships. So first:
//   - every file in `dist` that no source produces is removed;
//   - when an output of a source is missing, the package's build info is removed, so tsc builds again;
// then `tsc -b tsconfig.src.json` (references build as usual). Run from the package's folder.
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"

const source = "src"
const output = "dist"
const buildInfo = path.join(".tsbuildinfo", "src.tsbuildinfo")

/** The paths below `dir`, relative to it, with `/` between folders. */
const filesBelow = (dir) =>
  fs.existsSync(dir)
    ? fs.readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)).split(path.sep).join("/"))
    : []

// what each source produces: `X.ts` → `X.js`, `X.js.map`, `X.d.ts`, `X.d.ts.map` (a `.d.ts` source: nothing)
const produced = new Set()
const required = []
for (const file of filesBelow(source)) {
  if (!file.endsWith(".ts") || file.endsWith(".d.ts")) continue
  const stem = file.slice(0, -".ts".length)
  required.push(`${stem}.js`, `${stem}.d.ts`)
  for (const suffix of [".js", ".js.map", ".d.ts", ".d.ts.map"]) produced.add(`${stem}${suffix}`)
}

const stale = filesBelow(output).filter((file) => !produced.has(file))
for (const file of stale) fs.rmSync(path.join(output, file))
const missing = required.filter((file) => !fs.existsSync(path.join(output, file)))
if (missing.length > 0) fs.rmSync(buildInfo, { force: true })

const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
execFileSync(process.execPath, [tsc, "-b", "tsconfig.src.json"], { stdio: "inherit" })

const unbuilt = required.filter((file) => !fs.existsSync(path.join(output, file)))
if (unbuilt.length > 0) {
  console.error(`prepack: the build did not write ${unbuilt.slice(0, 5).join(", ")}${unbuilt.length > 5 ? ", …" : ""}`)
  process.exit(1)
}
