/**
 * `npm run demo -- --durable`: the demo agent run durably. The run is a
 * workflow on @effect/cluster with its journal in a SQLite file under
 * `.stepwise/` in the working directory. Stop it at any point (Ctrl-C,
 * `kill`, even `kill -9`) and run the same command again: the run carries on
 * from its journal, and each step says whether it ran now or came back from
 * the journal. `--reset` deletes the run and starts over; `--pace <ms>` sets
 * how long each scripted step takes (default 1000, so there is time to stop
 * it).
 *
 * The approval of `read_file` is asked in the terminal (or given by itself
 * when stdin is not a terminal) and sent with `resume`, as another process
 * would send it. The demo also saves its answer to
 * `.stepwise/demo-notes.md` with a tool that writes once per
 * idempotency key: stopped while that call finishes, the demo runs the call
 * again on the next start, and the key keeps the line from being written
 * twice.
 *
 * @since 0.1.0
 */
import { type Prompt, type Response, Tool, Toolkit } from "@effect/ai"
import { FileSystem } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Agent, Middleware, ToolContext, ToolEffect } from "@stepwise-agent/core"
import { HumanInTheLoop, TodoList } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import { AgentEngine, AgentWorkflow, Authorizer, RunStore, SqlCheckpointer } from "@stepwise-agent/workflow"
import { Console, Deferred, Duration, Effect, Layer, Option, Schema, Stream } from "effect"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline/promises"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as DemoModel from "./DemoModel.js"
import { DemoToolkit, layerHandlers } from "./DemoTools.js"

const dataDirectory = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "data")

/**
 * The demo's run id: fixed, so that a restarted demo finds its run.
 *
 * @since 0.1.0
 * @category constants
 */
export const runId = "demo-run"

const threadId = "demo"
const question = "What does the weekend shopping list in my files cost in total? Save the total to my notes."

// -----------------------------------------------------------------------------
// options
// -----------------------------------------------------------------------------

/**
 * Options of {@link program}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The folder of the run database and the notes file. Default `.stepwise` (in the working directory). */
  readonly directory?: string | undefined
  /** Delete the run (database and notes) and start over. */
  readonly reset?: boolean | undefined
  /**
   * How long the scripted model thinks before each reply, and `save_note`
   * takes after its write. Default 1 second: time to stop the demo mid-step.
   */
  readonly pace?: Duration.DurationInput | undefined
}

/**
 * Reads the demo's flags: `--reset` and `--pace <ms>`; other arguments are
 * ignored.
 *
 * @example
 * ```ts
 * import { parseArgs } from "./durable.js"
 *
 * parseArgs(["--durable", "--pace", "200"]) // { reset: false, pace: Duration.millis(200) }
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const parseArgs = (args: ReadonlyArray<string>): Options => {
  const paceAt = args.indexOf("--pace")
  const pace = paceAt === -1 ? undefined : Number(args[paceAt + 1])
  return {
    reset: args.includes("--reset"),
    pace: pace === undefined || !Number.isFinite(pace) || pace < 0 ? undefined : Duration.millis(pace)
  }
}

// -----------------------------------------------------------------------------
// the agent
// -----------------------------------------------------------------------------

/**
 * Appends a line to the user's notes. It writes once per idempotency key:
 * a call cut off by a crash runs again, and finds its line already there.
 *
 * @since 0.1.0
 * @category tools
 */
export const SaveNote = Tool.make("save_note", {
  description: "Append one line to the user's notes file.",
  parameters: { text: Schema.String.annotations({ description: "the line to save" }) },
  success: Schema.String
}).pipe(ToolEffect.declare(ToolEffect.idempotent({ key: (_, call) => `${call.threadId}/${call.callId}` })))

/**
 * The demo's tools plus `save_note`.
 *
 * @since 0.1.0
 * @category tools
 */
export const DurableToolkit = Toolkit.merge(DemoToolkit, Toolkit.make(SaveNote))

/**
 * `save_note` on `file`. Like a slow remote API, a call takes `settle` to
 * finish after its write: a crash then leaves the line written but the call
 * not journaled, so the call runs again on the next start. The idempotency
 * key in the line keeps that second run from writing it twice.
 */
