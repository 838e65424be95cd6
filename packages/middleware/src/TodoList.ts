/**
 * Todo planning: the `write_todos` tool, a system prompt that tells the model
 * when to plan, and a `TodoList` service the app reads and watches.
 *
 * The thread's list lives in one place: the `todos` state slice, checkpointed
 * with the thread, so it survives `resume` in a new process. The `TodoList`
 * service is a projection of that slice per thread, for progress UIs:
 * `todos(threadId)` reads it and `changes(threadId)` streams it.
 *
 * How the list moves: the `write_todos` handler only validates its input and
 * echoes the list back in its result. One function, `sync` (the
 * `beforeAgent`, `beforeModel` and `afterAgent` hooks), moves the list of the
 * last model turn's successful `write_todos` result into the slice, and sets
 * the service to the slice. So the slice is a deterministic function of the
 * checkpointed messages, whatever process runs the next step, and the service
 * only ever shows a list the agent has adopted.
 *
 * When one reply calls `write_todos` more than once, the `afterModel` hook
 * answers each of those calls with a failed result ({@link parallelCallsError})
 * before the tools run, so the list does not change. The service keeps one
 * entry per thread, freed by `onThreadDeleted` when the agent deletes it.
 * Without a `TodoList` in the context the agent is built in, the middleware
 * keeps its own in-memory one.
 *
 * @since 0.1.0
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as AgentState from "@stepwise-agent/core/AgentState"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Check from "./internal/options.js"
import { serviceOrOwn } from "./internal/serviceOrOwn.js"
import { appendToSystemPrompt, appendWhenOffered } from "./internal/toolPrompt.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category models
 */
export const TodoStatus = Schema.Literal("pending", "in_progress", "completed")

/**
 * @since 0.1.0
 * @category models
 */
export type TodoStatus = typeof TodoStatus.Type

/**
 * One item of the plan.
 *
 * @since 0.1.0
 * @category models
 */
