import { type LanguageModel, Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import {
  Agent,
  type AgentEvent,
  type Middleware,
  RunJournal,
  RunRecord,
  ToolContext,
  ToolEffect
} from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Effect, FastCheck, Schema, Stream } from "effect"

const SendEmail = Tool.make("send_email", { parameters: { to: Schema.String }, success: Schema.String })
const Search = Tool.make("search", { parameters: { query: Schema.String }, success: Schema.String })
  .annotate(Tool.Readonly, true)

describe("ToolEffect.of", () => {
  it("reads @effect/ai's annotations when the tool declares nothing: read-only, idempotent, else uncertain", () => {
    const base = Tool.make("t")
    assert.strictEqual(ToolEffect.of(base)._tag, "Uncertain")
    assert.strictEqual(ToolEffect.of(base.annotate(Tool.Readonly, true))._tag, "ReadOnly")
    assert.strictEqual(ToolEffect.of(base.annotate(Tool.Readonly, false))._tag, "Uncertain")
    assert.strictEqual(ToolEffect.of(base.annotate(Tool.Idempotent, true))._tag, "Idempotent")
    assert.strictEqual(ToolEffect.of(base.annotate(Tool.Destructive, false))._tag, "Uncertain")
    // read-only wins over idempotent, as in MCP (idempotentHint only means something for a tool that writes)
    assert.strictEqual(
      ToolEffect.of(base.annotate(Tool.Idempotent, true).annotate(Tool.Readonly, true))._tag,
      "ReadOnly"
    )
  })

  it("a declared effect wins over @effect/ai's annotations", () => {
    const tool = Tool.make("t").annotate(Tool.Readonly, true).pipe(ToolEffect.declare(ToolEffect.uncertain))
    assert.strictEqual(ToolEffect.of(tool)._tag, "Uncertain")
    const undo = () => Effect.void
    assert.strictEqual(
      ToolEffect.of(ToolEffect.declare(Tool.make("b"), ToolEffect.compensatable({ undo })))._tag,
      "Compensatable"
    )
  })
})

describe("ToolEffect keys", () => {
  it.prop(
    "the fingerprint of a call does not depend on the order of its arguments' keys",
    [FastCheck.dictionary(FastCheck.string(), FastCheck.jsonValue())],
    ([args]) => {
      const reversed = Object.fromEntries(Object.entries(args).reverse())
      assert.strictEqual(ToolEffect.fingerprint("t", args), ToolEffect.fingerprint("t", reversed))
    }
  )

  it("an idempotent tool is keyed by its arguments (or its own key); any other by the call", () => {
    const call = (id: string, params: unknown) =>
      Prompt.makePart("tool-call", { id, name: "put", params, providerExecuted: false })
    const byArgs = ToolEffect.idempotent()
    assert.strictEqual(
      ToolEffect.idempotencyKey(byArgs, call("c1", { a: 1, b: 2 }), "t1"),
      ToolEffect.idempotencyKey(byArgs, call("c2", { b: 2, a: 1 }), "t1")
    )
    assert.notStrictEqual(
      ToolEffect.idempotencyKey(byArgs, call("c1", { a: 1 }), "t1"),
      ToolEffect.idempotencyKey(byArgs, call("c1", { a: 2 }), "t1")
    )
    const own = ToolEffect.idempotent({ key: (params, c) => `${c.threadId}:${(params as { a: number }).a}` })
    assert.strictEqual(ToolEffect.idempotencyKey(own, call("c1", { a: 7 }), "t1"), "t1:7")
    assert.strictEqual(ToolEffect.idempotencyKey(ToolEffect.uncertain, call("c1", { a: 7 }), "t1"), "t1/c1")
  })
})

/** An agent with `send_email` declared `effect` and `search`, answering from a script; the handler records its key. */
const agentWith = (
  effect: ToolEffect.ToolEffect,
  keys: Array<string>,
  middleware: ReadonlyArray<Middleware.Any> = []
): Effect.Effect<Agent.Service<any, any>, unknown, LanguageModel.LanguageModel> => {
  const Send = SendEmail.pipe(ToolEffect.declare(effect))
  const Tools = Toolkit.make(Send, Search)
  const ToolsLive = Tools.toLayer({
    send_email: ({ to }) =>
      Effect.map(Effect.orDie(ToolContext.current), ({ idempotencyKey }) => {
        keys.push(idempotencyKey)
        return `sent to ${to}`
      }),
    search: ({ query }) => Effect.succeed(`found ${query}`)
  })
  return Agent.make({ toolkit: Tools, middleware }).pipe(Effect.provide(ToolsLive)) as Effect.Effect<
    Agent.Service<any, any>,
    unknown,
    LanguageModel.LanguageModel
  >
}

