/**
 * The state updates wrap hooks return with what they answer (LangChain's wrap
 * hooks return state updates with the response): a `wrapModelCall`'s
 * `ModelResponse.state`, a `wrapToolCall`'s `ToolCallResponse.state`. The
 * step that runs the chain collects them, innermost first, journals them with
 * the call, and applies them here once the call ends.
 */
import * as Effect from "effect/Effect"
import * as AgentEvent from "../AgentEvent.js"
import type * as RunJournal from "../RunJournal.js"
import type { Compiled } from "./config.js"
import * as Observer from "./observer.js"
import * as RunState from "./runState.js"

/** A state update a wrap hook returned with its answer. */
export type Update = NonNullable<RunJournal.ModelCall["updates"]>[number]

/**
 * Whether `middleware`'s wrap hooks can update state: it declares state keys
 * (an update of any other key is dropped, as a node hook's is). A chain with
 * no such hook collects nothing, and is built once per run.
 */
export const canUpdate = (config: Compiled, middleware: string): boolean =>
  (config.declaredKeys.get(middleware)?.size ?? 0) > 0

/**
 * `updates`, each applied to its middleware's slice (declared keys only), in
 * order, and reported as `StateUpdated` by `hook` when it changed a key.
 */
export const apply = (
  config: Compiled,
  observer: Observer.Observer,
  hook: "wrapModelCall" | "wrapToolCall",
  initial: RunState.RunState,
  updates: ReadonlyArray<Update>
): Effect.Effect<RunState.RunState> =>
  Effect.suspend(() => {
    let state = initial
    const reports: Array<Effect.Effect<void>> = []
    for (const { middleware, state: update } of updates) {
      const applied = RunState.applyHookResult(state, middleware, config.declaredKeys.get(middleware), {
        state: update
      })
      state = applied.state
      if (applied.keys.length > 0) {
        reports.push(Observer.report(observer, () =>
          AgentEvent.StateUpdated({ middleware, hook, keys: applied.keys, messagesReplaced: false })))
      }
    }
    return Effect.as(Effect.all(reports, { discard: true }), state)
  })
