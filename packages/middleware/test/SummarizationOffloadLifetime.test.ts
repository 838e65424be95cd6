/**
 * The messages a summary evicts to the offload store (`offload: true`) live
 * as long as the thread incarnation that evicted them: `deleteThread`
 * removes them, a thread deleted and made again never reads them, and
 * deleting a fork keeps the texts its source still names.
 */
import type { Prompt } from "@effect/ai"
import { AiError, LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, Checkpointer, Middleware } from "@stepwise-agent/core"
import { Messages, ScriptedModel } from "@stepwise-agent/testing"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Cause, Context, Deferred, Effect, Exit, FastCheck, Fiber, Logger, Option, Schema } from "effect"
import type * as ContextView from "../src/ContextView.js"
import * as ModelRetry from "../src/ModelRetry.js"
import * as Offload from "../src/Offload.js"
import * as Summarization from "../src/Summarization.js"
import { memory, stores, tracked, withStore } from "./support/offloadStores.js"

// ---------------------------------------------------------------------------
// fixtures
// ---------------------------------------------------------------------------

const summarizer = ScriptedModel.make(Array.from({ length: 400 }, () => ScriptedModel.text("a summary")))

const down = new AiError.UnknownError({ module: "test", method: "generateText", description: "the provider is down" })

/** The references named in a text. */
const refsIn = (text: string): Array<string> => text.match(/ofl_[0-9a-f]{16}/g) ?? []

/**
 * A model that answers "read <ref>" by reading that reference whole with `read_offloaded`, and anything else
 * (a tool result too) with "ok".
 */
const reactiveModel = ScriptedModel.make(Array.from({ length: 400 }, () => (request: ScriptedModel.Request) => {
  const last = request.prompt.content.at(-1)!
  const text = last.role === "user" && last.content[0]?.type === "text" ? last.content[0].text : ""
  const [verb, ref] = text.split(" ")
  return verb === "read"
    ? ScriptedModel.toolCalls([{ name: Offload.toolName, params: { ref, limit: 1_000_000 } }])
    : ScriptedModel.text("ok")
}))

/** Summarizes from 6 messages on, keeping the newest: the 4th run on a thread evicts the 3 before it and itself. */
const makeAgent = (mode: Summarization.Mode) =>
  Effect.gen(function*() {
    const { model } = yield* reactiveModel
    const summary = yield* summarizer
    const agent = yield* Agent.make({
      middleware: [
        Summarization.middleware({ trigger: { messages: 6 }, keep: { messages: 1 }, offload: true, mode }),
        Offload.middleware()
      ]
    }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model),
      Effect.provide(Summarization.layer(summary.model))
    )
    /** Four runs on the thread, each saying `<word>-<threadId>`: the last one summarizes the first three. */
    const converse = (threadId: string) =>
      Effect.forEach(
        ["alpha", "beta", "gamma", "delta"],
        (word) => agent.run(`say ${word}-${threadId}`, { threadId }),
        {
          discard: true
        }
      )
    /** The references the thread's summaries name (in its messages, or its summary view). */
    const namedRefs = (threadId: string) =>
      Effect.map(agent.thread(threadId), (thread) => {
        const state = Option.getOrThrow(thread).state as {
          readonly messages: ReadonlyArray<Prompt.Message>
          readonly summaryView?: ContextView.SummaryView | null
        }
        return [
          ...new Set(
            refsIn(JSON.stringify([state.messages.filter(Summarization.isSummary), state.summaryView ?? null]))
          )
        ]
      })
    /** Runs "read <ref>" on the thread: the read_offloaded result. */
    const read = (threadId: string, ref: string) =>
      Effect.map(
        agent.run(`read ${ref}`, { threadId }),
        (result) => result.state.messages.flatMap((message) => message.role === "tool" ? message.content : []).at(-1)!
      )
    return { agent, converse, namedRefs, read }
  })

/** How many of `contents` hold the message `word-threadId`. */
const holding = (contents: ReadonlyArray<string>, word: string) =>
  contents.filter((content) => content.includes(word)).length

const modes: ReadonlyArray<Summarization.Mode> = ["rewrite", "view"]

// ---------------------------------------------------------------------------
// deleteThread
// ---------------------------------------------------------------------------

