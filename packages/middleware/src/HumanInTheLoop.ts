/**
 * Human in the loop: pause the agent before it runs a risky tool and let a
 * human approve, edit, reject or answer the call.
 *
 * `HumanInTheLoop.middleware` gates tools by name, and a tool's `when`
 * predicate can narrow that to some of its calls (only `rm -rf` commands, only
 * paths under `/etc`). When the model asks for a gated call, the
 * middleware's `afterModel` hook interrupts the run: it ends
 * as `AgentResult.Interrupted` with one action request per gated call (see
 * {@link ApprovalRequest}), no tool of that batch runs (ungated calls wait
 * too, so the batch resumes as a whole), and the loop checkpoints the thread.
 * `Agent.resume(threadId, decisions)` runs the hook again with the
 * {@link Decision}s: approve runs the call as asked, edit runs it with new
 * arguments, reject answers the model with a failed tool result carrying the
 * reason, respond answers with the human's text; the tool does not run for
 * the last two. Invalid decisions fail the resume with a typed error and
 * change nothing: the thread keeps waiting for a valid answer.
 *
 * Only calls that can run are asked about: a call whose arguments do not
 * decode with its tool's parameters (the wrong shape, or text that is not
 * JSON) waits for no one, and its `when` is not asked; the agent answers it
 * with an error the model can repair, and the repaired call is gated as usual.
 *
 * A decision is bound to the one wait it answers: it carries the `waitKey`
 * of the wait (unique per wait, never reused in the thread) and the
 * `fingerprint` of its call (tool name and arguments), both copied from the
 * action request. Decisions are built from the request's actions only
 * (`approve(action)`, `approveAll(request)`); a decision naming another wait
 * (an old one re-sent, a double submit, a replay of another thread's) fails
 * with a {@link DecisionError} of reason `"Stale"`, one naming none with reason `"Unbound"`.
 *
 * A decision holds for the call decided, in the reply it was made for: a
 * call of a gated tool is checked again where the `wrapToolCall` chain ends,
 * and one changed after it was cleared (by a `wrapToolCall` or a later
 * `afterModel`), or one no decision of its own reply cleared (an identical
 * later call whose `afterModel` a jump skipped), is judged again by its
 * `when`, and does not run unasked.
 *
 * When an {@link Approvals} service is in the context the agent was built
 * with, the middleware asks it in-process (a CLI prompt, an auto-approve
 * policy) instead of interrupting.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import type * as Tool from "@effect/ai/Tool"
import * as AgentError from "@stepwise-agent/core/AgentError"
import * as AgentState from "@stepwise-agent/core/AgentState"
import * as Middleware from "@stepwise-agent/core/Middleware"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as ToolEffect from "@stepwise-agent/core/ToolEffect"
import type * as UiMessageStream from "@stepwise-agent/core/UiMessageStream"
import type * as Wait from "@stepwise-agent/core/Wait"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as JSONSchema from "effect/JSONSchema"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Check from "./internal/options.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * The kinds of decision a human can make about a tool call.
 *
 * @since 0.1.0
 * @category models
 */
export const DecisionType = Schema.Literal("approve", "edit", "reject", "respond")

/**
 * @since 0.1.0
 * @category models
 */
export type DecisionType = typeof DecisionType.Type

/**
 * Every decision kind, in the order used when a policy is `true`.
 *
 * @since 0.1.0
 * @category models
 */
export const allDecisions: ReadonlyArray<DecisionType> = ["approve", "edit", "reject", "respond"]

/**
 * What binds a decision to the one wait it answers, both copied from the
 * action request: the `waitKey` of the wait (unique per wait, never reused in
 * the thread) and the `fingerprint` of the call (its tool name and arguments).
 */
const bindingFields = {
  /** The `waitKey` of the action request it answers. */
  waitKey: Schema.String,
  /** The `fingerprint` of the action request it answers. */
  fingerprint: Schema.String
}

/**
 * Run the call as the model asked.
 *
 * @since 0.1.0
 * @category models
 */
export const Approve = Schema.Struct({
  type: Schema.Literal("approve"),
  callId: Schema.String,
  ...bindingFields
})

/**
 * Run the call with other arguments (encoded, as the model would send them),
 * optionally on another tool. The arguments are checked against the target
 * tool's parameter schema and the target tool's policy.
 *
 * @since 0.1.0
 * @category models
 */
export const Edit = Schema.Struct({
  type: Schema.Literal("edit"),
  callId: Schema.String,
  args: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  toolName: Schema.optional(Schema.String),
  ...bindingFields
})

/**
 * Do not run the call; the model gets a failed tool result carrying the
 * reason.
 *
 * @since 0.1.0
 * @category models
 */
export const Reject = Schema.Struct({
  type: Schema.Literal("reject"),
  callId: Schema.String,
  message: Schema.optional(Schema.String),
  ...bindingFields
})

/**
 * Do not run the call; the model gets the human's text as the tool result.
 *
 * @since 0.1.0
 * @category models
 */
export const Respond = Schema.Struct({
  type: Schema.Literal("respond"),
  callId: Schema.String,
  message: Schema.String,
  ...bindingFields
})

/**
 * A decision about one gated tool call: its call id, and the `waitKey` and
 * `fingerprint` of the action request it answers. Build it from the action
 * request ({@link approve}, {@link edit}, {@link reject}, {@link respond},
 * {@link approveAll}).
 *
 * @since 0.1.0
 * @category models
 */
export const Decision = Schema.Union(Approve, Edit, Reject, Respond).annotations({
  title: "HumanInTheLoop.Decision"
})

/**
 * @since 0.1.0
 * @category models
 */
export type Decision = typeof Decision.Type

/**
 * The value `Agent.resume` takes: one decision per action request.
 *
 * @since 0.1.0
 * @category models
 */
export const Decisions = Schema.Array(Decision).annotations({
  title: "HumanInTheLoop.Decisions (an array: one decision per action request)"
})

/**
 * One gated tool call waiting for a decision. JSON-encodable: it is the
 * interrupt value stored in the checkpoint and shown to the human.
 *
 * @since 0.1.0
 * @category models
 */
export const ActionRequest = Schema.Struct({
  callId: Schema.String,
  toolName: Schema.String,
  /** The arguments the model sent (encoded). */
  args: Schema.Unknown,
  description: Schema.String,
  allowedDecisions: Schema.Array(DecisionType),
  /** The JSON Schema edited arguments must match, when the policy has an `argsSchema`. */
  argsSchema: Schema.optional(Schema.Unknown),
  /**
   * The key of the wait, unique per wait of the thread (a later identical
   * call, or a later call with the same id, waits under another key): a
   * decision must name it.
   */
  waitKey: Schema.String,
  /** The tool name and arguments, hashed (see {@link fingerprintOf}): a decision must name it. */
  fingerprint: Schema.String
})

/**
 * @since 0.1.0
 * @category models
 */
export type ActionRequest = typeof ActionRequest.Type

