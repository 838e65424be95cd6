import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { AgentEngine, AgentWorkflow, Authorizer, RunStore } from "@stepwise-agent/workflow"
import { Effect, Layer, Option, Schema, Stream } from "effect"
import * as Inspector from "../src/Inspector.js"
import * as Wire from "../src/internal/wire.js"

/** The approval request a durable run's wait carries (its status is untyped); `None` for another middleware's. */
const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

const ReadFile = Tool.make("read_file", { parameters: { path: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(ReadFile)

/** Reads notes.txt (gated), then answers; decided from the prompt, so a replay continues. */
const answer: ScriptedModel.Turn = (request) =>
  request.prompt.content.some((message) => message.role === "tool")
    ? ScriptedModel.text("The notes are short.")
    : ScriptedModel.toolCalls([{ name: "read_file", params: { path: "notes.txt" }, id: "call_read" }])

const Runs = AgentWorkflow.make({ name: "inspected-agent", version: 1 })

/** The decisions `decide` builds from the actions of the thread's wait (by call id), as the page builds them. */
const bound = (
  thread: Agent.ThreadSnapshot<any> | undefined,
  decide: (action: (callId: string) => HumanInTheLoop.ActionRequest) => ReadonlyArray<HumanInTheLoop.Decision>
) => {
  const request = Option.getOrThrow(approvalOf(Option.getOrThrow(thread!.pending)))
  return decide((callId) => request.actionRequests.find((action) => action.callId === callId)!)
}

describe("Inspector on durable runs", () => {
  it.scopedLive("shows a durable run waiting and hands the page's approval to its workflow", () =>
    Effect.gen(function*() {
      const reads: Array<string> = []
      const AgentLive = Agent.layer({
        toolkit: Tools,
        middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { read_file: true } })]
      }).pipe(Layer.provide(Layer.merge(
        ScriptedModel.layer(Array.from({ length: 6 }, () => answer)),
        Tools.toLayer({ read_file: ({ path }) => Effect.sync(() => (reads.push(path), `contents of ${path}`)) })
      )))
      const context = yield* Layer.build(Runs.layer.pipe(
        Layer.provideMerge(AgentLive),
        Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory)),
        Layer.provideMerge(Authorizer.layer((request) => request.principal === "inspector"))
      ))
      const run = <A, E>(effect: Effect.Effect<A, E, any>): Effect.Effect<A, E> =>
        Effect.provide(effect, context) as Effect.Effect<A, E>
      const agent = yield* run(Agent.Agent)

      // decisions from the page go to the thread's latest durable run
      const inspector = yield* Inspector.make(agent, {
        resume: (threadId, value) =>
          run(Effect.gen(function*() {
            const [latest] = yield* (yield* RunStore.RunStore).list({ threadId, limit: 1 })
            yield* Runs.resume(latest!.runId, value, { principal: "inspector" })
          }))
      })
      const token = new URL(inspector.url).searchParams.get("token")!
      const base = `http://127.0.0.1:${inspector.port}`

      const pull = yield* Stream.toPull(yield* agent.watch)
      const runId = yield* run(Runs.start({ threadId: "t1", input: "Read my notes" }))
      const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
      assert.strictEqual(waiting.state, "Waiting")

      // watchers (the page among them) see the suspended run end as Interrupted, not as failed
      const seen: Array<string> = []
      while (!seen.includes("RunEnded")) {
        for (const event of yield* pull) seen.push(event.event._tag)
      }
      assert.notInclude(seen, "RunFailed")

      const thread = Option.getOrThrow(yield* agent.thread("t1"))
      const key = Wire.interruptKey(Option.getOrThrow(thread.pending), thread.state.messages.length)
      const response = yield* Effect.promise(() =>
        fetch(`${base}/api/threads/t1/resume`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-inspector-token": token },
          body: JSON.stringify({ key, value: bound(thread, (a) => [HumanInTheLoop.approve(a("call_read"))]) })
        })
      )
      assert.strictEqual(response.status, 202)
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      assert.deepStrictEqual(reads, ["notes.txt"])

      // another process claimed the next decision first: the page hears "already decided", and the
      // run goes on with the other process's decision
      const second = yield* run(Runs.start({ threadId: "t2", input: "Read my notes" }))
      const pending = Option.getOrThrow((yield* run(Runs.await(second, { untilWaiting: true }))).pending)
      const thread2 = Option.getOrThrow(yield* agent.thread("t2"))
      const elsewhere = {
        value: bound(thread2, (a) => [HumanInTheLoop.reject(a("call_read"), "decided elsewhere")]),
        by: "x"
      }
      yield* run(Effect.flatMap(
        RunStore.RunStore,
        (store) => store.claimDecision(second, pending.key, JSON.stringify({ ...elsewhere, decidedAt: 1 }))
      ))
      const late = yield* Effect.promise(() =>
        fetch(`${base}/api/threads/t2/resume`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-inspector-token": token },
          body: JSON.stringify({
            key: Wire.interruptKey(Option.getOrThrow(thread2.pending), thread2.state.messages.length),
            value: bound(thread2, (a) => [HumanInTheLoop.approve(a("call_read"))])
          })
        }).then(async (response) => ({
          status: response.status,
          body: (await response.json()) as { readonly error: string }
        }))
      )
      assert.strictEqual(late.status, 409)
      assert.strictEqual(late.body.error, "AlreadyDecided")
      const rejected = yield* run(Runs.await(second))
      assert.strictEqual(rejected.state, "Completed")
      assert.deepStrictEqual(reads, ["notes.txt"])
      assert.include(JSON.stringify(rejected.messages), "decided elsewhere")
    }))
  it.scopedLive("without a resume option, a decision for a durable run's wait is refused with 409 DurableThreadError; nothing runs", () =>
    Effect.gen(function*() {
      const reads: Array<string> = []
      const AgentLive = Agent.layer({
        toolkit: Tools,
        middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { read_file: true } })]
      }).pipe(Layer.provide(Layer.merge(
        ScriptedModel.layer(Array.from({ length: 4 }, () => answer)),
        Tools.toLayer({ read_file: ({ path }) => Effect.sync(() => (reads.push(path), `contents of ${path}`)) })
      )))
      const context = yield* Layer.build(Runs.layer.pipe(
        Layer.provideMerge(AgentLive),
        Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory)),
        Layer.provideMerge(Authorizer.layer(() => true))
      ))
      const run = <A, E>(effect: Effect.Effect<A, E, any>): Effect.Effect<A, E> =>
        Effect.provide(effect, context) as Effect.Effect<A, E>
      const agent = yield* run(Agent.Agent)
      // the page's decisions go to the agent in process, which is not where a durable run waits
      const inspector = yield* Inspector.make(agent)
      const token = new URL(inspector.url).searchParams.get("token")!

      const runId = yield* run(Runs.start({ threadId: "t1", input: "Read my notes" }))
      yield* run(Runs.await(runId, { untilWaiting: true }))
      const thread = Option.getOrThrow(yield* agent.thread("t1"))
      const decisions = bound(thread, (a) => [HumanInTheLoop.approve(a("call_read"))])
      const response = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${inspector.port}/api/threads/t1/resume`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-inspector-token": token },
          body: JSON.stringify({
            key: Wire.interruptKey(Option.getOrThrow(thread.pending), thread.state.messages.length),
            value: decisions
          })
        }).then(async (response) => ({
          status: response.status,
          body: (await response.json()) as { readonly error: string; readonly message: string }
        }))
      )
      assert.strictEqual(response.status, 409)
      assert.strictEqual(response.body.error, "DurableThreadError")
      assert.include(response.body.message, "resume")
      assert.deepStrictEqual(reads, [])
      assert.deepStrictEqual(yield* agent.thread("t1"), Option.some(thread))
      assert.strictEqual((yield* run(Runs.status(runId))).state, "Waiting")

      // the durable run still takes the decision
      yield* run(Runs.resume(runId, decisions, { principal: "inspector" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      assert.deepStrictEqual(reads, ["notes.txt"])
    }))

  it.scopedLive("lists the threads of a run store's runs a page at a time, each thread once (the guide's storedThreads)", () =>
    Effect.gen(function*() {
      const runs = yield* RunStore.makeMemory
      // thread "b" has two runs; the store lists runs, newest first, and pages them by no cursor
      for (const [runId, threadId] of [["r1", "b"], ["r2", "a"], ["r3", "b"], ["r4", "c"]]) {
        yield* runs.register({ runId: runId!, threadId: threadId!, executionId: runId!, workflow: "inspected-agent" })
      }
      const agent = yield* Agent.make({}).pipe(Effect.provide(ScriptedModel.layer([])))
      const inspector = yield* Inspector.make(agent, {
        storedThreads: (page) =>
          Effect.map(runs.list(), (records) => Checkpointer.pageOf(new Set(records.map((run) => run.threadId)), page))
      })
      const token = new URL(inspector.url).searchParams.get("token")!
      const page = (query: string) =>
        Effect.promise(async () =>
          (await fetch(`http://127.0.0.1:${inspector.port}/api/stored-threads?token=${token}&${query}`)).json()
        )
      assert.deepStrictEqual(yield* page("limit=2"), { threadIds: ["a", "b"], next: "b" })
      assert.deepStrictEqual(yield* page("limit=2&cursor=b"), { threadIds: ["c"], next: null })
    }))
})