export const Todo = Schema.Struct({
  // A plain filter with an empty JSON Schema annotation: the model sees `{ "type": "string" }`, keeping the
  // tool's JSON Schema to keywords that providers' strict modes accept (no `minLength` / `pattern` / `$defs`).
  content: Schema.String.pipe(
    Schema.filter((content) => content.trim().length > 0, {
      message: () => "a todo's content must not be blank",
      jsonSchema: {}
    })
  ).annotations({ description: "What to do, as a short imperative sentence" }),
  status: TodoStatus
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Todo extends Schema.Schema.Type<typeof Todo> {}

/**
 * @since 0.1.0
 * @category models
 */
export const Todos = Schema.Array(Todo)

/**
 * Whether two lists hold the same items in the same order.
 *
 * @since 0.1.0
 * @category models
 */
export const equivalence = Schema.equivalence(Todos)

/**
 * The success value of `write_todos`: the list as it now stands.
 *
 * @since 0.1.0
 * @category models
 */
export const WriteTodosResult = Schema.Struct({
  message: Schema.String,
  todos: Todos
})

/**
 * The name of the tool.
 *
 * @since 0.1.0
 * @category models
 */
export const toolName = "write_todos"

/**
 * @since 0.1.0
 * @category models
 */
export const defaultToolDescription = "Create or update your todo list for the current task. Each call replaces the " +
  "whole list, so always send every item with its current status: pending (not started), in_progress (working on " +
  "it now) or completed (done). Use it for tasks of three or more steps; skip it for simple requests. Mark an item " +
  "in_progress before you start it and completed as soon as it is done; keep one item in_progress at a time."

/**
 * @since 0.1.0
 * @category models
 */
export const defaultSystemPrompt = "## `write_todos`\n\n" +
  "You have a `write_todos` tool to plan and track multi-step work. For a complex task (three or more distinct " +
  "steps, or when the user gives you a list of things to do), write the plan first, then keep it current: mark an " +
  "item in_progress when you start it and completed right after you finish it, and add items you discover. Do not " +
  "use it for simple or conversational requests. Never call `write_todos` more than once in one response."

/**
 * The `write_todos` tool with a given description.
 *
 * @example
 * ```ts
 * import { TodoList } from "@stepwise-agent/middleware"
 *
 * const tool = TodoList.makeTool("Plan your work.")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeTool = (description: string) =>
  Tool.make(toolName, {
    description,
    parameters: { todos: Todos },
    success: WriteTodosResult
    // it only sets the list its result holds: a call cut off by a crash runs again
  }).annotate(Tool.Idempotent, true)

/**
 * The `write_todos` tool (with the default description).
 *
 * @since 0.1.0
 * @category models
 */
export const WriteTodos = makeTool(defaultToolDescription)

/**
 * A toolkit holding {@link WriteTodos}. The middleware brings its own handled
 * copy; this one is for code that needs the tool definitions, such as
 * `HumanInTheLoop.middleware({ toolkit: Toolkit.merge(MyTools, TodoList.toolkit) })`.
 *
 * @since 0.1.0
 * @category models
 */
export const toolkit = Toolkit.make(WriteTodos)

/**
 * The failed result each `write_todos` call gets when one reply holds more
 * than one of them (the same text as LangChain's).
 *
 * @since 0.1.0
 * @category models
 */
export const parallelCallsError = "Error: The `write_todos` tool should never be called multiple times in parallel. " +
  "Please call it only once per model invocation to update the todo list."

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Appended to the agent's system prompt on every model call that offers the tool. */
  readonly systemPrompt?: string | undefined
  /** The description of `write_todos` the model sees. */
  readonly toolDescription?: string | undefined
}

/**
 * The state slice the middleware adds to the agent state.
 *
 * @since 0.1.0
 * @category models
 */
export interface State {
  readonly todos: ReadonlyArray<Todo>
}

// -----------------------------------------------------------------------------
// tags
// -----------------------------------------------------------------------------

/**
 * The todo lists of the threads this process runs, for the app to read and
 * watch: the middleware sets a thread's entry to its `todos` slice. Provide
 * it (e.g. {@link layer}) where the agent is built and share it with the app;
 * without one, the middleware keeps a private one.
 *
 * @since 0.1.0
 * @category tags
 */
export class TodoList extends Context.Tag("@stepwise-agent/middleware/TodoList")<TodoList, Service>() {}

/**
 * What the `TodoList` service offers: the lists by thread, to read and
 * watch.
 *
 * @example
 * ```ts
 * import { TodoList } from "@stepwise-agent/middleware"
 *
 * const todosOf = (lists: TodoList.Service) => lists.todos("t1")
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** The thread's list (empty when the thread has none, or this process has not run it). */
  readonly todos: (threadId: string) => Effect.Effect<ReadonlyArray<Todo>>
  /** Sets the thread's list as the app sees it; the agent state is changed by `write_todos` only. */
  readonly write: (threadId: string, todos: ReadonlyArray<Todo>) => Effect.Effect<void>
  /** Forgets the thread's list (it reads as empty again); called when the agent deletes the thread. */
  readonly remove: (threadId: string) => Effect.Effect<void>
  /** The thread's list now, then each time it changes. */
  readonly changes: (threadId: string) => Stream.Stream<ReadonlyArray<Todo>>
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

const empty: ReadonlyArray<Todo> = []

/**
 * Builds a {@link TodoList} service. It holds one entry per thread in a
 * `Map`, so a write costs the same however many threads there are, and
 * `remove` frees the entry (the middleware calls it when the agent deletes
 * the thread).
 *
 * @example
 * ```ts
 * import { TodoList } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const todoList = yield* TodoList.make
 *   yield* todoList.write("t1", [{ content: "Write the tests", status: "pending" }])
 *   return yield* todoList.todos("t1")
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Service> = Effect.map(
  PubSub.unbounded<readonly [threadId: string, todos: ReadonlyArray<Todo>]>(),
  (updates) => {
    const lists = new Map<string, ReadonlyArray<Todo>>()
    // Set and publish in one step, so subscribers see the writes in the order the map took them.
    const set = (threadId: string, todos: ReadonlyArray<Todo>) =>
      Effect.sync(() => {
        const current = lists.get(threadId) ?? empty
        if (equivalence(current, todos)) return
        if (todos.length === 0) lists.delete(threadId)
        else lists.set(threadId, todos)
        updates.unsafeOffer([threadId, todos])
      })
    return TodoList.of({
      todos: (threadId) => Effect.sync(() => lists.get(threadId) ?? empty),
      write: set,
      remove: (threadId) => set(threadId, empty),
      changes: (threadId) =>
        Stream.unwrapScoped(Effect.map(PubSub.subscribe(updates), (subscription) =>
          // Subscribed before reading the current list, so no write falls in between.
          Stream.concat(
            Stream.sync(() => lists.get(threadId) ?? empty),
            Stream.fromQueue(subscription).pipe(
              Stream.filter(([id]) => id === threadId),
              Stream.map(([, todos]) => todos)
            )
          ).pipe(Stream.changesWith(equivalence))))
    })
  }
)

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<TodoList> = Layer.effect(TodoList, make)

// -----------------------------------------------------------------------------
// the middleware
// -----------------------------------------------------------------------------

const OptionsSchema = Schema.Struct({
  systemPrompt: Schema.optional(Schema.String),
  toolDescription: Schema.optional(Check.NonBlank)
})

const decodeResult = Schema.decodeUnknownOption(WriteTodosResult)

const successfulWrite = (result: Prompt.ToolResultPart): Option.Option<ReadonlyArray<Todo>> =>
  result.isFailure || result.name !== toolName ? Option.none() : Option.map(decodeResult(result.result), (r) => r.todos)

/**
 * The list written by the last model turn: the last (in call order) call of
 * `write_todos` in the last assistant message that has a successful result.
 * A rejected call, a call answered by someone else (a human's `respond`) or
 * one with invalid input does not count.
 */
const lastWrite = (messages: ReadonlyArray<Prompt.Message>): Option.Option<ReadonlyArray<Todo>> => {
  let index = messages.length - 1
  while (index >= 0 && messages[index]!.role !== "assistant") index--
  if (index < 0) return Option.none()
  const results = new Map<string, Prompt.ToolResultPart>()
  for (let i = index; i < messages.length; i++) {
    const message = messages[i]!
    if (message.role === "tool" || message.role === "assistant") {
      for (const part of message.content) if (part.type === "tool-result") results.set(part.id, part)
    }
  }
  const content = (messages[index] as Prompt.AssistantMessage).content
  for (let i = content.length - 1; i >= 0; i--) {
    const part = content[i]!
    if (part.type !== "tool-call" || part.name !== toolName) continue
    const result = results.get(part.id)
    if (result === undefined) continue
    const written = successfulWrite(result)
    if (Option.isSome(written)) return written
  }
  return Option.none()
}

/** Whether any assistant message of `messages` calls `write_todos` (from the newest back). */
const showsAWrite = (messages: ReadonlyArray<Prompt.Message>): boolean => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.role === "assistant" && message.content.some((p) => p.type === "tool-call" && p.name === toolName)) {
      return true
    }
  }
  return false
}

