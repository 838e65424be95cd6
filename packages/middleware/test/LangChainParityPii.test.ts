/**
 * LangChain JS v1's own cases for `piiMiddleware` (`libs/langchain/src/agents/middleware/tests/pii.test.ts`),
 * asserted through Stepwise's public API. Each test is named after LangChain's case; where the formats
 * differ on purpose (docs/middleware/pii.md, Compared with LangChain) the test asserts ours and says so.
 */
import type { Prompt } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Pii } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Schema } from "effect"

const SearchTool = Tool.make("search", { parameters: {}, success: Schema.String })
const Tools = Toolkit.make(SearchTool)
const ToolsLive = Tools.toLayer({ search: () => Effect.succeed("Found: john@example.com at 192.168.1.100") })
const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), ToolsLive))

const textOf = (message: Prompt.Message | undefined): string => {
  if (message === undefined) return ""
  if (typeof message.content === "string") return message.content
  return message.content.map((part) =>
    part.type === "text" ? part.text : part.type === "tool-result" ? JSON.stringify(part.result) : ""
  ).join("")
}

/** The stored user message and the last assistant message of one run of an agent with `options`. */
const runWith = (options: Pii.Options, input: string) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({ toolkit: Tools, middleware: [Pii.middleware(options)] })
    const result = yield* agent.run(input, { threadId: "t" })
    const messages = result.state.messages
    return {
      human: textOf(messages.find((message) => message.role === "user")),
      ai: textOf([...messages].reverse().find((message) => message.role === "assistant")),
      tool: textOf(messages.find((message) => message.role === "tool")),
      sent: textOf((yield* ScriptedModel.requests)[0]?.prompt.content.find((message) => message.role === "user"))
    }
  })

