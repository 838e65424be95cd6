/**
 * Shared fixtures of the core behaviour tests: a calculator toolkit, a
 * middleware that records every hook call, and helpers to read transcripts.
 */
import { Prompt, Response, Tool, Toolkit } from "@effect/ai"
import { Middleware } from "@stepwise-agent/core"
import { HookRecorder, type ScriptedModel } from "@stepwise-agent/testing"
import { Effect, Schema } from "effect"

/** `add(a, b)`: the one tool of the calculator. */
export const Add = Tool.make("add", {
  description: "Adds two numbers",
  parameters: { a: Schema.Number, b: Schema.Number },
  success: Schema.Number
})

/** A toolkit with the calculator only. */
export const Calculator = Toolkit.make(Add)

/** The calculator's handlers. */
export const CalculatorLive = Calculator.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })

/** A middleware whose every hook passes through (a node hook returns nothing, a wrap hook calls `next` once). */
export const passThrough = (name: string): Middleware.Middleware<{}, never, never, never> =>
  Middleware.make({
    name,
    beforeAgent: () => Effect.void,
    beforeModel: () => Effect.void,
    afterModel: () => Effect.void,
    afterAgent: () => Effect.void,
    wrapModelCall: (request, next) => next(request),
    wrapToolCall: (request, next) => next(request)
  })

/** A middleware implementing every hook, recording `name.hook` (and `:in` / `:out` for wrap hooks) in `log`. */
export const recording = HookRecorder.middleware

/** An assistant reply built by a `wrapModelCall` that answers without the model. */
export const assistantText = (text: string): Middleware.ModelResponse => ({
  message: Prompt.makeMessage("assistant", { content: [Prompt.makePart("text", { text })] }),
  toolCalls: [],
  usage: new Response.Usage({ inputTokens: 0, outputTokens: 0, totalTokens: 0 }),
  finishReason: "stop"
})

const encodeMessages = Schema.encodeSync(Schema.Array(Prompt.Message))
const encodePrompt = Schema.encodeSync(Prompt.Prompt)

/** Messages in their encoded (plain JSON) form, for structural comparison. */
export const encoded = (messages: ReadonlyArray<Prompt.Message>) => encodeMessages(messages)

/** What a scripted model received, in comparable form. */
export const encodedRequests = (requests: ReadonlyArray<ScriptedModel.Request>) =>
  requests.map((request) => ({
    prompt: encodePrompt(request.prompt),
    toolNames: request.toolNames,
    toolChoice: request.toolChoice,
    streamed: request.streamed
  }))

/** The tool results of a conversation, in order. */
export const toolResults = (messages: ReadonlyArray<Prompt.Message>): Array<Prompt.ToolResultPart> =>
  messages.flatMap((message) =>
    message.role === "tool"
      ? message.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result")
      : []
  )

/** The roles of a conversation, in order. */
export const roles = (messages: ReadonlyArray<Prompt.Message>): Array<string> => messages.map((message) => message.role)
