import { AiError, Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as Arbitraries from "@stepwise-agent/testing/Arbitraries"
import { Chunk, Effect, FastCheck, Layer, Option, Schema, Stream } from "effect"
import type * as ContextOverflow from "../src/ContextOverflow.js"
import * as Summarization from "../src/Summarization.js"

// ---------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------

const user = (text: string) => Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text })] })
const assistant = (text: string) => Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text })] })
const calls = (...ids: ReadonlyArray<string>) =>
  Prompt.makeMessage("assistant", {
    content: ids.map((id) =>
      Prompt.makePart("tool-call", { id, name: "search", params: { q: id }, providerExecuted: false })
    )
  })
const results = (...ids: ReadonlyArray<string>) =>
  Prompt.makeMessage("tool", {
    content: ids.map((id) =>
      Prompt.makePart("tool-result", {
        id,
        name: "search",
        result: `found ${id}`,
        isFailure: false,
        providerExecuted: false
      })
    )
  })

const textOf = (message: Prompt.Message | undefined): string =>
  message === undefined
    ? ""
    : message.role === "system"
    ? message.content
    : message.role === "tool"
    ? ""
    : message.content.map((part) => part.type === "text" ? part.text : "").join("")

/** The text the summarizer was asked to summarize (its one user message). */
const promptText = (request: ScriptedModel.Request) => request.prompt.content.map(textOf).join("\n")

/** The middleware, built (its setup needs no service: the `Summarizer` is read by its hooks). */
const middleware = (options: Summarization.Options) => {
  const mw = Summarization.middleware(options)
  return Effect.orDie(Middleware.build(mw)) as Effect.Effect<typeof mw>
}

/** Runs the middleware's beforeModel hook on a history. */
const noUsage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 }
const beforeModel = (
  mw: Middleware.Middleware<
    {},
    Summarization.SummarizationFailed | ContextOverflow.ContextOverflow,
    Summarization.Summarizer
  >,
  messages: ReadonlyArray<Prompt.Message>
) =>
  Effect.scoped(
    mw.beforeModel!({ state: {}, messages, threadId: "t", step: 0, usage: noUsage, tools: [], resume: Option.none() })
  ).pipe(Effect.map((result) => result === undefined ? undefined : result.messages))

/** A summarizer that answers every request with `text`, and its recorder. */
const summarizer = (text = "SUMMARY") => ScriptedModel.make(Array.from({ length: 20 }, () => ScriptedModel.text(text)))

const withSummarizer = <A, E, R>(
  model: { readonly model: Parameters<typeof Summarization.layer>[0] },
  effect: Effect.Effect<A, E, R>
) => Effect.provide(effect, Summarization.layer(model.model))

const leadingSystems = (messages: ReadonlyArray<Prompt.Message>) => {
  let start = 0
  while (start < messages.length && messages[start]!.role === "system") start++
  return start
}

/** The cut, computed naively: where the kept window starts. */
const expectedCut = (
  messages: ReadonlyArray<Prompt.Message>,
  keep: { readonly messages: number } | { readonly tokens: number }
) =>
  Effect.gen(function*() {
    const start = leadingSystems(messages)
    let cut = start
    if ("messages" in keep) {
      cut = Math.max(start, messages.length - keep.messages)
    } else {
      while ((yield* TokenCounter.count(messages.slice(cut))) > keep.tokens) cut++
      // a token window keeps at least the newest message
      cut = Math.max(start, Math.min(cut, messages.length - 1))
    }
    while (cut > start && messages[cut]?.role === "tool") cut--
    return cut
  })

const Search = Tool.make("search", {
  description: "Searches the web",
  parameters: { query: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(Search)
const ToolsLive = Tools.toLayer({ search: ({ query }) => Effect.succeed(`results for ${query}`) })

const agentModel = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), ToolsLive))

const collect = <A, E, R>(stream: Stream.Stream<A, E, R>) => Effect.map(Stream.runCollect(stream), Chunk.toArray)

// ---------------------------------------------------------------------------
// options
// ---------------------------------------------------------------------------

