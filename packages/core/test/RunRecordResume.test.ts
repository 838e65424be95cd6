import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Fork, Middleware, RunRecord } from "@stepwise-agent/core"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Either, Layer, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Calculator, CalculatorLive } from "./utils.js"

const script: ReadonlyArray<ScriptedModel.Turn> = [
  ScriptedModel.toolCalls([{ id: "call_1", name: "add", params: { a: 2, b: 3 } }]),
  ScriptedModel.toolCalls([{ id: "call_2", name: "add", params: { a: 5, b: 7 } }]),
  ScriptedModel.text("12")
]

/** A calculator whose `add` counts its calls. */
const counted = () => {
  const calls = { count: 0 }
  return { calls, layer: Calculator.toLayer({ add: ({ a, b }) => Effect.sync(() => (calls.count++, a + b)) }) }
}

/** Waits before model step 1 for `{ go }`; keeps each decision its hook gets. */
const confirming = (seen: Array<unknown>) =>
  Middleware.make({
    name: "confirm",
    wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.Struct({ go: Schema.Boolean }) },
    beforeModel: ({ resume, step }) =>
      Effect.sync(() => {
        if (Option.isSome(resume)) {
          seen.push(resume.value)
          return undefined
        }
        return step === 1 ? { interrupt: { question: "Go on?" } } : undefined
      })
  })

describe("RunRecord.recordResume", () => {
  it.effect("a run interrupted by a wait then resumed: the record holds the decision and the steps after it, and replays with no model or tool call", () =>
    Effect.gen(function*() {
      const { calls, layer } = counted()
      const seen: Array<unknown> = []
      const record = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Calculator,
          systemPrompt: "You add.",
          middleware: [confirming(seen)]
        })
        const first = yield* agent.run("What is 2 + 3 + 7?", { threadId: "t1" })
        assert.strictEqual(first._tag, "Interrupted")
        const { record, result } = yield* RunRecord.recordResume(agent, "t1", { go: true })
        assert.strictEqual(result._tag === "Completed" && result.text, "12")
        return record
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), layer)))
      assert.deepStrictEqual(record.header.resumed, { decision: { go: true } })
      assert.deepStrictEqual(record.header.input, [])
      const steps = record.entries.flatMap((entry) => entry._tag === "Step" ? [entry.name] : [])
      // the waiting thread's load, then the steps after the decision (not the model step 0 before it)
      assert.strictEqual(steps[0], "load")
      assert.includeMembers(steps, ["model/1", "tool/call_2", "model/2"])
      assert.notInclude(steps, "model/0")
      assert.deepInclude(record.entries.at(-1), { _tag: "End", outcome: "Completed", text: "12" })
      // JSONL keeps the decision
      const read = yield* RunRecord.fromJsonl(RunRecord.toJsonl(record))
      assert.deepStrictEqual(read.header.resumed, { decision: { go: true } })

      // replayed on a new agent: the thread is the recorded one, the hook gets the decision again
      calls.count = 0
      const again: Array<unknown> = []
      const replayed = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Calculator,
          systemPrompt: "You add.",
          middleware: [confirming(again)]
        })
        const result = yield* agent.replay(read)
        return { result, requests: (yield* ScriptedModel.requests).length, stored: yield* agent.thread("t1") }
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([]), layer)))
      assert.strictEqual(replayed.result._tag === "Completed" && replayed.result.text, "12")
      assert.deepStrictEqual([replayed.requests, calls.count], [0, 0])
      assert.deepStrictEqual(again, [{ go: true }])
      assert.isTrue(Option.isNone(replayed.stored))
    }))

  it.effect("a replay of the resumed run on an agent with another system prompt diverges at the first model step after the decision", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      const seen: Array<unknown> = []
      const { record } = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Calculator,
          systemPrompt: "You add.",
          middleware: [confirming(seen)]
        })
        yield* agent.run("What is 2 + 3 + 7?", { threadId: "t1" })
        return yield* RunRecord.recordResume(agent, "t1", { go: true })
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), layer)))
      const outcome = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Calculator,
          systemPrompt: "You add carefully.",
          middleware: [confirming([])]
        })
        return yield* Effect.either(agent.replay(record))
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([]), layer)))
      if (Either.isRight(outcome)) return assert.fail("the replay did not diverge")
      assert.instanceOf(outcome.left, RunRecord.ReplayDiverged)
      assert.deepInclude(outcome.left, { step: 1, field: "systemPrompt" })
    }))

  it.effect("a record of a resumed run forks: the steps before `at` are served, the fork goes on live on its thread", () =>
    Effect.gen(function*() {
      const { calls, layer } = counted()
      const { record } = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware: [confirming([])] })
        yield* agent.run("What is 2 + 3 + 7?", { threadId: "t1" })
        return yield* RunRecord.recordResume(agent, "t1", { go: true })
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), layer)))
      calls.count = 0
      const forked = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware: [confirming([])] })
        // the record's model steps are model/1 and model/2: fork before the second, with a message
        const result = yield* agent.fork(record, { to: "f1", at: 1, edit: { _tag: "Message", message: "Stop." } })
        return { result, requests: (yield* ScriptedModel.requests).length, source: yield* agent.thread("t1") }
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("stopped")]), layer)))
      assert.strictEqual(forked.result._tag === "Completed" && forked.result.text, "stopped")
      assert.deepStrictEqual([forked.requests, calls.count], [1, 0])
      assert.isTrue(Option.isNone(forked.source))
    }))
})

