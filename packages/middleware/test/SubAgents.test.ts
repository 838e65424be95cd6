import type { Prompt } from "@effect/ai"
import { AiError, LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import {
  Agent,
  AgentError,
  AgentEvent,
  Checkpointer,
  Middleware,
  RunJournal,
  Secrets,
  UiMessageStream,
  type Wait
} from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Option, Ref, Schema, Stream } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as SubAgents from "../src/SubAgents.js"

/** The approval request a wait (as an untyped agent sees it) carries; `None` for another middleware's. */
const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

// ---------------------------------------------------------------------------
// fixtures
// ---------------------------------------------------------------------------

const DeleteFile = Tool.make("delete_file", {
  description: "Deletes a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(DeleteFile)

const lastText = (prompt: Prompt.Prompt): string => {
  const last = prompt.content.at(-1)
  if (last === undefined) return ""
  if (last.role === "user") return last.content.map((part) => (part.type === "text" ? part.text : "")).join("")
  return last.role === "tool" ? "tool" : ""
}

/** A model that answers each request with `reply(last user text or "tool")`, as often as asked. */
const reactive = (reply: (last: string) => ReadonlyArray<any>) =>
  Effect.map(
    ScriptedModel.make(
      Array.from({ length: 40 }, () => (request: ScriptedModel.Request) => reply(lastText(request.prompt)))
    ),
    ({ model }) => model
  )

/** A child that answers `researched: <task>` at once. */
const researcher = Effect.flatMap(
  reactive((last) => ScriptedModel.text(`researched: ${last}`)),
  (model) =>
    Agent.make({ systemPrompt: "You research." }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
)

/** A child that deletes the file its task names, after a person approves (HumanInTheLoop in the child). */
const cleaner = (log: Ref.Ref<ReadonlyArray<string>>, callId?: string) =>
  Effect.gen(function*() {
    const model = yield* reactive((last) =>
      last === "tool"
        ? ScriptedModel.text("cleaned")
        : ScriptedModel.toolCalls([{ name: "delete_file", params: { path: last }, ...(callId ? { id: callId } : {}) }])
    )
    const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })
    return yield* Agent.make({ toolkit: Tools, middleware: [hitl] }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model),
      Effect.provide(Tools.toLayer({
        delete_file: ({ path }) => Effect.as(Ref.update(log, (all) => [...all, path]), `deleted ${path}`)
      }))
    )
  })

class OverQuota extends Schema.TaggedError<OverQuota>()("OverQuota", { limit: Schema.Number }) {}

const task = (agent: string, text: string, id: string) => ({ id, name: "task", params: { agent, task: text } })

/** A child that delegates its task to the cleaner (call `g1`), then answers "managed": two levels of delegation. */
const manager = (log: Ref.Ref<ReadonlyArray<string>>) =>
  Effect.gen(function*() {
    const model = yield* reactive((last) =>
      last === "tool" ? ScriptedModel.text("managed") : ScriptedModel.toolCalls([task("cleaner", last, "g1")])
    )
    return yield* Agent.make({
      middleware: [
        SubAgents.middleware({ agents: { cleaner: { description: "Deletes", agent: yield* cleaner(log) } } })
      ]
    }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
  })

/** A parent on a scripted model whose first reply makes `calls`, then answers "all done". */
const parent = (
  calls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly params: unknown }>,
  agents: Record<string, SubAgents.SubAgent>,
  options?: Partial<SubAgents.Options<any>>
) =>
  Effect.gen(function*() {
    const { model, recorder } = yield* ScriptedModel.make([
      ScriptedModel.toolCalls(calls),
      ScriptedModel.text("all done")
    ])
    const agent = yield* Agent.make({ middleware: [SubAgents.middleware({ agents, ...options })] }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model)
    )
    return { agent, recorder }
  })

/** Every tool call has exactly one result after it, and every result answers an earlier call. */
const assertWellPaired = (messages: ReadonlyArray<Prompt.Message>) => {
  const open = new Set<string>()
  const answered = new Set<string>()
  for (const message of messages) {
    if (message.role === "assistant") {
      for (const part of message.content) if (part.type === "tool-call") open.add(part.id)
    }
    if (message.role === "tool") {
      for (const part of message.content) {
        assert.isTrue(open.has(part.id), `result ${part.id} answers no earlier call`)
        assert.isFalse(answered.has(part.id), `call ${part.id} answered twice`)
        answered.add(part.id)
      }
    }
  }
  assert.deepStrictEqual([...open].filter((id) => !answered.has(id)), [], "calls without a result")
}

const resultsOf = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.flatMap((message) => message.role === "tool" ? message.content : [])

const approveAll = (interrupt: Wait.Interrupt<SubAgents.Waits>) =>
  SubAgents.decide(
    interrupt,
    (leaf) => Option.getOrUndefined(Option.map(approvalOf(leaf.interrupt), HumanInTheLoop.approveAll))
  )

// ---------------------------------------------------------------------------
// tests
// ---------------------------------------------------------------------------

