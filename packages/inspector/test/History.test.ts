/**
 * The inspector holds history: it lists the threads stored before it started (a page at a time), opens one with
 * what it waits for, gives each model call's request as sent with the state the call saw, and starts a run from
 * the page behind its guards.
 */
import { LanguageModel } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Effect, FastCheck, Option, Schema } from "effect"
import * as Inspector from "../src/Inspector.js"
import { approvalScript, eventually, pendingOf, setup } from "./fixtures.js"

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

/** A thread "src": a `tick` call (`tick_0`), its result, then an answer; the fork's turns come after. */
const forkSource = (more: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.gen(function*() {
    const opened = yield* setup([
      ScriptedModel.toolCalls([{ name: "tick", params: {}, id: "tick_0" }]),
      ScriptedModel.text("Ticked once."),
      ...more
    ])
    yield* opened.agent.run("Tick once", { threadId: "src" })
    const before = yield* opened.agent.thread("src")
    const fork = (body: unknown, threadId = "src") =>
      post(`${opened.base}/api/threads/${encodeURIComponent(threadId)}/fork?token=${opened.token}`, body)
    return { ...opened, before, fork }
  })

const lastText = (agent: Agent.AgentOf<any>, threadId: string) =>
  Effect.map(agent.thread(threadId), (thread) => {
    const last = Option.isSome(thread) ? thread.value.state.messages.at(-1) : undefined
    return last?.role === "assistant" && Array.isArray(last.content)
      ? last.content.map((part: any) => part.type === "text" ? part.text : "").join("")
      : undefined
  })

describe("Inspector fork", () => {
  it.scopedLive("forks a thread before a step with an edited tool result; the fork runs live, the source is untouched", () =>
    Effect.gen(function*() {
      const { agent, before, fork } = yield* forkSource([ScriptedModel.text("The tick gave 50.")])
      const forked = yield* fork({ to: "src-fork", at: 1, edit: { _tag: "ToolResult", callId: "tick_0", result: 50 } })
      assert.deepStrictEqual(forked, { status: 202, body: { status: "forked", threadId: "src-fork" } })
      yield* eventually(
        Effect.map(lastText(agent, "src-fork"), (text) => text === "The tick gave 50."),
        "the fork's run to answer"
      )
      const thread = yield* agent.thread("src-fork")
      const tool = Option.getOrThrow(thread).state.messages[2]
      assert.strictEqual(tool.role, "tool")
      assert.strictEqual((tool.content[0] as any).result, 50)
      assert.deepStrictEqual(yield* agent.thread("src"), before, "the source thread is untouched")
    }))

  it.scopedLive("forks with a message taken in before the step", () =>
    Effect.gen(function*() {
      const { agent, fork } = yield* forkSource([ScriptedModel.text("Stopped.")])
      const forked = yield* fork({ to: "with-message", at: 0, edit: { _tag: "Message", message: "Stop." } })
      assert.strictEqual(forked.status, 202)
      yield* eventually(Effect.map(lastText(agent, "with-message"), (text) => text === "Stopped."), "the fork's run")
      const messages = Option.getOrThrow(yield* agent.thread("with-message")).state.messages
      assert.deepStrictEqual(messages.map((message: any) => message.role), ["user", "user", "assistant"])
    }))

  it.scopedLive("refuses a body that is not a fork with 400 naming what was wrong, and writes nothing", () =>
    Effect.gen(function*() {
      const { agent, base, fork, token } = yield* forkSource([])
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [{}, "to: is missing"],
        [{ to: "x" }, "at: is missing"],
        [{ to: "", at: 0 }, "to:"],
        [{ to: "x", at: -1 }, "at:"],
        [{ to: "x", at: 1.5 }, "at:"],
        [{ to: "x", at: "1" }, "at:"],
        [{ to: "x", at: 0, edit: { _tag: "SystemPrompt", prompt: "Be terse." } }, "edit._tag:"],
        [{ to: "x", at: 0, edit: { _tag: "Message", message: "" } }, "edit.message:"],
        [{ to: "x", at: 0, edit: { _tag: "Message", message: 42 } }, "edit.message:"],
        [{ to: "x", at: 0, edit: { _tag: "ToolResult", result: 1 } }, "edit.callId: is missing"],
        [
          { to: "x", at: 0, edit: { _tag: "ToolResult", callId: "tick_0", result: 1, isFailure: "yes" } },
          "edit.isFailure:"
        ],
        [{ to: "x", at: 0, edits: {} }, "edits:"],
        [[], "the body is not a JSON object"],
        [null, "the body is not a JSON object"],
        ["{}", "the body is not a JSON object"]
      ]
      for (const [body, names] of cases) {
        const refused = yield* fork(body)
        assert.strictEqual(refused.status, 400, JSON.stringify(body))
        assert.strictEqual(refused.body.error, "BadRequest")
        assert.include(refused.body.message, names, JSON.stringify(body))
      }
      const notJson = yield* Effect.promise(async () => {
        const response = await fetch(`${base}/api/threads/src/fork?token=${token}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{ to: x"
        })
        return { status: response.status, body: await response.json() as { readonly message: string } }
      })
      assert.strictEqual(notJson.status, 400)
      assert.include(notJson.body.message, "the body is not JSON")
      assert.isTrue(Option.isNone(yield* agent.thread("x")), "nothing written")
    }))

  it.scopedLive("a step or thread that does not exist, a taken target, or an edit that does not apply: a typed ForkError, nothing written", () =>
    Effect.gen(function*() {
      const { agent, before, fork } = yield* forkSource([])
      const noStep = yield* fork({ to: "f", at: 3 })
      assert.strictEqual(noStep.status, 422)
      assert.deepInclude(noStep.body, { error: "ForkError", reason: "NoSuchStep" })
      assert.include(noStep.body.message, "its steps are 0 to 2")
      const noThread = yield* fork({ to: "f", at: 0 }, "nowhere")
      assert.strictEqual(noThread.status, 404)
      assert.deepInclude(noThread.body, { error: "ForkError", reason: "NoSuchThread" })
      const taken = yield* fork({ to: "src", at: 0 })
      assert.strictEqual(taken.status, 409)
      assert.deepInclude(taken.body, { error: "ForkError", reason: "ThreadExists" })
      const noCall = yield* fork({ to: "f", at: 0, edit: { _tag: "ToolResult", callId: "tick_0", result: 1 } })
      assert.strictEqual(noCall.status, 422)
      assert.deepInclude(noCall.body, { error: "ForkError", reason: "NoSuchToolCall" })
      const notWaiting = yield* fork({ to: "f", at: 2, edit: { _tag: "Decision", decision: {} } })
      assert.deepInclude(notWaiting.body, { error: "ForkError", reason: "NotWaiting" })
      const badTarget = yield* fork({ to: "\ud800", at: 0 })
      assert.strictEqual(badTarget.status, 422)
      assert.strictEqual(badTarget.body.error, "InvalidInput")
      assert.isTrue(Option.isNone(yield* agent.thread("f")), "nothing written")
      assert.deepStrictEqual(yield* agent.thread("src"), before)
    }))

  it.scopedLive("of two forks to one thread at once, one starts and the other is refused with 409", () =>
    Effect.gen(function*() {
      const { fork } = yield* forkSource([ScriptedModel.text("a"), ScriptedModel.text("b")])
      const both = yield* Effect.all([fork({ to: "same", at: 1 }), fork({ to: "same", at: 2 })], {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(both.map((answer) => answer.status).sort(), [202, 409])
      assert.deepInclude(both.find((answer) => answer.status === 409)!.body, { reason: "ThreadExists" })
    }))

  it.scopedLive("answers any body with 202 or a 4xx, never a 500, and writes nothing unless it answers 202", () =>
    Effect.gen(function*() {
      const { agent, fork } = yield* forkSource([])
      const edit = FastCheck.oneof(
        FastCheck.record({ _tag: FastCheck.constant("Message"), message: FastCheck.string() }),
        FastCheck.record({
          _tag: FastCheck.constant("ToolResult"),
          callId: FastCheck.constantFrom("tick_0", "nope", ""),
          result: FastCheck.jsonValue()
        }, { requiredKeys: ["_tag"] }),
        FastCheck.record({ _tag: FastCheck.constantFrom("Decision", "SystemPrompt"), decision: FastCheck.jsonValue() }),
        FastCheck.jsonValue()
      )
      const body = FastCheck.oneof(
        FastCheck.jsonValue(),
        FastCheck.record({
          to: FastCheck.oneof(FastCheck.string(), FastCheck.jsonValue()),
          at: FastCheck.oneof(FastCheck.integer({ min: -2, max: 4 }), FastCheck.double(), FastCheck.jsonValue()),
          edit
        }, { requiredKeys: [] })
      )
      const forked = new Set<unknown>(["src"])
      for (const sample of FastCheck.sample(body, { numRuns: 60, seed: 35 })) {
        const answer = yield* fork(sample)
        assert.oneOf(answer.status, [202, 400, 404, 409, 422], JSON.stringify(sample))
        const to = (sample as { readonly to?: unknown } | null)?.to
        if (answer.status === 202) forked.add(to)
        else if (typeof to === "string" && to.length > 0 && !forked.has(to)) {
          assert.isTrue(
            Option.isNone(yield* agent.thread(to)),
            `${JSON.stringify(sample)} wrote its target: ${JSON.stringify(answer)}`
          )
        }
      }
    }))

  it.scopedLive("a fork at a thread's wait asks again for itself; a decision its wait refuses writes nothing", () =>
    Effect.gen(function*() {
      const { agent, base, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const url = `${base}/api/threads/t1/fork?token=${token}`
      const withoutDecision = yield* post(url, { to: "t1-asks", at: 2 })
      assert.strictEqual(withoutDecision.status, 202)
      yield* eventually(Effect.map(pendingOf(agent, "t1-asks"), Option.isSome), "the fork waits on its own request")
      const badDecision = yield* post(url, { to: "t1-fork", at: 2, edit: { _tag: "Decision", decision: [{}] } })
      assert.strictEqual(badDecision.status, 400)
      assert.notStrictEqual(badDecision.body.error, "ForkError")
      assert.isTrue(Option.isNone(yield* agent.thread("t1-fork")), "a refused decision writes nothing")
      assert.isTrue(Option.isSome(yield* pendingOf(agent, "t1")), "the source still waits")
    }))

  it.scopedLive("a decision the fork's own wait refuses (bound to the source's wait) answers 409 with the typed error, not 202, and writes nothing", () =>
    Effect.gen(function*() {
      const { agent, base, token } = yield* setup(approvalScript)
      yield* agent.run("Read my notes", { threadId: "t1" })
      const source = Option.getOrThrow(yield* pendingOf(agent, "t1"))
      const request = Schema.decodeUnknownSync(HumanInTheLoop.ApprovalRequest)(source.value)
      const url = `${base}/api/threads/t1/fork?token=${token}`
      // its shape is right, so it passes the check before the fork starts; the fork's wait asks again and refuses it
      const stale = yield* post(url, {
        to: "t1-fork",
        at: 2,
        edit: { _tag: "Decision", decision: HumanInTheLoop.approveAll(request) }
      })
      assert.strictEqual(stale.status, 409, JSON.stringify(stale.body))
      assert.strictEqual(stale.body.error, "DecisionError")
      assert.strictEqual(stale.body.reason, "Stale")
      assert.isString(stale.body.message)
      assert.isTrue(Option.isNone(yield* agent.thread("t1-fork")), "a refused decision writes nothing")
      assert.isTrue(Option.isSome(yield* pendingOf(agent, "t1")), "the source still waits")
    }))

  it.scopedLive("a decision the fork's own wait takes answers 202 once taken, and the fork goes on with it; one of the wrong shape answers 400", () =>
    Effect.gen(function*() {
      // a wait of its own, bound to nothing: the source's decision fits the fork's wait too
      const confirm = Middleware.make({
        name: "confirm",
        wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.Struct({ go: Schema.Boolean }) },
        beforeModel: ({ resume, step }) =>
          Effect.succeed(Option.isNone(resume) && step === 1 ? { interrupt: { question: "Go on?" } } : undefined)
      })
      const { model } = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([{ name: "echo", params: { text: "hi" }, id: "e1" }]),
        ScriptedModel.text("Went on.")
      ])
      const agent = yield* Agent.make({ toolkit: Fixtures.toolkit, middleware: [confirm] }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model),
        Effect.provide(Fixtures.layer)
      )
      yield* agent.run("Echo hi", { threadId: "src" })
      const { base, token } = yield* open(agent)
      const url = `${base}/api/threads/src/fork?token=${token}`
      const wrongShape = yield* post(url, { to: "bad", at: 1, edit: { _tag: "Decision", decision: { go: "yes" } } })
      assert.strictEqual(wrongShape.status, 400, JSON.stringify(wrongShape.body))
      assert.isTrue(Option.isNone(yield* agent.thread("bad")), "nothing written")
      const taken = yield* post(url, { to: "good", at: 1, edit: { _tag: "Decision", decision: { go: true } } })
      assert.strictEqual(taken.status, 202, JSON.stringify(taken.body))
      yield* eventually(
        Effect.map(
          agent.thread("good"),
          Option.exists((thread) => Option.isNone(thread.pending) && thread.state.messages.length === 4)
        ),
        "the fork went on past its wait"
      )
      assert.isTrue(Option.isSome(yield* pendingOf(agent, "src")), "the source still waits")
    }))

  it.scopedLive("the fork route is behind the inspector's guards: no token or a foreign origin forks nothing", () =>
    Effect.gen(function*() {
      const { agent, base, inspector, token } = yield* forkSource([ScriptedModel.text("forked")])
      const url = `${base}/api/threads/src/fork`
      const body = { to: "guarded", at: 1 }
      const anonymous = yield* Effect.promise(() =>
        fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
      )
      assert.strictEqual(anonymous.status, 401)
      const foreign = yield* post(`${url}?token=${token}`, body, { origin: "http://evil.example" }).pipe(
        Effect.catchAllDefect(() => Effect.succeed({ status: 403, body: null }))
      )
      assert.strictEqual(foreign.status, 403)
      assert.isTrue(Option.isNone(yield* agent.thread("guarded")), "nothing forked")
      const allowed = yield* post(`${url}?token=${token}`, body, { origin: `http://127.0.0.1:${inspector.port}` })
      assert.strictEqual(allowed.status, 202)
    }))
})
