/**
 * Writes the golden files of this folder with the current code:
 * `npx tsx --conditions=@stepwise-agent/source packages/workflow/test/golden/generate.ts`.
 *
 * A golden file is never written again: every later version must read it
 * (`test/Golden.test.ts`). This script writes only the files that are
 * missing; a new stored format gets a new file beside the old one.
 */
import { Prompt, Response } from "@effect/ai"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Checkpointer from "@stepwise-agent/core/Checkpointer"
import * as RunJournal from "@stepwise-agent/core/RunJournal"
import * as Usage from "@stepwise-agent/core/Usage"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { DateTime, Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { withWitnessed } from "../../src/internal/durableJournal.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const database = path.join(here, "runStore-v1.sqlite")
const core = path.join(here, "../../../core/test/golden/checkpoint-v1.json")

const program = Effect.gen(function*() {
  const store = yield* RunStore.make()
  const createdAt = DateTime.unsafeMake(1_765_000_000_000)
  // a finished run that was cancelled after a decision reached it
  yield* store.register({ runId: "run-1", threadId: "thread-1", executionId: "exec-1", workflow: "agent@1", createdAt })
  yield* store.claimDecision(
    "run-1",
    "approvals/0",
    JSON.stringify({ value: { approved: true }, by: "ana", decidedAt: 1 })
  )
  yield* store.markDelivered("run-1", "approvals/0")
  yield* store.requestCancel("run-1")
  // a run that owns its thread, a claimed decision without a value, and messages sent to the thread
  yield* store.register({
    runId: "run-2",
    threadId: "thread-1",
    executionId: "exec-2",
    workflow: "agent@1",
    createdAt: DateTime.add(createdAt, { seconds: 5 }),
    ownsThread: true
  })
  yield* store.claimDecision("run-2", "approvals/1")
  const steer = JSON.stringify([{ role: "user", content: [{ type: "text", text: "be brief" }] }])
  const queued = JSON.stringify([{ role: "user", content: "and then?" }])
  yield* store.postMessage({ threadId: "thread-1", mode: "steer", messages: steer, idempotencyKey: "send-1" })
  yield* store.claimSteered("thread-1", "run-2", "inbox/0")
  yield* store.postMessage({ threadId: "thread-1", mode: "queue", messages: queued })
  // the SQL checkpointer's row: the core's golden checkpoint
  const checkpoint = yield* Checkpointer.fromJson("golden/thread 1", fs.readFileSync(core, "utf8"))
  const checkpointer = yield* SqlCheckpointer.make()
  yield* checkpointer.save("golden/thread 1", checkpoint)
  return Option.void
})

if (!fs.existsSync(database)) {
  await Effect.runPromise(program.pipe(Effect.provide(SqliteClient.layer({ filename: database }))))
  process.stdout.write("wrote runStore-v1.sqlite\n")
}

// v2: the effect ledger's table (`markStarted`), with one ledgered call marked started
const ledgerDatabase = path.join(here, "runStore-v2.sqlite")
if (!fs.existsSync(ledgerDatabase)) {
  const marked = Effect.gen(function*() {
    const store = yield* RunStore.make()
    yield* store.register({
      runId: "run-1",
      threadId: "thread-1",
      executionId: "exec-1",
      workflow: "agent@1",
      createdAt: DateTime.unsafeMake(1_765_000_000_000)
    })
    yield* store.markStarted("run-1", "tool/call_1")
  })
  await Effect.runPromise(marked.pipe(Effect.provide(SqliteClient.layer({ filename: ledgerDatabase }))))
  process.stdout.write("wrote runStore-v2.sqlite\n")
}

const decision = path.join(here, "decision-v1.json")
if (!fs.existsSync(decision)) {
  const encoded = Schema.encodeSync(AgentWorkflow.Decision)({
    value: { approved: false, reason: "no" },
    by: "timeout",
    decidedAt: 1_765_000_001_000
  })
  fs.writeFileSync(decision, JSON.stringify(encoded, null, 2) + "\n")
  process.stdout.write("wrote decision-v1.json\n")
}

// a completed run's outcome as the workflow journals it (its reply): v1 without a structured output, v2 with one
// encoded by the agent's responseFormat (`output` joined the format in v2)
const outcomes = {
  "outcome-v1.json": { text: "done", steps: 1 },
  "outcome-v2.json": { text: "", steps: 2, output: { answer: 42, at: "2026-12-07T00:00:00.000Z" } }
}
for (const [name, fields] of Object.entries(outcomes)) {
  const file = path.join(here, name)
  if (fs.existsSync(file)) continue
  const encoded = Schema.encodeSync(AgentWorkflow.RunOutcome)({
    ...fields,
    usage: new Usage.Usage({ inputTokens: 20, outputTokens: 10, totalTokens: 30 })
  })
  fs.writeFileSync(file, JSON.stringify(encoded, null, 2) + "\n")
  process.stdout.write(`wrote ${name}\n`)
}

// record-v1.rows.json is not written here: it holds the RecordStore rows (slot, line; the header at -1) of a durable
// run waiting at its step 1 as the recorder of the previous version wrote them (commit 07723ee: slots 0, 1, 2, … in
// the run's order, no middleware decisions), which this code no longer writes. `test/DurableRecord.test.ts` reads it.

// failed runs as the workflow journals them (`RunFailure`): the agent's own errors whole, another package's error by
// its tag, and a cancellation. v1 (`failure-v1.json`) was written by the version whose errors kept their free text
// in `description` (`problem` for InvalidToolCalls); v2 names it `reason`
const failures = path.join(here, "failure-v2.json")
if (!fs.existsSync(failures)) {
  const encoded = [
    { error: { _tag: "ToolDefect", toolName: "search", callId: "call-1", reason: "boom" }, reason: "boom" },
    { error: { _tag: "CheckpointError", threadId: "t-1", operation: "save", reason: "disk full" }, reason: "x" },
    { error: { _tag: "StructuredOutputError", reason: "no output" }, reason: "no output" },
    { error: { _tag: "InvalidInput", reason: "empty prompt" }, reason: "empty prompt" },
    {
      error: {
        _tag: "InvalidToolCalls",
        threadId: "t-1",
        toolName: "add",
        callId: "call-2",
        reason: "bad",
        replies: 4
      },
      reason: "bad"
    },
    { error: { _tag: "OtherError", tag: "HttpResponseError" }, reason: "the provider answered 503" }
  ].map(({ error, reason }) =>
    Schema.encodeSync(AgentWorkflow.RunFailure)(
      new AgentWorkflow.AgentRunFailed({ error: Schema.decodeUnknownSync(AgentWorkflow.RunError)(error), reason })
    )
  )
  encoded.push(Schema.encodeSync(AgentWorkflow.RunFailure)(new AgentWorkflow.RunCancelled({ runId: "run-1" })))
  fs.writeFileSync(failures, JSON.stringify(encoded, null, 2) + "\n")
  process.stdout.write("wrote failure-v2.json\n")
}

// a model call's and a tool call's results as the workflow journals their steps: v1 alone (encoded with their key's
// schema), as every step was journaled before a recorder's hooks and decisions were journaled with it; v2 with them
// (`withWitnessed`: `{ step, witnessed }`)
const stepValues = {
  tool: {
    ...Prompt.makePart("tool-result", {
      id: "call_1",
      name: "add",
      result: 5,
      isFailure: false,
      providerExecuted: false
    }),
    updates: [{ middleware: "counter", state: { calls: 1 } }]
  },
  model: {
    message: Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text: "done" })] }),
    usage: new Response.Usage({ inputTokens: 20, outputTokens: 10, totalTokens: 30 }),
    finishReason: "stop" as const,
    offered: ["add"]
  }
}
const witnessed: RunJournal.Witnessed = [
  { _tag: "Decision", middleware: "audit", hook: "wrapToolCall", decision: "running add", data: { callId: "call_1" } },
  { _tag: "Hook", middleware: "audit", hook: "wrapToolCall", durationMillis: 2 },
  { _tag: "Hook", middleware: "mailer", hook: "wrapModelCall", durationMillis: 1, run: "task/call_9/1" }
]
const stepsV1 = path.join(here, "steps-v1.json")
if (!fs.existsSync(stepsV1)) {
  const encoded = {
    tool: Schema.encodeSync(RunJournal.ToolCall)(stepValues.tool),
    model: Schema.encodeSync(RunJournal.ModelCall)(stepValues.model)
  }
  fs.writeFileSync(stepsV1, JSON.stringify(encoded, null, 2) + "\n")
  process.stdout.write("wrote steps-v1.json\n")
}
const stepsV2 = path.join(here, "steps-v2.json")
if (!fs.existsSync(stepsV2)) {
  const encoded = {
    tool: Schema.encodeSync(withWitnessed(RunJournal.ToolCall))([stepValues.tool, witnessed]),
    model: Schema.encodeSync(withWitnessed(RunJournal.ModelCall))([stepValues.model, witnessed])
  }
  fs.writeFileSync(stepsV2, JSON.stringify(encoded, null, 2) + "\n")
  process.stdout.write("wrote steps-v2.json\n")
}
