/**
 * A chat reloaded gets its thread back: `UiMessageStream.toUiMessages` builds
 * from a stored thread the `UIMessage[]` that the `ai` package's own reader
 * (`readUIMessageStream`, what `useChat` runs) built from the live stream,
 * and `messagesHttpApp` serves them behind the chat's `authorize`.
 */
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import type { Response } from "@effect/ai"
import { HttpRouter } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Agent, UiMessageStream } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { readUIMessageStream, type UIMessage, type UIMessageChunk } from "ai"
import { Chunk, Effect, Layer, Option, Schema, Stream } from "effect"
import * as Http from "node:http"

// the messages the module builds are messages of the `ai` package (a compile-time check)
const conforms = (message: UiMessageStream.UiMessage): UIMessage => message

const DeleteFile = Tool.make("delete_file", {
  description: "Deletes a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const ReadFile = Tool.make("read_file", {
  description: "Reads a file",
  parameters: { path: Schema.String },
  success: Schema.String,
  failure: Schema.String,
  failureMode: "return"
})
const Tools = Toolkit.make(DeleteFile, ReadFile)

const makeAgent = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.gen(function*() {
    const { model } = yield* ScriptedModel.make(script)
    const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })
    return yield* Agent.make({ toolkit: Tools, middleware: [hitl] }).pipe(
      Effect.provide(Tools.toLayer({
        delete_file: ({ path }) => Effect.succeed(`deleted ${path}`),
        read_file: ({ path }) =>
          path.startsWith("x") ? Effect.fail(`no file ${path}`) : Effect.succeed(`contents of ${path}`)
      })),
      Effect.provide(Layer.succeed(LanguageModel.LanguageModel, model))
    )
  })

/** What the ai package's reader assembles from `chunks`. */
const assemble = (chunks: ReadonlyArray<UiMessageStream.UiMessageChunk>) =>
  Effect.promise(async () => {
    let last: UIMessage | undefined
    const stream = new ReadableStream<UIMessageChunk>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk)
        controller.close()
      }
    })
    for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message
    return last!
  })

/**
 * Messages as a browser would get them, without ids: the live messages' are the client's (random), and the
 * reader keeps the stream's own id of a reasoning part, which a reloaded one has no use for.
 */
const comparable = (messages: ReadonlyArray<UIMessage | UiMessageStream.UiMessage>) =>
  JSON.parse(JSON.stringify(messages.map(({ id: _, ...message }) => ({
    ...message,
    parts: message.parts.map((part) => {
      const { id: _, ...rest } = part as { readonly id?: string }
      return rest
    })
  }))))

const finish = (reason: "stop" | "tool-calls"): Response.PartEncoded => ({
  type: "finish",
  reason,
  usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
})

const Call = Schema.Struct({ path: Schema.String.pipe(Schema.maxLength(4)), fails: Schema.Boolean })
const Reply = Schema.Struct({
  text: Schema.String.pipe(Schema.maxLength(8)),
  reasoning: Schema.String.pipe(Schema.maxLength(8)),
  // a reply without calls would end the run: each step before the answer calls a tool
  calls: Schema.Array(Call).pipe(Schema.minItems(1), Schema.maxItems(3))
})
const Run = Schema.Struct({
  ask: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(8), Schema.filter((text) => text.trim() !== "")),
  steps: Schema.Array(Reply).pipe(Schema.maxItems(3)),
  answer: Schema.String.pipe(Schema.maxLength(8), Schema.filter((text) => text.trim() !== ""))
})

/** A reply's encoded parts: reasoning, text, then calls (ids repeat across replies, as providers do). */
const replyParts = (reply: typeof Reply.Type): Array<Response.PartEncoded> => [
  ...(reply.reasoning === "" ? [] : [{ type: "reasoning" as const, text: reply.reasoning }]),
  ...(reply.text === "" ? [] : [{ type: "text" as const, text: reply.text }]),
  ...reply.calls.map((call, index) => ({
    type: "tool-call" as const,
    id: `call_${index}`,
    name: "read_file",
    params: { path: call.fails ? `x${call.path}` : `f${call.path}` }
  })),
  finish(reply.calls.length === 0 ? "stop" : "tool-calls")
]

