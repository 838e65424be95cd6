import type { Prompt } from "@effect/ai"
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import type { Duration } from "effect"
import { Effect, Fiber, FiberRef, Option, Ref, Schema, TestClock } from "effect"
import * as Budget from "../src/Budget.js"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as Allowance from "../src/internal/allowance.js"
import * as ModelCallLimit from "../src/ModelCallLimit.js"
import * as SubAgents from "../src/SubAgents.js"
import * as ToolCallLimit from "../src/ToolCallLimit.js"

/** The approval request a wait (as an untyped agent sees it) carries; `None` for another middleware's. */
const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

// ---------------------------------------------------------------------------
// fixtures
// ---------------------------------------------------------------------------

const Noop = Tool.make("noop", { parameters: { n: Schema.Number }, success: Schema.String })
const Tools = Toolkit.make(Noop)

const task = (agent: string, text: string, id: string) => ({ id, name: "task", params: { agent, task: text } })

const resultsOf = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.flatMap((message) => message.role === "tool" ? message.content : [])

interface Counters {
  /** Model calls made, over the parent and every child. */
  readonly modelCalls: Ref.Ref<number>
  /** `noop` calls that ran, over every child. */
  readonly toolRuns: Ref.Ref<number>
}

const counters = Effect.all({ modelCalls: Ref.make(0), toolRuns: Ref.make(0) })

/** A model answering each request with `reply(n)` (n: the requests it had so far), counting them. */
const counted = (count: Counters, reply: (n: number) => any) =>
  Effect.map(
    ScriptedModel.make(
      Array.from({ length: 40 }, (_, n) => () => Effect.as(Ref.update(count.modelCalls, (c) => c + 1), reply(n)))
    ),
    ({ model }) => model
  )

/** A child that calls `noop` on each of its first `calls` model calls, then answers. */
const busyChild = (count: Counters, calls: number, middleware: ReadonlyArray<Middleware.Any> = []) =>
  Effect.gen(function*() {
    const model = yield* counted(
      count,
      (n) => n < calls ? ScriptedModel.toolCalls([{ name: "noop", params: { n } }]) : ScriptedModel.text("child done")
    )
    return yield* Agent.make({ toolkit: Tools, middleware }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model),
      Effect.provide(
        Tools.toLayer({ noop: ({ n }) => Effect.as(Ref.update(count.toolRuns, (c) => c + 1), `ran ${n}`) })
      )
    )
  })

