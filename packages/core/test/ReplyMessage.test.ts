/**
 * `internal/fast/replyMessage.ts`: the assistant message of a generated
 * reply built directly is what `Prompt.fromResponseParts` gives (an empty
 * assistant message for a reply without parts it keeps), and a reply with
 * parts it does not cover (a streamed block's, a tool result) is left to
 * `fromResponseParts`.
 */
import { Prompt, Response } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { FastCheck, Option } from "effect"
import * as ReplyMessage from "../src/internal/fast/replyMessage.js"

const usage = new Response.Usage({ inputTokens: 1, outputTokens: 1, totalTokens: 2 })

/** Parts of every kind a reply can hold, generated and streamed. */
const part: FastCheck.Arbitrary<Response.AnyPart> = FastCheck.oneof(
  FastCheck.record({ text: FastCheck.string() }).map(({ text }) => Response.makePart("text", { text })),
  FastCheck.record({ text: FastCheck.string() }).map(({ text }) => Response.makePart("reasoning", { text })),
  FastCheck.record({
    id: FastCheck.string(),
    name: FastCheck.string(),
    providerName: FastCheck.option(FastCheck.string(), { nil: undefined }),
    params: FastCheck.jsonValue(),
    providerExecuted: FastCheck.option(FastCheck.boolean(), { nil: undefined })
  }).map(({ id, name, params, providerExecuted, providerName }) => {
    const call = Response.makePart("tool-call", {
      id,
      name,
      params,
      ...(providerName === undefined ? {} : { providerName }),
      providerExecuted: providerExecuted ?? false
    })
    // a part decoded without the field (what `?? false` reads as false)
    if (providerExecuted === undefined) delete (call as { providerExecuted?: boolean }).providerExecuted
    return call
  }),
  FastCheck.constant(Response.makePart("finish", { reason: "stop", usage })),
  FastCheck.constant(Response.makePart("response-metadata", {
    id: Option.some("r"),
    modelId: Option.some("m"),
    timestamp: Option.none()
  })),
  FastCheck.constantFrom("a", "b").map((id) => Response.makePart("text-start", { id })),
  FastCheck.constantFrom("a", "b").map((id) => Response.makePart("text-delta", { id, delta: "x" })),
  FastCheck.constantFrom("a", "b").map((id) => Response.makePart("text-end", { id })),
  FastCheck.constantFrom("a", "b").map((id) => Response.makePart("reasoning-delta", { id, delta: "y" })),
  FastCheck.constant(
    Response.makePart("tool-result", {
      id: "c",
      name: "t",
      isFailure: false,
      result: 1,
      encodedResult: 1,
      providerExecuted: true
    })
  )
)

/** What the agent stored before: `fromResponseParts`' first message, or an empty assistant message. */
const bySlowPath = (parts: ReadonlyArray<Response.AnyPart>): Prompt.Message => {
  const first = Prompt.fromResponseParts(parts).content[0]
  return first !== undefined && first.role === "assistant" ? first : Prompt.makeMessage("assistant", { content: [] })
}

const streamedOrResult = new Set([
  "text-start",
  "text-delta",
  "text-end",
  "reasoning-start",
  "reasoning-delta",
  "reasoning-end",
  "tool-result"
])

describe("the assistant message of a generated reply", () => {
  it("is what Prompt.fromResponseParts gives, for any reply it covers; a reply it does not cover is left to it", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.array(part, { maxLength: 6 }), (parts) => {
        const direct = ReplyMessage.assistantMessage(parts)
        if (parts.some((p) => streamedOrResult.has(p.type))) {
          assert.isUndefined(direct)
          return
        }
        assert.isDefined(direct)
        assert.deepStrictEqual(direct, bySlowPath(parts))
        assert.isTrue(Prompt.isMessage(direct))
      }),
      { numRuns: 300 }
    )
  })

  it("keeps a provider's own tool name and says whether the provider ran the call", () => {
    const message = ReplyMessage.assistantMessage([
      Response.makePart("tool-call", {
        id: "1",
        name: "search",
        providerName: "web_search",
        params: {},
        providerExecuted: true
      }),
      Response.makePart("tool-call", { id: "2", name: "add", params: { a: 1 }, providerExecuted: false })
    ])!
    assert.deepStrictEqual(message.content.map((p) => p.type === "tool-call" ? [p.name, p.providerExecuted] : []), [
      ["web_search", true],
      ["add", false]
    ])
  })

  it("is made at its size with no hole, and its tool calls are the calls the agent runs, in order", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.array(part, { maxLength: 6 }), (parts) => {
        const direct = ReplyMessage.assistantMessage(parts)
        if (direct === undefined) return
        // every index holds a part (an array filled by index must not keep a hole a reader would see)
        assert.strictEqual(Object.keys(direct.content).length, direct.content.length)
        assert.isTrue(direct.content.every((p) => p !== undefined))
        const calls = ReplyMessage.toolCallsOf(direct)
        assert.strictEqual(Object.keys(calls).length, calls.length)
        assert.deepStrictEqual(
          calls,
          direct.content.filter((p): p is Prompt.ToolCallPart => p.type === "tool-call" && !p.providerExecuted)
        )
        // the arrays stay ordinary arrays: a hook may copy or extend what it gets
        assert.deepStrictEqual([...calls, ...calls].length, calls.length * 2)
      }),
      { numRuns: 300 }
    )
  })
})
