/**
 * In a watched, untraced run, `wrapModelCall` and `wrapToolCall` layers that
 * pass on what the layers inside gave are observed together
 * (`Observer.inHooks`, one observation for the run of them): what a watcher
 * sees must be what it sees of the same run traced, where every layer is
 * observed on its own (a span each): the same `HookCompleted` events in the
 * same order, and the same hook named by a decision reported inside them.
 */
import { AiError, LanguageModel, Prompt, Response, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type AgentEvent, Middleware, RunRecord } from "@stepwise-agent/core"
import { Chunk, Effect, Schema, Stream, Tracer } from "effect"
import { Add, Calculator, CalculatorLive } from "./utils.js"

const usage = new Response.Usage({ inputTokens: 10, outputTokens: 5, totalTokens: 15 })
const toolCall: Array<Response.AnyPart> = [
  Response.makePart("tool-call", { id: "call_1", name: "add", params: { a: 1, b: 2 }, providerExecuted: false }),
  Response.makePart("finish", { reason: "tool-calls", usage })
]
const answer: Array<Response.AnyPart> = [
  Response.makePart("text-start", { id: "t" }),
  Response.makePart("text-delta", { id: "t", delta: "It is 3." }),
  Response.makePart("text-end", { id: "t" }),
  Response.makePart("finish", { reason: "stop", usage })
]

/**
 * A model that reports a decision as it streams (filed under the wrap hook it
 * runs in), then a call, then an answer; with `failFirst`, its first stream
 * fails after the decision.
 */
const reportingModel = (failFirst: boolean): LanguageModel.Service => {
  let call = 0
  const down = new AiError.UnknownError({ module: "test", method: "streamText", description: "down" })
  return {
    generateText: () => Effect.dieMessage("streamed only"),
    streamText: () =>
      Stream.suspend(() => {
        const n = call++
        return Stream.concat(
          Stream.execute(Middleware.report("streaming")),
          failFirst && n === 0
            ? Stream.fail(down)
            : Stream.fromChunk(Chunk.unsafeFromArray(n === (failFirst ? 1 : 0) ? toolCall : answer))
        )
      })
  } as unknown as LanguageModel.Service
}

/**
 * What a wrap hook does: pass on (as is, or with another request), map,
 * build the call twice, report first, or call again (and report) when the
 * call fails.
 */
const Kind = Schema.Literal("pass", "passChanged", "mapped", "twice", "reporting", "retrying")
type Kind = typeof Kind.Type

const wrapping = (name: string, kind: Kind) =>
  Middleware.make({
    name,
    wrapModelCall: (request, next) => {
      switch (kind) {
        case "pass":
          return next(request)
        case "passChanged":
          return next({ ...request, systemPrompt: "Be brief." })
        case "mapped":
          return Effect.map(next(request), (response) => response)
        case "twice": {
          const first = next(request)
          next(request)
          return first
        }
        case "reporting":
          return Effect.zipRight(Middleware.report("wrapping"), next(request))
        case "retrying":
          return Effect.catchAll(next(request), () => Effect.zipRight(Middleware.report("retrying"), next(request)))
      }
    }
  })

/** The events of a streamed run of `kinds`' middleware (outermost first), without times, and how it ended. */
const events = (kinds: ReadonlyArray<Kind>, spans: boolean, failFirst = false) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({
      toolkit: Calculator,
      middleware: kinds.map((kind, i) => wrapping(`m${i}_${kind}`, kind)),
      spans
    }).pipe(
      Effect.provide(CalculatorLive),
      Effect.provideService(LanguageModel.LanguageModel, reportingModel(failFirst))
    )
    const all: Array<AgentEvent.AgentEvent<any>> = []
    const exit = yield* Effect.exit(
      Stream.runForEach(
        agent.stream("What is 1 + 2?", { threadId: "t" }),
        (event) => Effect.sync(() => all.push(event))
      )
    )
    return all.flatMap((event): Array<string> =>
      event._tag === "HookCompleted"
        ? [`completed ${event.middleware}.${event.hook}`]
        : event._tag === "MiddlewareDecision"
        ? [`decision ${event.decision} in ${event.middleware}.${event.hook}`]
        : event._tag === "ModelCallStarted" || event._tag === "ModelResponded" || event._tag === "ToolCallCompleted"
        ? [event._tag]
        : []
    ).concat(exit._tag)
  })

