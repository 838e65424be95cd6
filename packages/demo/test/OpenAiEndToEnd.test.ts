/**
 * End to end: the real `@effect/ai-openai` client (Responses API, plain and
 * streaming) driving an agent against a fake OpenAI server on 127.0.0.1.
 */
import type * as AiError from "@effect/ai/AiError"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Checkpointer } from "@stepwise-agent/core"
import type { Middleware } from "@stepwise-agent/core"
import * as ModelFallback from "@stepwise-agent/middleware/ModelFallback"
import * as ModelRetry from "@stepwise-agent/middleware/ModelRetry"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Chunk, Clock, Effect, Layer, Option, Ref, Schema, Stream } from "effect"
import { transcript } from "./transcript.js"

// ---------------------------------------------------------------------------
// the agent under test
// ---------------------------------------------------------------------------

const Calculate = Tool.make("calculate", {
  description: "Applies an arithmetic operator to two numbers.",
  parameters: {
    a: Schema.Number,
    op: Schema.Literal("+", "-", "*", "/"),
    b: Schema.Number
  },
  success: Schema.Number
})

const Calculator = Toolkit.make(Calculate)

interface CalculateParams {
  readonly a: number
  readonly op: "+" | "-" | "*" | "/"
  readonly b: number
}

const apply = ({ a, b, op }: CalculateParams) => op === "+" ? a + b : op === "-" ? a - b : op === "*" ? a * b : a / b

const systemPrompt = "You are a calculator. Use the calculate tool for arithmetic."

interface SetupOptions extends FakeOpenAi.LanguageModelOptions {
  /** The agent's middleware, or a function building them from the fake server. */
  readonly middleware?:
    | ReadonlyArray<Middleware.Any>
    | ((server: FakeOpenAi.FakeOpenAi) => Effect.Effect<ReadonlyArray<Middleware.Any>, unknown>)
    | undefined
}

/**
 * Starts a fake server with `script`, builds the real OpenAI model over it
 * and an agent with the calculator and an in-memory checkpointer, all in the
 * test's scope.
 */
const setup = (script: ReadonlyArray<FakeOpenAi.Reply>, options?: SetupOptions) =>
  Effect.gen(function*() {
    const server = yield* FakeOpenAi.make(script)
    const handled = yield* Ref.make<ReadonlyArray<CalculateParams>>([])
    // the model's options only: the language model refuses keys it does not know
    const { middleware: given, ...modelOptions } = options ?? {}
    const model = yield* Layer.build(FakeOpenAi.languageModel(server, modelOptions))
    const middleware = typeof given === "function" ? yield* given(server) : given ?? []
    const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt, middleware }).pipe(
      Effect.provide(model),
      Effect.provide(Calculator.toLayer({
        calculate: (params) => Effect.as(Ref.update(handled, (all) => [...all, params]), apply(params))
      })),
      Effect.provide(Checkpointer.layerMemory)
    )
    return { server, agent, handled: Ref.get(handled) }
  })

const storedTranscript = (agent: Effect.Effect.Success<ReturnType<typeof setup>>["agent"], threadId: string) =>
  agent.thread(threadId).pipe(
    Effect.map(
      Option.match({ onNone: () => [] as ReadonlyArray<string>, onSome: (s) => transcript(s.state.messages, "full") })
    )
  )

const question = "What is 6 times 7?"
const multiply = { callId: "call_mul_1", name: "calculate", arguments: { a: 6, op: "*", b: 7 } } as const
const answer = "6 times 7 is 42."

/** The transcript of a completed tool round trip for `question`. */
const toolRoundTrip = [
  `user: ${question}`,
  `assistant: call call_mul_1 calculate({"a":6,"op":"*","b":7})`,
  "tool: result call_mul_1 calculate 42"
]

// ---------------------------------------------------------------------------
// tests
// ---------------------------------------------------------------------------

