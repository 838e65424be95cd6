/**
 * Offloaded texts live as long as the thread incarnation that offloaded them:
 * `deleteThread` removes them from the store, and a thread deleted and made
 * again (or a fork) never reads the texts of another incarnation.
 */
import type { Prompt } from "@effect/ai"
import { AiError, LanguageModel, Tool, Toolkit } from "@effect/ai"
import { KeyValueStore } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, Checkpointer, Middleware } from "@stepwise-agent/core"
import { Messages, ScriptedModel } from "@stepwise-agent/testing"
import { Cause, Context, Deferred, Effect, Exit, FastCheck, Fiber, Layer, Logger, Option, Schema } from "effect"
import * as NodeFs from "node:fs"
import * as Offload from "../src/Offload.js"
import * as SubAgents from "../src/SubAgents.js"
import { memory, stores, tracked, withStore } from "./support/offloadStores.js"

// ---------------------------------------------------------------------------
// fixtures
// ---------------------------------------------------------------------------

const Fetch = Tool.make("fetch_page", { parameters: { url: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Fetch)

/** Pages over the size, each with a marker of its own (ASCII, so it shows in a JSON-encoded copy too). */
const pageOf = (url: string) => `PAGE<${url}> ${"lorem ipsum ".repeat(600)} é 𝄞 end of <${url}>`
const ToolsLive = Tools.toLayer({ fetch_page: ({ url }) => Effect.succeed(pageOf(url)) })

const lastMessage = (request: ScriptedModel.Request): Prompt.Message => request.prompt.content.at(-1)!

/** The references in a message as the model saw it. */
const refsIn = (message: Prompt.Message): Array<string> => JSON.stringify(message).match(/ofl_[0-9a-f]{16}/g) ?? []

/**
 * A model that answers "fetch <url>" by fetching it, "read <ref>" by reading that reference whole, and a
 * tool result with "ok"; it keeps the references it saw in the last tool result.
 */
const reactiveModel = Effect.gen(function*() {
  const seen: Array<string> = []
  const reply = (request: ScriptedModel.Request) => {
    const last = lastMessage(request)
    if (last.role === "tool") {
      seen.push(...refsIn(last))
      return ScriptedModel.text("ok")
    }
    const text = last.role === "user" && last.content[0]?.type === "text" ? last.content[0].text : ""
    const [verb, argument] = text.split(" ")
    return verb === "read"
      ? ScriptedModel.toolCalls([{ name: Offload.toolName, params: { ref: argument, limit: 100_000 } }])
      : ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: argument } }])
  }
  const { model } = yield* ScriptedModel.make(Array.from({ length: 200 }, () => reply))
  /** The reference the model saw last. */
  const lastRef = Effect.sync(() => seen.at(-1)!)
  return { model, lastRef }
})

const makeAgent = Effect.gen(function*() {
  const { lastRef, model } = yield* reactiveModel
  const agent = yield* Agent.make({ toolkit: Tools, middleware: [Offload.middleware({ maxResultChars: 4000 })] })
    .pipe(Effect.provide(ToolsLive), Effect.provideService(LanguageModel.LanguageModel, model))
  /** Runs "fetch <url>" on the thread: the reference its result got. */
  const fetch = (threadId: string, url: string) => Effect.zipRight(agent.run(`fetch ${url}`, { threadId }), lastRef)
  /** Runs "read <ref>" on the thread: the read_offloaded result. */
  const read = (threadId: string, ref: string) =>
    Effect.map(agent.run(`read ${ref}`, { threadId }), (result) => {
      const part = result.state.messages.flatMap((message) => message.role === "tool" ? message.content : []).at(-1)!
      return part as Prompt.ToolResultPart
    })
  return { agent, fetch, read, lastRef }
})

/** How many of `contents` hold the page of `url`. */
const holding = (contents: ReadonlyArray<string>, url: string) =>
  contents.filter((content) => content.includes(`PAGE<${url}>`)).length

// ---------------------------------------------------------------------------
// deleteThread
// ---------------------------------------------------------------------------

