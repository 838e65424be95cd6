/**
 * What servers list and answer that the toolkit must take calmly: hints
 * that contradict, a tool list that never ends, a thousand tools, names
 * another toolkit has, blocks of a type this client does not know, resource
 * links and very large results.
 */
import { Tool } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import type { Transport as McpTransport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { Agent, Middleware } from "@stepwise-agent/core"
import { McpToolkit } from "@stepwise-agent/mcp"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as z from "zod"

/** A low-level server: `list` answers each tools/list request (by its cursor), `call` each call. */
const lowLevel = (
  list: (cursor: string | undefined) => { readonly tools: ReadonlyArray<unknown>; readonly nextCursor?: string },
  call: (name: string) => unknown = (name) => ({ content: [{ type: "text", text: `called ${name}` }] })
) => {
  const server = new Server({ name: "shapes", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, (request) => list(request.params?.cursor) as any)
  server.setRequestHandler(CallToolRequestSchema, (request) => call(request.params.name) as any)
  return server
}

/**
 * A server speaking JSON-RPC by hand, answering tools/call with `result` as it is: the SDK's server checks its
 * answers against its own protocol version, and a newer server's blocks are what is tried here.
 */
const rawServer = (tools: ReadonlyArray<unknown>, result: unknown) => ({
  connect: async (transport: McpTransport) => {
    transport.onmessage = (message: any) => {
      if (message.id === undefined) return
      const answer = message.method === "initialize"
        ? {
          protocolVersion: message.params.protocolVersion,
          capabilities: { tools: {} },
          serverInfo: { name: "raw", version: "1.0.0" }
        }
        : message.method === "tools/list"
        ? { tools }
        : result
      void transport.send({ jsonrpc: "2.0", id: message.id, result: answer } as any)
    }
    await transport.start()
  }
})

const tool = (name: string, annotations?: Record<string, unknown>) => ({
  name,
  inputSchema: { type: "object" },
  ...(annotations === undefined ? {} : { annotations })
})

const resultOf = (toolkit: McpToolkit.McpToolkit["Type"], name: string) =>
  Effect.map(toolkit.handle(name as any, {}), (handled) => ({ isFailure: handled.isFailure, result: handled.result }))

describe("McpToolkit: hints", () => {
  it.scopedLive("a tool marked read-only and destructive at once is not taken as read-only: its calls wait for each other", () =>
    Effect.gen(function*() {
      const stats = { running: 0, overlaps: 0 }
      const server = new McpServer({ name: "contradicting", version: "1.0.0" })
      server.registerTool("wipe", {
        description: "Says it only reads, and that it destroys",
        inputSchema: { n: z.number() },
        annotations: { readOnlyHint: true, destructiveHint: true }
      }, async () => {
        if (stats.running > 0) stats.overlaps++
        stats.running++
        await new Promise((resolve) => setTimeout(resolve, 20))
        stats.running--
        return { content: [{ type: "text", text: "wiped" }] }
      })
      const toolkit = yield* McpToolkit.make({ name: "c", transport: { _tag: "InProcess", server } })
      assert.isFalse(Context.get(toolkit.tools.wipe!.annotations, Tool.Readonly))
      yield* Effect.all([1, 2, 3].map((n) => toolkit.handle("wipe" as any, { n })), { concurrency: "unbounded" })
      assert.strictEqual(stats.overlaps, 0)
    }))
})

describe("McpToolkit: the tool list", () => {
  it.scopedLive("a list whose cursor comes again fails with McpError ConnectFailed instead of listing forever", () =>
    Effect.gen(function*() {
      const server = lowLevel(() => ({ tools: [tool("again")], nextCursor: "same" }))
      const error = yield* Effect.flip(McpToolkit.make({ name: "loop", transport: { _tag: "InProcess", server } }))
      assert.deepInclude(error, { _tag: "McpError", reason: "ConnectFailed" })
      assert.include(error.message, "does not end")
    }))

  it.scopedLive(
    "a list of new pages without end fails with McpError ConnectFailed past 10,000 tools",
    () =>
      Effect.gen(function*() {
        const server = lowLevel((cursor) => {
          const page = Number(cursor ?? "0")
          return { tools: Array.from({ length: 100 }, (_, i) => tool(`t${page}_${i}`)), nextCursor: String(page + 1) }
        })
        const error = yield* Effect.flip(McpToolkit.make({ name: "endless", transport: { _tag: "InProcess", server } }))
        assert.deepInclude(error, { _tag: "McpError", reason: "ConnectFailed" })
        assert.include(error.message, "more than 10000 tools")
      }),
    { timeout: 120_000 }
  )

  it.scopedLive(
    "a server with 1,000 tools, listed in pages, gives all of them, each callable",
    () =>
      Effect.gen(function*() {
        const server = lowLevel((cursor) => {
          const page = Number(cursor ?? "0")
          return {
            tools: Array.from({ length: 100 }, (_, i) => tool(`t${page * 100 + i}`)),
            ...(page < 9 ? { nextCursor: String(page + 1) } : {})
          }
        })
        const toolkit = yield* McpToolkit.make({ name: "many", transport: { _tag: "InProcess", server } })
        assert.strictEqual(Object.keys(toolkit.tools).length, 1000)
        assert.deepStrictEqual(yield* resultOf(toolkit, "t999"), { isFailure: false, result: "called t999" })
        const agent = yield* Agent.make({ toolkit: Effect.succeed(toolkit) })
        assert.strictEqual((yield* agent.run("go", { threadId: "t" }))._tag, "Completed")
      }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("done")]))),
    { timeout: 60_000 }
  )

  it.scopedLive("two names that read the same fail with McpError InvalidTool naming both: nothing is offered", () =>
    Effect.gen(function*() {
      const twins: ReadonlyArray<readonly [string, string]> = [
        ["delet\u00e9", "delete\u0301"], // precomposed and decomposed accent
        ["delete", "\uff44\uff45\uff4c\uff45\uff54\uff45"], // full-width letters
        ["Delete", "delete"],
        ["delete", "del\u200bete"], // a zero-width space
        ["delete", "del\u00adete"], // a soft hyphen
        ["delete", "delete "],
        ["delete", "\u00a0delete"],
        ["delete", "d\u0435lete"], // a Cyrillic е
        ["list", "Iist"] // a capital I for an l
      ]
      for (const [first, second] of twins) {
        const server = lowLevel(() => ({ tools: [tool(first), tool("other"), tool(second)] }))
        const error = yield* Effect.flip(McpToolkit.make({ name: "twins", transport: { _tag: "InProcess", server } }))
        assert.deepInclude(error, { _tag: "McpError", reason: "InvalidTool", tool: second })
        // both named, escaped where they are not printable ASCII, so that they look different
        const escaped = (name: string) =>
          JSON.stringify(name).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
        assert.include(error.message, escaped(first))
        assert.include(error.message, escaped(second))
      }
      // names that only look alike to a folded eye but differ stay apart
      const server = lowLevel(() => ({ tools: ["delete", "delete_all", "delete.v2", "del-ete"].map((n) => tool(n)) }))
      const toolkit = yield* McpToolkit.make({ name: "plain", transport: { _tag: "InProcess", server } })
      assert.deepStrictEqual(Object.keys(toolkit.tools), ["delete", "delete_all", "delete.v2", "del-ete"])
    }))

  it.scopedLive("a name of invisible characters and spaces only fails with McpError InvalidTool", () =>
    Effect.gen(function*() {
      for (const name of [" ", "\u200b", "\u200d\ufeff", "\u2800"]) {
        const server = lowLevel(() => ({ tools: [tool(name)] }))
        const error = yield* Effect.flip(McpToolkit.make({ name: "blank", transport: { _tag: "InProcess", server } }))
        assert.deepInclude(error, { _tag: "McpError", reason: "InvalidTool", tool: name })
      }
    }))

  it.scopedLive(
    "a name with a bidirectional override or a control, or over ToolName.maxLength, fails with InvalidTool",
    () =>
      Effect.gen(function*() {
        // the override shows "\u202eelif_daer" as read_file; a quarter megabyte of stacked accents would take minutes to
        // normalize: refused by its length first
        const names = ["\u202eelif_daer", "read\u0000file", "a" + "\u0301\u0316\u0300\u0317".repeat(65_536)]
        for (const name of names) {
          const server = lowLevel(() => ({ tools: [tool("list"), tool(name)] }))
          const started = performance.now()
          const error = yield* Effect.flip(McpToolkit.make({ name: "odd", transport: { _tag: "InProcess", server } }))
          assert.isBelow(performance.now() - started, 10_000)
          assert.deepInclude(error, { _tag: "McpError", reason: "InvalidTool" })
          assert.include(error.message, "cannot be a tool's name")
        }
      }),
    { timeout: 60_000 }
  )

  it.scopedLive(
    "property: a name and any variant of it in case, width, invisible characters or spaces are refused",
    () =>
      Effect.promise(() =>
        FastCheck.assert(
          FastCheck.asyncProperty(
            FastCheck.stringMatching(/^[a-z][a-z0-9_]{0,11}$/),
            FastCheck.array(FastCheck.constantFrom("upper", "wide", "zw", "space", "shy"), {
              minLength: 1,
              maxLength: 3
            }),
            FastCheck.nat(),
            async (name, changes, at) => {
              const variant = changes.reduce((text, change) => {
                const i = at % (text.length + 1)
                switch (change) {
                  case "upper":
                    return text.toUpperCase()
                  case "wide":
                    // U+FF01…U+FF5E: the full-width forms of "!" … "~"
                    return [...text].map((c) =>
                      c > " " && c <= "~" ? String.fromCodePoint(c.codePointAt(0)! + 0xfee0) : c
                    )
                      .join("")
                  case "zw":
                    return text.slice(0, i) + "\u200b" + text.slice(i)
                  case "shy":
                    return text.slice(0, i) + "\u00ad" + text.slice(i)
                  default: // "space"
                    return text + " "
                }
              }, name)
              if (variant === name) return
              const server = lowLevel(() => ({ tools: [tool(name), tool(variant)] }))
              const exit = await Effect.runPromiseExit(Effect.scoped(
                McpToolkit.make({ name: "variants", transport: { _tag: "InProcess", server } })
              ))
              assert.isTrue(exit._tag === "Failure" && JSON.stringify(exit.cause).includes("InvalidTool"))
            }
          ),
          { numRuns: 40 }
        )
      ),
    { timeout: 60_000 }
  )

  it.scopedLive("a tool name another toolkit of the agent has fails Agent.make with ToolNameClash naming both", () =>
    Effect.gen(function*() {
      const server = (names: ReadonlyArray<string>) =>
        McpToolkit.make({
          name: names.join("-"),
          transport: { _tag: "InProcess", server: lowLevel(() => ({ tools: names.map((n) => tool(n)) })) }
        })
      const twoServers = yield* Effect.flip(Agent.make({
        toolkit: server(["search", "fetch"]),
        middleware: [Middleware.make({ name: "other", tools: server(["fetch"]) })]
      }))
      assert.strictEqual(twoServers._tag, "ToolNameClash")
      assert.include(
        twoServers.message,
        `Tool "fetch" of middleware "other" has the same name as a tool of the toolkit`
      )
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("done")]))))
})

