import { LanguageModel, Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as Arbitraries from "@stepwise-agent/testing/Arbitraries"
import { Context, Effect, FastCheck, Option, Schema } from "effect"
import * as ContextEditing from "../src/ContextEditing.js"
import * as ContextView from "../src/ContextView.js"
import * as Offload from "../src/Offload.js"
import * as Summarization from "../src/Summarization.js"

// ---------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------

const Search = Tool.make("search", {
  description: "Searches the web",
  parameters: { query: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(Search)
const ToolsLive = Tools.toLayer({ search: ({ query }) => Effect.succeed(`results for ${query}: ${"x".repeat(1000)}`) })

/** One run of a conversation: the user's input, then rounds of tool calls (their queries), then an answer. */
interface RunScript {
  readonly input: string
  readonly rounds: ReadonlyArray<ReadonlyArray<string>>
}

const RunScriptArb: FastCheck.Arbitrary<RunScript> = FastCheck.record({
  input: FastCheck.string({ minLength: 1, maxLength: 30 }).map((text) => `q:${text}`),
  rounds: FastCheck.array(FastCheck.array(FastCheck.string({ maxLength: 20 }), { minLength: 1, maxLength: 3 }), {
    maxLength: 3
  })
})

/**
 * The agent model's turns for the runs, with call ids unique in the thread, or
 * with `repeatIds` numbered per reply from `call_0`, as some providers do.
 */
const turnsOf = (runs: ReadonlyArray<RunScript>, repeatIds = false): ReadonlyArray<ScriptedModel.Turn> =>
  runs.flatMap((run, r) => [
    ...run.rounds.map((round, t) =>
      ScriptedModel.toolCalls(
        round.map((query, i) => ({
          name: "search",
          params: { query },
          id: repeatIds ? `call_${i}` : `c${r}_${t}_${i}`
        }))
      )
    ),
    ScriptedModel.text(`answer ${r}`)
  ])

/** A summarizer whose summary is a function of what it was sent. */
const summarizer = ScriptedModel.make(
  Array.from({ length: 200 }, () => (request: ScriptedModel.Request) => {
    const sent = JSON.stringify(request.prompt.content)
    let hash = 0
    for (let i = 0; i < sent.length; i++) hash = (hash * 31 + sent.charCodeAt(i)) | 0
    return ScriptedModel.text(`summary ${hash >>> 0} of ${sent.length} characters`)
  })
)

/**
 * Runs the conversation on a new agent with these middleware; returns the
 * requests the model received (without the system message) and the thread.
 */
const converse = (
  middleware: Effect.Effect<ReadonlyArray<Middleware.Any>>,
  runs: ReadonlyArray<RunScript>,
  options: { readonly freshAgentPerRun?: boolean; readonly repeatIds?: boolean } = {}
) =>
  Effect.gen(function*() {
    const model = yield* ScriptedModel.make(turnsOf(runs, options.repeatIds))
    const checkpointer = yield* Checkpointer.makeMemory
    const summary = yield* summarizer
    const build = Effect.flatMap(middleware, (middleware) =>
      Agent.make({ toolkit: Tools, systemPrompt: "Be brief.", middleware })).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model.model),
        Effect.provideService(Checkpointer.Checkpointer, checkpointer),
        Effect.provide(ToolsLive),
        Effect.provide(Summarization.layer(summary.model))
      )
    let agent = yield* build
    for (const run of runs) {
      if (options.freshAgentPerRun === true) {
        agent = yield* build
      }
      yield* agent.run(run.input, { threadId: "t" })
    }
    const requests = (yield* model.recorder.requests).map((request) =>
      request.prompt.content.filter((message) =>
        message.role !== "system"
      )
    )
    const thread = Option.getOrThrow(yield* agent.thread("t"))
    return { requests, state: thread.state as Record<string, unknown> & { messages: ReadonlyArray<Prompt.Message> } }
  })

const encode = (messages: ReadonlyArray<Prompt.Message>) => JSON.parse(JSON.stringify(messages))

/** Runs a middleware's beforeModel hook on a thread, as the loop would. */
const beforeModel = <S, E, R>(mw: Middleware.Middleware<S, E, R>, messages: ReadonlyArray<Prompt.Message>, state: S) =>
  Effect.scoped(mw.beforeModel!({
    state,
    messages,
    threadId: "t",
    step: 0,
    usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
    tools: [],
    resume: Option.none()
  }))

const summarization = (mode: Summarization.Mode, trigger: number, keep: number) =>
  Summarization.middleware({ trigger: { messages: trigger }, keep: { messages: keep }, mode })
const summarizing = (mode: Summarization.Mode, trigger: number, keep: number) =>
  Effect.succeed([summarization(mode, trigger, keep)])
const none = Effect.succeed([])

const Runs = FastCheck.array(RunScriptArb, { minLength: 1, maxLength: 5 })

/** A conversation and a Summarization's trigger and keep, in messages. */
const SummaryCase = {
  runs: Runs,
  trigger: FastCheck.integer({ min: 3, max: 10 }),
  keep: FastCheck.integer({ min: 0, max: 4 })
}

// ---------------------------------------------------------------------------
// Summarization in view mode
// ---------------------------------------------------------------------------

describe("Summarization view mode", () => {
  it.effect("keeps the stored thread whole, sends the model the summary, and records the view", () =>
    Effect.gen(function*() {
      const runs: ReadonlyArray<RunScript> = [
        { input: "first", rounds: [["a"], ["b", "c"]] },
        { input: "second", rounds: [["d"]] },
        { input: "third", rounds: [] }
      ]
      const viewed = yield* converse(summarizing("view", 6, 2), runs)
      const plain = yield* converse(none, runs)
      // the stored history is the one without any policy
      assert.deepStrictEqual(encode(viewed.state.messages), encode(plain.state.messages))
      const view = viewed.state.summaryView as ContextView.SummaryView
      assert.strictEqual(view.start, 0)
      assert.isAbove(view.end, 0)
      assert.match(view.text, /^Here is a summary of the conversation to date:\n\nsummary \d+/)
      // what the model saw last is the view ContextView.of gives
      const seen = ContextView.of(viewed.state)
      const last = viewed.requests[viewed.requests.length - 1]!
      // (the thread also holds the answer to that request)
      assert.deepStrictEqual(encode(seen.messages.slice(0, -1)), encode(last))
      assert.isTrue(Summarization.isSummary(seen.messages[0]!))
      assert.deepStrictEqual(seen.summarized, Option.some({ start: 0, end: view.end }))
    }))

  it.effect("a view whose cut lies past the stored messages is dropped", () =>
    Effect.gen(function*() {
      const mw = yield* Effect.orDie(Middleware.build(summarization("view", 100, 2)))
      const messages = [Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "hi" })] })]
      const result = yield* beforeModel(mw, messages, { summaryView: { start: 0, end: 5, text: "old" } })
      assert.deepStrictEqual(result, { state: { summaryView: null } })
    }).pipe(Effect.provide(Summarization.layerFromLanguageModel), Effect.provide(ScriptedModel.layer([]))))

  it.effect.prop(
    "view and rewrite send the model the same messages; the stored history is the one without the policy",
    SummaryCase,
    ({ keep, runs, trigger }) =>
      Effect.gen(function*() {
        const viewed = yield* converse(summarizing("view", trigger, keep), runs)
        const rewritten = yield* converse(summarizing("rewrite", trigger, keep), runs)
        const plain = yield* converse(none, runs)
        assert.deepStrictEqual(encode(viewed.requests.flat()), encode(rewritten.requests.flat()))
        assert.deepStrictEqual(encode(viewed.state.messages), encode(plain.state.messages))
        // the view never orphans a tool call or result
        for (const request of viewed.requests) assert.deepStrictEqual(Arbitraries.problems(request), [])
        assert.strictEqual(viewed.state.summaryView !== null, rewritten.state.messages.some(Summarization.isSummary))
        // the recorded view is the thread as rewrite mode stored it
        assert.deepStrictEqual(encode(ContextView.of(viewed.state).messages), encode(rewritten.state.messages))
      }),
    { fastCheck: { numRuns: 25 } }
  )

  it.effect.prop(
    "the view is the same computed incrementally by one agent or from the checkpoint by a new agent each run",
    SummaryCase,
    ({ keep, runs, trigger }) =>
      Effect.gen(function*() {
        const warm = yield* converse(summarizing("view", trigger, keep), runs)
        const cold = yield* converse(summarizing("view", trigger, keep), runs, { freshAgentPerRun: true })
        assert.deepStrictEqual(encode(warm.requests.flat()), encode(cold.requests.flat()))
        assert.deepStrictEqual(warm.state.summaryView, cold.state.summaryView)
      }),
    { fastCheck: { numRuns: 25 } }
  )
})