describe("options", () => {
  it.effect("bad options fail at construction with InvalidOptions naming the option", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [{ trigger: { tokens: 0 }, keep: { messages: 2 } }, "trigger.tokens"],
        [{ trigger: { tokens: 1.5 }, keep: { messages: 2 } }, "trigger.tokens"],
        [{ trigger: { messages: 0 }, keep: { messages: 2 } }, "trigger.messages"],
        [{ trigger: { pages: 3 }, keep: { messages: 2 } }, "trigger.pages"],
        [{ trigger: {}, keep: { messages: 2 } }, "trigger"],
        [{ trigger: { tokens: 10, messages: 0 }, keep: { messages: 2 } }, "trigger.messages"],
        [{ trigger: { tokens: 10, fraction: 2 }, keep: { messages: 2 } }, "trigger.fraction"],
        [{ trigger: [{ tokens: 10 }, { messages: -1 }], keep: { messages: 2 } }, "trigger[1].messages"],
        [{ trigger: [{ tokens: 10 }, {}], keep: { messages: 2 } }, "trigger[1]"],
        [
          { trigger: [{ tokens: 10, fraction: 0.0001 }], keep: { messages: 2 }, contextWindow: 1000 },
          "trigger[0].fraction"
        ],
        [{ trigger: { tokens: 10 }, keep: { messages: -1 } }, "keep.messages"],
        [{ trigger: { tokens: 10 }, keep: { tokens: 10, messages: 3 } }, "keep"],
        [{ trigger: { tokens: 10 }, keep: { messages: 3, pages: 3 } }, "keep.pages"],
        [{ trigger: { tokens: 10 }, keep: {} }, "keep"],
        [{ trigger: { tokens: 10 }, keep: { messages: 2 }, model: "openai:gpt-4o-mini" }, "model"],
        [{ trigger: { tokens: 10 }, keep: { tokens: -1 } }, "keep.tokens"],
        [{ trigger: { tokens: 10 }, keep: { tokens: 2.5 } }, "keep.tokens"],
        [{ trigger: { tokens: 10 }, keep: { fraction: 1.5 } }, "keep.fraction"],
        [{ trigger: { tokens: 10 }, summaryPrefix: 3 }, "summaryPrefix"],
        [{ trigger: { fraction: 1.5 }, keep: { messages: 2 }, contextWindow: 1000 }, "trigger.fraction"],
        [{ trigger: { fraction: 0 }, keep: { messages: 2 }, contextWindow: 1000 }, "trigger.fraction"],
        [{ trigger: { fraction: 0.0001 }, keep: { messages: 2 }, contextWindow: 1000 }, "trigger.fraction"],
        [{ trigger: { tokens: 10 }, keep: { messages: 2 }, contextWindow: 0 }, "contextWindow"],
        [{ trigger: { tokens: 10 }, keep: { messages: 2 }, summaryPrompt: "Summarize." }, "summaryPrompt"],
        [{ trigger: { tokens: 10 }, keep: { messages: 2 }, trimTokensToSummarize: 0 }, "trimTokensToSummarize"],
        [{ trigger: { tokens: 10 }, keep: { messages: 2 }, onFailure: "ignore" }, "onFailure"],
        [{ trigger: { tokens: 10 }, keep: { messages: 2 }, name: "" }, "name"],
        [{ trigger: { tokens: 10 }, keep: { messages: 2 }, agentModel: "" }, "agentModel"],
        [{ trigger: { tokens: 10 }, keep: { messages: 2 }, onOverflow: "retry" }, "onOverflow"]
      ]
      for (const [options, option] of cases) {
        const error = yield* Effect.flip(Middleware.build(Summarization.middleware(options as Summarization.Options)))
          .pipe(Effect.provide(Summarization.layerFromLanguageModel), Effect.provide(ScriptedModel.layer([])))
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.strictEqual(error.module, "Summarization")
        assert.strictEqual(error.option, option, JSON.stringify(options))
        assert.include(error.message, `Invalid Summarization option "${option}"`)
      }
      const ok = Summarization.middleware({
        trigger: [{ fraction: 0.8 }, { messages: 50, tokens: 100 }],
        keep: { fraction: 0.25 },
        contextWindow: 1000,
        summaryPrefix: "",
        trimTokensToSummarize: false,
        onFailure: "continue"
      })
      assert.strictEqual(ok.name, "summarization")
      // as in LangChain: no trigger, an empty list of them, a window of 0 messages or tokens, the default window
      for (
        const options of [
          {},
          { trigger: [] },
          { trigger: { tokens: 10 }, keep: { messages: 0 } },
          { trigger: { tokens: 10 }, keep: { tokens: 0 } },
          { trigger: { tokens: 10 }, keep: { fraction: 0 }, contextWindow: 1000 }
        ] satisfies ReadonlyArray<Summarization.Options>
      ) {
        assert.strictEqual((Summarization.middleware(options)).name, "summarization")
      }
    }))
})

