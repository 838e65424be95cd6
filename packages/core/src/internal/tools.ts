import * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Chunk from "effect/Chunk"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { ToolDefect } from "../AgentError.js"
import { toolResult } from "../Middleware.js"

/** A tool the agent can run: its definition and how to run it. */
export interface ToolEntry {
  readonly tool: Tool.Any
  readonly run: (call: Prompt.ToolCallPart) => Effect.Effect<Prompt.ToolResultPart, ToolDefect>
}

const Lenient = Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown }))

const wireTools = new WeakMap<Tool.Any, Tool.Any>()

/**
 * The copy of a tool sent to the model: the same name, description and JSON
 * schema, but parameters that accept any object, so invalid arguments reach
 * the agent (which answers them with a failed tool result the model can
 * repair) instead of failing the whole model call.
 */
export const wireTool = (tool: Tool.Any): Tool.Any => {
  let wire = wireTools.get(tool)
  if (wire === undefined) {
    const jsonSchema = Tool.getJsonSchemaFromSchemaAst(tool.parametersSchema.ast) as object
    wire = (tool as any).setParameters(Lenient.annotations({ jsonSchema })) as Tool.Any
    wireTools.set(tool, wire)
  }
  return wire
}

const wireToolkits = new WeakMap<ReadonlyArray<Tool.Any>, Toolkit.WithHandler<Record<string, Tool.Any>>>()

const unreachableHandle = () => Effect.dieMessage("the agent resolves tool calls itself")

/** The toolkit handed to `LanguageModel`, built once per tool list. */
export const wireToolkit = (
  tools: ReadonlyArray<Tool.Any>
): Toolkit.WithHandler<Record<string, Tool.Any>> | undefined => {
  if (tools.length === 0) return undefined
  let toolkit = wireToolkits.get(tools)
  if (toolkit === undefined) {
    const record: Record<string, Tool.Any> = {}
    for (const tool of tools) record[tool.name] = wireTool(tool)
    toolkit = { tools: record, handle: unreachableHandle as any }
    wireToolkits.set(tools, toolkit)
  }
  return toolkit
}

const formatCause = (cause: unknown): string =>
  ParseResult.isParseError(cause) ? ParseResult.TreeFormatter.formatErrorSync(cause) : String(cause)

/**
 * Runs tool calls through a handled toolkit. Invalid arguments and the
 * tool's typed failures become failed tool results; a defect or a result
 * that breaks the tool's success schema is a `ToolDefect`.
 */
export const entriesOf = (
  toolkit: Toolkit.WithHandler<Record<string, Tool.Any>>,
  context: Context.Context<never>
): ReadonlyArray<ToolEntry> =>
  Object.values(toolkit.tools).map((tool) => {
    const encodeFailure = Schema.encodeUnknown(tool.failureSchema as Schema.Schema<unknown, unknown>)
    const run = (call: Prompt.ToolCallPart): Effect.Effect<Prompt.ToolResultPart, ToolDefect> =>
      (toolkit.handle as unknown as (name: string, params: unknown) => Effect.Effect<Tool.HandlerResult<any>, unknown>)(
        tool.name,
        call.params
      ).pipe(
        Effect.map((result) => toolResult(call, result.encodedResult, { isFailure: result.isFailure })),
        Effect.catchAll((error): Effect.Effect<Prompt.ToolResultPart, ToolDefect> => {
          if (AiError.isAiError(error) && error.module === "Toolkit") {
            if (error._tag === "MalformedOutput") {
              return Effect.succeed(toolResult(call, {
                error: `Invalid arguments for tool "${tool.name}": ${formatCause(error.cause ?? error.description)}`
              }, { isFailure: true }))
            }
            return Effect.fail(
              new ToolDefect({
                toolName: tool.name,
                callId: call.id,
                description: `${error.description ?? "invalid result"}: ${formatCause(error.cause)}`
              })
            )
          }
          return encodeFailure(error).pipe(
            Effect.map((encoded) => toolResult(call, encoded, { isFailure: true })),
            Effect.mapError((parseError) =>
              new ToolDefect({
                toolName: tool.name,
                callId: call.id,
                description: `its failure does not match its failure schema: ${formatCause(parseError)}`
              })
            )
          )
        }),
        Effect.catchAllDefect((defect) =>
          Effect.fail(
            new ToolDefect({ toolName: tool.name, callId: call.id, description: String(defect), cause: defect })
          )
        ),
        Effect.provide(context)
      )
    return { tool, run }
  })

