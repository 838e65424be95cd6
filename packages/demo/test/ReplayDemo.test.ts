/**
 * `npm run demo -- --replay` as a user runs it: records a run, replays it with
 * no model call, shows where a replay on a changed system prompt diverges
 * (the step and the field), and forks the record from step 2 live.
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
    ["--conditions=@stepwise-agent/source", "--import", tsx, script, "--replay"],
    // a key in the environment changes nothing: this demo is always scripted
    { env: { ...process.env, OPENAI_API_KEY: "sk-not-used" }, timeout: 60_000 },
    (error, stdout, stderr) =>
      resume(error === null ? Effect.succeed(stdout) : Effect.fail(new Error(`${error}\n${stderr}`)))
  )
  child.stdin?.end()
})

describe("npm run demo -- --replay", () => {
  it.live(
    "records a run, replays it without the model, shows the divergence of a new system prompt and forks from step 2",
    () =>
      Effect.gen(function*() {
        const out = yield* runDemo
        const lines = out.split("\n")
        let cursor = -1
        const at = (text: string) => {
          const index = lines.findIndex((line, i) => i > cursor && line.includes(text))
          assert.isAbove(index, cursor, `"${text}" after line ${cursor} of:\n${out}`)
          cursor = index
        }
        at("── 1. record a run on thread \"shopping\"")
        at("tool/call_total: 25.3")
        at("answered: The weekend shopping costs 25.30 in total.")
        at("record: 4 model steps")
        at("replayed: The weekend shopping costs 25.30 in total. (model calls made: 0)")
        at("the replay diverged at step 0, field systemPrompt")
        at("recorded: \"You answer questions about the user's files.")
        at("Answer in whole euros.\"")
        at("live from step 2 (model calls made: 2)")
        at("fork answered: The weekend shopping costs about 25 euros.")
        at("thread \"shopping\" untouched")
      }),
    { timeout: 90_000 }
  )
})
