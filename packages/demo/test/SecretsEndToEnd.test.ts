/**
 * End to end: a provider answering a body labelled JSON that does not parse
 * (a 200 `{ not json`, a gateway's HTML 502 page) makes @effect/ai 0.37 build
 * an error holding the whole request, `authorization: Bearer <key>`
 * included. The real `@effect/ai-openai` client, over a fake server on
 * 127.0.0.1, shows that the key reaches none of the sinks: the Logging
 * middleware's lines, the run's failure and its events, the inspector's event
 * log and thread failure, a durable run's journal and `status().failure`,
 * and (with `Secrets.scrubHttpClient`) spans.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Toolkit from "@effect/ai/Toolkit"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Secrets } from "@stepwise-agent/core"
import * as Inspector from "@stepwise-agent/inspector/Inspector"
import * as Logging from "@stepwise-agent/middleware/Logging"
import * as Summarization from "@stepwise-agent/middleware/Summarization"
import { SpanRecorder } from "@stepwise-agent/testing"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Cause, Chunk, Context, Effect, Exit, Fiber, HashMap, Layer, Logger, Option, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const apiKey = "sk-test-SECRET123"

const Tools = Toolkit.make()

/** Every way an error is turned into text by a sink. */
const renderings = (error: unknown): ReadonlyArray<string> => [
  error instanceof Error ? error.message : String(error),
  String(error),
  JSON.stringify(error),
  Cause.pretty(Cause.fail(error))
]

const assertNoKey = (text: string, where: string) => assert.notInclude(text, "SECRET123", where)

const unparsable = [["200 { not json", FakeOpenAi.notJson], ["an HTML 502 page", FakeOpenAi.htmlGateway]] as const

const model = (server: FakeOpenAi.FakeOpenAi, options?: FakeOpenAi.LanguageModelOptions) =>
  FakeOpenAi.languageModel(server, { apiKey, ...options })

