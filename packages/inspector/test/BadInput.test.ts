/**
 * Options of the wrong type, from JavaScript: `Inspector.make` fails with
 * `InspectorError` naming the option, before it listens — never a defect
 * (a symbol or an object without a prototype made a string in the message).
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Inspector } from "@stepwise-agent/inspector"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Cause, Effect, Exit, Option } from "effect"

const wrong: ReadonlyArray<readonly [string, unknown]> = [
  ["null", null],
  ["an object", { a: 1 }],
  ["an array", [1]],
  ["a symbol", Symbol("s")],
  ["a bigint", 10n],
  ["a function", () => 1],
  ["an object without a prototype", Object.create(null)]
]

describe("Inspector.make given options of the wrong type", () => {
  it.effect("InspectorError naming the option", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({})
      const options = ["host", "port", "maxEvents", "maxBodyBytes", "bodyTimeout", "allowedHosts", "maxRequests"]
      for (const option of options) {
        for (const [label, value] of wrong) {
          if (value === null) continue // stands for the default
          if (option === "allowedHosts" && Array.isArray(value)) continue // below
          if (option === "bodyTimeout" && typeof value === "bigint") continue // a duration in nanoseconds
          const exit = yield* Effect.exit(Effect.scoped(Inspector.make(agent, { [option]: value } as any)))
          assert.isTrue(Exit.isFailure(exit), `${option}: ${label}: listened`)
          const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
          assert.isTrue(Option.isSome(failure), `${option}: ${label}: died`)
          const error = Option.getOrThrow(failure)
          assert.strictEqual(error._tag, "InspectorError")
          assert.include(error.message, option, label)
        }
      }
      for (const [label, value] of [...wrong, ["a number", 42] as const]) {
        const exit = yield* Effect.exit(Effect.scoped(Inspector.make(agent, { allowedHosts: [value] } as any)))
        const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
        assert.isTrue(Option.isSome(failure), `allowedHosts[0]: ${label}`)
        assert.include(Option.getOrThrow(failure).message, "allowedHosts holds", label)
      }
      const notObject = yield* Effect.flip(Effect.scoped(Inspector.make(agent, 42 as any)))
      assert.include(notObject.message, "the options must be an object")
    }).pipe(Effect.provide(ScriptedModel.layer([]))))
})
