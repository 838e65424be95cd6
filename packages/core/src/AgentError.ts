/**
 * The typed errors an agent run can fail with.
 *
 * Configuration mistakes fail when the agent is built; problems during a run
 * (a runaway loop, a jump a middleware did not declare, a tool that died, a
 * checkpoint that cannot be read) fail the run. A tool's own typed failure or
 * invalid arguments from the model never fail the run: they become failed tool
 * results the model can read and repair.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as ToolName from "./ToolName.js"

/**
 * The agent's configuration is invalid: a duplicate middleware name, two
 * middleware declaring the same state key, an option out of range. (Two tools
 * whose names read the same are a {@link ToolNameClash}.)
 *
 * @since 0.1.0
 * @category errors
 */
export class AgentConfigError extends Schema.TaggedError<AgentConfigError>(
  "@stepwise-agent/core/AgentError/AgentConfigError"
)("AgentConfigError", {
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.reason
  }
}

/**
 * An option given to a constructor is invalid: an unknown key, a value of the
 * wrong type, or one out of range. `module` names the constructor's module
 * (for example `"HumanInTheLoop"`), `option` the path of the option (for
 * example `"interruptOn.send_email.allowedDecisions"`). One error for every
 * built-in, as @effect/platform's `BadArgument` is for its modules.
 *
 * @example
 * ```ts
 * import { AgentError } from "@stepwise-agent/core"
 *
 * const error = new AgentError.InvalidOptions({ module: "ModelCallLimit", option: "runLimit", reason: "must be at least 0" })
 * error.message // 'Invalid ModelCallLimit option "runLimit": must be at least 0'
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidOptions extends Schema.TaggedError<InvalidOptions>(
  "@stepwise-agent/core/AgentError/InvalidOptions"
)("InvalidOptions", {
  module: Schema.String,
  option: Schema.String,
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Invalid ${this.module} option "${this.option}": ${this.reason}`
  }
}

/**
 * The {@link InvalidOptions} of an options object `module` was given, if it
 * is wrong: not an object (`undefined` stands for `{}`), or holding a key
 * that is not one of `known` (a typo, another library's option), named
 * under `path` when given (`"transport"`, `"send"`). For a constructor of
 * one's own, so that its options are refused as the built-ins' are.
 *
 * @example
 * ```ts
 * import { AgentError } from "@stepwise-agent/core"
 *
 * const error = AgentError.unknownOption("Cache", { tll: 60 }, ["ttl", "size"])
 * error?.message // 'Invalid Cache option "tll": is unknown; expected "ttl" | "size"'
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const unknownOption = (
  module: string,
  options: unknown,
  known: ReadonlyArray<string>,
  path?: string
): InvalidOptions | undefined => {
  if (options === undefined) return undefined
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    return new InvalidOptions({
      module,
      option: path ?? "options",
      reason: `must be an object, got ${kindOf(options)}`
    })
  }
  const key = Object.keys(options).find((name) => !known.includes(name))
  return key === undefined ? undefined : new InvalidOptions({
    module,
    // (a key is the caller's text: cut, so an error never carries a whole document)
    option: path === undefined ? key.slice(0, 100) : `${path}.${key.slice(0, 100)}`,
    reason: `is unknown; expected ${known.map((name) => JSON.stringify(name)).join(" | ")}`
  })
}

/** What a value that is not an object is, for a message: never the value itself (it may be a credential). */
const kindOf = (value: unknown): string =>
  value === null
    ? "null"
    : Array.isArray(value)
    ? "an array"
    : typeof value === "undefined"
    ? "undefined"
    : `a ${typeof value}`

