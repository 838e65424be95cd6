/**
 * A run streamed into a chat UI: an HTTP handler that speaks the AI SDK's UI
 * message stream protocol (v1: Server-Sent Events of JSON chunks, header
 * `x-vercel-ai-ui-message-stream: v1`), so `useChat` (React, Vue, Svelte) and
 * the `ai` package's `Chat` work against an agent unchanged.
 *
 * {@link toHttpApp} reads the chat request `useChat` sends
 * (`{ id, messages, trigger }`): the chat `id` is the thread, the last message
 * is what to do. A user message runs the agent with its text; an assistant
 * message whose tool parts answer approval requests (`addToolApprovalResponse`)
 * resumes the thread with the decisions. The history lives in the agent's
 * checkpointer, so only the last message is read. Any client can post any
 * chat id, so the handler asks its required `authorize` option whether the
 * request may use the chat before it touches the thread.
 *
 * {@link fromEvents} turns a run's {@link AgentEvent.AgentEvent} stream into
 * UI message chunks: text deltas, tool inputs and outputs, an interrupted
 * run's approval requests as tool parts awaiting a decision, a failure as an
 * `error` chunk, and `finish`.
 *
 * Interrupt values belong to the middleware that interrupts, so this module
 * does not know them: an {@link Approvals} adapter (HumanInTheLoop's
 * `uiApprovals`) says which tool calls an interrupt waits on and builds the
 * resume value from the human's answers.
 *
 * @since 0.1.0
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Encoding from "effect/Encoding"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type * as Agent from "./Agent.js"
import type * as AgentError from "./AgentError.js"
import type * as AgentEvent from "./AgentEvent.js"
import type * as AgentResult from "./AgentResult.js"
import * as HttpConnection from "./HttpConnection.js"
import { unknownKey } from "./internal/options.js"
import * as Secrets from "./Secrets.js"
import type * as Wait from "./Wait.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * The chunks of the UI message stream protocol this module writes (a subset
 * of the `ai` package's `UIMessageChunk`, checked against it in the tests).
 *
 * @since 0.1.0
 * @category models
 */
export type UiMessageChunk =
  | { readonly type: "start"; readonly messageId?: string }
  | { readonly type: "start-step" }
  | { readonly type: "finish-step" }
  | { readonly type: "finish"; readonly finishReason: "stop" | "tool-calls" | "other" }
  | { readonly type: "text-start"; readonly id: string }
  | { readonly type: "text-delta"; readonly id: string; readonly delta: string }
  | { readonly type: "text-end"; readonly id: string }
  | { readonly type: "reasoning-start"; readonly id: string }
  | { readonly type: "reasoning-delta"; readonly id: string; readonly delta: string }
  | { readonly type: "reasoning-end"; readonly id: string }
  | {
    readonly type: "tool-input-available"
    readonly toolCallId: string
    readonly toolName: string
    readonly input: unknown
    readonly providerExecuted?: boolean
  }
  | { readonly type: "tool-output-available"; readonly toolCallId: string; readonly output: unknown }
  | { readonly type: "tool-output-error"; readonly toolCallId: string; readonly errorText: string }
  | { readonly type: "tool-output-denied"; readonly toolCallId: string }
  | {
    readonly type: "tool-approval-request"
    readonly approvalId: string
    readonly toolCallId: string
    readonly approvalDescriptor?: unknown
  }
  | { readonly type: "data-interrupt"; readonly data: AgentResult.Interrupt }
  | { readonly type: "error"; readonly errorText: string }

/**
 * One tool call an interrupted run waits on, as the UI shows it: a tool part
 * in state `approval-requested`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ApprovalRequest {
  /** Unique to this call in this wait: an answer naming another id answers another wait. */
  readonly approvalId: string
  readonly toolCallId: string
  readonly toolName: string
  /** The arguments of the call. */
  readonly input: unknown
  /** What the human is asked, sent as the approval's `descriptor`. */
  readonly description?: string | undefined
}

/**
 * The human's answer to one {@link ApprovalRequest}, from a tool part in
 * state `approval-responded`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ApprovalResponse {
  readonly request: ApprovalRequest
  readonly approved: boolean
  readonly reason?: string | undefined
}

/**
 * Translates a middleware's interrupts to approval requests and the human's
 * answers back to its resume value. HumanInTheLoop's `uiApprovals` is one.
 * Typed by the waits `W` it reads (see `Wait`: the interrupt's value is the
 * waiting middleware's request) and the decision `D` it answers with (one of
 * theirs by default): the chat handlers take only an adapter whose
 * decisions the agent's waits accept.
 *
 * @example
 * ```ts
 * import type { UiMessageStream, Wait } from "@stepwise-agent/core"
 * import { Option } from "effect"
 *
 * // a middleware "confirm" interrupting with one call and resumed with true or false
 * type Call = { readonly callId: string; readonly toolName: string; readonly args: unknown }
 * type Confirm = Wait.Declared<"confirm", Call, boolean>
 *
 * const yesNo: UiMessageStream.Approvals<Confirm> = {
 *   requests: ({ key, value }) =>
 *     Option.some([{ approvalId: key, toolCallId: value.callId, toolName: value.toolName, input: value.args }]),
 *   resumeValue: (_interrupt, responses) => responses.every((response) => response.approved)
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Approvals<W extends Wait.Any = Wait.Any, D = Wait.DecisionOf<W>> {
  /** The tool calls `interrupt` waits on; `None` when it is not a tool approval. */
  readonly requests: (interrupt: Wait.Interrupt<W>) => Option.Option<ReadonlyArray<ApprovalRequest>>
  /** The value to resume `interrupt` with, given one response per request. */
  readonly resumeValue: (interrupt: Wait.Interrupt<W>, responses: ReadonlyArray<ApprovalResponse>) => D
}

/**
 * Options of {@link fromEvents}, for a run of an agent whose waits are `W`.
 *
 * @since 0.1.0
 * @category models
 */
export interface EventsOptions<W extends Wait.Any = Wait.Any> {
  /** Reads interrupts as approval requests; without it (or for other interrupts) a `data-interrupt` chunk. */
  readonly approvals?: Approvals<W> | undefined
  /**
   * The `errorText` of a failed run's `error` chunk. The default gives the
   * error's tag and the first line of its message (at most 200 characters)
   * with credentials scrubbed (`Secrets.scrubText`), and only "unexpected
   * error" for a defect.
   */
  readonly errorText?: ((cause: Cause.Cause<unknown>) => string) | undefined
  /** The `messageId` of the `start` chunk (the assistant message the chunks build). */
  readonly messageId?: string | undefined
  /**
   * The approvals a resumed run answers: the denied calls are marked
   * `tool-output-denied` right after `start`; the approved ones are not
   * announced again (the UI has their parts).
   */
  readonly answered?: ReadonlyArray<{ readonly toolCallId: string; readonly approved: boolean }> | undefined
}

