/**
 * Golden files: every format this package stores, as a version of the code
 * wrote it (`test/golden/`, made by `test/golden/generate.ts` and never
 * written again). Each later version must still decode them to the same
 * values: a change that stops decoding one fails here, and needs a decoder
 * for the old format, not a new golden file.
 */
import { Prompt } from "@effect/ai"
import { FileSystem, KeyValueStore } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentState, Checkpointer, Middleware, RunJournal, RunRecord } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { Fixtures, ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, Layer, Option, Schema, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Golden from "./golden/golden.js"

const here = path.join(path.dirname(fileURLToPath(import.meta.url)), "golden")
const read = (name: string) => fs.readFileSync(path.join(here, name), "utf8")
const readJson = (name: string): any => JSON.parse(read(name))

/** The stored checkpoint decodes to the golden one, and its messages to the golden thread. */
const assertGoldenCheckpoint = (checkpoint: Checkpointer.Checkpoint) =>
  Effect.gen(function*() {
    assert.deepStrictEqual(checkpoint, Golden.checkpoint)
    const messages = yield* AgentState.decodeMessages(checkpoint.messages)
    assert.strictEqual(messages.length, 70)
    assert.deepStrictEqual(AgentState.encodeMessages(messages), AgentState.encodeMessages(Golden.messages))
    const call = messages[2]!.content[1] as Prompt.ToolCallPart
    assert.deepStrictEqual([call.type, call.id, call.params], [
      "tool-call",
      "call_0",
      { text: "0", nested: { list: [1, 2.5, null, true] } }
    ])
  })

/** The call a tool result answers, for its step's key. */
const toolCallOf = (result: Prompt.ToolResultPart): Prompt.ToolCallPart =>
  Prompt.makePart("tool-call", { id: result.id, name: result.name, params: {}, providerExecuted: false })

describe("golden files: checkpoints", () => {
  it.effect("checkpoint-v1.json (toJson: the SQL row, the single-value format) decodes with fromJson", () =>
    Effect.gen(function*() {
      const checkpoint = yield* Checkpointer.fromJson("golden/thread 1", read("checkpoint-v1.json"))
      yield* assertGoldenCheckpoint(checkpoint)
      assert.deepStrictEqual(checkpoint.pending, {
        node: "afterModel",
        middleware: "approvals",
        value: { question: "run rm -rf?", calls: [{ id: "call_22", name: "echo" }] },
        key: "approvals/0",
        durable: true
      })
      assert.deepStrictEqual(checkpoint.run, { step: 4, inputTokens: 1200, outputTokens: 85, totalTokens: 1285 })
    }))

  it.effect("keyValueStore-v2.json (a head, a full chunk, two tail slots) loads on a KeyValueStore checkpointer", () =>
    Effect.gen(function*() {
      const store = yield* KeyValueStore.KeyValueStore
      for (const [key, value] of Object.entries(readJson("keyValueStore-v2.json"))) {
        yield* store.set(key, value as string)
      }
      const checkpointer = yield* Checkpointer.makeKeyValueStore()
      yield* assertGoldenCheckpoint(Option.getOrThrow(yield* checkpointer.load("golden/thread 1")))
    }).pipe(Effect.provide(KeyValueStore.layerMemory)))

  it.scoped("keyValueStore: the same entries under the previous single-value format load too", () =>
    Effect.gen(function*() {
      const store = yield* KeyValueStore.KeyValueStore
      yield* store.set("thread:golden/thread 1", read("checkpoint-v1.json"))
      const checkpointer = yield* Checkpointer.makeKeyValueStore()
      yield* assertGoldenCheckpoint(Option.getOrThrow(yield* checkpointer.load("golden/thread 1")))
    }).pipe(Effect.provide(KeyValueStore.layerMemory)))

  it.scoped("fileSystem-v2/ (a head file and its log) loads on a file-system checkpointer", () =>
    Effect.gen(function*() {
      const fsys = yield* FileSystem.FileSystem
      const directory = yield* fsys.makeTempDirectoryScoped({ directory: os.tmpdir(), prefix: "stepwise-golden-" })
      // a copy: loading must not need to write, but a checkpointer may tidy
      for (const file of fs.readdirSync(path.join(here, "fileSystem-v2"))) {
        fs.copyFileSync(path.join(here, "fileSystem-v2", file), path.join(directory, file))
      }
      const checkpointer = yield* Checkpointer.makeFileSystem(directory)
      yield* assertGoldenCheckpoint(Option.getOrThrow(yield* checkpointer.load("golden/thread 1")))
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("golden files: journal entries", () => {
  it.effect("journal-entries-v1.json: one value of each kind of step decodes with its schema", () =>
    Effect.gen(function*() {
      const entries = readJson("journal-entries-v1.json")
      const load = yield* Schema.decodeUnknown(Golden.LoadStep)(entries.load)
      assert.deepStrictEqual(
        Option.map(load, (checkpoint) => checkpoint.messages),
        Option.some(Golden.checkpoint.messages.slice(0, 3))
      )
      const inbox = yield* Schema.decodeUnknown(Golden.InboxStep)(entries.inbox)
      assert.deepStrictEqual(inbox.map((message) => message.role), ["user"])
      assert.deepStrictEqual((inbox[0]!.content[0] as Prompt.TextPart).text, "steer: be brief")
      const model = yield* Schema.decodeUnknown(RunJournal.ModelCall)(entries.model)
      assert.deepStrictEqual(
        Schema.encodeSync(RunJournal.ModelCall)(model),
        Schema.encodeSync(RunJournal.ModelCall)(Golden.modelCall)
      )
      assert.deepStrictEqual({ ...model.usage }, { ...Golden.modelCall.usage })
      assert.deepStrictEqual(model.offered, ["echo", "final_answer"])
      const tool = yield* Schema.decodeUnknown(Prompt.ToolResultPart)(entries.tool)
      assert.deepStrictEqual([tool.id, tool.name, tool.result, tool.isFailure], [
        "call_x",
        "echo",
        { echoed: "x", at: [1, 2] },
        false
      ])
      // the schema of a tool step (a result with the state updates of its wrapToolCall hooks) reads it too
      const toolStep = yield* Schema.decodeUnknown(
        RunJournal.StepKey.Tool({ call: toolCallOf(tool), occurrence: 1 }).schema
      )(
        entries.tool
      )
      assert.deepStrictEqual([toolStep.id, toolStep.result, toolStep.updates], [
        "call_x",
        { echoed: "x", at: [1, 2] },
        undefined
      ])
      assert.deepStrictEqual(Schema.encodeSync(RunJournal.ToolCall)(toolStep), entries.tool)
    }))

  it.effect("journal-v1.json: a recorded run replays from its entries alone, to the same result", () =>
    Effect.gen(function*() {
      const golden = readJson("journal-v1.json")
      const entries: Record<string, unknown> = golden.entries
      const replayed: Array<string> = []
      const replay = RunJournal.RunJournal.of({
        ...RunJournal.inProcess,
        step: <A, E, R>(key: RunJournal.StepKey<A>, effect: Effect.Effect<A, E, R>) => {
          const name = RunJournal.stepName(key)
          // a checkpoint's save runs again (its value is void); every other step comes from the file
          if (RunJournal.innermost(key)._tag === "Checkpoint") return effect
          if (!(name in entries)) return Effect.dieMessage(`the golden journal has no step ${name}`)
          replayed.push(name)
          return Effect.orDie(Schema.decodeUnknown(key.schema)(entries[name]))
        }
      })
      // the store holds the thread the journal's load gives (the run's saves land only on the thread it loaded)
      const store = yield* Checkpointer.makeMemory
      const loaded = Schema.decodeUnknownSync(Schema.NullOr(Checkpointer.Checkpoint))(entries.load)
      if (loaded !== null) yield* store.save("golden", loaded)
      // a model with nothing to say: every model call must come from the journal
      const agent = yield* Agent.make({ toolkit: Fixtures.echoToolkit, middleware: [Golden.counter], maxSteps: 10 })
        .pipe(
          Effect.provide(Layer.mergeAll(
            Fixtures.echoLayer,
            Layer.succeed(Checkpointer.Checkpointer, store),
            ScriptedModel.layer([])
          ))
        )
      const result = yield* agent.run("second", { threadId: "golden" }).pipe(
        Effect.provideService(RunJournal.RunJournal, replay)
      )
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      assert.deepStrictEqual(
        { text: result.text, steps: result.steps, usage: { ...result.usage } },
        { text: golden.result.text, steps: golden.result.steps, usage: golden.result.usage }
      )
      assert.deepStrictEqual(AgentState.encodeMessages(result.state.messages), golden.result.messages)
      // every kind of step was read back
      const kinds = new Set(replayed.map((name) => name.split("/")[0]))
      assert.deepStrictEqual([...kinds].sort(), ["inbox", "load", "model", "tool"])
    }))

  it.effect("record-v1.jsonl: a run record as 0.1.0 wrote it (decisions without inStep) reads, replays with no model or tool call, and its replay reports the decision made inside the tool call again", () =>
    Effect.gen(function*() {
      const record = yield* RunRecord.fromJsonl(read("record-v1.jsonl"))
      // the agent that recorded it (test/golden: written by the code of commit f21f2c0)
      const audit = Middleware.make({
        name: "audit",
        wrapToolCall: (request, next) =>
          Effect.zipRight(Middleware.report(`running ${request.call.name}`, { callId: request.call.id }), next(request))
      })
      const gate = HumanInTheLoop.middleware({
        toolkit: Fixtures.toolkit,
        interruptOn: { add: { allowedDecisions: ["approve"], when: () => false } }
      })
      let added = 0
      const events = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          toolkit: Fixtures.toolkit,
          systemPrompt: "You add.",
          middleware: [gate, audit]
        })
        const result = yield* agent.replay(record)
        assert.deepStrictEqual(result._tag === "Completed" && result.text, "5")
        assert.strictEqual((yield* ScriptedModel.requests).length, 0)
        return Chunk.toReadonlyArray(yield* Stream.runCollect(agent.replayStream(record)))
      }).pipe(
        Effect.provide(Layer.merge(
          ScriptedModel.layer([]),
          Fixtures.toolkit.toLayer({
            echo: ({ text }) => Effect.succeed(text),
            add: ({ a, b }) => Effect.sync(() => (added++, a + b)),
            fail: ({ reason }) => Effect.fail({ reason })
          })
        ))
      )
      assert.strictEqual(added, 0)
      assert.deepStrictEqual(
        events.flatMap((event) =>
          event._tag === "MiddlewareDecision"
            ? [`${event.middleware}: ${event.decision}`]
            : event._tag === "ToolCallStarted" || event._tag === "ToolCallCompleted"
            ? [event._tag]
            : []
        ),
        [
          "humanInTheLoop: 1 call(s) need no decision (when)",
          "ToolCallStarted",
          "audit: running add",
          "ToolCallCompleted"
        ]
      )
    }))
})
