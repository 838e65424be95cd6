/**
 * Options with a key the call does not know (a typo, an option of another
 * library) fail with the call's own typed error naming the key and the keys
 * it knows, at every entry point of the package that takes options, nested
 * ones (`sharding`, `decisionTimeout`, a fork's edit) included. Before, they
 * were ignored: `AgentEngine.layerSqlite({ filename, bogus: 1 })` built.
 */
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RecordStore from "@stepwise-agent/workflow/RecordStore"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Cause, Effect, Exit, FastCheck, Layer, Option, Redacted } from "effect"

const Runs = AgentWorkflow.make({ name: "unknown-options", version: 1, steering: true })
const env = Runs.layer.pipe(
  Layer.provideMerge(Agent.layer({})),
  Layer.provideMerge(
    Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory, RecordStore.layerMemory, ScriptedModel.layer([]))
  ),
  Layer.provideMerge(Authorizer.layer(() => true))
)
const sqlite = Layer.orDie(SqliteClient.layer({ filename: ":memory:" }))
const url = Redacted.make("postgres://agent:secret@127.0.0.1:1/agent")

/** The failure `effect` ends with; a success, a defect or a throw fails the test, naming the entry point. */
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

/** A constructor of a value throws its typed error: as a failure. */
const thrown = (make: () => unknown) => Effect.try({ try: make, catch: (error) => error })

const build = (layer: Layer.Layer<any, any, never>) => Layer.build(layer)

/** Each entry point given `key` (with an otherwise valid value), the error it must fail with, and its known keys. */
const entryPoints = (key: string): ReadonlyArray<{
  readonly label: string
  readonly run: () => Effect.Effect<unknown, unknown, any>
  readonly tag: string
  readonly names: string
  readonly knows: string
}> => {
  const bogus = { [key]: 1 }
  const W = Runs as any
  return [
    {
      label: "AgentEngine.layerSqlite",
      run: () => build(AgentEngine.layerSqlite({ filename: ":memory:", ...bogus } as any)),
      tag: "InvalidOptions",
      names: key,
      knows: "\"synchronous\""
    },
    {
      label: "AgentEngine.layerSqlite sharding",
      run: () => build(AgentEngine.layerSqlite({ filename: ":memory:", sharding: bogus } as any)),
      tag: "InvalidOptions",
      names: `sharding.${key}`,
      knows: "\"entityMailboxCapacity\""
    },
    {
      label: "AgentEngine.layerPostgres",
      run: () => build(AgentEngine.layerPostgres({ url, ...bogus } as any)),
      tag: "InvalidOptions",
      names: key,
      knows: "\"takeoverAfter\""
    },
    {
      label: "AgentEngine.layerPostgres sharding",
      run: () => build(AgentEngine.layerPostgres({ url, sharding: bogus } as any)),
      tag: "InvalidOptions",
      names: `sharding.${key}`,
      knows: "\"shardsPerGroup\""
    },
    {
      label: "AgentEngine.layerPostgres runnerAddress",
      run: () =>
        build(AgentEngine.layerPostgres({ url, runnerAddress: Option.some({ host: "h", port: 1, ...bogus }) } as any)),
      tag: "InvalidOptions",
      names: `runnerAddress.${key}`,
      knows: "\"port\""
    },
    {
      label: "RunStore.layer",
      run: () => build(RunStore.layer({ prefix: "runs", ...bogus } as any).pipe(Layer.provide(sqlite))),
      tag: "InvalidOptions",
      names: key,
      knows: "\"prefix\""
    },
    {
      label: "RunStore.list (memory)",
      run: () => Effect.flatMap(RunStore.RunStore, (store) => store.list({ threadId: "t", ...bogus } as any)),
      tag: "RunStoreError",
      names: `list.${key}`,
      knows: "\"limit\""
    },
    {
      label: "RunStore.list (SQL)",
      run: () =>
        Effect.flatMap(RunStore.make(), (store) => store.list({ limit: 1, ...bogus } as any)).pipe(
          Effect.provide(sqlite)
        ),
      tag: "RunStoreError",
      names: `list.${key}`,
      knows: "\"threadId\""
    },
    {
      label: "RecordStore.layer",
      run: () => build(RecordStore.layer({ table: "records", ...bogus } as any).pipe(Layer.provide(sqlite))),
      tag: "InvalidOptions",
      names: key,
      knows: "\"table\""
    },
    {
      label: "SqlCheckpointer.layer",
      run: () => build(SqlCheckpointer.layer({ table: "checkpoints", ...bogus } as any).pipe(Layer.provide(sqlite))),
      tag: "InvalidOptions",
      names: key,
      knows: "\"table\""
    },
    {
      label: "AgentWorkflow.make",
      run: () => thrown(() => AgentWorkflow.make({ name: "w", version: 1, ...bogus } as any)),
      tag: "InvalidOptions",
      names: key,
      knows: "\"steering\""
    },
    {
      label: "AgentWorkflow.make decisionTimeout",
      run: () =>
        thrown(() =>
          AgentWorkflow.make({
            name: "w",
            version: 1,
            decisionTimeout: { after: "1 minute", decide: () => ({}), ...bogus }
          } as any)
        ),
      tag: "InvalidOptions",
      names: `decisionTimeout.${key}`,
      knows: "\"decide\""
    },
    {
      label: "start",
      run: () => Runs.start({ threadId: "t", input: "hi", ...bogus } as any),
      tag: "InvalidInput",
      names: `start.${key}`,
      knows: "\"runId\""
    },
    {
      label: "resume",
      run: () => W.resume("run-1", {}, { principal: "staff:a", ...bogus }),
      tag: "Unauthorized",
      names: `resume.${key}`,
      knows: "\"principal\""
    },
    {
      label: "prune",
      run: () => W.prune("run-1", { deleteThread: true, ...bogus }),
      tag: "InvalidOptions",
      names: `prune.${key}`,
      knows: "\"deleteThread\""
    },
    {
      label: "await",
      run: () => W.await("run-1", { untilWaiting: true, ...bogus }),
      tag: "InvalidOptions",
      names: `await.${key}`,
      knows: "\"pollEvery\""
    },
    {
      label: "send",
      run: () => Runs.send("t", "hi", { mode: "queue", ...bogus } as any),
      tag: "InvalidSend",
      names: key,
      knows: "\"idempotencyKey\""
    },
    {
      label: "fork",
      run: () => W.fork("run-1", { to: "t2", at: 0, ...bogus }),
      tag: "InvalidInput",
      names: `fork.${key}`,
      knows: "\"runId\""
    },
    {
      label: "fork edit",
      run: () => W.fork("run-1", { to: "t2", at: 0, edit: { _tag: "Message", message: "hi", ...bogus } }),
      tag: "InvalidInput",
      names: `fork.edit.${key}`,
      knows: "\"message\""
    }
  ]
}

