/**
 * A key `Inspector.make` / `Inspector.layer` or `TraceExport.layer` does not
 * know (a typo, an option of another tool) fails with the module's typed
 * error naming it and the keys it knows: `InspectorError` before anything
 * listens, `InvalidOptions` before any span is exported. Before, the key was
 * ignored (`{ prot: 4317 }` listened on a port the system picked).
 */
import { FetchHttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Inspector, TraceExport } from "@stepwise-agent/inspector"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Cause, Effect, Exit, FastCheck, Layer, Option } from "effect"

const failureOf = (label: string, effect: Effect.Effect<unknown, unknown, any>) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(Effect.scoped(effect))
    if (Exit.isSuccess(exit)) return assert.fail(`${label}: succeeded`)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isNone(failure)) return assert.fail(`${label}: died: ${Cause.pretty(exit.cause).slice(0, 300)}`)
    return failure.value as { readonly _tag: string; readonly option?: string; readonly message: string }
  })

const inspectorKeys = ["prot", "hostname", "maxEvent", "cors", "open", "basePath"]
const traceKeys = ["endpoint", "serviceNam", "exportIntervalMillis", "resource", "bogus"]

describe("options with a key the call does not know", () => {
  it.effect(
    "Inspector.make and Inspector.layer fail with InspectorError naming the key, before listening",
    () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({})
        for (const key of inspectorKeys) {
          for (
            const [via, build] of [
              ["make", Inspector.make(agent, { port: 0, [key]: 1 } as any)],
              [
                "layer",
                Layer.build(Inspector.layer({ [key]: 1 } as any)).pipe(Effect.provideService(Agent.Agent, agent))
              ]
            ] as const
          ) {
            const error = yield* failureOf(`${via} ${key}`, build)
            assert.strictEqual(error._tag, "InspectorError", `${via} ${key}: ${error.message}`)
            assert.include(error.message, `the option "${key}" is unknown; expected`)
            assert.include(error.message, "\"maxRequests\"")
          }
        }
      }).pipe(Effect.provide(ScriptedModel.layer([]))),
    60_000
  )

  it.effect(
    "TraceExport.layer fails with InvalidOptions naming the key; options that are not an object too",
    () =>
      Effect.gen(function*() {
        for (const key of traceKeys) {
          const error = yield* failureOf(
            key,
            Layer.build(
              TraceExport.layer({ serviceName: "s", [key]: 1 } as any).pipe(Layer.provide(FetchHttpClient.layer))
            )
          )
          assert.strictEqual(error._tag, "InvalidOptions", error.message)
          assert.strictEqual(error.option, key)
          assert.include(error.message, "is unknown; expected")
          assert.include(error.message, "\"exportInterval\"")
        }
        const notObject = yield* failureOf(
          "a string",
          Layer.build(TraceExport.layer("http://collector" as any).pipe(Layer.provide(FetchHttpClient.layer)))
        )
        assert.strictEqual(notObject._tag, "InvalidOptions")
        assert.include(notObject.message, "must be an object")
      }),
    60_000
  )

  it.effect.prop(
    "any key outside Inspector's options is refused, naming it",
    { key: FastCheck.string({ minLength: 1, maxLength: 20 }) },
    ({ key }) =>
      Effect.gen(function*() {
        const known = ["port", "host", "maxEvents", "resume", "allowedHosts", "maxBodyBytes", "bodyTimeout"]
        if (known.includes(key) || key === "storedThreads" || key === "maxRequests") return
        const agent = yield* Agent.make({})
        const error = yield* failureOf(key, Inspector.make(agent, { [key]: 1 } as any))
        assert.include(error.message, `the option ${JSON.stringify(key)} is unknown`)
      }).pipe(Effect.provide(ScriptedModel.layer([]))),
    { timeout: 60_000, fastCheck: { numRuns: 30 } }
  )
})
