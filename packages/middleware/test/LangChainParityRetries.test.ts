/**
 * LangChain JS v1's own cases for `toolRetryMiddleware`, `modelRetryMiddleware` and
 * `modelFallbackMiddleware` (`libs/langchain/src/agents/middleware/tests/{toolRetry,modelRetry,modelFallback}.test.ts`),
 * asserted through Stepwise's public API. Each test is named after LangChain's case. Delays are 1 ms
 * (`it.live`), so nothing waits on a test clock.
 */
import type { Prompt } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ModelFallback, ModelRetry, ToolRetry } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Ref, Schema } from "effect"

const Working = Tool.make("working_tool", { parameters: { value: Schema.String }, success: Schema.String })
const Failing = Tool.make("failing_tool", {
  parameters: { value: Schema.String },
  success: Schema.String,
  failure: Schema.String
})
const Tools = Toolkit.make(Working, Failing)

/** `failing_tool` fails its first `failures` attempts; every attempt is counted by tool name. */
const toolsLive = (failures: number, attempts: Ref.Ref<ReadonlyArray<string>>) =>
  Tools.toLayer({
    working_tool: ({ value }) => Effect.as(Ref.update(attempts, (all) => [...all, "working_tool"]), `ok ${value}`),
    failing_tool: ({ value }) =>
      Effect.flatMap(
        Ref.updateAndGet(attempts, (all) => [...all, "failing_tool"]),
        (all) =>
          all.filter((name) => name === "failing_tool").length <= failures
            ? Effect.fail("Temporary failure")
            : Effect.succeed(`Success: ${value}`)
      )
  })

const fast = { initialDelay: "1 millis", jitter: false } as const

const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

const withTools = <R>(
  failures: number,
  script: ReadonlyArray<ScriptedModel.Turn>,
  body: (attempts: Ref.Ref<ReadonlyArray<string>>) => Effect.Effect<void, unknown, R>
) =>
  Effect.gen(function*() {
    const attempts = yield* Ref.make<ReadonlyArray<string>>([])
    yield* body(attempts).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), toolsLive(failures, attempts))))
  })

const callOf = (name: string) => ScriptedModel.toolCalls([{ name, params: { value: "test" }, id: "1" }])
const count = (attempts: ReadonlyArray<string>, name: string) => attempts.filter((entry) => entry === name).length

describe("LangChain parity: toolRetryMiddleware", () => {
  it.live("should not retry working tool (no retry needed)", () =>
    withTools(0, [callOf("working_tool"), ScriptedModel.text("done")], (attempts) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [ToolRetry.middleware({ maxRetries: 2, ...fast })]
        })
        const result = yield* agent.run("go", { threadId: "t" })
        assert.strictEqual(count(yield* Ref.get(attempts), "working_tool"), 1)
        assert.deepStrictEqual(toolResults(result.state.messages).map((part) => part.isFailure), [false])
      })))

  it.live("should retry failing tool and return error message", () =>
    withTools(10, [callOf("failing_tool"), ScriptedModel.text("done")], (attempts) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [ToolRetry.middleware({ maxRetries: 2, ...fast })]
        })
        const result = yield* agent.run("go", { threadId: "t" })
        assert.strictEqual(result._tag, "Completed")
        assert.strictEqual(count(yield* Ref.get(attempts), "failing_tool"), 3)
        const [failed] = toolResults(result.state.messages)
        assert.isTrue(failed!.isFailure)
      })))

  it.live("should retry failing tool and re-raise on failure", () =>
    withTools(
      10,
      [ScriptedModel.toolCalls([{ name: "failing_tool", params: { value: "test" }, id: "1" }])],
      (attempts) =>
        Effect.gen(function*() {
          const agent = yield* Agent.make({
            toolkit: Tools,
            middleware: [ToolRetry.middleware({ maxRetries: 2, onFailure: "error", ...fast })]
          })
          const exit = yield* Effect.exit(agent.run("go", { threadId: "t" }))
          assert.isTrue(exit._tag === "Failure")
          assert.strictEqual(count(yield* Ref.get(attempts), "failing_tool"), 3)
        })
    ))

  it.live("should succeed after temporary failures", () =>
    withTools(2, [callOf("failing_tool"), ScriptedModel.text("done")], (attempts) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [ToolRetry.middleware({ maxRetries: 3, ...fast })]
        })
        const result = yield* agent.run("go", { threadId: "t" })
        assert.strictEqual(count(yield* Ref.get(attempts), "failing_tool"), 3)
        const [ok] = toolResults(result.state.messages)
        assert.isFalse(ok!.isFailure)
        assert.strictEqual(ok!.result, "Success: test")
      })))

  it.live("Tool filtering: should only apply to specific tools", () =>
    withTools(10, [callOf("failing_tool"), ScriptedModel.text("done")], (attempts) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [ToolRetry.middleware({ tools: ["working_tool"], maxRetries: 2, ...fast })]
        })
        yield* agent.run("go", { threadId: "t" })
        assert.strictEqual(count(yield* Ref.get(attempts), "failing_tool"), 1)
      })))

  it.live("Zero retries: should not retry when maxRetries is 0", () =>
    withTools(10, [callOf("failing_tool"), ScriptedModel.text("done")], (attempts) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          middleware: [ToolRetry.middleware({ maxRetries: 0, ...fast })]
        })
        yield* agent.run("go", { threadId: "t" })
        assert.strictEqual(count(yield* Ref.get(attempts), "failing_tool"), 1)
      })))

  it.effect("Validation: should throw InvalidRetryConfigError for invalid maxRetries", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Agent.make({ toolkit: Tools, middleware: [ToolRetry.middleware({ maxRetries: -1 })] })
      )
      assert.strictEqual(error._tag, "InvalidOptions")
    }).pipe(
      Effect.provide(Layer.merge(ScriptedModel.layer([]), toolsLive(0, Ref.unsafeMake<ReadonlyArray<string>>([]))))
    ))
})

