/**
 * Tool-call repair: the first call of a model reply the agent answers as
 * invalid (for the model to repair), and the failure of a run whose model
 * sent such calls in more replies in a row than `maxToolCallRepairs`; and
 * the reply with arguments nested too deep cut, so it can be stored and sent again.
 */
import * as Prompt from "@effect/ai/Prompt"
import { InvalidToolCalls } from "../AgentError.js"
import type * as RunJournal from "../RunJournal.js"
import type { Compiled } from "./config.js"
import * as JsonDepth from "./jsonDepth.js"

/** A call of a model reply the agent answers with a failed result for the model to repair, and why. */
export interface InvalidCall {
  readonly call: Prompt.ToolCallPart
  readonly problem: string
}

/**
 * The first call of a reply the agent will answer as invalid: a tool the
 * call did not offer or the agent does not have, arguments that are not
 * JSON or fail the tool's schema, structured output that does not decode.
 */
export const invalidCallOf = (config: Compiled) => (reply: RunJournal.ModelCall): InvalidCall | undefined => {
  const { output, outputToolName, toolsByName } = config
  let outputCalls = 0
  for (const part of reply.message.content) {
    if (part.type !== "tool-call" || part.providerExecuted) continue
    if (part.name === outputToolName) {
      if (++outputCalls > 1) return { call: part, problem: "the structured output tool was called more than once" }
      const answer = output!.answer(part)
      if (answer.isFailure) return { call: part, problem: "the structured output does not match its schema" }
      continue
    }
    const entry = toolsByName.get(part.name)
    if (entry === undefined || !reply.offered.includes(part.name)) {
      return { call: part, problem: "the model has no tool of this name" }
    }
    const problem = entry.problem(part)
    if (problem !== undefined) return { call: part, problem }
  }
  return undefined
}

/** The failure of a run whose model sent an invalid call in more replies in a row than `maxToolCallRepairs`. */
export const repairsExhausted = (threadId: string, invalid: InvalidCall, replies: number): InvalidToolCalls =>
  new InvalidToolCalls({
    threadId,
    toolName: invalid.call.name,
    callId: invalid.call.id,
    reason: invalid.problem,
    replies
  })

/**
 * The reply's message with the arguments of each tool call nested past
 * `JsonDepth.maxDepth` cut to just past it (`JsonDepth.cut`): the call is
 * still answered as invalid, and the message stays writable by every
 * encoder and provider that takes it again (a provider writes a thread's
 * calls as JSON in the next request). The same message when no call is.
 */
export const cutDeepArguments = (message: Prompt.AssistantMessage): Prompt.AssistantMessage => {
  if (!message.content.some((part) => part.type === "tool-call" && JsonDepth.exceeds(part.params))) return message
  return Prompt.makeMessage("assistant", {
    content: message.content.map((part) =>
      part.type === "tool-call"
        ? Prompt.makePart("tool-call", {
          id: part.id,
          name: part.name,
          params: JsonDepth.cut(part.params),
          providerExecuted: part.providerExecuted,
          options: part.options
        })
        : part
    ),
    options: message.options
  })
}
