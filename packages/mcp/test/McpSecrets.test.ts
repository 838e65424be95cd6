/**
 * A failed MCP tool result (`isError: true`) is text a server wrote, and a
 * server can quote what it was sent: the credentials of the transport (its
 * headers, the URL's query) are known and scrubbed from it, and credentials
 * named as such in it are redacted whoever sent them.
 */
import { assert, describe, it } from "@effect/vitest"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { Agent, Secrets } from "@stepwise-agent/core"
import { McpToolkit } from "@stepwise-agent/mcp"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

const key = "AcmeSub-0a1b2c3d4e5f"

/** An MCP server over HTTP (stateless) whose `denied` tool fails quoting the headers and URL it was sent. */
const gateway: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.async<Http.Server>((resume) => {
    const server = Http.createServer((req, res) => {
      const mcp = new McpServer({ name: "gateway", version: "1.0.0" })
      mcp.registerTool("denied", { description: "Always refuses" }, (extra) => ({
        isError: true,
        content: [{
          type: "text",
          text: `denied: ${JSON.stringify(extra.requestInfo?.headers ?? {})} at ${req.url}; ` +
            `x-functions-key: sk-unknown-98765432 (by name)`
        }]
      }))
      const transport = new StreamableHTTPServerTransport({})
      mcp.connect(transport).then(() => transport.handleRequest(req, res)).catch(() => res.destroy())
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map((server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`))

/** A gateway in front of the server that refuses every request with a 401 quoting the headers and URL. */
const refusing: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.async<Http.Server>((resume) => {
    const server = Http.createServer((req, res) => {
      req.resume()
      res.writeHead(401, { "content-type": "text/plain" })
      res.end(`invalid credentials ${JSON.stringify(req.headers)} at ${req.url}`)
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map((server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`))

const transports: ReadonlyArray<
  readonly [
    string,
    (url: string) => { readonly url: string; readonly headers: Record<string, string | Redacted.Redacted<string>> }
  ]
> = [
  ["a URL parameter ?key=", (url) => ({ url: `${url}?key=${key}`, headers: {} })],
  ["an Ocp-Apim-Subscription-Key header", (url) => ({ url, headers: { "Ocp-Apim-Subscription-Key": key } })],
  ["an x-functions-key header", (url) => ({ url, headers: { "x-functions-key": key } })],
  ["an x-key header", (url) => ({ url, headers: { "x-key": key } })],
  ["a Redacted header of any name", (url) => ({ url, headers: { "x-acme": Redacted.make(key) } })]
]

describe("McpToolkit: a failed result holds no credential", () => {
  for (const [placed, transport] of transports) {
    it.scopedLive(`${placed}, quoted back in an isError result`, () =>
      Effect.gen(function*() {
        const url = yield* gateway
        const agent = yield* Agent.make({
          toolkit: McpToolkit.make({ name: "gateway", transport: { _tag: "Http", ...transport(url) } })
        }).pipe(
          Effect.provide(ScriptedModel.layer([
            ScriptedModel.toolCalls([{ name: "denied", params: {} }]),
            ScriptedModel.text("done")
          ]))
        )
        const result = yield* agent.run("go", { threadId: "t1" })
        const results = result.state.messages.flatMap((message) =>
          message.role === "tool" ? message.content.map((part) => part) : []
        )
        assert.strictEqual(results.length, 1)
        assert.isTrue(results[0]!.isFailure)
        const text = JSON.stringify(results[0]!.result)
        assert.include(text, "denied: ")
        assert.notInclude(text, key)
        assert.notInclude(text, "sk-unknown-98765432")
        assert.include(text, Secrets.redacted)
      }), { timeout: 30_000 })
  }

  for (const [placed, transport] of transports) {
    it.scopedLive(
      `${placed}, quoted back in a gateway's 401 at connection: McpError (ConnectFailed) holds no key`,
      () =>
        Effect.gen(function*() {
          const url = yield* refusing
          const error = yield* Effect.flip(
            McpToolkit.make({ name: "gateway", transport: { _tag: "Http", ...transport(url) } })
          )
          assert.deepInclude(error, { _tag: "McpError", reason: "ConnectFailed" })
          assert.include(JSON.stringify(error), "invalid credentials")
          for (const text of [error.message, JSON.stringify(error), String(error)]) assert.notInclude(text, key)
        }),
      { timeout: 30_000 }
    )
  }
})