const callBoth = [
  ScriptedModel.toolCalls([
    { name: "send_email", params: { to: "ada@example.com" }, id: "c1" },
    { name: "search", params: { query: "x" }, id: "c2" }
  ]),
  ScriptedModel.text("done")
]

describe("ToolEffect in a run", () => {
  it.effect("a handler gets the idempotency key its tool's effect derives", () =>
    Effect.gen(function*() {
      const keys: Array<string> = []
      const idempotent = yield* agentWith(
        ToolEffect.idempotent({ key: (params) => `mail/${(params as any).to}` }),
        keys
      )
      yield* idempotent.run("go", { threadId: "t1" })
      const uncertain = yield* agentWith(ToolEffect.uncertain, keys)
      yield* uncertain.run("go", { threadId: "t2" })
      assert.deepStrictEqual(keys, ["mail/ada@example.com", "t2/c1"])
    }).pipe(Effect.provide(ScriptedModel.layer([...callBoth, ...callBoth]))))

  it.effect("ToolCallStarted carries the ledger entry of a call of a tool that is not read-only, and none for a read", () =>
    Effect.gen(function*() {
      const agent = yield* agentWith(ToolEffect.uncertain, [])
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("go", { threadId: "t1" })))
      const started = events.filter((event): event is Extract<AgentEvent.AgentEvent, { _tag: "ToolCallStarted" }> =>
        event._tag === "ToolCallStarted"
      )
      const byName = Object.fromEntries(started.map((event) => [event.call.name, event.ledger]))
      assert.deepStrictEqual(byName.send_email, {
        step: "tool/c1",
        callId: "c1",
        toolName: "send_email",
        effect: "Uncertain",
        idempotencyKey: "t1/c1",
        fingerprint: ToolEffect.fingerprint("send_email", { to: "ada@example.com" })
      })
      assert.strictEqual(byName.search, undefined)
    }).pipe(Effect.provide(ScriptedModel.layer(callBoth))))
})

/**
 * A journal that finds the first call of each ledgered tool that is not
 * idempotent cut off, as a durable journal does after a crash between its
 * started entry and its result; everything else runs in process.
 */
const cuttingOff = (times = 1) => {
  const cut = new Map<string, number>()
  return RunJournal.RunJournal.of({
    ...RunJournal.inProcess,
    step: (key, effect) => {
      if (key._tag !== "Tool" || key.ledger === undefined || key.ledger.effect === "Idempotent") return effect
      const count = cut.get(key.call.id) ?? 0
      if (count >= times) return effect
      cut.set(key.call.id, count + 1)
      return Effect.succeed(key.result.to(ToolEffect.cutOffResult(key.call, key.ledger)))
    }
  })
}

const resultsOf = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.flatMap((message) =>
    message.role === "tool" ? message.content.flatMap((part) => part.type === "tool-result" ? [part] : []) : []
  )

