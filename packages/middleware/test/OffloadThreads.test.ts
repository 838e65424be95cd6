/**
 * Offloaded texts belong to the thread they were offloaded from, and every
 * store gives back exactly the string it was given (lone surrogates too).
 */
import type { Prompt } from "@effect/ai"
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { FileSystem, KeyValueStore } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware } from "@stepwise-agent/core"
import { Messages, ScriptedModel } from "@stepwise-agent/testing"
import { Context, Effect, FastCheck, Layer, Option, Schema } from "effect"
import * as Filesystem from "../src/Filesystem.js"
import * as Offload from "../src/Offload.js"
import * as Workspace from "../src/Workspace.js"

const Fetch = Tool.make("fetch_page", { parameters: { url: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Fetch)

/** Texts that UTF-8 cannot tell apart: a lone surrogate and the U+FFFD it becomes. */
const withLoneSurrogate = `${"a".repeat(5000)}\uD800 end`
const withReplacement = `${"a".repeat(5000)}\uFFFD end`

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

/** Any string, lone surrogates and U+FFFD included. */
const anyText = FastCheck.string({
  unit: FastCheck.oneof(
    FastCheck.constantFrom("\uD800", "\uDBFF", "\uDC00", "\uDFFF", "\uFFFD", "𝄞", "é", "\r\n", "\"", "\\"),
    FastCheck.string({ unit: "binary", minLength: 1, maxLength: 1 })
  ),
  maxLength: 300
})

describe("Offload across threads", () => {
  it.effect("threads sharing one store each read back their own text, exact, and never another thread's", () =>
    Effect.gen(function*() {
      let refOfA = ""
      const model = yield* ScriptedModel.make([
        // thread A offloads a text with a lone surrogate
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "a" }, id: "fa" }]),
        (request) => (refOfA = refIn(request), ScriptedModel.text("fetched a")),
        // thread B offloads its U+FFFD twin, then asks for A's reference
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "b" }, id: "fb" }]),
        () =>
          ScriptedModel.toolCalls([{ name: "read_offloaded", params: { ref: refOfA, limit: 20_000 }, id: "steal" }]),
        ScriptedModel.text("done b"),
        // thread A reads its own text back
        () => ScriptedModel.toolCalls([{ name: "read_offloaded", params: { ref: refOfA, limit: 20_000 }, id: "own" }]),
        ScriptedModel.text("done a")
      ])
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [Offload.middleware({ maxResultChars: 4000 })] })
        .pipe(
          Effect.provide(Tools.toLayer({
            fetch_page: ({ url }) => Effect.succeed(url === "a" ? withLoneSurrogate : withReplacement)
          })),
          Effect.provideService(LanguageModel.LanguageModel, model.model)
        )
      yield* agent.run("fetch a", { threadId: "A" })
      const b = yield* agent.run("fetch b", { threadId: "B" })
      const a = yield* agent.run("read it", { threadId: "A" })
      const steal = toolResults(b.state.messages).find((part) => part.id === "steal")!
      assert.isTrue(steal.isFailure)
      assert.deepStrictEqual(steal.result, { error: `Nothing was offloaded under the reference "${refOfA}"` })
      const own = toolResults(a.state.messages).find((part) => part.id === "own")!
      assert.isFalse(own.isFailure)
      assert.strictEqual((own.result as Offload.Page).text, withLoneSurrogate)
    }).pipe(Effect.provide(Offload.layerKeyValueStore().pipe(Layer.provide(KeyValueStore.layerMemory)))))

  it.prop(
    "a reference is per thread and per exact text: a lone surrogate and U+FFFD, or two threads, never share one",
    [FastCheck.string(), FastCheck.string(), anyText],
    ([threadA, threadB, content]) => {
      if (threadA !== threadB) {
        assert.notStrictEqual(
          Offload.referenceOf({ threadId: threadA }, content),
          Offload.referenceOf({ threadId: threadB }, content)
        )
      }
      const replaced = content.replace(/\p{Cs}/gu, "\uFFFD")
      if (replaced !== content) {
        assert.notStrictEqual(
          Offload.referenceOf({ threadId: threadA }, content),
          Offload.referenceOf({ threadId: threadA }, replaced)
        )
      }
    }
  )

  it.effect.prop(
    "with a shared store, read_offloaded gives a text to its own thread only, whatever the text and threads",
    [FastCheck.string({ minLength: 1 }), FastCheck.string({ minLength: 1 }), anyText],
    ([threadA, threadB, text]) =>
      Effect.gen(function*() {
        if (threadA === threadB) return
        const content = `${text}${"z".repeat(50)}`
        const mw = Offload.middleware({ maxResultChars: 20, previewChars: 0 })
        const messages = [
          Messages.user("go"),
          Messages.call("c1", "fetch_page"),
          Messages.result("c1", "fetch_page", content)
        ]
        const request = (threadId: string): Middleware.ModelRequest => ({
          messages,
          systemPrompt: undefined,
          tools: [],
          toolChoice: "auto",
          model: undefined,
          context: Context.empty(),
          state: {},
          threadId,
          step: 0
        })
        // thread A offloads the text; thread B, whose own messages hold the same text, asks for A's reference
        let seen: ReadonlyArray<Prompt.Message> = []
        yield* mw.wrapModelCall!(request(threadA), (sent) =>
          Effect.sync(() => (seen = sent.messages, Middleware.modelResponse("ok"))))
        const ref = Option.getOrThrow(Offload.offloadedRef(toolResults(seen)[0]!))
        const read = (threadId: string) =>
          mw.wrapToolCall!({
            call: Messages.toolCall("r1", Offload.toolName, { ref, limit: 10_000 }),
            tool: undefined,
            state: { messages },
            threadId,
            step: 1
          }, () =>
            Effect.die("read_offloaded is answered by the middleware"))
        const stolen = yield* read(threadB)
        assert.isTrue(stolen.isFailure)
        assert.notInclude(JSON.stringify(stolen.result), JSON.stringify(content).slice(1, -1))
        const own = yield* read(threadA)
        assert.strictEqual((own.result as Offload.Page).text, content)
      }).pipe(
        Effect.scoped,
        Effect.provide(Offload.layerKeyValueStore().pipe(Layer.provide(KeyValueStore.layerMemory)))
      ),
    { fastCheck: { numRuns: 60 } }
  )
})

