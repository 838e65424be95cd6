/**
 * Invalid tool calls (arguments that are not JSON, or fail the tool's
 * schema; tools the agent does not have) are answered with a failed tool
 * result the model can repair, up to `maxToolCallRepairs` replies in a row,
 * on the generate and the stream path, with a scripted model and through the
 * OpenAI provider.
 */
import type { Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentEvent, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
import { Chunk, Effect, FastCheck, Layer, Ref, Stream } from "effect"
import { Calculator, CalculatorLive, toolResults } from "./utils.js"

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))

const errorOf = (result: Prompt.ToolResultPart | undefined): string => {
  assert.isDefined(result)
  assert.isTrue(result!.isFailure)
  return (result!.result as { readonly error: string }).error
}

/** A reply calling `add` with arguments that are not JSON (as a provider that keeps them as text gives them). */
const notJson = (id: string) => ScriptedModel.toolCalls([{ name: "add", params: `{"a": 1, "b"`, id }])
const good = (id: string) => ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id }])

type Mode = "run" | "stream"

/** Runs `input` on "t" by `mode`, giving the events (none for `run`) and the result. */
const runBy = (agent: Agent.Service, mode: Mode, input: string) =>
  mode === "run"
    ? Effect.map(agent.run(input, { threadId: "t" }), (result) => ({ events: [], result }))
    : Effect.map(Stream.runCollect(agent.stream(input, { threadId: "t" })), (chunk) => {
      const events = Chunk.toReadonlyArray(chunk)
      const last = events[events.length - 1]!
      assert.strictEqual(last._tag, "RunEnded")
      return { events, result: (last as Extract<typeof last, { _tag: "RunEnded" }>).result }
    })

describe("invalid tool calls are answered for the model to repair", () => {
  for (const mode of ["run", "stream"] as const) {
    it.effect(`${mode}: arguments that are not JSON get a failed result saying so; the repaired call runs`, () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator })
        const { events, result } = yield* runBy(agent, mode, "1 + 2?")
        assert.strictEqual(result._tag, "Completed")
        const [failed, repaired] = toolResults(result.state.messages)
        assert.strictEqual(failed!.id, "bad")
        const error = errorOf(failed)
        assert.include(error, `Invalid arguments for tool "add": the arguments are not valid JSON`)
        assert.strictEqual(repaired!.result, 3)
        // the model saw its call, with the arguments as they came, and the failure
        const requests = yield* ScriptedModel.requests
        assert.strictEqual(requests.length, 3)
        const seen = requests[1]!.prompt.content.flatMap((message) =>
          message.role === "assistant" ? message.content.filter((part) => part.type === "tool-call") : []
        )
        assert.deepStrictEqual(seen.map((call) => call.params), [`{"a": 1, "b"`])
        assert.strictEqual(errorOf(toolResults(requests[1]!.prompt.content)[0]), error)
        if (mode === "stream") {
          // the tool-call event keeps the raw arguments
          const started = events.filter(AgentEvent.$is("ToolCallStarted"))
          assert.deepStrictEqual(started.map((event) => event.call.params), [`{"a": 1, "b"`, { a: 1, b: 2 }])
        }
      }).pipe(provide([notJson("bad"), good("good"), ScriptedModel.text("3")])))

    it.effect(`${mode}: arguments that are JSON but not an object, or fail the schema, name what is wrong`, () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator })
        const { result } = yield* runBy(agent, mode, "1 + 2?")
        assert.strictEqual(result._tag, "Completed")
        const errors = toolResults(result.state.messages).slice(0, 4).map(errorOf)
        assert.include(errors[0], "the arguments must be a JSON object, got an array")
        assert.include(errors[1], "the arguments must be a JSON object, got null")
        assert.include(errors[2], "the arguments must be a JSON object, not a string holding JSON")
        assert.include(errors[3], `["a"]`)
        assert.include(errors[3], `"one"`)
      }).pipe(provide([
        ScriptedModel.toolCalls([
          { name: "add", params: [1, 2], id: "array" },
          { name: "add", params: null, id: "null" },
          { name: "add", params: `{"a":1,"b":2}`, id: "string" },
          { name: "add", params: { a: "one", b: 2 }, id: "field" }
        ]),
        good("good"),
        ScriptedModel.text("3")
      ])))
  }

  it.effect("the problem text is scrubbed of credentials and cut short", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator })
      const result = yield* agent.run("1 + 2?", { threadId: "t" })
      const error = errorOf(toolResults(result.state.messages)[0])
      assert.notInclude(error, "sk-live-123456")
      assert.isAtMost(error.length, 1100)
    }).pipe(provide([
      ScriptedModel.toolCalls([{
        name: "add",
        params: { a: `Authorization: Bearer sk-live-123456 ${"x".repeat(5000)}`, b: 2 },
        id: "bad"
      }]),
      good("good"),
      ScriptedModel.text("3")
    ])))

  it.effect.prop(
    "any arguments are answered: run when they decode, else a short failed result naming the tool",
    { params: FastCheck.oneof(FastCheck.jsonValue(), FastCheck.string({ maxLength: 3000 })) },
    ({ params }) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Calculator })
        const result = yield* agent.run("1 + 2?", { threadId: "t" })
        assert.strictEqual(result._tag, "Completed")
        const [first] = toolResults(result.state.messages)
        // (keys beyond a and b are ignored, as the schema does)
        const valid = typeof params === "object" && params !== null && !Array.isArray(params) &&
          typeof (params as any).a === "number" && typeof (params as any).b === "number"
        if (valid) return assert.isFalse(first!.isFailure)
        const error = errorOf(first)
        assert.isTrue(error.startsWith(`Invalid arguments for tool "add": `))
        assert.isAtMost(error.length, 1100)
      }).pipe(provide([
        ScriptedModel.toolCalls([{ name: "add", params, id: "any" }]),
        ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "good" }]),
        ScriptedModel.text("3")
      ])),
    { fastCheck: { numRuns: 25 } }
  )

  it.effect("wrapToolCall hooks see the invalid call as it came, and the failed result the agent answers", () =>
    Effect.gen(function*() {
      const seen: Array<[unknown, boolean]> = []
      const watch = Middleware.make({
        name: "watch",
        wrapToolCall: (request, next) =>
          Effect.tap(
            next(request),
            (result) => Effect.sync(() => void seen.push([request.call.params, result.isFailure]))
          )
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [watch] })
      yield* agent.run("1 + 2?", { threadId: "t" })
      assert.deepStrictEqual(seen, [[`{"a": 1, "b"`, true], [{ a: 1, b: 2 }, false]])
    }).pipe(provide([notJson("bad"), good("good"), ScriptedModel.text("3")])))
})

