import { Prompt } from "@effect/ai"
import { FileSystem } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentState, Checkpointer, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Option, Schema } from "effect"
import * as os from "node:os"
import * as path from "node:path"
import { Calculator, CalculatorLive, encoded, encodedRequests, roles } from "./utils.js"

/** Counts model calls; the count is stored as a string, so a checkpoint must encode and decode it. */
const counter = () =>
  Middleware.make({
    name: "counter",
    state: { schema: Schema.Struct({ modelCalls: Schema.NumberFromString }), initial: { modelCalls: 0 } },
    beforeModel: ({ state }) => Effect.succeed({ state: { modelCalls: state.modelCalls + 1 } })
  })

/** Remembers the finish text of every turn. */
const journal = () =>
  Middleware.make({
    name: "journal",
    state: { schema: Schema.Struct({ replies: Schema.Array(Schema.String) }), initial: { replies: [] } },
    afterModel: ({ messages, state }) => {
      const last = messages.at(-1)
      const text = last?.role === "assistant"
        ? last.content.map((part) => part.type === "text" ? part.text : part.type).join("|")
        : ""
      return Effect.succeed({ state: { replies: [...state.replies, text] } })
    }
  })

/** One "process": a fresh scripted model, a fresh file checkpointer on `directory`, a fresh agent. */
const inProcess = <A, E>(
  directory: string,
  script: ReadonlyArray<ScriptedModel.Turn>,
  body: (agent: Effect.Effect.Success<ReturnType<typeof makeAgent>>) => Effect.Effect<A, E, ScriptedModel.ScriptedModel>
) =>
  Effect.flatMap(makeAgent(), body).pipe(
    Effect.provide(Layer.mergeAll(
      ScriptedModel.layer(script),
      CalculatorLive,
      Checkpointer.layerFileSystem(directory).pipe(Layer.provide(NodeContext.layer))
    ))
  )

const makeAgent = () =>
  Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware: [counter(), journal()] })

const tempDirectory = Effect.flatMap(
  FileSystem.FileSystem,
  (fs) => fs.makeTempDirectoryScoped({ directory: os.tmpdir(), prefix: "stepwise-checkpoints-" })
)