/** Waits before model step 1 for a decision of `decision`'s schema; keeps each decision its hook gets. */
const waitingFor = <A, I>(decision: Schema.Schema<A, I>, seen: Array<unknown>) =>
  Middleware.make({
    name: "confirm",
    wait: { request: Schema.Struct({ question: Schema.String }), decision },
    beforeModel: ({ resume, step }) =>
      Effect.sync(() => {
        if (Option.isSome(resume)) {
          seen.push(resume.value)
          return undefined
        }
        return step === 1 ? { interrupt: { question: "Go on?" } } : undefined
      })
  })

class Booking extends Schema.Class<Booking>("Booking")({ when: Schema.Date, seats: Schema.NumberFromString }) {}

/** Decision schemas whose encoded form is not their decoded value as JSON. */
const transforming = {
  Date: Schema.Date,
  NumberFromString: Schema.NumberFromString,
  Class: Booking,
  Option: Schema.Option(Schema.Date),
  union: Schema.Union(
    Schema.TaggedStruct("At", { when: Schema.Date }),
    Schema.TaggedStruct("Seats", { seats: Schema.NumberFromString })
  ),
  brand: Schema.NumberFromString.pipe(Schema.brand("Seats"))
} satisfies Record<string, Schema.Schema<any, any>>

/** Interrupts a run, records its resume with `decision`, and replays the record's JSONL on a new agent. */
const recordAndReplay = <A, I>(schema: Schema.Schema<A, I>, decision: A) =>
  Effect.gen(function*() {
    const { layer } = counted()
    const seen: Array<unknown> = []
    const record = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Calculator,
        systemPrompt: "You add.",
        middleware: [waitingFor(schema, seen)]
      })
      yield* agent.run("What is 2 + 3 + 7?", { threadId: "t1" })
      return (yield* RunRecord.recordResume(agent, "t1", decision as never)).record
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), layer)))
    const read = yield* RunRecord.fromJsonl(RunRecord.toJsonl(record))
    const again: Array<unknown> = []
    const replayed = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        toolkit: Calculator,
        systemPrompt: "You add.",
        middleware: [waitingFor(schema, again)]
      })
      return yield* Effect.either(agent.replay(read))
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([]), layer)))
    return { record, seen, again, replayed }
  })