describe("Offload: deleteThread removes the thread's offloaded texts", () => {
  for (const [label, makeStore] of stores) {
    it.effect(
      `${label}: after deleteThread the store holds none of the thread's texts; other threads' stay`,
      () =>
        withStore(makeStore, (contents) =>
          Effect.gen(function*() {
            const { agent, fetch } = yield* makeAgent
            // the same page in both threads, and one of A's own
            yield* fetch("A", "shared")
            yield* fetch("A", "private")
            yield* fetch("B", "shared")
            const before = yield* contents
            assert.strictEqual(holding(before, "shared"), 2)
            assert.strictEqual(holding(before, "private"), 1)
            yield* agent.deleteThread("A")
            const after = yield* contents
            assert.strictEqual(holding(after, "private"), 0)
            assert.strictEqual(holding(after, "shared"), 1, "B's copy stays")
            assert.strictEqual(after.length, 1)
            // B still reads its text from the store
            yield* agent.deleteThread("B")
            assert.deepStrictEqual(yield* contents, [])
          })),
      { timeout: 60_000 }
    )
  }

  it.effect("a new process (a new memory store) gets the thread's texts again, and deleteThread removes them there", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const first = yield* makeAgent
        const ref = yield* first.fetch("t", "page")
        // another agent (its own middleware and memory store) continues the thread from its checkpoint
        const lost = yield* Offload.makeMemory
        const second = yield* makeAgent.pipe(Effect.provideService(Offload.OffloadStore, lost))
        const read = yield* second.read("t", ref)
        assert.isFalse(read.isFailure)
        assert.strictEqual(yield* lost.get(ref), pageOf("page"))
        yield* second.agent.deleteThread("t")
        assert.strictEqual((yield* Effect.flip(lost.get(ref))).reason, "NotFound")
        assert.strictEqual(holding(yield* contents, "page"), 1, "the first store is another process's")
      })).pipe(Effect.provide(Checkpointer.layerMemory)))

  it.effect("a model call that fails after the view offloaded leaves no text in the store", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const { model } = yield* ScriptedModel.make([
          ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "page" } }]),
          new AiError.UnknownError({ module: "test", method: "generateText", description: "the provider is down" })
        ])
        const agent = yield* Agent.make({ toolkit: Tools, middleware: [Offload.middleware({ maxResultChars: 4000 })] })
          .pipe(Effect.provide(ToolsLive), Effect.provideService(LanguageModel.LanguageModel, model))
        assert.strictEqual((yield* Effect.either(agent.run("fetch page", { threadId: "t" })))._tag, "Left")
        assert.deepStrictEqual(yield* contents, [])
      })))

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
      const { agent, fetch } = yield* makeAgent.pipe(Effect.provideService(Offload.OffloadStore, failing))
      const ref = yield* fetch("t", "page").pipe(Effect.provideService(Offload.OffloadStore, failing))
      yield* agent.deleteThread("t").pipe(
        Effect.provideService(Offload.OffloadStore, failing),
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
      const line = logs.find((message) => message.includes(ref))
      assert.isDefined(line, `no log line names the reference: ${JSON.stringify(logs)}`)
      assert.notInclude(logs.join("\n"), secret)
    }))

  it.effect("SubAgents: deleting the parent removes the texts its child threads offloaded", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const child = yield* makeAgent
        const { model } = yield* ScriptedModel.make([
          ScriptedModel.toolCalls([{ name: "task", params: { agent: "fetcher", task: "fetch child-page" } }]),
          ScriptedModel.text("done")
        ])
        const parent = yield* Agent.make({
          middleware: [SubAgents.middleware({ agents: { fetcher: { description: "Fetches", agent: child.agent } } })]
        }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
        yield* parent.run("go", { threadId: "parent" })
        assert.strictEqual(holding(yield* contents, "child-page"), 1)
        yield* parent.deleteThread("parent")
        assert.deepStrictEqual(yield* contents, [])
      })))
})

// ---------------------------------------------------------------------------
// a run that ends before a save holds its references
// ---------------------------------------------------------------------------

const Act = Tool.make("act", { parameters: {}, success: Schema.String })
const Acting = Toolkit.make(Fetch, Act)