/**
 * A middleware refers to tools the agent does not have (by an option such as
 * `RateLimit`'s `tools` or `LlmToolSelector`'s `alwaysInclude`): `Agent.make`
 * fails with it, naming the middleware, the unknown names and the tools the
 * agent has (its toolkit's and its middleware's).
 *
 * @example
 * ```ts
 * import { AgentError } from "@stepwise-agent/core"
 *
 * const error = new AgentError.UnknownTools({ middleware: "rateLimit", names: ["serach"], available: ["search"] })
 * error.message // 'Middleware "rateLimit" names tools the agent does not have: serach. Available tools: search'
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class UnknownTools extends Schema.TaggedError<UnknownTools>(
  "@stepwise-agent/core/AgentError/UnknownTools"
)("UnknownTools", {
  middleware: Schema.String,
  names: Schema.Array(Schema.String),
  available: Schema.Array(Schema.String)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Middleware "${this.middleware}" names tools the agent does not have: ${this.names.join(", ")}. ` +
      `Available tools: ${this.available.length === 0 ? "none" : this.available.join(", ")}`
  }
}

/**
 * Two tools of the agent have one name, or names that read the same
 * (`ToolName.keys`: `"read_file"` and `"Read_File"`, `"ｒｅａｄ_ｆｉｌｅ"`,
 * `"read\u200b_file"`, `"r\u0435ad_file"` with a Cyrillic `е`, `"read_fiIe"`): `Agent.make` fails with it, before any run. The
 * agent's tools are all checked together: the toolkit's, each middleware's
 * (an MCP server's among them) and the structured output tool. `tool` is the
 * name found second and `source` where it came from; `twin` and
 * `twinSource` are the name found first and where it came from. A source is
 * `"the toolkit"`, `middleware "<name>"` or `"the agent's structured output
 * (outputToolName)"`. The message quotes both names with `ToolName.quote`,
 * so that they look different.
 *
 * @example
 * ```ts
 * import { AgentError } from "@stepwise-agent/core"
 *
 * const error = new AgentError.ToolNameClash({
 *   tool: "Read_File",
 *   source: `middleware "files"`,
 *   twin: "read_file",
 *   twinSource: "the toolkit"
 * })
 * error.message
 * // 'Tool "Read_File" of middleware "files" reads the same as tool "read_file" of the toolkit: ...'
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolNameClash extends Schema.TaggedError<ToolNameClash>(
  "@stepwise-agent/core/AgentError/ToolNameClash"
)("ToolNameClash", {
  tool: Schema.String,
  source: Schema.String,
  twin: Schema.String,
  twinSource: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.tool === this.twin
      ? `Tool ${ToolName.quote(this.tool)} of ${this.source} has the same name as a tool of ${this.twinSource}`
      : `Tool ${ToolName.quote(this.tool)} of ${this.source} reads the same as tool ${
        ToolName.quote(this.twin)
      } of ${this.twinSource}: the names differ only in case, Unicode form, width, look-alike letters, ` +
        "invisible characters or spaces at either end"
  }
}

/**
 * The run reached `maxSteps` model calls without finishing.
 *
 * @since 0.1.0
 * @category errors
 */
export class MaxStepsExceeded extends Schema.TaggedError<MaxStepsExceeded>(
  "@stepwise-agent/core/AgentError/MaxStepsExceeded"
)("MaxStepsExceeded", {
  threadId: Schema.String,
  maxSteps: Schema.JsonNumber
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Thread "${this.threadId}" made ${this.maxSteps} model calls without finishing (maxSteps = ${this.maxSteps})`
  }
}

/**
 * A middleware hook asked to jump to a node it did not declare in `canJumpTo`.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidJump extends Schema.TaggedError<InvalidJump>(
  "@stepwise-agent/core/AgentError/InvalidJump"
)("InvalidJump", {
  middleware: Schema.String,
  hook: Schema.String,
  jumpTo: Schema.String,
  allowed: Schema.Array(Schema.String)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    const allowed = this.allowed.length === 0 ? "none" : this.allowed.join(", ")
    return `Middleware "${this.middleware}" jumped to "${this.jumpTo}" from ${this.hook}, but declares canJumpTo: ${allowed}`
  }
}

/**
 * A tool handler died (a defect, not a typed failure), or returned a value
 * that does not match its success schema.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolDefect extends Schema.TaggedError<ToolDefect>(
  "@stepwise-agent/core/AgentError/ToolDefect"
)("ToolDefect", {
  toolName: Schema.String,
  callId: Schema.String,
  reason: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Tool "${this.toolName}" (call ${this.callId}) crashed: ${this.reason}`
  }
}