/** A parent whose first reply makes `calls`, then answers; its middleware is `middleware(subAgents)`. */
const parentAgent = (
  count: Counters,
  calls: ReadonlyArray<ReturnType<typeof task>>,
  middleware: (subAgents: Middleware.Any) => ReadonlyArray<Middleware.Any>,
  agents: Record<string, SubAgents.SubAgent>,
  options: Partial<SubAgents.Options<any>> = {},
  agentOptions: { readonly toolTimeout?: Duration.DurationInput } = {}
) =>
  Effect.gen(function*() {
    const model = yield* counted(
      count,
      (n) => n === 0 ? ScriptedModel.toolCalls(calls) : ScriptedModel.text("all done")
    )
    return yield* Agent.make({
      middleware: middleware(SubAgents.middleware({ agents, ...options })),
      ...agentOptions
    }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
  })

/** Runs `f` with the middleware in both orders: the limit before and after SubAgents. */
const bothOrders = <A, E, R>(
  f: (
    order: (limit: Middleware.Any) => (subAgents: Middleware.Any) => ReadonlyArray<Middleware.Any>
  ) => Effect.Effect<A, E, R>
) =>
  Effect.forEach([
    (limit: Middleware.Any) => (subAgents: Middleware.Any) => [limit, subAgents],
    (limit: Middleware.Any) => (subAgents: Middleware.Any) => [subAgents, limit]
  ], f)

// ---------------------------------------------------------------------------
// timeouts
// ---------------------------------------------------------------------------

describe("SubAgents timeout", () => {
  /** A child whose model never answers. */
  const silentChild = Effect.gen(function*() {
    const { model } = yield* ScriptedModel.make(Array.from({ length: 4 }, () => () => Effect.never))
    return yield* Agent.make({}).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
  })

  const runWithSilentChild = (
    advance: Duration.DurationInput,
    options: Partial<SubAgents.Options<any>>,
    agentOptions: { readonly toolTimeout?: Duration.DurationInput } = {}
  ) =>
    Effect.gen(function*() {
      const count = yield* counters
      const agent = yield* parentAgent(
        count,
        [task("silent", "wait", "c1")],
        (subAgents) => [subAgents],
        { silent: { description: "Never answers", agent: yield* silentChild } },
        options,
        agentOptions
      )
      const fiber = yield* Effect.fork(agent.run("go", { threadId: "t1" }))
      yield* TestClock.adjust(advance)
      return yield* Fiber.join(fiber)
    })

  it.effect("a child whose model never answers is stopped at the default timeout; the parent continues", () =>
    Effect.gen(function*() {
      const result = yield* runWithSilentChild("10 minutes", {})
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(result._tag === "Completed" ? result.text : "", "all done")
      const [answer] = resultsOf(result.state.messages)
      assert.isTrue(answer!.isFailure)
      assert.include(String(answer!.result), "SubAgentTimeout")
    }))

  it.effect("the timeout option sets how long a child may run", () =>
    Effect.gen(function*() {
      const result = yield* runWithSilentChild("30 seconds", { timeout: "30 seconds" })
      assert.strictEqual(result._tag, "Completed")
      assert.include(String(resultsOf(result.state.messages)[0]!.result), "30000 ms")
    }))

  it.effect("the agent's toolTimeout covers task calls", () =>
    Effect.gen(function*() {
      const result = yield* runWithSilentChild("20 seconds", {}, { toolTimeout: "20 seconds" })
      assert.strictEqual(result._tag, "Completed")
      assert.include(String(resultsOf(result.state.messages)[0]!.result), "20000 ms")
    }))

  it.effect("with onFailure: \"fail\" a timed-out child fails the parent with SubAgentFailed", () =>
    Effect.gen(function*() {
      const count = yield* counters
      const agent = yield* parentAgent(
        count,
        [task("silent", "wait", "c1")],
        (subAgents) => [subAgents],
        { silent: { description: "Never answers", agent: yield* silentChild } },
        { onFailure: "fail", timeout: "1 minute" }
      )
      const fiber = yield* Effect.fork(Effect.flip(agent.run("go", { threadId: "t1" })))
      yield* TestClock.adjust("1 minute")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "SubAgentFailed")
      if (error._tag === "SubAgentFailed") assert.instanceOf(error.error, SubAgents.SubAgentTimeout)
    }))

  it.effect("a timeout that is not a finite duration above zero fails Agent.make with InvalidOptions", () =>
    Effect.gen(function*() {
      const child = yield* silentChild
      for (const timeout of [0, -5, "forever", Infinity]) {
        const error = yield* Effect.flip(
          Agent.make({
            middleware: [
              SubAgents.middleware({ agents: { c: { description: "C", agent: child } }, timeout: timeout as any })
            ]
          }).pipe(Effect.provide(ScriptedModel.layer([])))
        )
        assert.strictEqual(error._tag, "InvalidOptions", String(timeout))
      }
    }))
})

// ---------------------------------------------------------------------------
// limits
// ---------------------------------------------------------------------------

