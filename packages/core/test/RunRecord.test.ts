import { Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Middleware, RunJournal, RunRecord, Secrets } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Either, Exit, Layer, Option, Schema, Scope, Stream } from "effect"
import { Calculator, CalculatorLive } from "./utils.js"

/** A calculator whose `add` counts its calls. */
const counted = () => {
  const calls = { count: 0 }
  const layer = Calculator.toLayer({
    add: ({ a, b }) => Effect.sync(() => (calls.count++, a + b))
  })
  return { calls, layer }
}

const script: ReadonlyArray<ScriptedModel.Turn> = [
  ScriptedModel.toolCalls([{ id: "call_1", name: "add", params: { a: 2, b: 3 } }], { text: "adding" }),
  ScriptedModel.toolCalls([{ id: "call_2", name: "add", params: { a: 5, b: 7 } }]),
  ScriptedModel.text("12")
]

/** Records a run of `script` on an agent with `options`; gives the record and the agent's tool counter. */
const recordRun = (
  options: Omit<Agent.Options<ReadonlyArray<Middleware.Any>, never, never>, "toolkit" | "provide"> = {},
  input = "What is 2 + 3 + 7?"
) =>
  Effect.gen(function*() {
    const { calls, layer } = counted()
    const recorded = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add.", ...options })
      return yield* RunRecord.record(agent, input, { threadId: "prod-1" })
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), layer)))
    return { ...recorded, calls }
  })

/** Replays `record` on a new agent with `options` and no model turns; gives the outcome and what ran. */
const replayOn = (
  record: RunRecord.RunRecord,
  options: Omit<Agent.Options<ReadonlyArray<Middleware.Any>, never, never>, "toolkit" | "provide"> = {}
) =>
  Effect.gen(function*() {
    const { calls, layer } = counted()
    return yield* Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add.", ...options })
      const outcome = yield* Effect.either(agent.replay(record))
      const requests = yield* ScriptedModel.requests
      return { outcome, toolCalls: calls.count, modelCalls: requests.length }
    }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer([]), layer)))
  })

const divergence = (outcome: Either.Either<unknown, unknown>): RunRecord.ReplayDiverged => {
  if (Either.isRight(outcome)) return assert.fail("the replay did not diverge")
  assert.instanceOf(outcome.left, RunRecord.ReplayDiverged)
  return outcome.left as RunRecord.ReplayDiverged
}

