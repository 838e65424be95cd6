import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Layer, Option, Schema, Stream } from "effect"
import { Calculator, CalculatorLive, encoded, encodedRequests } from "./utils.js"

const script = (): ReadonlyArray<ScriptedModel.Turn> => [
  ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }], { text: "Let me add that up." }),
  ScriptedModel.text("The answer is 3, as the calculator says.")
]

const reporter = () =>
  Middleware.make({
    name: "reporter",
    state: { schema: Schema.Struct({ toolCalls: Schema.Number }), initial: { toolCalls: 0 } },
    wrapToolCall: (request, next) =>
      Middleware.report(`running ${request.call.name}`, { callId: request.call.id }).pipe(
        Effect.zipRight(next(request))
      ),
    afterModel: ({ messages, state }) => {
      const last = messages.at(-1)
      const calls = last?.role === "assistant" ? last.content.filter((part) => part.type === "tool-call").length : 0
      return Effect.succeed(calls === 0 ? undefined : { state: { toolCalls: state.toolCalls + calls } })
    }
  })

const makeAgent = () => Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware: [reporter()] })

const fresh = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script()), CalculatorLive)))

type Event = AgentEvent.AgentEvent<any>

/** Event tags in order, without hook timings, with runs of TextDelta collapsed into one. */
const shape = (events: ReadonlyArray<Event>) =>
  events.map((event) => event._tag).filter((tag, i, tags) =>
    tag !== "HookCompleted" && !(tag === "TextDelta" && tags[i - 1] === "TextDelta")
  )