describe("RunRecord.recordResume of a decision whose schema transforms", () => {
  for (const [name, schema] of Object.entries(transforming) as Array<[string, Schema.Schema<any, any>]>) {
    it.effect.prop(
      `${name}: the record keeps the decision encoded, its JSONL replays without divergence and the hook gets the same decoded value`,
      { decision: Schema.typeSchema(schema) },
      ({ decision }) =>
        Effect.gen(function*() {
          const { again, record, replayed, seen } = yield* recordAndReplay(schema, decision)
          assert.deepStrictEqual(record.header.resumed, {
            decision: JSON.parse(JSON.stringify(Schema.encodeSync(schema)(seen[0])))
          })
          if (Either.isLeft(replayed)) return assert.fail(`the replay failed: ${String(replayed.left)}`)
          assert.strictEqual(replayed.right._tag === "Completed" && replayed.right.text, "12")
          assert.strictEqual(seen.length, 1)
          assert.deepStrictEqual(again, seen)
        }),
      { fastCheck: { numRuns: 15 } }
    )
  }

  it.effect("a decision whose encoded form JSON cannot keep fails with InvalidResume before the run, naming it", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      const outcome = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Calculator,
          systemPrompt: "You add.",
          middleware: [waitingFor(Schema.BigIntFromSelf, [])]
        })
        yield* agent.run("What is 2 + 3 + 7?", { threadId: "t1" })
        const recorded = yield* Effect.either(RunRecord.recordResume(agent, "t1", 5n as never))
        return { recorded, requests: (yield* ScriptedModel.requests).length }
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), layer)))
      if (Either.isRight(outcome.recorded)) return assert.fail("the decision was recorded")
      assert.deepInclude(outcome.recorded.left, { _tag: "InvalidResume", middleware: "confirm" })
      assert.include((outcome.recorded.left as { reason: string }).reason, "JSON")
      // the run before the wait made one model call; the refused resume none
      assert.strictEqual(outcome.requests, 1)
    }))

  it.effect("golden record-resumed-v1.jsonl: a version 1 record keeps the decoded decision as JSON, and replays with it as before", () =>
    Effect.gen(function*() {
      const here = path.join(path.dirname(fileURLToPath(import.meta.url)), "golden")
      const record = yield* RunRecord.fromJsonl(fs.readFileSync(path.join(here, "record-resumed-v1.jsonl"), "utf8"))
      assert.strictEqual(record.header.version, 1)
      // written by the code of commit 75ccbb8: `times` is the decoded number, not NumberFromString's text
      assert.deepStrictEqual(record.header.resumed, { decision: { go: true, times: 2 } })
      const seen: Array<unknown> = []
      const outcome = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Fixtures.toolkit,
          systemPrompt: "You add.",
          middleware: [waitingFor(Schema.Struct({ go: Schema.Boolean, times: Schema.NumberFromString }), seen)]
        })
        return { result: yield* agent.replay(record), requests: (yield* ScriptedModel.requests).length }
      }).pipe(Effect.provide(Layer.merge(
        ScriptedModel.layer([]),
        Fixtures.toolkit.toLayer({
          echo: ({ text }) => Effect.succeed(text),
          add: ({ a, b }) => Effect.succeed(a + b),
          fail: ({ reason }) => Effect.fail({ reason })
        })
      )))
      assert.strictEqual(outcome.result._tag === "Completed" && outcome.result.text, "5")
      assert.strictEqual(outcome.requests, 0)
      assert.deepStrictEqual(seen, [{ go: true, times: 2 }])
    }))
})