// ---------------------------------------------------------------------------
// properties
// ---------------------------------------------------------------------------

const keepArbitrary = FastCheck.oneof(
  FastCheck.record({ messages: FastCheck.integer({ min: 0, max: 12 }) }),
  FastCheck.record({ tokens: FastCheck.integer({ min: 0, max: 600 }) })
)

describe("properties", () => {
  it.effect.prop(
    "after summarizing: well-formed, the newest messages unchanged, the summary first, the older ones summarized",
    { messages: Arbitraries.conversation({ maxTurns: 6, maxResultSize: 120 }), keep: keepArbitrary },
    ({ keep, messages }) =>
      Effect.gen(function*() {
        const model = yield* summarizer("SUMMARY")
        const mw = yield* middleware({ trigger: { messages: 1 }, keep, trimTokensToSummarize: false })
        const out = yield* withSummarizer(model, beforeModel(mw, messages))
        const start = leadingSystems(messages)
        const cut = yield* expectedCut(messages, keep)
        const requests = yield* model.recorder.requests
        if (cut === start) {
          assert.isUndefined(out)
          assert.strictEqual(requests.length, 0)
          return
        }
        assert.isDefined(out)
        const result = out!
        assert.deepStrictEqual(Arbitraries.problems(result), [])
        // leading system messages, then the summary, then the window as it was
        assert.strictEqual(result.length, start + 1 + messages.length - cut)
        for (let i = 0; i < start; i++) assert.strictEqual(result[i], messages[i])
        const summary = result[start]!
        assert.isTrue(Summarization.isSummary(summary))
        assert.strictEqual(textOf(summary), `${Summarization.defaultSummaryPrefix}\n\nSUMMARY`)
        for (let i = cut; i < messages.length; i++) assert.strictEqual(result[start + 1 + i - cut], messages[i])
        assert.notStrictEqual(messages[cut]?.role, "tool")
        if ("messages" in keep) assert.isTrue(messages.length - cut >= Math.min(keep.messages, messages.length - start))
        // the summarizer got every older message
        assert.strictEqual(requests.length, 1)
        const sent = promptText(requests[0]!)
        for (const message of messages.slice(start, cut)) {
          if (message.role === "user") assert.include(sent, `User: ${textOf(message)}`)
          if (message.role === "assistant") {
            for (const part of message.content) {
              if (part.type === "tool-call") assert.include(sent, `Assistant called ${part.name}(`)
            }
          }
        }
      }).pipe(Effect.provide(TokenCounter.layerApproximate())),
    { fastCheck: { numRuns: 150 }, timeout: 120_000 }
  )

  it.effect.prop(
    "below the trigger nothing changes and the summarizer is not called",
    {
      messages: Arbitraries.conversation({ maxTurns: 6 }),
      keep: keepArbitrary,
      byTokens: FastCheck.boolean(),
      margin: FastCheck.integer({ min: 1, max: 50 })
    },
    ({ byTokens, keep, margin, messages }) =>
      Effect.gen(function*() {
        const model = yield* summarizer()
        const tokens = yield* TokenCounter.count(messages)
        const trigger = byTokens ? { tokens: tokens + margin } : { messages: messages.length + margin }
        const mw = yield* middleware({ trigger, keep })
        assert.isUndefined(yield* withSummarizer(model, beforeModel(mw, messages)))
        assert.strictEqual((yield* model.recorder.requests).length, 0)
      }).pipe(Effect.provide(TokenCounter.layerApproximate()))
  )

  it.effect.prop(
    "a condition holds when all its sizes are reached (AND); a list when any condition holds (OR)",
    {
      messages: Arbitraries.conversation({ maxTurns: 6 }),
      tokens: FastCheck.integer({ min: 1, max: 400 }),
      count: FastCheck.integer({ min: 1, max: 20 })
    },
    ({ count, messages, tokens }) =>
      Effect.gen(function*() {
        const total = yield* TokenCounter.count(messages)
        const keep = { messages: 1 }
        const summarizable = (yield* expectedCut(messages, keep)) > leadingSystems(messages)
        const both = total >= tokens && messages.length >= count
        const either = total >= tokens || messages.length >= count
        const cases = [
          [{ tokens, messages: count }, both],
          [[{ tokens }, { messages: count }], either],
          [[{ tokens, messages: count }, { tokens: 1_000_000 }], both]
        ] as const
        for (const [trigger, reached] of cases) {
          const model = yield* summarizer()
          const mw = yield* middleware({ trigger, keep })
          const out = yield* withSummarizer(model, beforeModel(mw, messages))
          assert.strictEqual(out !== undefined, reached && summarizable, JSON.stringify({ trigger, total }))
          assert.strictEqual((yield* model.recorder.requests).length, reached && summarizable ? 1 : 0)
        }
      }).pipe(Effect.provide(TokenCounter.layerApproximate())),
    { fastCheck: { numRuns: 100 } }
  )

  it.effect.prop(
    "without a trigger nothing is ever summarized, and nothing is measured",
    { messages: Arbitraries.conversation({ maxTurns: 6 }), listed: FastCheck.boolean() },
    ({ listed, messages }) =>
      Effect.gen(function*() {
        let measured = 0
        const inner = yield* TokenCounter.makeApproximate()
        const spy = TokenCounter.TokenCounter.of({
          ...inner,
          measure: (items) => {
            measured += items.length
            return inner.measure(items)
          }
        })
        const model = yield* summarizer()
        const mw = yield* middleware(listed ? { trigger: [], keep: { messages: 0 } } : { keep: { messages: 0 } })
        const out = yield* withSummarizer(model, beforeModel(mw, messages)).pipe(
          Effect.provideService(TokenCounter.TokenCounter, spy)
        )
        assert.isUndefined(out)
        assert.strictEqual((yield* model.recorder.requests).length, 0)
        assert.strictEqual(measured, 0)
      })
  )
})

