/**
 * `Agent.replay`: a run of the agent on a `RunRecord` through a replaying
 * journal. The loop and every hook run again; the journal serves the
 * recorded load, inbox looks and tool results (no tool runs, no checkpoint
 * is written), and its witness answers each model call with the recorded
 * reply after comparing the request with the one recorded. The first
 * difference ends the replay as `ReplayDiverged`, whatever a middleware
 * does with the failure.
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { describeParseError } from "../AgentError.js"
import type * as AgentResult from "../AgentResult.js"
import * as Fork from "../Fork.js"
import * as RunJournal from "../RunJournal.js"
import * as RunRecord from "../RunRecord.js"
import * as Secrets from "../Secrets.js"
import * as Checkpoint from "./checkpoint.js"
import * as Layered from "./layeredJournal.js"
import * as Observer from "./observer.js"
import { kept as plainJson, requestKeeper, same } from "./plainJson.js"
import * as ToolResult from "./toolResult.js"

type Field = RunRecord.ReplayDiverged["field"]

/** The first element of two arrays that differs, with its index; `undefined` when they are the same. */
const firstDifference = (
  recorded: ReadonlyArray<unknown>,
  actual: ReadonlyArray<unknown>
): { readonly index: number; readonly recorded: unknown; readonly actual: unknown } | undefined => {
  const length = Math.max(recorded.length, actual.length)
  for (let index = 0; index < length; index++) {
    if (!same(recorded[index], actual[index])) return { index, recorded: recorded[index], actual: actual[index] }
  }
  return undefined
}

/**
 * The decisions of `since` (those recorded after the step before `step`) that were reported inside `step`: those
 * it names (`inStep`), or, in a record made before decisions named their step, the `wrapToolCall` ones just
 * before a tool call's entry.
 */
const decisionsIn = (
  step: RunRecord.Step,
  since: ReadonlyArray<RunRecord.Decision | RunRecord.HookEntry>
): Array<RunRecord.Decision | RunRecord.HookEntry> => {
  // (a hook entry always names its step; a record with hook entries names every decision's)
  if (since.every((entry) => entry._tag === "Hook") || since.some((entry) => entry.inStep !== undefined)) {
    return since.filter((entry) => entry.inStep === step.name)
  }
  if (step.kind !== "Tool" && step.kind !== "Nested") return []
  let first = since.length
  while (first > 0 && since[first - 1]!.hook === "wrapToolCall") first--
  return since.slice(first)
}

/**
 * Reports the decisions and completed hooks of a served step again, as recorded, where the step ran them: to the
 * run's events and, unless `eventsOnly` (a recorder gets them with the step: `stepWitnessed`), its witness
 * (`hookCompleted`: that of the replay's journal, a recorder's, named by the run the hook completed in; a decision
 * goes to the witness of the run reporting it).
 */
const reportAgain = (
  entries: ReadonlyArray<RunRecord.Decision | RunRecord.HookEntry>,
  witnessHooks: RunJournal.Witness["hookCompleted"],
  eventsOnly: boolean
): Effect.Effect<void> => {
  const hookCompleted = eventsOnly ? undefined : witnessHooks
  return entries.length === 0 ? Effect.void : Effect.forEach(
    entries,
    (entry) => {
      if (entry._tag === "Decision") {
        const decided = Observer.decided({
          middleware: entry.middleware,
          hook: entry.hook,
          decision: entry.decision,
          data: entry.data
        })
        return eventsOnly ? Effect.provideService(decided, Observer.DecisionWitness, undefined) : decided
      }
      const completed = { middleware: entry.middleware, hook: entry.hook, durationMillis: entry.durationMillis }
      return hookCompleted === undefined
        ? Observer.hookReplayed(completed)
        : Effect.zipRight(Observer.hookReplayed(completed), hookCompleted(completed, entry.run))
    },
    { discard: true }
  )
}

/** The decisions and hooks a record names in a step, as a recorder saw them there. */
const witnessedOf = (entries: ReadonlyArray<RunRecord.Decision | RunRecord.HookEntry>): RunJournal.Witnessed =>
  entries.map(({ inStep: _, ...entry }) => entry)

/**
 * How a replay gives a step: as its result alone (`step`), or with what a recorder saw inside it beside it
 * (`stepWitnessed`): `of` gives a result the replay makes (served, edited) with what was witnessed, `value` and
 * `witnessed` read a given one, `own` is a fork's own step in the journal of its context.
 */
