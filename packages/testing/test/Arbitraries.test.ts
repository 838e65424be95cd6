import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FastCheck } from "effect"
import * as Arbitraries from "../src/Arbitraries.js"

const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool" ? message.content.filter((part) => part.type === "tool-result") : []
  )

const toolCalls = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolCallPart> =>
  messages.flatMap((message) =>
    message.role === "assistant" ? message.content.filter((part) => part.type === "tool-call") : []
  )

const payloadText = (payload: unknown): string =>
  typeof payload === "string" ? payload : (payload as { readonly content: string }).content

const call = (id: string, name = "search") =>
  Prompt.makeMessage("assistant", {
    content: [Prompt.makePart("tool-call", { id, name, params: {}, providerExecuted: false })]
  })
const results = (...parts: ReadonlyArray<readonly [string, string?]>) =>
  Prompt.makeMessage("tool", {
    content: parts.map(([id, name]) =>
      Prompt.makePart("tool-result", {
        id,
        name: name ?? "search",
        result: "r",
        isFailure: false,
        providerExecuted: false
      })
    )
  })
const user = (text: string) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })

describe("Arbitraries.conversation", () => {
  it.effect.prop(
    "generates well-formed conversations",
    { messages: Arbitraries.conversation() },
    ({ messages }) =>
      Effect.sync(() => {
        assert.deepStrictEqual(Arbitraries.problems(messages), [])
        assert.isTrue(Arbitraries.wellFormed(messages))
        const calls = toolCalls(messages)
        const ids = calls.map((part) => part.id)
        assert.strictEqual(new Set(ids).size, ids.length)
        assert.deepStrictEqual(toolResults(messages).map((part) => part.id), ids)
        // every assistant message that calls tools is followed by tool messages holding exactly its results
        messages.forEach((message, index) => {
          if (message.role !== "assistant") return
          const asked = message.content.filter((part) => part.type === "tool-call").map((part) => part.id)
          const answered: Array<string> = []
          for (let next = index + 1; next < messages.length && messages[next]!.role === "tool"; next++) {
            for (const part of (messages[next] as Prompt.ToolMessage).content) answered.push(part.id)
          }
          assert.deepStrictEqual(answered, asked)
        })
        // only the first message may be the system message
        assert.isTrue(messages.slice(1).every((message) => message.role !== "system"))
      })
  )

  it.effect.prop(
    "uses the configured tool names, turn counts, system message and result sizes",
    {
      messages: Arbitraries.conversation({
        toolNames: ["alpha", "beta"],
        system: "always",
        minTurns: 2,
        maxTurns: 3,
        minResultSize: 50,
        maxResultSize: 60
      })
    },
    ({ messages }) =>
      Effect.sync(() => {
        assert.strictEqual(messages[0]!.role, "system")
        const turns = messages.filter((message) => message.role === "user").length
        assert.isTrue(turns >= 2 && turns <= 3, `${turns} turns`)
        for (const part of [...toolCalls(messages), ...toolResults(messages)]) {
          assert.include(["alpha", "beta"], part.name)
        }
        for (const part of toolResults(messages)) {
          const size = payloadText(part.result).length
          assert.isTrue(size >= 50 && size <= 60, `payload of ${size} characters`)
        }
      })
  )

  it.effect.prop(
    "never starts with a system message when told so, and calls tools when allowed",
    {
      messages: Arbitraries.conversation({ system: "never", minTurns: 1, maxTurns: 1 }),
      bare: Arbitraries.conversation({ maxSteps: 0 })
    },
    ({ bare, messages }) =>
      Effect.sync(() => {
        assert.isTrue(messages.every((message) => message.role !== "system"))
        assert.strictEqual(messages.filter((message) => message.role === "user").length, 1)
        assert.strictEqual(toolCalls(bare).length, 0)
      })
  )

  it.effect("generates tool calls, tool messages with several results, reasoning and failures", () =>
    Effect.sync(() => {
      const samples = FastCheck.sample(Arbitraries.conversation({ maxTurns: 5 }), { numRuns: 200, seed: 7 })
      const all = samples.flat()
      assert.isTrue(all.some((message) => message.role === "system"))
      assert.isTrue(all.some((message) => message.role === "tool" && message.content.length > 1))
      assert.isTrue(toolResults(all).some((part) => part.isFailure))
      assert.isTrue(toolResults(all).some((part) => typeof part.result !== "string"))
      assert.isTrue(
        all.some((message) => message.role === "assistant" && message.content.some((part) => part.type === "reasoning"))
      )
      const names = new Set(toolCalls(all).map((part) => part.name))
      assert.deepStrictEqual([...names].sort(), [...Arbitraries.defaultToolNames].sort())
    }))

  it.effect.prop(
    "dropping any tool message or assistant message with calls breaks well-formedness",
    { messages: Arbitraries.conversation({ minTurns: 1 }), pick: FastCheck.nat() },
    ({ messages, pick }) =>
      Effect.sync(() => {
        const indices = messages.flatMap((message, index) =>
          message.role === "tool" ||
            (message.role === "assistant" && message.content.some((p) => p.type === "tool-call"))
            ? [index]
            : []
        )
        if (indices.length === 0) return
        const drop = indices[pick % indices.length]!
        const broken = messages.filter((_, index) => index !== drop)
        assert.isFalse(Arbitraries.wellFormed(broken))
      })
  )

  it("rejects invalid options", () => {
    assert.throws(() => Arbitraries.conversation({ toolNames: [] }), /empty/)
    assert.throws(() => Arbitraries.conversation({ minTurns: 3, maxTurns: 2 }), /turns/)
    assert.throws(() => Arbitraries.conversation({ maxCallsPerStep: 0 }), /calls per step/)
    assert.throws(() => Arbitraries.resultPayload(10, 5), /min <= max/)
    assert.throws(() => Arbitraries.toolName([]), /empty/)
  })

  it("toolName draws from the list", () => {
    const names = FastCheck.sample(Arbitraries.toolName(["x", "y"]), { numRuns: 50, seed: 1 })
    assert.deepStrictEqual([...new Set(names)].sort(), ["x", "y"])
  })
})

