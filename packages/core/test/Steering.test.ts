import { Prompt, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError, AgentEvent, Checkpointer, Middleware, RunJournal } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Deferred, Effect, Exit, Fiber, Option, Schema, Stream } from "effect"

/** `wait(id)`: answers once the test opens the gate of `id` (a tool call the test holds open). */
const Wait = Tool.make("wait", { parameters: { id: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Wait)

/** Gates the test opens: a tool call waits on its gate, and says it started. */
class Gates {
  readonly started = new Map<string, Deferred.Deferred<void>>()
  readonly open = new Map<string, Deferred.Deferred<void>>()
  private gate(map: Map<string, Deferred.Deferred<void>>, id: string) {
    let gate = map.get(id)
    if (gate === undefined) {
      gate = Deferred.unsafeMake<void>(undefined as never)
      map.set(id, gate)
    }
    return gate
  }
  whenStarted(id: string) {
    return Deferred.await(this.gate(this.started, id))
  }
  release(id: string) {
    return Deferred.succeed(this.gate(this.open, id), undefined)
  }
  layer() {
    return Tools.toLayer({
      wait: ({ id }) =>
        Effect.zipRight(
          Deferred.succeed(this.gate(this.started, id), undefined),
          Effect.as(Deferred.await(this.gate(this.open, id)), `waited ${id}`)
        )
    })
  }
}

const textOf = (message: Prompt.Message): string =>
  typeof message.content === "string"
    ? message.content
    : message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")

const userTexts = (messages: ReadonlyArray<Prompt.Message>) =>
  messages.filter((message) => message.role === "user").map(textOf)

/** Every tool call is followed at once by the tool message answering it: nothing sits between. */
const wellPaired = (messages: ReadonlyArray<Prompt.Message>): boolean =>
  messages.every((message, i) => {
    if (message.role !== "assistant") return true
    const calls = message.content.filter((part) => part.type === "tool-call").map((part) => part.id)
    if (calls.length === 0) return true
    const next = messages[i + 1]
    if (next === undefined || next.role !== "tool") return false
    const answered = new Set(next.content.map((part) => part.id))
    return calls.every((id) => answered.has(id))
  })

/** The model: after a user message it calls `wait` with the message's text, after a tool result it answers. */
const promptDriven: ScriptedModel.Turn = (request) => {
  const messages = request.prompt.content
  const last = messages[messages.length - 1]!
  return last.role === "tool"
    ? ScriptedModel.text(`done after ${messages.length} messages`)
    : ScriptedModel.toolCalls([{ name: "wait", params: { id: textOf(last) } }])
}

const modelOf = (turns: number) => ScriptedModel.layer(Array.from({ length: turns }, () => promptDriven))

describe("Agent.send: steering", () => {
  it.scoped("a steer message joins the running run before its next model call, after the tool results", () =>
    Effect.gen(function*() {
      const gates = new Gates()
      const agent = yield* Agent.make({ toolkit: Tools }).pipe(Effect.provide(gates.layer()))
      const events = yield* agent.stream("first", { threadId: "t" }).pipe(Stream.runCollect, Effect.fork)
      yield* gates.whenStarted("first")
      const sent = yield* agent.send("t", "also this")
      assert.strictEqual(sent.delivery, "steered")
      assert.strictEqual(sent.mode, "steer")
      yield* gates.release("first")
      yield* gates.whenStarted("also this")
      yield* gates.release("also this")
      const collected = Chunk.toReadonlyArray(yield* Fiber.join(events))
      const result = yield* sent.result
      assert.strictEqual(result._tag, "Completed")
      const messages = result.state.messages
      // user, assistant(call), tool, user (steered), assistant(call), tool, assistant
      assert.deepStrictEqual(messages.map((m) => m.role), [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "assistant"
      ])
      assert.deepStrictEqual(userTexts(messages), ["first", "also this"])
      const received = collected.filter(AgentEvent.$is("MessageReceived"))
      assert.strictEqual(received.length, 1)
      assert.strictEqual(received[0]!.mode, "steer")
      assert.strictEqual(received[0]!.step, 1)
      assert.deepStrictEqual(received[0]!.messages.map(textOf), ["also this"])
      // it is reported before the model call that sees it
      const tags = collected.map((event) => event._tag)
      assert.isTrue(tags.indexOf("MessageReceived") < tags.lastIndexOf("ModelCallStarted"))
    }).pipe(Effect.provide(modelOf(4))))

  it.scoped("several steer messages join together, in send order, and beforeModel hooks see them", () =>
    Effect.gen(function*() {
      const gates = new Gates()
      const seen: Array<Array<string>> = []
      const spy = Middleware.make({
        name: "spy",
        beforeModel: ({ messages }) => Effect.sync(() => void seen.push(userTexts(messages)))
      })
      const shout = Middleware.make({
        name: "shout",
        transformInput: ({ messages }) =>
          Effect.succeed(
            messages.map((m) =>
              m.role === "user"
                ? Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: textOf(m).toUpperCase() })] })
                : m
            )
          )
      })
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [spy, shout] }).pipe(Effect.provide(gates.layer()))
      const run = yield* Effect.fork(agent.run("a", { threadId: "t" }))
      yield* gates.whenStarted("A")
      yield* agent.send("t", "b")
      yield* agent.send("t", "c")
      yield* gates.release("A")
      yield* gates.whenStarted("C")
      yield* gates.release("C")
      const result = yield* Fiber.join(run)
      // transformInput ran on the steered messages too, and the beforeModel hook saw them
      assert.deepStrictEqual(userTexts(result.state.messages), ["A", "B", "C"])
      assert.deepStrictEqual(seen, [["A"], ["A", "B", "C"], ["A", "B", "C"]])
    }).pipe(Effect.provide(modelOf(4))))

  it.scoped("a steer message whose run ends before its next model call starts the next run", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const called = yield* Deferred.make<void>()
      const model = ScriptedModel.layer([
        // the run's only model call: the test sends while it is answering, then it ends the run
        () =>
          Effect.zipRight(
            Deferred.succeed(called, undefined),
            Effect.as(Deferred.await(gate), ScriptedModel.text("hi"))
          ),
        ScriptedModel.text("follow-up answered")
      ])
      const program = Effect.gen(function*() {
        const agent = yield* Agent.make({})
        const run = yield* Effect.fork(agent.run("hello", { threadId: "t" }))
        yield* Deferred.await(called)
        const sent = yield* agent.send("t", "one more thing")
        assert.strictEqual(sent.delivery, "steered")
        yield* Deferred.succeed(gate, undefined)
        const first = yield* Fiber.join(run)
        assert.deepStrictEqual(userTexts(first.state.messages), ["hello"])
        const next = yield* sent.result
        assert.strictEqual(next._tag, "Completed")
        assert.deepStrictEqual(userTexts(next.state.messages), ["hello", "one more thing"])
        assert.strictEqual(next._tag === "Completed" ? next.text : "", "follow-up answered")
      })
      yield* program.pipe(Effect.provide(model))
    }))

  it.scoped("queued messages run after the running run, one run each, in send order", () =>
    Effect.gen(function*() {
      const gates = new Gates()
      const agent = yield* Agent.make({ toolkit: Tools }).pipe(Effect.provide(gates.layer()))
      const run = yield* Effect.fork(agent.run("first", { threadId: "t" }))
      yield* gates.whenStarted("first")
      const q1 = yield* agent.send("t", "second", { mode: "queue" })
      const q2 = yield* agent.send("t", "third", { mode: "queue" })
      assert.deepStrictEqual([q1.delivery, q2.delivery], ["queued", "queued"])
      yield* gates.release("first")
      const first = yield* Fiber.join(run)
      assert.deepStrictEqual(userTexts(first.state.messages), ["first"])
      yield* gates.release("second")
      yield* gates.release("third")
      const second = yield* q1.result
      const third = yield* q2.result
      assert.deepStrictEqual(userTexts(second.state.messages), ["first", "second"])
      assert.deepStrictEqual(userTexts(third.state.messages), ["first", "second", "third"])
      assert.isTrue(wellPaired(third.state.messages))
    }).pipe(Effect.provide(modelOf(6))))

  it.scoped("a message to an idle thread starts a run, in either mode, reported to watch", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({})
      const events = yield* agent.watch
      const collecting = yield* events.pipe(
        Stream.takeUntil((e) => e.event._tag === "RunEnded"),
        Stream.runCollect,
        Effect.fork
      )
      const sent = yield* agent.send("idle", "hello", { mode: "queue" })
      assert.strictEqual(sent.delivery, "started")
      const result = yield* sent.result
      assert.deepStrictEqual(userTexts(result.state.messages), ["hello"])
      const tags = Chunk.toReadonlyArray(yield* Fiber.join(collecting)).map((e) => e.event._tag)
      assert.deepStrictEqual(tags.slice(0, 2), ["RunStarted", "MessageReceived"])
      const steered = yield* agent.send("idle", "again")
      assert.strictEqual(steered.delivery, "started")
      assert.deepStrictEqual(userTexts((yield* steered.result).state.messages), ["hello", "again"])
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("one"), ScriptedModel.text("two")]))))

  it.scoped("a run send started that fails: its result fails, watch reports RunFailed", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({})
      const events = yield* agent.watch
      const collecting = yield* events.pipe(
        Stream.takeUntil((e) => e.event._tag === "RunFailed"),
        Stream.runCollect,
        Effect.fork
      )
      const sent = yield* agent.send("t", "hello")
      const exit = yield* Effect.exit(sent.result)
      assert.isTrue(Exit.isFailure(exit))
      const failed = Chunk.toReadonlyArray(yield* Fiber.join(collecting)).map((e) => e.event).filter(
        AgentEvent.$is("RunFailed")
      )
      assert.strictEqual(failed.length, 1)
      assert.strictEqual(failed[0]!.error, "UnknownError")
    }).pipe(Effect.provide(ScriptedModel.layer([]))))

  it.scoped("a thread waiting for a decision holds messages for the resumed run", () =>
    Effect.gen(function*() {
      // waits for a decision after the run's first model call
      const ask = Middleware.make({
        name: "ask",
        wait: { request: Schema.String, decision: Schema.String },
        afterModel: ({ resume, step }) =>
          Option.isNone(resume) && step === 1 ? Effect.succeed({ interrupt: "approve?" }) : Effect.void
      })
      const gates = new Gates()
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [ask] }).pipe(Effect.provide(gates.layer()))
      const first = yield* agent.run("first", { threadId: "t" })
      assert.strictEqual(first._tag, "Interrupted")
      const steer = yield* agent.send("t", "steer me")
      const queued = yield* agent.send("t", "later", { mode: "queue" })
      assert.deepStrictEqual([steer.delivery, queued.delivery], ["held", "held"])
      // nothing ran: the thread still waits, unchanged
      const waiting = Option.getOrThrow(yield* agent.thread("t"))
      assert.isTrue(Option.isSome(waiting.pending))
      assert.deepStrictEqual(userTexts(waiting.state.messages), ["first"])
      yield* gates.release("first")
      yield* gates.release("steer me")
      yield* gates.release("later")
      const resumed = yield* agent.resume("t", "yes")
      // the held steer message joined the resumed run after the tool result, before its next model call
      assert.strictEqual(resumed._tag, "Completed")
      assert.deepStrictEqual(userTexts(resumed.state.messages), ["first", "steer me"])
      assert.isTrue(wellPaired(resumed.state.messages))
      assert.strictEqual(yield* steer.result, resumed)
      // the queued one ran after it
      const after = yield* queued.result
      assert.deepStrictEqual(userTexts(after.state.messages), ["first", "steer me", "later"])
    }).pipe(Effect.provide(modelOf(6))))
})

