import * as LanguageModel from "@effect/ai/LanguageModel"
import { assert, describe, it } from "@effect/vitest"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { Agent } from "@stepwise-agent/core"
import { McpToolkit } from "@stepwise-agent/mcp"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as Effect from "effect/Effect"

const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
const wav = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="

/** A server whose `snapshot` tool answers with text, an image, an audio clip and an embedded binary resource. */
const mediaServer = () => {
  const server = new Server({ name: "media", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [{ name: "snapshot", inputSchema: { type: "object" } }]
  }))
  server.setRequestHandler(CallToolRequestSchema, () => ({
    content: [
      { type: "text", text: "the screen" },
      { type: "image", data: png, mimeType: "image/png" },
      { type: "audio", data: wav, mimeType: "audio/wav" },
      { type: "resource", resource: { uri: "file:///report.pdf", mimeType: "application/pdf", blob: png } }
    ]
  }))
  return server
}

describe("McpToolkit files", () => {
  it.scopedLive("images, audio and binary resources reach the model as file parts, not as base64 text", () =>
    Effect.gen(function*() {
      const { model, recorder } = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([{ name: "snapshot", params: {} }]),
        ScriptedModel.text("seen")
      ])
      const agent = yield* Agent.make({
        toolkit: McpToolkit.make({ name: "media", transport: { _tag: "InProcess", server: mediaServer() } })
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      const result = yield* agent.run("look", { threadId: "t1" })
      assert.strictEqual(result._tag, "Completed")
      const [, second] = yield* recorder.requests
      const messages = second!.prompt.content
      const toolIndex = messages.findIndex((message) => message.role === "tool")
      // no base64 in what the model reads as text
      assert.notInclude(JSON.stringify(messages[toolIndex]), png.slice(0, 20))
      assert.notInclude(JSON.stringify(messages[toolIndex]), wav.slice(0, 20))
      const after = messages[toolIndex + 1]!
      assert.strictEqual(after.role, "user")
      const files = after.role === "user" ? after.content.filter((part) => part.type === "file") : []
      assert.deepStrictEqual(files.map((part) => part.mediaType), ["image/png", "audio/wav", "application/pdf"])
      for (const file of files) assert.instanceOf(file.data, Uint8Array)
      assert.deepStrictEqual(
        Array.from((files[0]!.data as Uint8Array).slice(0, 4)),
        [0x89, 0x50, 0x4e, 0x47]
      )
      // the stored thread keeps the files as JSON
      const stored = result.state.messages.find((message) => message.role === "tool")!
      assert.include(JSON.stringify(stored), png)
    }))
})
