import type { Prompt } from "@effect/ai"
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import {
  Agent,
  AgentError,
  AgentEvent,
  type AgentResult,
  AgentState,
  Checkpointer,
  Middleware
} from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, FastCheck, JSONSchema, Layer, Option, Ref, Schema, Stream } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"

/** An error's kind: a `DecisionError`'s reason, else its tag. */
const kindOf = (error: { readonly _tag: string }): string =>
  error instanceof HumanInTheLoop.DecisionError ? error.reason : error._tag

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
const ReadFile = Tool.make("read_file", {
  description: "Reads a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const SendEmail = Tool.make("send_email", {
  description: "Sends an email",
  parameters: { to: Schema.String, body: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(DeleteFile, ReadFile, SendEmail)

/** The tools' handlers, recording every call they run in `log`. */
const toolsLive = (log: Ref.Ref<ReadonlyArray<string>>) =>
  Tools.toLayer({
    delete_file: ({ path }) => Effect.as(Ref.update(log, (all) => [...all, `delete_file ${path}`]), `deleted ${path}`),
    read_file: ({ path }) => Effect.as(Ref.update(log, (all) => [...all, `read_file ${path}`]), `contents of ${path}`),
    send_email: ({ body, to }) =>
      Effect.as(Ref.update(log, (all) => [...all, `send_email ${to}: ${body}`]), `sent to ${to}`)
  })

type InterruptOn = HumanInTheLoop.Options<typeof Tools.tools>["interruptOn"]

const defaultPolicy: InterruptOn = {
  delete_file: { allowedDecisions: ["approve", "edit", "reject"] },
  send_email: true,
  read_file: false
}

/** An agent with the tools and the middleware, on a scripted model; `log` lists the tool runs. */
const setup = (
  script: ReadonlyArray<ScriptedModel.Turn>,
  options?: {
    readonly interruptOn?: InterruptOn | undefined
    readonly approvals?: Layer.Layer<HumanInTheLoop.Approvals> | undefined
  }
) =>
  Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const hitl = HumanInTheLoop.middleware({
      toolkit: Tools,
      interruptOn: options?.interruptOn ?? defaultPolicy
    })
    const model = yield* ScriptedModel.make(script)
    const agent = yield* Agent.make({ toolkit: Tools, middleware: [hitl] }).pipe(
      Effect.provideService(ScriptedModel.ScriptedModel, model.recorder),
      Effect.provide(toolsLive(log)),
      Effect.provide(options?.approvals ?? Layer.empty),
      Effect.provideService(LanguageModel.LanguageModel, model.model)
    )
    return { agent, log: Ref.get(log), requests: model.recorder.requests }
  })

const deleteAndRead = ScriptedModel.toolCalls([
  { name: "delete_file", params: { path: "/tmp/a" }, id: "c1" },
  { name: "read_file", params: { path: "/etc/hosts" }, id: "c2" }
])

const decodeRequest = Schema.decodeUnknownSync(HumanInTheLoop.ApprovalRequest)

/** Looks up the action a thread waits on by call id (an unknown id gets an action of no wait). */
type ActionOf = (callId: string) => HumanInTheLoop.ActionRequest

/**
 * The resume value `value` gives: a function of the actions the thread waits
 * on (decisions are built from them, as a UI showing the request does), or
 * the value itself.
 */
const bound = <S, E, O>(agent: Agent.Service<S, E, O>, threadId: string, value: unknown) =>
  Effect.map(agent.thread(threadId), (snapshot) => {
    const request = Option.flatMap(Option.flatMap(snapshot, (thread) => thread.pending), approvalOf)
    const actionOf: ActionOf = (callId) =>
      Option.getOrUndefined(request)?.actionRequests.find((action) => action.callId === callId) ??
        {
          callId,
          toolName: "unknown",
          args: {},
          description: "",
          allowedDecisions: [],
          waitKey: "no wait",
          fingerprint: "none"
        }
    return typeof value === "function" ? value(actionOf) : value
  })

const resumeBound = <S, E, O>(agent: Agent.Service<S, E, O>, threadId: string, value: unknown) =>
  Effect.flatMap(bound(agent, threadId, value), (decisions) => agent.resume(threadId, decisions))

/** The tool results of a conversation, in order. */
const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

const toolCallsOf = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolCallPart> =>
  messages.flatMap((message) =>
    message.role === "assistant"
      ? message.content.filter((part): part is Prompt.ToolCallPart => part.type === "tool-call")
      : []
  )

// ---------------------------------------------------------------------------
// interrupt
// ---------------------------------------------------------------------------

describe("HumanInTheLoop interrupt", () => {
  it.effect("a gated call ends the run Interrupted with one action request per gated call; no tool runs", () =>
    Effect.gen(function*() {
      const { agent, log, requests } = yield* setup([deleteAndRead, ScriptedModel.text("done")])
      const result = yield* agent.run("clean up", { threadId: "t" })
      assert.strictEqual(result._tag, "Interrupted")
      if (result._tag !== "Interrupted") return
      assert.strictEqual(result.interrupt.middleware, "humanInTheLoop")
      const request = decodeRequest(result.interrupt.value)
      assert.deepStrictEqual(request, {
        actionRequests: [{
          callId: "c1",
          toolName: "delete_file",
          args: { path: "/tmp/a" },
          description: `Tool execution requires approval\n\nTool: delete_file\nArgs: ${
            JSON.stringify({ path: "/tmp/a" }, undefined, 2)
          }`,
          allowedDecisions: ["approve", "edit", "reject"],
          waitKey: result.interrupt.key,
          fingerprint: HumanInTheLoop.fingerprintOf("delete_file", { path: "/tmp/a" })
        }]
      })
      // the wait's key: the calls, the index of their reply, the number of the wait in the thread, the thread's
      // incarnation, the thread
      assert.match(result.interrupt.key, /^approval\/c1@1\/1\/[0-9a-f]{16}\/[0-9a-f]{8}$/)
      // the interrupt value is plain JSON
      assert.deepStrictEqual(JSON.parse(JSON.stringify(result.interrupt.value)), result.interrupt.value)
      // the ungated read_file of the same batch waits too
      assert.deepStrictEqual(yield* log, [])
      assert.strictEqual((yield* requests).length, 1)
      assert.strictEqual(result.steps, 1)
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      assert.isTrue(Option.isSome(thread.pending))
      assert.deepStrictEqual(toolResults(thread.state.messages), [])
    }))

  it.effect("no interrupt when the calls are not gated (false, or absent from interruptOn)", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([
          { name: "read_file", params: { path: "/a" }, id: "c1" },
          { name: "delete_file", params: { path: "/b" }, id: "c2" }
        ]),
        ScriptedModel.text("done")
      ], { interruptOn: { read_file: false } })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual([...(yield* log)].sort(), ["delete_file /b", "read_file /a"])
    }))

  it.effect("descriptions: a fixed string, a function of the call and context, and a custom prefix", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const hitl = HumanInTheLoop.middleware({
        toolkit: Tools,
        descriptionPrefix: "Needs a human",
        interruptOn: {
          delete_file: { allowedDecisions: ["approve"], description: "Deleting is permanent" },
          send_email: {
            allowedDecisions: ["approve", "reject"],
            description: (call, context) => `email ${JSON.stringify(call.params)} on ${context.threadId}`
          },
          read_file: true
        }
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [hitl] }).pipe(
        Effect.provide(Layer.merge(
          ScriptedModel.layer([
            ScriptedModel.toolCalls([
              { name: "delete_file", params: { path: "/a" }, id: "c1" },
              { name: "send_email", params: { to: "x@y.z", body: "hi" }, id: "c2" },
              { name: "read_file", params: { path: "/r" }, id: "c3" }
            ])
          ]),
          toolsLive(log)
        ))
      )
      const result = yield* agent.run("go", { threadId: "thread-9" })
      assert.strictEqual(result._tag, "Interrupted")
      if (result._tag !== "Interrupted") return
      const { actionRequests } = decodeRequest(result.interrupt.value)
      assert.deepStrictEqual(actionRequests.map((action) => action.description), [
        "Deleting is permanent",
        `email {"to":"x@y.z","body":"hi"} on thread-9`,
        `Needs a human\n\nTool: read_file\nArgs: ${JSON.stringify({ path: "/r" }, undefined, 2)}`
      ])
      assert.deepStrictEqual(actionRequests.map((action) => action.allowedDecisions), [
        ["approve"],
        ["approve", "reject"],
        ["approve", "edit", "reject", "respond"]
      ])
    }))

  it.effect("the interrupt is reported as a MiddlewareDecision event of the stream", () =>
    Effect.gen(function*() {
      const { agent } = yield* setup([deleteAndRead])
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("clean up", { threadId: "t" })))
      const decisions = events.filter(AgentEvent.$is("MiddlewareDecision"))
      assert.deepStrictEqual(decisions.map((event) => [event.middleware, event.hook, event.decision, event.data]), [
        ["humanInTheLoop", "afterModel", "interrupt: 1 call(s) wait for a decision", { callIds: ["c1"] }]
      ])
      const last = events.at(-1)!
      assert.isTrue(AgentEvent.$is("RunEnded")(last) && last.result._tag === "Interrupted")
    }))
})

