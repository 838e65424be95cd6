/**
 * A durable agent in a process of its own, for the cross-process tests.
 *
 * Environment:
 * - DB: the SQLite file; SIDE: a file the tool appends its side effects to.
 * - ROLE=runner: executes runs. START=<runId> starts that run first.
 *   EXIT_WHEN_WAITING=1 exits once the run waits for a decision.
 *   Prints `status <runId> <state> [<pending key>]` on each change and `done <json>` at the end.
 * - ROLE=client: DECIDE=<json> answers run RUN_ID as PRINCIPAL, prints `decided` or `error <tag>`.
 * - APPROVAL=1 gates delete_file behind HumanInTheLoop.
 * - SUBAGENT=1: the agent delegates (SubAgents' `task`, call `task_1`) to a
 *   `cleaner` child that deletes /tmp/a (behind HumanInTheLoop in the child
 *   with APPROVAL=1) and answers "cleaned"; every model call is logged to
 *   SIDE as `model <agent> <tool results seen>`.
 * - HANG_FIRST=1: the first attempt of a tool call writes its effect, prints
 *   `tool <key>` and never returns (the test SIGKILLs the process there).
 *
 * The model answers from the prompt (not from a counter), so a fresh process
 * continues a run where the last one stopped: it deletes /tmp/a, then /tmp/b,
 * then says it is done. The tool writes its side effect once per idempotency
 * key, and logs every attempt.
 */
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { NodeRuntime } from "@effect/platform-node"
import { Agent, ToolContext, ToolEffect } from "@stepwise-agent/core"
import { HumanInTheLoop, SubAgents } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Effect, Layer, Option, Schema } from "effect"
import * as fs from "node:fs"

const env = (name: string) => process.env[name] ?? ""

const Delete = Tool.make("delete_file", {
  description: "Deletes a file",
  parameters: { path: Schema.String },
  success: Schema.String
  // it writes once per key: a call cut off by a crash runs again
}).pipe(ToolEffect.declare(ToolEffect.idempotent({ key: (_, call) => `${call.threadId}/${call.callId}` })))
const Tools = Toolkit.make(Delete)

const ToolsLive = Tools.toLayer({
  delete_file: ({ path }) =>
    Effect.gen(function*() {
      const { idempotencyKey } = yield* Effect.orDie(ToolContext.current)
      const side = env("SIDE")
      const before = fs.existsSync(side) ? fs.readFileSync(side, "utf8").split("\n") : []
      fs.appendFileSync(side, `attempt ${idempotencyKey}\n`)
      if (!before.includes(`effect ${idempotencyKey}`)) fs.appendFileSync(side, `effect ${idempotencyKey}\n`)
      console.log(`tool ${idempotencyKey}`)
      if (env("HANG_FIRST") === "1" && !before.includes(`attempt ${idempotencyKey}`)) return yield* Effect.never
      return `deleted ${path}`
    })
})

/** Deletes /tmp/a, then /tmp/b, then answers — decided from the prompt alone. */
const answer: ScriptedModel.Turn = (request) => {
  const results = request.prompt.content.filter((message) => message.role === "tool").length
  return results === 0
    ? ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/tmp/a" }, id: "call_1" }])
    : results === 1
    ? ScriptedModel.toolCalls([{ name: "delete_file", params: { path: "/tmp/b" }, id: "call_2" }])
    : ScriptedModel.text("Both files are deleted.")
}

const toolResults = (request: ScriptedModel.Request) =>
  request.prompt.content.filter((message) => message.role === "tool").length

/** A turn that logs the model call to SIDE first. */
const logged =
  (agent: string, turn: (request: ScriptedModel.Request) => ReturnType<typeof ScriptedModel.text>) =>
  (request: ScriptedModel.Request) => {
    fs.appendFileSync(env("SIDE"), `model ${agent} ${toolResults(request)}\n`)
    return turn(request)
  }

/** Delegates once to the cleaner, then answers. */
const lead = logged("lead", (request) =>
  toolResults(request) === 0
    ? ScriptedModel.toolCalls([{ name: "task", params: { agent: "cleaner", task: "/tmp/a" }, id: "task_1" }])
    : ScriptedModel.text("The cleaner is done."))

/** Deletes the file its task names, then says "cleaned". */
const cleanerTurn = logged("cleaner", (request) => {
  const first = request.prompt.content.find((message) => message.role === "user")
  const path = first?.role === "user" && first.content[0]?.type === "text" ? first.content[0].text : ""
  return toolResults(request) === 0
    ? ScriptedModel.toolCalls([{ name: "delete_file", params: { path }, id: "call_1" }])
    : ScriptedModel.text("cleaned")
})

