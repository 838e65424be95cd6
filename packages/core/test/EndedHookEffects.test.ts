/**
 * A node hook whose effect has already ended (`Effect.void`, `Effect.succeed`,
 * `Effect.fail`, `Effect.die`) is read at once, without a fiber operation of
 * its own: the run must end as it does for the same outcome built as an
 * effect that still has to run (`Effect.suspend`), watched or not, and a
 * watched run reports `HookCompleted` for it exactly when it succeeded.
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Data, Effect, Exit, Layer, Stream } from "effect"
import { Calculator, CalculatorLive } from "./utils.js"

class HookFailed extends Data.TaggedError("HookFailed")<{ readonly node: string }> {}

const nodes = ["beforeAgent", "beforeModel", "afterModel", "afterAgent"] as const
type Node = (typeof nodes)[number]
const outcomes = ["void", "jump", "fail", "die"] as const
type Outcome = (typeof outcomes)[number]

/** The hook's effect for `outcome`, already ended or (`suspended`) still to run. */
const hookEffect = (node: Node, outcome: Outcome, suspended: boolean): Effect.Effect<any, HookFailed> => {
  const ended = outcome === "void"
    ? Effect.void
    : outcome === "jump"
    ? Effect.succeed({ jumpTo: "end" as const })
    : outcome === "fail"
    ? Effect.fail(new HookFailed({ node }))
    : Effect.die(`defect in ${node}`)
  return suspended ? Effect.suspend(() => ended) : ended
}

/** A run (`stream`: watched) with one middleware whose `node` hook ends with `outcome`: its exit, and its hook events. */
const runWith = (node: Node, outcome: Outcome, suspended: boolean, stream: boolean) =>
  Effect.gen(function*() {
    const hook = () => hookEffect(node, outcome, suspended)
    const agent = yield* Agent.make({
      toolkit: Calculator,
      middleware: [
        Middleware.make({ name: "m", canJumpTo: ["end"], [node]: hook } as Parameters<typeof Middleware.make>[0])
      ]
    })
    if (!stream) {
      const exit = yield* Effect.exit(agent.run("What is 1 + 2?", { threadId: "t" }))
      return { exit: Exit.map(exit, (result) => result._tag), completed: [] as Array<string> }
    }
    const completed: Array<string> = []
    const exit = yield* Effect.exit(
      Stream.runCollect(agent.stream("What is 1 + 2?", { threadId: "t" })).pipe(
        Effect.map((events) => {
          let tag = "none"
          for (const event of Chunk.toReadonlyArray(events)) {
            if (event._tag === "HookCompleted") completed.push(`${event.middleware}.${event.hook}`)
            if (event._tag === "RunEnded") tag = event.result._tag
          }
          return tag
        })
      )
    )
    return { exit, completed }
  }).pipe(
    Effect.provide(Layer.merge(
      ScriptedModel.layer([
        ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }]),
        ScriptedModel.text("3")
      ]),
      CalculatorLive
    ))
  )

/** What a run's exit says, comparably: its result's tag, the typed error's tag, or that it died. */
const outcomeOf = (exit: Exit.Exit<string, unknown>): string =>
  Exit.match(exit, {
    onSuccess: (tag) => `ended ${tag}`,
    onFailure: (cause) => {
      const failure = cause._tag === "Fail" ? (cause.error as { _tag?: string })._tag : undefined
      return failure !== undefined ? `failed ${failure}` : cause._tag === "Die" ? "died" : `cause ${cause._tag}`
    }
  })

describe("a node hook whose effect has already ended", () => {
  for (const node of nodes) {
    for (const outcome of outcomes) {
      it.effect(`${node} ending with ${outcome}: the run ends as with the same effect still to run`, () =>
        Effect.gen(function*() {
          for (const stream of [false, true]) {
            const ended = yield* runWith(node, outcome, false, stream)
            const suspended = yield* runWith(node, outcome, true, stream)
            assert.strictEqual(outcomeOf(ended.exit), outcomeOf(suspended.exit), `stream: ${stream}`)
            assert.deepStrictEqual(ended.completed, suspended.completed, `stream: ${stream}`)
            if (stream) {
              // reported completed exactly when the hook succeeded
              assert.strictEqual(ended.completed.includes(`m.${node}`), outcome === "void" || outcome === "jump")
            }
          }
        }))
    }
  }
})
