/**
 * Evals: run an agent on a set of cases, several trials each, and check
 * every run with assertions — a tool called with given arguments, a tool
 * never called, the output matching a schema, tokens or cost under a bound,
 * no approval bypassed, or a check of your own. The report gives the pass
 * rate of each case and of each assertion, as a text table ({@link table})
 * or as JSON ({@link toJson}, read back with {@link fromJson}).
 *
 * A case is an input (optionally after a thread history), run on a scripted
 * model ({@link Case.script}) or on a real model (the suite's `model`), or
 * a recorded run (`RunRecord`, {@link fromRecord}) replayed on the agent
 * under test with `agent.replay` (no model or tool call; a request that
 * differs from the recorded one fails {@link replaysAsRecorded}). A run
 * that fails (a model error, a middleware error, a defect, a timeout) is a
 * failed trial with its reason, never a failed eval.
 *
 * @since 0.1.0
 */
import * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import type * as Agent from "@stepwise-agent/core/Agent"
import { describeParseError } from "@stepwise-agent/core/AgentError"
import type * as AgentEvent from "@stepwise-agent/core/AgentEvent"
import type * as AgentResult from "@stepwise-agent/core/AgentResult"
import * as RunRecord from "@stepwise-agent/core/RunRecord"
import * as Secrets from "@stepwise-agent/core/Secrets"
import * as Usage from "@stepwise-agent/core/Usage"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { keysOf, unknownKey } from "./internal/options.js"
import * as ScriptedModel from "./ScriptedModel.js"

// -----------------------------------------------------------------------------
// models
// -----------------------------------------------------------------------------

/**
 * One case of an eval: what the agent is asked, and how its model answers.
 *
 * - `input`: the run's input, a string (a user message) or a conversation;
 * - `history`: messages the thread starts from, before `input` (a thread seed);
 * - `script`: the model's replies, served by a `ScriptedModel` (without one,
 *   the suite's `model` answers);
 * - `decide`: when the run stops at an interrupt (an approval), the decision
 *   to resume it with (or an `Effect` of it); without it an interrupted run
 *   ends there;
 * - `record`: a recorded run to replay instead (`agent.replayStream`): no
 *   model or tool is called, and the run has the events a live run of the
 *   record emits (see {@link fromRecord}); `input` is then unused;
 * - `resumes`: with `record`, the records of the resumes that followed it
 *   (`RunRecord.recordResume`), in order: a replay that ends waiting goes on
 *   with the next one, resumed with `decide`'s decision (one that differs
 *   from the recorded decision is a divergence, see {@link replaysAsRecorded})
 *   or, without `decide`, with the recorded one. A record case with `decide`
 *   whose replay ends waiting with no recorded resume left fails its trial
 *   with {@link RecordEndsWaiting} (resuming it would call the model);
 * - `assertions`: checks of this case only, after the suite's.
 *
 * @since 0.1.0
 * @category models
 */
export interface Case {
  readonly name: string
  readonly input: Prompt.RawInput
  readonly history?: ReadonlyArray<Prompt.MessageEncoded> | undefined
  readonly script?: ReadonlyArray<ScriptedModel.Turn> | undefined
  readonly decide?: ((interrupt: AgentResult.Interrupt) => unknown | Effect.Effect<unknown, unknown>) | undefined
  /** How many times a run may be resumed with `decide` (default 10). */
  readonly maxResumes?: number | undefined
  readonly record?: RunRecord.RunRecord | undefined
  readonly resumes?: ReadonlyArray<RunRecord.RunRecord> | undefined
  readonly assertions?: ReadonlyArray<Assertion> | undefined
}

/**
 * A tool call the run made: its name, arguments (as the model sent them) and
 * id, with its result when it finished.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCall {
  readonly id: string
  readonly name: string
  readonly params: unknown
  readonly result: Option.Option<Prompt.ToolResultPart>
}

/**
 * One trial of one case, as assertions see it: every event of the run (and
 * of its resumes, in order), its last result, why it failed if it did, its
 * tool calls and its token usage (summed over every model reply, a
 * subagent's included).
 *
 * @since 0.1.0
 * @category models
 */
export interface Run {
  readonly case: string
  /** 1-based. */
  readonly trial: number
  readonly threadId: string
  readonly events: ReadonlyArray<AgentEvent.AgentEvent<unknown, unknown>>
  readonly result: Option.Option<AgentResult.AgentResult<unknown, unknown>>
  /** Why the run failed: the error's tag and message (scrubbed of known secrets). */
  readonly error: Option.Option<string>
  readonly toolCalls: ReadonlyArray<ToolCall>
  readonly usage: Usage.Usage
  /** For a case replayed from a record: where the replay first differed from it (none when it did not). */
  readonly divergence?: RunRecord.ReplayDiverged | undefined
}

/**
 * An assertion's answer for one run: passed or not, with the reason.
 *
 * @since 0.1.0
 * @category models
 */
export interface Verdict {
  readonly passed: boolean
  readonly reason: string
}

/**
 * A check of a run. `check` never fails: an assertion that cannot decide
 * answers a failed {@link Verdict} saying why.
 *
 * @since 0.1.0
 * @category models
 */
export interface Assertion {
  readonly name: string
  readonly check: (run: Run) => Effect.Effect<Verdict>
  /** Set when the assertion was built with bad arguments: {@link run} fails with `InvalidEval` naming it. */
  readonly invalid?: string | undefined
}

/**
 * An eval: its cases, the agent under test, the assertions every case is
 * checked with, and how many trials each case gets (see {@link make}).
 *
 * @since 0.1.0
 * @category models
 */
export interface Suite<R = never> {
  readonly name: string
  readonly cases: ReadonlyArray<Case>
  /** Builds the agent; needs `R` and a `LanguageModel` (a case's script, or {@link Suite.model}). */
  readonly agent: Effect.Effect<Agent.Service<any, any, any, any>, unknown, any>
  readonly model: Option.Option<Layer.Layer<LanguageModel.LanguageModel, unknown, any>>
  /** The services the suite needs, for the type only. */
  readonly services?: ((_: never) => R) | undefined
  readonly assertions: ReadonlyArray<Assertion>
  readonly trials: number
  readonly concurrency: number
  readonly passRate: number
  readonly timeout: Option.Option<Duration.DurationInput>
  /** Set when {@link make} was given an option it does not know: {@link run} fails with `InvalidEval` naming it. */
  readonly invalid?: { readonly field: string; readonly reason: string } | undefined
}

/**
 * A failed trial or assertion: the trial (1-based) and why.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Failure = Schema.Struct({ trial: Schema.Int.pipe(Schema.positive()), reason: Schema.String })

/** A share of trials, from 0 to 1. */
const Rate = Schema.Number.pipe(Schema.between(0, 1))

/**
 * @since 0.1.0
 * @category models
 */
export type Failure = typeof Failure.Type

/**
 * How one assertion did over the trials of a case.
 *
 * @since 0.1.0
 * @category schemas
 */
export const AssertionReport = Schema.Struct({
  name: Schema.String,
  passes: Schema.NonNegativeInt,
  trials: Schema.NonNegativeInt,
  passRate: Rate,
  failures: Schema.Array(Failure)
})

/**
 * @since 0.1.0
 * @category models
 */
export type AssertionReport = typeof AssertionReport.Type

/**
 * How one case did: its trials, how many passed (a trial passes when its run
 * did not fail and every assertion passed), the pass rate, whether it reached
 * the suite's threshold, the runs that failed and each assertion's record.
 *
 * @since 0.1.0
 * @category schemas
 */
