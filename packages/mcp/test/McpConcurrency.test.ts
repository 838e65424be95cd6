import { assert, describe, it } from "@effect/vitest"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import type { Transport as McpTransport } from "@modelcontextprotocol/sdk/shared/transport.js"
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

/**
 * A low-level server whose `write` takes `millis` (`Infinity`: never answers) for any `n` but 0, which it
 * answers at once; it goes on with a cancelled call, as a server may.
 */
const slowServer = (millis: number) => {
  const stats = { running: 0, atOnce: 0, started: [] as Array<number>, startedAt: [] as Array<number> }
  const ended: Array<() => void> = []
  const server = new Server({ name: "slow", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(
    ListToolsRequestSchema,
    () => ({ tools: [{ name: "write", inputSchema: { type: "object" } }] })
  )
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const n = Number(request.params.arguments?.n)
    stats.started.push(n)
    stats.startedAt.push(Date.now())
    stats.running++
    stats.atOnce = Math.max(stats.atOnce, stats.running)
    if (n !== 0) await new Promise((resolve) => Number.isFinite(millis) && setTimeout(resolve, millis))
    stats.running--
    ended.splice(0).forEach((resolve) => resolve())
    return { content: [{ type: "text", text: `wrote ${n}` }] }
  })
  const idle = () => stats.running === 0 ? Promise.resolve() : new Promise<void>((resolve) => ended.push(resolve))
  return { server, stats, idle }
}

/**
 * A server speaking JSON-RPC by hand that answers every call, a cancelled one too (the SDK's server drops
 * the answer of a request cancelled): `write` with `n` 0 at once, else after `millis`.
 */
const answeringServer = (millis: number) => ({
  connect: async (transport: McpTransport) => {
    transport.onmessage = (message: any) => {
      if (message.id === undefined) return
      const answer = (result: unknown) => void transport.send({ jsonrpc: "2.0", id: message.id, result } as any)
      if (message.method === "initialize") {
        answer({
          protocolVersion: message.params.protocolVersion,
          capabilities: { tools: {} },
          serverInfo: { name: "raw", version: "1.0.0" }
        })
      } else if (message.method === "tools/list") {
        answer({ tools: [{ name: "write", inputSchema: { type: "object" } }] })
      } else {
        const n = Number(message.params.arguments?.n)
        setTimeout(() => answer({ content: [{ type: "text", text: `wrote ${n}` }] }), n === 0 ? 0 : millis)
      }
    }
    await transport.start()
  }
})

const runReplyOf = (
  options: Omit<McpToolkit.Options, "name">,
  calls: ReadonlyArray<{ readonly name: string; readonly params: unknown }>
) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({ toolkit: McpToolkit.make({ name: "slow", ...options }), toolConcurrency: 8 })
    const result = yield* agent.run("go", { threadId: "t1" })
    assert.strictEqual(result._tag, "Completed")
  }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.toolCalls(calls), ScriptedModel.text("done")])))

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

  it.scopedLive(
    "a call cancelled by toolTimeout keeps its place while the server may run it: calls never overlap",
    () =>
      Effect.gen(function*() {
        const slow = slowServer(600)
        const agent = yield* Agent.make({
          toolkit: McpToolkit.make({
            name: "slow",
            transport: { _tag: "InProcess", server: slow.server },
            timeout: "1 second"
          }),
          toolTimeout: "150 millis",
          toolConcurrency: 8
        })
        const first = yield* agent.run("go", { threadId: "t1" })
        assert.strictEqual(first._tag, "Completed")
        // the server goes on with the cancelled call; the two calls after it were never sent
        yield* Effect.promise(() => slow.idle())
        assert.strictEqual(slow.stats.atOnce, 1)
        assert.deepStrictEqual(slow.stats.started, [1])
        // the SDK's server sends no answer to a cancelled request: the place is free once `timeout` has passed
        yield* Effect.sleep("1500 millis")
        const second = yield* agent.run("again", { threadId: "t2" })
        assert.strictEqual(second._tag, "Completed")
        const results = second.state.messages.flatMap((message) => message.role === "tool" ? message.content : [])
        assert.deepStrictEqual(results.map((part) => [part.isFailure, part.result]), [[false, "wrote 0"]])
      }).pipe(Effect.provide(ScriptedModel.layer([
        ScriptedModel.toolCalls([1, 2, 3].map((n) => ({ name: "write", params: { n } }))),
        ScriptedModel.text("done"),
        ScriptedModel.toolCalls([{ name: "write", params: { n: 0 } }]),
        ScriptedModel.text("done")
      ]))),
    { timeout: 30_000 }
  )

  it.scopedLive(
    "a cancelled call's place is free as soon as the server answers it, before `timeout`",
    () =>
      Effect.gen(function*() {
        const server = answeringServer(400)
        const agent = yield* Agent.make({
          toolkit: McpToolkit.make({ name: "raw", transport: { _tag: "InProcess", server }, timeout: "30 seconds" }),
          toolTimeout: "150 millis"
        })
        assert.strictEqual((yield* agent.run("go", { threadId: "t1" }))._tag, "Completed")
        yield* Effect.sleep("600 millis")
        const second = yield* agent.run("again", { threadId: "t2" })
        const results = second.state.messages.flatMap((message) => message.role === "tool" ? message.content : [])
        assert.deepStrictEqual(results.map((part) => [part.isFailure, part.result]), [[false, "wrote 0"]])
      }).pipe(Effect.provide(ScriptedModel.layer([
        ScriptedModel.toolCalls([{ name: "write", params: { n: 1 } }]),
        ScriptedModel.text("done"),
        ScriptedModel.toolCalls([{ name: "write", params: { n: 0 } }]),
        ScriptedModel.text("done")
      ]))),
    { timeout: 30_000 }
  )

  it.scopedLive(
    "a cancelled call the server never answers keeps its place for `timeout` more, then frees it",
    () =>
      Effect.gen(function*() {
        const slow = slowServer(Infinity)
        yield* runReplyOf(
          { transport: { _tag: "InProcess", server: slow.server }, timeout: "300 millis" },
          [{ name: "write", params: { n: 1 } }, { name: "write", params: { n: 0 } }]
        )
        assert.deepStrictEqual(slow.stats.started, [1, 0])
        // the first timed out at 300 ms; the second waited 300 ms more for its answer
        assert.isAtLeast(slow.stats.startedAt[1]! - slow.stats.startedAt[0]!, 550)
      }),
    { timeout: 30_000 }
  )

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