describe("LangChain parity: piiMiddleware", () => {
  it.effect("Redact Strategy: should redact email", () =>
    Effect.gen(function*() {
      const { human, sent } = yield* runWith({ types: ["email"], strategy: "redact" }, "Email me at test@example.com")
      assert.include(human, "[REDACTED_EMAIL]")
      assert.notInclude(human, "test@example.com")
      assert.notInclude(sent, "test@example.com")
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("Redact Strategy: should redact multiple PII", () =>
    Effect.gen(function*() {
      const { human } = yield* runWith(
        { types: ["email"], strategy: "redact" },
        "Contact alice@test.com or bob@test.com"
      )
      assert.strictEqual(human.match(/\[REDACTED_EMAIL\]/g)?.length, 2)
      assert.notInclude(human, "alice@test.com")
      assert.notInclude(human, "bob@test.com")
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("Mask Strategy: should mask email (documented format: the domain name is masked, not the local part)", () =>
    Effect.gen(function*() {
      const { human } = yield* runWith({ types: ["email"], strategy: "mask" }, "Email: user@example.com")
      assert.include(human, "user@****.com")
      assert.notInclude(human, "user@example.com")
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("Mask Strategy: should mask credit card", () =>
    Effect.gen(function*() {
      const { human } = yield* runWith({ types: ["credit_card"], strategy: "mask" }, "Card: 4532015112830366")
      assert.include(human, "0366")
      assert.notInclude(human, "4532015112830366")
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("Mask Strategy: should mask IP (documented format: *.*.*.100)", () =>
    Effect.gen(function*() {
      const { human } = yield* runWith({ types: ["ip"], strategy: "mask" }, "IP: 192.168.1.100")
      assert.include(human, "*.*.*.100")
      assert.notInclude(human, "192.168.1.100")
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("Hash Strategy: should hash email", () =>
    Effect.gen(function*() {
      const { human } = yield* runWith({ types: ["email"], strategy: "hash" }, "Email: test@example.com")
      assert.match(human, /<email_hash:[^>]+>/)
      assert.notInclude(human, "test@example.com")
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("Hash Strategy: should produce deterministic hash", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [Pii.middleware({ types: ["email"], strategy: "hash" })]
      })
      const first = yield* agent.run("Email: test@example.com", { threadId: "one" })
      const second = yield* agent.run("Email: test@example.com", { threadId: "two" })
      assert.strictEqual(textOf(first.state.messages[0]), textOf(second.state.messages[0]))
    }).pipe(provide([ScriptedModel.text("Response"), ScriptedModel.text("Response")])))

  it.effect("Block Strategy: should raise exception when PII detected", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [Pii.middleware({ types: ["email"], strategy: "block" })]
      })
      const error = yield* Effect.flip(agent.run("Email: test@example.com", { threadId: "t" }))
      assert.strictEqual(error._tag, "PiiDetected")
      if (error._tag !== "PiiDetected") return
      assert.strictEqual(error.count, 1)
      assert.notInclude(JSON.stringify(error), "test@example.com")
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("Block Strategy: should raise exception with multiple matches", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [Pii.middleware({ types: ["email"], strategy: "block" })]
      })
      const error = yield* Effect.flip(agent.run("Emails: a@example.com and b@example.com", { threadId: "t" }))
      assert.strictEqual(error._tag, "PiiDetected")
      if (error._tag !== "PiiDetected") return
      assert.strictEqual(error.count, 2)
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("should only process input when applyToInput is true and applyToOutput is false", () =>
    Effect.gen(function*() {
      const { ai, human } = yield* runWith(
        { types: ["email"], strategy: "redact", applyToInput: true, applyToOutput: false },
        "Email: test@example.com"
      )
      assert.include(human, "[REDACTED_EMAIL]")
      assert.include(ai, "ai@example.com")
    }).pipe(provide([ScriptedModel.text("My email is ai@example.com")])))

  it.effect("should only process output when applyToInput is false and applyToOutput is true", () =>
    Effect.gen(function*() {
      const { ai, human } = yield* runWith(
        { types: ["email"], strategy: "redact", applyToInput: false, applyToOutput: true },
        "Email: test@example.com"
      )
      assert.include(human, "test@example.com")
      assert.include(ai, "[REDACTED_EMAIL]")
      assert.notInclude(ai, "ai@example.com")
    }).pipe(provide([ScriptedModel.text("My email is ai@example.com")])))

  it.effect("should process both input and output when both are enabled", () =>
    Effect.gen(function*() {
      const { ai, human } = yield* runWith(
        { types: ["email"], strategy: "redact", applyToInput: true, applyToOutput: true },
        "Email: test@example.com"
      )
      assert.include(human, "[REDACTED_EMAIL]")
      assert.include(ai, "[REDACTED_EMAIL]")
    }).pipe(provide([ScriptedModel.text("My email is ai@example.com")])))

  it.effect("should return no changes when no PII detected", () =>
    Effect.gen(function*() {
      const { ai, human } = yield* runWith({ types: ["email"], strategy: "redact", applyToOutput: true }, "No PII here")
      assert.strictEqual(human, "No PII here")
      assert.strictEqual(ai, "Response")
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("should process tool results when applyToToolResults is true", () =>
    Effect.gen(function*() {
      const { tool } = yield* runWith(
        { types: ["email"], strategy: "redact", applyToInput: false, applyToToolResults: true },
        "Search for John"
      )
      assert.include(tool, "[REDACTED_EMAIL]")
      assert.notInclude(tool, "john@example.com")
      // and the model never read it
      const second = (yield* ScriptedModel.requests)[1]!
      assert.notInclude(JSON.stringify(second.prompt.content), "john@example.com")
    }).pipe(
      provide([
        ScriptedModel.toolCalls([{ name: "search", params: {}, id: "call_123" }]),
        ScriptedModel.text("Response")
      ])
    ))

  it.effect("should apply mask strategy to tool results", () =>
    Effect.gen(function*() {
      const { tool } = yield* runWith({ types: ["ip"], strategy: "mask", applyToToolResults: true }, "Search")
      assert.include(tool, "*.*.*.100")
      assert.notInclude(tool, "192.168.1.100")
    }).pipe(
      provide([
        ScriptedModel.toolCalls([{ name: "search", params: {}, id: "call_123" }]),
        ScriptedModel.text("Response")
      ])
    ))

  it.effect("should block PII in tool results when strategy is block", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [
          Pii.middleware({ types: ["email"], strategy: "block", applyToInput: false, applyToToolResults: true })
        ]
      })
      const error = yield* Effect.flip(agent.run("Search", { threadId: "t" }))
      assert.strictEqual(error._tag, "PiiDetected")
      if (error._tag !== "PiiDetected") return
      assert.strictEqual(error.location, "tool_result")
      assert.strictEqual((yield* ScriptedModel.requests).length, 1)
    }).pipe(
      provide([
        ScriptedModel.toolCalls([{ name: "search", params: {}, id: "call_123" }]),
        ScriptedModel.text("Response")
      ])
    ))

  it.effect("Custom Detector: should work with custom regex detector", () =>
    Effect.gen(function*() {
      const { human } = yield* runWith(
        { types: [{ name: "api_key", pattern: "sk-[a-zA-Z0-9]{32}" }], strategy: "redact" },
        "Key: sk-abcdefghijklmnopqrstuvwxyz123456"
      )
      assert.include(human, "[REDACTED_API_KEY]")
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("Custom Detector: should work with custom callable detector", () =>
    Effect.gen(function*() {
      const detect = (content: string) => {
        const start = content.indexOf("CONFIDENTIAL")
        return start < 0 ? [] : [{ start, end: start + 12 }]
      }
      const { human } = yield* runWith(
        { types: [{ name: "confidential", detect }], strategy: "redact" },
        "This is CONFIDENTIAL information"
      )
      assert.include(human, "[REDACTED_CONFIDENTIAL]")
      assert.notInclude(human, "CONFIDENTIAL information")
    }).pipe(provide([ScriptedModel.text("Response")])))

  it.effect("Custom Detector: should throw error for unknown builtin type without detector", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Agent.make({ toolkit: Tools, middleware: [Pii.middleware({ types: ["unknown_type" as Pii.BuiltinType] })] })
      )
      assert.strictEqual(error._tag, "InvalidOptions")
    }).pipe(provide([])))

  it.effect("Multiple Middleware: should work with multiple PIIMiddleware instances in createAgent", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [
          Pii.middleware({ types: ["email"], strategy: "redact", name: "piiEmail" }),
          Pii.middleware({ types: ["ip"], strategy: "mask", name: "piiIp" })
        ]
      })
      const result = yield* agent.run("Email: test@example.com, IP: 192.168.1.100", { threadId: "t" })
      const human = textOf(result.state.messages[0])
      assert.include(human, "[REDACTED_EMAIL]")
      assert.include(human, "*.*.*.100")
    }).pipe(provide([ScriptedModel.text("Response")])))
})