describe("ToolEffect.middleware: the Uncertain question", () => {
  const requestOf = (value: unknown) => Schema.decodeUnknownSync(ToolEffect.UncertainRequest)(value)
  const undone: Array<string> = []
  const compensatable = ToolEffect.compensatable({
    undo: (_params, entry) => Effect.sync(() => undone.push(entry.idempotencyKey))
  })

  const interrupted = (effect: ToolEffect.ToolEffect, keys: Array<string>, threadId: string) =>
    Effect.gen(function*() {
      const journal = cuttingOff()
      const inCutOff = <A, E, R>(run: Effect.Effect<A, E, R>) =>
        Effect.provideService(run, RunJournal.RunJournal, journal)
      const agent = yield* agentWith(effect, keys, [ToolEffect.middleware()])
      const result = yield* inCutOff(agent.run("go", { threadId }))
      assert.strictEqual(result._tag, "Interrupted")
      if (result._tag !== "Interrupted") throw new Error("not interrupted")
      assert.strictEqual(result.interrupt.middleware, ToolEffect.middlewareName)
      return { agent, request: requestOf(result.interrupt.value), inCutOff }
    })

  it.effect("a cut-off call of an uncertain tool ends the run waiting on it, the tool not run", () =>
    Effect.gen(function*() {
      const keys: Array<string> = []
      const { request } = yield* interrupted(ToolEffect.uncertain, keys, "t1")
      assert.deepStrictEqual(keys, [])
      assert.strictEqual(request.entry.callId, "c1")
      assert.deepStrictEqual(request.allowedDecisions, ["retry", "markDone"])
    }).pipe(Effect.provide(ScriptedModel.layer(callBoth))))

  it.effect("markDone answers the call with the given result; the tool never runs", () =>
    Effect.gen(function*() {
      const keys: Array<string> = []
      const { agent, inCutOff, request } = yield* interrupted(ToolEffect.uncertain, keys, "t1")
      const done = yield* inCutOff(agent.resume("t1", ToolEffect.markDone(request, { id: "msg-1" })))
      assert.strictEqual(done._tag, "Completed")
      const results = resultsOf(done.state.messages)
      assert.deepStrictEqual(results.map((part) => [part.id, part.result, part.isFailure]), [
        ["c1", { id: "msg-1" }, false],
        ["c2", "found x", false]
      ])
      assert.deepStrictEqual(keys, [])
    }).pipe(Effect.provide(ScriptedModel.layer(callBoth))))

  it.effect("markDone with a result no store can keep (a bigint, 3,000 levels deep) is refused naming it; the run waits on", () =>
    Effect.gen(function*() {
      const { agent, inCutOff, request } = yield* interrupted(ToolEffect.uncertain, [], "t1")
      let deep: unknown = "sent"
      for (let i = 0; i < 3_000; i++) deep = [deep]
      for (const [result, says] of [[{ id: 10n }, "holds a bigint"], [deep, "levels deep"]] as const) {
        const refused = yield* Effect.flip(inCutOff(agent.resume("t1", ToolEffect.markDone(request, result))))
        assert.instanceOf(refused, ToolEffect.InvalidUncertainDecision)
        assert.strictEqual((refused as ToolEffect.InvalidUncertainDecision).field, "result")
        assert.include((refused as ToolEffect.InvalidUncertainDecision).reason, says)
      }
      const done = yield* inCutOff(agent.resume("t1", ToolEffect.markDone(request, { id: "msg-1" })))
      assert.strictEqual(done._tag, "Completed")
    }).pipe(Effect.provide(ScriptedModel.layer(callBoth))))

  it.effect("retry runs the call again, once, under the same idempotency key", () =>
    Effect.gen(function*() {
      const keys: Array<string> = []
      const { agent, inCutOff, request } = yield* interrupted(ToolEffect.uncertain, keys, "t1")
      const done = yield* inCutOff(agent.resume("t1", ToolEffect.retry(request)))
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual(keys, ["t1/c1"])
      assert.deepStrictEqual(resultsOf(done.state.messages).map((part) => part.result).sort(), [
        "found x",
        "sent to ada@example.com"
      ])
    }).pipe(Effect.provide(ScriptedModel.layer(callBoth))))

  it.effect("compensate runs the undo with the entry, not the tool, and the model reads that it was undone", () =>
    Effect.gen(function*() {
      const keys: Array<string> = []
      undone.length = 0
      const { agent, inCutOff, request } = yield* interrupted(compensatable, keys, "t1")
      assert.deepStrictEqual(request.allowedDecisions, ["retry", "markDone", "compensate"])
      const done = yield* inCutOff(agent.resume("t1", ToolEffect.compensate(request)))
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual(keys, [])
      assert.deepStrictEqual(undone, ["t1/c1"])
      const sent = resultsOf(done.state.messages).find((part) => part.id === "c1")!
      assert.isTrue(sent.isFailure)
      assert.include(JSON.stringify(sent.result), "undone")
    }).pipe(Effect.provide(ScriptedModel.layer(callBoth))))

  it.effect("a decision for another entry, or compensating a tool with no undo, is refused; the thread still waits", () =>
    Effect.gen(function*() {
      const keys: Array<string> = []
      const { agent, inCutOff, request } = yield* interrupted(ToolEffect.uncertain, keys, "t1")
      const refusals = [
        { ...ToolEffect.retry(request), step: "tool/c9" },
        { ...ToolEffect.retry(request), fingerprint: "0" },
        ToolEffect.compensate(request),
        { _tag: "Retry" }
      ]
      for (const decision of refusals) {
        const error = yield* Effect.flip(inCutOff(agent.resume("t1", decision)))
        assert.include(["InvalidUncertainDecision", "InvalidResume"], error._tag, JSON.stringify(decision))
      }
      assert.deepStrictEqual(keys, [])
      // still waiting: a valid decision goes through
      const done = yield* inCutOff(agent.resume("t1", ToolEffect.markDone(request, "ok")))
      assert.strictEqual(done._tag, "Completed")
    }).pipe(Effect.provide(ScriptedModel.layer(callBoth))))
})

