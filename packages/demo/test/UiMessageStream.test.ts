/**
 * `UiMessageStream.toHttpApp` served on 127.0.0.1 and driven by the real
 * `ai` package (pinned 6.0.333): its `Chat` (what `useChat` wraps) with the
 * `DefaultChatTransport`, and `readUIMessageStream`. Covers a run's text and
 * tool parts, the approval round trip (approve and deny), a dropped
 * connection, a model error, and bad requests.
 */
import { AiError, LanguageModel, Prompt, Response, Tool, Toolkit } from "@effect/ai"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, AgentResult, UiMessageStream, Usage } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import {
  AbstractChat,
  type ChatInit,
  type ChatState,
  type ChatStatus,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  readUIMessageStream,
  type UIMessage,
  type UIMessageChunk
} from "ai"
import { Cause, Chunk, Deferred, Effect, Layer, Option, Ref, Schema, Stream } from "effect"
import * as Http from "node:http"

// the chunks the module writes are chunks of the `ai` package (a compile-time check)
const conforms = (chunk: UiMessageStream.UiMessageChunk): UIMessageChunk => chunk

// ---------------------------------------------------------------------------
// a Node chat: AbstractChat with the state useChat keeps in React
// ---------------------------------------------------------------------------

class MemoryState implements ChatState<UIMessage> {
  status: ChatStatus = "ready"
  error: Error | undefined = undefined
  messages: Array<UIMessage> = []
  pushMessage = (message: UIMessage) => {
    this.messages = [...this.messages, message]
  }
  popMessage = () => {
    this.messages = this.messages.slice(0, -1)
  }
  replaceMessage = (index: number, message: UIMessage) => {
    this.messages = this.messages.map((old, i) => i === index ? message : old)
  }
  snapshot = <T>(value: T): T => structuredClone(value)
}

class NodeChat extends AbstractChat<UIMessage> {
  private finishes: Array<() => void> = []
  constructor(init: Omit<ChatInit<UIMessage>, "onFinish">) {
    super({
      ...init,
      state: new MemoryState(),
      onFinish: () => this.finishes.splice(0).forEach((resolve) => resolve())
    })
  }
  /** Resolves when the next response has finished streaming. */
  nextFinish(): Promise<void> {
    return new Promise((resolve) => this.finishes.push(resolve))
  }
}

const chatOf = (url: string, id: string, options?: { readonly automatic?: boolean }) =>
  new NodeChat({
    id,
    transport: new DefaultChatTransport({ api: url }),
    ...(options?.automatic === true
      ? { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses }
      : {})
  })

const send = (chat: NodeChat, text: string) => Effect.promise(() => chat.sendMessage({ text }))

/** The parts of the last message, without what only the client adds. */
const lastParts = (chat: NodeChat) =>
  chat.messages.at(-1)!.parts.map((part) => {
    if (part.type === "text") return { type: "text", text: part.text }
    if (part.type.startsWith("tool-")) {
      const { approval, errorText, input, output, state, toolCallId, type } = part as any
      return {
        type,
        toolCallId,
        state,
        input,
        ...(output === undefined ? {} : { output }),
        ...(errorText === undefined ? {} : { errorText }),
        ...(approval?.approved === undefined ? {} : { approved: approval.approved })
      }
    }
    return { type: part.type }
  })

// ---------------------------------------------------------------------------
// fixtures
// ---------------------------------------------------------------------------

