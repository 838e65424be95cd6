import type { Prompt } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Layer, Schema } from "effect"

/** `echo(text, yields)`: answers `echo:<text>` after yielding to other fibers `yields` times. */
const Echo = Tool.make("echo", {
  description: "Returns its text",
  parameters: { text: Schema.String, yields: Schema.Number },
  success: Schema.String
})
const Tools = Toolkit.make(Echo)
const ToolsLive = Tools.toLayer({
  echo: ({ text, yields }) => Effect.as(Effect.repeatN(Effect.yieldNow(), yields), `echo:${text}`)
})

const lastText = (messages: ReadonlyArray<Prompt.Message>): string => {
  const last = messages[messages.length - 1]!
  if (last.role === "tool") {
    const part = last.content[0]!
    return part.type === "tool-result" ? String(part.result) : ""
  }
  if (typeof last.content === "string") return last.content
  return last.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")
}

/** A reply driven by the request alone, so runs interleaved in any order get their own: call echo, then answer. */
const promptDriven = (yields: number): ScriptedModel.Turn => (request) => {
  const messages = request.prompt.content
  const text = lastText(messages)
  return messages[messages.length - 1]!.role === "tool"
    ? ScriptedModel.text(text)
    : ScriptedModel.toolCalls([{ name: "echo", params: { text, yields } }])
}

describe("concurrent runs on many threads of one agent", () => {
  it.effect.prop(
    "each run's answer and stored thread are its own: nothing bleeds between threads",
    {
      threads: Schema.Int.pipe(Schema.between(1, 24)),
      yields: Schema.Array(Schema.Int.pipe(Schema.between(0, 5))).pipe(Schema.minItems(1)),
      repeatThreads: Schema.Boolean
    },
    ({ repeatThreads, threads, yields }) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ toolkit: Tools, maxSteps: 4 })
        const checkpointer = yield* Checkpointer.Checkpointer
        // with repeatThreads, two runs per thread: the second waits for the first and continues its thread
        const jobs = Array.from({ length: repeatThreads ? threads * 2 : threads }, (_, i) => ({
          threadId: `t${i % threads}`,
          input: `run ${i} of t${i % threads}`
        }))
        const results = yield* Effect.forEach(
          jobs,
          ({ input, threadId }) => agent.run(input, { threadId }),
          { concurrency: "unbounded" }
        )
        for (const [i, result] of results.entries()) {
          assert.strictEqual(result._tag, "Completed")
          if (result._tag === "Completed") assert.strictEqual(result.text, `echo:${jobs[i]!.input}`)
        }
        for (let t = 0; t < threads; t++) {
          const stored = yield* checkpointer.load(`t${t}`)
          assert.isTrue(stored._tag === "Some")
          if (stored._tag !== "Some") continue
          const texts = stored.value.messages.map((message) => JSON.stringify(message))
          assert.strictEqual(texts.length, repeatThreads ? 8 : 4)
          // every stored message (question, call, result, answer) carries an input of this thread
          for (const text of texts) assert.include(text, ` of t${t}"`)
        }
      }).pipe(
        Effect.provide(Layer.mergeAll(
          ScriptedModel.layer(Array.from({ length: 4 * threads }, (_, i) => promptDriven(yields[i % yields.length]!))),
          ToolsLive,
          Checkpointer.layerMemory
        ))
      ),
    { fastCheck: { numRuns: 30 } }
  )
})
