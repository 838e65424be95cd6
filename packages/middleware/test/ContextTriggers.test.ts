/**
 * The context triggers (ClearToolUses, Summarization) count what the model
 * call is sent: the thread as the agent pairs it (a tool result without its
 * call dropped, a call without a result answered "not run"), not the stored
 * messages with their orphans.
 */
import { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, AgentState } from "@stepwise-agent/core"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import { Arbitraries, Messages, ScriptedModel } from "@stepwise-agent/testing"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Chunk, Effect, FastCheck, Stream } from "effect"
import * as ContextEditing from "../src/ContextEditing.js"
import * as ContextOverflow from "../src/ContextOverflow.js"
import * as ContextView from "../src/ContextView.js"
import * as Summarization from "../src/Summarization.js"

const systemPrompt = "You look things up."
const user = Messages.user
const calls = (...ids: ReadonlyArray<string>) => Messages.calls(...ids.map((id) => Messages.toolCall(id, "search")))
const results = (size: number, ...ids: ReadonlyArray<string>) =>
  Prompt.makeMessage("tool", { content: ids.map((id) => Messages.toolResult(id, "search", "x".repeat(size))) })

/** A result of no call (an orphan) holding `size` characters: stored, never sent. */
const orphan = (size: number) => results(size, "ghost")

/** The approximate count of messages, as the middlewares count by default. */
const count = (messages: ReadonlyArray<Prompt.Message>) =>
  Effect.flatMap(TokenCounter.makeApproximate(), (counter) => counter.count(messages))

const withSystem = (
  messages: ReadonlyArray<Prompt.Message>
) => [Prompt.makeMessage("system", { content: systemPrompt }), ...messages]

/** The history with `orphans` results of no call inserted and the results at `dropped` removed. */
const damaged = (
  history: ReadonlyArray<Prompt.Message>,
  orphans: ReadonlyArray<number>,
  dropped: ReadonlyArray<number>
): Array<Prompt.Message> => {
  let n = 0
  const out: Array<Prompt.Message> = history.map((message) =>
    message.role !== "tool"
      ? message
      : Prompt.makeMessage("tool", { content: message.content.filter(() => !dropped.includes(n++)) })
  ).filter((message) => message.role !== "tool" || message.content.length > 0)
  orphans.forEach((at, i) => out.splice(at % (out.length + 1), 0, results(40 + i * 30, `orphan_${i}`)))
  return out
}

const threads = {
  history: Arbitraries.conversation({ maxTurns: 3, maxResultSize: 120 }),
  orphans: FastCheck.array(FastCheck.nat(), { maxLength: 3 }),
  dropped: FastCheck.array(FastCheck.nat({ max: 12 }), { maxLength: 3 })
}

// ---------------------------------------------------------------------------
// ClearToolUses
// ---------------------------------------------------------------------------

interface Counted {
  readonly tokensBefore: number
  readonly tokensAfter: number
  readonly cleared?: ReadonlyArray<string>
}

/**
 * One model call on `history` with ClearToolUses (`options`) in request or
 * view mode: what its decision counted, and what the model was sent.
 */
