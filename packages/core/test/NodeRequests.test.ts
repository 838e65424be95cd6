/**
 * What a node hook sees when the hooks of a node share their request
 * (`internal/nodes.ts`: a hook gets the request of the hook before when it
 * would get the same fields): each hook still sees its own state slice, the
 * decision only when it is the hook that waited, and the messages and state
 * a hook before it returned.
 */
import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Option, Schema } from "effect"

interface Seen {
  readonly middleware: string
  readonly state: unknown
  readonly resumed: boolean
  readonly messages: number
}

/** A middleware without state whose `beforeModel` hook records what it sees. */
const spy = (name: string, seen: Array<Seen>) =>
  Middleware.make({
    name,
    beforeModel: ({ messages, resume, state }) =>
      Effect.sync(() =>
        void seen.push({ middleware: name, state, resumed: Option.isSome(resume), messages: messages.length })
      )
  })

describe("node hooks sharing a request", () => {
  it.effect("each hook sees its own slice, its own decision, and what the hooks before it returned", () =>
    Effect.gen(function*() {
      const seen: Array<Seen> = []
      // waits for a decision before the first model call
      const ask = Middleware.make({
        name: "ask",
        wait: { request: Schema.String, decision: Schema.String },
        beforeModel: ({ resume, state }) =>
          Effect.sync(() => {
            seen.push({ middleware: "ask", state, resumed: Option.isSome(resume), messages: 0 })
            return Option.isNone(resume) ? { interrupt: "approve?" } : undefined
          })
      })
      const counter = Middleware.make({
        name: "counter",
        state: { schema: Schema.Struct({ calls: Schema.Number }), initial: { calls: 0 } },
        beforeModel: ({ messages, state }) =>
          Effect.sync(() => {
            seen.push({ middleware: "counter", state, resumed: false, messages: messages.length })
            // one more message for the hooks after it
            return {
              state: { calls: state.calls + 1 },
              messages: [...messages, Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "x" })] })]
            }
          })
      })
      const agent = yield* Agent.make({ middleware: [ask, spy("before", seen), counter, spy("after", seen)] })
      const first = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(first._tag, "Interrupted")
      seen.length = 0
      const resumed = yield* agent.resume("t", "yes")
      assert.strictEqual(resumed._tag, "Completed")
      assert.deepStrictEqual(seen, [
        { middleware: "ask", state: {}, resumed: true, messages: 0 },
        { middleware: "before", state: {}, resumed: false, messages: 1 },
        { middleware: "counter", state: { calls: 0 }, resumed: false, messages: 1 },
        { middleware: "after", state: {}, resumed: false, messages: 2 }
      ])
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("hello")]))))

  it.effect("the empty slice of a middleware without state cannot be written into", () =>
    Effect.gen(function*() {
      const slices: Array<unknown> = []
      const record = (name: string) =>
        Middleware.make({ name, beforeModel: ({ state }) => Effect.sync(() => void slices.push(state)) })
      const agent = yield* Agent.make({ middleware: [record("a"), record("b")] })
      yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(slices.length, 2)
      for (const slice of slices) {
        assert.deepStrictEqual(slice, {})
        assert.isTrue(Object.isFrozen(slice))
      }
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("hello")]))))
})
