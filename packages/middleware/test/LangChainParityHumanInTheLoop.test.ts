/**
 * LangChain JS v1's own cases for `humanInTheLoopMiddleware`
 * (`libs/langchain/src/agents/middleware/tests/hitl.test.ts`), asserted through Stepwise's public API.
 * Each test is named after LangChain's case.
 */
import type { Prompt } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Ref, Schema } from "effect"
import { runLogged } from "./support/parityRun.js"

const Calculator = Tool.make("calculator", {
  parameters: { a: Schema.Number, b: Schema.Number, operation: Schema.String },
  success: Schema.Number
})
const WriteFile = Tool.make("write_file", {
  parameters: { filename: Schema.String, content: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(Calculator, WriteFile)

/** Every tool run, in order, as `name:args`. */
const toolsLogging = (runs: Ref.Ref<ReadonlyArray<string>>) =>
  Tools.toLayer({
    calculator: ({ a, b, operation }) =>
      Effect.as(Ref.update(runs, (all) => [...all, `calculator:${a},${b},${operation}`]), a + b),
    write_file: ({ content, filename }) =>
      Effect.as(Ref.update(runs, (all) => [...all, `write_file:${filename},${content}`]), `wrote ${filename}`)
  })

const calc = (a: number, b: number, id: string) => ({ name: "calculator", params: { a, b, operation: "add" }, id })
const write = (filename: string, content: string, id: string) => ({
  name: "write_file",
  params: { filename, content },
  id
})

const run = <R>(
  script: ReadonlyArray<ScriptedModel.Turn>,
  body: (runs: Ref.Ref<ReadonlyArray<string>>) => Effect.Effect<void, unknown, R>
) => runLogged(script, toolsLogging, body)

const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

const agentWith = (interruptOn: HumanInTheLoop.Options<typeof Tools.tools>["interruptOn"]) =>
  Agent.make({ toolkit: Tools, middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn })] })

