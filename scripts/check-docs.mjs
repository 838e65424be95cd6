// Typechecks every ```ts sample in README.md and docs/**/*.md, so the docs cannot rot.
// With --jsdoc, also the ```ts samples of the JSDoc comments of packages/*/src (published packages).
//
// Each doc's samples are written to packages/demo/.docs-check/<doc-slug>/ (inside the
// workspace, so @stepwise-agent/* and the demo's dependencies resolve) and all of them
// are checked in one `tsc --noEmit` program. A sample whose first line is a comment
// naming a file (`// support.ts: ...`, `// src/WeatherTools.ts`) is written under that
// name, so relative imports between samples of the same doc resolve; the others are
// sample_<n>.ts. A fence written ```ts skip-check, or preceded by the line
// <!-- no-check --> (or <!-- no-check: why -->), is a deliberate fragment and is not checked.
// Errors are reported at their line in the markdown. With --keep, the scratch folder
// is left in place (to run a sample with `npx tsx packages/demo/.docs-check/...`).
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"

const started = performance.now()
const keep = process.argv.includes("--keep")
const repo = path.join(path.dirname(new URL(import.meta.url).pathname), "..")
const scratch = path.join(repo, "packages", "demo", ".docs-check")
const rel = (file) => path.relative(repo, file).split(path.sep).join("/")

const markdownFiles = (dir) =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name)
    if (entry.isDirectory()) return markdownFiles(file)
    return entry.name.endsWith(".md") ? [file] : []
  })

const sourceFiles = (dir) =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name)
    if (entry.isDirectory()) return entry.name === "internal" ? [] : sourceFiles(file)
    return entry.name.endsWith(".ts") && entry.name !== "index.ts" ? [file] : []
  })

// With --jsdoc, the @example samples of the published packages' modules are checked too.
const publishedSources = () =>
  fs.readdirSync(path.join(repo, "packages")).filter((dir) => {
    const manifest = path.join(repo, "packages", dir, "package.json")
    return fs.existsSync(manifest) && JSON.parse(fs.readFileSync(manifest, "utf8")).private !== true
  }).flatMap((dir) => sourceFiles(path.join(repo, "packages", dir, "src"))).sort()

const docs = [
  path.join(repo, "README.md"),
  ...fs.readdirSync(path.join(repo, "packages")).map((dir) => path.join(repo, "packages", dir, "README.md"))
    .filter((file) => fs.existsSync(file)),
  ...markdownFiles(path.join(repo, "docs")).sort(),
  ...(process.argv.includes("--jsdoc") ? publishedSources() : [])
]

// A .ts file read as markdown: its comment lines without the leading ` * `, every other line
// blank, so line numbers stay those of the file.
const asMarkdown = (file, text) =>
  file.endsWith(".ts")
    ? text.split("\n").map((line) => /^\s*\*(?: (.*))?$/.exec(line)?.[1] ?? "").join("\n")
    : text

// A leading comment naming a .ts file: `// support.ts: ...`, `// src/WeatherTools.ts`.
const fileNameComment = /^\/\/\s*((?:[\w.-]+\/)*[\w.-]+\.ts)\b(?:\s*(?::|—|-|\(|$))/

// A closing fence: the opening's character, at least as many, nothing else.
const isClose = (line, fence) => {
  const trimmed = line.trim()
  return trimmed.length >= fence.length && trimmed === fence[0].repeat(trimmed.length)
}

// The ```ts blocks of one markdown file: { line (1-based, of the first code line), lines }
const extract = (text) => {
  const lines = text.split("\n")
  const blocks = []
  let skipped = 0
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*(\S*)(.*)$/.exec(lines[i])
    if (!open) continue
    const [, indent, fence, lang, rest] = open
    const end = lines.findIndex((line, j) => j > i && isClose(line, fence))
    const close = end === -1 ? lines.length : end
    if (lang === "ts" || lang === "typescript") {
      const skip = /\bskip-check\b/.test(rest) || (i > 0 && /^\s*<!--\s*no-check\b.*-->\s*$/.test(lines[i - 1]))
      if (skip) skipped++
      else {
        const body = lines.slice(i + 1, close).map((line) => line.startsWith(indent) ? line.slice(indent.length) : line.trimStart())
        blocks.push({ line: i + 2, lines: body })
      }
    }
    i = close
  }
  return { blocks, skipped }
}

fs.rmSync(scratch, { recursive: true, force: true })
// file in the scratch folder -> { doc, line of the file's first line in the doc }
const origin = new Map()
let samples = 0
let skipped = 0
let docsWithSamples = 0

