/**
 * A durable agent with one tool that writes (`send_email`), in a process of
 * its own, for the effect-ledger crash tests.
 *
 * Environment:
 * - DB: the SQLite file; SIDE: a file the tool appends `attempt <key>` to on
 *   every run, and its undo `undo <key>`.
 * - EFFECT: what `send_email` declares: `uncertain` (default), `idempotent`
 *   or `compensatable`.
 * - START=<runId> starts that run; RUN_ID=<runId> only follows it.
 * - CRASH_AT=<point>: the process SIGKILLs itself at that point of the call
 *   (`beforeStarted`, `afterMarked`: marked started, the tool not begun,
 *   `afterStarted`: the tool ran, its result not recorded, `afterResult`).
 * - HANG=1: the tool prints `tool running`, then blocks (the test SIGKILLs
 *   the process from outside).
 * - DECIDE=retry|markDone|compensate|wrongStep: answers the Uncertain question.
 * - SUBAGENT=1: `send_email` is the tool of a child agent ("mailer", with
 *   `ToolEffect.middleware()`) that the durable agent delegates to with
 *   `SubAgents`: the question is the child's, and the parent waits on it.
 * - CALLS=<n>: the model sends n emails, one call after another (`call_1`…),
 *   before it answers (default 1); TOOL_MS=<ms>: each call takes that long.
 * - LEASE_MS / HEARTBEAT_MS: the runner lease's length and renewal interval.
 *
 * Prints `waiting <request json>` when the run waits on the question,
 * `error <tag>` when a decision is refused, `done <json>` at the end, and
 * `lost <EngineLocked json>` (then idles) when the runner lost its lease.
 */
import { Tool, Toolkit } from "@effect/ai"
import { LanguageModel } from "@effect/ai"
import { NodeRuntime } from "@effect/platform-node"
import { Agent, ToolContext, ToolEffect } from "@stepwise-agent/core"
import { SubAgents } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Duration, Effect, Layer, Option, Schema } from "effect"
import * as fs from "node:fs"
import { LeaseTiming } from "../../src/internal/leaseTiming.js"
import { CrashSeam } from "../../src/internal/ledger.js"

const env = (name: string) => process.env[name] ?? ""

const side = (line: string) => fs.appendFileSync(env("SIDE"), `${line}\n`)

const declared = env("EFFECT") === "idempotent"
  ? ToolEffect.idempotent()
  : env("EFFECT") === "compensatable"
  ? ToolEffect.compensatable({ undo: (_params, entry) => Effect.sync(() => side(`undo ${entry.idempotencyKey}`)) })
  : ToolEffect.uncertain

const SendEmail = Tool.make("send_email", {
  parameters: { to: Schema.String },
  success: Schema.String
}).pipe(ToolEffect.declare(declared))
const Tools = Toolkit.make(SendEmail)

const ToolsLive = Tools.toLayer({
  send_email: ({ to }) =>
    Effect.gen(function*() {
      const { idempotencyKey } = yield* Effect.orDie(ToolContext.current)
      side(`attempt ${idempotencyKey}`)
      if (env("TOOL_MS") !== "") yield* Effect.sleep(Number(env("TOOL_MS")))
      if (env("HANG") === "1") {
        console.log("tool running")
        return yield* Effect.never
      }
      return `sent to ${to}`
    })
})

const calls = env("CALLS") === "" ? 1 : Number(env("CALLS"))

/** Sends `calls` emails, one after another, then answers with what the tool gave last. */
const answer: ScriptedModel.Turn = (request) => {
  const results = request.prompt.content.flatMap((message) =>
    message.role === "tool" ? message.content.flatMap((part) => part.type === "tool-result" ? [part] : []) : []
  )
  return results.length < calls
    ? ScriptedModel.toolCalls([{
      name: "send_email",
      params: { to: "ada@example.com" },
      id: `call_${results.length + 1}`
    }])
    : ScriptedModel.text(`answer after ${JSON.stringify(results.at(-1)!.result)}`)
}

export const Runs = AgentWorkflow.make({ name: "ledger-agent", version: 1 })

/** Delegates the email to the mailer once, then answers with what it said. */
const lead: ScriptedModel.Turn = (request) =>
  request.prompt.content.some((message) => message.role === "tool")
    ? ScriptedModel.text("the mailer is done")
    : ScriptedModel.toolCalls([{ name: "task", params: { agent: "mailer", task: "Email Ada" }, id: "task_1" }])