describe("Arbitraries.problems", () => {
  it("accepts answered calls, in any order, across several tool messages", () => {
    const twoCalls = Prompt.makeMessage("assistant", {
      content: [
        Prompt.makePart("tool-call", { id: "a", name: "search", params: {}, providerExecuted: false }),
        Prompt.makePart("tool-call", { id: "b", name: "search", params: {}, providerExecuted: false })
      ]
    })
    assert.deepStrictEqual(Arbitraries.problems([user("hi"), twoCalls, results(["b"]), results(["a"])]), [])
    assert.deepStrictEqual(Arbitraries.problems([]), [])
  })

  it("finds orphan results, missing results, duplicates and mismatches", () => {
    assert.deepStrictEqual(Arbitraries.problems([user("hi"), results(["x"])]), [
      "tool result \"x\" (search) answers no call of the assistant message before it"
    ])
    assert.deepStrictEqual(Arbitraries.problems([call("a"), user("next")]), ["tool call \"a\" (search) has no result"])
    assert.deepStrictEqual(Arbitraries.problems([call("a")]), ["tool call \"a\" (search) has no result"])
    // the result must come before the next user message
    assert.deepStrictEqual(Arbitraries.problems([call("a"), user("next"), results(["a"])]), [
      "tool call \"a\" (search) has no result",
      "tool result \"a\" (search) answers no call of the assistant message before it"
    ])
    assert.deepStrictEqual(Arbitraries.problems([call("a"), results(["a"], ["a"])]), [
      "tool call \"a\" has two results"
    ])
    assert.deepStrictEqual(Arbitraries.problems([call("a"), results(["a"]), call("a"), results(["a"])]), [
      "tool call id \"a\" is used twice"
    ])
    assert.deepStrictEqual(Arbitraries.problems([call("a", "search"), results(["a", "fetch"])]), [
      "tool result \"a\" is named fetch but its call is named search"
    ])
    assert.isFalse(Arbitraries.wellFormed([call("a")]))
  })
})
