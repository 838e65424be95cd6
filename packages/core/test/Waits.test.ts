import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware, RunJournal } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Data, Effect, Layer, Option, Schema } from "effect"

const Question = Schema.Struct({ question: Schema.String, askedAt: Schema.DateFromString })
const Answer = Schema.Struct({ approve: Schema.Boolean, until: Schema.optional(Schema.DateFromString) })

const askedAt = new Date("2026-12-06T10:00:00.000Z")

class TooEarly extends Data.TaggedError("TooEarly")<{}> {}

/** Asks once before the first model call; keeps every decision it is resumed with. */
const confirm = (seen: Array<unknown>, checked: Array<unknown> = []) =>
  Middleware.make({
    name: "confirm",
    canJumpTo: ["end"],
    wait: {
      request: Question,
      decision: Answer,
      check: ({ decision, request, threadId }) =>
        Effect.suspend(() => {
          checked.push({ decision, request, threadId })
          return decision.until !== undefined && decision.until < request.askedAt
            ? Effect.fail(new TooEarly())
            : Effect.void
        })
    },
    beforeModel: ({ resume, step }) =>
      Effect.sync(() => {
        if (Option.isSome(resume)) {
          seen.push(resume.value)
          return resume.value.approve ? undefined : { jumpTo: "end" as const }
        }
        return step === 0 ? { interrupt: { question: "Go on?", askedAt } } : undefined
      })
  })

const provide = Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("done")]), Checkpointer.layerMemory))

