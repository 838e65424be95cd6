/**
 * ToolEmulator: a model fakes tool results, so an agent can be tried before
 * its tools exist or without their side effects.
 *
 * As in LangChain v1's `LLMToolEmulator`: in `wrapToolCall`, for each
 * emulated tool (all of them when `tools` is omitted) the emulator model gets
 * the tool's name, description, parameter schema and the call's arguments,
 * and its text answer becomes the tool's result; the real handler never
 * runs. A listed name the agent has no tool for fails `Agent.make`
 * (`AgentError.UnknownTools`), so a typo cannot let a real tool run. Calls
 * of tools that are not emulated run as usual, and a call of a
 * tool the agent does not have is left to the agent (which answers it with a
 * failed tool result). Each emulated call is reported as a decision.
 *
 * @since 0.1.0
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
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
   * The tools to emulate (default: all).
   * `Agent.make` fails with `AgentError.UnknownTools` on a name that is not a tool of the agent.
   */
  readonly tools?: ReadonlyArray<string> | undefined
  /**
   * The model that emulates. Default: the `LanguageModel` in the context
   * where the middleware is built (usually the agent's own model).
   */
  readonly model?: LanguageModel.Service | undefined
  /** The middleware's name (default `"toolEmulator"`). */
  readonly name?: string | undefined
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/**
 * The prompt the emulator model gets for a call.
 *
 * @example
 * ```ts
 * import * as ToolEmulator from "@stepwise-agent/middleware/ToolEmulator"
 * import { Prompt, Tool } from "@effect/ai"
 * import { Schema } from "effect"
 *
 * const Weather = Tool.make("weather", { description: "Current weather", parameters: { city: Schema.String } })
 * const prompt = ToolEmulator.emulationPrompt(
 *   Weather,
 *   Prompt.makePart("tool-call", { id: "c1", name: "weather", params: { city: "Paris" }, providerExecuted: false })
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const emulationPrompt = (tool: Tool.Any, call: Prompt.ToolCallPart): Prompt.Prompt =>
  Prompt.fromMessages([
    Prompt.makeMessage("user", {
      content: [
        Prompt.makePart("text", {
          text: [
            "You are emulating a tool call for testing purposes.",
            "",
            `Tool: ${tool.name}`,
            `Description: ${tool.description ?? "(no description)"}`,
            `Parameters schema: ${JSON.stringify(Tool.getJsonSchema(tool as any))}`,
            `Arguments: ${JSON.stringify(call.params)}`,
            "",
            "Generate a realistic response that this tool would return given these arguments.",
            "Return ONLY the tool's output, no explanation or preamble. Introduce variation into your responses."
          ].join("\n")
        })
      ]
    })
  ])

const OptionsSchema = Schema.Struct({
  tools: Schema.optional(Schema.Array(Check.NonEmpty)),
  model: Schema.optional(Check.LanguageModelService),
  name: Schema.optional(Check.NonEmpty)
})

const validate = Effect.fnUntraced(function*(options: Options) {
  yield* Check.validate("ToolEmulator", OptionsSchema, options)
  const tools = options.tools
  if (tools === undefined) return
  if (tools.length === 0) {
    return yield* Check.invalid(
      "ToolEmulator",
      "tools",
      "is empty, so nothing would be emulated; omit it to emulate every tool"
    )
  }
  const twice = tools.find((name, index) => tools.indexOf(name) !== index)
  if (twice !== undefined) return yield* Check.invalid("ToolEmulator", "tools", `names "${twice}" twice`)
})

const make = (options: Options, model: LanguageModel.Service) => {
  const emulated = options.tools === undefined ? undefined : new Set(options.tools)
  return Middleware.make({
    name: options.name ?? "toolEmulator",
    uses: { tools: options.tools },
    wrapToolCall: (request, next) => {
      const tool = request.tool
      if (tool === undefined || (emulated !== undefined && !emulated.has(tool.name))) return next(request)
      return Effect.gen(function*() {
        const response = yield* model.generateText({ prompt: emulationPrompt(tool, request.call) })
        yield* Middleware.report(`emulated ${tool.name}`, { callId: request.call.id })
        return Middleware.toolResult(request.call, response.text)
      })
    }
  })
}

/**
 * Builds the middleware. Without a `model` it uses the `LanguageModel` of
 * the context the agent is built in. Bad options fail `Agent.make` with
 * `AgentError.InvalidOptions`, and a listed tool the agent does not have
 * with `AgentError.UnknownTools`; a failure of the emulator model (an
 * `AiError`) fails the run.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import * as ToolEmulator from "@stepwise-agent/middleware/ToolEmulator"
 * import { Tool, Toolkit } from "@effect/ai"
 * import { Effect, Schema } from "effect"
 *
 * const Shop = Toolkit.make(Tool.make("charge_card", { parameters: { cents: Schema.Number }, success: Schema.String }))
 *
 * const program = Effect.gen(function*() {
 *   // emulate the payment tool with the agent's own model, run the others
 *   const emulator = ToolEmulator.middleware({ tools: ["charge_card"] })
 *   const agent = yield* Agent.make({ toolkit: Shop, middleware: [emulator] })
 *   return yield* agent.run("Buy the blue one", { threadId: "t1" })
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
      yield* validate(options ?? {})
      const model = options?.model ?? (yield* LanguageModel.LanguageModel)
      return make(options ?? {}, model)
    }).pipe(Effect.withSpan("ToolEmulator.middleware", { captureStackTrace: false })),
    { name: Check.nameOf(options, "toolEmulator") }
  )