const layerNotes = (file: string, settle: Duration.Duration) =>
  Toolkit.make(SaveNote).toLayer(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    return {
      save_note: ({ text }) =>
        Effect.gen(function*() {
          const { idempotencyKey } = yield* Effect.orDie(ToolContext.current)
          const tag = `<!-- ${idempotencyKey} -->`
          const notes = yield* fs.readFileString(file).pipe(Effect.orElseSucceed(() => ""))
          if (notes.split("\n").some((line) => line.endsWith(tag))) {
            yield* Console.log(`   ✎ the notes already hold the line of ${idempotencyKey}: not written again`)
          } else {
            yield* fs.writeFileString(file, `- ${text} ${tag}\n`, { flag: "a" }).pipe(Effect.orDie)
            yield* Console.log(`   ✎ wrote a line to ${path.relative(process.cwd(), file)} (key ${idempotencyKey})`)
          }
          yield* Effect.sleep(settle)
          return `saved to ${path.basename(file)}`
        })
    }
  }))

const todos = (...items: ReadonlyArray<readonly [string, "pending" | "in_progress" | "completed"]>) => ({
  name: "write_todos",
  params: { todos: items.map(([content, status]) => ({ content, status })) }
})

/** The scripted replies, one per model call. Ids are fixed: a tool's idempotency key is `thread/callId`. */
const replies: ReadonlyArray<ReadonlyArray<Response.PartEncoded>> = [
  ScriptedModel.toolCalls([
    { ...todos(["Find the shopping list", "in_progress"], ["Add up the prices", "pending"]), id: "call_plan" },
    { name: "list_files", params: {}, id: "call_list" }
  ], { text: "I'll plan this, then look at your files." }),
  ScriptedModel.toolCalls([{ name: "read_file", params: { path: "shopping-list.txt" }, id: "call_read" }]),
  ScriptedModel.toolCalls([
    { ...todos(["Find the shopping list", "completed"], ["Add up the prices", "in_progress"]), id: "call_progress" },
    { name: "calculate", params: { expression: "3 x 2.50 + 4 x 1.25 + 12.80" }, id: "call_sum_1" }
  ]),
  ScriptedModel.toolCalls([{
    name: "calculate",
    params: { expression: "3 * 2.50 + 4 * 1.25 + 12.80" },
    id: "call_sum_2"
  }], {
    text: "I used the wrong multiplication sign; trying again."
  }),
  ScriptedModel.toolCalls([
    { name: "save_note", params: { text: "Weekend shopping: 25.30 in total" }, id: "call_note" },
    { ...todos(["Find the shopping list", "completed"], ["Add up the prices", "completed"]), id: "call_done" }
  ]),
  ScriptedModel.text(
    "The weekend shopping costs 25.30 in total: bread 7.50 (3 × 2.50), milk 5.00 (4 × 1.25) and cheese 12.80. " +
      "I saved the total to your notes."
  )
]

/**
 * The scripted model picks its reply from the conversation (the number of
 * replies it gave so far), never from a counter of its own: a fresh process
 * that continues a run asks it for the next step and gets the right one.
 */
const scriptedModel = (pace: Duration.Duration) =>
  ScriptedModel.layer(Array.from({ length: 100 }, () => (request: ScriptedModel.Request) => {
    const given = request.prompt.content.filter((message) => message.role === "assistant").length
    return Effect.as(Effect.sleep(pace), replies[Math.min(given, replies.length - 1)]!)
  }))

/**
 * What ran in this process. Wrap hooks run inside the journaled model and
 * tool calls, so a call replayed from the journal never reaches them.
 */
interface Ran {
  readonly models: Set<number>
  readonly tools: Set<string>
}

const ranHere = (ran: Ran, modelStarted: (step: number, messageCount: number) => Effect.Effect<void>) =>
  Middleware.make({
    name: "ran-here",
    wrapModelCall: (request, next) =>
      Effect.sync(() => ran.models.add(request.step)).pipe(
        Effect.zipRight(modelStarted(request.step, request.messages.length)),
        Effect.zipRight(next(request))
      ),
    wrapToolCall: (request, next) => Effect.zipRight(Effect.sync(() => ran.tools.add(request.call.id)), next(request))
  })