// ---------------------------------------------------------------------------
// ClearToolUses in view mode
// ---------------------------------------------------------------------------

const clearing = (
  mode: ContextEditing.Mode,
  options: ContextEditing.ClearToolUsesOptions
) => Effect.succeed([ContextEditing.middleware({ edits: [ContextEditing.clearToolUses(options)], mode })])

/** How many requests did not start with the whole previous request. */
const prefixChanges = (requests: ReadonlyArray<ReadonlyArray<Prompt.Message>>): number => {
  let changes = 0
  for (let i = 1; i < requests.length; i++) {
    const before = requests[i - 1]!
    if (JSON.stringify(requests[i]!.slice(0, before.length)) !== JSON.stringify(before)) changes++
  }
  return changes
}

const clearedIds = (messages: ReadonlyArray<Prompt.Message>): ReadonlyArray<string> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part) => ContextEditing.isCleared(part)).map((part) => part.id)
      : []
  )

const ClearOptions = FastCheck.record({
  trigger: FastCheck.integer({ min: 300, max: 4000 }),
  keep: FastCheck.integer({ min: 0, max: 3 }),
  clearToolInputs: FastCheck.boolean(),
  watermark: FastCheck.option(FastCheck.double({ min: 0.2, max: 0.9, noNaN: true }), { nil: undefined })
}).map(({ clearToolInputs, keep, trigger, watermark }): ContextEditing.ClearToolUsesOptions => ({
  trigger,
  keep,
  clearToolInputs,
  ...(watermark === undefined ? {} : { clearTo: Math.max(1, Math.floor(trigger * watermark)) })
}))