/**
 * Whether the client making `request` may use the chat `threadId`: read its
 * history by running it, answer its approvals. Checked on every request,
 * after the body is read and before the thread is touched; `false` is
 * answered 403, a failure 500. Take the user from the request (a session
 * cookie, a bearer token) and look up whether the thread is theirs.
 *
 * @example
 * ```ts
 * import type { UiMessageStream } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * // chats are named "<user>/<chat>", and the user is named by a header a trusted proxy sets
 * const ownChatsOnly: UiMessageStream.Authorize = (request, threadId) =>
 *   Effect.succeed(request.headers["x-user"] !== undefined && threadId.startsWith(`${request.headers["x-user"]}/`))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Authorize = (
  request: HttpServerRequest.HttpServerRequest,
  threadId: string
) => Effect.Effect<boolean, unknown>

/**
 * Options of {@link toHttpApp}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<W extends Wait.Any = Wait.Any> extends Omit<EventsOptions<W>, "messageId" | "answered"> {
  /**
   * Who may use which chat: required, since any client can post any chat
   * id. {@link allowAll} lets everyone use every chat (demos only).
   */
  readonly authorize: Authorize
  /**
   * The largest request body read, in bytes (default 4194304, 4 MiB); a
   * larger one is refused with 413 before it is read whole.
   */
  readonly maxBodyBytes?: number | undefined
  /**
   * The longest the whole request body may take to arrive, counted from
   * when the handler starts reading it (default 30 seconds): a body still
   * coming then is refused with 408 and the connection is closed after the
   * answer, however steadily it trickles in. A duration above zero, at most
   * 24 days.
   *
   * @example
   * ```ts
   * import { UiMessageStream } from "@stepwise-agent/core"
   *
   * const options: UiMessageStream.Options = { authorize: UiMessageStream.allowAll, bodyTimeout: "10 seconds" }
   * ```
   */
  readonly bodyTimeout?: Duration.DurationInput | undefined
}

/**
 * The body `useChat` posts (the `ai` package's `DefaultChatTransport`): the
 * chat id, its messages, and what triggered the request. Other fields (a
 * transport's `body` option) are ignored; of the messages only the parts
 * this module reads are checked.
 *
 * @since 0.1.0
 * @category models
 */
export const ChatRequest = Schema.Struct({
  id: Schema.String,
  messages: Schema.NonEmptyArray(Schema.Struct({
    id: Schema.optional(Schema.String),
    role: Schema.Literal("system", "user", "assistant"),
    parts: Schema.Array(Schema.Struct({ type: Schema.String }, { key: Schema.String, value: Schema.Unknown }))
  })),
  trigger: Schema.optional(Schema.Literal("submit-message", "regenerate-message")),
  messageId: Schema.optional(Schema.String)
})

/**
 * @since 0.1.0
 * @category models
 */
export type ChatRequest = typeof ChatRequest.Type

const TextPart = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })

const RespondedToolPart = Schema.Struct({
  toolCallId: Schema.String,
  state: Schema.Literal("approval-responded"),
  approval: Schema.Struct({ id: Schema.String, approved: Schema.Boolean, reason: Schema.optional(Schema.String) })
})

/**
 * What a chat request asks for: run the thread with the user's text, or
 * resume it with answers to its approval requests.
 *
 * @since 0.1.0
 * @category models
 */
export type ChatTurn =
  | { readonly _tag: "Send"; readonly threadId: string; readonly text: string }
  | {
    readonly _tag: "Answer"
    readonly threadId: string
    /** The id of the assistant message holding the approvals. */
    readonly messageId: string | undefined
    readonly answers: ReadonlyArray<{
      readonly approvalId: string
      readonly toolCallId: string
      readonly approved: boolean
      readonly reason?: string | undefined
    }>
  }

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * Why the chat handler refused a request ({@link ChatRequestError}), with the
 * HTTP status it answers:
 *
 * - `"Invalid"` (400): the request is not a chat request this handler can
 *   serve (`detail` says what is wrong);
 * - `"TooLarge"` (413): the body is larger than the handler's `maxBodyBytes`
 *   (`maxBytes`; what comes past the limit is not kept);
 * - `"Timeout"` (408): the body had not fully arrived within the handler's
 *   `bodyTimeout` (`timeoutMillis`; the connection is closed after the answer);
 * - `"Forbidden"` (403): the handler's `authorize` did not allow the request
 *   to use the chat (`threadId`; nothing is read from the thread or run);
 * - `"Conflict"` (409): the request does not fit the thread's state: a new
 *   message while the thread waits for approvals, answers to approvals it
 *   does not wait for (`threadId`, `detail`; nothing changes).
 *
 * @since 0.1.0
 * @category errors
 */
export const ChatRequestErrorReason = Schema.Literal("Invalid", "TooLarge", "Timeout", "Forbidden", "Conflict")

/**
 * @since 0.1.0
 * @category errors
 */
export type ChatRequestErrorReason = typeof ChatRequestErrorReason.Type

/**
 * A chat request the handler refused: `reason` says why
 * ({@link ChatRequestErrorReason}); the handler answers with its status and
 * the message.
 *
 * @example
 * ```ts
 * import { UiMessageStream } from "@stepwise-agent/core"
 *
 * const error = new UiMessageStream.ChatRequestError({ reason: "Invalid", detail: "the body is not valid JSON" })
 * error.message // "Invalid chat request: the body is not valid JSON"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ChatRequestError extends Schema.TaggedError<ChatRequestError>(
  "@stepwise-agent/core/UiMessageStream/ChatRequestError"
)("ChatRequestError", {
  reason: ChatRequestErrorReason,
  /** `"Forbidden"`, `"Conflict"`: the chat's thread. */
  threadId: Schema.optional(Schema.String),
  /** `"TooLarge"`: the handler's `maxBodyBytes`. */
  maxBytes: Schema.optional(Schema.Number),
  /** `"Timeout"`: the handler's `bodyTimeout`, in milliseconds. */
  timeoutMillis: Schema.optional(Schema.Number),
  /** `"Invalid"`, `"Conflict"`: what is wrong, in words. */
  detail: Schema.optional(Schema.String)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    switch (this.reason) {
      case "Invalid":
        return `Invalid chat request: ${this.detail ?? ""}`
      case "TooLarge":
        return `The chat request is larger than ${this.maxBytes ?? 0} bytes`
      case "Timeout":
        return `The chat request's body did not arrive within ${formatMillis(this.timeoutMillis ?? 0)}`
      case "Forbidden":
        return `Chat "${this.threadId ?? ""}": this client may not use it`
      case "Conflict":
        return `Chat "${this.threadId ?? ""}": ${this.detail ?? ""}`
    }
  }
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/**
 * The headers of a UI message stream response.
 *
 * @since 0.1.0
 * @category constructors
 */
export const headers: Readonly<Record<string, string>> = {
  "cache-control": "no-cache",
  connection: "keep-alive",
  "x-vercel-ai-ui-message-stream": "v1",
  "x-accel-buffering": "no"
}

