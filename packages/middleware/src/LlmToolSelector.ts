/**
 * LlmToolSelector: before each model call, a (possibly smaller, cheaper)
 * model picks the tools relevant to the conversation, and the main model is
 * offered only those. It saves tokens and helps a model choose when an agent
 * has many tools.
 *
 * As in LangChain v1's `LLMToolSelectorMiddleware`: the selector sees the
 * tools (name and description) and the last user message and answers with
 * `generateObject` in the shape `{ tools: Array<string> }`, most relevant
 * first; names it made up are ignored; at most `maxTools` are kept (the first
 * ones it listed); the `alwaysInclude` tools are always offered and do not
 * count towards `maxTools`. The tools keep their order in the request, and a
 * tool the request's `toolChoice` names is kept too. Each selection is
 * reported as a decision.
 *
 * With `responseFormat`, the agent's structured-output tool (`"final_answer"`
 * unless `outputToolName` says otherwise) is one of the request's tools: put
 * it in `alwaysInclude`, or the selector may drop it.
 *
 * @since 0.1.0
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import type * as Tool from "@effect/ai/Tool"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Check from "./internal/options.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * The model that selects. Default: the `LanguageModel` in the context
   * where the middleware is built (usually the agent's own model).
   */
  readonly model?: LanguageModel.Service | undefined
  /** The most tools to offer besides `alwaysInclude` (default: no limit). */
  readonly maxTools?: number | undefined
  /**
   * Tools always offered (when the request has them).
   * `Agent.make` fails with `AgentError.UnknownTools` on a name that is not a tool of the agent.
   */
  readonly alwaysInclude?: ReadonlyArray<string> | undefined
  /** The selector's instructions (default: {@link defaultSystemPrompt}). */
  readonly systemPrompt?: string | undefined
  /** The middleware's name (default `"llmToolSelector"`). */
  readonly name?: string | undefined
}

/**
 * The selector's default instructions.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultSystemPrompt = "Your goal is to select the most relevant tools for answering the user's query."

/**
 * What the selector model answers.
 *
 * @since 0.1.0
 * @category models
 */
export const Selection = Schema.Struct({
  tools: Schema.Array(Schema.String).annotations({
    description: "The names of the relevant tools, the most relevant first"
  })
}).annotations({ identifier: "ToolSelection" })

/**
 * @since 0.1.0
 * @category models
 */
export type Selection = typeof Selection.Type

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

const lastUserText = (messages: ReadonlyArray<Prompt.Message>): string | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.role === "user") {
      return message.content.map((part) => part.type === "text" ? part.text : "").join("")
    }
  }
  return undefined
}

const namedByChoice = (choice: LanguageModel.ToolChoice<string>): ReadonlyArray<string> =>
  typeof choice === "string" ? [] : "tool" in choice ? [choice.tool] : choice.oneOf

const selectorPrompt = (
  systemPrompt: string,
  maxTools: number | undefined,
  candidates: ReadonlyArray<Tool.Any>,
  question: string
): Prompt.Prompt => {
  const limit = maxTools === undefined
    ? ""
    : `\nIMPORTANT: List the tool names in order of relevance, with the most relevant first. ` +
      `If you exceed the maximum number of tools, only the first ${maxTools} will be used.`
  const list = candidates.map((tool) => `- ${tool.name}: ${tool.description ?? "(no description)"}`).join("\n")
  return Prompt.fromMessages([
    Prompt.makeMessage("system", {
      content: `${systemPrompt}${limit}\n\nAvailable tools:\n${list}\n\n` +
        `Answer with JSON of the form {"tools": ["tool_name", ...]} using only the names above.`
    }),
    Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: question })] })
  ])
}

const OptionsSchema = Schema.Struct({
  model: Schema.optional(Check.LanguageModelService),
  maxTools: Schema.optional(Check.AtLeastOne),
  alwaysInclude: Schema.optional(Schema.Array(Check.NonEmpty)),
  systemPrompt: Schema.optional(Check.NonBlank),
  name: Schema.optional(Check.NonEmpty)
})

