/**
 * Tool-call repair: the first call of a model reply the agent answers as
 * invalid (for the model to repair), and the failure of a run whose model
 * sent such calls in more replies in a row than `maxToolCallRepairs`.
 */
import type * as Prompt from "@effect/ai/Prompt"
import { InvalidToolCalls } from "../AgentError.js"
import type * as RunJournal from "../RunJournal.js"
import type { Compiled } from "./config.js"

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
  for (const part of reply.message.content) {
    if (part.type !== "tool-call" || part.providerExecuted) continue
    if (part.name === outputToolName) {
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
