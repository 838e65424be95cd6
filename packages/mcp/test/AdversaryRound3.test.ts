/**
 * Round-3 adversarial variants (issue 33) through an MCP server: an error
 * text a server sends is scrubbed for credentials before the model reads it
 * (item 1), and no such text may keep the process (item 2's class).
 */
import { assert, describe, it } from "@effect/vitest"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { McpToolkit } from "@stepwise-agent/mcp"
import * as Effect from "effect/Effect"

describe("an MCP server's error text", () => {
  for (const unit of ["-a.", "eyJ-"]) {
    it.scopedLive(
      `180 KB of ${JSON.stringify(unit)} in an isError result is answered at once, as the model's failure`,
      () =>
        Effect.gen(function*() {
          const text = unit.repeat(180_000 / unit.length)
          const server = new McpServer({ name: "noisy", version: "1.0.0" })
          server.registerTool("fail", { description: "Fails with a long text" }, async () => ({
            isError: true,
            content: [{ type: "text", text }]
          }))
          const toolkit = yield* McpToolkit.make({ name: "noisy", transport: { _tag: "InProcess", server } })
          const started = performance.now()
          const handled = yield* toolkit.handle("fail" as never, {} as never)
          const took = performance.now() - started
          assert.isTrue(handled.isFailure)
          assert.deepStrictEqual(handled.result, { error: text })
          // before: 30 to 40 seconds of one synchronous scrub
          assert.isBelow(took, 10_000, `${Math.round(took)} ms`)
        }),
      120_000
    )
  }
})