/** An error's message with credentials scrubbed, `""` when it has none. */
const messageOf = (error: unknown): string => Predicate.hasProperty(error, "message") ? Secrets.messageOf(error) : ""

/** The longest first line of an error message {@link defaultErrorText} sends. */
const maxErrorLine = 200

/**
 * The error's tag and the first line of its message, scrubbed: a provider
 * error's message goes on with the whole request and response (the user's
 * prompt, the tools, trace ids), which a browser has no use for.
 */
const defaultErrorText = (cause: Cause.Cause<unknown>): string =>
  Option.match(Cause.failureOption(cause), {
    onNone: () => "The run failed with an unexpected error",
    onSome: (error) => {
      const tag = Predicate.hasProperty(error, "_tag") && typeof error._tag === "string" ? error._tag : "Error"
      const line = messageOf(error).split("\n", 1)[0]!.trim()
      const short = line.length > maxErrorLine ? `${line.slice(0, maxErrorLine)}…` : line
      return short === "" ? `The run failed (${tag})` : `The run failed (${tag}): ${short}`
    }
  })

const toolResultText = (result: unknown): string => {
  if (typeof result === "string") return result
  if (Predicate.hasProperty(result, "error") && typeof result.error === "string") return result.error
  return JSON.stringify(result) ?? String(result)
}

/**
 * Turns a run's events into UI message chunks: `start`, then per model call
 * a step (`start-step` … `finish-step`) with its text (streamed deltas, or
 * the stored reply's text when none streamed), reasoning and tool inputs, the
 * tool outputs, then `finish`. An interrupted run ends with its approval
 * requests (`tool-approval-request`, with {@link EventsOptions.approvals}) or
 * a `data-interrupt` chunk. A failed run ends with an `error` chunk; the
 * chunk stream itself never fails.
 *
 * @example
 * ```ts
 * import { Agent, UiMessageStream } from "@stepwise-agent/core"
 * import { Effect, Stream } from "effect"
 *
 * const chunks = Effect.gen(function*() {
 *   const agent = yield* Agent.make({})
 *   return yield* Stream.runCollect(UiMessageStream.fromEvents(agent.stream("hello", { threadId: "t1" })))
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromEvents = <S, O, E, R, W extends Wait.Any = Wait.Any>(
  events: Stream.Stream<AgentEvent.AgentEvent<S, O, W>, E, R>,
  options?: EventsOptions<NoInfer<W>> | undefined
): Stream.Stream<UiMessageChunk, never, R> =>
  Stream.suspend(() => {
    const errorText = options?.errorText ?? defaultErrorText
    let step: number | undefined
    let text: string | undefined
    let ids = 0
    const streamedSteps = new Set<number>()
    const answered = options?.answered ?? []
    const announced = new Set(answered.map((answer) => answer.toolCallId))

    const closeText = (out: Array<UiMessageChunk>) => {
      if (text !== undefined) out.push({ type: "text-end", id: text })
      text = undefined
    }
    const closeStep = (out: Array<UiMessageChunk>) => {
      closeText(out)
      if (step !== undefined) out.push({ type: "finish-step" })
      step = undefined
    }
    const announce = (out: Array<UiMessageChunk>, call: {
      readonly id: string
      readonly name: string
      readonly params: unknown
      readonly providerExecuted?: boolean
    }) => {
      if (announced.has(call.id)) return
      announced.add(call.id)
      out.push({
        type: "tool-input-available",
        toolCallId: call.id,
        toolName: call.name,
        input: call.params,
        ...(call.providerExecuted === true ? { providerExecuted: true } : {})
      })
    }
    const whole = (out: Array<UiMessageChunk>, kind: "text" | "reasoning", delta: string) => {
      const id = `${kind}-${ids++}`
      if (kind === "text") {
        out.push({ type: "text-start", id }, { type: "text-delta", id, delta }, { type: "text-end", id })
      } else {
        out.push({ type: "reasoning-start", id }, { type: "reasoning-delta", id, delta }, { type: "reasoning-end", id })
      }
    }
    const ended = (out: Array<UiMessageChunk>, result: AgentResult.AgentResult<S, O, W>) => {
      closeText(out)
      if (result._tag === "Completed") {
        closeStep(out)
        out.push({ type: "finish", finishReason: "stop" })
        return
      }
      const { interrupt } = result
      const requests = options?.approvals === undefined ? Option.none() : options.approvals.requests(interrupt)
      if (Option.isNone(requests)) {
        closeStep(out)
        out.push({ type: "data-interrupt", data: interrupt }, { type: "finish", finishReason: "other" })
        return
      }
      for (const request of requests.value) {
        announce(out, { id: request.toolCallId, name: request.toolName, params: request.input })
        out.push({
          type: "tool-approval-request",
          approvalId: request.approvalId,
          toolCallId: request.toolCallId,
          ...(request.description === undefined ? {} : { approvalDescriptor: request.description })
        })
      }
      closeStep(out)
      out.push({ type: "finish", finishReason: "tool-calls" })
    }

    const chunksOf = (event: AgentEvent.AgentEvent<S, O, W>): Array<UiMessageChunk> => {
      const out: Array<UiMessageChunk> = []
      switch (event._tag) {
        case "ModelCallStarted": {
          // a retry of the same step keeps the step; its text is a new part
          if (step === event.step) closeText(out)
          else {
            closeStep(out)
            out.push({ type: "start-step" })
            step = event.step
            // call ids are unique within a reply only (a provider may say `call_0` in every reply)
            announced.clear()
          }
          break
        }
        case "TextDelta": {
          if (event.delta === "") break
          if (text === undefined) {
            text = `text-${ids++}`
            out.push({ type: "text-start", id: text })
          }
          out.push({ type: "text-delta", id: text, delta: event.delta })
          streamedSteps.add(event.step)
          break
        }
        case "ModelAttemptFailed": {
          // the UI keeps the failed attempt's text; the stored reply comes from the next attempt
          closeText(out)
          if (event.discardedText) streamedSteps.delete(event.step)
          break
        }
        case "ModelResponded": {
          closeText(out)
          for (const part of event.message.content) {
            if (part.type === "reasoning" && part.text !== "") whole(out, "reasoning", part.text)
            else if (part.type === "text" && part.text !== "" && !streamedSteps.has(event.step)) {
              whole(out, "text", part.text)
            } else if (part.type === "tool-call") announce(out, part)
          }
          break
        }
        case "ToolCallStarted": {
          announce(out, event.call)
          break
        }
        case "ToolCallCompleted": {
          const { result } = event
          out.push(
            result.isFailure
              ? {
                type: "tool-output-error",
                toolCallId: result.id,
                // a tool's error may quote a request it made (headers included): the browser gets no credential
                errorText: Secrets.scrubText(toolResultText(result.result))
              }
              : { type: "tool-output-available", toolCallId: result.id, output: result.result }
          )
          break
        }
        case "RunEnded": {
          ended(out, event.result)
          break
        }
      }
      return out
    }

    const start: Array<UiMessageChunk> = [
      options?.messageId === undefined ? { type: "start" } : { type: "start", messageId: options.messageId },
      ...answered.flatMap(({ approved, toolCallId }): Array<UiMessageChunk> =>
        approved ? [] : [{ type: "tool-output-denied", toolCallId }]
      )
    ]
    return Stream.concat(
      Stream.fromIterable(start),
      events.pipe(
        Stream.mapConcat(chunksOf),
        Stream.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Stream.failCause(cause as Cause.Cause<never>)
            : Stream.suspend(() => {
              // the UI closes what is open (a half-written text part stays `streaming` otherwise)
              const out: Array<UiMessageChunk> = []
              closeStep(out)
              out.push({ type: "error", errorText: errorText(cause) })
              return Stream.fromIterable(out)
            })
        )
      )
    )
  })

/**
 * A part of a {@link UiMessage}: the parts of the `ai` package's `UIMessage`
 * that {@link fromEvents} streams (and a user's files).
 *
 * @since 0.1.0
 * @category models
 */
