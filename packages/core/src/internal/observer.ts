/**
 * Who watches a run: its event sink (`EventSink`, a context reference: what
 * `Middleware.eventSink` gives, and where `Middleware.report` files a
 * decision), whether hooks get spans, and the one place that knows how the
 * running hook is tracked (`currentHook`, read by `Middleware.report`).
 *
 * The hook cell is the quarantined speed trick of this module: during an
 * observed run `CurrentHook` holds a mutable `HookCell` that `inHook` updates
 * in place, instead of an `Effect.locally` per hook call (which copies the
 * fiber's refs twice, ~5 µs a hook). A forked fiber gets a copy of the cell
 * (`forkHook`), and a joined fiber leaves its parent's cell alone, so work a
 * hook forks keeps reporting under that hook while an inner hook runs.
 */
import type * as Prompt from "@effect/ai/Prompt"
import type * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import { globalValue } from "effect/GlobalValue"
import * as AgentEvent from "../AgentEvent.js"
import type * as Middleware from "../Middleware.js"
import type * as RunJournal from "../RunJournal.js"
import type * as ToolEffect from "../ToolEffect.js"

/**
 * Where a run's events go: a synchronous hand-over to unbounded queues (the
 * run's own stream, the watchers), so reporting an event is no fiber
 * operation of its own.
 */
export type Emit = (event: AgentEvent.AgentEvent<any>) => void

/** What a run reports to, fixed when it starts. */
export interface Observer {
  /** Whether hooks and calls get their own spans. */
  readonly traced: boolean
  /** The event sink, when someone streams or watches the run. */
  readonly emit: Emit | undefined
  /** The clock hook timings are read from. */
  readonly clock: Clock.Clock
  /** Where the run's middleware decisions go besides its events: its journal's witness (a recorder), if any. */
  readonly decisions: ((decision: Middleware.Decision) => Effect.Effect<void>) | undefined
  /** Where the run's completed hooks go besides its events: its journal's witness (a recorder), if any. */
  readonly hooks: ((completed: RunJournal.HookCompleted) => Effect.Effect<void>) | undefined
}

/** The value of `currentHook` during an observed run, updated in place. */
export class HookCell {
  constructor(public middleware: string, public hook: string) {}
}

/** Where the running hook is: `Middleware.report` files decisions under it, `Middleware.reportingAs` sets it. */
// stays a FiberRef: the cell is updated in place, and only a FiberRef gives each forked fiber a copy of its own
export const currentHook: FiberRef.FiberRef<{ readonly middleware: string; readonly hook: string }> = globalValue(
  Symbol.for("@stepwise-agent/core/Middleware/CurrentHook"),
  () =>
    FiberRef.unsafeMake<{ readonly middleware: string; readonly hook: string }>({ middleware: "agent", hook: "run" }, {
      // a forked fiber gets a cell of its own, holding where it was forked
      fork: (value) => value instanceof HookCell ? new HookCell(value.middleware, value.hook) : value,
      // a parent keeps its own value when it joins a child: a hook's location is per fiber
      join: (parent) => parent
    })
)

/**
 * Where the running run's events go, while someone streams or watches it
 * (`undefined` otherwise): set by the agent loop for the whole run. Read by
 * `Middleware.eventSink`, and by `Middleware.report`, which files a decision
 * as a `MiddlewareDecision` event.
 */
export class EventSink extends Context.Reference<EventSink>()("@stepwise-agent/core/Middleware/EventSink", {
  defaultValue: (): Emit | undefined => undefined
}) {}

/**
 * Where the running run's middleware decisions go besides its events: the
 * `decision` of its journal's witness (a recorder), set by the agent loop for
 * the whole run (`undefined` when its journal has none).
 */
export class DecisionWitness extends Context.Reference<DecisionWitness>()(
  "@stepwise-agent/core/Middleware/DecisionWitness",
  { defaultValue: (): ((decision: Middleware.Decision) => Effect.Effect<void>) | undefined => undefined }
) {}

/**
 * Files `decision` as a `MiddlewareDecision` event of the run whose context
 * is `context`, at once, when someone watches it; returns what its witness
 * makes of it. For a fiber that is running (`Effect.withFiberRuntime`): one
 * fiber operation, where reading the two references as effects took ~15.
 */
export const decideIn = (context: Context.Context<never>, decision: Middleware.Decision): Effect.Effect<void> => {
  const emit = Context.get(context, EventSink)
  const witness = Context.get(context, DecisionWitness)
  if (emit !== undefined) {
    emit(AgentEvent.MiddlewareDecision({
      middleware: decision.middleware,
      hook: decision.hook,
      decision: decision.decision,
      data: decision.data
    }))
  }
  return witness === undefined ? Effect.void : witness(decision)
}

