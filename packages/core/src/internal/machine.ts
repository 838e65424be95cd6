/**
 * The run's phase machine as data: the phases, what a phase can end with, and
 * the `flow` table that says where each outcome leads. `next` is pure; the
 * driver (`driver.ts`) only runs the phase it is given.
 */
import type * as AgentResult from "../AgentResult.js"
import type * as Middleware from "../Middleware.js"

/** The nodes whose middleware hooks run in order. */
export type HookNode = "beforeAgent" | "beforeModel" | "afterModel" | "afterAgent"

/** What a hook asked to wait on, and where its run goes on once answered. */
export interface Wait {
  /** The node of the hook that waits. */
  readonly node: HookNode
  /** The index of that hook in the node: the resumed run starts there. */
  readonly index: number
  readonly middleware: string
  /** What the hook asks (the interrupt's value), as the hook gave it. */
  readonly request: unknown
  /** The same, encoded with the middleware's `wait.request` schema: what is stored. */
  readonly value: unknown
  /** The key the hook gave its wait, if any (see `interruptKey`). */
  readonly key: string | undefined
}

/**
 * Where a run is: taking in steer messages (before `beforeModel`), a hook
 * node (from its `index`-th hook on), a model or tool step, waiting on a
 * hook's question, or finishing.
 */
export type Phase =
  | { readonly node: "receive" }
  | { readonly node: HookNode; readonly index: number }
  | { readonly node: "model" }
  | { readonly node: "tools" }
  | { readonly node: "wait"; readonly wait: Wait }
  | { readonly node: "done" }

/** The phases a run goes through, by name. */
export type PhaseName = Phase["node"]

/**
 * How a phase ended: it ran through, a hook jumped, a hook asked to wait, the
 * wait was answered at once (the run goes on at the hook that waits), or the
 * run ended with its result.
 */
export type Outcome =
  | { readonly _tag: "Continue" }
  | { readonly _tag: "Jump"; readonly to: Middleware.Jump }
  | { readonly _tag: "Interrupt"; readonly wait: Wait }
  | { readonly _tag: "Resume" }
  | { readonly _tag: "End"; readonly result: AgentResult.AgentResult<any> }

/** The one `Continue` outcome. */
export const Continue: { readonly _tag: "Continue" } = { _tag: "Continue" }

/** The one `Resume` outcome. */
export const Resume: { readonly _tag: "Resume" } = { _tag: "Resume" }

/** What the routing depends on, read from the run when a phase ends. */
export interface Facts {
  /** The last assistant message has tool calls without results. */
  readonly callsTools: boolean
  /** The structured output was accepted. */
  readonly hasOutput: boolean
}

/** Where a route may lead: a phase that starts afresh. */
type Target = "receive" | HookNode | "model" | "tools" | "done"
type Route = Target | ((facts: Facts) => Target)

/**
 * Where each phase leads: on `continue`, and for hook nodes on each jump.
 * Every way into `beforeModel` passes `receive` first (steer messages join
 * the thread as `beforeModel` starts). A jump to "model" re-enters
 * `beforeModel` (except from `beforeModel` itself, which calls the model); a
 * jump to "end" runs `afterAgent` once. `wait` and `done` are not routed by
 * facts: a wait resumes at the hook that waits or ends the run, `done` ends it.
 */
export const flow:
  & {
    readonly [N in HookNode]: { readonly [O in "continue" | Middleware.Jump]: Route }
  }
  & {
    readonly receive: { readonly continue: Route }
    readonly model: { readonly continue: Route }
    readonly tools: { readonly continue: Route }
  } = {
    beforeAgent: { continue: "receive", model: "receive", tools: "tools", end: "afterAgent" },
    receive: { continue: "beforeModel" },
    beforeModel: { continue: "model", model: "model", tools: "tools", end: "afterAgent" },
    model: { continue: "afterModel" },
    afterModel: {
      continue: (facts) => facts.callsTools ? "tools" : "afterAgent",
      model: "receive",
      tools: "tools",
      end: "afterAgent"
    },
    tools: { continue: (facts) => facts.hasOutput ? "afterAgent" : "receive" },
    afterAgent: { continue: "done", model: "receive", tools: "tools", end: "done" }
  }

const phases: { readonly [T in Target]: Phase } = {
  receive: { node: "receive" },
  beforeAgent: { node: "beforeAgent", index: 0 },
  beforeModel: { node: "beforeModel", index: 0 },
  afterModel: { node: "afterModel", index: 0 },
  afterAgent: { node: "afterAgent", index: 0 },
  model: { node: "model" },
  tools: { node: "tools" },
  done: { node: "done" }
}

/**
 * The phase after `from` ended with `outcome`: a wait for an interrupt, the
 * hook that waits for a resume, else the route of `flow` (a jump a phase has
 * no route for continues). `End` has no next phase: the driver returns.
 */
export const next = (from: Phase, outcome: Exclude<Outcome, { readonly _tag: "End" }>, facts: Facts): Phase => {
  switch (outcome._tag) {
    case "Interrupt":
      return { node: "wait", wait: outcome.wait }
    case "Resume":
      return from.node === "wait" ? { node: from.wait.node, index: from.wait.index } : from
    default: {
      if (from.node === "wait" || from.node === "done") return from
      const routes: Partial<Record<"continue" | Middleware.Jump, Route>> = flow[from.node]
      const route = (outcome._tag === "Jump" ? routes[outcome.to] : undefined) ?? routes.continue!
      return phases[typeof route === "function" ? route(facts) : route]
    }
  }
}

/**
 * The key of a wait a hook gave no key of its own: its node, middleware and
 * the run's step (a checkpoint written before waits had keys has no step).
 */
export const interruptKey = (node: HookNode, middleware: string, step?: number): string =>
  step === undefined ? `${node}/${middleware}` : `${node}/${middleware}/${step}`