describe("Summarization offload: deleteThread removes the thread's evicted messages", () => {
  for (const mode of modes) {
    for (const [label, makeStore] of stores) {
      it.effect(
        `${mode} mode, ${label}: after deleteThread the store holds none of its evicted messages; a thread made ` +
          `again cannot read them; other threads' stay`,
        () =>
          withStore(makeStore, (contents) =>
            Effect.gen(function*() {
              const { agent, converse, namedRefs, read } = yield* makeAgent(mode)
              yield* converse("A")
              yield* converse("B")
              const [old] = yield* namedRefs("A")
              assert.isString(old)
              assert.strictEqual(holding(yield* contents, "alpha-A"), 1)
              assert.strictEqual(holding(yield* contents, "alpha-B"), 1)
              // A reads its evicted messages back while it lives
              const own = yield* read("A", old!)
              assert.isFalse(own.isFailure)
              assert.include((own.result as Offload.Page).text, "alpha-A")

              yield* agent.deleteThread("A")
              const after = yield* contents
              assert.strictEqual(holding(after, "alpha-A"), 0)
              assert.strictEqual(holding(after, "alpha-B"), 1, "B's evicted messages stay")
              // made again with the same id, A cannot read the reference its earlier incarnation named
              const refused = yield* read("A", old!)
              assert.isTrue(refused.isFailure)
              assert.notInclude(JSON.stringify(refused.result), "alpha-A")

              yield* agent.deleteThread("A")
              yield* agent.deleteThread("B")
              assert.deepStrictEqual(yield* contents, [])
            })),
        { timeout: 60_000 }
      )
    }
  }

  for (const mode of modes) {
    it.effect(
      `${mode} mode: deleting a fork keeps the texts its source names; deleting the source removes them`,
      () =>
        withStore(memory, (contents) =>
          Effect.gen(function*() {
            const { agent, converse, namedRefs, read } = yield* makeAgent(mode)
            yield* converse("src")
            const [ref] = yield* namedRefs("src")
            assert.isString(ref)
            // after the last reply, with a message of its own: the fork's state starts with the source's slice
            const stored = Option.getOrThrow(yield* agent.thread("src")).state.messages
            const replies = stored.filter((message) => message.role === "assistant").length
            yield* agent.fork("src", {
              to: "fork",
              at: replies,
              edit: { _tag: "Message", message: "say epsilon-fork" }
            })
            assert.include(yield* namedRefs("fork"), ref)
            yield* agent.deleteThread("fork")
            assert.strictEqual(holding(yield* contents, "alpha-src"), 1, "the source's evicted messages stay")
            const again = yield* read("src", ref!)
            assert.isFalse(again.isFailure)
            assert.include((again.result as Offload.Page).text, "alpha-src")
            yield* agent.deleteThread("src")
            assert.deepStrictEqual(yield* contents, [])
          })),
      { timeout: 60_000 }
    )
  }

  it.effect("a store without remove keeps the texts: logged once, naming no text or reference", () =>
    Effect.gen(function*() {
      const memory = yield* Offload.makeMemory
      const keeping: Offload.OffloadStore.Service = { get: memory.get, put: memory.put }
      const logs: Array<string> = []
      const logger = Logger.make(({ message }) => void logs.push(String(message)))
      yield* Effect.gen(function*() {
        const { agent, converse, namedRefs } = yield* makeAgent("rewrite")
        yield* converse("A")
        yield* converse("B")
        const refs = [...yield* namedRefs("A"), ...yield* namedRefs("B")]
        assert.lengthOf(refs, 2)
        yield* Effect.forEach(["A", "B"], (threadId) => agent.deleteThread(threadId), { discard: true }).pipe(
          Effect.provide(Logger.replace(Logger.defaultLogger, logger))
        )
        const warnings = logs.filter((line) => line.includes("Summarization") && line.includes("no remove"))
        assert.strictEqual(warnings.length, 1, JSON.stringify(logs))
        for (const ref of refs) assert.notInclude(logs.join("\n"), ref)
        assert.notInclude(logs.join("\n"), "alpha-")
        assert.isTrue(Option.isSome(yield* Effect.option(memory.get(refs[0]!))), "the store kept the text")
      }).pipe(Effect.provideService(Offload.OffloadStore, keeping))
    }))

  it.effect("a store that fails to remove cannot fail deleteThread: it is logged, without the store's secret", () =>
    Effect.gen(function*() {
      const memory = yield* Offload.makeMemory
      const secret = "sk-proj-Zq8v3Lm2Rt6Yx1Wb9Kd4Hs7Nf0Pc5Ja"
      const failing: Offload.OffloadStore.Service = {
        ...memory,
        remove: (ref) =>
          Effect.fail(
            new Offload.OffloadError({
              reason: "StoreFailed",
              ref,
              detail: `denied for Authorization: Bearer ${secret}`
            })
          )
      }
      const logs: Array<string> = []
      const logger = Logger.make(({ message }) => void logs.push(String(message)))
      yield* Effect.gen(function*() {
        const { agent, converse, namedRefs } = yield* makeAgent("rewrite")
        yield* converse("t")
        const [ref] = yield* namedRefs("t")
        yield* agent.deleteThread("t").pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
        assert.isTrue(Option.isNone(yield* agent.thread("t")))
        assert.isDefined(logs.find((line) => line.includes(ref!)), JSON.stringify(logs))
        assert.notInclude(logs.join("\n"), secret)
      }).pipe(Effect.provideService(Offload.OffloadStore, failing))
    }))

  /** An agent whose model answers from `turns`, summarizing with `options` and offload into `store`. */
  const scriptedAgent = (turns: ReadonlyArray<ScriptedModel.Turn>, options: Summarization.Options) =>
    Effect.gen(function*() {
      const { model } = yield* ScriptedModel.make(turns)
      const summary = yield* summarizer
      return yield* Agent.make({ middleware: [Summarization.middleware({ ...options, offload: true })] }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model),
        Effect.provide(Summarization.layer(summary.model))
      )
    })
  const overflow = ScriptedModel.httpError(
    400,
    { "content-type": "application/json" },
    JSON.stringify(FakeOpenAi.contextLengthExceededBody(128_000, 130_000))
  )

  it.effect("a request compacted after an overflow: its evicted messages are the thread's, removed with it", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const agent = yield* scriptedAgent(
          [ScriptedModel.text("ok"), ScriptedModel.text("ok"), overflow, ScriptedModel.text("ok")],
          { keep: { messages: 1 } }
        )
        for (const word of ["alpha", "beta", "gamma"]) yield* agent.run(`say ${word}-t`, { threadId: "t" })
        assert.isAtLeast(holding(yield* contents, "alpha-t"), 1)
        yield* agent.deleteThread("t")
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("a request compacted after an overflow whose retry fails leaves no text in the store", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const agent = yield* scriptedAgent(
          [ScriptedModel.text("ok"), ScriptedModel.text("ok"), overflow, down],
          { keep: { messages: 1 } }
        )
        for (const word of ["alpha", "beta"]) yield* agent.run(`say ${word}-t`, { threadId: "t" })
        assert.strictEqual((yield* Effect.either(agent.run("say gamma-t", { threadId: "t" })))._tag, "Left")
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("a call retried after its compacted retry failed, and not compacted again, names no evicted text", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const unavailable = ScriptedModel.httpError(503)
        const { model } = yield* ScriptedModel.make([
          ScriptedModel.text("ok"),
          ScriptedModel.text("ok"),
          // the third run: the provider overflows, the compacted retry fails (its text is removed), then the
          // call is retried by ModelRetry and answered without compacting
          overflow,
          unavailable,
          ScriptedModel.text("ok")
        ])
        const summary = yield* summarizer
        const agent = yield* Agent.make({
          middleware: [
            ModelRetry.middleware({ maxRetries: 1, initialDelay: 0, jitter: false }),
            Summarization.middleware({ keep: { messages: 1 }, offload: true })
          ]
        }).pipe(
          Effect.provideService(LanguageModel.LanguageModel, model),
          Effect.provide(Summarization.layer(summary.model))
        )
        for (const word of ["alpha", "beta", "gamma"]) yield* agent.run(`say ${word}-t`, { threadId: "t" })
        const state = Option.getOrThrow(yield* agent.thread("t")).state as Partial<Summarization.OffloadSlice>
        // the answered request was not compacted: the thread names no evicted text, and the store holds none
        assert.deepStrictEqual(state.summaryOffloads?.refs ?? [], [])
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("a model call that fails after the thread was summarized: deleteThread still removes the text", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const agent = yield* scriptedAgent(
          [ScriptedModel.text("ok"), ScriptedModel.text("ok"), down],
          { trigger: { messages: 5 }, keep: { messages: 1 } }
        )
        for (const word of ["alpha", "beta"]) yield* agent.run(`say ${word}-t`, { threadId: "t" })
        assert.strictEqual((yield* Effect.either(agent.run("say gamma-t", { threadId: "t" })))._tag, "Left")
        yield* agent.deleteThread("t")
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("a step that was not saved: its evicted text is removed when the thread runs again", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const agent = yield* scriptedAgent(
          [ScriptedModel.text("ok"), ScriptedModel.text("ok"), down, ScriptedModel.text("ok")],
          { trigger: { messages: 5 }, keep: { messages: 1 } }
        )
        for (const word of ["alpha", "beta"]) yield* agent.run(`say ${word}-t`, { threadId: "t" })
        assert.strictEqual((yield* Effect.either(agent.run("say gamma-t", { threadId: "t" })))._tag, "Left")
        yield* agent.run("say delta-t", { threadId: "t" })
        const state = Option.getOrThrow(yield* agent.thread("t")).state as Partial<Summarization.OffloadSlice>
        const recorded = state.summaryOffloads?.refs ?? []
        // the store holds exactly the texts the thread's state records
        assert.strictEqual((yield* contents).length, recorded.length)
        yield* agent.deleteThread("t")
        assert.deepStrictEqual(yield* contents, [])
      })))
})

