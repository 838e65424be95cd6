/**
 * Answers given before a request's body is read whole close the connection:
 * the chat handler's refusals by declared length (413), content type (415),
 * a bad option (500), a body past the drained limit (413) or late (408), and
 * every answer of the messages handler to a request that sends a body. A
 * raw client sends the head and part of the body, then waits: the answer
 * comes with `Connection: close` and the server closes the socket, instead
 * of keeping it open for the rest until Node's `requestTimeout`. A refusal
 * after the whole body was read keeps the connection for the next request.
 */
import { LanguageModel } from "@effect/ai"
import { HttpRouter } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Agent, UiMessageStream } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect } from "effect"
import * as Http from "node:http"
import * as Net from "node:net"

/** What a raw client saw. */
interface Seen {
  readonly status: number | undefined
  /** The answer's status line and headers, in lower case. */
  readonly head: string
  /** Whether the server closed the connection (before `giveUpMs`). */
  readonly closed: boolean
}

/**
 * A raw client: sends `head` (the request line and headers, without the blank line), then `body` (part of the
 * body the head declares), then a byte every 200 ms, as a slow client does (so that no idle timeout of the
 * server closes the connection). Gives what came once the server closed the connection, or after 10 s.
 */
const rawRequest = (port: number, head: string, body: string | Buffer) =>
  Effect.async<Seen>((resume) => {
    const socket = Net.connect(port, "127.0.0.1")
    let received = ""
    let done = false
    const finish = (closed: boolean) => {
      if (done) return
      done = true
      clearTimeout(giveUp)
      clearInterval(trickle)
      socket.destroy()
      const status = /^HTTP\/1\.1 (\d{3})/.exec(received)?.[1]
      resume(Effect.succeed({
        status: status === undefined ? undefined : Number(status),
        head: received.split("\r\n\r\n", 1)[0]!.toLowerCase(),
        closed
      }))
    }
    socket.setEncoding("latin1")
    socket.on("data", (data: string) => void (received += data))
    socket.on("end", () => finish(true))
    socket.on("close", () => finish(true))
    // the server closes while this client still sends: a reset after the answer is a close
    socket.on("error", () => finish(true))
    socket.write(`${head}\r\n\r\n`)
    socket.write(body)
    const trickle = setInterval(() => socket.destroyed || socket.write(" "), 200)
    // generous: the server closes at once; without the fix it would wait minutes
    const giveUp = setTimeout(() => finish(false), 10_000)
    return Effect.sync(() => finish(false))
  })

const chat = (id: string, text: string) =>
  JSON.stringify({ id, messages: [{ id: "m1", role: "user", parts: [{ type: "text", text }] }] })

/** The agent, served with `options` on 127.0.0.1: the chat handler as the app, or on routes when `routed`. */
const serve = (options: UiMessageStream.Options, routed: boolean) =>
  Effect.gen(function*() {
    const { model } = yield* ScriptedModel.make(Array.from({ length: 5 }, () => ScriptedModel.text("hi")))
    const agent = yield* Agent.make({}).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
    const nodeServer = Http.createServer()
    const server = yield* NodeHttpServer.make(() => nodeServer, { port: 0, host: "127.0.0.1" })
    const app = UiMessageStream.toHttpApp(agent, options)
    yield* server.serve(
      routed
        ? HttpRouter.empty.pipe(
          HttpRouter.post("/api/chat", app),
          HttpRouter.get("/api/chat/messages", UiMessageStream.messagesHttpApp(agent, { authorize: options.authorize }))
        )
        : app
    )
    yield* Effect.addFinalizer(() => Effect.sync(() => nodeServer.closeAllConnections()))
    return server.address._tag === "TcpAddress" ? server.address.port : 0
  })

const post = (port: number, headers: ReadonlyArray<string>) =>
  [`POST /api/chat HTTP/1.1`, `Host: 127.0.0.1:${port}`, ...headers].join("\r\n")

