/**
 * A run as a value: its complete, versioned record, for replay and
 * regression tests.
 *
 * {@link record} runs the agent with a recording `RunJournal`: each step
 * the loop journals (the load of the thread, each look into the inbox and
 * the steer messages it took in, each model call, each tool call and its
 * result) is kept with its timing, each model call with the request as the
 * model got it (system prompt, messages, tools offered, tool choice, at the
 * end of the `wrapModelCall` chain, so after any redaction a middleware made)
 * and the reply at that point, each wait with what it asked, the run's
 * middleware decisions (`Middleware.report`, as its journal's witness sees
 * them, in the run's order) and its outcome. The journal is the record's
 * source because every effect of a run that a replay must serve goes through
 * it, in the order the run takes them, under names the replay gives again;
 * the run's result adds the outcome. Everything is scrubbed of known credentials
 * (`Secrets`) before it is kept, and the run's input is kept as the
 * `transformInput` hooks left it (a `Pii` middleware's redaction applied).
 *
 * A record is exported and imported as JSONL ({@link toJsonl},
 * {@link fromJsonl}): the first line the record's header with its `version`,
 * then one line per entry. `agent.replay(record)` runs the agent on it again
 * without calling the model or any tool.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type * as Agent from "./Agent.js"
import * as AgentError from "./AgentError.js"
import { describeParseError } from "./AgentError.js"
import type * as AgentEvent from "./AgentEvent.js"
import type * as AgentResult from "./AgentResult.js"
import * as EventLoop from "./EventLoop.js"
import * as Layered from "./internal/layeredJournal.js"
import { describeValue } from "./internal/options.js"
import { kept, keptAs, requestKeeper } from "./internal/plainJson.js"
import * as RunJournal from "./RunJournal.js"
import * as Secrets from "./Secrets.js"
import type * as Wait from "./Wait.js"

/**
 * The version of the record format this build writes. Version 2 keeps a
 * resumed run's decision encoded by its wait's decision schema (version 1
 * kept the decoded value as JSON); version 3 keeps the hooks that completed
 * inside a step a replay serves ({@link HookEntry}: a tool call's
 * `wrapToolCall` hooks) and a subagent's decisions and hooks, named by
 * the run they were made in (`run`).
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * const current = (record: RunRecord.RunRecord) => record.header.version === RunRecord.version
 * ```
 *
 * @since 0.1.0
 * @category constants
 */
export const version = 3 as const

/**
 * The versions of the record format this build reads and replays: this
 * one ({@link version}) and the older ones, each by its own rules.
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * const readable = (found: unknown) => RunRecord.versions.some((known) => known === found)
 * ```
 *
 * @since 0.1.0
 * @category constants
 */
export const versions = [1, 2, version] as const

/** Whether `found` is a version of the record format this build reads. */
const isReadable = (found: unknown): found is Header["version"] => versions.some((known) => known === found)

/** What a build says of a version of the record format it does not read. */
const unsupported = (found: unknown): string =>
  `the record is of version ${
    typeof found === "string" ? JSON.stringify(found.slice(0, 80)) : describeValue(found)
  }; this build reads versions ${versions.join(", ")}`

/**
 * Fails with `RunRecordError` (`UnsupportedVersion`, naming it) when
 * `record` is of a format version this build does not read: what a replay
 * or a fork of a record built in memory (not read by {@link fromJsonl},
 * which checks it) asks first.
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * declare const record: RunRecord.RunRecord
 * const readable = RunRecord.checkVersion(record) // Right(undefined) for a record this build reads
 * ```
 *
 * @since 0.1.0
 * @category validation
 */
export const checkVersion = (record: RunRecord): Either.Either<void, RunRecordError> =>
  // (from JavaScript, a value that is not a record has no header: it is malformed)
  !Predicate.hasProperty(record, "header") || !Predicate.isObject(record.header)
    ? Either.left(new RunRecordError({ reason: "Malformed", line: 1, detail: "the record has no header" }))
    : isReadable(record.header.version)
    ? Either.void
    : Either.left(
      new RunRecordError({ reason: "UnsupportedVersion", line: 1, detail: unsupported(record.header.version) })
    )

