import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type AgentEvent, Middleware, RunRecord } from "@stepwise-agent/core"
import { Eval, ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Schema, Stream } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as SubAgents from "../src/SubAgents.js"

// A subagent's own middleware decisions (its `wrapToolCall` hooks' included) are in its parent's record, named by
// the child's run, and a replay of the record reports them again in the child's events.

const DeleteFile = Tool.make("delete_file", {
  description: "Deletes a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(DeleteFile)

/** Reports a decision in every tool call it wraps (a guardrail's check). */
const guard = Middleware.make({
  name: "guard",
  wrapToolCall: (request, next) =>
    Effect.zipRight(Middleware.report(`checked ${request.call.name}`, { callId: request.call.id }), next(request))
})

/** A child that deletes `a.txt` (call `d1`) through `middleware`, then answers "cleaned". */
const cleaner = (middleware: ReadonlyArray<Middleware.Any>) =>
  Effect.gen(function*() {
    const { model } = yield* ScriptedModel.make([
      ScriptedModel.toolCalls([{ id: "d1", name: "delete_file", params: { path: "a.txt" } }]),
      ScriptedModel.text("cleaned")
    ])
    return yield* Agent.make({ toolkit: Tools, middleware }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model),
      Effect.provide(Tools.toLayer({ delete_file: ({ path }) => Effect.succeed(`deleted ${path}`) }))
    )
  })

/** A parent whose first reply hands the cleaning to the child (call `t1`), then answers "all done". */
const parent = (child: ReadonlyArray<Middleware.Any>) =>
  Effect.gen(function*() {
    const agents = { cleaner: { description: "Deletes files", agent: yield* cleaner(child) } }
    return yield* Agent.make({ middleware: [SubAgents.middleware({ agents })] })
  }).pipe(Effect.provide(ScriptedModel.layer([
    ScriptedModel.toolCalls([{ id: "t1", name: "task", params: { agent: "cleaner", task: "a.txt" } }]),
    ScriptedModel.text("all done")
  ])))

/** An event as compared: a subagent's with its own, flattened; no timings, nothing only a live model call has. */
const shape = (event: AgentEvent.AgentEvent<any, any, any>): ReadonlyArray<unknown> => {
  switch (event._tag) {
    case "SubAgentEvent":
      return ["sub", event.threadId, ...shape(event.event)]
    case "MiddlewareDecision":
      return [event._tag, event.middleware, event.hook, event.decision]
    case "HookCompleted":
      return [event._tag, event.middleware, event.hook]
    case "ToolCallStarted":
      return [event._tag, event.call.id]
    default:
      return [event._tag]
  }
}
const sentOnly = (event: AgentEvent.AgentEvent<any, any, any>): boolean =>
  event._tag === "ModelRequestSent" || event._tag === "TextDelta" ||
  (event._tag === "SubAgentEvent" && sentOnly(event.event))

const recordLive = (child: ReadonlyArray<Middleware.Any>) =>
  Effect.gen(function*() {
    const agent = yield* parent(child)
    const live: Array<AgentEvent.AgentEvent<any, any, any>> = []
    const { record } = yield* RunRecord.record(
      {
        ...agent,
        stream: (input, options) => Stream.tap(agent.stream(input, options), (e) => Effect.sync(() => live.push(e)))
      },
      "Clean a.txt",
      { threadId: "p" }
    )
    return { record: yield* RunRecord.fromJsonl(RunRecord.toJsonl(record)), live }
  })

describe("SubAgents in a record", () => {
  it.effect("a child's wrapToolCall decision is recorded, named by the child's run and the step it was made in", () =>
    Effect.gen(function*() {
      const { record } = yield* recordLive([guard])
      const decisions = record.entries.flatMap((entry) =>
        entry._tag === "Decision" && entry.middleware === "guard" ? [entry] : []
      )
      assert.deepStrictEqual(
        decisions.map(({ decision, inStep, run }) => ({ decision, inStep, run })),
        [{ decision: "checked delete_file", inStep: "task/t1/1/tool/d1", run: "task/t1/1" }]
      )
      const hooks = record.entries.flatMap((entry) => entry._tag === "Hook" ? [entry] : [])
      assert.deepInclude(hooks.map(({ hook, inStep, middleware, run }) => ({ hook, inStep, middleware, run })), {
        middleware: "guard",
        hook: "wrapToolCall",
        inStep: "task/t1/1/tool/d1",
        run: "task/t1/1"
      })
    }))

  it.effect("a replay reports the child's decisions and completed hooks again, in the child's events, as the live run did", () =>
    Effect.gen(function*() {
      const { live, record } = yield* recordLive([guard])
      const replayed = yield* Effect.flatMap(parent([guard]), (agent) => Stream.runCollect(agent.replayStream(record)))
      const expected = live.filter((event) => !sentOnly(event)).map(shape)
      assert.deepStrictEqual(Chunk.toReadonlyArray(replayed).map(shape), expected)
      assert.deepInclude(expected, [
        "sub",
        "p/task/t1/1",
        "MiddlewareDecision",
        "guard",
        "wrapToolCall",
        "checked delete_file"
      ])
    }))

  it.effect("noApprovalBypassed on a recorded run sees a child's bypass, and a child's approval", () =>
    Effect.gen(function*() {
      // the child's gate judged by `when` where the call runs: no approval needed for a.txt
      const gate = HumanInTheLoop.middleware({
        toolkit: Tools,
        interruptOn: { delete_file: { allowedDecisions: ["approve"], when: () => false } }
      })
      const judged = (child: ReadonlyArray<Middleware.Any>) =>
        Effect.gen(function*() {
          const { record } = yield* recordLive(child)
          return yield* Eval.run(Eval.make({
            name: "child",
            agent: parent(child),
            cases: [Eval.fromRecord(record, { name: "cleans" })],
            assertions: [Eval.noApprovalBypassed(["delete_file"])]
          }))
        })
      const bypass = yield* judged([guard])
      assert.isFalse(bypass.passed, Eval.table(bypass))
      assert.strictEqual(
        bypass.cases[0]!.assertions[0]!.failures[0]!.reason,
        "ran without an approval from humanInTheLoop: delete_file (d1) in cleaner (p/task/t1/1)"
      )
      const cleared = yield* judged([gate, guard])
      assert.isTrue(cleared.passed, Eval.table(cleared))
    }))
})
