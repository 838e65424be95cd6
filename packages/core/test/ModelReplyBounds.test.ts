/**
 * A model call is bounded: a streamed reply past `maxReplyChars` (a provider
 * that never ends its stream, or ends it too late) is cut off there and fails
 * with `ModelReplyError` "TooLarge"; a call past `modelTimeout` (a provider
 * that never answers, or stalls mid-stream) fails with "TimedOut". Either way
 * nothing of the reply is stored.
 */
import type { Prompt } from "@effect/ai"
import { LanguageModel, Response } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError } from "@stepwise-agent/core"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Cause, Effect, Exit, FastCheck, Layer, Option, Stream } from "effect"
import * as http from "node:http"

const usage = new Response.Usage({ inputTokens: 1, outputTokens: 1, totalTokens: 2 })

/** A model whose every call streams `stream` (generating: waits forever). */
const modelOf = (stream: () => Stream.Stream<Response.AnyPart>, pulled: { n: number }) =>
  Layer.succeed(
    LanguageModel.LanguageModel,
    {
      generateText: () => Effect.never,
      streamText: () => Stream.tap(stream(), () => Effect.sync(() => pulled.n++)),
      generateObject: () => Effect.dieMessage("not used")
    } as unknown as LanguageModel.Service
  )

/** A text reply that never ends: `delta` again and again. */
const endless = (delta: string) =>
  Stream.concat(
    Stream.make(Response.makePart("text-start", { id: "t" })),
    Stream.forever(Stream.make(Response.makePart("text-delta", { id: "t", delta })))
  )

/** The `ModelReplyError` a run failed with. */
const replyError = <A, E>(exit: Exit.Exit<A, E>): AgentError.ModelReplyError => {
  assert.isTrue(Exit.isFailure(exit), "the run did not fail")
  const failure = Cause.failureOption((exit as Exit.Failure<A, E>).cause)
  assert.isTrue(Option.isSome(failure), "the run did not fail with an error")
  const error = (failure as Option.Some<unknown>).value
  assert.instanceOf(error, AgentError.ModelReplyError)
  return error as AgentError.ModelReplyError
}

/** The stored thread's messages (none: never stored). */
const storedMessages = (agent: { readonly thread: Agent.Service["thread"] }, threadId: string) =>
  Effect.map(
    Effect.orDie(agent.thread(threadId)),
    Option.match({
      onNone: () => [] as ReadonlyArray<Prompt.Message>,
      onSome: (snapshot) => (snapshot.state as { readonly messages: ReadonlyArray<Prompt.Message> }).messages
    })
  )

