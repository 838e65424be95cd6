import { LanguageModel } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Stream } from "effect"
import * as v8 from "node:v8"
import * as vm from "node:vm"

v8.setFlagsFromString("--expose-gc")
const gc = vm.runInNewContext("gc") as () => void

/** Twelve echo calls, then an answer; unlike `ScriptedModel`, it keeps no request. */
const forgetfulModel = Layer.effect(
  LanguageModel.LanguageModel,
  Effect.suspend(() => {
    let call = 0
    const reply = () =>
      call++ < 12
        ? ScriptedModel.toolCalls([{ name: "echo", params: { text: `${call}` } }])
        : ScriptedModel.text("done")
    return LanguageModel.make({
      generateText: () => Effect.sync(() => [...reply()]),
      streamText: () => Stream.dieMessage("the test does not stream")
    })
  })
)

/** Two collections after the current macrotask, so a finished fiber holds nothing. */
const collect = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10))).pipe(
  Effect.zipRight(Effect.sync(() => {
    gc()
    gc()
  }))
)

describe("what a thread keeps alive", () => {
  it.effect("the message arrays of earlier steps are not kept once the run moved on (no memory quadratic in the thread)", () =>
    Effect.gen(function*() {
      const seen: Array<WeakRef<ReadonlyArray<unknown>>> = []
      const watch = Middleware.make({
        name: "watch",
        beforeModel: ({ messages }) => Effect.sync(() => void seen.push(new WeakRef(messages)))
      })
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, middleware: [watch], maxSteps: 20 })
      const result = yield* agent.run("go", { threadId: "long" })
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(seen.length, 13)
      yield* collect
      // the thread itself is alive (stored, and in `result`); none of the arrays the model saw at steps 1–12 is:
      // what records which array extends which holds no array
      const kept = seen.slice(0, 12).map((ref) => ref.deref() !== undefined)
      assert.deepStrictEqual(kept, Array.from({ length: 12 }, () => false))
      assert.strictEqual(result.state.messages.length, 26)
    }).pipe(
      Effect.provide(Layer.mergeAll(
        forgetfulModel,
        Fixtures.echoLayer,
        Checkpointer.layerMemory
      ))
    ))
})
