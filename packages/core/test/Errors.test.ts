import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, FastCheck, Layer, Schema, Stream } from "effect"
import { Add, Calculator, CalculatorLive, passThrough } from "./utils.js"

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))

const slice = <K extends string>(key: K) => ({
  schema: Schema.Struct({ [key]: Schema.Number }) as unknown as Schema.Schema<Record<K, number>>,
  initial: { [key]: 0 } as Record<K, number>
})

describe("configuration errors at construction", () => {
  it.effect("two middleware with one name fail with AgentConfigError", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.make({
        toolkit: Calculator,
        middleware: [Middleware.make({ name: "logging" }), passThrough("other"), passThrough("logging")]
      }))
      assert.strictEqual(error._tag, "AgentConfigError")
      assert.include(error.message, `"logging"`)
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
    }).pipe(provide([])))

  it.effect("withName lets one middleware run twice: each copy runs its hooks and reports under its own name", () =>
    Effect.gen(function*() {
      const reports: Array<string> = []
      const counter = Middleware.make({
        name: "counter",
        beforeModel: () => Effect.sync(() => void reports.push("before")),
        wrapModelCall: (request, next) => Effect.zipRight(Middleware.report("model call"), next(request))
      })
      const agent = yield* Agent.make({
        toolkit: Calculator,
        middleware: [counter, counter.pipe(Middleware.withName("counter-inner"))]
      })
      const events = yield* agent.stream("Hi", { threadId: "t" }).pipe(Stream.runCollect)
      assert.deepStrictEqual(reports, ["before", "before"])
      assert.deepStrictEqual(
        Chunk.toReadonlyArray(events).flatMap((event) =>
          event._tag === "MiddlewareDecision" ? [`${event.middleware}: ${event.decision}`] : []
        ),
        ["counter: model call", "counter-inner: model call"]
      )
      assert.strictEqual(counter.name, "counter")
    }).pipe(provide([ScriptedModel.text("hello")])))

  it.effect("two middleware declaring the same state key fail with AgentConfigError", () =>
    Effect.gen(function*() {
      const first = Middleware.make({ name: "first", state: slice("count") })
      const second = Middleware.make({ name: "second", state: slice("count") })
      // @ts-expect-error: the types reject this list too (dtslint); here the run-time check is tested
      const error = yield* Effect.flip(Agent.make({ toolkit: Calculator, middleware: [first, second] }))
      assert.strictEqual(error._tag, "AgentConfigError")
      assert.include(error.message, `"count"`)
      assert.include(error.message, `"second"`)
      assert.include(error.message, `"first"`)
    }).pipe(provide([])))

  it.effect("a slice may not declare the reserved key messages", () =>
    Effect.gen(function*() {
      const sneaky = Middleware.make({ name: "sneaky", state: slice("messages") })
      // @ts-expect-error: the types reject this list too (dtslint); here the run-time check is tested
      const error = yield* Effect.flip(Agent.make({ middleware: [sneaky] }))
      assert.strictEqual(error._tag, "AgentConfigError")
      assert.include(error.message, `"messages"`)
    }).pipe(provide([])))

  it.effect("distinct names and keys build fine", () =>
    Effect.gen(function*() {
      const a = Middleware.make({ name: "a", state: slice("x") })
      const b = Middleware.make({ name: "b", state: slice("y") })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [a, b] })
      const result = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(result.state.x, 0)
      assert.strictEqual(result.state.y, 0)
    }).pipe(provide([ScriptedModel.text("hello")])))

  it.effect("a middleware tool clashing with a toolkit tool fails with ToolNameClash naming both sources", () =>
    Effect.gen(function*() {
      const AddKit = Toolkit.make(Add)
      const adds = Middleware.make({
        name: "adds",
        tools: Effect.provide(AddKit, AddKit.toLayer({ add: () => Effect.succeed(0) }))
      })
      const error = yield* Effect.flip(Agent.make({ toolkit: Calculator, middleware: [adds] }))
      assert.strictEqual(error._tag, "ToolNameClash")
      assert.include(error.message, `Tool "add" of middleware "adds" has the same name as a tool of the toolkit`)
    }).pipe(provide([])))

  it.effect("an unknown option (a typo) fails with InvalidOptions naming it", () =>
    Effect.gen(function*() {
      const options = { systemPrompt: "Be brief.", middlewares: [passThrough("a")] }
      const error = yield* Effect.flip(Agent.make(options))
      assert.strictEqual(error._tag, "InvalidOptions")
      if (error._tag !== "InvalidOptions") return
      assert.deepStrictEqual([error.module, error.option], ["Agent", "middlewares"])
      assert.include(error.reason, `"middleware"`)
      const misspelled = yield* Effect.flip(
        Agent.make({ toolkit: Calculator, systemPrompt: "x", sytemPrompt: "x" } as {})
      )
      assert.deepStrictEqual(misspelled._tag === "InvalidOptions" && misspelled.option, "sytemPrompt")
    }).pipe(provide([])))

  it.effect.prop(
    "any key Agent.make does not know fails with InvalidOptions naming it",
    {
      key: FastCheck.string({ minLength: 1 }).filter((key) =>
        ![
          "toolkit",
          "middleware",
          "systemPrompt",
          "responseFormat",
          "outputToolName",
          "maxSteps",
          "toolConcurrency",
          "toolTimeout",
          "toolTimeouts",
          "spans"
        ].includes(key)
      )
    },
    ({ key }) =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Agent.make({ systemPrompt: "x", [key]: 1 } as {}))
        assert.deepStrictEqual(
          error._tag === "InvalidOptions" ? [error.module, error.option] : error._tag,
          ["Agent", key]
        )
      }).pipe(provide([]))
  )

  it.effect("options that are not an object fail with InvalidOptions", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.make(null as unknown as {}))
      assert.deepStrictEqual(error._tag === "InvalidOptions" && [error.module, error.option], ["Agent", "options"])
    }).pipe(provide([])))

  it.effect("maxSteps below 1 fails with AgentConfigError", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.make({ toolkit: Calculator, maxSteps: 0 }))
      assert.strictEqual(error._tag, "AgentConfigError")
    }).pipe(provide([])))
})

