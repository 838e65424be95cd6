/**
 * `UiMessageStream.toHttpApp`'s guards, served on 127.0.0.1: who may use
 * which chat (`authorize`, required), how large a body may be
 * (`maxBodyBytes`, refused with 413 before it is read whole), and how deep
 * it may nest (400, not a stack overflow).
 */
import { LanguageModel } from "@effect/ai"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Agent, UiMessageStream } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect } from "effect"
import * as Http from "node:http"

/** Serves `app` on 127.0.0.1 (a port the system picks) for the test's scope; gives its URL. */
const serve = (app: ReturnType<typeof UiMessageStream.toHttpApp>) =>
  Effect.gen(function*() {
    const nodeServer = Http.createServer()
    const server = yield* NodeHttpServer.make(() => nodeServer, { port: 0, host: "127.0.0.1" })
    yield* server.serve(app)
    yield* Effect.addFinalizer(() => Effect.sync(() => nodeServer.closeAllConnections()))
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return `http://127.0.0.1:${port}/api/chat`
  })

/** An agent on a model answering "reply N" to its N-th call, served with `options`. */
const setup = (options: UiMessageStream.Options) =>
  Effect.gen(function*() {
    const { model, recorder } = yield* ScriptedModel.make(
      Array.from({ length: 5 }, (_, i) => ScriptedModel.text(`reply ${i + 1}`))
    )
    const agent = yield* Agent.make({}).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
    const url = yield* serve(UiMessageStream.toHttpApp(agent, options))
    return { agent, url, requests: recorder.requests }
  })

const chat = (id: string, text: string) =>
  JSON.stringify({ id, messages: [{ id: "m1", role: "user", parts: [{ type: "text", text }] }] })

/**
 * Posts `body` (sent in 64 KiB chunks, without Content-Length when `chunked`) and gives the status and text of
 * the response; what the client could not write once the server answered is dropped.
 */
const post = (
  url: string,
  body: string | Buffer,
  headers: Record<string, string | undefined> = {},
  chunked = false
) =>
  Effect.async<{ readonly status: number; readonly text: string }>((resume) => {
    const bytes = typeof body === "string" ? Buffer.from(body) : body
    const request = Http.request(url, {
      method: "POST",
      // a header given as undefined is not sent
      headers: Object.fromEntries(
        Object.entries({
          "content-type": "application/json",
          ...(chunked ? { "transfer-encoding": "chunked" } : { "content-length": String(bytes.length) }),
          ...headers
        }).filter((entry): entry is [string, string] => entry[1] !== undefined)
      )
    }, (response) => {
      const chunks: Array<Buffer> = []
      let done = false
      const finish = () => {
        if (done) return
        done = true
        resume(Effect.succeed({ status: response.statusCode!, text: Buffer.concat(chunks).toString() }))
      }
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      // a server that answers before reading the whole body may close the connection after the answer
      response.on("end", finish)
      response.on("close", finish)
      response.on("error", finish)
    })
    // the server may answer and close before the whole body is written
    request.on("error", () => undefined)
    let at = 0
    const writeMore = () => {
      while (at < bytes.length) {
        const chunk = bytes.subarray(at, at + 65_536)
        at += chunk.length
        if (!request.write(chunk)) return void request.once("drain", writeMore)
      }
      request.end()
    }
    writeMore()
    return Effect.sync(() => request.destroy())
  })

/** Lets the user named by the `x-user` header use the chats named `<user>/...`. */
const ownChats: UiMessageStream.Authorize = (request, threadId) =>
  Effect.succeed(request.headers["x-user"] !== undefined && threadId.startsWith(`${request.headers["x-user"]}/`))

