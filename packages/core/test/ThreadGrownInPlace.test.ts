/**
 * A run with no hook and no journal grows its thread's array in place from
 * step to step (`RunState.unseen`), instead of copying the whole thread at
 * every step. Nothing anyone was given may change with it: a prompt the model
 * kept (read at once or later), a thread read back from the store while the
 * run goes on, a run's result once the next run on the thread is done.
 */
import { LanguageModel, Prompt, Response } from "@effect/ai"
import { KeyValueStore } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { Chunk, Effect, FastCheck, Layer, Option, Stream } from "effect"
import { RunSaves } from "../src/internal/runSaves.js"
import { Calculator, CalculatorLive } from "./utils.js"

const usage = new Response.Usage({ inputTokens: 1, outputTokens: 1, totalTokens: 2 })

/** A prompt the model got, with the length and messages its content had when the call was made. */
interface Kept {
  readonly prompt: Prompt.Prompt
  readonly length: number
  /** The content read during the call, if it was read then. */
  readonly early: ReadonlyArray<Prompt.Message> | undefined
}

/** The reply of model call `i` that calls `add`. */
const callParts = (i: number): Array<Response.AnyPart> => [
  Response.makePart("tool-call", { id: `c${i}`, name: "add", params: { a: i, b: 1 }, providerExecuted: false }),
  Response.makePart("finish", { reason: "tool-calls", usage })
]

/** A model that calls `add` `toolSteps` times, then answers; it keeps every prompt, and reads some at once. */
const keepingModel = (toolSteps: number, readNow: ReadonlyArray<boolean>, kept: Array<Kept>) => {
  let call = 0
  return {
    generateText: (options: { readonly prompt: Prompt.Prompt }) =>
      Effect.sync(() => {
        const i = call++
        const early = readNow[i % readNow.length] === true ? options.prompt.content : undefined
        kept.push({ prompt: options.prompt, length: early?.length ?? -1, early })
        return new LanguageModel.GenerateTextResponse(
          (i < toolSteps
            ? callParts(i)
            : [
              Response.makePart("text", { text: `done after ${i}` }),
              Response.makePart("finish", { reason: "stop", usage })
            ]) as Array<Response.Part<any>>
        )
      }),
    streamText: (options: { readonly prompt: Prompt.Prompt }) =>
      Stream.suspend(() => {
        const i = call++
        kept.push({ prompt: options.prompt, length: -1, early: undefined })
        return Stream.fromIterable<Response.AnyPart>(
          i < toolSteps
            ? callParts(i)
            : [
              Response.makePart("text-start", { id: "t" }),
              Response.makePart("text-delta", { id: "t", delta: `done after ${i}` }),
              Response.makePart("text-end", { id: "t" }),
              Response.makePart("finish", { reason: "stop", usage })
            ]
        )
      }),
    generateObject: () => Effect.dieMessage("not used")
  } as unknown as LanguageModel.Service
}

const checkpointers = {
  memory: Checkpointer.layerMemory,
  keyValueStore: Checkpointer.layerKeyValueStore().pipe(Layer.provide(KeyValueStore.layerMemory))
}

/** A thread read back while the run goes on, with its length then. */
interface Read {
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly length: number
}

const runs = (
  checkpointer: Layer.Layer<Checkpointer.Checkpointer>,
  plan: {
    readonly toolSteps: ReadonlyArray<number>
    readonly readNow: ReadonlyArray<boolean>
    readonly system: boolean
  }
) => {
  const kept: Array<Kept> = []
  const reads: Array<Read> = []
  const results: Array<{ readonly messages: ReadonlyArray<Prompt.Message>; readonly length: number }> = []
  let agent: { readonly thread: (id: string) => Effect.Effect<Option.Option<{ readonly state: unknown }>, unknown> }
  // each tool call reads the thread back from the store, as another reader would while the run goes on
  const handlers = Calculator.toLayer({
    add: ({ a, b }) =>
      Effect.map(Effect.orDie(agent.thread("t")), (snapshot) => {
        if (Option.isSome(snapshot)) {
          const messages = (snapshot.value.state as { readonly messages: ReadonlyArray<Prompt.Message> }).messages
          reads.push({ messages, length: messages.length })
        }
        return a + b
      })
  })
  return Effect.gen(function*() {
    for (const toolSteps of plan.toolSteps) {
      const made = yield* Agent.make({
        toolkit: Calculator,
        ...(plan.system ? { systemPrompt: "You add." } : {})
      }).pipe(
        Effect.provide(
          Layer.succeed(LanguageModel.LanguageModel, keepingModel(toolSteps, plan.readNow, kept))
        )
      )
      agent = made
      const result = yield* made.run(`add ${toolSteps} times`, { threadId: "t" })
      results.push({ messages: result.state.messages, length: result.state.messages.length })
    }
    return { kept, reads, results }
  }).pipe(Effect.provide(Layer.merge(checkpointer, handlers)))
}

