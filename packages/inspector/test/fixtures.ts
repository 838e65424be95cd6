import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { Agent } from "@stepwise-agent/core"
import { ContextEditing, HumanInTheLoop, TodoList } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Option, Ref, Schema } from "effect"
import * as Inspector from "../src/Inspector.js"

// The agent the inspector tests watch: a file reader that needs approval, a no-op `tick` tool for long runs, and
// the todo list. `reads` lists the reads that ran.

const ReadFile = Tool.make("read_file", {
  description: "Reads a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const Tick = Tool.make("tick", { description: "Does nothing", success: Schema.Number })
const Tools = Toolkit.make(ReadFile, Tick)

export const todos = (...items: ReadonlyArray<readonly [string, TodoList.TodoStatus]>) => ({
  name: "write_todos",
  params: { todos: items.map(([content, status]) => ({ content, status })) }
})

const usage = (inputTokens: number, outputTokens: number) => ({
  usage: { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens }
})

/** Plans, asks to read `notes.txt` (which waits for a decision), then finishes the plan. */
export const approvalScript: ReadonlyArray<ScriptedModel.Turn> = [
  ScriptedModel.toolCalls([todos(["Read the notes", "in_progress"], ["Summarize them", "pending"])], {
    text: "Let me plan this first.",
    ...usage(180, 42)
  }),
  ScriptedModel.toolCalls(
    [{ name: "read_file", params: { path: "notes.txt" }, id: "call_read" }],
    usage(260, 18)
  ),
  ScriptedModel.toolCalls([todos(["Read the notes", "completed"], ["Summarize them", "in_progress"])], usage(330, 40)),
  ScriptedModel.toolCalls([todos(["Read the notes", "completed"], ["Summarize them", "completed"])], usage(210, 40)),
  ScriptedModel.text("The notes are about the release.", usage(250, 12).usage)
]

/** `steps` calls of `tick`, then an answer. */
export const longScript = (steps: number): ReadonlyArray<ScriptedModel.Turn> => [
  ...Array.from({ length: steps }, (_, i) => ScriptedModel.toolCalls([{ name: "tick", params: {}, id: `tick_${i}` }])),
  ScriptedModel.text(`Ticked ${steps} times.`)
]

/**
 * An agent on `script`, with context editing, the todo list and approvals of
 * `read_file`, and an inspector attached.
 */
export const setup = (
  script: ReadonlyArray<ScriptedModel.Turn>,
  options?: { readonly maxSteps?: number; readonly inspector?: Inspector.Options }
) =>
  Effect.gen(function*() {
    // Clears old tool results from requests over 120 (approximate) tokens: in the approval script, from the
    // fourth model call on.
    const clearOld = ContextEditing.clearToolUses({ trigger: 120, keep: 1 })
    const reads = yield* Ref.make<ReadonlyArray<string>>([])
    const ticks = yield* Ref.make(0)
    const approvals = HumanInTheLoop.middleware({
      toolkit: Toolkit.merge(Tools, TodoList.toolkit),
      interruptOn: { read_file: { allowedDecisions: ["approve", "edit", "reject", "respond"] } }
    })
    const model = yield* ScriptedModel.make(script)
    const agent = yield* Agent.make({
      toolkit: Tools,
      systemPrompt: "You read files.",
      middleware: [ContextEditing.middleware({ edits: [clearOld] }), TodoList.middleware(), approvals],
      maxSteps: options?.maxSteps
    }).pipe(
      Effect.provide(Tools.toLayer({
        read_file: ({ path }) => Effect.as(Ref.update(reads, (all) => [...all, path]), `contents of ${path}`),
        tick: () => Ref.updateAndGet(ticks, (n) => n + 1)
      })),
      Effect.provide(TodoList.layer),
      Effect.provideService(LanguageModel.LanguageModel, model.model)
    )
    const inspector = yield* Inspector.make(agent, options?.inspector)
    const token = new URL(inspector.url).searchParams.get("token")!
    const base = `http://127.0.0.1:${inspector.port}`
    const modelCalls = Effect.map(model.recorder.requests, (requests) => requests.length)
    return { agent, inspector, token, base, reads: Ref.get(reads), modelCalls }
  })

/** The key of the wait of `threadId` as the page gets it (from the thread's summary). */
export const pendingOf = (agent: Agent.AgentOf<any>, threadId: string) =>
  Effect.map(agent.thread(threadId), (thread) => Option.flatMap(thread, (t) => t.pending))

/** Polls `check` every 20 ms until it holds, failing after `timeoutMillis`. */
export const eventually = <E, R>(
  check: Effect.Effect<boolean, E, R>,
  what: string,
  timeoutMillis = 10_000
): Effect.Effect<void, E | Error, R> =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMillis
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.fail(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("20 millis")
    }
  })
