/**
 * The one constructor convention of the built-ins: `X.middleware(options)`
 * is a `Middleware` value, whatever the options; bad options fail
 * `Agent.make` with `InvalidOptions`, and tool names a middleware refers to
 * are checked there too (`UnknownTools`).
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Schema } from "effect"
import * as Budget from "../src/Budget.js"
import * as ContextEditing from "../src/ContextEditing.js"
import * as ContextOverflow from "../src/ContextOverflow.js"
import * as DynamicSystemPrompt from "../src/DynamicSystemPrompt.js"
import * as Filesystem from "../src/Filesystem.js"
import * as Guardrail from "../src/Guardrail.js"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as LlmToolSelector from "../src/LlmToolSelector.js"
import * as Logging from "../src/Logging.js"
import * as ModelCallLimit from "../src/ModelCallLimit.js"
import * as ModelFallback from "../src/ModelFallback.js"
import * as ModelRetry from "../src/ModelRetry.js"
import * as Offload from "../src/Offload.js"
import * as Pii from "../src/Pii.js"
import * as RateLimit from "../src/RateLimit.js"
import * as SubAgents from "../src/SubAgents.js"
import * as Summarization from "../src/Summarization.js"
import * as TodoList from "../src/TodoList.js"
import * as ToolCallLimit from "../src/ToolCallLimit.js"
import * as ToolEmulator from "../src/ToolEmulator.js"
import * as ToolErrors from "../src/ToolErrors.js"
import * as ToolRetry from "../src/ToolRetry.js"
import * as Tracing from "../src/Tracing.js"

const Search = Tool.make("search", { parameters: { q: Schema.String }, success: Schema.String })
const Rm = Tool.make("rm", { parameters: { path: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Search)
const ToolsLive = Tools.toLayer({ search: ({ q }) => Effect.succeed(q) })

const services = Layer.mergeAll(
  ScriptedModel.layer([]),
  ToolsLive,
  RateLimit.layer,
  Summarization.layerFromLanguageModel.pipe(Layer.provide(ScriptedModel.layer([])))
)

/** Builds an agent with the toolkit and `middleware`, giving how it failed (or `undefined`). */
const buildError = (middleware: Middleware.Any) =>
  Agent.make({ toolkit: Tools, middleware: [middleware] }).pipe(
    Effect.flip,
    Effect.option,
    Effect.map((error) => error._tag === "Some" ? error.value : undefined),
    Effect.provide(services)
  ) as Effect.Effect<unknown>

/** Every built-in with options it rejects, and the option it names. */
const badOptions: ReadonlyArray<readonly [string, () => Middleware.Any, string]> = [
  ["Budget", () => Budget.middleware({ tokens: { runLimit: -1 } }), "tokens.runLimit"],
  ["ContextEditing", () => ContextEditing.middleware({ mode: "both" as any }), "mode"],
  ["ClearToolUses", () => ContextEditing.middleware({ edits: [ContextEditing.clearToolUses({ keep: -1 })] }), "keep"],
  ["ContextOverflow", () => ContextOverflow.middleware({ policy: "drop" as any }), "policy"],
  ["DynamicSystemPrompt", () => DynamicSystemPrompt.middleware("no" as any), "prompt"],
  ["Filesystem", () => Filesystem.middleware({ storage: "disk" } as any), "storage"],
  ["Guardrail", () => Guardrail.middleware({}), "input"],
  ["HumanInTheLoop", () => HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: {}, extra: 1 } as any), "extra"],
  ["LlmToolSelector", () => LlmToolSelector.middleware({ maxTools: 0 }), "maxTools"],
  ["Logging", () => Logging.middleware({ level: "loud" } as any), "level"],
  ["ModelCallLimit", () => ModelCallLimit.middleware({}), "threadLimit"],
  ["ModelFallback", () => ModelFallback.middleware(), "models"],
  ["ModelRetry", () => ModelRetry.middleware({ maxRetries: -1 }), "maxRetries"],
  ["Offload", () => Offload.middleware({ previewChars: -1 }), "previewChars"],
  ["Pii", () => Pii.middleware({ types: [], strategy: "redact" }), "types"],
  ["RateLimit", () => RateLimit.middleware({}), "model"],
  ["SubAgents", () => SubAgents.middleware({ agents: {} }), "agents"],
  ["Summarization", () => Summarization.middleware({ trigger: { tokens: -1 } }), "trigger.tokens"],
  ["TodoList", () => TodoList.middleware({ toolDescription: 3 } as any), "toolDescription"],
  ["ToolCallLimit", () => ToolCallLimit.middleware({}), "threadLimit"],
  ["ToolEmulator", () => ToolEmulator.middleware({ tools: [] }), "tools"],
  ["ToolErrors", () => ToolErrors.middleware({} as any), "onError"],
  ["ToolRetry", () => ToolRetry.middleware({ maxRetries: -1 }), "maxRetries"],
  ["Tracing", () => Tracing.middleware({ name: "" }), "name"]
]