const clearOnce = (
  history: ReadonlyArray<Prompt.Message>,
  options: ContextEditing.ClearToolUsesOptions,
  mode: ContextEditing.Mode = "request"
) =>
  Effect.gen(function*() {
    const edit = ContextEditing.clearToolUses(options)
    const agent = yield* Agent.make({
      systemPrompt,
      middleware: [ContextEditing.middleware({ edits: [edit], mode })]
    })
    const events = yield* agent.stream(history, { threadId: "t" }).pipe(Stream.runCollect, Effect.map(Chunk.toArray))
    const decision = events.filter(AgentEvent.$is("MiddlewareDecision")).find((e) => e.middleware === "contextEditing")
    const [request] = yield* ScriptedModel.requests
    return { counted: decision!.data as Counted, sent: request!.prompt.content }
  }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")])))

describe("ClearToolUses counts what the model call is sent", () => {
  const stored = [user("find"), orphan(4000), calls("c1"), results(400, "c1"), user("go")]

  it.effect("orphans that put the stored thread over the trigger while the request is under it do not fire it", () =>
    Effect.gen(function*() {
      for (const mode of ["request", "view"] as const) {
        // (view mode decides before the request is made: without the system prompt)
        const tokensOf = (messages: ReadonlyArray<Prompt.Message>) =>
          count(mode === "view" ? messages : withSystem(messages))
        const sentTokens = yield* tokensOf(AgentState.paired(stored))
        assert.isAbove(yield* tokensOf(stored), sentTokens + 500)
        const { counted, sent } = yield* clearOnce(stored, { trigger: sentTokens + 1, keep: 0 }, mode)
        assert.strictEqual(counted.tokensBefore, sentTokens)
        assert.isUndefined(counted.cleared)
        // the result of c1 is sent whole
        assert.strictEqual((sent[3] as Prompt.ToolMessage).content[0]!.result, "x".repeat(400))
      }
    }))

  it.effect("a trigger of N messages counts the messages sent, not an orphan's tool message", () =>
    Effect.gen(function*() {
      // stored: 5 messages; sent: 4
      const { counted, sent } = yield* clearOnce(stored, { trigger: { messages: 5 }, keep: 0 })
      assert.strictEqual(sent.length, 1 + 4)
      assert.isUndefined(counted.cleared)
      const fired = yield* clearOnce(stored, { trigger: { messages: 4 }, keep: 0 })
      assert.deepStrictEqual(fired.counted.cleared, ["c1"])
    }))

  it.effect("the \"not run\" result the agent sends for a call without one counts, and can fire the trigger", () =>
    Effect.gen(function*() {
      // c2 has no result: the model is sent a failed "not run" result for it
      const thread = [user("find"), calls("c1", "c2"), results(400, "c1"), user("go")]
      const sentTokens = yield* count(withSystem(AgentState.paired(thread)))
      assert.isAbove(sentTokens, yield* count(withSystem(thread)))
      const { counted } = yield* clearOnce(thread, { trigger: sentTokens, keep: 0 })
      assert.strictEqual(counted.tokensBefore, sentTokens)
      assert.deepStrictEqual(counted.cleared, ["c1"])
    }))

  it.effect("an orphan takes none of the keep slots: keep 1 keeps the newest result sent", () =>
    Effect.gen(function*() {
      // the orphan answers c1 again after a user message: the agent drops it
      const thread = [
        user("find"),
        calls("c1"),
        results(400, "c1"),
        calls("c2"),
        results(400, "c2"),
        user("more"),
        results(400, "c2")
      ]
      const { counted } = yield* clearOnce([...thread, user("go")], { trigger: 1, keep: 1 })
      assert.deepStrictEqual(counted.cleared, ["c1"])
    }))

  it.effect.prop(
    "for any thread, the tokens the trigger counts, before and after clearing, are the tokens the model is sent",
    { ...threads, trigger: FastCheck.integer({ min: 1, max: 3000 }), keep: FastCheck.nat({ max: 3 }) },
    ({ dropped, history, keep, orphans, trigger }) =>
      Effect.gen(function*() {
        const thread = [...damaged(history, orphans, dropped), user("go")]
        const { counted, sent } = yield* clearOnce(thread, { trigger, keep })
        const sentTokens = yield* count(sent)
        assert.strictEqual(counted.tokensAfter, sentTokens)
        if (counted.cleared === undefined) assert.strictEqual(counted.tokensBefore, sentTokens)
        else assert.strictEqual(counted.tokensBefore, yield* count(withSystem(AgentState.paired(thread))))
      }),
    { fastCheck: { numRuns: 60 } }
  )

  it.effect.prop(
    "an edit that remembers a growing thread counts what each request sends, as a fresh edit does",
    { ...threads, cuts: FastCheck.array(FastCheck.nat(), { maxLength: 6 }), trigger: FastCheck.nat({ max: 2000 }) },
    ({ cuts, dropped, history, orphans, trigger }) =>
      Effect.gen(function*() {
        const thread = damaged(history, orphans, dropped)
        const options = { trigger: trigger + 1, keep: 1 }
        const remembering = ContextEditing.clearToolUses(options)
        const lengths = cuts.map((cut) => cut % (thread.length + 1))
        // growing, then in any order (shorter histories start over)
        for (const n of [...[...lengths].sort((a, b) => a - b), ...lengths, thread.length]) {
          const messages = thread.slice(0, n)
          const remembered = yield* remembering.apply(messages, { systemPrompt })
          const fresh = yield* ContextEditing.clearToolUses(options).apply(messages, {
            systemPrompt
          })
          assert.deepStrictEqual(remembered, fresh)
          assert.strictEqual(remembered.tokensBefore, yield* count(withSystem(AgentState.paired(messages))))
        }
      }).pipe(Effect.provide(TokenCounter.layerApproximate())),
    { fastCheck: { numRuns: 60 } }
  )
})

describe("ContextEditing.applyEdits counts what the model call is sent", () => {
  it.effect("with no edit, the count is of the paired messages", () =>
    Effect.gen(function*() {
      const thread = [user("find"), orphan(4000), calls("c1"), results(400, "c1"), user("go")]
      const out = yield* ContextEditing.applyEdits([], thread, { systemPrompt })
      assert.strictEqual(out.tokensBefore, yield* count(withSystem(AgentState.paired(thread))))
      assert.strictEqual(out.messages, thread)
    }).pipe(Effect.provide(TokenCounter.layerApproximate())))
})

describe("ContextView.of", () => {
  it("gives the messages the model is sent: an orphan result is not among them", () => {
    const thread = [user("find"), orphan(40), calls("c1"), results(40, "c1"), user("go")]
    assert.deepStrictEqual(ContextView.of({ messages: thread }).messages, AgentState.paired(thread))
    assert.strictEqual(ContextView.of({ messages: thread }).messages.length, 4)
  })
})

describe("AgentState.paired", () => {
  it.effect.prop(
    "is what the model call is sent of a thread",
    threads,
    ({ dropped, history, orphans }) =>
      Effect.gen(function*() {
        const thread = [...damaged(history, orphans, dropped), user("go")]
        const sent = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({})
          yield* agent.run(thread, { threadId: "t" })
          const [request] = yield* ScriptedModel.requests
          return request!.prompt.content
        }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")])))
        assert.deepStrictEqual(AgentState.paired(thread), sent)
      }),
    { fastCheck: { numRuns: 30 } }
  )
})

