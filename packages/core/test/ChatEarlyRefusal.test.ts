/**
 * Answers given before a request's body is read whole close the connection:
 * the chat handler's refusals by declared length (413), content type (415),
 * a bad option (500), a body past the drained limit (413) or late (408), and
 * every answer of the messages handler to a request that sends a body. A
 * raw client sends the head and part of the body, then waits: the answer
 * comes with `Connection: close` and the server closes the socket, instead
 * of keeping it open for the rest until Node's `requestTimeout`. A refusal
 * after the whole body was read keeps the connection for the next request.
 * A request sent after a refused one on the same connection (pipelined in
 * one write, or written right after the refused body) never reaches the
 * handler: the model is not called and no thread is made.
 */
import { LanguageModel } from "@effect/ai"
import { HttpRouter } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Agent, UiMessageStream } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, FastCheck, Option } from "effect"
import * as Http from "node:http"
import { exchange, partialRequest, wholeRequest } from "./support/rawHttp.js"

const chat = (id: string, text: string) =>
  JSON.stringify({ id, messages: [{ id: "m1", role: "user", parts: [{ type: "text", text }] }] })

/**
 * The agent, served with `options` on 127.0.0.1: the chat handler as the app, or on routes when `routed`. Gives
 * the port, the agent, and how many calls its model received.
 */
const serve = (options: UiMessageStream.Options, routed: boolean) =>
  Effect.gen(function*() {
    const { model, recorder } = yield* ScriptedModel.make(Array.from({ length: 5 }, () => ScriptedModel.text("hi")))
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
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return { port, agent, modelCalls: Effect.map(recorder.requests, (requests) => requests.length) }
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
  },
  {
    // a typo of `bodyTimeout` would leave the default of 5 minutes in place
    label: "500: an option the handler does not know",
    options: { authorize: UiMessageStream.allowAll, bodyTimout: "1 second" } as UiMessageStream.Options,
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
          const { port } = yield* serve(options, routed)
          const seen = yield* partialRequest(port, post(port, headers), body)
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
        const { port } = yield* serve({ authorize: () => Effect.succeed(false) }, false)
        const body = chat("c1", "hello")
        const request = `${
          post(port, ["Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`])
        }\r\n\r\n${body}`
        // two whole requests on one connection, then this client waits
        const seen = yield* exchange(port, [request + request], {
          until: (received) => (received.match(/HTTP\/1\.1 403/g) ?? []).length === 2
        })
        const answers = seen.text
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
        const { port } = yield* serve({ authorize }, true)
        const head = [`GET ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, "Content-Length: 1000"].join("\r\n")
        const seen = yield* partialRequest(port, head, "{\"a\":")
        assert.strictEqual(seen.status, status, seen.head)
        assert.include(seen.head, "connection: close")
        assert.isTrue(seen.closed, "the server kept the connection open")
      }), { timeout: 60_000 })
  }
})

