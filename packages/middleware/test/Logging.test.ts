import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Fiber, HashMap, Layer, Logger, LogLevel, TestClock } from "effect"
import * as Schema from "effect/Schema"
import * as Logging from "../src/Logging.js"

interface Line {
  readonly level: string
  readonly message: unknown
  readonly annotations: Record<string, unknown>
}

/** A logger that records every line, in place of the default one. */
const recording = (lines: Array<Line>) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ annotations, logLevel, message }) => {
      lines.push({
        level: logLevel.label,
        message: Array.isArray(message) && message.length === 1 ? message[0] : message,
        annotations: Object.fromEntries(HashMap.toEntries(annotations))
      })
    })
  )

const Echo = Tool.make("echo", { parameters: { text: Schema.String }, success: Schema.String })
const Boom = Tool.make("boom", {})
const Tools = Toolkit.make(Echo, Boom)
const ToolsLive = Tools.toLayer({
  echo: ({ text }) => Effect.as(Effect.sleep("300 millis"), text),
  boom: () => Effect.die("kaput")
})

const usage = { inputTokens: 12, outputTokens: 3, totalTokens: 15 }
const setup = (script: ReadonlyArray<ScriptedModel.Turn>, lines: Array<Line>) =>
  Effect.provide(Layer.mergeAll(ScriptedModel.layer(script), ToolsLive, recording(lines)))

describe("Logging", () => {
  it.effect("logs each hook with what happened, in order", () => {
    const lines: Array<Line> = []
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [Logging.middleware()] })
      const fiber = yield* Effect.fork(agent.run("go", { threadId: "t1" }))
      yield* TestClock.adjust("2 seconds")
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(lines.map((line) => [line.level, line.message]), [
        ["INFO", "agent run started"],
        ["INFO", "model call"],
        ["INFO", "tool call"],
        ["INFO", "model call"],
        ["INFO", "agent run ended"]
      ])
      assert.deepStrictEqual(lines[0]!.annotations, {
        middleware: "logging",
        hook: "beforeAgent",
        threadId: "t1",
        messageCount: 1
      })
      assert.deepStrictEqual(lines[1]!.annotations, {
        middleware: "logging",
        hook: "wrapModelCall",
        threadId: "t1",
        step: 0,
        messageCount: 1,
        tools: ["echo", "boom"],
        toolCalls: ["echo"],
        finishReason: "tool-calls",
        inputTokens: 12,
        outputTokens: 3,
        totalTokens: 15,
        durationMillis: 1000
      })
      assert.deepStrictEqual(lines[2]!.annotations, {
        middleware: "logging",
        hook: "wrapToolCall",
        threadId: "t1",
        step: 0,
        tool: "echo",
        callId: "c1",
        isFailure: false,
        durationMillis: 300
      })
      assert.deepStrictEqual(
        [lines[3]!.annotations.messageCount, lines[3]!.annotations.finishReason, lines[3]!.annotations.toolCalls],
        [3, "stop", []]
      )
      assert.deepStrictEqual(lines[4]!.annotations, {
        middleware: "logging",
        hook: "afterAgent",
        threadId: "t1",
        step: 2,
        messageCount: 4
      })
    }).pipe(setup([
      () =>
        Effect.as(
          Effect.sleep("1 second"),
          ScriptedModel.toolCalls([{ name: "echo", params: { text: "x" }, id: "c1" }], { usage })
        ),
      ScriptedModel.text("done")
    ], lines))
  })

  it.effect("logs a failed model call at the failure level and passes the error on", () => {
    const lines: Array<Line> = []
    const error = ScriptedModel.httpError(503)
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [Logging.middleware({ failureLevel: "Error" })] })
      const failure = yield* Effect.flip(agent.run("go", { threadId: "t1" }))
      assert.strictEqual(failure._tag === "HttpResponseError" && failure.response.status, 503)
      const failed = lines.find((line) => line.message === "model call failed")!
      assert.strictEqual(failed.level, "ERROR")
      assert.strictEqual(failed.annotations.error, "HttpResponseError")
      assert.include(failed.annotations.errorMessage as string, "503")
      assert.deepStrictEqual(lines.map((line) => line.message), ["agent run started", "model call failed"])
    }).pipe(setup([error], lines))
  })

  it.effect("logs a failed tool result, and a tool that died", () => {
    const lines: Array<Line> = []
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [Logging.middleware()] })
      const failure = yield* Effect.flip(agent.run("go", { threadId: "t1" }))
      assert.strictEqual(failure._tag, "ToolDefect")
      const tools = lines.filter((line) => line.annotations.hook === "wrapToolCall")
      assert.deepStrictEqual(
        tools.map((
          line
        ) => [line.level, line.message, line.annotations.tool, line.annotations.isFailure ?? line.annotations.error]),
        [
          ["INFO", "tool call", "echo", true],
          ["WARN", "tool call failed", "boom", "ToolDefect"]
        ]
      )
    }).pipe(setup([
      ScriptedModel.toolCalls([{ name: "echo", params: { text: 1 } }]),
      ScriptedModel.toolCalls([{ name: "boom", params: {} }])
    ], lines))
  })

  it.effect("logs at the chosen level, which the logger's minimum level filters", () => {
    const lines: Array<Line> = []
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [Logging.middleware({ level: LogLevel.Debug, name: "log" })] })
      yield* agent.run("one", { threadId: "t1" })
      assert.deepStrictEqual(lines, [])
      yield* agent.run("two", { threadId: "t1" }).pipe(Logger.withMinimumLogLevel(LogLevel.Debug))
      assert.deepStrictEqual(lines.map((line) => [line.level, line.message, line.annotations.middleware]), [
        ["DEBUG", "agent run started", "log"],
        ["DEBUG", "model call", "log"],
        ["DEBUG", "agent run ended", "log"]
      ])
    }).pipe(setup([ScriptedModel.text("1"), ScriptedModel.text("2")], lines))
  })
})
