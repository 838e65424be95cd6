import { AiError, Prompt } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type AgentEvent, Middleware, RunRecord } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Deferred, Effect, FastCheck, Layer, Option, Schema, Stream } from "effect"
import { assistantText, Calculator, CalculatorLive, recording, roles, toolResults } from "./utils.js"

const provide = (script: ReadonlyArray<ScriptedModel.Turn>) =>
  Effect.provide(Layer.merge(ScriptedModel.layer(script), CalculatorLive))

const Count = Schema.Struct({ count: Schema.Number })

const oneToolCall = [
  ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 }, id: "c1" }]),
  ScriptedModel.text("1 + 2 = 3")
]

describe("hook order", () => {
  it.effect("before* in list order, after* in reverse, wrap hooks as an onion with the first outermost", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const agent = yield* Agent.make({
        toolkit: Calculator,
        middleware: [recording("a", log), recording("b", log), recording("c", log)]
      })
      const result = yield* agent.run("What is 1 + 2?", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const modelStep = [
        "a.beforeModel",
        "b.beforeModel",
        "c.beforeModel",
        "a.wrapModelCall:in",
        "b.wrapModelCall:in",
        "c.wrapModelCall:in",
        "c.wrapModelCall:out",
        "b.wrapModelCall:out",
        "a.wrapModelCall:out",
        "c.afterModel",
        "b.afterModel",
        "a.afterModel"
      ]
      assert.deepStrictEqual(log, [
        "a.transformInput",
        "b.transformInput",
        "c.transformInput",
        "a.beforeAgent",
        "b.beforeAgent",
        "c.beforeAgent",
        ...modelStep,
        "a.wrapToolCall:in",
        "b.wrapToolCall:in",
        "c.wrapToolCall:in",
        "c.wrapToolCall:out",
        "b.wrapToolCall:out",
        "a.wrapToolCall:out",
        ...modelStep,
        "c.afterAgent",
        "b.afterAgent",
        "a.afterAgent"
      ])
      assert.strictEqual((yield* ScriptedModel.requests).length, 2)
    }).pipe(provide(oneToolCall)))

  it.effect("middleware without a hook are skipped, the others keep their order", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const onlyBefore = Middleware.make({
        name: "onlyBefore",
        beforeModel: () => Effect.sync(() => void log.push("onlyBefore.beforeModel"))
      })
      const onlyAfter = Middleware.make({
        name: "onlyAfter",
        afterModel: () => Effect.sync(() => void log.push("onlyAfter.afterModel"))
      })
      const agent = yield* Agent.make({
        toolkit: Calculator,
        middleware: [onlyAfter, recording("a", log), onlyBefore, Middleware.make({ name: "noop" })]
      })
      yield* agent.run("hi", { threadId: "t" })
      assert.deepStrictEqual(log, [
        "a.transformInput",
        "a.beforeAgent",
        "a.beforeModel",
        "onlyBefore.beforeModel",
        "a.wrapModelCall:in",
        "a.wrapModelCall:out",
        "a.afterModel",
        "onlyAfter.afterModel",
        "a.afterAgent"
      ])
    }).pipe(provide([ScriptedModel.text("hello")])))

  it.effect("hooks see their own slice, the messages, the thread and the step", () =>
    Effect.gen(function*() {
      const seen: Array<{ step: number; count: number; messages: number; threadId: string }> = []
      const counter = Middleware.make({
        name: "counter",
        state: { schema: Count, initial: { count: 0 } },
        beforeModel: ({ messages, state, step, threadId }) =>
          Effect.sync(() => {
            seen.push({ step, count: state.count, messages: messages.length, threadId })
            return { state: { count: state.count + 1 } }
          })
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [counter] })
      const result = yield* agent.run("What is 1 + 2?", { threadId: "thread-1" })
      assert.deepStrictEqual(seen, [
        { step: 0, count: 0, messages: 1, threadId: "thread-1" },
        { step: 1, count: 1, messages: 3, threadId: "thread-1" }
      ])
      assert.strictEqual(result.state.count, 2)
    }).pipe(provide(oneToolCall)))
})

