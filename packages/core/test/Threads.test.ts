import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Option, Schema } from "effect"
import { Calculator, CalculatorLive, recording, roles } from "./utils.js"

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))

/** Asks once per thread before the first model call; remembers the answer in its slice. */
const approval = (seen: Array<Option.Option<unknown>>) =>
  Middleware.make({
    name: "approval",
    state: { schema: Schema.Struct({ answer: Schema.NullOr(Schema.String) }), initial: { answer: null } },
    wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.String },
    beforeModel: ({ resume, state }) =>
      Effect.sync(() => {
        seen.push(resume)
        if (state.answer !== null) return undefined
        return Option.match(resume, {
          onNone: () => ({ interrupt: { question: "May I?" } }),
          onSome: (answer) => ({ state: { answer: String(answer) } })
        })
      })
  })

describe("interrupt and resume", () => {
  it.effect("a hook's interrupt ends the run; resume runs that hook again with ctx.resume and continues", () =>
    Effect.gen(function*() {
      const seen: Array<Option.Option<unknown>> = []
      const log: Array<string> = []
      const agent = yield* Agent.make({
        toolkit: Calculator,
        middleware: [recording("before", log), approval(seen), recording("after", log)]
      })
      const first = yield* agent.run("What is 1 + 2?", { threadId: "t" })
      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      assert.deepStrictEqual(first.interrupt, {
        middleware: "approval",
        value: { question: "May I?" },
        key: "beforeModel/approval/0"
      })
      assert.strictEqual(first.steps, 0)
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
      assert.deepStrictEqual(log, [
        "before.transformInput",
        "after.transformInput",
        "before.beforeAgent",
        "after.beforeAgent",
        "before.beforeModel"
      ])

      const waiting = Option.getOrThrow(yield* agent.thread("t"))
      assert.deepStrictEqual(
        waiting.pending,
        Option.some({ middleware: "approval", value: { question: "May I?" } as unknown, key: "beforeModel/approval/0" })
      )
      assert.deepStrictEqual(roles(waiting.state.messages), ["user"])

      log.length = 0
      const second = yield* agent.resume("t", "yes")
      assert.strictEqual(second._tag, "Completed")
      if (second._tag !== "Completed") return
      // the interrupting hook saw no resume value, then the decision, then (next step) none again
      assert.deepStrictEqual(seen, [Option.none(), Option.some("yes"), Option.none()])
      assert.strictEqual(second.state.answer, "yes")
      assert.strictEqual(second.text, "3")
      assert.strictEqual(second.steps, 2)
      // resume continues from the interrupting hook: no beforeAgent, no earlier beforeModel of that step
      assert.deepStrictEqual(log.slice(0, 2), ["after.beforeModel", "before.wrapModelCall:in"])
      assert.isFalse(log.some((entry) => entry.endsWith("beforeAgent")))
      assert.deepStrictEqual(roles(second.state.messages), ["user", "assistant", "tool", "assistant"])
      assert.strictEqual((yield* ScriptedModel.requests).length, 2)
      assert.isTrue(Option.isNone(Option.getOrThrow(yield* agent.thread("t")).pending))
    }).pipe(provide([
      ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }]),
      ScriptedModel.text("3")
    ])))

  it.effect("an interrupt from afterModel resumes before the tools run", () =>
    Effect.gen(function*() {
      const review = Middleware.make({
        name: "review",
        wait: { request: Schema.String, decision: Schema.String },
        afterModel: ({ messages, resume }) => {
          const last = messages.at(-1)
          const callsTools = last?.role === "assistant" && last.content.some((part) => part.type === "tool-call")
          return Effect.succeed(
            Option.isNone(resume) && callsTools ? { interrupt: "review the tool calls" } : undefined
          )
        }
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [review] })
      const first = yield* agent.run("What is 1 + 2?", { threadId: "t" })
      assert.strictEqual(first._tag, "Interrupted")
      assert.deepStrictEqual(roles(first.state.messages), ["user", "assistant"])
      assert.strictEqual(first.steps, 1)
      const second = yield* agent.resume("t", "ok")
      assert.strictEqual(second._tag, "Completed")
      assert.deepStrictEqual(roles(second.state.messages), ["user", "assistant", "tool", "assistant"])
      // the step count carries over the interruption
      assert.strictEqual(second.steps, 2)
    }).pipe(provide([
      ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }]),
      ScriptedModel.text("3")
    ])))
})