/** Files `decision` as a `MiddlewareDecision` event of the running run, when someone watches it, and with its witness. */
export const decided = (decision: Middleware.Decision): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => decideIn(fiber.currentContext, decision))

/** Reports a hook completed where it did not run again (a replay serving a recorded step), to whoever watches. */
export const hookReplayed = (completed: RunJournal.HookCompleted): Effect.Effect<void> =>
  Effect.map(EventSink, (emit) => {
    if (emit !== undefined) emit(AgentEvent.HookCompleted(completed))
  })

/**
 * Runs a hook's effect as hook `hook` of middleware `name`: decisions it
 * reports are filed under it, it gets a span when traced, and a
 * `HookCompleted` event with its duration when it succeeds.
 */
export const inHook = <A, E, R>(
  observer: Observer,
  name: string,
  hook: string,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  if (
    !observer.traced && observer.emit === undefined && observer.decisions === undefined && observer.hooks === undefined
  ) {
    return effect
  }
  const located = locatedIn(observer, name, hook, effect)
  return observer.traced
    ? Effect.withSpan(located, `Middleware.${hook}`, { attributes: { middleware: name }, captureStackTrace: false })
    : located
}

/**
 * {@link inHook} of hook `hook` of each middleware of `names` (outermost
 * first) around the same `effect`, as layers that each passed on what the
 * one inside gave (`fast/passedOn.ts`): the same as nesting `inHook`s, where
 * nothing runs between the layers, in one fiber operation of each kind
 * instead of one per layer. While `effect` runs, decisions are filed under
 * the innermost; when it succeeds the `HookCompleted` events come innermost
 * first. A traced run, or one whose journal witnesses its hooks, nests an
 * `inHook` per name.
 */
export const inHooks = <A, E, R>(
  observer: Observer,
  names: ReadonlyArray<string>,
  hook: string,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  // traced: a span per hook; with a witness: each hook witnessed before the next one's event, as nested
  if (observer.traced || observer.hooks !== undefined || names.length === 1) {
    let nested = effect
    for (let i = names.length - 1; i >= 0; i--) nested = inHook(observer, names[i]!, hook, nested)
    return nested
  }
  if (observer.emit === undefined && observer.decisions === undefined) return effect
  return locatedIn(observer, names, hook, effect)
}

/** `effect` run as hook `hook` of `names` (one name, or several: see {@link inHooks}), without spans. */
const locatedIn = <A, E, R>(
  observer: Observer,
  names: string | ReadonlyArray<string>,
  hook: string,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  const { clock, emit, hooks } = observer
  const innermost = typeof names === "string" ? names : names[names.length - 1]!
  return Effect.withFiberRuntime((fiber) => {
    const current = fiber.getFiberRef(currentHook)
    const started = clock.unsafeCurrentTimeNanos()
    const completed = (value: A): Effect.Effect<A> => {
      if (emit === undefined && hooks === undefined) return Effect.succeed(value)
      const durationMillis = Number(clock.unsafeCurrentTimeNanos() - started) / 1e6
      if (emit !== undefined) {
        if (typeof names === "string") emit(AgentEvent.HookCompleted({ middleware: names, hook, durationMillis }))
        else {
          for (let i = names.length - 1; i >= 0; i--) {
            emit(AgentEvent.HookCompleted({ middleware: names[i]!, hook, durationMillis }))
          }
        }
      }
      // (one name when the run has a witness: see `inHooks`)
      return hooks === undefined
        ? Effect.succeed(value)
        : Effect.as(hooks({ middleware: innermost, hook, durationMillis }), value)
    }
    // a fiber without a cell (a journal may run a step elsewhere) gets a value of its own
    if (!(current instanceof HookCell)) {
      return Effect.flatMap(Effect.locally(effect, currentHook, { middleware: innermost, hook }), completed)
    }
    const outer = { middleware: current.middleware, hook: current.hook }
    current.middleware = innermost
    current.hook = hook
    const restore = () => {
      current.middleware = outer.middleware
      current.hook = outer.hook
    }
    // Restored when the hook succeeds or fails (an outer hook may catch the failure and report), not as a
    // finalizer: a fiber being interrupted runs no more hooks, and a hook under a timeout or a race runs in
    // a fiber of its own, with a cell of its own. A finalizer would cost this fiber operations on every call.
    return Effect.matchCauseEffect(effect, {
      onFailure: (cause) => {
        restore()
        return Effect.failCause(cause)
      },
      onSuccess: (value) => {
        restore()
        return completed(value)
      }
    })
  })
}