describe("UiMessageStream.toUiMessages", () => {
  it.effect.prop(
    "a stored thread gives the messages the ai package built from the live stream: text, reasoning, tool outputs and errors, a pending approval",
    { runs: Schema.Array(Run).pipe(Schema.minItems(1), Schema.maxItems(3)), waits: Schema.Boolean },
    ({ runs, waits }) =>
      Effect.gen(function*() {
        const script: Array<ScriptedModel.Turn> = runs.flatMap((run) => [
          ...run.steps.map(replyParts),
          [{ type: "text", text: run.answer }, finish("stop")]
        ])
        if (waits) {
          script.push([
            { type: "text", text: "Deleting." },
            { type: "tool-call", id: "call_0", name: "delete_file", params: { path: "/a" } },
            { type: "tool-call", id: "call_1", name: "read_file", params: { path: "fa" } },
            finish("tool-calls")
          ])
        }
        const agent = yield* makeAgent(script)
        const live: Array<UIMessage> = []
        const asks = [...runs.map((run) => run.ask), ...(waits ? ["delete /a"] : [])]
        for (const [i, ask] of asks.entries()) {
          live.push({ id: `user-${i}`, role: "user", parts: [{ type: "text", text: ask }] })
          const chunks = yield* Stream.runCollect(
            UiMessageStream.fromEvents(agent.stream(ask, { threadId: "t" }), { approvals: HumanInTheLoop.uiApprovals })
          )
          live.push(yield* assemble(Chunk.toArray(chunks)))
        }

        const thread = Option.getOrThrow(yield* agent.thread("t"))
        assert.strictEqual(Option.isSome(thread.pending), waits)
        const reloaded = UiMessageStream.toUiMessages(thread.state.messages, {
          pending: thread.pending,
          approvals: HumanInTheLoop.uiApprovals
        })
        assert.deepStrictEqual(comparable(reloaded.map(conforms)), comparable(live))
      }),
    // about 2 s on a quiet machine; the timeout is for a loaded one
    { fastCheck: { numRuns: 30 }, timeout: 120_000 }
  )

  it("a user's files come back as file parts (a URL as is, bytes as a data URL)", () => {
    const messages = UiMessageStream.toUiMessages([
      {
        role: "user",
        content: [
          { type: "text", text: "look" },
          { type: "file", mediaType: "image/png", data: new Uint8Array([1, 2, 3]), fileName: "a.png" },
          { type: "file", mediaType: "application/pdf", data: new URL("https://example.com/b.pdf") }
        ]
      } as any
    ])
    assert.deepStrictEqual(messages[0]!.parts, [
      { type: "text", text: "look" },
      { type: "file", mediaType: "image/png", url: "data:image/png;base64,AQID", filename: "a.png" },
      { type: "file", mediaType: "application/pdf", url: "https://example.com/b.pdf" }
    ])
  })

  it.effect("a wait that is no tool approval is a data-interrupt part, as the live stream sends it", () =>
    Effect.gen(function*() {
      const agent = yield* makeAgent([
        [{ type: "tool-call", id: "c1", name: "delete_file", params: { path: "/a" } }, finish("tool-calls")]
      ])
      yield* agent.run("delete /a", { threadId: "t" })
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      // without an approvals adapter the wait is not read as approvals
      const messages = UiMessageStream.toUiMessages(thread.state.messages, { pending: thread.pending })
      const last = messages.at(-1)!
      assert.strictEqual(last.role, "assistant")
      assert.deepStrictEqual(last.parts.at(-1), { type: "data-interrupt", data: Option.getOrThrow(thread.pending) })
    }))
})