const DeleteFile = Tool.make("delete_file", {
  description: "Deletes a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const ReadFile = Tool.make("read_file", {
  description: "Reads a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const Wait = Tool.make("wait", { description: "Waits for ever", parameters: {}, success: Schema.String })
const Tools = Toolkit.make(DeleteFile, ReadFile, Wait)

/** Serves `app` on 127.0.0.1 (a port the system picks) for the test's scope; gives its URL. */
const serve = (app: ReturnType<typeof UiMessageStream.toHttpApp>) =>
  Effect.gen(function*() {
    const nodeServer = Http.createServer()
    const server = yield* NodeHttpServer.make(() => nodeServer, { port: 0, host: "127.0.0.1" })
    yield* server.serve(app)
    // runs before the server closes: drop the client's kept-alive connections instead of waiting them out
    yield* Effect.addFinalizer(() => Effect.sync(() => nodeServer.closeAllConnections()))
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return `http://127.0.0.1:${port}/api/chat`
  })

/** An agent with the tools and HumanInTheLoop (delete_file gated) on `model`, served; `log` lists tool runs. */
const setup = <E>(model: Layer.Layer<LanguageModel.LanguageModel, E>) =>
  Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const waiting = yield* Deferred.make<void>()
    const record = (line: string) => Ref.update(log, (all) => [...all, line])
    const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })
    const agent = yield* Agent.make({ toolkit: Tools, middleware: [hitl] }).pipe(
      Effect.provide(Tools.toLayer({
        delete_file: ({ path }) => Effect.as(record(`delete_file ${path}`), `deleted ${path}`),
        read_file: ({ path }) => Effect.as(record(`read_file ${path}`), `contents of ${path}`),
        wait: () =>
          Deferred.succeed(waiting, undefined).pipe(
            Effect.zipRight(Effect.never),
            Effect.onInterrupt(() => record("wait interrupted"))
          )
      })),
      Effect.provide(yield* Layer.build(model))
    )
    const url = yield* serve(
      UiMessageStream.toHttpApp(agent, { approvals: HumanInTheLoop.uiApprovals, authorize: UiMessageStream.allowAll })
    )
    return { agent, url, log: Ref.get(log), waiting: Deferred.await(waiting) }
  })

const scripted = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.map(ScriptedModel.make(script), ({ model, recorder }) => ({
    layer: Layer.succeed(LanguageModel.LanguageModel, model),
    requests: recorder.requests
  }))

const post = (url: string, body: string) =>
  Effect.promise(async () => {
    const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body })
    return { status: response.status, headers: response.headers, text: await response.text() }
  })

const userMessage = (text: string) => ({ id: "m1", role: "user", parts: [{ type: "text", text }] })

// ---------------------------------------------------------------------------
// tests
// ---------------------------------------------------------------------------

