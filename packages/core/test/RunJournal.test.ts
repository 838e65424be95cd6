import { IdGenerator, Prompt, Response, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware, RunJournal, ToolContext } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Deferred, Effect, Exit, Fiber, Layer, Option, Schema, Scope, Stream } from "effect"
import { Calculator, CalculatorLive, encoded, recording } from "./utils.js"

const script = (): ReadonlyArray<ScriptedModel.Turn> => [
  ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }]),
  ScriptedModel.toolCalls([{ name: "add", params: { a: 3, b: 4 }, id: "c2" }]),
  ScriptedModel.text("3 and 7.")
]

interface Journal {
  readonly models: Array<RunJournal.ModelCall>
  readonly tools: Map<string, RunJournal.ToolCall>
  /** The name of every step the journal was asked for, in order. */
  readonly names: Array<string>
  loaded: unknown
}

/**
 * A journaling journal like a durable one: records each model and tool call
 * the first time and replays it from the journal after, without running it.
 */
const journaling = (journal: Journal, executed: { models: number; tools: number }) =>
  RunJournal.RunJournal.of({
    durable: false,
    step: <A, E, R>(key: RunJournal.StepKey<A>, effect: Effect.Effect<A, E, R>) => {
      journal.names.push(RunJournal.stepName(key))
      switch (key._tag) {
        case "Load":
          return journal.loaded !== undefined
            ? Effect.succeed(journal.loaded as A)
            : Effect.tap(effect, (loaded) => Effect.sync(() => (journal.loaded = loaded)))
        case "Checkpoint":
        case "Inbox":
          return effect
        case "Model":
          return key.step < journal.models.length
            ? Effect.succeed(key.result.to(journal.models[key.step]!))
            : Effect.tap(effect, (outcome) =>
              Effect.sync(() => {
                executed.models++
                journal.models.push(key.result.from(outcome))
              }))
        case "Tool": {
          const known = journal.tools.get(key.call.id)
          return known !== undefined ?
            Effect.succeed(key.result.to(known)) :
            Effect.tap(effect, (result) =>
              Effect.sync(() => {
                executed.tools++
                journal.tools.set(key.call.id, key.result.from(result))
              }))
        }
        case "Nested":
          // these runs start no subagents
          return effect
      }
    },
    await: () => Effect.succeedNone
  })

const newJournal = (): Journal => ({ models: [], tools: new Map(), names: [], loaded: undefined })