describe("pass-through wrapModelCall layers observed together", () => {
  it.effect.prop(
    "a watcher sees the events of the run traced, where each layer is observed on its own",
    { kinds: Schema.Array(Kind).pipe(Schema.maxItems(6)), failFirst: Schema.Boolean },
    ({ failFirst, kinds }) =>
      Effect.gen(function*() {
        const untraced = yield* events(kinds, false, failFirst)
        const traced = yield* events(kinds, true, failFirst)
        assert.deepStrictEqual(untraced, traced)
      }),
    { fastCheck: { numRuns: 40 }, timeout: 60_000 }
  )

  it.effect("a decision reported inside pass-through layers is filed under the innermost, and they complete innermost first", () =>
    Effect.gen(function*() {
      const seen = yield* events(["pass", "passChanged", "reporting", "pass", "pass"], false)
      assert.deepStrictEqual(seen.slice(0, 9), [
        "ModelCallStarted",
        "decision wrapping in m2_reporting.wrapModelCall",
        "decision streaming in m4_pass.wrapModelCall",
        "completed m4_pass.wrapModelCall",
        "completed m3_pass.wrapModelCall",
        "completed m2_reporting.wrapModelCall",
        "completed m1_passChanged.wrapModelCall",
        "completed m0_pass.wrapModelCall",
        "ModelResponded"
      ])
    }))

  it.effect("a hook around failing pass-through layers that calls again reports under its own name", () =>
    Effect.gen(function*() {
      const seen = yield* events(["retrying", "pass", "pass"], false, true)
      assert.deepStrictEqual(seen.slice(0, 8), [
        "ModelCallStarted",
        "decision streaming in m2_pass.wrapModelCall",
        "decision retrying in m0_retrying.wrapModelCall",
        "decision streaming in m2_pass.wrapModelCall",
        "completed m2_pass.wrapModelCall",
        "completed m1_pass.wrapModelCall",
        "completed m0_retrying.wrapModelCall",
        "ModelResponded"
      ])
    }))
})

/**
 * The tools a `wrapToolCall` stack wraps: `add` reports a decision (filed
 * under the wrap hook it runs in) and answers, `refused` fails as its schema
 * says (a failed result), `crash` dies (the call fails), `slow` never ends
 * (the call times out).
 */
const Refused = Tool.make("refused", { parameters: {}, success: Schema.String, failure: Schema.String })
const Crash = Tool.make("crash", { parameters: {}, success: Schema.String })
const Slow = Tool.make("slow", { parameters: {}, success: Schema.String })
const Tools = Toolkit.make(Add, Refused, Crash, Slow)
const ToolsLive = Tools.toLayer({
  add: ({ a, b }) => Effect.as(Middleware.report("adding"), a + b),
  refused: () => Effect.fail("no"),
  crash: () => Effect.zipRight(Middleware.report("crashing"), Effect.dieMessage("boom")),
  slow: () => Effect.never
})
type ToolName = "add" | "refused" | "crash" | "slow"

/** A model that calls `tool`, then answers; `add` it calls twice, a step each, with other arguments. */
const callingModel = (tool: ToolName): LanguageModel.Service => {
  let call = 0
  const calling = (id: string, params: object) => [
    Response.makePart("tool-call", { id, name: tool, params, providerExecuted: false }),
    Response.makePart("finish", { reason: "tool-calls", usage })
  ]
  return {
    generateText: () => Effect.dieMessage("streamed only"),
    streamText: () =>
      Stream.suspend(() => {
        const n = call++
        return Stream.fromChunk(Chunk.unsafeFromArray(
          tool !== "add"
            ? n === 0 ? calling("call_1", {}) : answer
            : n < 2
            ? calling(`call_${n + 1}`, { a: n * 2 + 1, b: n * 2 + 2 })
            : answer
        ))
      })
  } as unknown as LanguageModel.Service
}

/** What a `wrapToolCall` hook does: a wrap hook's kinds, or answers the call itself without calling `next`. */
const ToolKind = Schema.Literal("pass", "passChanged", "mapped", "twice", "reporting", "retrying", "answering")
type ToolKind = typeof ToolKind.Type

const wrappingTools = (name: string, kind: ToolKind) =>
  Middleware.make({
    name,
    wrapToolCall: (request, next) => {
      switch (kind) {
        case "pass":
          return next(request)
        case "passChanged":
          return next({ ...request, call: { ...request.call, params: { ...request.call.params as object } } })
        case "mapped":
          return Effect.map(next(request), (response) => response)
        case "twice": {
          const first = next(request)
          next(request)
          return first
        }
        case "reporting":
          return Effect.zipRight(Middleware.report("wrapping"), next(request))
        case "retrying":
          return Effect.catchAll(next(request), () => Effect.zipRight(Middleware.report("retrying"), next(request)))
        case "answering":
          return Effect.as(
            Middleware.report("answering"),
            Prompt.makePart("tool-result", {
              id: request.call.id,
              name: request.call.name,
              result: "answered",
              isFailure: false,
              providerExecuted: false
            })
          )
      }
    }
  })

