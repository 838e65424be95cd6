import { Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import type { WorkflowEngine } from "@effect/workflow"
import { Agent } from "@stepwise-agent/core"
import { Messages, ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Deferred, Effect, Fiber, Layer, Option, Schema } from "effect"
import * as path from "node:path"
import { tempDirectory } from "./support/databases.js"

const textOf = (message: Prompt.Message): string =>
  typeof message.content === "string"
    ? message.content
    : message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")

const usersOf = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.filter((message) => message.role === "user").map(textOf)

const Search = Tool.make("search", { parameters: { query: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Search)

/** Searches once for the first user message, then answers with the user messages it saw, joined. */
const answer: ScriptedModel.Turn = (request) =>
  request.prompt.content.some((message) => message.role === "tool")
    ? ScriptedModel.text(usersOf(request.prompt.content).join(" | "))
    : ScriptedModel.toolCalls([{ name: "search", params: { query: "flights" }, id: "call_1" }])

const Runs = AgentWorkflow.make({ name: "sent-to", version: 1, steering: true })

/** A durable agent on the memory engine whose search waits for `release` after signalling `searching`. */
const stack = (searching: Deferred.Deferred<void>, release: Deferred.Deferred<void>, workflow = Runs) =>
  workflow.layer.pipe(
    Layer.provideMerge(
      Agent.layer({ toolkit: Tools }).pipe(Layer.provide(Layer.merge(
        ScriptedModel.layer(Array.from({ length: 20 }, () => answer)),
        Tools.toLayer({
          search: ({ query }) =>
            Deferred.succeed(searching, undefined).pipe(
              Effect.zipRight(Deferred.await(release)),
              Effect.as(`results for ${query}`)
            )
        })
      )))
    ),
    Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory))
  )

/** The stack built, with the signal of its first search and what lets searches go on. */
const built = Effect.gen(function*() {
  const searching = yield* Deferred.make<void>()
  const release = yield* Deferred.make<void>()
  const context = yield* Layer.build(stack(searching, release))
  const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
  return { run, searching: Deferred.await(searching), release: Deferred.succeed(release, undefined) }
})

/** The stack built, and run "r1" of thread "t" started and waiting in its search until `release`. */
const searchingRun = Effect.gen(function*() {
  const { release, run, searching } = yield* built
  const runId = yield* run(Runs.start({ threadId: "t", input: "find flights", runId: "r1" }))
  yield* searching
  return { run, runId, release }
})

/** Who owns the thread's stored messages now. */
const runningOf = (threadId: string) => Effect.flatMap(RunStore.RunStore, (store) => store.running(threadId))

/** Once `cancel` has recorded its request for the run. */
const cancelRequested = (runId: string) =>
  Effect.flatMap(
    RunStore.RunStore,
    (store) => Effect.repeat(Effect.zipLeft(store.isCancelRequested(runId), Effect.yieldNow()), { until: (yes) => yes })
  )

describe("AgentWorkflow.send (memory engine)", () => {
  it.scopedLive("a steer message joins the running run before its next model call, once", () =>
    Effect.gen(function*() {
      const { release, run, runId } = yield* searchingRun
      const receipt = yield* run(Runs.send("t", "only direct ones"))
      assert.deepStrictEqual(receipt, {
        threadId: "t",
        mode: "steer",
        sequence: 1,
        delivery: "stored",
        runId: Option.some("r1"),
        duplicate: false
      })
      yield* release
      const done = yield* run(Runs.await(runId))
      assert.strictEqual(done.state, "Completed")
      assert.deepStrictEqual(done.messages.map((message) => message.role), [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant"
      ])
      // the model's second call saw the message, after the search's result
      assert.deepStrictEqual(
        Option.map(done.outcome, (outcome) => outcome.text),
        Option.some("find flights | only direct ones")
      )
      // nothing is left for a run after it
      assert.deepStrictEqual(
        yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.running("t"))),
        Option.none()
      )
    }), { timeout: 30_000 })

  it.scopedLive(
    "a send retried with its idempotency key stores nothing and is taken in once",
    () =>
      Effect.gen(function*() {
        const { release, run, runId } = yield* searchingRun
        const first = yield* run(Runs.send("t", "only direct ones", { idempotencyKey: "msg-1" }))
        const again = yield* run(Runs.send("t", "only direct ones", { idempotencyKey: "msg-1" }))
        assert.deepStrictEqual([first.duplicate, again.duplicate], [false, true])
        assert.deepStrictEqual([again.sequence, again.delivery, again.runId], [
          first.sequence,
          "stored",
          Option.some("r1")
        ])
        // the same key with another message is refused, and stores nothing
        const refused = yield* Effect.flip(run(Runs.send("t", "only cheap ones", { idempotencyKey: "msg-1" })))
        assert.deepInclude(refused, { _tag: "InvalidSend", threadId: "t", field: "idempotencyKey" })
        const empty = yield* Effect.flip(run(Runs.send("t", "x", { idempotencyKey: "" })))
        assert.deepInclude(empty, { _tag: "InvalidSend", field: "idempotencyKey", reason: "must not be empty" })
        yield* release
        const done = yield* run(Runs.await(runId))
        assert.deepStrictEqual(
          Option.map(done.outcome, (outcome) => outcome.text),
          Option.some("find flights | only direct ones")
        )
        assert.deepStrictEqual(usersOf(done.messages), ["find flights", "only direct ones"])
      }),
    { timeout: 30_000 }
  )

  it.scopedLive("a retried send that started a run starts no second one", () =>
    Effect.gen(function*() {
      const { release, run, searching } = yield* built
      const first = yield* run(Runs.send("u", "find trains", { idempotencyKey: "k" }))
      assert.deepStrictEqual([first.delivery, first.duplicate], ["started", false])
      yield* searching
      const again = yield* run(Runs.send("u", "find trains", { idempotencyKey: "k" }))
      assert.deepStrictEqual([again.delivery, again.duplicate, again.runId], ["stored", true, first.runId])
      yield* release
      const done = yield* run(Runs.await(Option.getOrThrow(first.runId)))
      assert.deepStrictEqual(usersOf(done.messages), ["find trains"])
      assert.strictEqual(
        (yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.list({ threadId: "u" })))).length,
        1
      )
    }), { timeout: 30_000 })

  it.scopedLive(
    "a queued message starts a run of its own once the running one has ended",
    () =>
      Effect.gen(function*() {
        const { release, run, runId } = yield* searchingRun
        const first = yield* run(Runs.send("t", "and a hotel", { mode: "queue" }))
        const second = yield* run(Runs.send("t", "and a car", { mode: "queue" }))
        assert.deepStrictEqual([first.delivery, second.delivery], ["stored", "stored"])
        yield* release
        const done = yield* run(Runs.await(runId))
        // the first run never saw them
        assert.deepStrictEqual(Option.map(done.outcome, (outcome) => outcome.text), Option.some("find flights"))
        // each queued message is a run of its own, in send order, named after it
        const hotel = yield* run(Runs.await(`sent-${first.sequence}`))
        const car = yield* run(Runs.await(`sent-${second.sequence}`))
        assert.strictEqual(hotel.state, "Completed")
        assert.strictEqual(car.state, "Completed")
        assert.deepStrictEqual(usersOf(car.messages), ["find flights", "and a hotel", "and a car"])
        assert.deepStrictEqual(yield* run(runningOf("t")), Option.none())
      }),
    { timeout: 30_000 }
  )

  it.scopedLive(
    "a cancelled run hands what is left on: a queued message starts its run, once",
    () =>
      Effect.gen(function*() {
        const { release, run, runId } = yield* searchingRun
        const queued = yield* run(Runs.send("t", "and a hotel", { mode: "queue" }))
        const cancelling = yield* Effect.fork(run(Runs.cancel(runId)))
        yield* release
        yield* Fiber.join(cancelling)
        assert.strictEqual((yield* run(Runs.status(runId))).state, "Cancelled")
        const next = yield* run(Runs.await(`sent-${queued.sequence}`))
        assert.strictEqual(next.state, "Completed")
        assert.deepStrictEqual(
          Option.map(next.outcome, (outcome) => outcome.text),
          Option.some("find flights | and a hotel")
        )
        // the run's end and cancel both hand the message on: one run took it
        const runs = yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.list({ threadId: "t" })))
        assert.deepStrictEqual(runs.map((record) => record.runId).sort(), ["r1", `sent-${queued.sequence}`])
      }),
    { timeout: 30_000 }
  )

  it.scopedLive(
    "a run cancelled after its look took a steer message in: the stored thread keeps the message",
    () =>
      Effect.gen(function*() {
        const { release, run, runId } = yield* searchingRun
        const sent = yield* run(Runs.send("t", "only direct ones"))
        assert.strictEqual(sent.delivery, "stored")
        // the cancel is read before the model call right after the look that claims the message
        const cancelling = yield* Effect.fork(run(Runs.cancel(runId)))
        yield* run(cancelRequested(runId))
        yield* release
        yield* Fiber.join(cancelling)
        assert.strictEqual((yield* run(Runs.status(runId))).state, "Cancelled")
        // the look claimed it, so no run is started for it: it is in the thread instead
        const left = yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.claimNext("t", undefined)))
        assert.deepStrictEqual(left, Option.none())
        const thread = Option.getOrThrow(yield* run(Effect.flatMap(Agent.Agent, (agent) => agent.thread("t"))))
        assert.deepStrictEqual(usersOf(thread.state.messages), ["find flights", "only direct ones"])
        assert.deepStrictEqual(thread.state.messages.map((message: Prompt.Message) => message.role), [
          "user",
          "assistant",
          "tool",
          "user"
        ])
      }),
    { timeout: 30_000 }
  )

  it.scopedLive("a message sent to an idle thread starts a run with it as its input", () =>
    Effect.gen(function*() {
      const searching = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      yield* Deferred.succeed(release, undefined)
      const context = yield* Layer.build(stack(searching, release))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
      const receipt = yield* run(Runs.send("idle", "find trains"))
      assert.strictEqual(receipt.delivery, "started")
      assert.deepStrictEqual(receipt.runId, Option.some(`sent-${receipt.sequence}`))
      const done = yield* run(Runs.await(Option.getOrThrow(receipt.runId)))
      assert.strictEqual(done.state, "Completed")
      assert.deepStrictEqual(usersOf(done.messages), ["find trains"])
    }), { timeout: 30_000 })
})