describe("ToolEffect.middleware: a decision binds to the thread's incarnation", () => {
  const cutOffRun = (agent: Agent.Service<any, any>, threadId: string) =>
    Effect.provideService(agent.run("go", { threadId }), RunJournal.RunJournal, cuttingOff())
  const requestOf = (result: { readonly _tag: string }) => {
    if (result._tag !== "Interrupted") throw new Error(`not interrupted: ${result._tag}`)
    return Schema.decodeUnknownSync(ToolEffect.UncertainRequest)((result as any).interrupt.value)
  }

  it.effect("after deleteThread and an identical cut-off call, the old thread's decision is refused; the new request's decides", () =>
    Effect.gen(function*() {
      const keys: Array<string> = []
      const agent = yield* agentWith(ToolEffect.uncertain, keys, [ToolEffect.middleware()])
      const before = requestOf(yield* cutOffRun(agent, "t1"))
      yield* agent.deleteThread("t1")
      const request = requestOf(yield* cutOffRun(agent, "t1"))
      assert.deepStrictEqual(request.entry, before.entry, "the same entry: only the incarnation tells them apart")
      assert.notStrictEqual(request.incarnation, before.incarnation)
      for (
        const stale of [ToolEffect.retry(before), ToolEffect.markDone(before, "ok"), {
          ...ToolEffect.retry(request),
          incarnation: undefined
        }]
      ) {
        const error = yield* Effect.flip(agent.resume("t1", stale))
        assert.strictEqual(error._tag, "InvalidUncertainDecision", JSON.stringify(stale))
        assert.strictEqual((error as ToolEffect.InvalidUncertainDecision).field, "incarnation")
      }
      assert.deepStrictEqual(keys, [])
      const done = yield* agent.resume("t1", ToolEffect.markDone(request, "ok"))
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual(keys, [])
    }).pipe(Effect.provide(ScriptedModel.layer([callBoth[0]!, ...callBoth]))))
})

describe("ToolEffect.middleware: several calls cut off", () => {
  const twoSends = [
    ScriptedModel.toolCalls([
      { name: "send_email", params: { to: "ada@example.com" }, id: "c1" },
      { name: "send_email", params: { to: "bob@example.com" }, id: "c2" }
    ]),
    ScriptedModel.text("done")
  ]

  it.effect("each cut-off call of a reply is asked about before the model reads any result", () =>
    Effect.gen(function*() {
      const keys: Array<string> = []
      const journal = cuttingOff()
      const inCutOff = <A, E, R>(run: Effect.Effect<A, E, R>) =>
        Effect.provideService(run, RunJournal.RunJournal, journal)
      const agent = yield* agentWith(ToolEffect.uncertain, keys, [ToolEffect.middleware()])
      const first = yield* inCutOff(agent.run("go", { threadId: "t1" }))
      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      const asked = Schema.decodeUnknownSync(ToolEffect.UncertainRequest)(first.interrupt.value)
      assert.strictEqual(asked.entry.callId, "c1")
      const second = yield* inCutOff(agent.resume("t1", ToolEffect.markDone(asked, "sent to Ada")))
      // the other call is asked about next: the model has not been called again
      assert.strictEqual(second._tag, "Interrupted")
      if (second._tag !== "Interrupted") return
      const next = Schema.decodeUnknownSync(ToolEffect.UncertainRequest)(second.interrupt.value)
      assert.strictEqual(next.entry.callId, "c2")
      assert.strictEqual((yield* ScriptedModel.requests).length, 1)
      const done = yield* inCutOff(agent.resume("t1", ToolEffect.retry(next)))
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual(keys, ["t1/c2"])
      assert.deepStrictEqual(resultsOf(done.state.messages).map((part) => [part.id, part.result]), [
        ["c1", "sent to Ada"],
        ["c2", "sent to bob@example.com"]
      ])
    }).pipe(Effect.provide(ScriptedModel.layer(twoSends))))
})