/**
 * What the middleware waits for: the interrupt value of an
 * `AgentResult.Interrupted` run, and what an {@link Approvals} service is
 * asked. Decode `result.interrupt.value` with it.
 *
 * @since 0.1.0
 * @category models
 */
export const ApprovalRequest = Schema.Struct({
  actionRequests: Schema.Array(ActionRequest)
})

/**
 * @since 0.1.0
 * @category models
 */
export type ApprovalRequest = typeof ApprovalRequest.Type

/** The approval request of a wait stored or posted untyped (a durable run's, a chat UI's); `None` for another's. */
const requestOf = (wait: { readonly value: unknown }): Option.Option<ApprovalRequest> =>
  Schema.decodeUnknownOption(ApprovalRequest)(wait.value)

/**
 * What a description function or a `when` predicate sees besides the call.
 *
 * @since 0.1.0
 * @category models
 */
export interface DescriptionContext {
  readonly threadId: string
  /** The stored conversation, ending with the assistant message that made the call. */
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly step: number
}

/**
 * The policy of one gated tool.
 *
 * @since 0.1.0
 * @category models
 */
export interface InterruptOnConfig {
  /** The decisions a human may make about a call of this tool; at least one. */
  readonly allowedDecisions: ReadonlyArray<DecisionType>
  /** What the human is shown; by default the prefix, the tool name and its arguments. */
  readonly description?: string | ((call: Prompt.ToolCallPart, context: DescriptionContext) => string) | undefined
  /**
   * A stricter schema edited arguments must match (on top of the tool's own
   * parameter schema); its JSON Schema is sent in the action request.
   */
  readonly argsSchema?: Schema.Schema<any, any> | undefined
  /**
   * Whether a given call needs a decision (default: every call does). A call
   * for which it is `false` runs without one. It must decide from the call
   * and the context alone: a resumed run does not ask it again, it takes the
   * calls the stored request asked about. When it throws, fails or answers
   * something other than a boolean, the call waits for a decision (and the
   * middleware reports why).
   */
  readonly when?: When | undefined
}

/**
 * The `when` predicate of a tool's policy: `true` when a call needs a
 * decision. Give it an `Effect` to look something up (its failure makes the
 * call wait for a decision).
 *
 * @since 0.1.0
 * @category models
 */
export type When = (
  call: Prompt.ToolCallPart,
  context: DescriptionContext
) => boolean | Effect.Effect<boolean, unknown>

/**
 * A tool's entry in `interruptOn`: `true` gates it with every decision kind,
 * `false` (or leaving it out) does not gate it.
 *
 * @since 0.1.0
 * @category models
 */
export type InterruptOn = boolean | InterruptOnConfig

/**
 * Options of {@link middleware}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<Tools extends Record<string, Tool.Any>> {
  /**
   * Every tool the agent has (a `Toolkit`, or `Toolkit.merge` of the agent's
   * toolkit and the toolkits of tool-adding middleware such as
   * `TodoList.toolkit`). `interruptOn` is checked against it when the
   * middleware is built, and edited arguments against its parameter schemas;
   * `Agent.make` also checks that the agent has each tool `interruptOn`
   * names (else `AgentError.UnknownTools`).
   */
  readonly toolkit: { readonly tools: Tools }
  readonly interruptOn: { readonly [Name in keyof NoInfer<Tools>]?: InterruptOn | undefined }
  /** The first line of default descriptions (default `"Tool execution requires approval"`). */
  readonly descriptionPrefix?: string | undefined
  /** The middleware's name (default `"humanInTheLoop"`). */
  readonly name?: string | undefined
}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * Why a resume's decisions were refused ({@link DecisionError}):
 *
 * - `"Malformed"`: the resume value is not a list of decisions, or decides
 *   one call twice (`detail` says which);
 * - `"UnknownCall"`: a decision names a call that does not wait for one
 *   (`callId`; `waiting`: the calls that do);
 * - `"Missing"`: some waiting calls got no decision (`callIds`);
 * - `"NotAllowed"`: a decision of a kind the tool's policy does not allow (for
 *   an edit to another tool: the policy of the tool it targets; `decision`,
 *   `allowed`);
 * - `"InvalidEdit"`: an edit targets a tool the agent does not have, or its
 *   arguments do not match the target tool's parameter schema or the
 *   policy's `argsSchema` (`toolName`: the target; `detail`: what is wrong);
 * - `"Unbound"`: a decision names no `waitKey` or no `fingerprint` (built
 *   from a bare call id, or JSON posting only `{ type, callId }`), so nothing
 *   ties it to the one wait it answers (`field`). Build decisions from the
 *   action request: `approve(action)`, `approveAll(request)`;
 * - `"Stale"`: a decision answers another wait: its `waitKey` or
 *   `fingerprint` (`field`) is not the one of the call waiting under its call
 *   id (an old decision re-sent after the thread moved on; `expected`,
 *   `given`).
 *
 * @since 0.1.0
 * @category errors
 */
export const DecisionErrorReason = Schema.Literal(
  "Malformed",
  "UnknownCall",
  "Missing",
  "NotAllowed",
  "InvalidEdit",
  "Unbound",
  "Stale"
)

/**
 * @since 0.1.0
 * @category errors
 */
export type DecisionErrorReason = typeof DecisionErrorReason.Type

/**
 * A resume with bad decisions: `reason` says what is wrong
 * ({@link DecisionErrorReason}), the other fields where. It leaves the
 * thread waiting for a decision, unchanged: a corrected decision may follow.
 *
 * @example
 * ```ts
 * import { HumanInTheLoop } from "@stepwise-agent/middleware"
 *
 * const error = new HumanInTheLoop.DecisionError({ reason: "Missing", threadId: "t1", callIds: ["call_2"] })
 * error.message // 'Thread "t1": no decision for call(s) call_2; decide every waiting call'
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class DecisionError extends Schema.TaggedError<DecisionError>(
  "@stepwise-agent/middleware/HumanInTheLoop/DecisionError"
)("DecisionError", {
  reason: DecisionErrorReason,
  threadId: Schema.String,
  /** The call the refused decision names (every reason but `"Malformed"` and `"Missing"`). */
  callId: Schema.optional(Schema.String),
  /** `"Missing"`: the waiting calls without a decision. */
  callIds: Schema.optional(Schema.Array(Schema.String)),
  /** `"UnknownCall"`: the calls that wait for a decision. */
  waiting: Schema.optional(Schema.Array(Schema.String)),
  /** `"NotAllowed"`, `"InvalidEdit"`: the tool whose policy refused it, or the edit's target. */
  toolName: Schema.optional(Schema.String),
  /** `"NotAllowed"`: the decision's kind, and the kinds the policy allows. */
  decision: Schema.optional(DecisionType),
  allowed: Schema.optional(Schema.Array(DecisionType)),
  /** `"Unbound"`: what the decision lacks; `"Stale"`: what does not match. */
  field: Schema.optional(Schema.Literal("waitKey", "fingerprint")),
  /** `"Stale"`: the waiting call's `field`, and the decision's. */
  expected: Schema.optional(Schema.String),
  given: Schema.optional(Schema.String),
  /** `"Malformed"`, `"InvalidEdit"`: what is wrong, in words. */
  detail: Schema.optional(Schema.String)
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    const at = `Thread "${this.threadId}"`
    const call = `call "${this.callId ?? ""}"`
    switch (this.reason) {
      case "Malformed":
        return `Invalid decisions for thread "${this.threadId}": ${this.detail ?? ""}`
      case "UnknownCall": {
        const waiting = this.waiting === undefined || this.waiting.length === 0 ? "none" : this.waiting.join(", ")
        return `${at}: no ${call} waits for a decision (waiting: ${waiting})`
      }
      case "Missing":
        return `${at}: no decision for call(s) ${(this.callIds ?? []).join(", ")}; decide every waiting call`
      case "NotAllowed":
        return `${at}: "${this.decision ?? ""}" is not allowed for ${call} of tool "${this.toolName ?? ""}" ` +
          `(allowed: ${(this.allowed ?? []).join(", ")})`
      case "InvalidEdit":
        return `${at}: invalid edit of ${call} (tool "${this.toolName ?? ""}"): ${this.detail ?? ""}`
      case "Unbound":
        return `${at}: the decision for ${call} names no ${this.field ?? "waitKey"}; build it from ` +
          `the action request (HumanInTheLoop.approve(action), approveAll(request)), or copy the request's ` +
          `"waitKey" and "fingerprint" into it`
      case "Stale":
        return `${at}: the decision for ${call} answers another wait (its ` +
          `${this.field ?? "waitKey"} is "${this.given ?? ""}", the waiting call's is "${
            this.expected ?? ""
          }"); decide the call that waits now`
    }
  }
}

