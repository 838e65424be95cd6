import type { Prompt } from "@effect/ai"
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { KeyValueStore } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware, TokenCounter } from "@stepwise-agent/core"
import { Arbitraries, Messages, ScriptedModel } from "@stepwise-agent/testing"
import { Context, Effect, FastCheck, Layer, Option, Schema } from "effect"
import * as Offload from "../src/Offload.js"
import * as Workspace from "../src/Workspace.js"

// ---------------------------------------------------------------------------
// fixtures
// ---------------------------------------------------------------------------

/** A page of 12000 characters with non-ASCII text and both kinds of line ends, so a round trip must be exact. */
const bigPage = Array.from(
  { length: 400 },
  (_, i) => `line ${i}: café ✓ 𝄞 ${"x".repeat(i % 7)}${i % 2 ? "\r\n" : "\n"}`
)
  .join("")
  .padEnd(12_000, "é")

const Fetch = Tool.make("fetch_page", {
  parameters: { url: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(Fetch)
const ToolsLive = Tools.toLayer({ fetch_page: () => Effect.succeed(bigPage) })

const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

const refIn = (request: ScriptedModel.Request): string => {
  const match = /(ofl_[0-9a-f]{16})/.exec(JSON.stringify(request.prompt.content))
  assert.isNotNull(match, "the model saw no reference")
  return match![1]!
}

/** Reads the reference shown in the last request in pages of `limit`, then stops. */
const readBackScript = (limit: number): Array<ScriptedModel.Turn> => {
  const pages = Math.ceil(bigPage.length / limit)
  return [
    ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "https://example.com" }, id: "f" }]),
    ...Array.from(
      { length: pages },
      (_, i): ScriptedModel.Turn => (request) =>
        ScriptedModel.toolCalls([{
          name: "read_offloaded",
          params: { ref: refIn(request), offset: i * limit, limit },
          id: `r${i}`
        }])
    ),
    ScriptedModel.text("read it all")
  ]
}

const setup = (script: ReadonlyArray<ScriptedModel.Turn>, options?: Offload.Options) =>
  Effect.gen(function*() {
    const model = yield* ScriptedModel.make(script)
    const agent = yield* Agent.make({ toolkit: Tools, middleware: [Offload.middleware(options)] }).pipe(
      Effect.provide(ToolsLive),
      Effect.provideService(LanguageModel.LanguageModel, model.model)
    )
    return { agent, requests: model.recorder.requests }
  })

/** A run that fetches the big page once, with results over 4000 characters offloaded. */
const fetchOnce = Effect.flatMap(
  setup([
    ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "u" }, id: "f" }]),
    ScriptedModel.text("ok")
  ], { maxResultChars: 4000 }),
  ({ agent }) => agent.run("go", { threadId: "t" })
)

/** The stored thread `threadId` (its id and incarnation), from the agent's checkpointer. */
const storedThread = (threadId: string) =>
  Effect.flatMap(
    Checkpointer.Checkpointer,
    (checkpointer) =>
      Effect.map(checkpointer.load(threadId), (checkpoint): Offload.Thread => ({
        threadId,
        incarnation: Option.getOrThrow(checkpoint).incarnation
      }))
  )

const pagesOf = (messages: ReadonlyArray<Prompt.Message>) =>
  toolResults(messages).filter((part) => part.name === "read_offloaded").map((part) => part.result as Offload.Page)

// ---------------------------------------------------------------------------
// the middleware in an agent
// ---------------------------------------------------------------------------

