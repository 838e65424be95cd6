import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, FastCheck, Option, Schema, Stream } from "effect"
import * as Checkpoint from "../src/internal/checkpoint.js"
import * as RunState from "../src/internal/runState.js"

const key = FastCheck.constantFrom("a", "b", "c", "d", "e")
const record = FastCheck.dictionary(key, FastCheck.integer())

describe("RunState", () => {
  it.prop(
    "a hook's state update keeps only the keys its slice declares, and changes nothing it was given",
    { declared: FastCheck.uniqueArray(key), before: record, update: record, other: record },
    ({ before, declared, other, update }) => {
      const state = RunState.make([], { m: before, other }, undefined, "absent")
      const frozen = JSON.stringify(state)
      const { keys, state: after } = RunState.applyHookResult(state, "m", new Set(declared), { state: update })
      assert.strictEqual(JSON.stringify(state), frozen)
      const kept = Object.keys(update).filter((k) => declared.includes(k))
      assert.deepStrictEqual([...keys].sort(), kept.sort())
      const expected: Record<string, number> = { ...before }
      for (const k of kept) expected[k] = update[k]!
      assert.deepStrictEqual(after.slices.m, kept.length === 0 ? before : expected)
      assert.strictEqual(after.slices.other, other)
    }
  )

  it.prop(
    "what the next save expects is state: the thread loaded until the first save, then the run's incarnation",
    {
      stored: FastCheck.boolean(),
      incarnation: FastCheck.option(FastCheck.hexaString({ minLength: 1 }), { nil: undefined }),
      saves: FastCheck.integer({ min: 1, max: 5 })
    },
    ({ incarnation, saves, stored }) => {
      const loaded = { messages: [], slices: {}, checkpoint: Option.none(), incarnation, stored }
      const first = RunState.make([], {}, undefined, Checkpoint.expectedOf(loaded))
      assert.deepStrictEqual(first.expected, stored ? { incarnation } : "absent")
      let state = first
      for (let i = 0; i < saves; i++) state = RunState.saved(state, incarnation)
      assert.deepStrictEqual(state.expected, { incarnation })
      // the state is a value: the one the run started from still expects what it did
      assert.deepStrictEqual(first.expected, stored ? { incarnation } : "absent")
      // once it expects the run's own incarnation, a save gives the same state back (nothing to allocate)
      assert.strictEqual(RunState.saved(state, incarnation), state)
    }
  )

  it.effect("an undeclared key a hook returns never reaches the state, the checkpoint or the events", () =>
    Effect.gen(function*() {
      // a hook typed loosely (plain JavaScript, `any`) can return keys the slice does not declare
      const loose = (({ state }: { readonly state: { readonly count: number } }) =>
        Effect.succeed({ state: { count: state.count + 1, stray: "x" } })) as unknown as (
          context: { readonly state: { readonly count: number } }
        ) => Effect.Effect<{ readonly state: { readonly count: number } }>
      const counter = Middleware.make({
        name: "counter",
        state: { schema: Schema.Struct({ count: Schema.Number }), initial: { count: 0 } },
        beforeModel: loose
      })
      const agent = yield* Agent.make({ middleware: [counter] })
      const events = yield* agent.stream("hi", { threadId: "t" }).pipe(Stream.runCollect)
      const updates = Chunk.toArray(events).flatMap((event) =>
        event._tag === "StateUpdated" ? [event.keys] : []
      )
      assert.deepStrictEqual(updates, [["count"]])
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      assert.strictEqual((thread.state as any).count, 1)
      assert.isFalse("stray" in thread.state)
      const result = yield* agent.run("again", { threadId: "t" })
      assert.strictEqual((result.state as any).count, 2)
      assert.isFalse("stray" in result.state)
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("one"), ScriptedModel.text("two")]))))
})
