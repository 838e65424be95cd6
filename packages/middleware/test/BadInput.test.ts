/**
 * Values of the wrong type, from JavaScript, given to every built-in
 * middleware's constructor and to each of its options: `Agent.make` (here
 * `Middleware.build`, what it runs) fails with `InvalidOptions` naming the
 * option, never with a defect — no options at all, a symbol or an object
 * without a prototype where a union of literals is looked up (Effect's
 * decoder makes it a string to find the member, which throws).
 */
import { KeyValueStore } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Middleware } from "@stepwise-agent/core"
import * as Builtins from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Cause, Effect, Exit, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** Each built-in with a \`middleware\` constructor, and the names of its options. */
const optionsOf: Readonly<Record<string, ReadonlyArray<string>>> = {
  Budget: ["cost", "exitBehavior", "name", "softLanding", "tokens"],
  ContextEditing: [
    "clearAtLeast",
    "clearTo",
    "clearToolInputs",
    "contextWindow",
    "edits",
    "excludeTools",
    "keep",
    "keepMessages",
    "mode",
    "name",
    "placeholder",
    "tokenCountMethod",
    "trigger",
    "triggerTokens"
  ],
  ContextOverflow: [
    "clearToolInputs",
    "compact",
    "contextWindow",
    "excludeTools",
    "keep",
    "model",
    "name",
    "placeholder",
    "policy"
  ],
  DynamicSystemPrompt: ["name"],
  Filesystem: ["routes", "rules", "storage", "systemPrompt"],
  Guardrail: ["blockedMessage", "input", "name", "onBlock", "output"],
  HumanInTheLoop: ["descriptionPrefix", "interruptOn", "name", "toolkit"],
  LlmToolSelector: ["alwaysInclude", "maxTools", "model", "name", "systemPrompt"],
  Logging: ["failureLevel", "level", "name"],
  ModelCallLimit: ["exitBehavior", "name", "runLimit", "softLanding", "threadLimit"],
  ModelFallback: [],
  ModelRetry: [
    "factor",
    "initialDelay",
    "jitter",
    "maxDelay",
    "maxRetries",
    "maxRetryAfter",
    "name",
    "onFailure",
    "respectRetryAfter",
    "retryOn",
    "schedule"
  ],
  Offload: ["excludeTools", "keepCalls", "maxArgChars", "maxResultChars", "maxResultTokens", "previewChars"],
  Pii: ["applyToInput", "applyToOutput", "applyToToolResults", "name", "strategy", "types"],
  RateLimit: ["model", "name", "tools"],
  SubAgents: [
    "agents",
    "concurrency",
    "maxDepth",
    "name",
    "onFailure",
    "shareLimits",
    "timeout",
    "toolDescription",
    "toolName"
  ],
  Summarization: [
    "agentModel",
    "calibrate",
    "contextWindow",
    "keep",
    "mode",
    "name",
    "offload",
    "onFailure",
    "onOverflow",
    "summaryPrefix",
    "summaryPrompt",
    "trigger",
    "trimTokensToSummarize"
  ],
  TodoList: ["systemPrompt", "toolDescription"],
  ToolCallLimit: ["exitBehavior", "name", "runLimit", "softLanding", "threadLimit", "toolName"],
  ToolEmulator: ["model", "name", "tools"],
  ToolErrors: ["name", "onError", "tools"],
  ToolRetry: [
    "factor",
    "initialDelay",
    "jitter",
    "maxDelay",
    "maxRetries",
    "name",
    "onFailure",
    "retryOn",
    "schedule",
    "tools"
  ],
  Tracing: ["name"]
}

const wrong: ReadonlyArray<readonly [string, unknown]> = [
  ["a symbol", Symbol("s")],
  ["an object without a prototype", Object.create(null)],
  ["an array holding a symbol", [Symbol("q")]],
  ["an object holding an object without a prototype", { a: Object.create(null) }],
  ["a bigint", 10n]
]

/** What building `make()`'s middleware ends with: a typed failure's tag and message, or nothing (built). */
const outcome = (label: string, make: () => unknown) =>
  Effect.gen(function*() {
    let middleware: unknown
    try {
      middleware = make()
    } catch (error) {
      return assert.fail(`${label}: threw ${String(error)}`)
    }
    const exit = yield* Effect.exit(Effect.scoped(Middleware.build(middleware as Middleware.Any)))
    if (Exit.isSuccess(exit)) return undefined
    const failure = Cause.failureOption(exit.cause)
    if (Option.isNone(failure)) return assert.fail(`${label}: died: ${Cause.pretty(exit.cause).slice(0, 300)}`)
    return failure.value as { readonly _tag: string; readonly message: string }
  })

describe("built-in middleware given options of the wrong type", () => {
  it.effect("no options at all: built, or InvalidOptions", () =>
    Effect.gen(function*() {
      for (const name of Object.keys(optionsOf)) {
        const error = yield* outcome(name, () => (Builtins as any)[name].middleware(undefined))
        if (error !== undefined) assert.strictEqual(error._tag, "InvalidOptions", `${name}: ${error.message}`)
      }
    }).pipe(Effect.provide(ScriptedModel.layer([]))) as Effect.Effect<void>)

  it.effect("an option of no kind it takes: InvalidOptions, not a defect", () =>
    Effect.gen(function*() {
      for (const [name, options] of Object.entries(optionsOf)) {
        for (const option of options) {
          for (const [label, value] of wrong) {
            const error = yield* outcome(
              `${name}.${option}: ${label}`,
              () => (Builtins as any)[name].middleware({ [option]: value })
            )
            // (an object without a prototype is a record some options take: such an option builds)
            if (error === undefined) continue
            assert.strictEqual(error._tag, "InvalidOptions", `${name}.${option}: ${label}: ${error.message}`)
          }
        }
      }
    }).pipe(Effect.provide(ScriptedModel.layer([]))) as Effect.Effect<void>, 30_000)
})

describe("an option that no decoder can read", () => {
  it.effect("a union of literals given a symbol's array or an object without a prototype names the option", () =>
    Effect.gen(function*() {
      for (const value of [Object.create(null), [Symbol("q")]]) {
        const error = yield* outcome("storage", () => Builtins.Filesystem.middleware({ storage: value }))
        assert.strictEqual(error?._tag, "InvalidOptions")
        assert.include(error!.message, `Filesystem option "storage"`)
      }
    }) as Effect.Effect<void>)
})

describe("Workspace.makeDirectory given options of the wrong type", () => {
  it.effect("InvalidOptions naming the option (a root of another kind died in WorkspaceError's constructor)", () =>
    Effect.gen(function*() {
      for (const [label, value] of [...wrong, ["a number", 42] as const, ["null", null] as const]) {
        const options = yield* Effect.flip(Builtins.Workspace.makeDirectory(value as any))
        assert.strictEqual(options._tag, "InvalidOptions", label)
        const root = yield* Effect.flip(Builtins.Workspace.makeDirectory({ root: value } as any))
        assert.strictEqual(root._tag, "InvalidOptions", label)
        assert.include(root.message, `Workspace option "root"`)
        if (value !== null && typeof value !== "number") {
          const bytes = yield* Effect.flip(
            Builtins.Workspace.makeDirectory({ root: "/never-made", maxFileBytes: value } as any)
          )
          assert.include(bytes.message, `Workspace option "maxFileBytes"`, label)
        }
      }
    }))
})

describe("a workspace given paths, contents or patterns of the wrong type", () => {
  it.effect("a WorkspaceError saying what it got, from the memory and the directory workspaces", () =>
    Effect.gen(function*() {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-badinput-"))
      fs.writeFileSync(path.join(root, "a.txt"), "hi")
      const workspaces = [
        ["memory", yield* Builtins.Workspace.makeMemory({ files: { "/a.txt": "hi" } })],
        ["directory", yield* Builtins.Workspace.makeDirectory({ root })]
      ] as const
      for (const [kind, workspace] of workspaces) {
        for (const [label, value] of [...wrong, ["a number", 42] as const, ["null", null] as const]) {
          const v = value as string
          for (
            const [method, call] of [
              ["read", () => workspace.read(v)],
              ["ls", () => workspace.ls(v)],
              ["write a path", () => workspace.write(v, "x")],
              ["write a content", () => workspace.write("/b.txt", v)],
              ["edit", () => workspace.edit(v, "a", "b", false)],
              ["glob", () => workspace.glob(v)],
              ["grep", () => workspace.grep(v)]
            ] as const
          ) {
            const exit = yield* Effect.exit(call() as Effect.Effect<unknown, { readonly _tag: string }>)
            const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
            assert.isTrue(
              Option.isSome(failure),
              `${kind}.${method}(${label}): ${Exit.isFailure(exit) ? "died" : "ok"}`
            )
            assert.strictEqual(Option.getOrThrow(failure)._tag, "WorkspaceError", `${kind}.${method}(${label})`)
          }
        }
      }
      fs.rmSync(root, { recursive: true, force: true })
    }))
})

describe("offload stores given options of the wrong type", () => {
  it.effect("each use fails with OffloadError naming the option (a prefix of another kind died at the first put)", () =>
    Effect.gen(function*() {
      for (const [label, value] of [...wrong, ["a number", 42] as const]) {
        const stores = [
          Builtins.Offload.layerKeyValueStore({ prefix: value } as any).pipe(Layer.provide(KeyValueStore.layerMemory)),
          Builtins.Offload.layerWorkspace({ directory: value } as any).pipe(
            Layer.provide(Builtins.Workspace.layerMemory())
          )
        ]
        for (const store of stores) {
          const error = yield* Effect.flip(
            Effect.flatMap(Builtins.Offload.OffloadStore, (offloads) => offloads.put("r", "text")).pipe(
              Effect.provide(store)
            )
          )
          assert.strictEqual(error._tag, "OffloadError", label)
          assert.include(error.message, "option must be a string", label)
        }
      }
    }))
})
