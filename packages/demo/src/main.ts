/**
 * `npm run demo`: a small agent with three tools, a todo list, an approval
 * step, an audit middleware and a subagent, on a scripted model by default,
 * or on OpenAI when `OPENAI_API_KEY` is set (`OPENAI_MODEL` picks the model,
 * default gpt-4o-mini). Reading a file needs your approval: you are asked in
 * the terminal, or the demo approves by itself when stdin is not a terminal.
 * A second question is delegated to a `reader` subagent (SubAgents' `task`
 * tool), whose own read needs your approval the same way: the approval is
 * asked inside the child and answered through the parent.
 *
 * `--ui` watches the run in the inspector (a local web page) and waits for
 * the approval there; `--durable` runs the same agent durably on SQLite (stop
 * it and start it again: it carries on); `--chat` serves it to a chat UI
 * (`useChat`) over HTTP (see `chat.ts`); `--replay` records a run, replays
 * it after a change of the system prompt and forks it (see `replay.ts`).
 *
 * @since 0.1.0
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Agent, AgentEvent, type AgentResult, Transcript, Usage } from "@stepwise-agent/core"
import { HumanInTheLoop, SubAgents, TodoList } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Console, Effect, Option, Schema, Stream } from "effect"
import * as path from "node:path"
import * as readline from "node:readline/promises"
import { fileURLToPath } from "node:url"
import { main as chat } from "./chat.js"
import * as DemoModel from "./DemoModel.js"
import { DemoToolkit, layerHandlers } from "./DemoTools.js"
import { main as durable } from "./durable.js"
import { main as replay } from "./replay.js"
import { runWithInspector } from "./ui.js"

const dataDirectory = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "data")
const threadId = "demo"
const question = "What does the weekend shopping list in my files cost in total?"
const delegated = "Ask the reader what the readme in my files says."

const todos = (...items: ReadonlyArray<readonly [string, "pending" | "in_progress" | "completed"]>) => ({
  name: "write_todos",
  params: { todos: items.map(([content, status]) => ({ content, status })) }
})

const script = [
  ScriptedModel.toolCalls([
    todos(["Find the shopping list", "in_progress"], ["Add up the prices", "pending"]),
    { name: "list_files", params: {} }
  ], { text: "I'll plan this, then look at your files." }),
  ScriptedModel.toolCalls([{ name: "read_file", params: { path: "shopping-list.txt" } }]),
  ScriptedModel.toolCalls([
    todos(["Find the shopping list", "completed"], ["Add up the prices", "in_progress"]),
    { name: "calculate", params: { expression: "3 x 2.50 + 4 x 1.25 + 12.80" } }
  ]),
  ScriptedModel.toolCalls([{ name: "calculate", params: { expression: "3 * 2.50 + 4 * 1.25 + 12.80" } }], {
    text: "I used the wrong multiplication sign; trying again."
  }),
  ScriptedModel.toolCalls([todos(["Find the shopping list", "completed"], ["Add up the prices", "completed"])]),
  ScriptedModel.text(
    "The weekend shopping costs 25.30 in total: bread 7.50 (3 × 2.50), milk 5.00 (4 × 1.25) and cheese 12.80."
  ),
  // the second question: handed to the reader subagent
  ScriptedModel.toolCalls([{
    name: "task",
    params: { agent: "reader", task: "Read readme.txt and tell me in one sentence what it says." }
  }]),
  ScriptedModel.text("The reader says: the readme explains that the folder is the demo's sandbox.")
]

/** The reader subagent's own script: it reads the file (after your approval), then answers. */
const readerScript = [
  ScriptedModel.toolCalls([{ name: "read_file", params: { path: "readme.txt" } }]),
  ScriptedModel.text("readme.txt says the folder is the demo agent's sandbox, the only place read_file can read.")
]

const ModelLive = DemoModel.layer(ScriptedModel.layer(script), "lead agent")
const ReaderModelLive = DemoModel.layer(ScriptedModel.layer(readerScript), "reader subagent")

const show = (value: unknown) => {
  const text = typeof value === "string" ? value : JSON.stringify(value)
  return text.length > 140 ? `${text.slice(0, 137)}...` : text
}