const LongRuns = FastCheck.array(RunScriptArb, { minLength: 2, maxLength: 6 })

/** A conversation and ClearToolUses options. */
const ClearCase = { runs: LongRuns, options: ClearOptions }

describe("ClearToolUses view mode", () => {
  it.effect.prop(
    "the stored history is unchanged; no tool pair is orphaned; the recorded view is what the model saw",
    ClearCase,
    ({ options, runs }) =>
      Effect.gen(function*() {
        const viewed = yield* converse(clearing("view", options), runs)
        const plain = yield* converse(none, runs)
        assert.deepStrictEqual(encode(viewed.state.messages), encode(plain.state.messages))
        for (const request of viewed.requests) assert.deepStrictEqual(Arbitraries.problems(request), [])
        const seen = ContextView.of(viewed.state)
        const last = viewed.requests[viewed.requests.length - 1]!
        assert.deepStrictEqual(encode(seen.messages.slice(0, last.length)), encode(last))
        assert.deepStrictEqual([...clearedIds(seen.messages)].sort(), [...seen.cleared].sort())
      }),
    { fastCheck: { numRuns: 30 } }
  )

  it.effect.prop(
    "between two edits the prompt prefix is unchanged; the cleared set only grows",
    ClearCase,
    ({ options, runs }) =>
      Effect.gen(function*() {
        const viewed = yield* converse(clearing("view", options), runs)
        const view = viewed.state.clearedView as ContextView.ClearedView
        // the prefix changes only at a call where more results were cleared (an edit)
        let before: ReadonlyArray<Prompt.Message> = []
        let edits = 0
        for (const request of viewed.requests) {
          const was = clearedIds(before)
          const now = clearedIds(request)
          for (const id of was) assert.include(now, id)
          const edited = now.length > was.length
          if (edited) edits++
          const prefixKept = JSON.stringify(request.slice(0, before.length)) === JSON.stringify(before)
          if (!edited) assert.isTrue(prefixKept)
          before = request
        }
        assert.strictEqual(edits, view.edits)
      }),
    { fastCheck: { numRuns: 30 } }
  )

  it.effect.prop(
    "the view is the same computed incrementally by one agent or from the checkpoint by a new agent each run",
    ClearCase,
    ({ options, runs }) =>
      Effect.gen(function*() {
        const warm = yield* converse(clearing("view", options), runs)
        const cold = yield* converse(clearing("view", options), runs, { freshAgentPerRun: true })
        assert.deepStrictEqual(encode(warm.requests.flat()), encode(cold.requests.flat()))
        assert.deepStrictEqual(warm.state.clearedView, cold.state.clearedView)
      }),
    { fastCheck: { numRuns: 20 } }
  )

  it.effect.prop(
    "with call ids repeated across replies, one agent and a new agent each run send the same prompts",
    ClearCase,
    ({ options, runs }) =>
      Effect.gen(function*() {
        const warm = yield* converse(clearing("view", options), runs, { repeatIds: true })
        const cold = yield* converse(clearing("view", options), runs, { freshAgentPerRun: true, repeatIds: true })
        assert.deepStrictEqual(encode(warm.requests.flat()), encode(cold.requests.flat()))
        assert.deepStrictEqual(warm.state.clearedView, cold.state.clearedView)
        // what the model saw last is the view ContextView.of gives
        const seen = ContextView.of(cold.state)
        const last = cold.requests[cold.requests.length - 1]!
        assert.deepStrictEqual(encode(seen.messages.slice(0, last.length)), encode(last))
        assert.deepStrictEqual(clearedIds(seen.messages), seen.cleared)
      }),
    { fastCheck: { numRuns: 20 } }
  )

  it.effect("a repeated call id clears only the result at the recorded position", () =>
    Effect.gen(function*() {
      const call = (query: string) =>
        Prompt.makeMessage("assistant", {
          content: [
            Prompt.makePart("tool-call", { id: "call_0", name: "search", params: { query }, providerExecuted: false })
          ]
        })
      const result = (text: string) =>
        Prompt.makeMessage("tool", {
          content: [
            Prompt.makePart("tool-result", {
              id: "call_0",
              name: "search",
              result: text,
              isFailure: false,
              providerExecuted: false
            })
          ]
        })
      const messages = [
        Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "go" })] }),
        call("old"),
        result("old page"),
        call("new"),
        result("new page")
      ]
      const clearedView: ContextView.ClearedView = {
        groups: [{
          placeholder: "[cleared]",
          inputs: true,
          parts: [{ id: "call_0", message: 2, part: 0 }, {
            id: "call_0",
            message: 1,
            part: 0
          }]
        }],
        edits: 1,
        tokensSaved: 10
      }
      const state = { messages, clearedView }
      const seen = ContextView.of(state)
      const parts = seen.messages.slice(1).map((message) =>
        message.content[0] as Prompt.ToolCallPart | Prompt.ToolResultPart
      )
      assert.deepStrictEqual(parts.map((part) => part.type === "tool-call" ? part.params : part.result), [
        {},
        "[cleared]",
        { query: "new" },
        "new page"
      ])
      assert.deepStrictEqual(seen.cleared, ["call_0"])
      // a position that holds no part with the id (a history rewritten since) clears nothing
      const moved = {
        ...clearedView,
        groups: [{ ...clearedView.groups[0]!, parts: [{ id: "c9", message: 2, part: 0 }] }]
      }
      const rewritten = { messages, clearedView: moved }
      assert.deepStrictEqual(ContextView.of(rewritten).messages, messages)
    }))

  it.effect("a slice checkpointed with cleared ids (no positions) decodes as nothing cleared", () =>
    Effect.gen(function*() {
      const stored = {
        clearedView: {
          groups: [{ placeholder: "[cleared]", inputs: false, ids: ["call_0"] }],
          edits: 2,
          tokensSaved: 40
        }
      }
      const slice = yield* Schema.decodeUnknown(ContextView.ClearedSlice)(stored)
      assert.deepStrictEqual(slice, { clearedView: { groups: [], edits: 2, tokensSaved: 40 } })
      const current = {
        clearedView: {
          groups: [{ placeholder: "[cleared]", inputs: false, parts: [{ id: "call_0", message: 2, part: 0 }] }],
          edits: 1,
          tokensSaved: 10
        }
      }
      assert.deepStrictEqual(yield* Schema.decodeUnknown(ContextView.ClearedSlice)(current), current)
      assert.deepStrictEqual(yield* Schema.encode(ContextView.ClearedSlice)(current), current)
    }))

  it.effect("with a watermark, edits clear in batches: the prefix changes less often than in request mode", () =>
    Effect.gen(function*() {
      const runs: ReadonlyArray<RunScript> = Array.from({ length: 8 }, (_, r) => ({
        input: `question ${r}`,
        rounds: [[`a${r}`], [`b${r}`], [`c${r}`]]
      }))
      const options = { trigger: 3000, clearTo: 1000, keep: 1 }
      const viewed = yield* converse(clearing("view", options), runs)
      const requested = yield* converse(clearing("request", options), runs)
      const view = viewed.state.clearedView as ContextView.ClearedView
      const calls = viewed.requests.length
      assert.isAtMost(prefixChanges(viewed.requests), view.edits)
      assert.isAbove(view.edits, 1)
      assert.isBelow(view.edits * 2, prefixChanges(requested.requests))
      assert.isAbove(view.tokensSaved, 0)
      // each edit brought the view down to the watermark: the next one waits for the context to grow back
      assert.isBelow(view.edits, calls / 3)
    }))

  it.effect("a watermark at or above the trigger is an InvalidOptions naming clearTo", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Middleware.build(
          ContextEditing.middleware({ edits: [ContextEditing.clearToolUses({ trigger: 500, clearTo: 500 })] })
        )
      )
      assert.strictEqual(error.option, "clearTo")
      assert.include(error.reason, "not below the trigger")
      const ok = ContextEditing.clearToolUses({ trigger: 500, clearTo: { tokens: 499 } })
      assert.strictEqual(ok.name, "ClearToolUses")
    }))
})

