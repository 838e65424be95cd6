import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Effect, Option } from "effect"
import * as HookRecorder from "../src/HookRecorder.js"
import * as ScriptedModel from "../src/ScriptedModel.js"

describe("HookRecorder", () => {
  it.effect("records transformInput first, then each node and wrap hook, and changes nothing", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const agent = yield* Agent.make({ middleware: [HookRecorder.middleware("a", log)] })
      const result = yield* agent.run("hi ada@example.com", { threadId: "t" })
      assert.deepStrictEqual(log, [
        "a.transformInput",
        "a.beforeAgent",
        "a.beforeModel",
        "a.wrapModelCall:in",
        "a.wrapModelCall:out",
        "a.afterModel",
        "a.afterAgent"
      ])
      assert.strictEqual(result._tag, "Completed")
      const stored = Option.getOrThrow(yield* agent.thread("t")).state.messages
      assert.deepStrictEqual(
        stored.map((message) =>
          message.role === "system" || message.role === "tool"
            ? ""
            : message.content.map((part) => part.type === "text" ? part.text : "").join("")
        ),
        ["hi ada@example.com", "hello"]
      )
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("hello")]))))
})