// ---------------------------------------------------------------------------
// resume
// ---------------------------------------------------------------------------

describe("HumanInTheLoop resume", () => {
  it.effect("approve runs the batch as a whole; a second resume is a ThreadStateError and runs nothing again", () =>
    Effect.gen(function*() {
      const { agent, log, requests } = yield* setup([deleteAndRead, ScriptedModel.text("done")])
      yield* agent.run("clean up", { threadId: "t" })
      const decisions = (a: ActionOf) => [HumanInTheLoop.approve(a("c1"))]
      const result = yield* resumeBound(agent, "t", decisions)
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      assert.strictEqual(result.text, "done")
      assert.deepStrictEqual([...(yield* log)].sort(), ["delete_file /tmp/a", "read_file /etc/hosts"])
      assert.deepStrictEqual(
        toolResults(result.state.messages).map((part) => [part.id, part.result, part.isFailure]),
        [["c1", "deleted /tmp/a", false], ["c2", "contents of /etc/hosts", false]]
      )
      // the model's second request saw both results
      const second = (yield* requests)[1]!
      assert.deepStrictEqual(toolResults(second.prompt.content).map((part) => part.id), ["c1", "c2"])

      const again = yield* Effect.flip(resumeBound(agent, "t", decisions))
      assert.strictEqual(again._tag, "ThreadStateError")
      assert.deepStrictEqual([...(yield* log)].sort(), ["delete_file /tmp/a", "read_file /etc/hosts"])
      assert.strictEqual((yield* requests).length, 2)
    }))

  it.effect("the wait carries the request, typed; approveAll approves each call of it", () =>
    Effect.gen(function*() {
      const both = ScriptedModel.toolCalls([
        { name: "delete_file", params: { path: "/tmp/a" }, id: "c1" },
        { name: "send_email", params: { to: "a@b.c", body: "hi" }, id: "c2" }
      ])
      const { agent, log } = yield* setup([both, ScriptedModel.text("done")])
      const result = yield* agent.run("clean up and tell", { threadId: "t" })
      assert.strictEqual(result._tag, "Interrupted")
      if (result._tag !== "Interrupted") return
      // the agent's waits are typed: the interrupt's value is the approval request
      const request: HumanInTheLoop.ApprovalRequest = result.interrupt.value
      assert.deepStrictEqual(request, decodeRequest(result.interrupt.value))
      // the thread's pending wait carries the same request, decoded from the checkpoint
      const pending = Option.getOrThrow(Option.getOrThrow(yield* agent.thread("t")).pending)
      assert.deepStrictEqual(pending.value, request)
      // each decision is bound to its action: the wait's key and the call's fingerprint
      assert.deepStrictEqual(HumanInTheLoop.approveAll(request), [
        {
          type: "approve",
          callId: "c1",
          waitKey: result.interrupt.key,
          fingerprint: HumanInTheLoop.fingerprintOf("delete_file", { path: "/tmp/a" })
        },
        {
          type: "approve",
          callId: "c2",
          waitKey: result.interrupt.key,
          fingerprint: HumanInTheLoop.fingerprintOf("send_email", { to: "a@b.c", body: "hi" })
        }
      ])
      const done = yield* resumeBound(agent, "t", HumanInTheLoop.approveAll(request))
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual([...(yield* log)].sort(), ["delete_file /tmp/a", "send_email a@b.c: hi"])
    }))

  it.effect("edit runs the call with the new arguments and stores the edited call", () =>
    Effect.gen(function*() {
      const { agent, log, requests } = yield* setup([deleteAndRead, ScriptedModel.text("done")])
      yield* agent.run("clean up", { threadId: "t" })
      const result = yield* resumeBound(
        agent,
        "t",
        (a: ActionOf) => [HumanInTheLoop.edit(a("c1"), { path: "/tmp/scratch" })]
      )
      assert.strictEqual(result._tag, "Completed")
      assert.isTrue((yield* log).includes("delete_file /tmp/scratch"))
      assert.isFalse((yield* log).includes("delete_file /tmp/a"))
      const calls = toolCallsOf(result.state.messages)
      assert.deepStrictEqual(calls.map((call) => [call.id, call.name, call.params]), [
        ["c1", "delete_file", { path: "/tmp/scratch" }],
        ["c2", "read_file", { path: "/etc/hosts" }]
      ])
      // the model sees the edited call, not the original one
      const seen = toolCallsOf((yield* requests)[1]!.prompt.content)
      assert.deepStrictEqual(seen[0]!.params, { path: "/tmp/scratch" })
    }))

  it.effect("edit may target another tool: checked against its schema and its own policy", () =>
    Effect.gen(function*() {
      const policy: InterruptOn = {
        delete_file: { allowedDecisions: ["approve", "edit", "reject"] },
        send_email: { allowedDecisions: ["approve", "reject"] }
      }
      const { agent, log } = yield* setup([deleteAndRead, ScriptedModel.text("done")], { interruptOn: policy })
      yield* agent.run("clean up", { threadId: "t" })
      // send_email is gated and does not allow edit
      const notAllowed = yield* Effect.flip(
        resumeBound(
          agent,
          "t",
          (a: ActionOf) => [HumanInTheLoop.edit(a("c1"), { to: "a@b.c", body: "x" }, "send_email")]
        )
      )
      assert.deepInclude(notAllowed, { _tag: "DecisionError", reason: "NotAllowed" })
      if (notAllowed._tag === "DecisionError" && notAllowed.reason === "NotAllowed") {
        assert.strictEqual(notAllowed.toolName, "send_email")
        assert.deepStrictEqual(notAllowed.allowed, ["approve", "reject"])
      }
      // arguments not matching the target tool's parameters
      const invalid = yield* Effect.flip(
        resumeBound(agent, "t", (a: ActionOf) => [HumanInTheLoop.edit(a("c1"), { file: "/x" }, "read_file")])
      )
      assert.deepInclude(invalid, { _tag: "DecisionError", reason: "InvalidEdit" })
      // a tool the agent does not have
      const missing = yield* Effect.flip(
        resumeBound(agent, "t", (a: ActionOf) => [HumanInTheLoop.edit(a("c1"), { path: "/x" }, "rm_rf")])
      )
      assert.deepInclude(missing, { _tag: "DecisionError", reason: "InvalidEdit" })
      // read_file is not gated: the human turns the delete into a read
      const result = yield* resumeBound(
        agent,
        "t",
        (a: ActionOf) => [HumanInTheLoop.edit(a("c1"), { path: "/tmp/a" }, "read_file")]
      )
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual([...(yield* log)].sort(), ["read_file /etc/hosts", "read_file /tmp/a"])
      assert.deepStrictEqual(toolCallsOf(result.state.messages).map((call) => [call.id, call.name]), [
        ["c1", "read_file"],
        ["c2", "read_file"]
      ])
    }))

  it.effect("edit is checked against the policy's argsSchema, which the action request carries as JSON Schema", () =>
    Effect.gen(function*() {
      const TmpPath = Schema.Struct({ path: Schema.String.pipe(Schema.startsWith("/tmp/")) })
      const { agent, log } = yield* setup([deleteAndRead, ScriptedModel.text("done")], {
        interruptOn: { delete_file: { allowedDecisions: ["edit", "reject"], argsSchema: TmpPath } }
      })
      const first = yield* agent.run("clean up", { threadId: "t" })
      if (first._tag !== "Interrupted") return assert.fail("expected an interrupt")
      const { actionRequests } = decodeRequest(first.interrupt.value)
      assert.deepStrictEqual(actionRequests[0]!.argsSchema, JSONSchema.make(TmpPath))
      const invalid = yield* Effect.flip(
        resumeBound(agent, "t", (a: ActionOf) => [HumanInTheLoop.edit(a("c1"), { path: "/etc/passwd" })])
      )
      assert.deepInclude(invalid, { _tag: "DecisionError", reason: "InvalidEdit" })
      // approve is not among the allowed decisions
      const notAllowed = yield* Effect.flip(resumeBound(agent, "t", (a: ActionOf) => [HumanInTheLoop.approve(a("c1"))]))
      assert.deepInclude(notAllowed, { _tag: "DecisionError", reason: "NotAllowed" })
      assert.deepStrictEqual(yield* log, [])
      const result = yield* resumeBound(agent, "t", (a: ActionOf) => [HumanInTheLoop.edit(a("c1"), { path: "/tmp/b" })])
      assert.strictEqual(result._tag, "Completed")
      assert.isTrue((yield* log).includes("delete_file /tmp/b"))
    }))

  it.effect("reject answers with a failed tool result carrying the reason; the tool does not run", () =>
    Effect.gen(function*() {
      const { agent, log, requests } = yield* setup([deleteAndRead, ScriptedModel.text("ok, I won't")])
      yield* agent.run("clean up", { threadId: "t" })
      const result = yield* resumeBound(agent, "t", (a: ActionOf) => [HumanInTheLoop.reject(a("c1"), "keep /tmp/a")])
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["read_file /etc/hosts"])
      const results = toolResults(result.state.messages)
      assert.deepStrictEqual(results.map((part) => [part.id, part.isFailure]), [["c1", true], ["c2", false]])
      assert.deepStrictEqual(results[0]!.result, {
        error: `The user rejected this call of "delete_file"; it did not run. Reason: keep /tmp/a`
      })
      // one tool message answers the whole batch
      assert.deepStrictEqual(result.state.messages.map((message) => message.role), [
        "user",
        "assistant",
        "tool",
        "assistant"
      ])
      assert.deepStrictEqual(toolResults((yield* requests)[1]!.prompt.content).map((part) => part.id), ["c1", "c2"])
    }))

  it.effect("respond answers with the human's text as the tool result; the tool does not run", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([{ name: "send_email", params: { to: "boss@x.y", body: "I quit" }, id: "e1" }]),
        ScriptedModel.text("noted")
      ])
      yield* agent.run("email my boss", { threadId: "t" })
      const result = yield* resumeBound(agent, "t", (a: ActionOf) => [
        HumanInTheLoop.respond(a("e1"), "Do not send this; I changed my mind.")
      ])
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(yield* log, [])
      assert.deepStrictEqual(
        toolResults(result.state.messages).map((part) => [part.id, part.name, part.result, part.isFailure]),
        [["e1", "send_email", "Do not send this; I changed my mind.", false]]
      )
    }))

  it.effect("bad decisions are typed errors that change nothing; a correct resume still works", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([
          { name: "delete_file", params: { path: "/a" }, id: "c1" },
          { name: "send_email", params: { to: "a@b.c", body: "hi" }, id: "c2" }
        ]),
        ScriptedModel.text("done")
      ])
      yield* agent.run("go", { threadId: "t" })
      const before = Option.getOrThrow(yield* agent.thread("t"))
      const attempts: ReadonlyArray<readonly [unknown, string]> = [
        // not decisions at all: the wait's schema refuses them (AgentError.InvalidResume)
        ["approve everything", "InvalidResume"],
        [[{ type: "maybe", callId: "c1" }], "InvalidResume"],
        [
          (
            a: ActionOf
          ) => [HumanInTheLoop.approve(a("c1")), HumanInTheLoop.approve(a("c1")), HumanInTheLoop.approve(a("c2"))],
          "Malformed"
        ],
        [(a: ActionOf) => [HumanInTheLoop.approve(a("c1"))], "Missing"],
        [
          (
            a: ActionOf
          ) => [HumanInTheLoop.approve(a("c1")), HumanInTheLoop.approve(a("c2")), HumanInTheLoop.approve(a("c9"))],
          "UnknownCall"
        ],
        [
          (a: ActionOf) => [HumanInTheLoop.respond(a("c1"), "no"), HumanInTheLoop.approve(a("c2"))],
          "NotAllowed"
        ],
        [(a: ActionOf) => [HumanInTheLoop.approve(a("c1")), HumanInTheLoop.edit(a("c2"), { to: 42 })], "InvalidEdit"]
      ]
      for (const [value, tag] of attempts) {
        // validateResume gives the same typed error without running anything
        const checked = yield* Effect.flip(
          Effect.flatMap(bound(agent, "t", value), (decisions) => agent.validateResume("t", decisions))
        )
        assert.strictEqual(kindOf(checked), tag, JSON.stringify(value))
        const error = yield* Effect.flip(resumeBound(agent, "t", value))
        assert.strictEqual(kindOf(error), tag, JSON.stringify(value))
        assert.isTrue(tag === "InvalidResume" || Schema.is(HumanInTheLoop.DecisionError)(error))
        const after = Option.getOrThrow(yield* agent.thread("t"))
        assert.deepStrictEqual(after.pending, before.pending)
        assert.deepStrictEqual(
          AgentState.encodeMessages(after.state.messages),
          AgentState.encodeMessages(before.state.messages)
        )
      }
      const missing = yield* Effect.flip(resumeBound(agent, "t", []))
      assert.deepInclude(missing, { _tag: "DecisionError", reason: "Missing" })
      if (missing._tag === "DecisionError" && missing.reason === "Missing") {
        assert.deepStrictEqual(missing.callIds, ["c1", "c2"])
      }
      assert.deepStrictEqual(yield* log, [])

      const good = (a: ActionOf) => [HumanInTheLoop.reject(a("c1")), HumanInTheLoop.approve(a("c2"))]
      const pending = yield* Effect.flatMap(
        bound(agent, "t", good),
        (decisions) => agent.validateResume("t", decisions)
      )
      // the wait is named after the calls it decides and where their reply is in the thread
      assert.match(pending.key ?? "", /^approval\/c1,c2@1\/1\/[0-9a-f]{16}\/[0-9a-f]{8}$/)
      assert.deepStrictEqual(yield* log, [])
      const result = yield* resumeBound(agent, "t", good)
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["send_email a@b.c: hi"])
    }))

  it.effect.prop(
    "for any approve/reject choice per call, exactly the approved calls run, once each",
    { choices: FastCheck.array(FastCheck.boolean(), { minLength: 1, maxLength: 6 }) },
    ({ choices }) =>
      Effect.gen(function*() {
        const calls = choices.map((_, i) => ({ name: "delete_file", params: { path: `/f${i}` }, id: `c${i}` }))
        const { agent, log } = yield* setup([ScriptedModel.toolCalls(calls), ScriptedModel.text("done")])
        const first = yield* agent.run("go", { threadId: "t" })
        if (first._tag !== "Interrupted") return assert.fail("expected an interrupt")
        assert.strictEqual(decodeRequest(first.interrupt.value).actionRequests.length, choices.length)
        const decisions = (a: ActionOf) =>
          choices.map((ok, i) => ok ? HumanInTheLoop.approve(a(`c${i}`)) : HumanInTheLoop.reject(a(`c${i}`)))
        const result = yield* resumeBound(agent, "t", decisions)
        assert.strictEqual(result._tag, "Completed")
        yield* Effect.flip(resumeBound(agent, "t", decisions))
        const ran = [...(yield* log)].sort()
        assert.deepStrictEqual(
          ran,
          calls.filter((_, i) => choices[i]).map((call) => `delete_file ${call.params.path}`).sort()
        )
        const results = toolResults(result.state.messages)
        assert.deepStrictEqual(results.map((part) => part.id).sort(), calls.map((call) => call.id).sort())
        for (const part of results) assert.strictEqual(part.isFailure, !choices[Number(part.id.slice(1))])
      }),
    { fastCheck: { numRuns: 20 } }
  )
})