// ---------------------------------------------------------------------------
// a run that ends before a save holds its evicted texts
// ---------------------------------------------------------------------------

const Act = Tool.make("act", { parameters: {}, success: Schema.String })
const Acting = Toolkit.make(Act)

/**
 * Two agents on one checkpointer and one offload store, as two processes sharing a thread have, both
 * summarizing from 5 messages with offload: the other answers "fresh"; mine answers from `turns`, made with
 * the other (to delete the thread while mine runs), and its tool `act` runs `act`.
 */
const twoProcesses = (
  mode: Summarization.Mode,
  turns: (other: Agent.Service<any, any, any, any>) => ReadonlyArray<ScriptedModel.Turn>,
  act: (other: Agent.Service<any, any, any, any>) => Effect.Effect<string> = () => Effect.succeed("done")
) =>
  Effect.gen(function*() {
    const checkpointer = yield* Checkpointer.makeMemory
    const summary = yield* summarizer
    const build = (script: ReadonlyArray<ScriptedModel.Turn>, tool: Effect.Effect<string>) =>
      Effect.flatMap(ScriptedModel.make(script), ({ model }) =>
        Agent.make({
          toolkit: Acting,
          middleware: [
            Summarization.middleware({ trigger: { messages: 5 }, keep: { messages: 1 }, offload: true, mode })
          ]
        }).pipe(
          Effect.provide(Acting.toLayer({ act: () => tool })),
          Effect.provideService(LanguageModel.LanguageModel, model),
          Effect.provide(Summarization.layer(summary.model)),
          Effect.provideService(Checkpointer.Checkpointer, checkpointer)
        ))
    const other = yield* build([ScriptedModel.text("fresh")], Effect.succeed("unused"))
    const mine = yield* build(turns(other), Effect.suspend(() => act(other)))
    return { mine, other }
  })

