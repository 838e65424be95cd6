/**
 * Summarization sized by the model's profile (`{ fraction }` without
 * `contextWindow`) and its recovery from a context overflow.
 */
import { Prompt, Response } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Middleware, ModelProfile } from "@stepwise-agent/core"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as Arbitraries from "@stepwise-agent/testing/Arbitraries"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Effect, FastCheck, Layer, Logger, Option } from "effect"
import type * as ContextOverflow from "../src/ContextOverflow.js"
import * as Summarization from "../src/Summarization.js"

/** The middleware, built as `Agent.make` builds it, to call its hooks directly. */
const built = <M extends Middleware.Any>(middleware: M) =>
  Effect.orDie(Middleware.build(middleware)) as Effect.Effect<M>

const user = (text: string) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })
const assistant = (text: string) => Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text })] })
const turns = (n: number) =>
  Array.from({ length: n }, (_, i) => [user(`question ${i}`), assistant(`answer ${i}`)]).flat()

type Summarizing = Middleware.Middleware<
  {},
  Summarization.SummarizationFailed | ContextOverflow.ContextOverflow,
  Summarization.Summarizer
>

const noUsage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 }
const beforeModel = (mw: Summarizing, messages: ReadonlyArray<Prompt.Message>, threadId = "t") =>
  Effect.scoped(
    mw.beforeModel!({ state: {}, messages, threadId, step: 0, usage: noUsage, tools: [], resume: Option.none() })
  ).pipe(
    Effect.map((result) => result === undefined ? undefined : result.messages)
  )

/** The summarizer answers "SUMMARY" to every request. */
const Summarizer = Layer.unwrapEffect(
  Effect.map(
    ScriptedModel.make(Array.from({ length: 50 }, () => ScriptedModel.text("SUMMARY"))),
    ({ model }) => Summarization.layer(model)
  )
)

/** Runs `effect` with the warnings it logs collected. */
const withWarnings = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const warnings: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      if (logLevel._tag === "Warning") warnings.push(Array.isArray(message) ? message.join(" ") : String(message))
    })
    const result = yield* Effect.provide(effect, Logger.replace(Logger.defaultLogger, logger))
    return { result, warnings }
  })

const tinyModel = (maxInputTokens: number) =>
  Layer.merge(
    ModelProfile.layer({ "tiny-model": { contextWindow: maxInputTokens, maxOutputTokens: 1 } }),
    ModelProfile.layerModel("tiny-model-2026-01-01")
  )

