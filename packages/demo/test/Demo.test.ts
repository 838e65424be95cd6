/**
 * `npm run demo` as a user runs it (scripted model, stdin not a terminal, so
 * the demo approves by itself): both questions are answered, the second by
 * the reader subagent after an approval asked inside it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { createRequire } from "node:module"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

const script = path.join(import.meta.dirname, "..", "src", "main.ts")
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href

const runDemo = Effect.async<string, Error>((resume) => {
  const child = execFile(
    process.execPath,
    ["--conditions=@stepwise-agent/source", "--import", tsx, script],
    { env: { ...process.env, OPENAI_API_KEY: "" }, timeout: 60_000 },
    (error, stdout, stderr) =>
      resume(error === null ? Effect.succeed(stdout) : Effect.fail(new Error(`${error}\n${stderr}`)))
  )
  child.stdin?.end()
})

describe("npm run demo", () => {
  it.live(
    "delegates the second question to the reader subagent, whose approval is asked inside it and granted",
    () =>
      Effect.gen(function*() {
        const out = yield* runDemo
        const lines = out.split("\n")
        const at = (text: string) => {
          const index = lines.findIndex((line, i) => i > cursor && line.includes(text))
          assert.isAbove(index, cursor, `"${text}" after line ${cursor} of:\n${out}`)
          cursor = index
        }
        let cursor = -1
        at("The weekend shopping costs 25.30 in total")
        at("User: Ask the reader what the readme in my files says.")
        at(`→ task({"agent":"reader"`)
        at("│ reader: [humanInTheLoop] interrupt: 1 call(s) wait for a decision")
        at("── the run waits for a decision")
        at("asked inside subagent reader:")
        at(`approval needed: read_file({"path":"readme.txt"})`)
        at("── resuming thread")
        at("│ reader: → read_file")
        at("← task: readme.txt says the folder is the demo agent's sandbox")
        at("The reader says: the readme explains that the folder is the demo's sandbox.")
        // the read the reader made ran once
        assert.strictEqual(lines.filter((line) => line.includes("│ reader: → read_file")).length, 1)
      }),
    { timeout: 90_000 }
  )
})