describe("errors as a journal stores them", () => {
  it("hold only numbers JSON keeps: NaN or Infinity in a count, a step or a timeout is refused at construction", () => {
    // JSON writes NaN and Infinity as null: a stored failure holding one would not decode back
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => new AgentError.ToolTimeout({ toolName: "t", callId: "c", timeoutMillis: bad }))
      assert.throws(() => new AgentError.MaxStepsExceeded({ threadId: "t", maxSteps: bad }))
    }
    const error = new AgentError.ToolTimeout({ toolName: "t", callId: "c", timeoutMillis: 1500 })
    const stored = JSON.parse(JSON.stringify(Schema.encodeSync(AgentError.ToolTimeout)(error)))
    assert.deepStrictEqual(Schema.decodeUnknownSync(AgentError.ToolTimeout)(stored), error)
  })
})

describe("run errors", () => {
  it.effect("more model calls than maxSteps fail with MaxStepsExceeded", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, maxSteps: 2 })
      const error = yield* Effect.flip(agent.run("loop forever", { threadId: "t" }))
      assert.strictEqual(error._tag, "MaxStepsExceeded")
      if (error._tag !== "MaxStepsExceeded") return
      assert.strictEqual(error.maxSteps, 2)
      assert.strictEqual(error.threadId, "t")
      assert.strictEqual((yield* ScriptedModel.requests).length, 2)
    }).pipe(
      provide([0, 1, 2].map((i) => ScriptedModel.toolCalls([{ name: "add", params: { a: i, b: i }, id: `c${i}` }])))
    ))

  it.effect("a hook that keeps jumping to tools with nothing to run ends with MaxStepsExceeded, not a hang", () =>
    Effect.gen(function*() {
      const spin = Middleware.make({
        name: "spin",
        canJumpTo: ["tools"],
        beforeModel: () => Effect.succeed({ jumpTo: "tools" as const })
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [spin], maxSteps: 3 })
      const error = yield* Effect.flip(agent.run("spin", { threadId: "t" }))
      assert.strictEqual(error._tag, "MaxStepsExceeded")
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(provide([])))

  it.effect("exactly maxSteps model calls are allowed", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, maxSteps: 2 })
      const result = yield* agent.run("once", { threadId: "t" })
      assert.strictEqual(result.steps, 2)
    }).pipe(provide([
      ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 1 } }]),
      ScriptedModel.text("2")
    ])))

  it.effect("a tool whose result breaks its success schema is a ToolDefect", () =>
    Effect.gen(function*() {
      const Liar = Tool.make("liar", { parameters: {}, success: Schema.Number })
      const Kit = Toolkit.make(Liar)
      const agent = yield* Agent.make({ toolkit: Kit }).pipe(
        Effect.provide(Kit.toLayer({ liar: () => Effect.succeed("not a number" as unknown as number) }))
      )
      const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      assert.strictEqual(error._tag, "ToolDefect")
    }).pipe(provide([ScriptedModel.toolCalls([{ name: "liar", params: {} }])])))
})
