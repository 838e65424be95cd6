/**
 * Values whose arrays are long but hold few items (`a[2 ** 32 - 2] = 1`):
 * every walk over them costs their items, not their length, and what JSON
 * would write of them in full is refused where the agent takes them.
 */
import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware, Secrets, TokenCounter } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, FastCheck, Option, Schema } from "effect"
import { jsonLength } from "../src/internal/fast/jsonLength.js"

/** An array of length `2 ** 32 - 1` whose one item is `item`, at its end. */
const sparse = (item: unknown): Array<unknown> => {
  const items: Array<unknown> = []
  items[2 ** 32 - 2] = item
  return items
}

/** `[[[…]]]`, `depth` levels. */
const nested = (depth: number): unknown => {
  let value: unknown = []
  for (let i = 1; i < depth; i++) value = [value]
  return value
}

/** The input of a run holding a tool call with `params` and its result `result`. */
const inputWith = (params: unknown, result: unknown) => [
  { role: "user", content: "hi" },
  { role: "assistant", content: [{ type: "tool-call", id: "c1", name: "t", params, providerExecuted: false }] },
  {
    role: "tool",
    content: [{ type: "tool-result", id: "c1", name: "t", result, isFailure: false, providerExecuted: false }]
  },
  { role: "user", content: "go on" }
]

