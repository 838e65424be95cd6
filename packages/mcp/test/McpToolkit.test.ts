import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { assert, describe, it } from "@effect/vitest"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { Agent, Middleware } from "@stepwise-agent/core"
import { McpToolkit } from "@stepwise-agent/mcp"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import * as HttpFixture from "./fixtures/http.js"
import { makeServer } from "./fixtures/server.js"

const stdioServer = path.join(__dirname, "fixtures", "stdio.ts")

const stdio = (env: Record<string, string | Redacted.Redacted<string>> = {}): McpToolkit.Options => ({
  name: "fixture",
  transport: { _tag: "Stdio", command: process.execPath, args: ["--import", "tsx", stdioServer], env }
})

const http = (url: string, token = "sk-secret-123"): McpToolkit.Options => ({
  name: "fixture-http",
  transport: { _tag: "Http", url, headers: { Authorization: Redacted.make(`Bearer ${token}`) } }
})

interface ResultSeen {
  readonly name: string
  readonly isFailure: boolean
  readonly result: unknown
}

/** Runs an agent on the toolkit with a scripted model; returns the tool results of its transcript. */
const runAgent = (
  toolkit: Effect.Effect<Toolkit.WithHandler<any>, any, any>,
  script: ReadonlyArray<ReadonlyArray<{ readonly name: string; readonly params: unknown }>>
) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({ toolkit })
    const result = yield* agent.run("go", { threadId: "t1" })
    assert.strictEqual(result._tag, "Completed")
    return result.state.messages.flatMap((message): Array<ResultSeen> =>
      message.role === "tool"
        ? message.content.map((part) => ({ name: part.name, isFailure: part.isFailure, result: part.result }))
        : []
    )
  }).pipe(
    Effect.provide(
      ScriptedModel.layer([...script.map((calls) => ScriptedModel.toolCalls(calls)), ScriptedModel.text("done")])
    )
  )

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** A port nothing listens on: one a server had and gave back. */
const closedPort = Effect.async<number>((resume) => {
  const server = Http.createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as AddressInfo
    server.close(() => resume(Effect.succeed(port)))
  })
})