describe("Checkpointer.layerFileSystem", () => {
  it.scoped("state slices round-trip, and a fresh agent on the same folder continues the thread", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const threadId = "user:1/chat"

      const first = yield* inProcess(directory, [
        ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }]),
        ScriptedModel.text("1 + 2 = 3")
      ], (agent) => agent.run("What is 1 + 2?", { threadId }))
      assert.strictEqual(first._tag, "Completed")
      assert.strictEqual(first.state.modelCalls, 2)
      assert.deepStrictEqual(first.state.replies, ["tool-call", "1 + 2 = 3"])

      // one thread = its head (the encoded slices, and how much of the log is committed) + its log of messages
      const name = encodeURIComponent(threadId)
      const head = JSON.parse(yield* fs.readFileString(path.join(directory, `${name}.json`)))
      assert.strictEqual(head.version, 2)
      assert.strictEqual(head.threadId, threadId)
      assert.deepStrictEqual(head.slices, {
        counter: { modelCalls: "2" },
        journal: { replies: ["tool-call", "1 + 2 = 3"] }
      })
      assert.deepStrictEqual(
        (yield* fs.readDirectory(directory)).sort(),
        [`${name}.${head.log.generation}.log`, `${name}.json`].sort()
      )
      // the log: one encoded message per line, in the checkpoint form, which decodes to the same messages
      const log = yield* fs.readFileString(path.join(directory, `${name}.${head.log.generation}.log`))
      assert.strictEqual(Buffer.byteLength(log), head.log.end)
      const stored = log.split("\n").slice(0, -1).map((line) => JSON.parse(line))
      assert.strictEqual(head.log.messages, stored.length)
      assert.deepStrictEqual(stored, AgentState.encodeMessages(first.state.messages))
      assert.deepStrictEqual(
        encoded(yield* AgentState.decodeMessages(stored)),
        encoded(first.state.messages)
      )

      const second = yield* inProcess(directory, [ScriptedModel.text("Still 3.")], (agent) =>
        Effect.gen(function*() {
          const snapshot = yield* agent.thread(threadId)
          assert.isTrue(Option.isSome(snapshot))
          const state = Option.getOrThrow(snapshot).state
          assert.deepStrictEqual(encoded(state.messages), encoded(first.state.messages))
          assert.strictEqual(state.modelCalls, 2)
          assert.deepStrictEqual(state.replies, ["tool-call", "1 + 2 = 3"])

          const result = yield* agent.run("And again?", { threadId })
          // the model saw the whole stored conversation plus the new question
          const [request] = encodedRequests(yield* ScriptedModel.requests)
          assert.deepStrictEqual(
            request!.prompt.content,
            encoded([
              Prompt.makeMessage("system", { content: "You add." }),
              ...first.state.messages,
              ...Prompt.make("And again?").content
            ])
          )
          return result
        }))
      assert.strictEqual(second._tag, "Completed")
      assert.strictEqual(second.state.modelCalls, 3)
      assert.deepStrictEqual(second.state.replies, ["tool-call", "1 + 2 = 3", "Still 3."])
      assert.deepStrictEqual(roles(second.state.messages), [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant"
      ])
      assert.deepStrictEqual(encoded(second.state.messages.slice(0, 4)), encoded(first.state.messages))
      assert.strictEqual(second.steps, 1)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("an interrupted thread resumes in a fresh agent on the same folder", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory
      const seen: Array<Option.Option<unknown>> = []
      const approval = () =>
        Middleware.make({
          name: "approval",
          state: { schema: Schema.Struct({ approved: Schema.Boolean }), initial: { approved: false } },
          wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.String },
          beforeModel: ({ resume, state }) =>
            Effect.sync(() => {
              seen.push(resume)
              if (state.approved) return undefined
              return Option.match(resume, {
                onNone: () => ({ interrupt: { question: "May I call the model?" } }),
                onSome: (answer) => ({ state: { approved: answer === "yes" } })
              })
            })
        })
      const layers = (script: ReadonlyArray<ScriptedModel.Turn>) =>
        Layer.mergeAll(
          ScriptedModel.layer(script),
          Checkpointer.layerFileSystem(directory).pipe(Layer.provide(NodeContext.layer))
        )

      const first = yield* Effect.flatMap(
        Agent.make({ middleware: [counter(), approval()] }),
        (agent) => agent.run("hi", { threadId: "t" })
      ).pipe(Effect.provide(layers([])))
      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      assert.deepStrictEqual(first.interrupt, {
        middleware: "approval",
        value: { question: "May I call the model?" },
        key: "beforeModel/approval/0"
      })

      const second = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ middleware: [counter(), approval()] })
        const pending = yield* agent.thread("t")
        assert.deepStrictEqual(
          Option.flatMap(pending, (snapshot) => snapshot.pending),
          Option.some({
            middleware: "approval",
            value: { question: "May I call the model?" } as unknown,
            key: "beforeModel/approval/0"
          })
        )
        const result = yield* agent.resume("t", "yes")
        assert.strictEqual((yield* ScriptedModel.requests).length, 1)
        return result
      }).pipe(Effect.provide(layers([ScriptedModel.text("Hello!")])))
      assert.strictEqual(second._tag, "Completed")
      assert.deepStrictEqual(seen, [Option.none(), Option.some("yes")])
      assert.strictEqual(second.state.approved, true)
      // counter ran before approval on the first run, and is not re-run on resume
      assert.strictEqual(second.state.modelCalls, 1)
      assert.deepStrictEqual(roles(second.state.messages), ["user", "assistant"])
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("Checkpointer.layerFileSystem, two instances on one folder", () => {
  it.scoped("concurrent saves of one thread never tear it: every save and every load succeeds, whole", () =>
    Effect.gen(function*() {
      const directory = yield* tempDirectory
      const [first, second] = yield* Effect.all([
        Checkpointer.makeFileSystem(directory),
        Checkpointer.makeFileSystem(directory)
      ])
      // checkpoints of very different sizes, so an overlapped write would show as a torn file
      const checkpoint = (writer: number, index: number): Checkpointer.Checkpoint => ({
        version: 1,
        threadId: "t",
        messages: Array.from({ length: 1 + ((index * 37 + writer * 11) % 200) }, () => ({ writer, index })),
        slices: { writer: { writer, index } }
      })
      const written = new Map<string, Checkpointer.Checkpoint>()
      const saves = (writer: number, checkpointer: Checkpointer.Service) =>
        Effect.forEach(Array.from({ length: 100 }, (_, index) => index), (index) => {
          const value = checkpoint(writer, index)
          written.set(`${writer}/${index}`, value)
          return checkpointer.save("t", value)
        }, { concurrency: 4, discard: true })
      yield* first.save("t", checkpoint(0, 0))
      written.set("0/0", checkpoint(0, 0))
      const loads = Effect.forEach(Array.from({ length: 200 }, () => undefined), () =>
        Effect.zipRight(
          Effect.yieldNow(),
          Effect.map(second.load("t"), Option.getOrThrow)
        ), { concurrency: 2 })
      const [, , loaded] = yield* Effect.all([saves(1, first), saves(2, second), loads], {
        concurrency: "unbounded"
      })
      const last = Option.getOrThrow(yield* first.load("t"))
      for (const value of [...loaded, last]) {
        const slice = value.slices["writer"] as { writer: number; index: number }
        assert.deepStrictEqual(value, written.get(`${slice.writer}/${slice.index}`))
      }
      // no temporary file is left behind: the head, its log, and logs the two instances replaced in each other's
      // heads (kept a minute in case their writer was still appending; deleted by its writer's next save)
      const fs = yield* FileSystem.FileSystem
      const head = JSON.parse(yield* fs.readFileString(path.join(directory, "t.json")))
      const files = yield* fs.readDirectory(directory)
      assert.includeMembers(files, ["t.json", `t.${head.log.generation}.log`])
      assert.deepStrictEqual(files.filter((file) => file !== "t.json" && !/^t\.[0-9a-f-]{36}\.log$/.test(file)), [])
      // and deleting the thread deletes them all
      yield* second.delete("t")
      assert.deepStrictEqual(yield* fs.readDirectory(directory), [])
      assert.isTrue(Option.isNone(yield* first.load("t")))
    }).pipe(Effect.provide(NodeContext.layer)))
})
