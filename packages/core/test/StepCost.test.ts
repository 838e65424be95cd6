/**
 * What a step of the loop costs in Effect operations, counted (not timed):
 * a 10-step run with one tool on a model that returns decoded parts and
 * does nothing else (the bench's raw fake), generated and streamed, no
 * middleware or ten that pass through. The bounds are the figures of `docs/benchmarks.md`'s
 * deterministic counts with a little room; a change that adds fiber
 * operations to every step fails here. (The streamed figure includes
 * Effect's own stream machinery, which drains the model's stream.)
 */
import { LanguageModel, Response } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { Chunk, Effect, Scheduler, Stream } from "effect"
import { Calculator, CalculatorLive, passThrough } from "./utils.js"

const toolSteps = 10
const usage = new Response.Usage({ inputTokens: 10, outputTokens: 5, totalTokens: 15 })
const toolCall: Array<Response.AnyPart> = [
  Response.makePart("tool-call", { id: "call_1", name: "add", params: { a: 1, b: 2 }, providerExecuted: false }),
  Response.makePart("finish", { reason: "tool-calls", usage })
]
const answer: Array<Response.AnyPart> = [
  Response.makePart("text-start", { id: "t" }),
  Response.makePart("text-delta", { id: "t", delta: "It is 3." }),
  Response.makePart("text-end", { id: "t" }),
  Response.makePart("finish", { reason: "stop", usage })
]

/** A model of decoded parts: `calls` calls of `add`, then an answer. */
const rawModel = (script: { call: number }, calls: number): LanguageModel.Service =>
  ({
    generateText: () =>
      Effect.sync(() =>
        new LanguageModel.GenerateTextResponse(
          (script.call++ < calls ? toolCall : answer) as Array<Response.Part<any>>
        )
      ),
    streamText: () =>
      Stream.suspend(() => Stream.fromChunk(Chunk.unsafeFromArray(script.call++ < calls ? toolCall : answer)))
  }) as unknown as LanguageModel.Service

/**
 * Effect operations per step of a run of `mode` with `calls` tool steps (median of a few counted runs, after
 * warm-up runs); with none, the operations of a whole run that only answers.
 */
const opsPerStep = (mode: "generate" | "stream", middleware = 0, calls = toolSteps) =>
  Effect.gen(function*() {
    const script = { call: 0 }
    const checkpointer = yield* Checkpointer.makeMemory
    const agent = yield* Agent.make({
      toolkit: Calculator,
      maxSteps: toolSteps + 1,
      middleware: Array.from({ length: middleware }, (_, i) => passThrough(`pass_${i}`))
    }).pipe(
      Effect.provide(CalculatorLive),
      Effect.provideService(LanguageModel.LanguageModel, rawModel(script, calls)),
      Effect.provideService(Checkpointer.Checkpointer, checkpointer)
    )
    let ops = 0
    const counting: Scheduler.Scheduler = {
      scheduleTask: (task, priority) => Scheduler.defaultScheduler.scheduleTask(task, priority),
      shouldYield: (fiber) => {
        ops++
        return Scheduler.defaultScheduler.shouldYield(fiber)
      }
    }
    const run = Effect.suspend(() => {
      script.call = 0
      return mode === "generate"
        ? Effect.asVoid(agent.run("What is 1 + 2?", { threadId: "t" }))
        : Stream.runDrain(agent.stream("What is 1 + 2?", { threadId: "t" }))
    }).pipe(Effect.ensuring(Effect.orDie(checkpointer.delete("t"))), Effect.withScheduler(counting))
    for (let i = 0; i < 3; i++) yield* Effect.promise(() => Effect.runPromise(run))

    const counts: Array<number> = []
    for (let i = 0; i < 5; i++) {
      ops = 0
      yield* Effect.promise(() => Effect.runPromise(run))
      counts.push(ops / Math.max(calls, 1))
    }
    return counts.sort((a, b) => a - b)[2]!
  })

describe("the Effect operations of a step", () => {
  it.effect("a run that only answers (a run's start and end, and one model call) takes at most 150 (145 with its harness; 250 while its start read its journal, tracer and clock in generators, its thread lock was a semaphore, its scope was provided by Effect.scoped and its load and input check went through Effect.all)", () =>
    Effect.gen(function*() {
      expect(yield* opsPerStep("generate", 0, 0)).toBeLessThanOrEqual(150)
    }))

  it.effect("a generated step takes at most 36 (34.5 with a tool's defects caught where its context is put back; 35.5 with no catch of a timeout around a call that cannot time out; 36.5 with a run's start and end cut, 47.0 before; 43.6 on its own, 46.9 with saves checked against the thread they loaded; 68.7 / 72.0 while each phase ended in a continuation of the driver's, the tool context and a run's context were set through FiberRef operations, and a reply was an Either run as an effect; 78 before the tool context was set in one operation)", () =>
    Effect.gen(function*() {
      expect(yield* opsPerStep("generate")).toBeLessThanOrEqual(36)
    }))

  it.effect("10 pass-through middleware add one Effect operation to a generated step, the catch of a timeout around their hooks (a hook may fail with ToolTimeout; a call with no hook and no timeout has no catch) (117.9 with them before: each wrap hook's reply was checked again, each node ran its hooks in a suspend)", () =>
    Effect.gen(function*() {
      const without = yield* opsPerStep("generate")
      const with10 = yield* opsPerStep("generate", 10)
      expect(with10).toBeLessThanOrEqual(37)
      expect(with10 - without).toBeLessThanOrEqual(1)
    }))

  it.effect("a streamed step takes at most 245 (240.1 with a tool's defects caught where its context is put back and no timeout catch around a call that cannot time out; 242.1 with a run's events streamed by forkedStream; 244.9 with the model's stream pulled in a PullScope; 264.7 with a run's start and end cut; 271.6 on its own, 275.9 with saves checked against the thread they loaded; 296.6 before the phases went on in their own continuations; 316 before its reply was judged in one continuation)", () =>
    Effect.gen(function*() {
      expect(yield* opsPerStep("stream")).toBeLessThanOrEqual(245)
    }))

  it.effect("10 pass-through middleware add at most 8 Effect operations to a streamed step (7.3 with their wrapToolCall layers observed together too: the 3 operations of one observation per model call, 3 of one per tool call, and the catch of a timeout around their hooks; 34.3 while each wrapToolCall layer was observed on its own; 64 while each wrapModelCall layer was too)", () =>
    Effect.gen(function*() {
      const without = yield* opsPerStep("stream")
      const with10 = yield* opsPerStep("stream", 10)
      expect(with10 - without).toBeLessThanOrEqual(8)
    }))

  it.effect("a streamed step with 10 pass-through middleware takes at most 250 (247.4 with their wrapToolCall layers observed together; 275.4 with a tool's defects caught where its context is put back; 276.4 with a run's events streamed by forkedStream; 279.2 with the model's stream pulled in a PullScope and the pass-through wrapModelCall layers observed together; 328.7 with a run's start and end cut; 335.6 on its own, 338.9 with saves checked against the thread they loaded; 359.6 before the phases went on in their own continuations; 530 while a watched node hook that had already ended went through the hook cell; 411 while each wrap hook's reply was checked again)", () =>
    Effect.gen(function*() {
      expect(yield* opsPerStep("stream", 10)).toBeLessThanOrEqual(250)
    }))
})
