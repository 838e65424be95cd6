// Runs npm scripts at once, one per core (type tests, lint and the docs' samples are each one process, so two
// of them fill a 2-core machine), printing each one's output whole when it ends; fails when any fails.
// Usage: node scripts/parallel.mjs <script> [<script> ...]
import { spawn } from "node:child_process"
import * as os from "node:os"

const scripts = process.argv.slice(2)
const slots = Math.max(1, os.availableParallelism())
const npm = process.platform === "win32" ? "npm.cmd" : "npm"

const run = (script) =>
  new Promise((resolve) => {
    const started = Date.now()
    const child = spawn(npm, ["run", "--silent", script], { stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (chunk) => void (output += chunk))
    child.stderr.on("data", (chunk) => void (output += chunk))
    child.on("close", (code) => {
      const seconds = ((Date.now() - started) / 1000).toFixed(1)
      process.stdout.write(`\n> npm run ${script} (${code === 0 ? "passed" : `failed, exit ${code}`}, ${seconds} s)\n${output}`)
      resolve(code === 0)
    })
  })

const queue = [...scripts]
const results = []
const worker = async () => {
  while (queue.length > 0) results.push(await run(queue.shift()))
}
await Promise.all(Array.from({ length: Math.min(slots, scripts.length) }, worker))
if (results.some((passed) => !passed)) process.exit(1)