// ---------------------------------------------------------------------------
// Summarization
// ---------------------------------------------------------------------------

/**
 * One run on `history` with Summarization (`trigger`, the newest message
 * kept): whether the summarizer was called, and what the model was sent.
 */
const summarizeOnce = (history: ReadonlyArray<Prompt.Message>, trigger: Summarization.TriggerCondition) =>
  Effect.gen(function*() {
    const summarizer = yield* ScriptedModel.make([ScriptedModel.text("SUMMARY")])
    const summarization = Summarization.middleware({ trigger, keep: { messages: 1 } })
    const agent = yield* Agent.make({ middleware: [summarization] }).pipe(
      Effect.provide(Summarization.layer(summarizer.model))
    )
    yield* agent.run(history, { threadId: "t" })
    const [request] = yield* ScriptedModel.requests
    return { summarized: (yield* summarizer.recorder.requests).length > 0, sent: request!.prompt.content }
  }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("ok")])))

describe("Summarization counts what the model call is sent", () => {
  const stored = [user("find"), orphan(4000), calls("c1"), results(400, "c1"), user("go")]

  it.effect("orphans that put the stored thread over the trigger while the request is under it do not fire it", () =>
    Effect.gen(function*() {
      const sentTokens = yield* count(AgentState.paired(stored))
      assert.isAbove(yield* count(stored), sentTokens + 500)
      assert.isFalse((yield* summarizeOnce(stored, { tokens: sentTokens + 1 })).summarized)
      assert.isTrue((yield* summarizeOnce(stored, { tokens: sentTokens })).summarized)
      // messages: 5 stored, 4 sent
      assert.isFalse((yield* summarizeOnce(stored, { messages: 5 })).summarized)
      assert.isTrue((yield* summarizeOnce(stored, { messages: 4 })).summarized)
    }))

  it.effect("the \"not run\" result the agent sends for a call without one counts, and can fire the trigger", () =>
    Effect.gen(function*() {
      const thread = [user("find"), calls("c1"), user("go")]
      // stored: 3 messages; sent: 4, with c1's "not run" result
      assert.strictEqual(AgentState.paired(thread).length, 4)
      assert.isTrue((yield* summarizeOnce(thread, { messages: 4 })).summarized)
      const sentTokens = yield* count(AgentState.paired(thread))
      assert.isAbove(sentTokens, yield* count(thread))
      assert.isTrue((yield* summarizeOnce(thread, { tokens: sentTokens })).summarized)
    }))

  it.effect.prop(
    "for any thread, the trigger fires exactly at the tokens and the messages the model is sent",
    threads,
    ({ dropped, history, orphans }) =>
      Effect.gen(function*() {
        const thread = [...damaged(history, orphans, dropped), user("go")]
        const { sent } = yield* summarizeOnce(thread, { messages: 1_000_000 })
        const tokens = yield* count(sent)
        assert.isTrue((yield* summarizeOnce(thread, { tokens })).summarized)
        assert.isFalse((yield* summarizeOnce(thread, { tokens: tokens + 1 })).summarized)
        assert.isTrue((yield* summarizeOnce(thread, { messages: sent.length })).summarized)
        assert.isFalse((yield* summarizeOnce(thread, { messages: sent.length + 1 })).summarized)
      }),
    { fastCheck: { numRuns: 25 } }
  )
})

