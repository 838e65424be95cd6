import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { KeyValueStore } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Agent, type AgentResult, Checkpointer, RunRecord } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Cause, Effect, FastCheck, Layer, Option, Ref, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as HumanInTheLoop from "../src/HumanInTheLoop.js"
import * as SubAgents from "../src/SubAgents.js"

const DeleteFile = Tool.make("delete_file", {
  description: "Deletes a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(DeleteFile)

/** The text of the last message of a request, when it is the user's. */
const lastUserText = (request: ScriptedModel.Request): string | undefined => {
  const last = request.prompt.content.at(-1)
  if (last?.role !== "user") return undefined
  const part = last.content[0]
  return part?.type === "text" ? part.text : undefined
}

/**
 * A model that answers a user's message with one call `c1` deleting the path the message names, and a tool result
 * with "deleted": a thread made again with the same messages gets the same replies, call ids included.
 */
const echoModel = ScriptedModel.make(
  Array.from({ length: 400 }, () => (request: ScriptedModel.Request) => {
    const path = lastUserText(request)
    return path === undefined
      ? ScriptedModel.text("deleted")
      : ScriptedModel.toolCalls([{ id: "c1", name: "delete_file", params: { path } }])
  })
)

/** An agent gating `delete_file`; `log` lists the tool runs. */
const setup = Effect.gen(function*() {
  const log = yield* Ref.make<ReadonlyArray<string>>([])
  const { model } = yield* echoModel
  const agent = yield* Agent.make({
    toolkit: Tools,
    middleware: [HumanInTheLoop.middleware({ toolkit: Tools, interruptOn: { delete_file: true } })]
  }).pipe(
    Effect.provide(Tools.toLayer({
      delete_file: ({ path }) => Effect.as(Ref.update(log, (all) => [...all, path]), "deleted")
    })),
    Effect.provideService(LanguageModel.LanguageModel, model)
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

/** The error's tag, with the reason of a `DecisionError` (`DecisionError/Stale`). */
const tagOf = (error: unknown) => {
  const { _tag, reason } = error as { readonly _tag?: string; readonly reason?: string }
  return _tag === "DecisionError" ? `${_tag}/${reason}` : _tag
}

describe("a decision binds to the thread's incarnation", () => {
  it.effect("after deleteThread and an identical new thread, the old decision is refused (DecisionError, reason Stale) and the new request's decision approves", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup
      assert.strictEqual((yield* agent.run("/tmp/a", { threadId: "t" }))._tag, "Interrupted")
      const before = HumanInTheLoop.approveAll(yield* requestOf(agent, "t"))
      yield* agent.deleteThread("t")
      assert.strictEqual((yield* agent.run("/tmp/a", { threadId: "t" }))._tag, "Interrupted")
      const request = yield* requestOf(agent, "t")
      assert.notStrictEqual(request.actionRequests[0]!.waitKey, before[0]!.waitKey)
      // every way in refuses it, typed, and leaves the thread waiting on the same request
      assert.strictEqual(tagOf(yield* Effect.flip(agent.validateResume("t", before))), "DecisionError/Stale")
      const refused = yield* Effect.flip(agent.resume("t", before))
      assert.strictEqual(tagOf(refused), "DecisionError/Stale")
      assert.strictEqual((refused as HumanInTheLoop.DecisionError).field, "waitKey")
      assert.deepStrictEqual(yield* requestOf(agent, "t"), request)
      assert.deepStrictEqual(yield* log, [], "nothing ran")
      const done = yield* agent.resume("t", HumanInTheLoop.approveAll(request))
      assert.strictEqual(done._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["/tmp/a"])
    }))

  it.effect("a decision used before deleteThread, sent again to the identical new thread, is refused", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup
      yield* agent.run("/tmp/a", { threadId: "t" })
      const used = HumanInTheLoop.approveAll(yield* requestOf(agent, "t"))
      assert.strictEqual((yield* agent.resume("t", used))._tag, "Completed")
      yield* agent.deleteThread("t")
      assert.strictEqual((yield* agent.run("/tmp/a", { threadId: "t" }))._tag, "Interrupted")
      assert.strictEqual(tagOf(yield* Effect.flip(agent.resume("t", used))), "DecisionError/Stale")
      assert.deepStrictEqual(yield* log, ["/tmp/a"], "the replayed decision ran nothing")
    }))

  const stores = {
    memory: Checkpointer.layerMemory,
    keyValueStore: Checkpointer.layerKeyValueStore().pipe(Layer.provide(KeyValueStore.layerMemory)),
    fileSystem: Layer.unwrapScoped(Effect.map(
      Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-incarnation-"))),
        (directory) => Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true }))
      ),
      (directory) => Checkpointer.layerFileSystem(directory).pipe(Layer.provide(NodeContext.layer))
    ))
  }
  for (const [name, store] of Object.entries(stores)) {
    it.scoped(`${name}: the incarnation is stored in the checkpoint, kept by later saves, and new after deleteThread`, () =>
      Effect.gen(function*() {
        const { agent } = yield* setup
        const checkpointer = yield* Checkpointer.Checkpointer
        const incarnation = Effect.map(checkpointer.load("t"), (c) => Option.getOrThrow(c).incarnation)
        yield* agent.run("/tmp/a", { threadId: "t" })
        const first = yield* incarnation
        assert.isString(first)
        yield* agent.resume("t", HumanInTheLoop.approveAll(yield* requestOf(agent, "t")))
        yield* agent.run("/tmp/b", { threadId: "t" })
        assert.strictEqual(yield* incarnation, first, "one thread keeps its incarnation across runs")
        yield* agent.deleteThread("t")
        yield* agent.run("/tmp/a", { threadId: "t" })
        assert.notStrictEqual(yield* incarnation, first)
      }).pipe(Effect.provide(store)))
  }

  it.effect("thread A's decision is refused on thread B with an identical conversation", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup
      yield* agent.run("/tmp/a", { threadId: "a" })
      yield* agent.run("/tmp/a", { threadId: "b" })
      const ofA = HumanInTheLoop.approveAll(yield* requestOf(agent, "a"))
      assert.strictEqual(tagOf(yield* Effect.flip(agent.resume("b", ofA))), "DecisionError/Stale")
      assert.deepStrictEqual(yield* log, [])
      assert.strictEqual(
        (yield* agent.resume("b", HumanInTheLoop.approveAll(yield* requestOf(agent, "b"))))._tag,
        "Completed"
      )
    }))

  it.effect("a decision of run 1 is refused at run 2's wait for an identical call", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup
      yield* agent.run("/tmp/a", { threadId: "t" })
      const first = HumanInTheLoop.approveAll(yield* requestOf(agent, "t"))
      yield* agent.resume("t", first)
      yield* agent.run("/tmp/a", { threadId: "t" })
      assert.strictEqual(tagOf(yield* Effect.flip(agent.resume("t", first))), "DecisionError/Stale")
      assert.deepStrictEqual(yield* log, ["/tmp/a"])
    }))

  it.effect("a fork deleted and forked again to the same id gets a new incarnation: the first fork's decision is refused", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup
      yield* agent.run("/tmp/a", { threadId: "src" })
      yield* agent.fork("src", { to: "fork", at: 1 })
      const first = HumanInTheLoop.approveAll(yield* requestOf(agent, "fork"))
      yield* agent.deleteThread("fork")
      assert.strictEqual((yield* agent.fork("src", { to: "fork", at: 1 }))._tag, "Interrupted")
      assert.strictEqual(tagOf(yield* Effect.flip(agent.resume("fork", first))), "DecisionError/Stale")
      assert.deepStrictEqual(yield* log, [])
      const own = HumanInTheLoop.approveAll(yield* requestOf(agent, "fork"))
      assert.strictEqual((yield* agent.resume("fork", own))._tag, "Completed")
    }))

  it.effect("golden: a thread stored waiting before incarnations decodes, resumes with a decision built from its request, and gets an incarnation at its next run", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup
      const checkpointer = yield* Checkpointer.Checkpointer
      const text = fs.readFileSync(new URL("./golden/approval-wait-v1.json", import.meta.url), "utf8")
      const legacy = yield* Checkpointer.fromJson("golden", text)
      assert.isUndefined(legacy.incarnation)
      yield* checkpointer.save("golden", legacy)
      const request = yield* requestOf(agent, "golden")
      assert.strictEqual((yield* agent.resume("golden", HumanInTheLoop.approveAll(request)))._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["/tmp/a"])
      // the next run gives the thread an incarnation, and its waits carry it
      assert.strictEqual((yield* agent.run("/tmp/b", { threadId: "golden" }))._tag, "Interrupted")
      const incarnation = Option.getOrThrow(yield* checkpointer.load("golden")).incarnation
      assert.isString(incarnation)
      const next = yield* requestOf(agent, "golden")
      assert.include(next.actionRequests[0]!.waitKey, `/${incarnation}/`)
      assert.strictEqual((yield* agent.resume("golden", HumanInTheLoop.approveAll(next)))._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["/tmp/a", "/tmp/b"])
    }).pipe(Effect.provide(Checkpointer.layerMemory)))

  it.effect("a fork of a record, deleted and forked again to the same id, gets a new incarnation: the first fork's decision is refused", () =>
    Effect.gen(function*() {
      const { agent, log } = yield* setup
      const { record, result } = yield* RunRecord.record(agent, "/tmp/a", { threadId: "src" })
      assert.strictEqual(result._tag, "Interrupted")
      assert.strictEqual((yield* agent.fork(record, { to: "fork", at: 1 }))._tag, "Interrupted")
      const first = yield* requestOf(agent, "fork")
      yield* agent.deleteThread("fork")
      assert.strictEqual((yield* agent.fork(record, { to: "fork", at: 1 }))._tag, "Interrupted")
      const own = yield* requestOf(agent, "fork")
      assert.notStrictEqual(own.actionRequests[0]!.waitKey, first.actionRequests[0]!.waitKey)
      assert.strictEqual(
        tagOf(yield* Effect.flip(agent.resume("fork", HumanInTheLoop.approveAll(first)))),
        "DecisionError/Stale"
      )
      assert.deepStrictEqual(yield* log, [])
      assert.strictEqual((yield* agent.resume("fork", HumanInTheLoop.approveAll(own)))._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["/tmp/a"])
    }))

  it.effect("SubAgents: after deleteThread of the parent and an identical new run, the decision forwarded to the old child is refused; the new one approves", () =>
    Effect.gen(function*() {
      const { agent: cleaner, log } = yield* setup
      const { model } = yield* ScriptedModel.make(
        Array.from({ length: 40 }, () => (request: ScriptedModel.Request) => {
          const path = lastUserText(request)
          return path === undefined
            ? ScriptedModel.text("all done")
            : ScriptedModel.toolCalls([{ id: "p1", name: "task", params: { agent: "cleaner", task: path } }])
        })
      )
      const parent = yield* Agent.make({
        middleware: [SubAgents.middleware({ agents: { cleaner: { description: "Deletes", agent: cleaner } } })]
      }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      const approve = (result: AgentResult.AgentResult<any, unknown, SubAgents.Waits>) => {
        if (result._tag !== "Interrupted") throw new Error(`not interrupted: ${result._tag}`)
        return SubAgents.decide(
          result.interrupt,
          (leaf) =>
            Option.getOrUndefined(Option.map(
              Schema.decodeUnknownOption(HumanInTheLoop.ApprovalRequest)(leaf.interrupt.value),
              HumanInTheLoop.approveAll
            ))
        )
      }
      const before = approve(yield* parent.run("/tmp/a", { threadId: "p" }))
      yield* parent.deleteThread("p")
      const decision = approve(yield* parent.run("/tmp/a", { threadId: "p" }))
      const refused = yield* Effect.flip(parent.resume("p", before))
      assert.include(String((refused as Error).message ?? refused), "answers another wait", String(refused))
      assert.deepStrictEqual(yield* log, [], "nothing ran")
      assert.strictEqual((yield* parent.resume("p", decision))._tag, "Completed")
      assert.deepStrictEqual(yield* log, ["/tmp/a"])
    }))

  /** What a step of the property does: run a path on a thread, delete a thread, or send a kept decision. */
  type Action =
    | { readonly _tag: "Run"; readonly thread: number; readonly path: number }
    | { readonly _tag: "Delete"; readonly thread: number }
    | { readonly _tag: "Replay"; readonly thread: number; readonly decision: number }
  const action: FastCheck.Arbitrary<Action> = FastCheck.oneof(
    FastCheck.record({
      _tag: FastCheck.constant("Run" as const),
      thread: FastCheck.nat(1),
      path: FastCheck.nat(1)
    }),
    FastCheck.record({ _tag: FastCheck.constant("Delete" as const), thread: FastCheck.nat(1) }),
    FastCheck.record({
      _tag: FastCheck.constant("Replay" as const),
      thread: FastCheck.nat(1),
      decision: FastCheck.nat(20)
    })
  )

  it.effect.prop(
    "for any runs, deletions and replays of kept decisions, a decision approves only the wait it was built from",
    { actions: FastCheck.array(action, { minLength: 1, maxLength: 12 }) },
    ({ actions }) =>
      Effect.gen(function*() {
        const { agent, log } = yield* setup
        // every decision ever built, with the thread and the request it was built from
        const kept: Array<
          { readonly thread: string; readonly key: string; readonly decisions: HumanInTheLoop.DecisionsGiven }
        > = []
        const waiting = new Map<string, string>() // thread -> key of the request it waits on
        let ran = 0
        for (const step of actions) {
          const thread = `t${step.thread}`
          if (step._tag === "Delete") {
            yield* agent.deleteThread(thread)
            waiting.delete(thread)
          } else if (step._tag === "Run") {
            if (waiting.has(thread)) continue
            const result = yield* agent.run(`/p${step.path}`, { threadId: thread })
            assert.strictEqual(result._tag, "Interrupted")
            const request = yield* requestOf(agent, thread)
            const key = request.actionRequests[0]!.waitKey
            assert.isFalse(kept.some((k) => k.key === key), "a wait's key is never one of an earlier wait")
            waiting.set(thread, key)
            kept.push({ thread, key, decisions: HumanInTheLoop.approveAll(request) })
          } else {
            const decision = kept[step.decision % Math.max(kept.length, 1)]
            const key = waiting.get(thread)
            if (decision === undefined || key === undefined) continue
            const exit = yield* Effect.exit(agent.resume(thread, decision.decisions))
            if (decision.key === key && decision.thread === thread) {
              assert.isTrue(exit._tag === "Success" && exit.value._tag === "Completed", "its own decision approves")
              waiting.delete(thread)
              ran++
            } else {
              assert.strictEqual(exit._tag, "Failure", "another wait's decision is refused")
              const error = exit._tag === "Failure" ? Cause.failureOption(exit.cause) : Option.none()
              assert.strictEqual(tagOf(Option.getOrUndefined(error)), "DecisionError/Stale")
            }
          }
          assert.strictEqual((yield* log).length, ran, "a tool ran only for an approval of its own wait")
        }
      }),
    { fastCheck: { numRuns: 30 } }
  )
})
