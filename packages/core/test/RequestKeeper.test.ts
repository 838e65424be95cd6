/**
 * A run record keeps each message of its requests encoded once per message
 * object (`internal/plainJson.ts`'s `requestKeeper`): what it keeps is
 * always the encoding of the message it is given, also after a message was
 * replaced by an edited copy.
 */
import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { requestKeeper } from "../src/internal/plainJson.js"

const encode = Schema.encodeSync(Prompt.Message)
const user = (text: string) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })

describe("requestKeeper", () => {
  for (const scrubbed of [false, true]) {
    it(`keeps each message as its own encoding through edited copies (${scrubbed ? "scrubbed" : "plain"})`, () => {
      const keeper = requestKeeper(scrubbed)
      const first = user("one")
      let thread: ReadonlyArray<Prompt.Message> = [first, user("two")]
      assert.deepStrictEqual(keeper.messages(thread), thread.map((message) => encode(message)))
      // the second message replaced by an edited copy, then a message appended
      thread = [first, user("two, edited"), user("three")]
      assert.deepStrictEqual(keeper.messages(thread), thread.map((message) => encode(message)))
      assert.deepStrictEqual(
        keeper.request({ step: 1, messages: thread, tools: [], toolChoice: "auto" }).messages,
        thread.map((message) => encode(message))
      )
    })
  }
})