interface GivenAs<A, J> {
  readonly withWitnessed: boolean
  readonly of: (value: A, witnessed: RunJournal.Witnessed) => J
  readonly value: (given: J) => A
  readonly witnessed: (given: J) => RunJournal.Witnessed
  readonly own: <E, R>(effect: Effect.Effect<J, E, R>) => Effect.Effect<J, E, R>
}

const decodeMessage = Schema.decodeUnknown(Prompt.AssistantMessage)
const decodeUsage = Schema.decodeUnknown(Response.Usage)
const decodeFinish = Schema.decodeUnknown(Response.FinishReason)

/**
 * A fork of a recorded run: the recorded steps before model step `at` are
 * served (without comparing), with the result of the call `toolResult.callId`
 * replaced and `message` taken in before step `at`; from step `at` on the run
 * is live (model, tools, checkpoints of its thread).
 */
export interface Live {
  readonly at: number
  readonly message?: ReadonlyArray<Prompt.Message> | undefined
  readonly toolResult?: { readonly callId: string; readonly result: unknown; readonly isFailure: boolean } | undefined
}

type Run = Effect.Effect<AgentResult.AgentResult<any>, unknown, any>

/**
 * How a replay runs the agent, with the journal of the context: a run of an input, or a resume of a thread with a
 * decision, `encoded` by the wait's decision schema as a record of version 2 keeps it (the thread's wait decodes
 * it), or else the decoded value as JSON (version 1).
 */
export interface Runs {
  readonly start: (input: Prompt.RawInput, threadId: string) => Run
  readonly resume: (threadId: string, decision: unknown, encoded: boolean) => Run
}

/**
 * Replays `record` with `runs` (a record of a resumed run resumes its
 * thread with its decision); with `live`, forks it instead, on `threadId`:
 * the fork's own steps (its load, checkpoints, live calls, waits) go through
 * the journal of the caller's context (a durable one journals them), and its
 * load, under the thread's lock, fails with `ForkError` (`ThreadExists`) when
 * the thread is there already. Under a recording journal, the recorder
 * records the replay's own journal (every step, served or live) and the
 * live steps go to the journal it records.
 */
export const replay = (
  record: RunRecord.RunRecord,
  runs: Runs,
  live?: Live & { readonly threadId: string },
  decision?: unknown
): Run =>
  Effect.flatMap(
    Effect.serviceOption(RunJournal.RunJournal),
    (outer) => replayWith(record, runs, Option.getOrElse(outer, () => RunJournal.inProcess), live, decision)
  )

