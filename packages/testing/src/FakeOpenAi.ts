/// <reference types="node" />
/**
 * A fake OpenAI Responses API on 127.0.0.1, for end-to-end tests of the real
 * `@effect/ai-openai` client.
 *
 * The server answers `POST /v1/responses` from a queue of scripted replies —
 * JSON bodies shaped like recorded provider responses, SSE event lists for
 * `stream: true` requests, error statuses with headers (`retry-after`),
 * malformed bodies, dropped connections — and records every request body so a
 * test can assert what the client sent.
 *
 * Options with a key a function does not know are `AgentError.InvalidOptions`
 * (module `"FakeOpenAi"`) naming it: `make` and `languageModel` fail with it,
 * the reply builders throw it.
 *
 * @since 0.1.0
 */
import * as Http from "node:http"
import type * as Net from "node:net"
// deep imports: the package barrels also load gpt-tokenizer, workers and
// cluster sockets, which would double the time these tests take to start
import * as OpenAiClient from "@effect/ai-openai/OpenAiClient"
import * as OpenAiLanguageModel from "@effect/ai-openai/OpenAiLanguageModel"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as AgentError from "@stepwise-agent/core/AgentError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { checkKeys, keysOf, unknownKey } from "./internal/options.js"

// ---------------------------------------------------------------------------
// models
// ---------------------------------------------------------------------------

/**
 * One scripted reply of the fake server.
 *
 * - `Json`: a status, headers and a JSON body (a response envelope, or an
 *   OpenAI-style `{ error }` body with an error status).
 * - `Raw`: a status, headers and a body sent as is (malformed JSON, say).
 * - `Sse`: a `text/event-stream` of events; with `stallAfter`, the server
 *   sends that many events and then holds the connection open until the test
 *   calls `dropStalled` (a connection cut mid-stream, at a moment the test
 *   chooses).
 * - `Drop`: the request is read, then the socket is destroyed without a reply.
 * - `ByMode`: one reply for a plain request and another for a streaming one
 *   (a script that serves a run whether it generates or streams).
 *
 * `Json` replies with a 2xx status answer only non-streaming requests and
 * `Sse` replies only streaming ones; a mismatch is answered with a 400 that
 * names the mistake, so a wrong script fails loudly.
 *
 * @since 0.1.0
 * @category models
 */
export type Reply =
  | {
    readonly _tag: "Json"
    readonly status: number
    readonly headers: Readonly<Record<string, string>>
    readonly body: unknown
  }
  | {
    readonly _tag: "Raw"
    readonly status: number
    readonly headers: Readonly<Record<string, string>>
    readonly body: string
  }
  | {
    readonly _tag: "Sse"
    readonly events: ReadonlyArray<ServerEvent>
    readonly stallAfter: number | undefined
  }
  | { readonly _tag: "Drop" }
  | { readonly _tag: "ByMode"; readonly generate: Reply; readonly stream: Reply }

/**
 * A Responses API stream event: its `type` and the rest of its fields
 * (`sequence_number` is added when the event is sent).
 *
 * @since 0.1.0
 * @category models
 */
export interface ServerEvent {
  readonly type: string
  readonly [key: string]: unknown
}

/**
 * An item of the `input` of a Responses API request, as the client sent it.
 *
 * @since 0.1.0
 * @category models
 */
export interface InputItem {
  readonly type?: string
  readonly role?: string
  readonly id?: string
  readonly content?: unknown
  readonly call_id?: string
  readonly name?: string
  readonly arguments?: string
  readonly output?: string
}

/**
 * A function tool of a Responses API request, as the client sent it.
 *
 * @since 0.1.0
 * @category models
 */
export interface FunctionTool {
  readonly type: string
  readonly name: string
  readonly description?: string
  readonly parameters: unknown
  readonly strict?: boolean
}

