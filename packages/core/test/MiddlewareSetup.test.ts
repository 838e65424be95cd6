import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, Middleware } from "@stepwise-agent/core"
import * as CoreIndex from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Context, Effect, FastCheck, Layer, Schema, Stream } from "effect"
import { Calculator, CalculatorLive } from "./utils.js"

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))

class Missing extends Schema.TaggedError<Missing>()("Missing", { what: Schema.String }) {}
class Greeting extends Context.Tag("test/Greeting")<Greeting, string>() {}

const Echo = Tool.make("echo", { parameters: { text: Schema.String }, success: Schema.String })
const EchoKit = Toolkit.make(Echo)
/** The toolkit of `echo`, with its handler: what a middleware's `tools` gives. */
const handledEcho = Effect.flatMap(
  EchoKit.toContext({ echo: ({ text }) => Effect.succeed(text) }),
  (context) => Effect.provide(EchoKit, context)
)

/** A middleware whose setup logs `name` into `log` and builds a middleware of that name. */
const logged = (log: Array<string>, name: string) =>
  Middleware.unwrap(Effect.sync(() => {
    log.push(`setup ${name}`)
    return Middleware.make({ name, beforeModel: () => Effect.sync(() => void log.push(`run ${name}`)) })
  }))

describe("Middleware.unwrap: a middleware value whose setup Agent.make runs", () => {
  it.effect.prop(
    "setups run once each, in list order, before the middleware's tools are built; runs do not run them again",
    [FastCheck.integer({ min: 1, max: 6 }), FastCheck.integer({ min: 1, max: 3 })],
    ([count, runs]) =>
      Effect.gen(function*() {
        const log: Array<string> = []
        const names = Array.from({ length: count }, (_, i) => `m${i}`)
        const withTools = Middleware.make({
          name: "tools",
          tools: Effect.zipRight(Effect.sync(() => void log.push("tools built")), handledEcho)
        })
        const agent = yield* Agent.make({ middleware: [withTools, ...names.map((name) => logged(log, name))] })
        assert.deepStrictEqual(log, [...names.map((name) => `setup ${name}`), "tools built"])
        for (let i = 0; i < runs; i++) yield* agent.run("hi", { threadId: `t${i}` })
        assert.strictEqual(log.filter((line) => line.startsWith("setup")).length, count)
        assert.strictEqual(log.filter((line) => line === `run ${names[0]}`).length, runs)
      }).pipe(provide(Array.from({ length: 3 }, () => ScriptedModel.text("ok")))),
    { fastCheck: { numRuns: 10 } }
  )

  it.effect("a setup's failure fails Agent.make with its typed error, and later setups do not run", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const failing = Middleware.unwrap(
        Effect.fail(new Missing({ what: "config" })).pipe(Effect.as(Middleware.make({ name: "never" })))
      )
      const error = yield* Effect.flip(Agent.make({ middleware: [logged(log, "a"), failing, logged(log, "b")] }))
      assert.strictEqual(error._tag, "Missing")
      assert.deepStrictEqual(log, ["setup a"])
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
    }).pipe(provide([])))

  it.effect("a setup reads a service of the context the agent is built in", () =>
    Effect.gen(function*() {
      const greet = Middleware.unwrap(Effect.map(Greeting, (greeting) =>
        Middleware.make({
          name: "greet",
          wrapModelCall: (request, next) => next({ ...request, systemPrompt: greeting })
        })))
      const agent = yield* Agent.make({ middleware: [greet] }).pipe(Effect.provideService(Greeting, "Be kind."))
      yield* agent.run("hi", { threadId: "t" })
      const [request] = yield* ScriptedModel.requests
      const system = request!.prompt.content[0]!
      assert.strictEqual(system.role === "system" && system.content, "Be kind.")
    }).pipe(provide([ScriptedModel.text("ok")])))

  it.effect("the built middleware's name counts: withName renames it, and two built with one name clash", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const twice = yield* Effect.flip(Agent.make({ middleware: [logged(log, "same"), logged(log, "same")] }))
      assert.strictEqual(twice._tag, "AgentConfigError")
      assert.include(twice.message, `"same"`)
      const renamed = logged(log, "same").pipe(Middleware.withName("other"))
      const built = yield* Middleware.build(renamed)
      assert.strictEqual(built.name, "other")
      assert.isDefined(built.beforeModel)
      yield* Agent.make({ middleware: [logged(log, "same"), renamed] })
    }).pipe(provide([])))

  it.effect("Middleware.build gives a middleware without a setup unchanged, and resolves nested setups", () =>
    Effect.gen(function*() {
      const plain = Middleware.make({ name: "plain" })
      assert.strictEqual(yield* Middleware.build(plain), plain)
      const nested = Middleware.unwrap(Effect.succeed(Middleware.unwrap(Effect.succeed(plain))))
      assert.strictEqual(yield* Middleware.build(nested), plain)
    }))
})

