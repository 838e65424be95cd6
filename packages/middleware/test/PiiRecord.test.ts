import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware, RunRecord } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Either, Layer, Option, Schema } from "effect"
import * as Pii from "../src/Pii.js"

const Lookup = Tool.make("lookup", {
  description: "Finds a customer",
  parameters: { name: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(Lookup)

describe("Pii and RunRecord", () => {
  it.effect("a record of an agent with Pii keeps what the model was sent: redacted input, tool results and output", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({
        types: ["email", "credit_card"],
        strategy: "redact",
        applyToOutput: true,
        applyToToolResults: true
      })
      const script = [
        ScriptedModel.toolCalls([{ id: "c1", name: "lookup", params: { name: "ada" } }]),
        ScriptedModel.text("Her mail is bob@example.org")
      ]
      const lookups = { count: 0 }
      const ToolsLive = Tools.toLayer({ lookup: () => Effect.sync(() => (lookups.count++, "ada@example.com")) })
      const { record } = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii] })
        return yield* RunRecord.record(agent, "I am ada@example.com, card 4111 1111 1111 1111", { threadId: "t" })
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), ToolsLive)))
      const text = RunRecord.toJsonl(record)
      for (const raw of ["ada@example.com", "4111 1111 1111 1111", "bob@example.org"]) assert.notInclude(text, raw)
      assert.include(text, "[REDACTED_EMAIL]")
      assert.include(text, "[REDACTED_CREDIT_CARD]")
      // the replay of the redacted record does not diverge and runs no tool
      const replayed = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii] })
        return yield* Effect.either(agent.replay(yield* RunRecord.fromJsonl(text)))
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([]), ToolsLive)))
      assert.isTrue(Either.isRight(replayed), String(Either.isLeft(replayed) && replayed.left))
      assert.strictEqual(lookups.count, 1)
    }))
})

describe("Pii and RunRecord.recordResume", () => {
  /** Waits before model step 1 for a note a person types and a date; keeps each decision its hook gets. */
  const Decision = Schema.Struct({ note: Schema.String, when: Schema.Date })
  const noting = (seen: Array<typeof Decision.Type>) =>
    Middleware.make({
      name: "note",
      wait: {
        request: Schema.Struct({ question: Schema.String }),
        decision: Decision,
        personTexts: (decision, replace) => ({ ...decision, note: replace(decision.note) })
      },
      beforeModel: ({ resume, step }) =>
        Effect.sync(() => {
          if (Option.isSome(resume)) {
            seen.push(resume.value)
            return undefined
          }
          return step === 1 ? { interrupt: { question: "Anything to add?" } } : undefined
        })
    })

  it.effect("the text a person typed in a resumed run's decision is kept redacted in the record, and the replay gives the hook the same redacted decision", () =>
    Effect.gen(function*() {
      const pii = Pii.middleware({ types: ["email", "credit_card"], strategy: "redact" })
      const script = [
        ScriptedModel.toolCalls([{ id: "c1", name: "lookup", params: { name: "ada" } }]),
        ScriptedModel.text("Done")
      ]
      const ToolsLive = Tools.toLayer({ lookup: () => Effect.succeed("found") })
      const when = new Date("2026-12-01T10:00:00.000Z")
      const seen: Array<typeof Decision.Type> = []
      const { record } = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii, noting(seen)] })
        yield* agent.run("Find ada", { threadId: "t" })
        return yield* RunRecord.recordResume(agent, "t", {
          note: "charge card 4111 1111 1111 1111, mail ada@example.com",
          when
        })
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), ToolsLive)))
      const text = RunRecord.toJsonl(record)
      for (const raw of ["ada@example.com", "4111 1111 1111 1111"]) assert.notInclude(text, raw)
      assert.include(text, "[REDACTED_EMAIL]")
      assert.include(text, "[REDACTED_CREDIT_CARD]")
      assert.deepInclude(seen[0], { when })
      assert.notInclude(seen[0]!.note, "ada@example.com")
      const again: Array<typeof Decision.Type> = []
      const replayed = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [pii, noting(again)] })
        return yield* Effect.either(agent.replay(yield* RunRecord.fromJsonl(text)))
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([]), ToolsLive)))
      assert.isTrue(Either.isRight(replayed), String(Either.isLeft(replayed) && replayed.left))
      assert.deepStrictEqual(again, seen)
    }))
})
