/**
 * `HttpConnection` without a socket: which requests declare no body, the
 * `Connection: close` of an answer given before the body was read, and a
 * guard on a server whose requests carry no Node socket (it runs every
 * request as it comes). Its work on Node's sockets is tested on the wire in
 * ChatEarlyRefusal and the inspector's InspectorBody.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { HttpConnection } from "@stepwise-agent/core"
import { Effect, FastCheck } from "effect"

const request = (headers: Record<string, string>, body?: string) =>
  HttpServerRequest.fromWeb(new Request("http://localhost/", { method: "POST", headers, body: body ?? null }))

describe("HttpConnection", () => {
  it("hasNoBody: no Content-Length, or one of 0, and no Transfer-Encoding", () => {
    assert.isTrue(HttpConnection.hasNoBody(request({})))
    assert.isTrue(HttpConnection.hasNoBody(request({ "content-length": "0" })))
    assert.isTrue(HttpConnection.hasNoBody(request({ "content-length": " 000 " })))
    assert.isFalse(HttpConnection.hasNoBody(request({ "content-length": "1" })))
    assert.isFalse(HttpConnection.hasNoBody(request({ "content-length": "0", "transfer-encoding": "chunked" })))
  })

  it.prop(
    "closeUnlessRead: Connection: close exactly when the body was not read whole",
    [FastCheck.boolean(), FastCheck.integer({ min: 200, max: 599 })],
    ([bodyRead, status]) => {
      const response = HttpConnection.closeUnlessRead(HttpServerResponse.text("answer", { status }), bodyRead)
      assert.strictEqual(response.headers["connection"], bodyRead ? undefined : "close")
      assert.strictEqual(response.status, status)
    }
  )

  it.effect("guard on a request without a Node socket runs the handler, each time, even after a close", () =>
    Effect.gen(function*() {
      let runs = 0
      const handler = HttpConnection.guard(Effect.sync(() => {
        runs++
        return HttpConnection.closeUnlessRead(HttpServerResponse.text("refused", { status: 415 }), false)
      }))
      const web = request({ "content-type": "text/plain" }, "hello")
      for (let i = 0; i < 2; i++) {
        const response = yield* Effect.provideService(handler, HttpServerRequest.HttpServerRequest, web)
        assert.strictEqual(response.status, 415)
      }
      assert.strictEqual(runs, 2)
    }))
})
