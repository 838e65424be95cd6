// An agent using the tools of an MCP server it spawns over stdio (notes-server.ts).
// Run it from the repository root:
//   npx tsx --conditions=@stepwise-agent/source packages/mcp/examples/agent.ts
// The model is scripted (ScriptedModel) so the run needs no API key; any @effect/ai
// LanguageModel layer (e.g. OpenAiLanguageModel.layer) takes its place unchanged.
import { Agent, Transcript } from "@stepwise-agent/core"
import { McpToolkit } from "@stepwise-agent/mcp"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Console, Effect, Layer } from "effect"
import * as path from "node:path"

const NotesLive = McpToolkit.layer({
  name: "notes",
  transport: {
    _tag: "Stdio",
    command: process.execPath,
    args: ["--import", "tsx", path.join(import.meta.dirname, "notes-server.ts")]
  }
})

const ModelLive = ScriptedModel.layer([
  ScriptedModel.toolCalls([{ id: "call_1", name: "add_note", params: { text: "buy milk" } }]),
  ScriptedModel.toolCalls([{ id: "call_2", name: "add_note", params: { text: "" } }]), // invalid: the server says why
  ScriptedModel.toolCalls([{ id: "call_3", name: "delete_note", params: { id: 7 } }]), // isError: true
  ScriptedModel.toolCalls([{ id: "call_4", name: "list_notes", params: {} }]),
  ScriptedModel.text("You have one note: buy milk.")
])

const program = Effect.gen(function*() {
  const agent = yield* Agent.make({ toolkit: McpToolkit.McpToolkit, systemPrompt: "You keep notes." })
  const result = yield* agent.run("Note that I must buy milk, then show my notes.", { threadId: "notes" })
  yield* Console.log(Transcript.format(result.state.messages))
})

// Releasing the layer ends the session: the server process exits.
program.pipe(Effect.provide(Layer.merge(NotesLive, ModelLive)), Effect.runPromise)
