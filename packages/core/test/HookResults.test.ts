import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer } from "effect"
import { Calculator, CalculatorLive, passThrough } from "./utils.js"

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))

const addCall = ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }])

/** Runs an agent with one middleware and gives the error the run fails with. */
const failure = (middleware: Middleware.Any) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({ toolkit: Calculator, middleware: [passThrough("outer"), middleware] })
    return yield* Effect.flip(agent.run("hi", { threadId: "t" }))
  })

const assertInvalid = (error: unknown, hook: string, reason: string) => {
  const e = error as { _tag: string; middleware: string; hook: string; reason: string; message: string }
  assert.strictEqual(e._tag, "InvalidHookResult")
  assert.strictEqual(e.middleware, "bad")
  assert.strictEqual(e.hook, hook)
  assert.include(e.reason, reason)
  assert.include(e.message, `Middleware "bad" ${hook}: `)
}

describe("hook results of the wrong shape fail with InvalidHookResult naming the middleware and hook", () => {
  it.effect("a wrapModelCall that returns a non-response", () =>
    Effect.gen(function*() {
      const error = yield* failure(Middleware.make({
        name: "bad",
        wrapModelCall: (request, next) => Effect.map(next(request), (response) => response.message as any)
      }))
      assertInvalid(error, "wrapModelCall", "its message is undefined, not an assistant message")
    }).pipe(provide([ScriptedModel.text("hello")])))

  it.effect("a wrapModelCall that returns a number", () =>
    Effect.gen(function*() {
      const error = yield* failure(Middleware.make({ name: "bad", wrapModelCall: () => Effect.succeed(42 as any) }))
      assertInvalid(error, "wrapModelCall", "returned the number 42, not a ModelResponse")
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
    }).pipe(provide([])))

  it.effect("a wrapModelCall response without usage", () =>
    Effect.gen(function*() {
      const error = yield* failure(Middleware.make({
        name: "bad",
        wrapModelCall: () => Effect.succeed({ ...Middleware.modelResponse("hi"), usage: undefined } as any)
      }))
      assertInvalid(error, "wrapModelCall", "its usage is undefined")
    }).pipe(provide([])))

  it.effect("a wrapModelCall that returns no Effect", () =>
    Effect.gen(function*() {
      const error = yield* failure(Middleware.make({
        name: "bad",
        wrapModelCall: () => Middleware.modelResponse("hi") as any
      }))
      assertInvalid(error, "wrapModelCall", "returned an object, not an Effect")
    }).pipe(provide([])))

  it.effect("a wrapToolCall that returns a string", () =>
    Effect.gen(function*() {
      const error = yield* failure(Middleware.make({ name: "bad", wrapToolCall: () => Effect.succeed("3" as any) }))
      assertInvalid(error, "wrapToolCall", `returned the string "3", not a tool result`)
    }).pipe(provide([addCall, ScriptedModel.text("3")])))

  it.effect("a wrapToolCall that answers another call", () =>
    Effect.gen(function*() {
      const error = yield* failure(Middleware.make({
        name: "bad",
        wrapToolCall: (request) => Effect.succeed(Middleware.toolResult({ ...request.call, id: "other" }, 3))
      }))
      assertInvalid(error, "wrapToolCall", `its result answers call the string "other", not call "c1"`)
    }).pipe(provide([addCall, ScriptedModel.text("3")])))

  for (
    const [label, value, reason] of [
      ["a number", 7, "returned the number 7, not undefined or a HookResult object"],
      ["a string", "end", `returned the string "end", not undefined or a HookResult object`],
      ["an array", [], "returned an array"],
      ["an Effect", Effect.void, "returned an Effect inside its Effect"],
      ["messages that are not an array", { messages: "hi" }, `its messages are the string "hi", not an array`],
      [
        "a message that is not one",
        { messages: [{ role: "wizard" }] },
        "its message 0 is an object, not a Prompt message"
      ],
      ["a state update that is not an object", { state: 3 }, "its state update is the number 3, not an object"],
      ["a jumpTo that is not a string", { jumpTo: 1 }, "its jumpTo is the number 1"],
      ["an interruptKey that is not a string", { interrupt: "?", interruptKey: 5 }, "its interruptKey is the number 5"]
    ] as const
  ) {
    it.effect(`a beforeModel hook that returns ${label}`, () =>
      Effect.gen(function*() {
        const error = yield* failure(Middleware.make({
          name: "bad",
          canJumpTo: ["end"],
          beforeModel: () => Effect.succeed(value as any)
        }))
        assertInvalid(error, "beforeModel", reason)
        assert.deepStrictEqual(yield* ScriptedModel.requests, [])
      }).pipe(provide([])))
  }

  it.effect("a node hook that returns no Effect", () =>
    Effect.gen(function*() {
      const error = yield* failure(Middleware.make({ name: "bad", afterAgent: (() => undefined) as any }))
      assertInvalid(error, "afterAgent", "returned undefined, not an Effect")
    }).pipe(provide([ScriptedModel.text("hello")])))

  it.effect("well-formed results still pass: undefined, {}, a state-less update, a response, a tool result", () =>
    Effect.gen(function*() {
      const fine = Middleware.make({
        name: "fine",
        beforeAgent: () => Effect.succeed({}),
        beforeModel: () => Effect.void,
        afterModel: ({ messages }) => Effect.succeed({ messages }),
        wrapModelCall: (request, next) => next(request),
        wrapToolCall: (request, next) => next(request)
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [fine] })
      const result = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(result._tag === "Completed" ? result.text : "", "3")
    }).pipe(provide([addCall, ScriptedModel.text("3")])))
})