describe("secrets in provider errors", () => {
  it.scoped("the raw @effect/ai error holds the key (what the sinks must not show)", () =>
    Effect.gen(function*() {
      const server = yield* FakeOpenAi.make([FakeOpenAi.notJson])
      const agent = yield* Agent.make({ toolkit: Tools }).pipe(
        Effect.provide(yield* Layer.build(model(server))),
        Effect.provide(Tools.toLayer({}))
      )
      const requests = yield* server.requests
      assert.strictEqual(requests.length, 0)
      const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      assert.strictEqual((error as { readonly _tag: string })._tag, "HttpResponseError")
      const sent = yield* server.requests
      assert.strictEqual(sent[0]!.headers.authorization, `Bearer ${apiKey}`)
    }))

  for (const [what, reply] of unparsable) {
    it.scoped(`Logging's lines and the run's failure hold no key (${what})`, () =>
      Effect.gen(function*() {
        const lines: Array<string> = []
        const recording = Logger.replace(
          Logger.defaultLogger,
          Logger.make(({ annotations, message }) => {
            lines.push(JSON.stringify({ message, annotations: Object.fromEntries(HashMap.toEntries(annotations)) }))
          })
        )
        const server = yield* FakeOpenAi.make([reply])
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [Logging.middleware()] }).pipe(
          Effect.provide(yield* Layer.build(model(server))),
          Effect.provide(Tools.toLayer({}))
        )
        const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }).pipe(Effect.provide(recording)))

        assert.strictEqual((error as { readonly _tag: string })._tag, "HttpResponseError")
        for (const text of renderings(error)) assertNoKey(text, "the run's failure")
        assert.include((error as Error).message, Secrets.redacted)
        const failed = lines.filter((line) => line.includes("model call failed"))
        assert.strictEqual(failed.length, 1)
        assert.include(failed[0]!, `"error":"HttpResponseError"`)
        for (const line of lines) assertNoKey(line, "a log line")
      }))
  }

  it.scoped("a streamed run's ModelAttemptFailed and RunFailed hold no key (an HTML 502 page)", () =>
    Effect.gen(function*() {
      const server = yield* FakeOpenAi.make([FakeOpenAi.htmlGateway])
      const agent = yield* Agent.make({ toolkit: Tools }).pipe(
        Effect.provide(yield* Layer.build(model(server))),
        Effect.provide(Tools.toLayer({}))
      )
      const watched = yield* Stream.toPull(yield* agent.watch)
      const own = yield* agent.stream("hi", { threadId: "t" }).pipe(Stream.runCollect, Effect.exit)
      assert.isTrue(Exit.isFailure(own))
      if (Exit.isFailure(own)) assertNoKey(Cause.pretty(own.cause), "the stream's failure")
      const seen: Array<Agent.RunEvent> = []
      while (!seen.some((event) => event.event._tag === "RunFailed")) {
        seen.push(...Chunk.toReadonlyArray(yield* watched))
      }
      const tags = seen.map((event) => event.event._tag)
      assert.include(tags, "ModelAttemptFailed")
      for (const event of seen) assertNoKey(JSON.stringify(event.event), event.event._tag)
    }))

  it.scoped("a summarizer's failure reported as a decision holds no key (the summarizer bypasses the loop's model call)", () =>
    Effect.gen(function*() {
      const server = yield* FakeOpenAi.make([
        FakeOpenAi.streamText(["Paris."]),
        FakeOpenAi.notJson,
        FakeOpenAi.streamText(["About 2 million."])
      ])
      const context = yield* Layer.build(model(server))
      const summarization = Summarization.middleware({
        trigger: { messages: 3 },
        keep: { messages: 1 },
        onFailure: "continue"
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [summarization] }).pipe(
        Effect.provide(context),
        Effect.provide(Summarization.layer(Context.get(context, LanguageModel.LanguageModel))),
        Effect.provide(Tools.toLayer({}))
      )
      yield* Stream.runDrain(agent.stream("What is the capital of France?", { threadId: "t" }))
      const events = yield* Stream.runCollect(agent.stream("How many people live there?", { threadId: "t" }))
      const decision = Chunk.findFirst(events, AgentEvent.$is("MiddlewareDecision")).pipe(Option.getOrThrow)
      assert.include(decision.decision, "summarization failed, continuing unsummarized")
      assert.include(decision.decision, "Decode")
      for (const event of events) assertNoKey(JSON.stringify(event), event._tag)
    }))

  it.scopedLive("the inspector's events, its thread failure and its thread route hold no key", () =>
    Effect.gen(function*() {
      const server = yield* FakeOpenAi.make([FakeOpenAi.streamText(["Hello!"]), FakeOpenAi.htmlGateway])
      const agent = yield* Agent.make({ toolkit: Tools }).pipe(
        Effect.provide(yield* Layer.build(model(server))),
        Effect.provide(Tools.toLayer({}))
      )
      const inspector = yield* Inspector.make(agent)
      const token = new URL(inspector.url).searchParams.get("token")!
      const base = `http://127.0.0.1:${inspector.port}`
      yield* agent.run("hi", { threadId: "t1" })
      yield* Effect.exit(agent.run("again", { threadId: "t1" }))

      const get = (route: string) =>
        Effect.promise(async () => {
          const controller = new AbortController()
          const timer = setTimeout(() => controller.abort(), 10_000)
          const response = await fetch(`${base}${route}?token=${token}`, { signal: controller.signal })
          const reader = response.body!.getReader()
          let text = ""
          try {
            // the event log streams: read it until the thread's failure arrived
            while (route !== "/events" || !text.includes(`"failure":{`)) {
              const { done, value } = await reader.read()
              if (done) break
              text += new TextDecoder().decode(value)
            }
          } catch {
            // aborted: what arrived is checked below
          } finally {
            clearTimeout(timer)
            controller.abort()
          }
          return text
        })
      const events = yield* get("/events")
      assert.include(events, `"ModelAttemptFailed"`)
      assert.include(events, `"RunFailed"`)
      // the thread's summary on the page, with its last failure
      assert.include(events, `"failure":{"error":"HttpResponseError"`)
      assertNoKey(events, "the inspector's event log")
      const thread = yield* get("/api/threads/t1")
      assert.include(thread, `"messageCount":`)
      assertNoKey(thread, "the inspector's thread")
    }))

  it.scopedLive("a durable run's journal and status().failure hold no key (SQLite)", () =>
    Effect.gen(function*() {
      const directory = yield* Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-secrets-"))),
        (directory) => Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true }))
      )
      const filename = path.join(directory, "runs.db")
      const server = yield* FakeOpenAi.make([FakeOpenAi.notJson])
      const Runs = AgentWorkflow.make({ name: "secret-agent", version: 1 })
      const context = yield* Layer.build(Runs.layer.pipe(
        Layer.provideMerge(Agent.layer({ toolkit: Tools })),
        Layer.provide(Layer.merge(model(server), Tools.toLayer({}))),
        Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
        Layer.provideMerge(Authorizer.layer(() => true)),
        Layer.provideMerge(AgentEngine.layerSqlite({ filename, pollInterval: "100 millis" }))
      ))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context) as Effect.Effect<A, E>
      const runId = yield* run(Runs.start({ threadId: "t", input: "hi" }))
      const status = yield* run(Runs.await(runId))

      assert.strictEqual(status.state, "Failed")
      const failure = Option.getOrThrow(status.failure)
      assert.strictEqual(failure._tag, "AgentRunFailed")
      if (failure._tag === "AgentRunFailed") {
        assert.deepStrictEqual(failure.error, new AgentWorkflow.OtherError({ tag: "HttpResponseError" }))
      }
      assert.include(failure.message, "Decode")
      for (const text of renderings(failure)) assertNoKey(text, "status().failure")
      assert.strictEqual((yield* server.requests)[0]!.headers.authorization, `Bearer ${apiKey}`)
      // every byte the database holds: the journal, the run records, the checkpoints
      const stored = fs.readdirSync(directory).map((file) =>
        fs.readFileSync(path.join(directory, file)).toString("latin1")
      )
      assert.isTrue(stored.some((bytes) => bytes.includes("HttpResponseError")))
      for (const bytes of stored) assertNoKey(bytes, "the SQLite database")
    }), { timeout: 60_000 })
})