describe("UiMessageStream over HTTP, read by the ai package", () => {
  it.scoped("a run arrives as one assistant message: steps, streamed text, tool input and output", () =>
    Effect.gen(function*() {
      const model = yield* scripted([
        ScriptedModel.toolCalls([{ name: "read_file", params: { path: "notes.txt" }, id: "c1" }], {
          text: "Let me look."
        }),
        ScriptedModel.text("The notes say hello.")
      ])
      const { agent, log, url } = yield* setup(model.layer)
      const chat = chatOf(url, "t1")
      yield* send(chat, "What do my notes say?")

      assert.strictEqual(chat.status, "ready")
      assert.deepStrictEqual(chat.messages.map((message) => message.role), ["user", "assistant"])
      assert.deepStrictEqual(lastParts(chat), [
        { type: "step-start" },
        { type: "text", text: "Let me look." },
        {
          type: "tool-read_file",
          toolCallId: "c1",
          state: "output-available",
          input: { path: "notes.txt" },
          output: "contents of notes.txt"
        },
        { type: "step-start" },
        { type: "text", text: "The notes say hello." }
      ])
      assert.deepStrictEqual(yield* log, ["read_file notes.txt"])
      // the thread is the chat id, stored on the server
      const thread = yield* agent.thread("t1")
      assert.isTrue(Option.isSome(thread) && Option.isNone(thread.value.pending))
    }))

  it.scoped("the response is an SSE UI message stream (v1 header, data lines, [DONE])", () =>
    Effect.gen(function*() {
      const model = yield* scripted([ScriptedModel.text("Hi!")])
      const { url } = yield* setup(model.layer)
      const response = yield* post(url, JSON.stringify({ id: "t1", messages: [userMessage("Hello")] }))
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("x-vercel-ai-ui-message-stream"), "v1")
      assert.strictEqual(response.headers.get("content-type"), "text/event-stream")
      const events = response.text.split("\n\n").filter((event) => event !== "")
      assert.isTrue(events.every((event) => event.startsWith("data: ")))
      assert.strictEqual(events.at(-1), "data: [DONE]")
      assert.deepStrictEqual(
        events.slice(0, -1).map((event) => JSON.parse(event.slice("data: ".length)).type),
        ["start", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"]
      )
    }))

  it.scoped("approval round trip: a gated call waits as approval-requested; approving resumes the run", () =>
    Effect.gen(function*() {
      const model = yield* scripted([
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/tmp/a" }, id: "c1" }], {
          text: "I'll delete it."
        }),
        ScriptedModel.text("Deleted /tmp/a.")
      ])
      const { agent, log, url } = yield* setup(model.layer)
      const chat = chatOf(url, "t1", { automatic: true })
      yield* send(chat, "Delete /tmp/a")

      assert.deepStrictEqual(lastParts(chat), [
        { type: "step-start" },
        { type: "text", text: "I'll delete it." },
        { type: "tool-delete_file", toolCallId: "c1", state: "approval-requested", input: { path: "/tmp/a" } }
      ])
      assert.deepStrictEqual(yield* log, [], "the gated tool waits")
      const thread = yield* agent.thread("t1")
      assert.isTrue(Option.isSome(thread) && Option.isSome(thread.value.pending))

      // what useChat does: record the answer, then send automatically (lastAssistantMessageIsCompleteWithApprovalResponses)
      const part = chat.messages.at(-1)!.parts.find((part) => part.type === "tool-delete_file") as any
      assert.strictEqual(part.approval.descriptor.split("\n")[0], "Tool execution requires approval")
      const finished = chat.nextFinish()
      yield* Effect.promise(async () => chat.addToolApprovalResponse({ id: part.approval.id, approved: true }))
      yield* Effect.promise(() => finished)

      assert.strictEqual(chat.status, "ready")
      assert.strictEqual(chat.messages.length, 2, "the resumed run continues the same assistant message")
      assert.deepStrictEqual(lastParts(chat), [
        { type: "step-start" },
        { type: "text", text: "I'll delete it." },
        {
          type: "tool-delete_file",
          toolCallId: "c1",
          state: "output-available",
          input: { path: "/tmp/a" },
          output: "deleted /tmp/a",
          approved: true
        },
        { type: "step-start" },
        { type: "text", text: "Deleted /tmp/a." }
      ])
      assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"])

      // the same answer sent again answers a wait that is over
      const answered = chat.messages.map((message) =>
        message.role !== "assistant" ? message : {
          ...message,
          parts: message.parts.map((part) =>
            part.type === "tool-delete_file" ? { ...part, state: "approval-responded", output: undefined } : part
          )
        }
      )
      const stale = yield* post(url, JSON.stringify({ id: "t1", messages: answered, trigger: "submit-message" }))
      assert.strictEqual(stale.status, 409)
      assert.strictEqual(stale.text, `Chat "t1": the request answers approvals, but the thread waits for no decision`)
      assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"], "nothing ran twice")
    }))

  it.scoped("a denied approval: the call does not run, the model gets the reason, the part is output-denied", () =>
    Effect.gen(function*() {
      const model = yield* scripted([
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/home" }, id: "c1" }]),
        ScriptedModel.text("Understood, I left it.")
      ])
      const { log, url } = yield* setup(model.layer)
      const chat = chatOf(url, "t1")
      yield* send(chat, "Delete my home directory")
      const part = chat.messages.at(-1)!.parts.find((part) => part.type === "tool-delete_file") as any
      yield* Effect.promise(async () =>
        chat.addToolApprovalResponse({ id: part.approval.id, approved: false, reason: "no" })
      )
      yield* Effect.promise(() => chat.sendMessage())

      assert.deepStrictEqual(lastParts(chat).slice(1), [
        {
          type: "tool-delete_file",
          toolCallId: "c1",
          state: "output-denied",
          input: { path: "/home" },
          approved: false
        },
        { type: "step-start" },
        { type: "text", text: "Understood, I left it." }
      ])
      assert.deepStrictEqual(yield* log, [])
      const requests = yield* model.requests
      const answered = requests[1]!.prompt.content.flatMap((message) =>
        message.role === "tool" ? message.content.map((part) => part.isFailure) : []
      )
      assert.deepStrictEqual(answered, [true])
      assert.include(JSON.stringify(requests[1]!.prompt.content.at(-1)), "Reason: no")
    }))

  it.scoped("an answer to an older wait is refused when the new wait reuses its call id", () =>
    Effect.gen(function*() {
      const model = yield* scripted([
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/a" }, id: "c1" }]),
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/b" }, id: "c1" }]),
        ScriptedModel.text("Done.")
      ])
      const { log, url } = yield* setup(model.layer)
      const chat = chatOf(url, "t1")
      yield* send(chat, "Delete /a, then /b")
      const first = chat.messages.at(-1)!.parts.find((part) => part.type === "tool-delete_file") as any
      yield* Effect.promise(async () => chat.addToolApprovalResponse({ id: first.approval.id, approved: true }))
      const answeredFirst = structuredClone(chat.messages)
      yield* Effect.promise(() => chat.sendMessage())
      // the thread now waits on /b, under the same call id
      const waiting = chat.messages.at(-1)!.parts.filter((part) => part.type === "tool-delete_file") as Array<any>
      assert.deepStrictEqual(waiting.map((part) => [part.input.path, part.state]), [
        ["/a", "output-available"],
        ["/b", "approval-requested"]
      ])
      assert.notStrictEqual(waiting[1].approval.id, first.approval.id)

      const replayed = yield* post(url, JSON.stringify({ id: "t1", messages: answeredFirst }))
      assert.strictEqual(replayed.status, 409)
      assert.include(replayed.text, `approval "${first.approval.id}" (call "c1") answers no call the thread waits on`)
      assert.deepStrictEqual(yield* log, ["delete_file /a"], "/b did not run on the old answer")
    }))

  it.scoped("a dropped connection interrupts the run; the stored thread is intact and runs again", () =>
    Effect.gen(function*() {
      const model = yield* scripted([
        ScriptedModel.text("First answer."),
        ScriptedModel.toolCalls([{ name: "wait", params: {}, id: "c1" }], { text: "Waiting." }),
        ScriptedModel.text("Back again.")
      ])
      const { agent, log, url, waiting } = yield* setup(model.layer)
      yield* send(chatOf(url, "t1"), "First question")
      const before = Option.getOrThrow(yield* agent.thread("t1")).state.messages

      const chat = chatOf(url, "t1")
      const sending = chat.sendMessage({ text: "Wait for me" })
      yield* waiting
      yield* until(() => chat.messages.length === 2 && chat.messages[1]!.parts.length === 3)
      assert.deepStrictEqual(lastParts(chat).at(-1), {
        type: "tool-wait",
        toolCallId: "c1",
        state: "input-available",
        input: {}
      }, "the client saw the call start")
      yield* Effect.promise(() => chat.stop())
      yield* Effect.promise(() => sending)
      assert.strictEqual(chat.status, "ready")

      // the server noticed the closed connection and interrupted the run (a real socket: poll, bounded)
      yield* until(() => Effect.runSync(log).length > 0)
      assert.deepStrictEqual(yield* log, ["wait interrupted"])

      // the stored thread is the one before the dropped run, waiting for nothing
      const after = Option.getOrThrow(yield* agent.thread("t1"))
      assert.isTrue(Option.isNone(after.pending))
      assert.deepStrictEqual(after.state.messages, before)

      // and it takes the next message
      const again = chatOf(url, "t1")
      yield* send(again, "Are you there?")
      assert.strictEqual(again.status, "ready")
      assert.deepStrictEqual(lastParts(again), [{ type: "step-start" }, { type: "text", text: "Back again." }])
      const requests = yield* model.requests
      assert.include(JSON.stringify(requests[2]!.prompt.content), "First answer.", "the next run sees the thread")
    }))

  it.scoped("a model error ends the stream with an error chunk whose text carries no secret", () =>
    Effect.gen(function*() {
      const apiKey = "sk-test-SECRET123"
      const server = yield* FakeOpenAi.make([FakeOpenAi.htmlGateway, FakeOpenAi.htmlGateway])
      const { url } = yield* setup(FakeOpenAi.languageModel(server, { apiKey }))
      const response = yield* post(url, JSON.stringify({ id: "t1", messages: [userMessage("Hello")] }))
      assert.strictEqual(response.status, 200)
      assert.notInclude(response.text, "SECRET123")
      const chat = chatOf(url, "t2")
      yield* Effect.promise(() => chat.sendMessage({ text: "Hello" }))
      assert.strictEqual(chat.status, "error")
      // the error that, raw, holds the request and its authorization header (see SecretsEndToEnd.test.ts)
      assert.strictEqual(
        chat.error!.message,
        `The run failed (HttpResponseError): StatusCode: non 2xx status code (502 POST ${server.url}/v1/responses)`
      )
      const sent = yield* server.requests
      assert.strictEqual(sent[0]!.headers.authorization, `Bearer ${apiKey}`, "the key was in the request")
    }))

  it.scoped("bad requests get a 400 (or 409) naming what is wrong, and run nothing", () =>
    Effect.gen(function*() {
      const model = yield* scripted([ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/a" } }])])
      const { log, url } = yield* setup(model.layer)
      const cases: ReadonlyArray<readonly [string, string, number, string]> = [
        ["not JSON", "{ nope", 400, "the body is not valid JSON"],
        ["no messages", JSON.stringify({ id: "t1" }), 400, "messages"],
        ["empty messages", JSON.stringify({ id: "t1", messages: [] }), 400, "messages"],
        ["a role it cannot be", JSON.stringify({ id: "t1", messages: [{ role: "robot", parts: [] }] }), 400, "role"],
        [
          "a file part",
          JSON.stringify({ id: "t1", messages: [{ role: "user", parts: [{ type: "file", url: "x" }] }] }),
          400,
          `messages.0.parts.0: a part of type "file" is not supported`
        ],
        ["no text", JSON.stringify({ id: "t1", messages: [userMessage("  ")] }), 400, "the user message has no text"],
        [
          "regenerate",
          JSON.stringify({ id: "t1", messages: [userMessage("hi")], trigger: "regenerate-message" }),
          400,
          "regenerate-message"
        ],
        ["an empty chat id", JSON.stringify({ id: "", messages: [userMessage("hi")] }), 400, "the chat id"],
        [
          "an assistant message without answers",
          JSON.stringify({ id: "t1", messages: [{ role: "assistant", parts: [{ type: "text", text: "hi" }] }] }),
          400,
          "answers no approval"
        ],
        [
          "answers to a thread that waits for nothing",
          JSON.stringify({
            id: "t1",
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
          }),
          409,
          "waits for no decision"
        ]
      ]
      for (const [what, body, status, says] of cases) {
        const response = yield* post(url, body)
        assert.strictEqual(response.status, status, what)
        assert.include(response.text, says, what)
        assert.isTrue(response.text.startsWith(status === 400 ? "Invalid chat request: " : "Chat "), what)
      }
      assert.deepStrictEqual(yield* model.requests, [], "no request ran the model")

      // a new message while the thread waits for an approval; an approval id of another wait
      yield* post(url, JSON.stringify({ id: "t1", messages: [userMessage("delete /a")] }))
      const busy = yield* post(url, JSON.stringify({ id: "t1", messages: [userMessage("and now?")] }))
      assert.strictEqual(busy.status, 409)
      assert.include(busy.text, "answer its approval requests before sending a new message")
      const forged = yield* post(
        url,
        JSON.stringify({
          id: "t1",
          messages: [{
            role: "assistant",
            parts: [{
              type: "tool-delete_file",
              toolCallId: "call_0",
              state: "approval-responded",
              input: { path: "/a" },
              approval: { id: "forged", approved: true }
            }]
          }]
        })
      )
      assert.strictEqual(forged.status, 409)
      assert.include(forged.text, `approval "forged" (call "call_0") answers no call the thread waits on`)
      assert.deepStrictEqual(yield* log, [], "nothing ran")
    }))
})

