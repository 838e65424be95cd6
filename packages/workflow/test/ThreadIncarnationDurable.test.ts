/**
 * A durable run's decision binds to its thread's incarnation: a decision kept
 * from a run of a thread later deleted (`prune` with `deleteThread`) and made
 * again with the same id and an identical conversation is refused at the new
 * run's identical wait (`InvalidDecision` carrying a `DecisionError` of reason `"Stale"`), the run
 * still waits, and a decision built from the new run's request approves it.
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Effect, Layer, Option, Ref, Schema } from "effect"
import * as path from "node:path"
import { tempDirectory } from "./support/databases.js"

const Pay = Tool.make("pay", { parameters: { amount: Schema.Number }, success: Schema.String })
const Tools = Toolkit.make(Pay)

/** Each run: the model asks to pay 100 (call `call_1`), then answers once the call is answered. */
const turn: ScriptedModel.Turn = (request) =>
  request.prompt.content.at(-1)?.role === "user"
    ? ScriptedModel.toolCalls([{ name: "pay", params: { amount: 100 }, id: "call_1" }])
    : ScriptedModel.text("paid")

const stack = (filename: string, runs: AgentWorkflow.AgentWorkflow, paid: Ref.Ref<number>) =>
  runs.layer.pipe(
    Layer.provideMerge(Agent.layer({
      toolkit: Tools,
      middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { pay: true } })]
    })),
    Layer.provide(Layer.merge(
      ScriptedModel.layer(Array.from({ length: 20 }, () => turn)),
      Tools.toLayer({ pay: () => Effect.as(Ref.update(paid, (n) => n + 1), "paid") })
    )),
    Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
    Layer.provideMerge(Authorizer.layer(() => true)),
    Layer.provideMerge(AgentEngine.layerSqlite({ filename, pollInterval: "100 millis" }))
  )

/** The reason of the `HumanInTheLoop.DecisionError` a refused decision carries (matched by class). */
const staleReason = (error: { readonly _tag: string }) =>
  error instanceof AgentWorkflow.InvalidDecision && error.error instanceof HumanInTheLoop.DecisionError
    ? error.error.reason
    : undefined

const requestOf = (status: AgentWorkflow.RunStatus) =>
  Option.getOrThrow(Option.flatMap(
    status.pending,
    (wait) => Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)
  ))

describe("a durable decision binds to the thread's incarnation (SQLite)", () => {
  it.scopedLive(
    "after prune with deleteThread and an identical new run, the old run's decision is refused and the run still waits; its own decision approves it",
    () =>
      Effect.gen(function*() {
        const directory = yield* tempDirectory("stepwise-incarnation-")
        const paid = yield* Ref.make(0)
        const Runs = AgentWorkflow.make({ name: "incarnation", version: 1 })
        const context = yield* Layer.build(stack(path.join(directory, "runs.db"), Runs, paid))
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context) as Effect.Effect<A, E>

        const first = yield* run(Runs.start({ threadId: "t", input: "pay bob 100" }))
        const before = HumanInTheLoop.approveAll(requestOf(yield* run(Runs.await(first, { untilWaiting: true }))))
        yield* run(Runs.resume(first, before, { principal: "alice" }))
        assert.strictEqual((yield* run(Runs.await(first))).state, "Completed")
        assert.strictEqual(yield* Ref.get(paid), 1)
        yield* run(Runs.prune(first, { deleteThread: true }))
        const stored = yield* run(Effect.flatMap(Checkpointer.Checkpointer, (store) => store.load("t")))
        assert.isTrue(Option.isNone(stored), "the thread is gone")

        const second = yield* run(Runs.start({ threadId: "t", input: "pay bob 100" }))
        const waiting = yield* run(Runs.await(second, { untilWaiting: true }))
        const request = requestOf(waiting)
        assert.notStrictEqual(request.actionRequests[0]!.waitKey, before[0]!.waitKey)
        const refused = yield* run(Effect.flip(Runs.resume(second, before, { principal: "alice" })))
        assert.strictEqual(refused._tag, "InvalidDecision")
        assert.strictEqual(staleReason(refused), "Stale")
        const still = yield* run(Runs.status(second))
        assert.strictEqual(still.state, "Waiting")
        assert.deepStrictEqual(requestOf(still), request)
        assert.strictEqual(yield* Ref.get(paid), 1, "the replayed decision paid nothing")

        yield* run(Runs.resume(second, HumanInTheLoop.approveAll(request), { principal: "alice" }))
        assert.strictEqual((yield* run(Runs.await(second))).state, "Completed")
        assert.strictEqual(yield* Ref.get(paid), 2)
      }),
    { timeout: 120_000 }
  )
})
