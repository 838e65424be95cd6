// Uses the published packages as a consumer would: packs every package, installs the tarballs
// into an empty project outside the workspace (on an older effect 3.x than the repository pins),
// and checks that
//   - each tarball holds only its build, its sources (for the source maps), assets, README,
//     LICENSE and package.json;
//   - one copy of effect is installed (effect and @effect/* are peer dependencies);
//   - each package README's example (and the repository README's) compiles under the
//     consumer's own tsc with skipLibCheck off, strict on and off, moduleResolution nodenext
//     and bundler, core, testing and middleware without @types/node (their typings name
//     nothing of Node) — and runs with plain node,
//     printing (last) what its `<!-- output: … -->` line says; modules a package lists in
//     `stepwise.subpathOnly` are exempt from the Node check, and the testing FakeOpenAi
//     subpath resolves (it is not on the package root) and answers the real OpenAI client;
//   - on the unpatched @effect/ai an agent with more than 3 tools logs the patch warning, and
//     after the steps of core's patches/README.md (its postinstall script) it no longer does.
// Needs the build (`tsc -b`, part of `npm run check`). Prints one line per check and a
// closing "N passed, N failed". With --keep, the project is left in place to look into.
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const keep = process.argv.includes("--keep")
const repo = path.join(path.dirname(new URL(import.meta.url).pathname), "..")
const root = JSON.parse(fs.readFileSync(path.join(repo, "package.json"), "utf8"))
const published = ["core", "testing", "middleware", "workflow", "inspector", "mcp"]
/** The oldest effect the peer ranges admit (@effect/platform 0.97.2 needs ^3.22.2). */
const consumerEffect = "3.22.2"
/** Packages whose README examples must compile without @types/node. */
const runtimeNeutral = new Set(["core", "testing", "middleware"])

let passed = 0
let failed = 0
const check = (name, ok, detail = "") => {
  if (ok) passed++
  else failed++
  console.log(`${ok ? "✓" : "✗"} ${name}${ok || detail === "" ? "" : `\n${detail}`}`)
}
const run = (command, args, cwd) => {
  const result = spawnSync(command, args, { cwd, encoding: "utf8", maxBuffer: 1 << 26 })
  return { ok: result.status === 0, out: `${result.stdout ?? ""}${result.stderr ?? ""}`, stdout: result.stdout ?? "" }
}
/** `run`, without blocking: the type checks below run one per core at once. */
const runAsync = (command, args, cwd) =>
  new Promise((resolve) => {
    const child = spawn(command, args, { cwd })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => void (stdout += chunk))
    child.stderr.on("data", (chunk) => void (stderr += chunk))
    child.on("close", (code) => resolve({ ok: code === 0, out: `${stdout}${stderr}`, stdout }))
  })
const slots = Math.max(1, os.availableParallelism())
let busy = 0
const waiting = []
/** Runs `task` when fewer than one per core are running. */
const limited = (task) =>
  new Promise((resolve) => {
    const go = () => {
      busy++
      task().then((result) => {
        busy--
        waiting.shift()?.()
        resolve(result)
      })
    }
    if (busy < slots) go()
    else waiting.push(go)
  })
const manifest = (dir) => JSON.parse(fs.readFileSync(path.join(repo, "packages", dir, "package.json"), "utf8"))

// The first ```ts block of a README and the `<!-- output: … -->` line after it.
const exampleOf = (readme) => {
  const text = fs.readFileSync(readme, "utf8")
  const block = /```ts\n([\s\S]*?)```(?:\s*<!--\s*output:\s*([\s\S]*?)\s*-->)?/.exec(text)
  if (block === null) throw new Error(`${path.relative(repo, readme)} has no \`\`\`ts example`)
  return { source: block[1], output: block[2] }
}

