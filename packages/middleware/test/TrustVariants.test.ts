/**
 * Variants of issue 33's approval, risk and subagent findings (items 4, 6
 * and 16) that the first fixes did not name: a decision's clearance reused
 * by an identical call of a later reply, a decision for a call the wait did
 * not ask about, a classifier that dies or ignores its timeout, options that
 * are no duration, a parent's thread limit and tool limit against children
 * and grandchildren, a child whose tool never answers.
 */
import type { Prompt } from "@effect/ai"
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Fiber, Option, Ref, Schema, Stream, TestClock } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as ModelCallLimit from "../src/ModelCallLimit.js"
import * as Pii from "../src/Pii.js"
import * as RiskApproval from "../src/RiskApproval.js"
import * as SubAgents from "../src/SubAgents.js"
import * as ToolCallLimit from "../src/ToolCallLimit.js"

const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

const resultsOf = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.flatMap((message) => message.role === "tool" ? message.content : [])

// ---------------------------------------------------------------------------
// approvals
// ---------------------------------------------------------------------------

const WireMoney = Tool.make("wire_money", {
  parameters: { to: Schema.String, amount: Schema.Number },
  success: Schema.String
})
const Bank = Toolkit.make(WireMoney)

/** An agent whose model wires 100 to bob as `call_0` in each reply; `middleware` around a gate on wire_money. */
const banker = (
  replies: number,
  middleware: (hitl: Middleware.Any) => ReadonlyArray<Middleware.Any>,
  when?: HumanInTheLoop.When
) =>
  Effect.gen(function*() {
    const wired = yield* Ref.make(0)
    const { model } = yield* ScriptedModel.make([
      ...Array.from({ length: replies }, () =>
        ScriptedModel.toolCalls([{ id: "call_0", name: "wire_money", params: { to: "bob", amount: 100 } }])),
      ScriptedModel.text("done")
    ])
    const hitl = HumanInTheLoop.middleware({
      toolkit: Bank,
      interruptOn: { wire_money: when === undefined ? true : { allowedDecisions: ["approve", "reject"], when } }
    })
    const agent = yield* Agent.make({ toolkit: Bank, middleware: middleware(hitl) }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model),
      Effect.provide(Bank.toLayer({
        wire_money: () =>
          Effect.as(Ref.update(wired, (n) => n + 1), "wired")
      }))
    )
    return { agent, wired: Ref.get(wired) }
  })

/** Jumps to the tools from `afterModel` on the second reply: the hooks after it are skipped. */
const jumper = Middleware.make({
  name: "jumper",
  canJumpTo: ["tools"],
  afterModel: ({ messages }) =>
    Effect.succeed(
      messages.filter((message) => message.role === "assistant").length === 2 ? { jumpTo: "tools" as const } : undefined
    )
})

describe("approvals: variants", () => {
  it.effect(
    "an approval of call_0 does not clear an identical call_0 of a later reply whose afterModel a jump skipped",
    () =>
      Effect.gen(function*() {
        // the jumper is listed after HumanInTheLoop: its afterModel runs first and skips HumanInTheLoop's
        const { agent, wired } = yield* banker(2, (hitl) => [hitl, jumper])
        const first = yield* agent.run("pay bob", { threadId: "t" })
        assert.strictEqual(first._tag, "Interrupted")
        const request = Option.getOrThrow(approvalOf(Option.getOrThrow((yield* agent.thread("t")).pipe(
          Option.flatMap((thread) => thread.pending)
        ))))
        const result = yield* agent.resume("t", HumanInTheLoop.approveAll(request))
        assert.strictEqual(result._tag, "Completed")
        assert.strictEqual(yield* wired, 1, "the second, identical call did not run unasked")
        const answers = resultsOf(result.state.messages).filter((part) => part.name === "wire_money")
        assert.strictEqual(answers.length, 2)
        assert.isTrue(answers[1]!.isFailure)
        assert.include(JSON.stringify(answers[1]!.result), "needs a person's decision")
      })
  )

  it.effect("a decision for a call of the reply that the wait did not ask about (its when said no) is refused", () =>
    Effect.gen(function*() {
      const Two = Toolkit.make(WireMoney)
      const wired = yield* Ref.make<ReadonlyArray<number>>([])
      const { model } = yield* ScriptedModel.make([
        ScriptedModel.toolCalls([
          { id: "small", name: "wire_money", params: { to: "bob", amount: 5 } },
          { id: "large", name: "wire_money", params: { to: "bob", amount: 5000 } }
        ]),
        ScriptedModel.text("done")
      ])
      const agent = yield* Agent.make({
        toolkit: Two,
        middleware: [HumanInTheLoop.middleware({
          toolkit: Two,
          interruptOn: {
            wire_money: {
              allowedDecisions: ["approve", "reject"],
              when: (call) => (call.params as { amount: number }).amount > 100
            }
          }
        })]
      }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model),
        Effect.provide(Two.toLayer({
          wire_money: ({ amount }) => Effect.as(Ref.update(wired, (all) => [...all, amount]), "wired")
        }))
      )
      yield* agent.run("pay", { threadId: "t" })
      const pending = Option.getOrThrow(Option.flatMap(yield* agent.thread("t"), (thread) => thread.pending))
      const request = Option.getOrThrow(approvalOf(pending))
      const [asked] = request.actionRequests
      assert.strictEqual(asked!.callId, "large")
      // a decision bound to the wait, for the call it did not ask about
      const forged = { ...HumanInTheLoop.reject(asked!), callId: "small" }
      const error = yield* Effect.flip(agent.resume("t", [HumanInTheLoop.approve(asked!), forged]))
      assert.deepInclude(error, { _tag: "DecisionError", reason: "UnknownCall", callId: "small" })
      assert.deepStrictEqual(yield* Ref.get(wired), [])
      assert.isTrue(Option.isSome(Option.flatMap(yield* agent.thread("t"), (thread) => thread.pending)))
    }))
})

