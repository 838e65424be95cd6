import type { Prompt } from "@effect/ai"
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it, layer } from "@effect/vitest"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Chunk, Context, Deferred, Effect, Fiber, Option, Ref, Schema, Stream } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as Summarization from "../src/Summarization.js"
import * as TodoList from "../src/TodoList.js"

/** The approval request a wait (as an untyped agent sees it) carries; `None` for another middleware's. */
const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

/** The decisions `decide` builds from the action the thread waits on (each test's wait asks about one call). */
const bound = (
  agent: Agent.AgentOf<any>,
  threadId: string,
  decide: (action: HumanInTheLoop.ActionRequest) => ReadonlyArray<HumanInTheLoop.Decision>
) =>
  Effect.map(agent.thread(threadId), (thread) => {
    const pending = Option.getOrThrow(Option.getOrThrow(thread).pending)
    return decide(Option.getOrThrow(approvalOf(pending)).actionRequests[0]!)
  })

// ---------------------------------------------------------------------------
// fixtures
// ---------------------------------------------------------------------------

const Deploy = Tool.make("deploy", {
  description: "Deploys the app",
  parameters: { env: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(Deploy)
const toolsLive = (log: Ref.Ref<ReadonlyArray<string>>) =>
  Tools.toLayer({
    deploy: ({ env }) => Effect.as(Ref.update(log, (all) => [...all, `deploy ${env}`]), `deployed to ${env}`)
  })

const todo = (content: string, status: TodoList.TodoStatus): TodoList.Todo => ({ content, status })

const plan1 = [todo("Write the code", "in_progress"), todo("Test it", "pending"), todo("Deploy", "pending")]
const plan2 = [todo("Write the code", "completed"), todo("Test it", "completed"), todo("Deploy", "in_progress")]

const write = (todos: ReadonlyArray<unknown>, id: string) =>
  ScriptedModel.toolCalls([{ name: "write_todos", params: { todos }, id }])

/** An agent with the deploy tool and the middleware, on a scripted model and the given TodoList service. */
const setup = (
  script: ReadonlyArray<ScriptedModel.Turn>,
  options?: {
    readonly todoList?: TodoList.Options | undefined
    readonly systemPrompt?: string | undefined
  }
) =>
  Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const model = yield* ScriptedModel.make(script)
    const agent = yield* Agent.make({
      toolkit: Tools,
      systemPrompt: options?.systemPrompt,
      middleware: [TodoList.middleware(options?.todoList)]
    }).pipe(
      Effect.provide(toolsLive(log)),
      Effect.provideService(LanguageModel.LanguageModel, model.model)
    )
    return { agent, log: Ref.get(log), requests: model.recorder.requests }
  })

const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

const parallelCallsError = "Error: The `write_todos` tool should never be called multiple times in parallel. " +
  "Please call it only once per model invocation to update the todo list."

const systemOf = (prompt: Prompt.Prompt): string | undefined => {
  const first = prompt.content[0]
  return first?.role === "system" ? first.content : undefined
}

// ---------------------------------------------------------------------------
// the service
// ---------------------------------------------------------------------------

layer(TodoList.layer)("TodoList service", (it) => {
  it.effect("keeps one list per thread", () =>
    Effect.gen(function*() {
      const todoList = yield* TodoList.TodoList
      yield* todoList.write("a", plan1)
      yield* todoList.write("b", plan2)
      assert.deepStrictEqual(yield* todoList.todos("a"), plan1)
      assert.deepStrictEqual(yield* todoList.todos("b"), plan2)
      assert.deepStrictEqual(yield* todoList.todos("none"), [])
    }))

  it.effect("changes gives the list now, then each distinct change of that thread only", () =>
    Effect.gen(function*() {
      const todoList = yield* TodoList.TodoList
      const started = yield* Deferred.make<void>()
      const fiber = yield* todoList.changes("watched").pipe(
        Stream.tap(() => Deferred.succeed(started, undefined)),
        Stream.take(3),
        Stream.runCollect,
        Effect.fork
      )
      yield* Deferred.await(started)
      yield* todoList.write("watched", plan1)
      yield* todoList.write("watched", plan1) // the same list again: no change
      yield* todoList.write("other", plan2) // another thread: no change
      yield* todoList.write("watched", plan2)
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* Fiber.join(fiber)), [[], plan1, plan2])
    }))

  it.effect("a write with thousands of threads stored leaves every other thread's list as it was (same objects)", () =>
    Effect.gen(function*() {
      const todoList = yield* TodoList.TodoList
      const ids = Array.from({ length: 5000 }, (_, i) => `many-${i}`)
      for (const id of ids) yield* todoList.write(id, [todo(id, "pending")])
      const before = yield* Effect.forEach(ids, (id) => todoList.todos(id))
      yield* todoList.write("many-new", plan1)
      yield* todoList.write(ids[7]!, plan2)
      const after = yield* Effect.forEach(ids, (id) => todoList.todos(id))
      assert.isTrue(after.every((list, i) => i === 7 || list === before[i]))
      assert.strictEqual(after[7], plan2)
      assert.strictEqual(yield* todoList.todos("many-new"), plan1)
    }))

  it.effect("remove forgets the thread's list; its watchers see it empty, other threads keep theirs", () =>
    Effect.gen(function*() {
      const todoList = yield* TodoList.TodoList
      yield* todoList.write("gone", plan1)
      yield* todoList.write("kept", plan2)
      const started = yield* Deferred.make<void>()
      const fiber = yield* todoList.changes("gone").pipe(
        Stream.tap(() => Deferred.succeed(started, undefined)),
        Stream.take(3),
        Stream.runCollect,
        Effect.fork
      )
      yield* Deferred.await(started)
      yield* todoList.remove("gone")
      assert.deepStrictEqual(yield* todoList.todos("gone"), [])
      assert.deepStrictEqual(yield* todoList.todos("kept"), plan2)
      // the same watcher still follows the thread when it is written again
      yield* todoList.write("gone", plan2)
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* Fiber.join(fiber)), [plan1, [], plan2])
    }))
})

