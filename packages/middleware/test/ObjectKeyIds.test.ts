/**
 * Ids and keys a model or a tool writes are data, never a plain object's
 * own machinery: a call id, a field of a tool result or a file path named
 * `__proto__`, `constructor` or `toString` is kept and routed like any other.
 */
import type { Prompt } from "@effect/ai"
import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type Wait } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Option, Ref, Schema } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as SubAgents from "../src/SubAgents.js"

const DeleteFile = Tool.make("delete_file", {
  description: "Deletes a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(DeleteFile)

const lastUserText = (prompt: Prompt.Prompt): string => {
  const last = prompt.content.at(-1)
  if (last?.role === "user") return last.content.map((part) => (part.type === "text" ? part.text : "")).join("")
  return last?.role === "tool" ? "tool" : ""
}

/** A child that deletes the file its task names once a person approves. */
const cleaner = (log: Ref.Ref<ReadonlyArray<string>>) =>
  Effect.gen(function*() {
    const { model } = yield* ScriptedModel.make(
      Array.from({ length: 20 }, () => (request: ScriptedModel.Request) => {
        const last = lastUserText(request.prompt)
        return last === "tool"
          ? ScriptedModel.text("cleaned")
          : ScriptedModel.toolCalls([{ name: "delete_file", params: { path: last } }])
      })
    )
    return yield* Agent.make({
      toolkit: Tools,
      middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })]
    }).pipe(
      Effect.provideService(LanguageModel.LanguageModel, model),
      Effect.provide(Tools.toLayer({
        delete_file: ({ path }) => Effect.as(Ref.update(log, (all) => [...all, path]), `deleted ${path}`)
      }))
    )
  })

const approveAll = (interrupt: Wait.Interrupt<SubAgents.Waits>) =>
  SubAgents.decide(
    interrupt,
    (leaf) =>
      Option.getOrUndefined(
        Option.map(
          Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(leaf.interrupt.value),
          HumanInTheLoop.approveAll
        )
      )
  )

describe("ids that name an object's machinery", () => {
  it.effect("subagent calls with the ids __proto__, constructor and toString are decided and resumed", () =>
    Effect.gen(function*() {
      const ids = ["__proto__", "constructor", "toString"]
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const { model } = yield* ScriptedModel.make([
        ScriptedModel.toolCalls(
          ids.map((id) => ({ id, name: "task", params: { agent: "cleaner", task: `${id}.txt` } }))
        ),
        ScriptedModel.text("all done")
      ])
      const agent = yield* Agent.make({
        middleware: [
          SubAgents.middleware({ agents: { cleaner: { description: "Deletes", agent: yield* cleaner(log) } } })
        ]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      const first = yield* agent.run("Delete them", { threadId: "p" })
      assert.strictEqual(first._tag, "Interrupted")
      if (first._tag !== "Interrupted") return
      assert.deepStrictEqual(SubAgents.leaves(first.interrupt).map((leaf) => leaf.path[0]!.callId), ids)
      const decisions = approveAll(first.interrupt)
      assert.deepStrictEqual(Object.keys(decisions as object), ids)
      const done = yield* agent.resume("p", decisions)
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual([...(yield* Ref.get(log))].sort(), ids.map((id) => `${id}.txt`).sort())
    }))
})
