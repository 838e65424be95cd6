/**
 * A server over HTTP whose answer never ends — one server-sent event that grows forever (in one line or in
 * many), a JSON answer that grows forever, or such an event on the notifications stream — is cut at
 * 10 MiB: the connection or the call fails at once with a typed error saying what the server sent, and the
 * process's memory stays bounded (before, the SDK kept the event until the request's timeout: gigabytes).
 */
import { assert, describe, it } from "@effect/vitest"
import { McpToolkit } from "@stepwise-agent/mcp"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { messageCounter } from "../src/internal/session.js"

type Endless = "event" | "event of short lines" | "json"

/** Writes `unit` to `res` for as long as it is open, as fast as it drains. */
const endlessly = (res: Http.ServerResponse, unit: string) => {
  const chunk = unit.repeat(Math.ceil(65_536 / unit.length))
  const write = () => {
    while (!res.destroyed && res.write(chunk));
  }
  res.on("drain", write)
  write()
}

const answerEndlessly = (res: Http.ServerResponse, endless: Endless) => {
  res.writeHead(200, { "content-type": endless === "json" ? "application/json" : "text/event-stream" })
  if (endless === "json") {
    res.write(`{"jsonrpc":"2.0","id":0,"result":{"padding":"`)
    endlessly(res, "x")
  } else {
    res.write("event: message\ndata: ")
    endlessly(res, endless === "event" ? "x" : "x\ndata: ")
  }
}

/**
 * A server speaking just enough of the protocol: it lists one tool, `t`, and answers endlessly what `at` says
 * (the initialization, the call of `t`, or the notifications stream, a GET).
 */
const hostile = (at: "initialize" | "tools/call" | "GET", endless: Endless) =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: Http.Server; readonly url: string; readonly cut: Promise<void> }>((resume) => {
      let onCut = () => {}
      const cut = new Promise<void>((resolve) => onCut = resolve)
      const server = Http.createServer((req, res) => {
        if (req.method === "GET") {
          if (at !== "GET") return void res.writeHead(405).end()
          // the client closed the connection before the answer ended
          res.on("close", () => onCut())
          return answerEndlessly(res, endless)
        }
        if (req.method !== "POST") return void res.writeHead(405).end()
        let text = ""
        req.on("data", (chunk) => text += chunk)
        req.on("end", () => {
          const message = JSON.parse(text) as { readonly id?: number; readonly method: string }
          if (message.method === at) return answerEndlessly(res, endless)
          if (message.id === undefined) return void res.writeHead(202).end()
          const result = message.method === "initialize"
            ? { protocolVersion: "2025-03-26", capabilities: { tools: {} }, serverInfo: { name: "h", version: "1" } }
            : message.method === "tools/list"
            ? { tools: [{ name: "t", inputSchema: { type: "object" } }] }
            : {}
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }))
        })
      })
      server.listen(0, "127.0.0.1", () =>
        resume(Effect.succeed({
          server,
          url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
          cut
        })))
    }),
    ({ server }) =>
      Effect.sync(() => {
        server.closeAllConnections()
        server.close()
      })
  )

/** Runs `effect`, failing the test if it takes 10 s (the request timeout is a minute). */
const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => "blocked" as const }))

describe("McpToolkit over HTTP, an answer that never ends", () => {
  for (const endless of ["event", "event of short lines", "json"] as const) {
    it.scopedLive(
      `an initialization answered by an endless ${endless} fails to connect, saying so`,
      () =>
        Effect.gen(function*() {
          const { url } = yield* hostile("initialize", endless)
          const failed = yield* bounded(McpToolkit.make({ name: "h", transport: { _tag: "Http", url } })).pipe(
            Effect.flip
          )
          assert.notStrictEqual(failed, "blocked")
          if (failed === "blocked") return
          assert.strictEqual(failed._tag, "McpError")
          assert.include(failed.message, `of over ${10 * 1024 * 1024} bytes`)
        }),
      30_000
    )
  }

  for (const endless of ["event", "event of short lines"] as const) {
    it.scopedLive(`a call answered by an endless ${endless} fails, saying so`, () =>
      Effect.gen(function*() {
        const { url } = yield* hostile("tools/call", endless)
        const toolkit = yield* McpToolkit.make({ name: "h", transport: { _tag: "Http", url } })
        const failed = yield* bounded(toolkit.handle("t" as never, {} as never)).pipe(Effect.flip)
        assert.notStrictEqual(failed, "blocked")
        assert.include(JSON.stringify(failed), `an event of over ${10 * 1024 * 1024} bytes`)
      }), 30_000)
  }

  it.scopedLive("an endless event on the notifications stream is cut; calls go on", () =>
    Effect.gen(function*() {
      const { cut, url } = yield* hostile("GET", "event")
      const toolkit = yield* McpToolkit.make({ name: "h", transport: { _tag: "Http", url } })
      const closed = yield* bounded(Effect.as(Effect.promise(() => cut), "closed" as const))
      assert.strictEqual(closed, "closed")
      const answered = yield* bounded(toolkit.handle("t" as never, {} as never))
      assert.isFalse(answered.isFailure)
    }), 30_000)
})

describe("the bound of one server-sent event", () => {
  it("counts an event's characters, not its line ends; a blank line after LF, CRLF or a lone CR ends it", () => {
    const bytes = (text: string) => new TextEncoder().encode(text)
    assert.isUndefined(messageCounter(true, 2)(bytes("a\nb\n\naa\r\rb\r\n\r\nab\r\n")))
    assert.include(messageCounter(true, 2)(bytes("a\nb\r\nc")) ?? "", "an event of over 2 bytes")
    assert.include(messageCounter(false, 2)(bytes("\n\n\n")) ?? "", "an answer of over 2 bytes")
  })

  // (a lone CR ends a line too; left out here, where a CR then the blank line's LF would read as one CRLF)
  const lineEnd = FastCheck.constantFrom("\n", "\r\n")
  const line = FastCheck.string({ unit: FastCheck.constantFrom("a", "b", ":", " "), minLength: 1, maxLength: 12 })
  /** An event: lines (none blank), each with its end, then a blank line. */
  const event = FastCheck.array(FastCheck.tuple(line, lineEnd), { minLength: 1, maxLength: 4 })

  it.prop(
    "cuts a stream exactly when one event's lines hold more than the bound, however it is split into chunks",
    [
      FastCheck.array(FastCheck.tuple(event, lineEnd), { maxLength: 6 }),
      FastCheck.nat({ max: 30 }),
      FastCheck.array(
        FastCheck.nat({ max: 200 }),
        { maxLength: 8 }
      )
    ],
    ([events, max, cuts]) => {
      const text = events.map(([lines, end]) => lines.map(([l, e]) => l + e).join("") + end).join("")
      const largest = Math.max(
        0,
        ...events.map(([lines]) => lines.reduce((sum, [l]) => sum + l.length, 0))
      )
      const bytes = new TextEncoder().encode(text)
      const at = [...new Set(cuts.map((cut) => Math.min(cut, bytes.length)))].sort((a, b) => a - b)
      const count = messageCounter(true, max)
      let cut = false
      let from = 0
      for (const to of [...at, bytes.length]) {
        if (count(bytes.subarray(from, to)) !== undefined) cut = true
        from = to
      }
      assert.strictEqual(cut, largest > max)
    },
    { fastCheck: { numRuns: 300 } }
  )
})