/** The agent of `kinds`' `wrapToolCall` middleware (outermost first), whose model calls `tool`. */
const toolAgent = (kinds: ReadonlyArray<ToolKind>, tool: ToolName, spans: boolean) =>
  Agent.make({
    toolkit: Tools,
    middleware: kinds.map((kind, i) => wrappingTools(`m${i}_${kind}`, kind)),
    toolTimeout: "5 millis",
    spans
  }).pipe(
    Effect.provide(ToolsLive),
    Effect.provideService(LanguageModel.LanguageModel, callingModel(tool))
  )

/** The events of a streamed run of `kinds`' `wrapToolCall` middleware (outermost first) around a call of `tool`. */
const toolEvents = (kinds: ReadonlyArray<ToolKind>, tool: ToolName, spans: boolean) =>
  Effect.gen(function*() {
    const agent = yield* toolAgent(kinds, tool, spans)
    const all: Array<AgentEvent.AgentEvent<any>> = []
    const exit = yield* Effect.exit(
      Stream.runForEach(
        agent.stream("What is 1 + 2?", { threadId: "t" }),
        (event) => Effect.sync(() => all.push(event))
      )
    )
    return all.flatMap((event): Array<string> =>
      event._tag === "HookCompleted"
        ? [`completed ${event.middleware}.${event.hook}`]
        : event._tag === "MiddlewareDecision"
        ? [`decision ${event.decision} in ${event.middleware}.${event.hook}`]
        : event._tag === "ToolCallCompleted"
        ? [`${event._tag} ${JSON.stringify(event.result.result)} ${event.result.isFailure}`]
        : event._tag === "ToolCallStarted" || event._tag === "ModelResponded"
        ? [event._tag]
        : []
    ).concat(exit._tag)
  })