/**
 * One step of the run as its journal saw it: its name (`RunJournal.stepName`),
 * its kind, its result encoded with its key's schema, when it started and how
 * long it took. A model step that reached the model also has the request as
 * sent and the reply the model gave (before the `wrapModelCall` hooks on the
 * way back; `result` is the call as the loop stored it).
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * const isModelStep = (step: RunRecord.Step) => step.kind === "Model"
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const Step = Schema.TaggedStruct("Step", {
  name: Schema.String,
  kind: Schema.Literal("Load", "Checkpoint", "Inbox", "Model", "Tool", "Nested"),
  result: Schema.Unknown,
  sent: Schema.optional(Schema.encodedSchema(RunJournal.SentRequest)),
  reply: Schema.optional(Schema.Struct({
    message: Schema.encodedSchema(Prompt.AssistantMessage),
    usage: Schema.Unknown,
    finishReason: Schema.String
  })),
  startedAt: Schema.Number,
  durationMillis: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export type Step = typeof Step.Type

/**
 * A wait the run made: the interrupt's key, step, middleware, node and what
 * it asked (encoded by its wait's request schema, as the thread stores it);
 * with `decision`, the run went on past it with that decision (as posted:
 * encoded by its wait's decision schema, JSON), as a durable run does, and a
 * replay goes on with it.
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * const describe = (wait: RunRecord.WaitEntry) => `${wait.middleware} waits at step ${wait.step}`
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const WaitEntry = Schema.TaggedStruct("Wait", {
  key: Schema.String,
  step: Schema.Number,
  middleware: Schema.String,
  node: Schema.String,
  request: Schema.Unknown,
  decision: Schema.optional(Schema.Unknown)
})

/**
 * @since 0.1.0
 * @category models
 */
export type WaitEntry = typeof WaitEntry.Type

/**
 * A decision a middleware reported (`Middleware.report`, a `MiddlewareDecision` event),
 * in the run's order; one reported inside a model or tool call (a `wrapModelCall` or
 * `wrapToolCall` hook) just before that call's {@link Step}, with `inStep` naming it (a
 * replay that serves the call gives its decisions again). `run` names the subagent's run a
 * decision was made in (its journal path, `task/<callId>/<n>`; version 3), none for the
 * recorded run's own.
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * const blocked = (decision: RunRecord.Decision) => decision.decision === "block"
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const Decision = Schema.TaggedStruct("Decision", {
  middleware: Schema.String,
  hook: Schema.String,
  decision: Schema.String,
  data: Schema.Unknown,
  inStep: Schema.optional(Schema.String),
  run: Schema.optional(Schema.String)
})

/**
 * @since 0.1.0
 * @category models
 */
export type Decision = typeof Decision.Type

/**
 * A middleware hook that completed inside a step a replay serves (a
 * `HookCompleted` event: a tool call's `wrapToolCall` hooks), just before
 * that step's {@link Step}, with `inStep` naming it, in the run's order
 * among the step's decisions; `run` names the subagent's run it completed
 * in (its journal path, `task/<callId>/<n>`), none for the recorded run's
 * own. A replay that serves the step reports it again, with its recorded
 * duration. Version 3; a durable run's record has them too (the durable
 * journal keeps them with the step: `RunJournal.Witnessed`).
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * const wrapped = (entry: RunRecord.HookEntry) => entry.hook === "wrapToolCall"
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const HookEntry = Schema.TaggedStruct("Hook", {
  middleware: Schema.String,
  hook: Schema.String,
  durationMillis: Schema.Number,
  inStep: Schema.String,
  run: Schema.optional(Schema.String)
})

/**
 * @since 0.1.0
 * @category models
 */
export type HookEntry = typeof HookEntry.Type

/**
 * How the run ended: completed (with its text) or interrupted, its model
 * steps, usage and duration; for a durable run, also failed (with the
 * error's tag and message, scrubbed) or cancelled, its model steps and usage
 * then those of the model steps recorded.
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * const completed = (end: RunRecord.End) => end.outcome === "Completed"
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const End = Schema.TaggedStruct("End", {
  outcome: Schema.Literal("Completed", "Interrupted", "Failed", "Cancelled"),
  text: Schema.optional(Schema.String),
  error: Schema.optional(Schema.Struct({ tag: Schema.String, message: Schema.String })),
  steps: Schema.Number,
  usage: Schema.Struct({ inputTokens: Schema.Number, outputTokens: Schema.Number, totalTokens: Schema.Number }),
  durationMillis: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export type End = typeof End.Type

/**
 * One line of a record after its header.
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 * import { Schema } from "effect"
 *
 * const decodeLine = Schema.decodeUnknownEither(RunRecord.Entry)
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const Entry = Schema.Union(Step, WaitEntry, Decision, HookEntry, End)

/**
 * @since 0.1.0
 * @category models
 */
export type Entry = typeof Entry.Type

/**
 * The header of a record (its first JSONL line): the format `version`, the
 * thread, when the run started and its input as the `transformInput` hooks
 * left it; for the record of a resumed run ({@link recordResume}), the
 * `decision` it resumed with (as JSON) and no input; for the record of a
 * durable fork, `forkedFrom`: the thread (and run, when forked by its id) of
 * the record it forked and the model step `at` it forked before (its
 * entries before that step were served from that record).
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * const threadOf = (header: RunRecord.Header) => header.threadId
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const Header = Schema.TaggedStruct("RunRecord", {
  version: Schema.Literal(...versions),
  threadId: Schema.String,
  startedAt: Schema.Number,
  input: Schema.Array(Schema.encodedSchema(Prompt.Message)),
  resumed: Schema.optional(Schema.Struct({ decision: Schema.Unknown })),
  forkedFrom: Schema.optional(Schema.Struct({
    threadId: Schema.String,
    runId: Schema.optional(Schema.String),
    at: Schema.Number
  }))
})

/**
 * @since 0.1.0
 * @category models
 */