/**
 * The body of a Responses API request, as the client sent it.
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestBody {
  readonly model: string
  readonly input: ReadonlyArray<InputItem>
  readonly tools?: ReadonlyArray<FunctionTool>
  readonly tool_choice?: unknown
  readonly stream?: boolean
  readonly [key: string]: unknown
}

/**
 * A request the fake server received.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Http.IncomingHttpHeaders>
  readonly body: RequestBody
  /** How the server answered: the `_tag` of the reply (of `ByMode`, the one it chose), or `"Unscripted"`. */
  readonly answeredWith: Reply["_tag"] | "Unscripted"
}

/**
 * A running fake server.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeOpenAi {
  /** `http://127.0.0.1:<port>`; the client's `apiUrl` is this plus `/v1`. */
  readonly url: string
  /** Every request so far, oldest first. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** How many scripted replies are left. */
  readonly remaining: Effect.Effect<number>
  /** Appends replies to the script. */
  readonly enqueue: (...replies: ReadonlyArray<Reply>) => Effect.Effect<void>
  /** Destroys the connections of stalled streams (see `sse`); returns how many. */
  readonly dropStalled: Effect.Effect<number>
}

// ---------------------------------------------------------------------------
// recorded-style response bodies
// ---------------------------------------------------------------------------

/**
 * The model id the fake provider reports (a dated snapshot, as OpenAI does).
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * console.log(FakeOpenAi.modelId)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const modelId = "gpt-4o-mini-2024-07-18"

/**
 * Token usage of a response, in the Responses API's shape.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * console.log(FakeOpenAi.usage(20, 10).total_tokens)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const usage = (input: number, output: number) => ({
  input_tokens: input,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: output,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: input + output
})

/**
 * Options of the response builders.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResponseOptions {
  readonly id?: string | undefined
  /** `[input, output]` tokens; default `[20, 10]`. */
  readonly usage?: readonly [number, number] | undefined
}

const responseKeys = keysOf<ResponseOptions>({ id: true, usage: true })

/** `options`, checked to be response options (a builder's, which takes no `status`). */
const responseOptions = (options: ResponseOptions | undefined): ResponseOptions | undefined => {
  checkKeys("FakeOpenAi", options, responseKeys)
  return options
}

let counter = 0
const nextId = (prefix: string) => `${prefix}_${(++counter).toString(16).padStart(8, "0")}`

/**
 * A Responses API response object around `output` items, with the fields a
 * recorded `gpt-4o-mini` response carries.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const body = FakeOpenAi.envelope([FakeOpenAi.messageItem("Hi")], { usage: [5, 1] })
 * console.log(body.status, body.usage?.total_tokens)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const envelope = (
  output: ReadonlyArray<unknown>,
  options?: ResponseOptions & { readonly status?: string | undefined }
) => {
  checkKeys("FakeOpenAi", options, [...responseKeys, "status"])
  return envelopeOf(output, options)
}

const envelopeOf = (
  output: ReadonlyArray<unknown>,
  options: (ResponseOptions & { readonly status?: string | undefined }) | undefined
) => ({
  id: options?.id ?? nextId("resp"),
  object: "response",
  created_at: 1_741_476_542,
  status: options?.status ?? "completed",
  error: null,
  incomplete_details: null,
  instructions: null,
  max_output_tokens: null,
  model: modelId,
  output,
  parallel_tool_calls: true,
  previous_response_id: null,
  reasoning: { effort: null, summary: null },
  store: true,
  temperature: 1,
  text: { format: { type: "text" } },
  tool_choice: "auto",
  tools: [],
  top_p: 1,
  truncation: "disabled",
  usage: options?.status === "in_progress"
    ? null
    : usage(options?.usage?.[0] ?? 20, options?.usage?.[1] ?? 10),
  user: null,
  metadata: {}
})

/**
 * An assistant `message` output item with one `output_text` part.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * console.log(FakeOpenAi.messageItem("Hi").content[0]!.text)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const messageItem = (text: string, id: string = nextId("msg")) => ({
  type: "message",
  id,
  status: "completed",
  role: "assistant",
  content: [{ type: "output_text", text, annotations: [] }]
})

/**
 * A tool call the fake model makes: the call id, the tool name and the raw
 * `arguments` string (so a test can send arguments that are not valid JSON).
 *
 * @since 0.1.0
 * @category models
 */
