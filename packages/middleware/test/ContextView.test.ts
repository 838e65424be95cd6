import { LanguageModel, Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, type Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as Arbitraries from "@stepwise-agent/testing/Arbitraries"
import { Effect, FastCheck, Option, Schema } from "effect"
import * as ContextEditing from "../src/ContextEditing.js"
import * as ContextView from "../src/ContextView.js"
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
const ToolsLive = Tools.toLayer({ search: ({ query }) => Effect.succeed(`results for ${query}: ${"x".repeat(200)}`) })

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

/** The agent model's turns for the runs, with call ids unique in the thread. */
const turnsOf = (runs: ReadonlyArray<RunScript>): ReadonlyArray<ScriptedModel.Turn> =>
  runs.flatMap((run, r) => [
    ...run.rounds.map((round, t) =>
      ScriptedModel.toolCalls(round.map((query, i) => ({ name: "search", params: { query }, id: `c${r}_${t}_${i}` })))
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
  options: { readonly freshAgentPerRun?: boolean } = {}
) =>
  Effect.gen(function*() {
    const model = yield* ScriptedModel.make(turnsOf(runs))
    const checkpointer = yield* Checkpointer.makeMemory
    const summary = yield* summarizer
    const build = Effect.flatMap(middleware, (middleware) =>
      Agent.make({ toolkit: Tools, systemPrompt: "Be brief.", middleware })
    ).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model.model),
      Effect.provideService(Checkpointer.Checkpointer, checkpointer),
      Effect.provide(ToolsLive),
      Effect.provide(Summarization.layer(summary.model))
    )
    let agent = yield* build
    for (const run of runs) {
      if (options.freshAgentPerRun === true) agent = yield* build
      yield* agent.run(run.input, { threadId: "t" })
    }
    const requests = (yield* model.recorder.requests).map((request) =>
      request.prompt.content.filter((message) => message.role !== "system")
    )
    const thread = Option.getOrThrow(yield* agent.thread("t"))
    return { requests, state: thread.state as Record<string, unknown> & { messages: ReadonlyArray<Prompt.Message> } }
  })

const encode = (messages: ReadonlyArray<Prompt.Message>) => JSON.parse(JSON.stringify(messages))

const summarization = (mode: Summarization.Mode, trigger: number, keep: number) =>
  Effect.orDie(Summarization.middleware({ trigger: { messages: trigger }, keep: { messages: keep }, mode }))
const summarizing = (mode: Summarization.Mode, trigger: number, keep: number) =>
  Effect.map(summarization(mode, trigger, keep), (mw) => [mw])
const none = Effect.succeed([])

const Runs = FastCheck.array(RunScriptArb, { minLength: 1, maxLength: 5 })

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
      const mw = yield* summarization("view", 100, 2)
      const messages = [Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "hi" })] })]
      const result = yield* Effect.scoped(mw.beforeModel!({
        state: { summaryView: { start: 0, end: 5, text: "old" } },
        messages,
        threadId: "t",
        step: 0,
        tools: [],
        resume: Option.none()
      }))
      assert.deepStrictEqual(result, { state: { summaryView: null } })
    }).pipe(Effect.provide(Summarization.layerFromLanguageModel), Effect.provide(ScriptedModel.layer([]))))

  it.effect.prop(
    "view and rewrite send the model the same messages; the stored history is the one without the policy",
    {
      runs: Runs,
      trigger: FastCheck.integer({ min: 3, max: 10 }),
      keep: FastCheck.integer({ min: 0, max: 4 })
    },
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
    {
      runs: Runs,
      trigger: FastCheck.integer({ min: 3, max: 10 }),
      keep: FastCheck.integer({ min: 0, max: 4 })
    },
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

// keep the import used until the ContextEditing tests land
void ContextEditing
