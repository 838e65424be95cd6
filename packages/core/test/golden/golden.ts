/**
 * What the golden files were made of (`generate.ts`), and what
 * `Golden.test.ts` expects them to decode to.
 */
import { Prompt, Response } from "@effect/ai"
import { AgentState, Checkpointer, Middleware, type RunJournal } from "@stepwise-agent/core"
import { ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Option, Schema } from "effect"

/** `Option.fromNullable`, for the generator's map store. */
export const optionOf = <A>(value: A | undefined): Option.Option<A> => Option.fromNullable(value)

/** A thread of 70 messages: a system prompt, then rounds of a question, a tool call and its result. */
export const messages: ReadonlyArray<Prompt.Message> = [
  Prompt.makeMessage("system", { content: "You are terse." }),
  ...Array.from({ length: 23 }, (_, i) => [
    Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: `question ${i}: ünïcode ✓` })] }),
    Prompt.makeMessage("assistant", {
      content: [
        Prompt.makePart("text", { text: `let me look (${i})` }),
        Prompt.makePart("tool-call", {
          id: `call_${i}`,
          name: "echo",
          params: { text: `${i}`, nested: { list: [1, 2.5, null, true] } },
          providerExecuted: false
        })
      ]
    }),
    Prompt.makeMessage("tool", {
      content: [
        Prompt.makePart("tool-result", {
          id: `call_${i}`,
          name: "echo",
          result: `${i}`,
          isFailure: i % 5 === 4,
          providerExecuted: false
        })
      ]
    })
  ]).flat()
]

/** The stored checkpoint: with slices, a pending wait and the waiting run's progress. */
export const checkpoint: Checkpointer.Checkpoint = {
  version: 1,
  threadId: "golden/thread 1",
  messages: AgentState.encodeMessages(messages),
  slices: { counter: { modelCalls: "3" }, approvals: { decided: ["a", "b"], last: null } },
  pending: {
    node: "afterModel",
    middleware: "approvals",
    value: { question: "run rm -rf?", calls: [{ id: "call_22", name: "echo" }] },
    key: "approvals/0",
    durable: true
  },
  run: { step: 4, inputTokens: 1200, outputTokens: 85, totalTokens: 1285 }
}

/** Counts model calls; the count is stored as a string. */
export const counter = Middleware.make({
  name: "counter",
  state: { schema: Schema.Struct({ modelCalls: Schema.NumberFromString }), initial: { modelCalls: 0 } },
  beforeModel: ({ state }) => Effect.succeed({ state: { modelCalls: state.modelCalls + 1 } })
})

/** Two runs: the first calls `echo` once then answers; the second calls it twice at once then answers. */
export const script = [
  ScriptedModel.toolCalls([{ name: "echo", params: { text: "one" }, id: "call_a" }], {
    usage: { inputTokens: 11, outputTokens: 3, totalTokens: 14 }
  }),
  ScriptedModel.text("first done", { inputTokens: 20, outputTokens: 2, totalTokens: 22 }),
  ScriptedModel.toolCalls([
    { name: "echo", params: { text: "two" }, id: "call_b" },
    { name: "echo", params: { text: "three" }, id: "call_c" }
  ], { text: "checking", usage: { inputTokens: 30, outputTokens: 6, totalTokens: 36 } }),
  ScriptedModel.text("second done", { inputTokens: 41, outputTokens: 2, totalTokens: 43 })
]

/** The value of a `load` step (as `internal/checkpoint.ts` journals it). */
export const LoadStep = Schema.OptionFromNullOr(Checkpointer.Checkpoint)

/** The value of an `inbox` step (as `internal/loop.ts` journals it: the steered messages taken in). */
export const InboxStep = Schema.Array(Prompt.Message)

/** The value of a `model` step. */
export const modelCall: RunJournal.ModelCall = {
  message: Prompt.makeMessage("assistant", {
    content: [
      Prompt.makePart("reasoning", { text: "the user wants an echo" }),
      Prompt.makePart("text", { text: "calling" }),
      Prompt.makePart("tool-call", { id: "call_x", name: "echo", params: { text: "x" }, providerExecuted: false })
    ]
  }),
  usage: new Response.Usage({
    inputTokens: 100,
    outputTokens: 20,
    totalTokens: 125,
    reasoningTokens: 5,
    cachedInputTokens: 64
  }),
  finishReason: "tool-calls",
  offered: ["echo", "final_answer"]
}

/** The value of a `tool` step. */
export const toolResult: Prompt.ToolResultPart = Prompt.makePart("tool-result", {
  id: "call_x",
  name: "echo",
  result: { echoed: "x", at: [1, 2] },
  isFailure: false,
  providerExecuted: false
})
