/**
 * Values of the wrong type, from JavaScript, at core's public entry points:
 * each is the module's typed failure naming what was wrong — never a defect
 * (a `TypeError`, or a `ParseError` thrown by a typed error's own
 * constructor given the caller's value), never a throw.
 */
import { KeyValueStore } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware, ModelProfile, RunRecord, TokenCounter } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Cause, Effect, Either, Exit, Layer, Option, Schema, Stream } from "effect"
import * as os from "node:os"
import * as path from "node:path"
import { Calculator, CalculatorLive } from "./utils.js"

/** Values no entry point takes where a string, a number or an object of its own belongs. */
const wrong: ReadonlyArray<readonly [string, unknown]> = [
  ["a number", 42],
  ["null", null],
  ["an object", { a: 1 }],
  ["an array", [1]],
  ["a symbol", Symbol("s")],
  ["a bigint", 10n],
  ["a function", () => 1],
  ["an object without a prototype", Object.create(null)],
  ["an array holding a symbol", [Symbol("q")]]
]

/** The failure `effect` ends with; a defect or a throw fails the test, naming the entry point. */
const failureOf = (label: string, effect: () => Effect.Effect<unknown, unknown, any>) =>
  Effect.gen(function*() {
    let built: Effect.Effect<unknown, unknown, any>
    try {
      built = effect()
    } catch (error) {
      return assert.fail(`${label}: threw ${String(error)}`)
    }
    const exit = yield* Effect.exit(Effect.scoped(built))
    if (Exit.isSuccess(exit)) return undefined
    const failure = Cause.failureOption(exit.cause)
    if (Option.isNone(failure)) return assert.fail(`${label}: died: ${Cause.pretty(exit.cause).slice(0, 300)}`)
    return failure.value as { readonly _tag: string; readonly message: string }
  })

const expectFailure = (label: string, effect: () => Effect.Effect<unknown, unknown, any>, tag: string, says?: string) =>
  Effect.gen(function*() {
    const error = yield* failureOf(label, effect)
    assert.isDefined(error, `${label}: succeeded`)
    assert.strictEqual(error!._tag, tag, `${label}: ${error!.message}`)
    if (says !== undefined) assert.include(error!.message, says, label)
  })

const env = Layer.mergeAll(ScriptedModel.layer([]), CalculatorLive, NodeContext.layer, KeyValueStore.layerMemory)

describe("Agent.make given options of the wrong type", () => {
  const kinds = ["provide", "toolkit", "middleware", "systemPrompt", "responseFormat", "outputToolName", "spans"]
  it.effect("an option of another kind fails with InvalidOptions naming it", () =>
    Effect.gen(function*() {
      for (const option of kinds) {
        for (const [label, value] of wrong) {
          if (option === "middleware" && Array.isArray(value)) continue // checked element by element below
          // null stands for not given where it always has
          if (value === null && ["middleware", "systemPrompt", "outputToolName", "spans"].includes(option)) continue
          yield* expectFailure(
            `${option}: ${label}`,
            () => Agent.make({ toolkit: Calculator, [option]: value } as any),
            "InvalidOptions",
            `option "${option}"`
          )
        }
      }
    }).pipe(Effect.provide(env)))

  it.effect("a middleware that is not one fails with InvalidOptions naming its place", () =>
    Effect.gen(function*() {
      for (const [label, value] of wrong) {
        yield* expectFailure(
          label,
          () => Agent.make({ middleware: [value] } as any),
          "InvalidOptions",
          `option "middleware[0]"`
        )
      }
    }).pipe(Effect.provide(env)))

  it.effect("a count or a timeout of another kind fails with AgentConfigError saying what it got", () =>
    Effect.gen(function*() {
      const counts = [
        "maxSteps",
        "maxToolCallRepairs",
        "toolConcurrency",
        "maxInputChars",
        "maxInputMessages",
        "maxInputParts",
        "toolTimeout"
      ]
      for (const option of counts) {
        for (const [label, value] of wrong) {
          // null stands for the default, as it always has; a bigint is a duration in nanoseconds
          if (value === null || typeof value === "number" || (option === "toolTimeout" && label === "a bigint")) {
            continue
          }
          yield* expectFailure(
            `${option}: ${label}`,
            () => Agent.make({ [option]: value } as any),
            "AgentConfigError",
            option
          )
        }
      }
    }).pipe(Effect.provide(env)))

  it.effect("no options at all stand for {} (an agent is made)", () =>
    Effect.gen(function*() {
      const made = yield* failureOf("undefined", () => Agent.make(undefined as any))
      assert.isUndefined(made)
    }).pipe(Effect.provide(env)))

  it.effect("a secret given as a count is not shown", () =>
    Effect.gen(function*() {
      const error = yield* failureOf("maxSteps", () => Agent.make({ maxSteps: "sk-secret-1234567890" } as any))
      assert.notInclude(error!.message, "sk-secret")
      assert.include(error!.message, "got a string")
    }).pipe(Effect.provide(env)))
})

