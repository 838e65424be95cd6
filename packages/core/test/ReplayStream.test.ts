import { assert, describe, it } from "@effect/vitest"
import { Agent, type AgentEvent, Middleware, RunRecord } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Exit, FastCheck, Fiber, Layer, Scope, Stream } from "effect"
import { Calculator, CalculatorLive } from "./utils.js"

const script: ReadonlyArray<ScriptedModel.Turn> = [
  ScriptedModel.toolCalls([{ id: "call_1", name: "add", params: { a: 2, b: 3 } }]),
  ScriptedModel.toolCalls([{ id: "call_2", name: "add", params: { a: 5, b: 7 } }]),
  ScriptedModel.text("12")
]

/** What an event says, without timings and the parts only a call to a model has (its request, its deltas). */
const shape = (event: AgentEvent.AgentEvent<any, any, any>): unknown => {
  switch (event._tag) {
    case "ModelResponded":
      return [event._tag, event.step, event.message, event.usage]
    case "ToolCallStarted":
      return [event._tag, event.call, event.ledger]
    case "ToolCallCompleted":
      return [event._tag, event.result]
    case "MiddlewareDecision":
      return [event._tag, event.middleware, event.hook, event.decision, event.data]
    case "RunEnded":
      return [event._tag, event.result._tag, event.result.steps]
    case "HookCompleted":
      return [event._tag, event.middleware, event.hook]
    default:
      return [event._tag]
  }
}
/** Events a replay does not emit: no request is sent and nothing is streamed. */
const sentOnly = new Set(["ModelRequestSent", "TextDelta", "ReasoningDelta"])
/** A served tool call does not run its `wrapToolCall` hooks: they report their decisions and completions again. */
const livesOnly = (event: AgentEvent.AgentEvent<any, any, any>) => sentOnly.has(event._tag)

/** Reports a decision before each model call, and inside each model call and tool call. */
const audit = Middleware.make({
  name: "audit",
  beforeModel: ({ step }) => Effect.as(Middleware.report(`before model ${step}`, { step }), undefined),
  wrapModelCall: (request, next) => Effect.zipRight(Middleware.report("calling the model"), next(request)),
  wrapToolCall: (request, next) =>
    Effect.zipRight(Middleware.report(`running ${request.call.name}`, { callId: request.call.id }), next(request))
})

describe("Agent.replayStream", () => {
  it.effect("a replay emits the events of the live run it replays: replies, tool calls with their ledger entries, decisions, the end", () =>
    Effect.gen(function*() {
      const hitl = HumanInTheLoop.middleware({
        toolkit: Calculator,
        interruptOn: { add: { allowedDecisions: ["approve"], when: () => false } }
      })
      const make = Agent.make({ toolkit: Calculator, middleware: [hitl, audit] })
      const live: Array<AgentEvent.AgentEvent<any, any, any>> = []
      const { record } = yield* Effect.gen(function*() {
        const agent = yield* make
        return yield* RunRecord.record(
          {
            ...agent,
            stream: (input, options) => Stream.tap(agent.stream(input, options), (e) => Effect.sync(() => live.push(e)))
          },
          "What is 2 + 3 + 7?",
          { threadId: "t" }
        )
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive)))
      const replay = (record: RunRecord.RunRecord) =>
        Effect.flatMap(make, (agent) => Stream.runCollect(agent.replayStream(record))).pipe(
          Effect.provide(Layer.merge(ScriptedModel.layer([]), CalculatorLive)),
          Effect.map((events) => Chunk.toReadonlyArray(events).map(shape))
        )
      // a decision reported inside a call names it in the record; one reported outside names none
      assert.deepStrictEqual(
        record.entries.flatMap((entry) =>
          entry._tag === "Decision" && entry.middleware === "audit" ? [[entry.decision, entry.inStep]] : []
        ),
        [
          ["before model 0", undefined],
          ["calling the model", "model/0"],
          ["running add", "tool/call_1"],
          ["before model 1", undefined],
          ["calling the model", "model/1"],
          ["running add", "tool/call_2"],
          ["before model 2", undefined],
          ["calling the model", "model/2"]
        ]
      )
      const expected = live.filter((event) => !livesOnly(event)).map(shape)
      assert.deepStrictEqual(yield* replay(record), expected)
      // a record made before its decisions named their step (and before it kept hooks) gives the `wrapToolCall`
      // decisions before a call again too
      const unnamed = {
        ...record,
        entries: record.entries.flatMap((entry): Array<RunRecord.Entry> => {
          if (entry._tag === "Hook") return []
          if (entry._tag !== "Decision") return [entry]
          const { inStep: _, ...rest } = entry
          return [rest as RunRecord.Decision]
        })
      }
      assert.deepStrictEqual(
        yield* replay(unnamed),
        live.filter((event) => !livesOnly(event) && !(event._tag === "HookCompleted" && event.hook === "wrapToolCall"))
          .map(shape)
      )
      const tags = expected.map((entry) => (entry as Array<unknown>)[0])
      for (
        const tag of [
          "RunStarted",
          "ModelResponded",
          "ToolCallStarted",
          "ToolCallCompleted",
          "MiddlewareDecision",
          "RunEnded"
        ]
      ) {
        assert.include(tags, tag)
      }
      // the decisions reported inside the served tool calls are there, in their place
      const decisions = expected.flatMap((entry) => {
        const [tag, , , decision] = entry as Array<unknown>
        return tag === "MiddlewareDecision" ? [decision] : tag === "ToolCallStarted" ? ["(call)"] : []
      })
      assert.deepStrictEqual(
        decisions.filter((decision) => decision === "(call)" || decision === "running add"),
        ["(call)", "running add", "(call)", "running add"]
      )
    }))

  it.effect("a replay that diverges fails the stream with ReplayDiverged after the events up to there", () =>
    Effect.gen(function*() {
      const { record } = yield* Effect.flatMap(
        Agent.make({ toolkit: Calculator }),
        (agent) => RunRecord.record(agent, "What is 2 + 3 + 7?", { threadId: "t" })
      ).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive)))
      const events: Array<string> = []
      const outcome = yield* Effect.flatMap(
        Agent.make({ toolkit: Calculator, systemPrompt: "Changed." }),
        (agent) => Stream.runForEach(agent.replayStream(record), (event) => Effect.sync(() => events.push(event._tag)))
      ).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([]), CalculatorLive)), Effect.flip)
      assert.instanceOf(outcome, RunRecord.ReplayDiverged)
      assert.deepInclude(outcome, { step: 0, field: "systemPrompt" })
      assert.strictEqual(events[0], "RunStarted")
      assert.notInclude(events, "ModelResponded")
    }))

  it.effect("the agent's watchers see a replay's events as a live run's", () =>
    Effect.gen(function*() {
      const { record } = yield* Effect.flatMap(
        Agent.make({ toolkit: Calculator }),
        (agent) => RunRecord.record(agent, "What is 2 + 3 + 7?", { threadId: "t" })
      ).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive)))
      const watched = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator })
        const scope = yield* Scope.make()
        const stream = yield* Scope.extend(agent.watch, scope)
        const tags: Array<string> = []
        const reading = yield* Effect.fork(
          Stream.runForEach(stream, (event) => Effect.sync(() => tags.push(event.event._tag)))
        )
        yield* agent.replay(record)
        yield* Scope.close(scope, Exit.void)
        yield* Fiber.join(reading)
        return tags
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([]), CalculatorLive)))
      assert.deepStrictEqual(watched.filter((tag) => tag !== "HookCompleted"), [
        "RunStarted",
        "ModelCallStarted",
        "ModelResponded",
        "ToolCallStarted",
        "ToolCallCompleted",
        "ModelCallStarted",
        "ModelResponded",
        "ToolCallStarted",
        "ToolCallCompleted",
        "ModelCallStarted",
        "ModelResponded",
        "RunEnded"
      ])
    }))
})