/** The answer to a call of a tool the agent does not have. */
export const unknownToolResult = (call: Prompt.ToolCallPart, available: ReadonlyArray<string>) =>
  toolResult(call, {
    error: `Unknown tool "${call.name}". Available tools: ${available.length === 0 ? "none" : available.join(", ")}`
  }, { isFailure: true })

/** Whether the last assistant message asked for tools run by the agent. */
export const lastAssistantCallsTools = (messages: ReadonlyArray<Prompt.Message>): boolean => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.role === "assistant") {
      return message.content.some((part) => part.type === "tool-call" && !part.providerExecuted)
    }
  }
  return false
}

/** The type of the `toolChoice` option. */
export type ToolChoice = LanguageModel.ToolChoice<string>

const emptyToolkit: Toolkit.WithHandler<Record<string, Tool.Any>> = { tools: {}, handle: unreachableHandle as any }

type PartDecoder = (u: unknown) => Effect.Effect<Response.AnyPart, ParseResult.ParseError>

const partDecoders = new WeakMap<object, PartDecoder>()
const streamPartDecoders = new WeakMap<object, PartDecoder>()

const partDecoder = (toolkit: Toolkit.WithHandler<Record<string, Tool.Any>>, streamed: boolean): PartDecoder => {
  const cache = streamed ? streamPartDecoders : partDecoders
  let decode = cache.get(toolkit)
  if (decode === undefined) {
    const schema = streamed ? Response.StreamPart(toolkit) : Response.Part(toolkit)
    decode = Schema.decodeUnknown(schema as Schema.Schema<Response.AnyPart, any>)
    cache.set(toolkit, decode)
  }
  return decode
}

/**
 * `LanguageModel` rejects a whole response when the model calls a tool it
 * was not given (the tool name is a literal in its response schema), which
 * would end the run on a mistake the model can repair. The rejected parts
 * are still in the parse error (`issue.actual`): decode them again, keeping
 * calls of unknown tools as plain tool calls that the agent answers with a
 * failed tool result. `streamed` says whether the parts are stream parts.
 * Returns `undefined` when the error is of another kind.
 */
export const recoverUnknownToolCalls = (
  error: AiError.AiError,
  toolkit: Toolkit.WithHandler<Record<string, Tool.Any>> | undefined,
  streamed: boolean
): Effect.Effect<Array<Response.AnyPart>, ParseResult.ParseError> | undefined => {
  if (error._tag !== "MalformedOutput" || !ParseResult.isParseError(error.cause)) return undefined
  const known: Record<string, unknown> = toolkit?.tools ?? {}
  const actual = error.cause.issue.actual
  const raw: ReadonlyArray<unknown> | undefined = Array.isArray(actual)
    ? actual
    : Chunk.isChunk(actual)
    ? Chunk.toReadonlyArray(actual as Chunk.Chunk<unknown>)
    : undefined
  const isUnknownCall = (part: unknown): part is Response.ToolCallPartEncoded =>
    Predicate.hasProperty(part, "type") && part.type === "tool-call" && Predicate.hasProperty(part, "name") &&
    typeof part.name === "string" && !(part.name in known)
  if (raw === undefined || !raw.some(isUnknownCall)) return undefined
  const decode = partDecoder(toolkit ?? emptyToolkit, streamed)
  return Effect.forEach(raw, (part) =>
    isUnknownCall(part)
      ? Effect.succeed(Response.makePart("tool-call", {
        id: part.id,
        name: part.name,
        params: part.params,
        providerExecuted: false
      }) as Response.AnyPart)
      : decode(part))
}