describe("stream", () => {
  it.effect("streams text deltas, tool calls, decisions and ends with the same result as run", () =>
    Effect.gen(function*() {
      const streamed = yield* fresh(Effect.gen(function*() {
        const agent = yield* makeAgent()
        const events = Chunk.toReadonlyArray(
          yield* Stream.runCollect(agent.stream("What is 1 + 2?", { threadId: "t" }))
        )
        return { events, requests: yield* ScriptedModel.requests }
      }))
      const ran = yield* fresh(Effect.gen(function*() {
        const agent = yield* makeAgent()
        const result = yield* agent.run("What is 1 + 2?", { threadId: "t" })
        return { result, requests: yield* ScriptedModel.requests }
      }))
      const { events } = streamed

      assert.deepStrictEqual(shape(events), [
        "RunStarted",
        "ModelCallStarted",
        "ModelRequestSent",
        "TextDelta",
        // afterModel updated the state; the reply is reported after the afterModel hooks
        "StateUpdated",
        "ModelResponded",
        "ToolCallStarted",
        "MiddlewareDecision",
        "ToolCallCompleted",
        "ModelCallStarted",
        "ModelRequestSent",
        "TextDelta",
        "ModelResponded",
        "RunEnded"
      ])

      const last = events.at(-1)!
      assert.strictEqual(last._tag, "RunEnded")
      if (last._tag !== "RunEnded") return
      const result = last.result
      // AgentEvent.result picks the result out of the events: only RunEnded carries one
      assert.deepStrictEqual(events.flatMap((event) => Option.toArray(AgentEvent.result(event))), [result])
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed" || ran.result._tag !== "Completed") return

      // text deltas: several per reply, concatenating to each reply's text
      const deltas = (step: number) =>
        events.flatMap((event) => event._tag === "TextDelta" && event.step === step ? [event.delta] : [])
      assert.isAbove(deltas(1).length, 1)
      assert.strictEqual(deltas(1).join(""), result.text)
      assert.strictEqual(result.text, "The answer is 3, as the calculator says.")
      assert.strictEqual(deltas(0).join(""), "Let me add that up.")

      // tool call events
      const started = events.filter((event) => event._tag === "ToolCallStarted")
      const completed = events.filter((event) => event._tag === "ToolCallCompleted")
      assert.deepStrictEqual(started.map((event) => [event.call.id, event.call.name, event.call.params]), [
        ["c1", "add", { a: 1, b: 2 }]
      ])
      assert.deepStrictEqual(completed.map((event) => [event.result.id, event.result.result, event.result.isFailure]), [
        ["c1", 3, false]
      ])

      // the reported decision
      const decisions = events.filter((event) => event._tag === "MiddlewareDecision")
      assert.deepStrictEqual(
        decisions.map(({ data, decision, hook, middleware }) => ({ middleware, hook, decision, data })),
        [
          { middleware: "reporter", hook: "wrapToolCall", decision: "running add", data: { callId: "c1" } }
        ]
      )

      // the state update event names the slice keys
      const updates = events.filter((event) => event._tag === "StateUpdated")
      assert.deepStrictEqual(
        updates.map(({ keys, messagesReplaced, middleware }) => ({ middleware, keys, messagesReplaced })),
        [
          { middleware: "reporter", keys: ["toolCalls"], messagesReplaced: false }
        ]
      )

      // the same run, not streamed, ends in the same state
      assert.deepStrictEqual(encoded(result.state.messages), encoded(ran.result.state.messages))
      assert.strictEqual(result.state.toolCalls, 1)
      assert.strictEqual(ran.result.state.toolCalls, 1)
      assert.strictEqual(result.text, ran.result.text)
      assert.strictEqual(result.steps, ran.result.steps)
      assert.deepStrictEqual(result.usage, ran.result.usage)

      // and the model got the same prompts, streamed in one case only
      const streamedRequests = encodedRequests(streamed.requests)
      const ranRequests = encodedRequests(ran.requests)
      assert.isTrue(streamedRequests.every((request) => request.streamed))
      assert.isTrue(ranRequests.every((request) => !request.streamed))
      assert.deepStrictEqual(
        streamedRequests.map(({ streamed: _, ...rest }) => rest),
        ranRequests.map(({ streamed: _, ...rest }) => rest)
      )
    }))

  it.effect("a failing run fails the stream with the same typed error", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, maxSteps: 1 })
      const error = yield* Effect.flip(Stream.runCollect(agent.stream("hi", { threadId: "t" })))
      assert.strictEqual(error._tag, "MaxStepsExceeded")
    }).pipe(fresh))

  it.effect("an interrupted stream ends with Interrupted, and resumeStream continues the thread", () =>
    Effect.gen(function*() {
      const ask = Middleware.make({
        name: "ask",
        wait: { request: Schema.String, decision: Schema.String },
        beforeModel: ({ resume, step }) =>
          Effect.succeed(step === 0 && Option.isNone(resume) ? { interrupt: "go?" } : undefined)
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [ask] })
      const first = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("What is 1 + 2?", { threadId: "t" })))
      assert.deepStrictEqual(shape(first), ["RunStarted", "RunEnded"])
      assert.deepStrictEqual(
        first.flatMap((event) => event._tag === "HookCompleted" ? [`${event.middleware}.${event.hook}`] : []),
        ["ask.beforeModel"]
      )
      const ended = first.at(-1)!
      assert.isTrue(ended._tag === "RunEnded" && ended.result._tag === "Interrupted")
      const second = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.resumeStream("t", "go")))
      const last = second.at(-1)!
      assert.isTrue(last._tag === "RunEnded" && last.result._tag === "Completed")
      assert.strictEqual(second.filter((event) => event._tag === "ModelCallStarted").length, 2)
      assert.strictEqual(
        second.flatMap((event) => event._tag === "TextDelta" && event.step === 1 ? [event.delta] : []).join(""),
        "The answer is 3, as the calculator says."
      )
    }).pipe(fresh))
})

describe("reported decisions", () => {
  it.live("are attributed to the middleware and hook that made them, even from tool calls running at once", () =>
    Effect.gen(function*() {
      // Each layer waits, reports, and calls on. c1 waits 10 ms in the outer layer; c2 passes it at once
      // and waits 100 ms in the inner one, so c1 reports from the outer layer while c2 is in the inner one.
      const layer = (name: string, wait: (callId: string) => number) =>
        Middleware.make({
          name,
          wrapToolCall: (request, next) =>
            (wait(request.call.id) === 0 ? Effect.void : Effect.sleep(`${wait(request.call.id)} millis`)).pipe(
              Effect.zipRight(Middleware.report(`${name} ${request.call.id}`)),
              Effect.zipRight(next(request))
            )
        })
      const outer = layer("outer", (id) => id === "c1" ? 10 : 0)
      const inner = layer("inner", (id) => id === "c2" ? 100 : 0)
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [outer, inner] })
      const events = yield* agent.stream("add twice", { threadId: "t" }).pipe(Stream.runCollect)
      const decisions = Chunk.toReadonlyArray(events).flatMap((event) =>
        event._tag === "MiddlewareDecision" ? [`${event.middleware}/${event.hook}: ${event.decision}`] : []
      )
      assert.deepStrictEqual(decisions, [
        "outer/wrapToolCall: outer c2",
        "outer/wrapToolCall: outer c1",
        "inner/wrapToolCall: inner c1",
        "inner/wrapToolCall: inner c2"
      ])
    }).pipe(Effect.provide(Layer.merge(
      ScriptedModel.layer([
        ScriptedModel.toolCalls([
          { name: "add", params: { a: 1, b: 2 }, id: "c1" },
          { name: "add", params: { a: 3, b: 4 }, id: "c2" }
        ]),
        ScriptedModel.text("done")
      ]),
      CalculatorLive
    ))))
})

