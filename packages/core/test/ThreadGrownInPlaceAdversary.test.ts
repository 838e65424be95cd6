/**
 * An adversarial pass over a thread grown in place (`RunState.unseen`): what
 * anyone outside the run was given (a tool call guard's request, a store's
 * checkpoints, a prompt the model kept, a watcher's state) must never change
 * as the run goes on, and a store never holds a reply that was not saved.
 */
import { LanguageModel, Prompt, Response } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Agent, Checkpointer, Middleware } from "@stepwise-agent/core"
import { Chunk, Effect, Exit, FastCheck, Layer, Option, Schema, Stream } from "effect"
import { Calculator } from "./utils.js"

const usage = new Response.Usage({ inputTokens: 1, outputTokens: 1, totalTokens: 2 })

type Messages = ReadonlyArray<Prompt.Message>

/** The parts of reply `i`: `calls` calls of `add` while `i < toolSteps`, then a text answer. */
const reply = (i: number, toolSteps: number, calls: number): Array<Response.AnyPart> =>
  (i < toolSteps
    ? [
      ...Array.from({ length: calls }, (_, j) =>
        Response.makePart("tool-call", {
          id: `c${i}-${j}`,
          name: "add",
          params: { a: i, b: j },
          providerExecuted: false
        })),
      Response.makePart("finish", { reason: "tool-calls", usage })
    ]
    : [
      Response.makePart("text", { text: `done after ${i}` }),
      Response.makePart("finish", { reason: "stop", usage })
    ]) as Array<Response.AnyPart>

/** A model that calls `add` (`calls` at once) `toolSteps` times, then answers; it hands each prompt to `keep`. */
const model = (toolSteps: number, calls: number, keep: (prompt: Prompt.Prompt) => void = () => {}) => {
  let call = 0
  return Layer.succeed(
    LanguageModel.LanguageModel,
    {
      generateText: (options: { readonly prompt: Prompt.Prompt }) =>
        Effect.sync(() => {
          keep(options.prompt)
          return new LanguageModel.GenerateTextResponse(reply(call++, toolSteps, calls) as Array<Response.Part<any>>)
        }),
      streamText: (options: { readonly prompt: Prompt.Prompt }) =>
        Stream.suspend(() => {
          keep(options.prompt)
          return Stream.fromIterable(reply(call++, toolSteps, calls))
        }),
      generateObject: () => Effect.dieMessage("not used")
    } as unknown as LanguageModel.Service
  )
}

/** Something given out, with the length it had then. */
interface Given {
  readonly messages: Messages
  readonly length: number
}

const given = (messages: Messages): Given => ({ messages, length: messages.length })

/** Asserts that each of `held` kept its length and is a prefix of `final`. */
const unchanged = (held: ReadonlyArray<Given>, final: Messages, what: string) =>
  held.forEach((h, i) => {
    assert.strictEqual(h.messages.length, h.length, `${what} ${i} changed length`)
    h.messages.forEach((message, j) => assert.strictEqual(message, final[j], `${what} ${i}, message ${j}`))
  })

describe("a thread grown in place: an adversary finds nothing that changes", () => {
  it.effect("a tool call guard set around the run keeps the state it was given", () =>
    Effect.gen(function*() {
      const held: Array<Given> = []
      // a guard installed around the whole run (not by a `wrapToolCall` hook): the run has no hook at all
      const guard: Middleware.ToolCallGuard = (request) =>
        Effect.sync(() => {
          held.push(given((request.state as { readonly messages: Messages }).messages))
          return Option.none()
        })
      const agent = yield* Agent.make({ toolkit: Calculator }).pipe(Effect.provide(model(3, 1)))
      const result = yield* agent.run("add", { threadId: "g" }).pipe(Middleware.guardToolCall(guard))
      assert.deepStrictEqual(held.map((h) => h.length), [2, 4, 6])
      unchanged(held, result.state.messages, "guard's state")
      assert.strictEqual(result.state.messages.length, 8)
    }).pipe(Effect.provide(Layer.merge(Checkpointer.layerMemory, Calculator.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })))))
})
