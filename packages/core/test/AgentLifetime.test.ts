/**
 * An agent lives as long as the scope it was built in and the services it
 * kept: once either is gone, every operation that runs it fails with
 * `AgentClosed` instead of failing deep inside a provider, and `send`
 * delivers nothing instead of answering "started".
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Cause, Chunk, Context, Deferred, Effect, Exit, Fiber, Layer, Option, Schema, Scope, Stream } from "effect"

/** The tag of `effect`'s failure ("" when it succeeds). */
const failureTag = <A, E extends { readonly _tag: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.either(effect), (either) => either._tag === "Left" ? either.left._tag : "")

describe("an agent whose provider layer was given around Agent.make alone", () => {
  it.scoped("fails its first run with AgentClosed naming the cause, and send fails too (not \"started\")", () =>
    Effect.gen(function*() {
      const server = yield* FakeOpenAi.make([FakeOpenAi.text("never sent")])
      // the trap: the layer is built for `make` and released when `make` ends
      const agent = yield* Agent.make({}).pipe(Effect.provide(FakeOpenAi.languageModel(server)))

      const error = yield* Effect.flip(agent.run("hello", { threadId: "t" }))
      assert.strictEqual(error._tag, "AgentClosed")
      assert.include(error.message, "Effect.provide around Agent.make")
      assert.include(error.message, "ClientDestroyedError")

      // closed now: nothing runs, nothing is delivered
      const sent = yield* Effect.flip(agent.send("t2", "hello again"))
      assert.strictEqual(sent._tag, "AgentClosed")
      const streamed = yield* Effect.flip(Stream.runDrain(agent.stream("hi", { threadId: "t3" })))
      assert.strictEqual(streamed._tag, "AgentClosed")
      assert.isTrue(Option.isNone(yield* agent.thread("t2")))
      assert.strictEqual((yield* server.requests).length, 0)
    }))

  it.scoped("the same layer given to the program that uses the agent works", () =>
    Effect.gen(function*() {
      const server = yield* FakeOpenAi.make([FakeOpenAi.text("Hello!")])
      const result = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({})
        return yield* agent.run("hello", { threadId: "t" })
      }).pipe(Effect.provide(FakeOpenAi.languageModel(server)))
      assert.strictEqual(result._tag === "Completed" ? result.text : "", "Hello!")
    }))
})

describe("an agent given its services with the provide option", () => {
  it.scoped("holds the provider layer for its whole life: the first run works where Effect.provide around make fails", () =>
    Effect.gen(function*() {
      const server = yield* FakeOpenAi.make([FakeOpenAi.text("Hello!")])
      // the same placement as the trap above, but the agent builds the layer in its own scope
      const agent = yield* Agent.make({ provide: FakeOpenAi.languageModel(server) })
      const result = yield* agent.run("hello", { threadId: "t" })
      assert.strictEqual(result._tag === "Completed" ? result.text : "", "Hello!")
      assert.strictEqual((yield* server.requests).length, 1)
    }))

  it.effect("releases the layer when the agent closes, not before", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const held = Layer.scopedDiscard(
        Effect.acquireRelease(Effect.sync(() => void events.push("acquired")), () =>
          Effect.sync(() => void events.push("released")))
      )
      const scope = yield* Scope.make()
      const agent = yield* Agent.make({
        provide: Layer.merge(held, ScriptedModel.layer([ScriptedModel.text("one"), ScriptedModel.text("two")]))
      }).pipe(Scope.extend(scope))
      assert.strictEqual((yield* agent.run("a", { threadId: "t" }))._tag, "Completed")
      assert.strictEqual((yield* agent.run("b", { threadId: "t" }))._tag, "Completed")
      assert.deepStrictEqual(events, ["acquired"])
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(events, ["acquired", "released"])
      assert.strictEqual(yield* failureTag(agent.run("c", { threadId: "t" })), "AgentClosed")
    }))

  it.effect("a layer that fails to build fails Agent.make with its error, and nothing is left open", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.scoped(Agent.make({ provide: Layer.fail("no key" as const) })))
      assert.strictEqual(error, "no key")
    }))
})

