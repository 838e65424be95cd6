import { AiError, IdGenerator, LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, AgentState, Checkpointer, Middleware, RunJournal, ToolEffect } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { HookRecorder, ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import { Chunk, Deferred, Effect, FastCheck, Fiber, Layer, Option, Schema, Stream } from "effect"

const Add = Tool.make("add", {
  description: "Adds two numbers",
  parameters: { a: Schema.Number, b: Schema.Number },
  success: Schema.Number
})
const Delete = Tool.make("delete_file", {
  description: "Deletes a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(Add, Delete)

/** Handlers that count every execution in `ran`. */
const toolsLive = (ran: Array<string>) =>
  Tools.toLayer({
    add: ({ a, b }) => Effect.sync(() => (ran.push(`add ${a} ${b}`), a + b)),
    delete_file: ({ path }) => Effect.sync(() => (ran.push(`delete ${path}`), `deleted ${path}`))
  })

const Runs = AgentWorkflow.make({ name: "test-agent", version: 1 })

/**
 * The reason of the `HumanInTheLoop.DecisionError` a refused decision carries: an untyped workflow's
 * `InvalidDecision` does not name the middleware's errors, so it is matched by class.
 */
const decisionErrorOf = (error: { readonly _tag: string }) =>
  error instanceof AgentWorkflow.InvalidDecision && error.error instanceof HumanInTheLoop.DecisionError
    ? error.error.reason
    : undefined

/** The same workflow typed by its agent (HumanInTheLoop's): its errors and waits. */
const Approvals = AgentWorkflow.make<
  Agent.Service<AgentState.AgentState, HumanInTheLoop.DecisionError, never, HumanInTheLoop.Waits>
>({ name: "test-agent", version: 1 })

/** Everything a durable run on the memory engine needs, around `agent`. */
const durable = <E>(agent: Layer.Layer<Agent.Agent, E>, workflow: AgentWorkflow.AgentWorkflow<any> = Runs) =>
  workflow.layer.pipe(
    Layer.provideMerge(agent),
    Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory)),
    Layer.provideMerge(Authorizer.layer((request) => request.principal !== "mallory"))
  )

const transcript = (messages: ReadonlyArray<unknown>) => JSON.stringify(AgentState.encodeMessages(messages as any))

/** The approval request a waiting run shows (its decisions are built from it, bound to its calls). */
const approvalOf = (status: AgentWorkflow.RunStatus<any>): HumanInTheLoop.ApprovalRequest =>
  Option.getOrThrow(
    Option.flatMap(status.pending, (wait) => Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value))
  )

/** Scripts of 0–4 tool-call turns (1–3 parallel `add` calls each) and a final answer. */
const scripts = FastCheck.array(
  FastCheck.array(FastCheck.tuple(FastCheck.integer({ min: -50, max: 50 }), FastCheck.integer({ min: 0, max: 9 })), {
    minLength: 1,
    maxLength: 3
  }),
  { maxLength: 4 }
).map((turns): ReadonlyArray<ScriptedModel.Turn> => [
  ...turns.map((calls, turn) =>
    ScriptedModel.toolCalls(calls.map(([a, b], i) => ({ name: "add", params: { a, b }, id: `c${turn}_${i}` })))
  ),
  ScriptedModel.text("done")
])

