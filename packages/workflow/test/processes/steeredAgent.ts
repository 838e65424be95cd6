/**
 * A durable agent with steering in a process of its own, for the tests of
 * `AgentWorkflow.send` across processes.
 *
 * Environment:
 * - DB: the SQLite file; GO: a file whose existence lets the search tool answer.
 * - ROLE=runner: executes runs. START=<runId> starts that run on thread-1 first.
 *   Prints `searching` when the tool waits for GO, and `done <runId> <json>` for each run of thread-1
 *   that has ended, then exits once EXPECT_RUNS (default 1) runs have ended.
 *   KILL_AFTER_CLAIM=1: once a look into the inbox has claimed stored messages, prints `claimed <n>` and
 *   hangs before the look's result is journaled (the test SIGKILLs it there).
 * - ROLE=sender (client only): sends MESSAGE to thread-1 with MODE, prints `sent <receipt json>`.
 * - ROLE=client (client only, the whole stack an API process builds): prints `up` and stays until killed.
 * - ROLE=starter (client only, the whole stack): starts START on thread-1, prints `started`. With
 *   REGISTER_GO=<file>, its start prints `registered` once the run is registered and waits for that file
 *   before executing it.
 *
 * - HEARTBEAT_MS: how often a runner renews its lease (default 2 s; the lease still lasts its default 10 s).
 *
 * The model answers from the prompt: a search after the first user message, then the user messages it
 * saw, joined by " | ".
 */
import { Tool, Toolkit } from "@effect/ai"
import { NodeRuntime } from "@effect/platform-node"
import { Agent } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Duration, Effect, Layer, Option, Schema } from "effect"
import * as fs from "node:fs"
import { LeaseTiming } from "../../src/internal/leaseTiming.js"

const env = (name: string) => process.env[name] ?? ""

const Search = Tool.make("search", { parameters: { query: Schema.String }, success: Schema.String })
  .annotate(Tool.Readonly, true)
const Tools = Toolkit.make(Search)

const ToolsLive = Tools.toLayer({
  search: ({ query }) =>
    Effect.gen(function*() {
      console.log("searching")
      while (!fs.existsSync(env("GO"))) yield* Effect.sleep("20 millis")
      return `results for ${query}`
    })
})

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : (content as ReadonlyArray<{ type: string; text?: string }>).flatMap((part) =>
      part.type === "text" ? [part.text!] : []
    ).join("")

const answer: ScriptedModel.Turn = (request) =>
  request.prompt.content.some((message) => message.role === "tool")
    ? ScriptedModel.text(
      request.prompt.content.filter((message) => message.role === "user").map((message) => textOf(message.content))
        .join(" | ")
    )
    : ScriptedModel.toolCalls([{ name: "search", params: { query: "flights" }, id: "call_1" }])

export const Runs = AgentWorkflow.make({ name: "steered-across-processes", version: 1, steering: true })

const AgentLive = Agent.layer({ toolkit: Tools }).pipe(
  Layer.provide(Layer.mergeAll(ScriptedModel.layer(Array.from({ length: 20 }, () => answer)), ToolsLive))
)

/** The store, holding a registered run back until REGISTER_GO exists (REGISTER_GO set). */
const PausedStoreLive = Layer.effect(
  RunStore.RunStore,
  Effect.map(RunStore.make(), (store) =>
    RunStore.RunStore.of({
      ...store,
      register: (run) =>
        Effect.tap(store.register(run), () =>
          Effect.gen(function*() {
            console.log("registered")
            while (!fs.existsSync(env("REGISTER_GO"))) yield* Effect.sleep("20 millis")
          }))
    }))
)

/** The store, hanging once a look has claimed stored messages (KILL_AFTER_CLAIM=1). */
const StoreLive = env("REGISTER_GO") !== "" ? PausedStoreLive : env("KILL_AFTER_CLAIM") === "1"
  ? Layer.effect(
    RunStore.RunStore,
    Effect.map(RunStore.make(), (store) =>
      RunStore.RunStore.of({
        ...store,
        claimSteered: (threadId, runId, look) =>
          Effect.tap(store.claimSteered(threadId, runId, look), (claimed) =>
            claimed.length === 0 ? Effect.void : Effect.zipRight(
              Effect.sync(() =>
                console.log(`claimed ${claimed.length}`)
              ),
              Effect.never
            ))
      }))
  )
  : RunStore.layer()

const role = env("ROLE")
const Engine = AgentEngine.layerSqlite({
  filename: env("DB"),
  pollInterval: "100 millis",
  clientOnly: role !== "runner"
}).pipe(Layer.provide(
  env("HEARTBEAT_MS") === "" ? Layer.empty : Layer.succeed(LeaseTiming, {
    leaseFor: LeaseTiming.defaultValue().leaseFor,
    heartbeatEvery: Duration.millis(Number(env("HEARTBEAT_MS")))
  })
))
const Main = Runs.layer.pipe(
  Layer.provideMerge(AgentLive),
  Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), StoreLive)),
  Layer.provideMerge(Engine)
)

const runner = Effect.gen(function*() {
  if (env("START") !== "") yield* Runs.start({ threadId: "thread-1", input: "find flights", runId: env("START") })
  const expected = Number(env("EXPECT_RUNS") || "1")
  const ended = new Set<string>()
  while (ended.size < expected) {
    for (const record of yield* Effect.flatMap(RunStore.RunStore, (store) => store.list({ threadId: "thread-1" }))) {
      if (ended.has(record.runId)) continue
      const status = yield* Runs.status(record.runId)
      if (status.state === "Running" || status.state === "Waiting") continue
      ended.add(record.runId)
      const users = status.messages.filter((message) => message.role === "user").map((m) => textOf(m.content))
      const text = Option.match(status.outcome, { onNone: () => "", onSome: (outcome) => outcome.text })
      console.log(`done ${record.runId} ${JSON.stringify({ state: status.state, users, text })}`)
    }
    yield* Effect.sleep("50 millis")
  }
}).pipe(Effect.provide(Main))

const sender = Effect.gen(function*() {
  const mode = env("MODE") === "queue" ? "queue" : "steer"
  const receipt = yield* Runs.send("thread-1", env("MESSAGE"), { mode })
  console.log(`sent ${JSON.stringify({ ...receipt, runId: Option.getOrNull(receipt.runId) })}`)
}).pipe(Effect.provide(RunStore.layer().pipe(Layer.provideMerge(Engine))))

const client = Effect.sync(() => console.log("up")).pipe(Effect.zipRight(Effect.never), Effect.provide(Main))

const starter = Runs.start({ threadId: "thread-1", input: "find flights", runId: env("START") }).pipe(
  Effect.zipRight(Effect.sync(() => console.log("started"))),
  Effect.provide(Main)
)

const main: Effect.Effect<void, unknown> = role === "runner"
  ? runner
  : role === "client"
  ? client
  : role === "starter"
  ? starter
  : sender
NodeRuntime.runMain(main, { disableErrorReporting: false })
