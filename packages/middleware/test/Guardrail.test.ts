import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Context, Data, Effect, Layer, Stream } from "effect"
import * as Guardrail from "../src/Guardrail.js"

const textOf = (message: Prompt.Message | undefined): string =>
  message === undefined || message.role === "system" || message.role === "tool"
    ? ""
    : message.content.map((part) => part.type === "text" ? part.text : "").join("")

const hasText = (messages: ReadonlyArray<Prompt.UserMessage>, word: string) =>
  messages.some((message) => textOf(message).includes(word))

const provide = (script: ReadonlyArray<ScriptedModel.Turn>, echoed: Array<string> = []) =>
  Effect.provide(Layer.merge(
    ScriptedModel.layer(script),
    Fixtures.echoToolkit.toLayer({ echo: ({ text }) => Effect.sync(() => (echoed.push(text), text)) })
  ))

const echoThenAnswer = [ScriptedModel.toolCalls([{ name: "echo", params: { text: "x" } }]), ScriptedModel.text("done")]

describe("Guardrail input", () => {
  it.effect("checks the run's input once, on the first model call, and lets it through", () =>
    Effect.gen(function*() {
      const seen: Array<{ texts: Array<string>; step: number }> = []
      const guard = Guardrail.middleware({
        input: (messages, { step }) =>
          Effect.sync(() => {
            seen.push({ texts: messages.map(textOf), step })
            return Guardrail.allow
          })
      })
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, middleware: [guard] })
      yield* agent.run([{ role: "user", content: "first" }, { role: "user", content: "second" }], { threadId: "t" })
      assert.deepStrictEqual(seen, [{ texts: ["first", "second"], step: 0 }])
      yield* agent.run("third", { threadId: "t" })
      assert.deepStrictEqual(seen[1], { texts: ["third"], step: 0 })
      assert.strictEqual((yield* ScriptedModel.requests).length, 3)
    }).pipe(provide([...echoThenAnswer, ScriptedModel.text("ok")])))

  it.effect("a block fails the run with a Blocked GuardrailError before the model is called", () =>
    Effect.gen(function*() {
      const guard = Guardrail.middleware({
        name: "noPasswords",
        input: (messages) =>
          Effect.succeed(hasText(messages, "password") ? Guardrail.block("mentions a password") : Guardrail.allow)
      })
      const agent = yield* Agent.make({ middleware: [guard] })
      const error = yield* Effect.flip(agent.run("my password is hunter2", { threadId: "t" }))
      assert.strictEqual(error._tag, "GuardrailError")
      if (error._tag !== "GuardrailError") return
      assert.deepStrictEqual(
        { reason: error.reason, guardrail: error.guardrail, stage: error.stage, detail: error.detail },
        { reason: "Blocked", guardrail: "noPasswords", stage: "input", detail: "mentions a password" }
      )
      assert.strictEqual(error.message, "Guardrail \"noPasswords\" blocked the input: mentions a password")
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(provide([ScriptedModel.text("never")])))

  it.effect("a rewrite with a text replaces the input in what the model sees and in the stored thread", () =>
    Effect.gen(function*() {
      const guard = Guardrail.middleware({
        input: (messages) => Effect.succeed(Guardrail.rewrite(messages.map(textOf).join(" ").replace(/damn/g, "****")))
      })
      const agent = yield* Agent.make({ middleware: [guard] })
      const events = yield* agent.stream([{ role: "user", content: "damn it" }, { role: "user", content: "help" }], {
        threadId: "t"
      }).pipe(Stream.runCollect, Effect.map(Chunk.toArray))
      const ended = events[events.length - 1]!
      if (ended._tag !== "RunEnded") return assert.fail(`the last event is ${ended._tag}`)
      const messages = ended.result.state.messages
      assert.deepStrictEqual(messages.map((m) => [m.role, textOf(m)]), [["user", "**** it help"], ["assistant", "ok"]])
      const [request] = yield* ScriptedModel.requests
      assert.deepStrictEqual(request!.prompt.content.map(textOf), ["**** it help"])
      const decision = events.find(AgentEvent.$is("MiddlewareDecision"))!
      assert.deepStrictEqual([decision.middleware, decision.hook, decision.decision], [
        "guardrail",
        "beforeModel",
        "rewrote the input"
      ])
    }).pipe(provide([ScriptedModel.text("ok")])))

  it.effect("a rewrite with messages replaces the checked messages with them", () =>
    Effect.gen(function*() {
      const guard = Guardrail.middleware({
        input: () =>
          Effect.succeed(Guardrail.rewrite([
            Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "context: kids" })] }),
            Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "tell a story" })] })
          ]))
      })
      const agent = yield* Agent.make({ middleware: [guard] })
      const result = yield* agent.run("story please", { threadId: "t" })
      assert.deepStrictEqual(result.state.messages.map(textOf), ["context: kids", "tell a story", "ok"])
    }).pipe(provide([ScriptedModel.text("ok")])))

  it.effect("onBlock: \"end\" ends the run with an assistant message instead of failing", () =>
    Effect.gen(function*() {
      const guard = Guardrail.middleware({
        input: () => Effect.succeed(Guardrail.block("off topic")),
        onBlock: "end",
        blockedMessage: "I can only talk about cooking."
      })
      const agent = yield* Agent.make({ middleware: [guard] })
      const result = yield* agent.run("what about cars?", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      assert.strictEqual(result.text, "I can only talk about cooking.")
      assert.strictEqual(result.steps, 0)
      assert.deepStrictEqual(result.state.messages.map((m) => m.role), ["user", "assistant"])
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(provide([])))
})

describe("Guardrail output", () => {
  it.effect("a block fails the run with a Blocked GuardrailError and the blocked tool calls never run", () => {
    const echoed: Array<string> = []
    return Effect.gen(function*() {
      const guard = Guardrail.middleware({
        output: (message) =>
          Effect.succeed(textOf(message).includes("rm -rf") ? Guardrail.block("dangerous command") : Guardrail.allow)
      })
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, middleware: [guard] })
      const error = yield* Effect.flip(agent.run("clean up", { threadId: "t" }))
      assert.strictEqual(error._tag, "GuardrailError")
      if (error._tag !== "GuardrailError") return
      assert.deepStrictEqual([error.reason, error.stage], ["Blocked", "output"])
      assert.deepStrictEqual(echoed, [])
    }).pipe(provide([ScriptedModel.toolCalls([{ name: "echo", params: { text: "x" } }], { text: "rm -rf /" })], echoed))
  })

  it.effect("onBlock: \"end\" replaces a blocked reply, dropping its tool calls", () => {
    const echoed: Array<string> = []
    return Effect.gen(function*() {
      const guard = Guardrail.middleware({
        output: () => Effect.succeed(Guardrail.block("dangerous command")),
        onBlock: "end"
      })
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, middleware: [guard] })
      const result = yield* agent.run("clean up", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      assert.strictEqual(result.text, "dangerous command")
      assert.deepStrictEqual(result.state.messages.map((m) => m.role), ["user", "assistant"])
      assert.deepStrictEqual(echoed, [])
    }).pipe(provide([ScriptedModel.toolCalls([{ name: "echo", params: { text: "x" } }], { text: "rm -rf /" })], echoed))
  })

  it.effect("a rewrite with a text replaces the reply's text and keeps its tool calls", () => {
    const echoed: Array<string> = []
    return Effect.gen(function*() {
      const guard = Guardrail.middleware({
        output: (message) => Effect.succeed(textOf(message) === "" ? Guardrail.allow : Guardrail.rewrite("[filtered]"))
      })
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, middleware: [guard] })
      const result = yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual(echoed, ["x"])
      const reply = result.state.messages[1]!
      assert.deepStrictEqual(reply.role === "assistant" ? reply.content.map((p) => p.type) : [], ["text", "tool-call"])
      assert.strictEqual(textOf(reply), "[filtered]")
      assert.strictEqual(textOf(result.state.messages[3]), "[filtered]")
    }).pipe(provide([
      ScriptedModel.toolCalls([{ name: "echo", params: { text: "x" } }], { text: "some rude words" }),
      ScriptedModel.text("more rude words")
    ], echoed))
  })
})