describe("Agent.fork of a record, two at once to one thread", () => {
  /** The memory checkpointer, whose loads let other fibers run once they have read (as a database read does). */
  const slowLoads = Layer.effect(
    Checkpointer.Checkpointer,
    Effect.map(Checkpointer.makeMemory, (memory) => ({
      ...memory,
      load: (threadId: string) => Effect.zipLeft(memory.load(threadId), Effect.yieldNow())
    }))
  )

  it.effect("exactly one runs; the other fails with ForkError ThreadExists and the thread is the first one's", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      const { record } = yield* Effect.flatMap(
        Agent.make({ toolkit: Calculator, systemPrompt: "You add." }),
        (agent) => RunRecord.record(agent, "What is 2 + 3 + 7?", { threadId: "prod" })
      ).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), layer)))
      for (const [a, b] of [[1, 2], [2, 1], [1, 1]] as const) {
        const outcome = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add." })
          const both = yield* Effect.all(
            [
              agent.fork(record, { to: "same", at: a, edit: { _tag: "Message", message: "first" } }),
              agent.fork(record, { to: "same", at: b, edit: { _tag: "Message", message: "second" } })
            ].map(Effect.either),
            { concurrency: "unbounded" }
          )
          return { both, stored: yield* agent.thread("same") }
        }).pipe(
          Effect.provide(
            Layer.mergeAll(ScriptedModel.layer([ScriptedModel.text("a"), ScriptedModel.text("b")]), layer)
          ),
          Effect.provide(slowLoads)
        )
        const won = outcome.both.filter(Either.isRight)
        const lost = outcome.both.filter(Either.isLeft)
        assert.strictEqual(won.length, 1, `forks at ${a} and ${b}`)
        assert.strictEqual(lost.length, 1)
        assert.instanceOf(lost[0]!.left, Fork.ForkError)
        assert.deepInclude(lost[0]!.left as Fork.ForkError, { reason: "ThreadExists" })
        // the thread holds the run that won, whole
        const stored = Option.getOrThrow(outcome.stored)
        assert.deepStrictEqual(
          stored.state.messages,
          (won[0]!.right as { state: { messages: unknown } }).state.messages
        )
      }
    }))

  it.effect("a run of the thread that starts first makes the fork fail with ThreadExists, and keeps its thread", () =>
    Effect.gen(function*() {
      const { layer } = counted()
      const { record } = yield* Effect.flatMap(
        Agent.make({ toolkit: Calculator, systemPrompt: "You add." }),
        (agent) => RunRecord.record(agent, "What is 2 + 3 + 7?", { threadId: "prod" })
      ).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), layer)))
      const outcome = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add." })
        const [ran, forked] = yield* Effect.all(
          [
            Effect.either(agent.run("Hello", { threadId: "same" })),
            Effect.either(agent.fork(record, { to: "same", at: 1 }))
          ],
          { concurrency: "unbounded" }
        )
        return { ran, forked, stored: yield* agent.thread("same") }
      }).pipe(
        Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("hi"), ScriptedModel.text("b")]), layer)),
        Effect.provide(slowLoads)
      )
      assert.isTrue(Either.isRight(outcome.ran))
      assert.deepInclude(Option.getOrThrow(Either.getLeft(outcome.forked)), {
        _tag: "ForkError",
        reason: "ThreadExists"
      })
      const stored = Option.getOrThrow(outcome.stored)
      assert.deepStrictEqual(stored.state.messages.map((message) => message.role), ["user", "assistant"])
    }))
})

/** Waits before model step 1 for `{ go, note }` (the note a person's text); counts its check and the input hooks. */
const counting = () => {
  const counts = { checks: 0, inputHooks: 0 }
  const middleware = Middleware.make({
    name: "gate",
    wait: {
      request: Schema.Struct({ question: Schema.String }),
      decision: Schema.Struct({ go: Schema.Boolean, note: Schema.String }),
      check: () => Effect.sync(() => void counts.checks++),
      personTexts: (decision, replace) => ({ ...decision, note: replace(decision.note) })
    },
    transformInput: ({ messages }) => Effect.sync(() => (counts.inputHooks++, messages)),
    beforeModel: ({ resume, step }) =>
      Effect.succeed(Option.isNone(resume) && step === 1 ? { interrupt: { question: "Go on?" } } : undefined)
  })
  return { counts, middleware }
}

