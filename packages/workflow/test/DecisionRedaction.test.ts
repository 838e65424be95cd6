/**
 * A person's free text in a durable run's decision (a `respond` answer, a
 * rejection's reason) is redacted by the agent's input hooks (Pii) before
 * anything stores the decision: the run store's claim, the engine's deferred
 * result, the journal, the checkpoints and the run's record on SQLite never
 * hold it raw, and the run goes on with the redacted text.
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, RunRecord } from "@stepwise-agent/core"
import { HumanInTheLoop, Pii } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RecordStore from "@stepwise-agent/workflow/RecordStore"
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

/** The model asks to pay, then answers with the tool result it saw. */
const script: ReadonlyArray<ScriptedModel.Turn> = [
  ScriptedModel.toolCalls([{ name: "pay", params: { amount: 10 }, id: "call_1" }]),
  (request) => {
    const tool = request.prompt.content.find((message) => message.role === "tool")
    return ScriptedModel.text(`saw: ${JSON.stringify(tool?.content ?? [])}`)
  }
]

const stack = (filename: string, runs: AgentWorkflow.AgentWorkflow) =>
  runs.layer.pipe(
    Layer.provideMerge(Agent.layer({
      toolkit: Tools,
      middleware: [
        Pii.middleware({ types: ["email", "credit_card"], strategy: "redact" }),
        HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { pay: true } })
      ]
    })),
    Layer.provide(Layer.merge(
      ScriptedModel.layer(script),
      Tools.toLayer({ pay: () => Effect.succeed("paid") })
    )),
    Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer(), RecordStore.layer())),
    Layer.provideMerge(Authorizer.layer(() => true)),
    Layer.provideMerge(AgentEngine.layerSqlite({ filename, pollInterval: "100 millis" }))
  )

/** Every byte the database directory holds (the file, its WAL), as text. */
const stored = (directory: string) =>
  fs.readdirSync(directory).map((file) => fs.readFileSync(path.join(directory, file)).toString("latin1")).join("\n")

const decisions = {
  "respond with the person's text": (action: HumanInTheLoop.ActionRequest) => HumanInTheLoop.respond(action, typed),
  "reject with the person's reason": (action: HumanInTheLoop.ActionRequest) => HumanInTheLoop.reject(action, typed)
} as const

describe("a durable decision's person text is stored redacted (SQLite)", () => {
  for (const [name, decide] of Object.entries(decisions)) {
    it.scopedLive(
      `${name}: no store (nor the run's record, decisions included) holds the card number or the email; the run goes on with the redacted text`,
      () =>
        Effect.gen(function*() {
          const directory = yield* tempDirectory("stepwise-decision-pii-")
          const Runs = AgentWorkflow.make({ name: "decision-pii", version: 1 })
          const context = yield* Layer.build(stack(path.join(directory, "runs.db"), Runs))
          const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context) as Effect.Effect<A, E>

          const runId = yield* run(Runs.start({ threadId: "t", input: "pay the bill" }))
          const waiting = yield* run(Runs.await(runId, { untilWaiting: true }))
          assert.strictEqual(waiting.state, "Waiting")
          const request = Option.getOrThrow(
            Option.flatMap(
              waiting.pending,
              (wait) => Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)
            )
          )
          yield* run(Runs.resume(runId, [decide(request.actionRequests[0]!)], { principal: "alice" }))
          const status = yield* run(Runs.await(runId))

          assert.strictEqual(status.state, "Completed")
          const text = Option.getOrThrow(status.outcome).text
          assert.include(text, "use my card", "the run went on with the person's text")
          assert.notInclude(text, card)
          assert.notInclude(text, email)
          const claim = yield* run(
            Effect.flatMap(
              RunStore.RunStore,
              (store) => store.decisionOf(runId, Option.getOrThrow(waiting.pending).key)
            )
          )
          assert.notInclude(timeless(JSON.stringify(claim)), "1111")
          // the record: the wait with the decision as stored, and the middleware's decision on it
          const record = yield* run(Runs.record(runId))
          const wait = record.entries.find((entry) => entry._tag === "Wait")
          assert.include(JSON.stringify(wait?._tag === "Wait" ? wait.decision : undefined), "use my card")
          const decided = record.entries.flatMap((entry) =>
            entry._tag === "Decision" && entry.middleware === "humanInTheLoop" ? [entry.decision] : []
          )
          assert.include(decided, name.startsWith("respond") ? "respond pay" : "reject pay")
          assert.notInclude(timeless(RunRecord.toJsonl(record)), "1111")
          // the file and its WAL: the claim, the deferred's result, the journal, the checkpoints
          const bytes = stored(directory)
          for (const raw of [card, card.replace(/ /g, ""), email, JSON.stringify(email).slice(1, -1)]) {
            assert.notInclude(bytes, raw)
          }
        }),
      { timeout: 120_000 }
    )
  }
})