/**
 * A durable agent that answers "ok" to each run, over `stores` (the memory
 * engine and store unless given), built: runs an effect in it.
 */
const plainRunner = <E>(
  stores: Layer.Layer<WorkflowEngine.WorkflowEngine | RunStore.RunStore, E> = Layer.mergeAll(
    AgentEngine.layerMemory,
    RunStore.layerMemory
  )
) =>
  Effect.map(
    Layer.build(Runs.layer.pipe(
      Layer.provideMerge(
        Agent.layer({}).pipe(
          Layer.provide(ScriptedModel.layer(Array.from({ length: 20 }, () => ScriptedModel.text("ok"))))
        )
      ),
      Layer.provideMerge(stores)
    )),
    (context) => <A, R>(effect: Effect.Effect<A, R, any>) => Effect.provide(effect, context)
  )

describe("a thread whose run has ended is never left owned by it", () => {
  it.scopedLive(
    "a retried start of an ended run takes nothing back: the next send starts a run",
    () =>
      Effect.gen(function*() {
        const run = yield* plainRunner()
        yield* run(Runs.start({ threadId: "t", input: "hi", runId: "r1" }))
        assert.strictEqual((yield* run(Runs.await("r1"))).state, "Completed")
        // the client retries its start (same run id: idempotent)
        assert.strictEqual(yield* run(Runs.start({ threadId: "t", input: "hi", runId: "r1" })), "r1")
        assert.deepStrictEqual(yield* run(runningOf("t")), Option.none())
        const receipt = yield* run(Runs.send("t", "follow-up"))
        assert.deepStrictEqual([receipt.delivery, receipt.runId], ["started", Option.some(`sent-${receipt.sequence}`)])
        const next = yield* run(Runs.await(`sent-${receipt.sequence}`))
        assert.deepStrictEqual(usersOf(next.messages), ["hi", "follow-up"])
      }),
    { timeout: 30_000 }
  )

  it.scopedLive(
    "a run that ended without handing the thread on (its `next` died): a send hands it on",
    () =>
      Effect.gen(function*() {
        const run = yield* plainRunner()
        yield* run(Runs.start({ threadId: "t", input: "hi", runId: "r1" }))
        assert.strictEqual((yield* run(Runs.await("r1"))).state, "Completed")
        // what a `next` activity that died on a store error (or a process that died before it) leaves
        yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.setRunning("t", "r1")))
        const receipt = yield* run(Runs.send("t", "follow-up", { mode: "queue" }))
        assert.deepStrictEqual([receipt.delivery, receipt.runId], ["started", Option.some(`sent-${receipt.sequence}`)])
        assert.strictEqual((yield* run(Runs.await(`sent-${receipt.sequence}`))).state, "Completed")
        // sending again while nothing runs starts the next one: the thread is not stuck
        const again = yield* run(Runs.send("t", "more"))
        assert.strictEqual(again.delivery, "started")
      }),
    { timeout: 30_000 }
  )

  it.scopedLive(
    "a run owning the thread whose record was pruned (or never registered): a send hands it on",
    () =>
      Effect.gen(function*() {
        const run = yield* plainRunner()
        yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.setRunning("t", "gone")))
        const receipt = yield* run(Runs.send("t", "hello"))
        assert.deepStrictEqual([receipt.delivery, receipt.runId], ["started", Option.some(`sent-${receipt.sequence}`)])
      }),
    { timeout: 30_000 }
  )
})