/**
 * A stored checkpoint could not be written, read or decoded.
 *
 * `conflict` is set when a conditional save (`Checkpointer.SaveOptions`)
 * found another thread than the one the run loaded, and wrote nothing:
 * - `"ThreadDeleted"`: the thread was deleted while the run ran (no thread is
 *   stored under its id);
 * - `"Superseded"`: another incarnation of the thread is stored (deleted and
 *   made again, or made by another run at once).
 *
 * `reason` then says what was not saved.
 *
 * @since 0.1.0
 * @category errors
 */
export class CheckpointError extends Schema.TaggedError<CheckpointError>(
  "@stepwise-agent/core/AgentError/CheckpointError"
)("CheckpointError", {
  threadId: Schema.String,
  /** `"list"`: listing the stored threads (`Checkpointer.Service.list`; `threadId` is then `""`). */
  operation: Schema.Literal("load", "save", "list"),
  reason: Schema.String,
  /** Set when a conditional save wrote nothing because the stored thread is not the one loaded (see above). */
  conflict: Schema.optional(Schema.Literal("ThreadDeleted", "Superseded")),
  cause: Schema.optional(Schema.Defect)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    if (this.operation === "list") return `Could not list the stored threads: ${this.reason}`
    return `Could not ${this.operation} the checkpoint of thread "${this.threadId}": ${this.reason}`
  }
}

/**
 * A thread was used in a way its current status does not allow: `run` on a
 * thread that waits for a resume, or `resume` on one that waits for nothing.
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadStateError extends Schema.TaggedError<ThreadStateError>(
  "@stepwise-agent/core/AgentError/ThreadStateError"
)("ThreadStateError", {
  threadId: Schema.String,
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Thread "${this.threadId}": ${this.reason}`
  }
}

/**
 * The value given to `resume` is not a decision of the wait the thread
 * stops at: it does not fit the `wait.decision` schema of the middleware
 * that waits (`reason` names what is wrong), or that middleware's `check`
 * refused it. Nothing ran; the thread still waits, unchanged.
 *
 * @example
 * ```ts
 * import { AgentError } from "@stepwise-agent/core"
 *
 * const error = new AgentError.InvalidResume({
 *   threadId: "t1",
 *   middleware: "confirm",
 *   reason: "Expected boolean, actual \"yes\""
 * })
 * error.message // 'Thread "t1": the decision for middleware "confirm" is invalid: Expected boolean, actual "yes"'
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidResume extends Schema.TaggedError<InvalidResume>(
  "@stepwise-agent/core/AgentError/InvalidResume"
)("InvalidResume", {
  threadId: Schema.String,
  middleware: Schema.String,
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Thread "${this.threadId}": the decision for middleware "${this.middleware}" is invalid: ${this.reason}`
  }
}

/**
 * A thread waits for a decision of a durable run (its wait was made by a
 * durable journal, e.g. `@stepwise-agent/workflow`): answering it or giving it
 * up in process would skip the durable path (its authorization and journal)
 * and leave the durable run waiting for good. Nothing changed; answer it
 * through the durable run (`AgentWorkflow.resume`, `cancel`).
 *
 * @since 0.1.0
 * @category errors
 */
export class DurableThreadError extends Schema.TaggedError<DurableThreadError>(
  "@stepwise-agent/core/AgentError/DurableThreadError"
)("DurableThreadError", {
  threadId: Schema.String,
  operation: Schema.Literal("resume", "discardPending")
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Thread "${this.threadId}" waits for a decision of a durable run: ${this.operation} it through that run ` +
      `(AgentWorkflow.resume or cancel), not in process`
  }
}

/**
 * The model asked for structured output that does not decode, or the run
 * ended without producing the structured output it was asked for.
 *
 * @since 0.1.0
 * @category errors
 */
export class StructuredOutputError extends Schema.TaggedError<StructuredOutputError>(
  "@stepwise-agent/core/AgentError/StructuredOutputError"
)("StructuredOutputError", {
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.reason
  }
}

/**
 * The input of a run is not a valid prompt.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidInput extends Schema.TaggedError<InvalidInput>(
  "@stepwise-agent/core/AgentError/InvalidInput"
)("InvalidInput", {
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Invalid agent input: ${this.reason}`
  }
}

