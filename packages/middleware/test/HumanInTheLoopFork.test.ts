import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, FastCheck, Option, Ref, Schema } from "effect"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"

const DeleteFile = Tool.make("delete_file", {
  description: "Deletes a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(DeleteFile)

/** An agent gating `delete_file`, on a scripted model; `log` lists the tool runs, by thread. */
const setup = Effect.gen(function*() {
  const log = yield* Ref.make<ReadonlyArray<string>>([])
  const model = yield* ScriptedModel.make([
    ScriptedModel.toolCalls([{ id: "c1", name: "delete_file", params: { path: "/tmp/a" } }]),
    ScriptedModel.text("deleted"),
    ScriptedModel.text("deleted"),
    ScriptedModel.text("deleted")
  ])
  const agent = yield* Agent.make({
    toolkit: Tools,
    middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })]
  }).pipe(
    Effect.provideService(ScriptedModel.ScriptedModel, model.recorder),
    Effect.provide(Tools.toLayer({
      delete_file: ({ path }) => Effect.as(Ref.update(log, (all) => [...all, `delete_file ${path}`]), "deleted")
    })),
    Effect.provideService(LanguageModel.LanguageModel, model.model)
  )
  return { agent, log: Ref.get(log) }
})

/** The approval request thread `threadId` waits on. */
const requestOf = (agent: Agent.Service<any, any>, threadId: string) =>
  Effect.map(agent.thread(threadId), (thread) =>
    Option.getOrThrow(Option.flatMap(
      Option.flatMap(thread, (t) => t.pending),
      (wait) => Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(wait.value)
    )))

describe("HumanInTheLoop and Agent.fork", () => {
  it.effect("a fork of a thread waiting for an approval waits with its own request, which approves it", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup
      assert.strictEqual((yield* agent.run("Delete /tmp/a", { threadId: "src" }))._tag, "Interrupted")
      const source = yield* requestOf(agent, "src")
      const forked = yield* agent.fork("src", { to: "fork", at: 1 })
      assert.strictEqual(forked._tag, "Interrupted")
      const own = yield* requestOf(agent, "fork")
      assert.notStrictEqual(own.actionRequests[0]!.waitKey, source.actionRequests[0]!.waitKey)
      assert.deepStrictEqual(yield* log, [], "nothing ran before a decision")
      yield* agent.validateResume("fork", HumanInTheLoop.approveAll(own))
      const done = yield* agent.resume("fork", HumanInTheLoop.approveAll(own))
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"], "the tool ran once, in the fork")
      // the source still waits on its own request, and its own decision resumes it
      assert.deepStrictEqual(yield* requestOf(agent, "src"), source)
      assert.strictEqual((yield* agent.resume("src", HumanInTheLoop.approveAll(source)))._tag, "Completed")
      assert.strictEqual((yield* log).length, 2)
    }))

  it.effect("a Decision edit is checked against the fork's own wait: one bound to the source is refused and writes nothing", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup
      yield* agent.run("Delete /tmp/a", { threadId: "src" })
      const source = yield* requestOf(agent, "src")
      const refused = yield* Effect.flip(
        agent.fork("src", {
          to: "fork",
          at: 1,
          edit: { _tag: "Decision", decision: HumanInTheLoop.approveAll(source) }
        })
      )
      assert.deepInclude(refused, { _tag: "DecisionError", reason: "Stale" })
      assert.isTrue(Option.isNone(yield* agent.thread("fork")), "nothing written")
      assert.deepStrictEqual(yield* log, [])
      // forked again without the edit, the fork's own request approves it
      assert.strictEqual((yield* agent.fork("src", { to: "fork", at: 1 }))._tag, "Interrupted")
      const own = yield* requestOf(agent, "fork")
      assert.strictEqual((yield* agent.resume("fork", HumanInTheLoop.approveAll(own)))._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"])
      assert.strictEqual((yield* agent.resume("src", HumanInTheLoop.approveAll(source)))._tag, "Completed")
    }))

  it.effect.prop(
    "for any fork target, the fork's own request approves it and the source's request is refused there",
    { to: FastCheck.stringMatching(/^[a-z0-9-]{1,24}$/).filter((id) => id !== "src") },
    ({ to }) =>
      Effect.gen(function*() {
        const { agent, log } = yield* setup
        yield* agent.run("Delete /tmp/a", { threadId: "src" })
        const source = yield* requestOf(agent, "src")
        assert.strictEqual((yield* agent.fork("src", { to, at: 1 }))._tag, "Interrupted")
        const stale = yield* Effect.flip(agent.validateResume(to, HumanInTheLoop.approveAll(source)))
        assert.deepInclude(stale, { _tag: "DecisionError", reason: "Stale" })
        const own = yield* requestOf(agent, to)
        assert.strictEqual((yield* agent.resume(to, HumanInTheLoop.approveAll(own)))._tag, "Completed")
        assert.deepStrictEqual(yield* log, ["delete_file /tmp/a"])
        assert.deepStrictEqual(yield* requestOf(agent, "src"), source)
      }),
    { fastCheck: { numRuns: 20 } }
  )

  it.effect("validateResume refuses a decision for a wait copied from another thread, as resume does", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup
      yield* agent.run("Delete /tmp/a", { threadId: "src" })
      const source = yield* requestOf(agent, "src")
      // a checkpoint copied whole to another thread (its wait is the source's)
      const checkpointer = yield* Checkpointer.Checkpointer
      const stored = Option.getOrThrow(yield* checkpointer.load("src"))
      yield* checkpointer.save("copy", { ...stored, threadId: "copy" })
      const decisions = HumanInTheLoop.approveAll(source)
      const byValidate = yield* Effect.flip(agent.validateResume("copy", decisions))
      const byResume = yield* Effect.flip(agent.resume("copy", decisions))
      assert.deepInclude(byResume, { _tag: "DecisionError", reason: "Stale" })
      assert.deepInclude(byValidate, { _tag: "DecisionError", reason: "Stale" })
      assert.deepStrictEqual(yield* log, [])
    }).pipe(Effect.provide(Checkpointer.layerMemory)))
})