class ModerationDown extends Data.TaggedError("ModerationDown")<{}> {}
class Moderation extends Context.Tag("Moderation")<Moderation, { readonly flagged: (text: string) => boolean }>() {}

describe("Guardrail checks", () => {
  it.effect("a check's own errors and services flow into the agent", () =>
    Effect.gen(function*() {
      const guard = Guardrail.middleware({
        input: (messages) =>
          Effect.flatMap(Moderation, (moderation) =>
            hasText(messages, "outage")
              ? Effect.fail(new ModerationDown())
              : Effect.succeed(
                moderation.flagged(messages.map(textOf).join(" ")) ? Guardrail.block("flagged") : Guardrail.allow
              ))
      })
      const agent = yield* Agent.make({ middleware: [guard] }).pipe(
        Effect.provideService(Moderation, { flagged: (text) => text.includes("bad") })
      )
      const flagged = yield* Effect.flip(agent.run("bad words", { threadId: "a" }))
      assert.isTrue(flagged._tag === "GuardrailError" && flagged.reason === "Blocked")
      const down = yield* Effect.flip(agent.run("outage", { threadId: "b" }))
      assert.strictEqual(down._tag, "ModerationDown")
      const ok = yield* agent.run("fine", { threadId: "c" })
      assert.strictEqual(ok._tag, "Completed")
    }).pipe(provide([ScriptedModel.text("ok")])))

  it.effect("an unusable verdict fails with an InvalidVerdict GuardrailError", () =>
    Effect.gen(function*() {
      const empty = Guardrail.middleware({ input: () => Effect.succeed(Guardrail.rewrite([])) })
      const agent = yield* Agent.make({ middleware: [empty] })
      const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      assert.isTrue(error._tag === "GuardrailError" && error.reason === "InvalidVerdict")
      assert.include(error.message, "at least one message")
      const junk = Guardrail.middleware({ name: "junk", output: () => Effect.succeed({ ok: true } as any) })
      const other = yield* Agent.make({ middleware: [junk] })
      const error2 = yield* Effect.flip(other.run("hi", { threadId: "t2" }))
      assert.isTrue(error2._tag === "GuardrailError" && error2.reason === "InvalidVerdict")
      assert.include(error2.message, "Guardrail \"junk\" gave an invalid output verdict")
    }).pipe(provide([ScriptedModel.text("ok")])))

  it.effect("bad options fail with InvalidOptions naming the option", () =>
    Effect.gen(function*() {
      const none = yield* Effect.flip(Middleware.build(Guardrail.middleware({})))
      assert.deepStrictEqual([none._tag, none.option], ["InvalidOptions", "input"])
      const onBlock = yield* Effect.flip(
        Middleware.build(Guardrail.middleware({ input: () => Effect.succeed(Guardrail.allow), onBlock: "stop" as any }))
      )
      assert.strictEqual(onBlock.option, "onBlock")
      assert.include(onBlock.message, "Expected \"error\" | \"end\", actual \"stop\"")
      const notAFunction = yield* Effect.flip(Middleware.build(Guardrail.middleware({ output: "strict" as any })))
      assert.strictEqual(notAFunction.option, "output")
    }))

  it("verdicts match", () => {
    const describe = Guardrail.$match({
      Allow: () => "allow",
      Block: ({ reason }) => `block: ${reason}`,
      Rewrite: ({ replacement }) => typeof replacement === "string" ? replacement : `${replacement.length} messages`
    })
    assert.deepStrictEqual(
      [Guardrail.allow, Guardrail.block("no"), Guardrail.rewrite("yes"), Guardrail.rewrite([])].map(describe),
      ["allow", "block: no", "yes", "0 messages"]
    )
  })
})