/**
 * The model's reply cannot be used as an answer, so the run fails instead of
 * completing with it (generate and stream agree; `ModelRetry` retries it by
 * default):
 *
 * - `"Truncated"`: the reply ended before its finish event (a stream the
 *   provider closed early);
 * - `"NotAStream"`: a streamed call received nothing at all (the response
 *   was not an event stream, e.g. a JSON body answering a streaming request);
 * - `"Empty"`: the reply finished with no answer in it: no text (blank text
 *   counts as none), no file and no tool call for the agent to run — e.g. only
 *   reasoning, only a provider-executed tool call, or nothing after running
 *   out of output tokens (`finishReason` says which);
 * - `"TooLarge"`: a streamed reply went past the agent's `maxReplyChars` and
 *   was cut off there;
 * - `"TimedOut"`: the model call did not end within the agent's
 *   `modelTimeout`.
 *
 * `text` is the text the reply carried (for a truncated stream, what was
 * streamed before it ended), so nothing streamed is silently lost.
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelReplyError extends Schema.TaggedError<ModelReplyError>(
  "@stepwise-agent/core/AgentError/ModelReplyError"
)("ModelReplyError", {
  reason: Schema.Literal("Truncated", "NotAStream", "Empty", "TooLarge", "TimedOut"),
  /** The model call (from 0) whose reply this was. */
  step: Schema.JsonNumber,
  streamed: Schema.Boolean,
  text: Schema.String,
  /** The reason of the reply's finish event, when it had one. */
  finishReason: Schema.optional(Schema.String),
  /** The kinds of parts received, in order of first appearance. */
  received: Schema.Array(Schema.String),
  /** An `error` event the provider sent in the stream, if any. */
  errorEvent: Schema.optional(Schema.Unknown)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    const call = `The model's ${this.streamed ? "streamed " : ""}reply (step ${this.step})`
    const received = this.received.length === 0 ? "nothing" : this.received.join(", ")
    const error = this.errorEvent === undefined ?
      "" :
      `; the provider sent an error event: ${JSON.stringify(this.errorEvent)?.slice(0, 500)}`
    switch (this.reason) {
      case "Truncated":
        return `${call} ended before its finish event, after ${this.text.length} characters of text ` +
          `(received: ${received})${error}`
      case "NotAStream":
        return `${call} ended without a single event: the response was not an event stream`
      case "Empty":
        return `${call} has no text and no tool calls (finish reason "${this.finishReason ?? "unknown"}"; ` +
          `received: ${received})${error}`
      case "TooLarge":
        return `${call} went past the agent's maxReplyChars and was cut off there, after ${this.text.length} ` +
          `characters of text (received: ${received})`
      case "TimedOut":
        return `${call} did not end within the agent's modelTimeout (received: ${received})`
    }
  }
}

/**
 * A `wrapModelCall` hook answered with an empty assistant message (no text,
 * file or tool call). An empty assistant message is never stored: several
 * providers reject it on the next call. A hook that short-circuits the model
 * must answer with a message that says something, or fail.
 *
 * @since 0.1.0
 * @category errors
 */
export class EmptyModelResponse extends Schema.TaggedError<EmptyModelResponse>(
  "@stepwise-agent/core/AgentError/EmptyModelResponse"
)("EmptyModelResponse", {
  middleware: Schema.String,
  step: Schema.JsonNumber
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Middleware "${this.middleware}" answered model call ${this.step} (wrapModelCall) with an empty ` +
      `assistant message; answer with text or tool calls, or fail`
  }
}

/**
 * A tool call ran longer than its timeout (`Agent.make({ toolTimeout,
 * toolTimeouts })`). The handler was interrupted, so its finalizers ran.
 * `wrapToolCall` hooks see it as a failure of `next` (a retry middleware may
 * run the call again); if none handles it, the model gets a failed tool
 * result saying the call timed out, and the run goes on.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolTimeout extends Schema.TaggedError<ToolTimeout>(
  "@stepwise-agent/core/AgentError/ToolTimeout"
)("ToolTimeout", {
  toolName: Schema.String,
  callId: Schema.String,
  timeoutMillis: Schema.JsonNumber
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Tool "${this.toolName}" timed out after ${Duration.format(Duration.millis(this.timeoutMillis))}`
  }
}