describe("Agent.send: a waiting thread given up or deleted", () => {
  /** Waits for a decision after the thread's first model call. */
  const ask = Middleware.make({
    name: "ask",
    wait: { request: Schema.String, decision: Schema.String },
    afterModel: ({ messages, resume }) =>
      Option.isNone(resume) && messages.length === 2 ? Effect.succeed({ interrupt: "approve?" }) : Effect.void
  })

  it.scoped("discardPending frees the thread: the held messages start their run", () =>
    Effect.gen(function*() {
      const gates = new Gates()
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [ask] }).pipe(Effect.provide(gates.layer()))
      assert.strictEqual((yield* agent.run("first", { threadId: "t" }))._tag, "Interrupted")
      const held = yield* agent.send("t", "never mind that")
      assert.strictEqual(held.delivery, "held")
      yield* gates.release("never mind that")
      assert.isTrue(yield* agent.discardPending("t", "the user changed their mind"))
      const result = yield* held.result
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(userTexts(result.state.messages), ["first", "never mind that"])
      assert.isTrue(wellPaired(result.state.messages))
    }).pipe(Effect.provide(modelOf(4))))

  it.scoped("deleteThread drops the held messages: each sender's result fails with ThreadStateError", () =>
    Effect.gen(function*() {
      const gates = new Gates()
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [ask] }).pipe(Effect.provide(gates.layer()))
      assert.strictEqual((yield* agent.run("first", { threadId: "t" }))._tag, "Interrupted")
      const held = yield* agent.send("t", "later", { mode: "queue" })
      yield* agent.deleteThread("t")
      const error = yield* Effect.flip(held.result)
      assert.strictEqual(error._tag, "ThreadStateError")
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
    }).pipe(Effect.provide(modelOf(2))))
})