/**
 * The durable demo agent: the workflow, versioned.
 *
 * @since 0.1.0
 * @category workflows
 */
export const DemoRuns = AgentWorkflow.make({ name: "stepwise-demo", version: 1 })

const agentLayer = (
  ran: Ran,
  modelStarted: (step: number, messageCount: number) => Effect.Effect<void>,
  notes: string,
  pace: Duration.Duration
) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const approvals = HumanInTheLoop.middleware({
      toolkit: DurableToolkit,
      interruptOn: { read_file: { allowedDecisions: ["approve", "reject"] } }
    })
    return Agent.layer({
      toolkit: DurableToolkit,
      systemPrompt: "You answer questions about the user's files. Plan with write_todos, use the tools, " +
        "do arithmetic with calculate, and save results the user asks for with save_note.",
      middleware: [DemoModel.audit, ranHere(ran, modelStarted), TodoList.middleware(), approvals],
      maxSteps: 12
    })
  })).pipe(
    Layer.provide(
      Layer.mergeAll(
        layerHandlers(dataDirectory),
        layerNotes(notes, pace),
        TodoList.layer,
        DemoModel.layer(scriptedModel(pace))
      )
    )
  )

// -----------------------------------------------------------------------------
// printing
// -----------------------------------------------------------------------------

const show = (value: unknown) => {
  const text = (typeof value === "string" ? value : JSON.stringify(value)).replace(/\s*\n\s*/g, " ⏎ ")
  return text.length > 120 ? `${text.slice(0, 117)}...` : text
}

const mark = { pending: "[ ]", in_progress: "[~]", completed: "[x]" } as const

const showResult = (result: Prompt.ToolResultPart) => {
  const written = Schema.decodeUnknownOption(TodoList.WriteTodosResult)(result.result)
  if (result.name === "write_todos" && Option.isSome(written)) {
    return written.value.todos.map((todo) => `\n       ${mark[todo.status]} ${todo.content}`).join("")
  }
  return show(result.result)
}

const textOf = (message: Prompt.AssistantMessage) =>
  message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")

const callsOf = (message: Prompt.AssistantMessage) =>
  message.content.flatMap((part) => part.type === "tool-call" ? [`${part.name} [${part.id}]`] : [])

/** Model and tool calls this process ran, and those it took from the journal. */
interface Counts {
  modelsRan: number
  modelsReplayed: number
  toolsRan: number
  toolsReplayed: number
}

/**
 * Prints the live events of the run, once each. After an approval the run
 * replays from the top in this process, reporting its journaled steps (and
 * the decisions of its node hooks) again: those were printed already. A
 * step that was neither printed nor ran in this process came from the
 * journal of an earlier process.
 */