export type Header = typeof Header.Type

/**
 * A run's complete record: its header and its entries in the order they
 * were taken (steps in the order the journal ran them).
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * const modelSteps = (record: RunRecord.RunRecord) =>
 *   record.entries.filter((entry) => entry._tag === "Step" && entry.kind === "Model").length
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunRecord = Schema.Struct({ header: Header, entries: Schema.Array(Entry) })

/**
 * @since 0.1.0
 * @category models
 */
export type RunRecord = typeof RunRecord.Type

/**
 * A record that cannot be read: `line` (1-based) is not JSON or not an entry
 * (`Malformed`), is longer than the import allows (`TooLong`), or the record
 * is of another format version (`UnsupportedVersion`, naming it). `detail`
 * says what is wrong, never the line's content.
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const read = (text: string) =>
 *   RunRecord.fromJsonl(text).pipe(
 *     Effect.catchTag("RunRecordError", (error) => Effect.fail(`line ${error.line}: ${error.detail}`))
 *   )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class RunRecordError extends Schema.TaggedError<RunRecordError>("@stepwise-agent/core/RunRecordError")(
  "RunRecordError",
  {
    reason: Schema.Literal("Malformed", "TooLong", "UnsupportedVersion"),
    line: Schema.Number,
    detail: Schema.String
  }
) {
  get message(): string {
    return `run record, line ${this.line}: ${this.detail}`
  }
}

/**
 * The field of a model request, or the part of a run, where a replay first
 * differed from its record: the input, the decision a resumed run went on
 * with (`decision`: one given to the replay instead of the recorded one, or
 * given for a record of a run that was not resumed), a field of the request of model step
 * `step` (`systemPrompt`, `messages`, `tools`, `toolChoice`), or the steps
 * themselves (`steps`: the replay took a step the record lacks, or left
 * recorded steps untaken), or, when every request was the same, the result
 * (`result`: how the run ended, its model steps and its text, which an
 * `afterModel` hook may have changed). `recorded` and `actual` are the two
 * values as JSON (for `input`, `messages` and `tools`, the first element
 * that differs, at `index`).
 *
 * @example
 * ```ts
 * import type { RunRecord } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * declare const replayed: Effect.Effect<unknown, RunRecord.ReplayDiverged>
 * const explain = Effect.catchTag(replayed, "ReplayDiverged", (error) =>
 *   Effect.succeed(`step ${error.step}: ${error.field} changed`))
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ReplayDiverged extends Schema.TaggedError<ReplayDiverged>("@stepwise-agent/core/ReplayDiverged")(
  "ReplayDiverged",
  {
    step: Schema.Number,
    field: Schema.Literal("input", "decision", "systemPrompt", "messages", "tools", "toolChoice", "steps", "result"),
    index: Schema.optional(Schema.Number),
    recorded: Schema.Unknown,
    actual: Schema.Unknown
  }
) {
  get message(): string {
    const at = this.index === undefined ? "" : `[${this.index}]`
    return `the replay diverged at step ${this.step}, ${this.field}${at}: recorded ${
      JSON.stringify(this.recorded) ?? "nothing"
    }, actual ${JSON.stringify(this.actual) ?? "nothing"}`
  }
}

/**
 * The replay of a record that ended `Failed` or `Cancelled` reached the
 * point where the recorded run stopped: it asked for a step (model step
 * `step`, or a tool call after it) the record does not have, because the
 * run failed or was cancelled there. `error` is the recorded failure.
 *
 * @example
 * ```ts
 * import type { RunRecord } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * declare const replayed: Effect.Effect<unknown, RunRecord.ReplayStopped>
 * const where = Effect.catchTag(replayed, "ReplayStopped", (stopped) =>
 *   Effect.succeed(`${stopped.outcome} at step ${stopped.step}`))
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ReplayStopped extends Schema.TaggedError<ReplayStopped>("@stepwise-agent/core/ReplayStopped")(
  "ReplayStopped",
  {
    step: Schema.Number,
    outcome: Schema.Literal("Failed", "Cancelled"),
    error: Schema.optional(Schema.Struct({ tag: Schema.String, message: Schema.String }))
  }
) {
  get message(): string {
    return this.outcome === "Cancelled"
      ? `the replay reached step ${this.step}, where the recorded run was cancelled`
      : `the replay reached step ${this.step}, where the recorded run failed${
        this.error === undefined ? "" : ` (${this.error.tag}: ${this.error.message})`
      }`
  }
}

// -----------------------------------------------------------------------------
// recording
// -----------------------------------------------------------------------------

const keptMessage = keptAs(Prompt.AssistantMessage)

/** What a step's key gives, encoded as its journal would store it. */
const encodeResult = <A>(key: RunJournal.StepKey<A>, value: A): unknown =>
  Either.getOrElse(Schema.encodeEither(key.schema)(value), (): unknown => value)

