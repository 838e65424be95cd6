/**
 * End to end: model replies cut short or empty, from the real
 * `@effect/ai-openai` client over a fake server on 127.0.0.1 — a stream
 * that ends before `response.completed`, a 200 JSON body answering a
 * streaming request, an empty completion, a connection dropped mid-stream.
 * Each fails the run with a typed error (never a success with `""`), keeps
 * the streamed text on the error, leaves the stored thread as it was, and is
 * retried by ModelRetry; attaching the inspector does not change the outcome.
 */
import type * as AiError from "@effect/ai/AiError"
import type * as Prompt from "@effect/ai/Prompt"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Checkpointer } from "@stepwise-agent/core"
import type { AgentError, Middleware } from "@stepwise-agent/core"
import * as Inspector from "@stepwise-agent/inspector/Inspector"
import * as ModelRetry from "@stepwise-agent/middleware/ModelRetry"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Cause, Chunk, Effect, Exit, Layer, Option, Ref, Stream } from "effect"
import { transcript } from "./transcript.js"

// ---------------------------------------------------------------------------
// the agent under test
// ---------------------------------------------------------------------------

interface SetupOptions {
  /** The agent's middleware, or a function building them from the fake server. */
  readonly middleware?:
    | ReadonlyArray<Middleware.Any>
    | ((server: FakeOpenAi.FakeOpenAi) => Effect.Effect<ReadonlyArray<Middleware.Any>, unknown>)
    | undefined
  /** Attach the inspector to the agent (which then watches every run). */
  readonly inspector?: boolean | undefined
}

/** A fake server with `script`, the real OpenAI model over it, and an agent with an in-memory checkpointer. */
const setup = (script: ReadonlyArray<FakeOpenAi.Reply>, options?: SetupOptions) =>
  Effect.gen(function*() {
    const server = yield* FakeOpenAi.make(script)
    const model = yield* Layer.build(FakeOpenAi.languageModel(server))
    const middleware = typeof options?.middleware === "function"
      ? yield* options.middleware(server)
      : options?.middleware ?? []
    const agent = yield* Agent.make({ middleware }).pipe(
      Effect.provide(model),
      Effect.provide(Checkpointer.layerMemory)
    )
    if (options?.inspector === true) yield* Inspector.make(agent)
    return { server, agent }
  })

type TestAgent = Effect.Effect.Success<ReturnType<typeof setup>>["agent"]

const messagesOf = (agent: TestAgent, threadId: string) =>
  Effect.map(agent.thread(threadId), (thread) => Option.getOrThrow(thread).state.messages)

/** Whether an assistant message with no text and no tool call is among `messages`. */
const hasEmptyAssistant = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.some((message) =>
    message.role === "assistant" &&
    !message.content.some((part) => part.type === "tool-call" || (part.type === "text" && part.text.trim() !== ""))
  )

const question = "What is the weather like?"
const chunks = ["It is ", "sunny ", "today."]
const answer = chunks.join("")

/** The first exchange of every thread: `hello` answered over either mode. */
const greeting = FakeOpenAi.byMode({ generate: FakeOpenAi.text("Hello!"), stream: FakeOpenAi.streamText(["Hello!"]) })

/** The stream of a run on `t1`, its text deltas recorded; its failure, or a defect if it completed. */
const streamFailure = (agent: TestAgent, onDelta?: (deltas: ReadonlyArray<string>) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const deltas = yield* Ref.make<ReadonlyArray<string>>([])
    const error = yield* agent.stream(question, { threadId: "t1" }).pipe(
      Stream.runForEach((event) =>
        event._tag === "TextDelta"
          ? Effect.flatMap(Ref.updateAndGet(deltas, (all) => [...all, event.delta]), onDelta ?? (() => Effect.void))
          : Effect.void
      ),
      Effect.flip
    )
    return { error, deltas: yield* Ref.get(deltas) }
  })

const asReplyError = (error: unknown): AgentError.ModelReplyError => {
  assert.strictEqual((error as { readonly _tag?: string })._tag, "ModelReplyError", String(error))
  return error as AgentError.ModelReplyError
}

// ---------------------------------------------------------------------------
// typed failures
// ---------------------------------------------------------------------------

