/**
 * What joins a thread from outside a run's own work: the input of a run, and
 * the steer messages `send` left in the run's inbox, each through the
 * `transformInput` hooks, in list order.
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Effect from "effect/Effect"
import * as AgentEvent from "../AgentEvent.js"
import type * as AgentResult from "../AgentResult.js"
import * as AgentState from "../AgentState.js"
import * as RunJournal from "../RunJournal.js"
import type { Compiled } from "./config.js"
import * as Lineage from "./fast/lineage.js"
import { checked, hookEffect, inputProblem } from "./hookResults.js"
import * as Inbox from "./inbox.js"
import { Continue } from "./machine.js"
import * as Observer from "./observer.js"
import type { Save, Stepped, Then } from "./phase.js"
import { journaled, type RunContext } from "./runContext.js"
import * as RunState from "./runState.js"

/** The input of a run after every `transformInput` hook, in list order; nothing is stored yet. */
export const inputOf = (config: Compiled) =>
(
  run: RunContext,
  input: ReadonlyArray<Prompt.Message>
): Effect.Effect<ReadonlyArray<Prompt.Message>, unknown, any> =>
  config.inputHooks.length === 0 ? Effect.succeed(input) : Effect.provide(
    hooksOf(config, run.threadId, input, (name, effect) => Observer.inHook(run, name, "transformInput", effect)),
    config.context
  )

/** `input` through every `transformInput` hook, in list order, each hook's effect through `observe` (outside a run: as it is). */
export const hooksOf = (
  config: Compiled,
  threadId: string,
  input: ReadonlyArray<Prompt.Message>,
  observe: <A, E, R>(middleware: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> = (_, effect) =>
    effect
): Effect.Effect<ReadonlyArray<Prompt.Message>, unknown, any> =>
  Effect.reduce(
    config.inputHooks,
    input,
    (messages, m) =>
      observe(m.name, hookEffect(m.name, "transformInput", m.transformInput!({ messages, threadId }))).pipe(
        Effect.flatMap(checked<ReadonlyArray<Prompt.Message>>(m.name, "transformInput", inputProblem))
      )
  )

/**
 * The receive phase, as the run enters `beforeModel`: the steer messages
 * waiting in the run's inbox, through the `transformInput` hooks, appended to
 * the thread, so the hooks of `beforeModel` see them; never while a tool call
 * of the last reply waits for its result. The look is a journal step: a run
 * whose journal records its steps (durable, or nested in one as a
 * subagent's) always looks, so a replay, to which nobody sends, takes in what
 * the first execution took, at the same point; an in-process run nobody sends
 * to pays one length check. A look that took anything in saves the thread at
 * once: a model call that then fails, or a cancel checked before it, must not
 * lose a message its sender was told a run took.
 */
export const make = (config: Compiled, save: Save) => {
  const transform = inputOf(config)
  return (
    run: RunContext,
    state: RunState.RunState,
    phase: { readonly node: "receive" },
    then: Then
  ): Stepped | Effect.Effect<AgentResult.AgentResult<any>, unknown, any> => {
    const unchanged: Stepped = { state, outcome: Continue }
    if (!Inbox.hasSteered(run.inbox) && run.journal === RunJournal.inProcess) return unchanged
    if ((AgentState.pendingToolCalls(state.messages)?.calls.length ?? 0) > 0) return unchanged
    const received = Effect.gen(function*() {
      const sent = yield* journaled(
        run,
        run.keys.inbox(),
        Effect.sync(() => Inbox.takeSteered(run.inbox))
      )
      if (sent.length === 0) return unchanged
      const input = yield* transform(run, sent)
      yield* Observer.report(
        run,
        () => AgentEvent.MessageReceived({ mode: "steer", step: state.step, messages: input })
      )
      const received = RunState.withMessages(state, Lineage.append(state.messages, input))
      return { state: yield* save(run, received, undefined), outcome: Continue }
    })
    return Effect.flatMap(received, (stepped) => then(phase, stepped))
  }
}