export type UiMessagePart =
  | { readonly type: "step-start" }
  | { readonly type: "text"; readonly text: string; readonly state?: "done" }
  | { readonly type: "reasoning"; readonly text: string; readonly state: "done" }
  | { readonly type: "file"; readonly mediaType: string; readonly url: string; readonly filename?: string }
  | { readonly type: "data-interrupt"; readonly data: AgentResult.Interrupt }
  | UiToolPart

/**
 * A tool call as a UI part: named `tool-<name>`, in the state the live
 * stream leaves it in.
 *
 * @since 0.1.0
 * @category models
 */
export type UiToolPart =
  & {
    readonly type: `tool-${string}`
    readonly toolCallId: string
    readonly input: unknown
    readonly providerExecuted?: boolean
  }
  & (
    | { readonly state: "input-available" }
    | { readonly state: "approval-requested"; readonly approval: { readonly id: string; readonly descriptor?: string } }
    | { readonly state: "output-available"; readonly output: unknown }
    | { readonly state: "output-error"; readonly errorText: string }
  )

/**
 * One message of a chat as the `ai` package's `UIMessage` (what `useChat`
 * keeps): a user's message, or the assistant's reply to it — every model
 * call of its runs, one `step-start` each.
 *
 * @since 0.1.0
 * @category models
 */
export interface UiMessage {
  readonly id: string
  readonly role: "user" | "assistant"
  /** (A mutable array, as `useChat` takes its messages.) */
  readonly parts: Array<UiMessagePart>
}

/**
 * Options of {@link toUiMessages}, for a thread of an agent whose waits are `W`.
 *
 * @since 0.1.0
 * @category models
 */
export interface UiMessagesOptions<W extends Wait.Any = Wait.Any> {
  /** What the thread waits for (`ThreadSnapshot.pending`): its approvals show as `approval-requested`. */
  readonly pending?: Option.Option<Wait.Interrupt<W>> | undefined
  /** Reads the pending interrupt as approval requests; without it (or for another interrupt) a `data-interrupt` part. */
  readonly approvals?: Approvals<W> | undefined
}

const fileUrl = (part: Prompt.FilePart): string => {
  const { data, mediaType } = part
  if (typeof data === "string") {
    return /^(data|https?|blob):/i.test(data) ? data : `data:${mediaType};base64,${data}`
  }
  // a URL gives its address
  return data instanceof Uint8Array ? `data:${mediaType};base64,${Encoding.encodeBase64(data)}` : String(data)
}

const filePart = (part: Prompt.FilePart): UiMessagePart => ({
  type: "file",
  mediaType: part.mediaType,
  url: fileUrl(part),
  ...(part.fileName === undefined ? {} : { filename: part.fileName })
})

