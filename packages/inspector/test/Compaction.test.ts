import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import * as Wire from "../src/internal/wire.js"

const user = (text: string) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })
const call = (id: string) =>
  Prompt.makeMessage("assistant", {
    content: [Prompt.makePart("tool-call", { id, name: "search", params: {}, providerExecuted: false })]
  })
const result = (id: string) =>
  Prompt.makeMessage("tool", {
    content: [
      Prompt.makePart("tool-result", { id, name: "search", result: "page", isFailure: false, providerExecuted: false })
    ]
  })

describe("compaction in the transcript", () => {
  const messages = [user("a"), call("c1"), result("c1"), call("c2"), result("c2"), user("b")]
  // the slices as Summarization and ContextEditing write them in view mode
  const state = {
    messages,
    summaryView: { start: 0, end: 3, text: "Here is a summary…" },
    clearedView: {
      groups: [{ placeholder: "[cleared]", inputs: false, parts: [{ id: "c2", message: 4, part: 0 }] }],
      edits: 1,
      tokensSaved: 10
    }
  }

  it("marks the messages a summary stands for and the tool results cleared for the model", () => {
    const page = Wire.messages(messages, 1, 5, Wire.compactionOf(state)) as ReadonlyArray<Record<string, unknown>>
    assert.deepStrictEqual(page.map((message) => message.compaction ?? null), [
      "summarized",
      "summarized",
      null,
      null,
      null
    ])
    assert.deepStrictEqual(page.map((message) => message.cleared ?? null), [null, null, null, ["c2"], null])
    // the stored message itself is what the page shows
    assert.strictEqual(page[3]!.role, "tool")
  })

  it("a state without view slices pages its messages as they are", () => {
    const compaction = Wire.compactionOf({ messages })
    assert.deepStrictEqual(compaction, { summarized: null, cleared: new Map() })
    assert.deepStrictEqual(Wire.messages(messages, 0, 6, compaction), Wire.messages(messages, 0, 6))
  })

  it("with a call id repeated, marks only the result at the cleared position", () => {
    const repeated = [user("a"), call("call_0"), result("call_0"), call("call_0"), result("call_0")]
    const cleared = {
      groups: [{ placeholder: "[cleared]", inputs: false, parts: [{ id: "call_0", message: 2, part: 0 }] }],
      edits: 1,
      tokensSaved: 10
    }
    const page = Wire.messages(
      repeated,
      0,
      5,
      Wire.compactionOf({ messages: repeated, clearedView: cleared })
    ) as ReadonlyArray<Record<string, unknown>>
    assert.deepStrictEqual(page.map((message) => message.cleared ?? null), [null, null, ["call_0"], null, null])
  })
})
