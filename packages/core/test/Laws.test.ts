import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Either, FastCheck, Layer } from "effect"
import { toTurns, turnsArb } from "./scripts.js"
import { Calculator, CalculatorLive, encoded, encodedRequests, passThrough } from "./utils.js"

/** A conversation script: some tool-calling turns, then a final text reply. */
const ScriptArb = FastCheck.record({
  input: FastCheck.string({ minLength: 1, maxLength: 30 }),
  turns: turnsArb(),
  // a blank final answer is an empty reply, which fails the run (ModelReplyError)
  final: FastCheck.string({ minLength: 1, maxLength: 40 }).filter((text) => text.trim() !== "")
})

type Script = typeof ScriptArb extends FastCheck.Arbitrary<infer A> ? A : never

/** Runs the script through an agent with `middleware`; returns what can be observed. */
const observe = (script: Script, middleware: ReadonlyArray<Middleware.Any>) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You are a calculator.", middleware })
    const result = yield* Effect.either(agent.run(script.input, { threadId: "law" }))
    const requests = encodedRequests(yield* ScriptedModel.requests)
    return Either.match(result, {
      onLeft: (error) => ({ _tag: "Failed" as const, error: error._tag, requests }),
      onRight: (result) => ({
        _tag: result._tag,
        text: result._tag === "Completed" ? result.text : undefined,
        steps: result.steps,
        usage: result.usage,
        messages: encoded(result.state.messages),
        requests
      })
    })
  }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(toTurns(script)), CalculatorLive)))

/** What every run of a script must satisfy, with or without middleware. */
const checkRun = (script: Script, observed: Effect.Effect.Success<ReturnType<typeof observe>>) => {
  if (observed._tag === "Failed") {
    return assert.fail(`the run failed with ${observed.error}`)
  }
  assert.strictEqual(observed._tag, "Completed")
  assert.strictEqual(observed.steps, script.turns.length + 1)
  assert.strictEqual(observed.text, script.final)
  assert.strictEqual(observed.requests.length, script.turns.length + 1)
  // every tool call got exactly one result, in the order of the calls
  const calls = script.turns.flatMap((turn, t) => turn.calls.map((_, c) => `call_${t}_${c}`))
  const results = observed.messages.flatMap((message) =>
    message.role === "tool" ? message.content.map((part) => (part as { id: string }).id) : []
  )
  assert.deepStrictEqual(results, calls)
}

describe("middleware laws", () => {
  it.effect.prop(
    "adding a middleware without hooks anywhere changes nothing",
    {
      script: ScriptArb,
      others: FastCheck.integer({ min: 0, max: 3 }),
      position: FastCheck.nat()
    },
    ({ others, position, script }) =>
      Effect.gen(function*() {
        const base = Array.from({ length: others }, (_, i) => passThrough(`pass${i}`))
        const at = position % (others + 1)
        const withIdentity = [...base.slice(0, at), Middleware.make({ name: "identity" }), ...base.slice(at)]
        const expected = yield* observe(script, base)
        const actual = yield* observe(script, withIdentity)
        assert.deepStrictEqual(actual, expected)
        checkRun(script, actual)
      }),
    { fastCheck: { numRuns: 20 } }
  )

  it.effect.prop(
    "any list of pass-through middleware gives the same run as none",
    { script: ScriptArb, count: FastCheck.integer({ min: 0, max: 10 }) },
    ({ count, script }) =>
      Effect.gen(function*() {
        const middleware = Array.from({ length: count }, (_, i) => passThrough(`pass${i}`))
        const expected = yield* observe(script, [])
        const actual = yield* observe(script, middleware)
        assert.deepStrictEqual(actual, expected)
        checkRun(script, actual)
      }),
    { fastCheck: { numRuns: 30 } }
  )
})
