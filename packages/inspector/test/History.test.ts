/**
 * The inspector holds history: it lists the threads stored before it started (a page at a time), opens one with
 * what it waits for, gives each model call's request as sent with the state the call saw, and starts a run from
 * the page behind its guards.
 */
import { LanguageModel } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Option } from "effect"
import * as Inspector from "../src/Inspector.js"
import { approvalScript, eventually, setup } from "./fixtures.js"

const get = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(url)
    const text = await response.text()
    return { status: response.status, body: text.startsWith("{") || text.startsWith("[") ? JSON.parse(text) : text }
  })

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body)
    })
    return { status: response.status, body: JSON.parse(await response.text()) }
  })

/** An agent storing into `checkpointer`; threads "a" to "e" stored before any inspector starts. */
const storedBefore = Effect.gen(function*() {
  const checkpointer = yield* Checkpointer.makeMemory
  const ids = ["c", "a", "e", "b", "d"]
  const { model } = yield* ScriptedModel.make(ids.map((id) => ScriptedModel.text(`hello ${id}`)))
  const agent = yield* Agent.make({}).pipe(
    Effect.provideService(LanguageModel.LanguageModel, model),
    Effect.provideService(Checkpointer.Checkpointer, checkpointer)
  )
  for (const id of ids) yield* agent.run(`hi ${id}`, { threadId: id })
  return { agent, checkpointer }
})

/** The `ModelRequestSent` entries of the inspector's log, once the run it watched ended or waits. */
const sentEntries = (base: string, token: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${base}/events?token=${token}`, { signal: AbortSignal.timeout(10_000) })
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let text = ""
    while (!text.includes("RunEnded")) text += decoder.decode((await reader.read()).value, { stream: true })
    await reader.cancel()
    return text.split("\n").filter((line) => line.startsWith("data: ["))
      .flatMap((line) => JSON.parse(line.slice(6)) as Array<any>)
      .filter((entry) => entry.event?._tag === "ModelRequestSent")
  })

const open = (agent: Agent.AgentOf<any>, options?: Inspector.Options) =>
  Effect.gen(function*() {
    const inspector = yield* Inspector.make(agent, options)
    const token = new URL(inspector.url).searchParams.get("token")!
    return { base: `http://127.0.0.1:${inspector.port}`, token, inspector }
  })