describe("Offload", () => {
  it.effect("a large tool result is shown as a reference with a preview and read back byte-exact in pages", () =>
    Effect.gen(function*() {
      const { agent, requests } = yield* setup(readBackScript(5000), { maxResultChars: 4000, previewChars: 100 })
      const result = yield* agent.run("fetch it", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      // the stored thread keeps the whole result
      assert.strictEqual(toolResults(result.state.messages).find((p) => p.id === "f")!.result, bigPage)
      // the model saw the reference with the head and the tail
      const seen = toolResults((yield* requests)[1]!.prompt.content).find((p) => p.id === "f")!
      const ref = Offload.referenceOf(yield* storedThread("t"), bigPage)
      assert.deepStrictEqual(Offload.offloadedRef(seen), Option.some(ref))
      assert.strictEqual(seen.result, Offload.referenceText(bigPage, ref, 100))
      assert.isTrue((seen.result as string).startsWith(`[Tool result offloaded: ${bigPage.length} characters`))
      assert.isTrue((seen.result as string).endsWith(bigPage.slice(-100)))
      // the pages put back together are the result, byte for byte
      const pages = pagesOf(result.state.messages)
      assert.strictEqual(pages.length, 3)
      assert.strictEqual(pages.map((page) => page.text).join(""), bigPage)
      assert.deepStrictEqual(pages.map((page) => [page.offset, page.end, page.total]), [
        [0, 5000, 12000],
        [5000, 10000, 12000],
        [10000, 12000, 12000]
      ])
    }).pipe(Effect.provide(Checkpointer.layerMemory)))

  it.effect("a result under the size, and a result of an excluded tool, are shown whole", () =>
    Effect.gen(function*() {
      const under = yield* setup([
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "u" }, id: "f" }]),
        ScriptedModel.text("ok")
      ])
      yield* under.agent.run("go", { threadId: "t" })
      assert.strictEqual(toolResults((yield* under.requests)[1]!.prompt.content)[0]!.result, bigPage)
      const excluded = yield* setup([
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "u" }, id: "f" }]),
        ScriptedModel.text("ok")
      ], { maxResultChars: 4000, excludeTools: ["fetch_page"] })
      yield* excluded.agent.run("go", { threadId: "t" })
      assert.strictEqual(toolResults((yield* excluded.requests)[1]!.prompt.content)[0]!.result, bigPage)
    }))

  it.effect("a reference the store has lost is read from the thread (a new process with a new memory store)", () =>
    Effect.gen(function*() {
      const first = yield* setup([
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "u" }, id: "f" }]),
        ScriptedModel.text("fetched")
      ], { maxResultChars: 4000 })
      yield* first.agent.run("go", { threadId: "t" })
      const ref = Offload.referenceOf(yield* storedThread("t"), bigPage)
      // another agent (another middleware, so another memory store) continues the thread from its checkpoint
      const second = yield* setup([
        ScriptedModel.toolCalls([{ name: "read_offloaded", params: { ref, limit: 20_000 }, id: "r" }]),
        ScriptedModel.toolCalls([{ name: "read_offloaded", params: { ref: "ofl_0000000000000000" }, id: "bad" }]),
        ScriptedModel.text("done")
      ], { maxResultChars: 4000 })
      const result = yield* second.agent.run("read it", { threadId: "t" })
      assert.strictEqual(pagesOf(result.state.messages)[0]!.text, bigPage)
      const bad = toolResults(result.state.messages).find((p) => p.id === "bad")!
      assert.isTrue(bad.isFailure)
      assert.deepStrictEqual(bad.result, {
        error: "Nothing was offloaded under the reference \"ofl_0000000000000000\""
      })
    }).pipe(Effect.provide(Checkpointer.layerMemory)))

  it.effect("the store can be the workspace: the text is a file the file tools can reach", () =>
    Effect.gen(function*() {
      yield* fetchOnce
      const workspace = yield* Workspace.Workspace
      assert.strictEqual(
        yield* workspace.read(`/offloaded/${Offload.referenceOf(yield* storedThread("t"), bigPage)}.txt`),
        bigPage
      )
    }).pipe(
      Effect.provide(Offload.layerWorkspace().pipe(Layer.provideMerge(Workspace.layerMemory()))),
      Effect.provide(Checkpointer.layerMemory)
    ))

  it.effect("a reference that is not one the module makes (a path) is refused before the store is read", () =>
    Effect.gen(function*() {
      const workspace = yield* Workspace.Workspace
      yield* workspace.write("/notes/secret.txt", "not for the model")
      const { agent } = yield* setup([
        ScriptedModel.toolCalls([{ name: "read_offloaded", params: { ref: "../notes/secret" }, id: "probe" }]),
        ScriptedModel.text("done")
      ])
      const result = yield* agent.run("go", { threadId: "t" })
      const probe = toolResults(result.state.messages).find((p) => p.id === "probe")!
      assert.isTrue(probe.isFailure)
      assert.notInclude(JSON.stringify(probe.result), "not for the model")
    }).pipe(
      Effect.provide(Offload.layerWorkspace().pipe(Layer.provideMerge(Workspace.layerMemory())))
    ))

  it.effect("the store can be a KeyValueStore", () =>
    Effect.gen(function*() {
      yield* fetchOnce
      const kv = yield* KeyValueStore.KeyValueStore
      assert.deepStrictEqual(
        yield* kv.get(`offload/${Offload.referenceOf(yield* storedThread("t"), bigPage)}`),
        Option.some(JSON.stringify(bigPage))
      )
    }).pipe(
      Effect.provide(Offload.layerKeyValueStore().pipe(Layer.provideMerge(KeyValueStore.layerMemory))),
      Effect.provide(Checkpointer.layerMemory)
    ))

  it.effect("long arguments of calls older than the last keepCalls are cut in the view, not in the thread", () =>
    Effect.gen(function*() {
      const long = "q".repeat(50)
      const { agent, requests } = yield* setup([
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: long }, id: "c1" }]),
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: long }, id: "c2" }]),
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: long }, id: "c3" }]),
        ScriptedModel.text("done")
      ], { maxArgChars: 10, keepCalls: 2 })
      const result = yield* agent.run("go", { threadId: "t" })
      const callsIn = (messages: ReadonlyArray<Prompt.Message>) =>
        messages.flatMap((m) => m.role === "assistant" ? m.content.filter((p) => p.type === "tool-call") : [])
          .map((p) => [p.id, (p.params as { url: string }).url])
      const last = (yield* requests).at(-1)!
      assert.deepStrictEqual(callsIn(last.prompt.content), [
        ["c1", "qqqqqqqqqq... [40 characters cut]"],
        ["c2", long],
        ["c3", long]
      ])
      assert.deepStrictEqual(callsIn(result.state.messages), [["c1", long], ["c2", long], ["c3", long]])
    }))

  it.effect("a long argument under a key named __proto__ or constructor is cut like any other, and stays a key", () =>
    Effect.gen(function*() {
      const long = "q".repeat(50)
      // what a provider's JSON.parse gives: `__proto__` an own key
      const params = JSON.parse(
        JSON.stringify({ url: "u", nested: { constructor: long } }).replace("}}", `},"__proto__":"${long}"}`)
      )
      const { agent, requests } = yield* setup([
        ScriptedModel.toolCalls([{ name: "fetch_page", params, id: "c1" }]),
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "u" }, id: "c2" }]),
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "u" }, id: "c3" }]),
        ScriptedModel.text("done")
      ], { maxArgChars: 10, keepCalls: 2 })
      yield* agent.run("go", { threadId: "t" })
      const last = (yield* requests).at(-1)!
      const call = last.prompt.content.flatMap((m) => m.role === "assistant" ? m.content : [])
        .find((p) => p.type === "tool-call" && p.id === "c1") as Prompt.ToolCallPart
      const cut = "qqqqqqqqqq... [40 characters cut]"
      assert.deepStrictEqual(Object.keys(call.params as object), ["url", "nested", "__proto__"])
      assert.strictEqual(Object.getPrototypeOf(call.params), Object.prototype)
      assert.strictEqual(Object.getOwnPropertyDescriptor(call.params, "__proto__")?.value, cut)
      assert.deepStrictEqual((call.params as { nested: object }).nested, { constructor: cut })
    }))

  it.effect("with maxResultTokens, a result over that many tokens by the agent's TokenCounter is offloaded", () =>
    Effect.gen(function*() {
      const small = "s".repeat(2000) // 500 tokens at 4 characters a token
      const SmallTools = Toolkit.make(Fetch, Tool.make("small", { success: Schema.String }))
      const model = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([
          { name: "fetch_page", params: { url: "u" }, id: "big" },
          { name: "small", params: {}, id: "small" }
        ]),
        ScriptedModel.text("ok")
      ])
      const agent = yield* Agent.make({
        toolkit: SmallTools,
        middleware: [Offload.middleware({ maxResultTokens: 1000 })]
      }).pipe(
        Effect.provide(
          SmallTools.toLayer({ fetch_page: () => Effect.succeed(bigPage), small: () => Effect.succeed(small) })
        ),
        Effect.provide(TokenCounter.layerApproximate()),
        Effect.provideService(LanguageModel.LanguageModel, model.model)
      )
      yield* agent.run("go", { threadId: "t" })
      const seen = toolResults((yield* model.recorder.requests)[1]!.prompt.content)
      assert.deepStrictEqual(seen.map((part) => Option.isSome(Offload.offloadedRef(part))), [true, false])
      assert.strictEqual(seen[1]!.result, small)
    }))

  it.effect("bad options fail Agent.make naming the option", () =>
    Effect.gen(function*() {
      const model = yield* ScriptedModel.make([])
      const error = yield* Agent.make({ middleware: [Offload.middleware({ keepCalls: -1 })] }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model.model),
        Effect.flip
      )
      assert.strictEqual(error._tag, "InvalidOptions")
      assert.include(error.message, "keepCalls")
    }))
})