describe("McpToolkit over stdio (a child process)", () => {
  it.scopedLive("gives the server's tools, with their JSON schema and hints, to the agent", () =>
    Effect.gen(function*() {
      const toolkit = yield* McpToolkit.make(stdio({ FIXTURE_GREETING: Redacted.make("hello") }))
      assert.deepStrictEqual(Object.keys(toolkit.tools).sort(), ["add", "crash", "echo", "fail", "whoami"])
      const echo = toolkit.tools.echo!
      const schema = Tool.getJsonSchema(echo) as Record<string, any>
      assert.deepStrictEqual(schema.required, ["text"])
      assert.deepStrictEqual(Object.keys(schema.properties), ["text", "times"])
      assert.strictEqual(schema.$schema, undefined)
      assert.strictEqual(Tool.getDescription(echo), "Repeats a text")
      assert.strictEqual(Context.get(echo.annotations, Tool.Readonly), true)
      assert.deepStrictEqual(Context.getOption(echo.annotations, Tool.Title), Option.some("Echo"))

      const results = yield* runAgent(Effect.succeed(toolkit), [
        [{ name: "echo", params: { text: "hi", times: 2 } }, { name: "add", params: { a: 2, b: 3 } }],
        [{ name: "whoami", params: {} }]
      ])
      assert.deepStrictEqual(results.slice(0, 2), [
        { name: "echo", isFailure: false, result: "hi hi" },
        { name: "add", isFailure: false, result: { sum: 5 } }
      ])
      const whoami = JSON.parse(results[2]!.result as string)
      assert.strictEqual(whoami.greeting, "hello")
      assert.notStrictEqual(whoami.pid, process.pid)
    }))

  it.scopedLive("answers invalid arguments with a failed result the model repairs", () =>
    Effect.gen(function*() {
      const results = yield* runAgent(McpToolkit.make(stdio()), [
        [{ name: "echo", params: { text: 5 } }],
        [{ name: "echo", params: { text: "five" } }]
      ])
      assert.strictEqual(results.length, 2)
      assert.isTrue(results[0]!.isFailure)
      const error = (results[0]!.result as { error: string }).error
      assert.include(error, "Input validation error")
      assert.include(error, "text")
      assert.deepStrictEqual(results[1], { name: "echo", isFailure: false, result: "five" })
    }))

  it.scopedLive("turns a result with isError: true into a failed tool result", () =>
    Effect.gen(function*() {
      const results = yield* runAgent(McpToolkit.make(stdio()), [[{ name: "fail", params: { why: "disk full" } }]])
      assert.deepStrictEqual(results, [{ name: "fail", isFailure: true, result: { error: "failed: disk full" } }])
    }))

  it.scopedLive("a server that dies mid-call gives McpError Disconnected, which the model reads; later calls too", () =>
    Effect.gen(function*() {
      const results = yield* runAgent(McpToolkit.make(stdio()), [
        [{ name: "crash", params: {} }],
        [{ name: "echo", params: { text: "still there?" } }]
      ])
      assert.deepStrictEqual(results, [
        {
          name: "crash",
          isFailure: true,
          result: {
            _tag: "McpError",
            reason: "Disconnected",
            server: "fixture",
            tool: "crash",
            detail: "the server process exited"
          }
        },
        {
          name: "echo",
          isFailure: true,
          result: {
            _tag: "McpError",
            reason: "Disconnected",
            server: "fixture",
            tool: "echo",
            detail: "the server process exited"
          }
        }
      ])
    }))

  it.scopedLive("handle fails with the typed McpError of reason Disconnected", () =>
    Effect.gen(function*() {
      const toolkit = yield* McpToolkit.make(stdio())
      const error = yield* Effect.flip(toolkit.handle("crash", {}))
      assert.instanceOf(error, McpToolkit.McpError)
      assert.strictEqual(error.reason, "Disconnected")
      assert.strictEqual(
        error.message,
        `MCP server "fixture" could not answer the call of "crash": the server process exited`
      )
    }))

  it.live("the child process exits when the Layer is released", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(McpToolkit.layer(stdio()), scope)
      const toolkit = Context.get(context, McpToolkit.McpToolkit)
      const { result } = yield* toolkit.handle("whoami", {})
      const pid: number = JSON.parse(result as string).pid
      assert.isTrue(isAlive(pid))
      yield* Scope.close(scope, Exit.void)
      assert.isFalse(isAlive(pid))
    }))

  it.scopedLive("a command that cannot start fails the build with McpError ConnectFailed naming it", () =>
    Effect.gen(function*() {
      const missing = yield* Effect.flip(McpToolkit.make({
        name: "nowhere",
        transport: { _tag: "Stdio", command: "/nonexistent/mcp-server", args: ["--dsn=postgresql://u:hunter2@db/x"] }
      }))
      assert.instanceOf(missing, McpToolkit.McpError)
      if (!(missing instanceof McpToolkit.McpError)) return
      assert.notInclude(`${missing.message} ${JSON.stringify(missing)}`, "hunter2")
      assert.strictEqual(missing.reason, "ConnectFailed")
      assert.strictEqual(missing.server, "nowhere")
      // the command without its arguments, which may hold credentials
      assert.strictEqual(missing.target, "/nonexistent/mcp-server")
      assert.include(missing.detail, "ENOENT")

      const exits = yield* Effect.flip(McpToolkit.make({
        name: "quitter",
        transport: { _tag: "Stdio", command: process.execPath, args: ["-e", "process.exit(3)"] }
      }))
      assert.instanceOf(exits, McpToolkit.McpError)
      if (!(exits instanceof McpToolkit.McpError)) return
      assert.include(
        exits.message,
        `Could not connect to MCP server "quitter" (${process.execPath})`
      )
      assert.strictEqual(exits.reason, "ConnectFailed")
      assert.include(exits.detail, "Connection closed")
    }))
})

