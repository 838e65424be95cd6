/**
 * The structured-output tool: the tool the model calls to give the run's
 * final answer in the required structure, its answer to the call, and the
 * value a call gives the run. A call's arguments are decoded where each is
 * needed (for the answer, then for the value): nothing is kept per call.
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import type * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as JsonDepth from "./jsonDepth.js"

/** The output tool of an agent with a `responseFormat`. */
export interface OutputTool {
  readonly tool: Tool.Any
  readonly name: string
  /** The tool's result for a call: accepted, or a failure naming what did not decode. */
  readonly answer: (call: Prompt.ToolCallPart) => Prompt.ToolResultPart
  /** The failed result of each of `count` calls of the tool in one reply: the model is to call it once. */
  readonly once: (call: Prompt.ToolCallPart, count: number) => Prompt.ToolResultPart
  /** The structured output a call gives the run once it has its result (none if refused). */
  readonly value: (call: Prompt.ToolCallPart, result: Prompt.ToolResultPart) => Option.Option<unknown>
  /** An output encoded by the response format (what JSON keeps), for a store. */
  readonly encode: (output: unknown) => Effect.Effect<unknown, ParseResult.ParseError>
  /** An output as `encode` gives it, decoded by the response format. */
  readonly decode: (encoded: unknown) => Effect.Effect<unknown, ParseResult.ParseError>
}

/** The output tool named `name`, whose parameters are `schema`. */
export const make = (schema: Schema.Schema<any, any>, name: string): OutputTool => {
  // a responseFormat may be any schema; @effect/ai types parameters as a struct (its JSON schema is taken as it is)
  const tool: Tool.Any = Tool.make(name, {
    description: "Give your final answer with this tool, in the required structure. Call it once, when you are done."
  }).setParameters(schema as unknown as Tool.AnyParametersSchema)
  const decodeUnknown = Schema.decodeUnknownEither(schema)
  // the value, or what is wrong with it; a value nested past the limit is refused before the schema walks it
  const decode = (call: Prompt.ToolCallPart): Either.Either<unknown, string> =>
    JsonDepth.exceeds(call.params)
      ? Either.left(JsonDepth.tooDeep("the fields"))
      : Either.mapLeft(decodeUnknown(call.params), ParseResult.TreeFormatter.formatErrorSync)
  const result = (call: Prompt.ToolCallPart, value: unknown, isFailure: boolean) =>
    Prompt.makePart("tool-result", { id: call.id, name: call.name, result: value, isFailure, providerExecuted: false })
  return {
    tool,
    name,
    answer: (call) => {
      const value = decode(call)
      return Either.isRight(value)
        ? result(call, "Structured output accepted.", false)
        : result(call, {
          error: `Invalid structured output: ${value.left}`
        }, true)
    },
    once: (call, count) =>
      result(call, {
        error: `${name} was called ${count} times in one reply; call it once, with the whole answer`
      }, true),
    // taken from the call once it has its result, so a replayed (journaled) call gives it too
    value: (call, answered) => {
      if (call.name !== name || answered.isFailure) return Option.none()
      return Either.getRight(decode(call))
    },
    encode: Schema.encodeUnknown(schema),
    decode: Schema.decodeUnknown(schema)
  }
}