/**
 * Where a recording journal ({@link recording}) puts what it sees: each
 * entry at its `slot` (0, 1, … in the order the run takes them; a wait's
 * slot is put again once it has its decision), and the run's input after
 * the `transformInput` hooks, encoded and scrubbed.
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const entries: Array<RunRecord.Entry> = []
 * const sink: RunRecord.Sink = {
 *   put: (slot, entry) => Effect.sync(() => { entries[slot] = entry }),
 *   input: () => Effect.void
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Sink {
  readonly put: (slot: number, entry: Entry) => Effect.Effect<void>
  readonly input: (messages: Header["input"]) => Effect.Effect<void>
  /** Optional: the decision a resumed run goes on with, as the thread stores it (JSON): the header's `resumed`. */
  readonly resumed?: ((decision: unknown) => Effect.Effect<void>) | undefined
}

/** How many recordings this process made: each names the service of its steps' decisions after its number. */
let recordings = 0

/**
 * What a recorder keeps of a step that runs, to put just before its entry: the decisions reported inside it and,
 * where a replay serves the step instead of running it (all but the recorded run's own model calls, whose
 * `wrapModelCall` hooks a replay runs again), the hooks that completed inside it, in the run's order.
 */
interface InStep {
  readonly entries: Array<RunJournal.Witnessed[number]>
  readonly keepsHooks: boolean
}

