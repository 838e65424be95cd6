/**
 * A durable agent on SQLite whose only tool, `delete_file`, waits for an
 * approval (`HumanInTheLoop`) before each call: the workflow, the agent, the
 * stores and the engine on `filename`, with a model scripted by `answer`
 * for `turns` calls and the deleted paths recorded in `ran`.
 */
import { Tool, Toolkit } from "@effect/ai"
import { Agent } from "@stepwise-agent/core"
import { HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import type * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import * as SqlCheckpointer from "@stepwise-agent/workflow/SqlCheckpointer"
import { Effect, Layer, Schema } from "effect"

export const Delete = Tool.make("delete_file", { parameters: { path: Schema.String }, success: Schema.String })
export const Tools = Toolkit.make(Delete)

export const approvalStack = (options: {
  readonly runs: AgentWorkflow.AgentWorkflow
  readonly answer: ScriptedModel.Turn
  readonly turns: number
  readonly filename: string
  readonly ran: Array<string>
}) =>
  options.runs.layer.pipe(
    Layer.provideMerge(Agent.layer({
      toolkit: Tools,
      middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })]
    })),
    Layer.provide(Layer.merge(
      ScriptedModel.layer(Array.from({ length: options.turns }, () => options.answer)),
      Tools.toLayer({ delete_file: ({ path }) => Effect.sync(() => (options.ran.push(path), `deleted ${path}`)) })
    )),
    Layer.provideMerge(Layer.mergeAll(SqlCheckpointer.layer(), RunStore.layer())),
    Layer.provideMerge(Authorizer.layer(() => true)),
    Layer.provideMerge(AgentEngine.layerSqlite({ filename: options.filename, pollInterval: "100 millis" }))
  )
