import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { ToolDefect, ToolTimeout } from "../AgentError.js"
import * as Secrets from "../Secrets.js"
import * as ToolContext from "../ToolContext.js"
import * as ToolEffect from "../ToolEffect.js"
import * as AiSeams from "./aiSeams.js"
import { identityMemo } from "./fast/identityMemo.js"
import { addService, withContext } from "./fast/withContext.js"
import * as JsonDepth from "./jsonDepth.js"
import * as ToolResult from "./toolResult.js"

/** Whether `u` is a handled toolkit (`Toolkit.WithHandler`: tools and a `handle`), as `McpToolkit.make` yields. */
export const isHandledToolkit = (u: unknown): u is Toolkit.WithHandler<any> =>
  Predicate.isObject(u) && !Effect.isEffect(u) && Predicate.isObject((u as { tools?: unknown }).tools) &&
  Predicate.isFunction((u as { handle?: unknown }).handle)

/** An agent's or middleware's tools as the Effect `Agent.make` builds: a handled toolkit is wrapped as is. */
export const toolkitEffect = <TE, TR>(
  toolkit: Effect.Effect<Toolkit.WithHandler<any>, TE, TR> | Toolkit.WithHandler<any>
): Effect.Effect<Toolkit.WithHandler<any>, TE, TR> => Effect.isEffect(toolkit) ? toolkit : Effect.succeed(toolkit)

/** A tool the agent can run: its definition and how to run it. */
export interface ToolEntry {
  readonly tool: Tool.Any
  /** What is wrong with a call's arguments (for the model to repair), or `undefined` when they decode. */
  readonly problem: (call: Prompt.ToolCallPart) => string | undefined
  /** Runs a call on `threadId`; the handler sees it as `ToolContext.current`. */
  readonly run: (
    call: Prompt.ToolCallPart,
    threadId: string
  ) => Effect.Effect<Prompt.ToolResultPart, ToolDefect | ToolTimeout>
  /** Whether a call can fail with `ToolTimeout` (the tool has a timeout, {@link withTimeout}). */
  readonly timesOut?: boolean | undefined
}

/**
 * The tool with its calls ended after `timeout`: the handler is interrupted
 * (its finalizers run) and the call fails with `ToolTimeout`.
 */
export const withTimeout = (entry: ToolEntry, timeout: Duration.Duration): ToolEntry => {
  const timeoutMillis = Duration.toMillis(timeout)
  return {
    tool: entry.tool,
    problem: entry.problem,
    run: (call, threadId) =>
      Effect.timeoutFail(entry.run(call, threadId), {
        duration: timeout,
        onTimeout: () => new ToolTimeout({ toolName: entry.tool.name, callId: call.id, timeoutMillis })
      }),
    timesOut: true
  }
}

/** The failed result the model reads for a call that timed out. */
export const timedOutResult = (call: Prompt.ToolCallPart, error: ToolTimeout): Prompt.ToolResultPart =>
  ToolResult.make(call, { error: `${error.message}; it was stopped` }, { isFailure: true })

/**
 * The copy of a tool sent to the model: the same name, description and JSON
 * schema, but parameters that accept any value, so invalid arguments (the
 * wrong shape, or text that is not JSON) reach the agent, which answers
 * them with a failed tool result the model can repair, instead of failing
 * the whole model call. Built once per tool.
 */
export const wireTool: (tool: Tool.Any) => Tool.Any = identityMemo((tool) => {
  const jsonSchema = Tool.getJsonSchemaFromSchemaAst(tool.parametersSchema.ast) as object
  // @effect/ai types parameters as a struct; the wire copy's accept any value, with the tool's JSON schema
  const anyArguments = Schema.Unknown.annotations({ jsonSchema }) as unknown as Tool.AnyParametersSchema
  // a provider-defined tool has no parameters of ours to relax: the provider decodes its arguments
  return Tool.isUserDefined(tool) ? tool.setParameters(anyArguments) : tool
})

const unreachableHandle: Toolkit.WithHandler<Record<string, Tool.Any>>["handle"] = () =>
  Effect.dieMessage("the agent resolves tool calls itself")