/**
 * The model's tool calls were invalid in more replies in a row than
 * `Agent.make({ maxToolCallRepairs })` allows (default 3). A call is invalid
 * when it names a tool the agent does not have (or did not offer), its
 * arguments are not JSON or fail the tool's schema, or its structured output
 * does not decode. Up to the limit, each such call is answered with a failed
 * tool result saying what was wrong, and the model tries again; past it the
 * run fails with this error after `replies` such replies, naming the first
 * invalid call of the last one (`toolName`, `callId`) and what was wrong with it (`reason`).
 * That reply is not stored; what the run stored before it stays.
 *
 * @example
 * ```ts
 * import { AgentError } from "@stepwise-agent/core"
 *
 * const error = new AgentError.InvalidToolCalls({
 *   threadId: "t1",
 *   toolName: "add",
 *   callId: "call_1",
 *   reason: "the arguments are not valid JSON (Unexpected end of JSON input); send a JSON object",
 *   replies: 4
 * })
 * error.message // 'Thread "t1": the model made invalid tool calls in 4 replies in a row; the last: tool "add" (call call_1): …'
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidToolCalls extends Schema.TaggedError<InvalidToolCalls>(
  "@stepwise-agent/core/AgentError/InvalidToolCalls"
)("InvalidToolCalls", {
  threadId: Schema.String,
  toolName: Schema.String,
  callId: Schema.String,
  reason: Schema.String,
  replies: Schema.JsonNumber
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Thread "${this.threadId}": the model made invalid tool calls in ${this.replies} replies in a row; ` +
      `the last: tool "${this.toolName}" (call ${this.callId}): ${this.reason}`
  }
}

/**
 * The agent is closed, and does nothing more: the scope it was built in has
 * closed (`Agent.layer`'s, or the `Scope` of the effect that ran
 * `Agent.make`), or a service it kept from that context has been released —
 * typically a provider layer given with `Effect.provide` around `Agent.make`
 * alone, which is released as soon as `make` ends (its HTTP client then
 * refuses every request). `reason` says which. Provide such layers to the
 * program that uses the agent, or build it with `Agent.layer` and
 * `Layer.provide`, so they live as long as it does.
 *
 * @example
 * ```ts
 * import { AgentError } from "@stepwise-agent/core"
 *
 * const error = new AgentError.AgentClosed({ reason: "the scope it was built in has closed" })
 * error.message // "The agent is closed: the scope it was built in has closed"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class AgentClosed extends Schema.TaggedError<AgentClosed>(
  "@stepwise-agent/core/AgentError/AgentClosed"
)("AgentClosed", {
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The agent is closed: ${this.reason}`
  }
}

/**
 * A middleware hook returned a value of the wrong shape: a node hook something
 * other than `undefined` or a `HookResult`, `wrapModelCall` something other
 * than a `ModelResponse`, `wrapToolCall` something other than the call's tool
 * result. The run fails here, naming the middleware and hook, instead of with a
 * TypeError later or a corrupted history.
 *
 * @example
 * ```ts
 * import { AgentError } from "@stepwise-agent/core"
 *
 * const error = new AgentError.InvalidHookResult({
 *   middleware: "audit",
 *   hook: "wrapModelCall",
 *   reason: "returned the number 42, not a ModelResponse"
 * })
 * error.message // 'Middleware "audit" wrapModelCall: returned the number 42, not a ModelResponse'
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidHookResult extends Schema.TaggedError<InvalidHookResult>(
  "@stepwise-agent/core/AgentError/InvalidHookResult"
)("InvalidHookResult", {
  middleware: Schema.String,
  hook: Schema.String,
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Middleware "${this.middleware}" ${this.hook}: ${this.reason}`
  }
}

/**
 * Every error the agent itself (not its model, tools or middleware) can fail a
 * run with.
 *
 * @since 0.1.0
 * @category errors
 */
