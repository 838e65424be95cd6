/**
 * How a budget (`ModelCallLimit`, `ToolCallLimit`, `Budget`) ends a run: the
 * assistant notice saying which limit was reached, and the soft landing —
 * the model call made when a budget is about to run out, with tools
 * disabled and a prompt asking for the answer, so the run ends on the
 * model's answer instead of a tool call it can never see the result of; for
 * a limit on one tool, the model calls made without that tool once its
 * allowance is spent.
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Effect from "effect/Effect"
import { appendToSystemPrompt } from "./toolPrompt.js"

/** The assistant message ending a run: `text` as a sentence ("model call limit reached: …" → "Model call limit reached: ….") */
export const notice = (text: string): Prompt.AssistantMessage =>
  Prompt.makeMessage("assistant", {
    content: [Prompt.makePart("text", { text: `${text.charAt(0).toUpperCase()}${text.slice(1)}.` })]
  })

/** What the model is told on its last call. */
export const lastCallPrompt = "This is your last model call in this run: no tools are available any more. " +
  "Answer the user now with what you have found so far, and say what is left undone."

/** Reports `decision`, then makes the call with tools disabled and {@link lastCallPrompt} in the system prompt. */
export const land = (
  request: Middleware.ModelRequest,
  next: Middleware.NextModelCall,
  decision: string,
  data?: unknown
): ReturnType<Middleware.NextModelCall> =>
  Effect.zipRight(
    Middleware.report(decision, data),
    next({ ...appendToSystemPrompt(request, lastCallPrompt), toolChoice: "none" })
  )

/** `choice` without `toolName`: a choice of that tool alone becomes `"auto"` (or `"none"` when no tool is left). */
const choiceWithout = (
  choice: LanguageModel.ToolChoice<string>,
  toolName: string,
  toolsLeft: number
): LanguageModel.ToolChoice<string> => {
  if (toolsLeft === 0) return "none"
  if (typeof choice === "string") return choice
  if ("tool" in choice) return choice.tool === toolName ? "auto" : choice
  const oneOf = choice.oneOf.filter((name) => name !== toolName)
  return oneOf.length === choice.oneOf.length ? choice : oneOf.length === 0 ? "auto" : { ...choice, oneOf }
}

/** What the model is told once the allowance of one tool is spent (the tool is no longer offered). */
export const toolSpentPrompt = (toolName: string): string =>
  `The tool "${toolName}" is no longer available in this run: its call limit is reached. ` +
  "Go on with the other tools, or answer with what you have."

/** Reports `decision`, then makes the call without offering `toolName`, telling the model why. */
export const withoutTool = (
  request: Middleware.ModelRequest,
  next: Middleware.NextModelCall,
  toolName: string,
  decision: string
): ReturnType<Middleware.NextModelCall> => {
  if (!request.tools.some((tool) => tool.name === toolName)) return next(request)
  const tools = request.tools.filter((tool) => tool.name !== toolName)
  return Effect.zipRight(
    Middleware.report(decision),
    next({
      ...appendToSystemPrompt(request, toolSpentPrompt(toolName)),
      tools,
      toolChoice: choiceWithout(request.toolChoice, toolName, tools.length)
    })
  )
}
