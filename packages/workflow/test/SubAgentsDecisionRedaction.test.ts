/**
 * A person's free text in a decision a parent forwards to a child
 * (SubAgents: the child waits for an approval, the person answers through
 * the parent) is redacted by the parent's input hooks (Pii) before anything
 * stores it, as a decision for the parent's own wait is: the parent's
 * `validateResume` gives it redacted, and a durable parent's claim, journal
 * and checkpoints (SQLite; an in-memory engine and checkpointer) never hold
 * it raw. The child runs on with the redacted text.
 */
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import { HumanInTheLoop, Pii, SubAgents } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Effect, Layer, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { tempDirectory } from "./support/databases.js"
import { timeless } from "./support/timeless.js"

const Pay = Tool.make("pay", { parameters: { amount: Schema.Number }, success: Schema.String })
const Tools = Toolkit.make(Pay)

const card = "4111 1111 1111 1111"
const email = "jane.doe@example.com"
const typed = `use my card ${card} and send the receipt to ${email}`
const raws = [card, card.replace(/ /g, ""), email, JSON.stringify(email).slice(1, -1)]

/** Answers with what the last tool result said. */
const echo = (request: ScriptedModel.Request) => {
  const tool = [...request.prompt.content].reverse().find((message) => message.role === "tool")
  return ScriptedModel.text(`saw: ${JSON.stringify(tool?.content ?? [])}`)
}

/** The child: asks to pay (HumanInTheLoop gates it), then answers with the tool result it saw. */
const child = Effect.gen(function*() {
  const { model } = yield* ScriptedModel.make([
    ScriptedModel.toolCalls([{ name: "pay", params: { amount: 10 } }]),
    echo
  ])
  return yield* Agent.make({
    toolkit: Tools,
    middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { pay: true } })]
  }).pipe(
    Effect.provideService(LanguageModel.LanguageModel, model),
    Effect.provide(Tools.toLayer({ pay: () => Effect.succeed("paid") }))
  )
})

/** The parent's middleware: Pii, and SubAgents with the child (built with the parent, in its context). */
const parentMiddleware = [
  Pii.middleware({ types: ["email", "credit_card"], strategy: "redact" }),
  Middleware.unwrap(
    Effect.map(child, (payer) => SubAgents.middleware({ agents: { payer: { description: "Pays", agent: payer } } }))
  )
] as const

const parentScript: ReadonlyArray<ScriptedModel.Turn> = [
  ScriptedModel.toolCalls([{ id: "c1", name: "task", params: { agent: "payer", task: "pay the bill" } }]),
  echo
]

/** The person's answer to every waiting leaf: respond with the typed text. */
const respond = (interrupt: { readonly middleware: string; readonly key: string; readonly value: unknown }) =>
  SubAgents.decide(
    interrupt,
    (leaf) =>
      Option.getOrThrow(Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(leaf.interrupt.value))
        .actionRequests.map((action) => HumanInTheLoop.respond(action, typed))
  )

const stack = (runs: AgentWorkflow.AgentWorkflow) =>
  runs.layer.pipe(
    Layer.provideMerge(Agent.layer({ toolkit: Tools, middleware: parentMiddleware })),
    Layer.provide(Layer.merge(ScriptedModel.layer(parentScript), Tools.toLayer({ pay: () => Effect.succeed("paid") }))),
    Layer.provideMerge(Authorizer.layer(() => true))
  )

/** Starts the run, answers the child's wait through the parent, and checks what the run came to. */
const answeredRun = (runs: AgentWorkflow.AgentWorkflow, context: any) =>
  Effect.gen(function*() {
    const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context) as Effect.Effect<A, E>
    const runId = yield* run(runs.start({ threadId: "t", input: "pay it" }))
    const waiting = yield* run(runs.await(runId, { untilWaiting: true }))
    assert.strictEqual(waiting.state, "Waiting")
    const wait = Option.getOrThrow(waiting.pending)
    assert.strictEqual(wait.middleware, "subAgents")
    const decisions = respond(wait)

    // the parent's validateResume gives the forwarded decision redacted
    const checked = yield* run(Effect.flatMap(Agent.Agent, (agent) => agent.validateResume("t", decisions as never)))
    const encoded = JSON.stringify(checked.encodedDecision)
    assert.include(encoded, "use my card")
    for (const raw of raws) assert.notInclude(encoded, raw)

    yield* run(runs.resume(runId, decisions, { principal: "alice" }))
    const status = yield* run(runs.await(runId))
    assert.strictEqual(status.state, "Completed")
    const text = Option.getOrThrow(status.outcome).text
    assert.include(text, "use my card", "the child went on with the person's text")
    for (const raw of raws) assert.notInclude(text, raw)
    const claim = yield* run(Effect.flatMap(RunStore.RunStore, (store) => store.decisionOf(runId, wait.key)))
    assert.notInclude(timeless(JSON.stringify(claim)), "1111")
    const [leaf] = SubAgents.leaves(wait)
    return { childThread: leaf!.path[0]!.threadId }
  })

describe("a decision SubAgents forwards to a child is stored redacted", () => {
  it.scopedLive("SQLite: no byte of the database holds the card number or the email", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory("stepwise-subagents-decision-pii-")
      const Runs = AgentWorkflow.make({ name: "subagents-decision-pii", version: 1 })
      const context = yield* Layer.build(
        stack(Runs).pipe(
          Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
          Layer.provideMerge(
            AgentEngine.layerSqlite({ filename: path.join(directory, "runs.db"), pollInterval: "100 millis" })
          )
        )
      )
      yield* answeredRun(Runs, context)
      const bytes = fs.readdirSync(directory)
        .map((file) => fs.readFileSync(path.join(directory, file)).toString("latin1"))
        .join("\n")
      for (const raw of raws) assert.notInclude(bytes, raw)
    }), { timeout: 120_000 })

  it.scopedLive(
    "in memory: no thread the checkpointer stores (the parent's, the child's) holds them",
    () =>
      Effect.gen(function*() {
        const memory = yield* Checkpointer.makeMemory
        const Runs = AgentWorkflow.make({ name: "subagents-decision-pii-memory", version: 1 })
        const context = yield* Layer.build(
          stack(Runs).pipe(
            Layer.provideMerge(
              Layer.mergeAll(
                Layer.succeed(Checkpointer.Checkpointer, memory),
                AgentEngine.layerMemory,
                RunStore.layerMemory
              )
            )
          )
        )
        const { childThread } = yield* answeredRun(Runs, context)
        for (const threadId of ["t", childThread]) {
          const stored = JSON.stringify(Option.getOrThrow(yield* memory.load(threadId)))
          assert.include(stored, "use my card", threadId)
          for (const raw of raws) assert.notInclude(stored, raw, threadId)
        }
      }),
    { timeout: 120_000 }
  )
})