describe("checkpointers given values of the wrong type", () => {
  const directory = path.join(os.tmpdir(), `stepwise-badinput-${process.pid}`)
  const checkpoint = { version: 1, threadId: "t", messages: [], slices: {} } as Checkpointer.Checkpoint
  const stores: ReadonlyArray<readonly [string, Effect.Effect<Checkpointer.Service, unknown, any>]> = [
    ["memory", Checkpointer.makeMemory],
    ["key-value", Checkpointer.makeKeyValueStore()],
    ["file system", Checkpointer.makeFileSystem(directory)]
  ]
  it.effect("a thread id that is not a string fails load, save, append and delete with CheckpointError", () =>
    Effect.gen(function*() {
      for (const [store, make] of stores) {
        const checkpointer = yield* make
        for (const [label, value] of [...wrong, ["undefined", undefined] as const]) {
          const id = value as string
          const calls = [
            ["load", () => checkpointer.load(id)],
            ["save", () => checkpointer.save(id, checkpoint)],
            ["append", () => checkpointer.append!(id, Checkpointer.deferred(checkpoint))],
            ["delete", () => checkpointer.delete(id)]
          ] as const
          for (const [method, call] of calls) {
            yield* expectFailure(
              `${store}.${method}(${label})`,
              call,
              "CheckpointError",
              "the thread id must be a string"
            )
          }
        }
      }
    }).pipe(Effect.provide(env)))

  it.effect("a checkpoint to save that is not one fails with CheckpointError", () =>
    Effect.gen(function*() {
      for (const [store, make] of stores) {
        const checkpointer = yield* make
        for (const [label, value] of [...wrong, ["undefined", undefined] as const]) {
          yield* expectFailure(
            `${store}.save(t, ${label})`,
            () => checkpointer.save("t", value as Checkpointer.Checkpoint),
            "CheckpointError",
            "the checkpoint must be an object with a messages array"
          )
        }
      }
    }).pipe(Effect.provide(env)))

  it.effect("store options of another kind: CheckpointError at construction or at each use", () =>
    Effect.gen(function*() {
      for (const [label, value] of wrong) {
        if (typeof value === "number" || value === null) continue // null stands for the default
        for (const options of [{ cachedThreads: value }, { prefix: value }]) {
          const store = yield* Checkpointer.makeKeyValueStore(options as any)
          yield* expectFailure(`key-value ${label}`, () => store.load("t"), "CheckpointError", "must be")
          yield* expectFailure(`key-value ${label}`, () => store.save("t", checkpoint), "CheckpointError", "must be")
        }
        yield* expectFailure(
          `file system ${label}`,
          () => Checkpointer.makeFileSystem(directory, { cachedThreads: value } as any),
          "CheckpointError",
          "cachedThreads must be a number"
        )
      }
    }).pipe(Effect.provide(env)))

  it.effect("toJson and fromJson given a thread id that is not a string fail with CheckpointError", () =>
    Effect.gen(function*() {
      for (const [label, value] of wrong) {
        yield* expectFailure(
          `fromJson(${label})`,
          () => Checkpointer.fromJson(value as string, "{}"),
          "CheckpointError"
        )
        yield* expectFailure(
          `toJson(${label})`,
          () => Checkpointer.toJson(value as string, checkpoint),
          "CheckpointError"
        )
      }
    }))

  it.effect("Checkpointer.make given no implementation fails each use with CheckpointError", () =>
    Effect.gen(function*() {
      for (const given of [undefined, null, 42]) {
        const checkpointer = Checkpointer.make(given as any)
        yield* expectFailure("load", () => checkpointer.load("t"), "CheckpointError", "no load")
        yield* expectFailure("save", () => checkpointer.save(7 as any, checkpoint), "CheckpointError")
        yield* expectFailure("delete", () => checkpointer.delete("t"), "CheckpointError", "no delete")
      }
    }))
})

