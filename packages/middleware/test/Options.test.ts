import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Middleware from "@stepwise-agent/core/Middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Exit, FastCheck } from "effect"
import * as ContextEditing from "../src/ContextEditing.js"
import * as DynamicSystemPrompt from "../src/DynamicSystemPrompt.js"
import * as Logging from "../src/Logging.js"
import * as Summarization from "../src/Summarization.js"
import * as TodoList from "../src/TodoList.js"
import * as Tracing from "../src/Tracing.js"

/** Builds an agent with the middleware a constructor gave: bad options fail Agent.make. */
const viaAgent = (build: () => Middleware.Any) =>
  Effect.suspend(() => Agent.make({ middleware: [build()] })).pipe(
    Effect.asVoid,
    Effect.provide(ScriptedModel.layer([]))
  ) as Effect.Effect<void, AgentError.InvalidOptions | AgentError.AgentConfigError>

type Builder = (options: any) => Effect.Effect<unknown, unknown>

const builders: ReadonlyArray<readonly [string, Builder, Record<string, unknown>]> = [
  ["Logging", (o) => viaAgent(() => Logging.middleware(o)), {}],
  ["Tracing", (o) => viaAgent(() => Tracing.middleware(o)), {}],
  ["TodoList", (o) => viaAgent(() => TodoList.middleware(o)), {}],
  ["DynamicSystemPrompt", (o) => viaAgent(() => DynamicSystemPrompt.middleware(() => "p", o)), {}],
  ["ContextEditing", (o) => viaAgent(() => ContextEditing.middleware(o)), {}],
  ["ClearToolUses", (o) => viaAgent(() => ContextEditing.middleware({ edits: [ContextEditing.clearToolUses(o)] })), {}],
  ["Summarization", (o) => viaAgent(() => Summarization.middleware(o)), {
    trigger: { tokens: 10 },
    keep: { messages: 2 }
  }]
]

const failure = (effect: Effect.Effect<unknown, unknown>) =>
  Effect.map(Effect.flip(effect), (error) => error as AgentError.InvalidOptions)

describe("options of every built-in are checked", () => {
  it.effect("an unknown key (a LangChain option) fails with InvalidOptions naming the key", () =>
    Effect.gen(function*() {
      for (const [module, build, base] of builders) {
        const error = yield* failure(build({ ...base, model: "openai:gpt-4o-mini" }))
        assert.strictEqual(error._tag, "InvalidOptions", module)
        assert.strictEqual(error.module, module)
        assert.strictEqual(error.option, "model", module)
        assert.include(error.reason, "is unknown", module)
      }
    }))

  it.effect("a wrong-typed value fails with InvalidOptions naming the option", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, Builder, unknown, string]> = [
        ["Logging", builders[0]![1], { level: "Loud" }, "level"],
        ["Tracing", builders[1]![1], { name: 3 }, "name"],
        ["TodoList", builders[2]![1], { systemPrompt: 1 }, "systemPrompt"],
        ["DynamicSystemPrompt", builders[3]![1], { name: "" }, "name"],
        ["ContextEditing", builders[4]![1], { tokenCountMethod: "exact" }, "tokenCountMethod"],
        ["ContextEditing", builders[4]![1], { edits: [1] }, "edits[0]"],
        ["ClearToolUses", builders[5]![1], { keep: "3" }, "keep"],
        ["Summarization", builders[6]![1], { trigger: { tokens: 10 }, keep: { messages: "2" } }, "keep.messages"]
      ]
      for (const [module, build, options, option] of cases) {
        const error = yield* failure(build(options))
        assert.strictEqual(error._tag, "InvalidOptions", module)
        assert.strictEqual(error.module, module)
        assert.strictEqual(error.option, option, module)
      }
      const prompt = yield* failure(viaAgent(() => DynamicSystemPrompt.middleware("text" as any)))
      assert.strictEqual(prompt.option, "prompt")
    }))

  it.effect("defaults and good options still build", () =>
    Effect.gen(function*() {
      for (const [module, build, base] of builders) {
        const exit = yield* Effect.exit(build(base))
        assert.isTrue(Exit.isSuccess(exit), module)
      }
      const edit = ContextEditing.clearToolUses({ keep: 0, excludeTools: ["search"] })
      assert.isTrue(Exit.isSuccess(yield* Effect.exit(Middleware.build(ContextEditing.middleware({ edits: [edit] })))))
    }))

  it.effect.prop(
    "junk options never throw or die: they build or fail with InvalidOptions",
    { junk: FastCheck.dictionary(FastCheck.string(), FastCheck.anything()), index: FastCheck.nat(builders.length - 1) },
    ({ index, junk }) =>
      Effect.gen(function*() {
        const [module, build] = builders[index]!
        const exit = yield* Effect.exit(Effect.suspend(() => build(junk)))
        if (Exit.isFailure(exit)) {
          const error = yield* failure(Effect.suspend(() => build(junk)))
          assert.strictEqual(error._tag, "InvalidOptions", module)
        }
      })
  )
})