describe("RunRecord", () => {
  it.effect("a recorded run holds every model request as sent with its reply, every tool result and the outcome", () =>
    Effect.gen(function*() {
      const { calls, record, result } = yield* recordRun()
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(calls.count, 2)
      assert.strictEqual(record.header.version, RunRecord.version)
      assert.strictEqual(record.header.threadId, "prod-1")
      const steps = record.entries.filter((entry) => entry._tag === "Step")
      const models = steps.filter((step) => step.kind === "Model")
      assert.deepStrictEqual(models.map((step) => step.name), ["model/0", "model/1", "model/2"])
      for (const model of models) {
        assert.strictEqual(model.sent?.systemPrompt, "You add.")
        assert.deepStrictEqual(model.sent?.tools.map((tool) => tool.name), ["add"])
        assert.isDefined(model.reply)
      }
      assert.strictEqual(models[1]!.sent!.messages.length, 3)
      // the load of the thread and each look into its inbox (where steer messages are taken in) are steps too
      assert.strictEqual(steps[0]!.name, "load")
      assert.isTrue(steps.some((step) => step.kind === "Inbox"))
      const tools = steps.filter((step) => step.kind === "Tool")
      assert.deepStrictEqual(tools.map((step) => step.name), ["tool/call_1", "tool/call_2"])
      assert.strictEqual((tools[0]!.result as any).result, 5)
      const end = record.entries.at(-1)!
      assert.strictEqual(end._tag, "End")
      assert.deepInclude(end, { outcome: "Completed", text: "12", steps: 3 })
    }))

  it.effect("JSONL export and import give the record back", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const text = RunRecord.toJsonl(record)
      assert.strictEqual(text.split("\n").filter((line) => line !== "").length, record.entries.length + 1)
      const back = yield* RunRecord.fromJsonl(text)
      assert.deepStrictEqual(back, record)
      // as a stream of arbitrary chunks, too
      const chunks = text.match(/[\s\S]{1,7}/g)!
      assert.deepStrictEqual(yield* RunRecord.fromJsonl(Stream.fromIterable(chunks)), record)
      // with CRLF line ends, a byte order mark and blank lines
      assert.deepStrictEqual(yield* RunRecord.fromJsonl("\uFEFF" + text.replaceAll("\n", "\r\n\r\n")), record)
    }))

  it.effect("a malformed line fails with RunRecordError naming the line and what is wrong", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const lines = RunRecord.toJsonl(record).split("\n")
      const notJson = [...lines.slice(0, 3), "{not json", ...lines.slice(3)].join("\n")
      const error1 = yield* Effect.flip(RunRecord.fromJsonl(notJson))
      assert.deepInclude(error1, { _tag: "RunRecordError", reason: "Malformed", line: 4 })
      assert.include(error1.detail, "not JSON")
      const notEntry = [...lines.slice(0, 2), JSON.stringify({ _tag: "Step", name: 3 }), ...lines.slice(2)].join("\n")
      const error2 = yield* Effect.flip(RunRecord.fromJsonl(notEntry))
      assert.deepInclude(error2, { reason: "Malformed", line: 3 })
      assert.include(error2.detail, "not a run record entry")
      const noHeader = yield* Effect.flip(RunRecord.fromJsonl(lines.slice(1).join("\n")))
      assert.deepInclude(noHeader, { reason: "Malformed", line: 1 })
      const empty = yield* Effect.flip(RunRecord.fromJsonl(""))
      assert.deepInclude(empty, { reason: "Malformed", line: 1 })
    }))

  it.effect("a record of another format version fails with UnsupportedVersion naming the version", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const lines = RunRecord.toJsonl(record).split("\n")
      lines[0] = JSON.stringify({ ...record.header, version: 4 })
      const error = yield* Effect.flip(RunRecord.fromJsonl(lines.join("\n")))
      assert.deepInclude(error, { reason: "UnsupportedVersion", line: 1 })
      assert.include(error.detail, "version 4")
      // a record value built by hand with another version is refused by replay
      const { outcome, modelCalls, toolCalls } = yield* replayOn({
        ...record,
        header: { ...record.header, version: 7 as any }
      })
      assert.isTrue(Either.isLeft(outcome))
      assert.deepInclude((outcome as any).left, { _tag: "RunRecordError", reason: "UnsupportedVersion" })
      assert.include((outcome as any).left.detail, "version 7")
      assert.deepStrictEqual([modelCalls, toolCalls], [0, 0])
    }))

  it.effect("a line longer than maxLineLength fails with TooLong before it is parsed, whole or streamed", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const longest = Math.max(...RunRecord.toJsonl(record).split("\n").map((line) => line.length))
      const text = RunRecord.toJsonl(record) + "x".repeat(longest + 100)
      const error = yield* Effect.flip(RunRecord.fromJsonl(text, { maxLineLength: longest + 10 }))
      assert.deepInclude(error, { reason: "TooLong", line: record.entries.length + 2 })
      const endless = Stream.repeatValue("y".repeat(100))
      const streamed = yield* Effect.flip(RunRecord.fromJsonl(endless, { maxLineLength: 10_000 }))
      assert.deepInclude(streamed, { reason: "TooLong", line: 1 })
    }))

  it.effect("an endless stream of valid lines fails with TooLong past maxLength, where it goes past", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const [header, ...rest] = RunRecord.toJsonl(record).split("\n").filter((line) => line !== "")
      let read = 0
      const endless = Stream.concat(
        Stream.make(header + "\n"),
        Stream.forever(Stream.fromIterable(rest.map((line) => line + "\n")))
      ).pipe(Stream.tap((text) => Effect.sync(() => read += text.length)))
      const error = yield* Effect.flip(RunRecord.fromJsonl(endless, { maxLength: 100_000 }))
      assert.deepInclude(error, { _tag: "RunRecordError", reason: "TooLong" })
      assert.include((error as RunRecord.RunRecordError).detail, "longer than 100000 characters")
      assert.isAtMost(read, 100_000 + Math.max(...rest.map((line) => line.length + 1)))
      // within it, the same input is read whole
      const text = RunRecord.toJsonl(record)
      assert.deepStrictEqual(yield* RunRecord.fromJsonl(text, { maxLength: text.length }), record)
    }))

  it.effect("options of the wrong kind or unknown fail with InvalidOptions naming them", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const text = RunRecord.toJsonl(record)
      for (
        const [options, option] of [
          [{ maxLength: 0 }, "fromJsonl.maxLength"],
          [{ maxLength: "big" }, "fromJsonl.maxLength"],
          [{ maxLineLength: Number.NaN }, "fromJsonl.maxLineLength"],
          [{ maxLineLength: -1 }, "fromJsonl.maxLineLength"],
          [{ maxLines: 3 }, "fromJsonl.maxLines"],
          ["fast", "fromJsonl"]
        ] as const
      ) {
        const error = yield* Effect.flip(RunRecord.fromJsonl(text, options as never))
        assert.deepInclude(error, { _tag: "InvalidOptions", option }, JSON.stringify(options))
      }
    }))

  it.effect("a huge import leaves the event loop free between chunks", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const [header, ...rest] = RunRecord.toJsonl(record).split("\n").filter((line) => line !== "")
      const copies = Math.ceil(8_000_000 / rest.join("\n").length)
      const text = [header, ...Array.from({ length: copies }, () => rest).flat()].join("\n")
      let ticks = 0
      const timer = setInterval(() => ticks++, 0)
      const read = yield* RunRecord.fromJsonl(text).pipe(Effect.ensuring(Effect.sync(() => clearInterval(timer))))
      assert.strictEqual(read.entries.length, rest.length * copies)
      assert.isAbove(ticks, 0)
    }))

  it.effect("known credentials are scrubbed from the record", () =>
    Effect.gen(function*() {
      const secret = "sk-live-0123456789abcdef"
      const leaky: ReadonlyArray<ScriptedModel.Turn> = [
        ScriptedModel.toolCalls([{ id: "call_1", name: "add", params: { a: 1, b: 2 } }], {
          text: `using ${secret}`
        }),
        ScriptedModel.text(`done with ${secret}`)
      ]
      const { record } = yield* Effect.gen(function*() {
        yield* Secrets.register(secret)
        const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: `key ${secret}` })
        return yield* RunRecord.record(agent, `my key is ${secret}`, { threadId: "t" })
      }).pipe(Effect.scoped, Effect.provide(Layer.merge(ScriptedModel.layer(leaky), CalculatorLive)))
      const text = RunRecord.toJsonl(record)
      assert.notInclude(text, secret)
      assert.include(text, Secrets.redacted)
    }))

  it.effect("a credential that becomes known during the run is scrubbed from every request recorded after", () =>
    Effect.gen(function*() {
      // not shaped like a key: scrubbed only once known
      const secret = "opensesame-tulip-orchard"
      const turns: ReadonlyArray<ScriptedModel.Turn> = [
        ScriptedModel.toolCalls([{ id: "call_1", name: "add", params: { a: 1, b: 2 } }]),
        ScriptedModel.toolCalls([{ id: "call_2", name: "add", params: { a: 3, b: 4 } }]),
        ScriptedModel.text("done")
      ]
      // the first call of the tool makes the credential known (as a client's first request does), until the end
      const outer = yield* Scope.make()
      const registering = Calculator.toLayer({
        add: ({ a, b }) => Effect.as(Scope.extend(Secrets.register(secret), outer), a + b)
      })
      const { record } = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator })
        return yield* RunRecord.record(agent, `my key is ${secret}`, { threadId: "t" })
      }).pipe(
        Effect.provide(Layer.merge(ScriptedModel.layer(turns), registering)),
        Effect.ensuring(Scope.close(outer, Exit.void))
      )
      const steps = record.entries.filter((entry) => entry._tag === "Step" && entry.sent !== undefined)
      assert.strictEqual(steps.length, 3)
      // sent before the tool ran: kept as it was; every request after: scrubbed, the user's message included
      assert.include(JSON.stringify(steps[0]), secret)
      for (const step of steps.slice(1)) {
        assert.notInclude(JSON.stringify(step), secret)
        assert.include(JSON.stringify(step), Secrets.redacted)
      }
    }))

  it.effect("credential-named fields and credentials in text are scrubbed from tool arguments and results", () =>
    Effect.gen(function*() {
      const Login = Tool.make("login", {
        parameters: { user: Schema.String, apiKey: Schema.String },
        success: Schema.String
      })
      const kit = Toolkit.make(Login)
      const turns: ReadonlyArray<ScriptedModel.Turn> = [
        ScriptedModel.toolCalls([{ id: "c1", name: "login", params: { user: "ada", apiKey: "k-9" } }]),
        ScriptedModel.text("in")
      ]
      const { record } = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: kit })
        return yield* RunRecord.record(agent, "log in", { threadId: "t" })
      }).pipe(Effect.provide(Layer.merge(
        ScriptedModel.layer(turns),
        kit.toLayer({ login: () => Effect.succeed("GET /v1?key=abc ok; Authorization: Bearer tok-0123456789") })
      )))
      const text = RunRecord.toJsonl(record)
      for (const leaked of ["k-9", "key=abc", "tok-0123456789"]) assert.notInclude(text, leaked)
    }))
})

