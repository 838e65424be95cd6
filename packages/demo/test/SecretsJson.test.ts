/**
 * A run's failure written as JSON (`JSON.stringify`, as a log shipper or an
 * API answer does) holds no key: a `Data.Error` writes its constructor's
 * arguments, kept under a symbol, and those are scrubbed too.
 */
import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Effect } from "effect"

const key = "sk-json-leak-0123456789abcdefghij"

describe("a run's failure as JSON", () => {
  it.scoped(
    "holds no key of the client, through the real OpenAI client (a dropped connection)",
    () =>
      Effect.gen(function*() {
        const server = yield* FakeOpenAi.make([FakeOpenAi.drop, FakeOpenAi.drop, FakeOpenAi.drop])
        const error = yield* Effect.flip(
          Effect.flatMap(Agent.make({}), (agent) => agent.run("hi", { threadId: "t" })).pipe(
            Effect.provide(FakeOpenAi.languageModel(server, { apiKey: key }))
          )
        )
        const written = JSON.stringify(error)
        assert.include(written, "OpenAiClient") // the error is written, with its request
        assert.notInclude(written, key.slice(3))
        assert.notInclude(String(error), key.slice(3))
      }),
    { timeout: 60_000 }
  )
})