/**
 * A journal that records a run: each step goes through `journal` as it
 * would, and is put in `sink` with its result (encoded with its key's
 * schema), its timing (when the step ran in this process; a step `journal`
 * gave from its own journal has no duration) and, for a model call, the
 * request as sent and the reply; each wait is put before `journal` waits,
 * and again with the decision it gave when it gave one (a durable journal);
 * each middleware decision is put as it is reported, one reported inside a
 * step (and each hook that completed inside a step a replay serves) just
 * before the step's entry. A journal that replays steps without running
 * them gives those of each step back with it (`stepWitnessed`); under one
 * that replays steps and does not, a record keeps no hooks. `add` puts an entry
 * that is no step (the end). A replay or fork run under it (`agent.replay`,
 * `agent.fork` of a record) is recorded whole: each step it serves from its
 * record as well as those it runs live. Everything is scrubbed of known
 * credentials. `record` records in process with it;
 * `@stepwise-agent/workflow` records durable runs with it.
 *
 * @example
 * ```ts
 * import { RunJournal, RunRecord } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const entries: Array<RunRecord.Entry> = []
 * const { journal } = RunRecord.recording(RunJournal.inProcess, {
 *   put: (slot, entry) => Effect.sync(() => { entries[slot] = entry }),
 *   input: () => Effect.void
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const recording = (
  journal: RunJournal.Service,
  sink: Sink
): { readonly journal: RunJournal.Service; readonly add: (entry: Entry) => Effect.Effect<void> } => {
  const keeper = requestKeeper(true)
  const sent = new Map<number, Required<Pick<Step, "sent" | "reply">>>()
  const timings = new Map<string, { readonly startedAt: number; readonly durationMillis: number }>()
  let slots = 0
  const add = (entry: Entry) => Effect.suspend(() => sink.put(slots++, entry))
  // the decisions reported inside a step that runs, kept to be put just before the step's own entry: in the order
  // the steps end, whatever ran at once (parallel tool calls); a service of this recording's own (a recording
  // nested in another one has its own)
  const inStep = Context.GenericTag<InStep>(`@stepwise-agent/core/RunRecord/inStep/${recordings++}`)
  /** The recording journal over `under`: every step, wait and witnessed value of `under` is kept. */
  const over = (under: RunJournal.Service) =>
    RunJournal.RunJournal.of({
      durable: under.durable,
      await: (interrupt) =>
        Effect.suspend(() => {
          const slot = slots++
          const wait = WaitEntry.make({
            key: interrupt.key,
            step: interrupt.step,
            middleware: interrupt.middleware,
            node: interrupt.node,
            // kept as the thread and a durable journal keep them: encoded by the wait's schemas
            request: keptAs(interrupt.request)(interrupt.value)
          })
          return Effect.zipRight(
            sink.put(slot, wait),
            Effect.tap(under.await(interrupt), (decision) =>
              Option.isNone(decision)
                ? Effect.void
                : sink.put(slot, WaitEntry.make({ ...wait, decision: keptAs(interrupt.decision)(decision.value) })))
          )
        }),
      step: (key, effect) => {
        const name = RunJournal.stepName(key)
        // a journal that replays steps without running them gives back what was witnessed in them (`stepWitnessed`),
        // or else keeps no hooks: its record's slots must come out the same when a run executes again, and a step
        // it replays runs no hook
        const witnessing = under.stepWitnessed
        const step: InStep = {
          entries: [],
          keepsHooks: key._tag !== "Model" && (!under.durable || witnessing !== undefined)
        }
        // timed where it runs: a step the journal gives from its own record does not run
        const timed = Effect.flatMap(
          Clock.currentTimeMillis,
          (startedAt) =>
            Effect.tap(Effect.provideService(effect, inStep, step), () =>
              Effect.map(Clock.currentTimeMillis, (ended) => {
                timings.set(name, { startedAt, durationMillis: ended - startedAt })
              }))
        )
        const withWitnessed = <A>(value: A) => [value, step.entries.splice(0)] as const
        const putInStep = (entry: RunJournal.Witnessed[number]) =>
          add(
            entry._tag === "Decision"
              ? Decision.make({ ...entry, inStep: name })
              : HookEntry.make({ ...entry, inStep: name })
          )
        const putAll = (entries: RunJournal.Witnessed) => Effect.forEach(entries, putInStep, { discard: true })
        const taken = witnessing === undefined
          ? Effect.map(under.step(key, timed), withWitnessed)
          : witnessing(key, Effect.map(timed, withWitnessed))
        return taken.pipe(
          Effect.tap(([value, witnessed]) =>
            Effect.flatMap(Clock.currentTimeMillis, (now) => {
              const model = key._tag === "Model" ? sent.get(key.step) : undefined
              const timing = timings.get(name) ?? { startedAt: now, durationMillis: 0 }
              timings.delete(name)
              return Effect.zipRight(
                putAll(witnessed),
                add(Step.make({
                  name,
                  kind: key._tag,
                  result: kept(encodeResult(key, value)),
                  ...model,
                  ...timing
                }))
              )
            })
          ),
          Effect.map(([value]) => value),
          // what was witnessed before the step failed
          Effect.tapErrorCause(() => Effect.suspend(() => putAll(step.entries.splice(0))))
        )
      },
      // the journal's own witness (a replayer's) still sees and answers what this one records
      witness: {
        input: (messages) =>
          Effect.zipRight(
            Effect.suspend(() => sink.input(keeper.messages(messages) as Header["input"])),
            under.witness?.input(messages) ?? Effect.void
          ),
        resumed: (decision) =>
          Effect.zipRight(
            Effect.suspend(() => sink.resumed?.(kept(decision)) ?? Effect.void),
            under.witness?.resumed?.(decision) ?? Effect.void
          ),
        model: (request, call) =>
          Effect.tap(under.witness?.model(request, call) ?? call, (reply) =>
            Effect.sync(() => {
              sent.set(request.step, {
                sent: keeper.request(request),
                // plain JSON of the reply's encoded form, scrubbed: the shape `Step.reply` declares
                reply: kept({
                  message: keptMessage(reply.message),
                  usage: reply.usage,
                  finishReason: reply.finishReason
                }) as Step["reply"] & {}
              })
            })),
        // in the run's order, as reported (not as a stream reads its events); inside a step, just before it
        decision: (decision, run) =>
          Effect.flatMap(Effect.serviceOption(inStep), (step) => {
            const entry = Decision.make({
              middleware: decision.middleware,
              hook: decision.hook,
              decision: decision.decision,
              data: kept(decision.data),
              ...(run === undefined ? {} : { run })
            })
            return Effect.zipRight(
              Option.isNone(step) ? add(entry) : Effect.sync(() => void step.value.entries.push(entry)),
              under.witness?.decision?.(decision, run) ?? Effect.void
            )
          }),
        // only inside a step a replay serves: every other hook runs again in a replay, and reports itself
        hookCompleted: (completed, run) =>
          Effect.flatMap(Effect.serviceOption(inStep), (step) => {
            if (Option.isSome(step) && step.value.keepsHooks) {
              step.value.entries.push({
                _tag: "Hook",
                middleware: completed.middleware,
                hook: completed.hook,
                durationMillis: completed.durationMillis,
                ...(run === undefined ? {} : { run })
              })
            }
            return under.witness?.hookCompleted?.(completed, run) ?? Effect.void
          })
      }
    })
  return { journal: Layered.layer(over(journal), journal, over), add }
}

/**
 * The {@link End} entry of a run that ended with `outcome` after
 * `durationMillis`, its text scrubbed of known credentials.
 *
 * @example
 * ```ts
 * import type { AgentResult } from "@stepwise-agent/core"
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * declare const result: AgentResult.AgentResult<unknown>
 * const end = RunRecord.endOf(result, 1200)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const endOf = (outcome: AgentResult.AgentResult<unknown, unknown, any>, durationMillis: number): End =>
  End.make({
    outcome: outcome._tag,
    ...(outcome._tag === "Completed" ? { text: Secrets.scrubText(outcome.text) } : {}),
    steps: outcome.steps,
    usage: {
      inputTokens: outcome.usage.inputTokens,
      outputTokens: outcome.usage.outputTokens,
      totalTokens: outcome.usage.totalTokens
    },
    durationMillis
  })

/** A number of tokens an encoded usage holds, 0 when it holds none. */
const tokens = (usage: unknown, key: string): number =>
  Predicate.hasProperty(usage, key) && typeof usage[key] === "number" ? usage[key] : 0