// ---------------------------------------------------------------------------
// the middleware
// ---------------------------------------------------------------------------

describe("TodoList middleware", () => {
  it.effect("a list written in step 1 and updated in step 2 ends as written, in the state and the service", () =>
    Effect.gen(function*() {
      const todoList = yield* TodoList.TodoList
      const started = yield* Deferred.make<void>()
      const watcher = yield* todoList.changes("t").pipe(
        Stream.tap(() => Deferred.succeed(started, undefined)),
        Stream.take(3),
        Stream.runCollect,
        Effect.fork
      )
      yield* Deferred.await(started)
      const { agent, requests } = yield* setup([write(plan1, "w1"), write(plan2, "w2"), ScriptedModel.text("done")])
      const result = yield* agent.run("ship the feature", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(result.state.todos, plan2)
      assert.deepStrictEqual(yield* todoList.todos("t"), plan2)
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* Fiber.join(watcher)), [[], plan1, plan2])
      // the tool echoes the list back to the model
      const results = toolResults(result.state.messages)
      assert.deepStrictEqual(results.map((part) => [part.id, part.isFailure, part.result]), [
        ["w1", false, { message: "Updated the todo list (3 items).", todos: plan1 }],
        ["w2", false, { message: "Updated the todo list (3 items).", todos: plan2 }]
      ])
      // every model call was offered write_todos
      assert.deepStrictEqual((yield* requests).map((request) => request.toolNames.includes("write_todos")), [
        true,
        true,
        true
      ])
      // the slice is checkpointed
      const thread = Option.getOrThrow(yield* agent.thread("t"))
      assert.deepStrictEqual(thread.state.todos, plan2)
    }).pipe(Effect.provide(TodoList.layer)))

  it.effect("the service shows only lists the agent adopted: a write an outer wrapToolCall fails never shows", () =>
    Effect.gen(function*() {
      const todoList = yield* TodoList.TodoList
      const started = yield* Deferred.make<void>()
      const watcher = yield* todoList.changes("t").pipe(
        Stream.tap(() => Deferred.succeed(started, undefined)),
        Stream.takeUntil((todos) => TodoList.equivalence(todos, plan2)),
        Stream.runCollect,
        Effect.fork
      )
      yield* Deferred.await(started)
      // listed first, so it wraps TodoList: it turns the successful write into a failed result
      const refuse = Middleware.make({
        name: "refuseWrites",
        wrapToolCall: (request, next) =>
          Effect.map(next(request), (result) =>
            result.name === TodoList.toolName
              ? Middleware.toolResult(request.call, "refused", { isFailure: true })
              : result)
      })
      const model = yield* ScriptedModel.make([write(plan1, "w1"), ScriptedModel.text("done")])
      const agent = yield* Agent.make({ middleware: [refuse, TodoList.middleware()] }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model.model)
      )
      const result = yield* agent.run("plan it", { threadId: "t" })
      assert.deepStrictEqual(result.state.todos, [])
      assert.deepStrictEqual(yield* todoList.todos("t"), [])
      yield* todoList.write("t", plan2) // ends the watcher
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* Fiber.join(watcher)), [[], plan2])
    }).pipe(Effect.provide(TodoList.layer)))

  it.effect("invalid write_todos input is a failed tool result the model repairs; the list does not change", () =>
    Effect.gen(function*() {
      const { agent, requests } = yield* setup([
        write(plan1, "w1"),
        write([{ content: "Test it", status: "done" }, { status: "pending" }], "bad"),
        write(plan2, "w2"),
        ScriptedModel.text("done")
      ])
      const result = yield* agent.run("ship it", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      const bad = toolResults(result.state.messages).find((part) => part.id === "bad")!
      assert.isTrue(bad.isFailure)
      assert.include(JSON.stringify(bad.result), "Invalid arguments for tool \\\"write_todos\\\"")
      // the model saw the failure before repairing, and the list stayed at plan1 meanwhile
      const third = (yield* requests)[2]!
      assert.isTrue(toolResults(third.prompt.content).some((part) => part.id === "bad" && part.isFailure))
      assert.deepStrictEqual(result.state.todos, plan2)
      assert.deepStrictEqual(yield* Effect.flatMap(TodoList.TodoList, (s) => s.todos("t")), plan2)
    }).pipe(Effect.provide(TodoList.layer)))

  it.effect("state between steps: after an invalid write the slice still holds the last valid list", () =>
    Effect.gen(function*() {
      const { agent } = yield* setup([
        write(plan1, "w1"),
        write([{ content: "", status: "pending" }], "bad"),
        ScriptedModel.text("giving up")
      ])
      const result = yield* agent.run("ship it", { threadId: "t" })
      assert.deepStrictEqual(result.state.todos, plan1)
      assert.deepStrictEqual(yield* Effect.flatMap(TodoList.TodoList, (s) => s.todos("t")), plan1)
    }).pipe(Effect.provide(TodoList.layer)))

  it.effect("two writes in one reply are both rejected with a failed result; the list stays as it was", () =>
    Effect.gen(function*() {
      const { agent, requests } = yield* setup([
        write(plan1, "w1"),
        ScriptedModel.toolCalls([
          { name: "write_todos", params: { todos: plan2 }, id: "a" },
          { name: "deploy", params: { env: "prod" }, id: "d" },
          { name: "write_todos", params: { todos: [] }, id: "b" }
        ]),
        ScriptedModel.text("done")
      ])
      const result = yield* agent.run("go", { threadId: "t" })
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(result.state.todos, plan1)
      assert.deepStrictEqual(yield* Effect.flatMap(TodoList.TodoList, (s) => s.todos("t")), plan1)
      const rejected = toolResults(result.state.messages).filter((part) => part.id === "a" || part.id === "b")
      assert.deepStrictEqual(rejected.map((part) => [part.id, part.isFailure, part.result]), [
        ["a", true, parallelCallsError],
        ["b", true, parallelCallsError]
      ])
      // the other tool of that reply still ran, and the model's next request shows all three results
      const third = toolResults((yield* requests)[2]!.prompt.content)
      assert.deepStrictEqual(third.filter((part) => ["a", "b", "d"].includes(part.id)).map((part) => part.id), [
        "a",
        "d",
        "b"
      ])
      assert.isTrue(third.some((part) => part.id === "d" && !part.isFailure))
    }).pipe(Effect.provide(TodoList.layer)))

  it.effect("a single write in a reply with other tool calls is accepted", () =>
    Effect.gen(function*() {
      const { agent } = yield* setup([
        ScriptedModel.toolCalls([
          { name: "deploy", params: { env: "prod" }, id: "d" },
          { name: "write_todos", params: { todos: plan2 }, id: "a" }
        ]),
        ScriptedModel.text("done")
      ])
      const result = yield* agent.run("go", { threadId: "t" })
      assert.deepStrictEqual(result.state.todos, plan2)
      assert.isFalse(toolResults(result.state.messages).find((part) => part.id === "a")!.isFailure)
    }).pipe(Effect.provide(TodoList.layer)))

  it.effect("deleteThread frees the thread's list in the service; other threads keep theirs", () =>
    Effect.gen(function*() {
      const { agent } = yield* setup([
        write(plan1, "w1"),
        ScriptedModel.text("done"),
        write(plan2, "w2"),
        ScriptedModel.text("done")
      ])
      yield* agent.run("plan it", { threadId: "t" })
      yield* agent.run("plan that", { threadId: "u" })
      const todoList = yield* TodoList.TodoList
      assert.deepStrictEqual(yield* todoList.todos("t"), plan1)
      yield* agent.deleteThread("t")
      assert.deepStrictEqual(yield* todoList.todos("t"), [])
      assert.deepStrictEqual(yield* todoList.todos("u"), plan2)
    }).pipe(Effect.provide(TodoList.layer)))

  it.effect("without a TodoList service in the context, the agent plans with the middleware's own in-memory one", () =>
    Effect.gen(function*() {
      const { agent } = yield* setup([
        write(plan1, "w1"),
        ScriptedModel.text("done"),
        write(plan2, "w2"),
        ScriptedModel.text("done")
      ])
      const first = yield* agent.run("plan it", { threadId: "t" })
      assert.strictEqual(first._tag, "Completed")
      assert.deepStrictEqual(first.state.todos, plan1)
      const second = yield* agent.run("plan that", { threadId: "u" })
      assert.deepStrictEqual(second.state.todos, plan2)
      yield* agent.deleteThread("t")
      assert.isTrue(Option.isNone(yield* agent.thread("t")))
      assert.deepStrictEqual(Option.getOrThrow(yield* agent.thread("u")).state.todos, plan2)
    }).pipe(
      // `layer(TodoList.layer)` above assigns its `it.effect` to this file's `it`, providing a TodoList: take it away
      Effect.mapInputContext((context: Context.Context<never>) => Context.omit(TodoList.TodoList)(context))
    ))

  it.effect("appends the planning prompt to the agent's system prompt; options replace prompt and description", () =>
    Effect.gen(function*() {
      const defaults = yield* setup([ScriptedModel.text("hi")], { systemPrompt: "You are a release bot." })
      yield* defaults.agent.run("hello", { threadId: "t" })
      assert.strictEqual(
        systemOf((yield* defaults.requests)[0]!.prompt),
        `You are a release bot.\n\n${TodoList.defaultSystemPrompt}`
      )

      const custom = yield* setup([ScriptedModel.text("hi")], { todoList: { systemPrompt: "Plan first." } })
      yield* custom.agent.run("hello", { threadId: "t2" })
      assert.strictEqual(systemOf((yield* custom.requests)[0]!.prompt), "Plan first.")

      const handled = yield* TodoList.middleware({ toolDescription: "Track your work." }).tools!
      assert.deepStrictEqual(Object.keys(handled.tools), ["write_todos"])
      assert.strictEqual(handled.tools.write_todos.description, "Track your work.")
    }).pipe(Effect.provide(TodoList.layer)))

  it.effect.prop(
    "any valid list written through the tool is the state and the service's list",
    { todos: TodoList.Todos },
    ({ todos }) =>
      Effect.gen(function*() {
        const { agent } = yield* setup([write(todos, "w"), ScriptedModel.text("done")])
        const result = yield* agent.run("go", { threadId: "p" })
        assert.deepStrictEqual(result.state.todos, todos)
        assert.deepStrictEqual(yield* Effect.flatMap(TodoList.TodoList, (s) => s.todos("p")), todos)
      }).pipe(Effect.provide(TodoList.layer)),
    { fastCheck: { numRuns: 15 } }
  )
})