const mark = { pending: "[ ]", in_progress: "[~]", completed: "[x]" } as const

const showResult = (result: { readonly name: string; readonly result: unknown }) => {
  const written = Schema.decodeUnknownOption(TodoList.WriteTodosResult)(result.result)
  if (result.name === "write_todos" && Option.isSome(written)) {
    return written.value.todos.map((todo) => `\n       ${mark[todo.status]} ${todo.content}`).join("")
  }
  return show(result.result)
}

/** One line for a subagent's event (a grandchild's prefixed with its agent), or none for the noisy ones. */
const nestedLine = (event: AgentEvent.AgentEvent<any, any>): string | undefined => {
  switch (event._tag) {
    case "SubAgentEvent": {
      const line = nestedLine(event.event)
      return line === undefined ? undefined : `[${event.agent}] ${line}`
    }
    case "ModelCallStarted":
      return `model call with ${event.messageCount} messages`
    case "ToolCallStarted":
      return `→ ${event.call.name}(${show(event.call.params)})`
    case "ToolCallCompleted":
      return `${event.result.isFailure ? "✗" : "←"} ${event.result.name}: ${show(event.result.result)}`
    case "MiddlewareDecision":
      return `[${event.middleware}] ${event.decision}`
    case "RunEnded":
      return event.result._tag === "Completed" ? `answered: ${show(event.result.text)}` : "waits for a decision"
    default:
      return undefined
  }
}

const printEvent = (event: AgentEvent.AgentEvent) =>
  AgentEvent.$match(event, {
    SubAgentEvent: ({ agent, event }) => {
      const line = nestedLine(event)
      return line === undefined ? Effect.void : Console.log(`     │ ${agent}: ${line}`)
    },
    RunStarted: ({ resumed, threadId }) => Console.log(`── ${resumed ? "resuming" : "starting"} thread "${threadId}"`),
    HookCompleted: () => Effect.void,
    MessageReceived: ({ messages, mode }) =>
      Console.log(`   ✉ ${mode === "steer" ? "steered in" : "queued"}: ${Transcript.format(messages)}`),
    RunFailed: () => Effect.void,
    ModelCallStarted: ({ messageCount, step }) =>
      Console.log(`\n── step ${step + 1}: model call with ${messageCount} messages`),
    ModelRequestSent: () => Effect.void,
    TextDelta: ({ delta }) => Effect.sync(() => process.stdout.write(delta)),
    ModelAttemptFailed: ({ discardedText, message }) =>
      Console.log(`\n   model call failed${discardedText ? " (the text above is discarded)" : ""}: ${message}`),
    ModelResponded: ({ durationMillis, finishReason, message, usage }) => {
      const { inputTokens, outputTokens } = Usage.read(usage)
      const calls = message.content.filter((part) => part.type === "tool-call").length
      const hasText = message.content.some((part) => part.type === "text")
      return Console.log(
        `${hasText ? "\n" : ""}   model finished (${finishReason}) in ${durationMillis} ms, ${calls} tool call(s), ` +
          `${inputTokens ?? "?"} tokens in / ${outputTokens ?? "?"} out`
      )
    },
    ToolCallStarted: ({ call }) => Console.log(`   → ${call.name}(${show(call.params)})`),
    ToolCallCompleted: ({ durationMillis, result }) =>
      Console.log(`   ${result.isFailure ? "✗" : "←"} ${result.name}: ${showResult(result)} (${durationMillis} ms)`),
    StateUpdated: () => Effect.void,
    MiddlewareDecision: ({ decision, middleware }) => Console.log(`   [${middleware}] ${decision}`),
    RunEnded: ({ result }) =>
      result._tag === "Completed"
        ? Console.log(
          `\n── done in ${result.steps} model calls, ${result.usage.totalTokens} tokens, ` +
            `${result.state.messages.length} messages in thread "${result.threadId}"`
        )
        : Console.log(`\n── the run waits for a decision`)
  })