const replayWith = (
  record: RunRecord.RunRecord,
  runs: Runs,
  context: RunJournal.Service,
  live: (Live & { readonly threadId: string }) | undefined,
  // a decision to resume the record of a resumed run with, instead of the recorded one
  decision: unknown
): Run =>
  Effect.suspend(() => {
    // a recorder in the context records this replay's journal; the live steps go to the journal it records
    const layers = Layered.layersOf(context)
    const outer = layers?.under ?? context
    const readable = RunRecord.checkVersion(record)
    if (Either.isLeft(readable)) return Effect.fail(readable.left)
    // the recorded steps by name, with their line (the header is line 1) and whether the replay took them
    const steps = new Map<string, { readonly step: RunRecord.Step; readonly line: number; taken: boolean }>()
    // the decisions the run went on with past its waits (a durable run's, by the interrupt's key)
    const decisions = new Map<string, unknown>()
    const modelSteps = new Map<number, RunRecord.Step>()
    // the model step each recorded step came after (a tool call belongs to the reply before it)
    const stepOf = new Map<string, number>()
    let lastModel = 0
    // the middleware decisions reported inside each recorded step: a served step reports them again
    const inStep = new Map<string, Array<RunRecord.Decision | RunRecord.HookEntry>>()
    let since: Array<RunRecord.Decision | RunRecord.HookEntry> = []
    record.entries.forEach((entry, i) => {
      if (entry._tag === "Wait" && entry.decision !== undefined) decisions.set(entry.key, entry.decision)
      if (entry._tag === "Decision" || entry._tag === "Hook") since.push(entry)
      if (entry._tag !== "Step") return
      inStep.set(entry.name, decisionsIn(entry, since))
      since = []
      steps.set(entry.name, { step: entry, line: i + 2, taken: false })
      if (entry.kind === "Model") {
        lastModel = Number(entry.name.slice("model/".length))
        modelSteps.set(lastModel, entry)
      }
      stepOf.set(entry.name, lastModel)
    })
    // what the replay compares: as it is first, then (where it differs) scrubbed as recorded
    const plain = requestKeeper(false)
    const scrubbed = requestKeeper(true)
    let diverged: RunRecord.ReplayDiverged | RunRecord.ReplayStopped | undefined
    let currentStep = 0
    // the model steps taken so far; from `live.at` on, a fork runs live
    let taken = 0
    const isLive = () => live !== undefined && taken > live.at
    // how the recorded run ended: one that failed or was cancelled has no steps past where it stopped
    let end: RunRecord.End | undefined
    for (const entry of record.entries) if (entry._tag === "End") end = entry
    const stoppedAs = end?.outcome === "Failed" || end?.outcome === "Cancelled" ? end : undefined
    const diverge = (step: number, field: Field, recorded: unknown, actual: unknown, index?: number) => {
      if (field === "steps" && recorded === undefined && stoppedAs !== undefined) {
        // the replay asks for a step the record lacks: where the recorded run stopped
        diverged ??= new RunRecord.ReplayStopped({
          step,
          outcome: stoppedAs.outcome as "Failed" | "Cancelled",
          ...(stoppedAs.error === undefined ? {} : { error: stoppedAs.error })
        })
        return Effect.fail(diverged) as Effect.Effect<never, any>
      }
      diverged ??= new RunRecord.ReplayDiverged({
        step,
        field,
        recorded,
        actual,
        ...(index === undefined ? {} : { index })
      })
      return Effect.fail(diverged) as Effect.Effect<never, any>
    }
    const unreadable = (line: number, error: ParseResult.ParseError) =>
      Effect.fail(
        new RunRecord.RunRecordError({
          reason: "Malformed",
          line,
          detail: `the recorded result does not decode: ${describeParseError(error)}`
        })
      ) as Effect.Effect<never, any>

    /** The recorded result of `key`, decoded with its schema. */
    const served = <A>(key: RunJournal.StepKey<A>, at: { readonly step: RunRecord.Step; readonly line: number }) =>
      Effect.catchTag(
        Schema.decodeUnknown(key.schema)(at.step.result),
        "ParseError",
        (error) => unreadable(at.line, error)
      ) as Effect.Effect<A, any>

    /** The step `key` names, given as `as`. */
    const stepAs = <A, J, E, R>(
      key: RunJournal.StepKey<A>,
      as: GivenAs<A, J>,
      effect: Effect.Effect<J, E, R>
    ): Effect.Effect<J, E, R> => {
      const name = RunJournal.stepName(key)
      const at = steps.get(name)
      if (at !== undefined) at.taken = true
      const given = (value: Effect.Effect<A, E, R>, witnessed: RunJournal.Witnessed = []) =>
        Effect.map(value, (result) => as.of(result, witnessed))
      switch (key._tag) {
        case "Load": {
          const recorded = at === undefined ? Effect.succeed(key.result.to(Option.none())) : served(key, at)
          if (live === undefined) return given(recorded)
          // the fork's thread, read under its lock as the run starts: of two forks to it, the second finds it
          return Effect.flatMap(as.own(effect), (existing) => {
            const target = key.result.from(as.value(existing))
            if (Option.isSome(target) && !Checkpoint.isUnsaved(target.value)) {
              return Effect.fail(
                new Fork.ForkError({
                  reason: "ThreadExists",
                  threadId: record.header.threadId,
                  detail: `the thread "${live.threadId}" already exists`
                })
              ) as Effect.Effect<never, any>
            }
            // the fork is a thread of its own: the recorded thread, under the incarnation its load gave it, and
            // not stored yet (its first save expects no thread)
            const incarnation = Option.isSome(target) ? target.value.incarnation : undefined
            return Effect.map(recorded, (loaded) => {
              const thread = key.result.from(loaded)
              return Option.isNone(thread) ? existing : as.of(
                key.result.to(Option.some(
                  incarnation === undefined
                    ? Checkpoint.withoutIncarnation(thread.value)
                    : { ...thread.value, incarnation }
                )),
                []
              )
            })
          })
        }
        case "Checkpoint":
          return live === undefined ? Effect.succeed(as.of(key.result.to(undefined), [])) : as.own(effect)
        case "Inbox": {
          // the look before model step `taken`: a fork takes its message in before step `at`
          const looked = live !== undefined && taken >= live.at
            ? as.own(effect)
            : at === undefined
            ? Effect.succeed(as.of(key.result.to([]), []))
            : given(served(key, at))
          const message = live !== undefined && taken === live.at ? live.message : undefined
          return message === undefined ? looked : Effect.map(looked, (messages) =>
            as.of(
              key.result.to([...key.result.from(as.value(messages)), ...message]),
              as.witnessed(messages)
            ))
        }
        case "Model": {
          currentStep = key.step
          taken++
          if (isLive() || (live !== undefined && at === undefined)) return as.own(effect)
          return at === undefined ? diverge(key.step, "steps", undefined, name) : effect
        }
        default: {
          if (isLive() || (live !== undefined && at === undefined)) return as.own(effect)
          if (at === undefined) return diverge(currentStep, "steps", undefined, name)
          const edit = live?.toolResult
          if (key._tag === "Tool" && edit !== undefined && key.call.id === edit.callId) {
            return Effect.succeed(as.of(
              // checked before the fork started (Fork.checkRecord), scrubbed as a tool's result is
              key.result.to(ToolResult.keep(Prompt.makePart("tool-result", {
                id: key.call.id,
                name: key.call.name,
                result: edit.result,
                isFailure: edit.isFailure,
                providerExecuted: false
              }))),
              []
            ))
          }
          const entries = inStep.get(name) ?? []
          return Effect.zipRight(
            reportAgain(entries, journal.witness?.hookCompleted, as.withWitnessed),
            given(served(key, at), as.withWitnessed ? witnessedOf(entries) : [])
          )
        }
      }
    }
    // a fork's own steps go through the journal of its context
    const alone = <A>(key: RunJournal.StepKey<A>): GivenAs<A, A> => ({
      withWitnessed: false,
      of: (value) => value,
      value: (value) => value,
      witnessed: () => [],
      own: (effect) => outer.step(key, effect)
    })
    const withWitnessed = <A>(key: RunJournal.StepKey<A>): GivenAs<A, readonly [A, RunJournal.Witnessed]> => ({
      withWitnessed: true,
      of: (value, witnessed) => [value, witnessed],
      value: ([value]) => value,
      witnessed: ([, witnessed]) => witnessed,
      own: (effect) => {
        const witnessing = outer.stepWitnessed
        return witnessing === undefined
          ? Effect.map(outer.step(key, Effect.map(effect, ([value]) => value)), (value) => [value, []] as const)
          : witnessing(key, effect)
      }
    })
    const replaying = RunJournal.RunJournal.of({
      durable: live === undefined ? false : outer.durable,
      forksThread: live !== undefined,
      // a recorded decision is given again (decoded, as posted); a fork waits in its own journal for one the
      // record lacks
      await: (interrupt) =>
        decisions.has(interrupt.key) && !isLive()
          ? Effect.map(RunJournal.decodeDecision(interrupt, decisions.get(interrupt.key)), Option.some)
          : live === undefined
          ? Effect.succeedNone
          : outer.await(interrupt),
      step: (key, effect) => stepAs(key, alone(key), effect),
      // a recorder's step: a served step gives what was recorded inside it with it, a fork's own one what the
      // journal of its context gives
      stepWitnessed: (key, effect) => stepAs(key, withWitnessed(key), effect),
      witness: {
        // the decision given instead of the recorded one, as the thread stores it: one that differs diverges
        resumed: (given) =>
          Effect.suspend(() => {
            if (decision === undefined || resumed === undefined || record.header.version < 2) return Effect.void
            const actual = plainJson(given)
            return same(resumed.decision, actual)
              ? Effect.void
              : diverge(resumedAt(), "decision", resumed.decision, actual)
          }),
        input: (messages) => {
          if (live !== undefined) return Effect.void
          // compared as they are first, then (when they differ) scrubbed as recorded
          const difference = firstDifference(record.header.input, plain.messages(messages)) &&
            firstDifference(record.header.input, scrubbed.messages(messages))
          return difference === undefined
            ? Effect.void
            : diverge(0, "input", difference.recorded, difference.actual, difference.index)
        },
        model: (request, call) =>
          Effect.suspend((): Effect.Effect<RunJournal.ModelReply, unknown, any> => {
            const recorded = modelSteps.get(request.step)
            if (live !== undefined && (isLive() || recorded === undefined)) return call
            if (recorded === undefined) return diverge(request.step, "steps", undefined, `model/${request.step}`)
            if (live === undefined && recorded.sent !== undefined) {
              const asItIs = plain.request(request)
              const actual = same(recorded.sent, asItIs) ? asItIs : scrubbed.request(request)
              for (const field of ["systemPrompt", "toolChoice"] as const) {
                if (!same(recorded.sent[field], actual[field])) {
                  return diverge(request.step, field, recorded.sent[field], actual[field])
                }
              }
              for (const field of ["tools", "messages"] as const) {
                const difference = firstDifference(recorded.sent[field], actual[field])
                if (difference !== undefined) {
                  return diverge(request.step, field, difference.recorded, difference.actual, difference.index)
                }
              }
            }
            // the reply the model gave then, or (when a hook answered then) the call as stored
            const reply: any = recorded.reply ?? recorded.result
            const line = steps.get(recorded.name)!.line
            return Effect.all({
              message: decodeMessage(reply.message),
              usage: decodeUsage(reply.usage),
              finishReason: decodeFinish(reply.finishReason)
            }).pipe(
              Effect.catchTag("ParseError", (error) => unreadable(line, error)),
              Effect.map(({ finishReason, message, usage }): RunJournal.ModelReply => ({
                message,
                usage,
                finishReason,
                toolCalls: message.content.filter((part): part is Prompt.ToolCallPart =>
                  part.type === "tool-call" && !part.providerExecuted
                ),
                offeredTools: request.tools.map((tool) => tool.name)
              }))
            )
          })
      }
    })

    const journal = layers === undefined ? replaying : layers.over(replaying)
    const resumed = record.header.resumed
    // the step the resumed run goes on at: where a decision that differs from the recorded one diverges
    const resumedAt = () => modelSteps.size === 0 ? 0 : Math.min(...modelSteps.keys())
    const input = Effect.catchTag(
      Schema.decodeUnknown(Schema.Array(Prompt.Message))(record.header.input),
      "ParseError",
      (error) => unreadable(1, error)
    )
    return Effect.flatMap(
      Effect.exit(
        Effect.provideService(
          Effect.flatMap(input, (messages) => {
            const threadId = live?.threadId ?? record.header.threadId
            if (decision === undefined) {
              return resumed === undefined
                ? runs.start(Prompt.fromMessages(messages), threadId)
                : runs.resume(threadId, resumed.decision, record.header.version >= 2)
            }
            if (resumed === undefined) return diverge(0, "decision", undefined, plainJson(decision))
            // a record of version 1 kept the decision decoded, as JSON: compared so before the run
            if (record.header.version < 2 && !same(resumed.decision, plainJson(decision))) {
              return diverge(resumedAt(), "decision", resumed.decision, plainJson(decision))
            }
            return runs.resume(threadId, decision, false)
          }),
          RunJournal.RunJournal,
          journal
        )
      ),
      (exit) => {
        if (diverged !== undefined) return Effect.fail(diverged)
        if (Exit.isFailure(exit) || live !== undefined) return exit
        for (const [name, at] of steps) {
          if (!at.taken && (at.step.kind === "Model" || at.step.kind === "Tool" || at.step.kind === "Nested")) {
            return diverge(stepOf.get(name)!, "steps", name, undefined)
          }
        }
        // the outcome: how the run ended, its model steps and its text (scrubbed as recorded); a run cancelled
        // while it waited ends the replay at its wait
        if (end !== undefined && !(end.outcome === "Cancelled" && exit.value._tag === "Interrupted")) {
          const result = exit.value
          const actual = {
            outcome: result._tag,
            steps: result.steps,
            ...(result._tag === "Completed" ? { text: Secrets.scrubText(result.text) } : {})
          }
          const recorded = {
            outcome: end.outcome,
            steps: end.steps,
            ...(end.text === undefined ? {} : { text: end.text })
          }
          if (!same(recorded, actual)) return diverge(Math.max(0, result.steps - 1), "result", recorded, actual)
        }
        return exit
      }
    )
  })
