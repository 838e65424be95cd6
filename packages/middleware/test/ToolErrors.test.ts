import type { Prompt } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Exit, Layer, Stream } from "effect"
import * as Schema from "effect/Schema"
import * as ToolErrors from "../src/ToolErrors.js"
import * as ToolRetry from "../src/ToolRetry.js"

const Failing = Tool.make("failing", {
  parameters: { key: Schema.String },
  success: Schema.String,
  failure: Schema.String
})
const Crashy = Tool.make("crashy", { parameters: { key: Schema.String }, success: Schema.String })
const Fine = Tool.make("fine", { parameters: { key: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Failing, Crashy, Fine)

/** failing: a typed failure, crashy: a defect whose message holds a secret-looking detail, fine: succeeds. */
const ToolsLive = Tools.toLayer({
  failing: ({ key }) => Effect.fail(`no row for ${key}`),
  crashy: ({ key }) => Effect.die(new Error(`connection to db://admin:hunter2@10.0.0.5 lost (${key})`)),
  fine: ({ key }) => Effect.succeed(`ok ${key}`)
})

const call = (name: string, key: string) => ({ name, params: { key }, id: `${name}_${key}` })

const setup = (...calls: ReadonlyArray<{ name: string; params: unknown; id: string }>) =>
  Effect.provide(Layer.merge(
    ScriptedModel.layer([ScriptedModel.toolCalls(calls), ScriptedModel.text("done")]),
    ToolsLive
  ))

const toolResults = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.flatMap((m) =>
    m.role === "tool" ? m.content.map((p) => ({ id: p.id, isFailure: p.isFailure, result: p.result })) : []
  )

describe("ToolErrors", () => {
  it.effect("a crash answered by onError is a failed result the model reads; the run goes on", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const errors = ToolErrors.middleware({
        onError: (failure, request) => {
          seen.push(`${failure._tag}:${request.call.name}`)
          return failure._tag === "Defect" ? `${request.call.name} is unavailable` : undefined
        }
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [errors] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(toolResults(result.state.messages), [
        { id: "crashy_a", isFailure: true, result: "crashy is unavailable" }
      ])
      assert.deepStrictEqual(seen, ["Defect:crashy"])
      // nothing of the crash's message reaches the thread
      assert.notInclude(JSON.stringify(result.state.messages), "hunter2")
    }).pipe(setup(call("crashy", "a"))))

  it.effect("onError returning undefined leaves a crash as it is: the run fails with ToolDefect", () =>
    Effect.gen(function*() {
      const errors = ToolErrors.middleware({ onError: () => undefined })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [errors] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "ToolDefect")
      assert.deepInclude(error, { toolName: "crashy", callId: "crashy_a" })
    }).pipe(setup(call("crashy", "a"))))

  it.effect("a typed failure's content is replaced when onError answers it, and kept when it does not", () =>
    Effect.gen(function*() {
      const errors = ToolErrors.middleware({
        onError: (failure) =>
          failure._tag === "FailedResult" && failure.result.id === "failing_a"
            ? Effect.succeed("lookup failed")
            : Effect.succeed(undefined)
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [errors] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual(toolResults(result.state.messages), [
        { id: "failing_a", isFailure: true, result: "lookup failed" },
        { id: "failing_b", isFailure: true, result: "no row for b" },
        { id: "fine_c", isFailure: false, result: "ok c" }
      ])
    }).pipe(setup(call("failing", "a"), call("failing", "b"), call("fine", "c"))))

  it.effect("only the tools named in `tools` are handled; onError never sees the others", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const errors = ToolErrors.middleware({
        tools: ["failing"],
        onError: (_failure, request) => {
          seen.push(request.call.name)
          return "handled"
        }
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [errors] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      // the crash of a tool not listed fails the run, after the listed tool's failure was answered
      assert.strictEqual(error._tag, "ToolDefect")
      assert.deepStrictEqual(seen, ["failing"])
    }).pipe(setup(call("failing", "a"), call("crashy", "b"))))

  it.effect("an answered failure is reported as a middleware decision without the error's text", () =>
    Effect.gen(function*() {
      const errors = ToolErrors.middleware({ onError: () => "try something else" })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [errors] })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("go", { threadId: "t" })))
      const decisions = events.filter(AgentEvent.$is("MiddlewareDecision"))
      assert.deepStrictEqual(decisions.map((d) => [d.middleware, d.decision, d.data]), [
        ["toolErrors", "answered the crash of crashy", { tool: "crashy", callId: "crashy_a", failure: "Defect" }]
      ])
      assert.notInclude(JSON.stringify(events), "hunter2")
    }).pipe(setup(call("crashy", "a"))))

  it.live("with ToolRetry after it, the failure it answers is the one left after the retries", () =>
    Effect.gen(function*() {
      let attempts = 0
      const crashTwice = Tools.toLayer({
        failing: () => Effect.fail("unused"),
        crashy: () => Effect.suspend(() => ++attempts <= 5 ? Effect.die("boom") : Effect.succeed("late")),
        fine: () => Effect.succeed("unused")
      })
      const errors = ToolErrors.middleware({ onError: () => "gave up" })
      const retry = ToolRetry.middleware({ maxRetries: 2, initialDelay: "1 millis", onFailure: "raise" })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [errors, retry] }).pipe(Effect.provide(crashTwice))
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(attempts, 3)
      assert.deepStrictEqual(toolResults(result.state.messages), [
        { id: "crashy_a", isFailure: true, result: "gave up" }
      ])
    }).pipe(
      Effect.provide(ScriptedModel.layer([ScriptedModel.toolCalls([call("crashy", "a")]), ScriptedModel.text("done")]))
    ))

  it.effect.prop(
    "for any mix of calls, a call's result is onError's content exactly when its tool is listed, it failed, and onError answered",
    {
      calls: Schema.Array(Schema.Literal("failing", "fine", "crashy")).pipe(Schema.minItems(1), Schema.maxItems(6)),
      listed: Schema.Array(Schema.Literal("failing", "fine", "crashy")),
      answers: Schema.Boolean
    },
    ({ answers, calls, listed }) =>
      Effect.gen(function*() {
        const errors = ToolErrors.middleware({
          tools: listed,
          onError: (failure) => answers ? `answered ${failure._tag}` : undefined
        })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [errors] })
        const exit = yield* Effect.exit(agent.run("go", { threadId: "t" }))
        const crashUnhandled = calls.some((name) => name === "crashy" && !(answers && listed.includes("crashy")))
        assert.strictEqual(Exit.isFailure(exit), crashUnhandled)
        if (Exit.isFailure(exit)) return
        const expected = calls.map((name, i) => {
          const handled = answers && listed.includes(name)
          return {
            id: `${name}_${i}`,
            isFailure: name !== "fine",
            result: name === "fine"
              ? `ok ${i}`
              : handled
              ? `answered ${name === "crashy" ? "Defect" : "FailedResult"}`
              : `no row for ${i}`
          }
        })
        assert.deepStrictEqual(toolResults(exit.value.state.messages), expected)
      }).pipe(
        Effect.provide(Layer.merge(
          ScriptedModel.layer([
            ScriptedModel.toolCalls(calls.map((name, i) => call(name, String(i)))),
            ScriptedModel.text("done")
          ]),
          ToolsLive
        ))
      ),
    { fastCheck: { numRuns: 60 } }
  )

  it.effect("bad options fail with InvalidOptions naming the option", () =>
    Effect.gen(function*() {
      const missing = yield* Effect.flip(Middleware.build(ToolErrors.middleware({} as any)))
      assert.deepInclude(missing, { module: "ToolErrors", option: "onError" })
      const empty = yield* Effect.flip(
        Middleware.build(ToolErrors.middleware({ tools: [""], onError: () => undefined }))
      )
      assert.deepInclude(empty, { module: "ToolErrors", option: "tools[0]" })
    }))
})