// ---------------------------------------------------------------------------
// with human in the loop, across processes
// ---------------------------------------------------------------------------

describe("TodoList with HumanInTheLoop", () => {
  /** Todo planning plus a gated deploy (and a gated write_todos when `gateTodos`). */
  const setupGated = (script: ReadonlyArray<ScriptedModel.Turn>, gateTodos = false) =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const hitl = HumanInTheLoop.middleware({
        toolkit: Toolkit.merge(Tools, TodoList.toolkit),
        interruptOn: { deploy: true, write_todos: gateTodos }
      })
      const model = yield* ScriptedModel.make(script)
      const agent = yield* Agent.make({ toolkit: Tools, middleware: [TodoList.middleware(), hitl] }).pipe(
        Effect.provide(toolsLive(log)),
        Effect.provideService(LanguageModel.LanguageModel, model.model)
      )
      return { agent, log: Ref.get(log) }
    })

  it.scoped("the list survives an interrupt and is visible to a fresh process's service after resume", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* fs.makeTempDirectoryScoped()
      const first = yield* Effect.gen(function*() {
        const { agent } = yield* setupGated([
          write(plan1, "w1"),
          ScriptedModel.toolCalls([{ name: "deploy", params: { env: "prod" }, id: "d1" }])
        ])
        const result = yield* agent.run("ship it", { threadId: "t" })
        return { result, seen: yield* Effect.flatMap(TodoList.TodoList, (s) => s.todos("t")) }
      }).pipe(Effect.provide(TodoList.layer), Effect.provide(Checkpointer.layerFileSystem(directory)))
      assert.strictEqual(first.result._tag, "Interrupted")
      assert.deepStrictEqual(first.result.state.todos, plan1)
      assert.deepStrictEqual(first.seen, plan1)

      // a new process: new TodoList service, agent, model and checkpointer on the same folder
      const second = yield* Effect.gen(function*() {
        const todoList = yield* TodoList.TodoList
        assert.deepStrictEqual(yield* todoList.todos("t"), [])
        const { agent, log } = yield* setupGated([ScriptedModel.text("deployed")])
        const result = yield* agent.resume("t", yield* bound(agent, "t", (action) => [HumanInTheLoop.approve(action)]))
        return { result, log: yield* log, seen: yield* todoList.todos("t") }
      }).pipe(Effect.provide(TodoList.layer), Effect.provide(Checkpointer.layerFileSystem(directory)))
      assert.strictEqual(second.result._tag, "Completed")
      assert.deepStrictEqual(second.log, ["deploy prod"])
      assert.deepStrictEqual(second.result.state.todos, plan1)
      assert.deepStrictEqual(second.seen, plan1)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("a write_todos answered by a human (respond) or rejected does not change the list", () =>
    Effect.gen(function*() {
      const { agent } = yield* setupGated([
        write(plan1, "w1"),
        write(plan2, "w2"),
        write(plan2, "w3"),
        ScriptedModel.text("done")
      ], true)
      yield* agent.run("go", { threadId: "t" })
      const afterFirst = yield* agent.resume(
        "t",
        yield* bound(agent, "t", (action) => [HumanInTheLoop.approve(action)])
      )
      assert.strictEqual(afterFirst._tag, "Interrupted")
      assert.deepStrictEqual(afterFirst.state.todos, plan1)
      const afterRespond = yield* agent.resume(
        "t",
        yield* bound(agent, "t", (action) => [
          HumanInTheLoop.respond(action, "Not yet; finish the code first.")
        ])
      )
      assert.strictEqual(afterRespond._tag, "Interrupted")
      assert.deepStrictEqual(afterRespond.state.todos, plan1)
      const result = yield* agent.resume("t", yield* bound(agent, "t", (action) => [HumanInTheLoop.reject(action)]))
      assert.strictEqual(result._tag, "Completed")
      assert.deepStrictEqual(result.state.todos, plan1)
      assert.deepStrictEqual(yield* Effect.flatMap(TodoList.TodoList, (s) => s.todos("t")), plan1)
    }).pipe(Effect.provide(TodoList.layer)))

  it.effect("an approved edit of write_todos sets the edited list", () =>
    Effect.gen(function*() {
      const { agent } = yield* setupGated([write(plan1, "w1"), ScriptedModel.text("done")], true)
      yield* agent.run("go", { threadId: "t" })
      const result = yield* agent.resume(
        "t",
        yield* bound(agent, "t", (action) => [HumanInTheLoop.edit(action, { todos: plan2 })])
      )
      assert.deepStrictEqual(result.state.todos, plan2)
    }).pipe(Effect.provide(TodoList.layer)))
})

