/**
 * `RunJournal.Service`'s `stepWitnessed`: a journal that replays steps
 * without running them keeps what a recorder saw inside each step (the
 * decisions reported and the hooks completed there) with the step's result,
 * and gives it back when it replays the step, so a recording over it comes
 * out the same whether the steps ran or were replayed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware, RunJournal, RunRecord } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Schema } from "effect"
import { Calculator } from "./utils.js"

const script: ReadonlyArray<ScriptedModel.Turn> = [
  ScriptedModel.toolCalls([{ id: "call_1", name: "add", params: { a: 2, b: 3 } }]),
  ScriptedModel.toolCalls([{ id: "call_2", name: "add", params: { a: 5, b: 7 } }]),
  ScriptedModel.text("12")
]

/** Reports a decision inside each model call and tool call, whose hooks complete there. */
const audit = Middleware.make({
  name: "audit",
  wrapModelCall: (request, next) => Effect.zipRight(Middleware.report("calling the model"), next(request)),
  wrapToolCall: (request, next) =>
    Effect.zipRight(Middleware.report(`running ${request.call.name}`, { callId: request.call.id }), next(request))
})

/**
 * A journal that replays: the first run of a step runs it and keeps its result (with what was witnessed inside it,
 * through `stepWitnessed`), encoded; every later run of it gives that back without running it. Counts the runs.
 */
const replayingJournal = (witnessing: boolean) => {
  const kept = new Map<string, unknown>()
  const ran = { steps: 0 }
  const keep = <J, E, R>(
    name: string,
    schema: Schema.Schema<J, any>,
    effect: Effect.Effect<J, E, R>
  ): Effect.Effect<J, E, R> => {
    if (kept.has(name)) return Effect.orDie(Schema.decodeUnknown(schema)(kept.get(name)))
    return Effect.tap(effect, (value) =>
      Effect.sync(() => {
        ran.steps++
        kept.set(name, Schema.encodeSync(schema)(value))
      }))
  }
  const journal = RunJournal.RunJournal.of({
    ...RunJournal.inProcess,
    durable: true,
    step: (key, effect) => keep(RunJournal.stepName(key), key.schema, effect),
    ...(witnessing
      ? {
        stepWitnessed: (key, effect) =>
          keep(RunJournal.stepName(key), Schema.Tuple(key.schema, RunJournal.Witnessed), effect)
      }
      : {})
  })
  return { journal, ran }
}

/** The entries of a recording over `journal` of the script on thread "t", without timing. */
const recordedOver = (journal: RunJournal.Service) =>
  Effect.gen(function*() {
    const entries: Array<RunRecord.Entry> = []
    const { journal: recording } = RunRecord.recording(journal, {
      put: (slot, entry) => Effect.sync(() => void (entries[slot] = entry)),
      input: () => Effect.void
    })
    const agent = yield* Agent.make({ toolkit: Calculator, middleware: [audit] })
    yield* agent.run("What is 2 + 3 + 7?", { threadId: "t" }).pipe(
      Effect.provideService(RunJournal.RunJournal, recording)
    )
    // (the request as sent and the reply of a model call are only in the run that made it)
    return entries.map((entry) =>
      entry._tag === "Step"
        ? { ...entry, sent: undefined, reply: undefined, startedAt: 0, durationMillis: 0 }
        : entry._tag === "Hook"
        ? { ...entry, durationMillis: 0 }
        : entry
    )
  }).pipe(
    Effect.provide(Layer.merge(
      ScriptedModel.layer(script),
      Calculator.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })
    ))
  )

describe("RunRecord.recording over a journal that replays its steps", () => {
  it.effect("with stepWitnessed: a replayed run is recorded as the run that ran its steps, the decisions and hooks inside its calls included", () =>
    Effect.gen(function*() {
      const { journal, ran } = replayingJournal(true)
      const first = yield* recordedOver(journal)
      const steps = ran.steps
      const again = yield* recordedOver(journal)
      // the second run replayed every step: none ran
      assert.strictEqual(ran.steps, steps)
      const inSteps = first.flatMap((entry) =>
        entry._tag === "Hook" || entry._tag === "Decision" ? [[entry._tag, entry.hook, entry.inStep]] : []
      )
      assert.deepStrictEqual(inSteps, [
        ["Decision", "wrapModelCall", "model/0"],
        ["Decision", "wrapToolCall", "tool/call_1"],
        ["Hook", "wrapToolCall", "tool/call_1"],
        ["Decision", "wrapModelCall", "model/1"],
        ["Decision", "wrapToolCall", "tool/call_2"],
        ["Hook", "wrapToolCall", "tool/call_2"],
        ["Decision", "wrapModelCall", "model/2"]
      ])
      assert.deepStrictEqual(again, first)
    }))

  it.effect("without it: the record keeps no hooks, and a replayed call's decisions are the run's that ran it", () =>
    Effect.gen(function*() {
      const { journal } = replayingJournal(false)
      const first = yield* recordedOver(journal)
      assert.isFalse(first.some((entry) => entry._tag === "Hook"))
      const again = yield* recordedOver(journal)
      assert.isFalse(again.some((entry) => entry._tag === "Decision" && entry.inStep !== undefined))
    }))
})