// ---------------------------------------------------------------------------
// binding: a decision answers the wait it was made for
// ---------------------------------------------------------------------------

/** Two replies that both number their call `call_0`, as providers numbering calls per reply do. */
const sameIdTwice = (second: { readonly path: string }) => [
  ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/tmp/a" }, id: "call_0" }]),
  ScriptedModel.toolCalls([{ name: "delete_file", params: second, id: "call_0" }]),
  ScriptedModel.text("done")
]

const requestOfResult = (result: AgentResult.AgentResult<unknown, unknown>) => {
  if (result._tag !== "Interrupted") return assert.fail(`expected an interrupt, got ${result._tag}`)
  return Option.getOrThrow(approvalOf(result.interrupt))
}

describe("HumanInTheLoop binding", () => {
  it.effect("an old approval re-sent to a later wait whose other call reuses its id is refused; nothing runs", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup(sameIdTwice({ path: "/etc/passwd" }))
      const first = requestOfResult(yield* agent.run("clean up", { threadId: "t" }))
      const old = HumanInTheLoop.approveAll(first)
      const second = requestOfResult(yield* agent.resume("t", old))
      assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"])
      assert.strictEqual(second.actionRequests[0]!.callId, "call_0")
      const before = Option.getOrThrow(yield* agent.thread("t"))

      const stale = yield* Effect.flip(agent.resume("t", old))
      assert.deepInclude(stale, { _tag: "DecisionError", reason: "Stale" })
      if (stale._tag === "DecisionError" && stale.reason === "Stale") assert.strictEqual(stale.field, "waitKey")
      assert.deepInclude(yield* Effect.flip(agent.validateResume("t", old)), { _tag: "DecisionError", reason: "Stale" })
      // nothing ran and the thread still waits for the second call, unchanged
      assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"])
      const after = Option.getOrThrow(yield* agent.thread("t"))
      assert.deepStrictEqual(after.pending, before.pending)
      assert.deepStrictEqual(
        AgentState.encodeMessages(after.state.messages),
        AgentState.encodeMessages(before.state.messages)
      )

      // the decision for the call that waits now goes through
      const done = yield* agent.resume("t", [HumanInTheLoop.reject(second.actionRequests[0]!, "not that one")])
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"])
    }))

  it.effect("an old approval of an identical call (same id, tool and arguments) at a later wait is refused by its wait key", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup(sameIdTwice({ path: "/tmp/a" }))
      const first = requestOfResult(yield* agent.run("clean up", { threadId: "t" }))
      const old = HumanInTheLoop.approveAll(first)
      const second = requestOfResult(yield* agent.resume("t", old))
      assert.notStrictEqual(second.actionRequests[0]!.waitKey, first.actionRequests[0]!.waitKey)
      const stale = yield* Effect.flip(agent.resume("t", old))
      assert.deepInclude(stale, { _tag: "DecisionError", reason: "Stale" })
      if (stale._tag === "DecisionError" && stale.reason === "Stale") assert.strictEqual(stale.field, "waitKey")
      assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"])
    }))

  it.effect("a decision naming only a call id, or only its fingerprint, is refused as Unbound; nothing runs", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([deleteAndRead, ScriptedModel.text("done")])
      const request = requestOfResult(yield* agent.run("clean up", { threadId: "t" }))
      const action = request.actionRequests[0]!
      const bare = yield* Effect.flip(agent.resume("t", [{ type: "approve", callId: "c1" }]))
      assert.deepInclude(bare, { _tag: "DecisionError", reason: "Unbound" })
      assert.include(bare.message, "HumanInTheLoop.approve(action)")
      // a replay carrying only the fingerprint names no wait
      const fingerprintOnly = [{ type: "approve" as const, callId: "c1", fingerprint: action.fingerprint }]
      const replayed = yield* Effect.flip(agent.resume("t", fingerprintOnly))
      assert.deepInclude(replayed, { _tag: "DecisionError", reason: "Unbound" })
      if (replayed._tag === "DecisionError" && replayed.reason === "Unbound") {
        assert.strictEqual(replayed.field, "waitKey")
      }
      const keyOnly = [{ type: "approve" as const, callId: "c1", waitKey: action.waitKey }]
      const noFingerprint = yield* Effect.flip(agent.validateResume("t", keyOnly))
      assert.deepInclude(noFingerprint, { _tag: "DecisionError", reason: "Unbound" })
      if (noFingerprint._tag === "DecisionError" && noFingerprint.reason === "Unbound") {
        assert.strictEqual(noFingerprint.field, "fingerprint")
      }
      assert.deepStrictEqual(yield* log, [])
      const done = yield* agent.resume("t", [HumanInTheLoop.approve(action)])
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual([...(yield* log)].sort(), ["delete_file /tmp/a", "read_file /etc/hosts"])
    }))

  it.effect("a double-submitted approval of call_0 does not approve the next identical call_0, even at the same place in a trimmed thread", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })
      // keeps only the last user message before each model call: every reply lands at index 1
      const trim = Middleware.make({
        name: "trim",
        beforeModel: ({ messages }) =>
          Effect.succeed({ messages: messages.filter((message) => message.role === "user").slice(-1) })
      })
      const call = { name: "delete_file", params: { path: "/tmp/a" }, id: "call_0" }
      const model = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([call]),
        ScriptedModel.text("deleted"),
        ScriptedModel.toolCalls([call]),
        ScriptedModel.text("deleted again")
      ])
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [trim, hitl] }).pipe(
        Effect.provide(toolsLive(log)),
        Effect.provideService(LanguageModel.LanguageModel, model.model)
      )
      const first = requestOfResult(yield* agent.run("delete /tmp/a", { threadId: "t" }))
      const approval = HumanInTheLoop.approveAll(first)
      assert.strictEqual((yield* agent.resume("t", approval))._tag, "Completed")
      const second = requestOfResult(yield* agent.run("delete /tmp/a", { threadId: "t" }))
      // the same call, id and place in the thread: only the wait differs
      assert.strictEqual(second.actionRequests[0]!.fingerprint, first.actionRequests[0]!.fingerprint)
      assert.notStrictEqual(second.actionRequests[0]!.waitKey, first.actionRequests[0]!.waitKey)
      const doubled = yield* Effect.flip(agent.resume("t", approval))
      assert.deepInclude(doubled, { _tag: "DecisionError", reason: "Stale" })
      assert.deepStrictEqual(yield* Ref.get(log), ["delete_file /tmp/a"])
      assert.isTrue(Option.isSome(Option.getOrThrow(yield* agent.thread("t")).pending))
    }))

  it.effect("a decision for one thread's wait does not answer an identical wait of another thread", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([deleteAndRead, deleteAndRead, ScriptedModel.text("done")])
      const onA = requestOfResult(yield* agent.run("clean up", { threadId: "a" }))
      const onB = requestOfResult(yield* agent.run("clean up", { threadId: "b" }))
      assert.strictEqual(onA.actionRequests[0]!.fingerprint, onB.actionRequests[0]!.fingerprint)
      const replayed = yield* Effect.flip(agent.resume("b", HumanInTheLoop.approveAll(onA)))
      assert.deepInclude(replayed, { _tag: "DecisionError", reason: "Stale" })
      assert.deepStrictEqual(yield* log, [])
    }))

  it.effect("a reply calling two tools with one id fails the run with DuplicateCallId; nothing runs or waits", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([
          { name: "delete_file", params: { path: "/tmp/a" }, id: "call_0" },
          { name: "delete_file", params: { path: "/etc/passwd" }, id: "call_0" }
        ])
      ])
      const error = yield* Effect.flip(agent.run("clean up", { threadId: "t" }))
      assert.strictEqual(error._tag, "DuplicateCallId")
      assert.deepStrictEqual(yield* log, [])
      assert.isTrue(Option.isNone(Option.flatMap(yield* agent.thread("t"), (thread) => thread.pending)))
    }))

  it.prop(
    "a fingerprint depends on the tool name and the arguments, not on their key order",
    {
      args: FastCheck.dictionary(FastCheck.string(), FastCheck.jsonValue()),
      name: FastCheck.string()
    },
    ({ args, name }) => {
      const reversed = Object.fromEntries(Object.entries(args).reverse())
      assert.strictEqual(HumanInTheLoop.fingerprintOf(name, args), HumanInTheLoop.fingerprintOf(name, reversed))
      assert.notStrictEqual(
        HumanInTheLoop.fingerprintOf(name, args),
        // a value that cannot equal the one it replaces (it contains it)
        HumanInTheLoop.fingerprintOf(name, { ...args, [name]: [args[name] ?? null] })
      )
      assert.notStrictEqual(HumanInTheLoop.fingerprintOf(name, args), HumanInTheLoop.fingerprintOf(`${name}x`, args))
    }
  )
})

