/**
 * Everything the loop needs, resolved once when the agent is built: the
 * configuration `Agent.make` checked, and what the steps derive from it (the
 * hooks of each node in run order, the wrap chains, the tools by name, the
 * keys each slice declares).
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Tool from "@effect/ai/Tool"
import type * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import type * as AgentState from "../AgentState.js"
import type * as Checkpointer from "../Checkpointer.js"
import type * as Middleware from "../Middleware.js"
import type { InputLimits } from "./input.js"
import type { HookNode } from "./machine.js"
import type * as OutputTool from "./outputTool.js"
import type { ToolChoice, ToolEntry } from "./tools.js"

/** The configuration of an agent, as `Agent.make` checked it. */
export interface LoopConfig {
  readonly middleware: ReadonlyArray<Middleware.Any>
  readonly layout: AgentState.Layout
  readonly tools: ReadonlyArray<ToolEntry>
  readonly systemPrompt: string | undefined
  readonly output: OutputTool.OutputTool | undefined
  readonly maxSteps: number
  /** How many model replies in a row may hold invalid tool calls, each answered for the model to repair. */
  readonly maxToolCallRepairs: number
  readonly toolConcurrency: number | "unbounded"
  /**
   * How much one input of `run`, `stream` or `send` may hold: characters of text, file data, tool arguments and
   * results, and messages.
   */
  readonly inputLimits: InputLimits
  /** The timeout of each tool (the `toolTimeout` and `toolTimeouts` options), for hooks that run calls themselves. */
  readonly toolTimeout?: ((toolName: string) => Duration.Duration | undefined) | undefined
  /** The longest one model call may take (`modelTimeout`; `undefined`: no limit). */
  readonly modelTimeout: Duration.Duration | undefined
  /** The most characters a streamed reply may hold (`maxReplyChars`). */
  readonly maxReplyChars: number
  readonly model: LanguageModel.Service
  readonly checkpointer: Checkpointer.Service
  /**
   * Spans per hook, model call and tool call: always, never, or (undefined)
   * only when a tracer other than Effect's built-in one is installed — the
   * built-in tracer exports nothing, and a span costs microseconds.
   */
  readonly spans: boolean | undefined
  /** Services the middleware hooks need, captured when the agent was built. */
  readonly context: Context.Context<never>
}

/** The configuration with what the steps derive from it. */
export interface Compiled extends LoopConfig {
  /** The hooks of each node, in the order they run (`after*` in reverse list order). */
  readonly nodes: Readonly<Record<HookNode, ReadonlyArray<Middleware.Any>>>
  readonly wrapModel: ReadonlyArray<Middleware.Any>
  readonly wrapTool: ReadonlyArray<Middleware.Any>
  /** `wrapModelStream` hooks, innermost first. */
  readonly wrapStream: ReadonlyArray<Middleware.Any>
  readonly inputHooks: ReadonlyArray<Middleware.Any>
  readonly onThreadDeleted: ReadonlyArray<Middleware.Any>
  readonly toolsByName: ReadonlyMap<string, ToolEntry>
  /** The tools offered to the model: the agent's, and the structured-output tool. */
  readonly toolList: ReadonlyArray<Tool.Any>
  readonly toolNames: ReadonlyArray<string>
  readonly toolChoice: ToolChoice
  readonly outputToolName: string | undefined
  /** The keys each middleware's slice declares. */
  readonly declaredKeys: ReadonlyMap<string, ReadonlySet<string>>
}

export const compile = (config: LoopConfig): Compiled => {
  const { middleware } = config
  const toolList: ReadonlyArray<Tool.Any> = config.output === undefined
    ? config.tools.map((entry) => entry.tool)
    : [...config.tools.map((entry) => entry.tool), config.output.tool]
  return {
    ...config,
    nodes: {
      beforeAgent: middleware.filter((m) => m.beforeAgent !== undefined),
      beforeModel: middleware.filter((m) => m.beforeModel !== undefined),
      afterModel: middleware.filter((m) => m.afterModel !== undefined).reverse(),
      afterAgent: middleware.filter((m) => m.afterAgent !== undefined).reverse()
    },
    wrapModel: middleware.filter((m) => m.wrapModelCall !== undefined),
    wrapTool: middleware.filter((m) => m.wrapToolCall !== undefined),
    wrapStream: middleware.filter((m) => m.wrapModelStream !== undefined).reverse(),
    inputHooks: middleware.filter((m) => m.transformInput !== undefined),
    onThreadDeleted: middleware.filter((m) => m.onThreadDeleted !== undefined),
    toolsByName: new Map(config.tools.map((entry) => [entry.tool.name, entry])),
    toolList,
    toolNames: toolList.map((tool) => tool.name),
    toolChoice: config.output !== undefined ? "required" : "auto",
    outputToolName: config.output?.name,
    declaredKeys: new Map(config.layout.owners.map((owner) => [owner.name, new Set(owner.keys)]))
  }
}