/** Two runs on thread `t` that answer "ok" (4 messages: the third run's summarizes). */
const twoOk = [ScriptedModel.text("ok"), ScriptedModel.text("ok")]

/** The error the run failed with. */
const errorOf = <A>(exit: Exit.Exit<A, unknown>): unknown =>
  Exit.isFailure(exit) ? Cause.squash(exit.cause) : assert.fail("the run succeeded")

describe("Summarization offload: a run that ends before a save holds its evicted texts removes them", () => {
  for (const mode of modes) {
    it.effect(`${mode} mode: the thread deleted by another process while the model answers (ThreadDeleted)`, () =>
      withStore(memory, (contents) =>
        Effect.gen(function*() {
          const { mine, other } = yield* twoProcesses(mode, (other) => [
            ...twoOk,
            () => Effect.as(Effect.orDie(other.deleteThread("t")), ScriptedModel.text("ok"))
          ])
          for (const word of ["alpha", "beta"]) yield* mine.run(`say ${word}-t`, { threadId: "t" })
          const error = errorOf(yield* Effect.exit(mine.run("say gamma-t", { threadId: "t" })))
          assert.instanceOf(error, AgentError.CheckpointError)
          assert.strictEqual((error as AgentError.CheckpointError).conflict, "ThreadDeleted")
          assert.isTrue(Option.isNone(yield* other.thread("t")))
          assert.deepStrictEqual(yield* contents, [], "the text the failed run evicted is removed")
        })))

    it.effect(`${mode} mode: the thread deleted and made again by another process while the model answers (Superseded)`, () =>
      withStore(memory, (contents) =>
        Effect.gen(function*() {
          const { mine, other } = yield* twoProcesses(mode, (other) => [
            ...twoOk,
            () =>
              Effect.as(
                Effect.orDie(Effect.zipRight(other.deleteThread("t"), other.run("say fresh-t", { threadId: "t" }))),
                ScriptedModel.text("ok")
              )
          ])
          for (const word of ["alpha", "beta"]) yield* mine.run(`say ${word}-t`, { threadId: "t" })
          const error = errorOf(yield* Effect.exit(mine.run("say gamma-t", { threadId: "t" })))
          assert.strictEqual((error as AgentError.CheckpointError).conflict, "Superseded")
          assert.isTrue(Option.isSome(yield* other.thread("t")), "the thread made again stays")
          assert.deepStrictEqual(yield* contents, [], "the text the failed run evicted is removed")
        })))
  }

  it.effect("the thread deleted by another process inside a tool, after the summarized step answered", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const { mine } = yield* twoProcesses(
          "rewrite",
          () => [...twoOk, ScriptedModel.toolCalls([{ name: "act", params: {} }]), ScriptedModel.text("ok")],
          (other) => Effect.as(Effect.orDie(other.deleteThread("t")), "deleted")
        )
        for (const word of ["alpha", "beta"]) yield* mine.run(`say ${word}-t`, { threadId: "t" })
        const error = errorOf(yield* Effect.exit(mine.run("say gamma-t", { threadId: "t" })))
        assert.strictEqual((error as AgentError.CheckpointError).conflict, "ThreadDeleted")
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("a tool that dies after the summarized step answered: the thread keeps no text it does not name", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const { mine } = yield* twoProcesses(
          "rewrite",
          () => [...twoOk, ScriptedModel.toolCalls([{ name: "act", params: {} }]), ScriptedModel.text("ok")],
          () => Effect.die("the tool broke")
        )
        for (const word of ["alpha", "beta"]) yield* mine.run(`say ${word}-t`, { threadId: "t" })
        assert.instanceOf(
          errorOf(yield* Effect.exit(mine.run("say gamma-t", { threadId: "t" }))),
          AgentError.ToolDefect
        )
        assert.deepStrictEqual(yield* contents, [], "the stored thread names no summary: its text is removed")
        yield* mine.deleteThread("t")
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("a run interrupted in a tool after the summarized step answered leaves no text in the store", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const started = yield* Deferred.make<void>()
        const { mine } = yield* twoProcesses(
          "view",
          () => [...twoOk, ScriptedModel.toolCalls([{ name: "act", params: {} }])],
          () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
        )
        for (const word of ["alpha", "beta"]) yield* mine.run(`say ${word}-t`, { threadId: "t" })
        const run = yield* Effect.fork(mine.run("say gamma-t", { threadId: "t" }))
        yield* Deferred.await(started)
        assert.strictEqual(holding(yield* contents, "alpha-t"), 1, "the summary evicted the first messages")
        yield* Fiber.interrupt(run)
        assert.deepStrictEqual(yield* contents, [])
        yield* mine.deleteThread("t")
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("a run that saved its summary and then failed keeps the text its thread names", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        let calls = 0
        const { mine } = yield* twoProcesses(
          "rewrite",
          () => [
            ...twoOk,
            ScriptedModel.toolCalls([{ name: "act", params: {} }]),
            ScriptedModel.toolCalls([{ name: "act", params: {} }])
          ],
          () => ++calls === 1 ? Effect.succeed("ok") : Effect.die("the tool broke")
        )
        for (const word of ["alpha", "beta"]) yield* mine.run(`say ${word}-t`, { threadId: "t" })
        assert.instanceOf(
          errorOf(yield* Effect.exit(mine.run("say gamma-t", { threadId: "t" }))),
          AgentError.ToolDefect
        )
        // the first tool step saved the summary; the second step's failure does not take its text
        const stored = Option.getOrThrow(yield* mine.thread("t")).state as Partial<Summarization.OffloadSlice>
        assert.lengthOf(stored.summaryOffloads?.refs ?? [], 1)
        assert.strictEqual(holding(yield* contents, "alpha-t"), 1)
        yield* mine.deleteThread("t")
        assert.deepStrictEqual(yield* contents, [])
      })))
})