export const CaseReport = Schema.Struct({
  name: Schema.String,
  trials: Schema.NonNegativeInt,
  passes: Schema.NonNegativeInt,
  passRate: Rate,
  passed: Schema.Boolean,
  errors: Schema.Array(Failure),
  assertions: Schema.Array(AssertionReport)
})

/**
 * @since 0.1.0
 * @category models
 */
export type CaseReport = typeof CaseReport.Type

/**
 * The report of an eval: the suite, the trials per case, the pass rate each
 * case needed (`threshold`), whether every case reached it, and each case.
 *
 * @since 0.1.0
 * @category schemas
 */
export class Report extends Schema.Class<Report>("@stepwise-agent/testing/Eval/Report")({
  suite: Schema.String,
  trials: Schema.NonNegativeInt,
  threshold: Rate,
  passed: Schema.Boolean,
  cases: Schema.Array(CaseReport)
}) {}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * An eval that cannot run as given: `field` names the option (`trials`,
 * `cases[1].name`, `assertions[0]`, …) and `reason` what is wrong with it.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidEval extends Schema.TaggedError<InvalidEval>("@stepwise-agent/testing/Eval/InvalidEval")(
  "InvalidEval",
  { field: Schema.String, reason: Schema.String }
) {
  get message(): string {
    return `invalid eval, ${this.field}: ${this.reason}`
  }
}

/**
 * A trial of a record case with `decide` whose replay ended waiting (at
 * `middleware`'s wait) after the `resumes` recorded resumes it had: going
 * on would call the model live. Record the resume
 * (`RunRecord.recordResume`) and give its record in the case's `resumes`.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 *
 * const error = new Eval.RecordEndsWaiting({ case: "refund", middleware: "humanInTheLoop", resumes: 0 })
 * error.message // 'the record of case "refund" ends waiting …'
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class RecordEndsWaiting
  extends Schema.TaggedError<RecordEndsWaiting>("@stepwise-agent/testing/Eval/RecordEndsWaiting")(
    "RecordEndsWaiting",
    { case: Schema.String, middleware: Schema.String, resumes: Schema.NonNegativeInt }
  )
{
  get message(): string {
    return `the record of case ${JSON.stringify(this.case)} ends waiting (${this.middleware}) after ${this.resumes} ` +
      "recorded resume(s), and the case has `decide`: a replay cannot resume it without calling the model. Record " +
      "the resume with RunRecord.recordResume and give its record in the case's `resumes`"
  }
}

/**
 * A JSON report that {@link fromJson} cannot read: not JSON, or not a report.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidReport extends Schema.TaggedError<InvalidReport>("@stepwise-agent/testing/Eval/InvalidReport")(
  "InvalidReport",
  { reason: Schema.String }
) {
  get message(): string {
    return `invalid eval report: ${this.reason}`
  }
}

/**
 * An eval some case of which is below the pass rate it needs: `report` is
 * the whole report, and the message the table of the failing cases.
 *
 * @since 0.1.0
 * @category errors
 */
export class EvalFailed extends Schema.TaggedError<EvalFailed>("@stepwise-agent/testing/Eval/EvalFailed")(
  "EvalFailed",
  { report: Report }
) {
  get message(): string {
    return table(this.report, { failuresOnly: true })
  }
}

// -----------------------------------------------------------------------------
// constructors
// -----------------------------------------------------------------------------

/**
 * Options of {@link make}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<E, R, RM> {
  readonly name: string
  readonly cases: ReadonlyArray<Case>
  /**
   * Builds the agent under test, once per trial (so trials share no thread
   * or script). Its `LanguageModel` is a `ScriptedModel` of the case's
   * `script`, or, for a case without one, `model`.
   */
  readonly agent: Effect.Effect<Agent.Service<any, any, any, any>, E, R>
  /** The model of the cases without a script (a real provider's layer); built once per trial. */
  readonly model?: Layer.Layer<LanguageModel.LanguageModel, unknown, RM> | undefined
  /** Checked on every run of every case (default none). */
  readonly assertions?: ReadonlyArray<Assertion> | undefined
  /** Runs of each case, a whole number of at least 1 (default 1). */
  readonly trials?: number | undefined
  /** Trials run at once, a whole number of at least 1 (default 1). */
  readonly concurrency?: number | undefined
  /** The share of a case's trials that must pass, from 0 to 1 (default 1: all). */
  readonly passRate?: number | undefined
  /** Fails a trial whose run (resumes included) takes longer. */
  readonly timeout?: Duration.DurationInput | undefined
}

/**
 * An eval suite. Nothing runs until {@link run}, which also checks the
 * options (and fails with {@link InvalidEval} naming a bad one, or a key it
 * does not know, in the options or in a case).
 *
 * @example
 * ```ts
 * import { Agent } from "@stepwise-agent/core"
 * import { Eval, Fixtures, ScriptedModel } from "@stepwise-agent/testing"
 * import { Effect } from "effect"
 *
 * const suite = Eval.make({
 *   name: "calculator",
 *   agent: Agent.make({ toolkit: Fixtures.toolkit }).pipe(Effect.provide(Fixtures.layer)),
 *   trials: 3,
 *   cases: [{
 *     name: "adds",
 *     input: "What is 1 + 2?",
 *     script: [ScriptedModel.toolCalls([{ name: "add", params: { a: 1, b: 2 } }]), ScriptedModel.text("3")]
 *   }],
 *   assertions: [Eval.toolCalled("add", { a: 1 }), Eval.toolNeverCalled("fail")]
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <E, R, RM = never>(
  options: Options<E, R, RM>
): Suite<Exclude<R, LanguageModel.LanguageModel | ScriptedModel.ScriptedModel> | RM> => {
  const unknown = unknownKey("Eval", options, optionKeys)
  return {
    ...suiteOf(options),
    ...(unknown === undefined ? {} : { invalid: { field: unknown.option, reason: unknown.reason } })
  }
}

/** An assertion's options with a key it does not know, as its `invalid` reason. */
const unknownKeyReason = (options: unknown, known: ReadonlyArray<string>): string | undefined => {
  const problem = unknownKey("Eval", options, known)
  return problem === undefined ? undefined : `${problem.option} ${problem.reason}`
}

const optionKeys = keysOf<Options<unknown, unknown, unknown>>({
  name: true,
  cases: true,
  agent: true,
  model: true,
  assertions: true,
  trials: true,
  concurrency: true,
  passRate: true,
  timeout: true
})

const caseKeys = keysOf<Case>({
  name: true,
  input: true,
  history: true,
  script: true,
  decide: true,
  maxResumes: true,
  record: true,
  resumes: true,
  assertions: true
})

const suiteOf = <E, R, RM>(
  options: Options<E, R, RM>
): Suite<Exclude<R, LanguageModel.LanguageModel | ScriptedModel.ScriptedModel> | RM> => ({
  name: options.name,
  cases: options.cases,
  agent: options.agent,
  model: Option.fromNullable(options.model),
  assertions: options.assertions ?? [],
  trials: options.trials ?? 1,
  concurrency: options.concurrency ?? 1,
  passRate: options.passRate ?? 1,
  timeout: Option.fromNullable(options.timeout)
})

