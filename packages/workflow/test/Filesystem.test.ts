import { assert, describe, it } from "@effect/vitest"
import { Agent } from "@stepwise-agent/core"
import { Filesystem, HumanInTheLoop } from "@stepwise-agent/middleware"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import { Effect, Layer, Option, Schema } from "effect"

/** The approval request a durable run's wait carries (its status is untyped); `None` for another middleware's. */
const approvalOf = (wait: { readonly value: unknown }) =>
  Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)

const Runs = AgentWorkflow.make({ name: "files-agent", version: 1 })

const durable = <E>(agent: Layer.Layer<Agent.Agent, E>) =>
  Runs.layer.pipe(
    Layer.provideMerge(agent),
    Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory)),
    Layer.provideMerge(Authorizer.layer(() => true))
  )

const resultOf = (status: AgentWorkflow.RunStatus, id: string) =>
  status.messages.flatMap((message) =>
    message.role === "tool" ? message.content.filter((part) => part.type === "tool-result" && part.id === id) : []
  )[0]!

describe("Filesystem in a durable run", () => {
  it.scopedLive("the files of the state slice move through journaled tool results, across an approval wait", () =>
    Effect.gen(function*() {
      const script = [
        ScriptedModel.toolCalls([{ name: "write_file", params: { file_path: "/a.md", content: "hello" }, id: "w" }]),
        ScriptedModel.toolCalls([{
          name: "edit_file",
          params: { file_path: "/a.md", old_string: "hello", new_string: "hi" },
          id: "e"
        }]),
        ScriptedModel.toolCalls([{ name: "read_file", params: { file_path: "/a.md" }, id: "r" }]),
        ScriptedModel.text("done")
      ]
      const agent = Layer.unwrapEffect(Effect.gen(function*() {
        const hitl = HumanInTheLoop.middleware({ toolkit: Filesystem.toolkit, interruptOn: { edit_file: true } })
        return Agent.layer({ middleware: [Filesystem.middleware(), hitl] })
      })).pipe(Layer.provide(ScriptedModel.layer(script)))
      const context = yield* Layer.build(durable(agent))
      const runId = yield* Runs.start({ threadId: "t", input: "write, edit, read" }).pipe(Effect.provide(context))
      const waiting = yield* Runs.await(runId, { untilWaiting: true }).pipe(Effect.provide(context))
      assert.strictEqual(waiting.state, "Waiting")
      // the write's result, as journaled and checkpointed, carries the file it wrote
      assert.deepStrictEqual(Filesystem.changesOf(resultOf(waiting, "w")), { "/a.md": "hello" })

      const request = Option.getOrThrow(Option.flatMap(waiting.pending, approvalOf))
      yield* Runs.resume(runId, HumanInTheLoop.approveAll(request), { principal: "alice" }).pipe(
        Effect.provide(context)
      )
      const done = yield* Runs.await(runId).pipe(Effect.provide(context))
      assert.strictEqual(done.state, "Completed")
      assert.strictEqual(resultOf(done, "e").result, "Replaced 1 occurrence in /a.md")
      assert.strictEqual(resultOf(done, "r").result, "     1\thi")
    }))
})