describe("UiMessageStream.fromEvents", () => {
  it.effect.prop(
    "readUIMessageStream assembles the stored replies: their text in order, each tool call with its output (call ids repeat across replies)",
    {
      turns: Schema.Array(Schema.Struct({
        text: Schema.String.pipe(Schema.maxLength(12)),
        path: Schema.String.pipe(Schema.maxLength(6))
      })).pipe(Schema.maxItems(4)),
      // a blank answer is no answer: the loop fails such a reply with ModelReplyError (tested in core)
      answer: Schema.String.pipe(Schema.maxLength(12), Schema.filter((text) => text.trim() !== ""))
    },
    ({ answer, turns }) =>
      Effect.gen(function*() {
        const script = [
          ...turns.map((turn) =>
            ScriptedModel.toolCalls([{ name: "read_file", params: { path: turn.path }, id: "call_0" }], {
              text: turn.text
            })
          ),
          ScriptedModel.text(answer)
        ]
        const model = yield* scripted(script)
        const agent = yield* Agent.make({ toolkit: Tools }).pipe(
          Effect.provide(Tools.toLayer({
            delete_file: () => Effect.succeed(""),
            read_file: ({ path }) => Effect.succeed(`contents of ${path}`),
            wait: () => Effect.never
          })),
          Effect.provide(model.layer)
        )
        const chunks = Chunk.toArray(
          yield* Stream.runCollect(UiMessageStream.fromEvents(agent.stream("go", { threadId: "t" })))
        )
        const message = yield* Effect.promise(async () => {
          let last: UIMessage | undefined
          const stream = new ReadableStream<UIMessageChunk>({
            start(controller) {
              for (const chunk of chunks) controller.enqueue(conforms(chunk))
              controller.close()
            }
          })
          for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message
          return last!
        })
        const stored = Option.getOrThrow(yield* agent.thread("t")).state.messages
        const storedText = stored.flatMap((m) =>
          m.role === "assistant"
            ? m.content.flatMap((part) => part.type === "text" && part.text !== "" ? [part.text] : [])
            : []
        )
        const storedCalls = stored.flatMap((m) =>
          m.role === "tool" ? m.content.map((part) => ({ toolCallId: part.id, output: part.result })) : []
        )
        assert.deepStrictEqual(
          message.parts.flatMap((part) => part.type === "text" ? [part.text] : []),
          storedText
        )
        assert.deepStrictEqual(
          message.parts.flatMap((part) =>
            part.type.startsWith("tool-")
              ? [{ toolCallId: (part as any).toolCallId, output: (part as any).output }]
              : []
          ),
          storedCalls
        )
        assert.strictEqual(
          message.parts.filter((part) => part.type === "step-start").length,
          stored.filter((m) => m.role === "assistant").length
        )
      }),
    { fastCheck: { numRuns: 25 } }
  )
})