describe("an agent whose scope closed", () => {
  it.effect("fails run, stream, resume, validateResume and send with AgentClosed; send delivers nothing", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const agent = yield* Agent.make({}).pipe(Scope.extend(scope))
      yield* Scope.close(scope, Exit.void)

      const sent = yield* Effect.flip(agent.send("t", "hello"))
      assert.strictEqual(sent._tag, "AgentClosed")
      assert.include(sent.message, "the scope it was built in")
      assert.strictEqual(yield* failureTag(agent.run("hello", { threadId: "t" })), "AgentClosed")
      assert.strictEqual(yield* failureTag(Stream.runDrain(agent.stream("hello", { threadId: "t" }))), "AgentClosed")
      assert.strictEqual(yield* failureTag(agent.resume("t", "yes" as never)), "AgentClosed")
      assert.strictEqual(yield* failureTag(Stream.runDrain(agent.resumeStream("t", "yes" as never))), "AgentClosed")
      assert.strictEqual(yield* failureTag(agent.validateResume("t", "yes" as never)), "AgentClosed")
      // nothing was delivered or run
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("never")]))))

  it.effect("an agent from a released Agent.layer is closed", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(Agent.layer({}), scope)
      const agent = Context.get(context, Agent.Agent)
      const result = yield* agent.run("hello", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(yield* failureTag(agent.send("t", "again")), "AgentClosed")
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("Hello!")]))))
})

describe("closing an agent's scope releases its threads", () => {
  /** `hold(id)`: says it started, then never answers (a run the test keeps going). */
  const Hold = Tool.make("hold", { parameters: { id: Schema.String }, success: Schema.String })
  const Holding = Toolkit.make(Hold)
  const holding = (started: Deferred.Deferred<void>) =>
    Holding.toLayer({ hold: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never) })
  const holdModel = ScriptedModel.layer([ScriptedModel.toolCalls([{ name: "hold", params: { id: "x" } }])])

  /** Waits for a decision after the thread's first model call. */
  const ask = Middleware.make({
    name: "ask",
    wait: { request: Schema.String, decision: Schema.String },
    afterModel: ({ resume }) => Option.isNone(resume) ? Effect.succeed({ interrupt: "approve?" }) : Effect.void
  })

  // each test would wait for good on an agent that keeps what it should release: the generous timeout turns
  // that into a failure
  const orHang = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => "left waiting" as const }))

  it.live("interrupts the runs send started: the sender's result fails with ThreadStateError, a watcher sees RunFailed, then its stream ends", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const scope = yield* Scope.make()
      const agent = yield* Agent.make({ toolkit: Holding }).pipe(Effect.provide(holding(started)), Scope.extend(scope))
      const events = yield* agent.watch
      const collecting = yield* Effect.fork(Stream.runCollect(events))
      const sent = yield* agent.send("t", "hello")
      assert.strictEqual(sent.delivery, "started")
      yield* Deferred.await(started)
      yield* Scope.close(scope, Exit.void)
      const error = yield* Effect.flip(sent.result)
      assert.strictEqual(error._tag, "ThreadStateError")
      const tags = Chunk.toReadonlyArray(yield* Fiber.join(collecting)).map((event) => event.event)
      const last = tags.at(-1)
      assert.strictEqual(tags[0]!._tag, "RunStarted")
      assert.isTrue(last?._tag === "RunFailed" && last.error === "Interrupted")
    }).pipe(Effect.scoped, orHang, Effect.provide(holdModel)))

  it.live("fails the messages held for a thread that waits for a decision with ThreadStateError", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const agent = yield* Agent.make({ middleware: [ask] }).pipe(Scope.extend(scope))
      assert.strictEqual((yield* agent.run("first", { threadId: "t" }))._tag, "Interrupted")
      const steer = yield* agent.send("t", "steer me")
      const queued = yield* agent.send("t", "later", { mode: "queue" })
      assert.deepStrictEqual([steer.delivery, queued.delivery], ["held", "held"])
      yield* Scope.close(scope, Exit.void)
      for (const sent of [steer, queued]) {
        const error = yield* Effect.flip(sent.result)
        assert.strictEqual(error._tag, "ThreadStateError")
        assert.include(error.message, "the agent closed")
      }
      // the thread still waits, as stored: closing the agent changed nothing in it
      assert.isTrue(Option.isSome(Option.getOrThrow(yield* agent.thread("t")).pending))
    }).pipe(orHang, Effect.provide(ScriptedModel.layer([ScriptedModel.text("one")]))))

  it.live("ends every watcher's stream, after the events published before; a watch begun after it ends at once", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const agent = yield* Agent.make({}).pipe(Scope.extend(scope))
      const events = yield* agent.watch
      yield* agent.run("hello", { threadId: "t" })
      yield* Scope.close(scope, Exit.void)
      const tags = Chunk.toReadonlyArray(yield* Stream.runCollect(events)).map((event) => event.event._tag)
      assert.strictEqual(tags[0], "RunStarted")
      assert.strictEqual(tags.at(-1), "RunEnded")
      assert.strictEqual(Chunk.size(yield* Stream.runCollect(yield* agent.watch)), 0)
    }).pipe(Effect.scoped, orHang, Effect.provide(ScriptedModel.layer([ScriptedModel.text("one")]))))

  it.effect("keeps reading, answering and deleting its threads: only what runs the agent is closed", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const agent = yield* Agent.make({ middleware: [ask] }).pipe(Scope.extend(scope))
      assert.strictEqual((yield* agent.run("first", { threadId: "t" }))._tag, "Interrupted")
      assert.strictEqual((yield* agent.run("second", { threadId: "u" }))._tag, "Interrupted")
      yield* Scope.close(scope, Exit.void)
      assert.isTrue(Option.isSome(yield* agent.thread("t")))
      assert.isTrue(yield* agent.discardPending("u", "closed"))
      yield* agent.deleteThread("t")
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("one"), ScriptedModel.text("two")]))))
})