export interface FunctionCall {
  readonly callId: string
  readonly name: string
  /** A JSON value (stringified) or a raw string sent as is. */
  readonly arguments: string | object
}

const argumentsOf = (call: FunctionCall) =>
  typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments)

/**
 * A `function_call` output item.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const item = FakeOpenAi.functionCallItem({ callId: "c1", name: "add", arguments: { a: 1, b: 2 } })
 * console.log(item.arguments)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const functionCallItem = (call: FunctionCall, id: string = nextId("fc")) => ({
  type: "function_call",
  id,
  call_id: call.callId,
  name: call.name,
  arguments: argumentsOf(call),
  status: "completed"
})

// ---------------------------------------------------------------------------
// replies
// ---------------------------------------------------------------------------

/**
 * A JSON reply (status 200 unless given).
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const reply = FakeOpenAi.json({ ok: true }, { status: 201 })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const json = (
  body: unknown,
  options?: { readonly status?: number | undefined; readonly headers?: Record<string, string> | undefined }
): Reply => {
  checkKeys("FakeOpenAi", options, ["status", "headers"])
  return { _tag: "Json", status: options?.status ?? 200, headers: options?.headers ?? {}, body }
}

/**
 * A non-streaming reply with a text answer.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const reply = FakeOpenAi.text("Hello!", { usage: [12, 3] })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const text = (answer: string, options?: ResponseOptions): Reply =>
  json(envelopeOf([messageItem(answer)], responseOptions(options)))

/**
 * A non-streaming reply that calls tools.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const reply = FakeOpenAi.toolCalls([{ callId: "c1", name: "add", arguments: { a: 1, b: 2 } }])
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolCalls = (calls: ReadonlyArray<FunctionCall>, options?: ResponseOptions): Reply =>
  json(envelopeOf(calls.map((call) => functionCallItem(call)), responseOptions(options)))

/**
 * An error status with an OpenAI-style error body and headers.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const reply = FakeOpenAi.error(429, "Slow down", { headers: { "retry-after": "1" } })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const error = (
  status: number,
  message: string,
  options?: { readonly type?: string | undefined; readonly headers?: Record<string, string> | undefined }
): Reply => {
  checkKeys("FakeOpenAi", options, ["type", "headers"])
  return json({
    error: { message, type: options?.type ?? "server_error", param: null, code: null }
  }, { status, headers: options?.headers })
}

/**
 * The error body OpenAI answers a request over the model's context window
 * with (status 400).
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * FakeOpenAi.contextLengthExceededBody(128_000, 130_000).error.code // "context_length_exceeded"
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const contextLengthExceededBody = (limit: number, requested: number) => ({
  error: {
    message:
      `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${requested} ` +
      "tokens. Please reduce the length of the messages.",
    type: "invalid_request_error",
    param: "messages",
    code: "context_length_exceeded"
  }
})

/**
 * OpenAI's answer to a request over the model's context window: status 400
 * with the `context_length_exceeded` error body the real API sends
 * ({@link contextLengthExceededBody}).
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const reply = FakeOpenAi.contextLengthExceeded(128_000, 130_000)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const contextLengthExceeded = (limit: number, requested: number): Reply =>
  json(contextLengthExceededBody(limit, requested), { status: 400 })

/**
 * The fake's estimate of a request's input tokens: the characters of its
 * `instructions`, `input` and `tools` as JSON, over 4, rounded up.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * FakeOpenAi.inputTokens({ model: "gpt-4o", input: [{ role: "user", content: "Hi" }] }) // 11
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const inputTokens = (body: RequestBody): number =>
  Math.ceil(JSON.stringify([body.instructions ?? null, body.input, body.tools ?? []]).length / 4)

/**
 * A body sent as is (`content-type: application/json` unless given).
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const reply = FakeOpenAi.raw("{ \"partial\": ", { status: 200 })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const raw = (
  body: string,
  options?: { readonly status?: number | undefined; readonly headers?: Record<string, string> | undefined }
): Reply => {
  checkKeys("FakeOpenAi", options, ["status", "headers"])
  return {
    _tag: "Raw",
    status: options?.status ?? 200,
    headers: options?.headers ?? { "content-type": "application/json" },
    body
  }
}

/**
 * A 200 whose body, labelled JSON, does not parse.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const script = [FakeOpenAi.notJson, FakeOpenAi.text("recovered")]
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const notJson: Reply = raw("{ not json")

/**
 * A gateway's HTML error page served as JSON, with status 502.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const script = [FakeOpenAi.htmlGateway, FakeOpenAi.text("recovered")]
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const htmlGateway: Reply = raw(
  "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>",
  { status: 502 }
)

/**
 * The request is read and the connection destroyed without an answer.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const script = [FakeOpenAi.drop, FakeOpenAi.text("recovered")]
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const drop: Reply = { _tag: "Drop" }

/**
 * A stream of events; with `stallAfter`, only that many events are sent and
 * the connection is held open until `dropStalled` destroys it.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * // send the first 5 events, then hold the connection open
 * const reply = FakeOpenAi.sse(FakeOpenAi.textEvents(["Hel", "lo"]), { stallAfter: 5 })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const sse = (
  events: ReadonlyArray<ServerEvent>,
  options?: { readonly stallAfter?: number | undefined }
): Reply => {
  checkKeys("FakeOpenAi", options, ["stallAfter"])
  return { _tag: "Sse", events, stallAfter: options?.stallAfter }
}

const streamStart = (id: string): Array<ServerEvent> => {
  const pending = envelopeOf([], { id, status: "in_progress" })
  return [
    { type: "response.created", response: pending },
    { type: "response.in_progress", response: pending }
  ]
}

const streamEnd = (id: string, output: ReadonlyArray<unknown>, options?: ResponseOptions): Array<ServerEvent> => [
  { type: "response.completed", response: envelopeOf(output, { ...options, id }) }
]

/**
 * The events of a streamed text answer written in `chunks`, as the Responses
 * API sends them (created, in_progress, output_item.added,
 * content_part.added, output_text.delta…, output_text.done,
 * content_part.done, output_item.done, completed).
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * console.log(FakeOpenAi.textEvents(["Hel", "lo"]).at(-1)!.type)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const textEvents = (chunks: ReadonlyArray<string>, options?: ResponseOptions): Array<ServerEvent> => {
  checkKeys("FakeOpenAi", options, responseKeys)
  const id = options?.id ?? nextId("resp")
  const itemId = nextId("msg")
  const whole = chunks.join("")
  const item = messageItem(whole, itemId)
  return [
    ...streamStart(id),
    {
      type: "response.output_item.added",
      output_index: 0,
      item: { ...item, status: "in_progress", content: [] }
    },
    {
      type: "response.content_part.added",
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      part: { type: "output_text", text: "", annotations: [] }
    },
    ...chunks.map((delta) => ({
      type: "response.output_text.delta",
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      delta
    })),
    { type: "response.output_text.done", item_id: itemId, output_index: 0, content_index: 0, text: whole },
    {
      type: "response.content_part.done",
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      part: { type: "output_text", text: whole, annotations: [] }
    },
    { type: "response.output_item.done", output_index: 0, item },
    ...streamEnd(id, [item], options)
  ]
}

/**
 * A streamed text answer cut short: the events of `textEvents(chunks)` up to
 * its `deltas`-th text delta, then the server ends the response cleanly, with
 * no `response.completed` (as a proxy closing a stream early does).
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * // one delta, then the stream ends before response.completed
 * const reply = FakeOpenAi.streamTextCut(["Hel", "lo"], { deltas: 1 })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const streamTextCut = (
  chunks: ReadonlyArray<string>,
  options: ResponseOptions & { readonly deltas: number }
): Reply => {
  checkKeys("FakeOpenAi", options, [...responseKeys, "deltas"])
  const { deltas, ...response } = options
  return sse(textEvents(chunks, response).slice(0, 4 + deltas))
}

/**
 * A 200 `application/json` response with a text answer, sent as is whether
 * or not the client asked for a stream (a gateway that ignores `stream: true`).
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const reply = FakeOpenAi.textNotStreamed("Hello!")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const textNotStreamed = (answer: string, options?: ResponseOptions): Reply =>
  raw(JSON.stringify(envelopeOf([messageItem(answer)], responseOptions(options))))

/**
 * One reply for a plain request, another for a streaming one.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const reply = FakeOpenAi.byMode({ generate: FakeOpenAi.text("Hi"), stream: FakeOpenAi.streamText(["H", "i"]) })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const byMode = (replies: { readonly generate: Reply; readonly stream: Reply }): Reply => ({
  _tag: "ByMode",
  ...replies
})

/**
 * The events of a streamed response calling tools, each call's arguments
 * sent in two deltas.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const events = FakeOpenAi.toolCallEvents([{ callId: "c1", name: "add", arguments: { a: 1, b: 2 } }])
 * console.log(events[0]!.type)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolCallEvents = (
  calls: ReadonlyArray<FunctionCall>,
  options?: ResponseOptions
): Array<ServerEvent> => {
  checkKeys("FakeOpenAi", options, responseKeys)
  const id = options?.id ?? nextId("resp")
  const items = calls.map((call) => functionCallItem(call))
  return [
    ...streamStart(id),
    ...items.flatMap((item, index): Array<ServerEvent> => {
      const half = Math.ceil(item.arguments.length / 2)
      return [
        {
          type: "response.output_item.added",
          output_index: index,
          item: { ...item, arguments: "", status: "in_progress" }
        },
        ...[item.arguments.slice(0, half), item.arguments.slice(half)].map((delta) => ({
          type: "response.function_call_arguments.delta",
          item_id: item.id,
          output_index: index,
          delta
        })),
        {
          type: "response.function_call_arguments.done",
          item_id: item.id,
          output_index: index,
          arguments: item.arguments
        },
        { type: "response.output_item.done", output_index: index, item }
      ]
    }),
    ...streamEnd(id, items, options)
  ]
}

/**
 * A streaming reply with a text answer written in `chunks`.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const reply = FakeOpenAi.streamText(["Hel", "lo"])
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const streamText = (chunks: ReadonlyArray<string>, options?: ResponseOptions): Reply =>
  sse(textEvents(chunks, options))

/**
 * A streaming reply that calls tools.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * const reply = FakeOpenAi.streamToolCalls([{ callId: "c1", name: "add", arguments: { a: 1, b: 2 } }])
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const streamToolCalls = (calls: ReadonlyArray<FunctionCall>, options?: ResponseOptions): Reply =>
  sse(toolCallEvents(calls, options))

// ---------------------------------------------------------------------------
// reading requests
// ---------------------------------------------------------------------------

/**
 * The `function_call` items of a request's input.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * import { Effect } from "effect"
 *
 * const callsSent = (server: FakeOpenAi.FakeOpenAi) =>
 *   Effect.map(server.requests, (requests) => requests.map((request) => FakeOpenAi.functionCalls(request.body)))
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const functionCalls = (body: RequestBody): ReadonlyArray<InputItem> =>
  body.input.filter((item) => item.type === "function_call")

/**
 * The `function_call_output` items of a request's input.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * import { Effect } from "effect"
 *
 * const outputsSent = (server: FakeOpenAi.FakeOpenAi) =>
 *   Effect.map(server.requests, (requests) => requests.map((request) => FakeOpenAi.functionCallOutputs(request.body)))
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const functionCallOutputs = (body: RequestBody): ReadonlyArray<InputItem> =>
  body.input.filter((item) => item.type === "function_call_output")

/**
 * A compact view of a request's input: `role:text` for messages,
 * `function_call:<call_id>:<name>:<arguments>` and
 * `function_call_output:<call_id>:<output>` for tool items.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 *
 * import { Effect } from "effect"
 *
 * const inputs = (server: FakeOpenAi.FakeOpenAi) =>
 *   Effect.map(server.requests, (requests) => requests.map((request) => FakeOpenAi.inputSummary(request.body)))
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const inputSummary = (body: RequestBody): ReadonlyArray<string> =>
  body.input.map((item) => {
    if (item.type === "function_call") return `function_call:${item.call_id}:${item.name}:${item.arguments}`
    if (item.type === "function_call_output") return `function_call_output:${item.call_id}:${item.output}`
    const content = typeof item.content === "string"
      ? item.content
      : Array.isArray(item.content)
      ? item.content.map((part: { readonly text?: string }) => part.text ?? "").join("")
      : ""
    return `${item.role}:${content}`
  })

// ---------------------------------------------------------------------------
// the server
// ---------------------------------------------------------------------------

const send = (res: Http.ServerResponse, status: number, headers: Record<string, string>, body: string) => {
  res.writeHead(status, { "content-length": Buffer.byteLength(body).toString(), ...headers })
  res.end(body)
}

const fail = (res: Http.ServerResponse, status: number, message: string) =>
  send(
    res,
    status,
    { "content-type": "application/json" },
    JSON.stringify({ error: { message: `fakeOpenAi: ${message}`, type: "fake_openai_error", param: null, code: null } })
  )

const answer = (
  req: Http.IncomingMessage,
  res: Http.ServerResponse,
  reply: Reply,
  streaming: boolean,
  stalled: Set<Net.Socket>
) => {
  switch (reply._tag) {
    case "ByMode": {
      answer(req, res, streaming ? reply.stream : reply.generate, streaming, stalled)
      return
    }
    case "Drop": {
      req.socket.destroy()
      return
    }
    case "Raw": {
      send(res, reply.status, reply.headers, reply.body)
      return
    }
    case "Json": {
      if (streaming && reply.status < 300) {
        fail(res, 400, "a JSON reply was scripted, but the client asked for a stream")
        return
      }
      send(res, reply.status, { "content-type": "application/json", ...reply.headers }, JSON.stringify(reply.body))
      return
    }
    case "Sse": {
      if (!streaming) {
        fail(res, 400, "an SSE reply was scripted, but the client did not ask for a stream")
        return
      }
      const events = reply.stallAfter === undefined ? reply.events : reply.events.slice(0, reply.stallAfter)
      const frames = events
        .map((event, index) =>
          `event: ${event.type}\ndata: ${JSON.stringify({ ...event, sequence_number: index })}\n\n`
        )
        .join("")
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" })
      if (reply.stallAfter === undefined) {
        res.end(frames)
      } else {
        res.write(frames)
        stalled.add(req.socket)
      }
      return
    }
  }
}

/**
 * Options of {@link make}.
 *
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions {
  /**
   * The model's context window: a request whose {@link inputTokens} exceed
   * it is answered with {@link contextLengthExceeded} (it uses no scripted
   * reply), as the real API answers an over-long request.
   */
  readonly contextWindow?: number | undefined
}

