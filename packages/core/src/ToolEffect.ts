/**
 * What a tool does to the world, declared on the tool: read-only,
 * idempotent (with a key), compensatable (with an undo) or uncertain. A
 * durable run keeps a ledger of the calls of tools that are not read-only
 * (an entry when a call starts, its result when it ends), so that no resume,
 * replay or fork runs such a call twice by accident: a call cut off by a
 * crash between its start and its result runs again only when its tool is
 * idempotent; otherwise the run waits on the {@link middleware}'s typed
 * question ({@link UncertainRequest}): retry it, mark it done (with a result
 * the model gets), or compensate it (run its undo).
 *
 * A tool declares its effect with an annotation ({@link declare}); without
 * one, `@effect/ai`'s own annotations decide ({@link of}): `Tool.Readonly`
 * means read-only, `Tool.Idempotent` idempotent keyed by the call's
 * arguments, anything else uncertain. MCP tools carry their server's hints as
 * those annotations.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { dual } from "effect/Function"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as ToolResult from "./internal/toolResult.js"
import * as Middleware from "./Middleware.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * The effect of a tool: what running one of its calls again would do.
 *
 * - `ReadOnly`: nothing; runs again freely, and is not in the ledger.
 * - `Idempotent`: the same as running it once, given the same key; a call
 *   cut off by a crash runs again with the same idempotency key
 *   (`ToolContext.current`), which `key` derives from the arguments.
 * - `Compensatable`: a second write, but `undo` takes the first one back.
 * - `Uncertain`: unknown (the default of a tool that is not read-only).
 *
 * @since 0.1.0
 * @category models
 */
export type ToolEffect = ReadOnly | Idempotent | Compensatable | Uncertain

/**
 * @since 0.1.0
 * @category models
 */