// ---------------------------------------------------------------------------
// construction
// ---------------------------------------------------------------------------

describe("HumanInTheLoop construction", () => {
  it.effect("an unknown tool name in interruptOn fails with InvalidOptions naming interruptOn.<tool>", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Middleware.build(HumanInTheLoop.middleware({
        toolkit: Tools,
        // @ts-expect-error rm_rf is not a tool of the toolkit
        interruptOn: { delete_file: true, rm_rf: true }
      })))
      assert.instanceOf(error, AgentError.InvalidOptions)
      assert.deepInclude(error, { module: "HumanInTheLoop", option: "interruptOn.rm_rf" })
      assert.include(error.message, "delete_file, read_file, send_email")
    }))

  it.effect("a policy allowing no decision, or an unknown kind, fails with InvalidOptions naming the policy", () =>
    Effect.gen(function*() {
      const empty = yield* Effect.flip(Middleware.build(HumanInTheLoop.middleware({
        toolkit: Tools,
        interruptOn: { delete_file: { allowedDecisions: [] } }
      })))
      assert.instanceOf(empty, AgentError.InvalidOptions)
      assert.deepInclude(empty, { module: "HumanInTheLoop", option: "interruptOn.delete_file.allowedDecisions" })
      assert.include(empty.reason, "is empty")
      const unknown = yield* Effect.flip(Middleware.build(HumanInTheLoop.middleware({
        toolkit: Tools,
        interruptOn: { delete_file: { allowedDecisions: ["approve", "ignore" as "approve"] } }
      })))
      assert.include(unknown.reason, "ignore")
    }))
})