/** Each early answer: the options, the head's headers, the part of the body sent, the status expected. */
const early: ReadonlyArray<{
  readonly label: string
  readonly options: UiMessageStream.Options
  readonly headers: ReadonlyArray<string>
  readonly body: string | Buffer
  /** `undefined`: the connection is closed, with or without an answer. */
  readonly status: number | undefined
}> = [
  {
    label: "415: a body not declared as JSON",
    options: { authorize: UiMessageStream.allowAll, bodyTimeout: "5 minutes" },
    headers: ["Content-Type: text/plain", "Content-Length: 1000"],
    body: "{\"id\":",
    status: 415
  },
  {
    label: "413: a declared length over maxBodyBytes",
    options: { authorize: UiMessageStream.allowAll, maxBodyBytes: 100, bodyTimeout: "5 minutes" },
    headers: ["Content-Type: application/json", "Content-Length: 1000"],
    body: "{\"id\":",
    status: 413
  },
  {
    // past the limit and the 16 MiB drained after it, the handler stops reading: the connection is closed
    label: "a chunked body past maxBodyBytes and the drained limit",
    options: { authorize: UiMessageStream.allowAll, maxBodyBytes: 10, bodyTimeout: "5 minutes" },
    headers: ["Content-Type: application/json", "Transfer-Encoding: chunked"],
    body: (() => {
      const size = 17 * 1024 * 1024
      return Buffer.concat([Buffer.from(`${size.toString(16)}\r\n`), Buffer.alloc(size, " ")])
    })(),
    status: undefined
  },
  {
    label: "408: a body still coming after bodyTimeout",
    options: { authorize: UiMessageStream.allowAll, bodyTimeout: "300 millis" },
    headers: ["Content-Type: application/json", "Content-Length: 1000"],
    body: "{\"id\":",
    status: 408
  },
  {
    label: "500: an option that is no limit (every request refused before its body is read)",
    options: { authorize: UiMessageStream.allowAll, maxBodyBytes: 0 },
    headers: ["Content-Type: application/json", "Content-Length: 1000"],
    body: "{\"id\":",
    status: 500
  }
]

describe("UiMessageStream.toHttpApp: an answer before the body is read whole closes the connection", () => {
  for (const routed of [false, true]) {
    for (const { body, headers, label, options, status } of early) {
      it.scopedLive(`${routed ? "behind HttpRouter" : "as the app"}, ${label}`, () =>
        Effect.gen(function*() {
          const port = yield* serve(options, routed)
          const seen = yield* rawRequest(port, post(port, headers), body)
          if (status !== undefined || seen.status !== undefined) {
            assert.strictEqual(seen.status, status ?? 413, seen.head)
            assert.include(seen.head, "connection: close")
          }
          assert.isTrue(seen.closed, "the server kept the connection open")
        }), { timeout: 60_000 })
    }
  }

  it.scopedLive(
    "a refusal after the whole body was read keeps the connection: a second request is answered on it",
    () =>
      Effect.gen(function*() {
        const port = yield* serve({ authorize: () => Effect.succeed(false) }, false)
        const body = chat("c1", "hello")
        const request = `${
          post(port, ["Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`])
        }\r\n\r\n${body}`
        // two whole requests on one connection, then this client waits
        const answers = yield* Effect.async<string>((resume) => {
          const socket = Net.connect(port, "127.0.0.1")
          let received = ""
          socket.setEncoding("latin1")
          socket.on("data", (data: string) => {
            received += data
            if ((received.match(/HTTP\/1\.1 403/g) ?? []).length === 2) {
              socket.destroy()
              resume(Effect.succeed(received))
            }
          })
          socket.on("close", () => resume(Effect.succeed(received)))
          socket.write(request + request)
          return Effect.sync(() => socket.destroy())
        })
        assert.strictEqual((answers.match(/HTTP\/1\.1 403/g) ?? []).length, 2, answers)
        assert.notInclude(answers.toLowerCase(), "connection: close")
      }),
    { timeout: 60_000 }
  )
})

describe("UiMessageStream.messagesHttpApp: a request that sends a body gets its answer, then the connection closes", () => {
  for (
    const [label, authorize, path, status] of [
      ["400: no id", UiMessageStream.allowAll, "/api/chat/messages", 400],
      ["403: not allowed", () => Effect.succeed(false), "/api/chat/messages?id=c1", 403],
      ["200: the messages", UiMessageStream.allowAll, "/api/chat/messages?id=c1", 200]
    ] as const
  ) {
    it.scopedLive(label, () =>
      Effect.gen(function*() {
        const port = yield* serve({ authorize }, true)
        const head = [`GET ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, "Content-Length: 1000"].join("\r\n")
        const seen = yield* rawRequest(port, head, "{\"a\":")
        assert.strictEqual(seen.status, status, seen.head)
        assert.include(seen.head, "connection: close")
        assert.isTrue(seen.closed, "the server kept the connection open")
      }), { timeout: 60_000 })
  }
})