describe("LangChain parity: modelRetryMiddleware", () => {
  it.live("should not retry working model (no retry needed)", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [ModelRetry.middleware({ maxRetries: 2, ...fast })] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag === "Completed" && result.text, "ok")
      assert.strictEqual((yield* ScriptedModel.requests).length, 1)
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")]))))

  it.live("should retry failing model and succeed after temporary failures", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [ModelRetry.middleware({ maxRetries: 3, ...fast })] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag === "Completed" && result.text, "ok")
      assert.strictEqual((yield* ScriptedModel.requests).length, 3)
    }).pipe(Effect.provide(ScriptedModel.layer([
      ScriptedModel.httpError(503),
      ScriptedModel.httpError(503),
      ScriptedModel.text("ok")
    ]))))

  it.live("should retry failing model and raise on failure (default)", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [ModelRetry.middleware({ maxRetries: 2, ...fast })] })
      const exit = yield* Effect.exit(agent.run("go", { threadId: "t" }))
      assert.strictEqual(exit._tag, "Failure")
      assert.strictEqual((yield* ScriptedModel.requests).length, 3)
    }).pipe(Effect.provide(ScriptedModel.layer([
      ScriptedModel.httpError(503),
      ScriptedModel.httpError(503),
      ScriptedModel.httpError(503),
      ScriptedModel.text("never")
    ]))))

  it.live("should retry failing model and return error message", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        middleware: [ModelRetry.middleware({ maxRetries: 1, onFailure: "continue", ...fast })]
      })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const last = result.state.messages.at(-1)!
      assert.strictEqual(last.role, "assistant")
      assert.strictEqual((yield* ScriptedModel.requests).length, 2)
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.httpError(503), ScriptedModel.httpError(503)]))))
})

describe("LangChain parity: modelFallbackMiddleware", () => {
  it.effect("should retry the model request with the new model", () =>
    Effect.gen(function*() {
      const backup = yield* ScriptedModel.make([ScriptedModel.text("from backup")])
      const agent = yield* Agent.make({ middleware: [ModelFallback.middleware(backup.model)] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag === "Completed" && result.text, "from backup")
      assert.strictEqual((yield* backup.recorder.requests).length, 1)
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.httpError(500)]))))

  it.effect("should allow to configure additional models", () =>
    Effect.gen(function*() {
      const first = yield* ScriptedModel.make([ScriptedModel.httpError(500)])
      const second = yield* ScriptedModel.make([ScriptedModel.text("from the second")])
      const agent = yield* Agent.make({ middleware: [ModelFallback.middleware(first.model, second.model)] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag === "Completed" && result.text, "from the second")
      assert.strictEqual((yield* first.recorder.requests).length, 1)
      assert.strictEqual((yield* second.recorder.requests).length, 1)
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.httpError(500)]))))

  it.effect("should throw if list is exhausted", () =>
    Effect.gen(function*() {
      const first = yield* ScriptedModel.make([ScriptedModel.httpError(500)])
      const agent = yield* Agent.make({ middleware: [ModelFallback.middleware(first.model)] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "ModelFallbackExhausted")
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.httpError(500)]))))
})