describe("wrap hooks", () => {
  it.effect("wrapModelCall may answer without calling next: the model is never called", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const cache = Middleware.make({
        name: "cache",
        wrapModelCall: () => Effect.succeed(assistantText("from the cache"))
      })
      const agent = yield* Agent.make({
        toolkit: Calculator,
        middleware: [recording("outer", log), cache, recording("inner", log)]
      })
      const result = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      assert.strictEqual(result.text, "from the cache")
      assert.deepStrictEqual(roles(result.state.messages), ["user", "assistant"])
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
      // the inner middleware's wrap hook never ran; its node hooks did
      assert.isFalse(log.includes("inner.wrapModelCall:in"))
      assert.deepStrictEqual(log.filter((entry) => entry.includes("wrapModelCall")), [
        "outer.wrapModelCall:in",
        "outer.wrapModelCall:out"
      ])
    }).pipe(provide([])))

  it.effect("wrapModelCall may retry by calling next twice", () =>
    Effect.gen(function*() {
      const attempts: Array<string> = []
      const retry = Middleware.make({
        name: "retry",
        wrapModelCall: (request, next) =>
          next(request).pipe(
            Effect.tapError((error) => Effect.sync(() => attempts.push(error._tag))),
            Effect.catchAll(() => next(request))
          )
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [retry] })
      const result = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      if (result._tag !== "Completed") return
      assert.deepStrictEqual(attempts, ["UnknownError"])
      assert.strictEqual(result.text, "second time lucky")
      assert.deepStrictEqual(roles(result.state.messages), ["user", "assistant"])
      assert.strictEqual(result.steps, 1)
      const requests = yield* ScriptedModel.requests
      assert.strictEqual(requests.length, 2)
      assert.deepStrictEqual(requests[0]!.prompt, requests[1]!.prompt)
    }).pipe(provide([
      new AiError.UnknownError({ module: "Test", method: "generateText", description: "overloaded" }),
      ScriptedModel.text("second time lucky")
    ])))

  it.effect("without a retry, the model's AiError fails the run", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator })
      const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      assert.strictEqual(error._tag, "UnknownError")
    }).pipe(provide([new AiError.UnknownError({ module: "Test", method: "generateText", description: "down" })])))

  it.effect("wrapModelCall may change the request; the stored conversation keeps the original", () =>
    Effect.gen(function*() {
      const rewrite = Middleware.make({
        name: "rewrite",
        wrapModelCall: (request, next) => next({ ...request, systemPrompt: "Be terse.", tools: [], toolChoice: "none" })
      })
      const agent = yield* Agent.make({ toolkit: Calculator, systemPrompt: "Be kind.", middleware: [rewrite] })
      const result = yield* agent.run("hi", { threadId: "t" })
      const [request] = yield* ScriptedModel.requests
      const system = request!.prompt.content[0]!
      assert.strictEqual(system.role, "system")
      assert.strictEqual(system.role === "system" ? system.content : undefined, "Be terse.")
      assert.deepStrictEqual(request!.toolNames, [])
      assert.deepStrictEqual(roles(result.state.messages), ["user", "assistant"])
    }).pipe(provide([ScriptedModel.text("ok")])))

  it.effect("wrapToolCall may answer without running the tool", () =>
    Effect.gen(function*() {
      const refuse = Middleware.make({
        name: "refuse",
        wrapToolCall: (request) => Effect.succeed(Middleware.toolResult(request.call, "not today", { isFailure: true }))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [refuse] })
      const result = yield* agent.run("What is 1 + 2?", { threadId: "t" })
      const [toolResult] = toolResults(result.state.messages)
      assert.strictEqual(toolResult!.id, "c1")
      assert.strictEqual(toolResult!.result, "not today")
      assert.isTrue(toolResult!.isFailure)
    }).pipe(provide(oneToolCall)))
})