describe("typed waits", () => {
  it.effect("the interrupt carries the request as the hook gave it; the thread stores it encoded", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ middleware: [confirm([])] })
      const result = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(result._tag, "Interrupted")
      if (result._tag !== "Interrupted") return
      // typed by the wait: no decoding needed
      const value: { readonly question: string; readonly askedAt: Date } = result.interrupt.value
      assert.deepStrictEqual(value, { question: "Go on?", askedAt })
      const stored = yield* (yield* Checkpointer.Checkpointer).load("t")
      assert.deepStrictEqual(
        Option.map(stored, (checkpoint) => checkpoint.pending?.value),
        Option.some({ question: "Go on?", askedAt: "2026-12-06T10:00:00.000Z" })
      )
    }).pipe(provide))

  it.effect("resume checks the decision with the schema (encoding it) and the hook gets it decoded", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const checked: Array<unknown> = []
      const agent = yield* Agent.make({ middleware: [confirm(seen, checked)] })
      yield* agent.run("hi", { threadId: "t" })
      const until = new Date("2026-12-07T00:00:00.000Z")
      const result = yield* agent.resume("t", { approve: true, until })
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(seen.length, 1)
      const decision = seen[0] as typeof Answer.Type
      assert.isTrue(decision.until instanceof Date)
      assert.strictEqual(decision.until?.toISOString(), until.toISOString())
      // the check saw the stored request decoded (a Date again) and the decoded decision
      assert.deepStrictEqual(checked, [{
        decision: { approve: true, until },
        request: { question: "Go on?", askedAt },
        threadId: "t"
      }])
    }).pipe(provide))

  it.effect("a decision that does not fit fails with InvalidResume naming what is wrong; nothing runs, the thread waits unchanged", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const agent = yield* Agent.make({ middleware: [confirm(seen)] })
      yield* agent.run("hi", { threadId: "t" })
      const before = yield* agent.thread("t")
      for (const bad of [42, "yes", { approve: "yes" }, { approve: true, until: "tomorrow" }, null, undefined]) {
        const error = yield* Effect.flip(agent.resume("t", bad as never))
        assert.strictEqual(error._tag, "InvalidResume")
        if (error._tag !== "InvalidResume") continue
        assert.strictEqual(error.middleware, "confirm")
        assert.strictEqual(error.threadId, "t")
        assert.include(error.message, `Thread "t": the decision for middleware "confirm" is invalid`)
        const checked = yield* Effect.flip(agent.validateResume("t", bad as never))
        assert.strictEqual(checked._tag, "InvalidResume")
      }
      assert.deepStrictEqual(seen, [])
      assert.deepStrictEqual(yield* agent.thread("t"), before)
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
      // the wait's own check runs after the schema: its error is the resume's
      const early = yield* Effect.flip(agent.resume("t", { approve: true, until: new Date("2020-01-01") }))
      assert.strictEqual(early._tag, "TooEarly")
      assert.deepStrictEqual(yield* agent.thread("t"), before)
      assert.strictEqual((yield* agent.resume("t", { approve: false }))._tag, "Completed")
    }).pipe(provide))

  it.effect("a journal's decision arrives decoded with the interrupt's decision schema, and is checked before the hook gets it", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const checked: Array<unknown> = []
      const answers: Array<unknown> = [{ approve: true, until: "2026-12-08T00:00:00.000Z" }]
      const journal = RunJournal.RunJournal.of({
        ...RunJournal.inProcess,
        await: (interrupt) =>
          Effect.suspend(() => {
            const posted = answers.shift()
            return posted === undefined
              ? Effect.succeedNone
              : Effect.map(RunJournal.decodeDecision(interrupt, posted), Option.some)
          })
      })
      const agent = yield* Agent.make({ middleware: [confirm(seen, checked)] })
      const result = yield* agent.run("hi", { threadId: "t" }).pipe(
        Effect.provideService(RunJournal.RunJournal, journal)
      )
      assert.strictEqual(result._tag, "Completed")
      assert.isTrue((seen[0] as typeof Answer.Type).until instanceof Date)
      // the wait's check saw the decision and the request decoded
      assert.strictEqual(checked.length, 1)
    }).pipe(provide))

  it.effect("a journal's decision the wait's check refuses fails the run with the check's error, not the hook", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const journal = RunJournal.RunJournal.of({
        ...RunJournal.inProcess,
        await: (interrupt) =>
          Effect.map(
            RunJournal.decodeDecision(interrupt, { approve: true, until: "2020-01-01T00:00:00.000Z" }),
            Option.some
          )
      })
      const agent = yield* Agent.make({ middleware: [confirm(seen)] })
      const error = yield* Effect.flip(
        agent.run("hi", { threadId: "t" }).pipe(Effect.provideService(RunJournal.RunJournal, journal))
      )
      assert.strictEqual((error as { _tag: string })._tag, "TooEarly")
      assert.deepStrictEqual(seen, [])
    }).pipe(provide))

  it.effect("a journal's decision that is not of the wait's decision type fails the run with InvalidResume, not the hook", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      // a journal that breaks its contract (a cast): what it gives is checked against the decision's type
      const given = [{ approve: "maybe" }, { approve: true, until: "2026-12-08T00:00:00.000Z" }]
      for (const [i, decision] of given.entries()) {
        const journal = RunJournal.RunJournal.of({
          ...RunJournal.inProcess,
          await: () => Effect.succeed(Option.some(decision as never))
        })
        const agent = yield* Agent.make({ middleware: [confirm(seen)] })
        const error = yield* Effect.flip(
          agent.run("hi", { threadId: `t${i}` }).pipe(Effect.provideService(RunJournal.RunJournal, journal))
        )
        assert.strictEqual((error as { _tag: string })._tag, "InvalidResume")
        assert.include((error as Error).message, "not of the wait's decision type")
      }
      assert.deepStrictEqual(seen, [])
    }).pipe(provide))

  it.effect("a journal's decision decoded by any decision schema (class, brand, filter, map, option) reaches the hook as decoded", () =>
    Effect.gen(function*() {
      class Approval
        extends Schema.Class<Approval>("Approval")({ approve: Schema.Boolean, until: Schema.DateFromString })
      {}
      const cases: ReadonlyArray<readonly [Schema.Schema<any, any>, unknown]> = [
        [Approval, new Approval({ approve: true, until: new Date("2026-12-07T00:00:00.000Z") })],
        [Schema.String.pipe(Schema.brand("Reviewer")), "ana"],
        [Schema.Number.pipe(Schema.positive()), 3],
        [Schema.ReadonlyMapFromRecord({ key: Schema.String, value: Schema.NumberFromString }), new Map([["a", 1]])],
        [Schema.OptionFromNullOr(Schema.DateFromNumber), Option.some(new Date(5))],
        [Schema.Union(Schema.TaggedStruct("Yes", {}), Schema.TaggedStruct("No", { why: Schema.String })), {
          _tag: "No",
          why: "late"
        }]
      ]
      for (const [i, [decision, value]] of cases.entries()) {
        const seen: Array<unknown> = []
        const asking = Middleware.make({
          name: "asking",
          wait: { request: Schema.Null, decision },
          beforeModel: ({ resume, step }) =>
            Effect.sync(() => {
              if (Option.isSome(resume)) seen.push(resume.value)
              return step === 0 && Option.isNone(resume) ? { interrupt: null } : undefined
            })
        })
        const posted = JSON.parse(JSON.stringify(Schema.encodeSync(decision)(value)))
        const journal = RunJournal.RunJournal.of({
          ...RunJournal.inProcess,
          await: (interrupt) => Effect.map(RunJournal.decodeDecision(interrupt, posted), Option.some)
        })
        const agent = yield* Agent.make({ middleware: [asking] })
        const result = yield* agent.run("hi", { threadId: `t${i}` }).pipe(
          Effect.provideService(RunJournal.RunJournal, journal)
        )
        assert.strictEqual(result._tag, "Completed")
        assert.deepStrictEqual(seen, [Schema.decodeUnknownSync(decision)(posted)])
        if (value instanceof Approval) assert.instanceOf(seen[0], Approval)
      }
    }).pipe(
      Effect.provide(
        Layer.merge(
          ScriptedModel.layer(Array.from({ length: 6 }, () => ScriptedModel.text("done"))),
          Checkpointer.layerMemory
        )
      )
    ))

  it.effect("RunJournal.decodeDecision refuses a posted decision its wait's schema does not decode with InvalidResume", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const journal = RunJournal.RunJournal.of({
        ...RunJournal.inProcess,
        await: (interrupt) => Effect.map(RunJournal.decodeDecision(interrupt, { approve: "maybe" }), Option.some)
      })
      const agent = yield* Agent.make({ middleware: [confirm(seen)] })
      const error = yield* Effect.flip(
        agent.run("hi", { threadId: "t" }).pipe(Effect.provideService(RunJournal.RunJournal, journal))
      )
      assert.strictEqual(error._tag, "InvalidResume")
      if (error._tag !== "InvalidResume") return
      assert.strictEqual(error.middleware, "confirm")
      assert.strictEqual(error.threadId, "t")
      assert.include(error.message, "does not decode with the wait's decision schema")
      assert.deepStrictEqual(seen, [])
    }).pipe(provide))

  it.effect("a hook that interrupts without a declared wait, or with a request its schema refuses, fails with InvalidHookResult", () =>
    Effect.gen(function*() {
      const undeclared = Middleware.make({
        name: "undeclared",
        beforeModel: () => Effect.succeed({ interrupt: "may I?" } as never)
      })
      const noWait = yield* Effect.flip((yield* Agent.make({ middleware: [undeclared] })).run("hi", { threadId: "a" }))
      assert.strictEqual(noWait._tag, "InvalidHookResult")
      assert.include(
        noWait.message,
        `Middleware "undeclared" beforeModel: interrupted, but the middleware declares no wait`
      )
      const wrongShape = Middleware.make({
        name: "wrongShape",
        wait: { request: Question, decision: Answer },
        beforeModel: () => Effect.succeed({ interrupt: { question: 42 } as never })
      })
      const refused = yield* Effect.flip((yield* Agent.make({ middleware: [wrongShape] })).run("hi", { threadId: "b" }))
      assert.strictEqual(refused._tag, "InvalidHookResult")
      assert.include(refused.message, "interrupted with a request its wait's request schema refuses")
      // neither thread was left waiting
      const checkpointer = yield* Checkpointer.Checkpointer
      for (const id of ["a", "b"]) {
        const stored = yield* checkpointer.load(id)
        assert.isTrue(Option.isNone(stored) || stored.value.pending === undefined)
      }
    }).pipe(provide))

  it.effect.prop(
    "any resume value either fails with InvalidResume leaving the thread as it was, or reaches the hook as decode(encode(value))",
    {
      value: Schema.Union(
        Answer,
        Schema.Unknown,
        Schema.Struct({ approve: Schema.Unknown, until: Schema.Unknown })
      )
    },
    ({ value }) =>
      Effect.gen(function*() {
        const seen: Array<unknown> = []
        const agent = yield* Agent.make({ middleware: [confirm(seen)] })
        yield* agent.run("hi", { threadId: "t" })
        const before = yield* agent.thread("t")
        const expected = Schema.encodeUnknownEither(Answer)(value)
        const resumed = yield* Effect.either(agent.resume("t", value as never))
        if (expected._tag === "Left") {
          assert.strictEqual(
            resumed._tag === "Left" ? (resumed.left as { _tag: string })._tag : "resumed",
            "InvalidResume"
          )
          assert.deepStrictEqual(yield* agent.thread("t"), before)
          assert.deepStrictEqual(seen, [])
        } else if (resumed._tag === "Left") {
          // the check may refuse a decision the schema takes
          assert.strictEqual((resumed.left as { _tag: string })._tag, "TooEarly")
        } else {
          assert.deepStrictEqual(seen, [Schema.decodeUnknownSync(Answer)(expected.right)])
        }
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("done")]), Checkpointer.layerMemory))),
    { fastCheck: { numRuns: 40 } }
  )
})