describe("maxToolCallRepairs", () => {
  it.effect("one invalid reply more than the limit (default 3) fails the run with InvalidToolCalls naming the call", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator })
      const error = yield* Effect.flip(agent.run("1 + 2?", { threadId: "t" }))
      assert.strictEqual(error._tag, "InvalidToolCalls")
      if (error._tag !== "InvalidToolCalls") return
      assert.strictEqual(error.toolName, "add")
      assert.strictEqual(error.callId, "b4")
      assert.strictEqual(error.replies, 4)
      assert.include(error.reason, "not valid JSON")
      assert.include(error.message, `tool "add" (call b4)`)
      assert.strictEqual((yield* ScriptedModel.requests).length, 4)
      // the thread keeps the three answered rounds, well-formed
      const stored = yield* agent.thread("t")
      assert.strictEqual(toolResults(stored.pipe((s) => s._tag === "Some" ? s.value.state.messages : [])).length, 3)
    }).pipe(provide([notJson("b1"), notJson("b2"), notJson("b3"), notJson("b4"), ScriptedModel.text("never")])))

  it.effect("calls of unknown tools count too; 0 allows no repair", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, maxToolCallRepairs: 0 })
      const error = yield* Effect.flip(agent.run("2 * 3?", { threadId: "t" }))
      assert.strictEqual(error._tag, "InvalidToolCalls")
      if (error._tag !== "InvalidToolCalls") return
      assert.strictEqual(error.toolName, "multiply")
      assert.strictEqual(error.replies, 1)
    }).pipe(provide([ScriptedModel.toolCalls([{ name: "multiply", params: { a: 2, b: 3 } }])])))

  it.effect("a value that is not a whole number of at least 0 is an AgentConfigError", () =>
    Effect.gen(function*() {
      for (const value of [-1, 1.5, Number.NaN]) {
        const error = yield* Effect.flip(Agent.make({ toolkit: Calculator, maxToolCallRepairs: value }))
        assert.strictEqual(error._tag, "AgentConfigError")
        assert.include(error.message, "maxToolCallRepairs")
      }
    }).pipe(provide([])))

  it.effect.prop(
    "the run fails exactly when more than maxToolCallRepairs replies in a row hold invalid calls",
    {
      replies: FastCheck.array(FastCheck.boolean(), { minLength: 1, maxLength: 10 }),
      limit: FastCheck.integer({ min: 0, max: 4 })
    },
    ({ limit, replies }) =>
      Effect.gen(function*() {
        let longest = 0
        let streak = 0
        let failsAt: number | undefined
        replies.forEach((invalid, index) => {
          streak = invalid ? streak + 1 : 0
          longest = Math.max(longest, streak)
          if (failsAt === undefined && streak > limit) failsAt = index
        })
        const script = [
          ...replies.map((invalid, index) => invalid ? notJson(`c${index}`) : good(`c${index}`)),
          ScriptedModel.text("3")
        ]
        const exit = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({ toolkit: Calculator, maxToolCallRepairs: limit })
          return yield* Effect.either(agent.run("1 + 2?", { threadId: "t" }))
        }).pipe(provide(script))
        if (failsAt === undefined) {
          assert.strictEqual(exit._tag, "Right")
        } else {
          assert.strictEqual(exit._tag, "Left")
          if (exit._tag !== "Left") return
          assert.strictEqual(exit.left._tag, "InvalidToolCalls")
          assert.strictEqual((exit.left as { callId: string }).callId, `c${failsAt}`)
        }
      }),
    { fastCheck: { numRuns: 25 } }
  )
})

