import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Exit, Layer, Logger, Option, Schema, Scope } from "effect"
import * as Inspector from "../src/Inspector.js"
import * as Wire from "../src/internal/wire.js"
import { approvalScript, eventually, pendingOf, setup } from "./fixtures.js"

/** The approval request a durable run's wait carries (its status is untyped); `None` for another middleware's. */
const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

interface Entry {
  readonly seq: number
  readonly type: "event" | "thread"
  readonly runId?: string
  readonly threadId?: string
  readonly event?: { readonly _tag: string; readonly [key: string]: unknown }
  readonly thread?: Wire.ThreadInfo
}

/**
 * Connects to the event stream; `read` then reads it until `until` holds for
 * what arrived (or the inspector says it closed), and gives the entries and
 * whether it closed.
 */
const connectLog = (base: string, token: string) =>
  Effect.tryPromise(async () => {
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(), 10_000)
    const response = await fetch(`${base}/events?token=${token}`, { signal: controller.signal })
    const reader = response.body!.getReader()
    const read = (until: (entries: ReadonlyArray<Entry>) => boolean) =>
      Effect.tryPromise(async () => {
        const decoder = new TextDecoder()
        const entries: Array<Entry> = []
        let buffer = ""
        let closed = false
        try {
          while (!closed && !until(entries)) {
            const { done, value } = await reader.read()
            if (done) break
            buffer += decoder.decode(value, { stream: true })
            let end: number
            while ((end = buffer.indexOf("\n\n")) >= 0) {
              const frame = buffer.slice(0, end)
              buffer = buffer.slice(end + 2)
              const lines = frame.split("\n")
              const event = lines.find((line) => line.startsWith("event: "))?.slice(7)
              const data = lines.filter((line) => line.startsWith("data: ")).map((line) => line.slice(6)).join("\n")
              if (event === "closed") closed = true
              else if (event === undefined && data !== "") entries.push(...(JSON.parse(data) as Array<Entry>))
            }
          }
        } finally {
          clearTimeout(timer)
          controller.abort()
        }
        return { entries, closed }
      })
    return { read }
  })

const readLog = (base: string, token: string, until: (entries: ReadonlyArray<Entry>) => boolean) =>
  Effect.flatMap(connectLog(base, token), (log) => log.read(until))

const request = (url: string, init?: RequestInit) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    return { status: response.status, body: await response.text() }
  })

const post = (url: string, body: unknown, token?: string) =>
  request(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token === undefined ? {} : { "x-inspector-token": token }) },
    body: JSON.stringify(body)
  })

/** The key of the thread's wait, as the page gets it. */
const keyOf = (agent: Agent.AgentOf<any>, threadId: string) =>
  Effect.map(agent.thread(threadId), (thread) => {
    const { pending, state } = Option.getOrThrow(thread)
    return Wire.interruptKey(Option.getOrThrow(pending), state.messages.length)
  })

/** The decisions `decide` builds from the actions of the thread's wait (by call id), as the page builds them. */
const bound = (
  agent: Agent.AgentOf<any>,
  threadId: string,
  decide: (action: (callId: string) => HumanInTheLoop.ActionRequest) => ReadonlyArray<HumanInTheLoop.Decision>
) =>
  Effect.map(agent.thread(threadId), (thread) => {
    const pending = Option.getOrThrow(Option.getOrThrow(thread).pending)
    const request = Option.getOrThrow(approvalOf(pending))
    return decide((callId) => request.actionRequests.find((action) => action.callId === callId)!)
  })

const completed = (agent: Agent.AgentOf<any>, threadId: string) =>
  Effect.map(
    agent.thread(threadId),
    (thread) =>
      Option.isSome(thread) && Option.isNone(thread.value.pending) &&
      thread.value.state.messages.at(-1)?.role === "assistant"
  )