describe("fractions from the model profile", () => {
  it.effect.prop(
    "a fraction of the profile's maxInputTokens acts as the same fraction of an equal contextWindow",
    {
      messages: Arbitraries.conversation({ maxTurns: 6, maxResultSize: 120 }),
      window: FastCheck.integer({ min: 20, max: 3000 }),
      trigger: FastCheck.double({ min: 0.01, max: 1, noNaN: true }),
      keep: FastCheck.double({ min: 0.01, max: 1, noNaN: true })
    },
    ({ keep, messages, trigger, window }) =>
      Effect.gen(function*() {
        const fromProfile = yield* built(Summarization.middleware({
          trigger: { fraction: trigger },
          keep: { fraction: keep }
        }))
        const explicit = yield* Effect.either(
          Middleware.build(
            Summarization.middleware({
              trigger: { fraction: trigger },
              keep: { fraction: keep },
              contextWindow: window
            })
          )
        )
        const { result, warnings } = yield* withWarnings(
          beforeModel(fromProfile, messages).pipe(Effect.provide(tinyModel(window)))
        )
        assert.deepStrictEqual(warnings, [])
        // a trigger fraction under one token is rejected up front with an explicit window, and counts as 1 token
        // from a profile; a keep fraction is rounded down either way
        if (explicit._tag === "Left") {
          assert.isTrue(Math.floor(trigger * window) < 1)
          return
        }
        const expected = yield* beforeModel(explicit.right, messages)
        assert.deepStrictEqual(result?.map((m) => m.role), expected?.map((m) => m.role))
        assert.strictEqual(result?.length, expected?.length)
      }).pipe(Effect.provide(Summarizer), Effect.provide(TokenCounter.layerApproximate())),
    { fastCheck: { numRuns: 60 } }
  )

  it.effect("the profile of the named model sizes the fraction: 0.5 of a 140-token model", () =>
    Effect.gen(function*() {
      const mw = yield* built(Summarization.middleware({ trigger: { fraction: 0.5 }, keep: { messages: 1 } }))
      // a question is ceil((10 + 4) / 4) + 3 = 7 tokens, an answer ceil((8 + 9) / 4) + 3 = 8; the trigger is 70
      assert.strictEqual(yield* TokenCounter.count(turns(4)), 60)
      assert.isUndefined(yield* beforeModel(mw, turns(4)).pipe(Effect.provide(tinyModel(140))))
      assert.strictEqual(yield* TokenCounter.count(turns(5)), 75)
      const out = yield* beforeModel(mw, turns(5)).pipe(Effect.provide(tinyModel(140)))
      assert.strictEqual(out?.length, 2)
      assert.isTrue(Summarization.isSummary(out![0]!))
      // the same history under gpt-4o's 128k window does not trigger
      const gpt4o = yield* beforeModel(mw, turns(5)).pipe(Effect.provide(ModelProfile.layerModel("gpt-4o")))
      assert.isUndefined(gpt4o)
    }).pipe(Effect.provide(Summarizer), Effect.provide(TokenCounter.layerApproximate())))

  it.effect("agentModel names the model in place of the current one", () =>
    Effect.gen(function*() {
      const mw = yield* built(Summarization.middleware({
        trigger: { fraction: 0.5 },
        keep: { messages: 1 },
        agentModel: "tiny-model"
      }))
      const out = yield* beforeModel(mw, turns(5)).pipe(
        Effect.provide(ModelProfile.layer({ "tiny-model": { contextWindow: 100, maxOutputTokens: 1 } })),
        Effect.provide(ModelProfile.layerModel("gpt-4o"))
      )
      assert.strictEqual(out?.length, 2)
    }).pipe(Effect.provide(Summarizer), Effect.provide(TokenCounter.layerApproximate())))

  it.effect("a model without a profile falls back to 128,000 tokens with one warning per middleware and model", () =>
    Effect.gen(function*() {
      // 0.0001 × 128,000 = 12 tokens: triggers on 18 tokens; never "never fire"
      const mw = yield* built(Summarization.middleware({ trigger: { fraction: 0.0001 }, keep: { messages: 1 } }))
      const run = (model: string | undefined) =>
        beforeModel(mw, turns(2).slice(0, 3)).pipe(
          model === undefined ? (e) => e : Effect.provide(ModelProfile.layerModel(model))
        )
      const { result, warnings } = yield* withWarnings(
        Effect.all([run("llama-local"), run("llama-local"), run("llama-local"), run(undefined), run(undefined)])
      )
      for (const out of result) assert.strictEqual(out?.length, 2)
      assert.strictEqual(warnings.length, 2)
      assert.include(warnings[0]!, "no model profile for \"llama-local\"")
      assert.include(warnings[0]!, "128000")
      assert.include(warnings[1]!, "the agent's model is not named")
      // another instance warns again, once
      const other = yield* built(Summarization.middleware({ trigger: { fraction: 0.0001 }, keep: { messages: 1 } }))
      const again = yield* withWarnings(
        Effect.all([beforeModel(other, turns(1)), beforeModel(other, turns(1))]).pipe(
          Effect.provide(ModelProfile.layerModel("llama-local"))
        )
      )
      assert.strictEqual(again.warnings.length, 1)
    }).pipe(Effect.provide(Summarizer), Effect.provide(TokenCounter.layerApproximate())))

  it.effect("an explicit contextWindow wins over the profile and never warns", () =>
    Effect.gen(function*() {
      const mw = yield* built(Summarization.middleware({
        trigger: { fraction: 0.5 },
        keep: { messages: 1 },
        contextWindow: 100
      }))
      const { result, warnings } = yield* withWarnings(
        beforeModel(mw, turns(5)).pipe(Effect.provide(ModelProfile.layerModel("unknown-model")))
      )
      assert.strictEqual(result?.length, 2)
      assert.deepStrictEqual(warnings, [])
    }).pipe(Effect.provide(Summarizer), Effect.provide(TokenCounter.layerApproximate())))
})

// ---------------------------------------------------------------------------
// overflow
// ---------------------------------------------------------------------------

const overflowError = ScriptedModel.httpError(
  400,
  { "content-type": "application/json" },
  JSON.stringify(FakeOpenAi.contextLengthExceededBody(128_000, 130_000))
)

const request = (messages: ReadonlyArray<Prompt.Message>, threadId = "t"): Middleware.ModelRequest => ({
  messages,
  systemPrompt: undefined,
  tools: [],
  toolChoice: "auto",
  model: undefined,
  context: {} as Middleware.ModelRequest["context"],
  state: {},
  threadId,
  step: 0
})

const nextFailing = (failures: number) => {
  const seen: Array<ReadonlyArray<Prompt.Message>> = []
  const next: Middleware.NextModelCall = (req) =>
    Effect.suspend(() => {
      seen.push(req.messages)
      return seen.length <= failures ? Effect.fail(overflowError) : Effect.succeed(Middleware.modelResponse("done"))
    })
  return { next, seen }
}