/**
 * The {@link End} entry of a run that stopped before its end: `Failed`, with
 * its error's tag and message (scrubbed), or `Cancelled`, after
 * `durationMillis`. Its model steps and usage are those of the model steps
 * in `entries` (the record so far): a run that stopped has no result to
 * give them.
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * declare const record: RunRecord.RunRecord
 * const end = RunRecord.stoppedEnd(record.entries, { outcome: "Failed", error: new Error("model down") }, 900)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const stoppedEnd = (
  entries: ReadonlyArray<Entry>,
  stopped: { readonly outcome: "Failed"; readonly error: unknown } | { readonly outcome: "Cancelled" },
  durationMillis: number
): End => {
  const usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 }
  let steps = 0
  for (const entry of entries) {
    if (entry._tag !== "Step" || entry.kind !== "Model") continue
    steps++
    const used = Predicate.hasProperty(entry.result, "usage") ? entry.result.usage : undefined
    usage.inputTokens += tokens(used, "inputTokens")
    usage.outputTokens += tokens(used, "outputTokens")
    usage.totalTokens += tokens(used, "totalTokens")
  }
  if (stopped.outcome === "Cancelled") return End.make({ outcome: "Cancelled", steps, usage, durationMillis })
  const error = Secrets.scrubError(stopped.error)
  const tag = Predicate.hasProperty(error, "_tag") && typeof error._tag === "string" ? error._tag : "Defect"
  return End.make({
    outcome: "Failed",
    error: { tag, message: Secrets.messageOf(error) },
    steps,
    usage,
    durationMillis
  })
}

/**
 * Runs `events` (a run's stream) with a recording journal, and gives its result and record (with the decision a
 * resumed run went on with, as its journal's witness saw it).
 */
const recordStream = <S, E, O, W extends Wait.Any>(
  events: Stream.Stream<AgentEvent.AgentEvent<S, O, W>, Agent.RunError<E>>,
  threadId: string
): Effect.Effect<
  { readonly result: AgentResult.AgentResult<S, O, W>; readonly record: RunRecord },
  Agent.RunError<E>
> =>
  Effect.gen(function*() {
    const entries: Array<Entry> = []
    let input: Header["input"] = []
    let resumed: Header["resumed"]
    const { add, journal } = recording(RunJournal.inProcess, {
      put: (slot, entry) =>
        Effect.sync(() => {
          entries[slot] = entry
        }),
      input: (messages) =>
        Effect.sync(() => {
          input = messages
        }),
      resumed: (decision) =>
        Effect.sync(() => {
          resumed = { decision }
        })
    })
    const startedAt = yield* Clock.currentTimeMillis
    let result: AgentResult.AgentResult<S, O, W> | undefined
    // the middleware decisions come through the journal's witness, in the run's order
    yield* events.pipe(
      Stream.runForEach((event) =>
        Effect.sync(() => {
          if (event._tag === "RunEnded") result = event.result
        })
      ),
      Effect.provideService(RunJournal.RunJournal, journal)
    )
    const ended = yield* Clock.currentTimeMillis
    const outcome = result!
    yield* add(endOf(outcome, ended - startedAt))
    return {
      result: outcome,
      record: {
        header: Header.make({ version, threadId, startedAt, input, ...(resumed === undefined ? {} : { resumed }) }),
        entries
      }
    }
  })

