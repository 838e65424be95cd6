import { assert, describe, it } from "@effect/vitest"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { Agent } from "@stepwise-agent/core"
import { McpToolkit } from "@stepwise-agent/mcp"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as Effect from "effect/Effect"
import * as z from "zod"

/**
 * A server keeping entities in memory as the official memory server does: a
 * write reads the store, waits, then writes it back. Two writes at once lose
 * one of them; `overlaps` counts the writes that started while another ran.
 */
const memoryServer = () => {
  const stats = { overlaps: 0, running: 0, readsAtOnce: 0, reading: 0 }
  let store: ReadonlyArray<string> = []
  const server = new McpServer({ name: "memory", version: "1.0.0" })
  server.registerTool("create_entity", {
    description: "Stores an entity",
    inputSchema: { name: z.string() }
  }, async ({ name }) => {
    if (stats.running > 0) stats.overlaps++
    stats.running++
    const before = store
    await new Promise((resolve) => setTimeout(resolve, 20))
    store = [...before, name]
    stats.running--
    return { content: [{ type: "text", text: `stored ${name}` }] }
  })
  server.registerTool("read_graph", {
    description: "Reads the entities",
    annotations: { readOnlyHint: true }
  }, async () => {
    stats.reading++
    stats.readsAtOnce = Math.max(stats.readsAtOnce, stats.reading)
    await new Promise((resolve) => setTimeout(resolve, 20))
    stats.reading--
    return { content: [{ type: "text", text: store.join(",") }] }
  })
  return { server, stats, entities: () => store }
}

const runReply = (
  options: Omit<McpToolkit.Options, "name">,
  calls: ReadonlyArray<{ readonly name: string; readonly params: unknown }>
) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({ toolkit: McpToolkit.make({ name: "memory", ...options }), toolConcurrency: 8 })
    const result = yield* agent.run("go", { threadId: "t1" })
    assert.strictEqual(result._tag, "Completed")
  }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.toolCalls(calls), ScriptedModel.text("done")])))

const creates = ["a", "b", "c"].map((name) => ({ name: "create_entity", params: { name } }))

describe("McpToolkit concurrency", () => {
  it.scopedLive("runs the calls of a tool that is not read-only one at a time: no write is lost", () =>
    Effect.gen(function*() {
      const memory = memoryServer()
      yield* runReply({ transport: { _tag: "InProcess", server: memory.server } }, creates)
      assert.strictEqual(memory.stats.overlaps, 0)
      assert.deepStrictEqual([...memory.entities()].sort(), ["a", "b", "c"])
    }))

  it.scopedLive("runs read-only tools in parallel", () =>
    Effect.gen(function*() {
      const memory = memoryServer()
      const reads = Array.from({ length: 3 }, () => ({ name: "read_graph", params: {} }))
      yield* runReply({ transport: { _tag: "InProcess", server: memory.server } }, reads)
      assert.strictEqual(memory.stats.readsAtOnce, 3)
    }))

  it.scopedLive("concurrency: \"unbounded\" lets writes run at once (the server's own business)", () =>
    Effect.gen(function*() {
      const memory = memoryServer()
      yield* runReply({ transport: { _tag: "InProcess", server: memory.server }, concurrency: "unbounded" }, creates)
      assert.isAbove(memory.stats.overlaps, 0)
    }))

  it.scopedLive("rejects a concurrency that is not a whole number of at least 1", () =>
    Effect.gen(function*() {
      for (const concurrency of [0, 1.5, -1, "many" as any]) {
        const error = yield* Effect.flip(
          McpToolkit.make({ name: "m", transport: { _tag: "Stdio", command: "x" }, concurrency })
        )
        assert.strictEqual(error._tag, "InvalidOptions")
        if (error._tag === "InvalidOptions") assert.strictEqual(error.option, "concurrency")
      }
    }))
})

/** A low-level server listing `names`; each call answers with the name it was called by. */
const namedServer = (names: ReadonlyArray<unknown>) => {
  const server = new Server({ name: "names", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: names.map((name) => ({ name, inputSchema: { type: "object" } })) as any
  }))
  server.setRequestHandler(
    CallToolRequestSchema,
    (request) => ({ content: [{ type: "text", text: `called ${request.params.name}` }] })
  )
  return server
}

describe("McpToolkit tool names", () => {
  const prototypeNames = ["__proto__", "constructor", "toString", "hasOwnProperty", "valueOf"]

  it.scopedLive("treats names of Object.prototype as names: each tool is offered and called", () =>
    Effect.gen(function*() {
      const toolkit = yield* McpToolkit.make({
        name: "names",
        transport: { _tag: "InProcess", server: namedServer(prototypeNames) }
      })
      assert.deepStrictEqual(Object.keys(toolkit.tools), prototypeNames)
      const agent = yield* Agent.make({ toolkit: Effect.succeed(toolkit) })
      const result = yield* agent.run("go", { threadId: "t1" })
      assert.strictEqual(result._tag, "Completed")
      const results = result.state.messages.flatMap((message) => message.role === "tool" ? message.content : [])
      assert.deepStrictEqual(
        results.map((part) => [part.name, part.isFailure, part.result]),
        prototypeNames.map((name) => [name, false, `called ${name}`])
      )
    }).pipe(Effect.provide(ScriptedModel.layer([
      ScriptedModel.toolCalls(prototypeNames.map((name) => ({ name, params: {} }))),
      ScriptedModel.text("done")
    ]))))

  it.scopedLive("a name the server does not list is unknown, even one of Object.prototype", () =>
    Effect.gen(function*() {
      const toolkit = yield* McpToolkit.make({
        name: "names",
        transport: { _tag: "InProcess", server: namedServer(["echo"]) }
      })
      for (const name of prototypeNames) {
        const exit = yield* Effect.exit(toolkit.handle(name as any, {}))
        assert.isTrue(exit._tag === "Failure", name)
      }
    }))

  it.scopedLive("refuses two tools of one name from one server with McpError InvalidTool naming both", () =>
    Effect.gen(function*() {
      for (const names of [["echo", "add", "echo"], ["__proto__", "__proto__"]]) {
        const error = yield* Effect.flip(
          McpToolkit.make({ name: "dup", transport: { _tag: "InProcess", server: namedServer(names) } })
        )
        assert.deepInclude(error, { _tag: "McpError", reason: "InvalidTool" })
        if (error._tag === "McpError") {
          assert.strictEqual(error.server, "dup")
          assert.strictEqual(error.tool, names[names.length - 1])
          assert.include(error.message, "two tools")
        }
      }
    }))
})