/**
 * {@link inHook} for a hook effect its caller runs at once (a node's hooks):
 * an effect that already ended (`Effect.void`, `Effect.succeed(…)`) runs no
 * code of the hook's, so when the run is watched and not traced it is
 * reported completed now (`HookCompleted`, no time spent) and given back as
 * it is, without the fiber operations of {@link inHook}.
 */
export const inHookNow = <A, E, R>(
  observer: Observer,
  name: string,
  hook: string,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  const emit = observer.emit
  if (observer.traced || emit === undefined || !Exit.isExit(effect)) return inHook(observer, name, hook, effect)
  if (Exit.isSuccess(effect)) emit(AgentEvent.HookCompleted({ middleware: name, hook, durationMillis: 0 }))
  return effect
}

/**
 * Reports the event `event` builds, to whoever watches the run; an unwatched
 * run (the silent default) builds nothing and does nothing.
 */
export const report = (observer: Observer, event: () => AgentEvent.AgentEvent<any>): Effect.Effect<void> => {
  const emit = observer.emit
  return emit === undefined ? Effect.void : Effect.sync(() => emit(event()))
}

/**
 * A tool call as watched: `ToolCallStarted` before it, `ToolCallCompleted`
 * with its result and duration after it; `execute` itself when unwatched.
 */
export const toolCall = <E, R>(
  observer: Observer,
  call: Prompt.ToolCallPart,
  execute: Effect.Effect<Prompt.ToolResultPart, E, R>,
  ledger?: ToolEffect.LedgerEntry | undefined
): Effect.Effect<Prompt.ToolResultPart, E, R> => {
  const { clock, emit } = observer
  if (emit === undefined) return execute
  return Effect.suspend(() => {
    emit(AgentEvent.ToolCallStarted(ledger === undefined ? { call } : { call, ledger }))
    const started = clock.unsafeCurrentTimeMillis()
    return Effect.map(execute, (result) => {
      emit(AgentEvent.ToolCallCompleted({ result, durationMillis: clock.unsafeCurrentTimeMillis() - started }))
      return result
    })
  })
}

/**
 * A model call as watched: `started` reported before the call is built (its
 * wrap hooks run when it is); the call itself when unwatched.
 */
export const modelCall = <A, E, R>(
  observer: Observer,
  started: () => AgentEvent.AgentEvent<any>,
  call: () => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  const emit = observer.emit
  return emit === undefined ? call() : Effect.suspend(() => {
    emit(started())
    return call()
  })
}

/** `effect` in a span named `name` when the run is traced. */
export const traced = <A, E, R>(
  observer: Observer,
  name: string,
  attributes: Record<string, unknown>,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  observer.traced ? Effect.withSpan(effect, name, { attributes, captureStackTrace: false }) : effect

/**
 * Runs a whole run with a hook cell and, when it has a sink, its events and
 * decisions going to it; its decisions go to its own witness, never to that
 * of a run it runs inside (a subagent's run in a hook).
 */
export const observed = <A, E, R>(
  observer: Observer,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  const { decisions, emit } = observer
  // (a run without a witness provides none unless it runs inside one that has: a provide costs ~20 operations)
  const witnessed = decisions !== undefined
    ? Effect.provideService(effect, DecisionWitness, decisions)
    : Effect.flatMap(
      DecisionWitness,
      (outer) => outer === undefined ? effect : Effect.provideService(effect, DecisionWitness, undefined)
    )
  if (emit === undefined && !observer.traced && decisions === undefined) return witnessed
  const located = Effect.locally(witnessed, currentHook, new HookCell("agent", "run"))
  return emit === undefined ? located : Effect.provideService(located, EventSink, emit)
}

/**
 * `effect` carrying where the running hook is and where events and decisions
 * go, for a journal that may run it on another fiber (an engine's activity):
 * what a hook inside it reports is still filed under the run's hooks.
 */
export const carried = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<Effect.Effect<A, E, R>> =>
  Effect.withFiberRuntime((fiber) => {
    const located = Effect.provideService(
      Effect.locally(effect, currentHook, fiber.getFiberRef(currentHook)),
      DecisionWitness,
      Context.get(fiber.currentContext, DecisionWitness)
    )
    const emit = Context.get(fiber.currentContext, EventSink)
    return Effect.succeed(emit === undefined ? located : Effect.provideService(located, EventSink, emit))
  })