describe("jumps", () => {
  it.effect("a jump to the end from beforeModel skips the model; afterAgent still runs", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const stop = Middleware.make({
        name: "stop",
        canJumpTo: ["end"],
        beforeModel: () => Effect.succeed({ jumpTo: "end" as const })
      })
      const agent = yield* Agent.make({
        toolkit: Calculator,
        middleware: [recording("a", log), stop, recording("b", log)]
      })
      const result = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(result.steps, 0)
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
      assert.deepStrictEqual(log, [
        "a.transformInput",
        "b.transformInput",
        "a.beforeAgent",
        "b.beforeAgent",
        "a.beforeModel",
        "b.afterAgent",
        "a.afterAgent"
      ])
      assert.deepStrictEqual(roles(result.state.messages), ["user"])
    }).pipe(provide([])))

  it.effect("a jump to the model from afterModel runs another model step", () =>
    Effect.gen(function*() {
      const again = Middleware.make({
        name: "again",
        canJumpTo: ["model"],
        afterModel: ({ step }) => Effect.succeed(step === 1 ? { jumpTo: "model" as const } : undefined)
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [again] })
      const result = yield* agent.run("hi", { threadId: "t" })
      assert.strictEqual(result.steps, 2)
      assert.deepStrictEqual(roles(result.state.messages), ["user", "assistant", "assistant"])
      assert.strictEqual(result._tag === "Completed" ? result.text : "", "second")
    }).pipe(provide([ScriptedModel.text("first"), ScriptedModel.text("second")])))

  it.effect("a jump to a node the middleware did not declare fails with InvalidJump", () =>
    Effect.gen(function*() {
      const rogue = Middleware.make({
        name: "rogue",
        canJumpTo: ["model"],
        beforeModel: () => Effect.succeed({ jumpTo: "end" as never })
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [rogue] })
      const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      assert.strictEqual(error._tag, "InvalidJump")
      if (error._tag !== "InvalidJump") return
      assert.strictEqual(error.middleware, "rogue")
      assert.strictEqual(error.hook, "beforeModel")
      assert.strictEqual(error.jumpTo, "end")
      assert.deepStrictEqual(error.allowed, ["model"])
      assert.include(error.message, "rogue")
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
    }).pipe(provide([ScriptedModel.text("never")])))

  it.effect("a hook's message replacement is what the model receives and what is stored", () =>
    Effect.gen(function*() {
      const redacted = Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "[redacted]" })] })
      const redact = Middleware.make({
        name: "redact",
        beforeModel: ({ messages }) =>
          Effect.succeed({ messages: messages.map((message) => message.role === "user" ? redacted : message) })
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [redact] })
      const result = yield* agent.run("my secret", { threadId: "t" })
      const [request] = yield* ScriptedModel.requests
      assert.deepStrictEqual(request!.prompt.content, [redacted])
      assert.deepStrictEqual(result.state.messages[0], redacted)
      assert.strictEqual(result.state.messages.length, 2)
      assert.isTrue(result._tag === "Completed" && Option.isNone(result.output))
    }).pipe(provide([ScriptedModel.text("ok")])))
})

