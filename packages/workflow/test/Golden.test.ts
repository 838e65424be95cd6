/**
 * Golden files: what this package stores, as a version of the code wrote it
 * (`test/golden/`, made by `test/golden/generate.ts` and never written
 * again): the `RunStore` tables and the SQL checkpointer's row in a SQLite
 * file (`runStore-v1.rows.json` lists its rows), the effect ledger's table
 * (`runStore-v2.sqlite`), a journaled decision, outcomes, failed runs and
 * model and tool calls (with and without what a recorder saw inside them).
 * Each later version must still read them to the same values.
 */
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import { AgentError, Checkpointer, RunJournal, Usage } from "@stepwise-agent/core"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { DateTime, Effect, Layer, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { withWitnessed } from "../src/internal/durableJournal.js"

const here = path.join(path.dirname(fileURLToPath(import.meta.url)), "golden")
const rows = JSON.parse(fs.readFileSync(path.join(here, "runStore-v1.rows.json"), "utf8"))

/** A copy of a golden database (opening it may upgrade its tables), on a SQLite client. */
const goldenDatabase = (name = "runStore-v1.sqlite") =>
  Layer.unwrapScoped(
    Effect.map(
      Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-golden-"))),
        (directory) => Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true }))
      ),
      (directory) => {
        const filename = path.join(directory, "runStore.sqlite")
        fs.copyFileSync(path.join(here, name), filename)
        return SqliteClient.layer({ filename })
      }
    )
  )