describe("Agent.send: bad input", () => {
  it.scoped("an empty thread id, an unknown mode or an empty message is refused and nothing runs", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make({})
      const badId = yield* Effect.flip(agent.send("", "hi"))
      assert.strictEqual(badId._tag, "InvalidInput")
      const badMode = yield* Effect.flip(agent.send("t", "hi", { mode: "interrupt" as any }))
      assert.strictEqual(badMode._tag, "InvalidOptions")
      assert.include(badMode.message, "\"interrupt\"")
      const empty = yield* Effect.flip(agent.send("t", []))
      assert.strictEqual(empty._tag, "InvalidInput")
      const notAPrompt = yield* Effect.flip(agent.send("t", 42 as any))
      assert.strictEqual(notAPrompt._tag, "InvalidInput")
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(Effect.provide(ScriptedModel.layer([]))))
})

/** A store whose `load` fails on the calls `failing` names (1 = the first), otherwise the in-memory one. */
const flakyStore = (failing: ReadonlyArray<number>) =>
  Effect.map(Checkpointer.makeMemory, (memory) => {
    let loads = 0
    return Checkpointer.Checkpointer.of({
      ...memory,
      load: (threadId) =>
        failing.includes(++loads)
          ? Effect.fail(new AgentError.CheckpointError({ threadId, operation: "load", reason: "store down" }))
          : memory.load(threadId)
    })
  })

