import { type Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import { Deferred, Effect, Fiber, Layer, Option, Schema } from "effect"

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

/** The stack built, and run "r1" of thread "t" started and waiting in its search until `release`. */
const searchingRun = Effect.gen(function*() {
  const searching = yield* Deferred.make<void>()
  const release = yield* Deferred.make<void>()
  const context = yield* Layer.build(stack(searching, release))
  const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
  const runId = yield* run(Runs.start({ threadId: "t", input: "find flights", runId: "r1" }))
  yield* Deferred.await(searching)
  return { run, runId, release: Deferred.succeed(release, undefined) }
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
        runId: Option.some("r1")
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