// ---------------------------------------------------------------------------
// RiskApproval
// ---------------------------------------------------------------------------

/** A RiskApproval-gated agent deploying to prod, with `classifier` as the classifier. */
const Deploy = Tool.make("deploy", { parameters: { env: Schema.String }, success: Schema.String })
const Deployer = Toolkit.make(Deploy)

const riskyAgent = (classifier: LanguageModel.Service, timeout?: RiskApproval.Options["timeout"]) =>
  Effect.gen(function*() {
    const deployed = yield* Ref.make(0)
    const risky = yield* RiskApproval.make({ timeout }).pipe(Effect.provide(RiskApproval.layer(classifier)))
    const { model } = yield* ScriptedModel.make([
      ScriptedModel.toolCalls([{ id: "c1", name: "deploy", params: { env: "prod" } }]),
      ScriptedModel.text("done")
    ])
    const agent = yield* Agent.make({
      toolkit: Deployer,
      middleware: [HumanInTheLoop.middleware({
        toolkit: Deployer,
        interruptOn: { deploy: { allowedDecisions: ["approve", "reject"], when: risky } }
      })]
    }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model),
      Effect.provide(Deployer.toLayer({ deploy: () => Effect.as(Ref.update(deployed, (n) => n + 1), "deployed") }))
    )
    return { agent, deployed: Ref.get(deployed) }
  })

/** Moves the TestClock a second at a time until `fiber` ends, at most `limit` seconds. */
const runClock = <A, E>(fiber: Fiber.RuntimeFiber<A, E>, limit = 120) =>
  Effect.gen(function*() {
    for (let waited = 0; waited < limit; waited++) {
      yield* Effect.yieldNow()
      if (Option.isSome(yield* Fiber.poll(fiber))) break
      yield* TestClock.adjust("1 second")
    }
    if (Option.isNone(yield* Fiber.poll(fiber))) {
      yield* Fiber.interruptFork(fiber)
      return assert.fail(`still running after ${limit} seconds`)
    }
    return yield* Fiber.join(fiber)
  })

describe("RiskApproval: variants", () => {
  it.effect("a classifier that ignores its timeout (uninterruptible, never answers): the call waits for a person", () =>
    Effect.gen(function*() {
      const stuck = yield* LanguageModel.make({
        generateText: () => Effect.uninterruptible(Effect.never),
        streamText: () => Stream.never
      })
      const { agent, deployed } = yield* riskyAgent(stuck, "5 seconds")
      const result = yield* runClock(yield* Effect.fork(agent.run("ship it", { threadId: "t" })))
      assert.strictEqual(result._tag, "Interrupted")
      assert.strictEqual(yield* deployed, 0)
    }))

  it.effect("a classifier that dies: the call waits for a person", () =>
    Effect.gen(function*() {
      const dying = yield* LanguageModel.make({
        generateText: () => Effect.dieMessage("classifier crashed"),
        streamText: () => Stream.die("classifier crashed")
      })
      const { agent, deployed } = yield* riskyAgent(dying)
      const result = yield* agent.run("ship it", { threadId: "t" })
      assert.strictEqual(result._tag, "Interrupted")
      assert.strictEqual(yield* deployed, 0)
    }))

  it.effect("a timeout that is no duration (NaN, negative, infinite, a word) is an InvalidOptions, not a defect", () =>
    Effect.gen(function*() {
      const { model } = yield* ScriptedModel.make([])
      for (const timeout of [Number.NaN, -1, Number.POSITIVE_INFINITY, "soon", "Infinity"] as const) {
        const error = yield* Effect.flip(
          RiskApproval.make({ timeout: timeout as never }).pipe(Effect.provide(RiskApproval.layer(model)))
        )
        assert.strictEqual(error._tag, "InvalidOptions", String(timeout))
      }
    }))
})