describe("thread state errors", () => {
  it.effect("run on a thread that waits for a resume fails with ThreadStateError", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [approval([])] })
      const first = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(first._tag, "Interrupted")
      const error = yield* Effect.flip(agent.run("hello?", { threadId: "t" }))
      assert.strictEqual(error._tag, "ThreadStateError")
      if (error._tag !== "ThreadStateError") return
      assert.strictEqual(error.threadId, "t")
      assert.include(error.reason, "approval")
      // the waiting thread is unchanged
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      assert.deepStrictEqual(roles(thread.state.messages), ["user"])
      assert.isTrue(Option.isSome(thread.pending))
    }).pipe(provide([])))

  it.effect("resume on a thread that does not wait fails with ThreadStateError", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator })
      const unknown = yield* Effect.flip(agent.resume("never-run", "yes" as never))
      assert.strictEqual(unknown._tag, "ThreadStateError")
      yield* agent.run("hi", { threadId: "done" })
      const completed = yield* Effect.flip(agent.resume("done", "yes" as never))
      assert.strictEqual(completed._tag, "ThreadStateError")
      if (completed._tag !== "ThreadStateError") return
      assert.strictEqual(completed.threadId, "done")
      assert.include(completed.reason, "not waiting")
      assert.strictEqual((yield* ScriptedModel.requests).length, 1)
    }).pipe(provide([ScriptedModel.text("hello")])))
})

describe("Agent.deleteThread", () => {
  it.effect("removes a waiting thread's messages, state and pending decision; the next run starts afresh", () =>
    Effect.gen(function*() {
      const seen: Array<Option.Option<unknown>> = []
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [approval(seen)] })
      assert.strictEqual((yield* agent.run("What is 1 + 2?", { threadId: "t" }))._tag, "Interrupted")
      yield* agent.run("kept", { threadId: "other" }).pipe(Effect.ignore)

      yield* agent.deleteThread("t")
      yield* agent.deleteThread("never-existed")
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
      assert.isTrue(Option.isSome(yield* agent.thread("other")))
      const resumed = yield* Effect.flip(agent.resume("t", "yes"))
      assert.strictEqual(resumed._tag, "ThreadStateError")

      // a fresh thread: the approval asks again, and the old question is gone from the messages
      const again = yield* agent.run("Hello", { threadId: "t" })
      assert.strictEqual(again._tag, "Interrupted")
      assert.deepStrictEqual(roles(Option.getOrThrow(yield* agent.thread("t")).state.messages), ["user"])
    }).pipe(provide([ScriptedModel.text("unused")])))

  it.effect("runs each middleware's onThreadDeleted with the deleted thread's id", () =>
    Effect.gen(function*() {
      const deleted: Array<string> = []
      const agent = yield* Agent.make({
        toolkit: Calculator,
        middleware: [Middleware.make({
          name: "cache",
          onThreadDeleted: (threadId) => Effect.sync(() => void deleted.push(threadId))
        })]
      })
      yield* agent.run("hi", { threadId: "t" })
      assert.deepStrictEqual(deleted, [])
      yield* agent.deleteThread("t")
      assert.deepStrictEqual(deleted, ["t"])
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
    }).pipe(provide([ScriptedModel.text("hello")])))

  it.effect("onThreadDeleted gets the middleware's slice as stored; None without a checkpoint or when it does not load, which is deleted all the same", () =>
    Effect.gen(function*() {
      const got: Array<[string, Option.Option<{ readonly runs: number }>]> = []
      const checkpointer = yield* Checkpointer.makeMemory
      const agent = yield* Agent.make({
        toolkit: Calculator,
        middleware: [Middleware.make({
          name: "counter",
          state: { schema: Schema.Struct({ runs: Schema.Number }), initial: { runs: 0 } },
          beforeAgent: ({ state }) => Effect.succeed({ state: { runs: state.runs + 1 } }),
          onThreadDeleted: (threadId, state) => Effect.sync(() => void got.push([threadId, state]))
        })]
      }).pipe(Effect.provideService(Checkpointer.Checkpointer, checkpointer))
      yield* agent.run("hi", { threadId: "t" })
      yield* agent.run("again", { threadId: "t" })
      yield* agent.deleteThread("t")
      yield* agent.deleteThread("never")
      // a slice that does not decode: the thread does not load, and is deleted all the same
      yield* checkpointer.save("bad", { version: 1, threadId: "bad", messages: [], slices: { counter: { runs: "x" } } })
      yield* agent.deleteThread("bad")
      assert.deepStrictEqual(got, [["t", Option.some({ runs: 2 })], ["never", Option.none()], ["bad", Option.none()]])
      assert.isTrue(Option.isNone(yield* checkpointer.load("bad")))
    }).pipe(provide([ScriptedModel.text("hello"), ScriptedModel.text("hello")])))
})