export type AgentError =
  | MaxStepsExceeded
  | InvalidJump
  | ToolDefect
  | CheckpointError
  | ThreadStateError
  | InvalidResume
  | DurableThreadError
  | StructuredOutputError
  | InvalidInput
  | ModelReplyError
  | EmptyModelResponse
  | InvalidHookResult
  | InvalidToolCalls
  | AgentClosed

/**
 * The schema of {@link AgentError}.
 *
 * @since 0.1.0
 * @category errors
 */
export const AgentError: Schema.Union<[
  typeof MaxStepsExceeded,
  typeof InvalidJump,
  typeof ToolDefect,
  typeof CheckpointError,
  typeof ThreadStateError,
  typeof InvalidResume,
  typeof DurableThreadError,
  typeof StructuredOutputError,
  typeof InvalidInput,
  typeof ModelReplyError,
  typeof EmptyModelResponse,
  typeof InvalidHookResult,
  typeof InvalidToolCalls,
  typeof AgentClosed
]> = Schema.Union(
  MaxStepsExceeded,
  InvalidJump,
  ToolDefect,
  CheckpointError,
  ThreadStateError,
  InvalidResume,
  DurableThreadError,
  StructuredOutputError,
  InvalidInput,
  ModelReplyError,
  EmptyModelResponse,
  InvalidHookResult,
  InvalidToolCalls,
  AgentClosed
)

// -----------------------------------------------------------------------------
// utils
// -----------------------------------------------------------------------------

/** How many of a value's problems a description lists, and how long each side of one may be. */
const describedProblems = 3
const describedLength = 100

/** `text` cut to `max` characters (never inside a surrogate pair), `…` marking the cut. */
const cut = (text: string, max: number): string => {
  if (text.length <= max) return text
  const last = text.charCodeAt(max - 1)
  return `${text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)}…`
}

/** `[0].text` for the path `[0, "text"]`. */
const pathText = (path: ReadonlyArray<PropertyKey>): string =>
  path.map((key) =>
    typeof key === "number" ? `[${key}]` : typeof key === "string" && /^[A-Za-z_$][\w$]*$/.test(key)
      ? `.${key}`
      : `[${cut(JSON.stringify(String(key)), describedLength)}]`
  ).join("").replace(/^\./, "")

/** One problem: "Expected <type>, actual <value>" with each side bounded (a long type named by its start). */
const problemText = (message: string): string => {
  const at = message.lastIndexOf(", actual ")
  return message.startsWith("Expected ") && at > 0
    ? `expected ${cut(message.slice(9, at), describedLength)}, got ${cut(message.slice(at + 9), describedLength)}`
    : cut(message, 2 * describedLength)
}

/**
 * What a schema refused, for a person reading an error: the first problems
 * found, each at its place in the value (`at [0].text: expected string, got
 * 3`), with long types and values cut, instead of the whole schema the
 * default formatter prints. The errors of Stepwise describe refused input
 * with it.
 *
 * @example
 * ```ts
 * import { AgentError } from "@stepwise-agent/core"
 * import { Either, Schema } from "effect"
 *
 * const decoded = Schema.decodeUnknownEither(Schema.Array(Schema.Struct({ text: Schema.String })))([{ text: 3 }])
 * if (Either.isLeft(decoded)) AgentError.describeParseError(decoded.left) // "at [0].text: expected string, got 3"
 * ```
 *
 * @since 0.1.0
 * @category utils
 */
export const describeParseError = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const shown = issues.slice(0, describedProblems).map((issue) => {
    const where = cut(pathText(issue.path), describedLength)
    return `${where === "" ? "" : `at ${where}: `}${problemText(issue.message)}`
  })
  const more = issues.length - shown.length
  return `${shown.join("; ")}${more > 0 ? `; and ${more} more` : ""}`
}