// ---------------------------------------------------------------------------
// Offload of the messages a summary evicts
// ---------------------------------------------------------------------------

describe("Summarization offload", () => {
  const refIn = (text: string): string | undefined => /reference "(ofl_[0-9a-f]{16})"/.exec(text)?.[1]
  const textOf = (message: Prompt.Message): string =>
    message.role === "user" || message.role === "assistant"
      ? message.content.map((part) => part.type === "text" ? part.text : "").join("")
      : ""

  it.effect.prop(
    "the evicted messages are stored under the summary's reference and read back byte-exact, in pages of any size",
    {
      messages: Arbitraries.conversation({ toolNames: ["search"], minTurns: 2, maxResultSize: 400 }),
      keep: FastCheck.integer({ min: 0, max: 3 }),
      limit: FastCheck.integer({ min: 1, max: 500 })
    },
    ({ keep, limit, messages }) =>
      Effect.gen(function*() {
        const store = yield* Offload.makeMemory
        const summarizerModel = yield* summarizer
        const mw = yield* Effect.orDie(
          Middleware.build(
            Summarization.middleware({ trigger: { messages: 1 }, keep: { messages: keep }, offload: true })
          )
        ).pipe(
          Effect.provideService(Offload.OffloadStore, store),
          Effect.provide(Summarization.layer(summarizerModel.model))
        )
        const result = yield* beforeModel(mw, messages, { summaryOffloads: null }).pipe(
          Effect.provideService(Offload.OffloadStore, store),
          Effect.provide(Summarization.layer(summarizerModel.model))
        )
        if (result === undefined || result.messages === undefined) return
        const after = result.messages
        const start = after.findIndex(Summarization.isSummary)
        const evicted = messages.slice(start, messages.length - (after.length - start - 1))
        const ref = refIn(textOf(after[start]!))!
        assert.isDefined(ref)
        const content = yield* Effect.orDie(store.get(ref))
        assert.strictEqual(Offload.referenceOf({ threadId: "t" }, content), ref)
        // read back in pages, as read_offloaded gives them
        let read = ""
        for (let offset = 0;;) {
          const page = Offload.page(ref, content, offset, limit)
          read += page.text
          if (page.end === page.total) break
          offset = page.end
        }
        assert.strictEqual(read, content)
        assert.deepStrictEqual(encode(yield* Effect.orDie(Summarization.decodeEvicted(read))), encode(evicted))
      }),
    { fastCheck: { numRuns: 40 } }
  )

  it.effect("the model reads the evicted messages back with read_offloaded", () =>
    Effect.gen(function*() {
      const store = yield* Offload.makeMemory
      const summary = yield* summarizer
      const mw = Summarization.middleware({
        trigger: { messages: 7 },
        keep: { messages: 2 },
        offload: true,
        mode: "view"
      })
      /** Reads the reference named in the summary, 100 characters a page, to its end, then answers. */
      const reader = (request: ScriptedModel.Request) => {
        const messages = request.prompt.content
        const last = messages[messages.length - 1]!
        const page = last.role === "tool" && last.content[0]!.name === Offload.toolName
          ? last.content[0]!.result as Offload.Page
          : undefined
        // (more reads make the thread summarized again: read on the first reference)
        const ref = page?.ref ?? messages.flatMap((message) => {
          const found = Summarization.isSummary(message) ? refIn(textOf(message)) : undefined
          return found === undefined ? [] : [found]
        })[0]
        if (ref === undefined || (page !== undefined && page.end === page.total)) return ScriptedModel.text("done")
        return ScriptedModel.toolCalls([{
          name: Offload.toolName,
          params: { ref, offset: page?.end ?? 0, limit: 100 },
          id: `read_${page?.end ?? 0}`
        }])
      }
      const model = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([{ name: "search", params: { query: "Lisbon" }, id: "s1" }]),
        ScriptedModel.toolCalls([{ name: "search", params: { query: "Porto" }, id: "s2" }]),
        ScriptedModel.text("Both are in Portugal."),
        ...Array.from({ length: 100 }, () => reader)
      ])
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [mw, Offload.middleware()] }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model.model),
        Effect.provideService(Offload.OffloadStore, store),
        Effect.provide(ToolsLive),
        Effect.provide(Summarization.layer(summary.model))
      )
      yield* agent.run("Where are Lisbon and Porto?", { threadId: "t" })
      yield* agent.run("Read what was summarized.", { threadId: "t" })
      const state = Option.getOrThrow(yield* agent.thread("t")).state
      const pages = state.messages.flatMap((message) =>
        message.role === "tool"
          ? message.content.filter((part) => part.name === Offload.toolName).map((part) => part.result as Offload.Page)
          : []
      )
      assert.isAbove(pages.length, 1)
      const ref = pages[0]!.ref
      assert.isTrue(pages.every((page) => page.ref === ref))
      const read = pages.map((page) => page.text).join("")
      assert.strictEqual(read, yield* Effect.orDie(store.get(ref)))
      // the first summary (7 messages, the 2 newest kept) evicted the first 5 stored messages
      const evicted = yield* Effect.orDie(Summarization.decodeEvicted(read))
      assert.deepStrictEqual(encode(evicted), encode(state.messages.slice(0, 5)))
      assert.strictEqual(textOf(state.messages[state.messages.length - 1]!), "done")
    }))
})