describe("Offload with Filesystem on one workspace", () => {
  const secret = `ALICE-PRIVATE ${"x".repeat(5000)}`
  it.effect("a thread's file tools neither list, read, search nor write any thread's offloaded texts", () =>
    Effect.gen(function*() {
      const workspace = yield* Workspace.makeMemory()
      let ref = ""
      const probes = (ref: string) => [
        { name: "ls", params: { path: "/" } },
        { name: "ls", params: { path: "/offloaded" } },
        { name: "glob", params: { pattern: "**" } },
        { name: "glob", params: { pattern: "*", path: "/offloaded" } },
        { name: "grep", params: { pattern: "ALICE", output_mode: "content" } },
        { name: "grep", params: { pattern: "ALICE", path: "/OFFLOADED", output_mode: "content" } },
        { name: "read_file", params: { file_path: `/offloaded/${ref}.txt` } },
        { name: "read_file", params: { file_path: `/./notes/../offloaded/${ref}.txt` } },
        { name: "read_file", params: { file_path: `/Offloaded/${ref}.txt` } },
        { name: "write_file", params: { file_path: `/offloaded/${ref}.txt`, content: "overwritten" } },
        { name: "edit_file", params: { file_path: `/offloaded/${ref}.txt`, old_string: "ALICE", new_string: "BOB" } }
      ]
      const model = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "a" }, id: "fa" }]),
        (request) => (ref = refIn(request), ScriptedModel.text("fetched")),
        // another thread, then the thread itself, try every file tool on the offloaded text
        () => ScriptedModel.toolCalls(probes(ref)),
        ScriptedModel.text("bob done"),
        () => ScriptedModel.toolCalls(probes(ref)),
        ScriptedModel.text("alice done")
      ])
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [Offload.middleware({ maxResultChars: 100 }), Filesystem.middleware({ storage: "workspace" })]
      }).pipe(
        Effect.provide(Tools.toLayer({ fetch_page: () => Effect.succeed(secret) })),
        Effect.provide(
          Offload.layerWorkspace().pipe(Layer.provideMerge(Layer.succeed(Workspace.Workspace, workspace)))
        ),
        Effect.provideService(LanguageModel.LanguageModel, model.model)
      )
      yield* agent.run("fetch", { threadId: "alice" })
      for (const threadId of ["bob", "alice"]) {
        const result = yield* agent.run("look", { threadId })
        const results = toolResults(result.state.messages).filter((part) => part.name !== "fetch_page")
        assert.strictEqual(results.length, probes(ref).length)
        assert.notInclude(JSON.stringify(results.map((part) => part.result)), "ALICE-PRIVATE", threadId)
        for (const part of results) {
          const listing = part.name === "ls" || part.name === "glob" || part.name === "grep"
          // a listing names no offloaded file; a read or write of one fails (naming the path it was given)
          if (listing) assert.notInclude(JSON.stringify(part.result), ref, `${threadId} ${part.name}`)
          else assert.isTrue(part.isFailure, `${threadId} ${part.name}`)
        }
      }
      // the store still holds the text, unchanged, for read_offloaded
      assert.strictEqual(yield* workspace.read(`/offloaded/${ref}.txt`), secret)
    }))
})

