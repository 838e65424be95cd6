/**
 * The input checks and the checkpoint agree: any input `checkInput` accepts
 * is stored (encoded as a checkpoint encodes a thread) and loads back equal;
 * anything else is a typed `InvalidInput`, never a defect. Inputs are
 * messages of every role holding parts of every `Prompt` part type, some
 * with a field of the wrong kind, built by hand (a `Prompt` passes unchecked
 * by its schema) or given as plain messages (decoded first).
 */
import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { AgentState } from "@stepwise-agent/core"
import { Cause, Effect, Exit, FastCheck as fc } from "effect"
import { checkInput, defaultMaxInputMessages, defaultMaxInputParts } from "../src/internal/input.js"

const limits = { maxChars: 100_000, maxMessages: defaultMaxInputMessages, maxParts: defaultMaxInputParts }

const text = fc.string({ maxLength: 8 })
const json = fc.jsonValue({ maxDepth: 3 })

/** A value of the wrong kind for a field. */
const wrong = fc.constantFrom<unknown>(7, null, undefined, {}, [], { href: "data:," })

/** A field's value: usually of its kind, sometimes not. */
const field = <A>(good: fc.Arbitrary<A>) => fc.oneof({ arbitrary: good, weight: 6 }, { arbitrary: wrong, weight: 1 })

const part: fc.Arbitrary<unknown> = fc.oneof(
  fc.record({ text: field(text) }).map((fields) => Prompt.makePart("text", fields as never)),
  fc.record({ text: field(text) }).map((fields) => Prompt.makePart("reasoning", fields as never)),
  fc.record({
    mediaType: field(fc.constantFrom("text/plain", "image/png")),
    data: field(fc.oneof(
      text,
      fc.uint8Array({ maxLength: 4 }),
      fc.constant(new URL("https://example.com/a.png"))
    )),
    fileName: fc.option(field(text), { nil: undefined })
  }).map(({ fileName, ...fields }) =>
    Prompt.makePart("file", (fileName === undefined ? fields : { ...fields, fileName }) as never)
  ),
  fc.record({ id: field(text), name: field(text), params: json }).map((fields) =>
    Prompt.makePart("tool-call", { ...fields, providerExecuted: false } as never)
  ),
  fc.record({ id: field(text), name: field(text), result: json, isFailure: fc.boolean() }).map((fields) =>
    Prompt.makePart("tool-result", { ...fields, providerExecuted: false } as never)
  ),
  fc.constantFrom<unknown>({ type: "image", url: "x" }, { type: 3 }, null, "text")
)

const message: fc.Arbitrary<unknown> = fc.record({
  role: fc.constantFrom("system", "user", "assistant", "tool", "developer"),
  content: fc.oneof(text, fc.array(part, { maxLength: 3 }))
}).map(({ content, role }) => ({ ...Prompt.makeMessage("user", { content: [] }), role, content }))

/** Encodes as a checkpoint does, then decodes fresh copies (not the objects the encoder remembers). */
const storedAndLoaded = (messages: ReadonlyArray<Prompt.Message>) => {
  const encoded = AgentState.encodeMessages(messages)
  const copies = encoded.map((entry) => ({
    ...entry,
    content: Array.isArray(entry.content) ? entry.content.map((p: object) => ({ ...p })) : entry.content
  }))
  return Effect.runSync(AgentState.decodeMessages(copies))
}

describe("checkInput and the checkpoint", () => {
  it.prop(
    "an accepted input is stored and loads back equal; a refused one is InvalidInput, never a defect",
    [fc.array(message, { minLength: 1, maxLength: 4 }), fc.boolean(), fc.constantFrom("user", "conversation")],
    ([messages, asPrompt, author]) => {
      const input = asPrompt
        ? Prompt.fromMessages(messages as ReadonlyArray<Prompt.Message>)
        : (messages as unknown as Prompt.RawInput)
      const exit = Effect.runSyncExit(checkInput(input, author as "user" | "conversation", limits))
      if (Exit.isSuccess(exit)) {
        assert.deepStrictEqual(storedAndLoaded(exit.value), [...exit.value])
      } else {
        const failure = Cause.failureOption(exit.cause)
        assert.isTrue(failure._tag === "Some" && failure.value._tag === "InvalidInput", Cause.pretty(exit.cause))
      }
    },
    { fastCheck: { numRuns: 300 } }
  )
})