/**
 * The current list as the model is told it when no `write_todos` call is left
 * in what it sees (a summary or an edit took them away).
 *
 * @example
 * ```ts
 * import { TodoList } from "@stepwise-agent/middleware"
 *
 * TodoList.currentListPrompt([{ content: "Find the list", status: "completed" }])
 * // "## Your todo list\n\nThe list as you last wrote it (…):\n- [completed] Find the list"
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const currentListPrompt = (todos: ReadonlyArray<Todo>): string =>
  "## Your todo list\n\nThe list as you last wrote it (the earlier conversation was summarized, so your " +
  "`write_todos` calls are no longer shown); keep it up to date with `write_todos`:\n" +
  todos.map((todo) => `- [${todo.status}] ${todo.content}`).join("\n")

/**
 * Adds todo planning to an agent: the `write_todos` tool (each call replaces
 * the whole list), a system prompt telling the model when to plan, and the
 * `todos` state slice, projected into the {@link TodoList} service. To read
 * the lists, provide {@link layer} where the agent is built and share it with
 * the app; without a `TodoList` there, the middleware keeps its own in-memory
 * one (one per `middleware()` value). Invalid `write_todos` input is answered
 * with a failed tool result the model can repair; so is each of two or more
 * `write_todos` calls in one reply. Bad options (an unknown key too) make
 * `Agent.make` fail with `AgentError.InvalidOptions` naming the option.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { TodoList } from "@stepwise-agent/middleware"
 * import { Effect, Stream } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({ middleware: [TodoList.middleware()] })
 *   const todoList = yield* TodoList.TodoList
 *   yield* todoList.changes("t1").pipe(Stream.runForEach((todos) => Effect.log(todos)), Effect.fork)
 *   const result = yield* agent.run("Plan and write the release notes", { threadId: "t1" })
 *   return result.state.todos
 * }).pipe(Effect.provide(TodoList.layer))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (options?: Options | undefined): Middleware.Middleware<State> =>
  Check.middlewareOf("TodoList", OptionsSchema, options, build)

const build = (options: Options): Middleware.Middleware<State> => {
  const tool = makeTool(options.toolDescription ?? defaultToolDescription)
  const kit = Toolkit.make(tool)
  const handled = Effect.flatMap(
    kit.toContext({
      write_todos: ({ todos }) =>
        Effect.succeed({
          message: todos.length === 0
            ? "Cleared the todo list."
            : `Updated the todo list (${todos.length} item${todos.length === 1 ? "" : "s"}).`,
          todos
        })
    }),
    (context) => Effect.provide(kit, context)
  )
  const prompt = options.systemPrompt ?? defaultSystemPrompt
  const withPrompt = appendWhenOffered(toolName, prompt)
  // The app's TodoList when the agent was built with one, else this middleware's own, made on first use.
  const todoList = serviceOrOwn(TodoList, make)

  /**
   * The one place the list moves: the slice takes the list of the last model
   * turn's successful write (when it differs), and the service is set to the
   * slice. A thread this process had not run gets its checkpointed list.
   */
  const sync = (context: Middleware.HookContext<State>) =>
    Effect.gen(function*() {
      const service = yield* todoList
      const written = lastWrite(context.messages)
      const changed = Option.isSome(written) && !equivalence(written.value, context.state.todos)
      const todos = changed ? written.value : context.state.todos
      yield* service.write(context.threadId, todos)
      if (!changed) return undefined
      yield* Middleware.report(`todos: ${todos.length} item(s)`, { todos })
      return { state: { todos } }
    })

  // Two writes in one reply would race for the whole list: answer each with a failure
  // before the tools run, so the model calls it once and the list stays as it was.
  const rejectParallel = (context: Middleware.HookContext<State>) => {
    const calls = (AgentState.pendingToolCalls(context.messages)?.calls ?? []).filter((c) => c.name === toolName)
    return Effect.succeed(
      calls.length < 2 ? undefined : {
        messages: AgentState.appendToolResults(
          context.messages,
          calls.map((call) => Middleware.toolResult(call, parallelCallsError, { isFailure: true }))
        )
      }
    )
  }

  return Middleware.make({
    name: "todoList",
    state: { schema: Schema.Struct({ todos: Todos }), initial: { todos: empty } },
    tools: handled,
    beforeAgent: sync,
    beforeModel: sync,
    afterModel: rejectParallel,
    afterAgent: sync,
    onThreadDeleted: (threadId) => Effect.flatMap(todoList, (service) => service.remove(threadId)),
    // The slice is the truth: when what the model sees no longer holds a write (a summary or an edit took it
    // away), the list it adopted is put in the system prompt, so a plan survives compaction.
    wrapModelCall: (request, next) => {
      const todos = (request.state as Partial<State>).todos
      return withPrompt(
        todos === undefined || todos.length === 0 || showsAWrite(request.messages)
          ? request
          : appendToSystemPrompt(request, currentListPrompt(todos)),
        next
      )
    }
  })
}