describe("Agent.send: failures before a run takes the message in", () => {
  it.scoped("a send that fails delivers nothing: its retry joins the thread once", () =>
    Effect.gen(function*() {
      const store = yield* flakyStore([1])
      const agent = yield* Agent.make({}).pipe(Effect.provideService(Checkpointer.Checkpointer, store))
      const failed = yield* Effect.flip(agent.send("t", "hello"))
      assert.strictEqual(failed._tag, "CheckpointError")
      const retried = yield* agent.send("t", "hello")
      assert.strictEqual(retried.delivery, "started")
      yield* retried.result
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      assert.deepStrictEqual(userTexts(thread.state.messages), ["hello"])
      assert.strictEqual((yield* ScriptedModel.requests).length, 1)
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("hi"), ScriptedModel.text("hi again")]))))

  it.scoped("a run send started that cannot load its thread fails the message's result with that error", () =>
    Effect.gen(function*() {
      // the send's own load succeeds, the started run's load fails
      const store = yield* flakyStore([2])
      const agent = yield* Agent.make({}).pipe(Effect.provideService(Checkpointer.Checkpointer, store))
      const sent = yield* agent.send("t", "hello")
      assert.strictEqual(sent.delivery, "started")
      const error = yield* Effect.flip(sent.result)
      assert.strictEqual(error._tag, "CheckpointError")
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
      // nothing is left waiting: the next send runs on its own
      const again = yield* agent.send("t", "again")
      assert.strictEqual(again.delivery, "started")
      yield* again.result
      assert.deepStrictEqual(userTexts(Option.getOrThrow(yield* agent.thread("t")).state.messages), ["again"])
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("hi")]))))

  it.effect("an agent whose scope is closed fails send with AgentClosed, delivering nothing", () =>
    Effect.gen(function*() {
      const agent = yield* Effect.scoped(Agent.make({}))
      const error = yield* Effect.flip(agent.send("t", "hello"))
      assert.strictEqual(error._tag, "AgentClosed")
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
      assert.strictEqual((yield* ScriptedModel.requests).length, 0)
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.text("hi")]))))
})