export const Runs = AgentWorkflow.make({ name: "cross-process-agent", version: 1 })

const AgentLive = Layer.unwrapEffect(Effect.gen(function*() {
  const middleware = env("APPROVAL") === "1"
    ? [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })]
    : []
  if (env("SUBAGENT") !== "1") return Agent.layer({ toolkit: Tools, middleware })
  // the child keeps its thread in the same SQL store as the parent (a child's resume loads it from there)
  const { model } = yield* ScriptedModel.make(Array.from({ length: 20 }, () => cleanerTurn))
  const cleaner = yield* Agent.make({ toolkit: Tools, middleware }).pipe(
    Effect.provideService(LanguageModel.LanguageModel, model)
  )
  return Agent.layer({
    middleware: [SubAgents.middleware({ agents: { cleaner: { description: "Deletes files", agent: cleaner } } })]
  }).pipe(Layer.provide(ScriptedModel.layer(Array.from({ length: 20 }, () => lead))))
})).pipe(
  Layer.provide(Layer.mergeAll(ScriptedModel.layer(Array.from({ length: 20 }, () => answer)), ToolsLive))
)

const clientOnly = env("ROLE") === "client"
const Engine = AgentEngine.layerSqlite({ filename: env("DB"), pollInterval: "200 millis", clientOnly })
const Stores = Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())
const Main = Runs.layer.pipe(
  Layer.provideMerge(AgentLive),
  Layer.provideMerge(Stores),
  Layer.provideMerge(Authorizer.layer(() => true)),
  Layer.provideMerge(Engine)
)
const Client = AgentLive.pipe(
  Layer.provideMerge(Stores),
  Layer.provideMerge(Authorizer.layer(() => true)),
  Layer.provideMerge(Engine)
)

const runner = Effect.gen(function*() {
  const runId = env("START") !== ""
    ? yield* Runs.start({ threadId: "thread-1", input: "Delete /tmp/a and /tmp/b", runId: env("START") })
    : env("RUN_ID")
  let last = ""
  while (true) {
    const status = yield* Runs.status(runId)
    const line = `status ${runId} ${status.state}${
      status.pending._tag === "Some" ? ` ${status.pending.value.key}` : ""
    }`
    if (line !== last) {
      last = line
      console.log(line)
    }
    if (status.state === "Waiting" && env("EXIT_WHEN_WAITING") === "1") return
    if (status.state === "Completed" || status.state === "Failed" || status.state === "Cancelled") {
      const results = status.messages.flatMap((message) =>
        message.role === "tool"
          ? message.content.flatMap((part) => part.type === "tool-result" ? [part.result] : [])
          : []
      )
      console.log(`done ${JSON.stringify({ state: status.state, messages: status.messages.length, results })}`)
      return
    }
    yield* Effect.sleep("50 millis")
  }
}).pipe(Effect.provide(Main))

const client = Effect.gen(function*() {
  // the client is shown the wait the run is in and decides its calls by id, at once: each decision gets the
  // binding of the action shown for its call (a decision naming no waiting call stays unbound, and is refused)
  const waiting = (yield* Runs.status(env("RUN_ID"))).pending
  const decisions = JSON.parse(env("DECIDE")) as ReadonlyArray<{ readonly callId: string }>
  const bound = (wait: { readonly value: unknown }) =>
    Option.match(Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value), {
      onNone: () => decisions,
      onSome: (request) =>
        decisions.map((decision) => {
          const action = request.actionRequests.find((action) => action.callId === decision.callId)
          return action === undefined
            ? decision
            : { ...decision, waitKey: action.waitKey, fingerprint: action.fingerprint }
        })
    })
  // a wait of a subagent's is answered down its path
  const value = Option.match(waiting, {
    onNone: () => decisions,
    onSome: (wait) => SubAgents.decide(wait, (leaf) => bound(leaf.interrupt))
  })
  yield* Runs.resume(env("RUN_ID"), value, { principal: env("PRINCIPAL") || "tester" })
  console.log("decided")
}).pipe(
  Effect.catchAll((error) =>
    Effect.sync(() => console.log(`error ${(error as { _tag?: string })._tag ?? String(error)}`))
  ),
  Effect.provide(Client)
)

NodeRuntime.runMain(clientOnly ? client : runner, { disableErrorReporting: false })