/**
 * A stored thread as the messages a chat page shows — what `useChat` had
 * when the runs streamed, for its initial `messages` after a reload. A user
 * message becomes a user message (its text and files); the assistant and
 * tool messages up to the next user message become one assistant message,
 * a `step-start` per model reply with its text, reasoning and tool calls
 * (in the order {@link fromEvents} streams them), each call in the state
 * its result left it (`output-available`, `output-error`), and a call the
 * thread waits on, read by {@link UiMessagesOptions.approvals}, in state
 * `approval-requested` with its approval id (so `addToolApprovalResponse`
 * answers it). A wait that is no tool approval is a `data-interrupt` part.
 * System messages are not shown. Message ids are the index of the message's
 * first stored message (`m<index>`), stable across loads.
 *
 * Not kept in a thread, so not given back: a denied call shows the result
 * the denial stored (`output-error`), not `output-denied`; a model call's
 * failed attempts and a run's error.
 *
 * @example
 * ```ts
 * import { Agent, UiMessageStream } from "@stepwise-agent/core"
 * import { Effect, Option } from "effect"
 *
 * const initialMessages = Effect.gen(function*() {
 *   const agent = yield* Agent.make({})
 *   const thread = yield* agent.thread("chat-1")
 *   return Option.match(thread, {
 *     onNone: () => [],
 *     onSome: ({ pending, state }) => UiMessageStream.toUiMessages(state.messages, { pending })
 *   })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const toUiMessages = <W extends Wait.Any = Wait.Any>(
  messages: ReadonlyArray<Prompt.Message>,
  options?: UiMessagesOptions<W> | undefined
): Array<UiMessage> => {
  const out: Array<{ id: string; role: "user" | "assistant"; parts: Array<UiMessagePart> }> = []
  let reply: { id: string; role: "assistant"; parts: Array<UiMessagePart> } | undefined
  // the tool parts of the last model reply, by call id (call ids are unique within a reply only)
  let step = new Map<string, UiToolPart>()
  const replyAt = (index: number) => {
    if (reply === undefined) {
      reply = { id: `m${index}`, role: "assistant", parts: [] }
      out.push(reply)
    }
    return reply
  }
  const setTool = (parts: Array<UiMessagePart>, next: UiToolPart) => {
    const previous = step.get(next.toolCallId)
    if (previous !== undefined) parts[parts.indexOf(previous)] = next
    else parts.push(next)
    step.set(next.toolCallId, next)
  }
  for (const [index, message] of messages.entries()) {
    switch (message.role) {
      case "system":
        break
      case "user": {
        reply = undefined
        step = new Map()
        out.push({
          id: `m${index}`,
          role: "user",
          parts: message.content.map((part): UiMessagePart =>
            part.type === "text" ? { type: "text", text: part.text } : filePart(part)
          )
        })
        break
      }
      case "assistant": {
        const { parts } = replyAt(index)
        parts.push({ type: "step-start" })
        step = new Map()
        // the live stream sends a reply's text as it streams, its reasoning and calls when the reply is whole
        const text = message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")
        if (text !== "") parts.push({ type: "text", text, state: "done" })
        for (const part of message.content) {
          if (part.type === "reasoning" && part.text !== "") {
            parts.push({ type: "reasoning", text: part.text, state: "done" })
          } else if (part.type === "file") parts.push(filePart(part))
          else if (part.type === "tool-call" && !step.has(part.id)) {
            setTool(parts, {
              type: `tool-${part.name}`,
              toolCallId: part.id,
              state: "input-available",
              input: part.params,
              ...(part.providerExecuted === true ? { providerExecuted: true } : {})
            })
          } else if (part.type === "tool-result") setTool(parts, resultPart(step.get(part.id), part))
        }
        break
      }
      case "tool": {
        const { parts } = replyAt(index)
        for (const part of message.content) setTool(parts, resultPart(step.get(part.id), part))
        break
      }
    }
  }
  const pending = options?.pending ?? Option.none()
  if (Option.isSome(pending)) {
    const interrupt = pending.value
    const { parts } = replyAt(messages.length)
    const requests = options?.approvals === undefined ? Option.none() : options.approvals.requests(interrupt)
    if (Option.isNone(requests)) parts.push({ type: "data-interrupt", data: interrupt })
    else {
      for (const request of requests.value) {
        const call = step.get(request.toolCallId)
        setTool(parts, {
          type: call?.type ?? `tool-${request.toolName}`,
          toolCallId: request.toolCallId,
          input: call === undefined ? request.input : call.input,
          ...(call?.providerExecuted === true ? { providerExecuted: true } : {}),
          state: "approval-requested",
          approval: {
            id: request.approvalId,
            ...(request.description === undefined ? {} : { descriptor: request.description })
          }
        })
      }
    }
  }
  return out
}

const resultPart = (call: UiToolPart | undefined, result: Prompt.ToolResultPart): UiToolPart => {
  const base = {
    type: call?.type ?? `tool-${result.name}` as const,
    toolCallId: result.id,
    input: call?.input,
    ...(call?.providerExecuted === true || result.providerExecuted ? { providerExecuted: true } : {})
  }
  return result.isFailure
    ? { ...base, state: "output-error", errorText: Secrets.scrubText(toolResultText(result.result)) }
    : { ...base, state: "output-available", output: result.result }
}

const encoder = new TextEncoder()

/**
 * Encodes chunks as the protocol's Server-Sent Events (`data: {json}` and a
 * blank line each), ending with `data: [DONE]`.
 *
 * @example
 * ```ts
 * import { UiMessageStream } from "@stepwise-agent/core"
 * import { Stream } from "effect"
 *
 * const bytes = UiMessageStream.toSse(Stream.make({ type: "start" } as const))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const toSse = <E, R>(chunks: Stream.Stream<UiMessageChunk, E, R>): Stream.Stream<Uint8Array, E, R> =>
  chunks.pipe(
    Stream.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`),
    Stream.concat(Stream.make("data: [DONE]\n\n")),
    Stream.map((line) => encoder.encode(line))
  )

const formatParseError = (error: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => issue.path.length === 0 ? issue.message : `${issue.path.join(".")}: ${issue.message}`)
    .join("; ")

const decodeChatRequest = Schema.decodeUnknown(ChatRequest, { onExcessProperty: "ignore" })
const decodeText = Schema.decodeUnknownOption(TextPart)
const decodeResponded = Schema.decodeUnknown(RespondedToolPart)

const isToolPart = (type: string) => type.startsWith("tool-") || type === "dynamic-tool"

/**
 * Reads a chat request body: the thread (the chat `id`) and what its last
 * message asks for. Fails with a {@link ChatRequestError} (`"Invalid"`) naming what is
 * wrong: not a chat request (with the path of the bad field), a regenerate
 * trigger (the thread is stored on the server: send a new message instead),
 * a user message without text or with parts other than text, an assistant
 * message answering no approval.
 *
 * @example
 * ```ts
 * import { UiMessageStream } from "@stepwise-agent/core"
 *
 * const turn = UiMessageStream.readChatRequest({
 *   id: "chat-1",
 *   messages: [{ id: "m1", role: "user", parts: [{ type: "text", text: "Hello" }] }],
 *   trigger: "submit-message"
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const readChatRequest = (body: unknown): Effect.Effect<ChatTurn, ChatRequestError> =>
  Effect.gen(function*() {
    const request = yield* Effect.mapError(
      decodeChatRequest(body),
      (error) =>
        new ChatRequestError({
          reason: "Invalid",
          detail: `the body is not a chat request: ${formatParseError(error)}`
        })
    )
    if (request.trigger === "regenerate-message") {
      return yield* new ChatRequestError({
        reason: "Invalid",
        detail: `trigger "regenerate-message" is not supported: the thread is stored on the server, so a reply ` +
          `cannot be regenerated; send a new message instead`
      })
    }
    const index = request.messages.length - 1
    const last = request.messages[index]
    const at = `messages.${index}`
    if (last.role === "user") {
      let text = ""
      for (const [i, part] of last.parts.entries()) {
        const decoded = decodeText(part)
        if (Option.isNone(decoded)) {
          return yield* new ChatRequestError({
            reason: "Invalid",
            detail: `${at}.parts.${i}: a part of type "${part.type}" is not supported in a user message (only ` +
              `"text" parts with a string "text")`
          })
        }
        text += text === "" ? decoded.value.text : `\n${decoded.value.text}`
      }
      if (text.trim() === "") {
        return yield* new ChatRequestError({ reason: "Invalid", detail: `${at}: the user message has no text` })
      }
      return { _tag: "Send", threadId: request.id, text } as const
    }
    if (last.role === "assistant") {
      const answers: Array<Extract<ChatTurn, { _tag: "Answer" }>["answers"][number]> = []
      for (const [i, part] of last.parts.entries()) {
        if (!isToolPart(part.type) || part.state !== "approval-responded") continue
        const decoded = yield* Effect.mapError(
          decodeResponded(part),
          (error) => new ChatRequestError({ reason: "Invalid", detail: `${at}.parts.${i}: ${formatParseError(error)}` })
        )
        answers.push({
          approvalId: decoded.approval.id,
          toolCallId: decoded.toolCallId,
          approved: decoded.approval.approved,
          ...(decoded.approval.reason === undefined ? {} : { reason: decoded.approval.reason })
        })
      }
      if (answers.length === 0) {
        return yield* new ChatRequestError({
          reason: "Invalid",
          detail: `${at}: the last message is the assistant's and answers no approval (no tool part in state ` +
            `"approval-responded"); send a user message or answer the approvals`
        })
      }
      return { _tag: "Answer", threadId: request.id, messageId: last.id, answers } as const
    }
    return yield* new ChatRequestError({
      reason: "Invalid",
      detail: `${at}: the last message must be the user's or the assistant's, not "${last.role}"`
    })
  })

type Refusal = ChatRequestError | NotJson

const threadOf = <S, E, O, W extends Wait.Any>(agent: Agent.Service<S, E, O, W>, threadId: string) =>
  agent.thread(threadId).pipe(
    Effect.catchTags({
      InvalidInput: (error) => new ChatRequestError({ reason: "Invalid", detail: `the chat id: ${error.reason}` })
    })
  )

const answer = <S, E, O, W extends Wait.Any>(
  agent: Agent.Service<S, E, O, W>,
  turn: Extract<ChatTurn, { _tag: "Answer" }>,
  approvals: Approvals<W> | undefined
) =>
  Effect.gen(function*() {
    const { threadId } = turn
    const conflict = (detail: string) => new ChatRequestError({ reason: "Conflict", threadId, detail })
    const snapshot = yield* threadOf(agent, threadId)
    const pending = Option.flatMap(snapshot, (thread) => thread.pending)
    if (Option.isNone(pending)) {
      return yield* conflict("the request answers approvals, but the thread waits for no decision")
    }
    const interrupt = pending.value
    const requests = approvals === undefined ? Option.none() : approvals.requests(interrupt)
    if (Option.isNone(requests)) {
      return yield* conflict(
        `the thread waits for middleware "${interrupt.middleware}", whose wait is not a tool approval ` +
          `this handler can answer (give toHttpApp an approvals adapter for it)`
      )
    }
    const byId = new Map(requests.value.map((request) => [request.approvalId, request]))
    const responses: Array<ApprovalResponse> = []
    for (const given of turn.answers) {
      const request = byId.get(given.approvalId)
      if (request === undefined || request.toolCallId !== given.toolCallId) {
        return yield* conflict(
          `approval "${given.approvalId}" (call "${given.toolCallId}") answers no call the thread waits on ` +
            `(waiting: ${[...byId.keys()].join(", ")})`
        )
      }
      responses.push({ request, approved: given.approved, reason: given.reason })
    }
    const value = approvals!.resumeValue(interrupt, responses)
    yield* agent.validateResume(threadId, value).pipe(
      Effect.catchAll((error): Effect.Effect<never, Refusal | AgentError.CheckpointError> =>
        Predicate.isTagged(error, "CheckpointError")
          ? Effect.fail(error as AgentError.CheckpointError)
          : Predicate.isTagged(error, "InvalidInput")
          ? new ChatRequestError({ reason: "Invalid", detail: `the chat id: ${messageOf(error)}` })
          : conflict(messageOf(error))
      )
    )
    return {
      value,
      answered: responses.map((response) => ({ toolCallId: response.request.toolCallId, approved: response.approved }))
    }
  })

/** The HTTP status of a refused chat request, by its reason. */
const refusalStatus: Record<ChatRequestErrorReason, number> = {
  Invalid: 400,
  TooLarge: 413,
  Timeout: 408,
  Forbidden: 403,
  Conflict: 409
}