describe("transformInput", () => {
  const upper = (name: string) =>
    Middleware.make({
      name,
      transformInput: ({ messages }) =>
        Effect.succeed(messages.map((message) =>
          message.role !== "user" ? message : Prompt.makeMessage("user", {
            content: message.content.map((part) =>
              part.type === "text" ? Prompt.makePart("text", { text: `${part.text.toUpperCase()}!` }) : part
            )
          })
        ))
    })
  const userTexts = (messages: ReadonlyArray<Prompt.Message>) =>
    messages.flatMap((message) =>
      message.role === "user" ? message.content.map((part) => part.type === "text" ? part.text : "") : []
    )

  it.effect("an earlier middleware that ends the run at once stores the rewritten input, never the raw one", () =>
    Effect.gen(function*() {
      const seen: Array<ReadonlyArray<string>> = []
      const end = Middleware.make({
        name: "end",
        canJumpTo: ["end"],
        beforeAgent: ({ messages }) => Effect.sync(() => (seen.push(userTexts(messages)), { jumpTo: "end" as const }))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [end, upper("upper")] })
      yield* agent.run("hi", { threadId: "t" })
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      assert.deepStrictEqual(userTexts(thread.state.messages), ["HI!"])
      assert.deepStrictEqual(seen, [["HI!"]])
      assert.deepStrictEqual(yield* ScriptedModel.requests, [])
    }).pipe(provide([])))

  it.effect("hooks run in list order on the new input only, each on the previous output", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [upper("a"), upper("b")] })
      yield* agent.run("one", { threadId: "t" })
      const result = yield* agent.run("two", { threadId: "t" })
      assert.deepStrictEqual(userTexts(result.state.messages), ["ONE!!", "TWO!!"])
    }).pipe(provide([ScriptedModel.text("ok"), ScriptedModel.text("ok")])))

  it.effect("a person's answer with a key named __proto__ keeps the key, its text checked like any other", () =>
    Effect.gen(function*() {
      // what a JSON body gives: `__proto__` an own key
      const answer = JSON.parse(`{"note":"kept","__proto__":"also kept","constructor":{"why":"and this"}}`)
      const answering = Middleware.make({
        name: "answering",
        wrapToolCall: (request) => Effect.succeed(Middleware.toolResult(request.call, answer, { fromPerson: true }))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [upper("upper"), answering] })
      const result = yield* agent.run("add", { threadId: "t" })
      const part = result.state.messages.flatMap((m) => m.role === "tool" ? m.content : [])[0] as Prompt.ToolResultPart
      const value = part.result as Record<string, unknown>
      assert.deepStrictEqual(Object.keys(value), ["note", "__proto__", "constructor"])
      assert.strictEqual(value.note, "KEPT!")
      assert.strictEqual(Object.getPrototypeOf(value), Object.prototype)
      assert.strictEqual(Object.getOwnPropertyDescriptor(value, "__proto__")?.value, "ALSO KEPT!")
      assert.deepStrictEqual(value["constructor"], { why: "AND THIS!" })
    }).pipe(provide(oneToolCall)))

  it.effect("a person's answer from wrapToolCall is journaled as the input's hooks left it", () =>
    Effect.gen(function*() {
      const answering = Middleware.make({
        name: "answering",
        wrapToolCall: (request) =>
          Effect.succeed(Middleware.toolResult(request.call, { note: "typed by a person" }, { fromPerson: true }))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [upper("upper"), answering] })
      const { record } = yield* RunRecord.record(agent, "add", { threadId: "t" })
      const tool = record.entries.find((entry) => entry._tag === "Step" && entry.kind === "Tool")
      assert.include(JSON.stringify(tool), "TYPED BY A PERSON!")
      assert.notInclude(JSON.stringify(record.entries), "typed by a person")
    }).pipe(provide(oneToolCall)))

  it.effect("a failing hook fails the run before anything is stored", () =>
    Effect.gen(function*() {
      const refuse = Middleware.make({
        name: "refuse",
        transformInput: () => Effect.fail(new Error("refused"))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [refuse] })
      const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      assert.strictEqual((error as Error).message, "refused")
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
    }).pipe(provide([ScriptedModel.text("never")])))

  it.effect("a result that is not an array of messages fails with InvalidHookResult", () =>
    Effect.gen(function*() {
      const broken = Middleware.make({
        name: "broken",
        transformInput: () => Effect.succeed("hi" as never)
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [broken] })
      const error = yield* Effect.flip(agent.run("hi", { threadId: "t" }))
      assert.strictEqual(error._tag, "InvalidHookResult")
      if (error._tag !== "InvalidHookResult") return
      assert.deepStrictEqual([error.middleware, error.hook], ["broken", "transformInput"])
      assert.include(error.reason, "not an array of messages")
    }).pipe(provide([ScriptedModel.text("never")])))
})

describe("guardToolCall", () => {
  /** Rewrites the arguments of every call of `add` to `b`, on the way in. */
  const rewrite = (name: string, b: number) =>
    Middleware.make({
      name,
      wrapToolCall: (request, next) =>
        next({ ...request, call: { ...request.call, params: { a: 1, b } } as typeof request.call })
    })

  /** Records the arguments the guard sees and answers calls whose `b` is above 10 instead of running them. */
  const guarding = (seen: Array<unknown>) =>
    Middleware.make({
      name: "guard",
      wrapToolCall: (request, next) =>
        next(request).pipe(Middleware.guardToolCall((final) =>
          Effect.sync(() => {
            seen.push(final.call.params)
            return (final.call.params as { readonly b: number }).b > 10
              ? Option.some(Middleware.toolResult(final.call, { error: "too big" }, { isFailure: true }))
              : Option.none()
          })
        ))
    })

  for (const order of ["rewriter outside the guard", "rewriter inside the guard"] as const) {
    it.effect(`the guard sees the call as it runs, whatever wrapToolCall changed it (${order})`, () =>
      Effect.gen(function*() {
        const seen: Array<unknown> = []
        const middleware = order === "rewriter outside the guard"
          ? [rewrite("big", 40), guarding(seen)]
          : [guarding(seen), rewrite("big", 40)]
        const agent = yield* Agent.make({ toolkit: Calculator, middleware })
        const result = yield* agent.run("What is 1 + 2?", { threadId: "t" })
        assert.deepStrictEqual(seen, [{ a: 1, b: 40 }])
        // the guard answered: the tool did not run
        assert.deepStrictEqual(toolResults(result.state.messages).map((part) => [part.result, part.isFailure]), [
          [{ error: "too big" }, true]
        ])
      }).pipe(provide(oneToolCall)))
  }

  it.effect("a guard that answers nothing lets the tool run", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [guarding(seen)] })
      const result = yield* agent.run("What is 1 + 2?", { threadId: "t" })
      assert.deepStrictEqual(seen, [{ a: 1, b: 2 }])
      assert.deepStrictEqual(toolResults(result.state.messages).map((part) => part.result), [3])
    }).pipe(provide(oneToolCall)))
})