describe("model replies cut short, over the real OpenAI client", () => {
  it.scoped("a stream ending before response.completed fails with ModelReplyError truncated, holding the streamed text; the thread is unchanged", () =>
    Effect.gen(function*() {
      const { agent } = yield* setup([greeting, FakeOpenAi.streamTextCut(chunks, { deltas: 2 })])
      yield* Stream.runDrain(agent.stream("hello", { threadId: "t1" }))
      const before = yield* messagesOf(agent, "t1")

      const { deltas, error } = yield* streamFailure(agent)

      const failure = asReplyError(error)
      assert.strictEqual(failure.reason, "Truncated")
      assert.isTrue(failure.streamed)
      assert.strictEqual(failure.step, 0)
      // what the consumer saw streamed is what the error holds
      assert.deepStrictEqual(deltas, chunks.slice(0, 2))
      assert.strictEqual(failure.text, "It is sunny ")
      assert.include(failure.received, "text-delta")
      assert.notInclude(failure.received, "finish")
      assert.include(failure.message, "ended before its finish event")
      assert.deepStrictEqual(yield* messagesOf(agent, "t1"), before)
      assert.isFalse(hasEmptyAssistant(yield* messagesOf(agent, "t1")))
    }))

  it.scoped("a 200 JSON body answering a streaming request fails with ModelReplyError not-a-stream; the thread is unchanged", () =>
    Effect.gen(function*() {
      const { agent, server } = yield* setup([greeting, FakeOpenAi.textNotStreamed(answer)])
      yield* Stream.runDrain(agent.stream("hello", { threadId: "t1" }))
      const before = yield* messagesOf(agent, "t1")

      const { deltas, error } = yield* streamFailure(agent)

      const failure = asReplyError(error)
      assert.strictEqual(failure.reason, "NotAStream")
      assert.deepStrictEqual(failure.received, [])
      assert.deepStrictEqual(deltas, [])
      assert.deepStrictEqual(yield* messagesOf(agent, "t1"), before)
      const requests = yield* server.requests
      assert.isTrue(requests[1]!.body.stream)
      assert.strictEqual(requests[1]!.answeredWith, "Raw")
    }))

  for (
    const [what, reply] of [
      ["an empty output_text", FakeOpenAi.byMode({ generate: FakeOpenAi.text(""), stream: FakeOpenAi.streamText([]) })],
      [
        "blank text",
        FakeOpenAi.byMode({ generate: FakeOpenAi.text("  \n"), stream: FakeOpenAi.streamText([" ", "\n"]) })
      ],
      [
        "no output at all",
        FakeOpenAi.byMode({
          generate: FakeOpenAi.json(FakeOpenAi.envelope([])),
          stream: FakeOpenAi.sse(FakeOpenAi.textEvents([]).filter((event) => !event.type.includes("output_")))
        })
      ]
    ] as const
  ) {
    it.scoped(`an empty completion (${what}) fails run and stream with ModelReplyError empty; no empty assistant message is stored`, () =>
      Effect.gen(function*() {
        for (const mode of ["run", "stream"] as const) {
          const { agent, server } = yield* setup([greeting, reply])
          const send = (input: string) =>
            mode === "run"
              ? Effect.asVoid(agent.run(input, { threadId: "t1" }))
              : Stream.runDrain(agent.stream(input, { threadId: "t1" }))
          yield* send("hello")
          const before = yield* messagesOf(agent, "t1")

          const failure = asReplyError(yield* Effect.flip(send(question)))

          assert.strictEqual(failure.reason, "Empty", mode)
          assert.strictEqual(failure.finishReason, "stop", mode)
          assert.strictEqual(failure.streamed, mode === "stream")
          assert.strictEqual(failure.text.trim(), "")
          const after = yield* messagesOf(agent, "t1")
          assert.deepStrictEqual(after, before, mode)
          assert.isFalse(hasEmptyAssistant(after), mode)
          assert.deepStrictEqual(
            (yield* server.requests).map((request) => request.body.stream === true),
            [mode === "stream", mode === "stream"]
          )
        }
      }))
  }
})

// ---------------------------------------------------------------------------
// ModelRetry
// ---------------------------------------------------------------------------