/**
 * Two agents on one checkpointer and one offload store, as two processes sharing a thread have, both
 * offloading: the other answers "fresh"; mine fetches "page", then answers from `turns` (the call that
 * offloads the page first), made with the other (to delete the thread while mine runs); its tool `act` runs
 * `act`.
 */
const twoProcesses = (
  turns: (other: Agent.Service<any, any, any, any>) => ReadonlyArray<ScriptedModel.Turn>,
  act: (other: Agent.Service<any, any, any, any>) => Effect.Effect<string> = () => Effect.succeed("done")
) =>
  Effect.gen(function*() {
    const checkpointer = yield* Checkpointer.makeMemory
    const build = (script: ReadonlyArray<ScriptedModel.Turn>, tool: Effect.Effect<string>) =>
      Effect.flatMap(ScriptedModel.make(script), ({ model }) =>
        Agent.make({ toolkit: Acting, middleware: [Offload.middleware({ maxResultChars: 4000 })] }).pipe(
          Effect.provide(Acting.toLayer({
            fetch_page: ({ url }) =>
              Effect.succeed(pageOf(url)),
            act: () => tool
          })),
          Effect.provideService(LanguageModel.LanguageModel, model),
          Effect.provideService(Checkpointer.Checkpointer, checkpointer)
        ))
    const other = yield* build([ScriptedModel.text("fresh")], Effect.succeed("unused"))
    const mine = yield* build(
      [ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "page" } }]), ...turns(other)],
      Effect.suspend(() =>
        act(other)
      )
    )
    return { mine, other }
  })

const actCall = ScriptedModel.toolCalls([{ name: "act", params: {} }])

/** The error the run failed with. */
const errorOf = <A>(exit: Exit.Exit<A, unknown>): unknown =>
  Exit.isFailure(exit) ? Cause.squash(exit.cause) : assert.fail("the run succeeded")

/** The conflict of the run's `CheckpointError`. */
const conflictOf = (exit: Exit.Exit<unknown, unknown>) => {
  const error = errorOf(exit)
  assert.instanceOf(error, AgentError.CheckpointError)
  return (error as AgentError.CheckpointError).conflict
}

describe("Offload: a run that ends before a save holds its references removes their texts", () => {
  it.effect("the thread deleted by another process while the model answers (ThreadDeleted)", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const { mine, other } = yield* twoProcesses((other) => [
          () => Effect.as(Effect.orDie(other.deleteThread("t")), ScriptedModel.text("ok"))
        ])
        assert.strictEqual(conflictOf(yield* Effect.exit(mine.run("go", { threadId: "t" }))), "ThreadDeleted")
        assert.isTrue(Option.isNone(yield* other.thread("t")))
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("the thread deleted and made again by another process while the model answers (Superseded)", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const { mine, other } = yield* twoProcesses((other) => [
          () =>
            Effect.as(
              Effect.orDie(Effect.zipRight(other.deleteThread("t"), other.run("again", { threadId: "t" }))),
              ScriptedModel.text("ok")
            )
        ])
        assert.strictEqual(conflictOf(yield* Effect.exit(mine.run("go", { threadId: "t" }))), "Superseded")
        assert.isTrue(Option.isSome(yield* other.thread("t")), "the thread made again stays")
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("the thread deleted by another process inside a tool, after the offloading call answered", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const { mine } = yield* twoProcesses(
          () => [actCall, ScriptedModel.text("ok")],
          (other) => Effect.as(Effect.orDie(other.deleteThread("t")), "deleted")
        )
        assert.strictEqual(conflictOf(yield* Effect.exit(mine.run("go", { threadId: "t" }))), "ThreadDeleted")
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("a tool that dies after the offloading call answered: the store keeps no text the thread does not name", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const { mine } = yield* twoProcesses(() => [actCall], () => Effect.die("the tool broke"))
        assert.instanceOf(errorOf(yield* Effect.exit(mine.run("go", { threadId: "t" }))), AgentError.ToolDefect)
        assert.deepStrictEqual(yield* contents, [])
        yield* mine.deleteThread("t")
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("a run interrupted in a tool after the offloading call answered leaves no text in the store", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const started = yield* Deferred.make<void>()
        const { mine } = yield* twoProcesses(
          () => [actCall],
          () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
        )
        const run = yield* Effect.fork(mine.run("go", { threadId: "t" }))
        yield* Deferred.await(started)
        assert.strictEqual(holding(yield* contents, "page"), 1, "the call offloaded the page")
        yield* Fiber.interrupt(run)
        assert.deepStrictEqual(yield* contents, [])
      })))

  it.effect("a run that saved its references and then failed keeps the texts its thread names", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        let calls = 0
        const { mine } = yield* twoProcesses(
          () => [actCall, actCall],
          () => ++calls === 1 ? Effect.succeed("ok") : Effect.die("the tool broke")
        )
        assert.instanceOf(errorOf(yield* Effect.exit(mine.run("go", { threadId: "t" }))), AgentError.ToolDefect)
        const stored = Option.getOrThrow(yield* mine.thread("t")).state as Partial<Offload.State>
        assert.lengthOf(stored.offloads?.refs ?? [], 1)
        assert.strictEqual(holding(yield* contents, "page"), 1)
        yield* mine.deleteThread("t")
        assert.deepStrictEqual(yield* contents, [])
      })))
})