/**
 * Starts the fake server on an ephemeral port of 127.0.0.1 with a script of
 * replies; it is closed (with every open connection) when the scope closes.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const server = yield* FakeOpenAi.make([FakeOpenAi.text("Hello!")])
 *   const response = yield* Effect.promise(() =>
 *     fetch(`${server.url}/v1/responses`, { method: "POST", body: JSON.stringify({ input: [] }) })
 *   )
 *   const requests = yield* server.requests
 *   return [response.status, requests.length, requests[0]!.answeredWith]
 * }).pipe(Effect.scoped)
 *
 * Effect.runPromise(program).then(console.log)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  script: ReadonlyArray<Reply> = [],
  options?: MakeOptions
): Effect.Effect<FakeOpenAi, AgentError.InvalidOptions, Scope.Scope> =>
  Effect.gen(function*() {
    const unknown = unknownKey("FakeOpenAi", options, ["contextWindow"])
    if (unknown !== undefined) return yield* unknown
    const queue: Array<Reply> = [...script]
    const received: Array<RecordedRequest> = []
    const sockets = new Set<Net.Socket>()
    const stalled = new Set<Net.Socket>()
    const server = Http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => chunks.push(chunk))
      req.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        let body: RequestBody
        try {
          body = JSON.parse(text) as RequestBody
        } catch {
          body = { model: "", input: [], unparsedBody: text }
        }
        // (a client may send the URL's fragment too)
        const path = (req.url ?? "").split(/[?#]/)[0]!
        // the Responses API under any base path (a gateway's `/v1/<key>/responses`)
        const routed = req.method === "POST" && (path === "/v1/responses" || path.endsWith("/responses"))
        const tokens = inputTokens(body)
        const tooLong = options?.contextWindow !== undefined && tokens > options.contextWindow
        const reply = !routed
          ? undefined
          : tooLong
          ? contextLengthExceeded(options!.contextWindow!, tokens)
          : queue.shift()
        received.push({
          method: req.method ?? "",
          path,
          headers: req.headers,
          body,
          answeredWith: reply?._tag !== "ByMode"
            ? reply?._tag ?? "Unscripted"
            : (body.stream === true ? reply.stream : reply.generate)._tag
        })
        if (!routed) {
          fail(res, 404, `no route for ${req.method} ${path}`)
        } else if (reply === undefined) {
          fail(res, 500, `no scripted reply left for request #${received.length}`)
        } else {
          answer(req, res, reply, body.stream === true, stalled)
        }
      })
    })
    server.on("connection", (socket) => {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
    })
    const port = yield* Effect.acquireRelease(
      Effect.async<number>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as Net.AddressInfo).port)))
      }),
      () =>
        Effect.async<void>((resume) => {
          for (const socket of sockets) socket.destroy()
          server.close(() => resume(Effect.void))
        })
    )
    return {
      url: `http://127.0.0.1:${port}`,
      requests: Effect.sync(() => [...received]),
      remaining: Effect.sync(() => queue.length),
      enqueue: (...replies) => Effect.sync(() => void queue.push(...replies)),
      dropStalled: Effect.sync(() => {
        const count = stalled.size
        for (const socket of stalled) socket.destroy()
        stalled.clear()
        return count
      })
    }
  })

/**
 * Options of {@link languageModel}.
 *
 * @since 0.1.0
 * @category models
 */
