import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentState } from "@stepwise-agent/core"
import { ContextEditing, Summarization } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import { Effect, FastCheck, Layer, Schema } from "effect"

const Search = Tool.make("search", {
  description: "Searches",
  parameters: { query: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(Search)
const ToolsLive = Tools.toLayer({ search: ({ query }) => Effect.succeed(`${query}: ${"x".repeat(400)}`) })

const Runs = AgentWorkflow.make({ name: "view-agent", version: 1 })

/** 1–6 turns of 1–2 searches each, then an answer. */
const scripts = FastCheck.array(FastCheck.array(FastCheck.string({ maxLength: 10 }), { minLength: 1, maxLength: 2 }), {
  minLength: 1,
  maxLength: 6
}).map((turns): ReadonlyArray<ScriptedModel.Turn> => [
  ...turns.map((queries, turn) =>
    ScriptedModel.toolCalls(queries.map((query, i) => ({ name: "search", params: { query }, id: `c${turn}_${i}` })))
  ),
  ScriptedModel.text("done")
])

/** Both context policies in view mode, made afresh for each agent. */
const policies = Effect.sync(() => {
  const editing = ContextEditing.middleware({
    edits: [ContextEditing.clearToolUses({ trigger: 400, clearTo: 200, keep: 1 })],
    mode: "view"
  })
  const summarization = Summarization.middleware({ trigger: { messages: 6 }, keep: { messages: 2 }, mode: "view" })
  return [editing, summarization] as const
})

const summarizer = Effect.map(
  ScriptedModel.make(
    Array.from(
      { length: 50 },
      () => (request: ScriptedModel.Request) =>
        ScriptedModel.text(`summary of ${JSON.stringify(request.prompt.content).length} characters`)
    )
  ),
  (made) => Summarization.layer(made.model)
)

const sent = (requests: ReadonlyArray<ScriptedModel.Request>) =>
  JSON.stringify(requests.map((request) => AgentState.encodeMessages(request.prompt.content)))

describe("view mode in a durable run", () => {
  it.live.prop(
    "the model is sent the same views, and the stored thread is the same, as in process",
    { script: scripts },
    ({ script }) =>
      Effect.gen(function*() {
        const local = yield* ScriptedModel.make(script)
        const inProcess = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({ toolkit: Tools, middleware: yield* policies })
          return yield* agent.run("look things up", { threadId: "t" })
        }).pipe(
          Effect.provideService(LanguageModel.LanguageModel, local.model),
          Effect.provide(ToolsLive),
          Effect.provide(yield* summarizer)
        )

        const remote = yield* ScriptedModel.make(script)
        const agent = Layer.unwrapEffect(
          Effect.map(policies, (middleware) => Agent.layer({ toolkit: Tools, middleware }))
        ).pipe(
          Layer.provide(Layer.mergeAll(
            Layer.succeed(LanguageModel.LanguageModel, remote.model),
            ToolsLive,
            yield* summarizer
          ))
        )
        const status = yield* Effect.gen(function*() {
          const runId = yield* Runs.start({ threadId: "t", input: "look things up" })
          return yield* Runs.await(runId)
        }).pipe(
          Effect.provide(
            Runs.layer.pipe(
              Layer.provideMerge(agent),
              Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory)),
              Layer.provideMerge(Authorizer.layer(() => true))
            )
          )
        )
        assert.strictEqual(status.state, "Completed")
        assert.strictEqual(sent(yield* remote.recorder.requests), sent(yield* local.recorder.requests))
        // long enough scripts reach the summary trigger: the view is in what the model was sent
        const requests = yield* remote.recorder.requests
        const last = requests[requests.length - 1]!.prompt.content
        assert.strictEqual(last.some(Summarization.isSummary), script.length >= 4)
        assert.strictEqual(
          JSON.stringify(AgentState.encodeMessages(status.messages)),
          JSON.stringify(AgentState.encodeMessages(inProcess.state.messages))
        )
      }),
    { fastCheck: { numRuns: 10 } }
  )
})
