import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Duration, Effect, Fiber, Layer, Option, Ref, Schema, TestClock } from "effect"
import { toolResults } from "./utils.js"

const Slow = Tool.make("slow", { parameters: {}, success: Schema.String })
const Quick = Tool.make("quick", { parameters: {}, success: Schema.String })
const Tools = Toolkit.make(Slow, Quick)

/** `slow` never ends on its own and records its cleanup; `quick` answers at once. */
const toolsLive = (cleaned: Ref.Ref<number>) =>
  Tools.toLayer({
    slow: () => Effect.never.pipe(Effect.onInterrupt(() => Ref.update(cleaned, (n) => n + 1)), Effect.as("never")),
    quick: () => Effect.succeed("done")
  })

const script = [
  ScriptedModel.toolCalls([{ name: "slow", params: {}, id: "s1" }, { name: "quick", params: {}, id: "q1" }]),
  ScriptedModel.text("finished")
]

const withTools = <A, E, R>(effect: (cleaned: Ref.Ref<number>) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const cleaned = yield* Ref.make(0)
    return yield* effect(cleaned).pipe(
      Effect.provide(Layer.merge(ScriptedModel.layer(script), toolsLive(cleaned)))
    )
  })

describe("tool timeouts", () => {
  it.effect("a call past toolTimeout is interrupted (its cleanup runs), the model reads a failed result, the run goes on", () =>
    withTools((cleaned) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, toolTimeout: "30 seconds" })
        const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
        yield* TestClock.adjust("29 seconds")
        assert.strictEqual(yield* Ref.get(cleaned), 0)
        yield* TestClock.adjust("1 second")
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result._tag, "Completed")
        assert.strictEqual(yield* Ref.get(cleaned), 1)
        const [slow, quick] = toolResults(result.state.messages)
        assert.strictEqual(slow!.id, "s1")
        assert.isTrue(slow!.isFailure)
        assert.deepStrictEqual(slow!.result, { error: `Tool "slow" timed out after 30s; it was stopped` })
        assert.strictEqual(quick!.result, "done")
        const requests = yield* ScriptedModel.requests
        assert.strictEqual(requests.length, 2)
        assert.strictEqual(toolResults(requests[1]!.prompt.content)[0]!.isFailure, true)
        assert.strictEqual(result._tag === "Completed" ? result.text : "", "finished")
      })
    ))

  it.effect("wrapToolCall sees the ToolTimeout as a typed failure of next", () =>
    withTools(() =>
      Effect.gen(function*() {
        const seen: Array<string> = []
        const observer = Middleware.make({
          name: "observer",
          wrapToolCall: (request, next) =>
            next(request).pipe(Effect.tapError((error) =>
              Effect.sync(() => seen.push(`${error._tag} ${error._tag === "ToolTimeout" ? error.timeoutMillis : ""}`))
            ))
        })
        const agent = yield* Agent.make({ toolkit: Tools, toolTimeouts: { slow: "5 seconds" }, middleware: [observer] })
        const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
        yield* TestClock.adjust("5 seconds")
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result._tag, "Completed")
        assert.deepStrictEqual(seen, ["ToolTimeout 5000"])
      })
    ))

  it.effect("with no hook, a tool with a timeout of its own is answered as timed out and one without runs as usual", () =>
    withTools((cleaned) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, toolTimeouts: { slow: "5 seconds" } })
        const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
        yield* TestClock.adjust("5 seconds")
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result._tag, "Completed")
        assert.strictEqual(yield* Ref.get(cleaned), 1)
        const [slow, quick] = toolResults(result.state.messages)
        assert.deepStrictEqual(slow!.result, { error: `Tool "slow" timed out after 5s; it was stopped` })
        assert.deepStrictEqual([quick!.result, quick!.isFailure], ["done", false])
      })
    ))

  it.effect("a ToolTimeout a wrapToolCall hook fails with, for a tool without a timeout, is answered as timed out", () =>
    withTools(() =>
      Effect.gen(function*() {
        // a hook that gives up on calls of its own (without the agent's toolTimeout)
        const impatient = Middleware.make({
          name: "impatient",
          wrapToolCall: (request, next) =>
            request.call.name === "slow"
              ? Effect.fail(new AgentError.ToolTimeout({ toolName: "slow", callId: request.call.id, timeoutMillis: 1 }))
              : next(request)
        })
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [impatient] })
        const result = yield* agent.run("go", { threadId: "t" })
        assert.strictEqual(result._tag, "Completed")
        const [slow, quick] = toolResults(result.state.messages)
        assert.deepStrictEqual([slow!.result, slow!.isFailure], [{
          error: `Tool "slow" timed out after 1ms; it was stopped`
        }, true])
        assert.strictEqual(quick!.result, "done")
      })
    ))

  it.effect("a per-tool timeout overrides toolTimeout", () =>
    withTools((cleaned) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          toolTimeout: "1 second",
          toolTimeouts: { slow: "10 seconds" }
        })
        const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
        yield* TestClock.adjust("9 seconds")
        assert.strictEqual(yield* Ref.get(cleaned), 0)
        yield* TestClock.adjust("1 second")
        assert.strictEqual((yield* Fiber.join(fiber))._tag, "Completed")
        assert.strictEqual(yield* Ref.get(cleaned), 1)
      })
    ))

  it.effect("a per-tool Duration.infinity turns the agent's toolTimeout off for that tool", () =>
    withTools((cleaned) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Tools,
          toolTimeout: "1 second",
          toolTimeouts: { slow: Duration.infinity }
        })
        const fiber = yield* Effect.fork(agent.run("go", { threadId: "t" }))
        yield* TestClock.adjust("1 hour")
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)))
        assert.strictEqual(yield* Ref.get(cleaned), 0)
        yield* Fiber.interrupt(fiber)
        assert.strictEqual(yield* Ref.get(cleaned), 1)
      })
    ))

  it.effect("bad timeouts fail Agent.make with AgentConfigError naming the option", () =>
    withTools(() =>
      Effect.gen(function*() {
        const zero = yield* Effect.flip(Agent.make({ toolkit: Tools, toolTimeout: 0 }))
        assert.include(zero.message, "toolTimeout must be a duration above zero")
        const junk = yield* Effect.flip(Agent.make({ toolkit: Tools, toolTimeout: "soon" as any }))
        assert.include(junk.message, "toolTimeout must be a duration above zero, got soon")
        const unknown = yield* Effect.flip(Agent.make({ toolkit: Tools, toolTimeouts: { search: "1 second" } }))
        assert.include(unknown.message, `toolTimeouts names "search", which is not a tool of this agent`)
        const negative = yield* Effect.flip(Agent.make({ toolkit: Tools, toolTimeouts: { slow: -5 } }))
        assert.include(negative.message, `toolTimeouts["slow"] must be a duration above zero`)
      })
    ))
})
