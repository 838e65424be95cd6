/**
 * An `Authorizer` made for the agent type sees the decision typed by the
 * agent's waits: the pending request as the hook gave it (decoded by its
 * wait's request schema) and the decision as given.
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import { Effect, Layer, Option, Schema } from "effect"

const Refund = Schema.Struct({ amount: Schema.NumberFromString, askedAt: Schema.DateFromString })

const askedAt = new Date("2026-12-06T10:00:00.000Z")

/** Asks once before the first model call whether to refund 250; goes on either way. */
const refund = Middleware.make({
  name: "refund",
  wait: { request: Refund, decision: Schema.Boolean },
  beforeModel: ({ resume, step }) =>
    Effect.succeed(step === 0 && Option.isNone(resume) ? { interrupt: { amount: 250, askedAt } } : undefined)
})

const middleware = [refund] as const
type Refunds = Agent.AgentOf<typeof middleware>

describe("Authorizer", () => {
  it.scopedLive(
    "made for the agent type, it sees the pending request decoded and the decision as given; a refusal leaves the run waiting",
    () =>
      Effect.gen(function*() {
        const seen: Array<Authorizer.DecisionRequest<AgentWorkflow.WaitsOf<Refunds>>> = []
        const RefundPolicy = Authorizer.make<Refunds>((request) =>
          Effect.suspend(() => {
            seen.push(request)
            // typed: no decoding of the request or the decision
            const large = request.pending.middleware === "refund" && request.pending.value.amount > 100
            return large && request.value && !request.principal.startsWith("manager:")
              ? Effect.fail(
                new Authorizer.Unauthorized({
                  runId: request.runId,
                  principal: request.principal,
                  reason: "only managers approve large refunds"
                })
              )
              : Effect.void
          })
        )
        const Runs = AgentWorkflow.make<Refunds>({ name: "refunds", version: 1 })
        const agent = Agent.layer({ middleware }).pipe(Layer.provide(ScriptedModel.layer([ScriptedModel.text("done")])))
        const context = yield* Layer.build(
          Runs.layer.pipe(
            Layer.provideMerge(agent),
            Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory)),
            Layer.provideMerge(Layer.succeed(Authorizer.Authorizer, RefundPolicy))
          )
        )
        const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
        const runId = yield* run(Runs.start({ threadId: "t", input: "Refund my order" }))
        assert.strictEqual((yield* run(Runs.await(runId, { untilWaiting: true }))).state, "Waiting")

        const refused = yield* Effect.flip(run(Runs.resume(runId, true, { principal: "staff:ana" })))
        assert.strictEqual(refused._tag, "Unauthorized")
        assert.strictEqual((yield* run(Runs.status(runId))).state, "Waiting")
        assert.strictEqual(seen.length, 1)
        const first = seen[0]!
        assert.strictEqual(first.pending.middleware, "refund")
        assert.deepStrictEqual(first.pending.value, { amount: 250, askedAt })
        assert.isTrue(first.pending.value.askedAt instanceof Date)
        assert.strictEqual(first.value, true)

        yield* run(Runs.resume(runId, true, { principal: "manager:bo" }))
        assert.strictEqual((yield* run(Runs.await(runId))).state, "Completed")
      }),
    { timeout: 60_000 }
  )
})