const make = (options: Options, model: LanguageModel.Service) => {
  const alwaysInclude = [...new Set(options.alwaysInclude ?? [])]
  const maxTools = options.maxTools
  const systemPrompt = options.systemPrompt ?? defaultSystemPrompt
  return Middleware.make({
    name: options.name ?? "llmToolSelector",
    uses: { tools: alwaysInclude },
    wrapModelCall: (request, next) =>
      Effect.gen(function*() {
        if (request.tools.length === 0) return yield* next(request)
        const kept = new Set([...alwaysInclude, ...namedByChoice(request.toolChoice)])
        const candidates = request.tools.filter((tool) => !kept.has(tool.name))
        if (candidates.length === 0) return yield* next(request)
        const question = lastUserText(request.messages)
        if (question === undefined) {
          yield* Middleware.report("no user message to select tools for; offering all tools")
          return yield* next(request)
        }
        const response = yield* model.generateObject({
          prompt: selectorPrompt(systemPrompt, maxTools, candidates, question),
          schema: Selection,
          objectName: "tool_selection"
        })
        const candidateNames = new Set(candidates.map((tool) => tool.name))
        const selected: Array<string> = []
        const ignored: Array<string> = []
        for (const name of response.value.tools) {
          if (!candidateNames.has(name)) {
            if (!kept.has(name) && !ignored.includes(name)) ignored.push(name)
          } else if (!selected.includes(name) && (maxTools === undefined || selected.length < maxTools)) {
            selected.push(name)
          }
        }
        for (const name of selected) kept.add(name)
        const tools = request.tools.filter((tool) => kept.has(tool.name))
        yield* Middleware.report(
          `offering ${tools.length} of ${request.tools.length} tools: ${
            tools.length === 0 ? "none" : tools.map((tool) => tool.name).join(", ")
          }`,
          { selected, alwaysIncluded: alwaysInclude, ignored, offered: tools.map((tool) => tool.name) }
        )
        return yield* next({ ...request, tools })
      })
  })
}

/**
 * Builds the middleware. Without a `model` it uses the `LanguageModel` of
 * the context the agent is built in. Bad options fail `Agent.make` with
 * `AgentError.InvalidOptions`, and `alwaysInclude` names that are not tools
 * of the agent with `AgentError.UnknownTools`; during a run, a failure of
 * the selector model (an `AiError`, e.g. an answer that is
 * not `{ tools: [...] }`) fails the model call.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import * as LlmToolSelector from "@stepwise-agent/middleware/LlmToolSelector"
 * import { type LanguageModel, Tool, Toolkit } from "@effect/ai"
 * import { Effect, Schema } from "effect"
 *
 * declare const smallModel: LanguageModel.Service
 * const Tools = Toolkit.make(Tool.make("search", { parameters: { query: Schema.String }, success: Schema.String }))
 *
 * const program = Effect.gen(function*() {
 *   const selector = LlmToolSelector.middleware({ model: smallModel, maxTools: 3, alwaysInclude: ["search"] })
 *   const agent = yield* Agent.make({ toolkit: Tools, middleware: [selector] })
 *   return yield* agent.run("What is the weather in Paris?", { threadId: "t1" })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware: {
  (options: Options & { readonly model: LanguageModel.Service }): Middleware.Middleware
  (options?: Options | undefined): Middleware.Middleware<{}, never, LanguageModel.LanguageModel>
} = (options?: Options | undefined): any =>
  Middleware.unwrap(
    Effect.gen(function*() {
      yield* Check.validate("LlmToolSelector", OptionsSchema, options)
      const model = options?.model ?? (yield* LanguageModel.LanguageModel)
      return make(options ?? {}, model)
    }).pipe(Effect.withSpan("LlmToolSelector.middleware", { captureStackTrace: false })),
    { name: Check.nameOf(options, "llmToolSelector") }
  )