describe("options with a key the call does not know", () => {
  it.effect(
    "fail at every entry point with its typed error, naming the key and the keys it knows",
    () =>
      Effect.gen(function*() {
        // typos, and the names other agent libraries give these options
        for (const key of ["bogus", "fileName", "maxRetries", "callbacks", "runName"]) {
          for (const entry of entryPoints(key)) {
            const error = yield* failureOf(`${entry.label} { ${key} }`, entry.run)
            assert.strictEqual(error._tag, entry.tag, `${entry.label}: ${error.message}`)
            assert.include(error.message, entry.names, entry.label)
            assert.include(error.message, "is unknown; expected", entry.label)
            assert.include(error.message, entry.knows, entry.label)
          }
        }
      }).pipe(Effect.provide(env)),
    60_000
  )

  it.effect("options that are not an object where one belongs fail too", () =>
    Effect.gen(function*() {
      const W = Runs as any
      const cases: ReadonlyArray<readonly [string, () => Effect.Effect<unknown, unknown, any>, string]> = [
        ["layerSqlite", () => build(AgentEngine.layerSqlite(5 as any)), "InvalidOptions"],
        ["layerSqlite sharding", () => build(AgentEngine.layerSqlite({ sharding: "x" } as any)), "InvalidOptions"],
        ["RunStore.layer", () => build(RunStore.layer("runs" as any).pipe(Layer.provide(sqlite))), "InvalidOptions"],
        ["prune", () => W.prune("run-1", true), "InvalidOptions"],
        ["send", () => Runs.send("t", "hi", "queue" as any), "InvalidSend"]
      ]
      for (const [label, run, tag] of cases) {
        const error = yield* failureOf(label, run)
        assert.strictEqual(error._tag, tag, `${label}: ${error.message}`)
        assert.include(error.message, "must be an object", label)
      }
    }).pipe(Effect.provide(env)), 60_000)

  it.effect.prop(
    "a key any of its options does not know is refused, a known one is not taken for unknown",
    { key: FastCheck.string({ minLength: 1, maxLength: 12 }) },
    ({ key }) =>
      Effect.gen(function*() {
        const known = ["filename", "pollInterval", "clientOnly", "synchronous", "sharding"]
        const exit = yield* Effect.exit(
          Effect.scoped(build(AgentEngine.layerSqlite({ filename: ":memory:", pollInterval: "x", [key]: 1 } as any)))
        )
        const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
        assert.isTrue(Option.isSome(failure))
        const error = (failure as Option.Some<{ readonly option: string }>).value
        // an unknown key is named before any value is read; a known one (but a `sharding` that is not an object)
        // leaves the bad pollInterval to be named
        assert.strictEqual(error.option, key === "sharding" ? "sharding" : known.includes(key) ? "pollInterval" : key)
      }),
    { timeout: 60_000, fastCheck: { numRuns: 30 } }
  )
})