describe("RunJournal", () => {
  it.effect("model and tool calls go through the executor; a replay from its journal runs nothing again", () =>
    Effect.gen(function*() {
      const journal = newJournal()
      const first = { models: 0, tools: 0 }
      const log: Array<string> = []
      const live = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, middleware: [recording("r", log)] })
        return yield* agent.run("Add 1+2 and 3+4", { threadId: "t" }).pipe(
          Effect.provideService(RunJournal.RunJournal, journaling(journal, first))
        )
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script()), CalculatorLive)))
      assert.deepStrictEqual(first, { models: 3, tools: 2 })
      assert.strictEqual(journal.models.length, 3)
      assert.deepStrictEqual([...journal.tools.keys()], ["c1", "c2"])
      // the loop names each step once, in the order it takes them (a journal that records steps records
      // every look into the inbox too, so a replay takes in what the first execution took)
      assert.deepStrictEqual(journal.names, [
        "load",
        "inbox/0",
        "model/0",
        "tool/c1",
        "checkpoint/0",
        "inbox/1",
        "model/1",
        "tool/c2",
        "checkpoint/1",
        "inbox/2",
        "model/2",
        "checkpoint/2"
      ])

      // Replay on a model with no turns at all and a toolkit whose handler dies: nothing may run.
      const again = { models: 0, tools: 0 }
      const replayLog: Array<string> = []
      const replayed = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, middleware: [recording("r", replayLog)] })
        return yield* agent.run("Add 1+2 and 3+4", { threadId: "t" }).pipe(
          Effect.provideService(RunJournal.RunJournal, journaling(journal, again))
        )
      }).pipe(
        Effect.provide(Layer.merge(
          ScriptedModel.layer([]),
          Calculator.toLayer({ add: () => Effect.dieMessage("a replayed tool call ran") })
        ))
      )
      assert.deepStrictEqual(again, { models: 0, tools: 0 })
      assert.strictEqual(live._tag, "Completed")
      assert.strictEqual(replayed._tag, "Completed")
      assert.deepStrictEqual(encoded(replayed.state.messages), encoded(live.state.messages))
      // node hooks run again on replay (they are deterministic); wrap hooks ran inside the journaled calls
      assert.deepStrictEqual(replayLog, log.filter((entry) => !entry.includes(".wrap")))
    }))

  it.effect("a wrapModelCall's state update is journaled with its call: a replay applies it without the hook", () =>
    Effect.gen(function*() {
      const journal = newJournal()
      let wrapped = 0
      const counting = Middleware.make({
        name: "counting",
        state: { schema: Schema.Struct({ calls: Schema.Number }), initial: { calls: 0 } },
        wrapModelCall: (request, next) =>
          Effect.map(next(request), (response) => {
            wrapped++
            return { ...response, state: { calls: (request.state.calls as number) + 1 } }
          })
      })
      const run = (layer: Layer.Layer<any>) =>
        Effect.gen(function*() {
          const agent = yield* Agent.make({ toolkit: Calculator, middleware: [counting] })
          return yield* agent.run("Add 1+2 and 3+4", { threadId: "t" }).pipe(
            Effect.provideService(RunJournal.RunJournal, journaling(journal, { models: 0, tools: 0 }))
          )
        }).pipe(Effect.provide(layer))
      const live = yield* run(Layer.merge(ScriptedModel.layer(script()), CalculatorLive))
      assert.strictEqual(wrapped, 3)
      assert.strictEqual((live.state as any).calls, 3)
      assert.deepStrictEqual(journal.models.map((call) => call.updates), [
        [{ middleware: "counting", state: { calls: 1 } }],
        [{ middleware: "counting", state: { calls: 2 } }],
        [{ middleware: "counting", state: { calls: 3 } }]
      ])
      const replayed = yield* run(Layer.merge(ScriptedModel.layer([]), CalculatorLive))
      assert.strictEqual(wrapped, 3)
      assert.strictEqual((replayed.state as any).calls, 3)
    }))

  it.effect("a wrapToolCall's state update is journaled with its call: a replay applies it without running the tool", () =>
    Effect.gen(function*() {
      const journal = newJournal()
      let wrapped = 0
      const seen: Array<unknown> = []
      const counting = Middleware.make({
        name: "counting",
        state: { schema: Schema.Struct({ sums: Schema.Array(Schema.Number) }), initial: { sums: [] } },
        wrapToolCall: (request, next) =>
          Effect.map(next(request), (result) => {
            wrapped++
            return {
              ...result,
              state: { sums: [...(request.state.sums as ReadonlyArray<number>), result.result as number] }
            }
          }),
        beforeModel: ({ state }) => Effect.sync(() => void seen.push(state.sums))
      })
      const run = (layer: Layer.Layer<any>) =>
        Effect.gen(function*() {
          const agent = yield* Agent.make({ toolkit: Calculator, middleware: [counting] })
          return yield* agent.run("Add 1+2 and 3+4", { threadId: "t" }).pipe(
            Effect.provideService(RunJournal.RunJournal, journaling(journal, { models: 0, tools: 0 }))
          )
        }).pipe(Effect.provide(layer))
      const live = yield* run(Layer.merge(ScriptedModel.layer(script()), CalculatorLive))
      assert.strictEqual(wrapped, 2)
      assert.deepStrictEqual((live.state as any).sums, [3, 7])
      assert.deepStrictEqual([...journal.tools.values()].map((call) => call.updates), [
        [{ middleware: "counting", state: { sums: [3] } }],
        [{ middleware: "counting", state: { sums: [3, 7] } }]
      ])
      // the journaled value encodes and decodes with the key's schema, updates included
      const first = journal.tools.get("c1")!
      const decoded = Schema.decodeUnknownSync(RunJournal.ToolCall)(
        JSON.parse(JSON.stringify(Schema.encodeSync(RunJournal.ToolCall)(first)))
      )
      assert.deepStrictEqual([decoded.result, decoded.updates], [3, first.updates])
      // replayed: no model turn, a tool that dies, and the updates still applied as the first execution did
      seen.length = 0
      const replayed = yield* run(Layer.merge(
        ScriptedModel.layer([]),
        Calculator.toLayer({ add: () => Effect.dieMessage("a replayed tool call ran") })
      ))
      assert.strictEqual(wrapped, 2)
      assert.deepStrictEqual((replayed.state as any).sums, [3, 7])
      assert.deepStrictEqual(seen, [[], [3], [3, 7]])
      assert.deepStrictEqual(encoded(replayed.state.messages), encoded(live.state.messages))
    }))

  it.effect("an executor that answers an interrupt continues the run at once, with the key of the wait", () =>
    Effect.gen(function*() {
      const seen: Array<RunJournal.Interrupt.Any> = []
      const resumes: Array<unknown> = []
      const ask = Middleware.make({
        name: "ask",
        wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.String },
        beforeModel: ({ resume, step }) =>
          Effect.sync(() => {
            if (Option.isSome(resume)) resumes.push(resume.value)
            return step === 0 && Option.isNone(resume) ? { interrupt: { question: "go?" } } : undefined
          })
      })
      const executor = RunJournal.RunJournal.of({
        ...RunJournal.inProcess,
        await: (interrupt) =>
          Effect.zipRight(
            Effect.sync(() => seen.push(interrupt)),
            Effect.map(RunJournal.decodeDecision(interrupt, "yes"), Option.some)
          )
      })
      const result = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, middleware: [ask] })
        return yield* agent.run("Add", { threadId: "t" })
      }).pipe(
        Effect.provideService(RunJournal.RunJournal, executor),
        Effect.provide(Layer.merge(ScriptedModel.layer(script()), CalculatorLive))
      )
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(resumes, ["yes"])
      assert.deepStrictEqual(
        seen.map(({ key, middleware, node, step, value }) => ({ key, middleware, node, step, value })),
        [
          { key: "beforeModel/ask/0", middleware: "ask", node: "beforeModel", step: 0, value: { question: "go?" } }
        ]
      )
    }))

  it.effect("a key a hook repeats within a run is made unique", () =>
    Effect.gen(function*() {
      const keys: Array<string> = []
      let asked = 0
      const ask = Middleware.make({
        name: "ask",
        wait: { request: Schema.String, decision: Schema.String },
        beforeModel: ({ resume }) =>
          Effect.sync(() => {
            if (Option.isSome(resume) || asked >= 3) return undefined
            asked++
            return { interrupt: "again?", interruptKey: "same" }
          })
      })
      const executor = RunJournal.RunJournal.of({
        ...RunJournal.inProcess,
        await: (interrupt) =>
          Effect.zipRight(
            Effect.sync(() => keys.push(interrupt.key)),
            Effect.map(RunJournal.decodeDecision(interrupt, "ok"), Option.some)
          )
      })
      yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, middleware: [ask] })
        return yield* agent.run("Add", { threadId: "t" })
      }).pipe(
        Effect.provideService(RunJournal.RunJournal, executor),
        Effect.provide(Layer.merge(ScriptedModel.layer(script()), CalculatorLive))
      )
      assert.deepStrictEqual(keys, ["same", "same#2", "same#3"])
    }))

  it.effect("structured output is taken from the stored call, so a replayed call sets it too", () =>
    Effect.gen(function*() {
      const journal = newJournal()
      const Answer = Schema.Struct({ total: Schema.Number })
      const outputScript = [
        ScriptedModel.toolCalls([{ name: "final_answer", params: { total: 3 }, id: "f1" }])
      ]
      const runWith = (model: Layer.Layer<any>) =>
        Effect.gen(function*() {
          const agent = yield* Agent.make({ toolkit: Calculator, responseFormat: Answer })
          return yield* agent.run("Add 1 and 2", { threadId: "t" }).pipe(
            Effect.provideService(RunJournal.RunJournal, journaling(journal, { models: 0, tools: 0 }))
          )
        }).pipe(Effect.provide(Layer.merge(model, CalculatorLive)))
      const live = yield* runWith(ScriptedModel.layer(outputScript))
      const replayed = yield* runWith(ScriptedModel.layer([]))
      assert.deepStrictEqual(live._tag === "Completed" ? live.output : undefined, Option.some({ total: 3 }))
      assert.deepStrictEqual(replayed._tag === "Completed" ? replayed.output : undefined, Option.some({ total: 3 }))
    }))
})