/** Serves `router` on 127.0.0.1 for the test's scope; gives its base URL. */
const serve = (router: HttpRouter.HttpRouter) =>
  Effect.gen(function*() {
    const nodeServer = Http.createServer()
    const server = yield* NodeHttpServer.make(() => nodeServer, { port: 0, host: "127.0.0.1" })
    yield* server.serve(router)
    yield* Effect.addFinalizer(() => Effect.sync(() => nodeServer.closeAllConnections()))
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return `http://127.0.0.1:${port}`
  })

const get = (url: string, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, { headers })
    return { status: response.status, text: await response.text() }
  })

describe("UiMessageStream.messagesHttpApp", () => {
  // chats are "<user>/<chat>"; the user is named by a header
  const authorize: UiMessageStream.Authorize = (request, threadId) =>
    Effect.succeed(request.headers["x-user"] !== undefined && threadId.startsWith(`${request.headers["x-user"]}/`))

  const setup = Effect.gen(function*() {
    const agent = yield* makeAgent([
      [{ type: "text", text: "Deleting." }, {
        type: "tool-call",
        id: "c1",
        name: "delete_file",
        params: { path: "/a" }
      }, finish("tool-calls")]
    ])
    yield* agent.run("delete /a", { threadId: "ann/1" })
    const options = { authorize, approvals: HumanInTheLoop.uiApprovals }
    const base = yield* serve(HttpRouter.empty.pipe(
      HttpRouter.post("/api/chat", UiMessageStream.toHttpApp(agent, options)),
      HttpRouter.get("/api/chat/messages", UiMessageStream.messagesHttpApp(agent, options))
    ))
    return { agent, base }
  })

  it.scoped("a reloaded chat gets its thread, the pending approval awaiting an answer", () =>
    Effect.gen(function*() {
      const { agent, base } = yield* setup
      const response = yield* get(`${base}/api/chat/messages?id=${encodeURIComponent("ann/1")}`, { "x-user": "ann" })
      assert.strictEqual(response.status, 200)
      const messages = JSON.parse(response.text) as Array<UIMessage>
      const thread = Option.getOrThrow(yield* agent.thread("ann/1"))
      assert.deepStrictEqual(
        messages,
        JSON.parse(JSON.stringify(UiMessageStream.toUiMessages(thread.state.messages, {
          pending: thread.pending,
          approvals: HumanInTheLoop.uiApprovals
        })))
      )
      const part = messages.at(-1)!.parts.at(-1) as any
      assert.strictEqual(part.type, "tool-delete_file")
      assert.strictEqual(part.state, "approval-requested")
      assert.isString(part.approval.id)
    }))

  it.scoped("another user's chat is refused (403) before the thread is read, as on the chat endpoint", () =>
    Effect.gen(function*() {
      const { base } = yield* setup
      const url = `${base}/api/chat/messages?id=${encodeURIComponent("ann/1")}`
      const other = yield* get(url, { "x-user": "bob" })
      assert.strictEqual(other.status, 403)
      assert.notInclude(other.text, "delete")
      assert.strictEqual((yield* get(url)).status, 403)
    }))

  it.scoped("an unknown chat is []; a request without one id is 400", () =>
    Effect.gen(function*() {
      const { base } = yield* setup
      const unknown = yield* get(`${base}/api/chat/messages?id=ann%2F2`, { "x-user": "ann" })
      assert.deepStrictEqual([unknown.status, JSON.parse(unknown.text)], [200, []])
      assert.strictEqual((yield* get(`${base}/api/chat/messages`, { "x-user": "ann" })).status, 400)
      assert.strictEqual((yield* get(`${base}/api/chat/messages?id=ann/1&id=ann/2`, { "x-user": "ann" })).status, 400)
    }))

  it.scoped("an authorize that fails refuses every request (500), none let through", () =>
    Effect.gen(function*() {
      const agent = yield* makeAgent([])
      const base = yield* serve(HttpRouter.empty.pipe(
        HttpRouter.get("/m", UiMessageStream.messagesHttpApp(agent, { authorize: () => Effect.fail("down") }))
      ))
      assert.strictEqual((yield* get(`${base}/m?id=t`)).status, 500)
    }))
})