describe("SubAgents", () => {
  it.effect("a task call runs the child on its own thread and its answer is the call's result", () =>
    Effect.gen(function*() {
      const child = yield* researcher
      const { agent, recorder } = yield* parent([task("researcher", "the moon", "c1")], {
        researcher: { description: "Researches", agent: child }
      })
      const result = yield* agent.run("Tell me about the moon", { threadId: "p" })
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(result._tag === "Completed" && result.text, "all done")
      const [answer] = resultsOf(result.state.messages)
      assert.deepStrictEqual([answer?.id, answer?.result, answer?.isFailure], ["c1", "researched: the moon", false])
      assertWellPaired(result.state.messages)
      // the child's thread holds only the task and its answer: nothing of the parent's conversation
      const thread = Option.getOrThrow(yield* child.thread("p/task/c1/1"))
      assert.deepStrictEqual(thread.state.messages.map((m) => m.role), ["user", "assistant"])
      assert.strictEqual(lastText({ content: [thread.state.messages[0]!] } as any), "the moon")
      // the tool the model sees lists the agents
      const [first] = yield* recorder.requests
      assert.deepStrictEqual(first?.toolNames, ["task"])
    }))

  it.effect("an unknown agent name is a failed result the model reads, naming the agents; nothing runs", () =>
    Effect.gen(function*() {
      const child = yield* researcher
      const { agent } = yield* parent([task("astronomer", "the moon", "c1")], {
        researcher: { description: "Researches", agent: child }
      })
      const result = yield* agent.run("hi", { threadId: "p" })
      const [answer] = resultsOf(result.state.messages)
      assert.isTrue(answer?.isFailure)
      assert.strictEqual(answer?.result, `Unknown agent "astronomer". Available agents: researcher`)
      assert.isTrue(Option.isNone(yield* child.thread("p/task/c1/1")))
    }))

  it.effect("a child that fails answers the call with a failed result naming the error (onFailure: result)", () =>
    Effect.gen(function*() {
      const { model } = yield* ScriptedModel.make([ScriptedModel.httpError(503)])
      const broken = yield* Agent.make({}).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      const { agent } = yield* parent([task("broken", "x", "c1")], { broken: { description: "Fails", agent: broken } })
      const result = yield* agent.run("hi", { threadId: "p" })
      assert.strictEqual(result._tag, "Completed")
      const [answer] = resultsOf(result.state.messages)
      assert.isTrue(answer?.isFailure)
      assert.match(String(answer?.result), /^The subagent "broken" failed: HttpResponseError: /)
    }))

  it.effect("a child that fails fails the parent with SubAgentFailed (onFailure: fail)", () =>
    Effect.gen(function*() {
      const { model } = yield* ScriptedModel.make([ScriptedModel.httpError(503)])
      const broken = yield* Agent.make({}).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      const { agent } = yield* parent(
        [task("broken", "x", "c1")],
        { broken: { description: "Fails", agent: broken } },
        {
          onFailure: "fail"
        }
      )
      const error = (yield* Effect.flip(agent.run("hi", { threadId: "p" }))) as SubAgents.SubAgentFailed
      assert.strictEqual(error._tag, "SubAgentFailed")
      assert.deepInclude(error, { callId: "c1", agent: "broken", threadId: "p/task/c1/1" })
      // the child's error is kept as the value it failed with, not its tag as text
      assert.instanceOf(error.error, AiError.HttpResponseError)
      assert.strictEqual((error.error as AiError.HttpResponseError).response.status, 503)
      assert.include(error.message, "failed: HttpResponseError: ")
    }))

  it.effect("SubAgentFailed keeps the child's error scrubbed: no credential in its value, message or JSON", () =>
    Effect.gen(function*() {
      const key = "sk-child-credential-0123456789"
      const { model } = yield* ScriptedModel.make([
        new AiError.UnknownError({ module: "Gateway", method: "generateText", description: `invalid key ${key}` })
      ])
      const broken = yield* Agent.make({}).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      const { agent } = yield* parent(
        [task("broken", "x", "c1")],
        { broken: { description: "Fails", agent: broken } },
        { onFailure: "fail" }
      )
      const failed = yield* Effect.flip(agent.run("hi", { threadId: "p" }))
      assert.instanceOf(failed, SubAgents.SubAgentFailed)
      const { error } = failed as SubAgents.SubAgentFailed
      assert.instanceOf(error, AiError.UnknownError)
      for (const text of [JSON.stringify(failed), JSON.stringify(error), String(failed), (failed as Error).message]) {
        assert.notInclude(text, key)
      }
    }).pipe(Effect.provide(Secrets.layer("sk-child-credential-0123456789"))))

  it.effect("SubAgentFailed keeps a child's typed error whole: the parent matches it by class and fields", () =>
    Effect.gen(function*() {
      const model = yield* reactive(() => ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "a" } }]))
      const looping = yield* Agent.make({ toolkit: Tools, maxSteps: 1 }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model),
        Effect.provide(Tools.toLayer({ delete_file: () => Effect.succeed("again") }))
      )
      const { agent } = yield* parent(
        [task("looping", "x", "c1")],
        { looping: { description: "Loops", agent: looping } },
        { onFailure: "fail" }
      )
      const failed = yield* Effect.flip(agent.run("hi", { threadId: "p" }))
      assert.instanceOf(failed, SubAgents.SubAgentFailed)
      const { error } = failed as SubAgents.SubAgentFailed
      assert.instanceOf(error, AgentError.MaxStepsExceeded)
      assert.deepInclude(error, { threadId: "p/task/c1/1", maxSteps: 1 })
    }))

  it.effect("SubAgentFailed is typed by the children: the parent matches a child's own error by _tag, no cast", () =>
    Effect.gen(function*() {
      const { model: childModel } = yield* ScriptedModel.make([ScriptedModel.text("unused")])
      const quota = Middleware.make({
        name: "quota",
        beforeModel: () => Effect.fail(new OverQuota({ limit: 5 }))
      })
      const limited = yield* Agent.make({ middleware: [quota] }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, childModel)
      )
      const { model } = yield* ScriptedModel.make([ScriptedModel.toolCalls([task("limited", "x", "c1")])])
      const agent = yield* Agent.make({
        middleware: [
          SubAgents.middleware({ agents: { limited: { description: "Limited", agent: limited } }, onFailure: "fail" })
        ]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      const failed = yield* Effect.flip(agent.run("hi", { threadId: "p" }))
      const limit = failed._tag === "SubAgentFailed" && failed.error._tag === "OverQuota"
        ? failed.error.limit
        : undefined
      assert.strictEqual(limit, 5)
    }))

  it("SubAgentFailed decodes as stored: the agent's, the provider's and the timeout's errors come back as classes", () => {
    const delegation = { callId: "c1", agent: "child", threadId: "p/task/c1/1" }
    const codec = Schema.parseJson(SubAgents.SubAgentsError)
    const errors = [
      new AgentError.MaxStepsExceeded({ threadId: "p/task/c1/1", maxSteps: 3 }),
      new AiError.UnknownError({ module: "Gateway", method: "generateText", description: "down" }),
      new SubAgents.SubAgentTimeout({ ...delegation, timeoutMillis: 1000 })
    ]
    for (const error of errors) {
      const stored = Schema.encodeSync(codec)(new SubAgents.SubAgentFailed({ ...delegation, error, reason: "r" }))
      const back = Schema.decodeUnknownSync(codec)(stored)
      assert.instanceOf(back, SubAgents.SubAgentFailed)
      if (back._tag !== "SubAgentFailed") continue
      assert.instanceOf(back.error, error.constructor as new(...args: ReadonlyArray<never>) => unknown)
      assert.deepStrictEqual(back.error, error)
    }
    // an error of a child's own middleware, which the module does not know, is kept as it was stored
    const own = Schema.encodeSync(codec)(
      new SubAgents.SubAgentFailed({ ...delegation, error: new OverQuota({ limit: 5 }), reason: "r" })
    )
    const back = Schema.decodeUnknownSync(codec)(own) as SubAgents.SubAgentFailed<unknown>
    assert.deepInclude(back.error, { _tag: "OverQuota", limit: 5 })
    // as an earlier version wrote it (the error as JSON keeps the value), it decodes too, the error to its class
    const before = JSON.stringify({
      _tag: "SubAgentFailed",
      ...delegation,
      error: { threadId: "p/task/c1/1", maxSteps: 3, _tag: "MaxStepsExceeded" },
      reason: "r"
    })
    const decoded = Schema.decodeUnknownSync(codec)(before)
    assert.isTrue(decoded._tag === "SubAgentFailed" && decoded.error instanceof AgentError.MaxStepsExceeded)
  })

  it.effect("a child's maxSteps is a typed error of the child: the call's result names MaxStepsExceeded", () =>
    Effect.gen(function*() {
      const model = yield* reactive(() => ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "a" } }]))
      const looping = yield* Agent.make({ toolkit: Tools, maxSteps: 2 }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model),
        Effect.provide(Tools.toLayer({ delete_file: () => Effect.succeed("again") }))
      )
      const { agent } = yield* parent([task("looping", "x", "c1")], {
        looping: { description: "Loops", agent: looping }
      })
      const result = yield* agent.run("hi", { threadId: "p" })
      const [answer] = resultsOf(result.state.messages)
      assert.isTrue(answer?.isFailure)
      assert.match(String(answer?.result), /failed: MaxStepsExceeded: /)
    }))

  it.effect("a child that waits for an approval ends the parent Interrupted while a sibling completes; resume approves it", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const { agent } = yield* parent([task("cleaner", "old.log", "c1"), task("researcher", "disks", "c2")], {
        cleaner: { description: "Deletes files", agent: yield* cleaner(log) },
        researcher: { description: "Researches", agent: yield* researcher }
      })
      const first = yield* agent.run("Free some space", { threadId: "p" })
      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      const leaves = SubAgents.leaves(first.interrupt)
      assert.deepStrictEqual(leaves.map((leaf) => leaf.path), [[{
        callId: "c1",
        agent: "cleaner",
        threadId: "p/task/c1/1"
      }]])
      assert.strictEqual(leaves[0]!.interrupt.middleware, "humanInTheLoop")
      // the sibling's answer is stored already; the waiting call has none yet; nothing was deleted
      assert.deepStrictEqual(resultsOf(first.state.messages).map((r) => [r.id, r.result]), [[
        "c2",
        "researched: disks"
      ]])
      assert.deepStrictEqual(yield* Ref.get(log), [])
      const second = yield* agent.resume("p", approveAll(first.interrupt))
      assert.strictEqual(second._tag, "Completed")
      assert.deepStrictEqual(yield* Ref.get(log), ["old.log"])
      assert.deepStrictEqual(
        resultsOf(second.state.messages).map((r) => [r.id, r.result]),
        [["c1", "cleaned"], ["c2", "researched: disks"]]
      )
      assertWellPaired(second.state.messages)
    }))

  it.effect("a decision for a call that does not wait fails with TaskDecisionError UnknownCall; the thread still waits, nothing ran", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const { agent } = yield* parent([task("cleaner", "old.log", "c1")], {
        cleaner: { description: "Deletes files", agent: yield* cleaner(log) }
      })
      const first = yield* agent.run("Free some space", { threadId: "p" })
      assert.strictEqual(first._tag, "Interrupted")
      const error = (yield* Effect.flip(agent.resume("p", { c9: [] }))) as SubAgents.TaskDecisionError
      assert.deepInclude(error, { _tag: "TaskDecisionError", reason: "UnknownCall" })
      assert.deepInclude(error, { callIds: ["c9"], waiting: ["c1"] })
      const none = yield* Effect.flip(agent.resume("p", {}))
      assert.deepInclude(none, { _tag: "TaskDecisionError", reason: "NoDecision", threadId: "p" })
      const notObject = (yield* Effect.flip(agent.resume("p", "approve" as never))) as { readonly _tag: string }
      // not decisions by call id: the wait's schema refuses it
      assert.strictEqual(notObject._tag, "InvalidResume")
      // the child checks its own decision before anything runs
      const badChild = (yield* Effect.flip(agent.resume("p", { c1: "yes please" }))) as { readonly _tag: string }
      assert.strictEqual(badChild._tag, "InvalidResume")
      assert.isTrue(Option.isSome(Option.getOrThrow(yield* agent.thread("p")).pending))
      assert.deepStrictEqual(yield* Ref.get(log), [])
    }))

  it.effect("decisions for some waiting children resume those; the parent waits again on the others", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const { agent } = yield* parent([task("cleaner", "a.txt", "c1"), task("cleaner", "b.txt", "c2")], {
        cleaner: { description: "Deletes files", agent: yield* cleaner(log) }
      })
      const first = yield* agent.run("Delete both", { threadId: "p" })
      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      assert.deepStrictEqual(SubAgents.leaves(first.interrupt).map((leaf) => leaf.path[0]!.callId), ["c1", "c2"])
      const onlyFirst = SubAgents.decide(first.interrupt, (leaf) =>
        leaf.path[0]!.callId === "c1"
          ? Option.getOrUndefined(Option.map(approvalOf(leaf.interrupt), HumanInTheLoop.approveAll))
          : undefined)
      assert.deepStrictEqual(Object.keys(onlyFirst as object), ["c1"])
      const second = yield* agent.resume("p", onlyFirst)
      assert.strictEqual(second._tag, "Interrupted")
      if (second._tag !== "Interrupted") return
      assert.deepStrictEqual(yield* Ref.get(log), ["a.txt"])
      assert.deepStrictEqual(SubAgents.leaves(second.interrupt).map((leaf) => leaf.path[0]!.callId), ["c2"])
      assert.deepStrictEqual(resultsOf(second.state.messages).map((r) => [r.id, r.result]), [["c1", "cleaned"]])
      // the first wait is over: a decision for c1 now names a call that does not wait
      const stale = (yield* Effect.flip(agent.resume("p", onlyFirst))) as SubAgents.TaskDecisionError
      assert.deepInclude(stale, { _tag: "TaskDecisionError", reason: "UnknownCall" })
      const third = yield* agent.resume("p", approveAll(second.interrupt))
      assert.strictEqual(third._tag, "Completed")
      assert.deepStrictEqual(yield* Ref.get(log), ["a.txt", "b.txt"])
      assertWellPaired(third.state.messages)
    }))

  it.effect("two levels: a grandchild's approval surfaces with its path and is routed down by decide", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const { agent } = yield* parent([task("manager", "tmp.txt", "c1")], {
        manager: { description: "Manages", agent: yield* manager(log) }
      })
      const first = yield* agent.run("Tidy up", { threadId: "p" })
      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      const [leaf] = SubAgents.leaves(first.interrupt)
      assert.deepStrictEqual(leaf?.path.map((step) => [step.callId, step.agent, step.threadId]), [
        ["c1", "manager", "p/task/c1/1"],
        ["g1", "cleaner", "p/task/c1/1/task/g1/1"]
      ])
      const decision = approveAll(first.interrupt) as Record<string, Record<string, unknown>>
      assert.deepStrictEqual(Object.keys(decision), ["c1"])
      assert.deepStrictEqual(Object.keys(decision.c1!), ["g1"])
      const second = yield* agent.resume("p", decision)
      assert.strictEqual(second._tag, "Completed")
      assert.deepStrictEqual(yield* Ref.get(log), ["tmp.txt"])
      assert.deepStrictEqual(resultsOf(second.state.messages).map((r) => r.result), ["managed"])
    }))

  it.effect("delegating deeper than maxDepth is a typed DepthExceeded of the child that tried", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const { agent } = yield* parent([task("manager", "tmp.txt", "c1")], {
        manager: { description: "Manages", agent: yield* manager(log) }
      }, {
        maxDepth: 1
      })
      const result = yield* agent.run("Tidy up", { threadId: "p" })
      const [answer] = resultsOf(result.state.messages)
      assert.isTrue(answer?.isFailure)
      assert.match(String(answer?.result), /failed: DepthExceeded: .*deeper than a SubAgents maxDepth/)
      assert.deepStrictEqual(yield* Ref.get(log), [])
    }))

  it.effect("a streamed parent carries the child's events nested under the call", () =>
    Effect.gen(function*() {
      const child = yield* researcher
      const { agent } = yield* parent([task("researcher", "the moon", "c1")], {
        researcher: { description: "Researches", agent: child }
      })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("hi", { threadId: "p" })))
      const nested = events.filter(AgentEvent.$is("SubAgentEvent"))
      const tags = nested.map((event) => event.event._tag).filter((tag) => tag !== "HookCompleted")
      assert.deepStrictEqual(tags.filter((tag, i) => tag !== tags[i - 1]), [
        "RunStarted",
        "ModelCallStarted",
        "ModelRequestSent",
        "TextDelta",
        "ModelResponded",
        "RunEnded"
      ])
      assert.isTrue(nested.every((event) => event.callId === "c1" && event.threadId === "p/task/c1/1"))
      // the task call shows like any tool call, the child's events between its start and its result
      const order = events.map((event) => event._tag)
      const started = order.indexOf("ToolCallStarted")
      const completed = order.indexOf("ToolCallCompleted")
      assert.isBelow(started, order.indexOf("SubAgentEvent"))
      assert.isAbove(completed, order.lastIndexOf("SubAgentEvent"))
      assert.isBelow(completed, order.lastIndexOf("ModelCallStarted"))
      const result = events[completed]
      assert.deepStrictEqual(
        result?._tag === "ToolCallCompleted" ? [result.result.id, result.result.result] : [],
        ["c1", "researched: the moon"]
      )
    }))

  it.effect("in a chat UI stream the task call is a tool part with the child's answer; a nested wait is data-interrupt", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const { agent } = yield* parent([task("researcher", "the moon", "c1"), task("cleaner", "x.txt", "c2")], {
        researcher: { description: "Researches", agent: yield* researcher },
        cleaner: { description: "Deletes files", agent: yield* cleaner(log) }
      })
      const chunks = Chunk.toReadonlyArray(
        yield* Stream.runCollect(UiMessageStream.fromEvents(agent.stream("hi", { threadId: "p" })))
      )
      const of = (type: string) => chunks.filter((chunk) => chunk.type === type) as Array<any>
      assert.deepStrictEqual(
        of("tool-input-available").map((chunk) => [chunk.toolCallId, chunk.toolName]),
        [["c1", "task"], ["c2", "task"]]
      )
      assert.deepStrictEqual(
        of("tool-output-available").map((chunk) => [chunk.toolCallId, chunk.output]),
        [["c1", "researched: the moon"]]
      )
      assert.strictEqual(of("data-interrupt")[0]?.data.value._tag, "TaskInterrupt")
      assert.deepStrictEqual(chunks.at(-1), { type: "finish", finishReason: "other" })
    }))

  it.effect("uiApprovals shows a child's approval as a tool part with a path-prefixed id and routes the answer back", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const child = yield* cleaner(log)
      const { agent } = yield* parent([task("cleaner", "a.txt", "c1"), task("cleaner", "b.txt", "c2")], {
        cleaner: { description: "Deletes files", agent: child }
      })
      const approvals = SubAgents.uiApprovals(HumanInTheLoop.uiApprovals)
      const chunks = Chunk.toReadonlyArray(
        yield* Stream.runCollect(UiMessageStream.fromEvents(agent.stream("hi", { threadId: "p" }), { approvals }))
      )
      const asked = chunks.filter((chunk) => chunk.type === "tool-approval-request") as Array<any>
      assert.deepStrictEqual(asked.map((chunk) => chunk.toolCallId), ["c1/call_delete_file_0", "c2/call_delete_file_0"])
      const pending = Option.getOrThrow(Option.getOrThrow(yield* agent.thread("p")).pending)
      const requests = Option.getOrThrow(approvals.requests(pending))
      // approve the first child's call, deny the second's with a reason
      const value = approvals.resumeValue(pending, [
        { request: requests[0]!, approved: true },
        { request: requests[1]!, approved: false, reason: "keep b.txt" }
      ]) as SubAgents.Decisions
      yield* agent.validateResume("p", value)
      const done = yield* agent.resume("p", value)
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual(yield* Ref.get(log), ["a.txt"])
      // the second child got the denial with its reason as its call's result; both task calls have results
      const second = Option.getOrThrow(yield* child.thread("p/task/c2/2")).state.messages
      assert.include(JSON.stringify(resultsOf(second)), "keep b.txt")
      assert.deepStrictEqual(resultsOf(done.state.messages).map((r) => r.id), ["c1", "c2"])
    }))

  it.effect("uiApprovals routes the answer to a child's call whose id holds a \"/\"", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const child = yield* cleaner(log, "fn/1")
      const { agent } = yield* parent([task("cleaner", "a.txt", "call/1")], {
        cleaner: { description: "Deletes files", agent: child }
      })
      const approvals = SubAgents.uiApprovals(HumanInTheLoop.uiApprovals)
      const waiting = yield* agent.run("hi", { threadId: "p" })
      assert.strictEqual(waiting._tag, "Interrupted")
      const pending = Option.getOrThrow(Option.getOrThrow(yield* agent.thread("p")).pending)
      const requests = Option.getOrThrow(approvals.requests(pending))
      assert.deepStrictEqual(requests.map((request) => request.toolCallId), ["call/1/fn/1"])
      const value = approvals.resumeValue(pending, [{ request: requests[0]!, approved: true }]) as SubAgents.Decisions
      const done = yield* agent.resume("p", value)
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual(yield* Ref.get(log), ["a.txt"])
    }))

  it.effect("a child with structured output answers the call with its output value", () =>
    Effect.gen(function*() {
      const model = yield* reactive(() =>
        ScriptedModel.toolCalls([{ name: "final_answer", params: { city: "Lisbon", celsius: 21 } }])
      )
      const forecaster = yield* Agent.make({
        responseFormat: Schema.Struct({ city: Schema.String, celsius: Schema.Number })
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      const { agent } = yield* parent([task("forecaster", "Lisbon", "c1")], {
        forecaster: { description: "Forecasts", agent: forecaster }
      })
      const result = yield* agent.run("How warm is Lisbon?", { threadId: "p" })
      const [answer] = resultsOf(result.state.messages)
      assert.deepStrictEqual([answer?.isFailure, answer?.result], [false, { city: "Lisbon", celsius: 21 }])
    }))

  it.effect("a child's steps go through the parent's journal under task/<callId>/<n>", () =>
    Effect.gen(function*() {
      const names: Array<string> = []
      const journal = RunJournal.RunJournal.of({
        ...RunJournal.inProcess,
        step: (key, effect) => Effect.zipRight(Effect.sync(() => names.push(RunJournal.stepName(key))), effect)
      })
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const { agent } = yield* parent([task("cleaner", "a.txt", "c1")], {
        cleaner: { description: "Deletes", agent: yield* cleaner(log) }
      })
      const first = yield* agent.run("hi", { threadId: "p" }).pipe(
        Effect.provideService(RunJournal.RunJournal, journal)
      )
      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      yield* agent.resume("p", approveAll(first.interrupt)).pipe(Effect.provideService(RunJournal.RunJournal, journal))
      const child = names.filter((name) => name.startsWith("task/"))
      // the run, then its resume: each with a path of its own, so a replay names them apart
      assert.deepStrictEqual(child, [
        "task/c1/1/load",
        "task/c1/1/inbox/0",
        "task/c1/1/model/0",
        "task/c1/1/checkpoint/0",
        "task/c1/2/load",
        "task/c1/2/tool/call_delete_file_0",
        "task/c1/2/checkpoint/0",
        "task/c1/2/inbox/0",
        "task/c1/2/model/1",
        "task/c1/2/checkpoint/1"
      ])
      assert.strictEqual(RunJournal.nested(RunJournal.inProcess, "task/c1/1"), RunJournal.inProcess)
    }))

  it.effect.prop(
    "whatever mix of children complete or wait, the parent thread stays well paired and each child sees only its task",
    { waits: Schema.Array(Schema.Boolean).pipe(Schema.minItems(1), Schema.maxItems(5)) },
    ({ waits }) =>
      Effect.gen(function*() {
        const log = yield* Ref.make<ReadonlyArray<string>>([])
        const calls = waits.map((wait, i) => task(wait ? "cleaner" : "researcher", `f${i}`, `c${i}`))
        const { agent } = yield* parent(calls, {
          cleaner: { description: "Deletes files", agent: yield* cleaner(log) },
          researcher: { description: "Researches", agent: yield* researcher }
        })
        let result = yield* agent.run("go", { threadId: "p" })
        const waiting = waits.filter(Boolean).length
        assert.strictEqual(result._tag, waiting > 0 ? "Interrupted" : "Completed")
        if (result._tag === "Interrupted") {
          assert.strictEqual(SubAgents.leaves(result.interrupt).length, waiting)
          // completed siblings' results are stored; the waiting calls have none
          assert.strictEqual(resultsOf(result.state.messages).length, waits.length - waiting)
          result = yield* agent.resume("p", approveAll(result.interrupt))
        }
        assert.strictEqual(result._tag, "Completed")
        assertWellPaired(result.state.messages)
        assert.deepStrictEqual(
          resultsOf(result.state.messages).map((r) => r.result).sort(),
          waits.map((wait, i) => wait ? "cleaned" : `researched: f${i}`).sort()
        )
        assert.deepStrictEqual(
          [...(yield* Ref.get(log))].sort(),
          waits.flatMap((wait, i) => wait ? [`f${i}`] : []).sort()
        )
      }),
    { fastCheck: { numRuns: 30 } }
  )

  it.effect("deleting the parent's thread deletes the child threads it started, two levels down, and no other", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const leaf = yield* cleaner(log)
      const midModel = yield* reactive((last) =>
        last === "tool" ? ScriptedModel.text("managed") : ScriptedModel.toolCalls([task("cleaner", last, "g1")])
      )
      const mid = yield* Agent.make({
        middleware: [SubAgents.middleware({ agents: { cleaner: { description: "Deletes", agent: leaf } } })]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, midModel))
      const { agent } = yield* parent([task("manager", "tmp.txt", "c1")], {
        manager: { description: "Manages", agent: mid }
      })
      const first = yield* agent.run("Tidy up", { threadId: "p" })
      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      assert.strictEqual((yield* agent.resume("p", approveAll(first.interrupt)))._tag, "Completed")
      yield* leaf.run("other.txt", { threadId: "other" })
      const stored = () =>
        Effect.all([
          agent.thread("p"),
          mid.thread("p/task/c1/1"),
          leaf.thread("p/task/c1/1/task/g1/1"),
          leaf.thread("other")
        ]).pipe(Effect.map((threads) => threads.map((thread: Option.Option<unknown>) => Option.isSome(thread))))
      assert.deepStrictEqual(yield* stored(), [true, true, true, true])
      yield* agent.deleteThread("p")
      assert.deepStrictEqual(yield* stored(), [false, false, false, true])
    }))

  it.effect.prop(
    "whatever mix of children complete or wait, deleting the parent's thread (waiting or done) deletes every child's",
    {
      waits: Schema.Array(Schema.Boolean).pipe(Schema.minItems(1), Schema.maxItems(5)),
      resumeFirst: Schema.Boolean
    },
    ({ resumeFirst, waits }) =>
      Effect.gen(function*() {
        const log = yield* Ref.make<ReadonlyArray<string>>([])
        const agents = { cleaner: yield* cleaner(log), researcher: yield* researcher }
        const calls = waits.map((wait, i) => task(wait ? "cleaner" : "researcher", `f${i}`, `c${i}`))
        const { agent } = yield* parent(calls, {
          cleaner: { description: "Deletes files", agent: agents.cleaner },
          researcher: { description: "Researches", agent: agents.researcher }
        })
        const result = yield* agent.run("go", { threadId: "p" })
        if (resumeFirst && result._tag === "Interrupted") yield* agent.resume("p", approveAll(result.interrupt))
        // the i-th call started the (i+1)-th child run, on a thread of its own
        const children = () =>
          Effect.forEach(
            waits,
            (wait, i) => (wait ? agents.cleaner : agents.researcher).thread(`p/task/c${i}/${i + 1}`)
          ).pipe(Effect.map((threads) => threads.map(Option.isSome)))
        assert.deepStrictEqual(yield* children(), waits.map(() => true))
        yield* agent.deleteThread("p")
        assert.deepStrictEqual(yield* children(), waits.map(() => false))
      }),
    { fastCheck: { numRuns: 20 } }
  )

  describe("a run that ends before a save records the child threads it started deletes them", () => {
    const Boom = Tool.make("boom", { parameters: {}, success: Schema.String })
    const Wipe = Tool.make("wipe", { parameters: {}, success: Schema.String })
    const ParentTools = Toolkit.make(Boom, Wipe)
    /** A parent with a stored thread "p" whose next reply starts a researcher child (call c1) beside `other`. */
    const setup = (other: "boom" | "wipe") =>
      Effect.gen(function*() {
        const checkpointer = yield* Checkpointer.makeMemory
        const child = yield* researcher
        // a first run stores the thread; the second starts the child beside `other`
        const { model } = yield* ScriptedModel.make([
          ScriptedModel.text("hello"),
          ScriptedModel.toolCalls([task("researcher", "notes", "c1"), { id: "o1", name: other, params: {} }]),
          ScriptedModel.text("all done")
        ])
        // another agent on the same store: it deletes the parent's thread while the parent's run goes on
        const deleter = yield* Agent.make({}).pipe(
          Effect.provideService(Checkpointer.Checkpointer, checkpointer),
          Effect.provide(ScriptedModel.layer([]))
        )
        const agent = yield* Agent.make({
          toolkit: ParentTools,
          middleware: [SubAgents.middleware({ agents: { researcher: { description: "Researches", agent: child } } })]
        }).pipe(
          Effect.provideService(LanguageModel.LanguageModel, model),
          Effect.provideService(Checkpointer.Checkpointer, checkpointer),
          Effect.provide(ParentTools.toLayer({
            boom: () => Effect.dieMessage("boom"),
            wipe: () => Effect.as(Effect.orDie(deleter.deleteThread("p")), "wiped")
          }))
        )
        assert.strictEqual((yield* agent.run("hi", { threadId: "p" }))._tag, "Completed")
        return { agent, child }
      })

    it.effect("a tool dies in the step that started the child: the child's thread is deleted", () =>
      Effect.gen(function*() {
        const { agent, child } = yield* setup("boom")
        const exit = yield* Effect.exit(agent.run("go", { threadId: "p" }))
        assert.isTrue(exit._tag === "Failure")
        assert.isTrue(Option.isNone(yield* child.thread("p/task/c1/1")), "the unsaved child's thread stays")
        const stored = Option.getOrThrow(yield* agent.thread("p"))
        assert.deepInclude(stored.state, { taskThreads: [] })
      }))

    it.effect("the parent's thread is deleted while its run goes on: the child's thread is deleted too", () =>
      Effect.gen(function*() {
        const { agent, child } = yield* setup("wipe")
        const error = yield* Effect.flip(agent.run("go", { threadId: "p" }))
        assert.strictEqual(error._tag, "CheckpointError")
        assert.isTrue(Option.isNone(yield* child.thread("p/task/c1/1")), "a deleted thread's child stays")
      }))

    it.effect("a run that saves keeps its child threads", () =>
      Effect.gen(function*() {
        const child = yield* researcher
        const { agent } = yield* parent([task("researcher", "notes", "c1")], {
          researcher: { description: "Researches", agent: child }
        })
        assert.strictEqual((yield* agent.run("go", { threadId: "q" }))._tag, "Completed")
        assert.isTrue(Option.isSome(yield* child.thread("q/task/c1/1")))
      }))
  })

  it.effect("deleting a fork deletes the child threads the fork started, not its source's", () =>
    Effect.gen(function*() {
      const child = yield* researcher
      const { model } = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([task("researcher", "notes", "c1")]),
        ScriptedModel.text("all done"),
        ScriptedModel.toolCalls([task("researcher", "more", "c2")]),
        ScriptedModel.text("fork done")
      ])
      const agent = yield* Agent.make({
        middleware: [SubAgents.middleware({ agents: { researcher: { description: "Researches", agent: child } } })]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      assert.strictEqual((yield* agent.run("go", { threadId: "s" }))._tag, "Completed")
      // the fork starts with the source's list of child threads, then starts one of its own
      const forked = yield* agent.fork("s", { to: "f", at: 2, edit: { _tag: "Message", message: "again" } })
      assert.strictEqual(forked._tag, "Completed")
      const exists = (threadId: string) => Effect.map(child.thread(threadId), Option.isSome)
      assert.isTrue(yield* exists("f/task/c2/2"))
      yield* agent.deleteThread("f")
      assert.isTrue(yield* exists("s/task/c1/1"), "the source's child thread was deleted with the fork")
      assert.isFalse(yield* exists("f/task/c2/2"))
      yield* agent.deleteThread("s")
      assert.isFalse(yield* exists("s/task/c1/1"))
    }))

  it.effect("a parent's slice stored before it listed its child threads still loads, with none", () =>
    Effect.gen(function*() {
      const checkpointer = yield* Checkpointer.makeMemory
      const child = yield* researcher
      const agent = yield* Agent.make({
        middleware: [SubAgents.middleware({ agents: { researcher: { description: "Researches", agent: child } } })]
      }).pipe(Effect.provideService(Checkpointer.Checkpointer, checkpointer))
      yield* checkpointer.save("old", {
        version: 1,
        threadId: "old",
        messages: [{ role: "user", content: "hi" }],
        slices: { subAgents: { taskRuns: 3, taskWaits: [] } }
      })
      const thread = Option.getOrThrow(yield* agent.thread("old"))
      assert.deepInclude(thread.state, { taskRuns: 3, taskThreads: [] })
      yield* agent.deleteThread("old")
      assert.isTrue(Option.isNone(yield* agent.thread("old")))
    }).pipe(Effect.provide(ScriptedModel.layer([]))))

  it.effect("bad options fail Agent.make with InvalidOptions", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.make({ middleware: [SubAgents.middleware({ agents: {} })] }))
      assert.strictEqual(error._tag, "InvalidOptions")
      assert.deepInclude(error, { module: "SubAgents", option: "agents" })
      const child = yield* researcher
      const depth = yield* Effect.flip(Agent.make({
        middleware: [SubAgents.middleware({ agents: { a: { description: "A", agent: child } }, maxDepth: 0 })]
      }))
      assert.deepInclude(depth, { module: "SubAgents", option: "maxDepth" })
      const notAnAgent = yield* Effect.flip(Agent.make({
        middleware: [SubAgents.middleware({ agents: { a: { description: "A", agent: {} as any } } })]
      }))
      assert.deepInclude(notAnAgent, { module: "SubAgents", option: "agents.a.agent" })
    }).pipe(Effect.provide(ScriptedModel.layer([]))))
})