describe("Offload with Filesystem routing to its workspace", () => {
  it.effect("the offloaded texts stay hidden under a route of the state storage", () =>
    Effect.gen(function*() {
      const workspace = yield* Workspace.makeMemory()
      const secret = `ALICE-PRIVATE ${"x".repeat(5000)}`
      let ref = ""
      const model = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "a" }, id: "fa" }]),
        (request) => (ref = refIn(request), ScriptedModel.text("fetched")),
        () =>
          ScriptedModel.toolCalls([
            { name: "glob", params: { pattern: "**", path: "/mnt" } },
            { name: "grep", params: { pattern: "ALICE", path: "/mnt", output_mode: "content" } },
            { name: "read_file", params: { file_path: `/mnt/offloaded/${ref}.txt` } }
          ]),
        ScriptedModel.text("bob done")
      ])
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [
          Offload.middleware({ maxResultChars: 100 }),
          Filesystem.middleware({ routes: { "/mnt": workspace } })
        ]
      }).pipe(
        Effect.provide(Tools.toLayer({ fetch_page: () => Effect.succeed(secret) })),
        Effect.provide(Offload.layerWorkspace().pipe(Layer.provide(Layer.succeed(Workspace.Workspace, workspace)))),
        Effect.provideService(LanguageModel.LanguageModel, model.model)
      )
      yield* agent.run("fetch", { threadId: "alice" })
      const bob = yield* agent.run("look", { threadId: "bob" })
      const results = toolResults(bob.state.messages)
      assert.deepStrictEqual(results.map((part) => [part.name, part.isFailure]), [
        ["glob", false],
        ["grep", false],
        ["read_file", true]
      ])
      assert.notInclude(JSON.stringify(results.slice(0, 2).map((part) => part.result)), ref)
      assert.notInclude(JSON.stringify(results.map((part) => part.result)), "ALICE-PRIVATE")
    }))
})

describe("Offload stores", () => {
  const stores: ReadonlyArray<
    readonly [string, (directory: string) => Layer.Layer<Offload.OffloadStore, unknown, NodeContext.NodeContext>]
  > = [
    ["memory", () => Offload.layerMemory],
    ["a KeyValueStore in memory", () => Offload.layerKeyValueStore().pipe(Layer.provide(KeyValueStore.layerMemory))],
    [
      "a KeyValueStore on a directory",
      (directory) => Offload.layerKeyValueStore().pipe(Layer.provide(KeyValueStore.layerFileSystem(directory)))
    ],
    ["the workspace in memory", () => Offload.layerWorkspace().pipe(Layer.provide(Workspace.layerMemory()))],
    [
      "the workspace on a directory",
      (directory) => Offload.layerWorkspace().pipe(Layer.provide(Workspace.layerDirectory({ root: directory })))
    ]
  ]
  for (const [label, layerOf] of stores) {
    it.effect(`${label} gives back exactly any string it was given, lone surrogates included`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* fs.makeTempDirectoryScoped()
        const store = yield* Effect.provide(Offload.OffloadStore, layerOf(directory))
        yield* Effect.promise(() =>
          FastCheck.assert(
            FastCheck.asyncProperty(FastCheck.string(), anyText, (threadId, content) =>
              Effect.runPromise(Effect.gen(function*() {
                const ref = Offload.referenceOf({ threadId }, content)
                yield* store.put(ref, content)
                assert.strictEqual(yield* store.get(ref), content)
              }))),
            { numRuns: 60 }
          )
        )
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))
  }
})

describe("Offload: a store that cannot give a text back", () => {
  const big = `start ${"z".repeat(5000)} end`
  /** Thread "t" offloads `big`, then reads it back whole with read_offloaded. */
  const readBack = Effect.gen(function*() {
    const model = yield* ScriptedModel.make([
      ScriptedModel.toolCalls([{ name: "fetch_page", params: { url: "u" }, id: "f" }]),
      (request) =>
        ScriptedModel.toolCalls([{ name: "read_offloaded", params: { ref: refIn(request), limit: 20_000 }, id: "r" }]),
      ScriptedModel.text("done")
    ])
    const agent = yield* Agent.make({ toolkit: Tools, middleware: [Offload.middleware({ maxResultChars: 100 })] }).pipe(
      Effect.provide(Tools.toLayer({ fetch_page: () => Effect.succeed(big) })),
      Effect.provideService(LanguageModel.LanguageModel, model.model)
    )
    const result = yield* agent.run("fetch", { threadId: "t" })
    return toolResults(result.state.messages).find((part) => part.id === "r")!
  })

  it.effect("a text over the directory workspace's maxFileBytes is read back from the thread", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      const read = yield* readBack.pipe(
        Effect.provide(
          Offload.layerWorkspace().pipe(Layer.provide(Workspace.layerDirectory({ root, maxFileBytes: 3000 })))
        )
      )
      assert.isFalse(read.isFailure, JSON.stringify(read.result))
      assert.strictEqual((read.result as Offload.Page).text, big)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.effect("a store whose get fails: the thread reads its own text from its messages", () =>
    Effect.gen(function*() {
      const failing = Layer.succeed(
        Offload.OffloadStore,
        Offload.OffloadStore.of({
          put: () => Effect.void,
          get: (ref) => Effect.fail(new Offload.OffloadError({ reason: "StoreFailed", ref, detail: "disk gone" }))
        })
      )
      const read = yield* Effect.provide(readBack, failing)
      assert.isFalse(read.isFailure, JSON.stringify(read.result))
      assert.strictEqual((read.result as Offload.Page).text, big)
    }))
})