describe("a model reply is bounded", () => {
  it.effect("an endless streamed reply fails with TooLarge at maxReplyChars, pulled no further, and nothing is stored", () =>
    Effect.gen(function*() {
      const pulled = { n: 0 }
      const agent = yield* Agent.make({ maxReplyChars: 10_000 }).pipe(
        Effect.provide(modelOf(() => endless("x".repeat(100)), pulled))
      )
      const error = replyError(yield* Effect.exit(Stream.runDrain(agent.stream("hi", { threadId: "t" }))))
      assert.strictEqual(error.reason, "TooLarge")
      assert.isTrue(error.streamed)
      // the text streamed up to the bound is in the error, and the stream was not read much past it
      assert.isAtMost(error.text.length, 10_000)
      assert.isAtMost(pulled.n, 110)
      assert.match(error.message, /maxReplyChars/)
      const stored = yield* storedMessages(agent, "t")
      assert.isFalse(stored.some((message) => message.role === "assistant"))
    }))

  it.effect("events that carry nothing count too: an endless stream of empty deltas fails with TooLarge", () =>
    Effect.gen(function*() {
      const pulled = { n: 0 }
      const agent = yield* Agent.make({ maxReplyChars: 64 * 100 }).pipe(
        Effect.provide(modelOf(() => endless(""), pulled))
      )
      const error = replyError(yield* Effect.exit(Stream.runDrain(agent.stream("hi", { threadId: "t" }))))
      assert.strictEqual(error.reason, "TooLarge")
      assert.isAtMost(pulled.n, 110)
    }))

  it.effect("without maxReplyChars an endless reply is still cut off (at 16 Mi characters)", () =>
    Effect.gen(function*() {
      const pulled = { n: 0 }
      const agent = yield* Agent.make({}).pipe(Effect.provide(modelOf(() => endless("y".repeat(65_536)), pulled)))
      const error = replyError(yield* Effect.exit(Stream.runDrain(agent.stream("hi", { threadId: "t" }))))
      assert.strictEqual(error.reason, "TooLarge")
      assert.isAtMost(pulled.n, 260)
    }))

  it.effect("a reply within the bound is stored whole, whatever its chunking", () =>
    Effect.promise(() =>
      FastCheck.assert(
        FastCheck.asyncProperty(
          FastCheck.array(FastCheck.string({ maxLength: 50 }), { minLength: 1, maxLength: 30 }),
          async (deltas) => {
            const text = deltas.join("")
            FastCheck.pre(text.trim() !== "")
            const parts: Array<Response.AnyPart> = [
              Response.makePart("text-start", { id: "t" }),
              ...deltas.map((delta) => Response.makePart("text-delta", { id: "t", delta })),
              Response.makePart("text-end", { id: "t" }),
              Response.makePart("finish", { reason: "stop", usage })
            ]
            // exactly what the reply counts: its text and 64 for each other event and each delta
            const exact = text.length + 64 * parts.length
            const run = (maxReplyChars: number) =>
              Effect.gen(function*() {
                const agent = yield* Agent.make({ maxReplyChars }).pipe(
                  Effect.provide(modelOf(() => Stream.fromIterable(parts), { n: 0 }))
                )
                return yield* Effect.exit(Stream.runDrain(agent.stream("hi", { threadId: "t" })))
              })
            assert.isTrue(Exit.isSuccess(await Effect.runPromise(run(exact))))
            assert.strictEqual(replyError(await Effect.runPromise(run(exact - 1))).reason, "TooLarge")
          }
        ),
        { numRuns: 60 }
      )
    ))

  it.live("a model call that never answers fails with TimedOut after modelTimeout, generated or streamed", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ modelTimeout: "50 millis" }).pipe(
        Effect.provide(modelOf(() => Stream.never, { n: 0 }))
      )
      const generated = replyError(yield* Effect.exit(agent.run("hi", { threadId: "g" })))
      assert.strictEqual(generated.reason, "TimedOut")
      assert.isFalse(generated.streamed)
      assert.match(generated.message, /modelTimeout/)
      const streamed = replyError(yield* Effect.exit(Stream.runDrain(agent.stream("hi", { threadId: "s" }))))
      assert.strictEqual(streamed.reason, "TimedOut")
      assert.isTrue(streamed.streamed)
      assert.isFalse((yield* storedMessages(agent, "g")).some((message) => message.role === "assistant"))
    }))

  it.live("a stream that stalls after some text fails with TimedOut, with the text it had streamed", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ modelTimeout: "50 millis" }).pipe(
        Effect.provide(
          modelOf(
            () =>
              Stream.concat(
                Stream.make(
                  Response.makePart("text-start", { id: "t" }),
                  Response.makePart("text-delta", { id: "t", delta: "so far" })
                ),
                Stream.never
              ),
            { n: 0 }
          )
        )
      )
      const error = replyError(yield* Effect.exit(Stream.runDrain(agent.stream("hi", { threadId: "t" }))))
      assert.strictEqual(error.reason, "TimedOut")
      assert.deepStrictEqual(error.received, ["text-start", "text-delta"])
      assert.strictEqual(error.text, "so far")
    }))

  it.effect("maxReplyChars and modelTimeout of the wrong kind fail Agent.make with AgentConfigError", () =>
    Effect.gen(function*() {
      const model = modelOf(() => Stream.empty, { n: 0 })
      for (
        const options of [{ maxReplyChars: 0 }, { maxReplyChars: 1.5 }, { modelTimeout: "soon" }, { modelTimeout: 0 }]
      ) {
        const exit = yield* Effect.exit(Agent.make(options as never).pipe(Effect.provide(model)))
        assert.isTrue(Exit.isFailure(exit))
        const error = Cause.failureOption((exit as Exit.Failure<unknown, unknown>).cause)
        assert.instanceOf(Option.getOrUndefined(error), AgentError.AgentConfigError, JSON.stringify(options))
      }
    }))

  it.live("through the OpenAI client: an HTTP server on 127.0.0.1 that streams text events without end is cut off", () =>
    Effect.acquireUseRelease(
      Effect.async<http.Server>((resume) => {
        const server = http.createServer((request, response) => {
          request.resume()
          request.on("end", () => {
            response.writeHead(200, { "content-type": "text/event-stream" })
            let n = 0
            const write = () => {
              while (!response.destroyed) {
                const event = {
                  type: "response.output_text.delta",
                  sequence_number: ++n,
                  item_id: "msg_1",
                  output_index: 0,
                  content_index: 0,
                  delta: "x".repeat(1000)
                }
                if (!response.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)) {
                  response.once("drain", write)
                  return
                }
              }
            }
            write()
          })
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
      }),
      (server) =>
        Effect.gen(function*() {
          const agent = yield* Agent.make({ maxReplyChars: 200_000 })
          const error = replyError(yield* Effect.exit(Stream.runDrain(agent.stream("hi", { threadId: "t" }))))
          assert.strictEqual(error.reason, "TooLarge")
          assert.isAtMost(error.text.length, 200_000)
        }).pipe(
          Effect.provide(
            FakeOpenAi.languageModel({
              url: `http://127.0.0.1:${(server.address() as { readonly port: number }).port}`
            })
          )
        ),
      (server) => Effect.sync(() => server.close())
    ))
})