describe("state updates from wrapModelCall (LangChain's wrap hooks return them with the response)", () => {
  const counting = (seen: Array<unknown>) =>
    Middleware.make({
      name: "counting",
      state: { schema: Count, initial: { count: 0 } },
      wrapModelCall: (request, next) =>
        Effect.map(next(request), (response) => ({
          ...response,
          state: { count: (request.state.count as number) + 1, undeclared: "dropped" }
        })),
      afterModel: ({ state }) => Effect.sync(() => void seen.push(state.count))
    })

  it.effect("the update goes into the hook's slice before afterModel; undeclared keys are dropped", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [counting(seen)] })
      const result = yield* agent.run("What is 1 + 2?", { threadId: "t" })
      assert.deepStrictEqual(seen, [1, 2])
      assert.strictEqual((result.state as any).count, 2)
      assert.isFalse("undeclared" in result.state)
    }).pipe(provide(oneToolCall)))

  it.effect("the hooks around never see the update: the agent takes it off the response", () =>
    Effect.gen(function*() {
      const outer: Array<unknown> = []
      const watcher = Middleware.make({
        name: "watcher",
        wrapModelCall: (request, next) =>
          Effect.tap(next(request), (response) => Effect.sync(() => void outer.push(response.state)))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [watcher, counting([])] })
      yield* agent.run("What is 1 + 2?", { threadId: "t" })
      assert.deepStrictEqual(outer, [undefined, undefined])
    }).pipe(provide(oneToolCall)))

  it.effect("a state that is not an object of keys fails the run with InvalidHookResult naming the hook", () =>
    Effect.gen(function*() {
      const broken = Middleware.make({
        name: "broken",
        wrapModelCall: (request, next) => Effect.map(next(request), (response) => ({ ...response, state: [1] as any }))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [broken] })
      const error = yield* Effect.flip(agent.run("What is 1 + 2?", { threadId: "t" }))
      assert.strictEqual(error._tag, "InvalidHookResult")
      assert.include((error as any).reason, "its state is")
    }).pipe(provide(oneToolCall)))
})

describe("state updates from a middleware that declares no state", () => {
  it.effect("are dropped: no StateUpdated, nothing on the stored result, the hooks around never see them", () =>
    Effect.gen(function*() {
      const outer: Array<unknown> = []
      const watcher = Middleware.make({
        name: "watcher",
        wrapModelCall: (request, next) =>
          Effect.tap(next(request), (response) => Effect.sync(() => void outer.push(response.state))),
        wrapToolCall: (request, next) =>
          Effect.tap(next(request), (result) => Effect.sync(() => void outer.push("state" in result)))
      })
      const stateless = Middleware.make({
        name: "stateless",
        wrapModelCall: (request, next) => Effect.map(next(request), (response) => ({ ...response, state: { n: 1 } })),
        wrapToolCall: (request, next) => Effect.map(next(request), (result) => ({ ...result, state: { n: 1 } }))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [watcher, stateless] })
      const events = yield* Stream.runCollect(agent.stream("What is 1 + 2?", { threadId: "t" }))
      assert.deepStrictEqual(
        Array.from(events).filter((event) => event._tag === "StateUpdated"),
        []
      )
      assert.deepStrictEqual(outer, [undefined, false, undefined])
      const stored = Option.getOrThrow(yield* agent.thread("t"))
      assert.isFalse("n" in stored.state)
      const [part] = toolResults(stored.state.messages)
      assert.deepStrictEqual([part!.result, "state" in part!], [3, false])
    }).pipe(provide(oneToolCall)))
})