const refusal = (error: Refusal | AgentError.CheckpointError | ServerSide) =>
  error._tag === "ChatRequestError"
    ? HttpServerResponse.text(error.message, { status: refusalStatus[error.reason] })
    : error._tag === "NotJson"
    ? HttpServerResponse.text(notJsonText, { status: 415 })
    : error._tag === "ServerSide"
    ? HttpServerResponse.text(error.text, { status: 500 })
    : HttpServerResponse.text("The chat's thread could not be loaded", { status: 500 })

/**
 * A request refused for the server's sake: `authorize` failed, or the options are wrong (no `authorize`, from a
 * caller without types; a `maxBodyBytes` or `bodyTimeout` that is no limit). Every request is refused then, none let through.
 */
interface ServerSide {
  readonly _tag: "ServerSide"
  readonly text: string
}
const serverSide = (text: string): ServerSide => ({ _tag: "ServerSide", text })

/** The keys {@link toHttpApp}'s options may have. */
const chatOptionKeys: ReadonlyArray<string> = ["authorize", "approvals", "errorText", "maxBodyBytes", "bodyTimeout"]

/**
 * Lets every client use every chat: for demos and tests on a trusted
 * machine only. A server others can reach needs an {@link Authorize} that
 * checks who is asking.
 *
 * @example
 * ```ts
 * import { HttpRouter } from "@effect/platform"
 * import { Agent, UiMessageStream } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const demo = Effect.map(Agent.make({}), (agent) =>
 *   HttpRouter.empty.pipe(
 *     HttpRouter.post("/api/chat", UiMessageStream.toHttpApp(agent, { authorize: UiMessageStream.allowAll }))
 *   ))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const allowAll: Authorize = () => Effect.succeed(true)

/**
 * A body not declared as JSON: refused with 415. A page of another site can
 * post a form or `text/plain` to the chat without asking the browser first
 * (with the user's cookies); declaring JSON takes a CORS preflight, which
 * only the server's own pages pass. `useChat` sends JSON.
 */
interface NotJson {
  readonly _tag: "NotJson"
}
const notJsonText = "The chat request must be JSON, sent with Content-Type: application/json"

/** Whether a Content-Type header declares JSON (`application/json` or a `+json` type, with any parameters). */
const isJson = (contentType: string | undefined): boolean => {
  const type = contentType?.split(";", 1)[0]!.trim().toLowerCase()
  return type !== undefined && (type === "application/json" || (/^[a-z0-9.+-]+\/[a-z0-9.+-]+\+json$/.test(type)))
}

/** The default `maxBodyBytes`: 4 MiB, the default `maxInputChars` of an agent. */
const defaultMaxBodyBytes = 4 * 1024 * 1024

/** The default `bodyTimeout`: 30 seconds for the whole body. */
const defaultBodyTimeout = Duration.seconds(30)

/** The longest `bodyTimeout`: a timer set for longer never fires, so it would be no limit. */
const maxBodyTimeout = Duration.days(24)

/** The handler's `bodyTimeout` as a duration above zero and at most {@link maxBodyTimeout}, or `undefined`. */
const bodyTimeoutOf = (input: unknown): Duration.Duration | undefined => {
  const duration = input === undefined ? Option.some(defaultBodyTimeout) : Duration.decodeUnknown(input)
  return Option.isSome(duration) && Duration.greaterThan(duration.value, Duration.zero) &&
      Duration.lessThanOrEqualTo(duration.value, maxBodyTimeout)
    ? duration.value
    : undefined
}

/** `millis` as a duration in words ("30s"); as a number of ms when it is no duration a handler could have. */
const formatMillis = (millis: number): string =>
  millis >= 0 && millis <= Duration.toMillis(maxBodyTimeout)
    ? Duration.format(Duration.millis(millis))
    : `${millis} ms`

/** The deepest nesting of arrays and objects a body may have (a deeper one is refused before it is parsed). */
const maxDepth = 256

/** Whether JSON `text` nests arrays and objects deeper than `max` (brackets in strings do not count). */
const nestsDeeperThan = (text: string, max: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // a backslash escapes the next character
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return false
}

/**
 * How much of a body sent without a length the handler reads on, and drops,
 * past `maxBytes` before it answers 413: a client still sending gets the
 * answer (a connection closed mid-body would give it none). Past this too,
 * the connection is closed.
 */
