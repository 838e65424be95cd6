/**
 * The context policies (ClearToolUses, the summarization trigger) remember
 * what they measured of a thread, so a model call on a long thread looks
 * only at its new messages, also when a run forks the thread (its input
 * after the stored messages, where the run before had its own). What they
 * compute incrementally is what they compute on the whole thread.
 */
import type { LanguageModel } from "@effect/ai"
import { Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentState, Checkpointer, Middleware } from "@stepwise-agent/core"
import * as TokenCounter from "@stepwise-agent/core/TokenCounter"
import { Arbitraries, Messages, ScriptedModel } from "@stepwise-agent/testing"
import { Context, Effect, FastCheck, Option, Schema } from "effect"
import * as ContextEditing from "../src/ContextEditing.js"
import * as Sent from "../src/internal/context/sent.js"
import * as HistoryCache from "../src/internal/fast/historyCache.js"
import * as Offload from "../src/Offload.js"
import * as Summarization from "../src/Summarization.js"

const systemPrompt = "You look things up."
const user = Messages.user
const call = (id: string) => Messages.calls(Messages.toolCall(id, "search", { q: id }))
const result = (id: string, size: number) =>
  Prompt.makeMessage("tool", { content: [Messages.toolResult(id, "search", `${id}:` + "x".repeat(size))] })

/** A counter that records how many items each `measure` was given. */
const recordingCounter = Effect.gen(function*() {
  const approximate = yield* TokenCounter.makeApproximate()
  const measured: Array<number> = []
  const counter: TokenCounter.Service = {
    ...approximate,
    measure: (items) => {
      measured.push(items.length)
      return approximate.measure(items)
    }
  }
  return { counter, measured }
})

/** A summarizer that always answers. */
const summarizer = {
  generateText: () => Effect.succeed({ text: "SUMMARY" })
} as unknown as LanguageModel.Service

const beforeModel = (mw: Middleware.Any, messages: ReadonlyArray<Prompt.Message>, step: number) =>
  mw.beforeModel!({
    state: {},
    messages,
    threadId: "t",
    step,
    usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
    tools: [],
    resume: Option.none()
  } as any) as Effect.Effect<{ readonly messages?: ReadonlyArray<Prompt.Message> } | undefined>

/** A stored thread of `steps` tool steps, answered. */
const storedThread = (steps: number): ReadonlyArray<Prompt.Message> => {
  const out: Array<Prompt.Message> = [user("look things up")]
  for (let i = 0; i < steps; i++) out.push(call(`s${i}`), result(`s${i}`, 200))
  out.push(Messages.assistant("done"))
  return out
}

// ---------------------------------------------------------------------------
// a run forking a stored thread
// ---------------------------------------------------------------------------

