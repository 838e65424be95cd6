/**
 * An agent lives as long as the scope it was built in and the services it
 * kept: once either is gone, every operation that runs it fails with
 * `AgentClosed` instead of failing deep inside a provider, and `send`
 * delivers nothing instead of answering "started".
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Context, Effect, Exit, Layer, Option, Scope, Stream } from "effect"

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