/** Asks in the terminal, or approves by itself when stdin is not a terminal. */
const decide = (request: HumanInTheLoop.ApprovalRequest) =>
  Effect.forEach(request.actionRequests, (action) =>
    Effect.gen(function*() {
      yield* Console.log(`\n   approval needed: ${action.toolName}(${show(action.args)})`)
      if (!process.stdin.isTTY) {
        yield* Console.log("   stdin is not a terminal: approving (scripted decision)")
        return HumanInTheLoop.approve(action)
      }
      const answer = yield* Effect.acquireUseRelease(
        Effect.sync(() => readline.createInterface({ input: process.stdin, output: process.stdout })),
        (prompt) => Effect.promise(() => prompt.question("   approve? [y]es / [n]o: ")),
        (prompt) => Effect.sync(() => prompt.close())
      )
      return /^y/i.test(answer.trim())
        ? HumanInTheLoop.approve(action)
        : HumanInTheLoop.reject(action, "The user did not allow reading this file.")
    }))

/** Where a wait is: the calls leading to it (a subagent's) and its key. */
const leafId = (leaf: SubAgents.Leaf) => [...leaf.path.map((step) => step.callId), leaf.interrupt.key].join(" › ")

const program = Effect.gen(function*() {
  const approvals = HumanInTheLoop.middleware({
    toolkit: DemoToolkit,
    interruptOn: { read_file: { allowedDecisions: ["approve", "reject"] } }
  })
  // the subagent: its own model, system prompt and middleware (the same approval on read_file)
  const reader = yield* Agent.make({
    toolkit: DemoToolkit,
    systemPrompt: "You read the user's files for another agent and answer in one sentence.",
    middleware: [DemoModel.audit, approvals],
    maxSteps: 4
  }).pipe(Effect.provide(ReaderModelLive))
  const agent = yield* Agent.make({
    toolkit: DemoToolkit,
    systemPrompt: "You answer questions about the user's files. Plan with write_todos, use the tools, " +
      "and do arithmetic with calculate. Hand reading tasks the user gives the reader to the task tool.",
    middleware: [
      DemoModel.audit,
      TodoList.middleware(),
      SubAgents.middleware({
        agents: { reader: { description: "Reads a file of the user's and says what it holds", agent: reader } }
      }),
      approvals
    ],
    maxSteps: 12
  })
  if (process.argv.includes("--ui")) return yield* runWithInspector(agent, { question, threadId })
  let ended: AgentResult.AgentResult<unknown> | undefined
  const follow = (events: Stream.Stream<AgentEvent.AgentEvent, unknown>) =>
    Stream.runForEach(events, (event) =>
      Effect.zipRight(
        Effect.sync(() => {
          if (event._tag === "RunEnded") ended = event.result
        }),
        printEvent(event)
      ))
  for (const input of [question, delegated]) {
    yield* Console.log(`\nUser: ${input}`)
    yield* follow(agent.stream(input, { threadId }))
    while (ended?._tag === "Interrupted") {
      // every wait, the subagents' included: ask about each, then route the answers down their paths
      const interrupt = ended.interrupt
      const answers = new Map<string, ReadonlyArray<HumanInTheLoop.Decision>>()
      for (const leaf of SubAgents.leaves(interrupt)) {
        if (leaf.path.length > 0) {
          yield* Console.log(`\n   asked inside subagent ${leaf.path.map((step) => step.agent).join(" › ")}:`)
        }
        const request = yield* Schema.decodeUnknown(HumanInTheLoop.ApprovalRequest)(leaf.interrupt.value)
        answers.set(leafId(leaf), yield* decide(request))
      }
      yield* follow(
        agent.resumeStream(threadId, SubAgents.decide(interrupt, (leaf) => answers.get(leafId(leaf)) ?? []))
      )
    }
  }
})

if (process.argv.includes("--durable")) {
  durable(process.argv.slice(2))
} else if (process.argv.includes("--chat")) {
  chat(dataDirectory)
} else if (process.argv.includes("--replay")) {
  replay(dataDirectory)
} else {
  program.pipe(
    Effect.provide(layerHandlers(dataDirectory)),
    Effect.provide(TodoList.layer),
    Effect.provide(ModelLive),
    Effect.provide(NodeContext.layer),
    NodeRuntime.runMain
  )
}