/**
 * The model replies a record holds, as a script: each model step's reply
 * (text, reasoning and tool calls, with its usage and finish reason), in
 * order.
 *
 * @example
 * ```ts
 * import type { RunRecord } from "@stepwise-agent/core"
 * import { Eval } from "@stepwise-agent/testing"
 *
 * declare const record: RunRecord.RunRecord
 * const turns = Eval.scriptOf(record).length // the model steps recorded
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptOf = (record: RunRecord.RunRecord): ReadonlyArray<ScriptedModel.Turn> =>
  record.entries.flatMap((entry) =>
    entry._tag === "Step" && entry.kind === "Model" && entry.reply !== undefined ? [replyParts(entry.reply)] : []
  )

const replyParts = (reply: NonNullable<RunRecord.Step["reply"]>): ReadonlyArray<Response.PartEncoded> => {
  const content = typeof reply.message.content === "string"
    ? [{ type: "text" as const, text: reply.message.content }]
    : reply.message.content
  const parts: Array<Response.PartEncoded> = []
  for (const part of content) {
    if (part.type === "text") parts.push({ type: "text", text: part.text })
    else if (part.type === "reasoning") parts.push({ type: "reasoning", text: part.text })
    else if (part.type === "tool-call") {
      parts.push({
        type: "tool-call",
        id: part.id,
        name: part.name,
        params: part.params,
        ...(part.providerExecuted === undefined ? {} : { providerExecuted: part.providerExecuted })
      })
    }
  }
  const usage = (typeof reply.usage === "object" && reply.usage !== null ? reply.usage : {}) as Record<string, unknown>
  const count = (key: string) => typeof usage[key] === "number" ? usage[key] : undefined
  parts.push({
    type: "finish",
    reason: reply.finishReason as Response.FinishReason,
    usage: {
      inputTokens: count("inputTokens"),
      outputTokens: count("outputTokens"),
      totalTokens: count("totalTokens"),
      reasoningTokens: count("reasoningTokens"),
      cachedInputTokens: count("cachedInputTokens")
    }
  })
  return parts
}

/**
 * A case from a recorded run (`RunRecord.record`, `AgentWorkflow.record`,
 * or read with `RunRecord.fromJsonl`): each trial replays the record on the
 * agent under test (`agent.replay`): no model or tool is called, and the
 * first request that differs from the recorded one (the prompt, the
 * messages, the tools offered) fails the case's {@link replaysAsRecorded}
 * assertion with the step and the field. The other assertions check the
 * replayed run as a live one: its events are those a live run of the
 * record emits (the recorded replies, tool calls and results, middleware
 * decisions), up to where a replay that diverged stopped.
 *
 * @example
 * ```ts
 * import type { RunRecord } from "@stepwise-agent/core"
 * import { Eval } from "@stepwise-agent/testing"
 *
 * declare const record: RunRecord.RunRecord
 * const recorded = Eval.fromRecord(record, { name: "support-42" })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromRecord = (
  record: RunRecord.RunRecord,
  options?: Partial<Omit<Case, "input" | "script" | "history" | "record">> | undefined
): Case => ({
  ...options,
  name: options?.name ?? record.header.threadId,
  input: record.header.input,
  record,
  assertions: [replaysAsRecorded, ...(options?.assertions ?? [])]
})

/**
 * Passes when the run is no replay, or its replay took every step as
 * recorded; fails with where it first differed: the step, the field and the
 * two values (`RunRecord.ReplayDiverged`). {@link fromRecord} puts it first
 * in the assertions of its case.
 *
 * @example
 * ```ts
 * import type { RunRecord } from "@stepwise-agent/core"
 * import { Eval } from "@stepwise-agent/testing"
 *
 * declare const record: RunRecord.RunRecord
 * const recorded: Eval.Case = { name: "support-42", input: [], record, assertions: [Eval.replaysAsRecorded] }
 * ```
 *
 * @since 0.1.0
 * @category assertions
 */
export const replaysAsRecorded: Assertion = {
  name: "replaysAsRecorded",
  check: (run) =>
    Effect.succeed(
      run.divergence === undefined
        ? pass("every request and the result as recorded")
        : fail(shorten(run.divergence.message, 400))
    )
}

// -----------------------------------------------------------------------------
// assertions
// -----------------------------------------------------------------------------

const pass = (reason: string): Verdict => ({ passed: true, reason })
const fail = (reason: string): Verdict => ({ passed: false, reason })

/** Text scrubbed of credentials and cut at `max` characters, for reasons. */
const shorten = (text: string, max: number): string => {
  const scrubbed = Secrets.scrubText(text)
  return scrubbed.length > max ? `${scrubbed.slice(0, max)}…` : scrubbed
}

/** A value as short JSON, for reasons. */
const show = (value: unknown, max = 200): string => {
  let text: string
  try {
    text = JSON.stringify(value, (_, v) =>
      typeof v === "bigint"
        ? `${v}n`
        : Schema.isSchema(v)
        ? `<${String(v.ast)}>`
        : typeof v === "function"
        ? "<function>"
        : v) ?? String(value)
  } catch {
    text = String(value)
  }
  return shorten(text, max)
}

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Whether `actual` matches `expected` partially and deeply: an object
 * matches when each of its keys matches (other keys of `actual` are
 * ignored), an array when it has as many elements and each matches, a
 * `Schema` when the value is of its type, a function when it returns `true`
 * for the value, anything else when equal.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 * import { Schema } from "effect"
 *
 * Eval.matches({ a: 1 }, { a: 1, b: 2 }) // true
 * Eval.matches({ q: (s: unknown) => typeof s === "string" }, { q: "weather" }) // true
 * Eval.matches({ n: Schema.Int }, { n: 3 }) // true
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const matches = (expected: unknown, actual: unknown): boolean => {
  if (Schema.isSchema(expected)) return Schema.is(expected as Schema.Schema<unknown, unknown, never>)(actual)
  if (typeof expected === "function") {
    try {
      return (expected as (value: unknown) => unknown)(actual) === true
    } catch {
      return false
    }
  }
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && actual.length === expected.length &&
      expected.every((item, index) => matches(item, actual[index]))
  }
  if (isRecord(expected)) {
    return isRecord(actual) && Object.keys(expected).every((key) =>
      expected[key] === undefined
        ? actual[key] === undefined
        : Object.prototype.hasOwnProperty.call(actual, key) && matches(expected[key], actual[key])
    )
  }
  return expected === actual || (Number.isNaN(expected) && Number.isNaN(actual))
}

/**
 * Builds an assertion: a name and a check of the run.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 * import { Effect } from "effect"
 *
 * const fewSteps = Eval.assertion("at most 3 model calls", (run) => {
 *   const calls = run.events.filter((event) => event._tag === "ModelResponded").length
 *   return Effect.succeed({ passed: calls <= 3, reason: `${calls} model call(s)` })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const assertion = (
  name: string,
  check: (run: Run) => Effect.Effect<Verdict>,
  invalid?: string | undefined
): Assertion => ({ name, check, ...(invalid === undefined ? {} : { invalid }) })

const invalidToolName = (tool: unknown): string | undefined =>
  typeof tool === "string" && tool.length > 0 ? undefined : `a tool name must be a non-empty string, got ${show(tool)}`

/**
 * Passes when the run called `tool`, and, with `args`, called it at least
 * once with arguments matching them partially and deeply ({@link matches}).
 * With `times`, the matching calls must number exactly that.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 *
 * const addsOne = Eval.toolCalled("add", { a: 1 })
 * const searchesTwice = Eval.toolCalled("search", undefined, { times: 2 })
 * ```
 *
 * @since 0.1.0
 * @category assertions
 */
