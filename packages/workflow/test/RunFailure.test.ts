import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, AgentError } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import * as AgentEngine from "@stepwise-agent/workflow/AgentEngine"
import * as AgentWorkflow from "@stepwise-agent/workflow/AgentWorkflow"
import * as Authorizer from "@stepwise-agent/workflow/Authorizer"
import * as RunStore from "@stepwise-agent/workflow/RunStore"
import { Cause, Effect, Exit, Layer, Option, Schema } from "effect"

/** How the engine stores a run's end: its exit, encoded with the workflow's schemas. */
const StoredExit = Schema.Exit({
  success: AgentWorkflow.RunOutcome,
  failure: AgentWorkflow.RunFailure,
  defect: Schema.Defect
})
const decodeExit = Schema.decodeUnknownSync(StoredExit)
const failureOf = (stored: unknown) => {
  const exit = decodeExit(stored)
  return Exit.isFailure(exit) ? Option.getOrThrow(Cause.failureOption(exit.cause)) : assert.fail("not a failure")
}

describe("a run's failure as its journal keeps it", () => {
  it("failures stored in the format of earlier versions still decode, as typed values", () => {
    // a failure of the run, its error kept by its tag alone
    const failed = failureOf({
      _tag: "Failure",
      cause: {
        _tag: "Fail",
        error: { _tag: "AgentRunFailed", error: "HttpResponseError", description: "the provider answered 503" }
      }
    })
    assert.instanceOf(failed, AgentWorkflow.AgentRunFailed)
    if (failed._tag !== "AgentRunFailed") return
    assert.instanceOf(failed.error, AgentWorkflow.OtherError)
    assert.deepStrictEqual(failed.error, new AgentWorkflow.OtherError({ tag: "HttpResponseError" }))
    assert.strictEqual(failed.message, "The agent run failed with HttpResponseError: the provider answered 503")

    // a cancellation as the first version stored it: a RunCancelled, recognised by its schema
    const cancelledBefore = failureOf({
      _tag: "Failure",
      cause: {
        _tag: "Fail",
        error: { _tag: "AgentRunFailed", error: "Cancelled", description: "the run was cancelled" }
      }
    })
    assert.instanceOf(cancelledBefore, AgentWorkflow.RunCancelled)

    // a cancellation as this version stores it
    const cancelled = failureOf({
      _tag: "Failure",
      cause: { _tag: "Fail", error: { _tag: "RunCancelled", runId: "r1" } }
    })
    assert.deepStrictEqual(cancelled, new AgentWorkflow.RunCancelled({ runId: "r1" }))
  })

  it("an agent error journaled with its free text under description or problem decodes with it as reason", () => {
    const decode = Schema.decodeUnknownSync(AgentWorkflow.RunFailure)
    const encode = Schema.encodeSync(AgentWorkflow.RunFailure)
    const before = [
      [{ _tag: "ToolDefect", toolName: "t", callId: "c", description: "crashed" }, AgentError.ToolDefect],
      [
        { _tag: "CheckpointError", threadId: "t", operation: "load", description: "crashed" },
        AgentError.CheckpointError
      ],
      [{ _tag: "StructuredOutputError", description: "crashed" }, AgentError.StructuredOutputError],
      [{ _tag: "InvalidInput", description: "crashed" }, AgentError.InvalidInput],
      [
        { _tag: "InvalidToolCalls", threadId: "t", toolName: "t", callId: "c", problem: "crashed", replies: 4 },
        AgentError.InvalidToolCalls
      ]
    ] as const
    for (const [error, Class] of before) {
      const failed = decode({ _tag: "AgentRunFailed", error, description: "the run failed" })
      assert.instanceOf(failed, AgentWorkflow.AgentRunFailed)
      if (failed._tag !== "AgentRunFailed") return
      assert.strictEqual(failed.reason, "the run failed")
      assert.strictEqual(failed.error.constructor, Class)
      assert.strictEqual((failed.error as { readonly reason: string }).reason, "crashed")
      // journaled again, it is written in this version's format
      const again = encode(failed) as { readonly error: object; readonly reason: string }
      assert.strictEqual(again.reason, "the run failed")
      assert.deepInclude(again.error, { reason: "crashed" })
      assert.notProperty(again.error, "description")
      assert.notProperty(again.error, "problem")
    }
    // a reply error journaled with its reason spelled in lower case
    for (
      const [old, now] of [["truncated", "Truncated"], ["not-a-stream", "NotAStream"], ["empty", "Empty"]] as const
    ) {
      const error = { _tag: "ModelReplyError", reason: old, step: 0, streamed: true, text: "", received: [] }
      const failed = decode({ _tag: "AgentRunFailed", error, reason: "the reply was bad" })
      assert.instanceOf(failed, AgentWorkflow.AgentRunFailed)
      if (failed._tag !== "AgentRunFailed") return
      assert.instanceOf(failed.error, AgentError.ModelReplyError)
      assert.strictEqual((failed.error as AgentError.ModelReplyError).reason, now)
      assert.deepInclude((encode(failed) as { readonly error: object }).error, { reason: now })
    }
    // a current error missing its reason is refused, not read as an old one
    assert.throws(() => decode({ _tag: "AgentRunFailed", error: { _tag: "InvalidInput" }, reason: "x" }))
  })

  it("an error of the agent's own is journaled whole and comes back as itself; others by their tag", () => {
    const encode = Schema.encodeSync(AgentWorkflow.RunFailure)
    const decode = Schema.decodeUnknownSync(AgentWorkflow.RunFailure)
    const own = new AgentWorkflow.AgentRunFailed({
      error: new AgentError.MaxStepsExceeded({ threadId: "t", maxSteps: 3 }),
      reason: "the run took more than 3 steps"
    })
    const stored = JSON.parse(JSON.stringify(encode(own)))
    const back = decode(stored)
    assert.instanceOf(back, AgentWorkflow.AgentRunFailed)
    if (back._tag !== "AgentRunFailed") return
    assert.instanceOf(back.error, AgentError.MaxStepsExceeded)
    assert.deepStrictEqual(back.error, own.error)

    const other = new AgentWorkflow.AgentRunFailed({
      error: new AgentWorkflow.OtherError({ tag: "UnknownCallId" }),
      reason: "no such call"
    })
    assert.deepStrictEqual(decode(JSON.parse(JSON.stringify(encode(other)))), other)
    // a cancellation is stored as this version's RunCancelled, never in the old form
    assert.deepStrictEqual(encode(new AgentWorkflow.RunCancelled({ runId: "r1" })), {
      _tag: "RunCancelled",
      runId: "r1"
    })
  })

  it.prop(
    "every failure comes back from its stored JSON as it was, its error of the same class",
    { failure: AgentWorkflow.RunFailure },
    ({ failure }) => {
      const stored = JSON.parse(JSON.stringify(Schema.encodeSync(AgentWorkflow.RunFailure)(failure)))
      const back = Schema.decodeUnknownSync(AgentWorkflow.RunFailure)(stored)
      assert.strictEqual(back.constructor, failure.constructor)
      if (back._tag === "AgentRunFailed" && failure._tag === "AgentRunFailed") {
        assert.strictEqual(back.error.constructor, failure.error.constructor)
      }
      assert.deepStrictEqual(Schema.encodeSync(AgentWorkflow.RunFailure)(back), stored)
    },
    { fastCheck: { numRuns: 200 } }
  )
})