// ---------------------------------------------------------------------------
// property: runs of two processes on shared threads, failing or conflicting at random
// ---------------------------------------------------------------------------

const Fetch = Tool.make("fetch_page", { parameters: { url: Schema.String }, success: Schema.String })
const Fetching = Toolkit.make(Fetch, Act)

/** A page over Offload's size, with a marker of its own. */
const pageOf = (url: string) => `PAGE<${url}> ${"lorem ipsum ".repeat(500)}`

/** A model's answer to a request, as a scripted turn gives it. */
type Reply = Extract<ScriptedModel.Turn, (request: ScriptedModel.Request) => unknown>

/** How a run of mine ends once its fetched page is offloaded. */
type Plan = "ok" | "die" | "delete" | "supersede"

type ProcessOp =
  | { readonly _tag: "run"; readonly thread: number; readonly plan: Plan }
  | { readonly _tag: "delete"; readonly thread: number }

const processOp: FastCheck.Arbitrary<ProcessOp> = FastCheck.oneof(
  {
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("run" as const),
      thread: FastCheck.nat(1),
      plan: FastCheck.constantFrom<Plan>("ok", "ok", "die", "delete", "supersede")
    }),
    weight: 4
  },
  { arbitrary: FastCheck.record({ _tag: FastCheck.constant("delete" as const), thread: FastCheck.nat(1) }), weight: 1 }
)