/** Waits until `done()` (polling every 10 ms, at most 2 s): for what a real socket delivers in its own time. */
const until = (done: () => boolean) =>
  Effect.promise(async () => {
    for (let i = 0; i < 200 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
  })

/** Runs chunks through the ai package's reader; gives the message it assembles and any protocol error. */
const assemble = (chunks: ReadonlyArray<UiMessageStream.UiMessageChunk>) =>
  Effect.promise(async () => {
    let last: UIMessage | undefined
    const errors: Array<string> = []
    const stream = new ReadableStream<UIMessageChunk>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(conforms(chunk))
        controller.close()
      }
    })
    const reader = readUIMessageStream({
      stream,
      onError: (error) => errors.push(error instanceof Error ? error.message : String(error))
    })
    for await (const message of reader) last = message
    return { message: last!, errors }
  })

const collect = <E>(events: ReadonlyArray<AgentEvent.AgentEvent>, failure?: Cause.Cause<E>) =>
  Stream.runCollect(UiMessageStream.fromEvents(
    failure === undefined
      ? Stream.fromIterable(events)
      : Stream.concat(Stream.fromIterable(events), Stream.failCause(failure))
  )).pipe(Effect.map(Chunk.toReadonlyArray))

const assistant = (text: string) => Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text })] })