describe("toHttpApp: authorize", () => {
  it.scoped("a client authorize denies gets 403 and nothing of the thread: it is not run, not read", () =>
    Effect.gen(function*() {
      const { agent, requests, url } = yield* setup({ authorize: ownChats })
      const own = yield* post(url, chat("alice/1", "my secret plan"), { "x-user": "alice" })
      assert.strictEqual(own.status, 200)
      assert.include(own.text, "\"type\":\"finish\"")
      const stored = yield* agent.thread("alice/1")
      for (
        const [label, headers, body] of [
          ["another user", { "x-user": "bob" }, chat("alice/1", "what did she say?")],
          ["no user", {}, chat("alice/1", "what did she say?")],
          [
            "another user answering approvals",
            { "x-user": "bob" },
            JSON.stringify({
              id: "alice/1",
              messages: [{
                role: "assistant",
                parts: [{
                  type: "tool-delete_file",
                  toolCallId: "c1",
                  state: "approval-responded",
                  input: {},
                  approval: { id: "a1", approved: true }
                }]
              }]
            })
          ]
        ] as const
      ) {
        const denied = yield* post(url, body, headers)
        assert.strictEqual(denied.status, 403, label)
        assert.strictEqual(denied.text, `Chat "alice/1": this client may not use it`, label)
      }
      assert.strictEqual((yield* requests).length, 1, "only alice's request ran the model")
      assert.deepStrictEqual(yield* agent.thread("alice/1"), stored, "the thread did not change")
    }))

  it.scoped("authorize sees the request and the chat id; only `true` allows", () =>
    Effect.gen(function*() {
      const seen: Array<readonly [string | undefined, string]> = []
      const { requests, url } = yield* setup({
        authorize: (request, threadId) =>
          Effect.sync(() => {
            seen.push([request.headers["x-user"], threadId])
            return (threadId === "yes" ? true : threadId === "truthy" ? "yes" : 1) as boolean
          })
      })
      assert.strictEqual((yield* post(url, chat("truthy", "hi"), { "x-user": "carol" })).status, 403)
      assert.strictEqual((yield* post(url, chat("one", "hi"))).status, 403)
      assert.strictEqual((yield* post(url, chat("yes", "hi"))).status, 200)
      assert.deepStrictEqual(seen, [["carol", "truthy"], [undefined, "one"], [undefined, "yes"]])
      assert.strictEqual((yield* requests).length, 1)
    }))

  it.scoped("an authorize that fails or dies, or none at all (an untyped caller), refuses every request with 500", () =>
    Effect.gen(function*() {
      for (
        const options of [
          { authorize: () => Effect.fail("the session store is down") },
          { authorize: () => Effect.die("boom") },
          {
            authorize: () => {
              throw new Error("thrown")
            }
          },
          {},
          undefined
        ]
      ) {
        const { requests, url } = yield* setup(options as unknown as UiMessageStream.Options)
        const response = yield* post(url, chat("t", "hi"))
        assert.strictEqual(response.status, 500)
        assert.notInclude(response.text, "session store")
        assert.deepStrictEqual(yield* requests, [])
      }
    }))
})

describe("toHttpApp: body size", () => {
  it.scoped("a body over maxBodyBytes is refused with 413, with or without a Content-Length", () =>
    Effect.gen(function*() {
      const { requests, url } = yield* setup({ authorize: UiMessageStream.allowAll, maxBodyBytes: 1000 })
      const big = chat("t", "x".repeat(5000))
      for (const chunked of [false, true]) {
        const response = yield* post(url, big, {}, chunked)
        assert.strictEqual(response.status, 413, `chunked: ${chunked}`)
        assert.strictEqual(response.text, "The chat request is larger than 1000 bytes")
      }
      // exactly the limit is read
      const small = chat("t", "hi")
      const exact = small + " ".repeat(1000 - Buffer.byteLength(small))
      assert.strictEqual((yield* post(url, exact, {}, true)).status, 200)
      assert.strictEqual((yield* requests).length, 1)
    }))

  it.scoped(
    "the default limit is 4 MiB: a larger body gets 413, even streamed without a length",
    () =>
      Effect.gen(function*() {
        const { requests, url } = yield* setup({ authorize: UiMessageStream.allowAll })
        const big = chat("t", "x".repeat(4 * 1024 * 1024))
        assert.strictEqual((yield* post(url, big)).status, 413)
        assert.strictEqual((yield* post(url, big, {}, true)).status, 413)
        assert.deepStrictEqual(yield* requests, [])
      }),
    { timeout: 60_000 }
  )

  for (const bad of [0, -1, 1.5, Number.NaN, Infinity]) {
    it.scoped(`a maxBodyBytes of ${bad} is no limit: every request is refused with 500`, () =>
      Effect.gen(function*() {
        const { requests, url } = yield* setup({ authorize: UiMessageStream.allowAll, maxBodyBytes: bad })
        const response = yield* post(url, chat("t", "hi"))
        assert.strictEqual(response.status, 500)
        assert.include(response.text, "maxBodyBytes must be a whole number of at least 1")
        assert.deepStrictEqual(yield* requests, [])
      }))
  }
})