export interface LanguageModelOptions {
  readonly model?: string | undefined
  /** The HTTP client under the OpenAI client (default `"undici"`). */
  readonly httpClient?: "undici" | "fetch" | undefined
  /** The API key the client sends (default `"sk-test"`). */
  readonly apiKey?: string | undefined
  /** Passed to `OpenAiClient.layer`. */
  readonly transformClient?: ((client: HttpClient.HttpClient) => HttpClient.HttpClient) | undefined
}

/**
 * The real `@effect/ai-openai` language model (`strict: false` function
 * tools), pointed at a fake server.
 *
 * @example
 * ```ts
 * import * as FakeOpenAi from "@stepwise-agent/testing/FakeOpenAi"
 * import { LanguageModel } from "@effect/ai"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const server = yield* FakeOpenAi.make([FakeOpenAi.text("Hello!")])
 *   const response = yield* LanguageModel.generateText({ prompt: "Hi" }).pipe(
 *     Effect.provide(FakeOpenAi.languageModel(server))
 *   )
 *   return response.text
 * }).pipe(Effect.scoped)
 *
 * Effect.runPromise(program).then(console.log)
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const languageModel = (
  server: Pick<FakeOpenAi, "url">,
  options?: LanguageModelOptions
): Layer.Layer<LanguageModel.LanguageModel, AgentError.InvalidOptions> => {
  const unknown = unknownKey(
    "FakeOpenAi",
    options,
    keysOf<LanguageModelOptions>({ model: true, httpClient: true, apiKey: true, transformClient: true })
  )
  if (unknown !== undefined) return Layer.fail(unknown)
  return OpenAiLanguageModel.layer({ model: options?.model ?? "gpt-4o-mini", config: { strict: false } }).pipe(
    Layer.provide(OpenAiClient.layer({
      apiKey: Redacted.make(options?.apiKey ?? "sk-test"),
      apiUrl: `${server.url}/v1`,
      ...(options?.transformClient === undefined ? {} : { transformClient: options.transformClient })
    })),
    Layer.provide(options?.httpClient === "fetch" ? FetchHttpClient.layer : NodeHttpClient.layerUndici)
  )
}