/** The toolkit handed to `LanguageModel`, built once per tool list. */
export const wireToolkit = (
  tools: ReadonlyArray<Tool.Any>
): Toolkit.WithHandler<Record<string, Tool.Any>> | undefined => tools.length === 0 ? undefined : wireToolkitOf(tools)

const wireToolkitOf = identityMemo((tools: ReadonlyArray<Tool.Any>): Toolkit.WithHandler<Record<string, Tool.Any>> => {
  // no prototype: a tool the model names `constructor` or `toString` is not found on it
  const record: Record<string, Tool.Any> = Object.create(null)
  for (const tool of tools) record[tool.name] = wireTool(tool)
  return { tools: record, handle: unreachableHandle }
})

const formatCause = (cause: unknown): string =>
  ParseResult.isParseError(cause) ? ParseResult.TreeFormatter.formatErrorSync(cause) : String(cause)

/** The longest problem text the model reads for one call: enough to name what failed. */
const maxProblemLength = 1000

/** A problem as the model reads it: credentials scrubbed, cut to {@link maxProblemLength} (never inside a character). */
const shortProblem = (text: string): string => {
  const scrubbed = Secrets.scrubText(text)
  if (scrubbed.length <= maxProblemLength) return scrubbed
  // a cut after the first half of a surrogate pair would leave a lone surrogate, which providers may refuse
  const last = scrubbed.charCodeAt(maxProblemLength - 1)
  return `${scrubbed.slice(0, last >= 0xd800 && last <= 0xdbff ? maxProblemLength - 1 : maxProblemLength)}…`
}