/**
 * The model's reply calls tools with the same call id twice while one of
 * them is gated: a decision could not tell them apart, so the reply is
 * refused as malformed (the run fails; nothing of the reply runs).
 *
 * @since 0.1.0
 * @category errors
 */
export class DuplicateCallId extends Schema.TaggedError<DuplicateCallId>(
  "@stepwise-agent/middleware/HumanInTheLoop/DuplicateCallId"
)("DuplicateCallId", {
  threadId: Schema.String,
  callId: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Thread "${this.threadId}": the model's reply has two tool calls with the id "${this.callId}"; ` +
      `a reply whose calls need a decision must give each call its own id`
  }
}

// -----------------------------------------------------------------------------
// tags
// -----------------------------------------------------------------------------

/**
 * Decides approval requests in-process. When the agent is built with this
 * service in its context, the middleware asks it instead of interrupting the
 * run; its decisions are checked exactly like resumed ones.
 *
 * @since 0.1.0
 * @category tags
 */
export class Approvals extends Context.Tag("@stepwise-agent/middleware/HumanInTheLoop/Approvals")<
  Approvals,
  Approvals.Service
>() {}

/**
 * @since 0.1.0
 * @category tags
 */
export declare namespace Approvals {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    readonly decide: (
      request: ApprovalRequest,
      context: { readonly threadId: string }
    ) => Effect.Effect<ReadonlyArray<Decision>>
  }
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/** The binding of a decision: the call id, wait key and fingerprint of the action it answers. */
const bindingOf = (action: ActionRequest) => ({
  callId: action.callId,
  waitKey: action.waitKey,
  fingerprint: action.fingerprint
})

/**
 * Approves the call of an action request. The decision is bound to that
 * action's wait (its `waitKey` and `fingerprint`): it answers that wait only.
 *
 * @example
 * ```ts
 * import { HumanInTheLoop } from "@stepwise-agent/middleware"
 *
 * declare const request: HumanInTheLoop.ApprovalRequest // `result.interrupt.value`, decoded
 * const decisions = request.actionRequests.map(HumanInTheLoop.approve)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const approve = (action: ActionRequest): Decision => ({ type: "approve", ...bindingOf(action) })

/**
 * Runs the call of an action request with other arguments (encoded, as the
 * model would send them), or on another tool with `toolName`.
 *
 * @example
 * ```ts
 * import { HumanInTheLoop } from "@stepwise-agent/middleware"
 *
 * declare const action: HumanInTheLoop.ActionRequest
 * const decision = HumanInTheLoop.edit(action, { path: "/tmp/scratch.txt" })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const edit = (
  action: ActionRequest,
  args: Readonly<Record<string, unknown>>,
  toolName?: string | undefined
): Decision =>
  toolName === undefined
    ? { type: "edit", ...bindingOf(action), args }
    : { type: "edit", ...bindingOf(action), args, toolName }

/**
 * Rejects the call of an action request; the model reads `message` as the
 * reason.
 *
 * @example
 * ```ts
 * import { HumanInTheLoop } from "@stepwise-agent/middleware"
 *
 * declare const action: HumanInTheLoop.ActionRequest
 * const decision = HumanInTheLoop.reject(action, "Never delete the home directory")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const reject = (action: ActionRequest, message?: string | undefined): Decision =>
  message === undefined ? { type: "reject", ...bindingOf(action) } : { type: "reject", ...bindingOf(action), message }

/**
 * Answers the call of an action request with the human's text instead of
 * running it.
 *
 * @example
 * ```ts
 * import { HumanInTheLoop } from "@stepwise-agent/middleware"
 *
 * declare const action: HumanInTheLoop.ActionRequest
 * const decision = HumanInTheLoop.respond(action, "The file is already gone.")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const respond = (action: ActionRequest, message: string): Decision => ({
  type: "respond",
  ...bindingOf(action),
  message
})

/**
 * Approves every call of a request, each decision bound to its action. A
 * call whose `allowedDecisions` leave out `approve` makes `resume` refuse
 * the whole list (`DecisionError`, reason `"NotAllowed"`).
 *
 * @example
 * ```ts
 * import { HumanInTheLoop } from "@stepwise-agent/middleware"
 *
 * const decisions = HumanInTheLoop.approveAll({ actionRequests: [] })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const approveAll = (request: ApprovalRequest): ReadonlyArray<Decision> => request.actionRequests.map(approve)

/**
 * Rejects every call of a wait with `message`, bound to the calls waiting;
 * no decisions for a wait that is not an approval request. Made for a durable
 * run's decision timeout, which calls it with the wait.
 *
 * @example
 * ```ts
 * import { HumanInTheLoop } from "@stepwise-agent/middleware"
 * import { AgentWorkflow } from "@stepwise-agent/workflow"
 *
 * const Support = AgentWorkflow.make({
 *   name: "support",
 *   version: 1,
 *   decisionTimeout: { after: "2 days", decide: HumanInTheLoop.rejectAll("nobody approved in time") }
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const rejectAll = (message: string) =>
(
  // `unknown`: any wait of the agent (a timeout decides them all); its own is recognised by decoding the request
  wait: { readonly value: unknown }
): ReadonlyArray<Decision> =>
  Option.match(requestOf(wait), {
    onNone: () => [],
    onSome: (request) => request.actionRequests.map((action) => reject(action, message))
  })

/**
 * Answers the middleware's waits from a chat UI (`UiMessageStream.toHttpApp`):
 * each action request is shown as a tool part awaiting approval, with an
 * approval id naming the call, its arguments and the wait (so an answer to an
 * older wait is refused); an approval becomes {@link approve}, a denial
 * {@link reject} with the human's reason. It reads any middleware's
 * interrupt (another's is not an approval: `None`) and answers with this
 * middleware's decisions, so a chat handler takes it for an agent that has
 * this middleware, and refuses it, as a type error, for one that has not.
 *
 * @example
 * ```ts
 * import { Tool, Toolkit } from "@effect/ai"
 * import { Agent, UiMessageStream } from "@stepwise-agent/core"
 * import { HumanInTheLoop } from "@stepwise-agent/middleware"
 * import { Effect, Schema } from "effect"
 *
 * const DeleteFile = Tool.make("delete_file", { parameters: { path: Schema.String }, success: Schema.String })
 * const Tools = Toolkit.make(DeleteFile)
 *
 * const chat = Effect.gen(function*() {
 *   const hitl = HumanInTheLoop.middleware({
 *     toolkit: Tools,
 *     interruptOn: { delete_file: { allowedDecisions: ["approve", "reject"] } }
 *   })
 *   const agent = yield* Agent.make({ toolkit: Tools, middleware: [hitl] })
 *   return UiMessageStream.toHttpApp(agent, {
 *     approvals: HumanInTheLoop.uiApprovals,
 *     authorize: UiMessageStream.allowAll // demos only: check the user in a real app
 *   })
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const uiApprovals: UiMessageStream.Approvals<Wait.Any, DecisionsGiven> = {
  requests: (interrupt) =>
    Option.map(requestOf(interrupt), (request) =>
      request.actionRequests.map((action) => ({
        approvalId: `${action.callId}:${action.fingerprint}:${action.waitKey}`,
        toolCallId: action.callId,
        toolName: action.toolName,
        input: action.args,
        description: action.description
      }))),
  resumeValue: (interrupt, responses) =>
    Option.match(requestOf(interrupt), {
      onNone: () => [],
      onSome: (request) =>
        responses.map(({ approved, reason, request: { toolCallId } }) => {
          const action = request.actionRequests.find((action) => action.callId === toolCallId)
          // an answer naming no waiting call stays unbound: the resume refuses it
          if (action === undefined) return { type: approved ? "approve" : "reject", callId: toolCallId }
          return approved ? approve(action) : reject(action, reason)
        })
    })
}

// -----------------------------------------------------------------------------
// getters
// -----------------------------------------------------------------------------

/** cyrb53: a fast 53-bit string hash, as 14 hex digits. */
const hash53 = (text: string, seed: number): string => {
  let h1 = 0xdeadbeef ^ seed
  let h2 = 0x41c6ce57 ^ seed
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    h1 = Math.imul(h1 ^ code, 2654435761)
    h2 = Math.imul(h2 ^ code, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16).padStart(14, "0")
}

