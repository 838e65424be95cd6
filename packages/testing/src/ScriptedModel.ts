/**
 * A `LanguageModel` that replays a script: a fixed list of replies (text,
 * tool calls, a finish with usage), or functions of the request. It streams
 * the same replies, records every request it receives, and fails with a
 * clear `AiError` when the script runs out.
 *
 * @since 0.1.0
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { checkKeys } from "./internal/options.js"

/**
 * One scripted reply: encoded response parts, a function of the request
 * returning them, an error the model fails with, or a reply cut short
 * ({@link truncated}).
 *
 * @since 0.1.0
 * @category models
 */
export type Turn =
  | ReadonlyArray<Response.PartEncoded>
  | ((
    request: Request
  ) => ReadonlyArray<Response.PartEncoded> | Effect.Effect<ReadonlyArray<Response.PartEncoded>, AiError.AiError>)
  | AiError.AiError
  | Truncated

/**
 * A reply cut short before its finish part (see {@link truncated}).
 *
 * @since 0.1.0
 * @category models
 */
export interface Truncated {
  readonly _tag: "Truncated"
  /** The reply as it would have been; its finish part is never sent. */
  readonly parts: ReadonlyArray<Response.PartEncoded>
  /** Streamed, how many text deltas are sent before the cut (all when undefined). */
  readonly deltas: number | undefined
  /** What the model fails with at the cut (it just ends when undefined). */
  readonly error: AiError.AiError | undefined
}

/**
 * A request the model received.
 *
 * @since 0.1.0
 * @category models
 */
export interface Request {
  readonly prompt: Prompt.Prompt
  readonly toolNames: ReadonlyArray<string>
  readonly toolChoice: LanguageModel.ProviderOptions["toolChoice"]
  readonly streamed: boolean
}

/**
 * Reads what the scripted model received.
 *
 * @since 0.1.0
 * @category tags
 */
export class ScriptedModel extends Context.Tag("@stepwise-agent/testing/ScriptedModel")<
  ScriptedModel,
  ScriptedModel.Service
>() {}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace ScriptedModel {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** Every request so far, oldest first. */
    readonly requests: Effect.Effect<ReadonlyArray<Request>>
    /** How many turns of the script are left. */
    readonly remaining: Effect.Effect<number>
  }
}