describe("sparse arrays", () => {
  it.effect(
    "Middleware.argumentsTooDeep walks a sparse array by its items: deep at its end is found, quickly",
    () =>
      Effect.sync(() => {
        assert.isFalse(Middleware.argumentsTooDeep({ items: sparse(1) }))
        assert.isTrue(Middleware.argumentsTooDeep({ items: sparse(nested(200)) }))
        assert.isFalse(Middleware.argumentsTooDeep({ items: sparse(nested(100)) }))
      }),
    20_000
  )

  it.effect(
    "Secrets.scrubToolResult scrubs a sparse result's item (failed or not), quickly, its length kept",
    () =>
      Effect.gen(function*() {
        const key = "sk-sparse-Zx9qWv3LmN7pRt2YbK5s"
        yield* Secrets.register(key)
        for (const isFailure of [true, false]) {
          const part = Secrets.scrubToolResult({ result: { items: sparse(`key ${key}`) }, isFailure })
          const items = (part.result as { readonly items: ReadonlyArray<string> }).items
          assert.strictEqual(items.length, 2 ** 32 - 1)
          assert.include(items[2 ** 32 - 2], "key ")
          assert.notInclude(items[2 ** 32 - 2], key)
        }
      }).pipe(Effect.scoped),
    20_000
  )

  it.effect(
    "a model's tool call whose arguments hold a sparse array nested too deep at its end: answered as a failure, quickly (nothing walks its length)",
    () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({})
        const result = yield* agent.run("go", { threadId: "deep" })
        const tool = result.state.messages.find((message) => message.role === "tool")
        assert.isDefined(tool)
        // answered as a failure (the call names no tool of this agent, and its arguments are cut past the limit)
        assert.isTrue(tool!.role === "tool" && tool!.content.every((part) => part.isFailure))
        assert.strictEqual(result.state.messages.at(-1)?.role, "assistant")
      }).pipe(
        Effect.provide(ScriptedModel.layer([
          ScriptedModel.toolCalls([{ id: "c1", name: "t", params: { items: sparse(nested(200)) } }]),
          ScriptedModel.text("done")
        ]))
      ),
    20_000
  )

  it.effect(
    "the approximate token counter measures a tool call holding a sparse array without walking its length",
    () =>
      Effect.gen(function*() {
        const counter = yield* TokenCounter.makeApproximate()
        const calling = Prompt.makeMessage("assistant", {
          content: [
            Prompt.makePart("tool-call", { id: "c1", name: "t", params: { items: sparse(1) }, providerExecuted: false })
          ]
        })
        assert.isAbove(yield* counter.countMessage(calling), 2 ** 30)
      }),
    20_000
  )

  it("a long sparse array's JSON length, measured by its items, is what JSON.stringify writes", () =>
    FastCheck.assert(
      FastCheck.property(
        FastCheck.integer({ min: 65_537, max: 200_000 }),
        // (values whose strings need no escaping: the measure counts no escapes, by design)
        FastCheck.array(
          FastCheck.tuple(
            FastCheck.nat(),
            FastCheck.oneof(
              FastCheck.integer(),
              FastCheck.boolean(),
              FastCheck.constant(null),
              FastCheck.constant(undefined),
              FastCheck.stringMatching(/^[a-z ]{0,8}$/),
              FastCheck.dictionary(FastCheck.stringMatching(/^[a-z]{1,4}$/), FastCheck.integer(), { maxKeys: 3 })
            )
          ),
          { maxLength: 20 }
        ),
        (length, items) => {
          const array: Array<unknown> = []
          array[length - 1] = null
          for (const [at, item] of items) array[at % length] = item
          assert.strictEqual(jsonLength({ array }), JSON.stringify({ array }).length)
        }
      ),
      { numRuns: 30 }
    ))

  const refused: ReadonlyArray<readonly [string, () => readonly [unknown, unknown], string]> = [
    ["a call's arguments holding a sparse array", () => [{ items: sparse(1) }, "ok"], "too large"],
    ["a result that is a sparse array", () => [{}, sparse("x")], "too large"],
    ["a result holding a cycle", () => {
      const result: Record<string, unknown> = {}
      result["self"] = result
      return [{}, result]
    }, "levels deep"],
    ["arguments holding a bigint", () => [{ n: 1n }, "ok"], "bigint"]
  ]
  for (const [what, values, reason] of refused) {
    it.effect(
      `the input of a run with ${what} is refused as InvalidInput, quickly, and nothing is stored`,
      () =>
        Effect.gen(function*() {
          const agent = yield* Agent.make({})
          const [params, result] = values()
          const error = yield* Effect.flip(agent.run(inputWith(params, result) as any, { threadId: "t" }))
          assert.strictEqual(error._tag, "InvalidInput")
          assert.include(error.message, reason)
          assert.isTrue((yield* agent.thread("t"))._tag === "None")
        }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("done")]))),
      20_000
    )
  }

  it.effect(
    "a decision holding a sparse array is held to maxInputChars by its items, quickly: a long text at its end is refused",
    () =>
      Effect.gen(function*() {
        const ask = Middleware.make({
          name: "ask",
          wait: { request: Schema.String, decision: Schema.Unknown },
          beforeModel: ({ resume }) => Effect.succeed(Option.isNone(resume) ? { interrupt: "anything?" } : undefined)
        })
        const agent = yield* Agent.make({ middleware: [ask], maxInputChars: 100 })
        assert.strictEqual((yield* agent.run("hi", { threadId: "t" }))._tag, "Interrupted")
        const error = yield* Effect.flip(agent.resume("t", { items: sparse("x".repeat(101)) }))
        assert.strictEqual(error._tag, "InvalidInput")
        assert.include(error.message, "maxInputChars")
        assert.strictEqual((yield* agent.resume("t", { items: sparse("ok") }))._tag, "Completed")
      }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("done")]))),
    20_000
  )

  // provider options reach the stored thread and the provider as tool values do
  const inOptions: ReadonlyArray<readonly [string, () => unknown, string]> = [
    ["a sparse array", () => sparse(1), "too large"],
    ["a bigint", () => 1n, "bigint"],
    ["more values than a tool result may hold", () => Array.from({ length: 100_001 }, () => 0), "too large"]
  ]
  for (const [what, value, reason] of inOptions) {
    it.effect(
      `the input of a run whose message's or part's provider options hold ${what} is refused as InvalidInput, naming where, and nothing is stored`,
      () =>
        Effect.gen(function*() {
          const agent = yield* Agent.make({})
          const inputs = [
            [{ role: "user", content: "hi", options: { openai: { x: value() } } }],
            [{ role: "user", content: [{ type: "text", text: "hi", options: { openai: { x: value() } } }] }]
          ]
          for (const [index, input] of inputs.entries()) {
            const error = yield* Effect.flip(agent.run(input as any, { threadId: "t" }))
            assert.strictEqual(error._tag, "InvalidInput")
            assert.include(error.message, reason)
            assert.include(error.message, index === 0 ? "provider options of messages.0" : "messages.0.content.0")
            assert.isTrue((yield* agent.thread("t"))._tag === "None")
          }
          // options JSON keeps are taken
          const done = yield* agent.run([{ role: "user", content: "hi", options: { openai: { store: false } } }], {
            threadId: "t"
          })
          assert.strictEqual(done._tag, "Completed")
        }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("done")]))),
      20_000
    )
  }
})
