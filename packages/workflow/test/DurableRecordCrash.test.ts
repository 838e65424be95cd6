/**
 * The record of a durable run across a crash (SQLite, SIGKILL): a run whose
 * process died inside a tool call and that a second process finished has the
 * record of a run that was never interrupted, the decisions and hooks
 * completed inside its calls included (`processes/recordedAgent.ts`).
 */
import { assert, describe, it } from "@effect/vitest"
import { RunRecord } from "@stepwise-agent/core"
import { Effect } from "effect"
import * as path from "node:path"
import { type Child, spawnChild } from "./support/child.js"
import { tempDirectory } from "./support/databases.js"

const script = path.join(import.meta.dirname, "processes", "recordedAgent.ts")

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

const spawn = (env: Record<string, string>) =>
  Effect.acquireRelease(Effect.sync(() => spawnChild(script, env)), (child) => promise(() => child.kill()))

/** The record the process prints once its run has completed, without its timing. */
const recordOf = (child: Child) =>
  Effect.gen(function*() {
    const line = yield* promise(() => child.waitForLine((line) => line.startsWith("record "), 90_000))
    const record = yield* RunRecord.fromJsonl(JSON.parse(line.slice("record ".length)) as string)
    return {
      header: { ...record.header, startedAt: 0 },
      entries: record.entries.map((entry) =>
        entry._tag === "Step"
          ? {
            ...entry,
            startedAt: 0,
            durationMillis: 0,
            // a thread's load holds its incarnation, a random nonce of each new thread
            result: entry.kind === "Load" ? "(the thread)" : entry.result
          }
          : entry._tag === "End" || entry._tag === "Hook"
          ? { ...entry, durationMillis: 0 }
          : entry
      )
    }
  })

/** The record of run-1 in a fresh database, after a first process that died at `crashAt` of `step`, if any. */
const recordAfter = (crash?: { readonly at: string; readonly step: string }) =>
  Effect.gen(function*() {
    const DB = path.join(yield* tempDirectory("stepwise-record-crash-"), "runs.db")
    if (crash === undefined) return yield* recordOf(yield* spawn({ DB, START: "run-1" }))
    const first = yield* spawn({ DB, START: "run-1", CRASH_AT: crash.at, CRASH_STEP: crash.step })
    const exit = yield* promise(() => first.exited)
    assert.strictEqual(exit.signal, "SIGKILL")
    assert.include(first.lines, `crash ${crash.at}`)
    return yield* recordOf(yield* spawn({ DB, RUN_ID: "run-1" }))
  })

const timeout = { timeout: 240_000 }

describe("the record of a durable run across a crash (SQLite, SIGKILL)", () => {
  it.scopedLive(
    "a run killed inside a tool call, before or after its result was journaled, has the record of an uninterrupted run: decisions and hooks of every call included",
    () =>
      Effect.gen(function*() {
        const uninterrupted = yield* recordAfter()
        // the hooks that completed inside the tool calls are in the record, before each call's step
        const hooks = uninterrupted.entries.flatMap((entry) =>
          entry._tag === "Hook" ? [`${entry.middleware}.${entry.hook} in ${entry.inStep}`] : []
        )
        for (const call of ["call_1", "call_2", "call_3"]) {
          assert.includeMembers(hooks, [`audit.wrapToolCall in tool/${call}`, `timer.wrapToolCall in tool/${call}`])
        }
        for (
          const crash of [
            { at: "afterResult", step: "tool/call_1" },
            { at: "afterResult", step: "tool/call_3" },
            { at: "afterStarted", step: "tool/call_2" }
          ]
        ) {
          assert.deepStrictEqual(yield* recordAfter(crash), uninterrupted, JSON.stringify(crash))
        }
      }),
    timeout
  )
})
