import type { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Fork, Middleware, RunRecord } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Option, Schema } from "effect"
import { Calculator, CalculatorLive, encoded } from "./utils.js"

const script: ReadonlyArray<ScriptedModel.Turn> = [
  ScriptedModel.toolCalls([{ id: "call_1", name: "add", params: { a: 2, b: 3 } }]),
  ScriptedModel.toolCalls([{ id: "call_2", name: "add", params: { a: 5, b: 7 } }]),
  ScriptedModel.text("12")
]

const textOf = (message: Prompt.Message | undefined): string =>
  message === undefined || typeof message.content === "string"
    ? String(message?.content ?? "")
    : message.content.map((part) => part.type === "text" ? part.text : "").join("")

/** An agent that ran `script` on thread "src"; then `more` turns for the fork. */
const withSource = <A, E>(
  more: ReadonlyArray<ScriptedModel.Turn>,
  body: (agent: Agent.Service<any, any>) => Effect.Effect<A, E, ScriptedModel.ScriptedModel>
) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add." })
    yield* agent.run("What is 2 + 3 + 7?", { threadId: "src" })
    return yield* body(agent)
  }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([...script, ...more]), CalculatorLive)))

describe("Agent.fork", () => {
  it.effect("a fork at step 1 with a message starts from the conversation before that reply and continues live", () =>
    withSource([ScriptedModel.text("forked")], (agent) =>
      Effect.gen(function*() {
        const before = yield* agent.thread("src")
        const result = yield* agent.fork("src", { to: "f1", at: 1, edit: { _tag: "Message", message: "Stop here." } })
        assert.strictEqual(result._tag, "Completed")
        assert.strictEqual(result._tag === "Completed" && result.text, "forked")
        const messages = result.state.messages
        // user, reply 0 (call_1), its result, the edit's message, the new reply
        assert.deepStrictEqual(messages.map((m: Prompt.Message) => m.role), [
          "user",
          "assistant",
          "tool",
          "user",
          "assistant"
        ])
        assert.strictEqual(textOf(messages[3]), "Stop here.")
        const [request] = (yield* ScriptedModel.requests).slice(-1)
        assert.strictEqual(request!.prompt.content.length, 5) // the system prompt and the four messages
        // the source is untouched
        assert.deepStrictEqual(yield* agent.thread("src"), before)
      })))

  it.effect("a fork with an edited tool result continues with it, without new input", () =>
    withSource([ScriptedModel.text("it was 50")], (agent) =>
      Effect.gen(function*() {
        const result = yield* agent.fork("src", {
          to: "f2",
          at: 1,
          edit: { _tag: "ToolResult", callId: "call_1", result: 50 }
        })
        assert.strictEqual(result._tag === "Completed" && result.text, "it was 50")
        const tool = result.state.messages[2]!
        assert.strictEqual(tool.role, "tool")
        assert.deepInclude(encoded([tool])[0]!.content[0] as object, { id: "call_1", result: 50 })
        const [request] = (yield* ScriptedModel.requests).slice(-1)
        assert.strictEqual(request!.prompt.content.length, 4) // system, user, reply 0, the edited result
      })))

  it.effect("a fork at a step the thread does not have fails with ForkError NoSuchStep and writes nothing", () =>
    withSource([], (agent) =>
      Effect.gen(function*() {
        for (const at of [4, -1, 1.5, Number.NaN]) {
          const error = yield* Effect.flip(agent.fork("src", { to: "f3", at }))
          assert.instanceOf(error, Fork.ForkError)
          assert.deepInclude(error, { reason: "NoSuchStep", threadId: "src" })
        }
        assert.isTrue(Option.isNone(yield* agent.thread("f3")))
      })))

  it.effect("the other failures are typed and write nothing", () =>
    withSource([], (agent) =>
      Effect.gen(function*() {
        const reason = (options: Fork.Options, from = "src") =>
          Effect.map(Effect.flip(agent.fork(from, options)), (error) => (error as Fork.ForkError).reason)
        assert.strictEqual(yield* reason({ to: "f4", at: 0 }, "nothing-here"), "NoSuchThread")
        assert.strictEqual(yield* reason({ to: "src", at: 0 }), "ThreadExists")
        assert.strictEqual(
          yield* reason({ to: "f4", at: 1, edit: { _tag: "ToolResult", callId: "call_2", result: 1 } }),
          "NoSuchToolCall"
        )
        assert.strictEqual(yield* reason({ to: "f4", at: 1, edit: { _tag: "Decision", decision: {} } }), "NotWaiting")
        assert.isTrue(Option.isNone(yield* agent.thread("f4")))
      })))

  it.effect("a fork with a message over maxInputChars fails with InvalidInput and writes nothing", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add.", maxInputChars: 10 })
      yield* agent.run("2 + 3?", { threadId: "src" })
      const message = "far longer than ten characters"
      const error = yield* Effect.flip(agent.fork("src", { to: "f5", at: 1, edit: { _tag: "Message", message } }))
      assert.strictEqual(error._tag, "InvalidInput")
      assert.isTrue(Option.isNone(yield* agent.thread("f5")))
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))))

  it.effect("of two forks to one thread at once, one runs and the other fails with ThreadExists", () =>
    withSource([ScriptedModel.text("a"), ScriptedModel.text("b")], (agent) =>
      Effect.gen(function*() {
        const both = yield* Effect.all(
          [agent.fork("src", { to: "same", at: 1 }), agent.fork("src", { to: "same", at: 2 })].map(Effect.either),
          { concurrency: "unbounded" }
        )
        const failed = both.filter((outcome) => outcome._tag === "Left")
        assert.strictEqual(failed.length, 1)
        assert.deepInclude((failed[0] as any).left, { reason: "ThreadExists" })
      })))

  it.effect("a fork of a waiting thread at its wait asks again, for itself; the source still waits", () =>
    Effect.gen(function*() {
      const confirm = Middleware.make({
        name: "confirm",
        wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.Struct({ go: Schema.Boolean }) },
        beforeModel: ({ resume, step }) =>
          Effect.succeed(
            Option.isSome(resume) || step !== 1 ? undefined : { interrupt: { question: "Go on?" } }
          )
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [confirm] })
      const first = yield* agent.run("What is 2 + 3 + 7?", { threadId: "src" })
      assert.strictEqual(first._tag, "Interrupted")
      const waiting = yield* agent.fork("src", { to: "f4", at: 1 })
      assert.strictEqual(waiting._tag, "Interrupted")
      const message = yield* Effect.flip(
        agent.fork("src", { to: "f4m", at: 1, edit: { _tag: "Message", message: "hi" } })
      )
      assert.deepInclude(message, { reason: "Waiting" })
      const result = yield* agent.fork("src", { to: "f5", at: 1, edit: { _tag: "Decision", decision: { go: true } } })
      assert.strictEqual(result._tag, "Completed")
      const source = yield* agent.thread("src")
      assert.isTrue(Option.isSome(source) && source.value.pending !== undefined)
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))))

  it.effect("a fork of a waiting thread with a decision its wait refuses fails as resume would and writes nothing", () =>
    Effect.gen(function*() {
      const confirm = Middleware.make({
        name: "confirm",
        wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.Struct({ go: Schema.Boolean }) },
        beforeModel: ({ resume, step }) =>
          Effect.succeed(
            Option.isSome(resume) || step !== 1 ? undefined : { interrupt: { question: "Go on?" } }
          )
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [confirm] })
      yield* agent.run("What is 2 + 3 + 7?", { threadId: "src" })
      const bad = { go: "yes" } as never
      const refused = yield* Effect.flip(
        agent.fork("src", { to: "f6", at: 1, edit: { _tag: "Decision", decision: bad } })
      )
      const byResume = yield* Effect.flip(agent.validateResume("src", bad))
      assert.strictEqual(refused._tag, byResume._tag)
      assert.isTrue(Option.isNone(yield* agent.thread("f6")), "nothing written")
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))))

  it.effect("a fork's wait is its own: a wait bound to its thread is answered by the fork's own request", () =>
    Effect.gen(function*() {
      class OtherThread extends Schema.TaggedError<OtherThread>()("OtherThread", { threadId: Schema.String }) {}
      // asks on behalf of its thread; takes only a decision naming that thread (checked on resume too)
      const bound = Middleware.make({
        name: "bound",
        wait: {
          request: Schema.Struct({ thread: Schema.String }),
          decision: Schema.Struct({ thread: Schema.String }),
          check: ({ decision, request, threadId }) =>
            decision.thread === request.thread ? Effect.void : Effect.fail(new OtherThread({ threadId }))
        },
        beforeModel: ({ resume, step, threadId }) =>
          Option.isSome(resume)
            ? (resume.value.thread === threadId ? Effect.void : Effect.fail(new OtherThread({ threadId })))
            : Effect.succeed(step !== 1 ? undefined : { interrupt: { thread: threadId } })
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [bound] })
      yield* agent.run("What is 2 + 3 + 7?", { threadId: "src" })
      const forked = yield* agent.fork("src", { to: "f1", at: 1 })
      assert.strictEqual(forked._tag, "Interrupted")
      assert.deepStrictEqual(forked._tag === "Interrupted" && forked.interrupt.value, { thread: "f1" })
      assert.strictEqual((yield* agent.resume("f1", { thread: "f1" }))._tag, "Completed")
      // a decision at fork time answers the fork's own wait; one bound to the source is refused, writing nothing
      const stale = yield* Effect.flip(
        agent.fork("src", { to: "f2", at: 1, edit: { _tag: "Decision", decision: { thread: "src" } } })
      )
      assert.deepInclude(stale, { _tag: "OtherThread", threadId: "f2" })
      assert.isTrue(Option.isNone(yield* agent.thread("f2")), "nothing written")
      const edited = yield* agent.fork("src", {
        to: "f2",
        at: 1,
        edit: { _tag: "Decision", decision: { thread: "f2" } }
      })
      assert.strictEqual(edited._tag, "Completed")
      const source = yield* agent.thread("src")
      assert.deepStrictEqual(
        Option.flatMap(source, (thread) => thread.pending).pipe(Option.map((p) => p.value)),
        Option.some({ thread: "src" })
      )
      assert.strictEqual((yield* agent.resume("src", { thread: "src" }))._tag, "Completed")
    }).pipe(
      Effect.provide(
        Layer.merge(
          ScriptedModel.layer([...script, ...script.slice(1), ...script.slice(1), ...script.slice(1)]),
          CalculatorLive
        )
      )
    ))

  describe("from a recorded run", () => {
    /** Records `script` on thread "prod", then forks the record on an agent with `systemPrompt`. */
    const forkRecord = (
      more: ReadonlyArray<ScriptedModel.Turn>,
      options: Fork.Options,
      systemPrompt = "You add."
    ) =>
      Effect.gen(function*() {
        const adds = { count: 0 }
        const kit = Calculator.toLayer({ add: ({ a, b }) => Effect.sync(() => (adds.count++, a + b)) })
        const { record } = yield* Effect.flatMap(
          Agent.make({ toolkit: Calculator, systemPrompt: "You add." }),
          (agent) => RunRecord.record(agent, "What is 2 + 3 + 7?", { threadId: "prod" })
        ).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), kit)))
        adds.count = 0
        return yield* Effect.gen(function*() {
          const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt })
          const result = yield* Effect.either(agent.fork(record, options as Fork.Options<never>))
          return {
            result,
            requests: yield* ScriptedModel.requests,
            adds: adds.count,
            stored: yield* agent.thread(options.to),
            source: yield* agent.thread("prod")
          }
        }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(more), kit)))
      })

    it.effect("the steps before `at` come from the record, then the run goes on live on the new thread", () =>
      Effect.gen(function*() {
        const { adds, requests, result, source, stored } = yield* forkRecord(
          [ScriptedModel.text("stopped")],
          { to: "f", at: 1, edit: { _tag: "Message", message: "Stop here." } }
        )
        if (result._tag === "Left") return assert.fail(String(result.left))
        assert.strictEqual(result.right._tag === "Completed" && result.right.text, "stopped")
        // one live model call (step 1), no tool run: step 0's call was served from the record
        assert.strictEqual(requests.length, 1)
        assert.strictEqual(adds, 0)
        const roles = result.right.state.messages.map((m: Prompt.Message) => m.role)
        assert.deepStrictEqual(roles, ["user", "assistant", "tool", "user", "assistant"])
        assert.strictEqual(textOf(result.right.state.messages[3]), "Stop here.")
        assert.isTrue(Option.isSome(stored))
        assert.isTrue(Option.isNone(source))
      }))

    it.effect("an edited tool result is served in place of the recorded one; a new system prompt goes live", () =>
      Effect.gen(function*() {
        const { adds, requests, result } = yield* forkRecord(
          [ScriptedModel.text("it was 50")],
          { to: "f", at: 2, edit: { _tag: "ToolResult", callId: "call_1", result: 50 } },
          "You add carefully."
        )
        if (result._tag === "Left") return assert.fail(String(result.left))
        assert.strictEqual(result.right._tag === "Completed" && result.right.text, "it was 50")
        assert.strictEqual(adds, 0)
        assert.strictEqual(requests.length, 1)
        const [system] = requests[0]!.prompt.content
        assert.strictEqual(system!.role === "system" && system!.content, "You add carefully.")
        assert.deepInclude(encoded([result.right.state.messages[2]!])[0]!.content[0] as object, { result: 50 })
      }))

    it.effect("a step the record does not have, or an edit that does not apply, fails with ForkError", () =>
      Effect.gen(function*() {
        for (
          const options of [
            { to: "f", at: 4 },
            { to: "f", at: -1 },
            { to: "f", at: 1, edit: { _tag: "ToolResult" as const, callId: "call_2", result: 1 } },
            { to: "f", at: 1, edit: { _tag: "Decision" as const, decision: {} } }
          ]
        ) {
          const { requests, result, stored } = yield* forkRecord([], options)
          assert.isTrue(result._tag === "Left" && result.left instanceof Fork.ForkError, JSON.stringify(options))
          assert.strictEqual(requests.length, 0)
          assert.isTrue(Option.isNone(stored))
        }
      }))
  })
})