// ---------------------------------------------------------------------------
// both policies in view mode
// ---------------------------------------------------------------------------

describe("Summarization and ClearToolUses in view mode together", () => {
  it.effect.prop(
    "ContextView.of gives what the model saw; the stored history is whole; no pair is orphaned",
    {
      runs: LongRuns,
      trigger: FastCheck.integer({ min: 4, max: 12 }),
      options: ClearOptions,
      editingFirst: FastCheck.boolean(),
      repeatIds: FastCheck.boolean()
    },
    ({ editingFirst, options, repeatIds, runs, trigger }) =>
      Effect.gen(function*() {
        const both = Effect.gen(function*() {
          const [summary] = yield* summarizing("view", trigger, 2)
          const [editing] = yield* clearing("view", options)
          return editingFirst ? [editing!, summary!] : [summary!, editing!]
        })
        const viewed = yield* converse(both, runs, { repeatIds })
        const plain = yield* converse(none, runs, { repeatIds })
        assert.deepStrictEqual(encode(viewed.state.messages), encode(plain.state.messages))
        for (const request of viewed.requests) {
          // (repeated ids are what this case is about)
          const found = Arbitraries.problems(request).filter((problem) => !problem.endsWith("is used twice"))
          assert.deepStrictEqual(found, [])
        }
        const seen = ContextView.of(viewed.state)
        const last = viewed.requests[viewed.requests.length - 1]!
        assert.deepStrictEqual(encode(seen.messages.slice(0, last.length)), encode(last))
        // a new agent each run, which reads the views from the checkpoint, sends the same prompts
        const cold = yield* converse(both, runs, { freshAgentPerRun: true, repeatIds })
        assert.deepStrictEqual(encode(cold.requests.flat()), encode(viewed.requests.flat()))
      }),
    { fastCheck: { numRuns: 25 } }
  )
})