// ---------------------------------------------------------------------------
// properties of the view
// ---------------------------------------------------------------------------

const idsOf = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.map((m) =>
    m.role === "assistant" || m.role === "tool"
      ? m.content.flatMap((p) => p.type === "tool-call" || p.type === "tool-result" ? [`${p.type}:${p.id}`] : [])
      : []
  )

describe("Offload.view", () => {
  const options: Offload.Options = { maxResultChars: 120, previewChars: 20, maxArgChars: 8, keepCalls: 2 }

  it.prop(
    "keeps every message, part and call/result pairing, and is its own fixed point",
    [Arbitraries.conversation({ maxResultSize: 400 })],
    ([messages]) => {
      const shown = Offload.view({ threadId: "t" }, messages, options).messages
      assert.strictEqual(shown.length, messages.length)
      assert.deepStrictEqual(shown.map((m) => m.role), messages.map((m) => m.role))
      assert.deepStrictEqual(idsOf(shown), idsOf(messages))
      assert.deepStrictEqual(Arbitraries.problems(shown), [])
      assert.strictEqual(Offload.view({ threadId: "t" }, shown, options).messages, shown)
    }
  )

  it.effect.prop(
    "the middleware, called on a growing thread (the same message objects), sends what the view of each call is",
    [Arbitraries.conversation({ maxResultSize: 400, maxTurns: 4 })],
    ([messages]) =>
      Effect.gen(function*() {
        const wrap = Offload.middleware(options).wrapModelCall!
        for (let n = 1; n <= messages.length; n++) {
          const history = messages.slice(0, n)
          let sent: ReadonlyArray<Prompt.Message> = []
          yield* wrap(
            {
              messages: history,
              systemPrompt: undefined,
              tools: [],
              toolChoice: "auto",
              model: undefined,
              context: Context.empty(),
              state: {},
              threadId: "t",
              step: n
            },
            (request) => Effect.sync(() => (sent = request.messages, Middleware.modelResponse("ok")))
          ).pipe(Effect.scoped)
          assert.deepStrictEqual(sent, Offload.view({ threadId: "t" }, history, options).messages)
        }
      }),
    { fastCheck: { numRuns: 30 } }
  )

  it.prop(
    "offload round-trips byte-exact: every offloaded text is the result, under its reference",
    [Arbitraries.conversation({ minResultSize: 100, maxResultSize: 400 })],
    ([messages]) => {
      const { messages: shown, offloaded } = Offload.view({ threadId: "t" }, messages, options)
      const original = new Map(toolResults(messages).map((p) => [p.id, p]))
      for (const part of toolResults(shown)) {
        const ref = Offload.offloadedRef(part)
        const before = original.get(part.id)!
        const text = Offload.textOf(before.result)
        if (Option.isNone(ref)) {
          assert.isAtMost(text.length, 120)
          assert.strictEqual(part, before)
        } else {
          assert.strictEqual(offloaded.get(ref.value), text)
          assert.strictEqual(ref.value, Offload.referenceOf({ threadId: "t" }, text))
        }
      }
    }
  )

  it.prop(
    "a page asked from any offset, one inside a surrogate pair too, holds only whole characters",
    [
      FastCheck.string({ unit: "grapheme", minLength: 1, maxLength: 200 }),
      FastCheck.nat(400),
      FastCheck.integer({
        min: 1,
        max: 50
      })
    ],
    ([content, offset, limit]) => {
      const shown = Offload.page("ofl_0123456789abcdef", content, offset, limit)
      assert.isFalse(/^[\uDC00-\uDFFF]/.test(shown.text), `a page starts with half a pair: ${JSON.stringify(shown)}`)
      assert.isFalse(/[\uD800-\uDBFF]$/.test(shown.text), `a page ends with half a pair: ${JSON.stringify(shown)}`)
      assert.strictEqual(shown.text, content.slice(shown.offset, shown.end))
    }
  )

  it.effect.prop(
    "a store gives back exactly what was put, and read on page by page of any size it comes back whole",
    [FastCheck.string({ unit: "binary", minLength: 2, maxLength: 2000 }), FastCheck.integer({ min: 1, max: 700 })],
    ([content, pageSize]) =>
      Effect.gen(function*() {
        const messages = [
          Messages.user("go"),
          Messages.call("c1", "fetch_page", { url: "u" }),
          Messages.result("c1", "fetch_page", content)
        ]
        const { offloaded } = Offload.view({ threadId: "t" }, messages, { maxResultChars: 1, previewChars: 0 })
        const ref = Offload.referenceOf({ threadId: "t" }, content)
        assert.strictEqual(offloaded.get(ref), content)
        const store = yield* Offload.makeMemory
        yield* store.put(ref, content)
        const stored = yield* store.get(ref)
        let rebuilt = ""
        let next = Offload.page(ref, stored, 0, pageSize)
        for (;;) {
          rebuilt += next.text
          assert.isFalse(/[\uD800-\uDBFF]$/.test(next.text) && next.end < next.total, "a page ends in half a pair")
          if (next.end === next.total) break
          next = Offload.page(ref, stored, next.end, pageSize)
        }
        assert.strictEqual(rebuilt, content)
      })
  )
})