/**
 * The fingerprint of a call: its tool name and its arguments as canonical
 * JSON (keys sorted), hashed. Deterministic, so a request rebuilt on replay
 * or in another process gives the same one. It is the `fingerprint` of the
 * call's entry in the effect ledger (`ToolEffect.fingerprint`): an approval
 * names the ledger entry it allows (the call id and this fingerprint).
 *
 * @example
 * ```ts
 * import { HumanInTheLoop } from "@stepwise-agent/middleware"
 *
 * // key order does not matter
 * const same =
 *   HumanInTheLoop.fingerprintOf("delete_file", { path: "/a", force: true }) ===
 *     HumanInTheLoop.fingerprintOf("delete_file", { force: true, path: "/a" })
 * ```
 *
 * @since 0.1.0
 * @category getters
 */
export const fingerprintOf = (toolName: string, args: unknown): string => ToolEffect.fingerprint(toolName, args)

// -----------------------------------------------------------------------------
// layers
// -----------------------------------------------------------------------------

/**
 * An {@link Approvals} service deciding with a function (a terminal prompt,
 * a policy, a queue to a UI).
 *
 * @example
 * ```ts
 * import { HumanInTheLoop } from "@stepwise-agent/middleware"
 * import { Effect } from "effect"
 *
 * // Approve reads, reject everything else.
 * const ApprovalsLive = HumanInTheLoop.layerApprovals((request) =>
 *   Effect.succeed(request.actionRequests.map((action) =>
 *     action.toolName === "read_file"
 *       ? HumanInTheLoop.approve(action)
 *       : HumanInTheLoop.reject(action, "Only reads are allowed")
 *   ))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerApprovals = <R = never>(
  decide: (
    request: ApprovalRequest,
    context: { readonly threadId: string }
  ) => Effect.Effect<ReadonlyArray<Decision>, never, R>
): Layer.Layer<Approvals, never, R> =>
  Layer.effect(
    Approvals,
    Effect.map(Effect.context<R>(), (context) =>
      Approvals.of({
        decide: (request, options) => Effect.provide(decide(request, options), context)
      }))
  )

/**
 * An {@link Approvals} service approving every request.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerAutoApprove: Layer.Layer<Approvals> = layerApprovals((request) => Effect.succeed(approveAll(request)))

// -----------------------------------------------------------------------------
// the middleware
// -----------------------------------------------------------------------------

const PolicySchema = Schema.Union(
  Schema.Boolean,
  Schema.Struct({
    allowedDecisions: Schema.Array(Schema.String),
    description: Schema.optional(Schema.Union(Schema.String, Check.AnyFunction)),
    argsSchema: Schema.optional(Check.AnySchema),
    when: Schema.optional(Check.AnyFunction)
  })
)

const OptionsSchema = Schema.Struct({
  toolkit: Schema.declare(
    (u: unknown): u is { readonly tools: object } =>
      (typeof u === "object" || typeof u === "function") && u !== null && "tools" in u &&
      typeof u.tools === "object" && u.tools !== null,
    { identifier: "a Toolkit" }
  ),
  interruptOn: Schema.Record({ key: Schema.String, value: Schema.UndefinedOr(PolicySchema) }),
  descriptionPrefix: Schema.optional(Schema.String),
  name: Schema.optional(Check.NonEmpty)
})

interface Gate {
  readonly allowed: ReadonlyArray<DecisionType>
  readonly describe: (call: Prompt.ToolCallPart, context: DescriptionContext) => string
  readonly argsSchema: { readonly schema: Schema.Schema<any, any>; readonly json: unknown } | undefined
  readonly when: When | undefined
}

/**
 * Whether a call of a gated tool waits for a decision: its gate's `when`, or
 * `true`. A `when` that throws, fails, dies or answers no boolean asks, and
 * says so in a decision.
 */
