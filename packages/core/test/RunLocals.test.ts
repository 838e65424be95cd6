/**
 * What a run sets on its fiber for its duration: the context the agent
 * captured when it was made, and its thread id on every span it makes
 * (`threadId` span annotation). Both hold inside the run (in its tool
 * handlers too), and the fiber that ran it gets its own back however the run
 * ends (`internal/fast/withContext.ts`, `locally`).
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Context, Effect, Exit, FiberRef, HashMap, Layer, Option, Schema } from "effect"

class Greeting extends Context.Tag("test/RunLocals/Greeting")<Greeting, string>() {}

const Look = Tool.make("look", { parameters: {}, success: Schema.String })
const Kit = Toolkit.make(Look)

/** What the fiber holds: the agent's service, and the span annotations' thread id. */
const seen = Effect.gen(function*() {
  const context = yield* Effect.context<never>()
  const annotations = yield* FiberRef.get(FiberRef.currentTracerSpanAnnotations)
  return {
    greeting: Option.getOrUndefined(Context.getOption(context, Greeting)),
    threadId: Option.getOrUndefined(HashMap.get(annotations, "threadId"))
  }
})

const inside: Array<{ readonly greeting: string | undefined; readonly threadId: unknown }> = []

/** `look` records what its handler sees; `fail` makes it die. */
const KitLive = (fail: boolean) =>
  Kit.toLayer({
    look: () =>
      Effect.flatMap(seen, (what) => {
        inside.push(what)
        return fail ? Effect.die("the tool broke") : Effect.succeed("seen")
      })
  })

const agentOf = (fail: boolean) =>
  Agent.make({ toolkit: Kit }).pipe(
    Effect.provide(Layer.mergeAll(
      KitLive(fail),
      ScriptedModel.layer([
        ScriptedModel.toolCalls([{ name: "look", params: {}, id: "c1" }]),
        ScriptedModel.text("ok")
      ]),
      Layer.succeed(Greeting, "hello"),
      Layer.effect(Checkpointer.Checkpointer, Checkpointer.makeMemory)
    ))
  )

describe("what a run sets on its fiber", () => {
  for (const fail of [false, true]) {
    it.effect(`the agent's context and the thread id hold inside the run and are gone after it (${fail ? "the run fails" : "the run succeeds"})`, () =>
      Effect.gen(function*() {
        inside.length = 0
        const agent = yield* agentOf(fail)
        const exit = yield* Effect.exit(agent.run("look", { threadId: "t-locals" }))
        assert.strictEqual(Exit.isSuccess(exit), !fail)
        assert.deepStrictEqual(inside, [{ greeting: "hello", threadId: "t-locals" }])
        assert.deepStrictEqual(yield* seen, { greeting: undefined, threadId: "outer" })
      }).pipe(Effect.annotateSpans("threadId", "outer")))
  }
})