describe("closing an agent's scope, whatever was sent before", () => {
  const Hold = Tool.make("hold", { success: Schema.String })
  const Holding = Toolkit.make(Hold)
  const HoldingLive = Holding.toLayer({ hold: () => Effect.never })
  /** The model: holds a run whose input is "hold" (its tool call never answers), answers any other. */
  const holdOrAnswer: ScriptedModel.Turn = (request) => {
    const last = request.prompt.content.at(-1)!
    return last.role === "user" && JSON.stringify(last.content).includes("hold")
      ? ScriptedModel.toolCalls([{ name: "hold", params: {} }])
      : ScriptedModel.text("ok")
  }
  /** Waits for a decision after the first model call of thread "waiting". */
  const askWaiting = Middleware.make({
    name: "ask",
    wait: { request: Schema.String, decision: Schema.String },
    afterModel: ({ resume, threadId }) =>
      threadId === "waiting" && Option.isNone(resume) ? Effect.succeed({ interrupt: "approve?" }) : Effect.void
  })
  const Send = Schema.Struct({
    thread: Schema.Literal("waiting", "busy", "idle"),
    mode: Schema.Literal("steer", "queue"),
    yields: Schema.Int.pipe(Schema.between(0, 3))
  })

  it.effect.prop(
    "every sender's result settles: the run's result, or ThreadStateError; a send after the close fails with AgentClosed",
    {
      sends: Schema.Array(Send).pipe(Schema.minItems(1), Schema.maxItems(8)),
      closeAt: Schema.Int.pipe(Schema.between(0, 8))
    },
    ({ closeAt, sends }) =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const agent = yield* Agent.make({ toolkit: Holding, middleware: [askWaiting] }).pipe(
          Effect.provide(HoldingLive),
          Scope.extend(scope)
        )
        assert.strictEqual((yield* agent.run("first", { threadId: "waiting" }))._tag, "Interrupted")
        // a run send started that never ends (its tool call never answers)
        const holding = yield* agent.send("busy", "hold")
        const results: Array<Effect.Effect<unknown, unknown>> = [holding.result]
        let closed = false
        for (const [i, send] of sends.entries()) {
          if (i === closeAt) {
            yield* Scope.close(scope, Exit.void)
            closed = true
          }
          yield* Effect.repeatN(Effect.yieldNow(), send.yields)
          const sent = yield* Effect.either(agent.send(send.thread, `message ${i}`, { mode: send.mode }))
          if (sent._tag === "Left") assert.isTrue(closed && sent.left._tag === "AgentClosed")
          else results.push(sent.right.result)
        }
        if (!closed) yield* Scope.close(scope, Exit.void)
        // a result that never settled would hang here, and the test would time out
        for (const exit of yield* Effect.forEach(results, Effect.exit)) {
          if (Exit.isFailure(exit)) {
            const error = Cause.squash(exit.cause) as { readonly _tag?: string }
            assert.strictEqual(error._tag, "ThreadStateError")
          }
        }
      }).pipe(Effect.provide(ScriptedModel.layer(Array.from({ length: 40 }, () => holdOrAnswer)))),
    { fastCheck: { numRuns: 40 } }
  )
})

describe("an agent built outside any scope", () => {
  it.effect("runs what send starts in the background", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({})
      const sent = yield* agent.send("t", "hello")
      assert.strictEqual(sent.delivery, "started")
      const result = yield* sent.result
      assert.strictEqual(result._tag === "Completed" ? result.text : "", "one")
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("one")]))))
})