// ---------------------------------------------------------------------------
// SubAgents
// ---------------------------------------------------------------------------

const Noop = Tool.make("noop", { parameters: { n: Schema.Number }, success: Schema.String })
const Tools = Toolkit.make(Noop)

const task = (agent: string, text: string, id: string) => ({ id, name: "task", params: { agent, task: text } })

/** A model answering request n with `reply(n)`, counting the calls in `calls`. */
const counted = (calls: Ref.Ref<number>, reply: (n: number) => any) =>
  Effect.map(
    ScriptedModel.make(
      Array.from({ length: 40 }, (_, n) => () => Effect.as(Ref.update(calls, (c) => c + 1), reply(n)))
    ),
    ({ model }) => model
  )

/** A child that calls `noop` on each of its first `calls` model calls, then answers. */
const busyChild = (modelCalls: Ref.Ref<number>, toolRuns: Ref.Ref<number>, calls: number) =>
  Effect.gen(function*() {
    const model = yield* counted(
      modelCalls,
      (n) => n < calls ? ScriptedModel.toolCalls([{ name: "noop", params: { n } }]) : ScriptedModel.text("child done")
    )
    return yield* Agent.make({ toolkit: Tools }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model),
      Effect.provide(Tools.toLayer({ noop: ({ n }) => Effect.as(Ref.update(toolRuns, (c) => c + 1), `ran ${n}`) }))
    )
  })

const orders = [
  (limit: Middleware.Any, subAgents: Middleware.Any) => [limit, subAgents],
  (limit: Middleware.Any, subAgents: Middleware.Any) => [subAgents, limit]
] as const