describe("Inspector", () => {
  it.scopedLive("binds 127.0.0.1 on a port the system picks, with a random token in the URL", () =>
    Effect.gen(function*() {
      const { inspector, token } = yield* setup(approvalScript)
      assert.strictEqual(inspector.host, "127.0.0.1")
      assert.isAbove(inspector.port, 0)
      assert.strictEqual(inspector.url, `http://127.0.0.1:${inspector.port}/?token=${token}`)
      assert.isAtLeast(token.length, 32)
      const other = yield* setup(approvalScript)
      assert.notStrictEqual(other.token, token)
    }))

  it.scopedLive("serves the page and its files with the token", () =>
    Effect.gen(function*() {
      const { base, inspector, token } = yield* setup(approvalScript)
      const page = yield* request(inspector.url)
      assert.strictEqual(page.status, 200)
      assert.include(page.body, `/assets/inspector.js?token=${token}`)
      const script = yield* request(`${base}/assets/inspector.js?token=${token}`)
      assert.strictEqual(script.status, 200)
      assert.include(script.body, "EventSource")
      const style = yield* request(`${base}/assets/inspector.css`, { headers: { authorization: `Bearer ${token}` } })
      assert.strictEqual(style.status, 200)
      assert.strictEqual((yield* request(`${base}/assets/../package.json?token=${token}`)).status, 404)
      assert.strictEqual((yield* request(`${base}/nowhere?token=${token}`)).status, 404)
    }))

  it.scopedLive("answers 401 on every route without the token, and no run changes", () =>
    Effect.gen(function*() {
      const { agent, base, reads, token } = yield* setup(approvalScript)
      const first = yield* agent.run("Read my notes", { threadId: "t1" })
      assert.strictEqual(first._tag, "Interrupted")
      const key = yield* keyOf(agent, "t1")
      const before = yield* agent.thread("t1")
      const wrong = [
        "",
        "?token=",
        `?token=${token.slice(0, -1)}`,
        `?token=${token.slice(0, -1)}${token.endsWith("A") ? "B" : "A"}`,
        `?token=${token}x`
      ]
      const routes = ["/", "/assets/inspector.js", "/assets/inspector.css", "/events", "/api/threads/t1", "/nowhere"]
      for (const query of wrong) {
        for (const route of routes) {
          const response = yield* request(`${base}${route}${query}`)
          assert.strictEqual(response.status, 401, `GET ${route}${query}`)
          assert.notInclude(response.body, "read_file")
        }
        const resume = yield* post(`${base}/api/threads/t1/resume${query}`, {
          key,
          value: [{ type: "approve", callId: "call_read" }]
        })
        assert.strictEqual(resume.status, 401)
      }
      const badHeader = yield* post(`${base}/api/threads/t1/resume`, {
        key,
        value: [{ type: "approve", callId: "call_read" }]
      }, "not-the-token")
      assert.strictEqual(badHeader.status, 401)
      assert.deepStrictEqual(yield* reads, [])
      assert.deepStrictEqual(yield* agent.thread("t1"), before)
    }))

  it.scopedLive("follows the runs on the event stream: a late page gets the whole run, then live events", () =>
    Effect.gen(function*() {
      const { agent, base, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const { entries } = yield* readLog(
        base,
        token,
        (entries) => entries.some((entry) => entry.type === "thread" && entry.thread?.pending !== null)
      )
      const tags = entries.flatMap((entry) => entry.event === undefined ? [] : [entry.event._tag])
      for (
        const tag of [
          "RunStarted",
          "ModelCallStarted",
          "ModelResponded",
          "ToolCallStarted",
          "ToolCallCompleted",
          "HookCompleted",
          "StateUpdated",
          "MiddlewareDecision",
          "RunEnded"
        ]
      ) assert.include(tags, tag)
      assert.deepStrictEqual(entries.map((entry) => entry.seq), entries.map((_, i) => i + 1))
      const waiting = entries.filter((entry) => entry.type === "thread").at(-1)!.thread!
      assert.strictEqual(waiting.threadId, "t1")
      assert.strictEqual(waiting.running, false)
      assert.strictEqual(waiting.pending?.middleware, "humanInTheLoop")
      assert.strictEqual(waiting.pending?.key, yield* keyOf(agent, "t1"))
      assert.deepStrictEqual(waiting.slices["todos"], [
        { content: "Read the notes", status: "in_progress" },
        { content: "Summarize them", status: "pending" }
      ])
      const decisions = entries.filter((entry) => entry.event?._tag === "MiddlewareDecision").map((entry) =>
        entry.event!
      )
      // context editing reports each request's size against its trigger; the todo list its list
      assert.strictEqual(decisions[0]!["middleware"], "contextEditing")
      assert.strictEqual((decisions[0]!["data"] as { trigger: number }).trigger, 120)
      assert.isTrue(decisions.some((decision) => decision["middleware"] === "todoList"))
      const responded = entries.find((entry) => entry.event?._tag === "ModelResponded")!.event!
      assert.strictEqual(responded["finishReason"], "tool-calls")
      assert.deepStrictEqual(responded["usage"], { inputTokens: 180, outputTokens: 42, totalTokens: 222 })
    }))

  it.scopedLive("keeps the last maxEvents entries for pages that open later", () =>
    Effect.gen(function*() {
      const { agent, base, token } = yield* setup(approvalScript, { inspector: { maxEvents: 5 } })
      yield* agent.run("Read my notes", { threadId: "t1" })
      const latest = yield* readLog(
        base,
        token,
        (entries) => entries.some((entry) => entry.type === "thread" && entry.thread?.pending !== null)
      )
      assert.strictEqual(latest.entries.length, 5)
      const first = latest.entries[0]!.seq
      assert.isAbove(first, 1)
      assert.deepStrictEqual(latest.entries.map((entry) => entry.seq), [0, 1, 2, 3, 4].map((i) => first + i))
      assert.strictEqual(latest.entries.at(-2)?.event?._tag, "RunEnded")
      const error = yield* Effect.flip(Inspector.make(agent, { maxEvents: 0 }))
      assert.include(error.message, "maxEvents")
    }))

  it.scopedLive("approves through the API: the run finishes and the tool ran", () =>
    Effect.gen(function*() {
      const { agent, base, reads, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const response = yield* post(`${base}/api/threads/t1/resume`, {
        key: yield* keyOf(agent, "t1"),
        value: yield* bound(agent, "t1", (a) => [HumanInTheLoop.approve(a("call_read"))])
      }, token)
      assert.strictEqual(response.status, 202)
      yield* eventually(completed(agent, "t1"), "the run to complete")
      assert.deepStrictEqual(yield* reads, ["notes.txt"])
    }))

  it.scopedLive("two tabs approving the same call: the tool runs once, the second is told it is already decided", () =>
    Effect.gen(function*() {
      const { agent, base, reads, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const body = {
        key: yield* keyOf(agent, "t1"),
        value: yield* bound(agent, "t1", (a) => [HumanInTheLoop.approve(a("call_read"))])
      }
      const answers = yield* Effect.all(
        [post(`${base}/api/threads/t1/resume`, body, token), post(`${base}/api/threads/t1/resume`, body, token)],
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(answers.map((answer) => answer.status).sort(), [202, 409])
      const refused = answers.find((answer) => answer.status === 409)!
      assert.strictEqual(JSON.parse(refused.body).error, "AlreadyDecided")
      assert.include(JSON.parse(refused.body).message, "Already decided")
      yield* eventually(completed(agent, "t1"), "the run to complete")
      const late = yield* post(`${base}/api/threads/t1/resume`, body, token)
      assert.strictEqual(late.status, 409)
      assert.deepStrictEqual(yield* reads, ["notes.txt"])
    }))

  it.scopedLive("refuses an invalid edit with its error: the tool does not run and the thread still waits", () =>
    Effect.gen(function*() {
      const { agent, base, reads, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const key = yield* keyOf(agent, "t1")
      const before = yield* agent.thread("t1")
      const invalid = yield* post(`${base}/api/threads/t1/resume`, {
        key,
        value: yield* bound(agent, "t1", (a) => [HumanInTheLoop.edit(a("call_read"), { path: 42 })])
      }, token)
      assert.strictEqual(invalid.status, 422)
      assert.strictEqual(JSON.parse(invalid.body).error, "DecisionError")
      assert.strictEqual(JSON.parse(invalid.body).reason, "InvalidEdit")
      assert.include(JSON.parse(invalid.body).message, "call_read")
      assert.deepStrictEqual(yield* reads, [])
      assert.deepStrictEqual(yield* agent.thread("t1"), before)
      const valid = yield* post(`${base}/api/threads/t1/resume`, {
        key,
        value: yield* bound(agent, "t1", (a) => [HumanInTheLoop.edit(a("call_read"), { path: "other.txt" })])
      }, token)
      assert.strictEqual(valid.status, 202)
      yield* eventually(completed(agent, "t1"), "the run to complete")
      assert.deepStrictEqual(yield* reads, ["other.txt"])
    }))

  it.scopedLive("refuses a decision meant for another wait, and bad bodies", () =>
    Effect.gen(function*() {
      const { agent, base, reads, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const stale = yield* post(`${base}/api/threads/t1/resume`, {
        key: "an-older-wait",
        value: [{ type: "approve", callId: "call_read" }]
      }, token)
      assert.strictEqual(stale.status, 409)
      const unknown = yield* post(`${base}/api/threads/nobody/resume`, { key: "x", value: [] }, token)
      assert.strictEqual(unknown.status, 404)
      const bad = yield* post(`${base}/api/threads/t1/resume`, { value: [] }, token)
      assert.strictEqual(bad.status, 400)
      assert.deepStrictEqual(yield* reads, [])
      assert.isTrue(Option.isSome(yield* pendingOf(agent, "t1")))
    }))

  it.scopedLive("pages through a thread's messages", () =>
    Effect.gen(function*() {
      const { agent, base, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const all = (yield* agent.thread("t1")).pipe(Option.getOrThrow).state.messages.length
      const last = JSON.parse((yield* request(`${base}/api/threads/t1?token=${token}&limit=2`)).body)
      assert.strictEqual(last.messageCount, all)
      assert.strictEqual(last.offset, all - 2)
      assert.strictEqual(last.messages.length, 2)
      assert.strictEqual(last.messages[1].role, "assistant")
      const first = JSON.parse((yield* request(`${base}/api/threads/t1?token=${token}&limit=2&end=2`)).body)
      assert.strictEqual(first.offset, 0)
      assert.strictEqual(first.messages[0].role, "user")
      assert.include(JSON.stringify(first.messages[0].content), "Read my notes")
      assert.strictEqual((yield* request(`${base}/api/threads/nobody?token=${token}`)).status, 404)
    }))

  it.live("closes with its scope: open pages get every event and a close, then connecting fails", () =>
    Effect.gen(function*() {
      // Handles close a tick after `close` returns: wait for those of earlier tests to go first.
      const servers = () => process.getActiveResourcesInfo().filter((name) => name === "TCPServerWrap").length
      yield* eventually(Effect.sync(() => servers() === 0), "earlier servers to close")
      const scope = yield* Scope.make()
      const { agent, base, token } = yield* Scope.extend(setup(approvalScript), scope)
      assert.strictEqual(servers(), 1)
      const log = yield* connectLog(base, token)
      const reading = yield* Effect.fork(log.read(() => false))
      yield* agent.run("Read my notes", { threadId: "t1" })
      yield* Scope.close(scope, Exit.void)
      const { closed, entries } = yield* reading
      assert.isTrue(closed)
      assert.isTrue(entries.some((entry) => entry.event?._tag === "RunEnded"))
      const after = yield* Effect.either(Effect.tryPromise(() => fetch(`${base}/?token=${token}`)))
      assert.strictEqual(after._tag, "Left")
      yield* eventually(Effect.sync(() => servers() === 0), "no server handle left")
    }))

  it.scopedLive("fails with InspectorError when the port is taken", () =>
    Effect.gen(function*() {
      const { agent, inspector } = yield* setup(approvalScript)
      const error = yield* Effect.flip(Inspector.make(agent, { port: inspector.port }))
      assert.strictEqual(error._tag, "InspectorError")
      assert.include(error.message, `127.0.0.1:${inspector.port}`)
    }))

  it.scopedLive("layer: serves the Agent of the context and logs its URL", () => {
    const logged: Array<unknown> = []
    return Effect.gen(function*() {
      const inspector = yield* Inspector.Inspector
      const page = yield* request(inspector.url)
      assert.strictEqual(page.status, 200)
      assert.deepStrictEqual(logged, [[`Agent inspector: ${inspector.url}`]])
    }).pipe(
      Effect.provide(
        Inspector.layer().pipe(
          Layer.provide(Agent.layer({ systemPrompt: "Be brief." })),
          Layer.provide(ScriptedModel.layer([])),
          Layer.provide(Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => logged.push(message))))
        )
      )
    )
  })
})

describe("Inspector: the message box", () => {
  it.scopedLive("sends to an idle thread: a run starts with the message, and the page gets MessageReceived", () =>
    Effect.gen(function*() {
      const { agent, base, token } = yield* setup([ScriptedModel.text("Hello back")])
      const response = yield* post(`${base}/api/threads/chat/send`, { message: "Hello", mode: "queue" }, token)
      assert.strictEqual(response.status, 202)
      assert.deepStrictEqual(JSON.parse(response.body), { delivery: "started", mode: "queue" })
      yield* eventually(completed(agent, "chat"), "the run to complete")
      const thread = Option.getOrThrow(yield* agent.thread("chat"))
      assert.deepStrictEqual(thread.state.messages.map((message) => message.role), ["user", "assistant"])
      const log = yield* readLog(base, token, (entries) => entries.some((entry) => entry.event?._tag === "RunEnded"))
      const received = log.entries.find((entry) => entry.event?._tag === "MessageReceived")!.event!
      assert.strictEqual(received["mode"], "queue")
      const [message] = received["messages"] as ReadonlyArray<{ role: string; content: ReadonlyArray<unknown> }>
      assert.strictEqual(message!.role, "user")
      assert.deepStrictEqual(message!.content.map((part) => (part as { text?: string }).text), ["Hello"])
    }))

  it.scopedLive("refuses a body without a message (400), an unknown mode (400) and a request without the token (401)", () =>
    Effect.gen(function*() {
      const { agent, base, token } = yield* setup([])
      const empty = yield* post(`${base}/api/threads/chat/send`, { message: "" }, token)
      assert.strictEqual(empty.status, 400)
      const badMode = yield* post(`${base}/api/threads/chat/send`, { message: "hi", mode: "shout" }, token)
      assert.strictEqual(badMode.status, 400)
      const noToken = yield* post(`${base}/api/threads/chat/send`, { message: "hi" })
      assert.strictEqual(noToken.status, 401)
      assert.isTrue(Option.isNone(yield* agent.thread("chat")))
    }))
})