// ---------------------------------------------------------------------------
// incarnations
// ---------------------------------------------------------------------------

/** The memory store without `remove`: a custom store written before it, which keeps every text. */
const keeping = Effect.map(Offload.makeMemory, ({ get, put }): Offload.OffloadStore.Service => ({ get, put }))

describe("Offload: a reference belongs to one incarnation of its thread", () => {
  for (
    const [label, store] of [
      ["the memory store", Offload.makeMemory],
      ["a store without remove (it keeps the old text)", keeping]
    ] as const
  ) {
    it.effect(`${label}: a thread made again with the same id and results gets new references; old ones are refused`, () =>
      Effect.gen(function*() {
        const { agent, fetch, read } = yield* makeAgent
        const old = yield* fetch("t", "page")
        yield* agent.deleteThread("t")
        const fresh = yield* fetch("t", "page")
        assert.notStrictEqual(fresh, old)
        const refused = yield* read("t", old)
        assert.isTrue(refused.isFailure)
        assert.deepStrictEqual(refused.result, {
          error: new Offload.OffloadError({ reason: "NotFound", ref: old }).message
        })
        assert.notInclude(JSON.stringify(refused.result), "PAGE<page>")
        const own = yield* read("t", fresh)
        assert.isFalse(own.isFailure)
        assert.strictEqual((own.result as Offload.Page).text, pageOf("page"))
      }).pipe(Effect.provideServiceEffect(Offload.OffloadStore, store)))
  }

  it.effect("a fork gets references of its own: it cannot read its source's, and deleting it keeps the source's texts", () =>
    withStore(memory, (contents) =>
      Effect.gen(function*() {
        const { agent, fetch, lastRef, read } = yield* makeAgent
        const source = yield* fetch("src", "page")
        // the fork starts before the first model step: its run fetches the page again
        yield* agent.fork("src", { to: "fork", at: 0 })
        const forked = yield* lastRef
        assert.notStrictEqual(forked, source)
        const refused = yield* read("fork", source)
        assert.isTrue(refused.isFailure)
        assert.strictEqual(holding(yield* contents, "page"), 2)
        yield* agent.deleteThread("fork")
        assert.strictEqual(holding(yield* contents, "page"), 1, "the source's text stays")
        assert.isFalse((yield* read("src", source)).isFailure)
        yield* agent.deleteThread("src")
        assert.deepStrictEqual(yield* contents, [])
      })))
})