describe("token counters and model profiles given values of the wrong type", () => {
  it.effect("fail with InvalidOptions naming the option", () =>
    Effect.gen(function*() {
      for (const [label, value] of wrong) {
        if (value === null || typeof value === "number") continue
        yield* expectFailure(
          label,
          () => TokenCounter.makeApproximate({ charsPerToken: value } as any),
          "InvalidOptions"
        )
        yield* expectFailure(
          label,
          () => TokenCounter.makeApproximate({ tokensPerMessage: value } as any),
          "InvalidOptions"
        )
        yield* expectFailure(label, () => TokenCounter.makeTiktoken({ encoding: value } as any), "InvalidOptions")
        yield* expectFailure(label, () => ModelProfile.make({ m: value } as any), "InvalidOptions", `"m"`)
        yield* expectFailure(
          label,
          () => ModelProfile.make({ m: { contextWindow: value, maxOutputTokens: 1 } } as any),
          "InvalidOptions",
          "contextWindow"
        )
        yield* expectFailure(
          label,
          () => ModelProfile.make({ m: { contextWindow: 9, maxOutputTokens: 1, maxInputTokens: value } } as any),
          "InvalidOptions",
          "maxInputTokens"
        )
      }
      for (const table of [undefined, null]) {
        yield* expectFailure(String(table), () => ModelProfile.make(table as any), "InvalidOptions", "table")
      }
      yield* expectFailure("no options", () => TokenCounter.makeTiktoken(undefined as any), "InvalidOptions")
    }))
})

describe("RunRecord.checkVersion given a value that is not a record", () => {
  it("is a RunRecordError, not a TypeError", () => {
    for (const [label, value] of [...wrong, ["undefined", undefined] as const, ["{}", {}] as const]) {
      const checked = RunRecord.checkVersion(value as RunRecord.RunRecord)
      assert.isTrue(Either.isLeft(checked), label)
    }
    const bigint = RunRecord.checkVersion({ header: { version: 10n } } as any)
    assert.isTrue(Either.isLeft(bigint) && bigint.left.reason === "UnsupportedVersion")
  })
})

describe("agent.fork given values of the wrong type", () => {
  it.effect("a source, options or a step of no kind: InvalidInput or ForkError, never a defect", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({})
      yield* agent.run("hi", { threadId: "t" })
      for (const [label, value] of wrong) {
        if (typeof value !== "function" && (typeof value !== "object" || value === null)) {
          yield* expectFailure(`source ${label}`, () => agent.fork(value as string, { to: "u", at: 0 }), "InvalidInput")
        } else {
          yield* expectFailure(
            `record ${label}`,
            () => agent.fork(value as RunRecord.RunRecord, { to: "u", at: 0 }),
            "ForkError"
          )
        }
        yield* expectFailure(`options ${label}`, () => agent.fork("t", value as any), "InvalidInput")
        if (typeof value !== "number") {
          yield* expectFailure(`at ${label}`, () => agent.fork("t", { to: "u", at: value as number }), "ForkError")
        }
      }
    }).pipe(Effect.provide(Layer.merge(env, ScriptedModel.layer([ScriptedModel.text("ok")])))))
})

describe("a call's options with a key the call does not know", () => {
  it.effect("run, stream, send, replay, replayStream and fork fail naming the key, and nothing runs or is stored", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({})
      const recorded = yield* RunRecord.record(agent, "hi", { threadId: "r" })
      const calls: ReadonlyArray<readonly [string, () => Effect.Effect<unknown, unknown, any>, string, string]> = [
        ["run", () => agent.run("hi", { threadId: "t", threadid: "u" } as any), "InvalidOptions", "run.threadid"],
        [
          "stream",
          () => Stream.runDrain(agent.stream("hi", { thread: "t" } as any)),
          "InvalidOptions",
          "stream.thread"
        ],
        // a typo of `mode` would steer what was meant to queue
        ["send", () => agent.send("t", "hi", { mod: "queue" } as any), "InvalidOptions", "send.mod"],
        ["send given a mode alone", () => agent.send("t", "hi", "queue" as any), "InvalidOptions", "send"],
        ["replay", () => agent.replay(recorded.record, { decisions: 1 } as any), "InvalidOptions", "replay.decisions"],
        [
          "replayStream",
          () => Stream.runDrain(agent.replayStream(recorded.record, { desicion: 1 } as any)),
          "InvalidOptions",
          "replayStream.desicion"
        ],
        // a typo of `edit` would fork without the edit
        [
          "fork",
          () => agent.fork("r", { to: "f", at: 0, edits: { _tag: "Message", message: "x" } } as any),
          "InvalidInput",
          "\"edits\""
        ]
      ]
      for (const [label, call, tag, says] of calls) yield* expectFailure(label, call, tag, says)
      for (const threadId of ["t", "u", "f"]) assert.isTrue(Option.isNone(yield* agent.thread(threadId)), threadId)
    }).pipe(Effect.provide(Layer.merge(env, ScriptedModel.layer([ScriptedModel.text("ok")])))))
})