describe("pass-through wrapToolCall layers observed together", () => {
  it.live.prop(
    "a watcher sees the events of the run traced, where each layer is observed on its own",
    {
      kinds: Schema.Array(ToolKind).pipe(Schema.maxItems(6)),
      tool: Schema.Literal("add", "refused", "crash", "slow")
    },
    ({ kinds, tool }) =>
      Effect.gen(function*() {
        const untraced = yield* toolEvents(kinds, tool, false)
        const traced = yield* toolEvents(kinds, tool, true)
        assert.deepStrictEqual(untraced, traced)
      }),
    { fastCheck: { numRuns: 60 }, timeout: 60_000 }
  )

  it.effect("a decision reported inside pass-through layers is filed under the innermost, and they complete innermost first", () =>
    Effect.gen(function*() {
      const seen = yield* toolEvents(["pass", "passChanged", "reporting", "pass", "pass"], "add", false)
      assert.deepStrictEqual(seen.slice(1, 10), [
        "ToolCallStarted",
        "decision wrapping in m2_reporting.wrapToolCall",
        "decision adding in m4_pass.wrapToolCall",
        "completed m4_pass.wrapToolCall",
        "completed m3_pass.wrapToolCall",
        "completed m2_reporting.wrapToolCall",
        "completed m1_passChanged.wrapToolCall",
        "completed m0_pass.wrapToolCall",
        "ToolCallCompleted 3 false"
      ])
    }))

  it.effect("each call through a run's pass-through layers gets its own result", () =>
    Effect.gen(function*() {
      const seen = yield* toolEvents(["pass", "pass", "pass"], "add", false)
      assert.deepStrictEqual(seen.filter((event) => event.startsWith("ToolCallCompleted")), [
        "ToolCallCompleted 3 false",
        "ToolCallCompleted 7 false"
      ])
    }))

  it.effect("layers built while a call runs (a hook that called next later) are not taken for those of the next call", () =>
    Effect.gen(function*() {
      // calls `next` when its effect runs on the first call, at once (passing on) on the second
      const later = Middleware.make({
        name: "later",
        wrapToolCall: (request, next) =>
          request.call.id === "call_1" ? Effect.suspend(() => next(request)) : next(request)
      })
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [wrappingTools("outer", "pass"), later, wrappingTools("a", "pass"), wrappingTools("b", "pass")]
      }).pipe(Effect.provide(ToolsLive), Effect.provideService(LanguageModel.LanguageModel, callingModel("add")))
      const events = yield* Stream.runCollect(agent.stream("What is 1 + 2?", { threadId: "t" }))
      assert.deepStrictEqual(
        Chunk.toReadonlyArray(events).flatMap((event) =>
          event._tag === "ToolCallCompleted" ? [event.result.result] : []
        ),
        [3, 7]
      )
    }))

  it.effect("a hook around failing pass-through layers that calls again reports under its own name", () =>
    Effect.gen(function*() {
      const seen = yield* toolEvents(["retrying", "pass", "pass"], "crash", false)
      assert.deepStrictEqual(seen.slice(1), [
        "ToolCallStarted",
        "decision crashing in m2_pass.wrapToolCall",
        "decision retrying in m0_retrying.wrapToolCall",
        "decision crashing in m2_pass.wrapToolCall",
        "Failure"
      ])
    }))

  it.live("a call that times out inside pass-through layers completes none of them, and is answered", () =>
    Effect.gen(function*() {
      const seen = yield* toolEvents(["pass", "reporting", "pass"], "slow", false)
      assert.deepStrictEqual(seen.slice(1, 4), [
        "ToolCallStarted",
        "decision wrapping in m1_reporting.wrapToolCall",
        `ToolCallCompleted {"error":"Tool \\"slow\\" timed out after 5ms; it was stopped"} true`
      ])
    }))

  it.effect("a hook that answers without calling next completes with the pass-through layers around it", () =>
    Effect.gen(function*() {
      const seen = yield* toolEvents(["pass", "pass", "answering", "pass"], "add", false)
      assert.deepStrictEqual(seen.slice(1, 7), [
        "ToolCallStarted",
        "decision answering in m2_answering.wrapToolCall",
        "completed m2_answering.wrapToolCall",
        "completed m1_pass.wrapToolCall",
        "completed m0_pass.wrapToolCall",
        `ToolCallCompleted "answered" false`
      ])
    }))

  it.effect("a traced run gives each pass-through layer a span of its own", () =>
    Effect.gen(function*() {
      const spans: Array<string> = []
      const tracer = Tracer.make({
        span: (name, parent, context, links, startTime, kind) => ({
          _tag: "Span",
          name,
          spanId: `span-${spans.length}`,
          traceId: "trace",
          parent,
          context,
          links,
          kind,
          sampled: true,
          status: { _tag: "Started", startTime },
          attributes: new Map(),
          end: () => {
            spans.push(name)
          },
          attribute: () => {},
          event: () => {},
          addLinks: () => {}
        }),
        context: (f) => f()
      })
      const agent = yield* toolAgent(["pass", "pass", "pass"], "add", true)
      yield* Stream.runDrain(agent.stream("What is 1 + 2?", { threadId: "t" })).pipe(Effect.withTracer(tracer))
      // two calls of three layers
      assert.strictEqual(spans.filter((name) => name === "Middleware.wrapToolCall").length, 6)
    }))

  it.effect("a recorded run keeps each pass-through layer's completion, and its replay reports them as the run did", () =>
    Effect.gen(function*() {
      const agent = yield* toolAgent(["pass", "reporting", "pass", "pass"], "add", false)
      const live: Array<string> = []
      const { record } = yield* RunRecord.record(
        {
          ...agent,
          stream: (input, options) =>
            Stream.tap(agent.stream(input, options), (event) =>
              Effect.sync(() => {
                if (event._tag === "HookCompleted") live.push(`${event.middleware}.${event.hook}`)
              }))
        },
        "What is 1 + 2?",
        { threadId: "t" }
      )
      // each of the two calls: innermost first
      const completed = [
        "m3_pass.wrapToolCall",
        "m2_pass.wrapToolCall",
        "m1_reporting.wrapToolCall",
        "m0_pass.wrapToolCall"
      ]
      assert.deepStrictEqual(
        record.entries.flatMap((entry) => entry._tag === "Hook" ? [`${entry.middleware}.${entry.hook}`] : []),
        [...completed, ...completed]
      )
      assert.deepStrictEqual(live, [...completed, ...completed])
      const replayed = yield* Stream.runCollect(agent.replayStream(record))
      assert.deepStrictEqual(
        Chunk.toReadonlyArray(replayed).flatMap((event) =>
          event._tag === "HookCompleted" ? [`${event.middleware}.${event.hook}`] : []
        ),
        live
      )
    }))
})