/** Two requests: a refused one, then `chat` as a valid chat request on the same connection. */
const pipelined: ReadonlyArray<{
  readonly label: string
  readonly options: UiMessageStream.Options
  /** The refused request, whole (its body too): the valid one is sent right after it. */
  readonly refused: (port: number) => string
  readonly status: number
  /** Whether the refused request goes to the messages handler (then the chat handler is routed). */
  readonly routed?: boolean
}> = [
  {
    label: "415: a body not declared as JSON",
    options: { authorize: UiMessageStream.allowAll },
    refused: (port) => wholeRequest(post(port, ["Content-Type: text/plain"]), chat("c1", "first")),
    status: 415
  },
  {
    label: "415: a chunked body not declared as JSON",
    options: { authorize: UiMessageStream.allowAll },
    refused: (port) =>
      `${post(port, ["Content-Type: text/plain", "Transfer-Encoding: chunked"])}\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
    status: 415
  },
  {
    label: "415 with Expect: 100-continue",
    options: { authorize: UiMessageStream.allowAll },
    refused: (port) => wholeRequest(post(port, ["Content-Type: text/plain", "Expect: 100-continue"]), "{}"),
    status: 415
  },
  {
    label: "413: a declared length over maxBodyBytes",
    options: { authorize: UiMessageStream.allowAll, maxBodyBytes: 100 },
    refused: (port) => wholeRequest(post(port, ["Content-Type: application/json"]), " ".repeat(200)),
    status: 413
  },
  {
    label: "413: a chunked body read past maxBodyBytes",
    options: { authorize: UiMessageStream.allowAll, maxBodyBytes: 100 },
    refused: (port) =>
      `${post(port, ["Content-Type: application/json", "Transfer-Encoding: chunked"])}\r\n\r\n` +
      `c8\r\n${" ".repeat(200)}\r\n0\r\n\r\n`,
    status: 413
  },
  {
    label: "the messages handler's answer to a request that sends a body",
    options: { authorize: UiMessageStream.allowAll },
    refused: (port) =>
      wholeRequest([`GET /api/chat/messages?id=c1 HTTP/1.1`, `Host: 127.0.0.1:${port}`].join("\r\n"), "{}"),
    status: 200,
    routed: true
  }
]

describe("UiMessageStream: no request after an answer with Connection: close reaches the handler", () => {
  // in two writes: the refused request but the last bytes of its body, then those bytes and the valid request
  // (a client that sends the next request right after the body, while the refusal may still be decided)
  for (const [writes, label] of [[1, "in one write"], [2, "in two writes"]] as const) {
    for (const { label: refusal, options, refused, routed, status } of pipelined) {
      it.scopedLive(
        `${refusal}, then a valid chat request on the same connection, ${label}`,
        () =>
          Effect.gen(function*() {
            const { agent, modelCalls, port } = yield* serve(options, routed ?? false)
            const valid = wholeRequest(post(port, ["Content-Type: application/json"]), chat("c2", "second"))
            const first = refused(port)
            const seen = yield* exchange(
              port,
              writes === 1 ? [first + valid] : [first.slice(0, -4), first.slice(-4) + valid],
              { gapMs: 100 }
            )
            assert.strictEqual(seen.status, status, seen.head)
            assert.include(seen.head, "connection: close")
            assert.strictEqual(seen.answers, 1, seen.text)
            assert.isTrue(seen.closed, "the server kept the connection open")
            // a run would have started at once: give it time to show
            yield* Effect.sleep("200 millis")
            assert.strictEqual(yield* modelCalls, 0, "the model was called")
            assert.isTrue(Option.isNone(yield* agent.thread("c2")), "a thread was created")
          }),
        { timeout: 60_000 }
      )
    }
  }
})

describe("UiMessageStream: requests pipelined on one connection", () => {
  /** A valid chat request (runs the model), one `authorize` refuses after the body (403, kept), or a 415 (closes). */
  const kind = FastCheck.constantFrom("valid", "forbidden", "refused")
  it.live.prop(
    "run, in order, up to the first answer that closes the connection, and no further",
    { kinds: FastCheck.array(kind, { maxLength: 5 }) },
    ({ kinds }) =>
      Effect.scoped(Effect.gen(function*() {
        // a 415 last, so that the server closes the connection whatever came before
        const sequence = [...kinds, "refused" as const]
        const { agent, modelCalls, port } = yield* serve({
          authorize: (_, threadId) => Effect.succeed(!threadId.startsWith("no")),
          bodyTimeout: "10 seconds"
        }, false)
        const requests = sequence.map((kind, i) =>
          wholeRequest(
            post(port, [kind === "refused" ? "Content-Type: text/plain" : "Content-Type: application/json"]),
            chat(kind === "forbidden" ? `no${i}` : `c${i}`, "hello")
          )
        )
        const seen = yield* exchange(port, [requests.join("")])
        const closing = sequence.indexOf("refused")
        const before = sequence.slice(0, closing)
        assert.isTrue(seen.closed, "the server kept the connection open")
        assert.strictEqual(seen.answers, closing + 1, seen.text)
        assert.deepStrictEqual(
          [...seen.text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => Number(match[1])),
          [...before.map((kind) => kind === "valid" ? 200 : 403), 415]
        )
        assert.strictEqual(yield* modelCalls, before.filter((kind) => kind === "valid").length)
        for (const [i, kind] of sequence.entries()) {
          const ran = i < closing && kind === "valid"
          assert.strictEqual(Option.isSome(yield* agent.thread(`c${i}`)), ran, `request ${i} (${kind})`)
        }
      })),
    { fastCheck: { numRuns: 12 }, timeout: 120_000 }
  )
})