// ---------------------------------------------------------------------------
// spans
// ---------------------------------------------------------------------------

/** The spans an agent run with a failing model call records, and which of them hold the key. */
const tracedFailure = (reply: FakeOpenAi.Reply, streamed: boolean, options?: FakeOpenAi.LanguageModelOptions) =>
  Effect.gen(function*() {
    const { spans, tracer } = SpanRecorder.make()
    const server = yield* FakeOpenAi.make([reply])
    const agent = yield* Agent.make({ toolkit: Tools, middleware: [Logging.middleware()] }).pipe(
      Effect.provide(yield* Layer.build(model(server, options))),
      Effect.provide(Tools.toLayer({}))
    )
    const watcher = streamed ? yield* Effect.forkScoped(Stream.runDrain(yield* agent.watch)) : undefined
    yield* Effect.exit(agent.run("hi", { threadId: "t" })).pipe(Effect.withTracer(tracer))
    if (watcher !== undefined) yield* Fiber.interrupt(watcher)
    const failed = spans.filter((span) => span.status._tag === "Ended" && Exit.isFailure(span.status.exit))
    const leaking = spans.filter((span) => {
      const exit = span.status._tag === "Ended" ? span.status.exit : Exit.void
      const text = [
        Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "",
        Exit.isFailure(exit) ? JSON.stringify(Cause.squash(exit.cause)) : "",
        JSON.stringify([...span.attributes])
      ].join("\n")
      return text.includes("SECRET123")
    })
    return { failed: failed.map((span) => span.name), leaking: [...new Set(leaking.map((span) => span.name))] }
  })

describe("secrets in spans", () => {
  for (const streamed of [false, true]) {
    const mode = streamed ? "streamed" : "generated"
    it.scoped(`with Secrets.scrubHttpClient no span holds the key (${mode})`, () =>
      Effect.gen(function*() {
        for (const reply of streamed ? [FakeOpenAi.htmlGateway] : [FakeOpenAi.notJson, FakeOpenAi.htmlGateway]) {
          const { failed, leaking } = yield* tracedFailure(reply, streamed, {
            transformClient: Secrets.scrubHttpClient
          })
          assert.include(failed, streamed ? "LanguageModel.streamText" : "LanguageModel.generateText")
          assert.deepStrictEqual(leaking, [])
        }
      }))

    it.scoped(`without it, only @effect/ai's own span holds the key (${mode})`, () =>
      Effect.gen(function*() {
        const { leaking } = yield* tracedFailure(streamed ? FakeOpenAi.htmlGateway : FakeOpenAi.notJson, streamed)
        assert.deepStrictEqual(leaking, [streamed ? "LanguageModel.streamText" : "LanguageModel.generateText"])
      }))
  }
})
