import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, FastCheck, Stream } from "effect"
import * as Schema from "effect/Schema"
import * as ModelCallLimit from "../src/ModelCallLimit.js"

const Echo = Tool.make("echo", { parameters: { text: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Echo)
const ToolsLive = Tools.toLayer({ echo: ({ text }) => Effect.succeed(text) })
const echo = (text: string) => ScriptedModel.toolCalls([{ name: "echo", params: { text } }])
const forever = (length: number) => Array.from({ length }, (_, i) => echo(`${i}`))

describe("ModelCallLimit", () => {
  it.effect("ends the run with an assistant message when the run limit is reached", () =>
    Effect.gen(function*() {
      const limit = ModelCallLimit.middleware({ runLimit: 2 })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      assert.strictEqual(result.text, "Model call limit reached: run limit (2/2).")
      assert.strictEqual(result.steps, 2)
      assert.strictEqual(result.state.runModelCallCount, 2)
      assert.strictEqual(result.state.threadModelCallCount, 2)
      // user, (assistant call, tool result) x 2, the limit notice
      assert.deepStrictEqual(result.state.messages.map((m) => m.role), [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant"
      ])
      assert.strictEqual((yield* ScriptedModel.requests).length, 2)
    }).pipe(Effect.provide([ScriptedModel.layer(forever(5)), ToolsLive])))

  it.effect("softLanding: the last call a limit allows has no tools and asks for the answer; the run ends on it", () =>
    Effect.gen(function*() {
      const limit = ModelCallLimit.middleware({ runLimit: 3, softLanding: true })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit], systemPrompt: "Be brief." })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      assert.strictEqual(result.text, "Here is what I found.")
      const requests = yield* ScriptedModel.requests
      assert.deepStrictEqual(requests.map((r) => r.toolChoice), ["auto", "auto", "none"])
      const system = requests.map((r) => {
        const first = r.prompt.content[0]
        return first?.role === "system" ? first.content : ""
      })
      assert.deepStrictEqual(system, ["Be brief.", "Be brief.", `Be brief.\n\n${ModelCallLimit.lastCallPrompt}`])
      // a second run starts afresh: tools are back until its own last call
      yield* agent.run("again", { threadId: "t" }).pipe(Effect.ignore)
      assert.deepStrictEqual((yield* ScriptedModel.requests).slice(3).map((r) => r.toolChoice), ["auto"])
    }).pipe(Effect.provide([
      ScriptedModel.layer([
        echo("a"),
        echo("b"),
        ScriptedModel.text("Here is what I found."),
        ScriptedModel.text("Hi")
      ]),
      ToolsLive
    ])))

  it.effect("without softLanding, the last allowed call still offers tools and the run ends on the limit", () =>
    Effect.gen(function*() {
      const limit = ModelCallLimit.middleware({ runLimit: 2 })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
      yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual((yield* ScriptedModel.requests).map((r) => r.toolChoice), ["auto", "auto"])
    }).pipe(Effect.provide([ScriptedModel.layer(forever(5)), ToolsLive])))

  it.effect("resets the run count on the next run, also after the limit's own jump", () =>
    Effect.gen(function*() {
      const limit = ModelCallLimit.middleware({ runLimit: 1 })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
      const first = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(first._tag, "Completed")
      assert.strictEqual(first.state.runModelCallCount, 1)
      const second = yield* agent.run("again", { threadId: "t" })
      assert.strictEqual(second._tag, "Completed")
      if (second._tag !== "Completed") return
      assert.strictEqual(second.text, "done")
      assert.strictEqual(second.state.runModelCallCount, 1)
      assert.strictEqual(second.state.threadModelCallCount, 2)
      assert.strictEqual((yield* ScriptedModel.requests).length, 2)
    }).pipe(Effect.provide([ScriptedModel.layer([echo("a"), ScriptedModel.text("done")]), ToolsLive])))

  it.effect("counts the thread limit over runs and stops calling the model once it is reached", () =>
    Effect.gen(function*() {
      const limit = ModelCallLimit.middleware({ threadLimit: 2 })
      const agent = yield* Agent.make({ middleware: [limit] })
      const texts: Array<string> = []
      for (const input of ["one", "two", "three", "four"]) {
        const result = yield* agent.run(input, { threadId: "t" })
        if (result._tag === "Completed") texts.push(result.text)
      }
      assert.deepStrictEqual(texts, [
        "a",
        "b",
        "Model call limit reached: thread limit (2/2).",
        "Model call limit reached: thread limit (2/2)."
      ])
      assert.strictEqual((yield* ScriptedModel.requests).length, 2)
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("a"), ScriptedModel.text("b")]))))

  it.effect("fails with ModelCallLimitExceeded when exitBehavior is error", () =>
    Effect.gen(function*() {
      const limit = ModelCallLimit.middleware({ runLimit: 1, threadLimit: 10, exitBehavior: "error" })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
      const error = yield* Effect.flip(agent.run("go", { threadId: "t" }))
      assert.strictEqual(error._tag, "ModelCallLimitExceeded")
      if (error._tag !== "ModelCallLimitExceeded") return
      assert.deepStrictEqual(
        { threadCount: error.threadCount, runCount: error.runCount, runLimit: error.runLimit },
        { threadCount: 1, runCount: 1, runLimit: 1 }
      )
      assert.strictEqual(error.threadLimit, 10)
      assert.include(error.message, "run limit (1/1)")
      assert.strictEqual((yield* ScriptedModel.requests).length, 1)
    }).pipe(Effect.provide([ScriptedModel.layer(forever(3)), ToolsLive])))

  it.effect("a limit of 0 ends the run before any model call", () =>
    Effect.gen(function*() {
      const limit = ModelCallLimit.middleware({ runLimit: 0 })
      const agent = yield* Agent.make({ middleware: [limit] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(result.steps, 0)
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(Effect.provide(ScriptedModel.layer([]))))

  it.effect("reports the decision and the jump on the event stream", () =>
    Effect.gen(function*() {
      const limit = ModelCallLimit.middleware({ runLimit: 1, name: "limit" })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("go", { threadId: "t" })))
      const decisions = events.filter(AgentEvent.$is("MiddlewareDecision")).map((
        e
      ) => [e.middleware, e.hook, e.decision])
      assert.deepStrictEqual(decisions, [
        ["limit", "beforeModel", "model call limit reached: run limit (1/1); ending the run"],
        ["limit", "beforeModel", "jump to end"]
      ])
    }).pipe(Effect.provide([ScriptedModel.layer(forever(3)), ToolsLive])))

  it.effect.prop(
    "a run makes exactly min(runLimit, calls the model wants) model calls",
    { runLimit: FastCheck.nat({ max: 6 }), wanted: FastCheck.integer({ min: 1, max: 6 }) },
    ({ runLimit, wanted }) =>
      Effect.gen(function*() {
        const limit = ModelCallLimit.middleware({ runLimit })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
        const result = yield* agent.run("go", { threadId: "t" })
        const made = (yield* ScriptedModel.requests).length
        assert.strictEqual(made, Math.min(runLimit, wanted))
        assert.strictEqual(result.state.runModelCallCount, made)
      }).pipe(
        Effect.provide([ScriptedModel.layer([...forever(wanted - 1), ScriptedModel.text("done")]), ToolsLive])
      ),
    { fastCheck: { numRuns: 30 } }
  )

  it.effect.prop(
    "softLanding: a greedy model makes exactly runLimit calls, only the last without tools, and the run ends well paired on its answer",
    { runLimit: FastCheck.integer({ min: 1, max: 6 }) },
    ({ runLimit }) =>
      Effect.gen(function*() {
        const limit = ModelCallLimit.middleware({ runLimit, softLanding: true })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [limit] })
        const result = yield* agent.run("go", { threadId: "t" })
        assert.strictEqual(result._tag === "Completed" && result.text, "answer")
        const choices = (yield* ScriptedModel.requests).map((r) => r.toolChoice)
        assert.deepStrictEqual(choices, [
          ...Array.from({ length: runLimit - 1 }, () => "auto" as const),
          "none" as const
        ])
        const messages = result.state.messages
        const calls = messages.flatMap((m) =>
          m.role === "assistant" ? m.content.filter((p) => p.type === "tool-call") : []
        )
        const results = messages.flatMap((m) => m.role === "tool" ? m.content : [])
        assert.deepStrictEqual(results.map((r) => r.id), calls.map((c) => c.id))
        assert.strictEqual(messages[messages.length - 1]!.role, "assistant")
      }).pipe(
        Effect.provide([
          ScriptedModel.layer(
            Array.from({ length: 8 }, (_, i) => (request: ScriptedModel.Request) =>
              request.toolChoice === "none"
                ? ScriptedModel.text("answer")
                : ScriptedModel.toolCalls([{ name: "echo", params: { text: `${i}` }, id: `c${i}` }]))
          ),
          ToolsLive
        ])
      ),
    { fastCheck: { numRuns: 20 } }
  )

  describe("bad options", () => {
    const invalid = (options: ModelCallLimit.Options) =>
      Effect.flip(Middleware.build(ModelCallLimit.middleware(options))).pipe(
        Effect.map((e) => [e._tag, e.option] as const)
      )

    it.effect("needs at least one limit", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* invalid({}), ["InvalidOptions", "threadLimit"])
      }))

    it.effect("rejects negative and fractional limits", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* invalid({ runLimit: -1 }), ["InvalidOptions", "runLimit"])
        assert.deepStrictEqual(yield* invalid({ threadLimit: 1.5 }), ["InvalidOptions", "threadLimit"])
        assert.deepStrictEqual(yield* invalid({ runLimit: Number.NaN }), ["InvalidOptions", "runLimit"])
      }))

    it.effect("rejects an unknown exit behavior", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(
          yield* invalid({ runLimit: 1, exitBehavior: "continue" as any }),
          ["InvalidOptions", "exitBehavior"]
        )
      }))

    it.effect("two instances clash on their state keys when the agent is built", () =>
      Effect.gen(function*() {
        const a = ModelCallLimit.middleware({ runLimit: 1, name: "a" })
        const b = ModelCallLimit.middleware({ threadLimit: 1, name: "b" })
        // @ts-expect-error: the types reject this list too (dtslint); here the run-time check is tested
        const error = yield* Effect.flip(Agent.make({ middleware: [a, b] }))
        assert.strictEqual(error._tag, "AgentConfigError")
      }).pipe(Effect.provide(ScriptedModel.layer([]))))
  })
})
