/**
 * A script of the wrong kind, from JavaScript: the scripted model fails
 * the request with an `AiError` saying what is wrong (as it does when the
 * script runs out), never a defect.
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Exit } from "effect"

const wrong: ReadonlyArray<readonly [string, unknown]> = [
  ["a number", 42],
  ["null", null],
  ["undefined", undefined],
  ["an object", { a: 1 }],
  ["a symbol", Symbol("s")],
  ["an object without a prototype", Object.create(null)]
]

const runWith = (script: unknown) =>
  Effect.flatMap(Agent.make({}), (agent) => agent.run("hi", { threadId: "t" })).pipe(
    Effect.provide(ScriptedModel.layer(script as ReadonlyArray<ScriptedModel.Turn>)),
    Effect.exit
  )

describe("ScriptedModel given a script of the wrong kind", () => {
  it.effect("a script that is not an array, a turn that is not one, a function's result that is not one", () =>
    Effect.gen(function*() {
      for (const [label, value] of wrong) {
        for (
          const [which, script, says] of [
            ["script", value, "The script must be an array of turns"],
            ["turn", [value], "Turn 0 of the script must be"],
            ["function", [() => value], "Turn 0 of the script must be"]
          ] as const
        ) {
          const exit = yield* runWith(script)
          assert.isTrue(Exit.isFailure(exit), `${which}: ${label}`)
          if (Exit.isFailure(exit)) {
            const error = yield* Effect.flip(exit)
            assert.strictEqual((error as { _tag: string })._tag, "UnknownError", `${which}: ${label}`)
            assert.include((error as Error).message, says, `${which}: ${label}`)
          }
        }
      }
    }))
})