/**
 * Usage reported by the scripted helpers when none is given.
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultUsage = { inputTokens: 10, outputTokens: 5, totalTokens: 15 } as const

/**
 * A reply with text only.
 *
 * @example
 * ```ts
 * import { ScriptedModel } from "@stepwise-agent/testing"
 *
 * const turn = ScriptedModel.text("Hello!")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const text = (
  value: string,
  usage: { readonly inputTokens: number; readonly outputTokens: number; readonly totalTokens: number } = defaultUsage
): ReadonlyArray<Response.PartEncoded> => [
  { type: "text", text: value },
  { type: "finish", reason: "stop", usage }
]

/**
 * A reply that calls tools (ids default to `call_<name>_<index>`), with
 * optional text before the calls. Options with a key it does not know throw
 * `AgentError.InvalidOptions` naming it.
 *
 * @example
 * ```ts
 * import { ScriptedModel } from "@stepwise-agent/testing"
 *
 * const turn = ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }])
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolCalls = (
  calls: ReadonlyArray<{ readonly name: string; readonly params: unknown; readonly id?: string | undefined }>,
  options?: {
    readonly text?: string | undefined
    readonly usage?: { readonly inputTokens: number; readonly outputTokens: number; readonly totalTokens: number }
  }
): ReadonlyArray<Response.PartEncoded> => {
  checkKeys("ScriptedModel", options, ["text", "usage"])
  return [
    ...(options?.text === undefined ? [] : [{ type: "text" as const, text: options.text }]),
    ...calls.map((call, index) => ({
      type: "tool-call" as const,
      id: call.id ?? `call_${call.name}_${index}`,
      name: call.name,
      params: call.params
    })),
    { type: "finish", reason: "tool-calls", usage: options?.usage ?? defaultUsage }
  ]
}

/**
 * A provider's HTTP error as a turn: the model call fails with an
 * `AiError.HttpResponseError` of this status (and headers, e.g.
 * `retry-after`, and the response body as the client keeps it: a JSON body
 * as its text), as a real provider client reports it. For testing retry,
 * fallback, overflow and logging policies.
 *
 * @example
 * ```ts
 * import { ScriptedModel } from "@stepwise-agent/testing"
 *
 * // rate limited once, then an answer
 * const script = [ScriptedModel.httpError(429, { "retry-after": "2" }), ScriptedModel.text("Hello!")]
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const httpError = (
  status: number,
  headers: Readonly<Record<string, string>> = {},
  body?: string | undefined
): AiError.HttpResponseError =>
  new AiError.HttpResponseError({
    module: "ScriptedModel",
    method: "generateText",
    reason: "StatusCode",
    request: {
      method: "POST",
      url: "https://scripted.model/v1/responses",
      urlParams: [],
      hash: Option.none(),
      headers: {}
    },
    response: { status, headers },
    ...(body === undefined ? {} : { body }),
    description: `status ${status}`
  })

/**
 * A reply cut short, as when a provider's stream stops early. Streamed, it
 * sends the stream parts of `parts` (text split into word deltas) up to the
 * `deltas`-th text delta (all by default), never the finish part, and then
 * ends — or fails with `error`, e.g. {@link decodeError} for a connection
 * dropped mid-stream. Generated, it answers `parts` without the finish part,
 * or fails with `error`.
 * Options with a key it does not know throw `AgentError.InvalidOptions`.
 *
 * @example
 * ```ts
 * import { ScriptedModel } from "@stepwise-agent/testing"
 *
 * // the connection drops after two words, then the retry gets the whole answer
 * const script = [
 *   ScriptedModel.truncated(ScriptedModel.text("It is sunny today."), { deltas: 2, error: ScriptedModel.decodeError() }),
 *   ScriptedModel.text("It is sunny today.")
 * ]
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const truncated = (
  parts: ReadonlyArray<Response.PartEncoded>,
  options?: { readonly deltas?: number | undefined; readonly error?: AiError.AiError | undefined }
): Truncated => {
  checkKeys("ScriptedModel", options, ["deltas", "error"])
  return {
    _tag: "Truncated",
    parts: parts.filter((part) => part.type !== "finish"),
    deltas: options?.deltas,
    error: options?.error
  }
}

/**
 * The error a provider client fails with when the body of a 200 response
 * cannot be read: an `AiError.HttpResponseError` with reason `Decode` and
 * status 200, as `@effect/ai-openai` reports a connection dropped mid-stream
 * (method `"streamRequest"`, the default) or a body cut short
 * (`"createResponse"`).
 *
 * @example
 * ```ts
 * import { ScriptedModel } from "@stepwise-agent/testing"
 *
 * const script = [ScriptedModel.decodeError("createResponse"), ScriptedModel.text("Hello!")]
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const decodeError = (method: string = "streamRequest"): AiError.HttpResponseError =>
  new AiError.HttpResponseError({
    module: "ScriptedModel",
    method,
    reason: "Decode",
    request: {
      method: "POST",
      url: "https://scripted.model/v1/responses",
      urlParams: [],
      hash: Option.none(),
      headers: {}
    },
    response: { status: 200, headers: {} },
    description: "the response body ended before it could be read"
  })

const isTruncated = (turn: unknown): turn is Truncated =>
  typeof turn === "object" && turn !== null && !Array.isArray(turn) && (turn as Truncated)._tag === "Truncated"

/** The stream parts of a truncated reply, up to its cut. */
const cutStreamParts = (turn: Truncated): Array<Response.StreamPartEncoded> => {
  const parts = toStreamParts(turn.parts)
  if (turn.deltas === undefined) return parts
  let deltas = 0
  const end = parts.findIndex((part) => part.type === "text-delta" && ++deltas === turn.deltas)
  return end < 0 ? parts : parts.slice(0, end + 1)
}

const toStreamParts = (parts: ReadonlyArray<Response.PartEncoded>): Array<Response.StreamPartEncoded> => {
  const out: Array<Response.StreamPartEncoded> = []
  let id = 0
  for (const part of parts) {
    if (part.type === "text") {
      const textId = `text_${id++}`
      out.push({ type: "text-start", id: textId })
      for (const delta of part.text.match(/\S+\s*|\s+/g) ?? []) out.push({ type: "text-delta", id: textId, delta })
      out.push({ type: "text-end", id: textId })
    } else if (part.type === "reasoning") {
      const reasoningId = `reasoning_${id++}`
      out.push({ type: "reasoning-start", id: reasoningId })
      out.push({ type: "reasoning-delta", id: reasoningId, delta: part.text })
      out.push({ type: "reasoning-end", id: reasoningId })
    } else {
      out.push(part as Response.StreamPartEncoded)
    }
  }
  return out
}