describe("Summarization calibrates with what the model call was sent", () => {
  const thread = [user("find"), orphan(4000), user("go")]
  const first = AgentState.paired(thread)
  const second = [...first, Messages.assistant("ok"), user("more")]

  it.effect("a provider counting exactly the request sent leaves the counts as they are, orphans or not", () =>
    Effect.gen(function*() {
      const summarizer = yield* ScriptedModel.make([ScriptedModel.text("SUMMARY")])
      const summarization = Summarization.middleware({
        trigger: { tokens: yield* count(second) },
        keep: { messages: 1 },
        calibrate: true
      })
      const agent = yield* Agent.make({ middleware: [summarization] }).pipe(
        Effect.provide(Summarization.layer(summarizer.model))
      )
      yield* agent.run(thread, { threadId: "t" })
      assert.strictEqual((yield* summarizer.recorder.requests).length, 0)
      // the second request reaches the trigger exactly, counted with a scale of 1
      yield* agent.run([user("more")], { threadId: "t" })
      assert.strictEqual((yield* summarizer.recorder.requests).length, 1)
    }).pipe(Effect.provide(Effect.runSync(Effect.map(count(first), (exact) =>
      // the provider reports the approximate count of what it was sent: a calibration scale of 1
      ScriptedModel.layer([
        ScriptedModel.text("ok", { inputTokens: exact, outputTokens: 1, totalTokens: exact + 1 }),
        ScriptedModel.text("done")
      ]))))))
})

// ---------------------------------------------------------------------------
// ContextOverflow
// ---------------------------------------------------------------------------

describe("ContextOverflow measures what the model call is sent", () => {
  it.effect("the ContextOverflow error counts the paired request, not the orphans it dropped", () =>
    Effect.gen(function*() {
      const mw = ContextOverflow.middleware({ policy: "clearToolUses" })
      const agent = yield* Agent.make({ systemPrompt, middleware: [mw] })
      const stored = [user("find"), orphan(4000), user("go")]
      const error = yield* Effect.flip(agent.run(stored, { threadId: "t" }))
      assert.strictEqual(error._tag, "ContextOverflow")
      const overflow = error as ContextOverflow.ContextOverflow
      assert.strictEqual(overflow.messages, 2)
      assert.strictEqual(overflow.measuredTokens, yield* count(withSystem(AgentState.paired(stored))))
    }).pipe(Effect.provide(ScriptedModel.layer([
      ScriptedModel.httpError(
        400,
        { "content-type": "application/json" },
        JSON.stringify(FakeOpenAi.contextLengthExceededBody(128_000, 130_000))
      )
    ]))))
})
