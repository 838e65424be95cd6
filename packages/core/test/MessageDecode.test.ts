/**
 * `internal/fast/messageDecode.ts`: a stored message decoded directly gives
 * what its Schema gives, and a message it does not cover is left to the
 * Schema (which reports what is wrong).
 */
import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { AgentState } from "@stepwise-agent/core"
import { Arbitrary, Effect, Either, FastCheck, Schema } from "effect"
import * as MessageDecode from "../src/internal/fast/messageDecode.js"

const bySchema = Schema.decodeUnknownEither(Prompt.Message)

/** Encoded messages of every shape the Schema knows, and near misses of the shapes the direct decoding covers. */
const encodedMessage = FastCheck.oneof(
  Arbitrary.make(Schema.encodedSchema(Prompt.Message)),
  FastCheck.record({
    role: FastCheck.constantFrom("system", "user", "assistant", "tool", "other"),
    content: FastCheck.oneof(
      FastCheck.string(),
      FastCheck.array(
        FastCheck.record({
          type: FastCheck.constantFrom("text", "reasoning", "tool-call", "tool-result", "file"),
          text: FastCheck.oneof(FastCheck.string(), FastCheck.integer()),
          id: FastCheck.oneof(FastCheck.string(), FastCheck.constant(undefined)),
          name: FastCheck.string(),
          params: FastCheck.jsonValue(),
          result: FastCheck.jsonValue(),
          isFailure: FastCheck.oneof(FastCheck.boolean(), FastCheck.constant("no")),
          providerExecuted: FastCheck.oneof(FastCheck.boolean(), FastCheck.constant(undefined)),
          options: FastCheck.oneof(FastCheck.constant({}), FastCheck.constant({ openai: { store: true } }))
        }, { requiredKeys: ["type"] })
      ),
      FastCheck.constant(null)
    ),
    options: FastCheck.oneof(FastCheck.constant({}), FastCheck.constant(undefined), FastCheck.constant([]))
  }, { requiredKeys: ["role"] })
)

describe("decoding a stored message directly", () => {
  it.prop("gives what the Schema gives, or leaves the message to it", [encodedMessage], ([raw]) => {
    // through JSON, as a store gives it back
    const stored: unknown = JSON.parse(JSON.stringify(raw) ?? "null")
    const direct = MessageDecode.decodeMessage(stored)
    const schema = bySchema(stored)
    if (direct !== undefined) {
      assert.isTrue(Either.isRight(schema), "decoded directly a message its Schema rejects")
      assert.deepStrictEqual(direct, Either.getOrThrow(schema))
    }
  }, { fastCheck: { numRuns: 500 } })

  it("covers what an agent stores, and a stored thread decodes to what was saved", () => {
    const messages: ReadonlyArray<Prompt.Message> = [
      Prompt.makeMessage("system", { content: "terse" }),
      Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "hi ✓" })] }),
      Prompt.makeMessage("assistant", {
        content: [
          Prompt.makePart("reasoning", { text: "think" }),
          Prompt.makePart("tool-call", { id: "c1", name: "t", params: { a: [1, null] }, providerExecuted: false })
        ]
      }),
      Prompt.makeMessage("tool", {
        content: [
          Prompt.makePart("tool-result", {
            id: "c1",
            name: "t",
            result: { ok: 1 },
            isFailure: false,
            providerExecuted: false
          })
        ]
      })
    ]
    const stored = JSON.parse(JSON.stringify(AgentState.encodeMessages(messages))) as ReadonlyArray<unknown>
    for (const raw of stored) assert.isDefined(MessageDecode.decodeMessage(raw))
    assert.deepStrictEqual(Effect.runSync(AgentState.decodeMessages(stored)), [...messages])
  })

  it("leaves a message it does not cover to the Schema, which names what is wrong", () => {
    const wrong = { role: "tool", content: [{ type: "tool-result", id: "c1", name: "t", result: 1, isFailure: "no" }] }
    assert.isUndefined(MessageDecode.decodeMessage(wrong))
    const failure = Effect.runSync(Effect.flip(AgentState.decodeMessages([wrong])))
    assert.include(failure.message, "isFailure")
  })
})