describe("state updates from wrapToolCall (LangChain's wrap hooks return them with the result)", () => {
  const twoToolCalls = [
    ScriptedModel.toolCalls([
      { name: "add", params: { a: 1, b: 2 }, id: "c1" },
      { name: "add", params: { a: 3, b: 4 }, id: "c2" }
    ]),
    ScriptedModel.text("3 and 7")
  ]

  it.effect("the update goes into the hook's slice, the next model hooks see it, and the checkpoint stores it", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const counting = Middleware.make({
        name: "counting",
        state: { schema: Count, initial: { count: 0 } },
        wrapToolCall: (request, next) =>
          Effect.map(next(request), (result) => ({
            ...result,
            state: { count: (request.state.count as number) + 1, undeclared: "dropped" }
          })),
        beforeModel: ({ state }) => Effect.sync(() => void seen.push(["beforeModel", state.count])),
        afterModel: ({ state }) => Effect.sync(() => void seen.push(["afterModel", state.count]))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [counting] })
      const result = yield* agent.run("What is 1 + 2?", { threadId: "t" })
      assert.deepStrictEqual(seen, [["beforeModel", 0], ["afterModel", 0], ["beforeModel", 1], ["afterModel", 1]])
      assert.strictEqual((result.state as any).count, 1)
      assert.isFalse("undeclared" in result.state)
      const stored = yield* agent.thread("t")
      assert.isTrue(Option.isSome(stored))
      assert.strictEqual((Option.getOrThrow(stored).state as any).count, 1)
      // the stored result is the tool's, with nothing of the update on it
      const [part] = toolResults(result.state.messages)
      assert.deepStrictEqual([part!.result, "updates" in part!, "state" in part!], [3, false, false])
    }).pipe(provide(oneToolCall)))

  it.effect("the updates of concurrent calls apply in the order of the calls in the reply, not the order they end in", () =>
    Effect.gen(function*() {
      const ended: Array<string> = []
      const secondEnded = yield* Deferred.make<void>()
      const last = Middleware.make({
        name: "last",
        state: { schema: Schema.Struct({ calls: Schema.Array(Schema.String) }), initial: { calls: [] } },
        wrapToolCall: (request, next) =>
          Effect.gen(function*() {
            // the first call ends only after the second has
            if (request.call.id === "c1") yield* Deferred.await(secondEnded)
            const result = yield* next(request)
            ended.push(request.call.id)
            if (request.call.id === "c2") yield* Deferred.succeed(secondEnded, undefined)
            return { ...result, state: { calls: [...(request.state.calls as ReadonlyArray<string>), request.call.id] } }
          })
      })
      const events: Array<AgentEvent.AgentEvent> = []
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [last], toolConcurrency: 2 })
      const stream = agent.stream("Add 1+2 and 3+4", { threadId: "t" })
      yield* Stream.runForEach(stream, (event) => Effect.sync(() => void events.push(event)))
      assert.deepStrictEqual(ended, ["c2", "c1"])
      const stored = Option.getOrThrow(yield* agent.thread("t"))
      // each call saw the state of the step's start; c2's update, later in the reply, is applied last
      assert.deepStrictEqual((stored.state as any).calls, ["c2"])
      assert.deepStrictEqual(
        events.flatMap((event) => event._tag === "StateUpdated" && event.hook === "wrapToolCall" ? [event.keys] : []),
        [["calls"], ["calls"]]
      )
    }).pipe(provide(twoToolCalls)))

  it.effect.prop(
    "whatever order concurrent calls end in, their updates apply in the order of the reply",
    {
      ending: FastCheck.integer({ min: 2, max: 5 }).chain((n) =>
        FastCheck.shuffledSubarray(Array.from({ length: n }, (_, i) => i), { minLength: n, maxLength: n })
      )
    },
    ({ ending }) =>
      Effect.gen(function*() {
        const ids = ending.map((_, i) => `c${i}`)
        // call i may end once the calls before it in `ending` have
        const ended = yield* Effect.forEach(ids, () => Deferred.make<void>())
        const endedOrder: Array<string> = []
        const ordered = Middleware.make({
          name: "ordered",
          state: { schema: Schema.Struct({ applied: Schema.Array(Schema.String) }), initial: { applied: [] } },
          wrapToolCall: (request, next) =>
            Effect.gen(function*() {
              const index = ids.indexOf(request.call.id)
              const rank = ending.indexOf(index)
              if (rank > 0) yield* Deferred.await(ended[ending[rank - 1]!]!)
              const result = yield* next(request)
              endedOrder.push(request.call.id)
              yield* Deferred.succeed(ended[index]!, undefined)
              return {
                ...result,
                state: { applied: [...(request.state.applied as ReadonlyArray<string>), request.call.id] }
              }
            })
        })
        const events: Array<AgentEvent.AgentEvent> = []
        const agent = yield* Agent.make({ toolkit: Calculator, middleware: [ordered], toolConcurrency: "unbounded" })
        yield* Stream.runForEach(
          agent.stream("Add them", { threadId: "t" }),
          (event) => Effect.sync(() => void events.push(event))
        )
        assert.deepStrictEqual(endedOrder, ending.map((i) => ids[i]))
        // every call saw the state of the step's start: the last call of the reply wins, whatever ended last
        const stored = Option.getOrThrow(yield* agent.thread("t"))
        assert.deepStrictEqual((stored.state as any).applied, [ids.at(-1)])
        assert.strictEqual(
          events.filter((event) => event._tag === "StateUpdated" && event.hook === "wrapToolCall").length,
          ids.length
        )
      }).pipe(provide([
        ScriptedModel.toolCalls(ending.map((_, i) => ({ name: "add", params: { a: i, b: 1 }, id: `c${i}` }))),
        ScriptedModel.text("done")
      ])),
    { fastCheck: { numRuns: 20 } }
  )

  it.effect("the hooks around see only the result; a hook that returns the result alone still works", () =>
    Effect.gen(function*() {
      const outer: Array<unknown> = []
      const watcher = Middleware.make({
        name: "watcher",
        wrapToolCall: (request, next) =>
          Effect.tap(next(request), (result) => Effect.sync(() => void outer.push([result.type, "state" in result])))
      })
      const counting = Middleware.make({
        name: "counting",
        state: { schema: Count, initial: { count: 0 } },
        wrapToolCall: (request, next) => Effect.map(next(request), (result) => ({ ...result, state: { count: 1 } }))
      })
      // a state field left undefined is no update, and is not stored either
      const undefinedState = Middleware.make({
        name: "undefinedState",
        wrapToolCall: (request, next) => Effect.map(next(request), (result) => ({ ...result, state: undefined }))
      })
      const agent = yield* Agent.make({ toolkit: Calculator, middleware: [watcher, counting, undefinedState] })
      const result = yield* agent.run("What is 1 + 2?", { threadId: "t" })
      assert.deepStrictEqual(outer, [["tool-result", false]])
      assert.strictEqual((result.state as any).count, 1)
      assert.isFalse("state" in toolResults(result.state.messages)[0]!)
    }).pipe(provide(oneToolCall)))

  it.effect("a state that is not an object of keys, or a state on something that is not a tool result, fails with InvalidHookResult", () =>
    Effect.gen(function*() {
      const failure = (wrapToolCall: Middleware.WrapToolCall<any, never>) =>
        Effect.flip(Effect.flatMap(
          Agent.make({ toolkit: Calculator, middleware: [Middleware.make({ name: "broken", wrapToolCall })] }),
          (agent) => agent.run("What is 1 + 2?", { threadId: "t" })
        )).pipe(provide(oneToolCall))
      const badState = yield* failure((request, next) =>
        Effect.map(next(request), (result) => ({ ...result, state: [1] as any }))
      )
      assert.strictEqual(badState._tag, "InvalidHookResult")
      assert.include((badState as any).reason, "its state is")
      const noResult = yield* failure(() => Effect.succeed({ result: 3, state: {} } as any))
      assert.strictEqual(noResult._tag, "InvalidHookResult")
      assert.include((noResult as any).reason, "returned an object, not a tool result")
    }))
})