describe("OpenAI end to end", () => {
  it.scoped("runs a tool call and a final answer over the Responses API", () =>
    Effect.gen(function*() {
      const { agent, handled, server } = yield* setup([
        FakeOpenAi.toolCalls([multiply], { usage: [50, 18] }),
        FakeOpenAi.text(answer, { usage: [80, 9] })
      ])

      const result = yield* agent.run(question, { threadId: "t1" })

      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      assert.strictEqual(result.text, answer)
      assert.strictEqual(result.steps, 2)
      assert.deepStrictEqual(
        [result.usage.inputTokens, result.usage.outputTokens, result.usage.totalTokens],
        [130, 27, 157]
      )
      assert.deepStrictEqual(yield* handled, [{ a: 6, op: "*", b: 7 }])
      assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), [...toolRoundTrip, `assistant: ${answer}`])

      const requests = yield* server.requests
      assert.strictEqual(requests.length, 2)
      for (const request of requests) {
        assert.strictEqual(request.method, "POST")
        assert.strictEqual(request.path, "/v1/responses")
        assert.strictEqual(request.headers.authorization, "Bearer sk-test")
        assert.strictEqual(request.body.model, "gpt-4o-mini")
        assert.notStrictEqual(request.body.stream, true)
        assert.strictEqual(request.body.tool_choice, "auto")
        assert.deepStrictEqual(request.body.tools, [{
          type: "function",
          name: "calculate",
          description: "Applies an arithmetic operator to two numbers.",
          parameters: {
            type: "object",
            required: ["a", "op", "b"],
            properties: {
              a: { type: "number" },
              op: { type: "string", enum: ["+", "-", "*", "/"] },
              b: { type: "number" }
            },
            additionalProperties: false
          },
          strict: false
        }])
      }
      assert.deepStrictEqual(FakeOpenAi.inputSummary(requests[0]!.body), [`system:${systemPrompt}`, `user:${question}`])
      const second = requests[1]!.body
      assert.deepStrictEqual(FakeOpenAi.inputSummary(second), [
        `system:${systemPrompt}`,
        `user:${question}`,
        `function_call:call_mul_1:calculate:{"a":6,"op":"*","b":7}`,
        "function_call_output:call_mul_1:42"
      ])
      const [call] = FakeOpenAi.functionCalls(second)
      const [output] = FakeOpenAi.functionCallOutputs(second)
      assert.strictEqual(call!.call_id, output!.call_id)
      assert.strictEqual(yield* server.remaining, 0)
    }))

  it.scoped("streams the same run: text deltas add up to the final answer", () =>
    Effect.gen(function*() {
      const chunks = ["6 times 7", " is", " 42."]
      const { agent, handled, server } = yield* setup([
        FakeOpenAi.streamToolCalls([multiply], { usage: [50, 18] }),
        FakeOpenAi.streamText(chunks, { usage: [80, 9] })
      ])

      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream(question, { threadId: "t1" })))

      assert.deepStrictEqual(events.map((event) => event._tag), [
        "RunStarted",
        "ModelCallStarted",
        "ModelRequestSent",
        "ModelResponded",
        "ToolCallStarted",
        "ToolCallCompleted",
        "ModelCallStarted",
        "ModelRequestSent",
        "TextDelta",
        "TextDelta",
        "TextDelta",
        "ModelResponded",
        "RunEnded"
      ])
      const deltas = events.filter(AgentEvent.$is("TextDelta"))
      assert.deepStrictEqual(deltas.map((event) => event.delta), chunks)
      assert.deepStrictEqual(deltas.map((event) => event.step), [1, 1, 1])
      const ended = events[events.length - 1]!
      assert.isTrue(ended._tag === "RunEnded" && ended.result._tag === "Completed")
      if (ended._tag !== "RunEnded" || ended.result._tag !== "Completed") return
      assert.strictEqual(ended.result.text, chunks.join(""))
      assert.strictEqual(ended.result.text, answer)
      assert.strictEqual(ended.result.usage.totalTokens, 157)

      const completed = events.filter(AgentEvent.$is("ToolCallCompleted"))[0]!
      assert.strictEqual(completed.result.id, "call_mul_1")
      assert.strictEqual(completed.result.result, 42)
      assert.deepStrictEqual(yield* handled, [{ a: 6, op: "*", b: 7 }])
      assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), [...toolRoundTrip, `assistant: ${answer}`])

      const requests = yield* server.requests
      assert.deepStrictEqual(requests.map((request) => request.body.stream), [true, true])
      assert.deepStrictEqual(FakeOpenAi.inputSummary(requests[1]!.body), [
        `system:${systemPrompt}`,
        `user:${question}`,
        `function_call:call_mul_1:calculate:{"a":6,"op":"*","b":7}`,
        "function_call_output:call_mul_1:42"
      ])
    }))

  it.scoped("answers invalid tool arguments with a failed tool result the model repairs", () =>
    Effect.gen(function*() {
      const { agent, handled, server } = yield* setup([
        FakeOpenAi.toolCalls([{ callId: "call_bad", name: "calculate", arguments: { a: "six", op: "times", b: 7 } }]),
        FakeOpenAi.toolCalls([{ ...multiply, callId: "call_good" }]),
        FakeOpenAi.text(answer)
      ])

      const result = yield* agent.run(question, { threadId: "t1" })

      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(result.steps, 3)
      // the handler only ever saw the repaired arguments
      assert.deepStrictEqual(yield* handled, [{ a: 6, op: "*", b: 7 }])

      const snapshot = Option.getOrThrow(yield* agent.thread("t1"))
      const failed = snapshot.state.messages[2]!
      assert.strictEqual(failed.role, "tool")
      if (failed.role !== "tool") return
      const [failure] = failed.content
      assert.strictEqual(failure!.id, "call_bad")
      assert.isTrue(failure!.isFailure)
      const message = (failure!.result as { readonly error: string }).error
      assert.include(message, `Invalid arguments for tool "calculate"`)
      assert.include(message, `"six"`)

      const requests = yield* server.requests
      assert.strictEqual(requests.length, 3)
      // the model saw its own bad call and the error, paired by call id
      const [badCall] = FakeOpenAi.functionCalls(requests[1]!.body)
      const [badOutput] = FakeOpenAi.functionCallOutputs(requests[1]!.body)
      assert.strictEqual(badCall!.call_id, "call_bad")
      assert.strictEqual(badCall!.arguments, `{"a":"six","op":"times","b":7}`)
      assert.strictEqual(badOutput!.call_id, "call_bad")
      assert.deepStrictEqual(JSON.parse(badOutput!.output!), { error: message })
      assert.deepStrictEqual(FakeOpenAi.inputSummary(requests[2]!.body).slice(2), [
        `function_call:call_bad:calculate:{"a":"six","op":"times","b":7}`,
        `function_call_output:call_bad:${JSON.stringify({ error: message })}`,
        `function_call:call_good:calculate:{"a":6,"op":"*","b":7}`,
        "function_call_output:call_good:42"
      ])
    }))

  it.scoped("arguments that are not JSON are answered with a failed tool result the model repairs", () =>
    Effect.gen(function*() {
      // @effect/ai-openai parses `arguments` itself and fails the reply; the agent recovers the call
      // (its arguments kept as the text that came) and answers it like arguments of the wrong shape
      const { agent, handled, server } = yield* setup([
        FakeOpenAi.toolCalls([{ callId: "call_trunc", name: "calculate", arguments: `{"a": 6, "op": "*", "b"` }]),
        FakeOpenAi.toolCalls([{ ...multiply, callId: "call_good" }]),
        FakeOpenAi.text(answer)
      ])

      const result = yield* agent.run(question, { threadId: "t1" })

      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(yield* handled, [{ a: 6, op: "*", b: 7 }])
      const [badOutput] = FakeOpenAi.functionCallOutputs((yield* server.requests)[1]!.body)
      const message = (JSON.parse(badOutput!.output!) as { readonly error: string }).error
      assert.include(message, `Invalid arguments for tool "calculate": the arguments are not valid JSON`)
    }))

  describe("provider failures are typed and leave the stored thread intact", () => {
    const greeting = ["user: hello", "assistant: Hello! Ask me some arithmetic."]

    /** Runs a first, successful exchange on "t1", then a run that meets `failure`. */
    const failingSecondRun = (failure: FakeOpenAi.Reply, options?: FakeOpenAi.LanguageModelOptions) =>
      Effect.gen(function*() {
        const { agent, server } = yield* setup([FakeOpenAi.text("Hello! Ask me some arithmetic."), failure], options)
        yield* agent.run("hello", { threadId: "t1" })
        assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), greeting)
        const error = yield* Effect.flip(agent.run(question, { threadId: "t1" }))
        // the failed run wrote nothing: not its user message, not a partial answer
        assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), greeting)
        const requests = yield* server.requests
        assert.strictEqual(requests.length, 2, "no retry without retry middleware")
        assert.strictEqual(requests[1]!.answeredWith, failure._tag)
        return { error: error as AiError.AiError, agent, server }
      })

    it.scoped("429 with retry-after → HttpResponseError (StatusCode, 429) carrying the header", () =>
      Effect.gen(function*() {
        const { error } = yield* failingSecondRun(
          FakeOpenAi.error(429, "Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3, Used 3.", {
            type: "requests",
            headers: { "retry-after": "20", "x-ratelimit-remaining-requests": "0" }
          })
        )
        assert.strictEqual(error._tag, "HttpResponseError")
        if (error._tag !== "HttpResponseError") return
        assert.strictEqual(error.reason, "StatusCode")
        assert.strictEqual(error.response.status, 429)
        assert.strictEqual(error.response.headers["retry-after"], "20")
        assert.strictEqual(error.module, "OpenAiClient")
        assert.strictEqual(error.method, "createResponse")
        assert.include(error.body ?? "", "Rate limit reached")
        assert.include(error.description ?? "", "Rate limit reached")
      }))

    it.scoped("500 → HttpResponseError (StatusCode, 500)", () =>
      Effect.gen(function*() {
        const { error } = yield* failingSecondRun(
          FakeOpenAi.error(500, "The server had an error while processing your request. Sorry about that!")
        )
        assert.strictEqual(error._tag, "HttpResponseError")
        if (error._tag !== "HttpResponseError") return
        assert.strictEqual(error.reason, "StatusCode")
        assert.strictEqual(error.response.status, 500)
        assert.include(error.body ?? "", "The server had an error")
      }))

    it.scoped("a body that is not JSON → HttpResponseError (Decode, status 200)", () =>
      Effect.gen(function*() {
        const { error } = yield* failingSecondRun(
          FakeOpenAi.raw(`{"id":"resp_cut","object":"response","created_at":1741476542,"output":[{"type":"mess`)
        )
        assert.strictEqual(error._tag, "HttpResponseError")
        if (error._tag !== "HttpResponseError") return
        assert.strictEqual(error.reason, "Decode")
        assert.strictEqual(error.response.status, 200)
      }))

    it.scoped("JSON of the wrong shape → MalformedOutput", () =>
      Effect.gen(function*() {
        const { error } = yield* failingSecondRun(
          FakeOpenAi.json({ id: "resp_odd", object: "response", output: "not a list" })
        )
        assert.strictEqual(error._tag, "MalformedOutput")
        assert.strictEqual(error.module, "OpenAiClient")
        assert.strictEqual(error.method, "createResponse")
      }))

    it.scoped("a dropped connection (undici) → HttpRequestError (Transport)", () =>
      Effect.gen(function*() {
        const { error } = yield* failingSecondRun(FakeOpenAi.drop)
        assert.strictEqual(error._tag, "HttpRequestError")
        if (error._tag !== "HttpRequestError") return
        assert.strictEqual(error.reason, "Transport")
        assert.strictEqual(error.module, "OpenAiClient")
      }))

    it.scoped("a dropped connection (fetch) → HttpRequestError (Transport)", () =>
      Effect.gen(function*() {
        const { error } = yield* failingSecondRun(FakeOpenAi.drop, { httpClient: "fetch" })
        assert.strictEqual(error._tag, "HttpRequestError")
        if (error._tag !== "HttpRequestError") return
        assert.strictEqual(error.reason, "Transport")
      }))

    it.scoped("the run's error describes the request with its API key scrubbed", () =>
      Effect.gen(function*() {
        // @effect/ai 0.37 `HttpResponseError.fromResponseError` calls `Inspectable.redact`
        // outside a logger, where it redacts nothing; for a Decode error the `body` (and so
        // `message`) is the whole formatted platform error, request headers included. The
        // loop scrubs it (see Secrets and SecretsEndToEnd.test.ts).
        const { error } = yield* failingSecondRun(FakeOpenAi.raw("{ not json"))
        assert.strictEqual(error._tag, "HttpResponseError")
        if (error._tag !== "HttpResponseError") return
        assert.strictEqual(error.request.headers.authorization, "<redacted>")
        assert.notInclude(error.body ?? "", "Bearer sk-test")
        assert.notInclude(error.message, "Bearer sk-test")
        assert.include(error.message, "<redacted>")
      }))

    it.scoped("a 500 after a tool step keeps that step; the thread continues on the next run", () =>
      Effect.gen(function*() {
        const { agent, handled, server } = yield* setup([
          FakeOpenAi.toolCalls([multiply]),
          FakeOpenAi.error(500, "The server had an error while processing your request. Sorry about that!")
        ])

        const error = yield* Effect.flip(agent.run(question, { threadId: "t1" }))

        assert.strictEqual(error._tag, "HttpResponseError")
        assert.strictEqual((error as AiError.HttpResponseError).response.status, 500)
        // the completed step (call + result) was checkpointed, nothing after it
        assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), toolRoundTrip)
        assert.strictEqual((yield* handled).length, 1)

        yield* server.enqueue(FakeOpenAi.text(answer))
        const result = yield* agent.run("Go on.", { threadId: "t1" })

        assert.strictEqual(result._tag, "Completed")
        assert.strictEqual((yield* handled).length, 1, "the tool did not run again")
        assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), [
          ...toolRoundTrip,
          "user: Go on.",
          `assistant: ${answer}`
        ])
        const requests = yield* server.requests
        assert.strictEqual(requests.length, 3)
        assert.deepStrictEqual(FakeOpenAi.inputSummary(requests[2]!.body), [
          `system:${systemPrompt}`,
          `user:${question}`,
          `function_call:call_mul_1:calculate:{"a":6,"op":"*","b":7}`,
          "function_call_output:call_mul_1:42",
          "user:Go on."
        ])
      }))

    it.scoped("a 429 on a streamed run → HttpResponseError (StatusCode, 429) from streamRequest", () =>
      Effect.gen(function*() {
        const { agent, server } = yield* setup([
          FakeOpenAi.streamText(["Hello! Ask me some arithmetic."]),
          FakeOpenAi.error(429, "Rate limit reached", { type: "requests", headers: { "retry-after": "1" } })
        ])
        yield* Stream.runDrain(agent.stream("hello", { threadId: "t1" }))

        const error = yield* Effect.flip(Stream.runDrain(agent.stream(question, { threadId: "t1" })))

        assert.strictEqual(error._tag, "HttpResponseError")
        const failure = error as AiError.HttpResponseError
        assert.strictEqual(failure.reason, "StatusCode")
        assert.strictEqual(failure.response.status, 429)
        assert.strictEqual(failure.response.headers["retry-after"], "1")
        assert.strictEqual(failure.method, "streamRequest")
        assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), greeting)
        assert.strictEqual((yield* server.requests).length, 2)
      }))

    it.scoped("a connection dropped mid-stream fails the run; the streamed text is not stored", () =>
      Effect.gen(function*() {
        const chunks = ["6 times 7", " is", " 42."]
        // send created, in_progress, output_item.added, content_part.added and two deltas, then stall
        const { agent, server } = yield* setup([
          FakeOpenAi.streamText(["Hello! Ask me some arithmetic."]),
          FakeOpenAi.sse(FakeOpenAi.textEvents(chunks), { stallAfter: 6 })
        ])
        yield* Stream.runDrain(agent.stream("hello", { threadId: "t1" }))

        const seen = yield* Ref.make<ReadonlyArray<string>>([])
        const dropped = yield* Ref.make(0)
        const error = yield* agent.stream(question, { threadId: "t1" }).pipe(
          Stream.runForEach((event) =>
            event._tag === "TextDelta"
              ? Ref.updateAndGet(seen, (all) => [...all, event.delta]).pipe(
                // cut the connection once the second delta has reached the consumer
                Effect.flatMap((all) =>
                  all.length === 2 ? Effect.flatMap(server.dropStalled, (n) => Ref.set(dropped, n)) : Effect.void
                )
              )
              : Effect.void
          ),
          Effect.flip
        )

        assert.strictEqual(error._tag, "HttpResponseError")
        const failure = error as AiError.HttpResponseError
        assert.strictEqual(failure.reason, "Decode")
        assert.strictEqual(failure.method, "streamRequest")
        assert.strictEqual(failure.response.status, 200)
        assert.strictEqual(yield* Ref.get(dropped), 1)
        // the live deltas went out before the cut, but the checkpoint holds no partial answer
        assert.deepStrictEqual(yield* Ref.get(seen), chunks.slice(0, 2))
        assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), greeting)
      }))
  })

  describe("with ModelRetry", () => {
    const retry = ModelRetry.middleware({ maxRetries: 2, initialDelay: "1 millis", jitter: false })

    it.scopedLive("recovers from a 500, then the run completes", () =>
      Effect.gen(function*() {
        const { agent, handled, server } = yield* setup([
          FakeOpenAi.error(500, "The server had an error while processing your request. Sorry about that!"),
          FakeOpenAi.toolCalls([multiply]),
          FakeOpenAi.text(answer)
        ], { middleware: [retry] })

        const result = yield* agent.run(question, { threadId: "t1" })

        assert.strictEqual(result._tag, "Completed")
        if (result._tag !== "Completed") return
        assert.strictEqual(result.text, answer)
        assert.strictEqual(result.steps, 2, "a retried call is one step")
        assert.strictEqual((yield* handled).length, 1)
        assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), [...toolRoundTrip, `assistant: ${answer}`])
        const requests = yield* server.requests
        assert.deepStrictEqual(requests.map((request) => request.answeredWith), ["Json", "Json", "Json"])
        // the retry sent exactly the request that failed
        assert.deepStrictEqual(requests[1]!.body, requests[0]!.body)
        assert.strictEqual(FakeOpenAi.functionCallOutputs(requests[2]!.body).length, 1)
      }))

    it.scopedLive("retries a dropped connection and a 429, waiting the retry-after-ms it was given", () =>
      Effect.gen(function*() {
        const { agent, server } = yield* setup([
          FakeOpenAi.streamText(["Hello! Ask me some arithmetic."]),
          FakeOpenAi.drop,
          FakeOpenAi.error(429, "Rate limit reached", { type: "requests", headers: { "retry-after-ms": "40" } }),
          FakeOpenAi.streamText(["6 times 7", " is", " 42."])
        ], { middleware: [retry] })
        yield* Stream.runDrain(agent.stream("hello", { threadId: "t1" }))

        const started = yield* Clock.currentTimeMillis
        const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream(question, { threadId: "t1" })))
        const elapsed = (yield* Clock.currentTimeMillis) - started

        const decisions = events.filter(AgentEvent.$is("MiddlewareDecision"))
        assert.deepStrictEqual(decisions.map((event) => [event.middleware, event.decision]), [
          ["modelRetry", "retry 1 of 2 after Transport, waiting 1ms"],
          ["modelRetry", "retry 2 of 2 after 429, waiting 40ms"]
        ])
        assert.isAtLeast(elapsed, 40)
        assert.deepStrictEqual(
          events.filter(AgentEvent.$is("TextDelta")).map((event) => event.delta).join(""),
          answer
        )
        assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), [
          "user: hello",
          "assistant: Hello! Ask me some arithmetic.",
          `user: ${question}`,
          `assistant: ${answer}`
        ])
        const requests = yield* server.requests
        assert.deepStrictEqual(requests.map((request) => request.answeredWith), ["Sse", "Drop", "Json", "Sse"])
        assert.deepStrictEqual(requests[2]!.body, requests[1]!.body)
        assert.deepStrictEqual(requests[3]!.body, requests[1]!.body)
      }))
  })

  describe("with ModelFallback", () => {
    /** A fallback model on the same fake server: `gpt-4o`, told apart by the request's `model`. */
    const fallbackTo = (server: FakeOpenAi.FakeOpenAi) =>
      Effect.succeed([ModelFallback.middleware(FakeOpenAi.languageModel(server, { model: "gpt-4o" }))])

    it.scoped("answers with the fallback model when the primary one fails with a 503", () =>
      Effect.gen(function*() {
        const { agent, server } = yield* setup([
          FakeOpenAi.error(503, "The engine is currently overloaded, please try again later."),
          FakeOpenAi.text(answer)
        ], { middleware: fallbackTo })

        const result = yield* agent.run(question, { threadId: "t1" })

        assert.strictEqual(result._tag, "Completed")
        if (result._tag !== "Completed") return
        assert.strictEqual(result.text, answer)
        assert.strictEqual(result.steps, 1)
        assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), [`user: ${question}`, `assistant: ${answer}`])
        const requests = yield* server.requests
        assert.deepStrictEqual(requests.map((request) => request.body.model), ["gpt-4o-mini", "gpt-4o"])
        // the same conversation and tools went to the fallback
        assert.deepStrictEqual({ ...requests[1]!.body, model: "gpt-4o-mini" }, requests[0]!.body)
      }))

    it.scoped("fails with ModelFallbackExhausted when every model fails; the thread is intact", () =>
      Effect.gen(function*() {
        const { agent, server } = yield* setup([
          FakeOpenAi.text("Hello! Ask me some arithmetic."),
          FakeOpenAi.error(500, "The server had an error while processing your request. Sorry about that!"),
          FakeOpenAi.drop
        ], { middleware: fallbackTo })
        yield* agent.run("hello", { threadId: "t1" })

        const error = yield* Effect.flip(agent.run(question, { threadId: "t1" }))

        assert.strictEqual(error._tag, "ModelFallbackExhausted")
        if (error._tag !== "ModelFallbackExhausted") return
        assert.deepStrictEqual(
          error.attempts.map(({ error, model }: ModelFallback.Attempt) => [
            model,
            error._tag,
            error._tag === "ModelReplyError" ? undefined : error.module
          ]),
          [["primary", "HttpResponseError", "OpenAiClient"], ["fallback 1", "HttpRequestError", "OpenAiClient"]]
        )
        assert.deepStrictEqual(yield* storedTranscript(agent, "t1"), [
          "user: hello",
          "assistant: Hello! Ask me some arithmetic."
        ])
        assert.deepStrictEqual(
          (yield* server.requests).map((request) => [request.body.model, request.answeredWith]),
          [["gpt-4o-mini", "Json"], ["gpt-4o-mini", "Json"], ["gpt-4o", "Drop"]]
        )
      }))
  })
})
