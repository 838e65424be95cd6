/**
 * `Middleware.runSaves`: a finalizer a hook adds to the run's scope reads the
 * state of the run's last save the store accepted, whatever way the run
 * ended; outside a run there is none.
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Exit, Layer, Option, Schema } from "effect"

const Step = Tool.make("step", { parameters: {}, success: Schema.String })
const Steps = Toolkit.make(Step)

/**
 * A middleware counting its `beforeModel` calls in its slice; each call adds a finalizer that records the
 * count the run's last save holds when the run ends (`none` before any save).
 */
const counting = (seen: Array<string>) =>
  Middleware.make({
    name: "counting",
    state: { schema: Schema.Struct({ count: Schema.Number }), initial: { count: 0 } },
    beforeModel: ({ state }) =>
      Effect.gen(function*() {
        const saves = yield* Middleware.runSaves
        assert.isTrue(Option.isSome(saves), "a hook runs in a run")
        yield* Effect.addFinalizer((exit) =>
          Effect.sync(() => {
            const saved = Option.getOrThrow(saves).state()
            seen.push(`${exit._tag}:${Option.isSome(saved) ? String(saved.value.count) : "none"}`)
          })
        )
        return { state: { count: state.count + 1 } }
      }),
    wrapToolCall: (request, next) =>
      Effect.flatMap(Middleware.runSaves, (saves) => {
        assert.isTrue(Option.isSome(saves), "a tool call's hook runs in the run too")
        return next(request)
      })
  })

/** An agent with `counting`, its model answering from `script`, its tool `step` running `tool`. */
const agentWith = (seen: Array<string>, script: ReadonlyArray<ScriptedModel.Turn>, tool: () => Effect.Effect<string>) =>
  Agent.make({ toolkit: Steps, middleware: [counting(seen)] }).pipe(
    Effect.provide(Layer.merge(ScriptedModel.layer(script), Steps.toLayer({ step: () => Effect.suspend(tool) })))
  )

describe("Middleware.runSaves", () => {
  it.effect("outside a run there is none", () =>
    Effect.gen(function*() {
      assert.isTrue(Option.isNone(yield* Middleware.runSaves))
    }))

  it.effect("a completed run: its finalizers read the state of its last save, the one it ended with", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const agent = yield* agentWith(
        seen,
        [ScriptedModel.toolCalls([{ name: "step", params: {} }]), ScriptedModel.text("done")],
        () => Effect.succeed("ok")
      )
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual((result.state as { readonly count: number }).count, 2)
      assert.deepStrictEqual(seen, ["Success:2", "Success:2"])
    }))

  it.effect("a run that fails after a save: its finalizers read the state that save held, not the later one", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      let calls = 0
      const agent = yield* agentWith(
        seen,
        [
          ScriptedModel.toolCalls([{ name: "step", params: {} }]),
          ScriptedModel.toolCalls([{ name: "step", params: {} }])
        ],
        () => ++calls === 1 ? Effect.succeed("ok") : Effect.die("the tool broke")
      )
      const exit = yield* Effect.exit(agent.run("go", { threadId: "t" }))
      assert.isTrue(Exit.isFailure(exit))
      // the first tool step saved count 1; the second model step's count 2 was never saved
      assert.deepStrictEqual(seen, ["Failure:1", "Failure:1"])
      const stored = Option.getOrThrow(yield* agent.thread("t")).state as { readonly count: number }
      assert.strictEqual(stored.count, 1)
    }))

  it.effect("a run on a stored thread that fails before a save of its own reads none: the thread is as loaded", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const agent = yield* agentWith(
        seen,
        [ScriptedModel.text("first"), ScriptedModel.toolCalls([{ name: "step", params: {} }])],
        () => Effect.die("the tool broke")
      )
      yield* agent.run("one", { threadId: "t" })
      seen.length = 0
      assert.isTrue(Exit.isFailure(yield* Effect.exit(agent.run("two", { threadId: "t" }))))
      assert.deepStrictEqual(seen, ["Failure:none"])
      const stored = Option.getOrThrow(yield* agent.thread("t")).state as { readonly count: number }
      assert.strictEqual(stored.count, 1, "the first run's save stands")
    }))
})
