/**
 * A fork stores its thread under an incarnation of its own, so a run of the
 * thread that was deleted before the fork took its id cannot write over it.
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Cause, Deferred, Effect, Exit, Fiber, Layer, Option, Schema } from "effect"

const Wait = Tool.make("wait", { parameters: {}, success: Schema.String })
const Waiting = Toolkit.make(Wait)

const userTexts = (checkpoint: Checkpointer.Checkpoint) =>
  checkpoint.messages.flatMap((message: any) =>
    message.role === "user" ? message.content.map((part: any) => typeof part === "string" ? part : part.text) : []
  )

describe("a fork onto the id of a deleted thread", () => {
  it.effect("stores an incarnation of its own: the deleted thread's run still going fails (Superseded) and the fork's thread stays", () =>
    Effect.gen(function*() {
      const store = yield* Checkpointer.makeMemory
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      let calls = 0
      const agent = yield* Agent.make({ toolkit: Waiting }).pipe(
        Effect.provide(Layer.merge(
          ScriptedModel.layer([
            ScriptedModel.toolCalls([{ name: "wait", params: {} }]),
            ScriptedModel.toolCalls([{ name: "wait", params: {} }]),
            ScriptedModel.text("old-done")
          ]),
          Waiting.toLayer({
            wait: () =>
              ++calls === 1
                ? Effect.succeed("ok")
                : Deferred.succeed(started, undefined).pipe(Effect.zipRight(Deferred.await(release)), Effect.as("ok"))
          })
        )),
        Effect.provideService(Checkpointer.Checkpointer, store)
      )
      // another agent on the same store; its fork's own run fails before it saves
      const other = yield* Agent.make({ toolkit: Waiting }).pipe(
        Effect.provide(Layer.merge(
          ScriptedModel.layer([ScriptedModel.text("src-reply"), ScriptedModel.httpError(400)]),
          Waiting.toLayer({ wait: () => Effect.succeed("unused") })
        )),
        Effect.provideService(Checkpointer.Checkpointer, store)
      )
      yield* other.run("source-message", { threadId: "src" })
      const run = yield* Effect.fork(agent.run("old-run-message", { threadId: "t" }))
      yield* Deferred.await(started)
      yield* other.deleteThread("t")
      yield* Effect.exit(other.fork("src", { to: "t", at: 1, edit: { _tag: "Message", message: "fork-message" } }))
      const afterFork = Option.getOrThrow(yield* store.load("t"))
      assert.isDefined(afterFork.incarnation)

      yield* Deferred.succeed(release, undefined)
      const exit = yield* Fiber.await(run)
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const error = Option.getOrThrow(Cause.failureOption(exit.cause)) as { _tag: string; conflict?: string }
        assert.strictEqual(error._tag, "CheckpointError")
        assert.strictEqual(error.conflict, "Superseded")
      }
      const final = Option.getOrThrow(yield* store.load("t"))
      // the fork's copy of the source (its own run failed before it saved), not the old run's thread
      assert.deepStrictEqual(userTexts(final), ["source-message"])
      assert.strictEqual(final.incarnation, afterFork.incarnation)
    }))
})
