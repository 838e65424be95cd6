/**
 * A durable agent with a record store, in a process of its own, for the
 * crash tests of a durable run's record: an idempotent `add` tool, and
 * middleware whose hooks report decisions and complete inside the model and
 * tool calls (`audit`, `timer`).
 *
 * Environment:
 * - DB: the SQLite file (engine, run store, checkpointer and record store).
 * - START=<runId> starts that run; RUN_ID=<runId> only follows it.
 * - CRASH_AT=<point> and CRASH_STEP=<step>: the process SIGKILLs itself at
 *   that point of that call (`afterStarted`: the tool ran, its result not
 *   journaled; `afterResult`: journaled, its record entries not written).
 *
 * The model calls `add` once, then twice at once, then answers. Prints
 * `record <the run's record as JSONL, as a JSON string>` when the run has
 * completed.
 */
import { Tool, Toolkit } from "@effect/ai"
import { NodeRuntime } from "@effect/platform-node"
import { Agent, Middleware, RunRecord, ToolEffect } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as RecordStore from "@stepwise-agent/workflow/RecordStore"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Effect, Layer, Schema } from "effect"
import { CrashSeam } from "../../src/internal/ledger.js"

const env = (name: string) => process.env[name] ?? ""

const Add = Tool.make("add", {
  parameters: { a: Schema.Number, b: Schema.Number },
  success: Schema.Number
}).pipe(ToolEffect.declare(ToolEffect.idempotent()))
const Tools = Toolkit.make(Add)

/** Reports a decision before each model call, and inside each model call and tool call. */
const audit = Middleware.make({
  name: "audit",
  beforeModel: ({ step }) => Effect.as(Middleware.report(`before model ${step}`, { step }), undefined),
  wrapModelCall: (request, next) => Effect.zipRight(Middleware.report("calling the model"), next(request)),
  wrapToolCall: (request, next) =>
    Effect.zipRight(Middleware.report(`running ${request.call.name}`, { callId: request.call.id }), next(request))
})

/** A `wrapToolCall` hook that reports nothing: only its completion shows. */
const timer = Middleware.make({ name: "timer", wrapToolCall: (request, next) => next(request) })

/** `add` once, then twice at once, then the answer; by the results so far, so a restarted process goes on. */
const turn: ScriptedModel.Turn = (request) => {
  const results = request.prompt.content.filter((message) => message.role === "tool").length
  return results === 0
    ? ScriptedModel.toolCalls([{ id: "call_1", name: "add", params: { a: 2, b: 3 } }])
    : results === 1
    ? ScriptedModel.toolCalls([
      { id: "call_2", name: "add", params: { a: 5, b: 7 } },
      { id: "call_3", name: "add", params: { a: 1, b: 1 } }
    ])
    : ScriptedModel.text("done")
}

const Runs = AgentWorkflow.make({ name: "recorded-agent", version: 1 })

const AgentLive = Agent.layer({ toolkit: Tools, systemPrompt: "You add.", middleware: [audit, timer] }).pipe(
  Layer.provide(Layer.mergeAll(
    ScriptedModel.layer(Array.from({ length: 10 }, () => turn)),
    Tools.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })
  ))
)

/** Kills this process at `CRASH_AT` of the call `CRASH_STEP`. */
const CrashLive = Layer.succeed(
  CrashSeam,
  (point, entry) =>
    point === env("CRASH_AT") && entry.step === env("CRASH_STEP")
      ? Effect.sync(() => {
        console.log(`crash ${point}`)
        process.kill(process.pid, "SIGKILL")
      }).pipe(Effect.zipRight(Effect.never))
      : Effect.void
)

const Main = Runs.layer.pipe(
  Layer.provideMerge(AgentLive),
  Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer(), RecordStore.layer())),
  Layer.provideMerge(AgentEngine.layerSqlite({ filename: env("DB"), pollInterval: "200 millis" })),
  Layer.provide(CrashLive)
)

const runner = Effect.gen(function*() {
  const runId = env("START") !== ""
    ? yield* Runs.start({ threadId: "thread-1", input: "What is 2 + 3, 5 + 7 and 1 + 1?", runId: env("START") })
    : env("RUN_ID")
  const status = yield* Runs.await(runId)
  if (status.state !== "Completed") return yield* Effect.dieMessage(`the run ended ${status.state}`)
  console.log(`record ${JSON.stringify(RunRecord.toJsonl(yield* Runs.record(runId)))}`)
}).pipe(Effect.provide(Main))

NodeRuntime.runMain(runner, { disableErrorReporting: false })