describe("Summarization offload when the store fails", () => {
  it.effect("the summary is made without a reference, and the failure is reported", () =>
    Effect.gen(function*() {
      const failing = Offload.OffloadStore.of({
        put: (ref) => Effect.fail(new Offload.OffloadError({ reason: "StoreFailed", ref, detail: "disk full" })),
        get: (ref) => Effect.fail(new Offload.OffloadError({ reason: "NotFound", ref }))
      })
      const summary = yield* summarizer
      const mw = yield* Effect.orDie(
        Middleware.build(Summarization.middleware({ trigger: { messages: 2 }, keep: { messages: 1 }, offload: true }))
      ).pipe(Effect.provideService(Offload.OffloadStore, failing), Effect.provide(Summarization.layer(summary.model)))
      const messages = [
        Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "first" })] }),
        Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text: "answer" })] }),
        Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "second" })] })
      ]
      const result = yield* beforeModel(mw, messages, { summaryOffloads: null }).pipe(
        Effect.provideService(Offload.OffloadStore, failing),
        Effect.provide(Summarization.layer(summary.model))
      )
      const after = result!.messages!
      assert.strictEqual(after.length, 2)
      assert.isTrue(Summarization.isSummary(after[0]!))
      const text = (after[0]!.content[0] as Prompt.TextPart).text
      assert.notInclude(text, "ofl_")
      assert.match(text, /^Here is a summary of the conversation to date:\n\nsummary \d+/)
    }))
})