describe("RunRecord.recordResume checks once", () => {
  it.effect("recordResume runs the wait's check and the input hooks on the person's texts once, as resume does", () =>
    Effect.gen(function*() {
      const counted = (resume: (agent: Agent.Service<any, any, any, any>) => Effect.Effect<unknown, unknown>) =>
        Effect.gen(function*() {
          const { counts, middleware } = counting()
          const agent = yield* Agent.make({ toolkit: Calculator, middleware: [middleware] })
          yield* agent.run("What is 2 + 3 + 7?", { threadId: "t1" })
          const before = { ...counts }
          yield* resume(agent)
          return { checks: counts.checks - before.checks, inputHooks: counts.inputHooks - before.inputHooks }
        }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive)))
      const decision = { go: true, note: "fine by me" }
      const plain = yield* counted((agent) => agent.resume("t1", decision))
      const recorded = yield* counted((agent) => RunRecord.recordResume(agent, "t1", decision))
      assert.deepStrictEqual(plain, { checks: 1, inputHooks: 1 })
      assert.deepStrictEqual(recorded, plain)
    }))

  it.effect("recordResume still refuses a decision the wait refuses, and records none", () =>
    Effect.gen(function*() {
      const { middleware } = counting()
      const refused = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, middleware: [middleware] })
        yield* agent.run("What is 2 + 3 + 7?", { threadId: "t1" })
        return yield* Effect.flip(RunRecord.recordResume(agent, "t1", { go: "yes" } as any))
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive)))
      assert.strictEqual((refused as { _tag?: string })._tag, "InvalidResume")
    }))
})

describe("Agent.replay with a decision", () => {
  const recordResumed = Effect.gen(function*() {
    const seen: Array<unknown> = []
    const agent = yield* Agent.make({ toolkit: Calculator, middleware: [confirming(seen)] })
    yield* agent.run("What is 2 + 3 + 7?", { threadId: "t1" })
    return (yield* RunRecord.recordResume(agent, "t1", { go: true })).record
  }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive)))

  const replayWith = (record: RunRecord.RunRecord, decision: { readonly go: boolean }) => {
    const seen: Array<unknown> = []
    return Effect.flatMap(
      Agent.make({ toolkit: Calculator, middleware: [confirming(seen)] }),
      (agent) => agent.replay(record, { decision })
    ).pipe(
      Effect.map((result) => ({ result, seen })),
      Effect.provide(Layer.merge(ScriptedModel.layer([]), CalculatorLive))
    )
  }

  it.effect("the record of a resumed run replays with the same decision given: the hook gets it, no model call", () =>
    Effect.gen(function*() {
      const record = yield* recordResumed
      const { result, seen } = yield* replayWith(record, { go: true })
      assert.strictEqual(result._tag === "Completed" && result.text, "12")
      assert.deepStrictEqual(seen, [{ go: true }])
    }))

  it.effect("a decision that differs from the recorded one diverges at field decision, naming both", () =>
    Effect.gen(function*() {
      const record = yield* recordResumed
      const diverged = yield* Effect.flip(replayWith(record, { go: false }))
      assert.instanceOf(diverged, RunRecord.ReplayDiverged)
      assert.deepInclude(diverged, { field: "decision", recorded: { go: true }, actual: { go: false } })
    }))

  it.effect("a decision given for the record of a run that was not resumed diverges at field decision", () =>
    Effect.gen(function*() {
      const { record } = yield* Effect.flatMap(
        Agent.make({ toolkit: Calculator }),
        (agent) => RunRecord.record(agent, "What is 2 + 3 + 7?", { threadId: "t" })
      ).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive)))
      const diverged = yield* Effect.flip(replayWith(record, { go: true }))
      assert.instanceOf(diverged, RunRecord.ReplayDiverged)
      assert.deepInclude(diverged, { field: "decision", recorded: undefined, actual: { go: true } })
    }))
})