const asks = (gate: Gate, call: Prompt.ToolCallPart, context: DescriptionContext): Effect.Effect<boolean> => {
  const when = gate.when
  if (when === undefined) return Effect.succeed(true)
  return Effect.suspend(() => {
    const answer = when(call, context)
    return Effect.isEffect(answer) ? answer : Effect.succeed(answer)
  }).pipe(
    Effect.flatMap((answer): Effect.Effect<boolean, unknown> =>
      typeof answer === "boolean" ? Effect.succeed(answer) : Effect.fail(`it answered ${stringify(answer)}`)
    ),
    Effect.catchAllCause((cause) => {
      if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
      const error = Cause.squash(cause)
      const reason = Secrets.messageOf(error)
      return Effect.as(
        Middleware.report(`the when of ${call.name} failed, so the call waits for a decision: ${reason}`, {
          callId: call.id
        }),
        true
      )
    })
  )
}

const stringify = (value: unknown): string => {
  try {
    return JSON.stringify(value, undefined, 2) ?? String(value)
  } catch {
    return String(value)
  }
}

/** A decision as it may arrive: its binding may be missing (refused as `"Unbound"`, not a parse error). */
const unbound = <Fields extends Schema.Struct.Fields>(decision: Schema.Struct<Fields>) =>
  Schema.Struct({
    ...decision.fields,
    waitKey: Schema.optional(Schema.String),
    fingerprint: Schema.optional(Schema.String)
  })

const ArrivingDecisions = Schema.Array(Schema.Union(unbound(Approve), unbound(Edit), unbound(Reject), unbound(Respond)))
  .annotations({ title: "HumanInTheLoop.Decisions (an array: one decision per action request)" })

/**
 * The decisions `Agent.resume` takes for this middleware's wait: one per
 * action request, each bound to it (a decision without its `waitKey` and
 * `fingerprint` is refused with a {@link DecisionError} of reason `"Unbound"`).
 *
 * @since 0.1.0
 * @category models
 */
export type DecisionsGiven = typeof ArrivingDecisions.Type

/**
 * The wait of the middleware, as the agent's type carries it: it asks with
 * an {@link ApprovalRequest} and is answered with decisions.
 *
 * @since 0.1.0
 * @category models
 */
export type Waits = Wait.Declared<string, ApprovalRequest, DecisionsGiven>

const decodeDecisions = Schema.decodeUnknown(ArrivingDecisions)

/** The tool call an action request asks about. */
const callOf = (action: ActionRequest): Prompt.ToolCallPart =>
  Prompt.makePart("tool-call", {
    id: action.callId,
    name: action.toolName,
    params: action.args,
    providerExecuted: false
  })

/**
 * The key of a wait: the gated call ids, the index of the reply that made
 * them, the number of the wait in the thread (a count kept in the
 * middleware's state, never reused: a later identical call, a later reply
 * reusing the ids, a thread cut short and grown back all wait under new
 * keys), the thread's incarnation (a thread deleted and made again with the
 * same id counts its waits from the start again, under another incarnation)
 * and a hash of the thread id (a decision made on one thread answers no wait
 * of another). A thread stored before incarnations waits without one.
 */
const waitKeyOf = (
  context: { readonly threadId: string; readonly incarnation?: string | undefined },
  index: number,
  gated: ReadonlyArray<Prompt.ToolCallPart>,
  wait: number
): string =>
  `approval/${gated.map((call) => call.id).join(",")}@${index}/${wait}/` +
  `${context.incarnation === undefined ? "" : `${context.incarnation}/`}${threadHash(context.threadId)}`

const threadHash = (threadId: string): string => hash53(threadId, 3).slice(0, 8)

/**
 * The key of a stored wait as the thread `threadId` makes it again when it
 * resumes: the same key for a wait the thread made, another for a wait made
 * on another thread (a copied checkpoint), which its decisions do not answer.
 */
const rebound = (threadId: string, waitKey: string): string =>
  waitKey.startsWith("approval/") ? waitKey.replace(/\/[^/]*$/, `/${threadHash(threadId)}`) : waitKey

/** The key of the middleware's state: how many waits the thread had. */
const waitCountKey = (name: string): string => name === "humanInTheLoop" ? "approvalWaits" : `approvalWaits:${name}`

/**
 * What to do with one gated call, once every decision checked out.
 */
type Plan =
  | { readonly _tag: "Run"; readonly call: Prompt.ToolCallPart; readonly decision: Decision }
  | { readonly _tag: "Replace"; readonly call: Prompt.ToolCallPart; readonly edited: Prompt.ToolCallPart }
  | { readonly _tag: "Answer"; readonly call: Prompt.ToolCallPart; readonly result: Prompt.ToolResultPart }

/**
 * Gates tool calls behind a human decision.
 *
 * It needs every tool of the agent (`toolkit`): a node hook cannot see the
 * agent's tools, and a thread resumed in a new process must check edited
 * arguments before any model call happens. With it, `interruptOn` is checked
 * when `Agent.make` builds the middleware — a name the toolkit does not have
 * (also a type error), a policy allowing no decision, or an `argsSchema` with
 * no JSON Schema fails it with `AgentError.InvalidOptions`, and a name the agent
 * has no tool for with `AgentError.UnknownTools`.
 *
 * The run interrupts with an {@link ApprovalRequest}; resume it with
 * {@link Decisions}. Without an {@link Approvals} service the run interrupts;
 * with one, the service decides in-process. A failed resume
 * ({@link DecisionError}) leaves the thread waiting, unchanged.
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { HumanInTheLoop } from "@stepwise-agent/middleware"
 * import { Tool, Toolkit } from "@effect/ai"
 * import { Effect, Schema } from "effect"
 *
 * const DeleteFile = Tool.make("delete_file", { parameters: { path: Schema.String }, success: Schema.String })
 * const ReadFile = Tool.make("read_file", { parameters: { path: Schema.String }, success: Schema.String })
 * const Tools = Toolkit.make(DeleteFile, ReadFile)
 *
 * const program = Effect.gen(function*() {
 *   const hitl = HumanInTheLoop.middleware({
 *     toolkit: Tools,
 *     interruptOn: { delete_file: { allowedDecisions: ["approve", "reject"] }, read_file: false }
 *   })
 *   const agent = yield* Agent.make({ toolkit: Tools, middleware: [hitl] })
 *   const result = yield* agent.run("Clean up /tmp", { threadId: "t1" })
 *   if (result._tag === "Interrupted") {
 *     // typed by the middleware's wait: the value is its ApprovalRequest
 *     return yield* agent.resume("t1", result.interrupt.value.actionRequests.map(HumanInTheLoop.approve))
 *   }
 *   return result
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = <Tools extends Record<string, Tool.Any>>(
  options: Options<Tools>
): Middleware.Middleware<
  {},
  DecisionError | DuplicateCallId,
  never,
  AgentError.InvalidOptions,
  Waits
> => Middleware.unwrap(setup(options), { name: Check.nameOf(options, "humanInTheLoop") })

/** Decodes the options and builds the middleware: the setup `Agent.make` runs. */
const setup: <Tools extends Record<string, Tool.Any>>(
  options: Options<Tools>
) => Effect.Effect<
  Middleware.Middleware<{}, DecisionError | DuplicateCallId, never, never, Waits>,
  AgentError.InvalidOptions
