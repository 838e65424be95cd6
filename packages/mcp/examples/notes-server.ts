// An MCP server with the official SDK, spoken to over stdio: a notebook with three tools.
// Run by agent.ts as a child process; any MCP client can use it the same way.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import * as z from "zod"

const notes = new Map<number, string>()
let next = 1

const server = new McpServer({ name: "notes", version: "1.0.0" })

server.registerTool("add_note", {
  description: "Saves a note and returns its id",
  inputSchema: { text: z.string().min(1) }
}, ({ text }) => {
  const id = next++
  notes.set(id, text)
  return { content: [{ type: "text", text: `saved note ${id}` }], structuredContent: { id } }
})

server.registerTool("list_notes", {
  description: "Lists the saved notes",
  annotations: { readOnlyHint: true }
}, () => ({
  content: [{ type: "text", text: [...notes].map(([id, text]) => `${id}: ${text}`).join("\n") || "no notes" }]
}))

server.registerTool("delete_note", {
  description: "Deletes a note by id",
  inputSchema: { id: z.number().int() },
  annotations: { destructiveHint: true }
}, ({ id }) =>
  notes.delete(id)
    ? { content: [{ type: "text", text: `deleted note ${id}` }] }
    : { isError: true, content: [{ type: "text", text: `no note ${id}` }] })

await server.connect(new StdioServerTransport())