describe("ToolContext", () => {
  it.effect("a tool handler sees its call id and an idempotency key; outside a tool call there is none", () =>
    Effect.gen(function*() {
      const Write = Tool.make("write", {
        parameters: { text: Schema.String },
        success: Schema.String
      })
      const Tools = Toolkit.make(Write)
      const seen: Array<ToolContext.ToolContext> = []
      const result = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools })
        return yield* agent.run("write it", { threadId: "t9" })
      }).pipe(
        Effect.provide(Layer.merge(
          ScriptedModel.layer([
            ScriptedModel.toolCalls([{ name: "write", params: { text: "x" }, id: "call_7" }]),
            ScriptedModel.text("done")
          ]),
          Tools.toLayer({
            write: () => Effect.map(Effect.orDie(ToolContext.current), (context) => (seen.push(context), "ok"))
          })
        ))
      )
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(seen, [{
        callId: "call_7",
        toolName: "write",
        threadId: "t9",
        idempotencyKey: "t9/call_7"
      }])
      assert.isTrue(Exit.isFailure(yield* Effect.exit(ToolContext.current)))
    }))
})

describe("Agent.watch", () => {
  it.scoped("reports every run's events tagged with run and thread, and a failed run as RunFailed", () =>
    Effect.gen(function*() {
      const failing = Middleware.make({
        name: "failing",
        beforeAgent: ({ threadId }) => threadId === "bad" ? Effect.fail("boom" as const) : Effect.void
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [failing] })
      const pull = yield* Stream.toPull(yield* agent.watch)
      yield* agent.run("Add", { threadId: "good" })
      yield* Effect.exit(agent.run("Add", { threadId: "bad" }))
      const collected: Array<Agent.RunEvent<any>> = []
      while (collected.at(-1)?.event._tag !== "RunFailed") collected.push(...(yield* pull))
      const good = collected.filter((event) => event.threadId === "good")
      const bad = collected.filter((event) => event.threadId === "bad")
      assert.strictEqual(new Set(good.map((event) => event.runId)).size, 1)
      assert.notStrictEqual(good[0]!.runId, bad[0]!.runId)
      assert.strictEqual(good[0]!.event._tag, "RunStarted")
      assert.strictEqual(good.at(-1)!.event._tag, "RunEnded")
      assert.strictEqual(good.filter((event) => event.event._tag === "ToolCallCompleted").length, 2)
      assert.deepStrictEqual(bad.map((event) => event.event._tag), ["RunStarted", "RunFailed"])
      const failed = bad[1]!.event
      assert.isTrue(failed._tag === "RunFailed" && failed.message.includes("boom"))
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script()), CalculatorLive))))

  it.scoped("names watched runs with the context's IdGenerator when there is one", () =>
    Effect.gen(function*() {
      let next = 0
      const agent = yield* Agent.make({ toolkit: Calculator })
      const pull = yield* Stream.toPull(yield* agent.watch)
      yield* agent.run("Add", { threadId: "one" }).pipe(
        Effect.provideService(IdGenerator.IdGenerator, { generateId: () => Effect.sync(() => `run-${++next}`) })
      )
      const collected: Array<Agent.RunEvent<any>> = []
      while (collected.at(-1)?.event._tag !== "RunEnded") collected.push(...(yield* pull))
      assert.deepStrictEqual(new Set(collected.map((event) => event.runId)), new Set(["run-1"]))
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script()), CalculatorLive))))

  it.effect("closing the watch scope ends the stream after the events published before, none lost", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator })
      const scope = yield* Scope.make()
      const events = yield* Scope.extend(agent.watch, scope)
      yield* agent.run("Add", { threadId: "t" })
      yield* Scope.close(scope, Exit.void)
      yield* agent.run("Add", { threadId: "after" })
      const tags = Chunk.toReadonlyArray(yield* Stream.runCollect(events)).map((event) => event.event._tag)
      assert.strictEqual(tags[0], "RunStarted")
      assert.strictEqual(tags.at(-1), "RunEnded")
      assert.strictEqual(tags.filter((tag) => tag === "RunStarted").length, 1)
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([...script(), ...script()]), CalculatorLive))))

  it.scoped("a watched run whose fiber is interrupted reports RunFailed with error Interrupted", () =>
    Effect.gen(function*() {
      const Hold = Tool.make("hold", { success: Schema.String })
      const started = yield* Deferred.make<void>()
      const agent = yield* Agent.make({ toolkit: Toolkit.make(Hold) }).pipe(
        Effect.provide(
          Toolkit.make(Hold).toLayer({
            hold: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
          })
        )
      )
      const events = yield* agent.watch
      const collecting = yield* events.pipe(
        Stream.takeUntil((event) => event.event._tag === "RunFailed"),
        Stream.runCollect,
        Effect.fork
      )
      const running = yield* Effect.fork(agent.run("hold on", { threadId: "t" }))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(running)
      const last = Chunk.toReadonlyArray(yield* Fiber.join(collecting)).at(-1)!.event
      assert.isTrue(last._tag === "RunFailed" && last.error === "Interrupted")
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.toolCalls([{ name: "hold", params: {} }])]))))

  it.effect("a run's own stream is unchanged by watchers being absent", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator })
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("Add", { threadId: "t" })))
      assert.strictEqual(events[0]!._tag, "RunStarted")
      assert.strictEqual(events.at(-1)!._tag, "RunEnded")
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script()), CalculatorLive))))
})