describe("a decision as a durable run posts it", () => {
  it.effect("validatePosted decodes it with the wait's decision schema and checks it, without running anything", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const agent = yield* Agent.make({ middleware: [confirm(seen)] })
      yield* agent.run("hi", { threadId: "t" })
      const before = yield* agent.thread("t")
      const decided = yield* agent.validatePosted("t", { approve: true, until: "2026-12-08T00:00:00.000Z" })
      assert.isTrue(decided.until instanceof Date)
      // what does not decode (a value posted decoded, an unknown shape) and what the check refuses
      for (const bad of [{ approve: "yes" }, { approve: true, until: new Date("2026-12-08") }, 42]) {
        const error = yield* Effect.flip(agent.validatePosted("t", bad))
        assert.strictEqual(error._tag, "InvalidResume")
      }
      const early = yield* Effect.flip(agent.validatePosted("t", { approve: true, until: "2020-01-01T00:00:00.000Z" }))
      assert.strictEqual(early._tag, "TooEarly")
      assert.deepStrictEqual(seen, [])
      assert.deepStrictEqual(yield* agent.thread("t"), before)
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(provide))

  it.effect("a journal's interrupt carries the waiting middleware's decision schema", () =>
    Effect.gen(function*() {
      const decisions: Array<Schema.Schema.AnyNoContext> = []
      const journal = RunJournal.RunJournal.of({
        ...RunJournal.inProcess,
        await: (interrupt) => Effect.sync(() => (decisions.push(interrupt.decision), Option.none()))
      })
      const agent = yield* Agent.make({ middleware: [confirm([])] })
      yield* agent.run("hi", { threadId: "t" }).pipe(Effect.provideService(RunJournal.RunJournal, journal))
      assert.strictEqual(decisions.length, 1)
      assert.deepStrictEqual(
        Schema.encodeSync(decisions[0]!)({ approve: true, until: new Date("2026-12-08T00:00:00.000Z") }),
        { approve: true, until: "2026-12-08T00:00:00.000Z" }
      )
    }).pipe(provide))
})