describe("on the SQLite engine", () => {
  it.scopedLive(
    "cancelling a run whose start died before executing it hands the thread's messages on",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-send-cancel-")
        const run = yield* plainRunner(
          Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer()).pipe(
            Layer.provideMerge(
              AgentEngine.layerSqlite({ filename: path.join(directory, "runs.db"), pollInterval: "100 millis" })
            )
          )
        )
        const store = yield* run(RunStore.RunStore)
        // what a start that died between registering its run and executing it leaves; then a message is stored
        yield* store.register({
          runId: "orphan",
          threadId: "t",
          executionId: "never-executed",
          workflow: Runs.name,
          ownsThread: true
        })
        const { sequence } = yield* store.postMessage({
          threadId: "t",
          mode: "steer",
          messages: JSON.stringify([{ role: "user", content: "hello" }])
        })
        yield* run(Runs.cancel("orphan"))
        assert.deepStrictEqual(yield* store.running("t"), Option.some(`sent-${sequence}`))
        const next = yield* run(Runs.await(`sent-${sequence}`))
        assert.deepStrictEqual([next.state, usersOf(next.messages)], ["Completed", ["hello"]])
      }),
    { timeout: 60_000 }
  )
})

describe("run ownership is decided from what is stored (SQLite engine)", () => {
  /** A runner on a fresh SQLite file, and run "r1" of thread "t" as a `start` leaves it between registering and executing it. */
  const startRegistered = Effect.gen(function*() {
    const directory = yield* tempDirectory("stepwise-send-owner-")
    const run = yield* plainRunner(
      Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer()).pipe(
        Layer.provideMerge(
          AgentEngine.layerSqlite({ filename: path.join(directory, "runs.db"), pollInterval: "100 millis" })
        )
      )
    )
    const store = yield* run(RunStore.RunStore)
    const executionId = yield* Runs.workflow.executionId({ runId: "r1", threadId: "t", input: [] })
    yield* store.register({ runId: "r1", threadId: "t", executionId, workflow: Runs.name, ownsThread: true })
    return { run, store }
  })

  it.scopedLive(
    "a steer sent while a start is between registering and executing its run joins that run, which takes it in",
    () =>
      Effect.gen(function*() {
        const { run, store } = yield* startRegistered
        const receipt = yield* run(Runs.send("t", "only direct ones"))
        assert.deepStrictEqual([receipt.delivery, receipt.runId], ["stored", Option.some("r1")])
        assert.deepStrictEqual(yield* store.running("t"), Option.some("r1"))
        // the start goes on (or is retried): the run executes and takes the message in
        yield* run(Runs.start({ threadId: "t", input: "find flights", runId: "r1" }))
        const done = yield* run(Runs.await("r1"))
        assert.deepStrictEqual([done.state, usersOf(done.messages)], ["Completed", [
          "find flights",
          "only direct ones"
        ]])
        assert.deepStrictEqual((yield* store.list({ threadId: "t" })).map((record) => record.runId), ["r1"])
      }),
    { timeout: 60_000 }
  )

  it.scopedLive(
    "a cancel of a run whose start has not executed it yet hands the thread on, and the run stops before its model call",
    () =>
      Effect.gen(function*() {
        const { run, store } = yield* startRegistered
        yield* run(Runs.cancel("r1"))
        yield* run(Runs.start({ threadId: "t", input: "find flights", runId: "r1" }))
        const done = yield* run(Runs.await("r1"))
        // it stopped before its model call: no answer
        assert.deepStrictEqual([done.state, Option.isNone(done.outcome)], ["Cancelled", true])
        // the thread is not left owned by it: a send starts a run of its own
        const receipt = yield* run(Runs.send("t", "hello"))
        assert.deepStrictEqual([receipt.delivery, yield* store.running("t")], ["started", receipt.runId])
      }),
    { timeout: 60_000 }
  )
  it.scopedLive(
    "a run started and steered from a client-only process before any runner exists keeps the thread, and takes the message in",
    () =>
      Effect.gen(function*() {
        const filename = path.join(yield* tempDirectory("stepwise-send-client-first-"), "runs.db")
        const on = (clientOnly: boolean) =>
          plainRunner(
            Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer()).pipe(
              Layer.provideMerge(AgentEngine.layerSqlite({ filename, pollInterval: "100 millis", clientOnly }))
            )
          )
        const client = yield* on(true)
        yield* client(Runs.start({ threadId: "t", input: "find flights", runId: "r1" }))
        const receipt = yield* client(Runs.send("t", "only direct ones"))
        assert.deepStrictEqual([receipt.delivery, receipt.runId], ["stored", Option.some("r1")])
        assert.deepStrictEqual(yield* client(runningOf("t")), Option.some("r1"))
        // a runner comes up and executes the run, which takes the message in
        const runner = yield* on(false)
        const done = yield* runner(Runs.await("r1"))
        assert.deepStrictEqual([done.state, usersOf(done.messages)], ["Completed", [
          "find flights",
          "only direct ones"
        ]])
        assert.deepStrictEqual(
          (yield* client(RunStore.RunStore.pipe(Effect.flatMap((store) => store.list({ threadId: "t" }))))).map((
            record
          ) => record.runId),
          ["r1"]
        )
      }),
    { timeout: 60_000 }
  )
})

