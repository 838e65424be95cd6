import { assert, describe, it } from "@effect/vitest"
import { Agent, RunRecord } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Either, FastCheck } from "effect"
import { toTurns, turnsArb } from "./scripts.js"
import { Calculator, encoded, passThrough } from "./utils.js"

/** A scripted run: some tool-calling turns (text, unicode and all), then a final text reply. */
const ScriptArb = FastCheck.record({
  input: FastCheck.string({ minLength: 1, maxLength: 30, unit: "binary" }),
  systemPrompt: FastCheck.string({ maxLength: 20 }),
  turns: turnsArb("binary"),
  final: FastCheck.string({ minLength: 1, maxLength: 40, unit: "binary" }).filter((text) => text.trim() !== ""),
  middleware: FastCheck.integer({ min: 0, max: 2 })
})

type Script = typeof ScriptArb extends FastCheck.Arbitrary<infer A> ? A : never

/** The agent of a script, with a tool that counts its calls. */
const agentOf = (script: Script, calls: { count: number }) =>
  Agent.make({
    toolkit: Calculator,
    systemPrompt: script.systemPrompt,
    middleware: Array.from({ length: script.middleware }, (_, i) => passThrough(`pass${i}`))
  }).pipe(
    Effect.provide(Calculator.toLayer({ add: ({ a, b }) => Effect.sync(() => (calls.count++, a + b)) }))
  )

const observed = (result: { readonly _tag: string; readonly steps: number; readonly state: any }) => ({
  _tag: result._tag,
  text: (result as any).text,
  steps: result.steps,
  messages: encoded(result.state.messages)
})

describe("RunRecord laws", () => {
  it.effect.prop(
    "a record read back from its JSONL is the record",
    { script: ScriptArb },
    ({ script }) =>
      Effect.gen(function*() {
        const { record } = yield* Effect.flatMap(
          agentOf(script, { count: 0 }),
          (agent) => RunRecord.record(agent, script.input, { threadId: "law" })
        ).pipe(Effect.provide(ScriptedModel.layer(toTurns(script))))
        assert.deepStrictEqual(yield* RunRecord.fromJsonl(RunRecord.toJsonl(record)), record)
      }),
    { fastCheck: { numRuns: 25 }, timeout: 120_000 }
  )

  it.effect.prop(
    "replaying an unchanged agent on its record never diverges, runs nothing and gives the same result",
    { script: ScriptArb },
    ({ script }) =>
      Effect.gen(function*() {
        const live = { count: 0 }
        const { record, result } = yield* Effect.flatMap(
          agentOf(script, live),
          (agent) => RunRecord.record(agent, script.input, { threadId: "law" })
        ).pipe(Effect.provide(ScriptedModel.layer(toTurns(script))))
        const replayedCalls = { count: 0 }
        const { replayed, requests } = yield* Effect.gen(function*() {
          const agent = yield* agentOf(script, replayedCalls)
          const replayed = yield* Effect.either(agent.replay(yield* RunRecord.fromJsonl(RunRecord.toJsonl(record))))
          return { replayed, requests: (yield* ScriptedModel.requests).length }
        }).pipe(Effect.provide(ScriptedModel.layer([])))
        if (Either.isLeft(replayed)) return assert.fail(`the replay failed: ${String(replayed.left)}`)
        assert.deepStrictEqual(observed(replayed.right), observed(result))
        assert.deepStrictEqual([requests, replayedCalls.count], [0, 0])
      }),
    { fastCheck: { numRuns: 25 }, timeout: 120_000 }
  )
})