describe("constructors given an option key they do not know", () => {
  it.effect("Middleware.make: a typo of a hook, or a hook that is no function, fails Agent.make naming it", () =>
    Effect.gen(function*() {
      const typo = Middleware.make({ name: "m", wrapModelcall: () => Effect.die("never") } as any)
      yield* expectFailure("typo", () => Agent.make({ middleware: [typo] }), "InvalidOptions", "\"wrapModelcall\"")
      for (const [label, value] of wrong) {
        yield* expectFailure(
          `options ${label}`,
          () => Agent.make({ middleware: [Middleware.make(value as any)] }),
          "InvalidOptions"
        )
      }
      yield* expectFailure(
        "no options",
        () => Agent.make({ middleware: [Middleware.make(undefined as any)] }),
        "InvalidOptions"
      )
      const notHook = Middleware.make({ name: "m", beforeModel: "log" } as any)
      yield* expectFailure(
        "not a function",
        () => Agent.make({ middleware: [notHook] }),
        "InvalidOptions",
        "beforeModel"
      )
    }).pipe(Effect.provide(env)))

  it.effect("the log checkpointers: every use fails with CheckpointError naming the key", () =>
    Effect.gen(function*() {
      const kv = yield* Checkpointer.makeKeyValueStore({ cachedThread: 8 } as any)
      yield* expectFailure("KeyValueStore", () => kv.load("t"), "CheckpointError", "\"cachedThread\"")
      const directory = path.join(os.tmpdir(), `stepwise-badinput-${process.pid}`)
      yield* expectFailure(
        "FileSystem",
        () => Checkpointer.makeFileSystem(directory, { staleLock: "1 second" } as any),
        "CheckpointError",
        "\"staleLock\""
      )
    }).pipe(Effect.provide(env)))
})

describe("names a checkpoint cannot hold", () => {
  it.effect("a middleware with state named __proto__, or a state key __proto__, fails Agent.make; constructor is kept", () =>
    Effect.gen(function*() {
      // (a key of no literal type: the check of the state's keys is the run-time one)
      const counter = (name: string, key: string): Middleware.Any =>
        Middleware.make({
          name,
          state: { schema: Schema.Struct({ [key]: Schema.Number }), initial: { [key]: 0 } },
          beforeModel: () => Effect.succeed(undefined)
        })
      yield* expectFailure(
        "name",
        () => Agent.make({ middleware: [counter("__proto__", "count")] }),
        "AgentConfigError",
        "__proto__"
      )
      yield* expectFailure(
        "key",
        () => Agent.make({ middleware: [counter("m", "__proto__")] }),
        "AgentConfigError",
        "__proto__"
      )
      // a name that is only a property of Object.prototype goes through a stored checkpoint and back
      const kv = yield* Checkpointer.makeKeyValueStore({ cachedThreads: 1 })
      const agent = yield* Agent.make({ middleware: [counter("constructor", "toString")] }).pipe(
        Effect.provideService(Checkpointer.Checkpointer, kv)
      )
      yield* agent.run("a", { threadId: "t" })
      yield* agent.run("b", { threadId: "u" })
      const again = yield* agent.run("c", { threadId: "t" })
      assert.strictEqual((again.state as unknown as Record<string, unknown>)["toString"], 0)
    }).pipe(
      Effect.provide(Layer.merge(env, ScriptedModel.layer(Array.from({ length: 5 }, () => ScriptedModel.text("ok")))))
    ))
})