const AgentLive = env("SUBAGENT") !== "1"
  ? Agent.layer({ toolkit: Tools, middleware: [ToolEffect.middleware()] }).pipe(
    Layer.provide(Layer.mergeAll(ScriptedModel.layer(Array.from({ length: calls + 10 }, () => answer)), ToolsLive))
  )
  : Layer.unwrapEffect(Effect.gen(function*() {
    const { model } = yield* ScriptedModel.make(Array.from({ length: 10 }, () => answer))
    const mailer = yield* Agent.make({ toolkit: Tools, middleware: [ToolEffect.middleware()] }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model)
    )
    return Agent.layer({
      middleware: [SubAgents.middleware({ agents: { mailer: { description: "Sends emails", agent: mailer } } })]
    }).pipe(Layer.provide(ScriptedModel.layer(Array.from({ length: 10 }, () => lead))))
  })).pipe(Layer.provide(ToolsLive))

/** Kills this process at `CRASH_AT`, once the call gets there. */
const CrashLive = Layer.succeed(
  CrashSeam,
  (point) =>
    point === env("CRASH_AT")
      ? Effect.sync(() => {
        console.log(`crash ${point}`)
        process.kill(process.pid, "SIGKILL")
      }).pipe(Effect.zipRight(Effect.never))
      : Effect.void
)

const Main = Runs.layer.pipe(
  Layer.provideMerge(AgentLive),
  Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer(), Authorizer.layer(() => true))),
  Layer.provideMerge(AgentEngine.layerSqlite({ filename: env("DB"), pollInterval: "200 millis" })),
  Layer.provide(CrashLive),
  Layer.provide(
    env("LEASE_MS") === "" ? Layer.empty : Layer.succeed(LeaseTiming, {
      leaseFor: Duration.millis(Number(env("LEASE_MS"))),
      heartbeatEvery: Duration.millis(Number(env("HEARTBEAT_MS")))
    })
  )
)

const decisionOf = (request: ToolEffect.UncertainRequest): ToolEffect.UncertainDecision => {
  switch (env("DECIDE")) {
    case "markDone":
      return ToolEffect.markDone(request, "sent by hand")
    case "compensate":
      return ToolEffect.compensate(request)
    case "wrongStep":
      return { ...ToolEffect.retry(request), step: "tool/call_9" }
    default:
      return ToolEffect.retry(request)
  }
}

const runner = Effect.gen(function*() {
  const runId = env("START") !== ""
    ? yield* Runs.start({ threadId: "thread-1", input: "Email Ada", runId: env("START") })
    : env("RUN_ID")
  let decided = false
  while (true) {
    const status = yield* Runs.status(runId)
    if (status.state === "Waiting" && Option.isSome(status.pending) && !decided) {
      // the question itself, or the one a child waits on (SUBAGENT)
      const [leaf] = SubAgents.leaves(status.pending.value)
      const request = Schema.decodeUnknownSync(ToolEffect.UncertainRequest)(leaf!.interrupt.value)
      console.log(`waiting ${JSON.stringify({ key: leaf!.interrupt.key, path: leaf!.path, ...request })}`)
      if (env("DECIDE") === "") return
      decided = true
      const decision = SubAgents.decide(status.pending.value, () => decisionOf(request))
      const refused = yield* Runs.resume(runId, decision as ToolEffect.UncertainDecision, { principal: "tester" }).pipe(
        Effect.as(undefined),
        Effect.catchAll((error) => Effect.succeed(error))
      )
      if (refused !== undefined) {
        const cause = (refused as { readonly error?: { readonly _tag?: string } }).error?._tag
        console.log(`error ${refused._tag}${cause === undefined ? "" : ` ${cause}`}`)
        return
      }
    }
    if (status.state === "Completed" || status.state === "Failed" || status.state === "Cancelled") {
      const results = status.messages.flatMap((message) =>
        message.role === "tool"
          ? message.content.flatMap((part) => part.type === "tool-result" ? [part.result] : [])
          : []
      )
      const text = Option.getOrUndefined(Option.map(status.outcome, (outcome) => outcome.text))
      console.log(`done ${JSON.stringify({ state: status.state, results, text })}`)
      return
    }
    yield* Effect.sleep("50 millis")
  }
}).pipe(
  Effect.catchAllDefect((defect) =>
    defect instanceof AgentEngine.EngineLocked
      ? Effect.zipRight(Effect.sync(() => console.log(`lost ${JSON.stringify(defect)}`)), Effect.never)
      : Effect.die(defect)
  ),
  Effect.provide(Main)
)

NodeRuntime.runMain(runner, { disableErrorReporting: false })