// ---------------------------------------------------------------------------
// Approvals
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// a decision holds for the call decided
// ---------------------------------------------------------------------------

/** Sends every delete to /etc/passwd, on the way to the tool. */
const toPasswd = Middleware.make({
  name: "toPasswd",
  wrapToolCall: (request, next) =>
    next(
      request.call.name !== "delete_file"
        ? request
        : { ...request, call: { ...request.call, params: { path: "/etc/passwd" } } as typeof request.call }
    )
})

/** Runs each call twice (a retry), unchanged. */
const twice = Middleware.make({
  name: "twice",
  wrapToolCall: (request, next) => Effect.zipRight(next(request), next(request))
})

const setupWith = (
  middleware: (hitl: Middleware.Middleware<{}, any, never, any, HumanInTheLoop.Waits>) => ReadonlyArray<Middleware.Any>
) =>
  Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: defaultPolicy })
    const model = yield* ScriptedModel.make([deleteAndRead, ScriptedModel.text("done")])
    const agent = yield* Agent.make({ toolkit: Tools, middleware: middleware(hitl) }).pipe(
      Effect.provide(toolsLive(log)),
      Effect.provideService(LanguageModel.LanguageModel, model.model)
    )
    return { agent, log: Ref.get(log) }
  })

describe("HumanInTheLoop: a decision holds for the call decided", () => {
  for (const order of ["changer first", "changer last"] as const) {
    it.effect(`an approved call changed by a wrapToolCall (${order}) does not run as changed`, () =>
      Effect.gen(function*() {
        const { agent, log } = yield* setupWith((hitl) =>
          order === "changer first" ? [toPasswd, hitl] : [hitl, toPasswd]
        )
        const request = requestOfResult(yield* agent.run("clean up", { threadId: "t" }))
        assert.deepStrictEqual(request.actionRequests[0]!.args, { path: "/tmp/a" })
        const result = yield* agent.resume("t", HumanInTheLoop.approveAll(request))
        assert.deepStrictEqual(yield* log, ["read_file /etc/hosts"])
        const refused = toolResults(result.state.messages).find((part) => part.id === "c1")!
        assert.isTrue(refused.isFailure)
        assert.include(JSON.stringify(refused.result), "changed after it was cleared to run")
      }))
  }

  it.effect("a retry of the approved call, unchanged, runs each time", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setupWith((hitl) => [hitl, twice])
      const request = requestOfResult(yield* agent.run("clean up", { threadId: "t" }))
      const result = yield* agent.resume("t", HumanInTheLoop.approveAll(request))
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual([...(yield* log)].sort(), [
        "delete_file /tmp/a",
        "delete_file /tmp/a",
        "read_file /etc/hosts",
        "read_file /etc/hosts"
      ])
    }))
})