const Add = Tool.make("add", {
  description: "Adds two numbers",
  parameters: { a: Schema.Number, b: Schema.Number },
  success: Schema.Number
})
const Tools = Toolkit.make(Add)

describe("a durable run that fails", () => {
  it.scopedLive("reports the agent's own error typed in status().failure, not its tag as text", () =>
    Effect.gen(function*() {
      const Runs = AgentWorkflow.make({ name: "failing", version: 1 })
      const calls = Array.from(
        { length: 5 },
        (_, i) => ScriptedModel.toolCalls([{ name: "add", params: { a: i, b: 1 }, id: `c${i}` }])
      )
      const context = yield* Layer.build(
        Runs.layer.pipe(
          Layer.provideMerge(
            Agent.layer({ toolkit: Tools, maxSteps: 2 }).pipe(
              Layer.provide(Layer.merge(
                ScriptedModel.layer(calls),
                Tools.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })
              ))
            )
          ),
          Layer.provideMerge(Layer.mergeAll(AgentEngine.layerMemory, RunStore.layerMemory)),
          Layer.provideMerge(Authorizer.layer(() => true))
        )
      )
      const status = yield* Effect.gen(function*() {
        const runId = yield* Runs.start({ threadId: "t", input: "add forever" })
        return yield* Runs.await(runId)
      }).pipe(Effect.provide(context))
      assert.strictEqual(status.state, "Failed")
      const failure = Option.getOrThrow(status.failure)
      assert.strictEqual(failure._tag, "AgentRunFailed")
      if (failure._tag !== "AgentRunFailed") return
      assert.instanceOf(failure.error, AgentError.MaxStepsExceeded)
      if (failure.error._tag !== "MaxStepsExceeded") return
      assert.deepStrictEqual({ threadId: failure.error.threadId, maxSteps: failure.error.maxSteps }, {
        threadId: "t",
        maxSteps: 2
      })
    }))
})