describe("Summarization and Offload: property over two processes' runs on shared threads", () => {
  it.effect.prop(
    "after every run, whether it completed, failed or found its thread deleted or made again, the store holds " +
      "exactly the texts the stored threads record",
    [
      FastCheck.array(processOp, { minLength: 1, maxLength: 8 }),
      FastCheck.constantFrom<Summarization.Mode>("rewrite", "view")
    ],
    ([ops, mode]) =>
      Effect.flatMap(Offload.makeMemory, (store) => {
        const everPut = new Set<string>()
        return Effect.gen(function*() {
          const checkpointer = yield* Checkpointer.makeMemory
          const summary = yield* summarizer
          let plan: Plan = "ok"
          let pages = 0
          const threadIdOf = (n: number) => `thread-${n}`
          /** An agent of a process, its model answering each request with `reply`. */
          const build = (reply: Reply) =>
            Effect.flatMap(ScriptedModel.make(Array.from({ length: 200 }, () => reply)), ({ model }) =>
              Agent.make({
                toolkit: Fetching,
                middleware: [
                  Summarization.middleware({ trigger: { messages: 6 }, keep: { messages: 1 }, offload: true, mode }),
                  Offload.middleware({ maxResultChars: 4000 })
                ]
              }).pipe(
                Effect.provide(Fetching.toLayer({
                  fetch_page: ({ url }) => Effect.succeed(pageOf(url)),
                  act: () => Effect.die("the tool broke")
                })),
                Effect.provideService(LanguageModel.LanguageModel, model),
                Effect.provide(Summarization.layer(summary.model)),
                Effect.provideService(Checkpointer.Checkpointer, checkpointer)
              ))
          const other = yield* build(() => ScriptedModel.text("fresh"))
          let threadId = ""
          const mine = yield* build((request) => {
            const last = request.prompt.content.at(-1)!
            if (last.role !== "tool") {
              return ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: `page-${pages++}` } }])
            }
            switch (plan) {
              case "ok":
                return ScriptedModel.text("ok")
              case "die":
                return ScriptedModel.toolCalls([{ name: "act", params: {} }])
              case "delete":
                return Effect.as(Effect.orDie(other.deleteThread(threadId)), ScriptedModel.text("ok"))
              case "supersede":
                return Effect.as(
                  Effect.orDie(Effect.zipRight(other.deleteThread(threadId), other.run("again", { threadId }))),
                  ScriptedModel.text("ok")
                )
            }
          })
          /** The references the stored threads record (a slice counts for the thread it names). */
          const recorded = Effect.gen(function*() {
            const refs = new Set<string>()
            for (const id of [threadIdOf(0), threadIdOf(1)]) {
              const thread = yield* mine.thread(id)
              if (Option.isNone(thread)) continue
              const state = thread.value.state as Partial<Offload.State & Summarization.OffloadSlice>
              for (const slice of [state.offloads, state.summaryOffloads]) {
                if (slice != null && slice.threadId === id) slice.refs.forEach((ref) => refs.add(ref))
              }
            }
            return refs
          })
          const held = Effect.map(
            Effect.forEach(
              everPut,
              (ref) => Effect.map(Effect.option(store.get(ref)), (found) => [ref, found] as const)
            ),
            (found) => new Set(found.filter(([, text]) => Option.isSome(text)).map(([ref]) => ref))
          )
          for (const op of ops) {
            threadId = threadIdOf(op.thread)
            if (op._tag === "delete") {
              yield* other.deleteThread(threadId)
            } else {
              plan = op.plan
              const exit = yield* Effect.exit(mine.run("go", { threadId }))
              assert.strictEqual(Exit.isSuccess(exit), plan === "ok", `a run planned ${plan}`)
            }
            assert.deepStrictEqual([...yield* held].sort(), [...yield* recorded].sort(), JSON.stringify(ops))
          }
          for (const id of [threadIdOf(0), threadIdOf(1)]) yield* mine.deleteThread(id)
          assert.deepStrictEqual([...yield* held], [])
        }).pipe(Effect.provideService(Offload.OffloadStore, tracked(store, everPut)), Effect.orDie)
      }),
    // a few seconds; the timeout is for a loaded machine
    { fastCheck: { numRuns: 25 }, timeout: 120_000 }
  )
})