describe("HumanInTheLoop Approvals", () => {
  it.effect("with layerAutoApprove the run does not interrupt and the gated tool runs", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([deleteAndRead, ScriptedModel.text("done")], {
        approvals: HumanInTheLoop.layerAutoApprove
      })
      const result = yield* agent.run("clean up", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual([...(yield* log)].sort(), ["delete_file /tmp/a", "read_file /etc/hosts"])
      assert.isTrue(Option.isNone(Option.getOrThrow(yield* agent.thread("t")).pending))
    }))

  it.effect("layerApprovals decides in-process with a function of the requests", () =>
    Effect.gen(function*() {
      const asked = yield* Ref.make<ReadonlyArray<HumanInTheLoop.ApprovalRequest>>([])
      const approvals = HumanInTheLoop.layerApprovals((request, { threadId }) =>
        Effect.as(
          Ref.update(asked, (all) => [...all, request]),
          request.actionRequests.map((action) => HumanInTheLoop.reject(action, `not on ${threadId}`))
        )
      )
      const { agent, log } = yield* setup([deleteAndRead, ScriptedModel.text("done")], { approvals })
      const result = yield* agent.run("clean up", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual((yield* Ref.get(asked)).map((r) => r.actionRequests.map((a) => a.callId)), [["c1"]])
      assert.deepStrictEqual(yield* log, ["read_file /etc/hosts"])
      assert.deepStrictEqual(toolResults(result.state.messages)[0]!.result, {
        error: `The user rejected this call of "delete_file"; it did not run. Reason: not on t`
      })
    }))

  it.effect("decisions from Approvals are checked like resumed ones", () =>
    Effect.gen(function*() {
      const approvals = HumanInTheLoop.layerApprovals((request) =>
        Effect.succeed(request.actionRequests.map((action) => HumanInTheLoop.respond(action, "no")))
      )
      const { agent, log } = yield* setup([deleteAndRead], { approvals })
      const error = yield* Effect.flip(agent.run("clean up", { threadId: "t" }))
      assert.deepInclude(error, { _tag: "DecisionError", reason: "NotAllowed" })
      assert.deepStrictEqual(yield* log, [])
    }))
})

// ---------------------------------------------------------------------------
// when
// ---------------------------------------------------------------------------

const pathOf = (call: Prompt.ToolCallPart) => String((call.params as { readonly path?: unknown }).path)

/** Deletes under /etc need a decision, others do not. */
const etcOnly: InterruptOn = {
  delete_file: { allowedDecisions: ["approve", "reject"], when: (call) => pathOf(call).startsWith("/etc/") }
}