/**
 * A journal like a durable one: records each step's result by name the first time and replays it after,
 * without running it (checkpoints are always saved).
 */
const recording = (recorded: Map<string, unknown>) =>
  RunJournal.RunJournal.of({
    durable: true,
    step: (key, effect) => {
      const name = RunJournal.stepName(key)
      if (RunJournal.innermost(key)._tag === "Checkpoint") return effect
      return recorded.has(name)
        ? Effect.succeed(recorded.get(name) as any)
        : Effect.tap(effect, (value) => Effect.sync(() => void recorded.set(name, value)))
    },
    await: () => Effect.succeedNone
  })

describe("Agent.send: a steer message taken in is saved at once", () => {
  it.scoped("a model call that fails after the look: the stored thread holds the message", () =>
    Effect.gen(function*() {
      const gates = new Gates()
      const agent = yield* Agent.make({ toolkit: Tools }).pipe(Effect.provide(gates.layer()))
      const run = yield* Effect.fork(Effect.exit(agent.run("first", { threadId: "t" })))
      yield* gates.whenStarted("first")
      const sent = yield* agent.send("t", "also this")
      assert.strictEqual(sent.delivery, "steered")
      yield* gates.release("first")
      assert.isTrue(Exit.isFailure(yield* Fiber.join(run)))
      // the run that took the message in failed, and the sender learns it
      assert.isTrue(Exit.isFailure(yield* Effect.exit(sent.result)))
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      assert.deepStrictEqual(userTexts(thread.state.messages), ["first", "also this"])
      assert.deepStrictEqual(thread.state.messages.map((m) => m.role), ["user", "assistant", "tool", "user"])
    }).pipe(Effect.provide(ScriptedModel.layer([promptDriven, ScriptedModel.httpError(400)]))))

  it.scoped("only a look that took something in saves, at the same point on replay", () =>
    Effect.gen(function*() {
      /** The names of the steps a run takes through a recording journal, in order. */
      const stepsOf = (recorded: Map<string, unknown>, taken: Array<string>) =>
        RunJournal.RunJournal.of({
          ...recording(recorded),
          step: (key, effect) => {
            taken.push(RunJournal.stepName(key))
            return recording(recorded).step(key, effect)
          }
        })
      const gates = new Gates()
      yield* gates.release("also this")
      const agent = yield* Agent.make({ toolkit: Tools }).pipe(Effect.provide(gates.layer()))

      // nobody sends: every look takes nothing in and saves nothing
      yield* gates.release("alone")
      const quiet: Array<string> = []
      yield* agent.run("alone", { threadId: "quiet" }).pipe(
        Effect.provideService(RunJournal.RunJournal, stepsOf(new Map(), quiet))
      )
      assert.deepStrictEqual(quiet.filter((name) => !name.startsWith("tool/")), [
        "load",
        "inbox/0",
        "model/0",
        "checkpoint/0",
        "inbox/1",
        "model/1",
        "checkpoint/1"
      ])

      const recorded = new Map<string, unknown>()
      const first: Array<string> = []
      const running = yield* agent.run("first", { threadId: "sent" }).pipe(
        Effect.provideService(RunJournal.RunJournal, stepsOf(recorded, first)),
        Effect.fork
      )
      yield* gates.whenStarted("first")
      yield* agent.send("sent", "also this")
      yield* gates.release("first")
      yield* Fiber.join(running)
      const checkpoints = (names: ReadonlyArray<string>) =>
        names.filter((name) => name.startsWith("checkpoint/") || name.startsWith("inbox/"))
      // the look that took the message in saves at once, before the model call that sees it
      assert.deepStrictEqual(checkpoints(first), [
        "inbox/0",
        "checkpoint/0",
        "inbox/1",
        "checkpoint/1",
        "checkpoint/2",
        "inbox/2",
        "checkpoint/3"
      ])
      // a replay (nobody sends now) takes the same look in from the journal and saves at the same point
      const replayed: Array<string> = []
      yield* agent.run("first", { threadId: "sent" }).pipe(
        Effect.provideService(RunJournal.RunJournal, stepsOf(recorded, replayed))
      )
      assert.deepStrictEqual(checkpoints(replayed), checkpoints(first))
    }).pipe(Effect.provide(modelOf(5))))
})