const project = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-consumer-"))
try {
  // 0. every install command in the READMEs and guides pins the Effect packages (their `latest` tags are Effect 4,
  // which npm then refuses to resolve against the peers, or installs beside them)
  const guides = ["README.md", ...published.map((dir) => `packages/${dir}/README.md`)]
    .concat(fs.readdirSync(path.join(repo, "docs"), { recursive: true }).filter((file) => file.endsWith(".md"))
      .map((file) => `docs/${file}`))
  const unpinned = guides.flatMap((file) => {
    const text = fs.readFileSync(path.join(repo, file), "utf8").replace(/\\\n\s*/g, " ")
    return [...text.matchAll(/npm (?:i|install)\b[^\n]*/g)].flatMap(([command]) =>
      [...command.matchAll(/(?<=\s)(effect|@effect\/[a-z-]+)(?=\s|$)/g)].map(([name]) => `${file}: ${name}`)
    )
  })
  check("install commands pin effect and @effect/* (no bare name)", unpinned.length === 0, `  ${unpinned.join("; ")}`)

  // 1. pack: each package's prepack builds what it ships from the sources as they are, so a pack from a clean
  // checkout holds the JavaScript (proved on one package whose build output is removed while its build info, which
  // says it is up to date, stays) and a file of a source deleted since does not ship (proved on another)
  for (const dir of published) {
    const prepack = manifest(dir).scripts?.prepack ?? ""
    check(
      `@stepwise-agent/${dir}: prepack builds the package`,
      prepack === "node ../../scripts/prepack.mjs",
      `  prepack: ${prepack}`
    )
  }
  fs.rmSync(path.join(repo, "packages", "testing", "dist"), { recursive: true, force: true })
  const staleOutput = path.join(repo, "packages", "mcp", "dist", "Removed.js")
  fs.writeFileSync(staleOutput, "export const removed = true\n")
  const packed = run("npm", [
    "pack",
    "--json",
    "--pack-destination",
    project,
    ...published.flatMap((dir) => ["-w", `packages/${dir}`])
  ], repo)
  if (!packed.ok) throw new Error(`npm pack failed:\n${packed.out}`)
  const tarballs = JSON.parse(packed.stdout.slice(packed.stdout.indexOf("[")))
  for (const tarball of tarballs) {
    const stray = tarball.files.map((file) => file.path).filter((file) =>
      !/^(dist|src|assets)\//.test(file) && !["README.md", "LICENSE", "package.json"].includes(file)
    )
    const missing = ["README.md", "LICENSE", "dist/index.js", "dist/index.d.ts"].filter((file) =>
      !tarball.files.some((entry) => entry.path === file)
    )
    const stale = tarball.files.some((entry) => entry.path === "dist/Removed.js")
    check(
      `${tarball.name}: the tarball holds only dist, src, assets, README, LICENSE, package.json`,
      stray.length === 0 && missing.length === 0 && !stale,
      `  unexpected: ${[...stray, ...(stale ? ["dist/Removed.js (no source)"] : [])].join(", ") || "none"}; missing: ${
        missing.join(", ") || "none"
      }`
    )
  }

  // 2. install into an empty project
  // @effect/ai-openai: the optional peer of the testing FakeOpenAi subpath, checked below
  const dependencies = {
    effect: consumerEffect,
    "@effect/ai-openai": manifest("testing").devDependencies["@effect/ai-openai"]
  }
  for (const tarball of tarballs) dependencies[tarball.name] = `file:./${tarball.filename}`
  fs.writeFileSync(
    path.join(project, "package.json"),
    JSON.stringify(
      {
        name: "consumer",
        private: true,
        type: "module",
        dependencies,
        devDependencies: {
          typescript: root.devDependencies.typescript,
          "@types/node": root.devDependencies["@types/node"],
          // as the READMEs say: @effect/platform-node's typings import `ws`, which ships none
          "@types/ws": "^8.18.1",
          "patch-package": root.devDependencies["patch-package"]
        }
      },
      null,
      2
    )
  )
  // Install scripts are skipped: better-sqlite3 would compile from source (no prebuilt binary
  // can be fetched here), and nothing below opens a SQLite file.
  const installed = run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--ignore-scripts"], project)
  check("the tarballs install into an empty project", installed.ok, installed.out)
  if (!installed.ok) throw new Error("install failed")

  const copies = []
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue
      const child = path.join(dir, entry.name)
      if (entry.name === "effect" && path.basename(dir) === "node_modules") copies.push(child)
      walk(child)
    }
  }
  walk(path.join(project, "node_modules"))
  const version = JSON.parse(fs.readFileSync(path.join(project, "node_modules/effect/package.json"), "utf8")).version
  check(
    `one copy of effect is installed, the app's ${consumerEffect}`,
    copies.length === 1 && version === consumerEffect,
    `  found ${copies.map((copy) => path.relative(project, copy)).join(", ")} (top level ${version})`
  )

  // 3. the README examples, compiled by the consumer's tsc and run with plain node
  const examples = [
    { name: "README", readme: path.join(repo, "README.md"), neutral: true },
    ...published.map((dir) => ({
      name: manifest(dir).name,
      readme: path.join(repo, "packages", dir, "README.md"),
      neutral: runtimeNeutral.has(dir)
    }))
  ].map((example, i) => ({ ...example, ...exampleOf(example.readme), file: `example${i}` }))
  fs.mkdirSync(path.join(project, "src"))
  for (const example of examples) fs.writeFileSync(path.join(project, "src", `${example.file}.ts`), example.source)

  const tsc = path.join(project, "node_modules/typescript/bin/tsc")
  const variants = [
    { name: "strict, nodenext", strict: true, module: "nodenext", moduleResolution: "nodenext", emit: true, everything: true },
    { name: "strict: false, nodenext", strict: false, module: "nodenext", moduleResolution: "nodenext" },
    { name: "strict, bundler", strict: true, module: "esnext", moduleResolution: "bundler", everything: true },
    { name: "strict: false, bundler", strict: false, module: "esnext", moduleResolution: "bundler" }
  ]
  const compile = (label, variant, files, types) => {
    const config = path.join(project, `tsconfig.${label}.${variants.indexOf(variant)}.${types.length}.json`)
    fs.writeFileSync(
      config,
      JSON.stringify({
        compilerOptions: {
          strict: variant.strict,
          module: variant.module,
          moduleResolution: variant.moduleResolution,
          target: "es2022",
          types,
          // Without @types/node, @effect/platform's msgpackr typings (Buffer, "stream") fail
          // upstream; our own typings are checked for Node references apart.
          skipLibCheck: types.length === 0,
          // the README compile emits what runs below; the others (at the same time) write nothing
          ...(variant.emit && label === "readme" ? { outDir: "out", rootDir: "src" } : { noEmit: true })
        },
        files: files.map((example) => `src/${example.file}.ts`)
      })
    )
    return limited(() => runAsync(process.execPath, [tsc, "-p", config, "--pretty", "false"], project))
  }
  // every public module of every package, imported together: an app that uses the whole surface with skipLibCheck
  // off typechecks too (the README examples reach only part of the typings)
  const everything = published.flatMap((dir) => {
    const name = manifest(dir).name
    const dist = path.join(project, "node_modules", name, "dist")
    return fs.readdirSync(dist).filter((file) => file.endsWith(".d.ts") && file !== "index.d.ts")
      .map((file, i) => `export * as ${dir}_${i} from "${name}/${file.slice(0, -".d.ts".length)}"`)
  })
  // and the Node platform's root, as the guides import it
  everything.push(`export * as NodePlatform from "@effect/platform-node"`)
  fs.writeFileSync(path.join(project, "src", "everything.ts"), everything.join("\n") + "\n")
  // (in the variants marked `everything`, in the same program as the README examples: the libraries' typings,
  // skipLibCheck off, are checked once, not once for each)
  const readmeCompiles = variants.map((variant) =>
    compile("readme", variant, variant.everything ? [...examples, { file: "everything" }] : examples, ["node"])
  )
  const neutral = examples.filter((example) => example.neutral)
  // Modules listed in `stepwise.subpathOnly` (see scripts/codegen.mjs) are imported only by
  // their subpath, which may need Node (the testing FakeOpenAi server): they are exempt.
  const nodeReferences = [...runtimeNeutral].flatMap((dir) => {
    const dist = path.join(project, "node_modules", manifest(dir).name, "dist")
    const exempt = new Set((manifest(dir).stepwise?.subpathOnly ?? []).map((name) => `${name}.d.ts`))
    return fs.readdirSync(dist, { recursive: true })
      .filter((file) => file.endsWith(".d.ts") && !exempt.has(file))
      .filter((file) => /reference types="node"|from "node:|\bBuffer\b|NodeJS\./.test(fs.readFileSync(path.join(dist, file), "utf8")))
      .map((file) => `${manifest(dir).name}/dist/${file}`)
  })
  check("core, testing and middleware typings reference nothing of Node", nodeReferences.length === 0, nodeReferences.join("\n"))
  const withoutNodeCompile = compile("neutral", variants[0], neutral, [])
  for (const [i, result] of (await Promise.all(readmeCompiles)).entries()) {
    const what = variants[i].everything ? "the README examples and every public module" : "the README examples"
    check(`${what} typecheck (${variants[i].name}, skipLibCheck: false)`, result.ok, result.out)
  }
  const withoutNode = await withoutNodeCompile
  check(
    `core, testing and middleware typecheck without @types/node (${neutral.map((e) => e.name).join(", ")})`,
    withoutNode.ok,
    withoutNode.out
  )
  for (const example of examples) {
    const script = path.join(project, "out", `${example.file}.js`)
    if (!fs.existsSync(script)) {
      check(`${example.name}'s example runs with plain node`, false, "  not compiled")
      continue
    }
    const result = run(process.execPath, [script], project)
    const expected = example.output
    check(
      `${example.name}'s example runs with plain node${expected === undefined ? "" : ` and prints ${expected}`}`,
      result.ok && (expected === undefined || result.stdout.trim().split("\n").at(-1) === expected),
      result.out
    )
  }

  // the subpath-only FakeOpenAi module resolves from the package and serves a request
  const testing = manifest("testing").name
  const fake = path.join(project, "fake-openai.mjs")
  fs.writeFileSync(
    fake,
    [
      `import * as FakeOpenAi from "${testing}/FakeOpenAi"`,
      `import * as Testing from "${testing}"`,
      `import { LanguageModel } from "@effect/ai"`,
      `import { Effect } from "effect"`,
      `if ("FakeOpenAi" in Testing) throw new Error("FakeOpenAi is exported from the package root")`,
      `const program = Effect.gen(function*() {`,
      `  const server = yield* FakeOpenAi.make([FakeOpenAi.text("Hello!")])`,
      `  const response = yield* LanguageModel.generateText({ prompt: "Hi" }).pipe(Effect.provide(FakeOpenAi.languageModel(server)))`,
      `  console.log(response.text, (yield* server.requests).length)`,
      `}).pipe(Effect.scoped)`,
      `await Effect.runPromise(program)`
    ].join("\n")
  )
  const served = run(process.execPath, [fake], project)
  check(
    `${testing}/FakeOpenAi resolves (not from the package root) and answers the OpenAI client`,
    served.ok && served.stdout.trim() === "Hello! 1",
    served.out
  )

  // the SQL drivers are optional peers of the workflow package: not installed here, the package loads, and an
  // engine on a missing driver fails with a typed error naming the package
  const workflow = manifest("workflow").name
  const driverless = path.join(project, "no-driver.mjs")
  fs.writeFileSync(
    driverless,
    [
      `import { AgentEngine } from "${workflow}"`,
      `import { Effect, Layer } from "effect"`,
      `import { createRequire } from "node:module"`,
      `const require = createRequire(import.meta.url)`,
      `for (const name of ["@effect/sql-pg", "@effect/sql-sqlite-node"]) {`,
      `  try { require.resolve(name); throw new Error(name + " is installed") } catch (error) { if (error.code !== "MODULE_NOT_FOUND") throw error }`,
      `}`,
      `const error = await Effect.runPromise(Effect.flip(Layer.build(AgentEngine.layerSqlite({ filename: ":memory:" })).pipe(Effect.scoped)))`,
      `console.log(error._tag, error.option, error.reason.includes("@effect/sql-sqlite-node"))`
    ].join("\n")
  )
  const withoutDriver = run(process.execPath, [driverless], project)
  check(
    `${workflow} loads without the SQL drivers (optional peers), and layerSqlite names the missing one`,
    withoutDriver.ok && withoutDriver.stdout.trim() === "InvalidOptions driver true",
    withoutDriver.out
  )

  // 4. the @effect/ai patch, applied as core's patches/README.md says
  const core = manifest("core").name
  const warning = path.join(project, "warning.mjs")
  fs.writeFileSync(
    warning,
    [
      `import { Agent } from "${core}"`,
      `import { ScriptedModel } from "${manifest("testing").name}"`,
      `import { Tool, Toolkit } from "@effect/ai"`,
      `import { Effect } from "effect"`,
      `const Tools = Toolkit.make(Tool.make("a"), Tool.make("b"), Tool.make("c"), Tool.make("d"))`,
      `const handlers = Tools.toLayer({ a: () => Effect.void, b: () => Effect.void, c: () => Effect.void, d: () => Effect.void })`,
      `await Agent.make({ toolkit: Tools }).pipe(Effect.provide(handlers), Effect.provide(ScriptedModel.layer([])), Effect.runPromise)`
    ].join("\n")
  )
  const unpatched = run(process.execPath, [warning], project)
  check(
    "on the unpatched @effect/ai, an agent with 4 tools logs the patch warning",
    unpatched.ok && unpatched.out.includes("is not patched"),
    unpatched.out
  )
  const steps = fs.readFileSync(path.join(repo, "packages/core/assets/patches/README.md"), "utf8")
  const postinstall = /"postinstall": "([^"]+)"/.exec(steps)?.[1]
  const manifestFile = path.join(project, "package.json")
  const consumer = JSON.parse(fs.readFileSync(manifestFile, "utf8"))
  fs.writeFileSync(manifestFile, JSON.stringify({ ...consumer, scripts: { postinstall } }, null, 2))
  const applied = run("npm", ["run", "postinstall"], project)
  check(`core's patch applies with the postinstall script its README gives (${postinstall})`, applied.ok, applied.out)
  const patched = run(process.execPath, [warning], project)
  check(
    "on the patched @effect/ai, the agent logs no patch warning",
    patched.ok && !patched.out.includes("is not patched"),
    patched.out
  )
} catch (error) {
  check("consumer test", false, String(error?.stack ?? error))
} finally {
  if (keep) console.log(`kept ${project}`)
  else fs.rmSync(project, { recursive: true, force: true })
}
console.log(`consumer: ${passed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