describe("a run that continues a stored thread with its own input", () => {
  it.effect("ClearToolUses measures only the messages after the stored ones, not the thread again", () =>
    Effect.gen(function*() {
      const { counter, measured } = yield* recordingCounter
      const edit = ContextEditing.clearToolUses({ trigger: 1_000_000, keep: 1 })
      const apply = (messages: ReadonlyArray<Prompt.Message>) =>
        edit.apply(messages, { systemPrompt }).pipe(Effect.provideService(TokenCounter.TokenCounter, counter))
      const stored = storedThread(50)
      // the run before: its input and answer after the stored messages
      yield* apply([...stored, user("first question"), Messages.assistant("first answer")])
      measured.length = 0
      // this run: its own input after the same stored messages
      const forked = [...stored, user("second question")]
      const out = yield* apply(forked)
      const items = measured.reduce((a, b) => a + b, 0)
      assert.isAtMost(items, 2, `measured ${items} items`)
      assert.deepStrictEqual(
        out,
        yield* ContextEditing.clearToolUses({ trigger: 1_000_000, keep: 1 }).apply(forked, {
          systemPrompt
        }).pipe(Effect.provideService(TokenCounter.TokenCounter, counter))
      )
    }))

  it.effect("the summarization trigger measures only the messages after the stored ones, not the thread again", () =>
    Effect.gen(function*() {
      const { counter, measured } = yield* recordingCounter
      const summarization = (yield* Middleware.build(
        Summarization.middleware({ trigger: { tokens: 1_000_000 }, keep: { messages: 2 } })
      )) as Middleware.Any
      const check = (messages: ReadonlyArray<Prompt.Message>) =>
        beforeModel(summarization, messages, 0).pipe(Effect.provideService(TokenCounter.TokenCounter, counter))
      const stored = storedThread(50)
      yield* check([...stored, user("first question"), Messages.assistant("first answer")])
      measured.length = 0
      yield* check([...stored, user("second question")])
      const items = measured.reduce((a, b) => a + b, 0)
      assert.isAtMost(items, 2, `measured ${items} items`)
    }).pipe(Effect.provide(Summarization.layer(summarizer))))

  it.effect("in the agent loop, each run on a stored thread measures its new messages only", () =>
    Effect.gen(function*() {
      const { counter, measured } = yield* recordingCounter
      const checkpointer = yield* Checkpointer.makeMemory
      const stored = storedThread(100)
      const checkpoint = { version: 1, threadId: "t", messages: AgentState.encodeMessages(stored), slices: {} }
      const agent = yield* Agent.make({
        middleware: [
          ContextEditing.middleware({
            edits: [ContextEditing.clearToolUses({ trigger: 1_000_000 })],
            tokenCountMethod: "model"
          }),
          Summarization.middleware({ trigger: { tokens: 1_000_000 }, keep: { messages: 2 } })
        ]
      }).pipe(
        Effect.provideService(Checkpointer.Checkpointer, checkpointer),
        Effect.provideService(TokenCounter.TokenCounter, counter),
        Effect.provide(Summarization.layer(summarizer))
      )
      const runs = ["first", "second", "third"]
      const perRun: Array<number> = []
      for (const question of runs) {
        // each run starts from the same stored thread, as an app resuming the conversation does
        yield* checkpointer.save("t", checkpoint as any)
        measured.length = 0
        const result = yield* agent.run(question, { threadId: "t" }).pipe(
          Effect.provideService(TokenCounter.TokenCounter, counter)
        )
        assert.strictEqual(result._tag, "Completed")
        perRun.push(measured.reduce((a, b) => a + b, 0))
      }
      // the first run measures the thread (201 messages) for each policy; the later ones their input only
      assert.isAbove(perRun[0]!, 200)
      for (const items of perRun.slice(1)) assert.isAtMost(items, 6, `measured ${perRun.join(", ")} items`)
    }).pipe(
      Effect.provide(ScriptedModel.layer([ScriptedModel.text("a"), ScriptedModel.text("b"), ScriptedModel.text("c")]))
    ))
})

describe("the policies' work at each step of the agent loop", () => {
  const Search = Tool.make("search", { parameters: { q: Schema.String }, success: Schema.String })
  const Tools = Toolkit.make(Search)
  const toolsLive = Tools.toLayer({ search: ({ q }) => Effect.succeed(`${q}:` + "x".repeat(300)) })

  it.effect("each model call of a run measures only the messages added since the one before, not the thread", () =>
    Effect.gen(function*() {
      const { counter, measured } = yield* recordingCounter
      const checkpointer = yield* Checkpointer.makeMemory
      const stored = storedThread(100)
      const checkpoint = { version: 1, threadId: "t", messages: AgentState.encodeMessages(stored), slices: {} }
      /** At each model call, after both policies looked at it: the items measured so far and the messages sent. */
      const calls: Array<{ readonly measured: number; readonly messages: number }> = []
      const spy = Middleware.make({
        name: "spy",
        wrapModelCall: (request, next) =>
          Effect.suspend(() => {
            calls.push({ measured: measured.reduce((a, b) => a + b, 0), messages: request.messages.length })
            return next(request)
          })
      })
      const steps = 6
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [
          ContextEditing.middleware({
            edits: [ContextEditing.clearToolUses({ trigger: 1_000_000 })],
            tokenCountMethod: "model"
          }),
          Summarization.middleware({ trigger: { tokens: 1_000_000 }, keep: { messages: 2 } }),
          spy
        ]
      }).pipe(
        Effect.provideService(Checkpointer.Checkpointer, checkpointer),
        Effect.provideService(TokenCounter.TokenCounter, counter),
        Effect.provide(Summarization.layer(summarizer))
      )
      for (const question of ["first", "second"]) {
        yield* checkpointer.save("t", checkpoint as any)
        measured.length = 0
        calls.length = 0
        const result = yield* agent.run(question, { threadId: "t" }).pipe(
          Effect.provideService(TokenCounter.TokenCounter, counter)
        )
        assert.strictEqual(result._tag, "Completed")
        assert.strictEqual(calls.length, steps + 1)
        // the first run measures the stored thread once per policy; each later call, only what it added
        if (question === "first") assert.isAbove(calls[0]!.measured, stored.length)
        for (let k = 1; k < calls.length; k++) {
          const added = calls[k]!.messages - calls[k - 1]!.messages
          const items = calls[k]!.measured - calls[k - 1]!.measured
          assert.strictEqual(added, 2)
          // two policies, each measuring the messages added (never the thread)
          assert.isAtMost(items, 2 * added, `call ${k} of the ${question} run measured ${items} items`)
        }
      }
    }).pipe(
      Effect.provide(toolsLive),
      Effect.provide(ScriptedModel.layer(["first", "second"].flatMap((question) => [
        ...Array.from(
          { length: 6 },
          (_, i) => ScriptedModel.toolCalls([{ name: "search", params: { q: `${question}${i}` }, id: `c${i}` }])
        ),
        ScriptedModel.text("done")
      ])))
    ))
})