describe("Agent.replay", () => {
  it.effect("replaying an unchanged agent calls no model and no tool, and gives the recorded result", () =>
    Effect.gen(function*() {
      const { record, result } = yield* recordRun()
      const imported = yield* RunRecord.fromJsonl(RunRecord.toJsonl(record))
      const { modelCalls, outcome, toolCalls } = yield* replayOn(imported)
      assert.deepStrictEqual([modelCalls, toolCalls], [0, 0])
      const replayed = Either.getOrThrow(outcome)
      assert.strictEqual(replayed._tag, "Completed")
      assert.strictEqual(replayed._tag === "Completed" && replayed.text, result._tag === "Completed" && result.text)
      assert.strictEqual(replayed.steps, result.steps)
    }))

  it.effect("a changed system prompt diverges at step 0, field systemPrompt", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const { modelCalls, outcome, toolCalls } = yield* replayOn(record, { systemPrompt: "You add carefully." })
      const d = divergence(outcome)
      assert.deepInclude(d, { step: 0, field: "systemPrompt", recorded: "You add.", actual: "You add carefully." })
      assert.include(d.message, "step 0, systemPrompt")
      assert.deepStrictEqual([modelCalls, toolCalls], [0, 0])
    }))

  it.effect("a changed tool diverges at field tools, naming the tool", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const Add2 = Tool.make("add", {
        description: "Adds two integers",
        parameters: { a: Schema.Number, b: Schema.Number },
        success: Schema.Number
      })
      const { calls, layer } = counted()
      const outcome = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Toolkit.make(Add2), systemPrompt: "You add." })
        return yield* Effect.either(agent.replay(record))
      }).pipe(
        Effect.provide(
          Layer.mergeAll(ScriptedModel.layer([]), Toolkit.make(Add2).toLayer({ add: () => Effect.die("ran") }))
        )
      )
      const d = divergence(outcome)
      assert.deepInclude(d, { step: 0, field: "tools", index: 0 })
      assert.strictEqual((d.recorded as any).description, "Adds two numbers")
      assert.strictEqual((d.actual as any).description, "Adds two integers")
      assert.strictEqual(calls.count, 0)
      void layer
    }))

  it.effect("a middleware that changes the messages diverges at field messages, at the message that differs", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const note = Middleware.make({
        name: "note",
        wrapModelCall: (request, next) =>
          next(
            request.step === 1
              ? {
                ...request,
                messages: [
                  Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "changed" })] }),
                  ...request.messages.slice(1)
                ]
              }
              : request
          )
      })
      const { outcome, toolCalls } = yield* replayOn(record, { middleware: [note] })
      const d = divergence(outcome)
      assert.deepInclude(d, { step: 1, field: "messages", index: 0 })
      assert.include(JSON.stringify(d.recorded), "What is 2 + 3 + 7?")
      assert.include(JSON.stringify(d.actual), "changed")
      assert.strictEqual(toolCalls, 0)
    }))

  it.effect("a changed tool choice diverges at field toolChoice", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const required = Middleware.make({
        name: "required",
        wrapModelCall: (request, next) => next({ ...request, toolChoice: "required" })
      })
      const { outcome } = yield* replayOn(record, { middleware: [required] })
      assert.deepInclude(divergence(outcome), { step: 0, field: "toolChoice", recorded: "auto", actual: "required" })
    }))

  it.effect("a changed input diverges at field input", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const shout = Middleware.make({
        name: "shout",
        transformInput: ({ messages }) =>
          Effect.succeed(messages.map((m) =>
            m.role === "user" ? Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "HI" })] }) : m
          ))
      })
      const { outcome } = yield* replayOn(record, { middleware: [shout] })
      assert.deepInclude(divergence(outcome), { step: 0, field: "input", index: 0 })
    }))

  it.effect("a replay that takes more model steps than recorded diverges at field steps", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      // the record without its last model call (and the end): the replay asks for a step the record lacks
      const cut = record.entries.filter((entry) => !(entry._tag === "Step" && entry.name === "model/2"))
      const { modelCalls, outcome, toolCalls } = yield* replayOn({ ...record, entries: cut })
      assert.deepInclude(divergence(outcome), { step: 2, field: "steps", recorded: undefined, actual: "model/2" })
      assert.deepStrictEqual([modelCalls, toolCalls], [0, 0])
    }))

  it.effect("a replay that leaves recorded steps untaken diverges at field steps", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      // a recorded step the replay never reaches
      const extra = RunRecord.Step.make({
        name: "tool/call_9",
        kind: "Tool",
        result: null,
        startedAt: 0,
        durationMillis: 0
      })
      const { outcome } = yield* replayOn({ ...record, entries: [...record.entries, extra] })
      assert.deepInclude(divergence(outcome), { field: "steps", recorded: "tool/call_9", actual: undefined })
    }))

  it.effect("a tool call the record lacks diverges and the tool never runs", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const cut = record.entries.filter((entry) => !(entry._tag === "Step" && entry.name === "tool/call_2"))
      const { outcome, toolCalls } = yield* replayOn({ ...record, entries: cut })
      assert.deepInclude(divergence(outcome), { step: 1, field: "steps", actual: "tool/call_2" })
      assert.strictEqual(toolCalls, 0)
    }))

  it.effect("a middleware that swallows the divergence does not hide it", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const swallow = Middleware.make({
        name: "swallow",
        wrapModelCall: (request, next) =>
          Effect.catchAll(next(request), () =>
            Effect.succeed({
              message: { role: "assistant", content: [{ type: "text", text: "fallback" }] } as any,
              toolCalls: [],
              usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 } as any,
              finishReason: "stop" as const
            }))
      })
      const { outcome } = yield* replayOn(record, { middleware: [swallow], systemPrompt: "changed" })
      assert.deepInclude(divergence(outcome), { step: 0, field: "systemPrompt" })
    }))

  it.effect("a wait, the middleware decisions and steer messages are recorded; the replay ends as the run did", () =>
    Effect.gen(function*() {
      const confirm = Middleware.make({
        name: "confirm",
        wait: { request: Schema.Struct({ question: Schema.String }), decision: Schema.Struct({ go: Schema.Boolean }) },
        beforeModel: ({ resume, step }) =>
          Effect.gen(function*() {
            if (step === 1 && Option.isNone(resume)) {
              yield* Middleware.report("ask", { step })
              return { interrupt: { question: "Go on?" } }
            }
            return undefined
          })
      })
      const { calls, record, result } = yield* recordRun({ middleware: [confirm] })
      assert.strictEqual(result._tag, "Interrupted")
      assert.strictEqual(calls.count, 1)
      const wait = record.entries.find((entry) => entry._tag === "Wait")
      assert.deepInclude(wait, { middleware: "confirm", step: 1, request: { question: "Go on?" } })
      const decision = record.entries.find((entry) => entry._tag === "Decision")
      assert.deepInclude(decision, { middleware: "confirm", hook: "beforeModel", decision: "ask", data: { step: 1 } })
      assert.deepInclude(record.entries.at(-1), { _tag: "End", outcome: "Interrupted", steps: 1 })
      const { modelCalls, outcome, toolCalls } = yield* replayOn(record, { middleware: [confirm] })
      const replayed = Either.getOrThrow(outcome)
      assert.strictEqual(replayed._tag, "Interrupted")
      assert.strictEqual(replayed.steps, 1)
      assert.deepStrictEqual([modelCalls, toolCalls], [0, 0])
    }))

  it.effect("a wait's request and decision are recorded encoded by its wait's schemas; the replay gives the hook the decision decoded", () =>
    Effect.gen(function*() {
      // schemas whose encoded form is not the decoded one as JSON
      const Limit = Schema.Struct({ limit: Schema.NumberFromString })
      const Until = Schema.Struct({ until: Schema.DateFromNumber })
      const seen: Array<unknown> = []
      const ask = Middleware.make({
        name: "ask",
        wait: { request: Limit, decision: Until },
        beforeModel: ({ resume, step }) =>
          Effect.sync(() => {
            if (Option.isSome(resume)) seen.push(resume.value)
            return step === 1 && Option.isNone(resume) ? { interrupt: { limit: 5 } } : undefined
          })
      })
      const answering = RunJournal.RunJournal.of({
        ...RunJournal.inProcess,
        await: (interrupt) => Effect.map(RunJournal.decodeDecision(interrupt, { until: 1_000 }), Option.some)
      })
      const entries: Array<RunRecord.Entry> = []
      let input: RunRecord.Header["input"] = []
      const { add, journal } = RunRecord.recording(answering, {
        put: (slot, entry) => Effect.sync(() => void (entries[slot] = entry)),
        input: (messages) => Effect.sync(() => void (input = messages))
      })
      const result = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add.", middleware: [ask] })
        return yield* agent.run("What is 2 + 3 + 7?", { threadId: "prod-1" }).pipe(
          Effect.provideService(RunJournal.RunJournal, journal)
        )
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), counted().layer)))
      assert.strictEqual(result._tag, "Completed")
      yield* add(RunRecord.endOf(result, 0))
      const wait = entries.find((entry) => entry._tag === "Wait")
      assert.deepInclude(wait, { middleware: "ask", request: { limit: "5" }, decision: { until: 1_000 } })
      assert.deepStrictEqual(seen, [{ until: new Date(1_000) }])
      const record = RunRecord.RunRecord.make({
        header: RunRecord.Header.make({ version: RunRecord.version, threadId: "prod-1", startedAt: 0, input }),
        entries
      })
      const { outcome } = yield* replayOn(record, { middleware: [ask] })
      assert.strictEqual(Either.getOrThrow(outcome)._tag, "Completed")
      assert.deepStrictEqual(seen, [{ until: new Date(1_000) }, { until: new Date(1_000) }])
    }))

  it.effect("middleware decisions are recorded in their place among the steps, as reported", () =>
    Effect.gen(function*() {
      const audit = Middleware.make({
        name: "audit",
        beforeModel: ({ step }) => Effect.as(Middleware.report(`before model ${step}`), undefined),
        wrapModelCall: (request, next) => Effect.zipRight(Middleware.report("calling the model"), next(request)),
        wrapToolCall: (request, next) => Effect.zipRight(Middleware.report(`running ${request.call.id}`), next(request))
      })
      const { record } = yield* recordRun({ middleware: [audit] })
      const order = record.entries.flatMap((entry) =>
        entry._tag === "Decision"
          ? [`${entry.hook}: ${entry.decision}`]
          : entry._tag === "Step" && (entry.kind === "Model" || entry.kind === "Tool")
          ? [entry.name]
          : []
      )
      assert.deepStrictEqual(order, [
        "beforeModel: before model 0",
        "wrapModelCall: calling the model",
        "model/0",
        "wrapToolCall: running call_1",
        "tool/call_1",
        "beforeModel: before model 1",
        "wrapModelCall: calling the model",
        "model/1",
        "wrapToolCall: running call_2",
        "tool/call_2",
        "beforeModel: before model 2",
        "wrapModelCall: calling the model",
        "model/2"
      ])
    }))

  it.effect("the record of a run that failed replays to where it failed and stops there with ReplayStopped; one that ended otherwise diverges at its result", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      // the record as a durable run that failed at its model step 1 keeps it: up to tool/call_1, then a Failed end
      const cut = record.entries.findIndex((entry) => entry._tag === "Step" && entry.name === "tool/call_1") + 1
      const failed: RunRecord.RunRecord = {
        header: record.header,
        entries: [
          ...record.entries.slice(0, cut),
          RunRecord.stoppedEnd(record.entries.slice(0, cut), {
            outcome: "Failed",
            error: new Error("the model is down")
          }, 5)
        ]
      }
      assert.deepInclude(failed.entries.at(-1), {
        _tag: "End",
        outcome: "Failed",
        steps: 1,
        error: { tag: "Defect", message: "the model is down" }
      })
      const read = yield* RunRecord.fromJsonl(RunRecord.toJsonl(failed))
      const { modelCalls, outcome, toolCalls } = yield* replayOn(read)
      assert.isTrue(Either.isLeft(outcome))
      const stopped = Either.getLeft(outcome).pipe(Option.getOrThrow)
      assert.instanceOf(stopped, RunRecord.ReplayStopped)
      assert.deepInclude(stopped, {
        step: 1,
        outcome: "Failed",
        error: { tag: "Defect", message: "the model is down" }
      })
      assert.include((stopped as RunRecord.ReplayStopped).message, "where the recorded run failed")
      assert.deepStrictEqual([modelCalls, toolCalls], [0, 0])
      // a record that ends Failed but replays to completion diverges at its result
      const whole: RunRecord.RunRecord = {
        header: record.header,
        entries: [...record.entries.slice(0, -1), RunRecord.stoppedEnd(record.entries, { outcome: "Cancelled" }, 5)]
      }
      assert.deepInclude(divergence((yield* replayOn(whole)).outcome), { field: "result" })
    }))

  it.effect("a replay on the agent that recorded the run leaves the thread as it was", () =>
    Effect.gen(function*() {
      const { calls, layer } = counted()
      yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "You add." })
        const { record } = yield* RunRecord.record(agent, "What is 2 + 3 + 7?", { threadId: "prod-1" })
        const before = yield* agent.thread("prod-1")
        const replayed = yield* agent.replay(record)
        assert.strictEqual(replayed._tag, "Completed")
        assert.deepStrictEqual(yield* agent.thread("prod-1"), before)
        assert.strictEqual((yield* ScriptedModel.requests).length, 3)
      }).pipe(Effect.provide(Layer.merge(ScriptedModel.layer(script), layer)))
      assert.strictEqual(calls.count, 2)
    }))

  it.effect("an afterModel hook that changes the answer diverges at field result", () =>
    Effect.gen(function*() {
      const { record } = yield* recordRun()
      const rewrite = Middleware.make({
        name: "rewrite",
        afterModel: ({ messages }) =>
          Effect.succeed(
            messages.at(-1)?.role === "assistant" && AgentResultText(messages.at(-1)!) === "12"
              ? {
                messages: [
                  ...messages.slice(0, -1),
                  Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text: "twelve" })] })
                ]
              }
              : undefined
          )
      })
      const { outcome, toolCalls } = yield* replayOn(record, { middleware: [rewrite] })
      const d = divergence(outcome)
      assert.deepInclude(d, {
        field: "result",
        recorded: { outcome: "Completed", steps: 3, text: "12" },
        actual: { outcome: "Completed", steps: 3, text: "twelve" }
      })
      assert.strictEqual(toolCalls, 0)
    }))
})

const AgentResultText = (message: Prompt.Message): string =>
  message.role === "assistant"
    ? message.content.map((part) => part.type === "text" ? part.text : "").join("")
    : ""