describe("every built-in is a Middleware value", () => {
  it.effect("bad options give a middleware (no throw, no Effect), and fail Agent.make with InvalidOptions", () =>
    Effect.gen(function*() {
      for (const [module, make, option] of badOptions) {
        const middleware = make()
        assert.isTrue(Middleware.isMiddleware(middleware), module)
        assert.isFalse(Effect.isEffect(middleware), module)
        const error = yield* buildError(middleware)
        assert.instanceOf(error, AgentError.InvalidOptions, module)
        if (!(error instanceof AgentError.InvalidOptions)) continue
        assert.isTrue(error.option.startsWith(option), `${module}: ${error.option}`)
        // Middleware.build fails the same way, without an agent
        const built = yield* Effect.flip(Middleware.build(middleware) as Effect.Effect<unknown, unknown>).pipe(
          Effect.provide(services)
        )
        assert.deepStrictEqual(built, error, module)
      }
    }))
})

describe("tool names a built-in refers to are checked when the agent is built", () => {
  const cases: ReadonlyArray<readonly [string, Middleware.Any]> = [
    ["rateLimit", RateLimit.middleware({ tools: { serach: { limit: 1, interval: "1 second" } } })],
    ["llmToolSelector", LlmToolSelector.middleware({ alwaysInclude: ["serach"] })],
    ["toolEmulator", ToolEmulator.middleware({ tools: ["serach"] })],
    ["toolCallLimit:serach", ToolCallLimit.middleware({ toolName: "serach", runLimit: 1 })],
    ["toolRetry", ToolRetry.middleware({ tools: ["serach"] })],
    ["toolErrors", ToolErrors.middleware({ tools: ["serach"], onError: () => undefined })],
    ["offload", Offload.middleware({ excludeTools: ["serach"] })],
    ["contextOverflow", ContextOverflow.middleware({ policy: "clearToolUses", excludeTools: ["serach"] })],
    // the HumanInTheLoop toolkit holds rm, the agent's does not
    ["humanInTheLoop", HumanInTheLoop.middleware({ toolkit: Toolkit.make(Search, Rm), interruptOn: { rm: true } })]
  ]

  it.effect("a name the agent has no tool for fails Agent.make with UnknownTools, naming the middleware", () =>
    Effect.gen(function*() {
      for (const [name, middleware] of cases) {
        const error = yield* buildError(middleware)
        assert.instanceOf(error, AgentError.UnknownTools, name)
        if (!(error instanceof AgentError.UnknownTools)) continue
        assert.strictEqual(error.middleware, name)
        assert.deepStrictEqual(error.names, [name === "humanInTheLoop" ? "rm" : "serach"])
        assert.include(error.available, "search")
      }
    }))

  it.effect("the same options naming a tool the agent has build", () =>
    Effect.gen(function*() {
      const fine = [
        RateLimit.middleware({ tools: { search: { limit: 1, interval: "1 second" } } }),
        ToolCallLimit.middleware({ toolName: "search", runLimit: 1 }),
        ToolRetry.middleware({ tools: ["search"] }),
        Offload.middleware({ excludeTools: ["search"] }),
        HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { search: true } })
      ]
      for (const middleware of fine) assert.isUndefined(yield* buildError(middleware), middleware.name)
    }))
})

describe("a built-in has its name before Agent.make builds it", () => {
  it.effect("the default name, or the name option, is the value's name and the built middleware's", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, Middleware.Any]> = [
        ["budget", Budget.middleware({ tokens: { runLimit: 10 } })],
        ["modelCallLimit", ModelCallLimit.middleware({ runLimit: 1 })],
        ["toolCallLimit:search", ToolCallLimit.middleware({ toolName: "search", runLimit: 1 })],
        ["toolCallLimit", ToolCallLimit.middleware({ runLimit: 1 })],
        ["modelRetry", ModelRetry.middleware()],
        ["toolRetry", ToolRetry.middleware()],
        ["rateLimit", RateLimit.middleware({ model: { limit: 1, interval: "1 second" } })],
        ["llmToolSelector", LlmToolSelector.middleware()],
        ["toolEmulator", ToolEmulator.middleware()],
        ["modelFallback", ModelFallback.middleware(ScriptedModel.layer([]))],
        ["summarization", Summarization.middleware({ trigger: { tokens: 100 } })],
        ["mine", ModelRetry.middleware({ name: "mine" })],
        ["mine", ToolCallLimit.middleware({ toolName: "search", runLimit: 1, name: "mine" })],
        ["mine", HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { search: true }, name: "mine" })]
      ]
      for (const [name, middleware] of cases) {
        assert.strictEqual(middleware.name, name)
        const built = yield* (Middleware.build(middleware) as Effect.Effect<Middleware.Any>).pipe(
          Effect.provide(services)
        )
        assert.strictEqual(built.name, name)
      }
    }))
})

describe("error classes", () => {
  it("name their free text reason, never description", async () => {
    const modules = await import("../src/index.js")
    const classes: Array<string> = []
    for (const [moduleName, module] of Object.entries(modules)) {
      for (const [name, value] of Object.entries(module as Record<string, unknown>)) {
        if (typeof value !== "function" || !("fields" in value) || !(value.prototype instanceof Error)) continue
        classes.push(`${moduleName}.${name}`)
        assert.notProperty(
          (value as unknown as { readonly fields: object }).fields,
          "description",
          `${moduleName}.${name}`
        )
      }
    }
    assert.includeMembers(classes, [
      "HumanInTheLoop.DecisionError",
      "SubAgents.SubAgentFailed"
    ])
  })
})