describe("HumanInTheLoop when", () => {
  it.effect("calls for which when is false run without a decision; the others wait, alone in the request", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([
          { name: "delete_file", params: { path: "/tmp/a" }, id: "c1" },
          { name: "delete_file", params: { path: "/etc/hosts" }, id: "c2" },
          { name: "delete_file", params: { path: "/tmp/b" }, id: "c3" }
        ]),
        ScriptedModel.text("done")
      ], { interruptOn: etcOnly })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("clean up", { threadId: "t" })))
      const decisions = events.filter(AgentEvent.$is("MiddlewareDecision")).map((event) => [event.decision, event.data])
      assert.deepStrictEqual(decisions, [
        ["2 call(s) need no decision (when)", { callIds: ["c1", "c3"] }],
        ["interrupt: 1 call(s) wait for a decision", { callIds: ["c2"] }]
      ])
      const pending = Option.getOrThrow(Option.getOrThrow(yield* agent.thread("t")).pending)
      const request = Option.getOrThrow(approvalOf(pending))
      assert.deepStrictEqual(request.actionRequests.map((action) => action.callId), ["c2"])
      assert.match(request.actionRequests[0]!.waitKey, /^approval\/c2@1\/1\//)
      // the batch waits as a whole
      assert.deepStrictEqual(yield* log, [])
      const result = yield* agent.resume("t", [HumanInTheLoop.reject(request.actionRequests[0]!, "not /etc")])
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual([...(yield* log)].sort(), ["delete_file /tmp/a", "delete_file /tmp/b"])
      assert.deepStrictEqual(
        toolResults(result.state.messages).map((part) => [part.id, part.isFailure]),
        [["c1", false], ["c2", true], ["c3", false]]
      )
    }))

  it.effect("a reply whose gated calls all answer false runs without interrupting", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/tmp/a" }, id: "c1" }]),
        ScriptedModel.text("done")
      ], { interruptOn: etcOnly })
      const result = yield* agent.run("clean up", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"])
    }))

  it.effect("when may be an Effect, and sees the thread", () =>
    Effect.gen(function*() {
      const seen = yield* Ref.make<ReadonlyArray<string>>([])
      const { agent } = yield* setup([
        ScriptedModel.toolCalls([
          { name: "send_email", params: { to: "boss@corp.com", body: "hi" }, id: "c1" },
          { name: "send_email", params: { to: "me@home.org", body: "hi" }, id: "c2" }
        ])
      ], {
        interruptOn: {
          send_email: {
            allowedDecisions: ["approve"],
            when: (call, context) =>
              Effect.as(
                Ref.update(seen, (all) => [...all, `${context.threadId}/${context.step}/${call.id}`]),
                String((call.params as { readonly to: string }).to).endsWith("@corp.com")
              )
          }
        }
      })
      const result = yield* agent.run("tell them", { threadId: "t" })
      assert.strictEqual(result._tag, "Interrupted")
      if (result._tag !== "Interrupted") return
      assert.deepStrictEqual(decodeRequest(result.interrupt.value).actionRequests.map((action) => action.callId), [
        "c1"
      ])
      assert.deepStrictEqual(yield* Ref.get(seen), ["t/1/c1", "t/1/c2"])
    }))

  it.effect("a when that throws, fails, dies or answers no boolean asks, and says why", () =>
    Effect.gen(function*() {
      const failing: ReadonlyArray<readonly [HumanInTheLoop.When, string]> = [
        [() => {
          throw new Error("boom")
        }, "boom"],
        [() => Effect.fail("lookup failed"), "lookup failed"],
        [() => Effect.die(new Error("crashed")), "crashed"],
        [() => "yes" as unknown as boolean, "it answered \"yes\""]
      ]
      for (const [when, reason] of failing) {
        const { agent, log } = yield* setup([
          ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/tmp/a" }, id: "c1" }]),
          ScriptedModel.text("done")
        ], { interruptOn: { delete_file: { allowedDecisions: ["approve"], when } } })
        const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("clean up", { threadId: "t" })))
        const decisions = events.filter(AgentEvent.$is("MiddlewareDecision")).map((event) => event.decision)
        assert.deepStrictEqual(decisions, [
          `the when of delete_file failed, so the call waits for a decision: ${reason}`,
          "interrupt: 1 call(s) wait for a decision"
        ])
        assert.deepStrictEqual(yield* log, [])
        const pending = Option.getOrThrow(Option.getOrThrow(yield* agent.thread("t")).pending)
        const request = Option.getOrThrow(approvalOf(pending))
        const result = yield* agent.resume("t", HumanInTheLoop.approveAll(request))
        assert.strictEqual(result._tag, "Completed")
        assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"])
      }
    }))

  it.effect("a resume is not asked again: the stored request decides which calls wait", () =>
    Effect.gen(function*() {
      // a when that says yes the first time only, so asking it again would decide otherwise
      const asked = yield* Ref.make(0)
      const flipping: HumanInTheLoop.When = () => Effect.map(Ref.getAndUpdate(asked, (n) => n + 1), (n) => n === 0)
      const script = [
        ScriptedModel.toolCalls([
          { name: "delete_file", params: { path: "/a" }, id: "c1" },
          { name: "delete_file", params: { path: "/b" }, id: "c2" }
        ]),
        ScriptedModel.text("done")
      ]
      const { agent, log } = yield* setup(script, {
        interruptOn: { delete_file: { allowedDecisions: ["approve"], when: flipping } }
      })
      const first = yield* agent.run("clean up", { threadId: "t" })
      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      const request = Option.getOrThrow(approvalOf(first.interrupt))
      assert.deepStrictEqual(request.actionRequests.map((action) => action.callId), ["c1"])
      assert.strictEqual(yield* Ref.get(asked), 2)
      // checking and resuming answer c1 only, and do not ask when again
      yield* agent.validateResume("t", HumanInTheLoop.approveAll(request))
      const missing = yield* Effect.flip(agent.resume("t", []))
      assert.deepInclude(missing, { _tag: "DecisionError", reason: "Missing" })
      const result = yield* agent.resume("t", HumanInTheLoop.approveAll(request))
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual([...(yield* log)].sort(), ["delete_file /a", "delete_file /b"])
      assert.strictEqual(yield* Ref.get(asked), 2)
    }))

  it.scoped("a fresh agent whose when would decide otherwise resumes the stored request as it was", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* fs.makeTempDirectoryScoped()
      const checkpointer = () => Checkpointer.layerFileSystem(directory)
      const etcCall = ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/etc/hosts" }, id: "c9" }])
      const waiting = yield* setup([etcCall], { interruptOn: etcOnly }).pipe(
        Effect.flatMap(({ agent }) => agent.run("and /etc/hosts", { threadId: "other" })),
        Effect.provide(checkpointer())
      )
      assert.strictEqual(waiting._tag, "Interrupted")
      if (waiting._tag !== "Interrupted") return
      const request = Option.getOrThrow(approvalOf(waiting.interrupt))

      // the new process's when would not ask about /etc/hosts: the stored request still waits for a decision
      const neverAsk: InterruptOn = { delete_file: { allowedDecisions: ["approve", "reject"], when: () => false } }
      const second = yield* Effect.gen(function*() {
        const { agent, log } = yield* setup([ScriptedModel.text("kept it")], { interruptOn: neverAsk })
        const missing = yield* Effect.flip(agent.resume("other", []))
        const result = yield* agent.resume("other", [HumanInTheLoop.reject(request.actionRequests[0]!, "no")])
        return { missing, result, log: yield* log }
      }).pipe(Effect.provide(checkpointer()))
      assert.deepInclude(second.missing, { _tag: "DecisionError", reason: "Missing" })
      assert.strictEqual(second.result._tag, "Completed")
      assert.deepStrictEqual(second.log, [])
      assert.deepStrictEqual(toolResults(second.result.state.messages).map((part) => [part.id, part.isFailure]), [
        ["c9", true]
      ])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect.prop(
    "the request asks about exactly the calls when gates, in order; approving them runs every call once",
    {
      paths: FastCheck.array(FastCheck.constantFrom("/etc/a", "/etc/b", "/tmp/a", "/tmp/b", "/home/x"), {
        maxLength: 5
      })
    },
    ({ paths }) =>
      Effect.gen(function*() {
        if (paths.length === 0) return
        const calls = paths.map((path, i) => ({ name: "delete_file" as const, params: { path }, id: `c${i}` }))
        const { agent, log } = yield* setup([ScriptedModel.toolCalls(calls), ScriptedModel.text("done")], {
          interruptOn: etcOnly
        })
        const expected = calls.filter((call) => call.params.path.startsWith("/etc/")).map((call) => call.id)
        let result = yield* agent.run("go", { threadId: "t" })
        if (expected.length === 0) {
          assert.strictEqual(result._tag, "Completed")
        } else {
          assert.strictEqual(result._tag, "Interrupted")
          if (result._tag !== "Interrupted") return
          const request = Option.getOrThrow(approvalOf(result.interrupt))
          assert.deepStrictEqual(request.actionRequests.map((action) => action.callId), expected)
          assert.deepStrictEqual(yield* log, [])
          result = yield* agent.resume("t", HumanInTheLoop.approveAll(request))
          assert.strictEqual(result._tag, "Completed")
        }
        assert.deepStrictEqual([...(yield* log)].sort(), paths.map((path) => `delete_file ${path}`).sort())
      }),
    { fastCheck: { numRuns: 40 } }
  )
})

// ---------------------------------------------------------------------------
// durability
// ---------------------------------------------------------------------------