describe("Agent.validateResume", () => {
  it.effect("checks a value against the pending interrupt without running; resume runs the same check first", () =>
    Effect.gen(function*() {
      const checked: Array<unknown> = []
      const ask = Middleware.make({
        name: "ask",
        wait: {
          request: Schema.String,
          decision: Schema.String,
          check: ({ decision, request, threadId }) =>
            Effect.suspend(() => {
              checked.push({ interrupt: request, threadId, value: decision })
              return decision === "yes" || decision === "no"
                ? Effect.void
                : Effect.fail(`bad answer: ${decision}` as const)
            })
        },
        beforeModel: ({ resume, step }) =>
          Effect.succeed(step === 0 && Option.isNone(resume) ? { interrupt: "yes or no?" } : undefined)
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [ask] })
      const interrupted = yield* agent.run("Add", { threadId: "t" })
      assert.strictEqual(interrupted._tag, "Interrupted")
      const before = yield* agent.thread("t")

      const bad = yield* Effect.flip(agent.validateResume("t", "maybe"))
      assert.strictEqual(bad, "bad answer: maybe")
      const badResume = yield* Effect.flip(agent.resume("t", "maybe"))
      assert.strictEqual(badResume, "bad answer: maybe")
      assert.deepStrictEqual(yield* agent.thread("t"), before)

      const pending = yield* agent.validateResume("t", "yes")
      assert.deepStrictEqual(
        { middleware: pending.middleware, key: pending.key, value: pending.value },
        { middleware: "ask", key: "beforeModel/ask/0", value: "yes or no?" }
      )
      assert.strictEqual((yield* agent.resume("t", "yes"))._tag, "Completed")
      assert.deepStrictEqual(checked, [
        { interrupt: "yes or no?", threadId: "t", value: "maybe" },
        { interrupt: "yes or no?", threadId: "t", value: "maybe" },
        { interrupt: "yes or no?", threadId: "t", value: "yes" },
        { interrupt: "yes or no?", threadId: "t", value: "yes" }
      ])
      const nothing = yield* Effect.flip(agent.validateResume("t", "yes"))
      assert.strictEqual((nothing as { _tag: string })._tag, "ThreadStateError")
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script()), CalculatorLive))))
})

