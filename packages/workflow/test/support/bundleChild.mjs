/**
 * Bundles a child process's TypeScript script into one ES module that plain
 * `node` runs: the script and the Stepwise sources it imports (by the
 * `@stepwise-agent/source` condition) go into the bundle; a package that
 * Node finds the same from the repository's root is left to Node, one found
 * elsewhere (a version nested in a package's own node_modules) is bundled.
 * Run as `node bundleChild.mjs <script> <outfile>`. Spawning the bundle
 * instead of `node --import tsx <script>` saves each child tsx's module
 * hooks: about 2.4 of the 6 CPU-seconds a crash-test child took to load and
 * run on this 2-core machine.
 */
import * as esbuild from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"

const [script, outfile] = process.argv.slice(2)
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../../..")
const rootModules = path.join(root, "node_modules")

/** The package name of a bare specifier (`@scope/name` or `name`). */
const packageOf = (specifier) => specifier.split("/").slice(0, specifier.startsWith("@") ? 2 : 1).join("/")

/** The node_modules folder Node would find `name` in, looking up from `directory`. */
const foundIn = (name, directory) => {
  for (let at = directory;; at = path.dirname(at)) {
    const modules = path.join(at, "node_modules")
    if (fs.existsSync(path.join(modules, name))) return modules
    if (path.dirname(at) === at) return undefined
  }
}

await esbuild.build({
  entryPoints: [script],
  outfile,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  conditions: ["@stepwise-agent/source"],
  logLevel: "error",
  plugins: [{
    name: "root-packages-external",
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, (args) => {
        if (args.path.startsWith("node:") || args.path.startsWith("@stepwise-agent/")) return undefined
        return foundIn(packageOf(args.path), args.resolveDir) === rootModules ? { external: true } : undefined
      })
    }
  }]
})
