/**
 * The inspector's request bodies are read within a limit and a deadline
 * (`maxBodyBytes`, `bodyTimeout`), and every answer given before a body was
 * read whole closes the connection: 421, 403 and 401 (refused before the
 * body), 413 and 408 (refused while it comes), and the answer to a reading
 * request that sends a body. A raw client sends the head and part of the
 * body, then a byte every 200 ms as a slow client does: the answer comes
 * with `Connection: close` and the server closes the socket, instead of
 * keeping it open until Node's `requestTimeout`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as Net from "node:net"
import * as Inspector from "../src/Inspector.js"
import { approvalScript, pendingOf, setup } from "./fixtures.js"

/** What a raw client saw. */
interface Seen {
  readonly status: number | undefined
  /** The answer's status line and headers, in lower case. */
  readonly head: string
  /** Whether the server closed the connection (before 10 s). */
  readonly closed: boolean
}

/**
 * A raw client: sends `head` (the request line and headers, without the blank line) and `body` (part of the
 * body the head declares), then a byte every 200 ms (so that no idle timeout of the server closes the
 * connection). Gives what came once the server closed the connection, or after 10 s.
 */
const rawRequest = (port: number, head: string, body: string) =>
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
    socket.write(`${head}\r\n\r\n${body}`)
    const trickle = setInterval(() => socket.destroyed || socket.write(" "), 200)
    // generous: the server closes at once; without the fix it would wait minutes
    const giveUp = setTimeout(() => finish(false), 10_000)
    return Effect.sync(() => finish(false))
  })

const head = (method: string, path: string, headers: ReadonlyArray<string>) =>
  [`${method} ${path} HTTP/1.1`, ...headers].join("\r\n")

describe("Inspector: an answer before the body is read whole closes the connection", () => {
  const cases: ReadonlyArray<{
    readonly label: string
    readonly request: (port: number, token: string) => string
    readonly status: number
  }> = [
    {
      label: "421: a Host it does not serve",
      request: (_, token) =>
        head("POST", `/api/threads/t1/resume?token=${token}`, ["Host: evil.example", "Content-Length: 1000"]),
      status: 421
    },
    {
      label: "403: a state-changing request from a foreign Origin",
      request: (port, token) =>
        head("POST", `/api/threads/t1/resume?token=${token}`, [
          `Host: 127.0.0.1:${port}`,
          "Origin: http://evil.example",
          "Content-Length: 1000"
        ]),
      status: 403
    },
    {
      label: "401: no token",
      request: (port) => head("POST", "/api/threads/t1/resume", [`Host: 127.0.0.1:${port}`, "Content-Length: 1000"]),
      status: 401
    },
    {
      label: "413: a declared length over maxBodyBytes",
      request: (port, token) =>
        head("POST", `/api/threads/t1/resume?token=${token}`, [`Host: 127.0.0.1:${port}`, "Content-Length: 5000"]),
      status: 413
    },
    {
      label: "413: a chunked body past maxBodyBytes",
      request: (port, token) =>
        `${
          head("POST", `/api/threads/t1/resume?token=${token}`, [
            `Host: 127.0.0.1:${port}`,
            "Transfer-Encoding: chunked"
          ])
        }\r\n\r\n${(8192).toString(16)}\r\n${" ".repeat(5000)}`,
      status: 413
    },
    {
      label: "408: a body still coming after bodyTimeout",
      request: (port, token) =>
        head("POST", `/api/threads/t1/resume?token=${token}`, [`Host: 127.0.0.1:${port}`, "Content-Length: 1000"]),
      status: 408
    },
    {
      label: "a reading request that sends a body (its body is never read)",
      request: (port, token) =>
        head("GET", `/api/threads/t1?token=${token}`, [`Host: 127.0.0.1:${port}`, "Content-Length: 1000"]),
      status: 200
    }
  ]
  for (const { label, request, status } of cases) {
    it.scopedLive(label, () =>
      Effect.gen(function*() {
        const { agent, inspector, token } = yield* setup(approvalScript, {
          inspector: { maxBodyBytes: 4096, bodyTimeout: "500 millis" }
        })
        yield* agent.run("Read my notes", { threadId: "t1" })
        const text = request(inspector.port, token)
        const [requestHead, ...rest] = text.split("\r\n\r\n")
        const seen = yield* rawRequest(inspector.port, requestHead!, rest.join("\r\n\r\n") || "{\"key\":")
        assert.strictEqual(seen.status, status, seen.head)
        assert.include(seen.head, "connection: close")
        assert.isTrue(seen.closed, "the server kept the connection open")
        assert.isTrue(Option.isSome(yield* pendingOf(agent, "t1")), "nothing was decided")
      }), { timeout: 60_000 })
  }

  it.scopedLive("a body read whole keeps the connection: the answer has no Connection: close", () =>
    Effect.gen(function*() {
      const { agent, inspector, token } = yield* setup(approvalScript, { inspector: { bodyTimeout: "500 millis" } })
      yield* agent.run("Read my notes", { threadId: "t1" })
      const body = "{}"
      const seen = yield* Effect.async<string>((resume) => {
        const socket = Net.connect(inspector.port, "127.0.0.1")
        let received = ""
        socket.setEncoding("latin1")
        socket.on("data", (data: string) => {
          received += data
          if (/\r\n\r\n/.test(received)) {
            socket.destroy()
            resume(Effect.succeed(received))
          }
        })
        socket.on("close", () => resume(Effect.succeed(received)))
        socket.write(
          `${
            head("POST", `/api/threads/t1/resume?token=${token}`, [
              `Host: 127.0.0.1:${inspector.port}`,
              "Content-Type: application/json",
              `Content-Length: ${body.length}`
            ])
          }\r\n\r\n${body}`
        )
        return Effect.sync(() => socket.destroy())
      })
      assert.match(seen, /^HTTP\/1\.1 400/)
      assert.notInclude(seen.toLowerCase(), "connection: close")
    }))

  it.scopedLive("fails with InspectorError when bodyTimeout is not a duration above zero, at most 24 days", () =>
    Effect.gen(function*() {
      for (const bodyTimeout of ["0 millis", "25 days", "soon", -1] as const) {
        const error = yield* Effect.flip(setup(approvalScript, { inspector: { bodyTimeout: bodyTimeout as never } }))
        assert.instanceOf(error, Inspector.InspectorError)
        assert.include(error.message, "bodyTimeout")
      }
    }))
})