describe("Agent.discardPending", () => {
  it.effect("gives up a pending decision: waiting calls are answered as not run, and the thread runs again", () =>
    Effect.gen(function*() {
      const gate = Middleware.make({
        name: "gate",
        wait: { request: Schema.String, decision: Schema.String },
        afterModel: ({ messages, resume }) => {
          const last = messages.at(-1)
          const calls = last?.role === "assistant" && last.content.some((part) => part.type === "tool-call")
          return Effect.succeed(calls && Option.isNone(resume) ? { interrupt: "run the tools?" } : undefined)
        }
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [gate] })
      assert.strictEqual((yield* agent.run("Add", { threadId: "t" }))._tag, "Interrupted")
      assert.isTrue(yield* agent.discardPending("t", "the user walked away"))
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      assert.isTrue(Option.isNone(thread.pending))
      const last = thread.state.messages.at(-1)!
      assert.strictEqual(last.role, "tool")
      assert.include(JSON.stringify(encoded([last])), "Not run: the user walked away")
      assert.isFalse(yield* agent.discardPending("t", "again"))
      // the next turn of the script answers the new input
      const next = yield* agent.run("never mind", { threadId: "t" })
      assert.strictEqual(next._tag, "Interrupted")
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script()), CalculatorLive))))
})

describe("RunJournal.StepKey", () => {
  it.effect("each key carries the schema of what its step gives: a journal records and replays with it alone", () =>
    Effect.gen(function*() {
      const stored = new Map<string, unknown>()
      /** Records each step's result encoded with its key's schema, and replays it decoded (never running it). */
      const encoding = RunJournal.RunJournal.of({
        durable: false,
        step: (key, effect) => {
          const name = RunJournal.stepName(key)
          return stored.has(name)
            ? Schema.decodeUnknown(key.schema)(stored.get(name)).pipe(Effect.orDie)
            : Effect.tap(
              effect,
              (value) =>
                Effect.map(Effect.orDie(Schema.encode(key.schema)(value)), (encoded) => void stored.set(name, encoded))
            )
        },
        await: () => Effect.succeedNone
      })
      const call = Prompt.makePart("tool-call", {
        id: "c1",
        name: "add",
        params: { a: 1, b: 2 },
        providerExecuted: false
      })
      const result = Prompt.makePart("tool-result", {
        id: "c1",
        name: "add",
        result: 3,
        isFailure: false,
        providerExecuted: false
      })
      const model = RunJournal.StepKey.Model({ step: 0 })
      const reply: RunJournal.ModelCall = {
        message: Prompt.makeMessage("assistant", { content: [call] }),
        usage: new Response.Usage({ inputTokens: 1, outputTokens: 2, totalTokens: 3 }),
        finishReason: "tool-calls",
        offered: ["add"]
      }
      const tool = RunJournal.StepKey.Nested({
        path: "task/c1/1",
        key: RunJournal.StepKey.Tool({ call, occurrence: 1 })
      })
      assert.strictEqual(model.schema, RunJournal.ModelCall)
      assert.strictEqual(tool.schema, RunJournal.ToolCall)

      yield* encoding.step(model, Effect.succeed(reply))
      yield* encoding.step(tool, Effect.succeed(result))
      // the stored form is the schema's encoding (plain JSON), and decodes to what the step gave
      assert.deepStrictEqual(JSON.parse(JSON.stringify(stored.get("model/0"))), stored.get("model/0"))
      const replayed = yield* encoding.step(model, Effect.die("a replayed step does not run"))
      assert.deepStrictEqual(replayed.usage.totalTokens, 3)
      assert.deepStrictEqual(replayed.message.content, reply.message.content)
      const replayedTool = yield* encoding.step(tool, Effect.die("a replayed step does not run"))
      assert.strictEqual(replayedTool.result, 3)
    }))
})

