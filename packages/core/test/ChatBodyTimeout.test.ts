/**
 * `UiMessageStream.toHttpApp`'s `bodyTimeout`, served on 127.0.0.1: a body
 * that trickles in (slowloris) is refused with 408 and its connection closed
 * once the whole body has taken longer than the timeout, however steadily it
 * comes; the handler's fibers end with the answer.
 */
import { LanguageModel } from "@effect/ai"
import { HttpRouter } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Agent, UiMessageStream } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Supervisor } from "effect"
import * as Http from "node:http"
import { exchange } from "./support/rawHttp.js"

/**
 * The agent, on a model answering "reply N" to its N-th call, served with `options` on 127.0.0.1: as the app
 * itself, or on a route of an `HttpRouter` (which runs its handlers interruptible) when `routed`.
 */
const setup = (options: UiMessageStream.Options, routed = false) =>
  Effect.gen(function*() {
    const { model, recorder } = yield* ScriptedModel.make(
      Array.from({ length: 5 }, (_, i) => ScriptedModel.text(`reply ${i + 1}`))
    )
    const agent = yield* Agent.make({}).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
    const nodeServer = Http.createServer()
    const server = yield* NodeHttpServer.make(() => nodeServer, { port: 0, host: "127.0.0.1" })
    // every fiber the server starts for a request (and what they fork) is tracked
    const fibers = yield* Supervisor.track
    const app = UiMessageStream.toHttpApp(agent, options)
    yield* server.serve(routed ? HttpRouter.empty.pipe(HttpRouter.post("/api/chat", app)) : app).pipe(
      Effect.supervised(fibers)
    )
    yield* Effect.addFinalizer(() => Effect.sync(() => nodeServer.closeAllConnections()))
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    const connections = Effect.async<number>((resume) => {
      nodeServer.getConnections((_, count) => resume(Effect.succeed(count)))
    })
    return { port, url: `http://127.0.0.1:${port}/api/chat`, fibers, connections, requests: recorder.requests }
  })

const chat = (id: string, text: string) =>
  JSON.stringify({ id, messages: [{ id: "m1", role: "user", parts: [{ type: "text", text }] }] })

/**
 * A raw client posting a body in `pieces`, `everyMs` apart, with a Content-Length (or chunked when `chunked`); given
 * `declaredBytes`, the body is never finished. Gives what came once the server closes the connection or a whole
 * streamed answer came, or after `giveUpMs` (10 s).
 */