// ---------------------------------------------------------------------------
// incremental = whole thread
// ---------------------------------------------------------------------------

/** How the message list changes between two model calls. */
type Change =
  | { readonly _tag: "step"; readonly results: number; readonly size: number }
  | { readonly _tag: "user" }
  | { readonly _tag: "open" }
  | { readonly _tag: "orphan"; readonly size: number }
  | { readonly _tag: "fork"; readonly at: number }
  | { readonly _tag: "edit"; readonly at: number }
  | { readonly _tag: "drop"; readonly at: number }
  | { readonly _tag: "replace" }
  | { readonly _tag: "again" }
  | { readonly _tag: "late"; readonly size: number }
  | { readonly _tag: "retry"; readonly back: number; readonly size: number }

const change: FastCheck.Arbitrary<Change> = FastCheck.oneof(
  {
    weight: 5,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("step" as const),
      results: FastCheck.integer({ min: 1, max: 3 }),
      size: FastCheck.nat({ max: 400 })
    })
  },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("user" as const) }) },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("open" as const) }) },
  {
    weight: 1,
    arbitrary: FastCheck.record({ _tag: FastCheck.constant("orphan" as const), size: FastCheck.nat({ max: 400 }) })
  },
  { weight: 2, arbitrary: FastCheck.record({ _tag: FastCheck.constant("fork" as const), at: FastCheck.nat() }) },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("edit" as const), at: FastCheck.nat() }) },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("drop" as const), at: FastCheck.nat() }) },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("replace" as const) }) },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("again" as const) }) },
  {
    weight: 1,
    arbitrary: FastCheck.record({ _tag: FastCheck.constant("late" as const), size: FastCheck.nat({ max: 400 }) })
  },
  {
    weight: 2,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("retry" as const),
      back: FastCheck.nat(),
      size: FastCheck.nat({ max: 400 })
    })
  }
)

/**
 * The next message list: a tool step appended as the agent appends it
 * (`AgentState.appendToolResults`, which records what it was made from), a
 * user message, a call left open, an orphan result; a run forking the
 * thread (its input after the first messages), a message edited or dropped
 * by another middleware, the list replaced (a summary), or the same list
 * again; a late result added as the agent adds it (to the last tool message,
 * or as one), or a result added to an earlier list the agent made (a fork it
 * records). `before`: the lists so far, oldest first.
 */
const next = (
  messages: ReadonlyArray<Prompt.Message>,
  change: Change,
  n: number,
  before: ReadonlyArray<ReadonlyArray<Prompt.Message>>
): ReadonlyArray<Prompt.Message> => {
  switch (change._tag) {
    case "late":
      return AgentState.appendToolResults(messages, [
        Messages.toolResult(`late${n}`, "search", "z".repeat(change.size))
      ])
    case "retry": {
      const base = before[before.length - 1 - change.back % before.length]!
      return AgentState.appendToolResults(base, [Messages.toolResult(`retry${n}`, "search", "r".repeat(change.size))])
    }
    case "step": {
      const ids = Array.from({ length: change.results }, (_, i) => `c${n}_${i}`)
      const withCall = [...messages, Messages.calls(...ids.map((id) => Messages.toolCall(id, "search", { q: id })))]
      return AgentState.appendToolResults(
        withCall,
        ids.map((id) => Messages.toolResult(id, "search", `${id}:` + "y".repeat(change.size)))
      )
    }
    case "user":
      return [...messages, user(`question ${n}`)]
    case "open":
      return [...messages, call(`open${n}`)]
    case "orphan":
      return [...messages, result(`ghost${n}`, change.size)]
    case "fork":
      return [...messages.slice(0, 1 + change.at % messages.length), user(`resumed ${n}`)]
    case "edit": {
      const at = change.at % messages.length
      return messages.map((message, i) => i === at && i > 0 ? user(`edited ${n}`) : message)
    }
    case "drop": {
      const at = change.at % messages.length
      return at === 0 ? messages : messages.filter((_, i) => i !== at)
    }
    case "replace":
      return [user(`summary ${n}`), ...messages.slice(-2)]
    case "again":
      return messages
  }
}

