import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Deferred, Effect, Exit, Fiber, Layer, Schema } from "effect"
import { Calculator, CalculatorLive } from "./utils.js"

class HookFailed extends Schema.TaggedError<HookFailed>()("HookFailed", { reason: Schema.String }) {}

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))

/** Registers a finalizer in the run's scope that records how the run ended. */
const finalizer = (log: Array<string>, label: string) =>
  Effect.addFinalizer((exit) =>
    Effect.sync(() => {
      log.push(`${label}:${Exit.isInterrupted(exit) ? "interrupted" : exit._tag}`)
    })
  )

const Wait = Tool.make("wait", { parameters: {}, success: Schema.String })
const Waiter = Toolkit.make(Wait)

describe("finalizers registered by hooks", () => {
  it.effect("run when the run completes, after afterAgent", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const cleanup = Middleware.make({
        name: "cleanup",
        beforeAgent: () => finalizer(log, "beforeAgent"),
        beforeModel: ({ step }) => finalizer(log, `beforeModel#${step}`),
        afterAgent: () => Effect.sync(() => void log.push("afterAgent"))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [cleanup] })
      const result = yield* agent.run("What is 1 + 2?", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      // finalizers run once each, when the run's scope closes, last registered first
      assert.deepStrictEqual(log, [
        "afterAgent",
        "beforeModel#1:Success",
        "beforeModel#0:Success",
        "beforeAgent:Success"
      ])
    }).pipe(provide([
      ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }]),
      ScriptedModel.text("3")
    ])))

  it.effect("run when a hook jumps to the end", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const stop = Middleware.make({
        name: "stop",
        canJumpTo: ["end"],
        beforeModel: () => finalizer(log, "stop").pipe(Effect.as({ jumpTo: "end" as const })),
        afterAgent: () => Effect.sync(() => void log.push("afterAgent"))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [stop] })
      const result = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(log, ["afterAgent", "stop:Success"])
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
    }).pipe(provide([])))

  it.effect("run when a hook fails with a typed error", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const opens = Middleware.make({ name: "opens", beforeModel: () => finalizer(log, "opens") })
      const fails = Middleware.make({
        name: "fails",
        beforeModel: () => finalizer(log, "fails").pipe(Effect.zipRight(new HookFailed({ reason: "no" })))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [opens, fails] })
      const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      assert.instanceOf(error, HookFailed)
      assert.deepStrictEqual(log, ["fails:Failure", "opens:Failure"])
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
    }).pipe(provide([ScriptedModel.text("never")])))

  it.effect("run when a hook interrupts the run (an Interrupted result)", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const ask = Middleware.make({
        name: "ask",
        wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.String },
        beforeModel: () => finalizer(log, "ask").pipe(Effect.as({ interrupt: { question: "go on?" } }))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [ask] })
      const result = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(result._tag, "Interrupted")
      assert.deepStrictEqual(log, ["ask:Success"])
    }).pipe(provide([])))

  it.effect("run when a tool dies inside a wrap hook (ToolDefect)", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const guard = Middleware.make({
        name: "guard",
        wrapToolCall: (request, next) => finalizer(log, "guard").pipe(Effect.zipRight(next(request)))
      })
      const agent = yield* Agent.make({ toolkit: Waiter, middleware: [guard] }).pipe(
        Effect.provide(Waiter.toLayer({ wait: () => Effect.die("kaput") }))
      )
      const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      assert.strictEqual(error._tag, "ToolDefect")
      assert.deepStrictEqual(log, ["guard:Failure"])
    }).pipe(provide([ScriptedModel.toolCalls([{ name: "wait", params: {} }])])))

  it.effect("run when the run's fiber is interrupted while a tool blocks", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const started = yield* Deferred.make<void>()
      const cleanup = Middleware.make({
        name: "cleanup",
        beforeAgent: () => finalizer(log, "beforeAgent"),
        wrapToolCall: (request, next) => finalizer(log, "wrapToolCall").pipe(Effect.zipRight(next(request)))
      })
      const agent = yield* Agent.make({ toolkit: Waiter, middleware: [cleanup] }).pipe(
        Effect.provide(
          Waiter.toLayer({ wait: () => Deferred.succeed(started, undefined).pipe(Effect.zipRight(Effect.never)) })
        )
      )
      const fiber = yield* Effect.fork(agent.run("hi", { threadId: "t" }))
      yield* Deferred.await(started)
      assert.deepStrictEqual(log, [])
      const exit = yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.isInterrupted(exit))
      assert.deepStrictEqual(log, ["wrapToolCall:interrupted", "beforeAgent:interrupted"])
    }).pipe(provide([ScriptedModel.toolCalls([{ name: "wait", params: {} }])])))

  it.effect("run when the run's fiber is interrupted while the model call blocks", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const started = yield* Deferred.make<void>()
      const cleanup = Middleware.make({
        name: "cleanup",
        beforeModel: () => finalizer(log, "beforeModel"),
        wrapModelCall: (request, next) => finalizer(log, "wrapModelCall").pipe(Effect.zipRight(next(request)))
      })
      const blocking = ScriptedModel.layer([
        () => Deferred.succeed(started, undefined).pipe(Effect.zipRight(Effect.never))
      ])
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [cleanup] }).pipe(Effect.provide(blocking))
      const fiber = yield* Effect.fork(agent.run("hi", { threadId: "t" }))
      yield* Deferred.await(started)
      assert.deepStrictEqual(log, [])
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(log, ["wrapModelCall:interrupted", "beforeModel:interrupted"])
    }).pipe(Effect.provide(CalculatorLive)))
})