describe("tools a middleware names are checked when the agent is built", () => {
  const echoing = Middleware.make({
    name: "echoing",
    tools: handledEcho
  })

  it.effect.prop(
    "a middleware naming tools the agent lacks fails Agent.make with UnknownTools naming them and the tools it has",
    [FastCheck.uniqueArray(FastCheck.constantFrom("add", "echo", "serach", "mail", "delete"), { minLength: 1 })],
    ([names]) =>
      Effect.gen(function*() {
        const uses = Middleware.make({ name: "uses", uses: { tools: names } })
        const exit = yield* Effect.exit(Agent.make({ toolkit: Calculator, middleware: [echoing, uses] }))
        const unknown = names.filter((name) => name !== "add" && name !== "echo")
        if (unknown.length === 0) {
          assert.strictEqual(exit._tag, "Success")
          return
        }
        assert.strictEqual(exit._tag, "Failure")
        const error = yield* Effect.flip(exit)
        assert.instanceOf(error, AgentError.UnknownTools)
        if (!(error instanceof AgentError.UnknownTools)) return
        assert.strictEqual(error.middleware, "uses")
        assert.deepStrictEqual(error.names, unknown)
        // the toolkit's tools and those of other middleware count as available
        assert.deepStrictEqual(error.available, ["add", "echo"])
        assert.include(error.message, `Middleware "uses" names tools the agent does not have: ${unknown.join(", ")}`)
        assert.deepStrictEqual(yield* ScriptedModel.requests, [])
      }).pipe(provide([])),
    { fastCheck: { numRuns: 20 } }
  )

  it.effect("a middleware built by a setup is checked too", () =>
    Effect.gen(function*() {
      const built = Middleware.unwrap(Effect.succeed(Middleware.make({ name: "late", uses: { tools: ["nope"] } })))
      const error = yield* Effect.flip(Agent.make({ toolkit: Calculator, middleware: [built] }))
      assert.strictEqual(error._tag, "UnknownTools")
      assert.deepStrictEqual(error._tag === "UnknownTools" && error.names, ["nope"])
    }).pipe(provide([])))
})

describe("the public surface of Middleware", () => {
  it("has no fiber refs, no invalidOptions field and no identity or passThrough", () => {
    for (const name of ["CurrentHook", "CurrentDecisionSink", "CurrentEventSink", "CurrentToolCallGuards"]) {
      assert.notProperty(Middleware, name)
    }
    assert.notProperty(Middleware, "identity")
    assert.notProperty(Middleware, "passThrough")
    assert.notProperty(Middleware.make({ name: "m" }), "invalidOptions")
    assert.strictEqual(CoreIndex.Middleware, Middleware)
  })

  it.effect("reportingAs files a decision under the given middleware and hook", () =>
    Effect.gen(function*() {
      const audit = Middleware.make({
        name: "audit",
        beforeModel: () =>
          Middleware.report("seen").pipe(Middleware.reportingAs({ middleware: "elsewhere", hook: "x" }))
      })
      const agent = yield* Agent.make({ middleware: [audit] })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("hi", { threadId: "t" })))
      const decisions = events.flatMap((event) =>
        event._tag === "MiddlewareDecision" ? [`${event.middleware}/${event.hook}: ${event.decision}`] : []
      )
      assert.deepStrictEqual(decisions, ["elsewhere/x: seen"])
    }).pipe(provide([ScriptedModel.text("ok")])))
})