const histories = {
  first: Arbitraries.conversation({ maxTurns: 3, maxResultSize: 200 }),
  changes: FastCheck.array(change, { minLength: 1, maxLength: 14 })
}

const propertyOptions = { fastCheck: { numRuns: 80 } }

describe("incremental context policies", () => {
  it.effect.prop(
    "ClearToolUses remembering a thread through appended steps, forks, edits and replacements gives what a fresh edit gives",
    {
      ...histories,
      trigger: FastCheck.nat({ max: 3000 }),
      keep: FastCheck.nat({ max: 3 }),
      clearAtLeast: FastCheck.constantFrom(0, 50, 400),
      clearToolInputs: FastCheck.boolean()
    },
    ({ changes, clearAtLeast, clearToolInputs, first, keep, trigger }) =>
      Effect.gen(function*() {
        const options = { trigger: trigger + 1, keep, clearAtLeast, clearToolInputs }
        const remembering = ContextEditing.clearToolUses(options)
        let messages: ReadonlyArray<Prompt.Message> = [user("start"), ...first]
        const before: Array<ReadonlyArray<Prompt.Message>> = [messages]
        for (const [n, step] of changes.entries()) {
          messages = next(messages, step, n, before)
          before.push(messages)
          const remembered = yield* remembering.apply(messages, { systemPrompt })
          const fresh = yield* ContextEditing.clearToolUses(options).apply(messages, { systemPrompt })
          assert.deepStrictEqual(remembered, fresh)
        }
      }).pipe(Effect.provide(TokenCounter.layerApproximate())),
    propertyOptions
  )

  it.effect.prop(
    "Offload remembering a thread through appended steps, forks, edits and replacements sends what a fresh one sends",
    {
      ...histories,
      maxResultChars: FastCheck.integer({ min: 20, max: 300 }),
      maxResultTokens: FastCheck.option(FastCheck.integer({ min: 5, max: 80 }), { nil: undefined }),
      keepCalls: FastCheck.nat({ max: 2 })
    },
    ({ changes, first, keepCalls, maxResultChars, maxResultTokens }) =>
      Effect.gen(function*() {
        const options = { maxResultChars, maxResultTokens, maxArgChars: 8, keepCalls }
        const reply = Middleware.modelResponse("ok")
        /** What `wrap` sends the model for `messages`, with the texts it put in `store`. */
        const send = (
          wrap: NonNullable<ReturnType<typeof Offload.middleware>["wrapModelCall"]>,
          store: Offload.OffloadStore.Service,
          messages: ReadonlyArray<Prompt.Message>,
          step: number
        ) =>
          Effect.gen(function*() {
            let sent: ReadonlyArray<Prompt.Message> = []
            const request: Middleware.ModelRequest = {
              messages,
              systemPrompt,
              tools: [],
              toolChoice: "auto",
              model: undefined,
              context: Context.empty(),
              state: {},
              threadId: "t",
              incarnation: "5f0c2a9e81d3b746",
              step
            }
            yield* wrap(request, (request) =>
              Effect.sync(() => {
                sent = request.messages
                return reply
              })).pipe(Effect.provideService(Offload.OffloadStore, store), Effect.scoped)
            return sent
          })
        const remembering = Offload.middleware(options).wrapModelCall!
        const kept = yield* Offload.makeMemory
        let messages: ReadonlyArray<Prompt.Message> = [user("start"), ...first]
        const before: Array<ReadonlyArray<Prompt.Message>> = [messages]
        for (const [n, step] of changes.entries()) {
          messages = next(messages, step, n, before)
          before.push(messages)
          const sent = yield* send(remembering, kept, messages, n)
          const freshStore = yield* Offload.makeMemory
          const fresh = yield* send(Offload.middleware(options).wrapModelCall!, freshStore, messages, n)
          assert.deepStrictEqual(sent, fresh)
          // every text the fresh view offloads, the remembering one has put in its store (at this call or before)
          for (const ref of new Set(JSON.stringify(fresh).match(/ofl_[0-9a-f]{16}/g) ?? [])) {
            assert.deepStrictEqual(yield* kept.get(ref), yield* freshStore.get(ref))
          }
        }
      }).pipe(Effect.provide(TokenCounter.layerApproximate())),
    propertyOptions
  )

  it.effect.prop(
    "what is sent of a thread, measured incrementally through appended steps, forks, edits and replacements, is what it is measured whole",
    histories,
    ({ changes, first }) =>
      Effect.gen(function*() {
        const counter = yield* TokenCounter.makeApproximate()
        // as Summarization keeps it
        const cache = HistoryCache.make({ init: Sent.unknown, truncate: Sent.truncate })
        const sentOf = (messages: ReadonlyArray<Prompt.Message>) =>
          cache.use(counter, messages, ({ state, sums }) =>
            Effect.suspend(() => {
              const stored = Sent.ifStored(messages, sums, state)
              return stored !== undefined ? Effect.succeed(stored) : Sent.measure(counter, messages, sums, state)
            }))
        let messages: ReadonlyArray<Prompt.Message> = [user("start"), ...first]
        const before: Array<ReadonlyArray<Prompt.Message>> = [messages]
        for (const [n, step] of changes.entries()) {
          messages = next(messages, step, n, before)
          before.push(messages)
          const sent = AgentState.paired(messages)
          const incremental = yield* sentOf(messages)
          assert.deepStrictEqual(incremental, { raw: yield* counter.count(sent), length: sent.length })
        }
      }),
    propertyOptions
  )

  it.effect.prop(
    "what is sent of a thread, paired chunk by chunk as it is measured, is what it is measured whole",
    {
      ...histories,
      chunk: FastCheck.integer({ min: 1, max: 7 }),
      stopAfter: FastCheck.option(FastCheck.nat(), { nil: undefined })
    },
    ({ changes, chunk, first, stopAfter }) =>
      Effect.gen(function*() {
        const counter = yield* TokenCounter.makeApproximate()
        // as Summarization keeps it, with chunks small enough that a short thread is measured in many
        const cache = HistoryCache.make({ init: Sent.unknown, truncate: Sent.truncate, measured: Sent.scanned, chunk })
        const sentOf = (messages: ReadonlyArray<Prompt.Message>) =>
          cache.use(counter, messages, ({ state, sums }) =>
            Effect.suspend(() => {
              const stored = Sent.ifStored(messages, sums, state)
              return stored !== undefined ? Effect.succeed(stored) : Sent.measure(counter, messages, sums, state)
            }))
        let messages: ReadonlyArray<Prompt.Message> = [user("start"), ...first]
        const before: Array<ReadonlyArray<Prompt.Message>> = [messages]
        for (const [n, step] of changes.entries()) {
          messages = next(messages, step, n, before)
          before.push(messages)
          const sent = AgentState.paired(messages)
          assert.deepStrictEqual(yield* sentOf(messages), { raw: yield* counter.count(sent), length: sent.length })
        }
        // a thread paired only in part (a measure that stopped between chunks): what is sent of it is still
        // what it is measured whole
        const memo = Sent.unknown()
        const sums = [0]
        for (const raw of yield* counter.measure(messages)) sums.push(sums[sums.length - 1]! + raw)
        const end = stopAfter === undefined ? messages.length : stopAfter % (messages.length + 1)
        for (let from = 0; from < end; from += chunk) Sent.scanned(memo, messages, from, Math.min(end, from + chunk))
        const sent = AgentState.paired(messages)
        assert.deepStrictEqual(yield* Sent.measure(counter, messages, sums, memo), {
          raw: yield* counter.count(sent),
          length: sent.length
        })
      }),
    propertyOptions
  )

  it.effect("a first call on a long thread, measured in chunks, fires the trigger exactly at what the model is sent", () =>
    Effect.gen(function*() {
      const counter = yield* TokenCounter.makeApproximate()
      // more messages than a chunk, with a call left open and an orphan result past the first chunks
      const thread: Array<Prompt.Message> = [user("look things up")]
      for (let i = 0; i < 700; i++) thread.push(call(`s${i}`), result(`s${i}`, 20))
      thread.splice(900, 0, call("open"))
      thread.splice(1200, 0, result("ghost", 50))
      thread.push(Messages.assistant("done"))
      assert.isAbove(thread.length, 2 * HistoryCache.chunk)
      const tokens = yield* counter.count(AgentState.paired(thread))
      assert.notStrictEqual(tokens, yield* counter.count(thread))
      for (const [trigger, fires] of [[tokens, true], [tokens + 1, false]] as const) {
        const summarization = yield* (Middleware.build(
          Summarization.middleware({ trigger: { tokens: trigger }, keep: { messages: 1 } })
        ) as unknown as Effect.Effect<Middleware.Any>)
        // a fresh copy of the thread each time (nothing remembered of it)
        const update = yield* beforeModel(summarization, thread.map((message) => ({ ...message })), 0)
        assert.strictEqual(update !== undefined, fires, `trigger ${trigger} (sent: ${tokens} tokens)`)
      }
    }).pipe(
      Effect.provideService(TokenCounter.TokenCounter, Effect.runSync(TokenCounter.makeApproximate())),
      Effect.provide(Summarization.layer(summarizer))
    ))

  it.effect.prop(
    "the summarization trigger fires exactly when what a remembered thread sends reaches it, through forks and edits",
    { ...histories, tokens: FastCheck.integer({ min: 50, max: 4000 }) },
    ({ changes, first, tokens }) =>
      Effect.gen(function*() {
        const counter = yield* TokenCounter.makeApproximate()
        const make = () =>
          Middleware.build(
            Summarization.middleware({ trigger: { tokens }, keep: { messages: 1 } })
          ) as unknown as Effect.Effect<
            Middleware.Any
          >
        const summarization = yield* make()
        let messages: ReadonlyArray<Prompt.Message> = [user("start"), ...first]
        const before: Array<ReadonlyArray<Prompt.Message>> = [messages]
        for (const [n, step] of changes.entries()) {
          messages = next(messages, step, n, before)
          before.push(messages)
          const update = yield* beforeModel(summarization, messages, n)
          const fresh = yield* beforeModel(yield* make(), messages, n)
          assert.deepStrictEqual(update?.messages, fresh?.messages)
          // it never fires under the trigger
          if ((yield* counter.count(AgentState.paired(messages))) < tokens) assert.isUndefined(update)
          // the loop continues on the summarized thread
          if (update?.messages !== undefined) messages = update.messages
        }
      }).pipe(
        Effect.provideService(TokenCounter.TokenCounter, Effect.runSync(TokenCounter.makeApproximate())),
        Effect.provide(Summarization.layer(summarizer))
      ),
    { fastCheck: { numRuns: 50 } }
  )
})