export interface ReadOnly {
  readonly _tag: "ReadOnly"
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Idempotent {
  readonly _tag: "Idempotent"
  /**
   * The idempotency key of a call, from its arguments (as the model sent
   * them) and the call; default: the thread, tool and arguments hashed.
   */
  readonly key?: ((params: unknown, call: CallOf) => string) | undefined
}

/**
 * The call an idempotency key is derived for.
 *
 * @since 0.1.0
 * @category models
 */
export interface CallOf {
  readonly callId: string
  readonly toolName: string
  readonly threadId: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Compensatable {
  readonly _tag: "Compensatable"
  /** Takes back what the call may have done; must be idempotent (it may run again after a crash). */
  readonly undo: (params: unknown, entry: LedgerEntry) => Effect.Effect<void, unknown>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Uncertain {
  readonly _tag: "Uncertain"
}

/**
 * The kind of a tool's effect, as the ledger records it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Kind = Schema.Literal("ReadOnly", "Idempotent", "Compensatable", "Uncertain")

/**
 * @since 0.1.0
 * @category models
 */
export type Kind = typeof Kind.Type

/**
 * An entry of the effect ledger: the call of a tool that is not read-only,
 * as a durable run records it before the tool runs. `step` names the call's
 * step in the run's journal (`tool/<callId>`, `tool/<callId>#2` for a second
 * call with that id); `fingerprint` is the tool name and arguments hashed
 * ({@link fingerprint}), the same one a `HumanInTheLoop` approval of the call
 * names.
 *
 * @example
 * ```ts
 * import { ToolEffect } from "@stepwise-agent/core"
 * import { Schema } from "effect"
 *
 * const decode = Schema.decodeUnknownEither(ToolEffect.LedgerEntry)
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const LedgerEntry = Schema.Struct({
  step: Schema.String,
  callId: Schema.String,
  toolName: Schema.String,
  effect: Kind,
  idempotencyKey: Schema.String,
  fingerprint: Schema.String
})

/**
 * @since 0.1.0
 * @category models
 */
export interface LedgerEntry extends Schema.Schema.Type<typeof LedgerEntry> {}

// -----------------------------------------------------------------------------
// tags
// -----------------------------------------------------------------------------

/**
 * The annotation a tool declares its effect with (see {@link declare}).
 *
 * @example
 * ```ts
 * import { Tool } from "@effect/ai"
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * const Search = Tool.make("search").annotate(ToolEffect.Declared, ToolEffect.readOnly)
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class Declared extends Context.Tag("@stepwise-agent/core/ToolEffect/Declared")<Declared, ToolEffect>() {}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/**
 * A read-only tool: its calls run again freely and are not in the ledger.
 *
 * @example
 * ```ts
 * import { Tool } from "@effect/ai"
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * const Search = ToolEffect.declare(Tool.make("search"), ToolEffect.readOnly)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const readOnly: ToolEffect = { _tag: "ReadOnly" }

/**
 * An uncertain tool (the default of one that is not read-only): a call cut
 * off by a crash is not run again unasked.
 *
 * @example
 * ```ts
 * import { Tool } from "@effect/ai"
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * const Deploy = ToolEffect.declare(Tool.make("deploy"), ToolEffect.uncertain)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const uncertain: ToolEffect = { _tag: "Uncertain" }

/**
 * An idempotent tool: a call cut off by a crash runs again, with the same
 * idempotency key. `key` derives it from the call's arguments (as the model
 * sent them) and the call (`(_, call) => \`${call.threadId}/${call.callId}\``
 * keys it by the call instead); without it the key is the thread, tool and
 * arguments hashed.
 *
 * @example
 * ```ts
 * import { Tool } from "@effect/ai"
 * import { ToolEffect } from "@stepwise-agent/core"
 * import { Schema } from "effect"
 *
 * const Charge = Tool.make("charge", { parameters: { orderId: Schema.String } }).pipe(
 *   ToolEffect.declare(ToolEffect.idempotent({ key: (params) => `charge/${(params as { orderId: string }).orderId}` }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const idempotent = (
  options?: { readonly key?: ((params: unknown, call: CallOf) => string) | undefined }
): ToolEffect => ({
  _tag: "Idempotent",
  ...(options?.key === undefined ? {} : { key: options.key })
})

/**
 * A compensatable tool: `undo` takes back what a call may have done. A call
 * cut off by a crash may be compensated instead of run again (the
 * `compensate` decision of the {@link middleware}'s question). `undo` may run
 * again after a crash: make it idempotent (the entry's `idempotencyKey` helps).
 *
 * @example
 * ```ts
 * import { Tool } from "@effect/ai"
 * import { ToolEffect } from "@stepwise-agent/core"
 * import { Console } from "effect"
 *
 * const Book = Tool.make("book_room").pipe(
 *   ToolEffect.declare(ToolEffect.compensatable({
 *     undo: (_params, entry) => Console.log(`cancel the booking made under ${entry.idempotencyKey}`)
 *   }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const compensatable = (options: {
  readonly undo: (params: unknown, entry: LedgerEntry) => Effect.Effect<void, unknown>
}): ToolEffect => ({ _tag: "Compensatable", undo: options.undo })

// -----------------------------------------------------------------------------
// combinators
// -----------------------------------------------------------------------------

/**
 * The tool with its effect declared (the {@link Declared} annotation).
 *
 * @example
 * ```ts
 * import { Tool } from "@effect/ai"
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * const Search = Tool.make("search").pipe(ToolEffect.declare(ToolEffect.readOnly))
 * ToolEffect.of(Search)._tag // "ReadOnly"
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const declare: {
  (effect: ToolEffect): <T extends Tool.Tool<any, any, any>>(tool: T) => T
  <T extends Tool.Tool<any, any, any>>(tool: T, effect: ToolEffect): T
} = dual(
  2,
  <T extends Tool.Tool<any, any, any>>(tool: T, effect: ToolEffect): T => tool.annotate(Declared, effect) as T
)

// -----------------------------------------------------------------------------
// getters
// -----------------------------------------------------------------------------

/**
 * The effect a tool declares: its {@link Declared} annotation, else from
 * `@effect/ai`'s annotations (an MCP server's hints among them):
 * `Tool.Readonly` true is read-only, `Tool.Idempotent` true idempotent
 * (keyed by the arguments), anything else uncertain.
 *
 * @example
 * ```ts
 * import { Tool } from "@effect/ai"
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * ToolEffect.of(Tool.make("list_files").annotate(Tool.Readonly, true))._tag // "ReadOnly"
 * ToolEffect.of(Tool.make("put_file").annotate(Tool.Idempotent, true))._tag // "Idempotent"
 * ToolEffect.of(Tool.make("send_email"))._tag // "Uncertain"
 * ```
 *
 * @since 0.1.0
 * @category getters
 */
export const of = (tool: Tool.Any): ToolEffect => {
  const declared = Context.getOption(tool.annotations, Declared)
  if (Option.isSome(declared)) return declared.value
  if (Context.get(tool.annotations, Tool.Readonly)) return readOnly
  if (Context.get(tool.annotations, Tool.Idempotent)) return idempotentByArguments
  return uncertain
}

const idempotentByArguments: ToolEffect = { _tag: "Idempotent" }

/** How deep {@link canonicalJson} writes: far past any value JSON holds; a cyclic value ends there. */
const canonicalDepth = 100_000

/**
 * JSON with object keys sorted, so equal values give equal text whatever their key order. Written
 * without recursion, so a value nested thousands deep (a model's arguments) does not overflow the stack.
 */
const canonicalJson = (value: unknown): string => {
  const out: Array<string> = []
  // what is left to write, the next last: text as it is, or a value at its depth
  const todo: Array<string | { readonly value: unknown; readonly depth: number }> = [{ value, depth: 0 }]
  while (todo.length > 0) {
    const next = todo.pop()!
    if (typeof next === "string") {
      out.push(next)
      continue
    }
    const current = next.value
    if (current === null || typeof current !== "object") {
      out.push(JSON.stringify(current) ?? "null")
      continue
    }
    if (next.depth >= canonicalDepth) throw new RangeError("the value is nested too deep (or cyclic) to fingerprint")
    const depth = next.depth + 1
    if (Array.isArray(current)) {
      todo.push("]")
      for (let i = current.length - 1; i >= 0; i--) {
        todo.push({ value: current[i], depth })
        if (i > 0) todo.push(",")
      }
      out.push("[")
      continue
    }
    const record = current as Record<string, unknown>
    const keys = Object.keys(record).filter((key) => record[key] !== undefined).sort()
    todo.push("}")
    for (let i = keys.length - 1; i >= 0; i--) {
      todo.push({ value: record[keys[i]!], depth })
      todo.push(`${i > 0 ? "," : ""}${JSON.stringify(keys[i])}:`)
    }
    out.push("{")
  }
  return out.join("")
}

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
 * JSON (keys sorted), hashed. Deterministic, so an entry rebuilt on replay or
 * in another process gives the same one.
 *
 * @example
 * ```ts
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * // key order does not matter
 * ToolEffect.fingerprint("delete_file", { path: "/a", force: true }) ===
 *   ToolEffect.fingerprint("delete_file", { force: true, path: "/a" }) // true
 * ```
 *
 * @since 0.1.0
 * @category getters
 */
export const fingerprint = (toolName: string, params: unknown): string => {
  const text = canonicalJson([toolName, params])
  return hash53(text, 1) + hash53(text, 2)
}

/**
 * The idempotency key of a call of a tool with `effect` on `threadId`, the
 * one its handler reads from `ToolContext.current`: an idempotent tool's
 * `key` of the arguments, else (keyed by arguments) the thread, tool and
 * fingerprint; any other tool's `threadId/callId`.
 *
 * @example
 * ```ts
 * import { Prompt } from "@effect/ai"
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * const call = Prompt.makePart("tool-call", { id: "c1", name: "send", params: {}, providerExecuted: false })
 * ToolEffect.idempotencyKey(ToolEffect.uncertain, call, "t1") // "t1/c1"
 * ```
 *
 * @since 0.1.0
 * @category getters
 */
export const idempotencyKey = (effect: ToolEffect, call: Prompt.ToolCallPart, threadId: string): string => {
  if (effect._tag !== "Idempotent") return `${threadId}/${call.id}`
  return effect.key === undefined
    ? `${threadId}/${call.name}/${fingerprint(call.name, call.params)}`
    : effect.key(call.params, { callId: call.id, toolName: call.name, threadId })
}

/**
 * The ledger entry of a call, for the journal step `step`: `undefined` for
 * a read-only tool (or a call of no tool of the agent), which the ledger
 * leaves out.
 *
 * @example
 * ```ts
 * import { Prompt, Tool } from "@effect/ai"
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * const call = Prompt.makePart("tool-call", { id: "c1", name: "send", params: {}, providerExecuted: false })
 * ToolEffect.entry({ call, tool: Tool.make("send"), threadId: "t1", step: "tool/c1" })?.effect // "Uncertain"
 * ```
 *
 * @since 0.1.0
 * @category getters
 */
export const entry = (options: {
  readonly call: Prompt.ToolCallPart
  readonly tool: Tool.Any | undefined
  readonly threadId: string
  readonly step: string
}): LedgerEntry | undefined => {
  const { call, step, threadId, tool } = options
  if (tool === undefined) return undefined
  const effect = of(tool)
  if (effect._tag === "ReadOnly") return undefined
  return {
    step,
    callId: call.id,
    toolName: call.name,
    effect: effect._tag,
    idempotencyKey: idempotencyKey(effect, call, threadId),
    fingerprint: fingerprint(call.name, call.params)
  }
}

// -----------------------------------------------------------------------------
// the cut-off call
// -----------------------------------------------------------------------------

const cutOffTag = "@stepwise-agent/core/ToolEffect/CutOff"

/**
 * What a durable journal records for a call it found cut off (a started
 * entry without a result) and did not run again: a failed tool result
 * holding the entry, which {@link middleware} turns into the question.
 */
const CutOff = Schema.Struct({ _tag: Schema.Literal(cutOffTag), error: Schema.String, entry: LedgerEntry })

const isCutOff = Schema.is(CutOff)

/**
 * The result a durable journal records for a call it found cut off by a
 * crash (its ledger entry started, its result never recorded), instead of
 * running it again: a failed result holding the entry, on which
 * {@link middleware} asks the {@link UncertainRequest} question.
 *
 * @example
 * ```ts
 * import { Prompt, Tool } from "@effect/ai"
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * const call = Prompt.makePart("tool-call", { id: "c1", name: "send", params: {}, providerExecuted: false })
 * const entry = ToolEffect.entry({ call, tool: Tool.make("send"), threadId: "t1", step: "tool/c1" })!
 * const result = ToolEffect.cutOffResult(call, entry)
 * ToolEffect.cutOffEntry(result) // Option.some(entry)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const cutOffResult = (call: Prompt.ToolCallPart, entry: LedgerEntry): Prompt.ToolResultPart =>
  Middleware.toolResult(call, {
    _tag: cutOffTag,
    error: `The call of "${call.name}" was cut off before its result was recorded; it was not run again`,
    entry
  }, { isFailure: true })

/**
 * The ledger entry of a result {@link cutOffResult} made, if `part` is one.
 *
 * @example
 * ```ts
 * import type { Prompt } from "@effect/ai"
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * declare const part: Prompt.ToolResultPart
 * ToolEffect.cutOffEntry(part) // Option.none() for a result the tool gave
 * ```
 *
 * @since 0.1.0
 * @category getters
 */
export const cutOffEntry = (part: Prompt.ToolResultPart): Option.Option<LedgerEntry> =>
  part.isFailure && isCutOff(part.result) && part.result.entry.callId === part.id
    ? Option.some(part.result.entry)
    : Option.none()

// -----------------------------------------------------------------------------
// the Uncertain question
// -----------------------------------------------------------------------------

/**
 * What may be decided about a cut-off call: run it again, mark it done, or
 * run its tool's undo (a compensatable tool only).
 *
 * @since 0.1.0
 * @category schemas
 */
export const DecisionType = Schema.Literal("retry", "markDone", "compensate")

/**
 * The question a run waits on when a call of a tool that is neither
 * read-only nor idempotent was cut off by a crash: the call's ledger entry
 * and the decisions allowed. The interrupt value of the `Interrupted` run
 * (middleware {@link middlewareName}); decode it with this schema.
 *
 * @example
 * ```ts
 * import { ToolEffect } from "@stepwise-agent/core"
 * import { Schema } from "effect"
 *
 * const decode = Schema.decodeUnknownOption(ToolEffect.UncertainRequest)
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const UncertainRequest = Schema.Struct({
  entry: LedgerEntry,
  allowedDecisions: Schema.Array(DecisionType),
  /**
   * The incarnation of the thread that asks (`Middleware.HookContext`): a
   * decision answers this thread only, not a thread deleted and made again
   * with the same id. Absent in a request stored before incarnations.
   */
  incarnation: Schema.optional(Schema.String)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface UncertainRequest extends Schema.Schema.Type<typeof UncertainRequest> {}

const Binding = {
  /** The ledger step of the entry decided. */
  step: Schema.String,
  /** The fingerprint of the entry decided. */
  fingerprint: Schema.String,
  /** The incarnation of the thread whose request it answers (copied from the request). */
  incarnation: Schema.optional(Schema.String)
}

/**
 * The answer to an {@link UncertainRequest}, bound to its entry (its `step`
 * and `fingerprint`): `Retry` runs the call again, `MarkDone` answers it with
 * `result` without running it (the model reads that result), `Compensate`
 * runs the tool's undo and answers it as undone. Build it with
 * {@link retry}, {@link markDone} or {@link compensate}.
 *
 * @since 0.1.0
 * @category schemas
 */
export const UncertainDecision = Schema.Union(
  Schema.TaggedStruct("Retry", Binding),
  Schema.TaggedStruct("MarkDone", { ...Binding, result: Schema.Unknown }),
  Schema.TaggedStruct("Compensate", Binding)
)

/**
 * @since 0.1.0
 * @category models
 */
export type UncertainDecision = typeof UncertainDecision.Type

const bindingOf = (request: UncertainRequest) => ({
  step: request.entry.step,
  fingerprint: request.entry.fingerprint,
  ...(request.incarnation === undefined ? {} : { incarnation: request.incarnation })
})

/**
 * Run the cut-off call again (under the same idempotency key).
 *
 * @example
 * ```ts
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * declare const request: ToolEffect.UncertainRequest
 * const decision = ToolEffect.retry(request)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const retry = (request: UncertainRequest): UncertainDecision => ({ _tag: "Retry", ...bindingOf(request) })

/**
 * The cut-off call did its work: answer it with `result` (the model reads
 * it) without running it again.
 *
 * @example
 * ```ts
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * declare const request: ToolEffect.UncertainRequest
 * const decision = ToolEffect.markDone(request, "the email was sent")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const markDone = (request: UncertainRequest, result: unknown): UncertainDecision => ({
  _tag: "MarkDone",
  ...bindingOf(request),
  result
})

/**
 * Run the tool's undo for the cut-off call (a compensatable tool only); the
 * model reads that the call was undone.
 *
 * @example
 * ```ts
 * import { ToolEffect } from "@stepwise-agent/core"
 *
 * declare const request: ToolEffect.UncertainRequest
 * const decision = ToolEffect.compensate(request)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const compensate = (request: UncertainRequest): UncertainDecision => ({
  _tag: "Compensate",
  ...bindingOf(request)
})

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * A decision that does not answer the question asked: it names another
 * entry (`field: "step"` or `"fingerprint"`), answers an earlier thread of
 * the same id (`field: "incarnation"`), compensates a call whose tool has
 * no undo (`field: "_tag"`), or marks it done with a result no store can
 * keep (`field: "result"`: nested past 128 levels, a `bigint`, a cycle).
 * The resume fails; the run keeps waiting.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidUncertainDecision extends Schema.TaggedError<InvalidUncertainDecision>(
  "@stepwise-agent/core/ToolEffect/InvalidUncertainDecision"
)("InvalidUncertainDecision", {
  field: Schema.Literal("step", "fingerprint", "incarnation", "_tag", "result"),
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Invalid decision on an uncertain tool call (${this.field}): ${this.reason}`
  }
}

/**
 * The undo of a compensatable tool failed; the run fails with it.
 *
 * @since 0.1.0
 * @category errors
 */
export class CompensationFailed extends Schema.TaggedError<CompensationFailed>(
  "@stepwise-agent/core/ToolEffect/CompensationFailed"
)("CompensationFailed", { step: Schema.String, toolName: Schema.String, reason: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The undo of "${this.toolName}" (${this.step}) failed: ${this.reason}`
  }
}

// -----------------------------------------------------------------------------
// the middleware
// -----------------------------------------------------------------------------

/**
 * The name of {@link middleware}, the `middleware` of its interrupts.
 *
 * @since 0.1.0
 * @category constructors
 */
export const middlewareName = "effectLedger" as const

/** The state slice: the entries of the cut-off calls to compensate when the tools run next. */
const Slice = Schema.Struct({ compensating: Schema.Array(LedgerEntry) })

/** Where a cut-off result sits in the messages, and its entry. */
interface CutOffAt {
  readonly message: number
  readonly part: Prompt.ToolResultPart
  readonly entry: LedgerEntry
}

/** The first cut-off result after the last assistant message (the calls of the last reply). */
const firstCutOff = (messages: ReadonlyArray<Prompt.Message>): CutOffAt | undefined => {
  let start = messages.length - 1
  while (start >= 0 && messages[start]!.role !== "assistant") start--
  for (let i = Math.max(start, 0); i < messages.length; i++) {
    const message = messages[i]!
    if (message.role !== "tool") continue
    for (const part of message.content) {
      if (part.type !== "tool-result") continue
      const entry = cutOffEntry(part)
      if (Option.isSome(entry)) return { message: i, part, entry: entry.value }
    }
  }
  return undefined
}

/** `messages` with `at`'s result replaced by `by` (or removed, and its message if it held nothing else). */
const replaceResult = (
  messages: ReadonlyArray<Prompt.Message>,
  at: CutOffAt,
  by: Prompt.ToolResultPart | undefined
): ReadonlyArray<Prompt.Message> => {
  const message = messages[at.message] as Prompt.ToolMessage
  const content = by === undefined
    ? message.content.filter((part) => part !== at.part)
    : message.content.map((part) => part === at.part ? by : part)
  const replaced = content.length === 0
    ? []
    : [Prompt.makeMessage("tool", { content, ...(message.options === undefined ? {} : { options: message.options }) })]
  return [...messages.slice(0, at.message), ...replaced, ...messages.slice(at.message + 1)]
}

const allowedFor = (entry: LedgerEntry): ReadonlyArray<typeof DecisionType.Type> =>
  entry.effect === "Compensatable" ? ["retry", "markDone", "compensate"] : ["retry", "markDone"]

/** What is wrong with `decision` as the answer to `request`, if anything. */
const decisionProblem = (request: UncertainRequest, decision: UncertainDecision) => {
  if (decision.step !== request.entry.step) {
    return new InvalidUncertainDecision({
      field: "step",
      reason: `it answers "${decision.step}", the run waits on "${request.entry.step}"`
    })
  }
  if (decision.fingerprint !== request.entry.fingerprint) {
    return new InvalidUncertainDecision({
      field: "fingerprint",
      reason: "it answers another call (tool or arguments) than the one cut off"
    })
  }
  if (decision.incarnation !== request.incarnation) {
    return new InvalidUncertainDecision({
      field: "incarnation",
      reason: "it answers a wait of an earlier thread of this id (deleted since), not this thread's"
    })
  }
  if (decision._tag === "Compensate" && !request.allowedDecisions.includes("compensate")) {
    return new InvalidUncertainDecision({
      field: "_tag",
      reason: `"${request.entry.toolName}" is not compensatable: retry it or mark it done`
    })
  }
  if (decision._tag === "MarkDone") {
    const problem = ToolResult.problem(decision.result, "its result")
    if (problem !== undefined) return new InvalidUncertainDecision({ field: "result", reason: problem })
  }
  return undefined
}

/**
 * The middleware that asks what to do with a call cut off by a crash. A
 * durable run (`@stepwise-agent/workflow`) does not run again a call whose
 * ledger entry started and has no result unless its tool is idempotent (or
 * read-only): it answers the call with a cut-off result, and this
 * middleware's `beforeModel` hook interrupts the run with an
 * {@link UncertainRequest} before the model reads it. The decision:
 *
 * - `Retry`: the call runs again (a new journal step, `tool/<callId>#2`);
 * - `MarkDone`: the call is answered with the decision's `result`;
 * - `Compensate`: the call's tool's undo runs (in the tools step, so it is
 *   journaled), and the call is answered as undone.
 *
 * A decision names the entry's `step` and `fingerprint`, and the thread's
 * incarnation (build it from the request); one naming another entry or an
 * earlier thread of the same id, or compensating a tool without an undo,
 * fails the resume with
 * {@link InvalidUncertainDecision}. Add it to every durable agent with tools
 * that are not read-only: without it, the model reads the cut-off result (a
 * failed call) and the run goes on.
 *
 * @example
 * ```ts
 * import { Agent, ToolEffect } from "@stepwise-agent/core"
 * import { Tool, Toolkit } from "@effect/ai"
 *
 * const Tools = Toolkit.make(Tool.make("send_email").pipe(ToolEffect.declare(ToolEffect.uncertain)))
 * const AgentLive = Agent.layer({ toolkit: Tools, middleware: [ToolEffect.middleware()] })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = () =>
  Middleware.make({
    name: middlewareName,
    state: { schema: Slice, initial: { compensating: [] } },
    canJumpTo: ["tools"],
    wait: {
      request: UncertainRequest,
      decision: UncertainDecision,
      check: ({ decision, request }) => {
        const problem = decisionProblem(request, decision)
        return problem === undefined ? Effect.void : Effect.fail(problem)
      }
    },
    beforeModel: ({ incarnation, messages, resume, state }) => {
      const at = firstCutOff(messages)
      if (at === undefined) return Effect.succeed(undefined)
      const ask = (cutOff: CutOffAt) => ({
        interrupt: {
          entry: cutOff.entry,
          allowedDecisions: allowedFor(cutOff.entry),
          ...(incarnation === undefined ? {} : { incarnation })
        },
        interruptKey: `uncertain/${cutOff.entry.step}`
      })
      if (Option.isNone(resume)) return Effect.succeed(ask(at))
      const decision = resume.value
      const problem = decisionProblem(ask(at).interrupt, decision)
      if (problem !== undefined) return Effect.fail(problem)
      // a compensation of this call that was itself cut off is decided anew
      const compensating = state.compensating.filter((entry) => entry.callId !== at.entry.callId)
      switch (decision._tag) {
        case "MarkDone": {
          const answered = replaceResult(
            messages,
            at,
            // checked (decisionProblem) and scrubbed as a tool's result is
            ToolResult.keep(Prompt.makePart("tool-result", {
              id: at.part.id,
              name: at.part.name,
              result: decision.result,
              isFailure: false,
              providerExecuted: false
            }))
          )
          // another call of the reply cut off too: asked about before the model reads the results
          const next = firstCutOff(answered)
          return Effect.succeed({
            messages: answered,
            state: { compensating },
            ...(next === undefined ? {} : ask(next))
          })
        }
        case "Retry":
          return Effect.succeed({
            messages: replaceResult(messages, at, undefined),
            state: { compensating },
            jumpTo: "tools" as const
          })
        case "Compensate":
          return Effect.succeed({
            messages: replaceResult(messages, at, undefined),
            state: { compensating: [...compensating, at.entry] },
            jumpTo: "tools" as const
          })
      }
    },
    wrapToolCall: (request, next) => {
      const compensating = (request.state as typeof Slice.Type).compensating
      const undone = compensating.find((entry) => entry.callId === request.call.id)
      if (undone === undefined || request.tool === undefined) return next(request)
      const effect = of(request.tool)
      const left = { compensating: compensating.filter((entry) => entry !== undone) }
      if (effect._tag !== "Compensatable") return Effect.map(next(request), (result) => ({ ...result, state: left }))
      return effect.undo(request.call.params, undone).pipe(
        Effect.mapError((error) =>
          new CompensationFailed({
            step: undone.step,
            toolName: undone.toolName,
            reason: Predicate.hasProperty(error, "message") ? String(error.message) : String(error)
          })
        ),
        Effect.as({
          ...Middleware.toolResult(request.call, {
            error: `The call of "${undone.toolName}" was cut off and then undone; it did not take effect`
          }, { isFailure: true }),
          state: left
        })
      )
    }
  })