describe("McpToolkit: results", () => {
  it.scopedLive("blocks of a type this client does not know, and resource links, reach the model as sent", () =>
    Effect.gen(function*() {
      const blocks = [
        { type: "text", text: "see" },
        { type: "resource_link", uri: "file:///a.txt", name: "a.txt", mimeType: "text/plain" },
        { type: "resource", resource: { uri: "file:///b.txt", text: "bee", mimeType: "text/plain" } },
        { type: "hologram", data: "zzz" }
      ]
      const toolkit = yield* McpToolkit.make({
        name: "r",
        transport: { _tag: "InProcess", server: rawServer([tool("mixed")], { content: blocks }) }
      })
      const answer = yield* resultOf(toolkit, "mixed")
      assert.deepStrictEqual(answer, { isFailure: false, result: blocks })
      // a known block that is malformed still fails the result, as the SDK checks it
      const broken = rawServer([tool("broken")], {
        content: [{ type: "image", mimeType: "image/png" }, { type: "hologram" }]
      })
      const brokenKit = yield* McpToolkit.make({ name: "r2", transport: { _tag: "InProcess", server: broken } })
      assert.isTrue((yield* resultOf(brokenKit, "broken")).isFailure)
    }))

  it.scopedLive(
    "a very large text result is given whole (the Offload middleware is what keeps it out of the context)",
    () =>
      Effect.gen(function*() {
        const big = "x".repeat(20 * 1024 * 1024)
        const server = lowLevel(() => ({ tools: [tool("big")] }), () => ({ content: [{ type: "text", text: big }] }))
        const toolkit = yield* McpToolkit.make({ name: "b", transport: { _tag: "InProcess", server } })
        const answer = yield* resultOf(toolkit, "big")
        assert.strictEqual((answer.result as string).length, big.length)
      }),
    { timeout: 60_000 }
  )
})