const makePrinter = (ran: Ran) => {
  const printed = new Set<string>()
  const headers = new Map<number, number>()
  const counts: Counts = { modelsRan: 0, modelsReplayed: 0, toolsRan: 0, toolsReplayed: 0 }
  // Where the current pass of the loop is: its model step, and how often it reported each decision there.
  let pass = { runId: "", step: -1, seen: new Map<string, number>() }
  const once = (key: string) => !printed.has(key) && printed.add(key) !== undefined
  const header = (step: number) =>
    once(`header/${step}`)
      ? Console.log(
        `\n── step ${step + 1}: model call` + (headers.has(step) ? ` with ${headers.get(step)} messages` : "")
      )
      : Effect.void
  // a model call that really runs (not one replayed from the journal) shows up as it starts: stop the demo now to see it carry on
  const modelStarted = (step: number, messageCount: number) =>
    Effect.suspend(() => {
      headers.set(step, messageCount)
      return Effect.zipRight(header(step), Console.log("   model working…"))
    })
  const print = ({ event, runId }: Agent.RunEvent): Effect.Effect<void> => {
    if (pass.runId !== runId) pass = { runId, step: -1, seen: new Map() }
    switch (event._tag) {
      case "ModelCallStarted":
        return Effect.sync(() => {
          pass.step = event.step
          headers.set(event.step, event.messageCount)
        })
      case "TextDelta":
        return Effect.zipRight(header(event.step), Effect.sync(() => void process.stdout.write(event.delta)))
      case "ModelResponded": {
        if (!once(`model/${event.step}`)) return Effect.void
        const calls = callsOf(event.message)
        if (ran.models.has(event.step)) {
          counts.modelsRan++
          const hasText = textOf(event.message).length > 0
          return Effect.zipRight(
            header(event.step),
            Console.log(
              `${hasText ? "\n" : ""}   model finished (${event.finishReason}) in ${event.durationMillis} ms, ` +
                `${calls.length} tool call(s) — ran now`
            )
          )
        }
        counts.modelsReplayed++
        printed.add(`header/${event.step}`)
        const said = textOf(event.message)
        return Console.log(
          `\n↺  step ${event.step + 1}: model reply from the journal` +
            (said.length > 0 ? `: "${show(said)}"` : "") +
            (calls.length > 0 ? ` → ${calls.join(", ")}` : "")
        )
      }
      case "ToolCallStarted":
        return once(`call/${event.call.id}`)
          ? Console.log(`   → ${event.call.name}(${show(event.call.params)}) [${event.call.id}]`)
          : Effect.void
      case "ToolCallCompleted": {
        const result = event.result
        if (!once(`result/${result.id}`)) return Effect.void
        const what = `${result.name} [${result.id}]`
        if (ran.tools.has(result.id)) {
          counts.toolsRan++
          const arrow = result.isFailure ? "✗" : "←"
          return Console.log(`   ${arrow} ${what} ran now (${event.durationMillis} ms): ${showResult(result)}`)
        }
        counts.toolsReplayed++
        return Console.log(`   ↺ ${what} from the journal, not run again: ${showResult(result)}`)
      }
      case "MiddlewareDecision": {
        const what = `${event.middleware}/${event.hook}/${event.decision}/${JSON.stringify(event.data)}`
        const nth = (pass.seen.get(what) ?? 0) + 1
        pass.seen.set(what, nth)
        if (!once(`decision/${pass.step}/${what}#${nth}`)) return Effect.void
        const line = Console.log(`   [${event.middleware}] ${event.decision}`)
        return pass.step >= 0 && ran.models.has(pass.step) ? Effect.zipRight(header(pass.step), line) : line
      }
      default:
        return Effect.void
    }
  }
  return { print, modelStarted, counts }
}

const showTranscript = (messages: ReadonlyArray<Prompt.Message>) =>
  Effect.forEach(messages, (message, index) => {
    const n = `${index + 1}.`.padEnd(4)
    switch (message.role) {
      case "system":
        return Console.log(`   ${n}system: ${show(message.content)}`)
      case "user":
        return Console.log(
          `   ${n}user: ${show(message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join(""))}`
        )
      case "assistant": {
        const said = textOf(message)
        const calls = callsOf(message)
        return Console.log(
          `   ${n}assistant: ${said.length > 0 ? `"${show(said)}"` : ""}` +
            (calls.length > 0 ? `${said.length > 0 ? " " : ""}→ ${calls.join(", ")}` : "")
        )
      }
      case "tool":
        return Console.log(
          `   ${n}tool: ${
            message.content.map((part) => `${part.name} [${part.id}]${part.isFailure ? " (failed)" : ""}`).join(", ")
          }`
        )
    }
  }, { discard: true })

// -----------------------------------------------------------------------------
// approvals
// -----------------------------------------------------------------------------

const ask = (prompt: string) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const terminal = readline.createInterface({ input: process.stdin, output: process.stdout })
      // Ctrl-C at the prompt stops the demo (the run keeps waiting in its journal).
      terminal.on("SIGINT", () => process.kill(process.pid, "SIGINT"))
      return terminal
    }),
    (terminal) => Effect.promise((signal) => terminal.question(prompt, { signal })),
    (terminal) => Effect.sync(() => terminal.close())
  )

