// Writes the src/index.ts of each published package: one `export * as Module` per module file.
// Private packages (the demo, the benchmarks) are programs and have no index.
// Modules a package.json lists in `stepwise.subpathOnly` stay out of the index: they are
// imported only by their subpath (`@stepwise-agent/testing/FakeOpenAi`, through the `./*`
// export), so the package root does not load them (e.g. modules that need Node).
// With --check, fails instead when an index is out of date.
import * as fs from "node:fs"
import * as path from "node:path"

const check = process.argv.includes("--check")
const root = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "packages")
const entryPoints = new Set(["index.ts"])
let stale = []

for (const pkg of fs.readdirSync(root)) {
  const src = path.join(root, pkg, "src")
  if (!fs.existsSync(src)) continue
  const manifest = JSON.parse(fs.readFileSync(path.join(root, pkg, "package.json"), "utf8"))
  if (manifest.private) continue
  const subpathOnly = new Set((manifest.stepwise?.subpathOnly ?? []).map((name) => `${name}.ts`))
  const modules = fs.readdirSync(src)
    .filter((file) => file.endsWith(".ts") && !entryPoints.has(file) && !subpathOnly.has(file))
    .map((file) => file.slice(0, -3))
    .sort()
  const text = modules
    .map((name) => `/**\n * @since 0.1.0\n */\nexport * as ${name} from "./${name}.js"\n`)
    .join("\n")
  const target = path.join(src, "index.ts")
  const current = fs.existsSync(target) ? fs.readFileSync(target, "utf8") : ""
  if (current === text) continue
  if (check) stale.push(path.relative(process.cwd(), target))
  else fs.writeFileSync(target, text)
}

if (stale.length > 0) {
  console.error(`Out of date (run npm run codegen): ${stale.join(", ")}`)
  process.exit(1)
}