/** A value of the script as its failure names it: by its kind (a number or a boolean as written). */
const kindOf = (value: unknown): string =>
  typeof value === "number" || typeof value === "boolean"
    ? String(value)
    : value === null
    ? "null"
    : typeof value === "object"
    ? "an object"
    : typeof value === "undefined"
    ? "undefined"
    : `a ${typeof value}`

/**
 * Builds the scripted model and its recorder.
 *
 * @example
 * ```ts
 * import { ScriptedModel } from "@stepwise-agent/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const { model, recorder } = yield* ScriptedModel.make([ScriptedModel.text("hi")])
 *   return model
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  script: ReadonlyArray<Turn>
): Effect.Effect<{ readonly model: LanguageModel.Service; readonly recorder: ScriptedModel.Service }> =>
  Effect.gen(function*() {
    const requests: Array<Request> = []
    let next = 0
    const reply = (options: LanguageModel.ProviderOptions, streamed: boolean) =>
      Effect.suspend((): Effect.Effect<ReadonlyArray<Response.PartEncoded> | Truncated, AiError.AiError> => {
        const request: Request = {
          prompt: options.prompt,
          toolNames: options.tools.map((tool) => tool.name),
          toolChoice: options.toolChoice,
          streamed
        }
        requests.push(request)
        // from JavaScript, a script or a turn of another kind is the model's failure, saying so
        const malformed = (description: string) =>
          Effect.fail(
            new AiError.UnknownError({
              module: "ScriptedModel",
              method: streamed ? "streamText" : "generateText",
              description
            })
          )
        if (!Array.isArray(script)) return malformed(`The script must be an array of turns, got ${kindOf(script)}`)
        const checked = (index: number) => (turn: unknown) =>
          Array.isArray(turn) || isTruncated(turn)
            ? Effect.succeed(turn as ReadonlyArray<Response.PartEncoded> | Truncated)
            : malformed(
              `Turn ${index} of the script must be an array of response parts, a truncated reply, an AiError ` +
                `or a function of the request, got ${kindOf(turn)}`
            )
        if (next >= script.length) {
          return Effect.fail(
            new AiError.UnknownError({
              module: "ScriptedModel",
              method: streamed ? "streamText" : "generateText",
              description: `The script has ${script.length} turn(s) and all were used; request ${requests.length} ` +
                `has no scripted reply`
            })
          )
        }
        const index = next++
        const turn: unknown = script[index]
        if (AiError.isAiError(turn)) return Effect.fail(turn)
        if (typeof turn === "function") {
          const out: unknown = turn(request)
          return Effect.isEffect(out)
            ? Effect.flatMap(out as Effect.Effect<unknown, AiError.AiError>, checked(index))
            : checked(index)(out)
        }
        return checked(index)(turn)
      })
    const model = yield* LanguageModel.make({
      generateText: (options) =>
        Effect.flatMap(reply(options, false), (parts) =>
          !isTruncated(parts)
            ? Effect.succeed([...parts])
            : parts.error === undefined
            ? Effect.succeed([...parts.parts])
            : Effect.fail(parts.error)),
      streamText: (options) =>
        Stream.unwrap(Effect.map(reply(options, true), (parts) => {
          if (!isTruncated(parts)) return Stream.fromIterable(toStreamParts(parts))
          const sent = Stream.fromIterable(cutStreamParts(parts))
          return parts.error === undefined ? sent : Stream.concat(sent, Stream.fail(parts.error))
        }))
    })
    const recorder = ScriptedModel.of({
      requests: Effect.sync(() => requests.slice()),
      remaining: Effect.sync(() => script.length - next)
    })
    return { model, recorder }
  })

/**
 * Provides the scripted `LanguageModel` and its `ScriptedModel` recorder.
 *
 * @example
 * ```ts
 * import { ScriptedModel } from "@stepwise-agent/testing"
 *
 * const ModelLive = ScriptedModel.layer([
 *   ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }]),
 *   ScriptedModel.text("3")
 * ])
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  script: ReadonlyArray<Turn>
): Layer.Layer<LanguageModel.LanguageModel | ScriptedModel> =>
  Layer.effectContext(
    Effect.map(make(script), ({ model, recorder }) =>
      Context.make(LanguageModel.LanguageModel, model).pipe(Context.add(ScriptedModel, recorder)))
  )

/**
 * The requests the scripted model received.
 *
 * @example
 * ```ts
 * import { ScriptedModel } from "@stepwise-agent/testing"
 *
 * const program = ScriptedModel.requests
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const requests: Effect.Effect<ReadonlyArray<Request>, never, ScriptedModel> = Effect.flatMap(
  ScriptedModel,
  (recorder) => recorder.requests
)