describe("AgentWorkflow on the memory engine", () => {
  it.live.prop("parity: the durable loop gives the in-process transcript and middleware calls", { script: scripts }, ({
    script
  }) =>
    Effect.gen(function*() {
      const inProcessLog: Array<string> = []
      const inProcessRan: Array<string> = []
      const inProcess = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [HookRecorder.middleware("a", inProcessLog)] })
        return yield* agent.run("add these", { threadId: "t" })
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), toolsLive(inProcessRan))))

      const durableLog: Array<string> = []
      const durableRan: Array<string> = []
      const agent = Agent.layer({ toolkit: Tools, middleware: [HookRecorder.middleware("a", durableLog)] }).pipe(
        Layer.provide(Layer.merge(ScriptedModel.layer(script), toolsLive(durableRan)))
      )
      const status = yield* Effect.gen(function*() {
        const runId = yield* Runs.start({ threadId: "t", input: "add these" })
        return yield* Runs.await(runId)
      }).pipe(Effect.provide(durable(agent)))

      assert.strictEqual(inProcess._tag, "Completed")
      assert.strictEqual(status.state, "Completed")
      assert.strictEqual(transcript(status.messages), transcript(inProcess.state.messages))
      assert.deepStrictEqual(durableLog, inProcessLog)
      assert.deepStrictEqual(durableRan, inProcessRan)
      assert.deepStrictEqual(
        Option.map(status.outcome, (outcome) => outcome.steps),
        Option.some(inProcess._tag === "Completed" ? inProcess.steps : -1)
      )
    }), { fastCheck: { numRuns: 15 } })

  const approvalScript = [
    ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/tmp/a" }, id: "call_1" }]),
    ScriptedModel.text("deleted")
  ]

  const approvalAgent = (ran: Array<string>, script: ReadonlyArray<ScriptedModel.Turn> = approvalScript) =>
    Layer.unwrapEffect(Effect.gen(function*() {
      const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })
      return Agent.layer({ toolkit: Tools, middleware: [hitl] })
    })).pipe(Layer.provide(Layer.merge(ScriptedModel.layer(script), toolsLive(ran))))

  /**
   * A run waiting for its approval, and a claim of that approval stored as a process that died
   * right after claiming would have left it (the encoded decision, not yet delivered).
   */
  const claimedButNotDelivered = (encode: (request: HumanInTheLoop.ApprovalRequest) => string) =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran)))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "delete /tmp/a" }))
      const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
      const key = Option.getOrThrow(waiting.pending).key
      const request = approvalOf(waiting)
      yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.claimDecision(runId, key, encode(request))))
      return { ran, run, runId, key, request }
    })

  it.scopedLive("an approval suspends the run; resume by run id finishes it, the tool running once", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran)))
      const runId = yield* Runs.start({ threadId: "t", input: "delete /tmp/a" }).pipe(Effect.provide(context))
      const waiting = yield* Runs.await(runId, { untilWaiting: true }).pipe(Effect.provide(context))
      assert.strictEqual(waiting.state, "Waiting")
      assert.match(Option.getOrThrow(waiting.pending).key, /^approval\/call_1@1\/1\//)
      assert.deepStrictEqual(ran, [])

      yield* Runs.resume(runId, HumanInTheLoop.approveAll(approvalOf(waiting)), { principal: "alice" }).pipe(
        Effect.provide(context)
      )
      const done = yield* Runs.await(runId).pipe(Effect.provide(context))
      assert.strictEqual(done.state, "Completed")
      assert.deepStrictEqual(ran, ["delete /tmp/a"])
      assert.deepStrictEqual(Option.map(done.outcome, (outcome) => outcome.text), Option.some("deleted"))
      const results = done.messages.flatMap((message) =>
        message.role === "tool" ? message.content.map((part) => part.type === "tool-result" ? part.result : null) : []
      )
      assert.deepStrictEqual(results, ["deleted /tmp/a"])
    }))

  it.scopedLive("a wrapToolCall's state update replays from the journal: the tool and the hook do not run again", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const seen: Array<number> = []
      let wrapped = 0
      const counting = Middleware.make({
        name: "counting",
        state: { schema: Schema.Struct({ toolCalls: Schema.Number }), initial: { toolCalls: 0 } },
        wrapToolCall: (request, next) =>
          Effect.map(next(request), (result) => {
            wrapped++
            return { ...result, state: { toolCalls: (request.state.toolCalls as number) + 1 } }
          }),
        beforeModel: ({ state }) => Effect.sync(() => void seen.push(state.toolCalls))
      })
      const script = [
        ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "call_0" }]),
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/tmp/a" }, id: "call_1" }]),
        ScriptedModel.text("deleted")
      ]
      const agent = Layer.unwrapEffect(Effect.gen(function*() {
        const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })
        return Agent.layer({ toolkit: Tools, middleware: [counting, hitl] })
      })).pipe(Layer.provide(Layer.merge(ScriptedModel.layer(script), toolsLive(ran))))
      const context = yield* Layer.build(durable(agent))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "add, then delete /tmp/a" }))
      const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
      assert.strictEqual(waiting.state, "Waiting")
      assert.deepStrictEqual([ran, wrapped, seen], [["add 1 2"], 1, [0, 1]])

      // the decision replays the run from its journal: add's call (and its hook) come from there, with the update
      yield* run(Runs.resume(runId, HumanInTheLoop.approveAll(approvalOf(waiting)), { principal: "alice" }))
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      assert.deepStrictEqual(ran, ["add 1 2", "delete /tmp/a"])
      assert.strictEqual(wrapped, 2)
      assert.deepStrictEqual(seen, [0, 1, 0, 1, 2])
      const thread = yield* run(Effect.flatMap(Agent.Agent, (agent) => agent.thread("t")))
      assert.strictEqual((Option.getOrThrow(thread).state as any).toolCalls, 2)
    }))

  it.scopedLive("a replay writes no checkpoint again: each save happens once, in the run's order", () =>
    Effect.gen(function*() {
      // what each save stored: the thread's length, and whether it waits
      const saves: Array<string> = []
      const memory = yield* Checkpointer.makeMemory
      const recording = Layer.succeed(Checkpointer.Checkpointer, {
        ...memory,
        // no append: every checkpoint comes whole through this save
        append: undefined,
        save: (threadId, checkpoint) =>
          Effect.zipRight(
            Effect.sync(() => saves.push(`${checkpoint.messages.length}${checkpoint.pending ? " waiting" : ""}`)),
            memory.save(threadId, checkpoint)
          )
      })
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran).pipe(Layer.provide(recording))))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "delete /tmp/a" }))
      const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
      // the waiting thread is stored before the run suspends
      assert.deepStrictEqual(saves, ["2 waiting"])
      yield* run(Runs.resume(runId, HumanInTheLoop.approveAll(approvalOf(waiting)), { principal: "alice" }))
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      // the replay after the decision repeats none of them; the last one is stored before the run completes
      assert.deepStrictEqual(saves, ["2 waiting", "2", "3", "4"])
      assert.strictEqual(done.messages.length, 4)
      assert.deepStrictEqual(ran, ["delete /tmp/a"])
    }))

  it.scopedLive("edit and reject decisions reach the transcript", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran, [
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/a" }, id: "call_1" }]),
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/b" }, id: "call_2" }]),
        ScriptedModel.text("ok")
      ])))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "delete /a then /b" }))
      const first = yield* run(Runs.await(runId, { untilWaiting: true }))
      const [toEdit] = approvalOf(first).actionRequests
      yield* run(Runs.resume(runId, [HumanInTheLoop.edit(toEdit!, { path: "/safe" })], { principal: "alice" }))
      // right after a decision the run no longer waits for it
      const after = yield* run(Runs.status(runId))
      assert.notStrictEqual(Option.getOrUndefined(after.pending)?.key, Option.getOrThrow(first.pending).key)
      const second = yield* run(Runs.await(runId, { untilWaiting: true }))
      assert.match(Option.getOrThrow(second.pending).key, /^approval\/call_2@3\/2\//)
      yield* run(
        Runs.resume(runId, [HumanInTheLoop.reject(approvalOf(second).actionRequests[0]!, "not /b")], {
          principal: "alice"
        })
      )
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      assert.deepStrictEqual(ran, ["delete /safe"])
      const text = JSON.stringify(AgentState.encodeMessages(done.messages))
      assert.include(text, "not /b")
      assert.include(text, "/safe")
    }))

  it.scopedLive("a workflow typed by its agent gives InvalidDecision's error typed: matched by _tag, no cast", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran), Approvals))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Approvals.start({ threadId: "t", input: "delete /tmp/a" }))
      const approval = HumanInTheLoop.approveAll(approvalOf(yield* run(Approvals.await(runId, { untilWaiting: true }))))
      const refused = yield* run(
        Effect.flip(Approvals.resume(runId, [{ ...approval[0]!, callId: "call_9" }], { principal: "alice" }))
      )
      const reason = refused._tag === "InvalidDecision" && refused.error._tag === "DecisionError"
        ? refused.error.reason
        : undefined
      assert.strictEqual(reason, "UnknownCall")
      const malformed = yield* run(Effect.flip(Approvals.resume(runId, "yes" as never, { principal: "alice" })))
      const schema = malformed._tag === "InvalidDecision" && malformed.error._tag === "InvalidResume"
        ? malformed.error.middleware
        : undefined
      assert.strictEqual(schema, "humanInTheLoop")
      const notJson = yield* run(
        Effect.flip(
          Approvals.resume(runId, [{ ...approval[0]!, type: "edit", args: { path: 1n } }], { principal: "alice" })
        )
      )
      // (core refuses a decision whose encoded form is not JSON before the workflow encodes it)
      assert.include(
        notJson._tag === "InvalidDecision" && notJson.error._tag === "InvalidResume" ? notJson.error.reason : "",
        "does not encode as JSON"
      )
      assert.deepStrictEqual(ran, [])
    }))

  it("InvalidDecision decodes as encoded: the agent's own errors come back as their classes", () => {
    const codec = Schema.parseJson(AgentWorkflow.InvalidDecision)
    const error = new AgentError.InvalidResume({ threadId: "t", middleware: "confirm", reason: "Expected boolean" })
    const back = Schema.decodeUnknownSync(codec)(
      Schema.encodeSync(codec)(new AgentWorkflow.InvalidDecision({ runId: "run-1", error, reason: error.message }))
    )
    assert.instanceOf(back.error, AgentError.InvalidResume)
    assert.deepStrictEqual(back.error, error)
  })

  it.scopedLive("bad input: unknown run, a decision for a call not waiting, a second decision, no permission", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran)))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)

      const unknown = yield* run(Effect.flip(Runs.status("nope")))
      assert.strictEqual(unknown._tag, "RunNotFound")
      const unknownResume = yield* run(Effect.flip(Runs.resume("nope", [], { principal: "alice" })))
      assert.strictEqual(unknownResume._tag, "RunNotFound")

      const runId = yield* run(Runs.start({ threadId: "t", input: "delete /tmp/a" }))
      const approval = HumanInTheLoop.approveAll(approvalOf(yield* run(Runs.await(runId, { untilWaiting: true }))))
      const wrongCall = yield* run(
        Effect.flip(Runs.resume(runId, [{ ...approval[0]!, callId: "call_9" }], { principal: "alice" }))
      )
      assert.strictEqual(wrongCall._tag, "InvalidDecision")
      // the middleware's error comes back as itself, to match with its own classes
      assert.strictEqual(decisionErrorOf(wrongCall), "UnknownCall")
      const notJson = yield* run(
        // (a field the decision schema does not know is dropped when it encodes the decision: only what it keeps is posted)
        Effect.flip(Runs.resume(runId, [{ ...approval[0]!, type: "edit", args: { path: 1n } }], { principal: "alice" }))
      )
      assert.strictEqual(notJson._tag, "InvalidDecision")
      const refused = yield* run(Effect.flip(Runs.resume(runId, approval, { principal: "mallory" })))
      assert.strictEqual(refused._tag, "Unauthorized")
      assert.strictEqual((yield* run(Runs.status(runId))).state, "Waiting")
      assert.deepStrictEqual(ran, [])

      yield* run(Runs.resume(runId, approval, { principal: "alice" }))
      const twice = yield* run(Effect.flip(Runs.resume(runId, approval, { principal: "alice" })))
      assert.include(["AlreadyDecided", "NotWaiting"], twice._tag)
      yield* run(Runs.await(runId))
      const after = yield* run(Effect.flip(Runs.resume(runId, approval, { principal: "alice" })))
      assert.strictEqual(after._tag, "NotWaiting")
      assert.deepStrictEqual(ran, ["delete /tmp/a"])
      // a run id names one run of one thread
      const taken = yield* run(Effect.flip(Runs.start({ threadId: "another", input: "hi", runId })))
      assert.strictEqual(taken._tag, "RunIdTaken")
    }))

  it.scopedLive("a decision claimed by a process that died before delivering it reaches the run on the next status", () =>
    Effect.gen(function*() {
      const { key, ran, request, run, runId } = yield* claimedButNotDelivered((request) =>
        JSON.stringify({ value: HumanInTheLoop.approveAll(request), by: "alice", decidedAt: 1 })
      )
      // a second decision is refused (the first claim stands) and completes the wait with the claimed one
      const late = yield* run(
        Effect.flip(Runs.resume(runId, [HumanInTheLoop.reject(request.actionRequests[0]!)], { principal: "bob" }))
      )
      assert.strictEqual(late._tag, "AlreadyDecided")
      // that resume delivered the stored decision itself, before anybody asked for the status
      const delivered = yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.decisionOf(runId, key)))
      assert.isTrue(Option.getOrThrow(delivered).delivered)
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      assert.deepStrictEqual(ran, ["delete /tmp/a"])
    }))

  it.scopedLive("a stored decision that does not decode fails status, await and resume with DecisionCorrupt until discardDecision clears it", () =>
    Effect.gen(function*() {
      const { key, ran, request, run, runId } = yield* claimedButNotDelivered(() => "{not json")
      const corrupt = [
        yield* run(Effect.flip(Runs.status(runId))),
        yield* run(Effect.flip(Runs.await(runId))),
        yield* run(Effect.flip(Runs.resume(runId, HumanInTheLoop.approveAll(request), { principal: "alice" })))
      ]
      assert.deepStrictEqual(corrupt.map((error) => error._tag), [
        "DecisionCorrupt",
        "DecisionCorrupt",
        "DecisionCorrupt"
      ])
      assert.strictEqual((corrupt[0] as AgentWorkflow.DecisionCorrupt).key, key)
      assert.deepStrictEqual(ran, [])
      // the bad claim is removed; the run waits again and takes a new decision
      assert.isTrue(yield* run(Runs.discardDecision(runId)))
      assert.isTrue(
        Option.isNone(yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.decisionOf(runId, key))))
      )
      const waiting = yield* run(Runs.status(runId))
      assert.strictEqual(waiting.state, "Waiting")
      assert.isFalse(yield* run(Runs.discardDecision(runId)))
      yield* run(Runs.resume(runId, HumanInTheLoop.approveAll(approvalOf(waiting)), { principal: "alice" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      assert.deepStrictEqual(ran, ["delete /tmp/a"])
    }))

  it.scopedLive("a stored decision missing its fields is DecisionCorrupt too; a run holding one can still be cancelled and pruned", () =>
    Effect.gen(function*() {
      const { ran, run, runId } = yield* claimedButNotDelivered(() => JSON.stringify({ value: [] }))
      assert.strictEqual((yield* run(Effect.flip(Runs.status(runId))))._tag, "DecisionCorrupt")
      assert.strictEqual((yield* run(Effect.flip(Runs.prune(runId))))._tag, "RunNotEnded")
      yield* run(Runs.cancel(runId))
      yield* run(Runs.prune(runId))
      assert.strictEqual((yield* run(Effect.flip(Runs.status(runId))))._tag, "RunNotFound")
      assert.deepStrictEqual(ran, [])
    }))

  it.scopedLive("status alone delivers a claimed, undelivered decision", () =>
    Effect.gen(function*() {
      const { ran, run, runId } = yield* claimedButNotDelivered((request) =>
        JSON.stringify({
          value: [HumanInTheLoop.reject(request.actionRequests[0]!, "alice says no")],
          by: "alice",
          decidedAt: 1
        })
      )
      assert.strictEqual((yield* run(Runs.status(runId))).state, "Running")
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      assert.deepStrictEqual(ran, [])
      assert.include(transcript(done.messages), "alice says no")
    }))

  it.scopedLive("cancel ends a waiting run as Cancelled; its call is answered as not run and the thread runs again", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran, [
        ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/tmp/a" }, id: "call_1" }]),
        ScriptedModel.text("fine, nothing deleted")
      ])))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "delete /tmp/a" }))
      const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
      yield* run(Runs.cancel(runId))
      const cancelled = yield* run(Runs.await(runId))
      assert.strictEqual(cancelled.state, "Cancelled")
      assert.deepStrictEqual(ran, [])
      // the stored messages are kept, and the waiting call got a result
      assert.deepStrictEqual(cancelled.messages.slice(0, waiting.messages.length), waiting.messages)
      assert.include(JSON.stringify(AgentState.encodeMessages(cancelled.messages.slice(-1))), "the run was cancelled")
      const next = yield* run(Runs.start({ threadId: "t", input: "never mind" }))
      assert.strictEqual((yield* run(Runs.await(next))).state, "Completed")
    }))

  it.scopedLive("a run started without an id is named by the context's IdGenerator when there is one", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran)))
      const runId = yield* Runs.start({ threadId: "t", input: "delete /tmp/a" }).pipe(
        Effect.provide(context),
        Effect.provideService(IdGenerator.IdGenerator, { generateId: () => Effect.succeed("run-from-ids") })
      )
      assert.strictEqual(runId, "run-from-ids")
      assert.strictEqual((yield* Effect.provide(Runs.status(runId), context)).threadId, "t")
    }))

  it.scopedLive("watch gives a run's live events and ends when the run waits; on a settled run it ends at once", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran)))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "delete /tmp/a", runId: "watched" }))
      // ends once the run waits (what it saw depends on when it subscribed: only this thread's events)
      const first = yield* run(Stream.runCollect(Runs.watch(runId)))
      assert.isTrue(Chunk.every(first, (event) => event.threadId === "t"))
      const waiting = yield* run(Runs.status(runId))
      assert.strictEqual(waiting.state, "Waiting")
      yield* run(Runs.resume(runId, HumanInTheLoop.approveAll(approvalOf(waiting)), { principal: "alice" }))
      yield* run(Runs.await(runId))
      // settled: the stream ends by itself
      const after = yield* run(Stream.runCollect(Runs.watch(runId)))
      assert.isTrue(Chunk.isEmpty(after))
    }))

  it.scopedLive("a watched durable run reports what middleware decide inside its model and tool calls, by hook", () =>
    Effect.gen(function*() {
      const audit = Middleware.make({
        name: "audit",
        wrapModelCall: (request, next) => Effect.zipRight(Middleware.report(`model ${request.step}`), next(request)),
        wrapToolCall: (request, next) => Effect.zipRight(Middleware.report(`tool ${request.call.id}`), next(request))
      })
      const ran: Array<string> = []
      const agent = Agent.layer({ toolkit: Tools, middleware: [audit] }).pipe(
        Layer.provide(Layer.merge(
          ScriptedModel.layer([
            ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }]),
            ScriptedModel.text("3")
          ]),
          toolsLive(ran)
        ))
      )
      const context = yield* Layer.build(durable(agent))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const events = yield* run(Effect.flatMap(Agent.Agent, (loop) => loop.watch))
      const pull = yield* Stream.toPull(events)
      const runId = yield* run(Runs.start({ threadId: "t", input: "add 1 and 2" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      const seen: Array<string> = []
      while (!seen.includes("RunEnded")) {
        for (const { event } of yield* pull) {
          seen.push(event._tag)
          if (event._tag === "MiddlewareDecision") seen.push(`${event.middleware}/${event.hook}: ${event.decision}`)
          if (event._tag === "HookCompleted" && event.middleware === "audit") seen.push(`done ${event.hook}`)
        }
      }
      assert.deepStrictEqual(seen.filter((line) => line.startsWith("audit/") || line.startsWith("done ")), [
        "audit/wrapModelCall: model 0",
        "done wrapModelCall",
        "audit/wrapToolCall: tool c1",
        "done wrapToolCall",
        "audit/wrapModelCall: model 1",
        "done wrapModelCall"
      ])
    }))

  it.scopedLive("cancel runs the undo steps of the calls that ran, latest first", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const undone: Array<string> = []
      const Undoing = AgentWorkflow.make({
        name: "undoing-agent",
        version: 1,
        undo: {
          add: (call, result) => Effect.sync(() => void undone.push(`${call.id}=${String(result.result)}`))
        }
      })
      // two ungated add calls run, then a gated delete waits
      const context = yield* Layer.build(durable(
        approvalAgent(ran, [
          ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "call_a" }]),
          ScriptedModel.toolCalls([{ name: "add", params: { a: 3, b: 4 }, id: "call_b" }]),
          ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/a" }, id: "call_1" }]),
          ScriptedModel.text("never")
        ]),
        Undoing
      ))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Undoing.start({ threadId: "t", input: "add, add, delete" }))
      yield* run(Undoing.await(runId, { untilWaiting: true }))
      assert.deepStrictEqual(ran, ["add 1 2", "add 3 4"])
      assert.deepStrictEqual(undone, [])
      yield* run(Undoing.cancel(runId))
      assert.strictEqual((yield* run(Undoing.await(runId))).state, "Cancelled")
      assert.deepStrictEqual(undone, ["call_b=7", "call_a=3"])
    }))

  it.scopedLive("cancel stops a working run at its next call: no later model call, Cancelled, undo steps run", () =>
    Effect.gen(function*() {
      const undone: Array<string> = []
      const Stoppable = AgentWorkflow.make({
        name: "stoppable-agent",
        version: 1,
        undo: { add: (call) => Effect.sync(() => void undone.push(call.id)) }
      })
      const inTool = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const ran: Array<string> = []
      // the first add call blocks until released: the run is working, not waiting, when cancelled
      const SlowTools = Tools.toLayer({
        add: ({ a, b }) =>
          Effect.zipRight(
            Effect.zipRight(Deferred.succeed(inTool, void 0), Deferred.await(release)),
            Effect.sync(() => (ran.push(`add ${a} ${b}`), a + b))
          ),
        delete_file: ({ path }) => Effect.succeed(`deleted ${path}`)
      })
      const script = [
        ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "call_a" }]),
        ScriptedModel.toolCalls([{ name: "add", params: { a: 3, b: 4 }, id: "call_b" }]),
        ScriptedModel.text("never")
      ]
      const model = yield* ScriptedModel.make(script)
      const agent = Agent.layer({ toolkit: Tools }).pipe(
        Layer.provide(SlowTools),
        Layer.provide(Layer.succeed(LanguageModel.LanguageModel, model.model))
      )
      const context = yield* Layer.build(durable(agent, Stoppable))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Stoppable.start({ threadId: "t", input: "add twice" }))
      yield* Deferred.await(inTool)
      const cancelled = yield* Effect.fork(run(Stoppable.cancel(runId)))
      // the call in flight finishes (its result is journaled); the run stops before the next model call
      yield* Effect.sleep("50 millis")
      yield* Deferred.succeed(release, void 0)
      yield* Fiber.join(cancelled)
      const status = yield* run(Stoppable.status(runId))
      assert.strictEqual(status.state, "Cancelled")
      assert.strictEqual((yield* model.recorder.requests).length, 1)
      assert.deepStrictEqual(ran, ["add 1 2"])
      assert.deepStrictEqual(undone, ["call_a"])
    }))

  it.scopedLive("a decision timeout answers the wait by itself", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const Timed = AgentWorkflow.make({
        name: "timed-agent",
        version: 1,
        decisionTimeout: { after: "200 millis", decide: HumanInTheLoop.rejectAll("nobody answered") }
      })
      const context = yield* Layer.build(durable(approvalAgent(ran), Timed))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Timed.start({ threadId: "t", input: "delete /tmp/a" }))
      const done = yield* run(Timed.await(runId))
      assert.strictEqual(done.state, "Completed")
      assert.deepStrictEqual(ran, [])
      assert.include(JSON.stringify(AgentState.encodeMessages(done.messages)), "nobody answered")
    }))
  // A provider numbering the calls of each reply from call_0: every wait asks about a "call_0".
  const reusedIds = [
    ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/a" }, id: "call_0" }]),
    ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/b" }, id: "call_0" }]),
    ScriptedModel.text("done")
  ]

  it.scopedLive("a decision re-sent to a later wait reusing its call id is refused durably: the later call does not run", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran, reusedIds)))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "delete /a, then /b" }))
      const first = HumanInTheLoop.approveAll(approvalOf(yield* run(Runs.await(runId, { untilWaiting: true }))))
      yield* run(Runs.resume(runId, first, { principal: "alice" }))
      const second = yield* run(Runs.await(runId, { untilWaiting: true }))
      assert.deepStrictEqual(ran, ["delete /a"])
      assert.strictEqual(approvalOf(second).actionRequests[0]!.callId, "call_0")

      // the approval of /a, sent again (a retried request, a stale page)
      const stale = yield* run(Effect.flip(Runs.resume(runId, first, { principal: "alice" })))
      assert.strictEqual(stale._tag, "InvalidDecision")
      assert.strictEqual(decisionErrorOf(stale), "Stale")
      // bound to this wait, but for other arguments
      const [action] = approvalOf(second).actionRequests
      const otherCall = [{
        ...HumanInTheLoop.approve(action!),
        fingerprint: HumanInTheLoop.fingerprintOf("delete_file", { path: "/a" })
      }]
      const mismatch = yield* run(Effect.flip(Runs.resume(runId, otherCall, { principal: "alice" })))
      assert.strictEqual(decisionErrorOf(mismatch), "Stale")
      const still = yield* run(Runs.status(runId))
      assert.strictEqual(still.state, "Waiting")
      assert.strictEqual(Option.getOrThrow(still.pending).key, Option.getOrThrow(second.pending).key)
      assert.deepStrictEqual(ran, ["delete /a"])

      yield* run(Runs.resume(runId, [HumanInTheLoop.reject(action!, "keep /b")], { principal: "alice" }))
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      assert.deepStrictEqual(ran, ["delete /a"])
      assert.include(transcript(done.messages), "keep /b")
    }))

  it.scopedLive("a durable run's wait cannot be answered or given up in process: DurableThreadError, nothing changes", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran)))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "delete /tmp/a" }))
      const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
      const decisions = HumanInTheLoop.approveAll(approvalOf(waiting))
      const loop = yield* run(Agent.Agent)
      const before = Option.getOrThrow(yield* loop.thread("t"))

      const refused = [
        yield* Effect.flip(loop.resume("t", decisions)),
        yield* Effect.flip(Stream.runDrain(loop.resumeStream("t", decisions))),
        yield* Effect.flip(loop.discardPending("t", "given up in process"))
      ]
      assert.deepStrictEqual(refused.map((error) => error._tag), [
        "DurableThreadError",
        "DurableThreadError",
        "DurableThreadError"
      ])
      const after = Option.getOrThrow(yield* loop.thread("t"))
      assert.strictEqual(transcript(after.state.messages), transcript(before.state.messages))
      assert.deepStrictEqual(after.pending, before.pending)
      assert.deepStrictEqual(ran, [])
      assert.strictEqual((yield* run(Runs.status(runId))).state, "Waiting")

      // the durable path still answers it
      yield* run(Runs.resume(runId, decisions, { principal: "alice" }))
      assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      assert.deepStrictEqual(ran, ["delete /tmp/a"])
    }))

  it.scopedLive("a journal that only says it is durable cannot give a durable wait up: only its owner's capability can", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const context = yield* Layer.build(durable(approvalAgent(ran)))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "delete /tmp/a" }))
      yield* run(Runs.await(runId, { untilWaiting: true }))
      const loop = yield* run(Agent.Agent)

      // a journal dressed as durable is no permission
      const posing = RunJournal.RunJournal.of({ ...RunJournal.inProcess, durable: true })
      const refused = yield* Effect.flip(
        loop.discardPending("t", "given up by a journal posing as durable").pipe(
          Effect.provideService(RunJournal.RunJournal, posing)
        )
      )
      assert.strictEqual(refused._tag, "DurableThreadError")
      assert.isTrue(Option.isSome(Option.getOrThrow(yield* loop.thread("t")).pending))
      assert.strictEqual((yield* run(Runs.status(runId))).state, "Waiting")

      // the owner's capability gives it up: what cancel holds once the run has ended
      yield* run(Runs.cancel(runId))
      assert.strictEqual((yield* run(Runs.status(runId))).state, "Cancelled")
      assert.isTrue(Option.isNone(Option.getOrThrow(yield* loop.thread("t")).pending))
      assert.deepStrictEqual(ran, [])
    }))

  it.scopedLive("a wait whose key is \"cancel\", answered durably, does not cancel the run", () =>
    Effect.gen(function*() {
      // asks once before the first model call, under the key the cancel request once used
      const asking = Middleware.make({
        name: "asking",
        wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.String },
        beforeModel: (context) =>
          Effect.succeed(
            context.step === 0 && Option.isNone(context.resume)
              ? { interrupt: { question: "go on?" }, interruptKey: "cancel" }
              : undefined
          )
      })
      const ran: Array<string> = []
      const agent = Agent.layer({ toolkit: Tools, middleware: [asking] }).pipe(
        Layer.provide(Layer.merge(
          ScriptedModel.layer([
            ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "cancel" }]),
            ScriptedModel.text("3")
          ]),
          toolsLive(ran)
        ))
      )
      const context = yield* Layer.build(durable(agent))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Runs.start({ threadId: "t", input: "add 1 and 2" }))
      const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
      assert.strictEqual(Option.getOrThrow(waiting.pending).key, "cancel")
      yield* run(Runs.resume(runId, "yes", { principal: "alice" }))
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      assert.deepStrictEqual(Option.map(done.outcome, (outcome) => outcome.text), Option.some("3"))
      assert.deepStrictEqual(ran, ["add 1 2"])
    }))
})