describe("LangChain parity: humanInTheLoopMiddleware", () => {
  it.effect("should auto-approve safe tools and interrupt for tools requiring approval", () =>
    run([
      ScriptedModel.toolCalls([calc(42, 17, "call_1"), write("greeting.txt", "Hello World", "call_2")]),
      ScriptedModel.text("done")
    ], (runs) =>
      Effect.gen(function*() {
        const agent = yield* agentWith({ write_file: { allowedDecisions: ["approve", "edit", "reject"] } })
        const first = yield* agent.run("Calculate 42 * 17 and write to greeting.txt", { threadId: "test-123" })
        assert.strictEqual(first._tag, "Interrupted")
        if (first._tag !== "Interrupted") return
        const request = first.interrupt.value
        assert.deepStrictEqual(request.actionRequests.map((action) => action.toolName), ["write_file"])
        assert.deepStrictEqual(request.actionRequests[0]!.args, { filename: "greeting.txt", content: "Hello World" })
        // nothing of the reply runs before the decision
        assert.deepStrictEqual(yield* Ref.get(runs), [])
        const done = yield* agent.resume("test-123", HumanInTheLoop.approveAll(request))
        assert.strictEqual(done._tag, "Completed")
        assert.deepStrictEqual([...(yield* Ref.get(runs))].sort(), [
          "calculator:42,17,add",
          "write_file:greeting.txt,Hello World"
        ])
      })))

  it.effect("should handle edit response type", () =>
    run(
      [ScriptedModel.toolCalls([write("greeting.txt", "Hello World", "call_1")]), ScriptedModel.text("done")],
      (runs) =>
        Effect.gen(function*() {
          const agent = yield* agentWith({ write_file: true })
          const first = yield* agent.run("write", { threadId: "t" })
          if (first._tag !== "Interrupted") return assert.fail("expected an interrupt")
          const [action] = first.interrupt.value.actionRequests
          const done = yield* agent.resume("t", [
            HumanInTheLoop.edit(action!, { filename: "safe.txt", content: "Edited content" })
          ])
          assert.strictEqual(done._tag, "Completed")
          assert.deepStrictEqual(yield* Ref.get(runs), ["write_file:safe.txt,Edited content"])
        })
    ))

  it.effect("should return to model without executing approved tools when any tool is rejected", () =>
    run([
      ScriptedModel.toolCalls([write("a.txt", "A", "call_1"), write("b.txt", "B", "call_2")]),
      ScriptedModel.text("understood")
    ], (runs) =>
      Effect.gen(function*() {
        const agent = yield* agentWith({ write_file: true })
        const first = yield* agent.run("write both", { threadId: "t" })
        if (first._tag !== "Interrupted") return assert.fail("expected an interrupt")
        const [a, b] = first.interrupt.value.actionRequests
        const done = yield* agent.resume("t", [HumanInTheLoop.approve(a!), HumanInTheLoop.reject(b!, "not b")])
        assert.strictEqual(done._tag, "Completed")
        // Deliberate difference (docs/migrating-from-langchain.md, Human in the loop): LangChain drops the
        // approved call of the batch; here a rejection answers only its own call, the approved one runs.
        assert.deepStrictEqual(yield* Ref.get(runs), ["write_file:a.txt,A"])
        const results = toolResults(done.state.messages)
        assert.deepStrictEqual(results.map((part) => [part.id, part.isFailure]), [["call_1", false], ["call_2", true]])
        assert.include(JSON.stringify(results[1]!.result), "not b")
        // back to the model, which reads both results
        assert.strictEqual((yield* ScriptedModel.requests).length, 2)
      })))

  it.effect("should generate default rejection message when message is not provided", () =>
    run(
      [ScriptedModel.toolCalls([write("a.txt", "A", "call_1")]), ScriptedModel.text("ok")],
      (runs) =>
        Effect.gen(function*() {
          const agent = yield* agentWith({ write_file: true })
          const first = yield* agent.run("write", { threadId: "t" })
          if (first._tag !== "Interrupted") return assert.fail("expected an interrupt")
          const done = yield* agent.resume("t", [HumanInTheLoop.reject(first.interrupt.value.actionRequests[0]!)])
          const [result] = toolResults(done.state.messages)
          assert.isTrue(result!.isFailure)
          assert.deepStrictEqual(result!.result, {
            error: "The user rejected this call of \"write_file\"; it did not run."
          })
          assert.deepStrictEqual(yield* Ref.get(runs), [])
        })
    ))

  it.effect("should allow to interrupt multiple tools at the same time", () =>
    run([
      ScriptedModel.toolCalls([calc(1, 2, "call_1"), write("a.txt", "A", "call_2")]),
      ScriptedModel.text("done")
    ], (runs) =>
      Effect.gen(function*() {
        const agent = yield* agentWith({ calculator: true, write_file: true })
        const first = yield* agent.run("both", { threadId: "t" })
        if (first._tag !== "Interrupted") return assert.fail("expected an interrupt")
        assert.deepStrictEqual(first.interrupt.value.actionRequests.map((action) => action.callId), [
          "call_1",
          "call_2"
        ])
        const done = yield* agent.resume("t", HumanInTheLoop.approveAll(first.interrupt.value))
        assert.strictEqual(done._tag, "Completed")
        assert.strictEqual((yield* Ref.get(runs)).length, 2)
      })))

  it.effect("should throw if not all tool calls have a response", () =>
    run(
      [ScriptedModel.toolCalls([calc(1, 2, "call_1"), write("a.txt", "A", "call_2")])],
      (runs) =>
        Effect.gen(function*() {
          const agent = yield* agentWith({ calculator: true, write_file: true })
          const first = yield* agent.run("both", { threadId: "t" })
          if (first._tag !== "Interrupted") return assert.fail("expected an interrupt")
          const error = yield* Effect.flip(
            agent.resume("t", [HumanInTheLoop.approve(first.interrupt.value.actionRequests[0]!)])
          )
          assert.strictEqual(error._tag, "DecisionError")
          if (error._tag !== "DecisionError") return
          assert.strictEqual(error.reason, "Missing")
          assert.deepStrictEqual(yield* Ref.get(runs), [])
        })
    ))

  it.effect("should not allow me to approve if I don't have approve in allowedDecisions", () =>
    run([ScriptedModel.toolCalls([write("greeting.txt", "Hello World", "call_2")])], (runs) =>
      Effect.gen(function*() {
        const agent = yield* agentWith({
          write_file: { allowedDecisions: ["edit"], description: "File write operation requires approval" }
        })
        const first = yield* agent.run("write", { threadId: "test-123" })
        if (first._tag !== "Interrupted") return assert.fail("expected an interrupt")
        const [action] = first.interrupt.value.actionRequests
        assert.deepStrictEqual(action!.allowedDecisions, ["edit"])
        const error = yield* Effect.flip(agent.resume("test-123", [HumanInTheLoop.approve(action!)]))
        assert.strictEqual(error._tag, "DecisionError")
        if (error._tag !== "DecisionError") return
        assert.strictEqual(error.reason, "NotAllowed")
        assert.deepStrictEqual(yield* Ref.get(runs), [])
      })))

  it.effect("should preserve original order when mixing auto-approved and interrupt tool calls", () =>
    run([
      ScriptedModel.toolCalls([
        calc(1, 2, "call_1"),
        write("file1.txt", "Content 1", "call_2"),
        calc(3, 4, "call_3"),
        write("file2.txt", "Content 2", "call_4")
      ]),
      ScriptedModel.text("done")
    ], (runs) =>
      Effect.gen(function*() {
        const agent = yield* agentWith({ write_file: { allowedDecisions: ["approve"] }, calculator: false })
        const first = yield* agent.run("Calculate 1+2, write file1, calculate 3+4, write file2", {
          threadId: "test-order-1"
        })
        if (first._tag !== "Interrupted") return assert.fail("expected an interrupt")
        const request = first.interrupt.value
        assert.deepStrictEqual(request.actionRequests.map((action) => action.callId), ["call_2", "call_4"])
        const done = yield* agent.resume("test-order-1", HumanInTheLoop.approveAll(request))
        if (done._tag !== "Completed") return assert.fail("expected the run to complete")
        const reply = done.state.messages.find((message) => message.role === "assistant")!
        const calls = typeof reply.content === "string"
          ? []
          : reply.content.flatMap((part) => (part.type === "tool-call" ? [part.id] : []))
        assert.deepStrictEqual(calls, ["call_1", "call_2", "call_3", "call_4"])
        assert.deepStrictEqual(toolResults(done.state.messages).map((part) => part.id), [
          "call_1",
          "call_2",
          "call_3",
          "call_4"
        ])
        const ran = yield* Ref.get(runs)
        assert.deepStrictEqual(ran.filter((entry) => entry.startsWith("calculator")), [
          "calculator:1,2,add",
          "calculator:3,4,add"
        ])
        assert.deepStrictEqual(ran.filter((entry) => entry.startsWith("write_file")), [
          "write_file:file1.txt,Content 1",
          "write_file:file2.txt,Content 2"
        ])
      })))

  /** An agent that asks about `write_file` only for a file whose name starts with "danger". */
  const dangerOnly = agentWith({
    write_file: {
      allowedDecisions: ["approve"],
      when: (call) => String((call.params as { filename?: unknown }).filename ?? "").startsWith("danger")
    }
  })

  it.effect("when predicate: auto-approves the tool call when `when` returns false", () =>
    run(
      [ScriptedModel.toolCalls([write("a.txt", "A", "call_1")]), ScriptedModel.text("done")],
      (runs) =>
        Effect.gen(function*() {
          const agent = yield* dangerOnly
          const result = yield* agent.run("write", { threadId: "t" })
          assert.strictEqual(result._tag, "Completed")
          assert.deepStrictEqual(yield* Ref.get(runs), ["write_file:a.txt,A"])
        })
    ))

  it.effect("when predicate: interrupts for the tool call when `when` returns true", () =>
    run(
      [ScriptedModel.toolCalls([write("danger.txt", "A", "call_1")]), ScriptedModel.text("done")],
      (runs) =>
        Effect.gen(function*() {
          const agent = yield* dangerOnly
          const result = yield* agent.run("write", { threadId: "t" })
          assert.strictEqual(result._tag, "Interrupted")
          assert.deepStrictEqual(yield* Ref.get(runs), [])
        })
    ))
})
