/**
 * Bundles a child process's TypeScript script into one ES module that plain
 * `node` runs: the script, the Stepwise sources it imports (by the
 * `@stepwise-agent/source` condition) and the packages they use (effect,
 * `@effect/*`, …, tree-shaken) go into the bundle. Left to Node: a package
 * with a native addon (a `binding.gyp`: better-sqlite3, msgpackr-extract),
 * and a package that is not installed (an optional one such as pg-native,
 * which fails only if it is used). Run as
 * `node bundleChild.mjs <script> <outfile>`. Spawning the bundle instead of
 * `node --import tsx <script>` saves each child tsx's module hooks (about
 * 2.4 of the 6 CPU-seconds a crash-test child took on this 2-core machine),
 * and bundling the packages too saves Node's loading of their hundreds of
 * modules (a ledger-agent child: 2.1 -> 1.0 CPU-seconds). A TypeScript
 * file of the repository keeps its own `import.meta.url`, `dirname` and
 * `filename` in the bundle (those of its source, not of the bundle), so
 * that paths it resolves from its own place (the demo's `data` folder, the
 * inspector's assets) are found.
 */
import * as esbuild from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

const [script, outfile] = process.argv.slice(2)

/** `source` with its `import.meta.url`, `dirname` and `filename` written out as those of `file`. */
const keepImportMeta = (source, file) =>
  source.replace(/\bimport\.meta\.(url|dirname|filename)\b/g, (_, key) =>
    JSON.stringify(
      key === "url" ? pathToFileURL(file).href : key === "dirname" ? path.dirname(file) : file
    ))

/** The package name of a bare specifier (`@scope/name` or `name`). */
const packageOf = (specifier) => specifier.split("/").slice(0, specifier.startsWith("@") ? 2 : 1).join("/")

/** The folder of the package `name` that Node would find, looking up from `directory`. */
const packageFolder = (name, directory) => {
  for (let at = directory;; at = path.dirname(at)) {
    const folder = path.join(at, "node_modules", name)
    if (fs.existsSync(folder)) return folder
    if (path.dirname(at) === at) return undefined
  }
}

/** Whether Node must load the package itself: it is not installed, or it builds a native addon. */
const leftToNode = (name, directory) => {
  const folder = packageFolder(name, directory)
  return folder === undefined || fs.existsSync(path.join(folder, "binding.gyp"))
}

await esbuild.build({
  entryPoints: [script],
  outfile,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  conditions: ["@stepwise-agent/source"],
  // the CommonJS packages in the bundle `require` Node's built-in modules
  banner: {
    js: `import { createRequire as __bundleCreateRequire } from "node:module"; ` +
      `const require = __bundleCreateRequire(import.meta.url);`
  },
  logLevel: "error",
  plugins: [{
    name: "native-packages-external",
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, (args) => {
        if (args.path.startsWith("node:") || args.path.startsWith("@stepwise-agent/")) return undefined
        return leftToNode(packageOf(args.path), args.resolveDir) ? { external: true } : undefined
      })
    }
  }, {
    name: "source-import-meta",
    setup(build) {
      // only a repository file that reads its `import.meta`: esbuild loads every other file itself
      build.onLoad({ filter: /\.ts$/ }, async (args) => {
        if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined
        const source = await fs.promises.readFile(args.path, "utf8")
        return source.includes("import.meta") ? { contents: keepImportMeta(source, args.path), loader: "ts" } : undefined
      })
    }
  }]
})