describe("wrapModelStream", () => {
  it.effect("transforms streamed parts before they are emitted and stored; run is not streamed", () =>
    Effect.gen(function*() {
      const shout = Middleware.make({
        name: "shout",
        wrapModelStream: (_request, parts) =>
          Stream.map(parts, (part) => part.type === "text-delta" ? { ...part, delta: part.delta.toUpperCase() } : part)
      })
      const agent = yield* Agent.make({ middleware: [shout] })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("hi", { threadId: "s" })))
      const deltas = events.flatMap((event) => event._tag === "TextDelta" ? [event.delta] : [])
      assert.strictEqual(deltas.join(""), "HELLO THERE")
      const ended = events.at(-1)!
      assert.strictEqual(
        ended._tag === "RunEnded" && ended.result._tag === "Completed" && ended.result.text,
        "HELLO THERE"
      )
      const plain = yield* agent.run("again", { threadId: "r" })
      assert.strictEqual(plain._tag === "Completed" && plain.text, "hello again")
    }).pipe(
      Effect.provide(ScriptedModel.layer([ScriptedModel.text("hello there"), ScriptedModel.text("hello again")]))
    ))

  it.effect("a consumer that stops mid-reply ends the model stream: its finalizers run, nothing is stored", () =>
    Effect.gen(function*() {
      let released = 0
      const endless = Middleware.make({
        name: "endless",
        // the reply's parts, then a model that never finishes
        wrapModelStream: (_request, parts) =>
          parts.pipe(
            Stream.filter((part) => part.type !== "finish"),
            Stream.concat(Stream.never),
            Stream.ensuring(Effect.sync(() => void released++))
          )
      })
      const agent = yield* Agent.make({ middleware: [endless] })
      const seen = yield* agent.stream("hi", { threadId: "t" }).pipe(
        Stream.takeUntil((event) => event._tag === "TextDelta"),
        Stream.runCollect
      )
      assert.deepStrictEqual(Chunk.toReadonlyArray(seen).map((event) => event._tag), [
        "RunStarted",
        "ModelCallStarted",
        "ModelRequestSent",
        "TextDelta"
      ])
      assert.strictEqual(released, 1)
      // the reply never completed: nothing of it is stored
      const stored = Option.match(yield* agent.thread("t"), {
        onNone: () => [],
        onSome: (thread) => thread.state.messages.map((message) => message.role)
      })
      assert.notInclude(stored, "assistant")
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("hello there")]))))

  it.effect("a model stream that fails mid-reply fails the run with its error; the text sent is reported discarded", () =>
    Effect.gen(function*() {
      const broken = Middleware.make({
        name: "broken",
        wrapModelStream: (_request, parts) =>
          parts.pipe(
            Stream.filter((part) => part.type !== "finish"),
            Stream.concat(Stream.fail(ScriptedModel.httpError(502)))
          )
      })
      const agent = yield* Agent.make({ middleware: [broken] })
      const events: Array<AgentEvent.AgentEvent<any>> = []
      const error = yield* agent.stream("hi", { threadId: "t" }).pipe(
        Stream.runForEach((event) => Effect.sync(() => void events.push(event))),
        Effect.flip
      )
      assert.strictEqual(error._tag === "HttpResponseError" && error.response.status, 502)
      const failed = events.find((event) => event._tag === "ModelAttemptFailed")
      assert.deepStrictEqual(
        failed?._tag === "ModelAttemptFailed" && { error: failed.error, discardedText: failed.discardedText },
        { error: "HttpResponseError", discardedText: true }
      )
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("hello there")]))))
})
