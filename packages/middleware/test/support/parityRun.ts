/**
 * The harness of the LangChain parity cases whose tools log their runs: a
 * scripted model, the memory checkpointer, and the tools made by `tools`
 * over the log of runs `body` reads.
 */
import { Checkpointer } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Ref } from "effect"

/** Runs `body` with the model answering `script` and the tools of `tools`, logging into the log it gets. */
export const runLogged = <Tools, R>(
  script: ReadonlyArray<ScriptedModel.Turn>,
  tools: (runs: Ref.Ref<ReadonlyArray<string>>) => Layer.Layer<Tools>,
  body: (runs: Ref.Ref<ReadonlyArray<string>>) => Effect.Effect<void, unknown, R>
) =>
  Effect.gen(function*() {
    const runs = yield* Ref.make<ReadonlyArray<string>>([])
    yield* body(runs).pipe(
      Effect.provide(Layer.mergeAll(ScriptedModel.layer(script), Checkpointer.layerMemory, tools(runs)))
    )
  })
