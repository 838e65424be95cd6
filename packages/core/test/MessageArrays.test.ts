/**
 * The loop appends to a thread's message array in place while only it has
 * seen the array (`Lineage.extendUnseen`); every array anyone else was given —
 * a hook, the model, a result — must stay as it was given.
 */
import type { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Effect, FastCheck, Layer, Stream } from "effect"

/** An array as it was given, to compare it with later. */
interface Given {
  readonly where: string
  readonly array: ReadonlyArray<Prompt.Message>
  readonly elements: ReadonlyArray<Prompt.Message>
}

const unchanged = (given: ReadonlyArray<Given>) => {
  for (const { array, elements, where } of given) {
    assert.strictEqual(array.length, elements.length, `${where}: the array changed length`)
    array.forEach((message, i) => assert.strictEqual(message, elements[i], `${where}: message ${i} changed`))
  }
}

describe("message arrays", () => {
  it.effect.prop(
    "an array a hook, the model or a result was given never changes afterwards",
    {
      steps: FastCheck.array(FastCheck.nat({ max: 2 }), { maxLength: 4 }),
      beforeModel: FastCheck.boolean(),
      afterModel: FastCheck.boolean(),
      wrapToolCall: FastCheck.boolean(),
      stream: FastCheck.boolean()
    },
    ({ afterModel, beforeModel, steps, stream, wrapToolCall }) => {
      const run = [
        ...steps.map((calls, step) =>
          calls === 0
            ? ScriptedModel.toolCalls([{ name: "echo", params: { text: `${step}` } }])
            : ScriptedModel.toolCalls(
              Array.from({ length: calls + 1 }, (_, i) => ({ name: "echo", params: { text: `${step}.${i}` } }))
            )
        ),
        ScriptedModel.text("done")
      ]
      const turns = [...run, ...run]
      return Effect.gen(function*() {
        const given: Array<Given> = []
        const keep = (where: string, array: ReadonlyArray<Prompt.Message>) =>
          given.push({ where, array, elements: [...array] })
        const watch = Middleware.make({
          name: "watch",
          // what the model is sent, as it is sent
          wrapModelCall: (request, next) =>
            Effect.suspend(() => {
              keep("model", request.messages)
              return next(request)
            }),
          ...(beforeModel
            ? { beforeModel: ({ messages }) => Effect.sync(() => void keep("beforeModel", messages)) }
            : {}),
          ...(afterModel ? { afterModel: ({ messages }) => Effect.sync(() => void keep("afterModel", messages)) } : {}),
          ...(wrapToolCall
            ? {
              wrapToolCall: (request, next) =>
                Effect.suspend(() => {
                  keep("wrapToolCall", (request.state as { readonly messages: ReadonlyArray<Prompt.Message> }).messages)
                  return next(request)
                })
            }
            : {})
        })
        const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, middleware: [watch], maxSteps: 10 })
        const once = (input: string) =>
          stream
            ? Stream.runLast(agent.stream(input, { threadId: "t" })).pipe(
              Effect.flatMap((last) =>
                last._tag === "Some" && last.value._tag === "RunEnded"
                  ? Effect.succeed(last.value.result)
                  : Effect.dieMessage("the stream did not end with RunEnded")
              )
            )
            : agent.run(input, { threadId: "t" })
        const first = yield* once("go")
        keep("first result", first.state.messages)
        // a second run on the same thread appends to what the first one stored
        const second = yield* once("again")
        assert.strictEqual(first._tag, "Completed")
        assert.strictEqual(second.state.messages.length, 2 * first.state.messages.length)
        unchanged(given)
      }).pipe(Effect.provide(Layer.mergeAll(Fixtures.echoLayer, Checkpointer.layerMemory, ScriptedModel.layer(turns))))
    },
    { fastCheck: { numRuns: 60 } }
  )
})