describe("Sent.pairsAsStored", () => {
  it.prop(
    "tells whether the messages from a message that is not a tool message are sent as stored, as pairing them does",
    { ...histories, from: FastCheck.nat(), end: FastCheck.nat() },
    ({ changes, end, first, from }) => {
      let messages: ReadonlyArray<Prompt.Message> = [user("start"), ...first]
      const before: Array<ReadonlyArray<Prompt.Message>> = [messages]
      for (const [n, step] of changes.entries()) {
        messages = next(messages, step, n, before)
        before.push(messages)
      }
      // also a thread starting with tool messages, and one with a call answered twice
      for (
        const thread of [
          messages,
          [result("c0", 1), ...messages],
          [...messages, call("dup"), result("dup", 1), result("dup", 1)],
          [...messages, Prompt.makeMessage("tool", { content: [] })]
        ]
      ) {
        let start = from % thread.length
        while (start > 0 && thread[start]!.role === "tool") start--
        const slice = thread.slice(start)
        assert.strictEqual(Sent.pairsAsStored(thread, start), AgentState.paired(slice) === slice)
        // up to any message
        const to = start + end % (thread.length - start + 1)
        const part = thread.slice(start, to)
        assert.strictEqual(Sent.pairsAsStored(thread, start, to), AgentState.paired(part) === part)
      }
    },
    { fastCheck: { numRuns: 300 } }
  )
})