// ---------------------------------------------------------------------------
// the hook
// ---------------------------------------------------------------------------

const turns = (n: number, size = 40) =>
  Array.from({ length: n }, (_, i) => [user(`question ${i} ${"q".repeat(size)}`), assistant(`answer ${i}`)]).flat()

describe("beforeModel", () => {
  it.effect("several sizes in one trigger must all be reached; in a list, any one", () =>
    Effect.gen(function*() {
      const history = turns(3)
      // 6 messages, 75 tokens (LangChain Python's approximate count): between the 50 and 100 used below
      assert.strictEqual(yield* TokenCounter.count(history), 75)
      const cases: ReadonlyArray<readonly [Summarization.Options["trigger"], boolean]> = [
        [{ tokens: 50, messages: 10 }, false],
        [[{ tokens: 50 }, { messages: 10 }], true],
        [{ tokens: 50, messages: 6 }, true],
        [{ tokens: 100, messages: 3 }, false],
        [[{ tokens: 100 }, { messages: 3 }], true],
        [[{ tokens: 100, messages: 3 }, { tokens: 50, messages: 10 }], false],
        [[{ tokens: 100, messages: 3 }, { tokens: 50, messages: 6 }], true]
      ]
      for (const [trigger, summarized] of cases) {
        const model = yield* summarizer()
        const mw = yield* middleware({ trigger, keep: { messages: 2 } })
        const out = yield* withSummarizer(model, beforeModel(mw, history))
        assert.strictEqual(out !== undefined, summarized, JSON.stringify(trigger))
        if (summarized) assert.deepStrictEqual(out!.slice(1), history.slice(4))
      }
      // with a fraction of a 200-token window: 0.25 is 50 tokens, 0.5 is 100
      const model = yield* summarizer()
      const keep = { messages: 2 }
      const fraction = yield* middleware({ trigger: { fraction: 0.25, messages: 6 }, keep, contextWindow: 200 })
      assert.isDefined(yield* withSummarizer(model, beforeModel(fraction, history)))
      const notYet = yield* middleware({ trigger: { fraction: 0.5, messages: 6 }, keep, contextWindow: 200 })
      assert.isUndefined(yield* withSummarizer(model, beforeModel(notYet, history)))
    }).pipe(Effect.provide(TokenCounter.layerApproximate())))

  it.effect("keep defaults to the 20 newest messages", () =>
    Effect.gen(function*() {
      const model = yield* summarizer()
      const mw = yield* middleware({ trigger: { messages: 30 } })
      const short = turns(14)
      assert.isUndefined(yield* withSummarizer(model, beforeModel(mw, short)))
      const history = turns(15)
      const out = yield* withSummarizer(model, beforeModel(mw, history))
      assert.strictEqual(out!.length, 21)
      assert.isTrue(Summarization.isSummary(out![0]!))
      assert.deepStrictEqual(out!.slice(1), history.slice(10))
    }))

  it.effect("keep { messages: 0 } summarizes every message; a token window keeps at least the newest", () =>
    Effect.gen(function*() {
      const model = yield* summarizer()
      const history = [user("a"), assistant("b"), user(`c ${"x".repeat(400)}`)]
      const all = yield* middleware({ trigger: { messages: 1 }, keep: { messages: 0 } })
      assert.deepStrictEqual((yield* withSummarizer(model, beforeModel(all, history)))!.map(textOf), [
        `${Summarization.defaultSummaryPrefix}\n\nSUMMARY`
      ])
      const sent = promptText((yield* model.recorder.requests)[0]!)
      assert.include(sent, "User: a")
      assert.include(sent, "User: c")
      // the newest message is over 100 tokens, more than the window: it stays anyway
      const byTokens = yield* middleware({ trigger: { messages: 1 }, keep: { tokens: 5 } })
      const out = yield* withSummarizer(model, beforeModel(byTokens, history))
      assert.deepStrictEqual(out!.slice(1), history.slice(2))
      // a window ending with tool results starts at their call
      const withTools = [user("go"), calls("a"), results("a")]
      const kept = yield* withSummarizer(model, beforeModel(byTokens, withTools))
      assert.deepStrictEqual(kept!.slice(1), withTools.slice(1))
    }).pipe(Effect.provide(TokenCounter.layerApproximate())))

  it.effect("summaryPrefix is the text in front of the summary, and is left out when the summary is summarized", () =>
    Effect.gen(function*() {
      const model = yield* ScriptedModel.make([ScriptedModel.text("FIRST"), ScriptedModel.text("SECOND")])
      const mw = yield* middleware({ trigger: { messages: 3 }, keep: { messages: 1 }, summaryPrefix: "Notes so far:" })
      const first = yield* withSummarizer(model, beforeModel(mw, [user("a"), assistant("b"), user("c")]))
      assert.deepStrictEqual(first!.map(textOf), ["Notes so far:\n\nFIRST", "c"])
      assert.isTrue(Summarization.isSummary(first![0]!))
      const second = yield* withSummarizer(model, beforeModel(mw, [...first!, assistant("d"), user("e")]))
      assert.deepStrictEqual(second!.map(textOf), ["Notes so far:\n\nSECOND", "e"])
      const sent = promptText((yield* model.recorder.requests)[1]!)
      assert.include(sent, "Earlier summary: FIRST")
      assert.notInclude(sent, "Notes so far")
    }))

  it.effect("a window that would start with tool results starts at the call instead", () =>
    Effect.gen(function*() {
      const model = yield* summarizer()
      const mw = yield* middleware({ trigger: { messages: 1 }, keep: { messages: 2 } })
      const history = [user("go"), calls("a"), results("a"), calls("b", "c"), results("b"), results("c")]
      const out = yield* withSummarizer(model, beforeModel(mw, history))
      assert.deepStrictEqual(out!.slice(1), history.slice(3))
      assert.isTrue(Arbitraries.wellFormed(out!))
    }))

  it.effect("the TokenCounter in context is used, else an approximate one (4 characters per token)", () =>
    Effect.gen(function*() {
      const history = [user("x".repeat(400)), assistant("ok"), user("next")]
      const mw = yield* middleware({ trigger: { tokens: 200 }, keep: { messages: 1 } })
      const model = yield* summarizer()
      // approximately (101 + 3) + (3 + 3) + (2 + 3) tokens: under the trigger
      assert.isUndefined(yield* withSummarizer(model, beforeModel(mw, history)))
      const out = yield* withSummarizer(model, beforeModel(mw, history)).pipe(
        Effect.provide(TokenCounter.layerApproximate({ charsPerToken: 1 }))
      )
      assert.deepStrictEqual(out!.map(textOf), [`${Summarization.defaultSummaryPrefix}\n\nSUMMARY`, "next"])
    }))

  it.effect("fractions are of the context window", () =>
    Effect.gen(function*() {
      const model = yield* summarizer()
      // trigger at 110 tokens, keep 33 tokens; a question is ceil((51 + 4) / 4) + 3 = 17 tokens,
      // an answer ceil((8 + 9) / 4) + 3 = 8
      const mw = yield* middleware({ trigger: { fraction: 0.5 }, keep: { fraction: 0.15 }, contextWindow: 220 })
      const short = turns(4)
      assert.strictEqual(yield* TokenCounter.count(short), 100)
      assert.isUndefined(yield* withSummarizer(model, beforeModel(mw, short)))
      const long = turns(5)
      assert.strictEqual(yield* TokenCounter.count(long), 125)
      const out = yield* withSummarizer(model, beforeModel(mw, long))
      assert.deepStrictEqual(out!.slice(1), long.slice(7))
      assert.strictEqual(yield* expectedCut(long, { tokens: 33 }), 7)
    }).pipe(Effect.provide(TokenCounter.layerApproximate())))

  it.effect("trimTokensToSummarize sends the previous summary and the newest older messages that fit", () =>
    Effect.gen(function*() {
      const model = yield* summarizer("NEW")
      const mw = yield* middleware({ trigger: { messages: 1 }, keep: { messages: 1 }, trimTokensToSummarize: 70 })
      const first = yield* withSummarizer(model, beforeModel(mw, [user("old"), assistant("old answer"), user("hi")]))
      const previous = first![0]!
      // the previous summary is ceil((51 + 4) / 4) + 3 = 17 tokens, leaving 53 of 70; each question is
      // ceil((51 + 4) / 4) + 3 = 17 tokens, each answer ceil((8 + 9) / 4) + 3 = 8
      const history = [previous, ...turns(5), user("now")]
      const out = yield* withSummarizer(model, beforeModel(mw, history))
      assert.deepStrictEqual(out!.map(textOf), [`${Summarization.defaultSummaryPrefix}\n\nNEW`, "now"])
      const sent = promptText((yield* model.recorder.requests)[1]!)
      assert.include(sent, "Earlier summary: NEW")
      assert.include(sent, "User: question 4")
      assert.include(sent, "User: question 3")
      assert.notInclude(sent, "question 2")
      assert.notInclude(sent, "User: now")
    }).pipe(Effect.provide(TokenCounter.layerApproximate())))

  it.effect("a call measures only the messages added since the last one", () =>
    Effect.gen(function*() {
      const measured: Array<number> = []
      const inner = yield* TokenCounter.makeApproximate()
      const spy = TokenCounter.TokenCounter.of({
        ...inner,
        measure: (items) => {
          measured.push(items.length)
          return inner.measure(items)
        }
      })
      const model = yield* summarizer()
      const mw = yield* middleware({ trigger: { messages: 104 }, keep: { messages: 2 } })
      const run = (history: ReadonlyArray<Prompt.Message>) =>
        withSummarizer(model, beforeModel(mw, history)).pipe(Effect.provideService(TokenCounter.TokenCounter, spy))
      const history = turns(50)
      assert.isUndefined(yield* run(history))
      assert.deepStrictEqual(measured, [100])
      const grown = [...history, user("a"), assistant("b")]
      assert.isUndefined(yield* run(grown))
      assert.deepStrictEqual(measured, [100, 2])
      // triggered: the two new messages, then the summary
      const summarized = yield* run([...grown, user("c"), assistant("d")])
      assert.strictEqual(summarized!.length, 3)
      assert.deepStrictEqual(measured, [100, 2, 2, 1])
      // the new history continues where it stands
      assert.isUndefined(yield* run([...summarized!, user("e")]))
      assert.deepStrictEqual(measured, [100, 2, 2, 1, 1])
    }))

  it.effect("a history whose older part is only the previous summary is left alone", () =>
    Effect.gen(function*() {
      const model = yield* summarizer()
      const mw = yield* middleware({ trigger: { messages: 1 }, keep: { messages: 2 } })
      const first = yield* withSummarizer(model, beforeModel(mw, [user("a"), assistant("b"), user("c")]))
      assert.strictEqual(first!.length, 3)
      assert.isUndefined(yield* withSummarizer(model, beforeModel(mw, first!)))
      assert.strictEqual((yield* model.recorder.requests).length, 1)
    }))

  it.effect("an empty summary is a SummarizationFailed", () =>
    Effect.gen(function*() {
      const model = yield* summarizer("   ")
      const mw = yield* middleware({ trigger: { messages: 1 }, keep: { messages: 1 } })
      const error = yield* Effect.flip(withSummarizer(model, beforeModel(mw, [user("a"), assistant("b"), user("c")])))
      assert.strictEqual(error._tag, "SummarizationFailed")
      assert.strictEqual(error.message, "Summarizing 2 message(s) failed: the summarizer answered with no text")
    }))
})