describe("toHttpApp: nesting", () => {
  const deep = (depth: number, open: string, close: string, inner = "0") =>
    open.repeat(depth) + inner + close.repeat(depth)
  const cases: ReadonlyArray<readonly [string, string]> = [
    ["a top-level array", deep(50_000, "[", "]")],
    ["nested objects", deep(50_000, "{\"a\":", "}")],
    [
      "deep in a part of the message",
      `{"id":"t","messages":[{"role":"user","parts":[{"type":"text","text":"hi","x":${deep(50_000, "[", "]")}}]}]}`
    ],
    [
      "deep in the chat id",
      `{"id":${deep(50_000, "[", "]")},"messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}`
    ]
  ]
  for (const [label, body] of cases) {
    it.scoped(`a body nested 50000 levels deep (${label}) gets 400 saying so`, () =>
      Effect.gen(function*() {
        const { requests, url } = yield* setup({ authorize: UiMessageStream.allowAll })
        const response = yield* post(url, body)
        assert.strictEqual(response.status, 400)
        assert.strictEqual(response.text, "Invalid chat request: the body nests deeper than 256 levels")
        assert.deepStrictEqual(yield* requests, [])
      }))
  }

  it.scoped("brackets inside strings are text, not nesting", () =>
    Effect.gen(function*() {
      const { url } = yield* setup({ authorize: UiMessageStream.allowAll })
      const response = yield* post(url, chat("t", "[{\\\"".repeat(10_000)))
      assert.strictEqual(response.status, 200)
    }))

  it.scoped("a body that is not UTF-8 or not JSON gets 400", () =>
    Effect.gen(function*() {
      const { url } = yield* setup({ authorize: UiMessageStream.allowAll })
      assert.strictEqual((yield* post(url, "{ nope")).text, "Invalid chat request: the body is not valid JSON")
      const notUtf8 = yield* post(url, Buffer.from([0x7b, 0xff, 0x7d]))
      assert.strictEqual(notUtf8.status, 400)
    }))
})

describe("toHttpApp: content type and slow bodies", () => {
  it.scoped("a body not declared as JSON is refused with 415 before it is read: no page of another site posts unasked", () =>
    Effect.gen(function*() {
      const { requests, url } = yield* setup({ authorize: UiMessageStream.allowAll })
      for (
        const contentType of [
          "text/plain",
          "application/x-www-form-urlencoded",
          "multipart/form-data; boundary=x",
          "",
          "application/jsonp",
          undefined
        ]
      ) {
        const response = yield* post(url, chat("t", "hi"), { "content-type": contentType })
        assert.strictEqual(response.status, 415, String(contentType))
        assert.strictEqual(response.text, "The chat request must be JSON, sent with Content-Type: application/json")
      }
      assert.deepStrictEqual(yield* requests, [])
      for (
        const contentType of [
          "application/json",
          "application/json; charset=utf-8",
          "Application/JSON",
          "application/vnd.chat+json"
        ]
      ) {
        const response = yield* post(url, chat(`t-${contentType}`, "hi"), { "content-type": contentType })
        assert.strictEqual(response.status, 200, contentType)
      }
    }))

  it.scoped("a body that never ends holds up no other request", () =>
    Effect.gen(function*() {
      const { url } = yield* setup({ authorize: UiMessageStream.allowAll })
      const stalled = Http.request(url, {
        method: "POST",
        headers: { "content-type": "application/json", "content-length": "100000" }
      })
      stalled.on("error", () => undefined)
      stalled.write("{\"id\":\"slow\",")
      yield* Effect.addFinalizer(() => Effect.sync(() => stalled.destroy()))
      assert.strictEqual((yield* post(url, chat("other", "hi"))).status, 200)
    }))
})

describe("readChatRequest: one error class for a refused request", () => {
  it.effect("a body that is not a chat request fails with ChatRequestError, reason Invalid, naming what is wrong", () =>
    Effect.gen(function*() {
      for (const body of [{}, { id: "t1", messages: [] }, null]) {
        const error = yield* Effect.flip(UiMessageStream.readChatRequest(body))
        assert.instanceOf(error, UiMessageStream.ChatRequestError)
        assert.strictEqual(error.reason, "Invalid")
        assert.isString(error.detail)
        assert.strictEqual(error.message, `Invalid chat request: ${error.detail}`)
      }
    }))
})
