import { assert, describe, it } from "@effect/vitest"
import { Effect, FastCheck, Layer, Option } from "effect"
import * as ModelProfile from "../src/ModelProfile.js"

const windowOf = (model: string) =>
  Effect.map(ModelProfile.lookup(model), Option.map((profile) => profile.maxInputTokens))

describe("ModelProfile", () => {
  it.effect("the built-in table answers without a layer", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        yield* ModelProfile.lookup("gpt-4o"),
        Option.some({ contextWindow: 128_000, maxInputTokens: 128_000, maxOutputTokens: 16_384 })
      )
      // gpt-5 takes 272k of its 400k window as input
      assert.deepStrictEqual(
        yield* ModelProfile.lookup("gpt-5"),
        Option.some({ contextWindow: 400_000, maxInputTokens: 272_000, maxOutputTokens: 128_000 })
      )
      assert.deepStrictEqual(yield* windowOf("claude-sonnet-4-5"), Option.some(200_000))
    }))

  it.effect("dated snapshots, aliases, provider prefixes and case find their entry; the longest entry wins", () =>
    Effect.gen(function*() {
      const output = (model: string) =>
        Effect.map(ModelProfile.lookup(model), Option.map((profile) => profile.maxOutputTokens))
      // gpt-4o-mini-… is gpt-4o-mini's snapshot, not gpt-4o's (same window, so compare outputs of other pairs)
      assert.deepStrictEqual(yield* output("gpt-4o-mini-2024-07-18"), Option.some(16_384))
      assert.deepStrictEqual(yield* output("claude-opus-4-1-20250805"), Option.some(32_000))
      assert.deepStrictEqual(yield* output("claude-opus-4-5-20251101"), Option.some(64_000))
      assert.deepStrictEqual(yield* output("claude-sonnet-4-0"), Option.some(64_000))
      assert.deepStrictEqual(yield* output("o1-mini-2024-09-12"), Option.some(65_536))
      assert.deepStrictEqual(yield* output("o1-2024-12-17"), Option.some(100_000))
      assert.deepStrictEqual(yield* output("gpt-5-chat-latest"), Option.some(16_384))
      assert.deepStrictEqual(yield* windowOf("openai/GPT-4.1-mini"), Option.some(1_047_576))
      assert.deepStrictEqual(yield* windowOf("claude-3-5-haiku-latest"), Option.some(200_000))
    }))

  it("lookupIn matches names in any table as profiles do", () => {
    const priceOf = ModelProfile.lookupIn({ "gpt-4o": 2.5, "GPT-4o-mini": 0.15 })
    assert.deepStrictEqual(priceOf("gpt-4o"), Option.some(2.5))
    assert.deepStrictEqual(priceOf("openai/gpt-4o-mini-2024-07-18"), Option.some(0.15))
    assert.deepStrictEqual(priceOf("gpt-4o-2024-08-06"), Option.some(2.5))
    assert.deepStrictEqual(priceOf("gpt-4"), Option.none())
    assert.deepStrictEqual(priceOf("gpt-4oo"), Option.none())
  })

  it.effect("an unknown model, a name that only shares a prefix, and no name at all find nothing", () =>
    Effect.gen(function*() {
      assert.isTrue(Option.isNone(yield* ModelProfile.lookup("llama-3.1-8b")))
      // "gpt-4ox" is not a snapshot of "gpt-4o": the entry must be followed by "-"
      assert.isTrue(Option.isNone(yield* ModelProfile.lookup("gpt-4ox")))
      assert.isTrue(Option.isNone(yield* ModelProfile.lookup()))
    }))

  it.effect("the current model is the one layerModel or model names", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* windowOf("o3"), Option.some(200_000))
      const current = ModelProfile.lookup().pipe(Effect.map(Option.map((profile) => profile.maxInputTokens)))
      assert.deepStrictEqual(yield* Effect.provide(current, ModelProfile.layerModel("o3")), Option.some(200_000))
      const built: Array<string> = []
      const layer = ModelProfile.model("gpt-4o-2024-08-06", (name) => {
        built.push(name)
        return Layer.empty as Layer.Layer<never>
      })
      assert.deepStrictEqual(yield* Effect.provide(current, layer), Option.some(128_000))
      assert.deepStrictEqual(built, ["gpt-4o-2024-08-06"])
    }))

  it.effect("layerOverride adds and corrects entries; layer replaces the table", () =>
    Effect.gen(function*() {
      const override = ModelProfile.layerOverride({
        "gpt-4o": { contextWindow: 64_000, maxOutputTokens: 16_384 },
        "llama-3.1-8b": { contextWindow: 131_072, maxInputTokens: 120_000, maxOutputTokens: 8_192 }
      })
      const [gpt4o, llama, claude] = yield* Effect.all([
        windowOf("gpt-4o-2024-08-06"),
        windowOf("llama-3.1-8b"),
        windowOf("claude-3-7-sonnet-latest")
      ]).pipe(Effect.provide(override))
      assert.deepStrictEqual([gpt4o, llama, claude], [Option.some(64_000), Option.some(120_000), Option.some(200_000)])
      const only = ModelProfile.layer({ "llama-3.1-8b": { contextWindow: 131_072, maxOutputTokens: 8_192 } })
      const [onlyLlama, onlyGpt] = yield* Effect.all([windowOf("llama-3.1-8b"), windowOf("gpt-4o")]).pipe(
        Effect.provide(only)
      )
      assert.deepStrictEqual([onlyLlama, onlyGpt], [Option.some(131_072), Option.none()])
    }))

  it.effect("a bad entry fails with InvalidOptions naming it", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [ModelProfile.Table, string]> = [
        [{ "m": { contextWindow: 0, maxOutputTokens: 1 } }, "\"m\".contextWindow"],
        [{ "m": { contextWindow: 1000, maxOutputTokens: 1.5 } }, "\"m\".maxOutputTokens"],
        [{ "m": { contextWindow: 1000, maxOutputTokens: 10, maxInputTokens: 1001 } }, "\"m\".maxInputTokens"],
        [{ "m": { contextWindow: Number.NaN, maxOutputTokens: 10 } }, "\"m\".contextWindow"]
      ]
      for (const [table, option] of cases) {
        const error = yield* Effect.flip(ModelProfile.make(table))
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.strictEqual(error.module, "ModelProfile")
        assert.strictEqual(error.option, option)
      }
      const fromLayer = yield* Effect.flip(Effect.provide(ModelProfile.lookup("m"), ModelProfile.layer(cases[0]![0])))
      assert.strictEqual(fromLayer.option, "\"m\".contextWindow")
    }))

  it.effect.prop(
    "every built-in entry is found by its name and by any dated snapshot of it",
    {
      key: FastCheck.constantFrom(...Object.keys(ModelProfile.builtIn)),
      date: FastCheck.date({ min: new Date("2023-01-01"), max: new Date("2030-12-31"), noInvalidDate: true }),
      dashed: FastCheck.boolean()
    },
    ({ dashed, date, key }) =>
      Effect.gen(function*() {
        const iso = date.toISOString().slice(0, 10)
        const snapshot = `${key}-${dashed ? iso : iso.replace(/-/g, "")}`
        const entry = ModelProfile.builtIn[key]!
        const expected = {
          contextWindow: entry.contextWindow,
          maxInputTokens: entry.maxInputTokens ?? entry.contextWindow,
          maxOutputTokens: entry.maxOutputTokens
        }
        assert.deepStrictEqual(yield* ModelProfile.lookup(key), Option.some(expected))
        assert.deepStrictEqual(yield* ModelProfile.lookup(snapshot), Option.some(expected))
        assert.isTrue(expected.maxInputTokens <= expected.contextWindow)
      })
  )
})