describe("Offload: threads stored before incarnations", () => {
  /** The reference the code before incarnations gave the golden thread's result (its `referenceOf`, run on main). */
  const legacyRef = "ofl_60124932775468d9"

  it.effect("golden: a thread offloaded before incarnations still reads its earlier reference; made again, it cannot", () =>
    Effect.gen(function*() {
      const checkpointer = yield* Checkpointer.Checkpointer
      const text = NodeFs.readFileSync(new URL("./golden/offload-thread-v1.json", import.meta.url), "utf8")
      const legacy = yield* Checkpointer.fromJson("golden-offload", text)
      assert.isUndefined(legacy.incarnation)
      yield* checkpointer.save("golden-offload", legacy)
      assert.strictEqual(Offload.referenceOf({ threadId: "golden-offload" }, pageOf("legacy")), legacyRef)
      // the store the earlier code wrote to holds the text under the earlier reference
      const kv = yield* KeyValueStore.KeyValueStore
      yield* kv.set(`offload/${legacyRef}`, JSON.stringify(pageOf("legacy")))
      const { agent, fetch, read } = yield* makeAgent
      const earlier = yield* read("golden-offload", legacyRef)
      assert.isFalse(earlier.isFailure)
      assert.strictEqual((earlier.result as Offload.Page).text, pageOf("legacy"))
      // its run gave it an incarnation: the result is offloaded under a reference of that incarnation too
      const incarnation = Option.getOrThrow(yield* checkpointer.load("golden-offload")).incarnation
      assert.isString(incarnation)
      const current = Offload.referenceOf({ threadId: "golden-offload", incarnation }, pageOf("legacy"))
      assert.notStrictEqual(current, legacyRef)
      assert.deepStrictEqual(yield* kv.get(`offload/${current}`), Option.some(JSON.stringify(pageOf("legacy"))))
      // deleted and made again, the thread does not read the text the store still has under the earlier reference
      yield* agent.deleteThread("golden-offload")
      assert.isTrue(Option.isNone(yield* kv.get(`offload/${current}`)))
      yield* fetch("golden-offload", "other")
      const refused = yield* read("golden-offload", legacyRef)
      assert.isTrue(refused.isFailure)
      assert.notInclude(JSON.stringify(refused.result), "PAGE<legacy>")
    }).pipe(
      Effect.provide(Checkpointer.layerMemory),
      Effect.provide(Offload.layerKeyValueStore().pipe(Layer.provideMerge(KeyValueStore.layerMemory)))
    ))
})

// ---------------------------------------------------------------------------
// property: runs, deletions and forks on threads sharing one store
// ---------------------------------------------------------------------------

/** What one thread is, as the agent keeps it: its id, incarnation, messages and the middleware's slice. */
interface Live {
  readonly incarnation: string
  messages: ReadonlyArray<Prompt.Message>
  state: Offload.State
  /** The references the model was shown in this incarnation, with their texts. */
  readonly shown: Map<string, string>
}

type Op =
  | { readonly _tag: "offload"; readonly thread: number; readonly page: number }
  | { readonly _tag: "delete"; readonly thread: number }
  | { readonly _tag: "fork"; readonly from: number; readonly to: number }

const op: FastCheck.Arbitrary<Op> = FastCheck.oneof(
  FastCheck.record({ _tag: FastCheck.constant("offload" as const), thread: FastCheck.nat(2), page: FastCheck.nat(2) }),
  FastCheck.record({ _tag: FastCheck.constant("delete" as const), thread: FastCheck.nat(2) }),
  FastCheck.record({ _tag: FastCheck.constant("fork" as const), from: FastCheck.nat(2), to: FastCheck.nat(2) })
)