/** Answers the calls it is told to itself, without the hooks inside it or the tool: they do not run. */
const answering = (answered: ReadonlySet<string>) =>
  Middleware.make({
    name: "answering",
    wrapToolCall: (request, next) =>
      answered.has(request.call.id)
        ? Effect.as(
          Middleware.report("answered", { callId: request.call.id }),
          Middleware.toolResult(request.call, 0)
        )
        : next(request)
  })

describe("Agent.replayStream over random runs", () => {
  it.effect.prop(
    "the events of a replay are the live run's minus ModelRequestSent and text deltas, HookCompleted of served calls included",
    {
      rounds: FastCheck.array(
        FastCheck.array(FastCheck.record({ a: FastCheck.integer({ min: 0, max: 9 }), answered: FastCheck.boolean() }), {
          minLength: 1,
          maxLength: 3
        }),
        { maxLength: 3 }
      )
    },
    ({ rounds }) =>
      Effect.gen(function*() {
        const answered = new Set<string>()
        const turns: Array<ScriptedModel.Turn> = rounds.map((calls, round) =>
          ScriptedModel.toolCalls(calls.map((call, index) => {
            const id = `call_${round}_${index}`
            if (call.answered) answered.add(id)
            return { id, name: "add", params: { a: call.a, b: 1 } }
          }))
        )
        turns.push(ScriptedModel.text("done"))
        const make = Agent.make({ toolkit: Calculator, middleware: [answering(answered), audit] })
        const live: Array<AgentEvent.AgentEvent<any, any, any>> = []
        const { record } = yield* Effect.gen(function*() {
          const agent = yield* make
          return yield* RunRecord.record(
            {
              ...agent,
              stream: (input, options) =>
                Stream.tap(agent.stream(input, options), (e) => Effect.sync(() => live.push(e)))
            },
            "Add them up.",
            { threadId: "t" }
          )
        }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(turns), CalculatorLive)))
        const replayed = yield* Effect.flatMap(make, (agent) => Stream.runCollect(agent.replayStream(record))).pipe(
          Effect.provide(Layer.merge(ScriptedModel.layer([]), CalculatorLive))
        )
        assert.deepStrictEqual(
          Chunk.toReadonlyArray(replayed).map(shape),
          live.filter((event) => !sentOnly.has(event._tag)).map(shape)
        )
      }),
    { fastCheck: { numRuns: 12 } }
  )
})