describe("McpToolkit over streamable HTTP (127.0.0.1)", () => {
  it.scopedLive("calls the tools with the headers, and ends the session with a DELETE when the Layer is released", () =>
    Effect.gen(function*() {
      const server = yield* HttpFixture.serve
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(McpToolkit.layer(http(server.url)), scope)
      const results = yield* runAgent(McpToolkit.McpToolkit, [
        [{ name: "echo", params: { text: "over http" } }, { name: "fail", params: { why: "nope" } }],
        [{ name: "echo", params: { text: 1 } }]
      ]).pipe(Effect.provide(context))
      assert.deepStrictEqual(results.slice(0, 2), [
        { name: "echo", isFailure: false, result: "over http" },
        { name: "fail", isFailure: true, result: { error: "failed: nope" } }
      ])
      assert.isTrue(results[2]!.isFailure)
      assert.include((results[2]!.result as { error: string }).error, "Input validation error")

      const sessionId = server.requests.find((request) => request.sessionId !== undefined)?.sessionId
      assert.isDefined(sessionId)
      assert.isTrue(server.requests.every((request) => request.authorization === "Bearer sk-secret-123"))
      assert.isFalse(server.requests.some((request) => request.method === "DELETE"))
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(
        server.requests.filter((request) => request.method === "DELETE").map((request) => request.sessionId),
        [sessionId]
      )
    }))

  it.scopedLive.each([
    { afterOutput: false, reason: "failed (fetch failed: other side closed)" },
    { afterOutput: true, reason: "broke before the answer came" }
  ])(
    "a server that dies mid-call (afterOutput: $afterOutput) gives McpError Disconnected at once, not at the timeout",
    ({ afterOutput, reason }) =>
      Effect.gen(function*() {
        const server = yield* HttpFixture.serve
        const toolkit = yield* McpToolkit.make(http(server.url))
        const started = Date.now()
        const error = yield* Effect.flip(toolkit.handle("crash", { afterOutput }))
        assert.isBelow(Date.now() - started, 10_000)
        assert.instanceOf(error, McpToolkit.McpError)
        assert.strictEqual(error.reason, "Disconnected")
        assert.include(error.detail, server.url)
        assert.include(error.detail, reason, error.detail)
        const later = yield* Effect.flip(toolkit.handle("echo", { text: "hi" }))
        assert.instanceOf(later, McpToolkit.McpError)
        assert.include(later.detail, "ECONNREFUSED")
        assert.notInclude(JSON.stringify([error, later, error.message, later.message]), "sk-secret-123")
      })
  )

  it.scopedLive("connection refused fails the Layer build with McpError ConnectFailed naming the URL, no secret", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const error = yield* Layer.build(McpToolkit.layer(
        http(`http://127.0.0.1:${port}/mcp?token=abc#frag`)
      )).pipe(Effect.flip)
      assert.instanceOf(error, McpToolkit.McpError)
      if (error._tag !== "McpError") return
      assert.strictEqual(error.reason, "ConnectFailed")
      assert.strictEqual(error.server, "fixture-http")
      assert.strictEqual(error.target, `http://127.0.0.1:${port}/mcp`)
      assert.include(error.detail, "ECONNREFUSED")
      const everything = JSON.stringify([error, error.message, Schema.encodeSync(McpToolkit.McpError)(error)])
      for (const secret of ["sk-secret-123", "token=abc"]) assert.notInclude(everything, secret)
    }))
})

