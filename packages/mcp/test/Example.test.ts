import { assert, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import * as path from "node:path"

const root = path.join(__dirname, "..", "..", "..")

it("the stdio example runs: the model reads results, invalid arguments and isError as tool results", () => {
  const output = execFileSync(
    process.execPath,
    ["--import", "tsx", "--conditions=@stepwise-agent/source", path.join(__dirname, "..", "examples", "agent.ts")],
    { cwd: root, encoding: "utf8" }
  )
  const lines = output.trim().split("\n")
  assert.strictEqual(lines[2], `3. tool: add_note [call_1] → {"id":1}`)
  assert.match(
    lines[4]!,
    /^5\. tool: add_note \[call_2\] ✗ \{"error":"MCP error -32602: Input validation error: .*at text"\}$/
  )
  assert.strictEqual(lines[6], `7. tool: delete_note [call_3] ✗ {"error":"no note 7"}`)
  assert.strictEqual(lines[8], "9. tool: list_notes [call_4] → 1: buy milk")
  assert.strictEqual(lines.at(-1), "10. assistant: You have one note: buy milk.")
})