/**
 * Runs `input` on the thread `options.threadId` as `agent.stream` does, with
 * a recording journal, and gives the run's result with its {@link RunRecord}.
 * The run is the same as without the record (same hooks, same model and tool
 * calls, same checkpoints); the record holds what the model was sent and
 * answered, each tool's result, each wait, each middleware decision and the
 * outcome, scrubbed of known credentials.
 *
 * @example
 * ```ts
 * import { Agent, RunRecord } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const recorded = Effect.gen(function*() {
 *   const agent = yield* Agent.Agent
 *   const { record, result } = yield* RunRecord.record(agent, "What is 6 times 7?", { threadId: "t1" })
 *   return RunRecord.toJsonl(record)
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const record = <S, E, O, W extends Wait.Any>(
  agent: Agent.Service<S, E, O, W>,
  input: Prompt.RawInput,
  options: Agent.RunOptions
): Effect.Effect<
  { readonly result: AgentResult.AgentResult<S, O, W>; readonly record: RunRecord },
  Agent.RunError<E>
> => recordStream(agent.stream(input, options), options.threadId)

/**
 * Resumes the thread `threadId`, waiting for a decision, with `decision` as
 * `agent.resumeStream` does, with a recording journal, and gives the resumed
 * run's result with its {@link RunRecord}: its header holds the decision
 * encoded by the wait's decision schema, with the texts a person typed in it
 * redacted as the agent's input is (as `agent.validateResume` gives it and
 * the thread stores it), and no input; its entries the load of the waiting
 * thread and every step after the decision. A decision the wait refuses, or
 * whose encoded form JSON cannot keep, fails with `InvalidResume` before
 * the run starts. `agent.replay` decodes the decision and resumes the
 * recorded thread with it again, and `agent.fork` forks it, as for any
 * record.
 *
 * @example
 * ```ts
 * import { Agent, RunRecord } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * const approved = Effect.gen(function*() {
 *   const agent = yield* Agent.Agent
 *   const { record } = yield* RunRecord.recordResume(agent, "t1", { go: true })
 *   return RunRecord.toJsonl(record)
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const recordResume = <S, E, O, W extends Wait.Any>(
  agent: Agent.Service<S, E, O, W>,
  threadId: string,
  decision: Wait.DecisionOf<W>
): Effect.Effect<
  { readonly result: AgentResult.AgentResult<S, O, W>; readonly record: RunRecord },
  Agent.RunError<E>
> =>
  // the run checks the decision once, as posted, and shows it to the recorder as the thread stores it (encoded,
  // what a person typed redacted); a replay decodes it
  recordStream(agent.resumeStream(threadId, decision), threadId)

// -----------------------------------------------------------------------------
// JSONL
// -----------------------------------------------------------------------------

/**
 * The record as JSONL: its header on the first line, then one entry a line.
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 *
 * declare const record: RunRecord.RunRecord
 * const text = RunRecord.toJsonl(record) // '{"_tag":"RunRecord","version":2,…}\n{"_tag":"Step",…}\n…'
 * ```
 *
 * @since 0.1.0
 * @category encoding
 */
export const toJsonl = (record: RunRecord): string => {
  const lines = [JSON.stringify(record.header)]
  for (const entry of record.entries) lines.push(JSON.stringify(entry))
  return lines.join("\n") + "\n"
}

/**
 * Options of {@link fromJsonl}.
 *
 * @since 0.1.0
 * @category models
 */
export interface FromJsonlOptions {
  /** The longest line read, in characters (default 16 MiB): a longer one fails with `TooLong` before it is parsed. */
  readonly maxLineLength?: number | undefined
  /**
   * The most characters the whole input may hold (default 512 MiB): a longer
   * one fails with `TooLong` where it goes past, so an endless stream of
   * valid lines cannot take all the memory.
   */
  readonly maxLength?: number | undefined
}

/** A positive whole number of characters, or why `value` is not one. */
const lengthOption = (option: string, value: unknown, fallback: number): number | AgentError.InvalidOptions =>
  value === undefined
    ? fallback
    : typeof value === "number" && Number.isSafeInteger(value) && value >= 1
    ? value
    : new AgentError.InvalidOptions({
      module: "RunRecord",
      option: `fromJsonl.${option}`,
      reason: `must be a whole number of at least 1, got ${describeValue(value)}`
    })

const decodeHeader = Schema.decodeUnknownEither(Header)
const decodeEntry = Schema.decodeUnknownEither(Entry)

/** A line as JSON, or what is wrong with it. */
const parseLine = (text: string, line: number): Either.Either<unknown, RunRecordError> => {
  try {
    return Either.right(JSON.parse(text))
  } catch (error) {
    return Either.left(
      new RunRecordError({
        reason: "Malformed",
        line,
        detail: `not JSON (${error instanceof Error ? error.message : String(error)})`
      })
    )
  }
}

/** The header of line 1, or why it is none: another version is named. */
const readHeader = (json: unknown): Either.Either<Header, RunRecordError> => {
  if (Predicate.hasProperty(json, "_tag") && json._tag === "RunRecord") {
    const found = Predicate.hasProperty(json, "version") ? json.version : undefined
    if (!isReadable(found)) {
      return Either.left(new RunRecordError({ reason: "UnsupportedVersion", line: 1, detail: unsupported(found) }))
    }
  }
  return Either.mapLeft(decodeHeader(json), (error) =>
    new RunRecordError({
      reason: "Malformed",
      line: 1,
      detail: `not a run record header: ${describeParseError(error)}`
    }))
}

/** The text as chunks of at most 64 KiB, so a large string is read as a stream. */
const chunked = (text: string): Stream.Stream<string> =>
  Stream.fromIterable({
    *[Symbol.iterator]() {
      for (let i = 0; i < text.length; i += 65_536) yield text.slice(i, i + 65_536)
    }
  })