describe("McpToolkit in process", () => {
  it.scopedLive("serves an McpServer of this process", () =>
    Effect.gen(function*() {
      const results = yield* runAgent(
        McpToolkit.make({ name: "local", transport: { _tag: "InProcess", server: makeServer(() => {}) } }),
        [[{ name: "add", params: { a: 40, b: 2 } }]]
      )
      assert.deepStrictEqual(results, [{ name: "add", isFailure: false, result: { sum: 42 } }])
    }))

  it.scopedLive("joins the agent's own toolkit through a middleware's tools; names clash with ToolNameClash", () => {
    const Local = Toolkit.make(Tool.make("shout", { parameters: { text: Schema.String }, success: Schema.String }))
    const Clash = Toolkit.make(Tool.make("echo"))
    const handlers = Layer.merge(
      Local.toLayer({ shout: ({ text }) => Effect.succeed(text.toUpperCase()) }),
      Clash.toLayer({ echo: () => Effect.void })
    )
    // an McpServer serves one session: each agent built connects a new one
    const mcp = Middleware.make({
      name: "mcp",
      tools: Effect.suspend(() =>
        McpToolkit.make({ name: "local", transport: { _tag: "InProcess", server: makeServer(() => {}) } })
      )
    })
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Local, middleware: [mcp] })
      const result = yield* agent.run("go", { threadId: "t1" })
      const results = result.state.messages.flatMap((message) => message.role === "tool" ? message.content : [])
      // the Clash toolkit's handler of "echo" is in the context: the server's echo answers all the same
      assert.deepStrictEqual(results.map((part) => [part.name, part.isFailure, part.result]), [
        ["shout", false, "HI"],
        ["echo", false, "hi"]
      ])

      const clash = yield* Effect.flip(Agent.make({ toolkit: Clash, middleware: [mcp] }))
      assert.strictEqual(clash._tag, "ToolNameClash")
      assert.include(clash.message, `Tool "echo" of middleware "mcp"`)
    }).pipe(
      Effect.provide(handlers),
      Effect.provide(ScriptedModel.layer([
        ScriptedModel.toolCalls([{ name: "shout", params: { text: "hi" } }, { name: "echo", params: { text: "hi" } }]),
        ScriptedModel.text("done")
      ]))
    )
  })

  it.scopedLive("gives an image as a file item, other blocks as they are; an answer that is no tool result fails", () =>
    Effect.gen(function*() {
      const server = new Server({ name: "odd", version: "1.0.0" }, { capabilities: { tools: {} } })
      server.setRequestHandler(ListToolsRequestSchema, () => ({
        tools: [{ name: "picture", inputSchema: { type: "object" } }, { name: "odd", inputSchema: { type: "object" } }]
      }))
      const picture = [{ type: "text", text: "a dot" }, { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }]
      server.setRequestHandler(
        CallToolRequestSchema,
        (request) => (request.params.name === "picture" ? { content: picture } : { content: "not blocks" }) as any
      )
      const toolkit = yield* McpToolkit.make({ name: "odd", transport: { _tag: "InProcess", server } })
      const expected = [{ type: "text", text: "a dot" }, { type: "file", mediaType: "image/png", data: "iVBORw0KGgo=" }]
      assert.deepStrictEqual(yield* toolkit.handle("picture", {}), {
        isFailure: false,
        result: expected,
        encodedResult: expected
      })
      const odd = yield* toolkit.handle("odd", {})
      assert.isTrue(odd.isFailure)
      assert.include((odd.result as { error: string }).error, "content")
    }))

  it.scopedLive("a call past the timeout gets a failed result saying so", () =>
    Effect.gen(function*() {
      const toolkit = yield* McpToolkit.make({
        name: "slow",
        transport: { _tag: "InProcess", server: makeServer(() => {}) },
        timeout: "200 millis"
      })
      const { isFailure, result } = yield* toolkit.handle("crash", {})
      assert.isTrue(isFailure)
      assert.include((result as { error: string }).error, "Request timed out")
    }))

  it.effect("bad options fail with InvalidOptions naming the option", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [McpToolkit.Options, string]> = [
        [{ name: " ", transport: { _tag: "Stdio", command: "x" } }, "name"],
        [{ name: "a", transport: { _tag: "Stdio", command: "" } }, "transport.command"],
        [{ name: "a", transport: { _tag: "Http", url: "ftp://127.0.0.1/mcp" } }, "transport.url"],
        [{ name: "a", transport: { _tag: "Http", url: "not a url" } }, "transport.url"],
        [{ name: "a", transport: { _tag: "Http", url: "http://user:hunter2@127.0.0.1/mcp" } }, "transport.url"],
        [{ name: "a", transport: { _tag: "Sse" } as any }, "transport"],
        [{ name: "a", transport: { _tag: "Stdio", command: "x" }, timeout: 0 }, "timeout"]
      ]
      for (const [options, option] of cases) {
        const error = yield* Effect.flip(Effect.scoped(McpToolkit.make(options)))
        assert.strictEqual(error._tag, "InvalidOptions")
        if (error._tag === "InvalidOptions") assert.strictEqual(error.option, option)
        assert.notInclude(error.message, "hunter2")
      }
    }))

  it.effect.prop(
    "any text goes to the server and back unchanged",
    { text: Schema.String, times: Schema.Int.pipe(Schema.between(1, 3)) },
    ({ text, times }) =>
      Effect.gen(function*() {
        const toolkit = yield* McpToolkit.make({
          name: "local",
          transport: { _tag: "InProcess", server: makeServer(() => {}) }
        })
        const { isFailure, result } = yield* toolkit.handle("echo", { text, times })
        assert.isFalse(isFailure)
        assert.strictEqual(result, Array.from({ length: times }, () => text).join(" "))
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 30 } }
  )
})
