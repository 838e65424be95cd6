import * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { ToolDefect, ToolTimeout } from "../AgentError.js"
import { toolResult } from "../Middleware.js"
import * as ToolContext from "../ToolContext.js"

/** A tool the agent can run: its definition and how to run it. */
export interface ToolEntry {
  readonly tool: Tool.Any
  /** Runs a call on `threadId`; the handler sees it as `ToolContext.current`. */
  readonly run: (
    call: Prompt.ToolCallPart,
    threadId: string
  ) => Effect.Effect<Prompt.ToolResultPart, ToolDefect | ToolTimeout>
}

/**
 * The tool with its calls ended after `timeout`: the handler is interrupted
 * (its finalizers run) and the call fails with `ToolTimeout`.
 */
export const withTimeout = (entry: ToolEntry, timeout: Duration.Duration): ToolEntry => {
  const timeoutMillis = Duration.toMillis(timeout)
  return {
    tool: entry.tool,
    run: (call, threadId) =>
      Effect.timeoutFail(entry.run(call, threadId), {
        duration: timeout,
        onTimeout: () => new ToolTimeout({ toolName: entry.tool.name, callId: call.id, timeoutMillis })
      })
  }
}

/** The failed result the model reads for a call that timed out. */
export const timedOutResult = (call: Prompt.ToolCallPart, error: ToolTimeout): Prompt.ToolResultPart =>
  toolResult(call, { error: `${error.message}; it was stopped` }, { isFailure: true })

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
    // no prototype: a tool the model names `constructor` or `toString` is not found on it
    const record: Record<string, Tool.Any> = Object.create(null)
    for (const tool of tools) record[tool.name] = wireTool(tool)
    toolkit = { tools: record, handle: unreachableHandle as any }
    wireToolkits.set(tools, toolkit)
  }
  return toolkit
}

const formatCause = (cause: unknown): string =>
  ParseResult.isParseError(cause) ? ParseResult.TreeFormatter.formatErrorSync(cause) : String(cause)

const invalidArguments = (call: Prompt.ToolCallPart, tool: Tool.Any, cause: unknown) =>
  toolResult(call, { error: `Invalid arguments for tool "${tool.name}": ${formatCause(cause)}` }, { isFailure: true })

const defect = (call: Prompt.ToolCallPart, tool: Tool.Any, description: string, cause?: unknown) =>
  new ToolDefect({
    toolName: tool.name,
    callId: call.id,
    description,
    ...(cause === undefined ? {} : { cause })
  })

/**
 * Runs a tool's calls with its handler directly: its parameters decoded, its
 * result (or typed failure) encoded through the tool's schemas, as
 * `Toolkit.handle` does, without its span and its second pass over the
 * result.
 */
const runWithHandler = (tool: Tool.Any, handler: Tool.Handler<string>) => {
  const decodeParameters = Schema.decodeUnknown(tool.parametersSchema as Schema.Schema<unknown, unknown>)
  const encodeSuccess = Schema.encodeUnknown(tool.successSchema as Schema.Schema<unknown, unknown>)
  const encodeFailure = Schema.encodeUnknown(tool.failureSchema as Schema.Schema<unknown, unknown>)
  return (call: Prompt.ToolCallPart, threadId: string): Effect.Effect<Prompt.ToolResultPart, ToolDefect> =>
    decodeParameters(call.params).pipe(
      Effect.matchEffect({
        onFailure: (error) => Effect.succeed(invalidArguments(call, tool, error)),
        onSuccess: (params) =>
          Effect.mapInputContext(
            handler.handler(params) as Effect.Effect<unknown, unknown>,
            (input: Context.Context<never>) =>
              Context.add(
                Context.merge(handler.context, input),
                ToolContext.CurrentToolContext,
                Option.some(ToolContext.make(call.id, tool.name, threadId))
              )
          ).pipe(
            Effect.matchEffect({
              onSuccess: (value) =>
                Effect.mapBoth(encodeSuccess(value), {
                  onFailure: (error) =>
                    defect(call, tool, `its result does not match its success schema: ${formatCause(error)}`),
                  onSuccess: (encoded) => toolResult(call, encoded)
                }),
              onFailure: (failure) =>
                Effect.mapBoth(encodeFailure(failure), {
                  onFailure: (error) =>
                    defect(call, tool, `its failure does not match its failure schema: ${formatCause(error)}`),
                  onSuccess: (encoded) => toolResult(call, encoded, { isFailure: true })
                })
            })
          )
      }),
      Effect.catchAllDefect((cause) => Effect.fail(defect(call, tool, String(cause), cause)))
    )
}

/** Runs a tool's calls through `Toolkit.handle` (when its handler is not in the agent's context). */
const runWithToolkit = (
  toolkit: Toolkit.WithHandler<Record<string, Tool.Any>>,
  tool: Tool.Any,
  context: Context.Context<never>
) => {
  const encodeFailure = Schema.encodeUnknown(tool.failureSchema as Schema.Schema<unknown, unknown>)
  return (call: Prompt.ToolCallPart, threadId: string): Effect.Effect<Prompt.ToolResultPart, ToolDefect> =>
    (toolkit.handle as unknown as (name: string, params: unknown) => Effect.Effect<Tool.HandlerResult<any>, unknown>)(
      tool.name,
      call.params
    ).pipe(
      Effect.map((result) => toolResult(call, result.encodedResult, { isFailure: result.isFailure })),
      Effect.catchAll((error): Effect.Effect<Prompt.ToolResultPart, ToolDefect> => {
        if (AiError.isAiError(error) && error.module === "Toolkit") {
          return error._tag === "MalformedOutput"
            ? Effect.succeed(invalidArguments(call, tool, error.cause ?? error.description))
            : Effect.fail(defect(call, tool, `${error.description ?? "invalid result"}: ${formatCause(error.cause)}`))
        }
        return Effect.mapBoth(encodeFailure(error), {
          onFailure: (parseError) =>
            defect(call, tool, `its failure does not match its failure schema: ${formatCause(parseError)}`),
          onSuccess: (encoded) => toolResult(call, encoded, { isFailure: true })
        })
      }),
      Effect.catchAllDefect((cause) => Effect.fail(defect(call, tool, String(cause), cause))),
      Effect.provide(context),
      Effect.provideService(ToolContext.CurrentToolContext, Option.some(ToolContext.make(call.id, tool.name, threadId)))
    )
}

/**
 * Runs tool calls of a handled toolkit. Invalid arguments and the tool's
 * typed failures become failed tool results; a defect or a result that
 * breaks the tool's success schema is a `ToolDefect`.
 */
export const entriesOf = (
  toolkit: Toolkit.WithHandler<Record<string, Tool.Any>>,
  context: Context.Context<never>
): ReadonlyArray<ToolEntry> =>
  Object.values(toolkit.tools).map((tool) => {
    const handler = context.unsafeMap.get(tool.id) as Tool.Handler<string> | undefined
    return {
      tool,
      run: handler === undefined ? runWithToolkit(toolkit, tool, context) : runWithHandler(tool, handler)
    }
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
    typeof part.name === "string" && !Object.hasOwn(known, part.name)
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