describe("through the OpenAI provider", () => {
  /** An agent on a fake OpenAI server that replies with `script`, and what the calculator ran. */
  const setup = (script: ReadonlyArray<FakeOpenAi.Reply>) =>
    Effect.gen(function*() {
      const server = yield* FakeOpenAi.make(script)
      const model = yield* Layer.build(FakeOpenAi.languageModel(server))
      const handled = yield* Ref.make<ReadonlyArray<unknown>>([])
      const agent = yield* Agent.make({ toolkit: Calculator }).pipe(
        Effect.provide(model),
        Effect.provide(Calculator.toLayer({
          add: (params) => Effect.as(Ref.update(handled, (all) => [...all, params]), params.a + params.b)
        }))
      )
      return { agent, server, handled: Ref.get(handled) }
    })

  const truncatedArguments = `{"a": 1, "b"`

  for (const mode of ["run", "stream"] as const) {
    it.scoped(`${mode}: arguments that are not JSON are answered with a failed result; the model repairs them`, () =>
      Effect.gen(function*() {
        const reply = mode === "run" ? FakeOpenAi.toolCalls : FakeOpenAi.streamToolCalls
        const final = mode === "run" ? FakeOpenAi.text("3") : FakeOpenAi.streamText(["3"])
        const { agent, handled, server } = yield* setup([
          reply([{ callId: "call_bad", name: "add", arguments: truncatedArguments }]),
          reply([{ callId: "call_good", name: "add", arguments: { a: 1, b: 2 } }]),
          final
        ])
        const { events, result } = yield* runBy(agent, mode, "1 + 2?")
        assert.strictEqual(result._tag, "Completed")
        assert.deepStrictEqual(yield* handled, [{ a: 1, b: 2 }])
        const [failed] = toolResults(result.state.messages)
        const error = errorOf(failed)
        assert.include(error, "the arguments are not valid JSON")
        const requests = yield* server.requests
        assert.strictEqual(requests.length, 3)
        // the model saw its bad call (the arguments it sent, as a JSON string) and the error, paired by call id
        const [badCall] = FakeOpenAi.functionCalls(requests[1]!.body)
        const [badOutput] = FakeOpenAi.functionCallOutputs(requests[1]!.body)
        assert.strictEqual(badCall!.name, "add")
        assert.strictEqual(JSON.parse(badCall!.arguments!), truncatedArguments)
        assert.strictEqual(badOutput!.call_id, badCall!.call_id)
        assert.deepStrictEqual(JSON.parse(badOutput!.output!), { error })
        if (mode === "stream") {
          // streamed, the call keeps the id the provider gave it
          assert.strictEqual(badCall!.call_id, "call_bad")
          const started = events.filter(AgentEvent.$is("ToolCallStarted"))
          assert.strictEqual(started[0]!.call.params, truncatedArguments)
        }
      }))
  }

  it.scoped("a model that keeps sending arguments that are not JSON fails the run with InvalidToolCalls", () =>
    Effect.gen(function*() {
      const bad = FakeOpenAi.toolCalls([{ callId: "call_bad", name: "add", arguments: truncatedArguments }])
      const { agent, server } = yield* setup([bad, bad, bad, bad])
      const error = yield* Effect.flip(agent.run("1 + 2?", { threadId: "t" }))
      assert.strictEqual(error._tag, "InvalidToolCalls")
      if (error._tag !== "InvalidToolCalls") return
      assert.strictEqual(error.toolName, "add")
      assert.include(error.reason, "not valid JSON")
      assert.strictEqual((yield* server.requests).length, 4)
    }))
})