describe("SubAgents: variants", () => {
  it.effect("ModelCallLimit's threadLimit counts the children's model calls, in either order", () =>
    Effect.forEach(orders, (order) =>
      Effect.gen(function*() {
        const modelCalls = yield* Ref.make(0)
        const toolRuns = yield* Ref.make(0)
        const model = yield* counted(
          modelCalls,
          (n) => n === 0 ? ScriptedModel.toolCalls([task("busy", "work", "c1")]) : ScriptedModel.text("all done")
        )
        const agent = yield* Agent.make({
          middleware: order(
            ModelCallLimit.middleware({ threadLimit: 3 }),
            SubAgents.middleware({
              agents: { busy: { description: "Works", agent: yield* busyChild(modelCalls, toolRuns, 9) } }
            })
          )
        }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
        const result = yield* agent.run("go", { threadId: "t1" })
        assert.notStrictEqual(result._tag, "Interrupted")
        assert.isAtMost(yield* Ref.get(modelCalls), 3)
      })))

  it.effect("ToolCallLimit's threadLimit counts a child's tool calls, in either order", () =>
    Effect.forEach(orders, (order) =>
      Effect.gen(function*() {
        const modelCalls = yield* Ref.make(0)
        const toolRuns = yield* Ref.make(0)
        const model = yield* counted(
          modelCalls,
          (n) => n === 0 ? ScriptedModel.toolCalls([task("busy", "work", "c1")]) : ScriptedModel.text("all done")
        )
        const agent = yield* Agent.make({
          middleware: order(
            ToolCallLimit.middleware({ threadLimit: 2 }),
            SubAgents.middleware({
              agents: { busy: { description: "Works", agent: yield* busyChild(modelCalls, toolRuns, 6) } }
            })
          )
        }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
        yield* Effect.either(agent.run("go", { threadId: "t1" }))
        // the task call takes one of the two
        assert.isAtMost(yield* Ref.get(toolRuns), 1)
      })))

  it.effect("ModelCallLimit's threadLimit holds across a second run whose child would go over", () =>
    Effect.gen(function*() {
      const modelCalls = yield* Ref.make(0)
      const toolRuns = yield* Ref.make(0)
      const model = yield* counted(
        modelCalls,
        (n) => n % 2 === 0 ? ScriptedModel.toolCalls([task("busy", "work", `c${n}`)]) : ScriptedModel.text("done")
      )
      const agent = yield* Agent.make({
        middleware: [
          ModelCallLimit.middleware({ threadLimit: 6 }),
          SubAgents.middleware({
            agents: { busy: { description: "Works", agent: yield* busyChild(modelCalls, toolRuns, 3) } }
          })
        ]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      yield* Effect.either(agent.run("go", { threadId: "t1" }))
      yield* Effect.either(agent.run("again", { threadId: "t1" }))
      assert.isAtMost(yield* Ref.get(modelCalls), 6)
    }))

  it.effect("a grandchild's tool calls count against its grandparent's ToolCallLimit", () =>
    Effect.gen(function*() {
      const modelCalls = yield* Ref.make(0)
      const toolRuns = yield* Ref.make(0)
      const grandchild = yield* busyChild(modelCalls, toolRuns, 6)
      const middleModel = yield* counted(modelCalls, (n) =>
        n === 0 ? ScriptedModel.toolCalls([task("busy", "deeper", "g1")]) : ScriptedModel.text("middle done"))
      const middle = yield* Agent.make({
        middleware: [SubAgents.middleware({ agents: { busy: { description: "Works", agent: grandchild } } })]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, middleModel))
      const model = yield* counted(
        modelCalls,
        (n) =>
          n === 0 ? ScriptedModel.toolCalls([task("middle", "x", "c1")]) : ScriptedModel.text("all done")
      )
      const agent = yield* Agent.make({
        middleware: [
          SubAgents.middleware({ agents: { middle: { description: "Delegates", agent: middle } } }),
          ToolCallLimit.middleware({ runLimit: 3 })
        ]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      yield* agent.run("go", { threadId: "t1" })
      // the task calls of the parent and the middle child and the grandchild's noop calls share the limit of 3
      assert.isAtMost(yield* Ref.get(toolRuns), 1)
    }))

  it.effect("a child whose model never answers and ignores interruption is left behind at the per-child timeout", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make(0)
      const deaf = yield* LanguageModel.make({
        generateText: () => Effect.uninterruptible(Effect.never),
        streamText: () => Stream.fromEffect(Effect.uninterruptible(Effect.never))
      })
      const stuck = yield* Agent.make({}).pipe(Effect.provideService(LanguageModel.LanguageModel, deaf))
      const model = yield* counted(
        calls,
        (n) => n === 0 ? ScriptedModel.toolCalls([task("stuck", "x", "c1")]) : ScriptedModel.text("all done")
      )
      const agent = yield* Agent.make({
        middleware: [
          SubAgents.middleware({ agents: { stuck: { description: "Hangs", agent: stuck } }, timeout: "30 seconds" })
        ]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      const result = yield* runClock(yield* Effect.fork(agent.run("go", { threadId: "t1" })), 300)
      assert.strictEqual(result._tag, "Completed")
      const answer = resultsOf(result.state.messages).find((part) => part.name === "task")!
      assert.include(JSON.stringify(answer.result), "SubAgentTimeout")
    }))

  it.effect.each(["run", "stream"] as const)(
    "%s: a child whose tool never answers is stopped at the per-child timeout; the parent goes on",
    (mode) =>
      Effect.gen(function*() {
        const calls = yield* Ref.make(0)
        const childModel = yield* counted(calls, () => ScriptedModel.toolCalls([{ name: "noop", params: { n: 1 } }]))
        const stuck = yield* Agent.make({ toolkit: Tools }).pipe(
          Effect.provideService(LanguageModel.LanguageModel, childModel),
          Effect.provide(Tools.toLayer({ noop: () => Effect.never }))
        )
        const model = yield* counted(
          calls,
          (n) => n === 0 ? ScriptedModel.toolCalls([task("stuck", "x", "c1")]) : ScriptedModel.text("all done")
        )
        const agent = yield* Agent.make({
          middleware: [
            SubAgents.middleware({ agents: { stuck: { description: "Hangs", agent: stuck } }, timeout: "30 seconds" })
          ]
        }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
        const ran = mode === "run"
          ? agent.run("go", { threadId: "t1" })
          : Effect.flatMap(
            Stream.runLast(agent.stream("go", { threadId: "t1" })),
            (last) => {
              const event = Option.getOrThrow(last)
              return event._tag === "RunEnded" ? Effect.succeed(event.result) : Effect.dieMessage("no RunEnded")
            }
          )
        const result = yield* runClock(yield* Effect.fork(ran), 300)
        assert.strictEqual(result._tag, "Completed")
        const answer = resultsOf(result.state.messages).find((part) => part.name === "task")!
        assert.isTrue(answer.isFailure)
        assert.include(JSON.stringify(answer.result), "SubAgentTimeout")
      })
  )
})

// ---------------------------------------------------------------------------
// a person's text forwarded to a child, in process
// ---------------------------------------------------------------------------

describe("SubAgents: a person's text for a child, in process", () => {
  const card = "4111 1111 1111 1111"
  const typed = `use my card ${card}`
  const Pay = Toolkit.make(Tool.make("pay", { parameters: { amount: Schema.Number }, success: Schema.String }))

  /** An agent on `checkpointer` whose model answers `turns`, with `middleware`. */
  const agentOf = (
    checkpointer: Checkpointer.Service,
    turns: ReadonlyArray<ScriptedModel.Turn>,
    middleware: ReadonlyArray<Middleware.Any>
  ) =>
    Effect.flatMap(ScriptedModel.make(turns), ({ model }) =>
      Agent.make({ toolkit: Pay, middleware }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model),
        Effect.provide(Pay.toLayer({ pay: () => Effect.succeed("paid") })),
        Effect.provideService(Checkpointer.Checkpointer, checkpointer)
      ))

  /** The payer: asks a person before it pays (no Pii of its own). */
  const payerOf = (checkpointer: Checkpointer.Service) =>
    agentOf(checkpointer, [
      ScriptedModel.toolCalls([{ name: "pay", params: { amount: 10 } }]),
      ScriptedModel.text("paid")
    ], [
      HumanInTheLoop.middleware({ toolkit: Pay, interruptOn: { pay: true } })
    ])

  const delegating = (agent: string, id: string) => [
    ScriptedModel.toolCalls([task(agent, "pay the bill", id)]),
    ScriptedModel.text("done")
  ]

  for (const depth of ["a child", "a grandchild"] as const) {
    it.effect(`agent.resume: the parent's Pii redacts it before ${depth} stores it (no Pii below)`, () =>
      Effect.gen(function*() {
        const checkpointer = yield* Checkpointer.makeMemory
        const payer = yield* payerOf(checkpointer)
        const child = depth === "a child" ? payer : yield* agentOf(checkpointer, delegating("payer", "g1"), [
          SubAgents.middleware({ agents: { payer: { description: "Pays", agent: payer } } })
        ])
        const parent = yield* agentOf(checkpointer, delegating("child", "c1"), [
          Pii.middleware({ types: ["credit_card"], strategy: "redact" }),
          SubAgents.middleware({ agents: { child: { description: "Pays, or has it paid", agent: child } } })
        ])
        const waiting = yield* parent.run("pay it", { threadId: "p" })
        assert.strictEqual(waiting._tag, "Interrupted")
        if (waiting._tag !== "Interrupted") return
        const decisions = SubAgents.decide(
          waiting.interrupt,
          (leaf) =>
            Option.getOrThrow(approvalOf(leaf.interrupt)).actionRequests.map((action) =>
              HumanInTheLoop.respond(action, typed)
            )
        )
        const checked = yield* parent.validateResume("p", decisions)
        assert.include(JSON.stringify(checked.encodedDecision), "use my card")
        assert.notInclude(JSON.stringify(checked.encodedDecision), card)
        const result = yield* parent.resume("p", decisions)
        assert.strictEqual(result._tag, "Completed")
        const [leaf] = SubAgents.leaves(waiting.interrupt)
        assert.strictEqual(leaf!.path.length, depth === "a child" ? 1 : 2)
        for (const threadId of ["p", ...leaf!.path.map((step) => step.threadId)]) {
          const stored = JSON.stringify(Option.getOrThrow(yield* checkpointer.load(threadId)))
          // the payer's thread holds the answer, redacted
          if (threadId === leaf!.path.at(-1)!.threadId) assert.include(stored, "use my card", threadId)
          assert.notInclude(stored, card, threadId)
          assert.notInclude(stored, card.replace(/ /g, ""), threadId)
        }
      }))
  }
})