describe("onOverflow", () => {
  it.effect("summarizes the request whatever the trigger, retries once, and summarizes the thread next time", () =>
    Effect.gen(function*() {
      const mw = yield* built(Summarization.middleware({ trigger: { tokens: 1_000_000 }, keep: { messages: 2 } }))
      const history = turns(4)
      const { next, seen } = nextFailing(1)
      const response = yield* Effect.scoped(mw.wrapModelCall!(request(history), next))
      assert.strictEqual(Middleware.modelResponse("done").message.content.length, response.message.content.length)
      assert.strictEqual(seen.length, 2)
      assert.strictEqual(seen[1]!.length, 3)
      assert.isTrue(Summarization.isSummary(seen[1]![0]!))
      assert.strictEqual(seen[1]![1], history[6])
      // the next model call of that thread summarizes the stored thread, though under the trigger; then no more
      const grown = [...history, user("more")]
      const forced = yield* beforeModel(mw, grown)
      assert.deepStrictEqual(forced?.slice(1), grown.slice(-2))
      assert.isUndefined(yield* beforeModel(mw, grown))
      // another thread was not forced
      assert.isUndefined(yield* beforeModel(mw, turns(3), "other"))
      // a thread deleted after an overflow is not forced when its id is used again
      yield* Effect.scoped(mw.wrapModelCall!(request(history, "gone"), nextFailing(1).next))
      yield* mw.onThreadDeleted!("gone", Option.none())
      assert.isUndefined(yield* beforeModel(mw, grown, "gone"))
    }).pipe(Effect.provide(Summarizer), Effect.provide(TokenCounter.layerApproximate())))

  it.effect("fails with ContextOverflow when the summarized request overflows too", () =>
    Effect.gen(function*() {
      const mw = yield* built(Summarization.middleware({ trigger: { tokens: 1_000_000 }, keep: { messages: 2 } }))
      const { next, seen } = nextFailing(2)
      const error = yield* Effect.flip(Effect.scoped(mw.wrapModelCall!(request(turns(4)), next))).pipe(
        Effect.provide(ModelProfile.layerModel("gpt-4o-mini"))
      )
      assert.strictEqual(seen.length, 2)
      const overflow = error as ContextOverflow.ContextOverflow
      assert.deepStrictEqual(
        [overflow._tag, overflow.model, overflow.compacted, overflow.messages, overflow.limit, overflow.reportedTokens],
        ["ContextOverflow", "gpt-4o-mini", true, 3, 128_000, 130_000]
      )
      assert.strictEqual(overflow.measuredTokens, yield* TokenCounter.count(seen[1]!))
    }).pipe(Effect.provide(Summarizer), Effect.provide(TokenCounter.layerApproximate())))

  it.effect("with only the kept window left, nothing is summarized and it fails at once", () =>
    Effect.gen(function*() {
      const mw = yield* built(Summarization.middleware({ trigger: { tokens: 1_000_000 }, keep: { messages: 2 } }))
      const { next, seen } = nextFailing(1)
      const error = yield* Effect.flip(Effect.scoped(mw.wrapModelCall!(request(turns(1)), next)))
      assert.strictEqual(seen.length, 1)
      assert.deepStrictEqual([error._tag, (error as ContextOverflow.ContextOverflow).compacted], [
        "ContextOverflow",
        false
      ])
    }).pipe(Effect.provide(Summarizer), Effect.provide(TokenCounter.layerApproximate())))

  it.effect("onOverflow: \"fail\" adds no wrapModelCall: the provider's error goes through", () =>
    Effect.gen(function*() {
      const mw = yield* built(
        Summarization.middleware({ trigger: { tokens: 10 }, keep: { messages: 2 }, onOverflow: "fail" })
      )
      assert.isUndefined(mw.wrapModelCall)
    }))
})

describe("calibrate", () => {
  it.effect("calibrates the counter with the provider's reported input tokens, so the trigger sees them", () =>
    Effect.gen(function*() {
      const history = turns(5) // 55 tokens by the approximate counter
      const systemPrompt = "You are a planner. ".repeat(10)
      const answering = (inputTokens: number): Middleware.NextModelCall => () =>
        Effect.succeed(
          Middleware.modelResponse("ok", {
            usage: new Response.Usage({ inputTokens, outputTokens: 1, totalTokens: inputTokens + 1 })
          })
        )
      for (const calibrate of [true, false]) {
        const counter = yield* TokenCounter.makeApproximate()
        const mw = yield* built(
          Summarization.middleware({ trigger: { tokens: 100 }, keep: { messages: 1 }, calibrate })
        )
        const run = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
          Effect.provideService(effect, TokenCounter.TokenCounter, counter)
        assert.isUndefined(yield* run(beforeModel(mw, history)))
        const raw = yield* counter.count([Prompt.makeMessage("system", { content: systemPrompt }), ...history])
        // the system prompt and the tools the stored messages leave out: the provider counts 220
        yield* run(Effect.scoped(mw.wrapModelCall!({ ...request(history), systemPrompt }, answering(220))))
        assert.strictEqual(yield* counter.scale, calibrate ? 220 / raw : 1)
        const out = yield* run(beforeModel(mw, history))
        assert.strictEqual(out?.length, calibrate ? 2 : undefined)
      }
    }).pipe(Effect.provide(Summarizer)))
})