describe("Agent.send: a subagent's run in a durable parent", () => {
  it.scoped("takes a steer message in at a journaled look, which its replay takes in again", () =>
    Effect.gen(function*() {
      const recorded = new Map<string, unknown>()
      // the subagent's run, nested in a recording parent, as SubAgents runs it
      const journal = RunJournal.nested(recording(recorded), "task/c1/1")
      const threadId = "parent/task/c1/1"
      const gates = new Gates()
      yield* gates.release("also this")
      const agent = yield* Agent.make({ toolkit: Tools }).pipe(Effect.provide(gates.layer()))
      const first = yield* agent.run("first", { threadId }).pipe(
        Effect.provideService(RunJournal.RunJournal, journal),
        Effect.fork
      )
      yield* gates.whenStarted("first")
      const sent = yield* agent.send(threadId, "also this")
      assert.strictEqual(sent.delivery, "steered")
      yield* gates.release("first")
      yield* Fiber.join(first)

      // the replay (nobody sends now) runs nothing and stores the thread the first execution answered
      const replaying = yield* Agent.make({ toolkit: Tools }).pipe(
        Effect.provide(Tools.toLayer({ wait: () => Effect.die("a replay runs no tool") })),
        Effect.provide(ScriptedModel.layer([]))
      )
      const replayed = yield* replaying.run("first", { threadId }).pipe(
        Effect.provideService(RunJournal.RunJournal, journal)
      )
      assert.strictEqual(replayed._tag, "Completed")
      assert.deepStrictEqual(userTexts(replayed.state.messages), ["first", "also this"])
    }).pipe(Effect.provide(modelOf(3))))
})

/** One action of the property: a send of some mode, or a run, after some yields. */
const Action = Schema.Struct({
  kind: Schema.Literal("steer", "queue", "run"),
  yields: Schema.Int.pipe(Schema.between(0, 6))
})

describe("Agent.send: any interleaving", () => {
  it.effect.prop(
    "every message joins the thread exactly once, each mode in send order, and no message splits a call from its result",
    { actions: Schema.Array(Action).pipe(Schema.minItems(1), Schema.maxItems(10)) },
    ({ actions }) =>
      Effect.gen(function*() {
        // the tool answers at once after yielding, so runs, sends and tool calls interleave
        const ToolsLive = Tools.toLayer({ wait: ({ id }) => Effect.as(Effect.repeatN(Effect.yieldNow(), 2), id) })
        const agent = yield* Agent.make({ toolkit: Tools, maxSteps: 100 }).pipe(Effect.provide(ToolsLive))
        const waits: Array<Effect.Effect<unknown, unknown>> = []
        const sentByMode = { steer: [] as Array<string>, queue: [] as Array<string> }
        const runs: Array<string> = []
        for (const [i, action] of actions.entries()) {
          yield* Effect.repeatN(Effect.yieldNow(), action.yields)
          const text = `${action.kind} ${i}`
          if (action.kind === "run") {
            runs.push(text)
            waits.push(Fiber.join(yield* Effect.fork(agent.run(text, { threadId: "t" }))))
          } else {
            sentByMode[action.kind].push(text)
            const sent = yield* agent.send("t", text, { mode: action.kind })
            waits.push(sent.result)
          }
        }
        yield* Effect.all(waits, { discard: true })
        const thread = Option.getOrThrow(yield* agent.thread("t"))
        const texts = userTexts(thread.state.messages)
        const all = [...runs, ...sentByMode.steer, ...sentByMode.queue]
        assert.deepStrictEqual([...texts].sort(), [...all].sort())
        for (const mode of ["steer", "queue"] as const) {
          assert.deepStrictEqual(texts.filter((t) => t.startsWith(mode)), sentByMode[mode])
        }
        assert.isTrue(wellPaired(thread.state.messages))
      }).pipe(Effect.provide(ScriptedModel.layer(Array.from({ length: 200 }, () => promptDriven)))),
    { fastCheck: { numRuns: 60 } }
  )
})