/** Asks in the terminal, or approves by itself when stdin is not a terminal. */
const decide = (request: HumanInTheLoop.ApprovalRequest) =>
  Effect.forEach(request.actionRequests, (action) =>
    Effect.gen(function*() {
      yield* Console.log(`\n   approval needed: ${action.toolName}(${show(action.args)}) [${action.callId}]`)
      if (!process.stdin.isTTY) {
        yield* Console.log("   stdin is not a terminal: approving (scripted decision)")
        return HumanInTheLoop.approve(action)
      }
      const answer = yield* ask("   approve? [y]es / [n]o (or Ctrl-C: stop here, decide after a restart): ")
      return /^y/i.test(answer.trim())
        ? HumanInTheLoop.approve(action)
        : HumanInTheLoop.reject(action, "The user did not allow reading this file.")
    }))

const principal = () => process.stdin.isTTY ? `local:${os.userInfo().username}` : "local:auto-approver"

/** Decisions are taken from local users only (a real app checks its own users and roles here). */
const AuthorizerLive = Authorizer.layer((request) => request.principal.startsWith("local:"))

// -----------------------------------------------------------------------------
// the program
// -----------------------------------------------------------------------------

const ended = (state: AgentWorkflow.RunState) => state === "Completed" || state === "Failed" || state === "Cancelled"

/**
 * Polls the run's status (the durable truth) until it has ended: prints each
 * change and answers each wait once.
 */
const follow = Effect.gen(function*() {
  const decided = new Set<string>()
  let last = ""
  while (true) {
    const status = yield* DemoRuns.status(runId)
    const line = status.state + Option.match(status.pending, { onNone: () => "", onSome: (p) => ` (${p.key})` })
    if (line !== last) {
      last = line
      yield* Console.log(`   [status] ${line}`)
    }
    if (ended(status.state)) return status
    if (status.state === "Waiting" && Option.isSome(status.pending) && !decided.has(status.pending.value.key)) {
      decided.add(status.pending.value.key)
      const request = yield* Schema.decodeUnknown(HumanInTheLoop.ApprovalRequest)(status.pending.value.value)
      const decisions = yield* decide(request)
      yield* DemoRuns.resume(runId, decisions, { principal: principal() }).pipe(
        Effect.catchIf(
          (error) => error instanceof RunStore.AlreadyDecided,
          () => Console.log("   (this approval was decided already; the run carries on with that decision)")
        )
      )
    }
    yield* Effect.sleep("200 millis")
  }
})

const report = (status: AgentWorkflow.RunStatus, counts: Counts) =>
  Effect.gen(function*() {
    yield* Console.log(`\n── run "${runId}" ${status.state}`)
    if (Option.isSome(status.outcome)) {
      const outcome = status.outcome.value
      yield* Console.log(`   answer: ${outcome.text}`)
      yield* Console.log(`   ${outcome.steps} model calls, ${outcome.usage.totalTokens} tokens`)
    }
    if (Option.isSome(status.failure)) yield* Console.log(`   failure: ${status.failure.value.message}`)
    yield* Console.log(`   transcript (from the checkpoint, ${status.messages.length} messages):`)
    yield* showTranscript(status.messages)
    yield* Console.log(
      `   this process: ${counts.modelsReplayed} model call(s) and ${counts.toolsReplayed} tool call(s) replayed ` +
        `from the journal; ${counts.modelsRan} model call(s) and ${counts.toolsRan} tool call(s) ran now`
    )
  })

const databaseFiles = (filename: string) => [filename, `${filename}-wal`, `${filename}-shm`]

/**
 * Deletes the run database and the notes, unless a runner still holds the
 * database: taking the engine's runner lock first fails with `EngineLocked`
 * then.
 */
const reset = (filename: string, notes: string) =>
  Effect.gen(function*() {
    yield* Effect.scoped(Layer.build(AgentEngine.layerSqlite({ filename })))
    const fs = yield* FileSystem.FileSystem
    yield* Effect.forEach([...databaseFiles(filename), notes], (file) => fs.remove(file, { force: true }), {
      discard: true
    })
    yield* Console.log(`Reset: deleted the run database and the notes in ${path.relative(".", path.dirname(filename))}`)
  })