> = Effect.fn("HumanInTheLoop.middleware")(function*<Tools extends Record<string, Tool.Any>>(options: Options<Tools>) {
  // a missing or misspelled `allowedDecisions` is named as such, before its stray key
  for (const [toolName, policy] of Object.entries(Object(Object(options).interruptOn) as Record<string, unknown>)) {
    if (typeof policy === "object" && policy !== null && !Array.isArray(Object(policy).allowedDecisions)) {
      return yield* Check.invalid(
        "HumanInTheLoop",
        `interruptOn.${toolName}.allowedDecisions`,
        "is required: a list of \"approve\", \"edit\", \"reject\", \"respond\""
      )
    }
  }
  yield* Check.validate("HumanInTheLoop", OptionsSchema, options)
  const tools: Readonly<Record<string, Tool.Any>> = options.toolkit.tools
  const name = options.name ?? "humanInTheLoop"
  const prefix = options.descriptionPrefix ?? "Tool execution requires approval"
  const defaultDescribe = (call: Prompt.ToolCallPart) =>
    `${prefix}\n\nTool: ${call.name}\nArgs: ${stringify(call.params)}`
  const gates = new Map<string, Gate>()
  const decoders = new Map<string, (params: unknown) => boolean>()
  /**
   * Whether a call's arguments decode with its tool's parameters: one that
   * cannot run (arguments of the wrong shape, text that is not JSON, or
   * nested too deep) is answered by the agent with an error for the model to
   * repair, so no one is asked about it.
   */
  const callable = (call: Prompt.ToolCallPart): boolean => {
    if (Middleware.argumentsTooDeep(call.params)) return false
    let decodes = decoders.get(call.name)
    if (decodes === undefined) {
      const decode = Schema.decodeUnknownEither(tools[call.name]!.parametersSchema as Schema.Schema<unknown, unknown>)
      decodes = (params) => {
        try {
          return Either.isRight(decode(params))
        } catch {
          // a schema that cannot decode at once (an async one) is left to the tool: the call is asked about
          return true
        }
      }
      decoders.set(call.name, decodes)
    }
    return decodes(call.params)
  }
  for (const [toolName, policy] of Object.entries(options.interruptOn as Record<string, InterruptOn | undefined>)) {
    if (!Object.prototype.hasOwnProperty.call(tools, toolName)) {
      const known = Object.keys(tools)
      return yield* new AgentError.InvalidOptions({
        module: "HumanInTheLoop",
        option: `interruptOn.${toolName}`,
        reason: `the toolkit has no such tool (tools: ${known.length === 0 ? "none" : known.join(", ")})`
      })
    }
    if (policy === undefined || policy === false) continue
    if (policy === true) {
      gates.set(toolName, { allowed: allDecisions, describe: defaultDescribe, argsSchema: undefined, when: undefined })
      continue
    }
    const allowed = allDecisions.filter((kind) => policy.allowedDecisions.includes(kind))
    const unknown = policy.allowedDecisions.filter((kind) => !allDecisions.includes(kind))
    if (unknown.length > 0) {
      return yield* new AgentError.InvalidOptions({
        module: "HumanInTheLoop",
        option: `interruptOn.${toolName}.allowedDecisions`,
        reason: `unknown decision kind(s) ${unknown.join(", ")} (kinds: ${allDecisions.join(", ")})`
      })
    }
    if (allowed.length === 0) {
      return yield* new AgentError.InvalidOptions({
        module: "HumanInTheLoop",
        option: `interruptOn.${toolName}.allowedDecisions`,
        reason: "is empty, so a call could never be decided; use false to not gate the tool"
      })
    }
    let argsSchema: Gate["argsSchema"] = undefined
    if (policy.argsSchema !== undefined) {
      const schema = policy.argsSchema
      const json = yield* Effect.try({
        try: () => JSONSchema.make(schema) as unknown,
        catch: (error) =>
          new AgentError.InvalidOptions({
            module: "HumanInTheLoop",
            option: `interruptOn.${toolName}.argsSchema`,
            reason: `has no JSON Schema: ${error instanceof Error ? error.message : String(error)}`
          })
      })
      argsSchema = { schema, json }
    }
    const description = policy.description
    gates.set(toolName, {
      allowed,
      describe: description === undefined
        ? defaultDescribe
        : typeof description === "string"
        ? () => description
        : description,
      argsSchema,
      when: policy.when
    })
  }

  const actionRequest = (
    call: Prompt.ToolCallPart,
    context: DescriptionContext,
    waitKey: string
  ): ActionRequest => {
    const gate = gates.get(call.name)!
    return {
      callId: call.id,
      toolName: call.name,
      args: call.params,
      description: gate.describe(call, context),
      allowedDecisions: gate.allowed,
      ...(gate.argsSchema === undefined ? {} : { argsSchema: gate.argsSchema.json }),
      waitKey,
      fingerprint: fingerprintOf(call.name, call.params)
    }
  }

  const checkEdit = (
    threadId: string,
    call: Prompt.ToolCallPart,
    decision: typeof Edit.Type
  ): Effect.Effect<Prompt.ToolCallPart, DecisionError> =>
    Effect.gen(function*() {
      const target = decision.toolName ?? call.name
      const tool = Object.prototype.hasOwnProperty.call(tools, target) ? tools[target] : undefined
      if (tool === undefined) {
        return yield* new DecisionError({
          reason: "InvalidEdit",
          threadId,
          callId: call.id,
          toolName: target,
          detail: `the agent has no tool "${target}"`
        })
      }
      const gate = gates.get(target)
      if (target !== call.name && gate !== undefined && !gate.allowed.includes("edit")) {
        return yield* new DecisionError({
          reason: "NotAllowed",
          threadId,
          callId: call.id,
          toolName: target,
          decision: "edit",
          allowed: gate.allowed
        })
      }
      const invalid = (error: ParseResult.ParseError) =>
        new DecisionError({
          reason: "InvalidEdit",
          threadId,
          callId: call.id,
          toolName: target,
          detail: AgentError.describeParseError(error)
        })
      yield* Effect.mapError(
        Schema.decodeUnknown(tool.parametersSchema as Schema.Schema<unknown, unknown>)(decision.args),
        invalid
      )
      if (gate?.argsSchema !== undefined) {
        yield* Effect.mapError(Schema.decodeUnknown(gate.argsSchema.schema)(decision.args), invalid)
      }
      return Prompt.makePart("tool-call", {
        id: call.id,
        name: target,
        params: decision.args,
        providerExecuted: call.providerExecuted,
        options: call.options
      })
    })

  /**
   * Checks every decision first, so a bad one changes nothing. Each must name
   * `waitKey`, the key of the wait decided, and the fingerprint of its call.
   */
  const plan = (
    threadId: string,
    gated: ReadonlyArray<Prompt.ToolCallPart>,
    raw: unknown,
    waitKey: string
  ): Effect.Effect<Array<Plan>, DecisionError> =>
    Effect.gen(function*() {
      const decisions = yield* Effect.mapError(
        decodeDecisions(raw),
        (error) =>
          new DecisionError({
            reason: "Malformed",
            threadId,
            detail: `expected a list of decisions ({ type, callId, waitKey, fingerprint, ... }): ${
              AgentError.describeParseError(error)
            }`
          })
      )
      const waiting = new Map(gated.map((call) => [call.id, call]))
      const byId = new Map<string, Decision>()
      for (const decision of decisions) {
        if (byId.has(decision.callId)) {
          return yield* new DecisionError({
            reason: "Malformed",
            threadId,
            detail: `call "${decision.callId}" is decided twice`
          })
        }
        const call = waiting.get(decision.callId)
        if (call === undefined) {
          return yield* new DecisionError({
            reason: "UnknownCall",
            threadId,
            callId: decision.callId,
            waiting: [...waiting.keys()]
          })
        }
        if (decision.waitKey === undefined) {
          return yield* new DecisionError({ reason: "Unbound", threadId, callId: call.id, field: "waitKey" })
        }
        if (decision.fingerprint === undefined) {
          return yield* new DecisionError({ reason: "Unbound", threadId, callId: call.id, field: "fingerprint" })
        }
        if (decision.waitKey !== waitKey) {
          return yield* new DecisionError({
            reason: "Stale",
            threadId,
            callId: call.id,
            field: "waitKey",
            expected: waitKey,
            given: decision.waitKey
          })
        }
        const expected = fingerprintOf(call.name, call.params)
        if (decision.fingerprint !== expected) {
          return yield* new DecisionError({
            reason: "Stale",
            threadId,
            callId: call.id,
            field: "fingerprint",
            expected,
            given: decision.fingerprint
          })
        }
        byId.set(decision.callId, { ...decision, waitKey: decision.waitKey, fingerprint: decision.fingerprint })
      }
      const missing = gated.filter((call) => !byId.has(call.id)).map((call) => call.id)
      if (missing.length > 0) return yield* new DecisionError({ reason: "Missing", threadId, callIds: missing })
      const out: Array<Plan> = []
      for (const call of gated) {
        const decision = byId.get(call.id)!
        const gate = gates.get(call.name)!
        if (!gate.allowed.includes(decision.type)) {
          return yield* new DecisionError({
            reason: "NotAllowed",
            threadId,
            callId: call.id,
            toolName: call.name,
            decision: decision.type,
            allowed: gate.allowed
          })
        }
        switch (decision.type) {
          case "approve": {
            out.push({ _tag: "Run", call, decision })
            break
          }
          case "edit": {
            out.push({ _tag: "Replace", call, edited: yield* checkEdit(threadId, call, decision) })
            break
          }
          case "reject": {
            const reason = decision.message === undefined
              ? `The user rejected this call of "${call.name}"; it did not run.`
              : `The user rejected this call of "${call.name}"; it did not run. Reason: ${decision.message}`
            out.push({
              _tag: "Answer",
              call,
              // a person's reason passes the agent's input hooks (Pii, …) as the user's input does
              result: Middleware.toolResult(call, { error: reason }, {
                isFailure: true,
                fromPerson: decision.message !== undefined
              })
            })
            break
          }
          case "respond": {
            out.push({
              _tag: "Answer",
              call,
              result: Middleware.toolResult(call, decision.message, { fromPerson: true })
            })
            break
          }
        }
      }
      return out
    })

  /**
   * The calls cleared to run, by thread: the reply they belong to (its index
   * in the thread) and the fingerprint of each, by call id, as it was judged
   * by `when` or decided. The guard lets a gated call run only as it was
   * cleared, in the reply it was cleared in: an identical call of a later
   * reply (`call_0` again) whose `afterModel` a jump skipped is not cleared
   * by an earlier decision. The entry of a thread is replaced at each reply.
   */
  const cleared = new Map<string, { readonly index: number; readonly calls: Map<string, string> }>()
  const clearCalls = (threadId: string, index: number, calls: ReadonlyArray<Prompt.ToolCallPart>) => {
    if (calls.length === 0) cleared.delete(threadId)
    else {
      cleared.set(threadId, {
        index,
        calls: new Map(calls.map((call) => [call.id, fingerprintOf(call.name, call.params)]))
      })
    }
  }
  const isCleared = (request: Middleware.ToolCallRequest, fingerprint: string): boolean => {
    const entry = cleared.get(request.threadId)
    const messages = (request.state as { readonly messages?: ReadonlyArray<Prompt.Message> }).messages
    return entry !== undefined && entry.calls.get(request.call.id) === fingerprint &&
      messages !== undefined && AgentState.pendingToolCalls(messages)?.index === entry.index
  }

  const apply = (
    context: Middleware.HookContext<{}, unknown>,
    batch: NonNullable<ReturnType<typeof AgentState.pendingToolCalls>>,
    gated: ReadonlyArray<Prompt.ToolCallPart>,
    free: ReadonlyArray<Prompt.ToolCallPart>,
    raw: unknown,
    waitKey: string
  ): Effect.Effect<Middleware.HookResult<{}, never> | undefined, DecisionError> =>
    Effect.gen(function*() {
      const steps = yield* plan(context.threadId, gated, raw, waitKey)
      const edits = new Map<string, Prompt.ToolCallPart>()
      const answers: Array<Prompt.ToolResultPart> = []
      const runs: Array<Prompt.ToolCallPart> = [...free]
      for (const step of steps) {
        switch (step._tag) {
          case "Run": {
            runs.push(step.call)
            yield* Middleware.report(`approve ${step.call.name}`, { callId: step.call.id })
            break
          }
          case "Replace": {
            runs.push(step.edited)
            edits.set(step.call.id, step.edited)
            yield* Middleware.report(`edit ${step.call.name}`, {
              callId: step.call.id,
              toolName: step.edited.name,
              args: step.edited.params
            })
            break
          }
          case "Answer": {
            answers.push(step.result)
            yield* Middleware.report(`${step.result.isFailure ? "reject" : "respond"} ${step.call.name}`, {
              callId: step.call.id
            })
            break
          }
        }
      }
      clearCalls(context.threadId, batch.index, runs)
      if (edits.size === 0 && answers.length === 0) return undefined
      const messages = [...context.messages]
      if (edits.size > 0) {
        const assistant = messages[batch.index] as Prompt.AssistantMessage
        messages[batch.index] = Prompt.makeMessage("assistant", {
          content: assistant.content.map((part) => part.type === "tool-call" ? edits.get(part.id) ?? part : part),
          options: assistant.options
        })
      }
      return { messages: AgentState.appendToolResults(messages, answers) }
    })

  /**
   * Checks a call of a gated tool as it runs, at the end of the
   * `wrapToolCall` chain: a call that is not the one cleared (a middleware
   * changed its arguments or its tool after it was judged or decided) is
   * judged again by its tool's `when`; when it needs a decision, the
   * {@link Approvals} service decides it, and without one it does not run.
   */
  const guard = (approvals: Option.Option<Approvals.Service>): Middleware.ToolCallGuard => (request) => {
    const call = request.call
    const gate = gates.get(call.name)
    if (gate === undefined || !callable(call)) return Effect.succeedNone
    const fingerprint = fingerprintOf(call.name, call.params)
    if (isCleared(request, fingerprint)) return Effect.succeedNone
    return Effect.gen(function*() {
      const context: DescriptionContext = {
        threadId: request.threadId,
        messages: (request.state as { readonly messages?: ReadonlyArray<Prompt.Message> }).messages ?? [],
        step: request.step
      }
      yield* Middleware.report(`${call.name} (${call.id}) is not the call cleared to run: judged again`, {
        callId: call.id,
        toolName: call.name
      })
      if (!(yield* asks(gate, call, context))) return Option.none()
      const refused = (why: string) =>
        Effect.as(
          Middleware.report(`${call.name} (${call.id}) did not run: ${why}`, { callId: call.id }),
          Option.some(Middleware.toolResult(call, {
            error: `This call of "${call.name}" is not the call cleared to run (it changed after it was cleared to ` +
              `run, or no decision of its reply cleared it), and it needs a person's decision: it did not run ` +
              `(${why}).`
          }, { isFailure: true }))
        )
      if (Option.isNone(approvals)) return yield* refused("no Approvals service to ask")
      // the Approvals service decides the changed call; an edit cannot apply here, where the call runs
      const allowed = gate.allowed.filter((kind) => kind !== "edit")
      if (allowed.length === 0) return yield* refused("its policy allows only edits")
      const waitKey = `recheck/${call.id}/${fingerprint}`
      const request_ = { actionRequests: [{ ...actionRequest(call, context, waitKey), allowedDecisions: allowed }] }
      const decided = yield* Effect.either(Effect.flatMap(
        approvals.value.decide(request_, { threadId: request.threadId }),
        (decisions) => plan(request.threadId, [call], decisions, waitKey)
      ))
      if (decided._tag === "Left") return yield* refused(decided.left.message)
      const step = decided.right[0]!
      return step._tag === "Answer" ? Option.some(step.result) : Option.none()
    }).pipe(Middleware.reportingAs({ middleware: name, hook: "wrapToolCall" }))
  }

  const waitCount = waitCountKey(name)
  const waitsOf = (state: Readonly<Record<string, unknown>>): number => {
    const count = state[waitCount]
    return typeof count === "number" ? count : 0
  }

  const made = Middleware.make({
    name,
    uses: { tools: Object.keys(options.interruptOn) },
    state: {
      schema: Schema.Struct({ [waitCount]: Schema.NonNegativeInt }),
      initial: { [waitCount]: 0 }
    },
    wait: {
      request: ApprovalRequest,
      decision: ArrivingDecisions,
      // the decisions must answer the calls the stored request asks about, each as its policy allows, under the
      // key the resumed hook makes again (a wait copied from another thread is not this thread's)
      check: ({ decision, request, threadId }) =>
        plan(
          threadId,
          request.actionRequests.map(callOf),
          decision,
          rebound(threadId, request.actionRequests[0]?.waitKey ?? "")
        ),
      // a response's text and a rejection's reason are what a person typed: a durable run stores them redacted
      personTexts: (decisions, replace) =>
        decisions.map((decision) =>
          (decision.type === "respond" || decision.type === "reject") && decision.message !== undefined
            ? { ...decision, message: replace(decision.message) }
            : decision
        )
    },
    afterModel: (context: Middleware.HookContext<Readonly<Record<string, number>>, DecisionsGiven>) =>
      Effect.gen(function*() {
        const batch = AgentState.pendingToolCalls(context.messages)
        // a call that cannot run is answered with the repair error, unasked
        const named = batch === undefined ? [] : batch.calls.filter((call) => gates.has(call.name) && callable(call))
        if (Option.isSome(context.resume)) {
          // `when` is not asked again: the calls it gated are those the decisions (checked against the stored
          // request by the wait's check) answer
          const decided = new Set(context.resume.value.map((decision) => decision.callId))
          const gated = named.filter((call) => gates.get(call.name)!.when === undefined || decided.has(call.id))
          const free = named.filter((call) => !gated.includes(call))
          const waitKey = waitKeyOf(context, batch?.index ?? -1, gated, waitsOf(context.state))
          return yield* apply(context, batch ?? { index: -1, calls: [] }, gated, free, context.resume.value, waitKey)
        }
        cleared.delete(context.threadId)
        if (batch === undefined || named.length === 0) return undefined
        const describeContext: DescriptionContext = {
          threadId: context.threadId,
          messages: context.messages,
          step: context.step
        }
        // asked in the order of the calls
        const answers = yield* Effect.forEach(named, (call) => asks(gates.get(call.name)!, call, describeContext))
        const gated = named.filter((_, index) => answers[index])
        const free = named.filter((call) => !gated.includes(call))
        if (free.length > 0) {
          yield* Middleware.report(`${free.length} call(s) need no decision (when)`, {
            callIds: free.map((call) => call.id)
          })
        }
        if (gated.length === 0) {
          clearCalls(context.threadId, batch.index, free)
          return undefined
        }
        const seen = new Set<string>()
        for (const call of batch.calls) {
          if (seen.has(call.id)) return yield* new DuplicateCallId({ threadId: context.threadId, callId: call.id })
          seen.add(call.id)
        }
        // each wait gets the next number of the thread: its key is never used again
        const wait = waitsOf(context.state) + 1
        const waitKey = waitKeyOf(context, batch.index, gated, wait)
        const request: ApprovalRequest = {
          actionRequests: gated.map((call) => actionRequest(call, describeContext, waitKey))
        }
        const approvals = yield* Effect.serviceOption(Approvals)
        if (Option.isSome(approvals)) {
          yield* Middleware.report(`ask Approvals about ${gated.length} call(s)`, {
            callIds: gated.map((call) => call.id)
          })
          // the service answers this very request; its decisions are checked like resumed ones
          const decisions = yield* approvals.value.decide(request, { threadId: context.threadId })
          const applied = yield* apply(context, batch, gated, free, decisions, waitKey)
          return { ...applied, state: { [waitCount]: wait } }
        }
        yield* Middleware.report(`interrupt: ${gated.length} call(s) wait for a decision`, {
          callIds: gated.map((call) => call.id)
        })
        return { interrupt: request, interruptKey: waitKey, state: { [waitCount]: wait } }
      }),
    wrapToolCall: (request, next) =>
      Effect.flatMap(
        Effect.serviceOption(Approvals),
        (approvals) => Middleware.guardToolCall(next(request), guard(approvals))
      ),
    onThreadDeleted: (threadId) => Effect.sync(() => void cleared.delete(threadId))
  })
  // the wait count is the middleware's bookkeeping, not part of the agent's typed state
  return made as unknown as Middleware.Middleware<{}, DecisionError | DuplicateCallId, never, never, Waits>
})