describe("a compensatable tool in a durable run", () => {
  /** `book`, declared compensatable: its undo logs what it undoes; the calls log too. */
  const booking = (log: Array<string>) => {
    const Book = Tool.make("book", { parameters: { night: Schema.String }, success: Schema.String }).pipe(
      ToolEffect.declare(ToolEffect.compensatable({
        undo: (params, entry) =>
          Effect.sync(() => void log.push(`undo ${(params as { night: string }).night} ${entry.idempotencyKey}`))
      }))
    )
    const kit = Toolkit.make(Book)
    const script: ReadonlyArray<ScriptedModel.Turn> = [
      ScriptedModel.toolCalls([{ name: "book", params: { night: "mon" }, id: "call_1" }]),
      ScriptedModel.toolCalls([{ name: "book", params: { night: "tue" }, id: "call_2" }]),
      new AiError.UnknownError({ module: "Test", method: "generateText", description: "the model is down" })
    ]
    return Agent.layer({ toolkit: kit }).pipe(
      Layer.provide(Layer.merge(
        ScriptedModel.layer(script),
        kit.toLayer({ book: ({ night }) => Effect.sync(() => (log.push(`book ${night}`), `booked ${night}`)) })
      ))
    )
  }

  it.scopedLive("its own undo is the run's compensation: a run that fails undoes its calls, latest first, with no undo option", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const Booking = AgentWorkflow.make({ name: "booking-agent", version: 1 })
      const context = yield* Layer.build(durable(booking(log), Booking))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Booking.start({ threadId: "t", input: "book two nights" }))
      assert.strictEqual((yield* run(Booking.await(runId))).state, "Failed")
      assert.deepStrictEqual(log, ["book mon", "book tue", "undo tue t/call_2", "undo mon t/call_1"])
    }))

  it.scopedLive("the workflow's undo option for the tool takes the place of the tool's own", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const Booking = AgentWorkflow.make({
        name: "booking-agent-undo",
        version: 1,
        undo: { book: (call) => Effect.sync(() => void log.push(`option undo ${call.id}`)) }
      })
      const context = yield* Layer.build(durable(booking(log), Booking))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const runId = yield* run(Booking.start({ threadId: "t", input: "book two nights" }))
      assert.strictEqual((yield* run(Booking.await(runId))).state, "Failed")
      assert.deepStrictEqual(log, ["book mon", "book tue", "option undo call_2", "option undo call_1"])
    }))
})