describe("SubAgents and the parent's limits", () => {
  it.effect("ModelCallLimit runLimit 3: a child that wants 9 model calls stops at 3 in total, in either order", () =>
    bothOrders((order) =>
      Effect.gen(function*() {
        const count = yield* counters
        const limit = ModelCallLimit.middleware({ runLimit: 3 })
        const agent = yield* parentAgent(count, [task("busy", "work", "c1")], order(limit), {
          busy: { description: "Works hard", agent: yield* busyChild(count, 9) }
        })
        const result = yield* agent.run("go", { threadId: "t1" })
        assert.strictEqual(result._tag, "Completed")
        assert.strictEqual(yield* Ref.get(count.modelCalls), 3)
        const answer = resultsOf(result.state.messages).find((part) => part.name === "task")!
        assert.isTrue(answer.isFailure)
        assert.include(String(answer.result), "model call limit")
        assert.strictEqual((result.state as any).runModelCallCount, 3)
      })
    ))

  it.effect(
    "a task call approved by HumanInTheLoop (listed after SubAgents) runs its child within the parent's limit on resume",
    () =>
      bothOrders((order) =>
        Effect.gen(function*() {
          const count = yield* counters
          const limit = ModelCallLimit.middleware({ runLimit: 3 })
          // the `task` tool as SubAgents offers it, for the approval's checks
          const taskTool = Tool.make("task", { parameters: { agent: Schema.String, task: Schema.String } })
          const hitl = HumanInTheLoop.middleware({
            toolkit: Toolkit.make(taskTool),
            interruptOn: { task: true }
          })
          const agent = yield* parentAgent(
            count,
            [task("busy", "work", "c1")],
            (subAgents) => [...order(limit)(subAgents), hitl],
            { busy: { description: "Works hard", agent: yield* busyChild(count, 9) } }
          )
          const waiting = yield* agent.run("go", { threadId: "t1" })
          assert.strictEqual(waiting._tag, "Interrupted")
          const thread = Option.getOrThrow(yield* agent.thread("t1"))
          const request = Option.getOrThrow(Option.flatMap(thread.pending, approvalOf))
          // resumed later, from another fiber (another request): nothing the first run's fiber held carries over
          const result = yield* agent.resume(
            "t1",
            request.actionRequests.map((action) => HumanInTheLoop.approve(action))
          )
            .pipe(Allowance.ownBoard)
          assert.strictEqual(result._tag, "Completed")
          assert.strictEqual(yield* Ref.get(count.modelCalls), 3)
          const answer = resultsOf(result.state.messages).find((part) => part.name === "task")!
          assert.isTrue(answer.isFailure)
          assert.include(String(answer.result), "model call limit")
        })
      )
  )

  it.effect("ModelCallLimit with exitBehavior error: the parent fails once its children spent the limit", () =>
    bothOrders((order) =>
      Effect.gen(function*() {
        const count = yield* counters
        const limit = ModelCallLimit.middleware({ runLimit: 4, exitBehavior: "error" })
        const agent = yield* parentAgent(count, [task("busy", "work", "c1")], order(limit), {
          busy: { description: "Works hard", agent: yield* busyChild(count, 9) }
        })
        const error = yield* Effect.flip(agent.run("go", { threadId: "t1" }))
        assert.strictEqual(error._tag, "ModelCallLimitExceeded")
        assert.strictEqual(yield* Ref.get(count.modelCalls), 4)
      })
    ))

  it.effect("children of one reply share what the limit left", () =>
    bothOrders((order) =>
      Effect.gen(function*() {
        const count = yield* counters
        const limit = ModelCallLimit.middleware({ threadLimit: 6 })
        const agent = yield* parentAgent(
          count,
          [task("a", "x", "c1"), task("b", "y", "c2"), task("c", "z", "c3")],
          order(limit),
          {
            a: { description: "A", agent: yield* busyChild(count, 9) },
            b: { description: "B", agent: yield* busyChild(count, 9) },
            c: { description: "C", agent: yield* busyChild(count, 9) }
          }
        )
        yield* agent.run("go", { threadId: "t1" })
        assert.strictEqual(yield* Ref.get(count.modelCalls), 6)
      })
    ))

  it.effect("ToolCallLimit runLimit 2: of 5 task calls 2 children run, in either order", () =>
    bothOrders((order) =>
      Effect.gen(function*() {
        const count = yield* counters
        const limit = ToolCallLimit.middleware({ runLimit: 2 })
        const agents = Object.fromEntries(
          yield* Effect.forEach(["a", "b", "c", "d", "e"], (name) =>
            Effect.map(busyChild(count, 0), (agent) => [name, { description: name, agent }] as const))
        )
        const agent = yield* parentAgent(
          count,
          ["a", "b", "c", "d", "e"].map((name, i) =>
            task(name, "go", `c${i}`)
          ),
          order(limit),
          agents
        )
        const result = yield* agent.run("go", { threadId: "t1" })
        assert.strictEqual(result._tag, "Completed")
        // the parent's two calls, and one per child that ran
        assert.strictEqual(yield* Ref.get(count.modelCalls), 2 + 2)
        const results = resultsOf(result.state.messages)
        assert.deepStrictEqual(results.map((part) => part.isFailure), [false, false, true, true, true])
        // answered as ToolCallLimit answers a call over it, whichever hook saw it first
        assert.deepStrictEqual(results[4]!.result, {
          error: "Tool call limit reached. Do not make any more tool calls."
        })
      })
    ))

  it.effect("ToolCallLimit with exitBehavior end: no child of a reply over the limit runs; the run ends", () =>
    bothOrders((order) =>
      Effect.gen(function*() {
        const count = yield* counters
        const limit = ToolCallLimit.middleware({ runLimit: 1, exitBehavior: "end" })
        const agent = yield* parentAgent(count, [task("a", "x", "c1"), task("a", "y", "c2")], order(limit), {
          a: { description: "A", agent: yield* busyChild(count, 0) }
        })
        const result = yield* agent.run("go", { threadId: "t1" })
        assert.strictEqual(result._tag, "Completed")
        assert.strictEqual(yield* Ref.get(count.modelCalls), 1)
      })
    ))

  it.effect("a child's tool calls count against the parent's ToolCallLimit: over it they get failed results", () =>
    bothOrders((order) =>
      Effect.gen(function*() {
        const count = yield* counters
        const limit = ToolCallLimit.middleware({ runLimit: 3 })
        const agent = yield* parentAgent(count, [task("busy", "x", "c1")], order(limit), {
          busy: { description: "Works", agent: yield* busyChild(count, 5) }
        })
        const result = yield* agent.run("go", { threadId: "t1" })
        assert.strictEqual(result._tag, "Completed")
        // the task call is one of the 3
        assert.strictEqual(yield* Ref.get(count.toolRuns), 2)
        assert.strictEqual((result.state as any).runToolCallCount, 3)
      })
    ))

  it.effect("Budget: a child's tokens count against the parent's budget, in either order", () =>
    bothOrders((order) =>
      Effect.gen(function*() {
        const count = yield* counters
        // every scripted call reports 15 tokens: the parent's first call and two of the child's reach 45
        const budget = Budget.middleware({ tokens: { runLimit: 40 } })
        const agent = yield* parentAgent(count, [task("busy", "x", "c1")], order(budget), {
          busy: { description: "Works", agent: yield* busyChild(count, 9) }
        })
        const result = yield* agent.run("go", { threadId: "t1" })
        assert.strictEqual(result._tag, "Completed")
        assert.strictEqual(yield* Ref.get(count.modelCalls), 3)
        assert.strictEqual((result.state as any).budgetRunTokens, 45)
        assert.include(String(resultsOf(result.state.messages)[0]!.result), "budget")
      })
    ))

  it.effect("a grandchild counts against its grandparent's limit", () =>
    Effect.gen(function*() {
      const count = yield* counters
      const grandchild = yield* busyChild(count, 9)
      const middleModel = yield* counted(count, (n) =>
        n === 0 ? ScriptedModel.toolCalls([task("busy", "deeper", "g1")]) : ScriptedModel.text("middle done"))
      const middle = yield* Agent.make({
        middleware: [SubAgents.middleware({ agents: { busy: { description: "Works", agent: grandchild } } })]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, middleModel))
      const limit = ModelCallLimit.middleware({ runLimit: 5 })
      const agent = yield* parentAgent(count, [task("middle", "x", "c1")], (subAgents) => [limit, subAgents], {
        middle: { description: "Delegates", agent: middle }
      })
      const result = yield* agent.run("go", { threadId: "t1" })
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(yield* Ref.get(count.modelCalls), 5)
    }))

  it.effect("shareLimits: false leaves a child to its own limits", () =>
    Effect.gen(function*() {
      const count = yield* counters
      const limit = ModelCallLimit.middleware({ runLimit: 3 })
      const agent = yield* parentAgent(count, [task("busy", "work", "c1")], (subAgents) => [limit, subAgents], {
        busy: { description: "Works hard", agent: yield* busyChild(count, 9) }
      }, { shareLimits: false })
      const result = yield* agent.run("go", { threadId: "t1" })
      assert.strictEqual(result._tag, "Completed")
      // the parent's 2 calls and the child's 10
      assert.strictEqual(yield* Ref.get(count.modelCalls), 12)
    }))

  it.effect("a child's own limit still applies under a looser parent limit", () =>
    Effect.gen(function*() {
      const count = yield* counters
      const parentLimit = ModelCallLimit.middleware({ runLimit: 50 })
      const childLimit = ModelCallLimit.middleware({ runLimit: 2 })
      const agent = yield* parentAgent(count, [task("busy", "work", "c1")], (subAgents) => [parentLimit, subAgents], {
        busy: { description: "Works hard", agent: yield* busyChild(count, 9, [childLimit]) }
      })
      const result = yield* agent.run("go", { threadId: "t1" })
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(yield* Ref.get(count.modelCalls), 2 + 2)
      assert.strictEqual((result.state as any).runModelCallCount, 4)
    }))

  it.effect("a child that waits for an approval keeps spending the same allowance when the parent resumes", () =>
    Effect.gen(function*() {
      const count = yield* counters
      const hitl = HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { noop: true } })
      const child = yield* busyChild(count, 5, [hitl])
      const limit = ModelCallLimit.middleware({ runLimit: 4 })
      const agent = yield* parentAgent(count, [task("busy", "work", "c1")], (subAgents) => [limit, subAgents], {
        busy: { description: "Works", agent: child }
      })
      let result = yield* agent.run("go", { threadId: "t1" })
      // approve each call the child asks about, until the parent completes
      while (result._tag === "Interrupted") {
        result = yield* agent.resume(
          "t1",
          SubAgents.decide(
            result.interrupt,
            (leaf) => Option.getOrUndefined(Option.map(approvalOf(leaf.interrupt), HumanInTheLoop.approveAll))
          )
        )
      }
      assert.strictEqual(result._tag, "Completed")
      assert.strictEqual(yield* Ref.get(count.modelCalls), 4)
      assert.strictEqual((result.state as any).runModelCallCount, 4)
    }))

  it.effect("a run that ended leaves no allowance behind: a later run on the fiber is not limited by it", () =>
    Effect.gen(function*() {
      const count = yield* counters
      const limit = ModelCallLimit.middleware({ runLimit: 3 })
      const limited = yield* parentAgent(count, [task("busy", "work", "c1")], (subAgents) => [limit, subAgents], {
        busy: { description: "Works hard", agent: yield* busyChild(count, 9) }
      })
      yield* limited.run("go", { threadId: "t1" })
      assert.strictEqual((yield* FiberRef.get(Allowance.CurrentBoard)).size, 0)
      // the same thread id, on an agent without limits, in the same fiber
      const free = yield* counters
      const unlimited = yield* parentAgent(free, [task("busy", "work", "c1")], (subAgents) => [subAgents], {
        busy: { description: "Works hard", agent: yield* busyChild(free, 9) }
      })
      yield* unlimited.run("go", { threadId: "t1" })
      assert.strictEqual(yield* Ref.get(free.modelCalls), 12)
    }))
})