/** What kind of JSON value `value` is, for a problem text. */
const jsonKind = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`

/**
 * What is wrong with arguments that failed the tool's schema with `error`:
 * text that is not JSON (a provider keeps such arguments as they came), a
 * value that is not an object, or the fields the schema rejected.
 */
const argumentsProblem = (params: unknown, error: ParseResult.ParseError): string => {
  if (typeof params === "string") {
    const parsed = Either.try(() => JSON.parse(params) as unknown)
    if (Either.isRight(parsed)) return "the arguments must be a JSON object, not a string holding JSON"
    const syntax = parsed.left instanceof Error ? parsed.left.message : "a syntax error"
    return shortProblem(`the arguments are not valid JSON (${syntax}); send a JSON object`)
  }
  if (typeof params !== "object" || params === null || Array.isArray(params)) {
    return `the arguments must be a JSON object, got ${jsonKind(params)}`
  }
  return shortProblem(ParseResult.TreeFormatter.formatErrorSync(error))
}

/**
 * The check of a tool's arguments, decoded once per call part: the decoded
 * parameters, or what is wrong with them. `problem` and `run` share it.
 */
const argumentsCheck = (tool: Tool.Any) => {
  const decode = Schema.decodeUnknownEither(tool.parametersSchema as Schema.Schema<unknown, unknown>)
  return identityMemo((call: Prompt.ToolCallPart): Either.Either<unknown, string> => {
    // arguments nested past the limit are refused before a schema or a formatter walks them
    if (JsonDepth.exceeds(call.params)) return Either.left(JsonDepth.tooDeep("the arguments"))
    const decoded = decode(call.params)
    // (the decoded arguments as they came: `Either.mapLeft` would make a new `Right`)
    return Either.isRight(decoded)
      ? decoded as Either.Either<unknown, never>
      : Either.left(argumentsProblem(call.params, decoded.left))
  })
}

/** The failed result the model reads for a call whose arguments have `problem`. */
const invalidArguments = (call: Prompt.ToolCallPart, tool: Tool.Any, problem: string) =>
  ToolResult.make(call, { error: `Invalid arguments for tool "${tool.name}": ${problem}` }, { isFailure: true })

const defect = (call: Prompt.ToolCallPart, tool: Tool.Any, description: string, cause?: unknown) =>
  new ToolDefect({
    toolName: tool.name,
    callId: call.id,
    reason: description,
    ...(cause === undefined ? {} : { cause })
  })

/**
 * The tool result of `call` of `tool` from the encoding of its handler's
 * success or (`isFailure`) typed failure, or the defect of an encoding that
 * failed. An encoding that ended at once (a synchronous schema gives an
 * `Either`) is read at once, without the fiber operations of `Effect.mapBoth`
 * (and without its two functions).
 */
const encodedResult = (
  encoding: Effect.Effect<unknown, ParseResult.ParseError>,
  call: Prompt.ToolCallPart,
  tool: Tool.Any,
  isFailure: boolean
): Effect.Effect<Prompt.ToolResultPart, ToolDefect> => {
  if (!Either.isEither(encoding)) {
    return Effect.mapBoth(encoding, {
      onFailure: (error) => encodingDefect(call, tool, error, isFailure),
      onSuccess: (encoded) => encodedPart(call, encoded, isFailure)
    })
  }
  const ended = encoding as Either.Either<unknown, ParseResult.ParseError>
  return Either.isRight(ended)
    ? Effect.succeed(encodedPart(call, ended.right, isFailure))
    : Effect.fail(encodingDefect(call, tool, ended.left, isFailure))
}

const encodedPart = (call: Prompt.ToolCallPart, encoded: unknown, isFailure: boolean): Prompt.ToolResultPart =>
  isFailure ? ToolResult.make(call, encoded, { isFailure: true }) : ToolResult.make(call, encoded)

const encodingDefect = (call: Prompt.ToolCallPart, tool: Tool.Any, error: ParseResult.ParseError, isFailure: boolean) =>
  defect(
    call,
    tool,
    `its ${isFailure ? "failure" : "result"} does not match its ${isFailure ? "failure" : "success"} schema: ${
      formatCause(error)
    }`
  )

/**
 * The effect `make` makes, its defects (a throw of `make` too) given to
 * `onDefect`, as `Effect.catchAllDefect` around it gives them; an effect that
 * already succeeded needs no catch.
 */
const defectsCaught = <A, E, E2>(
  make: () => Effect.Effect<A, E>,
  onDefect: (defect: unknown) => Effect.Effect<A, E2>
): Effect.Effect<A, E | E2> => {
  let effect: Effect.Effect<A, E>
  try {
    effect = make()
  } catch (defect) {
    return onDefect(defect)
  }
  return Exit.isExit(effect) && Exit.isSuccess(effect) ? effect : Effect.catchAllDefect(effect, onDefect)
}

/** The context a handler of `tool` sees for a call: its idempotency key as the tool's `ToolEffect` derives it. */
const toolContextOf = (tool: Tool.Any) => {
  const effect = ToolEffect.of(tool)
  return (call: Prompt.ToolCallPart, threadId: string): ToolContext.ToolContext =>
    ToolContext.make(call.id, tool.name, threadId, ToolEffect.idempotencyKey(effect, call, threadId))
}

/**
 * Runs a tool's calls with its handler directly: its parameters decoded, its
 * result (or typed failure) encoded through the tool's schemas, as
 * `Toolkit.handle` does, without its span and its second pass over the
 * result.
 */
const runWithHandler = (
  tool: Tool.Any,
  handler: Tool.Handler<string>,
  check: (call: Prompt.ToolCallPart) => Either.Either<unknown, string>
) => {
  const encodeSuccess = Schema.encodeUnknown(tool.successSchema as Schema.Schema<unknown, unknown>)
  const encodeFailure = Schema.encodeUnknown(tool.failureSchema as Schema.Schema<unknown, unknown>)
  const contextOf = toolContextOf(tool)
  // the handler's context under the run's, made once per run context (the same for every call of a run)
  const withHandlerContext = identityMemo((input: Context.Context<never>) => Context.merge(handler.context, input))
  const runDecoded = (
    call: Prompt.ToolCallPart,
    threadId: string,
    params: unknown
  ): Effect.Effect<Prompt.ToolResultPart, ToolDefect> => {
    const died = (cause: unknown) => Effect.fail(defect(call, tool, String(cause), cause))
    const handled = handler.handler(params) as Effect.Effect<unknown, unknown>
    // (a tool's idempotency key is the user's function: a throw is the call's defect)
    let toolContext: Option.Option<ToolContext.ToolContext>
    try {
      toolContext = Option.some(contextOf(call, threadId))
    } catch (cause) {
      return died(cause)
    }
    // a defect of the handler, of its encoding, or thrown, is the call's defect, as `Effect.catchAllDefect`
    // around the whole would make it, without its operation
    return withContext(
      handled,
      (input) => addService(withHandlerContext(input), ToolContext.CurrentToolContext, toolContext),
      {
        onSuccess: (value) => defectsCaught(() => encodedResult(encodeSuccess(value), call, tool, false), died),
        onFailure: (failure) => defectsCaught(() => encodedResult(encodeFailure(failure), call, tool, true), died),
        onDefect: died
      }
    )
  }
  return (call: Prompt.ToolCallPart, threadId: string): Effect.Effect<Prompt.ToolResultPart, ToolDefect> => {
    const checked = check(call)
    return Either.isLeft(checked)
      ? Effect.succeed(invalidArguments(call, tool, checked.left))
      : runDecoded(call, threadId, checked.right)
  }
}

/** Runs a tool's calls through `Toolkit.handle` (when its handler is not in the agent's context). */
const runWithToolkit = (
  toolkit: Toolkit.WithHandler<Record<string, Tool.Any>>,
  tool: Tool.Any,
  context: Context.Context<never>,
  check: (call: Prompt.ToolCallPart) => Either.Either<unknown, string>
) => {
  const encodeFailure = Schema.encodeUnknown(tool.failureSchema as Schema.Schema<unknown, unknown>)
  const contextOf = toolContextOf(tool)
  const handle = (call: Prompt.ToolCallPart, threadId: string): Effect.Effect<Prompt.ToolResultPart, ToolDefect> =>
    (toolkit.handle as unknown as (name: string, params: unknown) => Effect.Effect<Tool.HandlerResult<any>, unknown>)(
      tool.name,
      call.params
    ).pipe(
      Effect.map((result) => ToolResult.make(call, result.encodedResult, { isFailure: result.isFailure })),
      Effect.catchAll((error): Effect.Effect<Prompt.ToolResultPart, ToolDefect> => {
        const failure = AiSeams.isAiError(error) ? AiSeams.classifyAiError(error) : undefined
        if (failure?.module === "Toolkit") {
          return failure.kind === "malformed-output"
            ? Effect.succeed(
              invalidArguments(call, tool, shortProblem(formatCause(failure.cause ?? failure.description)))
            )
            : Effect.fail(
              defect(call, tool, `${failure.description ?? "invalid result"}: ${formatCause(failure.cause)}`)
            )
        }
        return Effect.mapBoth(encodeFailure(error), {
          onFailure: (parseError) =>
            defect(call, tool, `its failure does not match its failure schema: ${formatCause(parseError)}`),
          onSuccess: (encoded) => ToolResult.make(call, encoded, { isFailure: true })
        })
      }),
      Effect.catchAllDefect((cause) => Effect.fail(defect(call, tool, String(cause), cause))),
      Effect.provide(context),
      Effect.provideService(ToolContext.CurrentToolContext, Option.some(contextOf(call, threadId)))
    )
  return (call: Prompt.ToolCallPart, threadId: string): Effect.Effect<Prompt.ToolResultPart, ToolDefect> => {
    const checked = check(call)
    return Either.isLeft(checked) ? Effect.succeed(invalidArguments(call, tool, checked.left)) : handle(call, threadId)
  }
}

/**
 * Runs tool calls of a handled toolkit. Invalid arguments (checked first,
 * once per call) and the tool's
 * typed failures become failed tool results; a defect or a result that
 * breaks the tool's success schema is a `ToolDefect`. Every result is made
 * by `ToolResult.make`: checked (a result too deep, or that JSON cannot hold,
 * becomes a failed result saying so) and scrubbed of credentials before
 * anything reads it.
 */
export const entriesOf = (
  toolkit: Toolkit.WithHandler<Record<string, Tool.Any>>,
  context: Context.Context<never>
): ReadonlyArray<ToolEntry> =>
  Object.values(toolkit.tools).map((tool) => {
    const handler = context.unsafeMap.get(tool.id) as Tool.Handler<string> | undefined
    const check = argumentsCheck(tool)
    return {
      tool,
      problem: (call) => {
        const checked = check(call)
        return Either.isLeft(checked) ? checked.left : undefined
      },
      run: handler === undefined ? runWithToolkit(toolkit, tool, context, check) : runWithHandler(tool, handler, check)
    }
  })

/** The answer to a call of a tool the agent does not have. */
export const unknownToolResult = (call: Prompt.ToolCallPart, available: ReadonlyArray<string>) =>
  ToolResult.make(call, {
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

const emptyToolkit: Toolkit.WithHandler<Record<string, Tool.Any>> = { tools: {}, handle: unreachableHandle }

type PartDecoder = (u: unknown) => Effect.Effect<Response.AnyPart, ParseResult.ParseError>

const partDecoders = identityMemo((toolkit: Toolkit.WithHandler<Record<string, Tool.Any>>): PartDecoder =>
  Schema.decodeUnknown(Response.Part(toolkit) as Schema.Schema<Response.AnyPart, any>)
)
const streamPartDecoders = identityMemo((toolkit: Toolkit.WithHandler<Record<string, Tool.Any>>): PartDecoder =>
  Schema.decodeUnknown(Response.StreamPart(toolkit) as Schema.Schema<Response.AnyPart, any>)
)

const partDecoder = (toolkit: Toolkit.WithHandler<Record<string, Tool.Any>>, streamed: boolean): PartDecoder =>
  streamed ? streamPartDecoders(toolkit) : partDecoders(toolkit)

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
  error: unknown,
  toolkit: Toolkit.WithHandler<Record<string, Tool.Any>> | undefined,
  streamed: boolean
): Effect.Effect<Array<Response.AnyPart>, ParseResult.ParseError> | undefined => {
  // a streamed call also fails with what a `wrapModelStream` hook failed with (Pii's PiiDetected, …)
  if (!AiSeams.isAiError(error)) return undefined
  const failure = AiSeams.classifyAiError(error)
  if (failure.kind !== "malformed-output" || !ParseResult.isParseError(failure.cause)) return undefined
  const known: Record<string, unknown> = toolkit?.tools ?? {}
  const actual = failure.cause.issue.actual
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

/**
 * How `@effect/ai`'s providers (OpenAI's among them) fail a reply holding a
 * tool call whose arguments are not JSON: a `MalformedOutput` naming the
 * tool and quoting the arguments, the reply's other parts dropped.
 */
const unparsedArguments = /^Failed to securely parse tool call parameters for tool '([^']*)':\nParameters: ([\s\S]*)$/

/**
 * A provider rejects a whole reply when a tool call's arguments are not JSON
 * (`unsafeSecureJsonParse`), which would end the run on a mistake the model
 * can repair. Recovers the call from the failure, its arguments kept as the
 * text that came (`params` is that string), for the agent to answer with a
 * failed tool result: streamed, the parts received so far are kept and the
 * call takes the id its `tool-params-start` part gave it; generated, the
 * provider dropped the rest of the reply, so the call is the reply, with a
 * new id. Returns `undefined` when the error is of another kind.
 */
export const recoverUnparsedArguments = (
  error: unknown,
  received: ReadonlyArray<Response.AnyPart>
): Effect.Effect<Array<Response.AnyPart>> | undefined => {
  if (!AiSeams.isAiError(error)) return undefined
  const failure = AiSeams.classifyAiError(error)
  if (failure.kind !== "malformed-output") return undefined
  const match = unparsedArguments.exec(failure.description ?? "")
  if (match === null) return undefined
  const name = match[1]!
  const raw = match[2]!
  const ended = new Set<string>()
  for (const part of received) if (part.type === "tool-params-end" || part.type === "tool-call") ended.add(part.id)
  // the call being parsed when the provider failed: the first of that name still open
  const open = received.find((part): part is Response.ToolParamsStartPart =>
    part.type === "tool-params-start" && part.name === name && !ended.has(part.id)
  )
  return Effect.map(
    open === undefined ? Effect.sync(() => `call_${crypto.randomUUID().replaceAll("-", "")}`) : Effect.succeed(open.id),
    (id) => [
      ...received,
      Response.makePart("tool-call", { id, name, params: raw, providerExecuted: false }) as Response.AnyPart
    ]
  )
}
