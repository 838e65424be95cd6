import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { AgentState } from "@stepwise-agent/core"
import { Arbitraries } from "@stepwise-agent/testing"
import { Effect, FastCheck, Schema } from "effect"

const encodeWithSchema = Schema.encodeSync(Schema.Array(Prompt.Message))
const decodeWithSchema = Schema.decodeUnknownSync(Schema.Array(Prompt.Message))

describe("AgentState message encoding", () => {
  it.prop(
    "checkpoint encoding decodes to the same messages as Schema's, and is plain JSON",
    { messages: Arbitraries.conversation({ maxTurns: 4 }) },
    ({ messages }) => {
      // fresh copies, so nothing is served from the encode cache
      const fresh = decodeWithSchema(encodeWithSchema(messages))
      const encoded = AgentState.encodeMessages(fresh)
      assert.deepStrictEqual(decodeWithSchema(encoded), decodeWithSchema(encodeWithSchema(fresh)))
      assert.deepStrictEqual(JSON.parse(JSON.stringify(encoded)), encoded)
    }
  )

  it.effect("messages the direct encoding does not cover go through the Schema", () =>
    Effect.gen(function*() {
      const withFile = Prompt.makeMessage("user", {
        content: [
          Prompt.makePart("text", { text: "see" }),
          Prompt.makePart("file", { mediaType: "text/plain", data: "aGk=", fileName: "a.txt" })
        ]
      })
      const system = Prompt.makeMessage("system", { content: "be brief" })
      const encoded = AgentState.encodeMessages([withFile, system])
      assert.deepStrictEqual(encoded, encodeWithSchema([withFile, system]))
      const decoded = yield* AgentState.decodeMessages(JSON.parse(JSON.stringify(encoded)))
      assert.deepStrictEqual(decoded, [withFile, system])
    }))

  it.effect("a message of several text parts keeps them all (the Schema alone keeps the first)", () =>
    Effect.gen(function*() {
      const message = Prompt.makeMessage("user", {
        content: [Prompt.makePart("text", { text: "first" }), Prompt.makePart("text", { text: "second" })]
      })
      // @effect/ai 0.37 encodes any all-text content as the first part's text
      assert.deepStrictEqual(encodeWithSchema([message])[0]!.content, "first")
      const decoded = yield* AgentState.decodeMessages(JSON.parse(JSON.stringify(AgentState.encodeMessages([message]))))
      assert.deepStrictEqual(decoded, [message])
    }))

  it.effect("a malformed part is refused by the Schema instead of being stored", () =>
    Effect.sync(() => {
      const bad = Prompt.makeMessage("tool", {
        content: [Prompt.makePart("text", { text: "not a tool result" }) as any]
      })
      assert.throws(() => AgentState.encodeMessages([bad]))
    }))
})

describe("AgentState.answerPending", () => {
  const callPart = (id: string) =>
    Prompt.makePart("tool-call", { id, name: "deploy", params: { id }, providerExecuted: false })

  it.prop(
    "answers exactly the pending calls, with the reason, and keeps every message before them",
    {
      messages: Arbitraries.conversation({ maxTurns: 3 }),
      calls: FastCheck.integer({ min: 1, max: 4 }),
      answered: FastCheck.integer({ min: 0, max: 4 })
    },
    ({ answered, calls, messages }) => {
      const ids = Array.from({ length: calls }, (_, i) => `p${i}`)
      const early = ids.slice(0, Math.min(answered, calls - 1))
      const thread = [
        ...messages,
        Prompt.makeMessage("assistant", { content: ids.map(callPart) }),
        ...(early.length === 0 ? [] : [
          Prompt.makeMessage("tool", {
            content: early.map((id) =>
              Prompt.makePart("tool-result", {
                id,
                name: "deploy",
                result: "ok",
                isFailure: false,
                providerExecuted: false
              })
            )
          })
        ])
      ]
      const answeredThread = AgentState.answerPending(thread, "the user cancelled")
      assert.deepStrictEqual(AgentState.pendingToolCalls(answeredThread)?.calls ?? [], [])
      assert.deepStrictEqual(answeredThread.slice(0, messages.length + 1), thread.slice(0, messages.length + 1))
      const last = answeredThread.at(-1)!
      assert.strictEqual(last.role, "tool")
      if (last.role !== "tool") return
      assert.deepStrictEqual(last.content.map((part) => part.id), ids)
      for (const part of last.content) {
        const wasEarly = early.includes(part.id)
        assert.strictEqual(part.isFailure, !wasEarly)
        assert.deepStrictEqual(part.result, wasEarly ? "ok" : { error: "Not run: the user cancelled" })
      }
      assert.isTrue(Arbitraries.wellFormed(answeredThread))
    }
  )

  it("returns a thread with nothing pending as is", () => {
    const thread = [Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "hi" })] })]
    assert.strictEqual(AgentState.answerPending(thread, "why"), thread)
  })
})

describe("AgentState.sharedPrefix", () => {
  const user = (text: string) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })
  const call = (id: string) =>
    Prompt.makeMessage("assistant", {
      content: [Prompt.makePart("tool-call", { id, name: "t", params: {}, providerExecuted: false })]
    })
  const result = (id: string) =>
    Prompt.makePart("tool-result", { id, name: "t", result: id, isFailure: false, providerExecuted: false })
  /** The leading messages two arrays share, compared one by one. */
  const naive = (a: ReadonlyArray<Prompt.Message>, b: ReadonlyArray<Prompt.Message>) => {
    let i = 0
    while (i < a.length && i < b.length && a[i] === b[i]) i++
    return i
  }

  it.prop(
    "of threads the agent made from one another, or not, is never more than the messages they share, and all of a thread it grew",
    {
      ops: FastCheck.array(
        FastCheck.record({ from: FastCheck.nat(), kind: FastCheck.constantFrom("results", "spread", "fork") }),
        { maxLength: 12 }
      )
    },
    ({ ops }) => {
      const threads: Array<ReadonlyArray<Prompt.Message>> = [[user("start")]]
      ops.forEach(({ from, kind }, n) => {
        const base = threads[from % threads.length]!
        if (kind === "results") {
          const withCall = [...base, call(`c${n}`)]
          const next = AgentState.appendToolResults(withCall, [result(`c${n}`)])
          // a thread the agent grew shares all of the thread it grew
          assert.strictEqual(AgentState.sharedPrefix(withCall, next), withCall.length)
          threads.push(withCall, next)
        } else {
          threads.push(
            kind === "spread" ? [...base, user(`u${n}`)] : AgentState.appendToolResults(base, [result(`late${n}`)])
          )
        }
      })
      for (const a of threads) {
        for (const b of threads) {
          const shared = AgentState.sharedPrefix(a, b)
          assert.isAtMost(shared, naive(a, b))
          assert.isAtLeast(shared, 0)
        }
      }
    }
  )
})