describe("ToolEffect.middleware: a compensation cut off", () => {
  it.effect("a compensation cut off by a crash is asked about again, and a later decision replaces it", () =>
    Effect.gen(function*() {
      const keys: Array<string> = []
      const undone: Array<string> = []
      const journal = cuttingOff(2)
      const inCutOff = <A, E, R>(run: Effect.Effect<A, E, R>) =>
        Effect.provideService(run, RunJournal.RunJournal, journal)
      const effect = ToolEffect.compensatable({ undo: (_params, entry) => Effect.sync(() => undone.push(entry.step)) })
      const agent = yield* agentWith(effect, keys, [ToolEffect.middleware()])
      const first = yield* inCutOff(agent.run("go", { threadId: "t1" }))
      if (first._tag !== "Interrupted") return assert.fail("not interrupted")
      const asked = Schema.decodeUnknownSync(ToolEffect.UncertainRequest)(first.interrupt.value)
      // the compensation (the call's second step) is cut off too: asked about again
      const second = yield* inCutOff(agent.resume("t1", ToolEffect.compensate(asked)))
      if (second._tag !== "Interrupted") return assert.fail("not interrupted")
      const again = Schema.decodeUnknownSync(ToolEffect.UncertainRequest)(second.interrupt.value)
      assert.strictEqual(again.entry.callId, "c1")
      // the retry runs the tool, not the undo: the earlier compensate decision no longer holds
      const done = yield* inCutOff(agent.resume("t1", ToolEffect.retry(again)))
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual(undone, [])
      assert.deepStrictEqual(keys, ["t1/c1"])
    }).pipe(Effect.provide(ScriptedModel.layer(callBoth))))
})

describe("ToolEffect: replay and fork never run a recorded call again", () => {
  const script = [
    ScriptedModel.toolCalls([{ name: "send_email", params: { to: "ada@example.com" }, id: "c1" }]),
    ScriptedModel.toolCalls([{ name: "send_email", params: { to: "bob@example.com" }, id: "c2" }]),
    ScriptedModel.text("both sent")
  ]
  const recorded = (keys: Array<string>) =>
    Effect.flatMap(
      agentWith(ToolEffect.uncertain, keys),
      (agent) => RunRecord.record(agent, "Email Ada and Bob", { threadId: "prod" })
    ).pipe(
      Effect.provide(ScriptedModel.layer(script))
    )

  it.effect("a replay runs no tool; a fork at any step runs none of the recorded calls again", () =>
    Effect.gen(function*() {
      const keys: Array<string> = []
      const { record } = yield* recorded(keys)
      assert.deepStrictEqual(keys, ["prod/c1", "prod/c2"])
      keys.length = 0
      yield* Effect.flatMap(agentWith(ToolEffect.uncertain, keys), (agent) => agent.replay(record)).pipe(
        Effect.provide(ScriptedModel.layer([]))
      )
      assert.deepStrictEqual(keys, [])
      for (const at of [0, 1, 2, 3]) {
        keys.length = 0
        // the fork's own model calls answer text at once: any tool run is a recorded call run again
        yield* Effect.flatMap(
          agentWith(ToolEffect.uncertain, keys),
          (agent) => agent.fork(record, { to: `fork-${at}`, at })
        ).pipe(
          Effect.provide(ScriptedModel.layer([ScriptedModel.text("forked")]))
        )
        assert.deepStrictEqual(keys, [], `fork at ${at}`)
      }
    }))
})