describe("ModelRetry and replies cut short, over the real OpenAI client", () => {
  const retry = ModelRetry.middleware({ maxRetries: 2, initialDelay: "1 millis", jitter: false })

  /** Streams `question` on `t1`; checks the answer arrived once and was stored once; gives the retry decisions. */
  const answeredOnce = (agent: TestAgent, onDelta?: (deltas: ReadonlyArray<string>) => Effect.Effect<void>) =>
    Effect.gen(function*() {
      const events = yield* Ref.make<ReadonlyArray<AgentEvent.AgentEvent>>([])
      const deltas = yield* Ref.make<ReadonlyArray<string>>([])
      yield* agent.stream(question, { threadId: "t1" }).pipe(
        Stream.runForEach((event) =>
          Effect.zipRight(
            Ref.update(events, (all) => [...all, event]),
            event._tag === "TextDelta"
              ? Effect.flatMap(Ref.updateAndGet(deltas, (all) => [...all, event.delta]), onDelta ?? (() => Effect.void))
              : Effect.void
          )
        )
      )
      const all = yield* Ref.get(events)
      const ended = all[all.length - 1]!
      assert.strictEqual(ended._tag, "RunEnded")
      if (ended._tag === "RunEnded" && ended.result._tag === "Completed") assert.strictEqual(ended.result.text, answer)
      else assert.fail(`the run did not complete: ${JSON.stringify(ended)}`)
      assert.deepStrictEqual(transcript(yield* messagesOf(agent, "t1"), "full"), [
        `user: ${question}`,
        `assistant: ${answer}`
      ])
      return all.filter(AgentEvent.$is("MiddlewareDecision")).map((event) => event.decision)
    })

  it.scopedLive("retries a stream that ended before response.completed; the answer is stored once", () =>
    Effect.gen(function*() {
      const { agent, server } = yield* setup([
        FakeOpenAi.streamTextCut(chunks, { deltas: 2 }),
        FakeOpenAi.streamText(chunks)
      ], { middleware: [retry] })

      const decisions = yield* answeredOnce(agent)

      assert.deepStrictEqual(decisions, ["retry 1 of 2 after truncated reply, waiting 1ms"])
      const requests = yield* server.requests
      assert.strictEqual(requests.length, 2)
      assert.deepStrictEqual(requests[1]!.body, requests[0]!.body)
    }))

  it.scopedLive("retries a connection dropped mid-stream (Decode, status 200); the answer is stored once", () =>
    Effect.gen(function*() {
      // created, in_progress, output_item.added, content_part.added and two deltas, then stall
      const { agent, server } = yield* setup([
        FakeOpenAi.sse(FakeOpenAi.textEvents(chunks), { stallAfter: 6 }),
        FakeOpenAi.streamText(chunks)
      ], { middleware: [retry] })
      const dropped = yield* Ref.make(0)

      const decisions = yield* answeredOnce(agent, (deltas) =>
        // cut the connection once the second delta of the first attempt has reached the consumer
        deltas.length === 2 ? Effect.flatMap(server.dropStalled, (n) => Ref.set(dropped, n)) : Effect.void)

      assert.strictEqual(yield* Ref.get(dropped), 1)
      assert.deepStrictEqual(decisions, ["retry 1 of 2 after Decode (200), waiting 1ms"])
      assert.deepStrictEqual((yield* server.requests).map((request) => request.answeredWith), ["Sse", "Sse"])
    }))

  it.scopedLive("retries a 200 JSON body answering a streaming request, and an empty completion", () =>
    Effect.gen(function*() {
      const { agent, server } = yield* setup([
        FakeOpenAi.textNotStreamed(answer),
        FakeOpenAi.streamText([]),
        FakeOpenAi.streamText(chunks)
      ], { middleware: [retry] })

      const decisions = yield* answeredOnce(agent)

      assert.deepStrictEqual(decisions, [
        "retry 1 of 2 after reply not a stream, waiting 1ms",
        "retry 2 of 2 after empty reply, waiting 2ms"
      ])
      assert.strictEqual((yield* server.requests).length, 3)
    }))

  it.scopedLive("retries a JSON reply cut short (run: HttpResponseError Decode, status 200)", () =>
    Effect.gen(function*() {
      const cut = FakeOpenAi.raw(JSON.stringify(FakeOpenAi.envelope([FakeOpenAi.messageItem(answer)])).slice(0, 120))
      const { agent: plain } = yield* setup([cut])
      const error = yield* Effect.flip(plain.run(question, { threadId: "t1" }))
      assert.strictEqual(error._tag, "HttpResponseError")
      assert.strictEqual((error as AiError.HttpResponseError).reason, "Decode")
      assert.strictEqual((error as AiError.HttpResponseError).response.status, 200)
      assert.isTrue(Option.isNone(yield* plain.thread("t1")))

      const { agent, server } = yield* setup([cut, FakeOpenAi.text(answer)], { middleware: [retry] })
      const result = yield* agent.run(question, { threadId: "t1" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag === "Completed") assert.strictEqual(result.text, answer)
      assert.deepStrictEqual(transcript(yield* messagesOf(agent, "t1"), "full"), [
        `user: ${question}`,
        `assistant: ${answer}`
      ])
      assert.strictEqual((yield* server.requests).length, 2)
    }))
})

// ---------------------------------------------------------------------------
// the inspector
// ---------------------------------------------------------------------------

/**
 * What a run ended with, comparable across agents: its failure (every field)
 * or its result, the stored thread, and how the server answered.
 */
const outcomeOf = <A>(agent: TestAgent, server: FakeOpenAi.FakeOpenAi, exit: Exit.Exit<A, unknown>) =>
  Effect.gen(function*() {
    const thread = yield* agent.thread("t1")
    return {
      exit: Exit.match(exit, {
        onFailure: (cause) => ({ failure: JSON.parse(JSON.stringify(Cause.squash(cause))) as unknown }),
        onSuccess: (value) => ({ success: value as unknown })
      }),
      stored: Option.map(thread, (thread) => transcript(thread.state.messages, "full")),
      answeredWith: (yield* server.requests).map((request) => request.answeredWith)
    }
  })

describe("the inspector does not change a run's outcome, over the real OpenAI client", () => {
  const scripts = [
    ["a stream ending before response.completed", FakeOpenAi.streamTextCut(chunks, { deltas: 2 })],
    ["a 200 JSON body answering a streaming request", FakeOpenAi.textNotStreamed(answer)],
    ["an empty completion", FakeOpenAi.streamText([])]
  ] as const

  for (const [what, reply] of scripts) {
    it.scopedLive(`stream: ${what} ends the same with and without the inspector`, () =>
      Effect.gen(function*() {
        const outcomes = []
        for (const inspector of [false, true]) {
          const { agent, server } = yield* setup([greeting, reply], { inspector })
          yield* Stream.runDrain(agent.stream("hello", { threadId: "t1" }))
          const exit = yield* Effect.exit(Stream.runCollect(agent.stream(question, { threadId: "t1" })))
          outcomes.push(yield* outcomeOf(agent, server, Exit.map(exit, Chunk.size)))
        }
        const [without, withInspector] = outcomes
        assert.strictEqual(
          (without!.exit as { readonly failure?: { readonly _tag?: string } }).failure?._tag,
          "ModelReplyError"
        )
        assert.deepStrictEqual(withInspector, without)
      }))
  }

  it.scopedLive("run: an empty completion fails the same with and without the inspector (which makes it stream)", () =>
    Effect.gen(function*() {
      const empty = FakeOpenAi.byMode({ generate: FakeOpenAi.text(""), stream: FakeOpenAi.streamText([]) })
      const failures: Array<AgentError.ModelReplyError> = []
      const stored: Array<ReadonlyArray<string>> = []
      for (const inspector of [false, true]) {
        const { agent, server } = yield* setup([greeting, empty], { inspector })
        yield* agent.run("hello", { threadId: "t1" })
        failures.push(asReplyError(yield* Effect.flip(agent.run(question, { threadId: "t1" }))))
        stored.push(transcript(yield* messagesOf(agent, "t1"), "full"))
        assert.deepStrictEqual(
          (yield* server.requests).map((request) => request.body.stream === true),
          [inspector, inspector],
          "a watched run streams"
        )
      }
      const [without, withInspector] = failures
      // the same failure; only `streamed` and the kinds of parts received tell how the reply came
      const same = ({ finishReason, reason, step, text }: AgentError.ModelReplyError) => ({
        reason,
        step,
        text,
        finishReason
      })
      assert.deepStrictEqual(same(withInspector!), same(without!))
      assert.deepStrictEqual([without!.streamed, withInspector!.streamed], [false, true])
      assert.deepStrictEqual(stored[1], stored[0])
      assert.deepStrictEqual(stored[0], ["user: hello", "assistant: Hello!"])
    }))
})