/**
 * The durable demo: starts the run (or finds it in the journal), prints its
 * progress, answers its approval, and returns when it has ended.
 *
 * @example
 * ```ts
 * import { program } from "./durable.js"
 * import { NodeContext, NodeRuntime } from "@effect/platform-node"
 * import { Effect } from "effect"
 *
 * program({ pace: "200 millis" }).pipe(Effect.provide(NodeContext.layer), NodeRuntime.runMain)
 * ```
 *
 * @since 0.1.0
 * @category running
 */
export const program = (options?: Options | undefined) =>
  Effect.gen(function*() {
    const directory = path.resolve(options?.directory ?? ".stepwise")
    const filename = path.join(directory, "demo.db")
    const notes = path.join(directory, "demo-notes.md")
    const pace = Duration.decode(options?.pace ?? "1 second")
    if (options?.reset === true) yield* reset(filename, notes)

    const ran: Ran = { models: new Set(), tools: new Set() }
    const printer = makePrinter(ran)
    const ready = yield* Deferred.make<void>()
    // Subscribed before the workflow is registered: a run this runner resumes at start-up replays
    // its journaled steps at once, and those events would be missed by a later subscription.
    const Printer = Layer.scopedDiscard(Effect.gen(function*() {
      const events = yield* (yield* Agent.Agent).watch
      yield* Deferred.await(ready).pipe(
        Effect.zipRight(Stream.runForEach(
          Stream.filter(events, (event) => event.threadId === threadId),
          printer.print
        )),
        Effect.forkScoped
      )
    }))
    const Live = DemoRuns.layer.pipe(
      Layer.provideMerge(Printer),
      Layer.provideMerge(agentLayer(ran, printer.modelStarted, notes, pace)),
      Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer(), AuthorizerLive)),
      // On Ctrl-C the runner waits this long for the run in flight to stop (default 15 s); a step cut
      // off runs again on the next start, so there is nothing to wait for.
      Layer.provideMerge(AgentEngine.layerSqlite({ filename, sharding: { entityTerminationTimeout: "500 millis" } }))
    )

    yield* Effect.gen(function*() {
      yield* Console.log(`Durable demo: run "${runId}" journaled in ${path.relative(".", filename)}`)
      const existing = yield* Effect.option((yield* RunStore.RunStore).get(runId))
      if (Option.isNone(existing)) {
        yield* Console.log(`Starting run "${runId}". Stop it any time (Ctrl-C or kill) and start it again.`)
        yield* DemoRuns.start({ threadId, input: question, runId })
      } else {
        const found = yield* DemoRuns.status(runId)
        yield* Console.log(
          ended(found.state)
            ? `Run "${runId}" found in the journal, ${found.state} (--reset starts over).`
            : `Run "${runId}" found in the journal (${found.state}): carrying on where it stopped.`
        )
      }
      yield* Console.log(`\nUser: ${question}`)
      yield* Deferred.succeed(ready, void 0)
      const status = yield* follow
      yield* report(status, printer.counts)
      if (status.state === "Failed") return yield* Effect.fail(new Error(`run "${runId}" failed`))
    }).pipe(
      Effect.onInterrupt(() =>
        Console.log(`\nStopped. Run "${runId}" stays in its journal: start the demo again to carry on.`)
      ),
      Effect.provide(Live)
    )
  })

/**
 * Runs the durable demo with Node's services and runtime, reading
 * `args` with {@link parseArgs}; the process exits when the run has ended.
 *
 * @example
 * ```ts
 * import { main } from "./durable.js"
 *
 * main(process.argv.slice(2))
 * ```
 *
 * @since 0.1.0
 * @category running
 */
export const main = (args: ReadonlyArray<string>): void =>
  program(parseArgs(args)).pipe(
    Effect.catchIf((error) => error instanceof AgentEngine.EngineLocked, (locked) =>
      Effect.zipRight(
        Console.error(
          `The demo is running in another process${locked.pid === undefined ? "" : ` (pid ${locked.pid})`}: ` +
            `stop it, or let it finish, first.`
        ),
        Effect.sync(() => void (process.exitCode = 1))
      )),
    Effect.provide(NodeContext.layer),
    NodeRuntime.runMain
  )

// Run as a script (`tsx packages/demo/src/durable.ts`, as the tests do), not only through main.ts.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2))
}