describe("a thread grown in place: nothing given out changes", () => {
  for (const [name, checkpointer] of Object.entries(checkpointers)) {
    it.effect(`${name}: prompts kept, threads read back and results stay as they were given`, () =>
      Effect.promise(() =>
        FastCheck.assert(
          FastCheck.asyncProperty(
            FastCheck.record({
              toolSteps: FastCheck.array(FastCheck.integer({ min: 0, max: 6 }), { minLength: 1, maxLength: 3 }),
              readNow: FastCheck.array(FastCheck.boolean(), { minLength: 1, maxLength: 5 }),
              system: FastCheck.boolean()
            }),
            async (plan) => {
              const { kept, reads, results } = await Effect.runPromise(runs(checkpointer, plan))
              const final = results.at(-1)!.messages
              const offset = plan.system ? 1 : 0
              // the thread before each model call: the earlier runs' threads, this run's input, its steps so far
              const expected: Array<number> = []
              // the thread as stored when each tool call reads it: as the last save left it
              const stored: Array<number> = []
              let before = 0
              for (const toolSteps of plan.toolSteps) {
                for (let i = 0; i <= toolSteps; i++) expected.push(before + 1 + 2 * i)
                for (let i = 0; i < toolSteps; i++) {
                  if (before > 0 || i > 0) stored.push(i === 0 ? before : before + 1 + 2 * i)
                }
                before += 1 + 2 * toolSteps + 1
              }
              assert.deepStrictEqual(kept.map((k) => k.prompt.content.length - offset), expected)
              kept.forEach((k, i) => {
                const content = k.prompt.content
                // read late, a prompt is the thread as it was at its call: the same messages, no more
                if (k.early !== undefined) assert.strictEqual(content, k.early, `prompt ${i} changed after it was read`)
                if (plan.system) assert.strictEqual(content[0]!.role, "system")
                content.slice(offset).forEach((message, j) =>
                  assert.strictEqual(message, final[j], `prompt ${i}, message ${j}`)
                )
              })
              // each thread read back kept its length, and is a prefix of the final thread
              assert.deepStrictEqual(reads.map((read) => read.length), stored)
              for (const read of reads) {
                assert.strictEqual(read.messages.length, read.length)
                read.messages.forEach((message, j) => assert.strictEqual(message, final[j]))
              }
              // each run's result kept its length after the next runs
              for (const result of results) assert.strictEqual(result.messages.length, result.length)
              assert.strictEqual(final.length, before)
            }
          ),
          { numRuns: 40 }
        )
      ))
  }

  it.effect("a streamed run: the prompt and the state each ModelRequestSent reports stay as the call saw them", () =>
    Effect.gen(function*() {
      const kept: Array<Kept> = []
      const agent = yield* Agent.make({ toolkit: Calculator }).pipe(
        Effect.provide(Layer.succeed(LanguageModel.LanguageModel, keepingModel(4, [false], kept)))
      )
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agent.stream("add", { threadId: "s" })))
      const sent = events.flatMap((event) => event._tag === "ModelRequestSent" ? [event] : [])
      const final =
        (events.at(-1) as { readonly result: { readonly state: { readonly messages: ReadonlyArray<Prompt.Message> } } })
          .result.state.messages
      // read only now, after the run grew the thread four more times
      assert.deepStrictEqual(sent.map((event) => event.prompt.content.length), [1, 3, 5, 7, 9])
      assert.deepStrictEqual(
        sent.map((event) => (event.state as { readonly messages: ReadonlyArray<Prompt.Message> }).messages.length),
        [1, 3, 5, 7, 9]
      )
      for (const event of sent) event.prompt.content.forEach((message, j) => assert.strictEqual(message, final[j]))
      assert.strictEqual(final.length, 10)
    }).pipe(Effect.provide(Layer.merge(Checkpointer.layerMemory, CalculatorLive))))

  it("the state of a run's last save keeps the length it was saved with", () => {
    const layout = {
      flatten: (state: { readonly messages: ReadonlyArray<Prompt.Message> }) => ({ messages: state.messages })
    }
    const saves = new RunSaves(layout.flatten as never)
    const messages: Array<Prompt.Message> = [
      Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "hi" })] })
    ]
    saves.saved({ messages, slices: {} })
    messages.push(Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text: "not saved" })] }))
    const state = Option.getOrThrow(saves.state()) as { readonly messages: ReadonlyArray<Prompt.Message> }
    assert.strictEqual(state.messages.length, 1)
  })
})