const maxDrainedBytes = 16 * 1024 * 1024

/**
 * The request's body as JSON, kept up to `maxBytes`: a declared length over
 * it is refused as `"TooLarge"` before anything is read, and so is an
 * actual one (what comes past the limit is dropped, not kept); a body still
 * coming after `timeout`, `"Timeout"`; a body that is not UTF-8 JSON, or
 * nests deeper than {@link maxDepth} levels, `"Invalid"`
 * ({@link ChatRequestError}).
 *
 * The body is read in a fiber of its own, which the deadline does not
 * interrupt: interrupting a server's body stream may destroy the request
 * and with it the connection (Node's `IncomingMessage.destroy()` before the
 * body is complete destroys the socket), and the client would get no answer.
 * Past the deadline that fiber reads on and drops what comes while the 408
 * is written; it ends with the handler's fiber, once the answer is out.
 */
const readBody = (request: HttpServerRequest.HttpServerRequest, maxBytes: number, timeout: Duration.Duration) =>
  Effect.gen(function*() {
    const declared = request.headers["content-length"]
    if (declared !== undefined && /^\d+$/.test(declared) && Number(declared) > maxBytes) {
      return yield* new ChatRequestError({ reason: "TooLarge", maxBytes })
    }
    let chunks: Array<Uint8Array> = []
    let size = 0
    let late = false
    const reading = yield* Stream.runForEach(request.stream, (chunk) => {
      size += chunk.byteLength
      // past the deadline: drained, not kept
      if (late) return Effect.void
      if (size <= maxBytes) chunks.push(chunk)
      // too large: read on without keeping it, so the client gets the 413, up to a point
      else if (size > maxBytes + maxDrainedBytes) return new ChatRequestError({ reason: "TooLarge", maxBytes })
      return Effect.void
    }).pipe(
      Effect.catchTag(
        "RequestError",
        () => new ChatRequestError({ reason: "Invalid", detail: "the body could not be read" })
      ),
      Effect.interruptible,
      Effect.fork
    )
    const read = yield* Fiber.join(reading).pipe(Effect.interruptible, Effect.timeoutOption(timeout))
    if (Option.isNone(read)) {
      late = true
      chunks = []
      return yield* new ChatRequestError({ reason: "Timeout", timeoutMillis: Duration.toMillis(timeout) })
    }
    if (size > maxBytes) {
      return yield* new ChatRequestError({ reason: "TooLarge", maxBytes })
    }
    const bytes = new Uint8Array(size)
    let at = 0
    for (const chunk of chunks) {
      bytes.set(chunk, at)
      at += chunk.byteLength
    }
    const text = yield* Effect.try({
      try: () => new TextDecoder("utf-8", { fatal: true }).decode(bytes),
      catch: () => new ChatRequestError({ reason: "Invalid", detail: "the body is not valid UTF-8" })
    })
    if (nestsDeeperThan(text, maxDepth)) {
      return yield* new ChatRequestError({ reason: "Invalid", detail: `the body nests deeper than ${maxDepth} levels` })
    }
    return yield* Effect.try({
      try: (): unknown => JSON.parse(text),
      catch: () => new ChatRequestError({ reason: "Invalid", detail: "the body is not valid JSON" })
    })
  })

/** Whether `authorize` lets `request` use `threadId` (only `true` does); a missing `authorize` lets nobody. */
const checkAuthorized = (
  authorize: Authorize | undefined,
  request: HttpServerRequest.HttpServerRequest,
  threadId: string
): Effect.Effect<void, ChatRequestError | ServerSide> =>
  typeof authorize !== "function"
    ? Effect.fail(serverSide("The chat handler has no authorize option: toHttpApp needs one"))
    : Effect.suspend(() => authorize(request, threadId)).pipe(
      Effect.catchAllCause(() => Effect.fail(serverSide("The chat request could not be authorized"))),
      Effect.flatMap((allowed) =>
        allowed === true ? Effect.void : Effect.fail(new ChatRequestError({ reason: "Forbidden", threadId }))
      )
    )

/**
 * An `@effect/platform` HTTP handler for `useChat`: post a chat request, get
 * the run as a UI message stream. A user message runs the agent on the chat's
 * thread; an assistant message carrying approval responses resumes the
 * thread (an approval becomes HumanInTheLoop's approve, a denial its reject
 * with the reason), given an {@link Approvals} adapter.
 *
 * `authorize` is required: any client can post any chat id, so the handler
 * asks it whether this request may use the chat before it touches the thread
 * ({@link allowAll} for demos).
 *
 * Refused before anything runs: a body not sent as JSON (415: without
 * `Content-Type: application/json` a page of another site could post to the
 * chat with the user's cookies, unasked by CORS), a body over `maxBodyBytes`
 * (413, before it is read whole), a body still coming after `bodyTimeout`
 * (408, default 30 seconds for the whole body, then the connection is
 * closed), a body that is not a chat request or nests too deep (400,
 * see {@link readChatRequest}), a chat `authorize` does not allow (403), a
 * user message while the thread waits for approvals, answers to approvals
 * the thread does not wait for, or decisions the waiting middleware refuses
 * (409). An answer given before the body was read whole (415, 413, 408, a
 * bad option's 500) closes the connection (`Connection: close`): its unread
 * rest would keep it open. No later request on that connection reaches the
 * handler ({@link HttpConnection.guard}): one pipelined behind a refused
 * request is dropped, not run. A run that fails after it started
 * ends the stream with an `error` chunk. When the client goes away the
 * server interrupts the handler, and with it the run: the thread keeps its
 * last checkpoint and can run again.
 *
 * @example
 * ```ts
 * import { HttpRouter } from "@effect/platform"
 * import { Agent, UiMessageStream } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * // each chat is "<user>/<chat>"; the user is named by a header a trusted proxy sets
 * const authorize: UiMessageStream.Authorize = (request, threadId) =>
 *   Effect.succeed(request.headers["x-user"] !== undefined && threadId.startsWith(`${request.headers["x-user"]}/`))
 *
 * const router = Effect.map(Agent.make({ systemPrompt: "Be brief." }), (agent) =>
 *   HttpRouter.empty.pipe(HttpRouter.post("/api/chat", UiMessageStream.toHttpApp(agent, { authorize }))))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export function toHttpApp<S, E, O>(
  agent: Agent.Service<S, E, O, never>,
  options: Options
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>
/** An agent that waits takes an adapter whose decisions its waits accept. */
export function toHttpApp<S, E, O, W extends Wait.Any>(
  agent: Agent.Service<S, E, O, W>,
  options: Options<NoInfer<W>>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>
export function toHttpApp<S, E, O, W extends Wait.Any>(
  agent: Agent.Service<S, E, O, W>,
  options: Options<W>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest> {
  return HttpConnection.guard(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    let bodyRead = HttpConnection.hasNoBody(request)
    return Effect.gen(function*() {
      // a typo is refused, never a setting quietly unset
      const unknown = Predicate.isObject(options)
        ? unknownKey("UiMessageStream", options, chatOptionKeys, "toHttpApp")
        : undefined
      if (unknown !== undefined) return yield* Effect.fail(serverSide(unknown.message))
      const maxBytes = options?.maxBodyBytes ?? defaultMaxBodyBytes
      if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) {
        return yield* Effect.fail(serverSide("The chat handler's maxBodyBytes must be a whole number of at least 1"))
      }
      const bodyTimeout = bodyTimeoutOf(options?.bodyTimeout)
      if (bodyTimeout === undefined) {
        return yield* Effect.fail(
          serverSide("The chat handler's bodyTimeout must be a duration above zero, at most 24 days")
        )
      }
      if (!isJson(request.headers["content-type"])) return yield* Effect.fail<NotJson>({ _tag: "NotJson" })
      const body = yield* readBody(request, maxBytes, bodyTimeout)
      bodyRead = true
      const turn = yield* readChatRequest(body)
      yield* checkAuthorized(options?.authorize, request, turn.threadId)
      if (turn._tag === "Send") {
        const snapshot = yield* threadOf(agent, turn.threadId)
        const pending = Option.flatMap(snapshot, (thread) => thread.pending)
        if (Option.isSome(pending)) {
          return yield* new ChatRequestError({
            reason: "Conflict",
            threadId: turn.threadId,
            detail: `the thread waits for a decision (middleware "${pending.value.middleware}"); answer its ` +
              `approval requests before sending a new message`
          })
        }
        return fromEvents(agent.stream(turn.text, { threadId: turn.threadId }), options)
      }
      const { answered, value } = yield* answer(agent, turn, options?.approvals)
      return fromEvents(agent.resumeStream(turn.threadId, value), { ...options, messageId: turn.messageId, answered })
    }).pipe(
      Effect.map((chunks) => HttpServerResponse.stream(toSse(chunks), { contentType: "text/event-stream", headers })),
      // every refusal before the body is read whole (a bad option, 415, 413, 408, a body that cannot be read)
      Effect.catchAll((error) => Effect.succeed(HttpConnection.closeUnlessRead(refusal(error), bodyRead)))
    )
  }))
}