describe("Offload: property over runs, deletions and forks", () => {
  it.effect.prop(
    "a thread reads exactly the texts its incarnation offloaded, and the store keeps only live threads' texts",
    [FastCheck.array(op, { maxLength: 14 })],
    ([ops]) =>
      Effect.flatMap(Offload.makeMemory, (store) => {
        const everPut = new Set<string>()
        return Effect.gen(function*() {
          const mw = Offload.middleware({ maxResultChars: 100, previewChars: 0 })
          const threads = new Map<string, Live>()
          let incarnations = 0
          let calls = 0
          const threadIdOf = (n: number) => `thread-${n}`
          const born = (): Omit<Live, "messages" | "state"> => ({
            incarnation: `inc-${incarnations++}`,
            shown: new Map()
          })
          const liveOf = (threadId: string): Live => {
            let live = threads.get(threadId)
            if (live === undefined) {
              live = { ...born(), messages: [], state: { offloads: null } }
              threads.set(threadId, live)
            }
            return live
          }
          const applied = (live: Live, update: Readonly<Record<string, unknown>> | undefined) => {
            if (update !== undefined) live.state = { ...live.state, ...update } as Offload.State
          }
          const readAs = (threadId: string, live: Live, ref: string) =>
            Effect.map(
              mw.wrapToolCall!({
                call: Messages.toolCall(`r${calls++}`, Offload.toolName, { ref, limit: 100_000 }),
                tool: undefined,
                state: { ...live.state, messages: live.messages },
                threadId,
                incarnation: live.incarnation,
                step: 0
              }, () => Effect.die("read_offloaded is answered by the middleware")),
              (response) => (applied(live, response.state), response)
            )

          for (const step of ops) {
            if (step._tag === "offload") {
              const threadId = threadIdOf(step.thread)
              const live = liveOf(threadId)
              const id = `c${calls++}`
              const content = `page ${step.page} ${"z".repeat(150)}`
              live.messages = [
                ...live.messages,
                Messages.user("go"),
                Messages.call(id, "fetch_page"),
                Messages.result(id, "fetch_page", content)
              ]
              let seen: ReadonlyArray<Prompt.Message> = []
              const response = yield* mw.wrapModelCall!({
                messages: live.messages,
                systemPrompt: undefined,
                tools: [],
                toolChoice: "auto",
                model: undefined,
                context: Context.empty(),
                state: live.state,
                threadId,
                incarnation: live.incarnation,
                step: 0
              }, (sent) => Effect.sync(() => (seen = sent.messages, Middleware.modelResponse("ok"))))
              applied(live, response.state)
              // every result the model was shown by reference (a fork's view offloads its source's results too)
              const texts = new Map(
                live.messages.flatMap((message) => message.role === "tool" ? message.content : [])
                  .map((part) => [part.id, Offload.textOf(part.result)] as const)
              )
              for (const message of seen) {
                if (message.role !== "tool") continue
                for (const part of message.content) {
                  const ref = Offload.offloadedRef(part)
                  if (Option.isSome(ref)) live.shown.set(ref.value, texts.get(part.id)!)
                }
              }
            } else if (step._tag === "delete") {
              const threadId = threadIdOf(step.thread)
              const live = threads.get(threadId)
              yield* mw.onThreadDeleted!(threadId, live === undefined ? Option.none() : Option.some(live.state))
              threads.delete(threadId)
            } else {
              const from = threads.get(threadIdOf(step.from))
              const to = threadIdOf(step.to)
              // a fork starts a new thread with the source's messages and latest slices
              if (from === undefined || threads.has(to)) continue
              threads.set(to, { ...born(), messages: from.messages, state: from.state })
            }
          }

          // the store holds the texts of live incarnations only, and each of them
          const liveRefs = new Set([...threads.values()].flatMap((live) => [...live.shown.keys()]))
          for (const ref of everPut) {
            const held = yield* Effect.option(store.get(ref))
            assert.strictEqual(Option.isSome(held), liveRefs.has(ref), `store and live threads disagree on ${ref}`)
          }
          // a thread reads exactly what its incarnation was shown, byte-exact
          for (const [threadId, live] of threads) {
            for (const ref of everPut) {
              const response = yield* readAs(threadId, live, ref)
              if (live.shown.has(ref)) {
                assert.isFalse(response.isFailure)
                assert.strictEqual((response.result as Offload.Page).text, live.shown.get(ref))
              } else {
                assert.isTrue(response.isFailure, `${threadId} read a reference of another incarnation`)
              }
            }
          }
          // deleting every thread leaves the store empty
          for (const [threadId, live] of threads) yield* mw.onThreadDeleted!(threadId, Option.some(live.state))
          for (const ref of everPut) assert.isTrue(Option.isNone(yield* Effect.option(store.get(ref))))
        }).pipe(Effect.scoped, Effect.provideService(Offload.OffloadStore, tracked(store, everPut)))
      }),
    { fastCheck: { numRuns: 80 } }
  )
})