describe("Inspector history", () => {
  it.scopedLive("lists the threads stored before it started, a page at a time, from the context's checkpointer", () =>
    Effect.gen(function*() {
      const { agent, checkpointer } = yield* storedBefore
      const { base, token } = yield* open(agent).pipe(Effect.provideService(Checkpointer.Checkpointer, checkpointer))
      const first = yield* get(`${base}/api/stored-threads?limit=2&token=${token}`)
      assert.deepStrictEqual(first, { status: 200, body: { threadIds: ["a", "b"], next: "b" } })
      const second = yield* get(`${base}/api/stored-threads?limit=2&cursor=b&token=${token}`)
      assert.deepStrictEqual(second.body, { threadIds: ["c", "d"], next: "d" })
      const last = yield* get(`${base}/api/stored-threads?limit=2&cursor=d&token=${token}`)
      assert.deepStrictEqual(last.body, { threadIds: ["e"], next: null })
      const thread = yield* get(`${base}/api/threads/c?token=${token}`)
      assert.deepStrictEqual(thread.body.messages.map((message: any) => message.role), ["user", "assistant"])
      // the guard: no token, nothing listed
      assert.strictEqual((yield* get(`${base}/api/stored-threads`)).status, 401)
    }))

  it.scopedLive("lists from the storedThreads option (durable runs); 501 with nothing to list from; 400 for a bad limit", () =>
    Effect.gen(function*() {
      const { agent } = yield* storedBefore
      const seen: Array<Checkpointer.ListOptions> = []
      const listed = yield* open(agent, {
        storedThreads: (page) => Effect.sync(() => (seen.push(page), { threadIds: ["run-thread"], next: undefined }))
      })
      const page = yield* get(`${listed.base}/api/stored-threads?cursor=x&token=${listed.token}`)
      assert.deepStrictEqual(page.body, { threadIds: ["run-thread"], next: null })
      assert.deepStrictEqual(seen, [{ cursor: "x", limit: 50 }])
      for (const limit of ["0", "1001", "abc", "1.5"]) {
        const bad = yield* get(`${listed.base}/api/stored-threads?limit=${limit}&token=${listed.token}`)
        assert.strictEqual(bad.status, 400, limit)
      }
      const failing = yield* open(agent, { storedThreads: () => Effect.fail("down") })
      assert.strictEqual((yield* get(`${failing.base}/api/stored-threads?token=${failing.token}`)).status, 500)
      const none = yield* open(agent)
      const unavailable = yield* get(`${none.base}/api/stored-threads?token=${none.token}`)
      assert.strictEqual(unavailable.status, 501)
      assert.strictEqual(unavailable.body.error, "NotAvailable")
    }))

  it.scopedLive("opens a stored thread with what it waits for, though the inspector saw no run of it", () =>
    Effect.gen(function*() {
      const { agent, base, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const thread = yield* get(`${base}/api/threads/t1?limit=1&token=${token}`)
      assert.strictEqual(thread.status, 200)
      assert.strictEqual(thread.body.info.pending.middleware, "humanInTheLoop")
      assert.isString(thread.body.info.pending.key)
      assert.isFalse(thread.body.info.running)
      assert.deepStrictEqual(thread.body.info.slices.todos.map((todo: any) => todo.status), ["in_progress", "pending"])
    }))

  it.scopedLive("gives each model call's request as sent and the state the call saw; the log carries only its size", () =>
    Effect.gen(function*() {
      const { agent, base, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const sent = yield* sentEntries(base, token)
      assert.deepStrictEqual(sent.map((entry) => entry.event.step), [0, 1])
      assert.isUndefined(sent[0].event.prompt, "the prompt is kept aside, not in the log")
      const runId = sent[0].runId
      const second = yield* get(`${base}/api/runs/${runId}/steps/1/request?token=${token}`)
      assert.strictEqual(second.status, 200)
      // as the model got it: the todo list's wrap hook added its instructions to the system prompt
      assert.strictEqual(second.body.prompt[0].role, "system")
      assert.match(second.body.prompt[0].content, /^You read files\.\n\n## `write_todos`/)
      assert.strictEqual(second.body.prompt.length, sent[1].event.messageCount)
      // the state then: the thread's messages before the step's reply, the todo list the first step wrote
      assert.strictEqual(second.body.state.messages.length, 3)
      assert.deepStrictEqual(
        second.body.state.slices.todos.map((todo: { readonly content: string }) => todo.content),
        ["Read the notes", "Summarize them"]
      )
      const missing = yield* get(`${base}/api/runs/${runId}/steps/9/request?token=${token}`)
      assert.strictEqual(missing.status, 404)
      assert.strictEqual(missing.body.error, "NotFound")
    }))

  it.scopedLive("keeps only the latest maxRequests requests", () =>
    Effect.gen(function*() {
      const { agent, base, token } = yield* setup(approvalScript, { inspector: { maxRequests: 1 } })
      yield* agent.run("Read my notes", { threadId: "t1" })
      const sent = yield* sentEntries(base, token)
      const runId = sent[0].runId
      assert.strictEqual((yield* get(`${base}/api/runs/${runId}/steps/0/request?token=${token}`)).status, 404)
      assert.strictEqual((yield* get(`${base}/api/runs/${runId}/steps/1/request?token=${token}`)).status, 200)
    }))

  it.scopedLive("fails with InspectorError when maxRequests is not a whole number of at least 0", () =>
    Effect.gen(function*() {
      const { agent } = yield* storedBefore
      for (const maxRequests of [-1, 1.5, Number.NaN]) {
        const error = yield* Effect.flip(Inspector.make(agent, { maxRequests }))
        assert.strictEqual(error._tag, "InspectorError")
        assert.include(error.message, "maxRequests must be a whole number of at least 0")
      }
    }))

  it.scopedLive("starts a run on a new thread from the page; a foreign origin or no token starts nothing", () =>
    Effect.gen(function*() {
      const { agent, base, inspector, token } = yield* setup([ScriptedModel.text("Hello from a new thread.")])
      const url = `${base}/api/threads/${encodeURIComponent("fresh/1")}/send`
      const foreign = yield* post(`${url}?token=${token}`, { message: "Hi", mode: "queue" }, {
        origin: "http://evil.example"
      }).pipe(Effect.catchAllDefect(() => Effect.succeed({ status: 403, body: null })))
      assert.strictEqual(foreign.status, 403)
      const anonymous = yield* Effect.promise(() =>
        fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: "{\"message\":\"Hi\"}" })
      )
      assert.strictEqual(anonymous.status, 401)
      assert.isTrue(Option.isNone(yield* agent.thread("fresh/1")), "nothing ran")
      const started = yield* post(`${url}?token=${token}`, { message: "Hi", mode: "queue" }, {
        origin: `http://127.0.0.1:${inspector.port}`
      })
      assert.deepStrictEqual(started, { status: 202, body: { delivery: "started", mode: "queue" } })
      yield* eventually(
        Effect.map(
          agent.thread("fresh/1"),
          (thread) => Option.isSome(thread) && thread.value.state.messages.at(-1)?.role === "assistant"
        ),
        "the run to end"
      )
    }))
})