// ---------------------------------------------------------------------------
// property: runs, deletions and forks on threads sharing one store
// ---------------------------------------------------------------------------

/** One thread as the agent keeps it: its incarnation, its saved messages and the slices of both middleware. */
interface Live {
  readonly incarnation: string
  messages: ReadonlyArray<Prompt.Message>
  state: Readonly<Record<string, unknown>>
}

type Op =
  | { readonly _tag: "turn"; readonly thread: number; readonly fails: boolean }
  | { readonly _tag: "delete"; readonly thread: number }
  | { readonly _tag: "fork"; readonly from: number; readonly to: number }

const op: FastCheck.Arbitrary<Op> = FastCheck.oneof(
  {
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("turn" as const),
      thread: FastCheck.nat(2),
      fails: FastCheck.boolean()
    }),
    weight: 3
  },
  { arbitrary: FastCheck.record({ _tag: FastCheck.constant("delete" as const), thread: FastCheck.nat(2) }), weight: 1 },
  {
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("fork" as const),
      from: FastCheck.nat(2),
      to: FastCheck.nat(2)
    }),
    weight: 1
  }
)

describe("Summarization offload: property over runs, deletions and forks", () => {
  it.effect.prop(
    "a thread reads the evicted texts its state records, never another incarnation's; deleting every thread empties the store",
    [FastCheck.array(op, { maxLength: 16 }), FastCheck.constantFrom<Summarization.Mode>("rewrite", "view")],
    ([ops, mode]) =>
      Effect.flatMap(Effect.all([Offload.makeMemory, summarizer]), ([store, summary]) => {
        const everPut = new Set<string>()
        return Effect.gen(function*() {
          const build = Middleware.build(
            Summarization.middleware({ trigger: { messages: 4 }, keep: { messages: 1 }, offload: true, mode })
          )
          const [mw, reader] = yield* Effect.all([
            Effect.orDie(build),
            Effect.orDie(Middleware.build(Offload.middleware()))
          ])
          /** The incarnation that wrote each text. */
          const writer = new Map<string, string>()
          const threads = new Map<string, Live>()
          let incarnations = 0
          let n = 0
          const threadIdOf = (i: number) => `thread-${i}`
          const request = (
            threadId: string,
            live: Live,
            messages: ReadonlyArray<Prompt.Message>,
            state: Live["state"]
          ) => ({
            messages,
            systemPrompt: undefined,
            tools: [],
            toolChoice: "auto" as const,
            model: undefined,
            context: Context.empty(),
            state,
            threadId,
            incarnation: live.incarnation,
            step: 0
          })
          const readAs = (threadId: string, live: Live, ref: string) =>
            reader.wrapToolCall!({
              call: Messages.toolCall(`r${n++}`, Offload.toolName, { ref, limit: 1_000_000 }),
              tool: undefined,
              state: { ...live.state, messages: live.messages },
              threadId,
              incarnation: live.incarnation,
              step: 0
            }, () => Effect.die("read_offloaded is answered by the middleware"))

          for (const step of ops) {
            if (step._tag === "turn") {
              const threadId = threadIdOf(step.thread)
              let live = threads.get(threadId)
              if (live === undefined) {
                live = {
                  incarnation: `inc-${incarnations++}`,
                  messages: [],
                  state: { summaryView: null, summaryOffloads: null }
                }
                threads.set(threadId, live)
              }
              const before = new Set(everPut)
              const messages = [...live.messages, Messages.user(`turn ${n++} of ${threadId}`)]
              const update = yield* Effect.scoped(mw.beforeModel!({
                state: live.state as any,
                messages,
                threadId,
                incarnation: live.incarnation,
                step: 0,
                usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
                tools: [],
                resume: Option.none()
              }))
              for (const ref of everPut) if (!before.has(ref)) writer.set(ref, live.incarnation)
              const after = {
                messages: update?.messages ?? messages,
                state: update?.state === undefined ? live.state : { ...live.state, ...update.state }
              }
              const call = mw.wrapModelCall!(
                request(threadId, live, after.messages, after.state),
                () => step.fails ? Effect.fail(down) : Effect.succeed(Middleware.modelResponse("ok"))
              )
              const answered = yield* Effect.either(call)
              // a step is saved when its model call answers; a failed one leaves the thread as it was
              if (answered._tag === "Right") {
                live.messages = [...after.messages, Messages.assistant("ok")]
                live.state = after.state
              } else assert.isTrue(step.fails)
            } else if (step._tag === "delete") {
              const threadId = threadIdOf(step.thread)
              const live = threads.get(threadId)
              yield* mw.onThreadDeleted!(threadId, live === undefined ? Option.none() : Option.some(live.state as any))
              threads.delete(threadId)
            } else {
              const from = threads.get(threadIdOf(step.from))
              const to = threadIdOf(step.to)
              if (from === undefined || threads.has(to)) continue
              threads.set(to, { incarnation: `inc-${incarnations++}`, messages: from.messages, state: from.state })
            }
          }

          for (const [threadId, live] of threads) {
            const recorded = new Set(
              (live.state as Partial<Summarization.OffloadSlice>).summaryOffloads?.threadId === threadId
                ? (live.state as Summarization.OffloadSlice).summaryOffloads!.refs
                : []
            )
            for (const ref of everPut) {
              const response = yield* readAs(threadId, live, ref)
              if (recorded.has(ref)) {
                assert.isFalse(response.isFailure, `${threadId} cannot read ${ref}, which its state records`)
                assert.strictEqual(writer.get(ref), live.incarnation)
              } else if (writer.get(ref) !== live.incarnation) {
                assert.isTrue(response.isFailure, `${threadId} read a text of another incarnation`)
              }
            }
          }
          // deleting every thread leaves the store empty
          for (const [threadId, live] of threads) yield* mw.onThreadDeleted!(threadId, Option.some(live.state as any))
          for (const ref of everPut) {
            assert.isTrue(Option.isNone(yield* Effect.option(store.get(ref))), `${ref} outlived its thread`)
          }
        }).pipe(
          Effect.provideService(Offload.OffloadStore, tracked(store, everPut)),
          Effect.provide(Summarization.layer(summary.model)),
          Effect.scoped
        )
      }),
    { fastCheck: { numRuns: 60 } }
  )
})