const responded = (step: number, text: string) =>
  AgentEvent.ModelResponded({
    step,
    message: assistant(text),
    usage: new Response.Usage({ inputTokens: 1, outputTokens: 1, totalTokens: 2 }),
    finishReason: "stop",
    durationMillis: 1
  })

describe("UiMessageStream.fromEvents on its own", () => {
  it.effect.prop(
    "a failure's error chunk carries the error's tag and first line, never a credential in it",
    { secret: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9]{12,40}$/)) },
    ({ secret }) =>
      Effect.gen(function*() {
        const error = new AiError.UnknownError({
          module: "Provider",
          method: "stream",
          description: `rejected: authorization: Bearer sk-${secret}\nrequest body: {"key": "${secret}"}`
        })
        const chunks = yield* collect(
          [AgentEvent.ModelCallStarted({ step: 0, messageCount: 1, toolNames: [] })],
          Cause.fail(error)
        )
        const last = chunks.at(-1)!
        assert.strictEqual(last.type, "error")
        const text = (last as { readonly errorText: string }).errorText
        assert.notInclude(text, secret)
        assert.match(text, /^The run failed \(UnknownError\): .*<redacted>/)
        assert.notInclude(text, "request body")
        const { errors } = yield* assemble(chunks)
        assert.deepStrictEqual(errors, [text], "the reader reports it as the stream's error")
      }),
    { fastCheck: { numRuns: 25 } }
  )

  it.effect("a failed tool's error reaches the UI without the credentials it quotes", () =>
    Effect.gen(function*() {
      const call = Prompt.makePart("tool-call", { id: "c1", name: "fetch", params: {}, providerExecuted: false })
      const chunks = yield* collect([
        AgentEvent.ToolCallStarted({ call }),
        AgentEvent.ToolCallCompleted({
          result: Prompt.makePart("tool-result", {
            id: "c1",
            name: "fetch",
            result: { error: "401 for GET /data with authorization: Bearer sk-live-123456789abcdef" },
            isFailure: true,
            providerExecuted: false
          }),
          durationMillis: 1
        })
      ])
      const failed = chunks.find((chunk) => chunk.type === "tool-output-error") as { readonly errorText: string }
      assert.include(failed.errorText, "401 for GET /data")
      assert.notInclude(failed.errorText, "sk-live-123456789abcdef")
    }))

  it.effect("a failure mid-text closes the text part and the step before the error chunk", () =>
    Effect.gen(function*() {
      const chunks = yield* collect(
        [
          AgentEvent.ModelCallStarted({ step: 0, messageCount: 1, toolNames: [] }),
          AgentEvent.TextDelta({ step: 0, delta: "Hel" })
        ],
        Cause.fail(new AiError.UnknownError({ module: "Provider", method: "stream", description: "reset" }))
      )
      assert.deepStrictEqual(chunks.map((chunk) => chunk.type), [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "error"
      ])
      const { message } = yield* assemble(chunks)
      const part = message.parts.find((part) => part.type === "text")
      assert.strictEqual(part?.type === "text" && part.text, "Hel")
      assert.strictEqual(part?.type === "text" && part.state, "done", "the reader saw the text part end")
    }))

  it.effect("a defect says only that the run failed unexpectedly", () =>
    Effect.gen(function*() {
      const chunks = yield* collect([], Cause.die(new Error("token=abc internal detail")))
      assert.deepStrictEqual(chunks, [{ type: "start" }, {
        type: "error",
        errorText: "The run failed with an unexpected error"
      }])
    }))

  it.effect("a retried model call keeps one step; a reply that streamed no text is sent whole", () =>
    Effect.gen(function*() {
      const started = AgentEvent.ModelCallStarted({ step: 0, messageCount: 1, toolNames: [] })
      const chunks = yield* collect([
        started,
        AgentEvent.TextDelta({ step: 0, delta: "Hel" }),
        AgentEvent.ModelAttemptFailed({ step: 0, error: "HttpResponseError", message: "503", discardedText: true }),
        started,
        responded(0, "Hello")
      ])
      assert.deepStrictEqual(chunks.map((chunk) => chunk.type), [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "text-start",
        "text-delta",
        "text-end"
      ])
      const { errors, message } = yield* assemble(chunks)
      assert.deepStrictEqual(errors, [])
      assert.deepStrictEqual(message.parts.flatMap((part) => part.type === "text" ? [part.text] : []), ["Hel", "Hello"])
    }))

  it.effect("an interrupt no adapter reads arrives as a data-interrupt part, then finish", () =>
    Effect.gen(function*() {
      const interrupt = { middleware: "ask", key: "ask/0", value: { question: "go on?" } }
      const chunks = yield* collect([
        AgentEvent.RunEnded({
          result: AgentResult.Interrupted({
            threadId: "t",
            state: { messages: [] },
            interrupt,
            usage: Usage.empty,
            steps: 0
          })
        })
      ])
      assert.deepStrictEqual(chunks, [
        { type: "start" },
        { type: "data-interrupt", data: interrupt },
        { type: "finish", finishReason: "other" }
      ])
      const { message } = yield* assemble(chunks)
      assert.deepStrictEqual(message.parts, [{ type: "data-interrupt", data: interrupt }])
    }))
})