// ---------------------------------------------------------------------------
// in an agent
// ---------------------------------------------------------------------------

describe("in an agent", () => {
  const firstRun = [
    ScriptedModel.toolCalls([{ name: "search", params: { query: "capital of France" } }]),
    ScriptedModel.text("Paris is the capital.")
  ]

  it.effect("replaces the stored thread with the summary and the window, which the next request sees", () =>
    Effect.gen(function*() {
      const model = yield* ScriptedModel.make([
        ScriptedModel.text("SUMMARY: the capital of France is Paris.", {
          inputTokens: 900,
          outputTokens: 100,
          totalTokens: 1000
        })
      ])
      const summarization = yield* middleware({ trigger: { messages: 5 }, keep: { messages: 2 } })
      const agent = yield* Agent.make({ toolkit: Tools, systemPrompt: "Be brief.", middleware: [summarization] }).pipe(
        Effect.provide(Summarization.layer(model.model))
      )
      yield* agent.run("What is the capital of France?", { threadId: "t" })
      const events = yield* collect(agent.stream("How many people live there?", { threadId: "t" }))

      // the summarizer got the older messages, not the window
      const summarizerRequests = yield* model.recorder.requests
      assert.strictEqual(summarizerRequests.length, 1)
      assert.isFalse(summarizerRequests[0]!.streamed)
      const sent = promptText(summarizerRequests[0]!)
      assert.include(sent, "User: What is the capital of France?")
      assert.include(sent, "Assistant called search({\"query\":\"capital of France\"})")
      assert.include(sent, "Tool result (search): results for capital of France")
      assert.notInclude(sent, "Paris is the capital.")
      assert.notInclude(sent, "How many people")

      // the agent's next request sees the summary and the window
      const requests = yield* ScriptedModel.requests
      assert.strictEqual(requests.length, 3)
      const prompt = requests[2]!.prompt.content
      assert.deepStrictEqual(prompt.map((message) => [message.role, textOf(message)]), [
        ["system", "Be brief."],
        ["user", `${Summarization.defaultSummaryPrefix}\n\nSUMMARY: the capital of France is Paris.`],
        ["assistant", "Paris is the capital."],
        ["user", "How many people live there?"]
      ])

      // the stored thread is replaced (and the marker survives the checkpoint)
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      const stored = thread.state.messages
      assert.deepStrictEqual(stored.map(textOf), [
        `${Summarization.defaultSummaryPrefix}\n\nSUMMARY: the capital of France is Paris.`,
        "Paris is the capital.",
        "How many people live there?",
        "It has 2 million people."
      ])
      assert.isTrue(Summarization.isSummary(stored[0]!))
      assert.isFalse(stored.slice(1).some(Summarization.isSummary))

      // no summarizer text or usage in the agent's stream
      assert.deepStrictEqual(events.filter(AgentEvent.$is("ModelCallStarted")).length, 1)
      assert.strictEqual(
        events.filter(AgentEvent.$is("TextDelta")).map((event) => event.delta).join(""),
        "It has 2 million people."
      )
      const responded = events.filter(AgentEvent.$is("ModelResponded"))
      assert.deepStrictEqual(responded.map((event) => textOf(event.message)), ["It has 2 million people."])
      const result = events.flatMap((event) => event._tag === "RunEnded" ? [event.result] : [])[0]!
      assert.deepStrictEqual(
        [result.usage.inputTokens, result.usage.outputTokens, result.usage.totalTokens],
        [10, 5, 15]
      )
      const decision = events.find(AgentEvent.$is("MiddlewareDecision"))!
      assert.strictEqual(decision.middleware, "summarization")
      assert.strictEqual(decision.hook, "beforeModel")
      assert.match(decision.decision, /^summarized 3 messages, kept 2; \d+ → \d+ tokens$/)
      const updated = events.find(AgentEvent.$is("StateUpdated"))!
      assert.isTrue(updated.messagesReplaced)
      // (the agent's own request and result hold the summary the thread keeps)
      for (const event of events) {
        if (event._tag !== "RunEnded" && event._tag !== "ModelRequestSent") {
          assert.notInclude(JSON.stringify(event), "SUMMARY", event._tag)
        }
      }
    }).pipe(agentModel([...firstRun, ScriptedModel.text("It has 2 million people.")])))

  it.effect("moves the cut back to the assistant message whose calls the window answers", () =>
    Effect.gen(function*() {
      const model = yield* summarizer()
      const summarization = yield* middleware({ trigger: { messages: 7 }, keep: { messages: 1 } })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [summarization] }).pipe(
        Effect.provide(Summarization.layer(model.model))
      )
      yield* agent.run("capital?", { threadId: "t" })
      yield* agent.run("population?", { threadId: "t" })
      const requests = yield* ScriptedModel.requests
      // requests: run 1 (2), run 2 step 0 (5 messages), run 2 step 1 (7 messages → summarized)
      assert.strictEqual(requests[2]!.prompt.content.length, 5)
      const last = requests[3]!.prompt.content
      assert.deepStrictEqual(last.map((message) => message.role), ["user", "assistant", "tool"])
      assert.isTrue(Summarization.isSummary(last[0]!))
      assert.isTrue(Arbitraries.wellFormed(last))
      const sent = promptText((yield* model.recorder.requests)[0]!)
      assert.include(sent, "User: population?")
      assert.notInclude(sent, "population of Paris")
    }).pipe(agentModel([
      ...firstRun,
      ScriptedModel.toolCalls([{ name: "search", params: { query: "population of Paris" } }]),
      ScriptedModel.text("About 2 million.")
    ])))

  it.effect("folds the previous summary into the next one; the stored summary starts with summaryPrefix", () =>
    Effect.gen(function*() {
      const model = yield* ScriptedModel.make([ScriptedModel.text("FIRST"), ScriptedModel.text("SECOND")])
      const summarization = yield* middleware({
        trigger: { messages: 4 },
        keep: { messages: 1 },
        summaryPrefix: "Summary of the chat so far:"
      })
      const agent = yield* Agent.make({ middleware: [summarization] }).pipe(
        Effect.provide(Summarization.layer(model.model))
      )
      for (const question of ["one", "two", "three", "four"]) yield* agent.run(question, { threadId: "t" })
      const stored = Option.getOrThrow(yield* agent.thread("t")).state.messages
      assert.deepStrictEqual(stored.map(textOf), ["Summary of the chat so far:\n\nSECOND", "four", "answer 4"])
      assert.isTrue(Summarization.isSummary(stored[0]!))
      const sent = (yield* model.recorder.requests).map(promptText)
      assert.strictEqual(sent.length, 2)
      assert.include(sent[0]!, "User: one")
      assert.include(sent[1]!, "Earlier summary: FIRST")
      assert.include(sent[1]!, "User: three")
      assert.notInclude(sent[1]!, "User: one")
    }).pipe(agentModel(["answer 1", "answer 2", "answer 3", "answer 4"].map((text) => ScriptedModel.text(text)))))

  const failing = new AiError.UnknownError({ module: "Summarizer", method: "generateText", description: "overloaded" })

  it.effect("a failing summarizer fails the run with SummarizationFailed and leaves the thread intact", () =>
    Effect.gen(function*() {
      const model = yield* ScriptedModel.make([failing])
      const summarization = yield* middleware({ trigger: { messages: 5 }, keep: { messages: 2 } })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [summarization] }).pipe(
        Effect.provide(Summarization.layer(model.model))
      )
      yield* agent.run("What is the capital of France?", { threadId: "t" })
      const before = Option.getOrThrow(yield* agent.thread("t")).state.messages
      const error = yield* Effect.flip(agent.run("How many people live there?", { threadId: "t" }))
      assert.strictEqual(error._tag, "SummarizationFailed")
      if (error._tag !== "SummarizationFailed") return
      assert.strictEqual(error.messages, 3)
      assert.include(error.message, "the summarizer failed")
      assert.include(error.message, "overloaded")
      assert.deepStrictEqual(Option.getOrThrow(yield* agent.thread("t")).state.messages, before)
      assert.strictEqual((yield* ScriptedModel.requests).length, 2)
    }).pipe(agentModel(firstRun)))

  it.effect("with onFailure continue the run goes on unsummarized and reports it", () =>
    Effect.gen(function*() {
      const model = yield* ScriptedModel.make([failing])
      const summarization = yield* middleware({
        trigger: { messages: 5 },
        keep: { messages: 2 },
        onFailure: "continue"
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [summarization] }).pipe(
        Effect.provide(Summarization.layer(model.model))
      )
      yield* agent.run("What is the capital of France?", { threadId: "t" })
      const events = yield* collect(agent.stream("How many people live there?", { threadId: "t" }))
      const decision = events.find(AgentEvent.$is("MiddlewareDecision"))!
      assert.include(decision.decision, "summarization failed, continuing unsummarized: the summarizer failed")
      assert.deepStrictEqual(decision.data, { messages: 3 })
      const requests = yield* ScriptedModel.requests
      assert.strictEqual(requests[2]!.prompt.content.length, 5)
      const stored = Option.getOrThrow(yield* agent.thread("t")).state.messages
      assert.strictEqual(stored.length, 6)
      assert.isFalse(stored.some(Summarization.isSummary))
    }).pipe(agentModel([...firstRun, ScriptedModel.text("It has 2 million people.")])))
})
