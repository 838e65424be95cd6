/**
 * The summarization guide's trap: a summarizer layer given with
 * `Effect.provide` around `Agent.make` alone is released when `make` ends.
 * The run that needs a summary fails loudly with `AgentClosed` naming the
 * cause (not the provider's `ClientDestroyedError`), and the agent stays
 * closed; the layer given to the program that uses the agent works.
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import * as Summarization from "@stepwise-agent/middleware/Summarization"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Effect, Layer } from "effect"

const AgentModel = ScriptedModel.layer([ScriptedModel.text("a"), ScriptedModel.text("b"), ScriptedModel.text("c")])

/** A summarizer on a fake OpenAI server, summarizing once the thread holds 3 messages. */
const setup = Effect.gen(function*() {
  const server = yield* FakeOpenAi.make([FakeOpenAi.text("The user said one.")])
  const summarization = Summarization.middleware({ trigger: { messages: 3 }, keep: { messages: 1 } })
  const SummarizerLive = Summarization.layerFromLanguageModel.pipe(Layer.provide(FakeOpenAi.languageModel(server)))
  return { server, summarization, SummarizerLive }
})

describe("a summarizer layer given around Agent.make alone", () => {
  it.scoped("fails the run that summarizes with AgentClosed naming the cause; the agent stays closed", () =>
    Effect.gen(function*() {
      const { SummarizerLive, server, summarization } = yield* setup
      const agent = yield* Agent.make({ middleware: [summarization] }).pipe(Effect.provide(SummarizerLive))
      yield* agent.run("one", { threadId: "t" })
      const error = yield* Effect.flip(agent.run("two", { threadId: "t" }))
      assert.strictEqual(error._tag, "AgentClosed")
      assert.include(error.message, "Effect.provide around Agent.make")
      assert.strictEqual((yield* Effect.flip(agent.send("t", "three")))._tag, "AgentClosed")
      assert.strictEqual((yield* server.requests).length, 0)
    }).pipe(Effect.provide(AgentModel)))

  it.scoped("given to the program that uses the agent, it summarizes", () =>
    Effect.gen(function*() {
      const { SummarizerLive, server, summarization } = yield* setup
      yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ middleware: [summarization] })
        yield* agent.run("one", { threadId: "t" })
        const result = yield* agent.run("two", { threadId: "t" })
        assert.strictEqual(result._tag, "Completed")
      }).pipe(Effect.provide(SummarizerLive))
      assert.strictEqual((yield* server.requests).length, 1)
    }).pipe(Effect.provide(AgentModel)))
})