export const toolCalled = (
  tool: string,
  args?: unknown,
  options?: { readonly times?: number | undefined } | undefined
): Assertion => {
  const times = options?.times
  const label = `toolCalled(${tool}${args === undefined ? "" : `, ${show(args)}`}` +
    `${times === undefined ? "" : `, ${times}×`})`
  return assertion(
    label,
    (run) =>
      Effect.sync(() => {
        const calls = run.toolCalls.filter((call) => call.name === tool)
        const matching = args === undefined ? calls : calls.filter((call) => matches(args, call.params))
        const seen = calls.map((call) => show(call.params, 120)).join(", ")
        if (times !== undefined) {
          return matching.length === times
            ? pass(`${tool} was called ${times} time(s) as asked`)
            : fail(
              `${tool} was called ${matching.length} time(s)${args === undefined ? "" : " with matching arguments"}, ` +
                `expected ${times}${calls.length > 0 ? ` (calls: ${seen})` : ""}`
            )
        }
        if (matching.length > 0) return pass(`${tool} was called ${matching.length} time(s) as asked`)
        if (calls.length === 0) {
          const names = [...new Set(run.toolCalls.map((call) => call.name))]
          return fail(`${tool} was never called (tools called: ${names.length === 0 ? "none" : names.join(", ")})`)
        }
        return fail(`${tool} was called ${calls.length} time(s), never with arguments matching ${show(args)}: ${seen}`)
      }),
    invalidToolName(tool) ?? (times !== undefined && !(Number.isInteger(times) && times >= 0)
      ? `times must be a whole number of at least 0, got ${times}`
      : undefined)
  )
}

/**
 * Passes when the run never called `tool`.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 *
 * const neverDeletes = Eval.toolNeverCalled("delete_file")
 * ```
 *
 * @since 0.1.0
 * @category assertions
 */
export const toolNeverCalled = (tool: string): Assertion =>
  assertion(
    `toolNeverCalled(${tool})`,
    (run) =>
      Effect.sync(() => {
        const calls = run.toolCalls.filter((call) => call.name === tool)
        return calls.length === 0
          ? pass(`${tool} was not called`)
          : fail(
            `${tool} was called ${calls.length} time(s): ${calls.map((call) => show(call.params, 120)).join(", ")}`
          )
      }),
    invalidToolName(tool)
  )

/**
 * Passes when the run completed.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 *
 * const finishes = Eval.completed
 * ```
 *
 * @since 0.1.0
 * @category assertions
 */
export const completed: Assertion = assertion("completed", (run) =>
  Effect.sync(() =>
    Option.match(run.result, {
      onNone: () => fail(`the run did not end: ${Option.getOrElse(run.error, () => "no result")}`),
      onSome: (result) =>
        result._tag === "Completed"
          ? pass("the run completed")
          : fail(`the run ended Interrupted, waiting on ${result.interrupt.middleware}`)
    })
  ))

/**
 * Passes when the run's final output matches `schema`: its structured
 * output when the agent has a `responseFormat` (validated as the decoded
 * value), otherwise its final text — parsed as JSON when it is JSON, taken as
 * a string when not — decoded with `schema`. The reason of a failure is the
 * schema's error.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 * import { Schema } from "effect"
 *
 * const answersANumber = Eval.outputMatches(Schema.Struct({ total: Schema.Number }))
 * ```
 *
 * @since 0.1.0
 * @category assertions
 */
export const outputMatches = <A, I>(schema: Schema.Schema<A, I, never>): Assertion =>
  assertion(`outputMatches(${shorten(String(schema.ast), 80)})`, (run) =>
    Effect.sync(() => {
      if (Option.isNone(run.result) || run.result.value._tag !== "Completed") {
        return fail(
          `the run has no final output: ${
            Option.isSome(run.result)
              ? "it ended Interrupted"
              : `it failed (${Option.getOrElse(run.error, () => "no result")})`
          }`
        )
      }
      const result = run.result.value
      const checked = Option.isSome(result.output)
        ? Schema.validateEither(schema)(result.output.value)
        : Schema.decodeUnknownEither(schema)(parseJsonOr(result.text))
      return Either.match(checked, {
        onLeft: (error) =>
          fail(
            `the ${Option.isSome(result.output) ? "structured output" : "final text"} does not match: ` +
              Secrets.scrubText(describeParseError(error))
          ),
        onRight: () => pass("the output matches the schema")
      })
    }))

