/**
 * The inspector's request bodies are read within a limit and a deadline
 * (`maxBodyBytes`, `bodyTimeout`), and every answer given before a body was
 * read whole closes the connection: 421, 403 and 401 (refused before the
 * body), 413 and 408 (refused while it comes), and the answer to a reading
 * request that sends a body. A raw client sends the head and part of the
 * body, then a byte every 200 ms as a slow client does: the answer comes
 * with `Connection: close` and the server closes the socket, instead of
 * keeping it open until Node's `requestTimeout`. A request sent after such
 * an answer on the same connection reaches no route: a refused request then
 * a `send` starts no run.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { exchange, partialRequest, wholeRequest } from "../../core/test/support/rawHttp.js"
import * as Inspector from "../src/Inspector.js"
import { approvalScript, eventually, pendingOf, setup } from "./fixtures.js"

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
        const seen = yield* partialRequest(inspector.port, requestHead!, rest.join("\r\n\r\n") || "{\"key\":")
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
      const seen = yield* exchange(inspector.port, [
        wholeRequest(
          head("POST", `/api/threads/t1/resume?token=${token}`, [
            `Host: 127.0.0.1:${inspector.port}`,
            "Content-Type: application/json"
          ]),
          "{}"
        )
      ], { until: (received) => received.includes("\r\n\r\n") })
      assert.strictEqual(seen.status, 400, seen.head)
      assert.notInclude(seen.head, "connection: close")
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

describe("Inspector: no request after an answer with Connection: close reaches a route", () => {
  /** Requests answered with `Connection: close`, whole (their bodies too). */
  const refused: ReadonlyArray<{
    readonly label: string
    readonly request: (port: number, token: string) => string
    readonly status: number
  }> = [
    {
      label: "421: a Host it does not serve",
      request: (_, token) =>
        wholeRequest(head("POST", `/api/threads/t1/send?token=${token}`, ["Host: evil.example"]), "{}"),
      status: 421
    },
    {
      label: "403: a foreign Origin",
      request: (port, token) =>
        wholeRequest(
          head("POST", `/api/threads/t1/send?token=${token}`, [
            `Host: 127.0.0.1:${port}`,
            "Origin: http://evil.example"
          ]),
          "{}"
        ),
      status: 403
    },
    {
      label: "401: no token, with a body",
      request: (port) => wholeRequest(head("POST", "/api/threads/t1/send", [`Host: 127.0.0.1:${port}`]), "{}"),
      status: 401
    },
    {
      label: "413: a declared length over maxBodyBytes",
      request: (port, token) =>
        wholeRequest(
          head("POST", `/api/threads/t1/send?token=${token}`, [`Host: 127.0.0.1:${port}`]),
          " ".repeat(5000)
        ),
      status: 413
    },
    {
      label: "413: a chunked body read past maxBodyBytes",
      request: (port, token) =>
        `${
          head("POST", `/api/threads/t1/send?token=${token}`, [
            `Host: 127.0.0.1:${port}`,
            "Transfer-Encoding: chunked"
          ])
        }\r\n\r\n${(5000).toString(16)}\r\n${" ".repeat(5000)}\r\n0\r\n\r\n`,
      status: 413
    },
    {
      label: "a reading request that sends a body",
      request: (port, token) => wholeRequest(head("GET", `/?token=${token}`, [`Host: 127.0.0.1:${port}`]), "{}"),
      status: 200
    },
    {
      label: "404: a reading request for no route, with a body",
      request: (port, token) => wholeRequest(head("GET", `/nowhere?token=${token}`, [`Host: 127.0.0.1:${port}`]), "{}"),
      status: 404
    }
  ]
  /** A valid request that starts a run on thread `t2` (its model's first call). */
  const send = (port: number, token: string) =>
    wholeRequest(
      head("POST", `/api/threads/t2/send?token=${token}`, [
        `Host: 127.0.0.1:${port}`,
        "Content-Type: application/json"
      ]),
      JSON.stringify({ message: "Read my notes" })
    )

  // in two writes: the refused request but the last bytes of its body, then those bytes and the valid request
  for (const [writes, label] of [[1, "in one write"], [2, "in two writes"]] as const) {
    for (const { label: refusal, request, status } of refused) {
      it.scopedLive(`${refusal}, then a valid request on the same connection, ${label}`, () =>
        Effect.gen(function*() {
          const { agent, inspector, modelCalls, token } = yield* setup(approvalScript, {
            inspector: { maxBodyBytes: 4096, bodyTimeout: "5 seconds" }
          })
          const first = request(inspector.port, token)
          const valid = send(inspector.port, token)
          const seen = yield* exchange(
            inspector.port,
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
          assert.isTrue(Option.isNone(yield* agent.thread("t2")), "a thread was created")
        }), { timeout: 60_000 })
    }
  }

  it.scopedLive(
    "a 401 to a request without a body keeps the connection: the valid request after it runs",
    () =>
      Effect.gen(function*() {
        const { inspector, modelCalls, token } = yield* setup(approvalScript)
        const unauthorized = head("GET", "/api/threads/t1", [`Host: 127.0.0.1:${inspector.port}`])
        const seen = yield* exchange(inspector.port, [`${unauthorized}\r\n\r\n${send(inspector.port, token)}`], {
          until: (received) => /HTTP\/1\.1 202/.test(received)
        })
        assert.strictEqual(seen.status, 401, seen.head)
        assert.notInclude(seen.head, "connection: close")
        assert.strictEqual(seen.answers, 2, seen.text)
        // the run starts after its 202, as soon as the machine gets to it
        yield* eventually(Effect.map(modelCalls, (calls) => calls > 0), "the valid request's run", 30_000)
      }),
    { timeout: 60_000 }
  )
})
