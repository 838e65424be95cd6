/**
 * Variants of issue 33's secrets and tool-argument findings (items 1 and 19)
 * that the first fixes did not name: header names in other casings and
 * names no list holds, a key quoted in one branch of a cause and sent in
 * another, a key read as `Config.redacted`; arguments nested very deep, very
 * long, with a `__proto__` key, and two invalid calls in one reply.
 */
import * as AiError from "@effect/ai/AiError"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Secrets } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Cause, Config, ConfigProvider, Effect, FiberId, Layer, Option, Redacted } from "effect"
import { Calculator, CalculatorLive, toolResults } from "./utils.js"

const key = "Vx9kQ2mW7pL4zR8tN3bY"

/** @effect/ai's error for a response to a request that sent `headers`, its body quoting `body`. */
const responseError = (headers: Record<string, string>, body: string) =>
  new AiError.HttpResponseError({
    module: "OpenAiClient",
    method: "createResponse",
    reason: "StatusCode",
    request: {
      method: "POST",
      url: "https://gw.example.com/v1/responses",
      urlParams: [],
      hash: Option.none(),
      headers
    },
    response: { status: 401, headers: {} },
    body
  })

const shown = (value: unknown) =>
  [String(value), JSON.stringify(value), value instanceof Error ? value.message : ""].join("\n")

describe("secrets: variants", () => {
  it.each([
    ["OCP-APIM-SUBSCRIPTION-KEY", key],
    ["X-FUNCTIONS-KEY", key],
    ["X-Key", key],
    // a name no list holds, a value of no credential's shape: a request's headers are all credentials
    ["X-Acme-Gateway", "open-sesame"],
    ["x-tenant-pass-phrase", "correct horse battery"]
  ])("a header %s a client layer set: redacted in the request and wherever the error quotes it", (name, value) => {
    const error = responseError({ [name]: value }, `gateway: ${name} "${value}" is not valid`)
    const scrubbed = Secrets.scrubError(error)
    assert.notInclude(shown(scrubbed), value)
    assert.notInclude(Cause.pretty(Cause.fail(scrubbed)), value)
  })

  it("a key sent in one branch of a cause and quoted in another (parallel, sequential, a defect) is replaced in all", () => {
    const sent = responseError({ "x-key": key }, "refused")
    const quoted = new Error(`retry failed: the gateway said ${key} is revoked`)
    for (
      const cause of [
        Cause.parallel(Cause.fail(sent), Cause.die(quoted)),
        Cause.sequential(Cause.die(quoted), Cause.fail(sent)),
        Cause.sequential(Cause.fail(quoted), Cause.parallel(Cause.interrupt(FiberId.none), Cause.die(sent)))
      ]
    ) {
      assert.notInclude(Cause.pretty(Secrets.scrubCause(cause)), key)
    }
  })

  it.effect("a key read as Config.redacted and made known with Secrets.layer is replaced in any text", () =>
    Effect.gen(function*() {
      const provider = ConfigProvider.fromMap(new Map([["GATEWAY_KEY", key]]))
      const known = Layer.unwrapEffect(Effect.map(Config.redacted("GATEWAY_KEY"), (value) => Secrets.layer(value)))
      const scrubbed = yield* Effect.sync(() => Secrets.scrubText(`the tool printed ${key} and "${key}"`)).pipe(
        Effect.provide(known),
        Effect.withConfigProvider(provider)
      )
      assert.notInclude(scrubbed, key)
    }))

  it("a Redacted value in an error's cause (in a Map) is replaced wherever the error quotes it", () => {
    const error = new Error(`auth failed for ${key}`, { cause: new Map([["gateway", Redacted.make(key)]]) })
    assert.notInclude(shown(Secrets.scrubError(error)), key)
  })
})

describe("tool arguments: variants", () => {
  const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
    Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))
  const good = ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "good" }])

  it.effect.each([
    ["JSON nested 100,000 levels deep", `${"[".repeat(100_000)}${"]".repeat(100_000)}`],
    ["text of 2 MB that is not JSON", `{"a": ${"9".repeat(2_000_000)}`],
    ["a __proto__ key", `{"__proto__": {"a": 1, "b": 2}}`],
    ["JSON with a trailing comma", `{"a": 1, "b": 2,}`]
  ])("%s: a failed result the model repairs; the run goes on", ([, params]) =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator })
      const result = yield* agent.run("1 + 2?", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const [failed, repaired] = toolResults(result.state.messages)
      assert.isTrue(failed!.isFailure)
      assert.isAtMost(JSON.stringify(failed!.result).length, 1200)
      assert.strictEqual(repaired!.result, 3)
    }).pipe(provide([ScriptedModel.toolCalls([{ name: "add", params, id: "bad" }]), good, ScriptedModel.text("3")])))

  it.effect("two invalid calls in one reply count as one repair; each gets its failed result", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, maxToolCallRepairs: 1 })
      const result = yield* agent.run("1 + 2?", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const results = toolResults(result.state.messages)
      assert.deepStrictEqual(results.map((part) => part.isFailure), [true, true, false])
    }).pipe(provide([
      ScriptedModel.toolCalls([
        { name: "add", params: `{"a"`, id: "b1" },
        { name: "add", params: { a: "one", b: 2 }, id: "b2" }
      ]),
      good,
      ScriptedModel.text("3")
    ])))
})