// ---------------------------------------------------------------------------
// one truth: the slice, across threads and processes
// ---------------------------------------------------------------------------

describe("TodoList: the slice is the one truth", () => {
  /** A write of a thread, gated by a human, decided in this process or (`restart`) in a new one. */
  const Op = Schema.Struct({
    thread: Schema.Literal("a", "b"),
    todos: TodoList.Todos,
    decision: Schema.Literal("approve", "edit", "reject"),
    restart: Schema.Boolean
  })

  /** A process's agent: its own model; the TodoList service and the checkpointer it is given. */
  const agentOf = (
    script: ReadonlyArray<ScriptedModel.Turn>,
    todoList: TodoList.Service,
    checkpointer: Checkpointer.Service
  ) =>
    Effect.gen(function*() {
      const hitl = HumanInTheLoop.middleware({ toolkit: TodoList.toolkit, interruptOn: { write_todos: true } })
      const model = yield* ScriptedModel.make(script)
      return yield* Agent.make({ middleware: [TodoList.middleware(), hitl] }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model.model),
        Effect.provideService(TodoList.TodoList, todoList),
        Effect.provideService(Checkpointer.Checkpointer, checkpointer)
      )
    })

  it.effect.prop(
    "for any writes across threads and resumes in new processes, the service's list == the slice == the last adopted write",
    { ops: Schema.Array(Op).pipe(Schema.minItems(2), Schema.maxItems(8)) },
    ({ ops }) =>
      Effect.gen(function*() {
        const checkpointer = yield* Checkpointer.makeMemory
        const adopted = new Map<string, ReadonlyArray<TodoList.Todo>>()
        let todoList = yield* TodoList.make
        let ran = new Set<string>() // the threads the current process has run
        for (const [i, op] of ops.entries()) {
          const id = `w${i}`
          let agent = yield* agentOf([write(op.todos, id), ScriptedModel.text("done")], todoList, checkpointer)
          const interrupted = yield* agent.run("plan", { threadId: op.thread })
          assert.strictEqual(interrupted._tag, "Interrupted")
          if (op.restart) {
            todoList = yield* TodoList.make
            ran = new Set()
            agent = yield* agentOf([ScriptedModel.text("done")], todoList, checkpointer)
          }
          const edited = [...op.todos].reverse()
          const result = yield* agent.resume(
            op.thread,
            yield* bound(agent, op.thread, (action) => [
              op.decision === "approve"
                ? HumanInTheLoop.approve(action)
                : op.decision === "edit"
                ? HumanInTheLoop.edit(action, { todos: edited })
                : HumanInTheLoop.reject(action)
            ])
          )
          assert.strictEqual(result._tag, "Completed")
          ran.add(op.thread)
          if (op.decision !== "reject") adopted.set(op.thread, op.decision === "approve" ? op.todos : edited)
          for (const thread of ["a", "b"]) {
            const last = adopted.get(thread) ?? []
            const slice = Option.match(yield* agent.thread(thread), { onNone: () => [], onSome: (t) => t.state.todos })
            assert.deepStrictEqual(slice, last)
            // the service shows the slice of every thread this process ran, and nothing of the others
            assert.deepStrictEqual(yield* todoList.todos(thread), ran.has(thread) ? last : [])
          }
          assert.deepStrictEqual(result.state.todos, adopted.get(op.thread) ?? [])
        }
      }),
    { fastCheck: { numRuns: 30 } }
  )
})