describe("HumanInTheLoop durability", () => {
  it.scoped("an interrupted run resumes with a fresh agent reading the same checkpoint folder", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* fs.makeTempDirectoryScoped()
      const checkpointer = () => Checkpointer.layerFileSystem(directory)

      const first = yield* setup([deleteAndRead]).pipe(
        Effect.flatMap(({ agent, log }) =>
          Effect.map(agent.run("clean up", { threadId: "durable" }), (result) => ({ result, log }))
        ),
        Effect.provide(checkpointer())
      )
      assert.strictEqual(first.result._tag, "Interrupted")
      assert.deepStrictEqual(yield* first.log, [])
      // one thread: its head and its log of messages
      const files = yield* fs.readDirectory(directory)
      assert.strictEqual(files.length, 2)
      assert.deepStrictEqual(files.filter((file) => !/^durable\.[0-9a-f-]{36}\.log$/.test(file)), ["durable.json"])

      // a new agent, model, toolkit and checkpointer: nothing shared with the first but the folder
      const second = yield* Effect.gen(function*() {
        const { agent, log, requests } = yield* setup([ScriptedModel.text("all clean")])
        const result = yield* resumeBound(agent, "durable", (a: ActionOf) => [HumanInTheLoop.approve(a("c1"))])
        const again = yield* Effect.flip(
          resumeBound(agent, "durable", (a: ActionOf) => [HumanInTheLoop.approve(a("c1"))])
        )
        return { result, again, log: yield* log, requests: yield* requests }
      }).pipe(Effect.provide(checkpointer()))
      assert.strictEqual(second.result._tag, "Completed")
      if (second.result._tag !== "Completed") return
      assert.strictEqual(second.result.text, "all clean")
      assert.deepStrictEqual([...second.log].sort(), ["delete_file /tmp/a", "read_file /etc/hosts"])
      assert.strictEqual(second.again._tag, "ThreadStateError")
      assert.deepStrictEqual(toolResults(second.requests[0]!.prompt.content).map((part) => part.result), [
        "deleted /tmp/a",
        "contents of /etc/hosts"
      ])
      assert.strictEqual(second.result.steps, 2)
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("options", () => {
  const Tools = Toolkit.make(
    Tool.make("delete_file", { parameters: { path: Schema.String }, success: Schema.String })
  )
  const invalid = (options: unknown) =>
    Effect.flip(Middleware.build(HumanInTheLoop.middleware(options as any))).pipe(
      Effect.map((error) => [error._tag, error.option] as const)
    )

  it.effect("a policy with a missing or misspelled allowedDecisions fails naming interruptOn.<tool>.allowedDecisions", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        yield* invalid({ toolkit: Tools, interruptOn: { delete_file: {} } }),
        ["InvalidOptions", "interruptOn.delete_file.allowedDecisions"]
      )
      assert.deepStrictEqual(
        yield* invalid({ toolkit: Tools, interruptOn: { delete_file: { allowed_decisions: ["approve"] } } }),
        ["InvalidOptions", "interruptOn.delete_file.allowedDecisions"]
      )
    }))

  it.effect("an unknown option or a wrong type fails naming the option", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        yield* invalid({ toolkit: Tools, interruptOn: {}, checkpointer: true }),
        ["InvalidOptions", "checkpointer"]
      )
      assert.deepStrictEqual(
        yield* invalid({ toolkit: Tools, interruptOn: {}, descriptionPrefix: 3 }),
        ["InvalidOptions", "descriptionPrefix"]
      )
      assert.deepStrictEqual(
        yield* invalid({ toolkit: Tools, interruptOn: { delete_file: { allowedDecisions: ["approve"], when: true } } }),
        ["InvalidOptions", "interruptOn.delete_file.when"]
      )
    }))
})

// ---------------------------------------------------------------------------
// calls that cannot run (issue 33, item 19)
// ---------------------------------------------------------------------------

describe("HumanInTheLoop asks only about calls that can run", () => {
  const uncallable: ReadonlyArray<readonly [string, unknown]> = [
    ["arguments of the wrong shape", { path: 42 }],
    ["arguments that are not JSON", `{"path": "/a"`],
    ["arguments that are not an object", [1, 2]]
  ]
  for (const [label, params] of uncallable) {
    it.effect(`a gated call with ${label} gets the repair error without interrupting; the repaired call is asked`, () =>
      Effect.gen(function*() {
        const { agent, log, requests } = yield* setup([
          ScriptedModel.toolCalls([{ name: "delete_file", params, id: "bad" }]),
          ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/tmp/a" }, id: "good" }]),
          ScriptedModel.text("done")
        ])
        const first = yield* agent.run("clean up", { threadId: "t" })
        // the model's repaired call is the one a person is asked about
        assert.strictEqual(first._tag, "Interrupted")
        if (first._tag !== "Interrupted") return
        const request = decodeRequest(first.interrupt.value)
        assert.deepStrictEqual(request.actionRequests.map((action) => action.callId), ["good"])
        const [repair] = toolResults(first.state.messages)
        assert.strictEqual(repair!.id, "bad")
        assert.isTrue(repair!.isFailure)
        assert.include((repair!.result as { error: string }).error, `Invalid arguments for tool "delete_file"`)
        assert.strictEqual((yield* requests).length, 2)
        const done = yield* resumeBound(agent, "t", (actionOf: ActionOf) => [HumanInTheLoop.approve(actionOf("good"))])
        assert.strictEqual(done._tag, "Completed")
        assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"])
      }))
  }

  it.effect("in a reply with a valid gated call, only the valid one waits; the invalid one is answered after", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([
          { name: "delete_file", params: { path: 42 }, id: "bad" },
          { name: "delete_file", params: { path: "/tmp/a" }, id: "good" }
        ]),
        ScriptedModel.text("done")
      ])
      const first = yield* agent.run("clean up", { threadId: "t" })
      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      assert.deepStrictEqual(decodeRequest(first.interrupt.value).actionRequests.map((action) => action.callId), [
        "good"
      ])
      const done = yield* resumeBound(agent, "t", (actionOf: ActionOf) => [HumanInTheLoop.approve(actionOf("good"))])
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"])
      const results = toolResults(done.state.messages)
      assert.deepStrictEqual(results.map((part) => [part.id, part.isFailure]), [["bad", true], ["good", false]])
    }))

  it.effect("the Approvals service is not asked about a call that cannot run", () =>
    Effect.gen(function*() {
      const asked = yield* Ref.make(0)
      const approvals = HumanInTheLoop.layerApprovals((request) =>
        Effect.as(Ref.update(asked, (n) => n + 1), request.actionRequests.map(HumanInTheLoop.approve))
      )
      const { agent, log } = yield* setup([
        ScriptedModel.toolCalls([{ name: "send_email", params: { to: "a@b.c" }, id: "bad" }]),
        ScriptedModel.text("done")
      ], { approvals })
      const result = yield* agent.run("mail", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(yield* Ref.get(asked), 0)
      assert.deepStrictEqual(yield* log, [])
      assert.isTrue(toolResults(result.state.messages)[0]!.isFailure)
    }))
})

describe("HumanInTheLoop and arguments nested too deep", () => {
  it.effect("a call of a tool taking any value, its arguments nested 10,000 deep, is answered unasked", () =>
    Effect.gen(function*() {
      const Store = Tool.make("store", { parameters: { value: Schema.Unknown }, success: Schema.String })
      const Stored = Toolkit.make(Store)
      const hitl = HumanInTheLoop.middleware({ toolkit: Stored, interruptOn: { store: true } })
      const model = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([{
          name: "store",
          params: { value: JSON.parse(`${"[".repeat(10_000)}${"]".repeat(10_000)}`) },
          id: "deep"
        }]),
        ScriptedModel.text("done")
      ])
      const agent = yield* Agent.make({ toolkit: Stored, middleware: [hitl] }).pipe(
        Effect.provide(Stored.toLayer({ store: () => Effect.succeed("stored") })),
        Effect.provideService(LanguageModel.LanguageModel, model.model)
      )
      const result = yield* agent.run("store it", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const [answer] = toolResults(result.state.messages)
      assert.isTrue(answer!.isFailure)
      assert.include((answer!.result as { error: string }).error, "levels deep")
    }))
})