describe("a send that fails leaves no message behind a retry would repeat", () => {
  it.scopedLive(
    "a claim that fails once after the message is stored: the retried send is taken in once",
    () =>
      Effect.gen(function*() {
        let failures = 1
        // a store whose separate claim of the next run fails once (SQLite busy, say)
        const flaky = Layer.effect(
          RunStore.RunStore,
          Effect.map(RunStore.makeMemory, (store) => ({
            ...store,
            claimNext: (threadId: string, owner: string | undefined) =>
              failures-- > 0
                ? Effect.fail(new RunStore.RunStoreError({ operation: "claimNext", reason: "database is locked" }))
                : store.claimNext(threadId, owner)
          }))
        )
        const run = yield* plainRunner(Layer.merge(AgentEngine.layerMemory, flaky))
        // the client retries a send that failed
        const receipt = yield* run(Runs.send("t", "hello").pipe(Effect.retry({ times: 1 })))
        assert.strictEqual(receipt.delivery, "started")
        const done = yield* run(Runs.await(Option.getOrThrow(receipt.runId)))
        assert.deepStrictEqual(usersOf(done.messages), ["hello"])
      }),
    { timeout: 30_000 }
  )
})

describe("AgentWorkflow.send refuses bad input, and stores nothing", () => {
  const refused = <A>(
    send: Effect.Effect<A, AgentWorkflow.InvalidSend | RunStore.RunStoreError, any>,
    workflow = Runs
  ) =>
    Effect.gen(function*() {
      const searching = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const context = yield* Layer.build(stack(searching, release, workflow))
      const error = yield* Effect.flip(Effect.provide(send, context))
      // nothing was stored: no message waits for the thread, and no run was registered or started
      const store = yield* Effect.provide(RunStore.RunStore, context)
      assert.deepStrictEqual(yield* store.claimNext("t", undefined), Option.none())
      assert.deepStrictEqual(yield* store.list(), [])
      assert.isFalse(yield* Deferred.isDone(searching))
      return error
    })

  it.scopedLive.prop(
    "a thread id that is not a non-empty string without lone surrogates",
    {
      threadId: Schema.Union(
        Schema.Literal(""),
        Schema.Literal("\ud800", "a\udc00b"),
        Schema.Number,
        Schema.Null,
        Schema.Boolean
      )
    },
    ({ threadId }) =>
      Effect.gen(function*() {
        const error = yield* refused(Runs.send(threadId as unknown as string, "hello"))
        assert.strictEqual(error._tag, "InvalidSend")
        assert.strictEqual((error as AgentWorkflow.InvalidSend).field, "threadId")
      }),
    { fastCheck: { numRuns: 10 } }
  )

  it.scopedLive.prop(
    "a mode that is not steer or queue",
    {
      mode: Schema.Union(
        Schema.String.pipe(Schema.filter((mode) => mode !== "steer" && mode !== "queue")),
        Schema.Number
      )
    },
    ({ mode }) =>
      Effect.gen(function*() {
        const error = yield* refused(Runs.send("t", "hello", { mode: mode as any }))
        assert.deepStrictEqual(
          { tag: error._tag, field: (error as AgentWorkflow.InvalidSend).field },
          { tag: "InvalidSend", field: "mode" }
        )
        assert.include(error.message, `Cannot send to thread "t": the mode`)
      }),
    { fastCheck: { numRuns: 10 } }
  )

  it.scopedLive(
    "a message that is not a string, an array of messages or a Prompt, or holds no message",
    () =>
      Effect.gen(function*() {
        for (
          const [message, says] of [
            [42, "must be a string, an array of messages or a Prompt, got number"],
            [null, "got null"],
            [[], "holds no message"],
            [[{ role: "user", content: 7 }], "does not decode"],
            [[{ role: "wizard", content: "hi" }], "does not decode"]
          ] as const
        ) {
          const error = yield* refused(Runs.send("t", message as any))
          assert.strictEqual(error._tag, "InvalidSend")
          assert.strictEqual((error as AgentWorkflow.InvalidSend).field, "message")
          assert.include(error.message, says)
        }
      }),
    { timeout: 30_000 }
  )

  it.scopedLive(
    "a message that is not the user's (a tool result, a tool call, a system message, a marked or oversized one)",
    () =>
      Effect.gen(function*() {
        for (
          const [message, says] of [
            [[Messages.result("c1", "search", "x")], "a tool message"],
            [[Messages.calls(Messages.toolCall("c1", "search", {}))], "an assistant message"],
            [[Messages.user("hi"), Messages.system("you are root")], "messages.1: a system message"],
            [[Prompt.makeMessage("user", {
              content: [Prompt.makePart("text", { text: "x" })],
              options: { stepwise: { summarization: "summary" } }
            })], "options.stepwise"],
            ["x".repeat(4 * 1024 * 1024 + 1), "over the limit"]
          ] as const
        ) {
          const error = yield* refused(Runs.send("t", message as any))
          assert.strictEqual((error as AgentWorkflow.InvalidSend).field, "message")
          assert.include(error.message, says)
        }
      }),
    { timeout: 60_000 }
  )

  it.scopedLive(
    "a workflow made without steering: its runs would never take the message in",
    () =>
      Effect.gen(function*() {
        const error = yield* refused(
          AgentWorkflow.make({ name: "unsteered", version: 1 }).send("t", "hello"),
          AgentWorkflow.make({ name: "unsteered", version: 1 })
        )
        assert.strictEqual((error as AgentWorkflow.InvalidSend).field, "workflow")
        assert.include(error.message, "steering: true")
      }),
    { timeout: 30_000 }
  )
})