describe("TodoList across summarization", () => {
  it.effect("a summary that takes the write_todos calls away mid-plan: the model is told the list and the plan goes on", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const agentModel = yield* ScriptedModel.make([
        write(plan1, "w1"),
        ScriptedModel.toolCalls([{ name: "deploy", params: { env: "staging" }, id: "d1" }]),
        ScriptedModel.toolCalls([{ name: "deploy", params: { env: "qa" }, id: "d2" }]),
        write(plan2, "w2"),
        ScriptedModel.text("done")
      ])
      const summarizerModel = yield* ScriptedModel.make(
        Array.from({ length: 5 }, () => ScriptedModel.text("The user asked for a deploy; work is under way."))
      )
      // summarize once the thread holds 6 messages, keeping the newest 2: the first write_todos goes
      const summarization = Summarization.middleware({ trigger: { messages: 6 }, keep: { messages: 2 } })
      const agent = yield* Agent.make({
        toolkit: Tools,
        middleware: [summarization, TodoList.middleware()],
        maxSteps: 10
      }).pipe(
        Effect.provide(toolsLive(log)),
        Effect.provide(Summarization.layer(summarizerModel.model)),
        Effect.provideService(LanguageModel.LanguageModel, agentModel.model)
      )
      const result = yield* agent.run("Ship it", { threadId: "plan" })
      assert.strictEqual(result._tag, "Completed")
      const requests = yield* agentModel.recorder.requests
      const system = (request: ScriptedModel.Request) => {
        const first = request.prompt.content[0]
        return first?.role === "system" ? first.content : ""
      }
      const called = (request: ScriptedModel.Request) =>
        request.prompt.content.some((m) =>
          m.role === "assistant" && m.content.some((p) => p.type === "tool-call" && p.name === "write_todos")
        )
      // a request whose messages lost the write is told the list as adopted; one that still shows it is not
      const summarized = requests.filter((request) => !called(request))
      assert.isTrue(summarized.length > 0, "the summary removed the write from at least one request")
      for (const request of requests.slice(1)) {
        if (called(request)) assert.notInclude(system(request), "## Your todo list")
        else {
          assert.include(system(request), TodoList.currentListPrompt(plan1))
        }
      }
      // the plan went on: the second write was adopted
      assert.deepStrictEqual(result.state.todos, plan2)
      assert.deepStrictEqual(yield* Ref.get(log), ["deploy staging", "deploy qa"])
    }))
})
