/**
 * A wrap hook that returns the effect `next` gave (a pass-through) passes on
 * a reply the layers inside it already checked: the agent does not check it
 * again (no fiber operation of its own, see `StepCost.test.ts`). What is
 * checked stays the same: a wrong value is still named after the hook that
 * gave it, whatever passes it on around it.
 */
import { Prompt, Response } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware, RunJournal } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Either, FastCheck, Layer, Option } from "effect"
import { Calculator, CalculatorLive, passThrough } from "./utils.js"

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))

const addCall = ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }])

const emptyReply: RunJournal.ModelReply = {
  message: Prompt.makeMessage("assistant", { content: [] }),
  toolCalls: [],
  usage: new Response.Usage({ inputTokens: 0, outputTokens: 0, totalTokens: 0 }),
  finishReason: "stop"
}

/** What a wrap hook of a chain does with the call it gets. */
type Kind = "pass" | "passChanged" | "mapped" | "twice" | "bad"

const kinds: ReadonlyArray<Kind> = ["pass", "passChanged", "mapped", "twice", "bad"]

/** A middleware whose wrap hooks do `kind`; a `bad` one answers with a value that is no reply. */
const wrapping = (name: string, kind: Kind) =>
  Middleware.make({
    name,
    wrapModelCall: (request, next) => {
      switch (kind) {
        case "pass":
          return next(request)
        case "passChanged":
          return next({ ...request, systemPrompt: "Be brief." })
        case "mapped":
          return Effect.map(next(request), (response) => response)
        case "twice": {
          // builds the call twice and returns the first: not what `next` gave last
          const first = next(request)
          next(request)
          return first
        }
        case "bad":
          return Effect.map(next(request), (response) => ({ ...response, usage: undefined }) as any)
      }
    },
    wrapToolCall: (request, next) => {
      switch (kind) {
        case "pass":
          return next(request)
        case "passChanged":
          return next({ ...request, call: { ...request.call, params: { a: 2, b: 2 } } })
        case "mapped":
          return Effect.map(next(request), (result) => result)
        case "twice": {
          const first = next(request)
          next(request)
          return first
        }
        case "bad":
          return Effect.map(next(request), (result) => ({ ...result, isFailure: "no" }) as any)
      }
    }
  })

describe("a pass-through wrap hook passes on what the hooks inside it checked", () => {
  it.effect.prop(
    "a chain of wrap hooks fails naming its innermost hook that gave a wrong value, and runs through otherwise",
    { chain: FastCheck.array(FastCheck.constantFrom(...kinds), { minLength: 1, maxLength: 5 }) },
    ({ chain }) =>
      Effect.gen(function*() {
        const middleware = chain.map((kind, i) => wrapping(`${kind}_${i}`, kind))
        const agent = yield* Agent.make({ toolkit: Calculator, middleware })
        const outcome = yield* Effect.either(agent.run("Add", { threadId: "t" }))
        // list order is outermost first: the innermost bad hook is the last one, and its value is checked first
        const bad = chain.lastIndexOf("bad")
        if (bad === -1) {
          assert.isTrue(Either.isRight(outcome) && outcome.right._tag === "Completed")
          return
        }
        assert.isTrue(Either.isLeft(outcome))
        const e = Either.getLeft(outcome).pipe(Option.getOrThrow) as unknown as {
          _tag: string
          middleware: string
          hook: string
        }
        assert.strictEqual(e._tag, "InvalidHookResult")
        assert.strictEqual(e.middleware, `bad_${bad}`)
        assert.strictEqual(e.hook, "wrapModelCall")
      }).pipe(provide([addCall, ScriptedModel.text("3")])),
    { fastCheck: { numRuns: 40 } }
  )

  it.effect.prop(
    "the same for wrapToolCall hooks: the innermost hook that gave a wrong tool result is named",
    { chain: FastCheck.array(FastCheck.constantFrom(...kinds), { minLength: 1, maxLength: 5 }) },
    ({ chain }) =>
      Effect.gen(function*() {
        // a bad hook here wraps tool calls only: its model calls pass through
        const middleware = chain.map((kind, i) => {
          const m = wrapping(`${kind}_${i}`, kind)
          return kind === "bad" ? Middleware.make({ name: m.name, wrapToolCall: m.wrapToolCall! }) : m
        })
        const agent = yield* Agent.make({ toolkit: Calculator, middleware })
        const error = yield* Effect.flip(agent.run("Add", { threadId: "t" })).pipe(Effect.option)
        const bad = chain.lastIndexOf("bad")
        if (bad === -1) {
          assert.isTrue(Option.isNone(error))
          return
        }
        const e = Option.getOrThrow(error) as { _tag: string; middleware: string; hook: string; reason: string }
        assert.strictEqual(e._tag, "InvalidHookResult")
        assert.strictEqual(e.middleware, `bad_${bad}`)
        assert.strictEqual(e.hook, "wrapToolCall")
        assert.include(e.reason, "isFailure")
      }).pipe(provide([addCall, ScriptedModel.text("3")])),
    { fastCheck: { numRuns: 40 } }
  )

  it.effect("a hook that hands next another call and returns its result as it came is checked: the ids differ", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Calculator,
        middleware: [
          passThrough("outer"),
          Middleware.make({
            name: "renames",
            wrapToolCall: (request, next) => next({ ...request, call: { ...request.call, id: "other" } })
          }),
          passThrough("inner")
        ]
      })
      const error = yield* Effect.flip(agent.run("Add", { threadId: "t" }))
      const e = error as unknown as { _tag: string; middleware: string; reason: string }
      assert.strictEqual(e._tag, "InvalidHookResult")
      assert.strictEqual(e.middleware, "renames")
      assert.include(e.reason, `its result answers call the string "other", not call "c1"`)
    }).pipe(provide([addCall, ScriptedModel.text("3")])))

  it.effect("a tool-call guard's answer of the wrong shape is named after the middleware that installed it, not a pass-through inside it", () =>
    Effect.gen(function*() {
      const guarding = Middleware.make({
        name: "guarding",
        wrapToolCall: (request, next) =>
          next(request).pipe(
            Middleware.guardToolCall((final) =>
              Effect.succeed(Option.some({ ...Middleware.toolResult(final.call, "no"), isFailure: "no" } as any))
            )
          )
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [guarding, passThrough("inner")] })
      const error = yield* Effect.flip(agent.run("Add", { threadId: "t" }))
      const e = error as unknown as { _tag: string; middleware: string; hook: string }
      assert.strictEqual(e._tag, "InvalidHookResult")
      assert.strictEqual(e.middleware, "guarding")
      assert.strictEqual(e.hook, "wrapToolCall")
    }).pipe(provide([addCall, ScriptedModel.text("3")])))

  it.effect("an empty reply a journal's witness answered is still refused under a pass-through wrapModelCall, naming it", () =>
    Effect.gen(function*() {
      const journal = RunJournal.RunJournal.of({
        ...RunJournal.inProcess,
        witness: { input: () => Effect.void, model: () => Effect.succeed(emptyReply) }
      })
      const error = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ middleware: [passThrough("outer"), passThrough("inner")] })
        return yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      }).pipe(Effect.provideService(RunJournal.RunJournal, journal))
      assert.strictEqual(error._tag, "EmptyModelResponse")
      if (error._tag === "EmptyModelResponse") assert.strictEqual(error.middleware, "inner")
    }).pipe(provide([ScriptedModel.text("unused")])))
})