const parseJsonOr = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * Passes when the run used at most `max` tokens: in total (the default), or
 * only `input` or `output` ones, summed over every model reply of the run
 * and its resumes (a subagent's included).
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 *
 * const cheap = Eval.tokensAtMost(2_000)
 * const shortAnswers = Eval.tokensAtMost(300, { kind: "output" })
 * ```
 *
 * @since 0.1.0
 * @category assertions
 */
export const tokensAtMost = (
  max: number,
  options?: { readonly kind?: "total" | "input" | "output" | undefined } | undefined
): Assertion => {
  const kind = options?.kind ?? "total"
  return assertion(
    `tokensAtMost(${max}${kind === "total" ? "" : `, ${kind}`})`,
    (run) =>
      Effect.sync(() => {
        const used = kind === "input"
          ? run.usage.inputTokens
          : kind === "output"
          ? run.usage.outputTokens
          : run.usage.totalTokens
        return used <= max
          ? pass(`${used} ${kind} tokens, at most ${max}`)
          : fail(`${used} ${kind} tokens, over the bound of ${max} (${usageText(run.usage)})`)
      }),
    !(Number.isFinite(max) && max >= 0)
      ? `the bound must be a finite number of at least 0, got ${max}`
      : unknownKeyReason(options, ["kind"]) ?? (!["total", "input", "output"].includes(kind)
        ? `kind must be "total", "input" or "output", got ${show(kind)}`
        : undefined)
  )
}

const usageText = (usage: Usage.Usage) => `${usage.inputTokens} input, ${usage.outputTokens} output tokens`

/**
 * A model's price per million tokens, in the currency of the bound.
 *
 * @since 0.1.0
 * @category models
 */
export interface Price {
  readonly inputPerMillion: number
  readonly outputPerMillion: number
}

/**
 * The cost of a run's usage at `price`.
 *
 * @example
 * ```ts
 * import { Usage } from "@stepwise-agent/core"
 * import { Eval } from "@stepwise-agent/testing"
 *
 * const usage = new Usage.Usage({ inputTokens: 1_000_000, outputTokens: 0, totalTokens: 1_000_000 })
 * Eval.costOf(usage, { inputPerMillion: 2.5, outputPerMillion: 10 }) // 2.5
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const costOf = (usage: Usage.Usage, price: Price): number =>
  (usage.inputTokens * price.inputPerMillion + usage.outputTokens * price.outputPerMillion) / 1_000_000

/**
 * Passes when the run cost at most `max` at `price` (per million input and
 * output tokens, in the currency of `max`), over every model reply of the
 * run and its resumes.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 *
 * const underACent = Eval.costAtMost(0.01, { inputPerMillion: 2.5, outputPerMillion: 10 })
 * ```
 *
 * @since 0.1.0
 * @category assertions
 */
export const costAtMost = (max: number, price: Price): Assertion => {
  const invalidPrice = (key: keyof Price) => {
    const value = price?.[key]
    return typeof value === "number" && Number.isFinite(value) && value >= 0
      ? undefined
      : `price.${key} must be a finite number of at least 0, got ${show(value)}`
  }
  return assertion(
    `costAtMost(${max})`,
    (run) =>
      Effect.sync(() => {
        const cost = costOf(run.usage, price)
        return cost <= max
          ? pass(`cost ${cost}, at most ${max}`)
          : fail(`cost ${cost}, over the bound of ${max} (${usageText(run.usage)})`)
      }),
    !(Number.isFinite(max) && max >= 0)
      ? `the bound must be a finite number of at least 0, got ${max}`
      : invalidPrice("inputPerMillion") ?? invalidPrice("outputPerMillion")
  )
}

/** Decisions made before a call starts that clear it to run: a person's (or an `Approvals` service's), or `when`'s. */
const clearing = /^(approve|edit) /
const freedByWhen = /need no decision \(when\)$/
/** Reports of the guard at the end of the `wrapToolCall` chain: it judged the call as it runs. */
const judgedWhereItRuns = / is not the call cleared to run: judged again$| did not run: /

/** The call ids a `HumanInTheLoop` decision is about. */
const callIdsOf = (data: unknown): ReadonlyArray<string> =>
  !isRecord(data)
    ? []
    : typeof data.callId === "string"
    ? [data.callId]
    : Array.isArray(data.callIds)
    ? data.callIds.filter((id): id is string => typeof id === "string")
    : []

/**
 * Passes when every call of the gated `tools` that ran had been cleared by
 * the `HumanInTheLoop` middleware (named `middleware`, default
 * `"humanInTheLoop"`): before it started, approved or edited (by a person
 * through `decide`, or by an `Approvals` service) or judged by its tool's
 * `when` to need no decision; or, while it ran, judged by the middleware's
 * guard where the tool runs. Read from the run's events, a subagent's run
 * judged on its own from its events (`SubAgentEvent`s: its calls cleared by
 * its own middleware). Each approval
 * clears one start of its call (provider call ids repeat across replies). A
 * call that ran without one names the assertion's failure (and the
 * subagent's run it ran in).
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 *
 * const gated = Eval.noApprovalBypassed(["delete_file", "send_email"])
 * ```
 *
 * @since 0.1.0
 * @category assertions
 */
export const noApprovalBypassed = (
  tools: ReadonlyArray<string>,
  options?: { readonly middleware?: string | undefined } | undefined
): Assertion => {
  const middleware = options?.middleware ?? "humanInTheLoop"
  const gated = new Set(Array.isArray(tools) ? tools : [])
  return assertion(
    `noApprovalBypassed(${[...gated].join(", ")})`,
    (run) =>
      Effect.sync(() => {
        const bypassed: Array<string> = []
        let ran = 0
        /** Judges the events of one run (`within`: the subagent's run they are of, none for the run's own). */
        const judge = (events: ReadonlyArray<AgentEvent.AgentEvent<unknown, unknown>>, within: string) => {
          /** Call ids cleared and not yet started. */
          const cleared = new Set<string>()
          /** Gated calls started and not yet completed, by id: whether they were cleared. */
          const running = new Map<string, { readonly label: string; cleared: boolean }>()
          /** The events of each subagent's run, by its thread: each is judged on its own (its call ids are its own). */
          const children = new Map<string, { readonly label: string; readonly events: Array<typeof events[number]> }>()
          for (const event of events) {
            if (event._tag === "SubAgentEvent") {
              let child = children.get(event.threadId)
              if (child === undefined) {
                child = { label: `${within} in ${event.agent} (${event.threadId})`, events: [] }
                children.set(event.threadId, child)
              }
              child.events.push(event.event)
              continue
            }
            if (event._tag === "MiddlewareDecision" && event.middleware === middleware) {
              const ids = callIdsOf(event.data)
              if (clearing.test(event.decision) || freedByWhen.test(event.decision)) {
                for (const id of ids) cleared.add(id)
              } else if (judgedWhereItRuns.test(event.decision)) {
                for (const id of ids) {
                  const call = running.get(id)
                  if (call !== undefined) call.cleared = true
                }
              }
            } else if (event._tag === "ToolCallStarted" && gated.has(event.call.name)) {
              ran++
              running.set(event.call.id, {
                label: `${event.call.name} (${event.call.id})${within}`,
                cleared: cleared.delete(event.call.id)
              })
            } else if (event._tag === "ToolCallCompleted") {
              const call = running.get(event.result.id)
              if (call !== undefined && !call.cleared) bypassed.push(call.label)
              running.delete(event.result.id)
            }
          }
          for (const call of running.values()) if (!call.cleared) bypassed.push(call.label)
          for (const child of children.values()) judge(child.events, child.label)
        }
        judge(run.events, "")
        return bypassed.length === 0
          ? pass(`${ran} gated call(s) ran, each cleared by ${middleware}`)
          : fail(`ran without an approval from ${middleware}: ${bypassed.join(", ")}`)
      }),
    !Array.isArray(tools) || gated.size === 0
      ? "name at least one gated tool"
      : unknownKeyReason(options, ["middleware"]) ?? tools.map(invalidToolName).find((reason) => reason !== undefined)
  )
}

/**
 * An assertion of your own: `check` returns `true`/`false` or a
 * {@link Verdict}, or an `Effect` or a `Promise` of one. A check that
 * throws, fails, rejects or dies fails the assertion with that reason; it
 * never fails the eval.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 * import { Option } from "effect"
 *
 * const polite = Eval.custom("says thanks", (run) =>
 *   Option.exists(run.result, (result) => result._tag === "Completed" && result.text.includes("thank")))
 * ```
 *
 * @since 0.1.0
 * @category assertions
 */
export const custom = (
  name: string,
  check: (
    run: Run
  ) => boolean | Verdict | Effect.Effect<boolean | Verdict, unknown> | PromiseLike<boolean | Verdict>
): Assertion =>
  assertion(name, (run) =>
    Effect.suspend((): Effect.Effect<unknown, unknown> => {
      const out = check(run)
      return Effect.isEffect(out)
        ? out
        : isPromiseLike(out)
        ? Effect.tryPromise({ try: () => Promise.resolve(out), catch: (error) => error })
        : Effect.succeed(out)
    }).pipe(
      Effect.map((out): Verdict =>
        typeof out === "boolean"
          ? out ? pass("returned true") : fail("returned false")
          : isRecord(out) && typeof out.passed === "boolean"
          ? { passed: out.passed, reason: String(out.reason ?? "") }
          : fail(`returned ${show(out)}, not a boolean or a verdict`)
      ),
      Effect.catchAllCause((cause) => Effect.succeed(fail(`the check failed: ${causeText(cause)}`)))
    ))

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  typeof value === "object" && value !== null && typeof (value as PromiseLike<unknown>).then === "function"

// -----------------------------------------------------------------------------
// running
// -----------------------------------------------------------------------------

/** An error's tag and message, scrubbed, in one line. */
const causeText = (cause: Cause.Cause<unknown>): string => {
  if (Cause.isInterruptedOnly(cause)) return "interrupted"
  const error = Option.getOrElse(
    Option.orElse(Cause.failureOption(cause), () => Cause.dieOption(cause)),
    () => Cause.pretty(cause)
  )
  const tag = isRecord(error) && typeof error._tag === "string" ? error._tag : undefined
  const message = error instanceof Error ? error.message : isRecord(error) ? show(error) : String(error)
  const text = tag === undefined || message.startsWith(tag) ? message : `${tag}: ${message}`
  return Secrets.scrubText(text.split("\n")[0] ?? text)
}

const usageOf = (events: ReadonlyArray<AgentEvent.AgentEvent<unknown, unknown>>): Usage.Usage => {
  let input = 0
  let output = 0
  let total = 0
  const visit = (event: AgentEvent.AgentEvent<unknown, unknown>) => {
    if (event._tag === "ModelResponded") {
      const reported = Usage.read(event.usage)
      const i = reported.inputTokens ?? 0
      const o = reported.outputTokens ?? 0
      input += i
      output += o
      total += reported.totalTokens ?? i + o
    } else if (event._tag === "SubAgentEvent") {
      visit(event.event)
    }
  }
  for (const event of events) visit(event)
  return new Usage.Usage({ inputTokens: input, outputTokens: output, totalTokens: total })
}

const toolCallsOf = (events: ReadonlyArray<AgentEvent.AgentEvent<unknown, unknown>>): ReadonlyArray<ToolCall> => {
  const calls: Array<ToolCall> = []
  for (const event of events) {
    if (event._tag === "ToolCallStarted") {
      calls.push({ id: event.call.id, name: event.call.name, params: event.call.params, result: Option.none() })
    } else if (event._tag === "ToolCallCompleted") {
      let index = calls.length - 1
      while (index >= 0 && !(calls[index]!.id === event.result.id && Option.isNone(calls[index]!.result))) index--
      if (index >= 0) calls[index] = { ...calls[index]!, result: Option.some(event.result) }
    }
  }
  return calls
}

interface Trial {
  readonly run: Run
  readonly verdicts: ReadonlyArray<Verdict>
}

const runTrial = <R>(
  suite: Suite<R>,
  { input, testCase, timeout }: Planned,
  trial: number,
  runId: string
): Effect.Effect<Trial, never, R> =>
  Effect.gen(function*() {
    const events: Array<AgentEvent.AgentEvent<unknown, unknown>> = []
    const record = testCase.record
    // a replay runs on its record's thread (it writes nothing there)
    const threadId = record?.header.threadId ?? `eval:${suite.name}:${testCase.name}:${trial}:${runId}`
    let result: Option.Option<AgentResult.AgentResult<unknown, unknown>> = Option.none()
    let divergence: RunRecord.ReplayDiverged | undefined
    const collect = (stream: Stream.Stream<AgentEvent.AgentEvent<unknown, unknown>, unknown>) =>
      Stream.runForEach(stream, (event) =>
        Effect.sync(() => {
          events.push(event)
          if (event._tag === "RunEnded") result = Option.some(event.result)
        }))
    const program = Effect.gen(function*() {
      const agent = yield* suite.agent
      if (record !== undefined) {
        // the replay's events are those of a live run of the record: every assertion reads them as it would
        const replayed = (record: RunRecord.RunRecord, options?: Agent.ReplayOptions) =>
          collect(agent.replayStream(record, options)).pipe(
            Effect.catchIf((error) => error instanceof RunRecord.ReplayDiverged, (diverged) =>
              Effect.sync(() => {
                divergence = diverged as RunRecord.ReplayDiverged
              }))
          )
        yield* replayed(record)
        // a replay that ends waiting goes on with the recorded resume: with the case's decision, else the recorded
        const resumes = testCase.resumes ?? []
        const maxResumes = testCase.decide === undefined ? resumes.length : testCase.maxResumes ?? 10
        for (let resumed = 0; divergence === undefined && resumed < maxResumes; resumed++) {
          const last = Option.getOrUndefined(result)
          if (last?._tag !== "Interrupted") break
          const next = resumes[resumed]
          if (next === undefined) {
            return yield* new RecordEndsWaiting({
              case: testCase.name,
              middleware: last.interrupt.middleware,
              resumes: resumed
            })
          }
          if (testCase.decide === undefined) {
            yield* replayed(next)
            continue
          }
          const decided = yield* Effect.try({ try: () => testCase.decide!(last.interrupt), catch: (error) => error })
          yield* replayed(next, { decision: Effect.isEffect(decided) ? yield* decided : decided })
        }
        return
      }
      yield* collect(agent.stream(input, { threadId }))
      const maxResumes = testCase.maxResumes ?? 10
      for (let resumes = 0; testCase.decide !== undefined && resumes < maxResumes; resumes++) {
        const last = Option.getOrUndefined(result)
        if (last?._tag !== "Interrupted") break
        const decided = yield* Effect.try({ try: () => testCase.decide!(last.interrupt), catch: (error) => error })
        const decision = Effect.isEffect(decided) ? yield* decided : decided
        yield* collect(agent.resumeStream(threadId, decision))
      }
    })
    // a replay calls no model: an empty script fails any call
    const model: Layer.Layer<LanguageModel.LanguageModel, unknown, any> = record !== undefined
      ? ScriptedModel.layer([])
      : testCase.script === undefined
      ? Option.getOrThrow(suite.model) // validate checked it is there
      : ScriptedModel.layer(testCase.script)
    const scripted = Effect.provide(program, model) as Effect.Effect<void, unknown, R>
    const bounded = Option.match(timeout, {
      onNone: () => scripted,
      onSome: (timeout) =>
        Effect.timeoutFail(scripted, {
          duration: timeout,
          onTimeout: () => new Error(`the run took longer than ${Duration.format(timeout)}`)
        })
    })
    const exit = yield* Effect.exit(Effect.scoped(bounded))
    const run: Run = {
      case: testCase.name,
      trial,
      threadId,
      events,
      result,
      error: Exit.isFailure(exit) ? Option.some(causeText(exit.cause)) : Option.none(),
      toolCalls: toolCallsOf(events),
      usage: usageOf(events),
      ...(divergence === undefined ? {} : { divergence })
    }
    const assertions = [...suite.assertions, ...(testCase.assertions ?? [])]
    const verdicts = yield* Effect.forEach(assertions, (assertion) =>
      Effect.suspend(() => assertion.check(run)).pipe(
        Effect.catchAllCause((cause) => Effect.succeed(fail(`the check failed: ${causeText(cause)}`)))
      ))
    return { run, verdicts }
  })

/** Whether `turn` is a `ScriptedModel.Turn`. */
const isTurn = (turn: unknown): boolean =>
  Array.isArray(turn) || typeof turn === "function" || AiError.isAiError(turn) ||
  (isRecord(turn) && turn._tag === "Truncated")

/** A case to run, checked: its input with the history before it, and the trial timeout. */
interface Planned {
  readonly testCase: Case
  readonly input: Prompt.Prompt
  readonly timeout: Option.Option<Duration.Duration>
}

/** Fails with `InvalidEval` at the first value of `assertions` that is not an assertion or was built wrong. */
const checkAssertions = (field: string, assertions: ReadonlyArray<Assertion>): Effect.Effect<void, InvalidEval> => {
  if (!Array.isArray(assertions)) return new InvalidEval({ field, reason: "must be a list of assertions" })
  for (const [index, assertion] of (assertions as ReadonlyArray<unknown>).entries()) {
    if (!isRecord(assertion) || typeof assertion.name !== "string" || typeof assertion.check !== "function") {
      return new InvalidEval({
        field: `${field}[${index}]`,
        reason: `not an assertion (one of Eval.toolCalled(…), Eval.custom(…), …): ${show(assertion, 80)}`
      })
    }
    const invalid = assertion.invalid
    if (invalid !== undefined) return new InvalidEval({ field: `${field}[${index}]`, reason: String(invalid) })
  }
  return Effect.void
}

const isRunRecord = Schema.is(RunRecord.RunRecord)

/** Fails with `InvalidEval` unless `resumes` are records of resumes of `record`'s thread, after a `record`. */
const checkResumes = (
  field: string,
  record: RunRecord.RunRecord | undefined,
  resumes: ReadonlyArray<RunRecord.RunRecord>
): Effect.Effect<void, InvalidEval> =>
  Effect.gen(function*() {
    if (record === undefined) {
      return yield* new InvalidEval({
        field,
        reason: "recorded resumes need the case's `record` (the run they resume)"
      })
    }
    if (!Array.isArray(resumes)) return yield* new InvalidEval({ field, reason: "must be a list of run records" })
    for (const [index, resume] of (resumes as ReadonlyArray<unknown>).entries()) {
      yield* checkRecord(`${field}[${index}]`, resume)
      const header = (resume as RunRecord.RunRecord).header
      if (header.resumed === undefined) {
        return yield* new InvalidEval({
          field: `${field}[${index}]`,
          reason: "not the record of a resumed run (RunRecord.recordResume)"
        })
      }
      if (header.threadId !== record.header.threadId) {
        return yield* new InvalidEval({
          field: `${field}[${index}]`,
          reason: `resumes the thread ${show(header.threadId)}, not the record's ${show(record.header.threadId)}`
        })
      }
    }
  })

/** Fails with `InvalidEval` when `record` is not a run record this build replays, saying why. */
const checkRecord = (field: string, record: unknown): Effect.Effect<void, InvalidEval> => {
  const version = isRecord(record) && isRecord(record.header) ? record.header.version : undefined
  if (version !== undefined && !RunRecord.versions.some((known) => known === version)) {
    return new InvalidEval({
      field,
      reason: `the record is of version ${show(version)}; this build replays versions ${RunRecord.versions.join(", ")}`
    })
  }
  return isRunRecord(record)
    ? Effect.void
    : new InvalidEval({ field, reason: "not a run record (RunRecord.record, RunRecord.fromJsonl, …)" })
}

/** The suite's problem, if any: the first bad option, named. */
const validate = <R>(
  suite: Suite<R>,
  only: ReadonlyArray<string> | undefined
): Effect.Effect<ReadonlyArray<Planned>, InvalidEval> =>
  Effect.gen(function*() {
    const invalid = (field: string, reason: string) => Effect.fail(new InvalidEval({ field, reason }))
    if (suite.invalid !== undefined) return yield* invalid(suite.invalid.field, suite.invalid.reason)
    if (typeof suite.name !== "string" || suite.name.length === 0) {
      return yield* invalid("name", "must be a non-empty string")
    }
    if (!Number.isInteger(suite.trials) || suite.trials < 1) {
      return yield* invalid("trials", `must be a whole number of at least 1, got ${suite.trials}`)
    }
    if (!Number.isInteger(suite.concurrency) || suite.concurrency < 1) {
      return yield* invalid("concurrency", `must be a whole number of at least 1, got ${suite.concurrency}`)
    }
    if (!(suite.passRate >= 0 && suite.passRate <= 1)) {
      return yield* invalid("passRate", `must be a number from 0 to 1, got ${suite.passRate}`)
    }
    const timeout = yield* Option.match(suite.timeout, {
      onNone: () => Effect.succeedNone,
      onSome: (input) =>
        Effect.flatMap(
          Effect.option(Effect.try(() => Duration.decode(input))),
          (decoded) =>
            Option.isSome(decoded) && Duration.toMillis(decoded.value) > 0
              ? Effect.succeed(decoded)
              : invalid("timeout", `must be a positive duration, got ${show(input)}`)
        )
    })
    if (!Array.isArray(suite.cases) || suite.cases.length === 0) return yield* invalid("cases", "must not be empty")
    const seen = new Set<string>()
    const cases: Array<Planned> = []
    for (const [index, testCase] of suite.cases.entries()) {
      const at = `cases[${index}]`
      // (a case that is not an object is named by its missing name, below)
      const unknown = typeof testCase === "object" && testCase !== null
        ? unknownKey("Eval", testCase, caseKeys, at)
        : undefined
      if (unknown !== undefined) return yield* invalid(unknown.option, unknown.reason)
      if (typeof testCase?.name !== "string" || testCase.name.length === 0) {
        return yield* invalid(`${at}.name`, "must be a non-empty string")
      }
      if (seen.has(testCase.name)) return yield* invalid(`${at}.name`, `two cases are named ${show(testCase.name)}`)
      if (testCase.script === undefined && testCase.record === undefined && Option.isNone(suite.model)) {
        return yield* invalid(`${at}.script`, "a case without a script needs the suite's model")
      }
      if (testCase.script !== undefined) {
        if (!Array.isArray(testCase.script)) return yield* invalid(`${at}.script`, "must be a list of turns")
        const bad = (testCase.script as ReadonlyArray<unknown>).findIndex((turn) => !isTurn(turn))
        if (bad >= 0) {
          return yield* invalid(
            `${at}.script[${bad}]`,
            "not a turn (a list of parts such as ScriptedModel.text(…), a function of the request, an AiError or " +
              `ScriptedModel.truncated(…)): ${show(testCase.script[bad], 80)}`
          )
        }
      }
      seen.add(testCase.name)
      const maxResumes = testCase.maxResumes
      if (maxResumes !== undefined && !(Number.isInteger(maxResumes) && maxResumes >= 0)) {
        return yield* invalid(`${at}.maxResumes`, `must be a whole number of at least 0, got ${maxResumes}`)
      }
      const conversation = (field: string, input: Prompt.RawInput) =>
        Effect.try({ try: () => Prompt.make(input), catch: (error) => error }).pipe(
          Effect.catchAll((error) =>
            invalid(`${at}.${field}`, `not a message or conversation: ${causeText(Cause.fail(error))}`)
          )
        )
      const history = yield* conversation("history", testCase.history ?? [])
      const input = Prompt.merge(history, yield* conversation("input", testCase.input))
      if (testCase.resumes !== undefined) {
        yield* checkResumes(`${at}.resumes`, testCase.record, testCase.resumes)
      }
      if (testCase.record !== undefined) {
        yield* checkRecord(`${at}.record`, testCase.record)
      } else if (input.content.length === 0) {
        // (a record's own input is replayed: the record of a resumed run has none)
        return yield* invalid(`${at}.input`, "has no message")
      }
      yield* checkAssertions(`${at}.assertions`, testCase.assertions ?? [])
      if (only === undefined || only.includes(testCase.name)) cases.push({ testCase, input, timeout })
    }
    yield* checkAssertions("assertions", suite.assertions)
    if (only !== undefined && (!Array.isArray(only) || only.length === 0)) {
      return yield* invalid("cases", "the cases to run must name at least one case")
    }
    for (const name of only ?? []) {
      if (!seen.has(name)) return yield* invalid("cases", `the suite has no case named ${show(name)}`)
    }
    return cases
  })

/**
 * The pass rate of `passes` out of `trials`.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 *
 * Eval.passRate(4, 5) // 0.8
 * ```
 *
 * @since 0.1.0
 * @category utility
 */
export const passRate = (passes: number, trials: number): number => trials === 0 ? 0 : passes / trials

const caseReport = (name: string, threshold: number, trials: ReadonlyArray<Trial>, names: ReadonlyArray<string>) => {
  const passes =
    trials.filter((trial) => Option.isNone(trial.run.error) && trial.verdicts.every((verdict) => verdict.passed)).length
  const rate = passRate(passes, trials.length)
  return CaseReport.make({
    name,
    trials: trials.length,
    passes,
    passRate: rate,
    passed: rate >= threshold,
    errors: trials.flatMap((trial) =>
      Option.match(trial.run.error, {
        onNone: () => [],
        onSome: (reason) => [{ trial: trial.run.trial, reason }]
      })
    ),
    assertions: names.map((assertion, index) => {
      const failures = trials.flatMap((trial) =>
        trial.verdicts[index]!.passed ? [] : [{ trial: trial.run.trial, reason: trial.verdicts[index]!.reason }]
      )
      const passes = trials.length - failures.length
      return { name: assertion, passes, trials: trials.length, passRate: passRate(passes, trials.length), failures }
    })
  })
}

/**
 * Runs the eval: every case (or only those named in `options.cases`)
 * `trials` times, `concurrency` trials at once, each on a fresh agent and
 * thread, and checks each run with the suite's and the case's assertions.
 * A trial passes when its run did not fail and every assertion passed; a
 * case passes when its pass rate reaches the suite's `passRate`. A run that
 * fails, times out or dies is a failed trial with its reason. Bad options
 * (a key it does not know included: `field` `"run.<key>"`) fail with
 * {@link InvalidEval} before anything runs.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 * import { Console, Effect } from "effect"
 *
 * declare const suite: Eval.Suite
 *
 * const program = Effect.gen(function*() {
 *   const report = yield* Eval.run(suite)
 *   yield* Console.log(Eval.table(report))
 *   return report.passed
 * })
 * ```
 *
 * @since 0.1.0
 * @category running
 */
export const run = <R>(
  suite: Suite<R>,
  options?: { readonly cases?: ReadonlyArray<string> | undefined } | undefined
): Effect.Effect<Report, InvalidEval, R> =>
  Effect.gen(function*() {
    const unknown = unknownKey("Eval", options, ["cases"], "run")
    if (unknown !== undefined) return yield* new InvalidEval({ field: unknown.option, reason: unknown.reason })
    const cases = yield* validate(suite, options?.cases)
    // in the thread ids: a second run of the eval on a lasting checkpointer starts fresh threads
    const runId = `${(yield* Clock.currentTimeMillis).toString(36)}${(yield* Random.nextInt).toString(36)}`
    const jobs = cases.flatMap((planned) =>
      Array.from({ length: suite.trials }, (_, index) => ({ planned, trial: index + 1 }))
    )
    const trials = yield* Effect.forEach(
      jobs,
      (job) => runTrial(suite, job.planned, job.trial, runId),
      { concurrency: suite.concurrency }
    )
    const reports = cases.map(({ testCase }) =>
      caseReport(
        testCase.name,
        suite.passRate,
        trials.filter((trial) => trial.run.case === testCase.name),
        [...suite.assertions, ...(testCase.assertions ?? [])].map((assertion) => assertion.name)
      )
    )
    return new Report({
      suite: suite.name,
      trials: suite.trials,
      threshold: suite.passRate === 0 ? 0 : suite.passRate, // not -0, which JSON writes as 0
      passed: reports.every((report) => report.passed),
      cases: reports
    })
  }).pipe(Effect.withSpan("Eval.run", { captureStackTrace: false }))

// -----------------------------------------------------------------------------
// reports
// -----------------------------------------------------------------------------

const percent = (rate: number) => `${Math.round(rate * 1000) / 10}%`

/**
 * The report as a text table: one row per case (passes, pass rate, pass or
 * FAIL), one row per assertion under it, and under each failing assertion
 * or failed run the reason of each failed trial. With `failuresOnly`, only
 * the failing cases and their failing assertions.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 *
 * declare const report: Eval.Report
 * const text = Eval.table(report)
 * // calculator: passed (2 case(s), 3 trial(s) each, pass rate needed 100%)
 * // case / assertion           passes  rate    result
 * // adds                       3/3     100%    pass
 * // …
 * ```
 *
 * @since 0.1.0
 * @category reports
 */
export const table = (
  report: Report,
  options?: { readonly failuresOnly?: boolean | undefined } | undefined
): string => {
  const failing = report.cases.filter((testCase) => !testCase.passed).length
  const lines: Array<[string, string, string, string]> = [["case / assertion", "passes", "rate", "result"]]
  const reasons = (failures: ReadonlyArray<Failure>) => {
    for (const failure of failures) {
      // a reason of several lines (a schema's error) stays under its trial
      lines.push([`    trial ${failure.trial}: ${failure.reason.split("\n").join("\n      ")}`, "", "", ""])
    }
  }
  for (const testCase of report.cases) {
    if (options?.failuresOnly === true && testCase.passed) continue
    lines.push([
      testCase.name,
      `${testCase.passes}/${testCase.trials}`,
      percent(testCase.passRate),
      testCase.passed ? "pass" : "FAIL"
    ])
    if (testCase.errors.length > 0) {
      lines.push([
        "  run failed",
        `${testCase.errors.length}/${testCase.trials}`,
        percent(passRate(testCase.errors.length, testCase.trials)),
        ""
      ])
      reasons(testCase.errors)
    }
    for (const assertion of testCase.assertions) {
      if (options?.failuresOnly === true && assertion.failures.length === 0) continue
      lines.push([
        `  ${assertion.name}`,
        `${assertion.passes}/${assertion.trials}`,
        percent(assertion.passRate),
        ""
      ])
      reasons(assertion.failures)
    }
  }
  const widths = [0, 1, 2].map((column) =>
    Math.max(
      ...lines.filter((line) => !line[0].startsWith("    trial ")).map((line) => line[column]!.length)
    )
  )
  const text = lines.map((line) =>
    line[0].startsWith("    trial ")
      ? line[0]
      : [line[0].padEnd(widths[0]!), line[1].padEnd(widths[1]!), line[2].padEnd(widths[2]!), line[3]].join("  ")
        .trimEnd()
  )
  const head = `${report.suite}: ${report.passed ? "passed" : `FAILED, ${failing} of ${report.cases.length} case(s)`}` +
    ` (${report.cases.length} case(s), ${report.trials} trial(s) each, pass rate needed ${percent(report.threshold)})`
  return [head, ...text].join("\n")
}

/**
 * Succeeds with the report when every case passed; otherwise fails with
 * {@link EvalFailed}, whose message is the table of the failing cases: for
 * a test of an eval with `@effect/vitest`.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 * import { Effect } from "effect"
 *
 * declare const suite: Eval.Suite
 * const checked = Eval.run(suite).pipe(Effect.flatMap(Eval.assertPassed))
 * ```
 *
 * @since 0.1.0
 * @category reports
 */
export const assertPassed = (report: Report): Effect.Effect<Report, EvalFailed> =>
  report.passed ? Effect.succeed(report) : Effect.fail(new EvalFailed({ report }))

/**
 * The report as JSON (the encoded {@link Report}), for a dashboard or a CI
 * artifact; {@link fromJson} reads it back.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 *
 * declare const report: Eval.Report
 * const json = Eval.toJson(report)
 * ```
 *
 * @since 0.1.0
 * @category reports
 */
export const toJson = (report: Report): string => JSON.stringify(Schema.encodeSync(Report)(report), null, 2)

/**
 * Reads a report {@link toJson} wrote; text that is not JSON or not a
 * report fails with {@link InvalidReport} saying what is wrong.
 *
 * @example
 * ```ts
 * import { Eval } from "@stepwise-agent/testing"
 *
 * declare const json: string
 * const report = Eval.fromJson(json) // Effect<Report, InvalidReport>
 * ```
 *
 * @since 0.1.0
 * @category reports
 */
export const fromJson = (json: string): Effect.Effect<Report, InvalidReport> =>
  Schema.decodeUnknown(Schema.parseJson(Report))(json).pipe(
    Effect.mapError((error) => new InvalidReport({ reason: describeParseError(error) }))
  )