/** The values of the query parameter `name` of `url`; `undefined` when the query is not URL-encoded. */
const queryValues = (url: string, name: string): Array<string> | undefined => {
  const at = url.indexOf("?")
  const query = at === -1 ? "" : url.slice(at + 1).split("#", 1)[0]!
  const values: Array<string> = []
  for (const pair of query.split("&")) {
    if (pair === "") continue
    const equals = pair.indexOf("=")
    try {
      const decode = (text: string) => decodeURIComponent(text.replaceAll("+", " "))
      if (decode(equals === -1 ? pair : pair.slice(0, equals)) === name) {
        values.push(equals === -1 ? "" : decode(pair.slice(equals + 1)))
      }
    } catch {
      return undefined
    }
  }
  return values
}

/**
 * Options of {@link messagesHttpApp}.
 *
 * @since 0.1.0
 * @category models
 */
export interface MessagesOptions<W extends Wait.Any = Wait.Any> {
  /** Who may read which chat: the same check as the chat endpoint's (see {@link toHttpApp}). */
  readonly authorize: Authorize
  /** Reads a pending interrupt as approval requests (HumanInTheLoop's `uiApprovals`), as the chat endpoint does. */
  readonly approvals?: Approvals<W> | undefined
}

/**
 * An `@effect/platform` HTTP handler giving a chat back after a reload:
 * `GET ?id=<chat id>` answers the thread as JSON `UIMessage[]`
 * ({@link toUiMessages}), for `useChat({ id, messages })`, with a pending
 * approval as a tool part awaiting the human's answer. A chat with no
 * stored thread is `[]`.
 *
 * `authorize` is asked before the thread is read, as on the chat endpoint:
 * give both the same. Refused: no `id` or a bad one (400), a chat
 * `authorize` does not allow (403); a thread that cannot be loaded is 500.
 * It reads no body: a request that sends one gets its answer with
 * `Connection: close`, and no later request on that connection reaches
 * either handler ({@link HttpConnection.guard}).
 *
 * @example
 * ```ts
 * import { HttpRouter } from "@effect/platform"
 * import { Agent, UiMessageStream } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const authorize: UiMessageStream.Authorize = (request, threadId) =>
 *   Effect.succeed(request.headers["x-user"] !== undefined && threadId.startsWith(`${request.headers["x-user"]}/`))
 *
 * const router = Effect.map(Agent.make({}), (agent) =>
 *   HttpRouter.empty.pipe(
 *     HttpRouter.post("/api/chat", UiMessageStream.toHttpApp(agent, { authorize })),
 *     HttpRouter.get("/api/chat/messages", UiMessageStream.messagesHttpApp(agent, { authorize }))
 *   ))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export function messagesHttpApp<S, E, O>(
  agent: Agent.Service<S, E, O, never>,
  options: MessagesOptions
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>
/** An agent that waits takes an adapter of its waits. */
export function messagesHttpApp<S, E, O, W extends Wait.Any>(
  agent: Agent.Service<S, E, O, W>,
  options: MessagesOptions<NoInfer<W>>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>
export function messagesHttpApp<S, E, O, W extends Wait.Any>(
  agent: Agent.Service<S, E, O, W>,
  options: MessagesOptions<W>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest> {
  return HttpConnection.guard(
    Effect.gen(function*() {
      const unknown = Predicate.isObject(options)
        ? unknownKey("UiMessageStream", options, ["authorize", "approvals"], "messagesHttpApp")
        : undefined
      if (unknown !== undefined) return yield* Effect.fail(serverSide(unknown.message))
      const request = yield* HttpServerRequest.HttpServerRequest
      const ids = queryValues(request.url, "id")
      if (ids === undefined || ids.length !== 1 || ids[0] === "") {
        return yield* new ChatRequestError({ reason: "Invalid", detail: "give the chat as one query parameter \"id\"" })
      }
      const threadId = ids[0]!
      yield* checkAuthorized(options?.authorize, request, threadId)
      const snapshot = yield* threadOf(agent, threadId)
      const messages = Option.match(snapshot, {
        onNone: () => [],
        onSome: (thread) =>
          toUiMessages<W>((thread.state as { readonly messages: ReadonlyArray<Prompt.Message> }).messages, {
            pending: thread.pending,
            approvals: options?.approvals
          })
      })
      return yield* HttpServerResponse.json(messages).pipe(
        Effect.orElse(() => Effect.fail(serverSide("The chat's messages could not be encoded as JSON")))
      )
    }).pipe(
      Effect.catchAll((error) => Effect.succeed(refusal(error))),
      // a body sent with the request is never read
      Effect.zipWith(
        HttpServerRequest.HttpServerRequest,
        (response, request) => HttpConnection.closeUnlessRead(response, HttpConnection.hasNoBody(request))
      )
    )
  )
}
