import { Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware, RunJournal, RunRecord, Secrets } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Option, Schema, Stream } from "effect"
import * as ToolResult from "../src/internal/toolResult.js"

// no provider's shape: only the registry knows it is a key
const key = "Zx9qWv3LmN7pRt2YbK5sHj8dFg4"

const Env = Tool.make("env", { parameters: {}, success: Schema.Unknown })
const Fails = Tool.make("fails", { parameters: {}, success: Schema.String, failure: Schema.Unknown })
const Dies = Tool.make("dies", { parameters: {}, success: Schema.String })
const Tools = Toolkit.make(Env, Fails, Dies)

/** A successful result echoing the key (an env dump), a typed failure quoting it, a defect quoting it. */
const ToolsLive = Tools.toLayer({
  env: () => Effect.succeed({ stdout: `OPENAI_API_KEY=${key}\nPATH=/bin`, encoded: encodeURIComponent(`${key}`) }),
  fails: () => Effect.fail({ message: `could not auth with ${key}`, upstream: `{"error":"bad key \\"${key}\\""}` }),
  dies: () => Effect.die(new Error(`crashed holding ${key}`))
})

/** Turns the defect of `dies` into a failed result quoting it, as an error-handling middleware does. */
const answersDefects = Middleware.make({
  name: "answersDefects",
  wrapToolCall: (request, next) =>
    Effect.catchAll(
      next(request),
      (error) =>
        Effect.succeed(
          Middleware.toolResult(request.call, `the tool broke: ${String(error.cause ?? error)}`, { isFailure: true })
        )
    )
})

/** Keeps what the tools gave the hooks around them. */
const watching = (seen: Array<unknown>) =>
  Middleware.make({
    name: "watching",
    wrapToolCall: (request, next) => Effect.tap(next(request), (result) => Effect.sync(() => seen.push(result)))
  })

const script = [
  ScriptedModel.toolCalls([
    { name: "env", params: {}, id: "c1" },
    { name: "fails", params: {}, id: "c2" },
    { name: "dies", params: {}, id: "c3" }
  ]),
  ScriptedModel.text("done")
]

/** A journal that keeps each tool call's result as a durable one writes it. */
const journalOf = (written: Array<unknown>) =>
  RunJournal.RunJournal.of({
    durable: false,
    step: (step, effect) =>
      step._tag === "Tool"
        ? Effect.tap(effect, (result) => Effect.sync(() => written.push(step.result.from(result))))
        : effect,
    await: () => Effect.succeedNone
  })

describe("Secrets: a tool's result never carries a registered credential", () => {
  it.scoped(
    "a failure, a defect answered by a hook and a success echoing the key: scrubbed in the thread, the stored thread, the next request and the journal",
    () =>
      Effect.gen(function*() {
        yield* Secrets.register(key)
        const written: Array<unknown> = []
        const seen: Array<unknown> = []
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [answersDefects, watching(seen)] })
        const result = yield* agent.run("show env", { threadId: "t1" }).pipe(
          Effect.provideService(RunJournal.RunJournal, journalOf(written))
        )
        const stored = yield* Effect.flatMap(Checkpointer.Checkpointer, (checkpointer) => checkpointer.load("t1"))
        const requests = yield* ScriptedModel.requests
        assert.strictEqual(result._tag, "Completed")
        assert.strictEqual(written.length, 3)
        const sinks = {
          state: result.state.messages,
          stored: Option.getOrThrow(stored),
          request: requests[1]!.prompt,
          journal: written,
          hooks: seen
        }
        for (const [sink, value] of Object.entries(sinks)) {
          const text = JSON.stringify(value)
          assert.notInclude(text, key, sink)
          assert.notInclude(text, encodeURIComponent(key), sink)
          assert.include(text, Secrets.redacted, sink)
        }
        // what the results say apart from the key stays
        const results = JSON.stringify(result.state.messages)
        assert.include(results, `OPENAI_API_KEY=${Secrets.redacted}\\nPATH=/bin`)
        assert.include(results, `could not auth with ${Secrets.redacted}`)
        assert.include(results, "the tool broke")
      }).pipe(Effect.provide(Layer.mergeAll(ScriptedModel.layer(script), ToolsLive, Checkpointer.layerMemory)))
  )

  it.scoped("the events a watcher reads (ToolCallCompleted) and a RunRecord hold the scrubbed results", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [answersDefects] })
      const events = yield* Stream.runCollect(agent.stream("show env", { threadId: "t1" }))
      const completed = [...events].filter((event) => event._tag === "ToolCallCompleted")
      assert.strictEqual(completed.length, 3)
      for (const event of completed) assert.notInclude(JSON.stringify(event), key)
      const { record } = yield* RunRecord.record(agent, "show env", { threadId: "t2" })
      const text = RunRecord.toJsonl(record)
      assert.notInclude(text, key)
      assert.include(text, Secrets.redacted)
    }).pipe(Effect.provide(Layer.mergeAll(ScriptedModel.layer([...script, ...script]), ToolsLive))))

  it("scrubToolResult: a failure is scrubbed as an error, a success only of known values; nothing to scrub, the same part", () => {
    const failed = { result: { error: "401", authorization: "Bearer abcdefgh12345678" }, isFailure: true }
    assert.deepStrictEqual(Secrets.scrubToolResult(failed).result, { error: "401", authorization: Secrets.redacted })
    // a success is data: no credential-shaped guessing (a long id in a URL, a field named token stays)
    const found = {
      result: { url: "https://example.com/a/Abc123def456ghi789", token: "abcdefgh12345678" },
      isFailure: false
    }
    assert.strictEqual(Secrets.scrubToolResult(found), found)
  })

  it.scoped("scrubToolResult: a success keeps its data and loses only the registered value, in any of its forms", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      const part = {
        result: [{ stdout: `KEY=${key}`, nested: { b64: Buffer.from(key).toString("base64") } }, 42, null],
        isFailure: false
      }
      const scrubbed = Secrets.scrubToolResult(part).result
      assert.deepStrictEqual(scrubbed, [
        { stdout: `KEY=${Secrets.redacted}`, nested: { b64: Secrets.redacted } },
        42,
        null
      ])
    }))

  it.scoped("ToolResult.keep: a result that is a string, a boolean or null is kept as it is, scrubbed", () =>
    Effect.gen(function*() {
      yield* Secrets.register(key)
      const call = Prompt.makePart("tool-call", { id: "c1", name: "t", params: {}, providerExecuted: false })
      const secret = ToolResult.keep(Middleware.toolResult(call, `KEY=${key}`))
      assert.strictEqual(secret.result, `KEY=${Secrets.redacted}`)
      for (const result of ["plain", "\ud800 lone", true, false, null]) {
        const part = Middleware.toolResult(call, result)
        assert.strictEqual(ToolResult.keep(part), part)
      }
      // a number is taken as JSON writes it
      assert.isNull(ToolResult.keep(Middleware.toolResult(call, Number.NaN)).result)
    }))
})