describe("RunJournal.nested", () => {
  const segment = Schema.String.pipe(Schema.pattern(/^[a-z0-9_]{1,8}$/))

  it.prop(
    "a nested step is named under every path around it, and innermost gives the step itself",
    { paths: Schema.Array(segment).pipe(Schema.maxItems(4)), step: Schema.Int.pipe(Schema.between(0, 50)) },
    ({ paths, step }) => {
      const model = RunJournal.StepKey.Model({ step })
      const key = paths.reduceRight<RunJournal.StepKey<RunJournal.ModelCall>>(
        (inner, path) => RunJournal.StepKey.Nested({ path, key: inner }),
        model
      )
      assert.strictEqual(RunJournal.stepName(key), [...paths, `model/${step}`].join("/"))
      assert.deepStrictEqual(RunJournal.innermost(key), model)
    }
  )

  it.effect("a nested journal names a run's steps under its path in the outer journal; its waits end the run", () =>
    Effect.gen(function*() {
      const names: Array<string> = []
      const outer = RunJournal.RunJournal.of({
        durable: true,
        step: (key, effect) => Effect.zipRight(Effect.sync(() => names.push(RunJournal.stepName(key))), effect),
        await: (interrupt) => Effect.map(RunJournal.decodeDecision(interrupt, 42), Option.some)
      })
      const nested = RunJournal.nested(RunJournal.nested(outer, "task/c1/1"), "task/g1/1")
      assert.isFalse(nested.durable)
      assert.deepStrictEqual(
        yield* nested.await({
          key: "k",
          threadId: "t",
          step: 0,
          middleware: "m",
          node: "afterModel",
          value: 1,
          request: Schema.Number,
          decision: Schema.Number
        }),
        Option.none()
      )
      yield* nested.step(RunJournal.StepKey.Checkpoint({ index: 0 }), Effect.void)
      assert.deepStrictEqual(names, ["task/c1/1/task/g1/1/checkpoint/0"])
      // the in-process journal nests as itself: nothing to rename, nothing to pay
      assert.strictEqual(RunJournal.nested(RunJournal.inProcess, "task/c1/1"), RunJournal.inProcess)
    }))
})