for (const doc of docs) {
  const found = extract(asMarkdown(doc, fs.readFileSync(doc, "utf8")))
  skipped += found.skipped
  if (found.blocks.length === 0) continue
  docsWithSamples++
  const slug = rel(doc).replace(/\.(md|ts)$/, "").replace(/[^\w-]+/g, "-")
  // Named files keep their folders (src/, test/) when some sample imports across them
  // ("../src/X.js"); otherwise the doc's samples import each other flat ("./X.js").
  const layered = found.blocks.some((block) => block.lines.some((line) => /from\s+["']\.\.\/src\//.test(line)))
  let n = 0
  for (const block of found.blocks) {
    samples++
    const named = fileNameComment.exec(block.lines.find((line) => line.trim() !== "") ?? "")
    const name = named ? (layered ? named[1] : named[1].replace(/^src\//, "")) : `sample_${++n}.ts`
    const target = path.join(scratch, slug, name)
    if (origin.has(target)) {
      console.error(`${rel(doc)}:${block.line}: two samples are both named ${name}`)
      fs.rmSync(scratch, { recursive: true, force: true })
      process.exit(1)
    }
    const isModule = block.lines.some((line) => /^\s*(import|export)\b/.test(line))
    const source = block.lines.join("\n") + (isModule ? "\n" : "\nexport {}\n")
    fs.mkdirSync(path.dirname(target), { recursive: true })
    fs.writeFileSync(target, source)
    origin.set(target, { doc: rel(doc), line: block.line })
  }
}

// A doc may import a file another doc writes (`./WeatherTools.js` from Getting started):
// when its own samples don't name that file and exactly one other doc does, the import
// gets a stub re-exporting that doc's file.
const byDocPath = new Map()
for (const file of origin.keys()) {
  const inDoc = path.relative(scratch, file).split(path.sep).slice(1).join("/")
  byDocPath.set(inDoc, [...(byDocPath.get(inDoc) ?? []), file])
}
for (const file of origin.keys()) {
  const imports = fs.readFileSync(file, "utf8").matchAll(/\bfrom\s+["'](\.{1,2}\/[^"']+)\.js["']/g)
  for (const [, specifier] of imports) {
    const wanted = path.resolve(path.dirname(file), `${specifier}.ts`)
    if (fs.existsSync(wanted)) continue
    const docFolder = path.join(scratch, path.relative(scratch, file).split(path.sep)[0])
    const elsewhere = byDocPath.get(path.relative(docFolder, wanted).split(path.sep).join("/")) ?? []
    if (elsewhere.length !== 1) continue
    const target = path.relative(path.dirname(wanted), elsewhere[0]).split(path.sep).join("/").replace(/\.ts$/, ".js")
    fs.mkdirSync(path.dirname(wanted), { recursive: true })
    fs.writeFileSync(wanted, `export * from "${target.startsWith(".") ? target : `./${target}`}"\n`)
  }
}

// The repository's compiler options, with what a one-off typecheck does not need turned off.
fs.writeFileSync(path.join(scratch, "tsconfig.json"), JSON.stringify({
  extends: "../../../tsconfig.base.json",
  include: ["**/*.ts"],
  compilerOptions: {
    composite: false,
    declaration: false,
    declarationMap: false,
    sourceMap: false,
    incremental: false,
    noEmit: true,
    types: ["node"]
  }
}, null, 2))

const tsc = createRequire(path.join(repo, "package.json")).resolve("typescript/bin/tsc")
const result = spawnSync(process.execPath, [tsc, "--noEmit", "--pretty", "false", "-p", path.join(scratch, "tsconfig.json")], {
  cwd: repo,
  encoding: "utf8"
})
if (!keep) fs.rmSync(scratch, { recursive: true, force: true })

// tsc prints `file(line,col): error TSxxxx: message` followed by indented continuation lines.
let errors = 0
const output = `${result.stdout}${result.stderr}`.split("\n").filter((line) => line !== "")
for (const line of output) {
  const error = /^(.+?)\((\d+),(\d+)\): error (.*)$/.exec(line)
  if (!error) {
    console.error(line)
    continue
  }
  const [, file, row, col, message] = error
  const at = origin.get(path.resolve(repo, file))
  // A JSDoc example shows a value, not a program: its names need not be used.
  if (at?.doc.endsWith(".ts") && /^TS(6133|6196):/.test(message)) continue
  errors++
  console.error(at
    ? `${at.doc}:${at.line + Number(row) - 1}:${col}: ${message}`
    : `${rel(path.resolve(repo, file))}:${row}:${col}: ${message}`)
}

const seconds = ((performance.now() - started) / 1000).toFixed(1)
const summary = `${samples} samples in ${docsWithSamples} docs checked${skipped > 0 ? ` (${skipped} marked skip-check)` : ""} in ${seconds}s`
if (errors > 0 || result.error || (result.status !== 0 && output.length === 0)) {
  if (result.error) console.error(result.error.message)
  console.error(`${summary}: ${errors} error${errors === 1 ? "" : "s"}`)
  process.exit(1)
}
console.log(summary)
