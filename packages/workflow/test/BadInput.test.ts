/**
 * Values of the wrong type, from JavaScript, at the durable API: a run id
 * that is not a string is a `RunNotFound` saying what it got (it died with a
 * `ParseError` thrown by `RunNotFound`'s own constructor), a start request
 * of the wrong kind an `InvalidInput`, a principal an `Unauthorized`, the
 * workflow's and the engines' options an `InvalidOptions` naming the option
 * — never a defect, and the Postgres URL (it holds the password) never shown.
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent, type Checkpointer } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RecordStore from "@stepwise-agent/workflow/RecordStore"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Cause, Effect, Exit, Layer, Option, Stream } from "effect"
import * as Databases from "./support/databases.js"

const wrong: ReadonlyArray<readonly [string, unknown]> = [
  ["a number", 42],
  ["null", null],
  ["undefined", undefined],
  ["an object", { a: 1 }],
  ["an array", [1]],
  ["a symbol", Symbol("s")],
  ["a bigint", 10n],
  ["a function", () => 1],
  ["an object without a prototype", Object.create(null)]
]

const Runs = AgentWorkflow.make({ name: "bad-input", version: 1 })
const env = Runs.layer.pipe(
  Layer.provideMerge(Agent.layer({})),
  Layer.provideMerge(
    Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory, RecordStore.layerMemory, ScriptedModel.layer([]))
  ),
  Layer.provideMerge(Authorizer.layer(() => true))
)

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
    if (Exit.isSuccess(exit)) return assert.fail(`${label}: succeeded`)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isNone(failure)) return assert.fail(`${label}: died: ${Cause.pretty(exit.cause).slice(0, 300)}`)
    return failure.value as { readonly _tag: string; readonly message: string }
  })

const R = Runs as any

describe("AgentWorkflow given values of the wrong type", () => {
  it.effect("a run id that is not a string: RunNotFound saying what it got, from every operation", () =>
    Effect.gen(function*() {
      const operations: ReadonlyArray<readonly [string, (id: unknown) => Effect.Effect<unknown, unknown, any>]> = [
        ["status", (id) => R.status(id)],
        ["resume", (id) => R.resume(id, {}, { principal: "p" })],
        ["discardDecision", (id) => R.discardDecision(id)],
        ["cancel", (id) => R.cancel(id)],
        ["prune", (id) => R.prune(id)],
        ["record", (id) => R.record(id)],
        ["await", (id) => R.await(id)],
        ["watch", (id) => Stream.runDrain(R.watch(id))],
        ["fork", (id) => R.fork(id, { at: 0 })]
      ]
      for (const [operation, call] of operations) {
        for (const [label, value] of wrong) {
          // an object (or a function) is taken for a record: below
          if (operation === "fork" && (typeof value === "function" || (typeof value === "object" && value !== null))) {
            continue
          }
          const error = yield* failureOf(`${operation}(${label})`, () => call(value))
          assert.strictEqual(error._tag, "RunNotFound", `${operation}(${label}): ${error.message}`)
          assert.include(error.message, "a run id is a string, got", `${operation}(${label})`)
        }
      }
    }).pipe(Effect.provide(env)))

  it.effect("a fork of a value that is not a record: RunRecordError", () =>
    Effect.gen(function*() {
      for (const value of [{}, [], Object.create(null)]) {
        const error = yield* failureOf("fork", () => R.fork(value, { at: 0 }))
        assert.strictEqual(error._tag, "RunRecordError", error.message)
      }
    }).pipe(Effect.provide(env)))

  it.effect("a start request of the wrong kind: InvalidInput naming what was wrong", () =>
    Effect.gen(function*() {
      for (const [label, value] of wrong) {
        const request = yield* failureOf(`start(${label})`, () => R.start(value))
        assert.strictEqual(request._tag, "InvalidInput", request.message)
        const threadId = yield* failureOf(`threadId ${label}`, () => R.start({ threadId: value, input: "hi" }))
        assert.strictEqual(threadId._tag, "InvalidInput", threadId.message)
        assert.include(threadId.message, "the thread id must be a non-empty string")
        const input = yield* failureOf(`input ${label}`, () => R.start({ threadId: "t", input: value }))
        assert.strictEqual(input._tag, "InvalidInput", input.message)
        if (value !== undefined) {
          const runId = yield* failureOf(`runId ${label}`, () => R.start({ threadId: "t", input: "hi", runId: value }))
          assert.strictEqual(runId._tag, "InvalidInput", runId.message)
          assert.include(runId.message, "the run id must be a non-empty string")
        }
      }
    }).pipe(Effect.provide(env)))

  it.effect("a principal that is not a string, or no options: Unauthorized", () =>
    Effect.gen(function*() {
      for (const [label, value] of wrong) {
        const principal = yield* failureOf(`principal ${label}`, () => R.resume("r", {}, { principal: value }))
        assert.strictEqual(principal._tag, "Unauthorized", principal.message)
        const options = yield* failureOf(`options ${label}`, () => R.resume("r", {}, value))
        assert.strictEqual(options._tag, "Unauthorized", options.message)
      }
    }).pipe(Effect.provide(env)))

  it.effect("a send to a thread id of no kind: InvalidSend showing its kind", () =>
    Effect.gen(function*() {
      for (const [label, value] of wrong) {
        const error = yield* failureOf(`send(${label})`, () => R.send(value, "hi"))
        assert.strictEqual(error._tag, "InvalidSend", error.message)
      }
    }).pipe(Effect.provide(env)))

  it("make given options of the wrong type throws InvalidOptions naming the option", () => {
    const thrown = (options: unknown) => {
      try {
        AgentWorkflow.make(options as AgentWorkflow.Options)
      } catch (error) {
        return error as { readonly _tag: string; readonly message: string }
      }
      return assert.fail("made")
    }
    for (const [label, value] of wrong) {
      if (typeof value === "object" && value !== null && !Array.isArray(value)) continue
      assert.strictEqual(thrown(value)._tag, "InvalidOptions", label)
      const name = thrown({ name: value, version: 1 })
      assert.strictEqual(name._tag, "InvalidOptions", label)
      assert.include(name.message, `AgentWorkflow option "name"`)
      if (typeof value !== "number") {
        const version = thrown({ name: "n", version: value })
        assert.include(version.message, `AgentWorkflow option "version"`)
      }
    }
  })
})

describe("AgentEngine layers given options of the wrong type", () => {
  it.effect("InvalidOptions naming the option; the Postgres URL never shown", () =>
    Effect.gen(function*() {
      for (const [label, value] of wrong) {
        if (value === undefined || value === null) continue
        const filename = yield* failureOf(`filename ${label}`, () =>
          Layer.build(AgentEngine.layerSqlite({ filename: value } as any)))
        assert.strictEqual(filename._tag, "InvalidOptions", filename.message)
        if (typeof value !== "number" && typeof value !== "bigint") {
          const poll = yield* failureOf(
            `pollInterval ${label}`,
            () =>
              Layer.build(AgentEngine.layerSqlite({ filename: ":memory:", pollInterval: value } as any))
          )
          assert.strictEqual(poll._tag, "InvalidOptions", poll.message)
        }
        const postgres = yield* failureOf(
          `postgres ${label}`,
          () => Layer.build(AgentEngine.layerPostgres(value as any))
        )
        assert.strictEqual(postgres._tag, "InvalidOptions", postgres.message)
      }
      const url = "postgres://user:hunter2-secret@db.example/runs"
      const plain = yield* failureOf("plain url", () => Layer.build(AgentEngine.layerPostgres({ url } as any)))
      assert.strictEqual(plain._tag, "InvalidOptions")
      assert.include(plain.message, `option "url"`)
      assert.notInclude(plain.message, "hunter2")
    }))
})

describe("SqlCheckpointer given values of the wrong type", () => {
  it.effect("a thread id that is not a string: CheckpointError; a table name of another kind: InvalidOptions", () =>
    Effect.gen(function*() {
      const checkpointer = yield* SqlCheckpointer.make()
      const checkpoint: Checkpointer.Checkpoint = { version: 1, threadId: "t", messages: [], slices: {} }
      for (const [label, value] of wrong) {
        for (
          const [method, call] of [
            ["load", () => checkpointer.load(value as string)],
            ["save", () => checkpointer.save(value as string, checkpoint)],
            ["delete", () => checkpointer.delete(value as string)]
          ] as const
        ) {
          const error = yield* failureOf(`${method}(${label})`, call)
          assert.strictEqual(error._tag, "CheckpointError", error.message)
          assert.include(error.message, "the thread id must be a string", `${method}(${label})`)
        }
        if (value !== null && value !== undefined) {
          const table = yield* failureOf(`table ${label}`, () => SqlCheckpointer.make({ table: value } as any))
          assert.strictEqual(table._tag, "InvalidOptions", table.message)
        }
      }
    }).pipe(Effect.provide(Databases.sqlite)))
})