describe("a structured output as a store keeps it", () => {
  const Dated = Schema.Struct({ answer: Schema.Number, at: Schema.DateFromString })

  it.effect("encodeOutput and decodeOutput go through the agent's responseFormat", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ responseFormat: Dated })
      const result = yield* agent.run("when?", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      const output = Option.getOrThrow(result.output)
      const encoded = yield* agent.encodeOutput(output)
      assert.deepStrictEqual(encoded, { answer: 1, at: "2026-12-07T00:00:00.000Z" })
      const decoded: typeof Dated.Type = yield* agent.decodeOutput(encoded)
      assert.deepStrictEqual(decoded, output)
      assert.strictEqual((yield* Effect.flip(agent.decodeOutput({ answer: "one" })))._tag, "ParseError")
    }).pipe(Effect.provide(ScriptedModel.layer([
      ScriptedModel.toolCalls([{ name: "final_answer", params: { answer: 1, at: "2026-12-07T00:00:00.000Z" } }])
    ]))))
})

describe("a posted decision decodes to what resume would give the hook", () => {
  it.effect.prop(
    "validatePosted of validateResume's encodedDecision, as JSON keeps it, is decode(JSON(encode(value)))",
    { value: Schema.Union(Answer, Schema.Struct({ approve: Schema.Unknown, until: Schema.Unknown })) },
    ({ value }) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ middleware: [confirm([])] })
        yield* agent.run("hi", { threadId: "t" })
        const validated = yield* Effect.either(agent.validateResume("t", value as never))
        if (validated._tag === "Left") return
        const posted = JSON.parse(JSON.stringify(validated.right.encodedDecision)) as unknown
        const decided = yield* agent.validatePosted("t", posted)
        const asJson = JSON.parse(JSON.stringify(Schema.encodeUnknownSync(Answer)(value))) as unknown
        assert.deepStrictEqual(decided, Schema.decodeUnknownSync(Answer)(asJson))
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([ScriptedModel.text("done")]), Checkpointer.layerMemory))),
    { fastCheck: { numRuns: 40 } }
  )
})
