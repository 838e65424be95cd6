import { assert, describe, it } from "@effect/vitest"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { ToolEffect } from "@stepwise-agent/core"
import { McpToolkit } from "@stepwise-agent/mcp"
import * as Effect from "effect/Effect"

const ok = async () => ({ content: [{ type: "text" as const, text: "ok" }] })

/** A server whose tools carry each combination of hints the effect ledger reads. */
const hintedServer = () => {
  const server = new McpServer({ name: "hints", version: "1.0.0" })
  server.registerTool("read", { annotations: { readOnlyHint: true } }, ok)
  server.registerTool("put", { annotations: { readOnlyHint: false, idempotentHint: true } }, ok)
  server.registerTool("send", { annotations: { destructiveHint: true } }, ok)
  server.registerTool("plain", {}, ok)
  server.registerTool("unsure", { annotations: { readOnlyHint: false, idempotentHint: false } }, ok)
  return server
}

describe("McpToolkit tools in the effect ledger", () => {
  it.scopedLive("a server's hints give each tool its ToolEffect: read-only, idempotent, else uncertain", () =>
    Effect.gen(function*() {
      const toolkit = yield* McpToolkit.make({
        name: "hints",
        transport: { _tag: "InProcess", server: hintedServer() }
      })
      const effects = Object.fromEntries(
        Object.values(toolkit.tools).map((tool) => [tool.name, ToolEffect.of(tool)._tag])
      )
      assert.deepStrictEqual(effects, {
        read: "ReadOnly",
        put: "Idempotent",
        send: "Uncertain",
        plain: "Uncertain",
        unsure: "Uncertain"
      })
    }))
})