describe("ClearToolUses view mode, per thread", () => {
  it.effect("two threads that share their first messages each get their own view", () =>
    Effect.gen(function*() {
      const [mw] = yield* clearing("view", { trigger: 1_000_000 })
      const first = Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "go" })] })
      const pair = (id: string) => [
        Prompt.makeMessage("assistant", {
          content: [Prompt.makePart("tool-call", { id, name: "search", params: {}, providerExecuted: false })]
        }),
        Prompt.makeMessage("tool", {
          content: [
            Prompt.makePart("tool-result", {
              id,
              name: "search",
              result: "page",
              isFailure: false,
              providerExecuted: false
            })
          ]
        })
      ]
      const a = [first, ...pair("c1"), ...pair("c2")]
      const b = [...a, ...pair("c3")]
      // the result of call `c<n>` is stored at message 2n
      const viewOf = (ids: ReadonlyArray<string>): ContextView.ClearedView => ({
        groups: [{
          placeholder: "[cleared]",
          inputs: false,
          parts: ids.map((id) => ({ id, message: 2 * Number(id.slice(1)), part: 0 }))
        }],
        edits: 1,
        tokensSaved: 0
      })
      const send = (messages: ReadonlyArray<Prompt.Message>, view: ContextView.ClearedView) =>
        Effect.gen(function*() {
          let sent: ReadonlyArray<Prompt.Message> = []
          yield* Effect.scoped(
            mw!.wrapModelCall!({
              messages,
              systemPrompt: undefined,
              tools: [],
              toolChoice: "auto",
              model: undefined,
              context: Context.empty(),
              state: { messages, clearedView: view },
              threadId: "t",
              step: 0
            }, (request) => {
              sent = request.messages
              // the response is not looked at
              return Effect.succeed(undefined as unknown as Middleware.ModelResponse)
            })
          )
          return clearedIds(sent)
        })
      assert.deepStrictEqual(yield* send(a, viewOf(["c1"])), ["c1"])
      assert.deepStrictEqual(yield* send(b, viewOf(["c2"])), ["c2"])
      assert.deepStrictEqual(yield* send(a, viewOf(["c1"])), ["c1"])
    }))
})