const trickle = (
  port: number,
  options: {
    readonly pieces: ReadonlyArray<string>
    readonly everyMs: number
    readonly declaredBytes?: number | undefined
    readonly chunked?: boolean | undefined
    readonly giveUpMs?: number | undefined
  }
) => {
  const length = options.declaredBytes ?? options.pieces.reduce((sum, piece) => sum + Buffer.byteLength(piece), 0)
  const head = `POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
    (options.chunked ? "Transfer-Encoding: chunked\r\n" : `Content-Length: ${length}\r\n`) + "\r\n"
  const pieces = options.pieces.map((piece, i) =>
    options.chunked
      ? `${Buffer.byteLength(piece).toString(16)}\r\n${piece}\r\n` +
        (i === options.pieces.length - 1 && options.declaredBytes === undefined ? "0\r\n\r\n" : "")
      : piece
  )
  return exchange(port, [head, ...pieces], {
    gapMs: options.everyMs,
    giveUpMs: options.giveUpMs,
    // a whole streamed answer (the connection is kept alive after it)
    until: (received) => received.startsWith("HTTP/1.1 200") && received.endsWith("\r\n0\r\n\r\n")
  })
}

/** One byte at a time of a body that never ends. */
const endless = Array.from({ length: 1000 }, () => " ")

/** Waits until `check` holds, trying every 50 ms for up to 10 s; fails with `label` if it never does. */
const eventually = (label: string, check: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      if (yield* check) return
      yield* Effect.sleep("50 millis")
    }
    assert.fail(label)
  })

/** Posts a chat request the ordinary way, on a connection of its own closed after it, and gives the status and text. */
const post = (url: string, body: string) =>
  Effect.async<{ readonly status: number; readonly text: string }>((resume) => {
    const request = Http.request(
      url,
      { method: "POST", agent: false, headers: { "content-type": "application/json" } },
      (response) => {
        const chunks: Array<Buffer> = []
        response.on("data", (chunk: Buffer) => chunks.push(chunk))
        response.on(
          "end",
          () => resume(Effect.succeed({ status: response.statusCode!, text: Buffer.concat(chunks).toString() }))
        )
      }
    )
    request.on("error", (error) => resume(Effect.die(error)))
    request.end(body)
    return Effect.sync(() => request.destroy())
  })

describe("toHttpApp: bodyTimeout", () => {
  it.live(
    "a body trickling one byte every 300 ms gets 408 and a closed connection; another client is served",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const { connections, fibers, port, url } = yield* setup({
          authorize: UiMessageStream.allowAll,
          bodyTimeout: "1 second"
        })
        const slow = yield* Effect.fork(trickle(port, { pieces: endless, everyMs: 300, declaredBytes: 100_000 }))
        const other = yield* post(url, chat("other", "hi"))
        assert.strictEqual(other.status, 200)
        assert.include(other.text, "\"type\":\"finish\"")
        const seen = yield* slow
        assert.strictEqual(seen.status, 408)
        assert.include(seen.text, "The chat request's body did not arrive within 1s")
        assert.match(seen.head, /\r\nconnection: close\r\n/i)
        assert.isTrue(seen.closed, "the server closed the connection")
        yield* eventually("every handler fiber ended", Effect.map(fibers.value, (running) => running.length === 0))
        yield* eventually("no connection is left open", Effect.map(connections, (count) => count === 0))
      })),
    30_000
  )

  it.live(
    "a body trickling without a Content-Length (chunked), or not coming at all, is cut the same",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const { fibers, port } = yield* setup({ authorize: UiMessageStream.allowAll, bodyTimeout: 1000 })
        for (const [label, chunked, pieces] of [["chunked", true, endless], ["headers only", false, []]] as const) {
          const seen = yield* trickle(port, { pieces, everyMs: 300, chunked, declaredBytes: 100_000 })
          assert.strictEqual(seen.status, 408, label)
          assert.isTrue(seen.closed, label)
        }
        yield* eventually("every handler fiber ended", Effect.map(fibers.value, (running) => running.length === 0))
      })),
    30_000
  )

  it.live(
    "a client that goes away in the middle of its body leaves no handler fiber behind",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const { connections, fibers, port } = yield* setup({
          authorize: UiMessageStream.allowAll,
          bodyTimeout: "20 seconds"
        })
        const seen = yield* trickle(port, { pieces: endless, everyMs: 100, declaredBytes: 100_000, giveUpMs: 500 })
        assert.isUndefined(seen.status)
        yield* eventually("every handler fiber ended", Effect.map(fibers.value, (running) => running.length === 0))
        yield* eventually("no connection is left open", Effect.map(connections, (count) => count === 0))
      })),
    30_000
  )

  it.live(
    "served on a route of an HttpRouter, a trickling body gets 408 the same",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const { connections, fibers, port } = yield* setup({
          authorize: UiMessageStream.allowAll,
          bodyTimeout: "1 second"
        }, true)
        const seen = yield* trickle(port, { pieces: endless, everyMs: 300, declaredBytes: 100_000 })
        assert.strictEqual(seen.status, 408)
        assert.isTrue(seen.closed)
        yield* eventually("every handler fiber ended", Effect.map(fibers.value, (running) => running.length === 0))
        yield* eventually("no connection is left open", Effect.map(connections, (count) => count === 0))
      })),
    30_000
  )

  it.live(
    "a slow body that arrives whole within the timeout is served, with or without a Content-Length",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const { port } = yield* setup({ authorize: UiMessageStream.allowAll, bodyTimeout: "20 seconds" })
        const body = chat("slow-but-in-time", "hi")
        const pieces = [body.slice(0, 10), body.slice(10, 20), body.slice(20, 30), body.slice(30)]
        for (const chunked of [false, true]) {
          const seen = yield* trickle(port, { pieces, everyMs: 200, chunked })
          assert.strictEqual(seen.status, 200, `chunked: ${chunked}`)
          assert.include(seen.text, "\"type\":\"finish\"")
        }
      })),
    30_000
  )

  it.live(
    "50 trickling clients at once all get 408, and no handler fiber or connection is left",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const { connections, fibers, port, requests } = yield* setup({
          authorize: UiMessageStream.allowAll,
          bodyTimeout: "1 second"
        })
        const seen = yield* Effect.forEach(
          Array.from({ length: 50 }, (_, i) => i),
          (i) => trickle(port, { pieces: endless, everyMs: 300, chunked: i % 2 === 0, declaredBytes: 100_000 }),
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual(seen.map((client) => client.status), seen.map(() => 408))
        assert.isTrue(seen.every((client) => client.closed))
        assert.deepStrictEqual(yield* requests, [])
        yield* eventually("every handler fiber ended", Effect.map(fibers.value, (running) => running.length === 0))
        yield* eventually("no connection is left open", Effect.map(connections, (count) => count === 0))
      })),
    60_000
  )

  for (
    const bad of [0, -1, Number.NaN, Infinity, "forever", "0 seconds", -1n, "25 days", Number.MAX_VALUE, {}, null]
  ) {
    it.live(`a bodyTimeout of ${String(bad)} is no limit: every request is refused with 500`, () =>
      Effect.scoped(Effect.gen(function*() {
        const { requests, url } = yield* setup({
          authorize: UiMessageStream.allowAll,
          bodyTimeout: bad as UiMessageStream.Options["bodyTimeout"]
        })
        const response = yield* post(url, chat("t", "hi"))
        assert.strictEqual(response.status, 500)
        assert.include(response.text, "bodyTimeout must be a duration above zero, at most 24 days")
        assert.deepStrictEqual(yield* requests, [])
      })))
  }

  it.effect("a refused late body is a ChatRequestError with reason Timeout, naming the timeout", () =>
    Effect.sync(() => {
      const error = new UiMessageStream.ChatRequestError({ reason: "Timeout", timeoutMillis: 30_000 })
      assert.strictEqual(error.message, "The chat request's body did not arrive within 30s")
      // a value no handler has still gives a message
      for (const odd of [Number.MAX_VALUE, -1, Number.NaN]) {
        assert.strictEqual(
          new UiMessageStream.ChatRequestError({ reason: "Timeout", timeoutMillis: odd }).message,
          `The chat request's body did not arrive within ${odd} ms`
        )
      }
    }))
})