describe("golden files: workflow", () => {
  it.effect("runStore-v1.sqlite: the RunStore reads its runs, decisions, cancel requests and messages", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.make()
      const first = yield* store.get("run-1")
      assert.deepStrictEqual(
        { ...first, createdAt: DateTime.toEpochMillis(first.createdAt) },
        {
          runId: "run-1",
          threadId: "thread-1",
          executionId: "exec-1",
          workflow: "agent@1",
          createdAt: 1_765_000_000_000
        }
      )
      assert.deepStrictEqual((yield* store.list({ threadId: "thread-1" })).map((run) => run.runId).sort(), [
        "run-1",
        "run-2"
      ])
      const [delivered, undecided] = rows.stepwise_decisions
      assert.deepStrictEqual(
        yield* store.decisionOf("run-1", "approvals/0"),
        Option.some({
          key: "approvals/0",
          decidedAt: delivered.decided_at,
          decision: delivered.decision,
          delivered: true
        })
      )
      assert.deepStrictEqual(
        yield* store.decisionOf("run-2", "approvals/1"),
        Option.some({ key: "approvals/1", decidedAt: undecided.decided_at, decision: undefined, delivered: false })
      )
      // the decision as AgentWorkflow stored it with its claim
      assert.deepStrictEqual(
        yield* Schema.decode(Schema.parseJson(AgentWorkflow.Decision))(delivered.decision),
        { value: { approved: true }, by: "ana", decidedAt: 1 }
      )
      assert.isTrue(yield* store.isCancelRequested("run-1"))
      assert.isFalse(yield* store.isCancelRequested("run-2"))
      assert.deepStrictEqual(yield* store.running("thread-1"), Option.some("run-2"))
      // the queued message is still unclaimed: the next run takes it in
      const next = yield* store.claimNext("thread-1", undefined)
      assert.deepStrictEqual(
        Option.map(next, (run) => run.messages.map(({ messages, mode, sequence }) => ({ messages, mode, sequence }))),
        Option.some([{
          messages: "[{\"role\":\"user\",\"content\":\"and then?\"}]",
          mode: "queue" as const,
          sequence: 2
        }])
      )
    }).pipe(Effect.provide(goldenDatabase())))

  it.effect("runStore-v1.sqlite: the SQL checkpointer loads its row as the core's golden checkpoint", () =>
    Effect.gen(function*() {
      const checkpointer = yield* SqlCheckpointer.make()
      const expected = yield* Checkpointer.fromJson(
        "golden/thread 1",
        fs.readFileSync(path.join(here, "../../../core/test/golden/checkpoint-v1.json"), "utf8")
      )
      assert.deepStrictEqual(yield* checkpointer.load("golden/thread 1"), Option.some(expected))
      assert.deepStrictEqual(Option.getOrThrow(yield* checkpointer.load("golden/thread 1")).pending?.key, "approvals/0")
    }).pipe(Effect.provide(goldenDatabase())))

  it.effect("runStore-v1.sqlite gains the ledger table: a call of an old run is marked started once", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.make()
      assert.isTrue(yield* store.markStarted("run-2", "tool/call_1"))
      assert.isFalse(yield* store.markStarted("run-2", "tool/call_1"))
    }).pipe(Effect.provide(goldenDatabase())))

  it.effect("runStore-v2.sqlite: a call the ledger marked started stays marked (a cut-off call is found)", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.make()
      assert.isFalse(yield* store.markStarted("run-1", "tool/call_1"))
      assert.isTrue(yield* store.markStarted("run-1", "tool/call_2"))
    }).pipe(Effect.provide(goldenDatabase("runStore-v2.sqlite"))))

  it.effect("decision-v1.json: a journaled decision decodes", () =>
    Effect.gen(function*() {
      const encoded = JSON.parse(fs.readFileSync(path.join(here, "decision-v1.json"), "utf8"))
      assert.deepStrictEqual(yield* Schema.decodeUnknown(AgentWorkflow.Decision)(encoded), {
        value: { approved: false, reason: "no" },
        by: "timeout",
        decidedAt: 1_765_000_001_000
      })
      // as the run's wait reads it: its value decoded with the wait's decision schema
      const Rejection = Schema.Struct({ approved: Schema.Boolean, reason: Schema.String })
      assert.deepStrictEqual(yield* Schema.decodeUnknown(AgentWorkflow.DecisionOf(Rejection))(encoded), {
        value: { approved: false, reason: "no" },
        by: "timeout",
        decidedAt: 1_765_000_001_000
      })
    }))

  it.effect("outcome-v1.json, outcome-v2.json: a completed run's journaled outcome decodes, with or without an output", () =>
    Effect.gen(function*() {
      const read = (name: string) =>
        Schema.decodeUnknown(AgentWorkflow.RunOutcome)(JSON.parse(fs.readFileSync(path.join(here, name), "utf8")))
      const usage = new Usage.Usage({ inputTokens: 20, outputTokens: 10, totalTokens: 30 })
      assert.deepStrictEqual(yield* read("outcome-v1.json"), { text: "done", steps: 1, usage })
      assert.deepStrictEqual(yield* read("outcome-v2.json"), {
        text: "",
        steps: 2,
        usage,
        output: { answer: 42, at: "2026-12-07T00:00:00.000Z" }
      })
    }))

  it.effect("steps-v1.json, steps-v2.json: a journaled model or tool call decodes with or without what a recorder saw inside it, and encodes back as it was", () =>
    Effect.gen(function*() {
      const read = (name: string) => JSON.parse(fs.readFileSync(path.join(here, name), "utf8"))
      const v1 = read("steps-v1.json")
      const v2 = read("steps-v2.json")
      const tool = withWitnessed(RunJournal.ToolCall)
      const model = withWitnessed(RunJournal.ModelCall)
      const witnessed: RunJournal.Witnessed = [
        {
          _tag: "Decision",
          middleware: "audit",
          hook: "wrapToolCall",
          decision: "running add",
          data: { callId: "call_1" }
        },
        { _tag: "Hook", middleware: "audit", hook: "wrapToolCall", durationMillis: 2 },
        { _tag: "Hook", middleware: "mailer", hook: "wrapModelCall", durationMillis: 1, run: "task/call_9/1" }
      ]
      // a step journaled before: its result alone, with nothing witnessed
      const oldTool = yield* Schema.decodeUnknown(tool)(v1.tool)
      assert.deepStrictEqual(oldTool, [yield* Schema.decodeUnknown(RunJournal.ToolCall)(v1.tool), []])
      assert.deepInclude(oldTool[0], {
        id: "call_1",
        result: 5,
        updates: [{ middleware: "counter", state: { calls: 1 } }]
      })
      const oldModel = yield* Schema.decodeUnknown(model)(v1.model)
      assert.deepStrictEqual(oldModel, [yield* Schema.decodeUnknown(RunJournal.ModelCall)(v1.model), []])
      // one journaled with it: the same result, and what was witnessed, in order
      const newTool = yield* Schema.decodeUnknown(tool)(v2.tool)
      assert.deepStrictEqual(newTool, [oldTool[0], witnessed])
      const newModel = yield* Schema.decodeUnknown(model)(v2.model)
      assert.deepStrictEqual(newModel, [oldModel[0], witnessed])
      // each encodes back as it was: nothing witnessed, as the result alone
      assert.deepStrictEqual(yield* Schema.encode(tool)(newTool), v2.tool)
      assert.deepStrictEqual(yield* Schema.encode(tool)(oldTool), v1.tool)
      assert.deepStrictEqual(yield* Schema.encode(model)(newModel), v2.model)
      assert.deepStrictEqual(yield* Schema.encode(model)(oldModel), v1.model)
      // what was witnessed but does not read fails, naming it
      const wrong = { ...v2.tool, witnessed: [{ _tag: "Hook", middleware: "audit" }] }
      assert.include(String(yield* Effect.flip(Schema.decodeUnknown(tool)(wrong))), "durationMillis")
    }))

  it.effect("failure-v1.json, failure-v2.json: failed runs decode, v1's free text under description read as reason", () =>
    Effect.gen(function*() {
      const read = (name: string) =>
        Schema.decodeUnknown(Schema.Array(AgentWorkflow.RunFailure))(
          JSON.parse(fs.readFileSync(path.join(here, name), "utf8"))
        )
      const failed = (error: AgentWorkflow.RunError, reason: string) =>
        new AgentWorkflow.AgentRunFailed({ error, reason })
      const v1 = [
        failed(new AgentError.ToolDefect({ toolName: "search", callId: "call-1", reason: "boom" }), "boom"),
        failed(new AgentError.CheckpointError({ threadId: "t-1", operation: "save", reason: "disk full" }), "x"),
        failed(new AgentError.StructuredOutputError({ reason: "no output" }), "no output"),
        failed(new AgentError.InvalidInput({ reason: "empty prompt" }), "empty prompt"),
        failed(new AgentWorkflow.OtherError({ tag: "HttpResponseError" }), "the provider answered 503"),
        new AgentWorkflow.RunCancelled({ runId: "run-1" })
      ]
      assert.deepStrictEqual(yield* read("failure-v1.json"), v1)
      const invalidCalls = failed(
        new AgentError.InvalidToolCalls({
          threadId: "t-1",
          toolName: "add",
          callId: "call-2",
          reason: "bad",
          replies: 4
        }),
        "bad"
      )
      assert.deepStrictEqual(yield* read("failure-v2.json"), [...v1.slice(0, 4), invalidCalls, ...v1.slice(4)])
      // a v1 failure journaled again is written as v2
      const v2 = JSON.parse(fs.readFileSync(path.join(here, "failure-v2.json"), "utf8"))
      assert.deepStrictEqual(yield* Schema.encode(AgentWorkflow.RunFailure)(v1[0]), v2[0])
    }))
})