/**
 * Reads a record from JSONL, as text or as a stream of text chunks (a file
 * read with `@effect/platform`'s `FileSystem.stream` and decoded). The input
 * is read a chunk at a time (other fibers run between chunks) and a line
 * over `maxLineLength` fails before it is parsed, so a huge or hostile input
 * never blocks the process. A line that is not JSON or not an entry fails
 * with `RunRecordError` (`Malformed`) naming the line and what is wrong; a
 * record of another format version with `UnsupportedVersion`, naming it.
 * Blank lines are skipped.
 *
 * @example
 * ```ts
 * import { RunRecord } from "@stepwise-agent/core"
 * import { Effect } from "effect"
 *
 * declare const text: string
 * const replayable = RunRecord.fromJsonl(text).pipe(Effect.map((record) => record.entries.length))
 * ```
 *
 * @since 0.1.0
 * @category decoding
 */
export function fromJsonl<E = never, R = never>(
  input: string | Stream.Stream<string, E, R>
): Effect.Effect<RunRecord, RunRecordError | E, R>
export function fromJsonl<E = never, R = never>(
  input: string | Stream.Stream<string, E, R>,
  options: FromJsonlOptions | undefined
): Effect.Effect<RunRecord, RunRecordError | AgentError.InvalidOptions | E, R>
export function fromJsonl<E = never, R = never>(
  input: string | Stream.Stream<string, E, R>,
  options?: FromJsonlOptions
): Effect.Effect<RunRecord, RunRecordError | AgentError.InvalidOptions | E, R> {
  const unknown = AgentError.unknownOption("RunRecord", options, ["maxLineLength", "maxLength"], "fromJsonl")
  if (unknown !== undefined) return Effect.fail(unknown)
  const maxLineLength = lengthOption("maxLineLength", options?.maxLineLength, 16 * 1024 * 1024)
  if (maxLineLength instanceof AgentError.InvalidOptions) return Effect.fail(maxLineLength)
  const maxLength = lengthOption("maxLength", options?.maxLength, 512 * 1024 * 1024)
  if (maxLength instanceof AgentError.InvalidOptions) return Effect.fail(maxLength)
  const source = typeof input === "string" ? chunked(input) : input
  return Effect.suspend(() => {
    /** The characters read so far. */
    let length = 0
    let header: Header | undefined
    const entries: Array<Entry> = []
    let pending = ""
    let line = 0
    const take = (text: string): Either.Either<void, RunRecordError> => {
      line++
      // a byte order mark opens some files
      if (line === 1 && text.charCodeAt(0) === 0xfeff) text = text.slice(1)
      if (text.trim() === "") return Either.void
      const json = parseLine(text, line)
      if (Either.isLeft(json)) return json
      if (header === undefined) {
        const read = readHeader(json.right)
        if (Either.isLeft(read)) return Either.left(new RunRecordError({ ...read.left, line }))
        header = read.right
        return Either.void
      }
      const entry = decodeEntry(json.right)
      if (Either.isLeft(entry)) {
        return Either.left(
          new RunRecordError({
            reason: "Malformed",
            line,
            detail: `not a run record entry: ${describeParseError(entry.left)}`
          })
        )
      }
      entries.push(entry.right)
      return Either.void
    }
    const tooLong = () =>
      new RunRecordError({
        reason: "TooLong",
        line: line + 1,
        detail: `the line is longer than ${maxLineLength} characters`
      })
    const chunk = (text: string): Effect.Effect<void, RunRecordError> => {
      length += text.length
      if (length > maxLength) {
        return Effect.fail(
          new RunRecordError({
            reason: "TooLong",
            line: line + 1,
            detail: `the record is longer than ${maxLength} characters`
          })
        )
      }
      let start = 0
      for (let end = text.indexOf("\n"); end !== -1; end = text.indexOf("\n", start)) {
        const piece = pending + text.slice(start, end)
        pending = ""
        if (piece.length > maxLineLength) return Effect.fail(tooLong())
        const taken = take(piece.endsWith("\r") ? piece.slice(0, -1) : piece)
        if (Either.isLeft(taken)) return Effect.fail(taken.left)
        start = end + 1
      }
      pending += text.slice(start)
      return pending.length > maxLineLength ? Effect.fail(tooLong()) : Effect.void
    }
    // what was read since the event loop last ran: past 1 MiB, other work runs before the next chunk
    let unyielded = 0
    const read = (text: string) =>
      Effect.zipRight(
        chunk(text),
        Effect.suspend(() => {
          unyielded += text.length
          if (unyielded < 1024 * 1024) return Effect.void
          unyielded = 0
          return EventLoop.turn
        })
      )
    return Stream.runForEachChunk(
      source,
      (texts) => Effect.forEach(Chunk.toReadonlyArray(texts), read, { discard: true })
    ).pipe(
      Effect.flatMap(() => {
        if (pending !== "") {
          const taken = take(pending)
          pending = ""
          if (Either.isLeft(taken)) return Effect.fail(taken.left)
        }
        return header === undefined
          ? Effect.fail(new RunRecordError({ reason: "Malformed", line: 1, detail: "the input has no header line" }))
          : Effect.succeed({ header, entries })
      })
    )
  })
}
