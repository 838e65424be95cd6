/**
 * The speed tricks sit in `internal/fast/`, whose README lists each one with
 * the benchmark row behind it and its idiomatic fallback: a module added to
 * the folder without an entry, or an entry naming a file that is gone, fails.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src")
const fast = path.join(src, "internal/fast")
const readme = fs.readFileSync(path.join(fast, "README.md"), "utf8")

describe("internal/fast", () => {
  it("lists every module of the folder in its README, each with a bench row and a fallback", () => {
    const modules = fs.readdirSync(fast).filter((name) => name.endsWith(".ts"))
    assert.isAbove(modules.length, 0)
    for (const module of modules) {
      const row = readme.split("\n").find((line) => line.startsWith(`| \`${module}\``))
      assert.isDefined(row, `${module} has no row in internal/fast/README.md`)
      // module, trick, justified by, fallback: four filled cells
      const cells = row!.split("|").slice(1, -1).map((cell) => cell.trim())
      assert.strictEqual(cells.length, 4, row)
      for (const cell of cells) assert.isAbove(cell.length, 0, row)
    }
  })

  it("names only files that exist in its list of tricks still to move", () => {
    const toMove = readme.slice(readme.indexOf("## To move"))
    const files = [...toMove.matchAll(/^\| `([^`]+\.ts)`/gm)].map((match) => match[1])
    assert.isAbove(files.length, 0)
    // a path is core's (`internal/…`), or another package's from `packages/` (`middleware/src/…`)
    const packages = path.join(src, "..", "..")
    for (const file of files) {
      assert.isTrue(
        fs.existsSync(path.join(src, file)) || fs.existsSync(path.join(packages, file)),
        `${file} does not exist`
      )
    }
  })

  it("keeps the token counters' tricks out of the modules that use them", () => {
    for (const moved of ["encodings", "asciiSplit", "lru", "jsonLength", "pythonRepr", "fieldRead"]) {
      assert.isFalse(fs.existsSync(path.join(src, "internal", `${moved}.ts`)), `internal/${moved}.ts is outside fast/`)
      assert.isTrue(fs.existsSync(path.join(fast, `${moved}.ts`)))
    }
  })
})
